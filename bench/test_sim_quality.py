#!/usr/bin/env python3
"""bench/sim_quality.py's rules on made-up numbers: the 2-SE verdict, the
direction of "better" per measure, the best baseline, the Pareto front, a
missing field named, and the per-seed trace. Each case is built so that a
rule written otherwise (one SE, the SEs added instead of in quadrature, the
direction flipped, >= for >) gives another answer.
"""
import contextlib
import io
import json
import math
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_quality_stats import (HIGHER, LOWER, Measure, MissingField,  # noqa: E402
                               best_baseline, mean_se, non_dominated, paired_verdict,
                               value_of, verdict)
import sim_quality  # noqa: E402
import sim_quality_plot as plot  # noqa: E402
import sim_quality_report as report  # noqa: E402
import sim_quality_run as run  # noqa: E402


class PairedVerdict(unittest.TestCase):
    """The rule the tables use: the seeds pair the policies (each replays the
    same trace), so the per-seed differences are judged."""

    def test_a_constant_lead_over_noisy_seeds_is_a_lead(self):
        ys = [10.0 + 3 * s for s in range(5)]
        self.assertEqual(paired_verdict([y + 0.1 for y in ys], ys, HIGHER), "leads")
        self.assertEqual(paired_verdict([y + 0.1 for y in ys], ys, LOWER), "behind")
        # Unpaired, the seeds' own spread hides it.
        a, b = mean_se([y + 0.1 for y in ys]), mean_se(ys)
        self.assertEqual(verdict(a, b, HIGHER), "tie")

    def test_two_se_of_the_differences(self):
        # Differences 3 and 0.5: mean 1.75, SE 1.25; one SE would call it a lead.
        self.assertEqual(paired_verdict([3.0, 0.5], [0.0, 0.0], HIGHER), "tie")
        # Differences 3 and 1: mean 2 = exactly 2 SE: a tie.
        self.assertEqual(paired_verdict([3.0, 1.0], [0.0, 0.0], HIGHER), "tie")
        # 2.2 and 1.8 and 2.0: well past 2 SE.
        self.assertEqual(paired_verdict([2.2, 1.8, 2.0], [0.0, 0.0, 0.0], HIGHER), "leads")
        self.assertEqual(paired_verdict([0.0, 0.0, 0.0], [2.2, 1.8, 2.0], HIGHER), "behind")

    def test_missing_seeds_and_one_seed(self):
        self.assertEqual(paired_verdict([None, 2.0, 2.1, 1.9], [5.0, 0.0, 0.0, None],
                                        HIGHER), "leads")
        self.assertEqual(paired_verdict([1.0, None], [0.0, 3.0], HIGHER), "tie")
        self.assertEqual(paired_verdict([None], [1.0], HIGHER), "n/a")


class Verdict(unittest.TestCase):
    def test_two_se_of_the_difference(self):
        # se of the difference: sqrt(3^2 + 4^2) = 5; 2 SE = 10.
        self.assertEqual(verdict((110.5, 3, 10), (100, 4, 10), HIGHER), "leads")
        self.assertEqual(verdict((109.5, 3, 10), (100, 4, 10), HIGHER), "tie")
        # One SE (5) or the plain sum of SEs (7) would call 9.5 apart a lead;
        # 2 x the sum (14) would call 12 a tie.
        self.assertEqual(verdict((112, 3, 10), (100, 4, 10), HIGHER), "leads")
        self.assertEqual(verdict((89.5, 3, 10), (100, 4, 10), HIGHER), "behind")
        self.assertEqual(verdict((90.5, 3, 10), (100, 4, 10), HIGHER), "tie")

    def test_exactly_two_se_is_a_tie(self):
        self.assertEqual(verdict((110, 3, 10), (100, 4, 10), HIGHER), "tie")
        self.assertEqual(verdict((90, 3, 10), (100, 4, 10), HIGHER), "tie")

    def test_lower_is_better_flips(self):
        self.assertEqual(verdict((1.0, 0.1, 10), (2.0, 0.1, 10), LOWER), "leads")
        self.assertEqual(verdict((2.0, 0.1, 10), (1.0, 0.1, 10), LOWER), "behind")
        self.assertEqual(verdict((1.0, 0.1, 10), (2.0, 0.1, 10), HIGHER), "behind")

    def test_no_spread_and_no_values(self):
        self.assertEqual(verdict((1.0, 0.0, 10), (1.0, 0.0, 10), HIGHER), "tie")
        self.assertEqual(verdict((1.1, 0.0, 10), (1.0, 0.0, 10), HIGHER), "leads")
        self.assertEqual(verdict((5.0, math.nan, 1), (1.0, math.nan, 1), HIGHER), "tie")
        self.assertEqual(verdict((5.0, 1.0, 0), (1.0, 0.1, 10), HIGHER), "n/a")


class Stats(unittest.TestCase):
    def test_mean_se(self):
        m, se, n = mean_se([1.0, 2.0, 3.0, None])
        self.assertEqual((m, n), (2.0, 3))
        self.assertAlmostEqual(se, 1.0 / math.sqrt(3))     # sample sd 1
        self.assertTrue(math.isnan(mean_se([4.0])[1]))
        self.assertEqual(mean_se([None])[2], 0)

    def test_best_baseline_by_direction(self):
        stats = {"a": (1.0, 0, 3), "b": (3.0, 0, 3), "c": (9.0, 0, 0)}
        self.assertEqual(best_baseline(stats, ["a", "b", "c"], HIGHER), "b")
        self.assertEqual(best_baseline(stats, ["a", "b", "c"], LOWER), "a")
        self.assertIsNone(best_baseline(stats, ["c"], LOWER))

    def test_directions_of_the_measures(self):
        d = {m.name: m.better for m in sim_quality.MEASURES}
        for name in ("wait_mean", "wait_p95", "wait_gpu_hours", "refused", "fragmentation",
                     "topology_fragmentation", "node_fragmentation",
                     "domain_fragmentation"):
            self.assertEqual(d[name], LOWER, name)
        for name in ("nvlink_rate", "link_quality", "gpu_utilisation", "in_one"):
            self.assertEqual(d[name], HIGHER, name)

    def test_pareto_front(self):
        # (wait lower, rate higher): (1, 5) dominates (2, 4); (3, 9) is on it.
        pts = [(1, 5), (2, 4), (3, 9), (1, 5), (3, 8)]
        self.assertEqual(non_dominated(pts, [LOWER, HIGHER]), [0, 2, 3])
        self.assertEqual(non_dominated(pts, [HIGHER, HIGHER]), [2])


class Front(unittest.TestCase):
    def test_measures_values_and_barred_points(self):
        m = sim_quality.front_measure("in_one.spine")
        self.assertEqual((m.name, m.label, m.path, m.better),
                         ("in_one.spine", "all pods in one spine, % of gangs",
                          ("in_one", "spine"), HIGHER))
        self.assertEqual(value_of(m, {"in_one": {"spine": 0.75}}, None, None, "h"), 0.75)
        for bad in ("in_one", "wait_mean.spine", "nope", "refused.x"):
            self.assertIsNone(sim_quality.front_measure(bad), bad)
        self.assertEqual(sim_quality.front_values("none,spine=required:a/b"),
                         [("none", "none"), ("spine", "required:a/b")])
        # A point that refused jobs is drawn, never on the front, even when
        # it waits least: the point it would have pushed off stays on.
        w = Measure("w", "w", LOWER, ("w",), None)
        q = Measure("q", "q", HIGHER, ("q",), None)
        fam = [("f", [{"w": 5, "q": 5}, {"w": 5, "q": 5}])]
        others = [("easy", [{"w": 1, "q": 9}, {"w": 1, "q": 9}])]
        pts = plot.front_stats([w, q], fam, others, [1, 2], "h", {"easy"})
        self.assertEqual([(p["label"], p["front"], p["barred"]) for p in pts],
                         [("f", True, False), ("easy", False, True)])
        self.assertIn("refuses more jobs than troupe", plot.front_markdown(pts, [w, q]))
        pts = plot.front_stats([w, q], fam, others, [1, 2], "h")
        self.assertEqual([p["front"] for p in pts], [False, True])

    @unittest.skipUnless(shutil.which("gnuplot"), "no gnuplot")
    def test_the_front_is_drawn_with_and_without_barred_points(self):
        # gnuplot fails (or crashes) on an empty data block: a front with no
        # barred point, and one with only barred points besides the family.
        w = Measure("w", "w", LOWER, ("w",), None)
        q = Measure("q", "q", HIGHER, ("q",), None)
        fam = [("f", [{"w": 5, "q": 5}, {"w": 6, "q": 5}])]
        others = [("easy", [{"w": 1, "q": 9}, {"w": 1, "q": 8}])]
        with tempfile.TemporaryDirectory() as d:
            for i, barred in enumerate(((), {"easy"})):
                front = {"study": f"s/{i}", "points": plot.front_stats(
                    [w, q], fam, others, [1, 2], "h", barred)}
                png = plot.front_chart(d, front, [w, q], 2)
                self.assertEqual(png, os.path.join(d, f"sim_quality_front_s-{i}.png"))
                self.assertGreater(os.path.getsize(png), 1000)


class Fields(unittest.TestCase):
    M = Measure("x", "x", HIGHER, ("a", "b"), ("r",), multi=True)

    def test_missing_field_is_named(self):
        with self.assertRaisesRegex(MissingField, r'"a\.b"'):
            value_of(self.M, {"a": {}}, None, None, "here")
        with self.assertRaisesRegex(MissingField, r'"by_size"'):
            value_of(self.M, {"a": {"b": 1}}, 8, None, "here")

    def test_a_count_over_a_count(self):
        m = Measure("r", "r", LOWER, ("refused",), None, per=("measured",))
        self.assertEqual(value_of(m, {"refused": 5, "measured": 20}, None, None, "h"), 0.25)
        self.assertIsNone(value_of(m, {"refused": 0, "measured": 0}, None, None, "h"))
        with self.assertRaisesRegex(MissingField, r'"measured"'):
            value_of(m, {"refused": 5}, None, None, "h")

    def test_bucket_values(self):
        obj = {"by_size": [{"size": 1, "pods_multi": 0, "r": 0.0},
                           {"size": 8, "pods_multi": 3, "r": 0.5}]}
        self.assertIsNone(value_of(self.M, obj, 1, None, "here"))    # no multi-GPU pod
        self.assertEqual(value_of(self.M, obj, 8, None, "here"), 0.5)
        self.assertIsNone(value_of(self.M, obj, 16, None, "here"))   # no such job

    def test_levels_rows_in_level_order(self):
        m = Measure("in_one", "in one {level}", HIGHER, ("in_one",), ("in_one",),
                    kinds=("gangs",), levels=True)
        run_ = {"in_one": {"block": 0.5, "spine": 0.9},
                "by_size": [{"size": 1}, {"size": 16, "in_one": {"block": 0.25}}]}
        res = {"t": [run_, run_], "a": [run_, run_]}
        rows = report.study_rows({"name": "g", "kind": "gangs"}, [m], res, "t", ["a"],
                                 [1, 2])
        self.assertEqual([(r["label"], r["size"]) for r in rows],
                         [("in one spine", None), ("in one block", None),
                          ("in one block", 16)])
        # Not a measure of the single-pod study.
        self.assertEqual(report.study_rows({"name": "s", "kind": "single"}, [m], res,
                                           "t", ["a"], [1, 2]), [])

    def test_one_value_everywhere_is_not_counted(self):
        m = Measure("q", "q", HIGHER, ("q",), None)
        res = {"t": [{"q": 0.0}, {"q": 0.0}], "a": [{"q": 0.0}, {"q": 0.0}]}
        rows = report.study_rows({"name": "s", "kind": "single"}, [m], res, "t", ["a"],
                                 [1, 2])
        self.assertEqual(rows[0]["verdict"], "same")
        self.assertIn("of 0 measures (1 more the same for every policy, not counted)",
                      report.summary([("s", rows[0])], "t", 2))
        # Equal means but a spread over seeds is a tie, and counted.
        res = {"t": [{"q": 0.0}, {"q": 1.0}], "a": [{"q": 1.0}, {"q": 0.0}]}
        rows = report.study_rows({"name": "s", "kind": "single"}, [m], res, "t", ["a"],
                                 [1, 2])
        self.assertEqual(rows[0]["verdict"], "tie")

    def test_a_baseline_refusing_more_is_never_the_best(self):
        ref = sim_quality.REFUSED
        wait = Measure("w", "w", LOWER, ("w",), None)

        def runs(refused, waits):
            return [{"jobs_refused": r, "jobs_measured": 100, "w": w}
                    for r, w in zip(refused, waits)]
        res = {"t": runs([0, 0, 0], [10, 11, 12]),
               "easy": runs([5, 6, 5], [0, 0, 1]),       # refuses 5 %: waits less
               "slow": runs([0, 0, 0], [20, 21, 22])}
        barred = report.ineligible(ref, res, "t", ["easy", "slow"], [1, 2, 3], "h")
        self.assertEqual(barred, ["easy"])
        rows = report.study_rows({"name": "s", "kind": "single"}, [ref, wait], res, "t",
                                 ["easy", "slow"], [1, 2, 3], True, barred)
        by = {r["measure"]: r for r in rows}
        self.assertEqual((by["w"]["best"], by["w"]["verdict"]), ("slow", "leads"))
        # The refused row itself still compares with every baseline.
        self.assertEqual((by["refused"]["best"], by["refused"]["verdict"]), ("slow", "tie"))
        # Refusing no more than troupe (within 2 SE) bars nothing.
        res["easy"] = runs([0, 1, 0], [0, 0, 1])
        self.assertEqual(report.ineligible(ref, res, "t", ["easy", "slow"], [1, 2, 3],
                                           "h"), [])

    def test_rows_and_summary(self):
        m = Measure("q", "q", HIGHER, ("q",), None)
        res = {"t": [{"q": v} for v in (10, 11, 12)],
               "a": [{"q": v} for v in (1, 2, 3)],
               "b": [{"q": v} for v in (20, 21, 22)]}
        study = {"name": "s", "kind": "single"}
        rows = report.study_rows(study, [m], res, "t", ["a", "b"], [1, 2, 3])
        self.assertEqual((rows[0]["best"], rows[0]["verdict"]), ("b", "behind"))
        text = report.summary([("s", rows[0])], "t", 3)
        self.assertIn("leads on 0, ties on 0, behind on 1 of 1 measures", text)
        self.assertIn("behind on: s: q", text)


class TradeOffs(unittest.TestCase):
    """A row behind is a measured trade-off only where troupe leads that row's
    best baseline on another row, beyond 2 SE of the paired differences."""
    W = Measure("wait_gpu_hours", "w", LOWER, ("wait_gpu_hours",), None)
    Q = Measure("q", "q", HIGHER, ("q",), None)
    R = Measure("r", "r", HIGHER, ("r",), None)

    def rows(self, res):
        return [("s", r) for r in report.study_rows(
            {"name": "s", "kind": "single"}, [self.W, self.Q, self.R], res, "t", ["a"],
            [1, 2, 3])]

    @staticmethod
    def runs(w, q, r):
        return [{"wait_gpu_hours": a, "q": b, "r": c} for a, b, c in zip(w, q, r)]

    def test_led_on_the_objective(self):
        res = {"t": self.runs([10, 11, 12], [1, 2, 3], [5, 5, 5]),
               "a": self.runs([20, 21, 22], [5, 6, 7], [5, 5, 5])}
        named = self.rows(res)
        q = next(r for _, r in named if r["measure"] == "q")
        self.assertEqual(q["verdict"], "behind")
        self.assertEqual(report.trade_off(named, "s", q, "t")["measure"], "wait_gpu_hours")
        self.assertTrue(report.summary(named, "t", 3).endswith("): met"))

    def test_led_on_another_row(self):
        res = {"t": self.runs([10, 11, 12], [1, 2, 3], [9, 9, 10]),
               "a": self.runs([10, 12, 11], [5, 6, 7], [5, 5, 5])}
        named = self.rows(res)
        q = next(r for _, r in named if r["measure"] == "q")
        self.assertEqual(report.trade_off(named, "s", q, "t")["measure"], "r")
        self.assertIn("0 are against a policy troupe leads on the objective "
                      "(wait_gpu_hours), 1 against one", report.summary(named, "t", 3))

    def test_dominated(self):
        # a ties troupe on waiting and on r (within 2 SE), and beats it on q.
        res = {"t": self.runs([10, 11, 12], [1, 2, 3], [5, 6, 5]),
               "a": self.runs([10, 12, 11], [5, 6, 7], [5, 5, 6])}
        named = self.rows(res)
        q = next(r for _, r in named if r["measure"] == "q")
        self.assertIsNone(report.trade_off(named, "s", q, "t"))
        text = report.summary(named, "t", 3)
        self.assertIn("1 against a policy as good as troupe on every row: s: q (by a)", text)
        self.assertTrue(text.endswith("): not met"), text)


class Traces(unittest.TestCase):
    def test_every_seed_line_and_the_job_count(self):
        text = "seed: 1\nwarmup: 0.1\ngenerate:\n  jobs: 50000\n  seed: 1\n"
        out = run.seeded_trace_text(text, "t.yaml", 7, 500)
        self.assertEqual(out, "seed: 7\nwarmup: 0.1\ngenerate:\n  jobs: 500\n  seed: 7\n")
        with self.assertRaises(run.RunError):
            run.seeded_trace_text("jobs: []\n", "t.yaml", 7)

    def test_groups_fit_compare(self):
        g = run.groups([str(i) for i in range(17)])
        self.assertEqual([len(x) for x in g], [8, 8, 1])


# A stand-in for `troupe simulate -o json`: every policy's figures from its
# name and the trace's seed, so the whole command (seeds in the traces, runs in
# groups of 8, rows, summary, --json) is checked without the real simulator.
# "topology" waits longer than every other policy (behind), has a better
# NVLink rate by far (leads) and the same utilisation give or take the seed (tie).
FAKE = r'''#!/usr/bin/env python3
import json, re, sys
a = sys.argv[1:]
pols = a[a.index("--compare") + 1].split(",")
if len(pols) > 8:
    sys.exit("troupe simulate: --compare: at most 8 policies")
seed = int(re.search(r"^seed: (\d+)", open(a[a.index("--workload") + 1]).read(), re.M).group(1))
def fig(p):
    t = p == "topology"
    w = {"n": 10, "mean": (200.0 if t else 100.0) + seed, "p50": 0, "p95": 1, "max": 2}
    b = [{"size": 1, "jobs": 5, "pods_multi": 0, "nvlink_rate": 0, "link_quality": 0,
          "topology_fragmentation": 0, "node_fragmentation": 0, "wait_s": w,
          "wait_gpu_hours": 1.0},
         {"size": 8, "jobs": 5, "pods_multi": 5, "nvlink_rate": 0.9 if t else 0.5,
          "link_quality": 0.5, "topology_fragmentation": 0.1, "node_fragmentation": 0.1,
          "wait_s": w, "wait_gpu_hours": 1.0}]
    return {"policy": p, "jobs_measured": 10, "jobs_refused": 0, "wait_s": w,
            "wait_gpu_hours": 1.0 + seed,
            "gpu_utilisation": 0.5 + 0.01 * seed + (0.001 if t else 0),
            "nvlink_complete": {"pods": 5, "nvlink": 1, "rate": 0.9 if t else 0.5},
            "link_quality": 0.5, "fragmentation": 0.2, "topology_fragmentation": 0.1,
            "node_fragmentation": 0.1, "domain_fragmentation": 0.1, "by_size": b}
print(json.dumps({"policies": [fig(p) for p in pols]}))
'''


class Command(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="test-sim-quality.")
        self.bin = os.path.join(self.dir, "troupe")
        with open(self.bin, "w") as f:
            f.write(FAKE)
        os.chmod(self.bin, 0o755)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def run_it(self, *args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = sim_quality.main(["--bin", self.bin, "--study", "single", *args])
        return rc, out.getvalue(), err.getvalue()

    def test_the_whole_command(self):
        js = os.path.join(self.dir, "out.json")
        rc, out, err = self.run_it("--seeds", "3", "--json", js, "--measures",
                                   "wait_mean,nvlink_rate,gpu_utilisation",
                                   "--baselines", ",".join(f"b{i}" for i in range(9)))
        self.assertEqual(rc, 0, err)
        last = out.strip().splitlines()
        # Utilisation: troupe 0.001 above every baseline on every seed, the
        # seeds themselves 0.01 apart: a lead only because the seeds pair the
        # runs (unpaired, the seeds' spread would make it a tie).
        self.assertEqual(last[-4], "troupe (topology) vs best baseline over 3 seeds: "
                         "leads on 3, ties on 0, behind on 3 of 6 measures")
        self.assertEqual(last[-3], "behind on: single: mean wait, min; "
                         "single: mean wait, min (size 1); single: mean wait, min (size 8)")
        # The baseline that waits less has the worse NVLink rate: a trade-off.
        self.assertEqual(last[-2], "trade-offs: of the 3 rows behind, 0 are against a "
                         "policy troupe leads on the objective (wait_gpu_hours), 3 against "
                         "one troupe leads on another row; 0 against a policy as good as "
                         "troupe on every row")
        self.assertTrue(last[-1].endswith(": met"), last[-1])
        with open(js) as f:
            doc = json.load(f)
        rows = {(r["measure"], r["size"]): r for r in doc["studies"][0]["rows"]}
        self.assertEqual(rows[("nvlink_rate", 8)]["verdict"], "leads")
        self.assertNotIn(("nvlink_rate", 1), rows)     # no multi-GPU pod of size 1
        self.assertEqual(rows[("wait_mean", None)]["stats"]["b8"]["n"], 3)

    def test_a_missing_field_fails_naming_it(self):
        rc, _, err = self.run_it("--seeds", "2", "--measures", "in_one",
                                 "--study", "single")
        self.assertEqual(rc, 0)     # in_one is a gang measure: not asked of single
        with open(self.bin) as f:
            text = f.read()
        with open(self.bin, "w") as f:
            f.write(text.replace('"wait_gpu_hours": 1.0 + seed,', ""))
        rc, _, err = self.run_it("--seeds", "2", "--overall-only")
        self.assertEqual(rc, 1)
        self.assertIn('no field "wait_gpu_hours"', err)


if __name__ == "__main__":
    unittest.main()
