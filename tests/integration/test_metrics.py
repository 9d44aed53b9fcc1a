"""/metrics in Prometheus' text format, and the JSON log format, on the real
daemon (a snapshot cluster).

  - every sample belongs to a family declared with # HELP and # TYPE before it,
    names follow Prometheus' conventions (counters end in _total, a
    histogram's buckets, _sum and _count), and no family is declared twice;
  - troupe_request_duration_seconds: per verb, the buckets are cumulative, end
    in +Inf, and +Inf equals _count equals troupe_requests_total for that verb;
    they move with the requests sent;
  - troupe_http_responses_total counts answers by status code on both
    listeners, a 404 and a 405 included;
  - troupe_build_info names the running version;
  - --log-format json: every line troupe writes is one JSON document with time,
    level, component and msg; a client's bytes in a message do not break it.
"""
import json
import re
import unittest

from schedclient import gpu_pod
from troupe_proc import Troupe

NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def parse(text):
    """{family: (type, [(name, labels, value)])}, checking the exposition
    format as it goes."""
    families, current = {}, None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert NAME_RE.match(name), line
            assert name not in families, "family %s declared twice" % name
            families[name] = [None, []]
            current = name
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert name == current, "TYPE %s after HELP %s" % (name, current)
            assert kind in ("counter", "gauge", "histogram"), line
            families[name][0] = kind
        elif line:
            m = SAMPLE_RE.match(line)
            assert m, "not a sample line: %r" % line
            name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
            base = current
            assert name == base or (families[base][0] == "histogram" and name in (
                base + "_bucket", base + "_sum", base + "_count")), \
                "sample %s outside its family %s" % (name, base)
            families[base][1].append((name, labels, value))
    for name, (kind, samples) in families.items():
        assert kind, "family %s has no TYPE" % name
        assert samples, "family %s has no sample" % name
        if kind == "counter":
            assert name.endswith("_total"), "counter %s does not end in _total" % name
    return families


def sample(families, family, labels=""):
    for name, l, v in families[family][1]:
        if name == family and l == labels:
            return v
    raise KeyError((family, labels))


def histogram(families, family, verb):
    """([(le, cumulative count)], sum, count) of one verb's histogram."""
    buckets, total, count = [], None, None
    for name, labels, v in families[family][1]:
        if ('verb="%s"' % verb) not in labels:
            continue
        if name.endswith("_bucket"):
            buckets.append((re.search(r'le="([^"]+)"', labels).group(1), v))
        elif name.endswith("_sum"):
            total = v
        elif name.endswith("_count"):
            count = v
    return buckets, total, count


class MetricsTest(unittest.TestCase):
    def setUp(self):
        self.t = Troupe(args=["--log-format", "json", "--log-level", "debug"])
        self.t.start()
        self.addCleanup(self.t.stop)

    def metrics(self):
        status, _, body = self.t.ops_request("GET", "/metrics")
        self.assertEqual(status, 200)
        return parse(body)

    def filter(self, name):
        pod = gpu_pod("ml", name, "uid-" + name, 1)
        status, _, ans = self.t.request("POST", "/filter", {"Pod": pod, "NodeNames": ["gpu-a100-0", "gpu-h100-0"]})
        self.assertEqual(status, 200, ans)

    def test_exposition_format_and_latency_histograms(self):
        before = self.metrics()
        _, _, n0 = histogram(before, "troupe_request_duration_seconds", "filter")
        for i in range(7):
            self.filter("m-%d" % i)
        after = self.metrics()
        buckets, total, count = histogram(after, "troupe_request_duration_seconds", "filter")
        self.assertEqual(buckets[-1][0], "+Inf")
        values = [v for _, v in buckets]
        self.assertEqual(values, sorted(values), "buckets are cumulative")
        self.assertEqual([float(le) for le, _ in buckets[:-1]],
                         sorted(float(le) for le, _ in buckets[:-1]))
        self.assertEqual(values[-1], count)
        self.assertEqual(count - n0, 7)
        self.assertEqual(count, sample(after, "troupe_requests_total", '{verb="filter"}'))
        self.assertGreater(total, 0)
        self.assertLess(total, 7 * 10, "seconds, not microseconds")
        for verb in ("prioritize", "bind", "preempt", "other"):
            b, _, c = histogram(after, "troupe_request_duration_seconds", verb)
            self.assertEqual(len(b), len(buckets), verb)
            self.assertEqual(b[-1][1], c, verb)
        self.assertEqual(sample(after, "troupe_build_info", '{version="%s"}' % self.version()), 1)

    def version(self):
        status, _, body = self.t.request("GET", "/version")
        self.assertEqual(status, 200)
        return body["version"]

    def test_responses_are_counted_by_status_code(self):
        def code(families, c):
            return sample(families, "troupe_http_responses_total", '{code="%s"}' % c)
        before = self.metrics()
        self.assertEqual(self.t.request("GET", "/no-such-endpoint")[0], 404)
        self.assertEqual(self.t.ops_request("GET", "/nothing-here")[0], 404)
        self.assertEqual(self.t.request("GET", "/filter")[0], 405)
        self.filter("ok")
        after = self.metrics()
        self.assertEqual(code(after, 404) - code(before, 404), 2)
        self.assertEqual(code(after, 405) - code(before, 405), 1)
        # The filter, and the first /metrics itself (counted once it was sent).
        self.assertGreaterEqual(code(after, 200) - code(before, 200), 2)

    def test_json_log_lines_are_documents(self):
        # A request whose path carries bytes that are not UTF-8 gets logged.
        self.assertEqual(self.t.request("GET", "/caf%C3%A9-%FF")[0], 404)
        self.filter("logged")
        lines = [l for l in self.t.log().splitlines() if l.strip()]
        self.assertGreater(len(lines), 3)
        for line in lines:
            doc = json.loads(line)
            self.assertEqual(sorted(doc), ["component", "level", "msg", "time"], line)
            self.assertIn(doc["level"], ("debug", "info", "warn", "error"))
            self.assertRegex(doc["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertTrue(any("listening on" in json.loads(l)["msg"] for l in lines))
        # The path was logged, its bad byte made U+FFFD rather than a broken line.
        self.assertTrue(any("/caf" in json.loads(l)["msg"] for l in lines), lines[-5:])


if __name__ == "__main__":
    unittest.main(verbosity=2)
