"""A real Prometheus server (Debian's package prometheus, /usr/bin/prometheus)
scrapes a live troupe's ops listener, and what it stored is read back through
its HTTP query API:

  - up{job="troupe"} is 1: the scrape succeeded, the exposition parsed;
  - troupe_requests_total and troupe_request_duration_seconds_count hold the
    number of filters sent;
  - histogram_quantile over troupe_request_duration_seconds_bucket gives the
    quantile troupe's own buckets give (computed here the way Prometheus does),
    and, over rate() of a second burst, a finite value within the buckets;
  - troupe_build_info and the process metrics arrived.

Prometheus runs with its own storage in a temporary directory, on 127.0.0.1 and
a free port, scraping every second. The ops listener is open here (no
ops.auth); docs/operations.md shows the bearer-token scrape config for
ops.auth: true.
"""
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

from schedclient import gpu_pod
from troupe_proc import Troupe

PROMETHEUS = os.environ.get("PROMETHEUS_BIN") or shutil.which("prometheus") or "/usr/bin/prometheus"
# How long Prometheus may take to start and to show a scrape: generous, as
# the machine running the tests may be busy; nothing is asserted on time.
WAIT_S = 90
FILTERS = 40


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """A Prometheus server scraping <target> (host:port) as job "troupe"."""

    def __init__(self, target):
        self.dir = tempfile.TemporaryDirectory(prefix="troupe-prom-")
        self.target = target
        self.proc = None
        self.port = None
        self.log_path = os.path.join(self.dir.name, "prometheus.log")

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def start(self):
        cfg = os.path.join(self.dir.name, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
- job_name: troupe
  static_configs:
  - targets: ["{self.target}"]
""")
        # The port is free when chosen; another process may take it before
        # Prometheus binds it, so a start that fails to listen is retried.
        for _ in range(5):
            self.port = free_port()
            log = open(self.log_path, "w")
            self.proc = subprocess.Popen(
                [PROMETHEUS, "--config.file=" + cfg,
                 "--storage.tsdb.path=" + os.path.join(self.dir.name, "data"),
                 "--web.listen-address=127.0.0.1:%d" % self.port],
                stdout=log, stderr=subprocess.STDOUT)
            log.close()
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % self.port,
                                                timeout=5) as r:
                        if r.status == 200:
                            return
                except OSError:
                    pass
                time.sleep(0.2)
            if self.proc.poll() is None:
                self.stop()
                raise AssertionError("Prometheus not ready in %ds:\n%s" % (WAIT_S, self.log()))
            if "address already in use" not in self.log():
                raise AssertionError("Prometheus exited with %d:\n%s" %
                                     (self.proc.returncode, self.log()))
        raise AssertionError("Prometheus found no free port:\n" + self.log())

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def cleanup(self):
        self.stop()
        self.dir.cleanup()

    def query(self, expr):
        """The instant vector <expr> evaluates to: [(labels, float value)]."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (
            self.port, urllib.parse.urlencode({"query": expr}))
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        assert doc["data"]["resultType"] == "vector", doc
        return [(s["metric"], float(s["value"][1])) for s in doc["data"]["result"]]

    def wait_value(self, expr, want, what):
        """Wait until <expr> has one sample equal to <want>."""
        deadline, got = time.monotonic() + WAIT_S, None
        while time.monotonic() < deadline:
            got = self.query(expr)
            if len(got) == 1 and got[0][1] == want:
                return got[0]
            time.sleep(0.2)
        raise AssertionError("%s: %s is %r, not %r after %ds\n%s" %
                             (what, expr, got, want, WAIT_S, self.log()[-3000:]))


def buckets_of(text, family, verb):
    """[(upper bound, cumulative count)] of one verb's histogram in troupe's
    exposition <text>."""
    out = []
    for line in text.splitlines():
        if line.startswith(family + "_bucket{") and 'verb="%s"' % verb in line:
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out.append((math.inf if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    return out


def quantile(q, buckets):
    """histogram_quantile as Prometheus computes it (promql/quantile.go):
    linear interpolation inside the bucket the rank falls in, 0 the lower
    bound of the first bucket, and the highest finite bound for the +Inf one."""
    total = buckets[-1][1]
    rank = q * total
    lower, below = 0.0, 0.0
    for i, (le, cum) in enumerate(buckets):
        if cum >= rank:
            if le == math.inf:
                return buckets[i - 1][0]
            if i == 0 and le <= 0:
                return le
            return lower + (le - lower) * (rank - below) / (cum - below)
        lower, below = le, cum
    raise AssertionError("rank beyond the +Inf bucket")


class PrometheusScrapeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(PROMETHEUS, os.X_OK):
            raise AssertionError("no Prometheus server at %s: install Debian's package "
                                 "prometheus (./scripts/test installs it, from "
                                 "scripts/lib/common.sh)" % PROMETHEUS)

    def setUp(self):
        self.t = Troupe()
        self.t.start()
        self.addCleanup(self.t.stop)

    def filters(self, n, prefix):
        for i in range(n):
            pod = gpu_pod("ml", "%s-%d" % (prefix, i), "uid-%s-%d" % (prefix, i), 1 + i % 4)
            status, _, ans = self.t.request("POST", "/filter", {
                "Pod": pod, "NodeNames": ["gpu-a100-0", "gpu-a100-1", "gpu-h100-0"]})
            self.assertEqual(status, 200, ans)

    def test_prometheus_scrapes_troupe(self):
        self.filters(FILTERS, "before")
        status, _, exposed = self.t.ops_request("GET", "/metrics")
        self.assertEqual(status, 200)
        prom = Prometheus("127.0.0.1:%d" % self.t.ops_port)
        self.addCleanup(prom.cleanup)
        prom.start()

        prom.wait_value('up{job="troupe"}', 1, "the scrape")
        prom.wait_value('troupe_requests_total{job="troupe",verb="filter"}', FILTERS,
                        "filters counted")
        prom.wait_value('troupe_request_duration_seconds_count{job="troupe",verb="filter"}',
                        FILTERS, "filters timed")
        prom.wait_value('troupe_build_info{job="troupe"}', 1, "build info")
        (labels, start), = prom.query('process_start_time_seconds{job="troupe"}')
        self.assertLess(abs(start - time.time()), 3600, "seconds since the epoch, about now")
        (_, fds), = prom.query('process_open_fds{job="troupe"}')
        self.assertGreater(fds, 3)

        # The quantiles Prometheus reads from troupe's buckets are the ones
        # those buckets give: the histogram is cumulative and in seconds.
        buckets = buckets_of(exposed, "troupe_request_duration_seconds", "filter")
        self.assertEqual(buckets[-1], (math.inf, FILTERS))
        for q in (0.5, 0.9, 0.99):
            (_, got), = prom.query('histogram_quantile(%g, troupe_request_duration_seconds_bucket'
                                   '{job="troupe",verb="filter"})' % q)
            want = quantile(q, buckets)
            self.assertTrue(math.isfinite(got), (q, got))
            self.assertAlmostEqual(got, want, delta=1e-9 + 1e-9 * want, msg=q)
            self.assertGreater(got, 0, q)
            self.assertLessEqual(got, 10, "within the buckets' bounds (10 s at most)")

        # Over rate(): a second burst, seen by a later scrape.
        self.filters(FILTERS, "after")
        prom.wait_value('troupe_request_duration_seconds_count{job="troupe",verb="filter"}',
                        2 * FILTERS, "the second burst")
        (_, p90), = prom.query('histogram_quantile(0.9, sum by (le) (rate('
                               'troupe_request_duration_seconds_bucket{job="troupe",'
                               'verb="filter"}[5m])))')
        self.assertTrue(math.isfinite(p90) and 0 < p90 <= 10, p90)
        (_, scraped), = prom.query('scrape_samples_scraped{job="troupe"}')
        samples = [l for l in self.t.ops_request("GET", "/metrics")[2].splitlines()
                   if l and not l.startswith("#")]
        self.assertEqual(scraped, len(samples), "every sample troupe exposes was taken")


if __name__ == "__main__":
    unittest.main(verbosity=2)
