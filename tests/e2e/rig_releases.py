"""Which Kubernetes release the local rig (cluster.py) runs, and what differs
between the tested releases: the pinned patch versions, the group/version that
serves the upstream gang API and the feature gates that switch it on, and
where each release's binaries (built by scripts/lib/k8s.sh), kubesim and troupe
are found.

scripts/cluster and scripts/e2e ask cluster.release_version(); it lives here
with the other per-release facts so a new release is added in one place.
"""
import os

from rig_procs import ClusterError

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DEFAULT_RELEASE = "v1.37.2"
RELEASES = {"1.37": "v1.37.2", "1.36": "v1.36.3"}

# The group/version that serves the upstream gang API (Workload, PodGroup) in
# each tested release; the GenericWorkload feature gate switches it on, and the
# rig then adds it to --runtime-config.
WORKLOAD_API = {"v1.37": "scheduling.k8s.io/v1beta1", "v1.36": "scheduling.k8s.io/v1alpha2"}
GATE_APIS = {"GenericWorkload": WORKLOAD_API}
# The gates that turn on the upstream gang API and kube-scheduler's
# GangScheduling plugin: one gate in 1.37, two in 1.36 (where GenericWorkload
# alone serves the API but leaves the plugin off).
WORKLOAD_GATES = {"v1.37": "GenericWorkload=true",
                  "v1.36": "GenericWorkload=true,GangScheduling=true"}


def workload_api(version):
    return WORKLOAD_API[".".join(version.split(".")[:2])]


def workload_gates(version):
    return WORKLOAD_GATES[".".join(version.split(".")[:2])]


def release_version(name):
    """'1.36', 'v1.36.3' or '' -> the pinned patch release."""
    if not name:
        return DEFAULT_RELEASE
    if name.startswith("v"):
        return name
    if name in RELEASES:
        return RELEASES[name]
    raise ClusterError(f"unknown release {name!r}; tested: {', '.join(RELEASES)}")


def bin_dir(version):
    return os.path.join(ROOT, "build", "k8s", version)


def kubesim_bin():
    return os.path.join(bin_dir(DEFAULT_RELEASE), "kubesim")


def troupe_bin():
    return os.environ.get("TROUPE_BIN") or os.path.join(ROOT, "build", "src", "extender", "troupe")
