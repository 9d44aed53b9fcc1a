"""The daemon's HTTP surface and command line: endpoints, limits, bad input,
flags, configuration errors, shutdown. Bad input must get a clear answer and a
log line, never a crash, and must never change state."""
import http.client
import json
import os
import socket
import subprocess
import tempfile
import unittest

from troupe_proc import Troupe, binary, fixture_cluster

POD4 = {"metadata": {"name": "p", "namespace": "ml", "uid": "uid-p"},
        "spec": {"containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}
FILTER = {"Pod": POD4, "Nodes": None, "NodeNames": ["gpu-a100-1", "cpu-0"]}


def run(args, timeout=30):
    # Never let the test machine's own cluster variables pick a source.
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE_")}
    return subprocess.run([binary()] + args, capture_output=True, text=True, timeout=timeout,
                          env=env)


class EndpointTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.troupe = Troupe(config_text="http:\n  max_body_bytes: 65536\n  path_prefix: /sched\n")
        cls.troupe.start()

    @classmethod
    def tearDownClass(cls):
        cls.troupe.stop()

    def test_health_ready_version(self):
        self.assertEqual(self.troupe.request("GET", "/healthz")[::2], (200, {"status": "ok"}))
        self.assertEqual(self.troupe.request("GET", "/readyz")[::2], (200, {"status": "ready"}))
        s, h, body = self.troupe.request("GET", "/version")
        self.assertEqual((s, body["name"]), (200, "troupe"))
        self.assertEqual(h["Content-Type"], "application/json")

    def test_verbs_answer_at_plain_doubled_and_prefixed_paths(self):
        for path in ("/filter", "//filter", "/sched/filter", "/sched//filter", "/filter/"):
            s, _, body = self.troupe.request("POST", path, FILTER)
            self.assertEqual(s, 200, path)
            self.assertEqual(body["NodeNames"], ["gpu-a100-1"], path)
            self.assertEqual(body["FailedAndUnresolvableNodes"],
                             {"cpu-0": "troupe: node has no nvidia.com/gpu"}, path)

    def test_unknown_path_is_404_and_wrong_method_405(self):
        s, _, body = self.troupe.request("GET", "/nope")
        self.assertEqual(s, 404)
        self.assertIn("no such endpoint", body["Error"])
        s, h, body = self.troupe.request("GET", "/filter")
        self.assertEqual((s, h.get("Allow")), (405, "POST"))
        s, h, _ = self.troupe.request("POST", "/healthz", "{}")
        self.assertEqual((s, h.get("Allow")), (405, "GET, HEAD"))

    def test_oversized_body_is_413_and_changes_nothing(self):
        before = self.troupe.state()
        big = json.dumps(dict(FILTER, NodeNames=["n%06d" % i for i in range(20000)]))
        self.assertGreater(len(big), 65536)
        s, _, body = self.troupe.request("POST", "/filter", big)
        self.assertEqual(s, 413)
        self.assertIn("larger than 65536", body["Error"])
        self.assertEqual(self.troupe.state(), before)

    def test_oversized_chunked_body_is_413(self):
        conn = self.troupe.connect()
        conn.putrequest("POST", "/filter")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.putheader("Content-Type", "application/json")
        conn.endheaders()
        chunk = b"x" * 16384
        for _ in range(6):
            conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        conn.send(b"0\r\n\r\n")
        resp = conn.getresponse()
        self.assertEqual(resp.status, 413)
        resp.read()
        conn.close()
        self.assertIn("chunked body exceeded", self.troupe.log())

    def test_bad_json_is_400_with_error_and_changes_nothing(self):
        before = self.troupe.state()
        bodies = ["", "{", "[]", "null", '{"Pod": 3}', '{"Pod": {}, "NodeNames": "gpu-a100-1"}',
                  '{"Pod": {}, "NodeNames": [1]}', "[" * 60000, '{"Pod":' * 5000,
                  json.dumps(FILTER)[:-7], "\x00\x01\x02", '{"Pod": {"metadata": {"name": "\\ud800"}}']
        for b in bodies:
            s, _, body = self.troupe.request("POST", "/filter", b)
            self.assertEqual(s, 400, b[:40])
            self.assertTrue(body["Error"].startswith("troupe: bad filter request"), body)
            # bind ignores "Pod": a JSON object of the wrong shape is a 200 with
            # an Error (kube-scheduler shows it), anything else a 400.
            s, _, body = self.troupe.request("POST", "/bind", b)
            self.assertIn(s, (200, 400), b[:40])
            self.assertTrue(body["Error"].startswith("troupe: "), body)
        self.assertEqual(self.troupe.state(), before)
        self.assertIn("bad request", self.troupe.log())

    def test_keep_alive_serves_many_requests_on_one_connection(self):
        conn = self.troupe.connect()
        for _ in range(50):
            conn.request("POST", "/filter", json.dumps(FILTER))
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            self.assertEqual(json.loads(resp.read())["NodeNames"], ["gpu-a100-1"])
        conn.close()

    def test_client_that_disconnects_mid_body_does_not_hurt(self):
        for _ in range(5):
            s = socket.create_connection((self.troupe.host, self.troupe.port))
            s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{\"Pod\":")
            s.close()
        self.assertEqual(self.troupe.request("GET", "/healthz")[0], 200)

    def test_metrics_count_requests_and_errors(self):
        def value(text, name):
            for line in text.splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[-1])
            raise AssertionError(f"{name} missing from /metrics")

        s, h, before = self.troupe.ops_request("GET", "/metrics")
        self.assertEqual((s, h["Content-Type"]), (200, "text/plain; version=0.0.4"))
        self.troupe.request("POST", "/filter", FILTER)
        self.troupe.request("POST", "/filter", "{")
        s, _, after = self.troupe.ops_request("GET", "/metrics")
        self.assertEqual(value(after, 'troupe_requests_total{verb="filter"}') -
                         value(before, 'troupe_requests_total{verb="filter"}'), 2)
        self.assertEqual(value(after, 'troupe_request_errors_total{verb="filter"}') -
                         value(before, 'troupe_request_errors_total{verb="filter"}'), 1)
        self.assertEqual(value(after, "troupe_nodes"), 8)
        self.assertEqual(value(after, "troupe_ready"), 1, "a loaded snapshot is ready")
        self.assertGreater(value(after, "troupe_filter_seconds_total"), 0)
        # Every sample line is "name{labels} number" after its HELP and TYPE
        # (test_metrics.py checks the families and histograms in full).
        label = r'[a-z]+="[a-zA-Z0-9.+_-]+"'
        for line in after.splitlines():
            if not line.startswith("#"):
                self.assertRegex(line, r'^(troupe|process)_[a-z_]+(\{%s(,%s)*\})? [0-9.]+$' % (label, label))

    def test_preempt_passes_victims_through(self):
        s, _, body = self.troupe.request("POST", "/preempt", {
            "Pod": POD4, "NodeNameToVictims": None,
            "NodeNameToMetaVictims": {"gpu-a100-0": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 1}}})
        self.assertEqual(s, 200)
        self.assertEqual(body, {"NodeNameToMetaVictims": {
            "gpu-a100-0": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 1}}})


class CommandLineTest(unittest.TestCase):
    def test_help_explains_every_flag(self):
        r = run(["--help"])
        self.assertEqual(r.returncode, 0)
        for flag in ("--listen", "--cluster", "--kubeconfig", "--context", "--api-server",
                     "--token-file", "--config", "--log-level", "--help", "--version"):
            self.assertIn(flag, r.stdout)

    def test_h_is_help_and_usage_leads_with_a_live_cluster(self):
        short, long = run(["-h"]), run(["--help"])
        self.assertEqual(short.returncode, 0, short.stderr)
        self.assertEqual(short.stdout, long.stdout)
        first = long.stdout.splitlines()[0]
        self.assertTrue(first.startswith("Usage: troupe --kubeconfig"), first)
        self.assertLess(long.stdout.index("--kubeconfig FILE"), long.stdout.index("--cluster FILE"))

    def test_version(self):
        r = run(["--version"])
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^troupe \d+\.\d+\.\d+")

    def test_usage_errors_exit_2_with_a_message(self):
        cases = [
            (["--bogus"], "see --help"),
            ([], "--kubeconfig FILE, --api-server URL or --cluster FILE"),
            (["--cluster", fixture_cluster(), "--api-server", "http://127.0.0.1:1"],
             "exactly one of"),
            (["--cluster", fixture_cluster(), "--token-file", "/tmp/t"], "--token-file goes with"),
            (["--cluster", fixture_cluster(), "--context", "x"], "--context goes with"),
            (["--api-server", "ftp://x"], "must start with http"),
            (["--kubeconfig", "/nonexistent/kubeconfig"], "kubeconfig /nonexistent/kubeconfig"),
            (["--cluster", fixture_cluster(), "--listen", "nohost"], "HOST:PORT"),
            (["--cluster", fixture_cluster(), "--log-level", "loud"], "--log-level"),
            (["--cluster", fixture_cluster(), "extra"], "unexpected argument"),
        ]
        for args, text in cases:
            r = run(args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(text, r.stderr, args)

    def test_config_errors_name_the_key(self):
        cases = [("http:\n  thraeds: 4\n", '"http.thraeds"'),
                 ("listen: 5\n", "listen has the wrong type"),
                 ("scoring:\n  policy: nonsense\n", 'scoring.policy "nonsense"'),
                 ("resources:\n  gpu: [gpu]\n", "resources.gpu"),
                 ("a: [\n", "line ")]
        for text, expect in cases:
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
                f.write(text)
            try:
                r = run(["--cluster", fixture_cluster(), "--config", f.name])
            finally:
                os.unlink(f.name)
            self.assertEqual(r.returncode, 2, text)
            self.assertIn(expect, r.stderr, text)

    def test_unreadable_or_malformed_cluster_exits_1(self):
        r = run(["--cluster", "/nonexistent/cluster.json", "--listen", "127.0.0.1:0"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot read /nonexistent/cluster.json", r.stderr)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write('{"kind": "List", "items": [')
        try:
            r = run(["--cluster", f.name, "--listen", "127.0.0.1:0"])
        finally:
            os.unlink(f.name)
        self.assertEqual(r.returncode, 1)
        self.assertIn("malformed JSON", r.stderr)

    def test_port_in_use_is_a_clear_error(self):
        with Troupe() as first:
            r = run(["--cluster", fixture_cluster(), "--listen", f"127.0.0.1:{first.port}"])
            self.assertEqual(r.returncode, 1)
            self.assertIn("cannot listen on 127.0.0.1", r.stderr)

    def test_yaml_snapshot_gives_the_same_state_as_json(self):
        with Troupe(cluster=fixture_cluster("cluster.yaml")) as y, Troupe() as j:
            sy, sj = y.state(), j.state()
            self.assertEqual(sy["stats"], sj["stats"])
            key = lambda n: n["name"]
            self.assertEqual(sorted(sy["nodes"], key=key), sorted(sj["nodes"], key=key))

    def test_sigterm_stops_cleanly(self):
        t = Troupe()
        t.start()
        t.stop(check=True)
        self.assertIn("received SIGTERM; stopping", t.log())


class StrictBodyTest(unittest.TestCase):
    """Verb bodies are read as kube-scheduler (Go) wrote them, or refused with
    400 and the reason: invalid escapes, duplicate keys (the last one counts),
    numbers no integer field holds, more nodes than troupe takes."""

    @classmethod
    def setUpClass(cls):
        cls.troupe = Troupe()
        cls.troupe.start()

    @classmethod
    def tearDownClass(cls):
        cls.troupe.stop()

    def test_invalid_escape_is_400_and_names_no_node(self):
        before = self.troupe.state()
        body = json.dumps(FILTER).replace('"gpu-a100-1"', '"gpu-a100-1\\u00zz"')
        self.assertIn("\\u00zz", body)
        s, _, reply = self.troupe.request("POST", "/filter", body)
        self.assertEqual(s, 400, reply)
        self.assertIn("four hex digits", reply["Error"])
        self.assertIsNone(reply["NodeNames"])
        self.assertEqual(self.troupe.state(), before)
        self.assertIn("filter: bad request", self.troupe.log())

    def test_duplicate_node_names_take_the_last(self):
        body = json.dumps({"Pod": POD4, "Nodes": None})[:-1] + \
            ', "NodeNames": ["gpu-a100-1"], "NodeNames": ["cpu-0"]}'
        s, _, reply = self.troupe.request("POST", "/filter", body)
        self.assertEqual(s, 200, reply)
        self.assertEqual(reply["NodeNames"], [])
        self.assertEqual(list(reply["FailedAndUnresolvableNodes"]), ["cpu-0"])

    def test_too_many_node_names_is_400(self):
        names = ["n%06d" % i for i in range(100001)]
        s, _, reply = self.troupe.request("POST", "/filter", dict(FILTER, NodeNames=names))
        self.assertEqual(s, 400)
        self.assertIn("at most 100000", reply["Error"])
        s, _, reply = self.troupe.request("POST", "/filter", dict(FILTER, NodeNames=names[:-1]))
        self.assertEqual(s, 200)
        self.assertEqual(len(reply["FailedNodes"]), 100000)

    def test_preempt_refuses_pdb_count_past_int64(self):
        body = json.dumps({"Pod": POD4, "NodeNameToVictims": None, "NodeNameToMetaVictims": {
            "gpu-a100-0": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 0}}})
        body = body.replace('"NumPDBViolations": 0', '"NumPDBViolations": 9223372036854775808')
        s, _, reply = self.troupe.request("POST", "/preempt", body)
        self.assertEqual(s, 400, reply)
        self.assertIn("NumPDBViolations", reply["Error"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
