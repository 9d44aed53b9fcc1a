"""What each component of the local rig is started with: the command lines of
etcd, kube-apiserver, kube-controller-manager, kubesim, troupe and
kube-scheduler (the release's feature gates and runtime config included), the
RBAC and CRDs applied before troupe starts, the scheduler configuration with
only urlPrefix and the kubeconfig path substituted, and what each start waits
for.

Components is a mixin of cluster.Cluster; it spawns through rig_procs.Processes
and talks to the API server through Cluster.request and kubectl.
"""
import json
import os
import time
import urllib.error
import urllib.request

from rig_releases import ROOT
from rig_procs import _run, free_port

class Components:
    """Starting each component (mixin of cluster.Cluster)."""

    def _healthy(self, port, path="/readyz"):
        status, _ = self.request("GET", path, base="https://127.0.0.1:%d" % port, timeout=5)
        return status == 200

    def _gates(self):
        g = self.state.get("feature_gates")
        return ["--feature-gates=" + g] if g else []

    def _start_etcd(self):
        p = self.state["ports"]
        client, peer = "http://127.0.0.1:%d" % p["etcd"], "http://127.0.0.1:%d" % p["etcd-peer"]
        self._spawn("etcd", [self.bin("etcd"), "--name", "rig", "--data-dir",
                             os.path.join(self.dir, "etcd"),
                             "--listen-client-urls", client, "--advertise-client-urls", client,
                             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                             "--initial-cluster", "rig=" + peer,
                             "--listen-metrics-urls", "http://127.0.0.1:%d" % free_port(),
                             # A test cluster: losing the last writes on a crash is fine.
                             "--unsafe-no-fsync", "--quota-backend-bytes", str(8 << 30),
                             "--log-level", "warn"])

        def etcd_ok():
            with urllib.request.urlopen(client + "/health", timeout=2) as r:
                return json.loads(r.read()).get("health") == "true"
        self._wait("etcd", etcd_ok, proc="etcd")

    def apiserver_cmd(self):
        p, k = self.state["ports"], self.pki.path
        cmd = [self.bin("kube-apiserver"),
               "--etcd-servers=http://127.0.0.1:%d" % p["etcd"],
               "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
               "--secure-port=%d" % p["apiserver"],
               "--tls-cert-file=" + k("apiserver.crt"), "--tls-private-key-file=" + k("apiserver.key"),
               "--client-ca-file=" + k("ca.crt"),
               "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
               "--service-account-key-file=" + k("sa.pub"),
               "--service-account-signing-key-file=" + k("sa.key"),
               "--service-cluster-ip-range=10.0.0.0/24",
               "--authorization-mode=Node,RBAC",
               # No Endpoints for the kubernetes Service: its address would be
               # loopback, which endpoint validation refuses.
               "--endpoint-reconciler-type=none",
               "--cert-dir=" + os.path.join(self.dir, "pki", "generated"),
               "--allow-privileged=true", "--profiling=false",
               "--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
               "--v=1"] + self._gates()
        if self.state.get("runtime_config"):
            cmd.append("--runtime-config=" + self.state["runtime_config"])
        return cmd

    def _start_apiserver(self):
        self._spawn("kube-apiserver", self.apiserver_cmd())
        self.pki.kubeconfig(self.kubeconfig, self.api_url, "rig-admin", cert="admin")
        self._wait("kube-apiserver /readyz", lambda: self._healthy(self.state["ports"]["apiserver"]),
                   timeout=120, proc="kube-apiserver")

    def restart_apiserver(self, down_seconds=0.0):
        """Stop kube-apiserver (SIGTERM), wait, start it again on the same port."""
        self.stop("kube-apiserver")
        time.sleep(down_seconds)
        self._start_apiserver()

    def _bootstrap(self):
        """RBAC and CRDs troupe reads, applied as the admin."""
        for name in ("scheduler", "controller-manager", "kubesim"):
            self.pki.kubeconfig(os.path.join(self.dir, "config", name + ".kubeconfig"),
                                self.api_url, name, cert=name)
        self._wait("default RBAC", lambda: self.kubectl(
            "get", "clusterrole", "system:kube-scheduler", check=False).returncode == 0, timeout=60)
        for f in sorted(os.listdir(os.path.join(ROOT, "config", "crds"))):
            if f.endswith(".yaml"):
                self.kubectl("apply", "-f", os.path.join(ROOT, "config", "crds", f))
        self.kubectl("apply", "-f", os.path.join(ROOT, "config", "deploy", "rbac.yaml"))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                     "crd/podgroups.scheduling.x-k8s.io")

    def _start_controller_manager(self):
        k, kc = self.pki.path, os.path.join(self.dir, "config", "controller-manager.kubeconfig")
        port = self.state["ports"]["controller-manager"]
        self._spawn("kube-controller-manager", [
            self.bin("kube-controller-manager"), "--kubeconfig=" + kc,
            "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
            "--bind-address=127.0.0.1", "--secure-port=%d" % port, "--leader-elect=false",
            # Every default controller but node-lifecycle: nothing renews the
            # simulated nodes' leases, and it would mark them NotReady.
            "--controllers=*,-node-lifecycle-controller",
            "--use-service-account-credentials=true",
            "--service-account-private-key-file=" + k("sa.key"), "--root-ca-file=" + k("ca.crt"),
            "--cluster-signing-cert-file=" + k("ca.crt"), "--cluster-signing-key-file=" + k("ca.key"),
            "--allocate-node-cidrs=false", "--configure-cloud-routes=false",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--v=1"] + self._gates())
        self._wait("kube-controller-manager /healthz", lambda: self._healthy(port, "/healthz"),
                   timeout=90, proc="kube-controller-manager")
        # Pods need the namespace's default service account, which the
        # service-account controller makes.
        self._wait("default service account", lambda: self.kubectl(
            "get", "serviceaccount", "default", check=False).returncode == 0, timeout=60)

    def create_nodes(self, count, first=0):
        if count <= 0:
            return
        out = _run([self.bin("kubesim"), "nodes", "--kubeconfig",
                    os.path.join(self.dir, "config", "kubesim.kubeconfig"), "--count", str(count),
                    "--first", str(first), "--topo-dir", os.path.join(ROOT, "tests", "data", "topo"),
                    "--kubelet-version", self.version])
        with open(os.path.join(self.logs, "kubesim.log"), "a") as f:
            f.write(out)

    def _start_kubesim(self):
        self._spawn("kubesim", [self.bin("kubesim"), "kubelet", "--kubeconfig",
                                os.path.join(self.dir, "config", "kubesim.kubeconfig")])
        self._wait("kubesim", lambda: "watching pods" in self.log("kubesim"), timeout=60,
                   proc="kubesim")

    def troupe_token(self):
        return self.kubectl("create", "token", "troupe", "-n", "kube-system",
                            "--duration=48h").stdout.strip()

    def start_troupe(self, wait_ready=True):
        self._retry_ports(("troupe", "troupe-ops"), lambda: self._start_troupe(wait_ready))
        if self.alive("kube-scheduler") and self.state.get("scheduler_troupe_port") != \
                self.state["ports"]["troupe"]:
            # troupe moved to another port: kube-scheduler must follow.
            self.stop("kube-scheduler")
            self.start_scheduler()

    def _start_troupe(self, wait_ready):
        """Start troupe with its service-account token; wait until /readyz says
        ready, or with wait_ready=False only until it answers at all."""
        kc = os.path.join(self.dir, "config", "troupe.kubeconfig")
        self.pki.kubeconfig(kc, self.api_url, "troupe", token=self.troupe_token())
        port = self.state["ports"]["troupe"]
        cmd = [self.bin("troupe"), "--kubeconfig", kc, "--listen", "127.0.0.1:%d" % port,
               "--ops-address", self.troupe_ops_url[len("http://"):]]
        if self.troupe_config:
            path = os.path.join(self.dir, "config", "troupe.yaml")
            with open(path, "w") as f:
                f.write(self.troupe_config)
            cmd += ["--config", path]
        self._spawn("troupe", cmd + self.troupe_args)
        if wait_ready:
            self.wait_troupe_ready()
        else:
            self._wait("troupe listening", lambda: self.troupe_status()[0] in (200, 503),
                       proc="troupe")

    def troupe_status(self):
        """(HTTP status, body) of troupe's /readyz; (0, error) if it does not answer."""
        try:
            with urllib.request.urlopen(self.troupe_url + "/readyz", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError as e:
            return 0, str(e)

    def wait_troupe_ready(self, timeout=60):
        self._wait("troupe /readyz", lambda: self.troupe_status()[0] == 200, timeout=timeout,
                   proc="troupe")

    def scheduler_config(self):
        """config/scheduler-config.yaml with only urlPrefix and the kubeconfig path
        substituted (and, without troupe, its extenders section left out), the
        managed_resources the test added, then any scheduler_config_extra it
        asked for."""
        with open(os.path.join(ROOT, "config", "scheduler-config.yaml")) as f:
            text = f.read()
        kc = os.path.join(self.dir, "config", "scheduler.kubeconfig")
        out = []
        for line in text.splitlines():
            s = line.strip()
            if s.startswith("kubeconfig:"):
                line = line[:line.index("kubeconfig:")] + "kubeconfig: " + kc
            elif s.lstrip("- ").startswith("urlPrefix:"):
                line = line[:line.index("urlPrefix:")] + 'urlPrefix: "%s"' % self.troupe_url
            elif s.startswith("percentageOfNodesToScore:") and self.state.get("percentage") is not None:
                line = "percentageOfNodesToScore: %d" % self.state["percentage"]
            elif line.startswith("extenders:") and not self.state.get("with_troupe", True):
                break
            out.append(line)
            if s == "managedResources:":
                indent = line[:line.index("managedResources:")]
                for name in getattr(self, "managed_resources", ()):
                    out += ["%s- name: %s" % (indent, name),
                            "%s  ignoredByScheduler: false" % indent]
            if line.startswith("clientConnection:") and self.scheduler_qps:
                out += ["  qps: %d" % self.scheduler_qps, "  burst: %d" % self.scheduler_qps]
        extra = getattr(self, "scheduler_config_extra", "")
        if extra:
            out += ["# added by the test that started this cluster (Cluster.scheduler_config_extra)"]
            out += extra.rstrip("\n").splitlines()
        return "\n".join(out) + "\n"

    def start_scheduler(self):
        self._retry_ports(("scheduler",), self._start_scheduler)

    def _start_scheduler(self):
        self.state["scheduler_troupe_port"] = self.state["ports"]["troupe"]
        path = os.path.join(self.dir, "config", "scheduler-config.yaml")
        with open(path, "w") as f:
            f.write(self.scheduler_config())
        kc = os.path.join(self.dir, "config", "scheduler.kubeconfig")
        port = self.state["ports"]["scheduler"]
        self._spawn("kube-scheduler", [
            self.bin("kube-scheduler"), "--config=" + path,
            "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
            "--bind-address=127.0.0.1", "--secure-port=%d" % port,
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--v=%d" % self.scheduler_verbosity] + self._gates())
        self._wait("kube-scheduler /readyz", lambda: self._healthy(port), timeout=90,
                   proc="kube-scheduler")

    def reconfigure(self, with_troupe=None, percentage="keep"):
        """Restart kube-scheduler (and start or stop troupe) with other settings,
        keeping the control plane and nodes: the benchmark's runs share them."""
        self.stop("kube-scheduler")
        if with_troupe is not None:
            self.state["with_troupe"] = with_troupe
        if percentage != "keep":
            self.state["percentage"] = percentage
        self._save_state()
        if self.state["with_troupe"] and not self.alive("troupe"):
            self.start_troupe()
        if not self.state["with_troupe"] and self.alive("troupe"):
            self.stop("troupe")
        self.start_scheduler()
