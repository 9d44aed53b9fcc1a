"""Throw-away TLS material for tests, made with the openssl command line: a CA,
a server certificate for 127.0.0.1 (and localhost) and a client certificate,
all EC P-256 so that generating them takes a few milliseconds.

    with temp_certs() as c:
        FakeAPIServer(tls_cert=c.server_cert, tls_key=c.server_key, client_ca=c.ca_cert)

make_certs(folder) writes into an existing folder instead; make_ca() makes an
extra CA (for "wrong CA" tests).  Keys are unencrypted PEM (PKCS#8).
"""
import contextlib
import os
import secrets
import shutil
import subprocess
import tempfile
from collections import namedtuple

CertPaths = namedtuple("CertPaths", "folder ca_cert ca_key server_cert server_key "
                                    "client_cert client_key")

# Extensions like the ones kubeadm puts on a cluster's CA and certificates.
_CONFIG = """\
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,digitalSignature,keyCertSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
authorityKeyIdentifier = keyid
subjectAltName = {san}
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
"""


def openssl():
    return shutil.which("openssl") or "/usr/bin/openssl"


def _run(*args):
    p = subprocess.run([openssl()] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError("openssl %s failed (%d): %s" % (" ".join(args), p.returncode,
                                                           p.stderr.strip()))
    return p.stdout


def _config(folder, san):
    path = os.path.join(folder, "openssl.cnf")
    with open(path, "w") as f:
        f.write(_CONFIG.format(san=san))
    return path


def _key(path):
    _run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    os.chmod(path, 0o600)
    return path


def _subject(cn, org=None):
    return "/CN=%s" % cn + ("/O=%s" % org if org else "")


def make_ca(folder, name="ca", cn="troupe-test-ca", days=2):
    """A self-signed CA: (<folder>/<name>.crt, <folder>/<name>.key)."""
    cnf = _config(folder, "IP:127.0.0.1")
    cert, key = os.path.join(folder, name + ".crt"), os.path.join(folder, name + ".key")
    _key(key)
    _run("req", "-config", cnf, "-x509", "-new", "-key", key, "-subj", _subject(cn),
         "-days", str(days), "-extensions", "ca", "-sha256",
         "-set_serial", "0x" + secrets.token_hex(8), "-out", cert)
    return cert, key


def _signed(folder, name, cn, org, ca_cert, ca_key, extensions, san, days):
    cnf = _config(folder, san)
    cert, key = os.path.join(folder, name + ".crt"), os.path.join(folder, name + ".key")
    csr = os.path.join(folder, name + ".csr")
    _key(key)
    _run("req", "-config", cnf, "-new", "-key", key, "-subj", _subject(cn, org), "-out", csr)
    _run("x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key,
         "-set_serial", "0x" + secrets.token_hex(8), "-days", str(days), "-sha256",
         "-extfile", cnf, "-extensions", extensions, "-out", cert)
    os.unlink(csr)
    return cert, key


def make_server_cert(folder, ca_cert, ca_key, name="server", cn="127.0.0.1",
                     san="IP:127.0.0.1,DNS:localhost", days=2):
    return _signed(folder, name, cn, None, ca_cert, ca_key, "server", san, days)


def make_client_cert(folder, ca_cert, ca_key, name="client", cn="troupe", org=None, days=2):
    """CN is the user name and O the group, as kube-apiserver reads them."""
    return _signed(folder, name, cn, org, ca_cert, ca_key, "client", "IP:127.0.0.1", days)


def make_certs(folder, client_cn="troupe", client_org="troupe-schedulers"):
    """CA, server and client certificates in <folder>; returns CertPaths."""
    os.makedirs(folder, exist_ok=True)
    ca_cert, ca_key = make_ca(folder)
    server_cert, server_key = make_server_cert(folder, ca_cert, ca_key)
    client_cert, client_key = make_client_cert(folder, ca_cert, ca_key, cn=client_cn,
                                               org=client_org)
    os.unlink(os.path.join(folder, "openssl.cnf"))
    return CertPaths(folder, ca_cert, ca_key, server_cert, server_key, client_cert, client_key)


@contextlib.contextmanager
def temp_certs(**kw):
    """make_certs() in a temporary folder removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="troupe-tls-") as d:
        yield make_certs(d, **kw)


def subject_rfc4514(cert):
    """<cert>'s subject as RFC 4514 prints it (most significant RDN last, so
    "/CN=a/O=b" reads "O=b,CN=a"): the form troupe's tls.allowed_subjects
    compares a DN entry with."""
    out = _run("x509", "-in", cert, "-noout", "-subject", "-nameopt", "RFC2253").strip()
    return out.split("=", 1)[1].strip() if out.startswith("subject") else out


def der(cert):
    """The DER bytes of the PEM certificate in <cert> (what a TLS peer sends)."""
    import ssl
    with open(cert) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def replace_file(src, dst):
    """Put a copy of <src> at <dst> in one step (write aside, rename), as a
    secret volume update does: a reader sees the old file or the new one."""
    tmp = dst + ".tmp-" + secrets.token_hex(4)
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


if __name__ == "__main__":
    import sys
    out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="troupe-tls-")
    for k, v in make_certs(out)._asdict().items():
        print("%-12s %s" % (k, v))
