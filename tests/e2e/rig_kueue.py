"""Kueue's controller manager on the rig, beside kube-scheduler and troupe: the
binary scripts/lib/k8s.sh (ensure_kueue) builds from tests/tools/kueue/go.mod,
its CRDs and webhook configurations read from the module it was built from.

The rig has no Service network, so Kueue runs as a host process, as the rig's
control plane does: its webhook server on 127.0.0.1 with a certificate of the
rig's CA, and its webhook configurations pointed at it by URL instead of a
Service. Kueue's own certificate management and leader election are off; only
the batch/job and pod integrations are on (the frameworks the tests use).
"""
import base64
import glob
import os
import re
import urllib.request

from rig_procs import ClusterError, free_port
from rig_releases import ROOT


def _tool_dir():
    """build/kueue/<version>/: the binary, and the module's folder in 'dir'."""
    with open(os.path.join(ROOT, "tests", "tools", "kueue", "go.mod")) as f:
        m = re.search(r"^\s*sigs\.k8s\.io/kueue\s+(\S+)", f.read(), re.M)
    if not m:
        raise ClusterError("tests/tools/kueue/go.mod names no sigs.k8s.io/kueue version")
    return os.path.join(ROOT, "build", "kueue", m.group(1))


def kueue_paths():
    """(binary, module folder), or a ClusterError saying how to build them."""
    d = _tool_dir()
    exe = os.path.join(d, "kueue")
    try:
        with open(os.path.join(d, "dir")) as f:
            mod = f.read().strip()
    except OSError:
        mod = ""
    if not os.access(exe, os.X_OK) or not os.path.isdir(mod):
        raise ClusterError("Kueue is not built: ./scripts/cluster up (or ./scripts/test) builds "
                           "it into %s" % d)
    return exe, mod


CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:{health}
metrics:
  bindAddress: 127.0.0.1:{metrics}
webhook:
  host: 127.0.0.1
  port: {webhook}
  certDir: {certs}
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
integrations:
  frameworks:
  - batch/job
  - pod
"""


def webhooks_by_url(text, port, ca_b64):
    """Kueue's webhook manifests with each Service reference made a URL on
    127.0.0.1:<port>, trusting the rig's CA."""
    out, n = re.subn(
        r"(?m)^(\s+)service:\n\s+name: webhook-service\n\s+namespace: system\n\s+path: (\S+)\n",
        lambda m: "%surl: https://127.0.0.1:%d%s\n%scaBundle: %s\n" % (
            m.group(1), port, m.group(2), m.group(1), ca_b64), text)
    if n == 0 or "service:" in out:
        raise ClusterError("Kueue's webhook manifests are not in the expected form")
    return out


def start_kueue(c):
    """Install Kueue's CRDs and webhooks on cluster <c> and run its manager;
    return when it is healthy and its webhook server answers."""
    exe, mod = kueue_paths()
    crds = sorted(glob.glob(os.path.join(mod, "config", "components", "crd", "bases", "*.yaml")))
    if not crds:
        raise ClusterError("no Kueue CRDs under %s" % mod)
    for f in crds:
        c.kubectl("apply", "--server-side", "-f", f)
    for f in crds:
        with open(f) as text:
            name = re.search(r"^  name: (\S+)", text.read(), re.M).group(1)
        c.kubectl("wait", "--for=condition=Established", "crd/" + name, "--timeout=60s")
    c.kubectl("create", "namespace", "kueue-system", check=False)
    certs = os.path.join(c.dir, "kueue-certs")
    os.makedirs(certs, exist_ok=True)
    c.pki.leaf("kueue-webhook", "/CN=kueue-webhook", server=True, san="IP:127.0.0.1")
    for ext, name in ((".crt", "tls.crt"), (".key", "tls.key")):
        with open(c.pki.path("kueue-webhook" + ext), "rb") as src, \
                open(os.path.join(certs, name), "wb") as dst:
            dst.write(src.read())
    ports = {k: free_port() for k in ("health", "metrics", "webhook")}
    cfg = os.path.join(c.dir, "config", "kueue.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(certs=certs, **ports))
    # The metrics server takes the same certificate (scripts/lib/k8s.sh builds
    # Kueue to read its folder from KUEUE_METRICS_CERT_DIR).
    # Its visibility API server (an aggregated API, reached through a Service
    # the rig has not) is off.
    c._spawn("kueue", ["/usr/bin/env", "KUEUE_METRICS_CERT_DIR=" + certs, exe, "--config", cfg,
                       "--kubeconfig", c.kubeconfig, "--feature-gates=VisibilityOnDemand=false"])
    c._wait("Kueue healthy", lambda: urllib.request.urlopen(
        "http://127.0.0.1:%d/readyz" % ports["health"], timeout=5).status == 200,
        timeout=120, proc="kueue")
    with open(c.pki.path("ca.crt"), "rb") as f:
        ca = base64.b64encode(f.read()).decode()
    with open(os.path.join(mod, "config", "components", "webhook", "manifests.yaml")) as f:
        hooks = webhooks_by_url(f.read(), ports["webhook"], ca)
    c.apply(hooks)
    return ports
