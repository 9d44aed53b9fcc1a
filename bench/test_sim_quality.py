#!/usr/bin/env python3
"""bench/sim_quality.py's rules on made-up numbers: the 2-SE verdict, the
direction of "better" per measure, the best baseline, the Pareto front, a
missing field named, and the per-seed trace. Each case is built so that a
rule written otherwise (one SE, the SEs added instead of in quadrature, the
direction flipped, >= for >) gives another answer.
"""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sim_quality_stats import (HIGHER, LOWER, Measure, MissingField,  # noqa: E402
                               best_baseline, mean_se, non_dominated, value_of, verdict)
import sim_quality  # noqa: E402
import sim_quality_report as report  # noqa: E402
import sim_quality_run as run  # noqa: E402


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
        for name in ("wait_mean", "wait_p95", "wait_gpu_hours", "fragmentation",
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


class Fields(unittest.TestCase):
    M = Measure("x", "x", HIGHER, ("a", "b"), ("r",), multi=True)

    def test_missing_field_is_named(self):
        with self.assertRaisesRegex(MissingField, r'"a\.b"'):
            value_of(self.M, {"a": {}}, None, None, "here")
        with self.assertRaisesRegex(MissingField, r'"by_size"'):
            value_of(self.M, {"a": {"b": 1}}, 8, None, "here")

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


if __name__ == "__main__":
    unittest.main()
