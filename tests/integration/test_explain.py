"""`troupe explain` and GET /debug/explain, with the real binary: the endpoint on
the ops listener over a snapshot (its answer agrees with what /filter says for
the same pod, node by node), the query's errors (400 for a missing or
ill-formed argument, 404 for an unknown pod or group), the CLI against the
server and from the snapshot alone (the same JSON both ways; -o json parses;
the human answer says what the JSON says), and with ops.auth on the endpoint
is protected like /debug/state and the CLI's --token-file gets through."""
import json
import os
import subprocess
import tempfile
import unittest
import urllib.parse

from live_common import FAST_CONFIG, LiveCase, load_fixture_cluster, wait_until
from troupe_proc import Troupe, binary, fixture_cluster

AUTH_CONFIG = FAST_CONFIG + "ops:\n  auth: true\n"


def solo_pod(name, gpus, topology=None):
    """A pending single pod asking <gpus> GPUs."""
    md = {"name": name, "namespace": "ml", "uid": "uid-" + name}
    if topology:
        md["annotations"] = {"troupe.io/topology": topology}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"schedulerName": "default-scheduler",
                     "containers": [{"name": "main", "image": "x",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Pending"}}


def snapshot_with(folder, pods):
    """The fixture cluster plus <pods>, written into <folder>."""
    with open(fixture_cluster()) as f:
        doc = json.load(f)
    doc["items"].extend(pods)
    path = os.path.join(folder, "cluster.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    return path, doc


def without_manager(answer):
    """<answer> without what only a running gang manager adds: its view of the
    gang and the queue's gang counts."""
    a = json.loads(json.dumps(answer))
    if a.get("gang"):
        a["gang"].pop("manager", None)
    if a.get("queue"):
        for k in ("waitingGangs", "plannedGangs", "starvingGangs"):
            a["queue"].pop(k, None)
    return a


def cli(*args, timeout=30):
    return subprocess.run([binary(), "explain"] + list(args), capture_output=True, text=True,
                          timeout=timeout)


def explain_path(what, key, **extra):
    q = {what: key}
    q.update({k: str(v) for k, v in extra.items()})
    return "/debug/explain?" + urllib.parse.urlencode(q)


class ExplainSnapshotTest(unittest.TestCase):
    """One troupe over the fixture cluster and three pending single pods."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="troupe-explain-")
        cls.pods = [solo_pod("solo-4", 4), solo_pod("solo-8-nvlink", 8, "required"),
                    solo_pod("solo-2-pix", 2, "required:PIX")]
        cls.snapshot, cls.doc = snapshot_with(cls.tmp.name, cls.pods)
        cls.troupe = Troupe(cluster=cls.snapshot)
        cls.troupe.start()
        cls.url = f"http://127.0.0.1:{cls.troupe.ops_port}"
        cls.nodes = [i["metadata"]["name"] for i in cls.doc["items"] if i["kind"] == "Node"]

    @classmethod
    def tearDownClass(cls):
        cls.troupe.stop()
        cls.tmp.cleanup()

    def get(self, what, key, **extra):
        return self.troupe.ops_request("GET", explain_path(what, key, **extra))

    def test_the_answer_is_filters_node_by_node(self):
        for pod in self.pods:
            name = pod["metadata"]["name"]
            s, _, ex = self.get("pod", "ml/" + name, examples=1000)
            self.assertEqual(s, 200, ex)
            s, _, fr = self.troupe.request("POST", "/filter",
                                           {"Pod": pod, "NodeNames": self.nodes})
            self.assertEqual(s, 200, fr)
            self.assertEqual(ex["decidedBy"], "nodes")
            self.assertEqual(ex["nodes"]["total"], len(self.nodes))
            seen = {}
            for g in ex["nodes"]["groups"]:
                self.assertEqual(g["count"], len(g["examples"]))
                for e in g["examples"]:
                    seen[e["node"]] = (g["reason"], g["resolvable"], e["message"])
            self.assertEqual(sorted(seen), sorted(self.nodes))
            failed = fr.get("FailedNodes") or {}
            unres = fr.get("FailedAndUnresolvableNodes") or {}
            for node, (reason, resolvable, message) in seen.items():
                if reason == "fits":
                    self.assertIn(node, fr["NodeNames"], (name, node))
                    continue
                self.assertNotIn(node, fr["NodeNames"] or [], (name, node))
                want = failed.get(node) if resolvable else unres.get(node)
                self.assertEqual(message, want, (name, node, reason))
            self.assertEqual(ex["nodes"]["feasible"], len(fr["NodeNames"] or []))

    def test_request_best_nodes_and_groups(self):
        s, _, ex = self.get("pod", "ml/solo-4")
        self.assertEqual(s, 200)
        self.assertEqual(ex["kind"], "pod")
        self.assertEqual(ex["pod"], {"namespace": "ml", "name": "solo-4", "uid": "uid-solo-4",
                                     "state": "pending", "node": None, "priority": 0,
                                     "queue": "ml", "podGroup": None})
        self.assertEqual((ex["request"]["gpus"], ex["request"]["resource"],
                          ex["request"]["topology"]), (4, "nvidia.com/gpu", "preferred"))
        reasons = {g["reason"]: g for g in ex["nodes"]["groups"]}
        self.assertEqual(reasons["cordoned"]["examples"][0]["node"], "gpu-l4-0")
        self.assertEqual(reasons["notReady"]["examples"][0]["node"], "gpu-t4-0")
        self.assertFalse(reasons["kindMismatch"]["resolvable"])
        self.assertEqual(ex["nodes"]["feasible"], 5)
        self.assertEqual(len(ex["best"]), 3)
        scores = [b["score"] for b in ex["best"]]
        self.assertEqual(scores, sorted(scores, reverse=True))
        for b in ex["best"]:
            self.assertEqual(len(b["devices"].split(",")), 4)
            self.assertEqual(set(b["terms"]), {"fit", "packing", "topology", "fragmentation"})
        self.assertEqual(ex["scoring"]["policy"], "topology")
        # Fewer examples, fewer best: the counts stay.
        s, _, few = self.get("pod", "ml/solo-4", examples=0, best=1)
        self.assertEqual(len(few["best"]), 1)
        self.assertEqual([g["count"] for g in few["nodes"]["groups"]],
                         [g["count"] for g in ex["nodes"]["groups"]])
        self.assertTrue(all(g["examples"] == [] for g in few["nodes"]["groups"]))

    def test_a_required_policy_names_its_reason(self):
        s, _, ex = self.get("pod", "ml/solo-8-nvlink", examples=100)
        self.assertEqual(ex["request"]["topology"], "required")
        reasons = {g["reason"] for g in ex["nodes"]["groups"]}
        self.assertTrue(reasons & {"topologyNoSet", "topologyUnknown", "notEnoughFree",
                                   "unhealthyDevices"}, reasons)

    def test_a_gang_its_quorum_and_plan(self):
        s, _, ex = self.get("podgroup", "ml/llm")
        self.assertEqual(s, 200, ex)
        self.assertEqual(ex["kind"], "podgroup")
        g = ex["gang"]
        self.assertEqual((g["members"], g["quorum"], g["bound"]), (2, 2, 0))
        self.assertTrue(g["planNow"]["possible"])
        self.assertEqual(len(g["planNow"]["slots"]), 2)
        s, _, member = self.get("pod", "ml/llm-worker-0")
        self.assertEqual(member["decidedBy"], "gang")
        self.assertEqual(member["gang"]["name"], "llm")
        self.assertEqual(member["best"], [])

    def test_bad_arguments_are_400_and_unknown_names_404(self):
        for path in ["/debug/explain", "/debug/explain?pod=ml",
                     "/debug/explain?pod=ml/a/b", "/debug/explain?pod=ML/x",
                     "/debug/explain?pod=ml/solo-4&podgroup=ml/llm",
                     "/debug/explain?pod=ml/solo-4&examples=-1",
                     "/debug/explain?pod=ml/solo-4&best=1000"]:
            s, h, body = self.troupe.ops_request("GET", path)
            self.assertEqual(s, 400, path)
            self.assertEqual(body["code"], 400)
            self.assertIn("troupe: ", body["error"])
        for path in ["/debug/explain?pod=ml/nope", "/debug/explain?podgroup=ml/nope"]:
            s, _, body = self.troupe.ops_request("GET", path)
            self.assertEqual((s, body["code"]), (404, 404), path)
            self.assertIn("ml/nope", body["error"])
        s, _, _ = self.troupe.request("GET", "/debug/explain?pod=ml/solo-4")
        self.assertEqual(s, 404, "explain is on the ops listener only")

    def test_cli_server_and_snapshot_answer_alike(self):
        for what, key in (("pod", "ml/solo-4"), ("pod", "ml/solo-8-nvlink"),
                          ("podgroup", "ml/llm"), ("pod", "ml/llm-worker-1")):
            r1 = cli(what, key, "--server", self.url, "-o", "json")
            r2 = cli(what, key, "--cluster", self.snapshot, "-o", "json")
            self.assertEqual((r1.returncode, r2.returncode), (0, 0), r1.stderr + r2.stderr)
            a, b = json.loads(r1.stdout), json.loads(r2.stdout)
            self.assertEqual(without_manager(a), without_manager(self.get(what, key)[2]))
            # The snapshot's manager has run no pass yet (explain_cli.c):
            # beside what the running one has done since, the same answer.
            self.assertEqual(without_manager(a), without_manager(b), key)
            if b.get("gang"):
                self.assertIsNone(b["gang"]["manager"])

    def test_the_managers_view_of_a_waiting_gang(self):
        def manager():
            return self.get("podgroup", "ml/llm")[2]["gang"]["manager"]

        # A snapshot is a picture nobody schedules: its pending gang waits
        # only once a filter call shows a member (only a watch shows a gang
        # by itself, gang__discover_waiting). Offered one 8-GPU node, the
        # 2 x 8-GPU gang cannot be planned and waits.
        self.assertIsNone(manager())
        member = next(i for i in self.doc["items"]
                      if i["kind"] == "Pod" and i["metadata"]["name"] == "llm-worker-0")
        s, _, fr = self.troupe.request("POST", "/filter",
                                       {"Pod": member, "NodeNames": ["gpu-a100-0"]})
        self.assertEqual(s, 200, fr)
        self.assertEqual(fr["NodeNames"] or [], [], fr)
        wait_until(lambda: manager() is not None, 20, "the manager sees ml/llm")
        m = manager()
        self.assertEqual((m["state"], m["quorum"], m["need"], m["needGPUs"]),
                         ("waiting", 2, 2, 16))
        self.assertEqual(m["fairPosition"], 1)
        self.assertEqual(m["plan"], [])
        q = self.get("podgroup", "ml/llm")[2]["queue"]
        self.assertEqual((q["name"], q["waitingGangs"]), ("ml", 1))
        r = cli("podgroup", "ml/llm", "--server", self.url)
        self.assertIn("state waiting", r.stdout)
        self.assertIn("position 1 in the fair order", r.stdout)

    def test_cli_human_answer(self):
        r = cli("pod", "ml/solo-4", "--server", self.url + "/")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertIn("Pod ml/solo-4: pending", out)
        self.assertIn("asks 4 nvidia.com/gpu, topology preferred", out)
        self.assertIn("Nodes: 5 of 8 can take it now", out)
        self.assertIn("gpu-l4-0: troupe: node is cordoned (spec.unschedulable)", out)
        self.assertIn("Best nodes (scoring topology", out)
        self.assertEqual(out.split("\nQueue")[0],
                         cli("pod", "ml/solo-4", "--cluster", self.snapshot).stdout.split(
                             "\nQueue")[0])
        r = cli("podgroup", "ml/llm", "--cluster", self.snapshot)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Gang ml/llm: 2 members of quorum 2", r.stdout)
        self.assertIn("a plan now for 2 members", r.stdout)

    def test_cli_errors(self):
        r = cli("pod", "ml/nope", "--server", self.url)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"no pod ml/nope in troupe's cache .*\(HTTP 404\)")
        r = cli("pod", "ml/nope", "--cluster", self.snapshot)
        self.assertEqual(r.returncode, 1)
        self.assertIn("(HTTP 404)", r.stderr)
        for args, text in [(["pod", "ml", "--server", self.url],
                            'pod="ml" is not NAMESPACE/NAME'),
                           (["pod", "ml/x"], "exactly one of --server URL and --cluster"),
                           (["pod", "ml/x", "--server", self.url, "--cluster", self.snapshot],
                            "exactly one of"),
                           (["node", "x/y", "--server", self.url], "give what to explain"),
                           (["pod", "ml/x", "--server", self.url, "-o", "yaml"],
                            "-o must be text or json"),
                           (["pod", "ml/x", "--cluster", self.snapshot, "--token-file", "t"],
                            "--token-file goes with --server"),
                           (["pod", "ml/x", "--server", self.url, "--config", "c"],
                            "--config goes with --cluster"),
                           (["pod", "ml/solo-4", "--server", self.url, "--best", "x"],
                            'best="x" is not a count')]:
            r = cli(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(text, r.stderr, args)
        r = cli("pod", "ml/x", "--server", "http://127.0.0.1:1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("GET http://127.0.0.1:1/debug/explain?pod=ml%2Fx", r.stderr)
        r = cli("pod", "ml/x", "--cluster", os.path.join(self.tmp.name, "missing.json"))
        self.assertEqual(r.returncode, 1)

    def test_help_explains_every_flag(self):
        r = cli("--help")
        self.assertEqual(r.returncode, 0)
        for flag in ("--server URL", "--token-file FILE", "--cluster SNAPSHOT",
                     "--config FILE", "-o, --output FORMAT", "--examples N", "--best N",
                     "-h, --help", "Exit status"):
            self.assertIn(flag, r.stdout)
        self.assertIn("troupe explain pod|podgroup", subprocess.run(
            [binary(), "--help"], capture_output=True, text=True).stdout)


class ExplainAuthTest(LiveCase):
    """ops.auth on: /debug/explain needs what /debug/state needs."""

    def test_protected_and_the_cli_sends_the_token(self):
        load_fixture_cluster(self.srv)
        self.srv.add_user("dev-token", "alice", groups=["debuggers", "system:authenticated"])
        self.srv.grant_path("debuggers", "/debug/*")
        self.srv.add_user("nobody-token", "mallory")
        t = self.start_live(AUTH_CONFIG)
        wait_until(lambda: t.ops_request("GET", "/readyz")[0] == 200, 20, "troupe ready")
        path = explain_path("podgroup", "ml/llm")
        self.assertEqual(t.ops_request("GET", path)[0], 401)
        s, _, body = t.ops_request("GET", path, headers={"Authorization": "Bearer nobody-token"})
        self.assertEqual(s, 403)
        self.assertIn('cannot get path "/debug/explain"', body["message"])
        s, _, body = t.ops_request("GET", path, headers={"Authorization": "Bearer dev-token"})
        self.assertEqual(s, 200, body)
        self.assertEqual(body["gang"]["quorum"], 2)
        with tempfile.TemporaryDirectory() as d:
            tok = os.path.join(d, "token")
            with open(tok, "w") as f:
                f.write("dev-token\n")
            url = f"http://127.0.0.1:{t.ops_port}"
            r = cli("podgroup", "ml/llm", "--server", url, "--token-file", tok, "-o", "json")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["gang"]["name"], "llm")
            r = cli("podgroup", "ml/llm", "--server", url)
            self.assertEqual(r.returncode, 1)
            self.assertIn("Unauthorized (HTTP 401)", r.stderr)


if __name__ == "__main__":
    unittest.main()
