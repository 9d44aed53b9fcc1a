"""`troupe simulate`, the what-if simulator, run as users run it: the real binary
on a snapshot file and a trace file, its JSON report read back.

Hand-checked cases first, whose outcome follows from the rules alone (a job
waiting on another's GPUs starts the instant they free; a gang's pods start
together or not at all; the topology score keeps NVLink pairs whole where
binpack fills the fuller node; a job no node can hold is refused, never
queued; the waiting jobs are retried in the gang manager's fair order, by
priority, then the queue's weighted share, then arrival, where --order fifo
takes arrival order; bad input is refused with exit 2 and the field named).
Then a property
test over random traces and clusters: every job that fits the cluster
completes, no device is ever held by two pods and no node gives out more than
it has, a gang's quorum starts at one instant, and the reported waits are the
jobs' own, in either order, with priorities and queue weights.
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

from troupe_proc import binary as troupe_bin, source_root

sys.path.insert(0, os.path.join(source_root(), "bench"))
import gen_sim_cluster  # noqa: E402  (the snapshot generator: its machine types)


def cluster(kinds, pods=()):
    """A v1 List of nodes of gen_sim_cluster's kinds, named n0, n1, ..., plus
    bound pods given as (node index, [device ids])."""
    items = []
    for i, kind in enumerate(kinds):
        n = gen_sim_cluster.node(gen_sim_cluster.KINDS.index(kind))
        name = f"n{i}"
        n["metadata"]["name"] = name
        n["metadata"]["uid"] = f"uid-n{i}"
        n["metadata"]["labels"]["kubernetes.io/hostname"] = name
        n["metadata"]["labels"]["network.topology.nvidia.com/block"] = f"rack-{i // 4}"
        items.append(n)
    for k, (idx, ids) in enumerate(pods):
        items.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"held-{k}", "namespace": "default", "uid": f"held-{k}",
                         "annotations": {"troupe.io/gpu-ids": ",".join(map(str, ids))}},
            "spec": {"nodeName": f"n{idx}", "containers": [{
                "name": "c", "image": "x",
                "resources": {"limits": {"nvidia.com/gpu": str(len(ids))}}}]},
            "status": {"phase": "Running"}})
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
            "items": items}


class Sim:
    def __init__(self, test):
        self.dir = tempfile.TemporaryDirectory()
        test.addCleanup(self.dir.cleanup)

    def run(self, snapshot, trace, *args, expect=0):
        cpath = os.path.join(self.dir.name, "cluster.json")
        tpath = os.path.join(self.dir.name, "trace.json")
        with open(cpath, "w") as f:
            json.dump(snapshot, f)
        with open(tpath, "w") as f:
            f.write(trace if isinstance(trace, str) else json.dumps(trace))
        p = subprocess.run([troupe_bin(), "simulate", "--cluster", cpath, "--workload", tpath,
                            *args], capture_output=True, text=True, timeout=300)
        if p.returncode != expect:
            raise AssertionError(f"exit {p.returncode}, wanted {expect}\n"
                                 f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}")
        return p

    def json(self, snapshot, trace, *args):
        p = self.run(snapshot, trace, "-o", "json", "--per-job", *args)
        return json.loads(p.stdout)


def by_name(policy):
    return {j["name"]: j for j in policy["jobs"]}


class HandChecked(unittest.TestCase):
    def test_second_job_waits_exactly_the_first_ones_duration(self):
        out = Sim(self).json(cluster(["nvswitch"]), {"jobs": [
            {"name": "first", "arrival": 0, "duration": "1h", "gpus": 8},
            {"name": "second", "arrival": 0, "duration": "30m", "gpus": 8}]})
        p = out["policies"][0]
        jobs = by_name(p)
        self.assertEqual(jobs["first"]["start"], 0)
        self.assertEqual(jobs["second"]["start"], 3600)
        self.assertEqual(jobs["second"]["end"], 3600 + 1800)
        self.assertEqual(p["wait_s"]["mean"], 1800)
        self.assertEqual(p["wait_s"]["max"], 3600)
        self.assertEqual(p["completion_s"]["max"], 5400)
        # Busy the whole time: 8 of 8 GPUs from 0 to 5400 s.
        self.assertAlmostEqual(p["gpu_utilisation"], 1.0)
        self.assertEqual(p["peak_gpus_in_use"], 8)

    def test_a_gang_starts_and_completes_together(self):
        # One GPU of n0 is taken for ten minutes: a 2x8 gang arriving at one
        # minute needs both nodes whole and starts at 600 s, both pods at once.
        # The same two pods without a gang start apart: one at once on n1.
        trace = {"jobs": [
            {"name": "small", "arrival": 0, "duration": "10m", "gpus": 1},
            {"name": "gang", "arrival": "1m", "duration": "1h", "pods": 2, "gpus": 8,
             "gang": 2}]}
        jobs = by_name(Sim(self).json(cluster(["nvswitch", "nvswitch"]), trace)["policies"][0])
        starts = [pod["start"] for pod in jobs["gang"]["pods"]]
        self.assertEqual(starts, [600, 600])
        self.assertEqual(sorted(pod["node"] for pod in jobs["gang"]["pods"]), ["n0", "n1"])
        self.assertEqual(jobs["gang"]["end"], 600 + 3600)

        trace["jobs"][1]["gang"] = 0
        jobs = by_name(Sim(self).json(cluster(["nvswitch", "nvswitch"]), trace)["policies"][0])
        starts = sorted(pod["start"] for pod in jobs["gang"]["pods"])
        self.assertEqual(starts, [60, 600])

    def test_each_ranker_makes_its_own_choice(self):
        # n0 has 2 of 8 GPUs free, n1 all 8; a 2-GPU pod. Best fit, MostAllocated
        # and troupe's default take n0; LeastAllocated spreads to n1; under
        # kube-scheduler troupe's rank (10 against 9, x weight x 10) outweighs
        # LeastAllocated's 75 points at the shipped weight 15, not at weight 1.
        snap = cluster(["nvswitch", "nvswitch"], pods=[(0, [0, 1, 2, 3, 4, 5])])
        trace = {"jobs": [{"name": "pair", "arrival": 0, "duration": "1h", "gpus": 2}]}
        pols = ["topology", "best-fit", "most-allocated", "least-allocated", "kube",
                "kube-scaled", "binpack+besteffort"]

        def nodes(*args):
            out = Sim(self).json(snap, trace, "--compare", ",".join(pols), *args)
            return {p["policy"]: by_name(p)["pair"]["pods"][0]["node"]
                    for p in out["policies"]}
        self.assertEqual(nodes(), {"topology": "n0", "best-fit": "n0", "most-allocated": "n0",
                                   "least-allocated": "n1", "kube": "n0",
                                   "kube-scaled": "n0", "binpack+besteffort": "n0"})
        self.assertEqual(nodes("--extender-weight", "1")["kube"], "n1")

    def test_holds_keep_freed_gpus_for_a_starving_gang(self):
        # n0 and n1 are full (for 1 h and 2 h); a 2x8 gang arrives at one
        # minute, then a 1-GPU pod every minute from 50 min on, each for 2 h.
        # Without holds (the default) the small pods take n0 as it frees and
        # the gang waits for them; with gang.starvation_holds (after 0 s) both
        # nodes are kept for the gang, which starts when n1 frees at 2 h.
        trace = {"jobs": [
            {"name": "a", "arrival": 0, "duration": "1h", "gpus": 8},
            {"name": "b", "arrival": 0, "duration": "2h", "gpus": 8},
            {"name": "gang", "arrival": "1m", "duration": "1h", "pods": 2, "gpus": 8,
             "gang": 2},
            {"name": "s", "arrival": "50m", "every": "1m", "count": 60, "duration": "2h",
             "gpus": 1}]}
        snap = cluster(["nvswitch", "nvswitch"])
        sim = Sim(self)
        free = by_name(sim.json(snap, trace)["policies"][0])["gang"]["start"]
        cfg = os.path.join(sim.dir.name, "holds.yaml")
        with open(cfg, "w") as f:
            f.write("gang:\n  starvation_holds: true\n  starvation_seconds: 0\n")
        held = by_name(sim.json(snap, trace, "--config", cfg)["policies"][0])["gang"]["start"]
        self.assertEqual(held, 7200)
        self.assertGreater(free, 7200)
        # --no-holds overrides the config; a peer's planner never holds.
        out = sim.json(snap, trace, "--config", cfg, "--no-holds")
        self.assertEqual(by_name(out["policies"][0])["gang"]["start"], free)
        out = sim.json(snap, trace, "--config", cfg, "--policy", "topology@kueue-bestfit")
        self.assertGreater(by_name(out["policies"][0])["gang"]["start"], 7200)

    def test_topology_keeps_nvlink_where_binpack_fills_the_fuller_node(self):
        # n0, a PCIe server, has 2 GPUs free (PIX, no NVLink); n1, an NVSwitch
        # board, is empty. binpack sends a 2-GPU pod to the fuller n0; the
        # topology score, with the link quality weighed above packing, sends it
        # where its pair is NVLinked. (At the default weights, fit 100 first,
        # best fit wins here too: the same run says so.)
        snap = cluster(["pcie", "nvswitch"], pods=[(0, [0, 1, 2, 3, 4, 5])])
        trace = {"jobs": [{"name": "pair", "arrival": 0, "duration": "1h", "gpus": 2}]}
        out = Sim(self).json(snap, trace, "--compare", "binpack,topology", "--weights", "1,4,1")
        rates = {p["policy"]: p["nvlink_complete"]["rate"] for p in out["policies"]}
        self.assertEqual(rates, {"binpack": 0.0, "topology": 1.0})
        nodes = {p["policy"]: by_name(p)["pair"]["pods"][0]["node"] for p in out["policies"]}
        self.assertEqual(nodes, {"binpack": "n0", "topology": "n1"})
        out = Sim(self).json(snap, trace, "--compare", "binpack,topology")
        rates = {p["policy"]: p["nvlink_complete"]["rate"] for p in out["policies"]}
        self.assertEqual(rates, {"binpack": 0.0, "topology": 0.0})

    def test_a_job_no_node_can_hold_is_refused_not_queued(self):
        p = Sim(self).run(cluster(["nvswitch"]), {"jobs": [
            {"name": "huge", "arrival": 0, "duration": "1h", "gpus": 16},
            {"name": "fine", "arrival": 0, "duration": "1h", "gpus": 8}]}, "-o", "json")
        out = json.loads(p.stdout)["policies"][0]
        self.assertEqual((out["jobs_refused"], out["jobs_done"]), (1, 1))
        self.assertIn("huge: refused", p.stderr)

    def test_gang_topology_required_keeps_each_gang_in_one_domain(self):
        # Two racks of four 8-GPU nodes (rack-0: n0-n3, rack-1: n4-n7), some
        # held whole by the snapshot's pods. --gang-topology models the pods'
        # troupe.io/gang-topology annotation through the gang manager's planner.
        key = "network.topology.nvidia.com/block"
        gang = {"jobs": [{"name": "g", "duration": "1h", "pods": 2, "gpus": 8, "gang": 2}]}
        every = list(range(8))
        sim = Sim(self)
        # n3 and n7 free, one in each rack: spread without the annotation,
        # refused with it (no rack can ever hold both members).
        snap = cluster(["nvswitch"] * 8, [(i, every) for i in (0, 1, 2, 4, 5, 6)])
        free = sim.json(snap, gang)
        self.assertIsNone(free["settings"]["gang_required_key"])
        pods = by_name(free["policies"][0])["g"]["pods"]
        self.assertEqual(sorted(p["node"] for p in pods), ["n3", "n7"])
        req = sim.json(snap, gang, "--gang-topology", f"required:{key}")
        self.assertEqual(req["settings"]["gang_required_key"], key)
        self.assertEqual(req["policies"][0]["jobs_refused"], 1)
        self.assertEqual(sim.json(snap, gang, "--gang-topology", "none")["policies"][0]
                         ["jobs_refused"], 0)
        # n2, n3 free in rack-0 and n5-n7 in rack-1: the tightest rack, whole.
        snap = cluster(["nvswitch"] * 8, [(i, every) for i in (0, 1, 4)])
        for _ in range(3):
            pods = by_name(sim.json(snap, gang, "--gang-topology", f"required:{key}")
                           ["policies"][0])["g"]["pods"]
            self.assertEqual(sorted(p["node"] for p in pods), ["n2", "n3"])
        # Bad values, and a peer's planner, which has rules of its own.
        p = sim.run(snap, gang, "--gang-topology", "rack", expect=2)
        self.assertIn("--gang-topology takes none or required:<node-label-key>", p.stderr)
        p = sim.run(snap, gang, "--gang-topology", f"required:{key}", "--compare",
                    "topology,topology@kai", expect=2)
        self.assertIn('policy "topology@kai" names a peer', p.stderr)

    def test_bad_input_is_refused_with_the_field_named(self):
        sim = Sim(self)
        snap = cluster(["nvswitch"])
        p = sim.run(snap, {"jobs": [{"name": "x", "arrival": 0}]}, expect=2)
        self.assertIn('job "x": duration is required', p.stderr)
        p = sim.run(snap, {"jobs": [{"name": "x", "duration": 5, "topology": "nvlinky"}]},
                    expect=2)
        self.assertIn('job "x": topology', p.stderr)
        p = sim.run(snap, {"jobs": [{"duration": 5, "pods": 2, "gang": 3}]}, expect=2)
        self.assertIn("gang must be", p.stderr)
        p = sim.run(snap, {"jobs": [{"duration": 5}]}, "--compare", "binpack,nope", expect=2)
        self.assertIn('"nope" is not a policy', p.stderr)
        p = sim.run(snap, {"seed": 1e300, "jobs": [{"duration": 5}]}, expect=2)
        self.assertIn("seed must be a whole number", p.stderr)
        p = sim.run(snap, {"generate": {"jobs": 3, "mix": [{"share": 1}]}}, expect=2)
        self.assertIn("generate.mix[0] has no duration", p.stderr)
        p = sim.run(snap, "jobs: [", expect=2)
        self.assertIn("trace", p.stderr)

    def test_text_report_and_help(self):
        p = Sim(self).run(cluster(["nvswitch", "dgx1"]), {"jobs": [
            {"duration": "1h", "gpus": 4, "count": 5, "every": "10m", "queue": "a"},
            {"duration": "1h", "gpus": 2, "count": 5, "every": "10m", "queue": "b"}]},
            "--compare", "binpack,topology,binpack+lowest")
        self.assertIn("| policy | jobs done / refused |", p.stdout)
        for name in ("| topology |", "| binpack+lowest |", "| a |", "| b |"):
            self.assertIn(name, p.stdout)
        h = subprocess.run([troupe_bin(), "simulate", "--help"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(h.returncode, 0)
        for flag in ("--cluster", "--workload", "--config", "--policy", "--compare",
                     "--weights", "--seed", "--order", "--frag-gpus", "--plot", "--plot-data",
                     "--output", "--per-job", "--gang-topology"):
            self.assertIn(flag, h.stdout)

    def test_plot_data(self):
        # The series behind --plot, without gnuplot: one block per policy, the
        # time averages of GPUs in use (100 % while the one job runs).
        sim = Sim(self)
        data = os.path.join(sim.dir.name, "plot.dat")
        sim.run(cluster(["nvswitch"]), {"jobs": [{"duration": "1h", "gpus": 8}]},
                "--compare", "binpack,topology", "--plot-data", data)
        with open(data) as f:
            blocks = [b for b in f.read().split("\n\n\n") if b.strip()]
        self.assertEqual(len(blocks), 2)
        rows = [line.split() for line in blocks[0].splitlines() if not line.startswith("#")]
        self.assertEqual(len(rows), 300)
        self.assertTrue(all(float(r[1]) == 100.0 for r in rows), rows[:3])
        self.assertTrue(all(float(r[2]) == 0.0 for r in rows))

    def test_the_example_traces_load(self):
        root = source_root()
        ex = os.path.join(root, "config", "examples")
        # The MIG trace asks for MIG profiles: its cluster and config.
        special = {"trace-mig.yaml": ["--cluster", os.path.join(ex, "cluster-mig-mixed.json"),
                                      "--config", os.path.join(ex, "troupe-mig.yaml")]}
        for name in sorted(os.listdir(ex)):
            if not name.startswith("trace-"):
                continue
            with self.subTest(trace=name):
                where = special.get(name, ["--cluster", os.path.join(ex, "cluster-sim-64.json")])
                p = subprocess.run(
                    [troupe_bin(), "simulate", *where,
                     "--workload", os.path.join(ex, name),
                     "-o", "json"], capture_output=True, text=True, timeout=300)
                self.assertEqual(p.returncode, 0, p.stderr)
                pol = json.loads(p.stdout)["policies"][0]
                self.assertEqual(pol["jobs_done"] + pol["jobs_refused"], pol["jobs_measured"])


class MigPacking(unittest.TestCase):
    """MIG pods on a MIG mixed cluster (config/examples/cluster-mig-mixed.json,
    all-balanced H100s): troupe, as kube-scheduler's extender, keeps GPUs with
    no MIG device in use, and nodes with nothing in use, where kube-scheduler
    alone (LeastAllocated) with the device plugin's distributed choice of MIG
    device leaves almost none. The figures of docs/benchmarks.md ("MIG
    packing") come from the full trace; this is a shorter one."""

    def run_sim(self, *args, trace=None, expect=0):
        root = source_root()
        ex = os.path.join(root, "config", "examples")
        sim = Sim(self)
        with open(os.path.join(ex, "trace-mig.yaml")) as f:
            text = f.read().replace("jobs: 20000", "jobs: 3000")
        with open(os.path.join(ex, "cluster-mig-mixed.json")) as f:
            snap = json.load(f)
        return sim.run(snap, trace or text, "--config", os.path.join(ex, "troupe-mig.yaml"),
                       *args, expect=expect)

    def test_troupe_keeps_more_whole_gpus_than_kube_scheduler_alone(self):
        p = self.run_sim("-o", "json", "--until-last-arrival", "--compare",
                         "least-allocated+distributed,kube,kube+distributed")
        pol = {x["policy"]: x for x in json.loads(p.stdout)["policies"]}
        alone, troupe, advisory = (pol["least-allocated+distributed"], pol["kube"],
                                   pol["kube+distributed"])
        for x in pol.values():
            self.assertEqual(x["jobs_refused"], 0)
            self.assertEqual(x["jobs_done"], x["jobs_measured"])
        # The same jobs ran: the same GPU-time in use.
        self.assertAlmostEqual(troupe["gpu_utilisation"], alone["gpu_utilisation"], places=6)
        self.assertGreater(troupe["whole_gpus_free"], 10 * max(alone["whole_gpus_free"], 1))
        self.assertGreater(troupe["empty_nodes"], alone["empty_nodes"] + 5)
        # With the device plugin picking the MIG device on troupe's node (the
        # choice is advisory there), most of the gain stays.
        self.assertGreater(advisory["whole_gpus_free"], 10 * max(alone["whole_gpus_free"], 1))
        # The text report has the table.
        text = self.run_sim("--until-last-arrival", "--compare", "kube").stdout
        self.assertIn("| policy | physical GPUs with no device in use | nodes with nothing "
                      "in use |", text)

    def test_a_profile_not_managed_is_refused(self):
        p = self.run_sim(trace=json.dumps({"jobs": [
            {"name": "x", "duration": "1h", "resource": "nvidia.com/mig-7g.80gb"}]}), expect=2)
        self.assertIn("nvidia.com/mig-7g.80gb, which is not among the config's resources.gpu",
                      p.stderr)


class FairOrder(unittest.TestCase):
    """Which waiting job takes the GPUs a departure frees: the daemon's fair
    order (gang_fair_precedes: priority, then the queue's weighted share of
    the GPUs in use, then arrival), against arrival order (--order fifo)."""

    # Two 8-GPU nodes. From 0 to 2h "research" holds one node (8 GPUs) and
    # "dev" 6 GPUs of the other; a 2-GPU dev filler ends at 1h, freeing the
    # only 2 GPUs before 2h. Two 2-GPU jobs wait for them: d-wait (dev,
    # arrived at 1m) and r-wait (research, at 2m). At 1h the shares are
    # research 8/16 = 0.5, over its weight 2: 0.25, and dev 6/16 = 0.375.
    TRACE = {"jobs": [
        {"name": "r-run", "arrival": 0, "duration": "2h", "gpus": 8, "queue": "research"},
        {"name": "d-run", "arrival": 0, "duration": "2h", "gpus": 6, "queue": "dev"},
        {"name": "filler", "arrival": 0, "duration": "1h", "gpus": 2, "queue": "dev"},
        {"name": "d-wait", "arrival": "1m", "duration": "1h", "gpus": 2, "queue": "dev"},
        {"name": "r-wait", "arrival": "2m", "duration": "1h", "gpus": 2,
         "queue": "research"}]}

    def run_sim(self, trace, *args, weights=None):
        """The JSON report, with a config giving the queues <weights>."""
        sim = Sim(self)
        if weights:
            cfg = os.path.join(sim.dir.name, "troupe.yaml")
            with open(cfg, "w") as f:
                f.write("queues:\n" + "".join(f"  {q}: {w}\n" for q, w in weights.items()))
            args = ("--config", cfg) + args
        out = sim.json(cluster(["nvswitch", "nvswitch"]), trace, *args)
        self.assertTrue(all(j["done"] for j in out["policies"][0]["jobs"]))
        return out, by_name(out["policies"][0])

    def starts(self, trace, *args, weights=None):
        jobs = self.run_sim(trace, *args, weights=weights)[1]
        return {name: j["start"] for name, j in jobs.items() if "wait" in name}

    def test_the_lower_weighted_share_goes_first_where_fifo_takes_arrival(self):
        research2 = {"research": 2}
        # Research's 8 GPUs at weight 2 (0.25) weigh less than dev's 6 (0.375).
        out, jobs = self.run_sim(self.TRACE, weights=research2)
        self.assertEqual((jobs["r-wait"]["start"], jobs["d-wait"]["start"]), (3600, 7200))
        self.assertEqual(out["settings"]["order"], "fair")
        self.assertEqual({q["name"]: q["weight"] for q in out["policies"][0]["queues"]},
                         {"research": 2, "dev": 1})
        # Arrival order: d-wait came first.
        self.assertEqual(self.starts(self.TRACE, "--order", "fifo", weights=research2),
                         {"d-wait": 3600, "r-wait": 7200})
        # Without the weight research's share is 0.5, above dev's: dev first.
        self.assertEqual(self.starts(self.TRACE), {"d-wait": 3600, "r-wait": 7200})

    def test_priority_goes_before_share_and_fifo_ignores_it(self):
        trace = json.loads(json.dumps(self.TRACE))
        trace["jobs"][3]["priority"] = 10       # d-wait
        self.assertEqual(self.starts(trace, weights={"research": 2}),
                         {"d-wait": 3600, "r-wait": 7200})
        # Higher priority on the later arrival instead: first in the fair
        # order (as its share is lower anyway), not in arrival order.
        trace["jobs"][3]["priority"] = 0
        trace["jobs"][4]["priority"] = 10       # r-wait
        self.assertEqual(self.starts(trace, "--order", "fifo"),
                         {"d-wait": 3600, "r-wait": 7200})
        self.assertEqual(self.starts(trace), {"r-wait": 3600, "d-wait": 7200})

    def test_the_share_is_read_afresh_after_each_start(self):
        # research (weight 3) holds n0, 8 GPUs: 8/16/3 = 0.167; dev 3 GPUs of
        # n1: 3/16 = 0.1875. Fillers of a third queue end together at 1h 2s
        # and free 5 GPUs; three 2-GPU jobs wait: r-wait, r-wait2 (research) and d-wait
        # (dev), in that arrival order. Research goes first; with r-wait
        # started it holds 10 GPUs, 10/16/3 = 0.208, above dev: d-wait takes
        # the next 2 GPUs and r-wait2, which arrived before it, waits to 2h.
        trace = {"jobs": [
            {"name": "r-run", "arrival": 0, "duration": "2h", "gpus": 8, "queue": "research"},
            {"name": "d-run", "arrival": 1, "duration": "2h", "gpus": 3, "queue": "dev"},
            {"name": "f1", "arrival": 2, "duration": "1h", "gpus": 2, "queue": "other"},
            {"name": "f2", "arrival": 2, "duration": "1h", "gpus": 2, "queue": "other"},
            {"name": "f3", "arrival": 2, "duration": "1h", "gpus": 1, "queue": "other"},
            {"name": "r-wait", "arrival": "1m", "duration": "1h", "gpus": 2,
             "queue": "research"},
            {"name": "r-wait2", "arrival": "2m", "duration": "1h", "gpus": 2,
             "queue": "research"},
            {"name": "d-wait", "arrival": "3m", "duration": "1h", "gpus": 2, "queue": "dev"}]}
        w = {"research": 3}
        self.assertEqual(self.starts(trace, weights=w),
                         {"r-wait": 3602, "d-wait": 3602, "r-wait2": 7200})
        self.assertEqual(self.starts(trace, "--order", "fifo", weights=w),
                         {"r-wait": 3602, "r-wait2": 3602, "d-wait": 7200})

    def test_the_snapshots_pods_count_in_their_queues_share(self):
        # The snapshot holds 6 GPUs of n1 for queue dev (its label) the whole
        # run. The trace: research 4 GPUs of n0 to 2h, a 4-GPU filler of
        # another queue beside it to 1h, and 2 more of that queue on n1. At
        # 1h, 4 GPUs free: research has 4/16 = 0.25 and dev 6/16 = 0.375, so
        # r-wait goes before d-wait, which arrived first. Counting only the
        # trace's pods dev would have 0 and go first.
        snap = cluster(["nvswitch", "nvswitch"], pods=[(1, [0, 1, 2, 3, 4, 5])])
        held = snap["items"][-1]
        held["metadata"]["namespace"] = "elsewhere"
        held["metadata"]["labels"] = {"troupe.io/queue": "dev"}
        trace = {"jobs": [
            {"name": "r-run", "arrival": 0, "duration": "2h", "gpus": 4, "queue": "research"},
            {"name": "f", "arrival": 1, "duration": "1h", "gpus": 4, "queue": "other"},
            {"name": "f2", "arrival": 2, "duration": "2h", "gpus": 2, "queue": "other"},
            {"name": "d-wait", "arrival": "1m", "duration": "1h", "gpus": 4, "queue": "dev"},
            {"name": "r-wait", "arrival": "2m", "duration": "1h", "gpus": 4,
             "queue": "research"}]}
        sim = Sim(self)
        jobs = by_name(sim.json(snap, trace)["policies"][0])
        self.assertEqual((jobs["r-wait"]["start"], jobs["d-wait"]["start"]), (3601, 7200))
        jobs = by_name(sim.json(snap, trace, "--order", "fifo")["policies"][0])
        self.assertEqual((jobs["d-wait"]["start"], jobs["r-wait"]["start"]), (3601, 7200))

    def test_bad_order_and_priority_are_refused(self):
        sim = Sim(self)
        snap = cluster(["nvswitch"])
        p = sim.run(snap, {"jobs": [{"duration": 5}]}, "--order", "lifo", expect=2)
        self.assertIn("--order takes fair or fifo", p.stderr)
        p = sim.run(snap, {"jobs": [{"name": "x", "duration": 5, "priority": "high"}]},
                    expect=2)
        self.assertIn('job "x": priority must be', p.stderr)


def check_run(test, snap_nodes, trace, policy):
    """The invariants of one policy's run, from its per-pod records."""
    cap = {f"n{i}": (4 if k == "bridge" else 8) for i, k in enumerate(snap_nodes)}
    jobs = {j["name"]: j for j in trace["jobs"]}
    intervals = {n: [] for n in cap}
    waits = []
    for j in policy["jobs"]:
        spec = jobs[j["name"]]
        if j["refused"]:
            # Only the jobs made too large for any node are refused.
            test.assertGreater(spec["gpus"], 8, j["name"])
            continue
        test.assertTrue(j["done"], f"{j['name']} never completed")
        test.assertLessEqual(spec["gpus"], 8)
        starts = [p["start"] for p in j["pods"]]
        test.assertEqual(len(starts), spec.get("pods", 1))
        test.assertTrue(all(s >= spec["arrival"] for s in starts), j["name"])
        gang = spec.get("gang", 0)
        if gang >= 2:
            test.assertEqual(len(set(starts[:gang])), 1, f"{j['name']}: gang split {starts}")
            test.assertLessEqual(max(starts[:gang]), min(starts[gang:], default=1e300))
        test.assertEqual(j["start"], max(starts))
        test.assertAlmostEqual(j["end"], max(starts) + spec["duration"], places=6)
        waits.append(j["start"] - spec["arrival"])
        for p in j["pods"]:
            test.assertEqual(len(p["devices"]), spec["gpus"])
            test.assertTrue(all(0 <= d < cap[p["node"]] for d in p["devices"]))
            # Microseconds: the report prints times to about 15 digits, and
            # an end a rounding error after the next start is the same instant.
            intervals[p["node"]].append((round(p["start"], 6),
                                         round(p["start"] + spec["duration"], 6),
                                         set(p["devices"])))
    for node, ivs in intervals.items():
        # Sweep: ends before starts at one instant (a freed GPU is reusable).
        events = sorted([(e, 0, i) for i, (s, e, d) in enumerate(ivs)] +
                        [(s, 1, i) for i, (s, e, d) in enumerate(ivs)])
        held = set()
        for _, kind, i in events:
            devs = ivs[i][2]
            if kind == 0:
                held -= devs
            else:
                test.assertFalse(held & devs, f"{node}: devices {held & devs} given twice")
                held |= devs
                test.assertLessEqual(len(held), cap[node])
    test.assertLessEqual(policy["peak_gpus_in_use"], sum(cap.values()))
    if waits:
        test.assertAlmostEqual(policy["wait_s"]["mean"], sum(waits) / len(waits), places=3)
        test.assertAlmostEqual(policy["wait_s"]["max"], max(waits), places=6)
    test.assertLessEqual(policy["gpu_utilisation"], 1.0 + 1e-9)


class RandomTraces(unittest.TestCase):
    CASES = int(os.environ.get("TROUPE_SIM_CASES", "40"))

    def test_invariants_over_random_traces(self):
        sim = Sim(self)
        for case in range(self.CASES):
            rng = random.Random(case)
            kinds = [rng.choice(gen_sim_cluster.KINDS) for _ in range(rng.randint(1, 6))]
            if all(k == "bridge" for k in kinds):
                kinds[0] = "pcie"       # some node must take an 8-GPU pod
            jobs = []
            for i in range(rng.randint(1, 40)):
                gpus = rng.choice([1, 1, 2, 4, 8])
                pods = rng.choice([1, 1, 1, 2, 3])
                # A gang must fit the empty cluster: each node takes as many
                # of its pods as its GPUs hold whole (3 pods of 4 GPUs do not
                # fit one 8-GPU node).
                fit = sum((4 if k == "bridge" else 8) // gpus for k in kinds)
                gang = 0
                if pods > 1 and rng.random() < 0.6 and min(pods, fit) >= 2:
                    gang = rng.randint(2, min(pods, fit))
                job = {"name": f"j{i}", "arrival": round(rng.uniform(0, 7200), 3),
                       "duration": round(rng.expovariate(1 / 1800) + 1, 3),
                       "gpus": gpus, "pods": pods, "gang": gang,
                       "queue": rng.choice(["a", "b", "c"]),
                       "priority": rng.choice([0, 0, 0, 10, -5]),
                       "topology": rng.choice(["preferred", "preferred", "none"])}
                jobs.append(job)
            if rng.random() < 0.3:
                jobs.append({"name": "too-big", "arrival": 5, "duration": 60, "gpus": 9})
            trace = {"seed": case, "jobs": jobs}
            # Both orders, and queue weights for the fair one.
            cfg = os.path.join(sim.dir.name, "troupe.yaml")
            with open(cfg, "w") as f:
                f.write(f"queues:\n  a: {rng.choice([1, 2, 4])}\n  b: 0.5\n")
            order = rng.choice(["fair", "fair", "fifo"])
            with self.subTest(case=case, nodes=kinds, order=order):
                out = sim.json(cluster(kinds), trace, "--compare",
                               "binpack,topology,binpack+random", "--order", order,
                               "--config", cfg)
                self.assertEqual(out["settings"]["order"], order)
                for pol in out["policies"]:
                    check_run(self, kinds, trace, pol)
                    self.assertEqual(pol["jobs_refused"],
                                     sum(1 for j in jobs if j["gpus"] > 8))

    def test_one_queue_one_priority_fair_is_arrival_order(self):
        # With every job in one queue at one priority the fair order's first
        # two terms tie and the third is the arrival: the same runs as fifo
        # (distinct arrivals, so the name never decides).
        sim = Sim(self)
        for case in range(max(1, self.CASES // 4)):
            rng = random.Random(1000 + case)
            kinds = [rng.choice(["nvswitch", "dgx1", "pcie"]) for _ in range(rng.randint(1, 4))]
            jobs = [{"name": f"j{i}", "arrival": i * 7 + round(rng.uniform(0, 5), 3),
                     "duration": round(rng.expovariate(1 / 1800) + 1, 3),
                     "gpus": rng.choice([1, 2, 4, 8]), "pods": 2,
                     "gang": rng.choice([0, 2]), "priority": 3}
                    for i in range(rng.randint(5, 40))]
            trace = {"seed": case, "jobs": jobs}
            with self.subTest(case=case, nodes=kinds):
                runs = [sim.json(cluster(kinds), trace, "--order", o)["policies"]
                        for o in ("fair", "fifo")]
                self.assertEqual(runs[0], runs[1])

if __name__ == "__main__":
    unittest.main()
