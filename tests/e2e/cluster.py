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
"""
import argparse
import base64
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DEFAULT_RELEASE = "v1.37.2"
RELEASES = {"1.37": "v1.37.2", "1.36": "v1.36.3"}

# Start order; stop order is the reverse.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kubesim", "troupe",
              "kube-scheduler")

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


class ClusterError(RuntimeError):
    pass


class PortInUse(ClusterError):
    """A component could not listen: another program took its port first."""


def free_port():
    """A port free now, below the kernel's ephemeral range (32768 and up), so that
    the many outgoing connections of a busy rig cannot take it before the
    component that is given it listens there. A clash with another program is
    still possible; _spawn_listening retries with a new port."""
    rnd = random.Random()
    for _ in range(200):
        port = rnd.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise ClusterError("no free port in 20000-32000 on 127.0.0.1")


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


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


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


class Cluster:
    """One local control plane in <folder>. up() starts what is not running."""

    def __init__(self, folder=None, nodes=20, with_troupe=True, feature_gates="",
                 runtime_config="", release=None, troupe_config=None, percentage=None,
                 troupe_args=(), scheduler_verbosity=2, scheduler_qps=0):
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

    def pid(self, name):
        return self.state.get("pids", {}).get(name)

    def alive(self, name):
        pid = self.pid(name)
        if not pid:
            return False
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        # A zombie of ours is not alive.
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(")")[-1].split()[0] != "Z"
        except OSError:
            return False

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
            with urllib.request.urlopen(self.troupe_url + "/metrics", timeout=10) as r:
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

    # ---- starting ---------------------------------------------------------

    def _log(self, name):
        os.makedirs(self.logs, exist_ok=True)
        f = open(os.path.join(self.logs, name + ".log"), "a")
        f.write("\n==== %s started %s ====\n" % (name, time.strftime("%Y-%m-%dT%H:%M:%S")))
        f.flush()
        return f

    def _spawn(self, name, cmd):
        exe = cmd[0]
        if not os.access(exe, os.X_OK):
            raise ClusterError(f"{name}: {exe} is missing; run ./scripts/cluster up, which builds it")
        if self.pin and name in self.pin:
            cmd = [shutil.which("taskset") or "taskset", "-c", str(self.pin[name])] + list(cmd)
        log = self._log(name)
        log.write("$ %s\n" % " ".join(cmd))
        log.flush()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True, cwd=self.dir)
        log.close()
        self.state.setdefault("pids", {})[name] = p.pid
        self.state.setdefault("commands", {})[name] = cmd
        self._save_state()
        self._children[name] = p
        return p

    def _wait(self, what, cond, timeout=60, proc=None):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if proc and not self.alive(proc):
                last_run = self.log(proc).rpartition("==== %s started" % proc)[2]
                err = PortInUse if re.search(r"address (already )?in use", last_run) else ClusterError
                raise err(f"{proc} exited while waiting for {what}; see "
                          f"{os.path.join(self.logs, proc + '.log')}")
            try:
                if cond():
                    return
            except Exception as e:   # not up yet: connection refused, 503, ...
                last = e
            time.sleep(0.2)
        raise ClusterError(f"timed out after {timeout}s waiting for {what} ({last})")

    def _retry_ports(self, keys, start):
        """Run <start>; if its component lost a port race, give it new ports
        (state["ports"][k] for k in <keys>) and try again, three times at most."""
        for attempt in range(3):
            try:
                return start()
            except PortInUse:
                if attempt == 2:
                    raise
                for k in keys:
                    self.state["ports"][k] = free_port()
                self._save_state()

    def _healthy(self, port, path="/readyz"):
        status, _ = self.request("GET", path, base="https://127.0.0.1:%d" % port, timeout=5)
        return status == 200

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
                                                          "troupe")},
                      "pids": {}}
        self._save_state()
        self.pki.make()

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
        self._retry_ports(("troupe",), lambda: self._start_troupe(wait_ready))
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
        cmd = [self.bin("troupe"), "--kubeconfig", kc, "--listen", "127.0.0.1:%d" % port]
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
        substituted (and, without troupe, its extenders section left out)."""
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
            if line.startswith("clientConnection:") and self.scheduler_qps:
                out += ["  qps: %d" % self.scheduler_qps, "  burst: %d" % self.scheduler_qps]
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

    # ---- stopping ---------------------------------------------------------

    def signal(self, name, sig):
        pid = self.pid(name)
        if pid:
            try:
                os.killpg(pid, sig)
            except OSError:
                pass

    def stop(self, name, timeout=15):
        """SIGTERM, then SIGKILL after <timeout> seconds; the process is reaped."""
        if not self.pid(name):
            return
        self.signal(name, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.alive(name) and time.monotonic() < deadline:
            self._reap(name)
            time.sleep(0.05)
        self.kill(name)

    def kill(self, name):
        """SIGKILL, as a crash would: no chance to clean up. The process is reaped
        and forgotten."""
        if self.alive(name):
            self.signal(name, signal.SIGKILL)
        while self.alive(name):
            self._reap(name)
            time.sleep(0.01)
        self._reap(name)
        self.state.get("pids", {}).pop(name, None)
        self._save_state()

    def _reap(self, name):
        p = self._children.get(name)
        if p is not None:
            p.poll()

    def down(self):
        stopped = []
        for name in reversed(COMPONENTS):
            if self.alive(name):
                self.stop(name)
                stopped.append(name)
        if self.state.get("pids"):
            self.state["pids"] = {}
            self._save_state()
        return stopped

    def log(self, name):
        try:
            with open(os.path.join(self.logs, name + ".log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

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
