"""The local rig's certificates and kubeconfigs: a throw-away CA made with
openssl, the kube-apiserver serving certificate, a client certificate per
component, the service-account signing key pair, and kubeconfigs that embed
them (or a bearer token, for troupe).

Used by cluster.Cluster, which makes a new PKI in DIR/pki at every fresh up().
"""
import base64
import json
import os

from rig_procs import _run

class Pki:
    """Certificates for the control plane, made with openssl."""

    def __init__(self, folder):
        self.dir = folder

    def path(self, name):
        return os.path.join(self.dir, name)

    def make(self):
        os.makedirs(self.dir, exist_ok=True)
        ca = self.path("ca")
        _run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
              "-nodes", "-keyout", ca + ".key", "-out", ca + ".crt", "-days", "3650",
              "-subj", "/CN=troupe-rig-ca", "-addext", "basicConstraints=critical,CA:TRUE",
              "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"])
        self.leaf("apiserver", "/CN=kube-apiserver", server=True,
                  san="IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
                      "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.0.0.1")
        self.leaf("admin", "/O=system:masters/CN=rig-admin")
        self.leaf("scheduler", "/CN=system:kube-scheduler")
        self.leaf("controller-manager", "/CN=system:kube-controller-manager")
        self.leaf("kubesim", "/O=system:masters/CN=rig-kubesim")
        # Service-account token signing.
        _run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
              "-out", self.path("sa.key")])
        _run(["openssl", "pkey", "-in", self.path("sa.key"), "-pubout", "-out", self.path("sa.pub")])

    def leaf(self, name, subject, server=False, san=None):
        key, csr, crt = (self.path(name + e) for e in (".key", ".csr", ".crt"))
        ext = self.path(name + ".ext")
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
            f.write("extendedKeyUsage=%s\n" % ("serverAuth" if server else "clientAuth"))
            if san:
                f.write("subjectAltName=%s\n" % san)
        _run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
              "-nodes", "-keyout", key, "-out", csr, "-subj", subject])
        _run(["openssl", "x509", "-req", "-in", csr, "-CA", self.path("ca.crt"),
              "-CAkey", self.path("ca.key"), "-CAcreateserial", "-days", "3650",
              "-extfile", ext, "-out", crt])

    def kubeconfig(self, out, server, user, cert=None, token=None):
        with open(self.path("ca.crt"), "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        u = {}
        if cert:
            for field, ext in (("client-certificate-data", ".crt"), ("client-key-data", ".key")):
                with open(self.path(cert + ext), "rb") as f:
                    u[field] = base64.b64encode(f.read()).decode()
        if token:
            u["token"] = token
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "rig",
               "clusters": [{"name": "rig", "cluster": {"server": server,
                                                         "certificate-authority-data": ca}}],
               "users": [{"name": user, "user": u}],
               "contexts": [{"name": "rig", "context": {"cluster": "rig", "user": user}}]}
        with open(out, "w") as f:
            json.dump(cfg, f, indent=1)   # JSON is YAML: kubectl and troupe read it
        os.chmod(out, 0o600)
