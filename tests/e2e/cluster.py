#!/usr/bin/env python3
"""A real local Kubernetes control plane with simulated GPU nodes, on 127.0.0.1.

This is what `./scripts/cluster` runs, and what the end-to-end tests and the
end-to-end benchmark start. It runs the real upstream programs, built from their
own Go modules by scripts/lib/k8s.sh:

  etcd                     data in DIR/etcd
  kube-apiserver           TLS (certificates made with openssl at start),
                           service-account signing keys, RBAC
  kube-controller-manager  every default controller except node-lifecycle, so
                           simulated nodes stay Ready without node leases
  troupe                   its own service-account identity, with the RBAC of
                           config/deploy/rbac.yaml
  kube-scheduler           config/scheduler-config.yaml, only urlPrefix and the
                           kubeconfig path substituted
  kubesim                  creates the simulated GPU nodes and plays the
                           kubelet's part (tests/e2e/cmd/kubesim)

Everything listens on 127.0.0.1, on free ports. State (ports, pids) is kept in
DIR/state.json, logs in DIR/logs/. Standard library only.

This file is the entry point (`python3 tests/e2e/cluster.py up|down|status`)
and the import name (`from cluster import Cluster`); its parts are beside it:
rig_releases.py (per-release versions, gates, binaries), rig_procs.py
(processes, ports, logs), rig_pki.py (certificates, kubeconfigs) and
rig_components.py (each component's flags and start-up).
"""
import argparse
import json
import os
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

# Every name this module defined before it was split stays importable from it.
from rig_releases import (  # noqa: F401
    DEFAULT_RELEASE, GATE_APIS, HERE, RELEASES, ROOT, WORKLOAD_API, WORKLOAD_GATES, bin_dir,
    kubesim_bin, release_version, troupe_bin, workload_api, workload_gates)
from rig_procs import ClusterError, PortInUse, Processes, _run, free_port  # noqa: F401
from rig_pki import Pki
from rig_components import Components

# Start order; stop order is the reverse.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kubesim", "troupe",
              "kube-scheduler")


class Cluster(Processes, Components):
    """One local control plane in <folder>. up() starts what is not running."""

    def __init__(self, folder=None, nodes=20, with_troupe=True, feature_gates="",
                 runtime_config="", release=None, troupe_config=None, percentage=None,
                 troupe_args=(), scheduler_verbosity=2, scheduler_qps=0,
                 scheduler_config_extra="", managed_resources=()):
        self.dir = os.path.abspath(folder or os.path.join(ROOT, "build", "cluster"))
        self.nodes = nodes
        self.with_troupe = with_troupe
        self.feature_gates = feature_gates
        self.runtime_config = runtime_config
        self.version = release_version(release)
        self.troupe_config = troupe_config
        self.percentage = percentage
        self.troupe_args = list(troupe_args)
        self.scheduler_verbosity = scheduler_verbosity
        # kube-scheduler's API client limit (clientConnection.qps and burst);
        # 0 keeps the shipped configuration's default of 50. The benchmark sets
        # 5,000, as upstream's scheduler_perf does, or kube-scheduler alone is
        # capped near 50 binds a second while troupe binds through its own client.
        self.scheduler_qps = scheduler_qps
        # KubeSchedulerConfiguration text appended to the shipped one (top-level
        # keys it leaves out, such as leaderElection); "" appends nothing. A test
        # that needs kube-scheduler's timings set for it says so here, and the
        # shipped file stays what it is.
        self.scheduler_config_extra = scheduler_config_extra
        # Extended resources added to the extender's managedResources (the
        # MIG profiles a test's troupe.yaml manages); the shipped ones stay.
        self.managed_resources = list(managed_resources)
        # {component: core} to start components pinned with taskset, or None.
        self.pin = None
        self._children = {}     # component -> Popen of what this object started
        self.pki = Pki(os.path.join(self.dir, "pki"))
        self.logs = os.path.join(self.dir, "logs")
        self.state_path = os.path.join(self.dir, "state.json")
        self.state = self._load_state()

    # ---- state ------------------------------------------------------------

    def _load_state(self):
        try:
            with open(self.state_path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def _save_state(self):
        os.makedirs(self.dir, exist_ok=True)
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f, indent=1)
        os.replace(tmp, self.state_path)

    @property
    def workload_api(self):
        """The group/version of the upstream PodGroup in this cluster's release."""
        return workload_api(self.state.get("version", self.version))

    @property
    def kubeconfig(self):
        return os.path.join(self.dir, "kubeconfig")

    def bin(self, name):
        if name == "kubesim":
            return kubesim_bin()
        if name == "troupe":
            return troupe_bin()
        return os.path.join(bin_dir(self.version), name)

    def running(self):
        return [c for c in COMPONENTS if self.alive(c)]

    # ---- API access -------------------------------------------------------

    @property
    def api_url(self):
        return "https://127.0.0.1:%d" % self.state["ports"]["apiserver"]

    def _ssl(self):
        ctx = ssl.create_default_context(cafile=self.pki.path("ca.crt"))
        ctx.load_cert_chain(self.pki.path("admin.crt"), self.pki.path("admin.key"))
        return ctx

    def request(self, method, path, body=None, content_type="application/json", timeout=30,
                base=None, ok_status=(200, 201, 202)):
        """One HTTPS call as the admin. Returns (status, parsed JSON or text)."""
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            data = data.encode() if isinstance(data, str) else data
        req = urllib.request.Request((base or self.api_url) + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        ctx = self._ssl()
        if base:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        text = raw.decode(errors="replace")
        try:
            out = json.loads(text)
        except ValueError:
            out = text
        return status, out

    def get(self, path):
        status, out = self.request("GET", path)
        if status != 200:
            raise ClusterError(f"GET {path}: {status} {out}")
        return out

    def kubectl(self, *args, check=True, input=None, timeout=120):
        cmd = [self.bin("kubectl"), "--kubeconfig", self.kubeconfig] + list(args)
        r = subprocess.run(cmd, capture_output=True, text=True, input=input, timeout=timeout)
        if check and r.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
        return r

    def apply(self, text):
        return self.kubectl("apply", "-f", "-", input=text)

    def metrics(self, component):
        """The component's /metrics text."""
        if component == "troupe":
            with urllib.request.urlopen(self.troupe_ops_url + "/metrics", timeout=10) as r:
                return r.read().decode()
        port = self.state["ports"][{"kube-scheduler": "scheduler",
                                    "kube-controller-manager": "controller-manager"}[component]]
        status, out = self.request("GET", "/metrics", base="https://127.0.0.1:%d" % port)
        if status != 200:
            raise ClusterError(f"{component} /metrics: {status} {out}")
        return out

    @property
    def troupe_url(self):
        return "http://127.0.0.1:%d" % self.state["ports"]["troupe"]

    @property
    def troupe_ops_url(self):
        """troupe's ops listener: /debug/*, /metrics (and /healthz, /readyz)."""
        return "http://127.0.0.1:%d" % self.state["ports"].setdefault("troupe-ops", free_port())

    # ---- starting ---------------------------------------------------------

    def up(self):
        if self.running():
            missing = [c for c in self._wanted() if not self.alive(c)]
            if not missing:
                return False        # already up: nothing to do
            raise ClusterError("a partly running cluster is in %s (%s not running); run "
                               "'./scripts/cluster down --dir %s' first"
                               % (self.dir, ", ".join(missing), self.dir))
        self._fresh()
        try:
            self._retry_ports(("etcd", "etcd-peer"), self._start_etcd)
            self._retry_ports(("apiserver",), self._start_apiserver)
            self._bootstrap()
            self._retry_ports(("controller-manager",), self._start_controller_manager)
            self.create_nodes(self.nodes)
            self._start_kubesim()
            if self.with_troupe:
                self.start_troupe()
            self.start_scheduler()
        except BaseException:
            self.down()
            raise
        return True

    def _wanted(self):
        return [c for c in COMPONENTS if c != "troupe" or self.with_troupe]

    def _fresh(self):
        """A new cluster: keep earlier logs, start from empty etcd and new keys."""
        os.makedirs(self.dir, exist_ok=True)
        for sub in ("etcd", "pki", "config"):
            shutil.rmtree(os.path.join(self.dir, sub), ignore_errors=True)
        os.makedirs(os.path.join(self.dir, "config"))
        gates = self.feature_gates
        runtime = [r for r in self.runtime_config.split(",") if r]
        for g in gates.split(","):
            name, _, val = g.partition("=")
            api = workload_api(self.version) + "=true"
            if name in GATE_APIS and val.lower() == "true" and api not in runtime:
                runtime.append(api)
        self.state = {"version": self.version, "nodes": self.nodes, "with_troupe": self.with_troupe,
                      "feature_gates": gates, "runtime_config": ",".join(runtime),
                      "percentage": self.percentage,
                      "ports": {k: free_port() for k in ("etcd", "etcd-peer", "apiserver",
                                                          "controller-manager", "scheduler",
                                                          "troupe", "troupe-ops")},
                      "pids": {}}
        self._save_state()
        self.pki.make()

    # ---- stopping ---------------------------------------------------------

    def down(self):
        stopped = []
        # What a test started beside the control plane (Kueue: rig_kueue.py)
        # goes first.
        for name in [n for n in self.state.get("pids", {}) if n not in COMPONENTS]:
            if self.alive(name):
                self.stop(name)
                stopped.append(name)
        for name in reversed(COMPONENTS):
            if self.alive(name):
                self.stop(name)
                stopped.append(name)
        if self.state.get("pids"):
            self.state["pids"] = {}
            self._save_state()
        return stopped

    def describe(self):
        p = self.state["ports"]
        lines = ["cluster %s (Kubernetes %s) in %s" % ("up" if self.running() else "down",
                                                     self.state["version"], self.dir)]
        for c in COMPONENTS:
            where = {"etcd": "http://127.0.0.1:%d" % p["etcd"],
                     "kube-apiserver": self.api_url,
                     "kube-controller-manager": "https://127.0.0.1:%d" % p["controller-manager"],
                     "kube-scheduler": "https://127.0.0.1:%d" % p["scheduler"],
                     "troupe": self.troupe_url, "kubesim": "(simulated kubelet)"}[c]
            pid = self.pid(c)
            lines.append("  %-24s %-8s %s" % (c, ("pid %d" % pid) if pid and self.alive(c) else "-",
                                            where))
        d = "" if self.dir == os.path.join(ROOT, "build", "cluster") else " --dir " + self.dir
        lines += ["  %d simulated GPU nodes (tests/e2e/cmd/kubesim/nodes.go has the layout)"
                  % self.state["nodes"],
                  "kubeconfig: %s" % self.kubeconfig,
                  "logs:       %s" % self.logs,
                  "try:        ./scripts/cluster kubectl%s get nodes -L rig.troupe.io/kind" % d,
                  "            ./scripts/cluster kubectl%s apply -f config/examples/gpu-pod.yaml" % d,
                  "stop:       ./scripts/cluster down%s" % d]
        return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="scripts/cluster",
        description="A real local Kubernetes control plane (etcd, kube-apiserver, "
                    "kube-controller-manager, kube-scheduler) with troupe registered as "
                    "its extender and simulated GPU nodes, all on 127.0.0.1.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up", help="build what is missing and start the cluster")
    u.add_argument("--nodes", type=int, default=20, help="simulated GPU nodes (default 20)")
    u.add_argument("--dir", help="folder for data, keys, kubeconfig and logs (default build/cluster)")
    u.add_argument("--without-troupe", action="store_true",
                   help="kube-scheduler alone: no troupe, no extenders section")
    u.add_argument("--feature-gates", default="",
                   help="passed to kube-apiserver, kube-controller-manager and kube-scheduler; "
                        "a gate whose API is off by default also switches it on")
    u.add_argument("--runtime-config", default="", help="extra kube-apiserver --runtime-config")
    u.add_argument("--release", default="",
                   help="Kubernetes release: %s (default %s)" % (", ".join(RELEASES), DEFAULT_RELEASE))
    u.add_argument("--percentage", type=int, default=None,
                   help="override percentageOfNodesToScore (0 = adaptive)")
    d = sub.add_parser("down", help="stop everything the cluster started; logs stay")
    d.add_argument("--dir")
    s = sub.add_parser("status", help="what is running")
    s.add_argument("--dir")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "up":
            c = Cluster(a.dir, nodes=a.nodes, with_troupe=not a.without_troupe,
                        feature_gates=a.feature_gates, runtime_config=a.runtime_config,
                        release=a.release, percentage=a.percentage)
            started = c.up()
            if not started:
                print("already up (run ./scripts/cluster down first to change settings)")
            print(c.describe())
        elif a.cmd == "down":
            c = Cluster(a.dir)
            stopped = c.down()
            print("stopped %s; logs kept in %s" % (", ".join(stopped), c.logs) if stopped
                  else "nothing running in %s" % c.dir)
        elif a.cmd == "status":
            c = Cluster(a.dir)
            if not c.state:
                print("no cluster in %s" % c.dir)
                return 1
            print(c.describe())
            return 0 if c.running() else 1
    except ClusterError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
