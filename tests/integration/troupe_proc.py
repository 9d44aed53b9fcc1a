"""Start and stop the real troupe binary for integration tests.

The daemon is started on port 0 (any free port) for the verbs and for the ops
listener (/debug/*, /metrics, ...); the ports are read from its "listening on
http://HOST:PORT" and "ops listening on http://HOST:PORT" log lines. Its
stderr is kept in a file so a failing test can show what troupe logged.
"""
import http.client
import json
import os
import re
import signal
import subprocess
import tempfile
import time

LISTEN_RE = re.compile(r"(?<!ops )listening on http://(?:\[([^\]]+)\]|([^:/\s]+)):(\d+)")
OPS_RE = re.compile(r"ops listening on http://(?:\[([^\]]+)\]|([^:/\s]+)):(\d+)")


def binary():
    path = os.environ.get("TROUPE_BIN")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError("set TROUPE_BIN to the troupe binary (meson test does)")
    return path


def source_root():
    return os.environ.get("TROUPE_SOURCE_ROOT",
                          os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))


def fixture_cluster(name="cluster.json"):
    """The tests' own cluster snapshot in tests/data/ (a copy of the demo's
    config/examples/cluster-small.*, so that the demo may change freely)."""
    return os.path.join(source_root(), "tests", "data", name)


class Troupe:
    """A running troupe. Use as a context manager; stop() checks a clean exit."""

    def __init__(self, cluster=None, args=(), config_text=None, ready_timeout=20.0,
                 source=None, env=None):
        """<source>: the cluster-source flags (e.g. ["--api-server", url]); without
        it troupe loads the snapshot <cluster> (the fixture cluster by default).
        source=[] passes no source flag at all (in-cluster mode, from <env>)."""
        self.source = (list(source) if source is not None
                       else ["--cluster", cluster or fixture_cluster()])
        self.env = env
        self.args = list(args)
        self.config_text = config_text
        self.ready_timeout = ready_timeout
        self.proc = None
        self.port = None
        self.host = None
        self.ops_port = None        # the ops listener: /debug/*, /metrics, /readyz ...
        self._tmp = tempfile.TemporaryDirectory(prefix="troupe-it-")
        self._final_log = None
        self.log_path = os.path.join(self._tmp.name, "troupe.log")

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop(check=exc[0] is None)

    def start(self):
        if self._final_log is not None:     # started again after a stop
            self._tmp = tempfile.TemporaryDirectory(prefix="troupe-it-")
            self.log_path = os.path.join(self._tmp.name, "troupe.log")
            self._final_log = None
        cmd = ([binary()] + self.source + ["--listen", "127.0.0.1:0",
                                           "--ops-address", "127.0.0.1:0"] + self.args)
        if self.config_text is not None:
            cfg = os.path.join(self._tmp.name, "troupe.yaml")
            with open(cfg, "w") as f:
                f.write(self.config_text)
            cmd += ["--config", cfg]
        self._log = open(self.log_path, "w")
        env = dict(os.environ)
        env.update(self.env or {})
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self._log, env=env)
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            log = self.log()
            m, o = LISTEN_RE.search(log), OPS_RE.search(log)
            if m and o:
                self.host = m.group(1) or m.group(2)
                self.port = int(m.group(3))
                self.ops_port = int(o.group(3))
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"troupe exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.02)
        raise RuntimeError(f"troupe did not start within {self.ready_timeout}s:\n{self.log()}")

    def log(self):
        if self._final_log is not None:
            return self._final_log
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self, check=True):
        if not self.proc:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"troupe did not stop on SIGTERM:\n{self.log()}")
        self._log.close()
        code = self.proc.returncode
        self.proc = None
        # Keep what troupe logged, then remove the files.
        self._final_log = self.log()
        self._tmp.cleanup()
        if check and code != 0:
            raise AssertionError(f"troupe exited with {code} (sanitizer report?):\n{self.log()}")

    def connect(self, timeout=30, port=None):
        return http.client.HTTPConnection(self.host, port or self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, port=None):
        """One request on a fresh connection (to the verbs' port unless <port>):
        (status, headers, parsed JSON or text)."""
        conn = self.connect(port=port)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            hdrs = {"Content-Type": "application/json"}
            hdrs.update(headers or {})
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            try:
                parsed = json.loads(data) if data else None
            except ValueError:
                parsed = data.decode(errors="replace")
            return resp.status, dict(resp.getheaders()), parsed
        finally:
            conn.close()

    def ops_request(self, method, path, body=None, headers=None):
        """request() on the ops listener (/debug/*, /metrics, /healthz, ...)."""
        return self.request(method, path, body, headers, port=self.ops_port)

    def cache(self):
        status, _, body = self.ops_request("GET", "/debug/cache")
        assert status == 200, (status, body)
        return body

    def wait_seen(self, *pods, timeout=20.0):
        """Wait until troupe's watch shows <pods> (objects with metadata.uid):
        kube-scheduler binds only pods its own watch has shown it, and troupe
        refuses to bind a pod its watch has not."""
        uids = {p["metadata"]["uid"] for p in pods}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if uids <= {p["uid"] for p in self.cache()["pods"] if p["fromAPI"]}:
                return
            time.sleep(0.02)
        raise AssertionError(f"troupe's watch did not show {sorted(uids)} in {timeout}s")

    def metrics(self):
        """/metrics as {"name" or "name{labels}": value}, every sample line."""
        status, _, body = self.ops_request("GET", "/metrics")
        assert status == 200, (status, body)
        out = {}
        for line in body.splitlines():
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$", line)
            if m:
                out[m.group(1)] = float(m.group(2))
        return out

    def metric(self, name):
        """One sample of /metrics, by its name with any labels as printed
        ('troupe_http_responses_total{code="404"}'); missing is an error."""
        samples = self.metrics()
        assert name in samples, f"{name} missing from /metrics"
        return samples[name]

    def state(self):
        status, _, body = self.ops_request("GET", "/debug/state")
        assert status == 200, (status, body)
        return body
