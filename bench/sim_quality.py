#!/usr/bin/env python3
"""Placement quality over many seeds: troupe against the baselines, in one command.

    bench/sim_quality.py [--seeds 10] [--study single|gangs|all] [--jobs 2]
                         [--json FILE] [--plot DIR] [--front 'topology{x}' ...]

For each study (a cluster snapshot and a workload trace, the tables below) and
each seed, `troupe simulate --compare troupe's policy,baseline,... -o json`
replays the trace with every `seed:` line set to the seed; each measure
(overall and by job size) is averaged over the seeds with its standard error,
and troupe's policy is judged against the best baseline on that measure:
"leads" or "behind" only when the mean of the per-seed differences exceeds two
standard errors of those differences (the seeds pair the policies: each
replays the same trace), else "tie". It prints
Markdown tables (docs/benchmarks.md, "Placement quality") and ends with one
summary line and the measures troupe is behind on. Python standard library
only; the numbers are bench/sim_quality_stats.py's, the tables
sim_quality_report.py's, the runs sim_quality_run.py's, the plots (gnuplot)
sim_quality_plot.py's. Exit status: 0 done, 1 a run failed or a field is
missing, 2 bad usage.
"""
import argparse
import dataclasses
import glob
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sim_quality_stats import HIGHER, LOWER, Measure, MissingField  # noqa: E402
import sim_quality_plot as plot  # noqa: E402
import sim_quality_report as report  # noqa: E402
import sim_quality_run as run  # noqa: E402

ROOT = os.path.dirname(HERE)

# The studies, by kind: a cluster and a trace, relative to the source root. A
# cluster may be a glob, one study per file it matches (gangs: each cluster
# shape helper "gangs" writes). A file that is missing is an error naming it.
# "args" go to every simulate run of the study.
STUDIES = {
    "single": [
        {"name": "single", "cluster": "config/examples/cluster-sim-64.json",
         "trace": "config/examples/trace-placement.yaml"},
    ],
    "gangs": [
        # Every member asks 4 GPUs (a GB200 tray has 4): fragmentation counts
        # the free GPUs no 4-GPU member could use.
        {"name": "gangs", "cluster": "config/examples/cluster-gang-*.json",
         "trace": "config/examples/trace-gangs.yaml", "args": ["--frag-gpus", "4"]},
    ],
}

# troupe's own policy: its default score with its chooser and gang planner.
TROUPE = "topology"

# The baselines, as `troupe simulate` policies RANKER[+CHOOSER][@GANG]
# (docs/benchmarks.md says what each is and where it comes from).
BASELINES = {
    "single": [
        "binpack+lowest",               # fullest node, lowest free indices
        "binpack+random",               # fullest node, a random free set
        "binpack+besteffort",           # fullest node, go-gpuallocator best effort
        "most-allocated+besteffort",    # kube-scheduler MostAllocated + device plugin
        "least-allocated+besteffort",   # kube-scheduler's default LeastAllocated
        "best-fit+besteffort",          # fewest free GPUs left on the node
    ],
    "gangs": [
        # The planner picks each member's node; the ranker orders a member's
        # nodes where the planner leaves a choice, the chooser its devices.
        "binpack+besteffort@kueue-bestfit",             # Kueue TAS, BestFit
        "binpack+besteffort@kueue-leastfree",           # Kueue TAS, LeastFreeCapacity
        "binpack+besteffort@kai",                       # KAI (binpack is its default)
        "least-allocated+besteffort@kube-tas",          # KEP-5732, stock kube-scheduler
        "least-allocated+besteffort@kube-tas:spine",    # the same keyed on the spine
    ],
}

# troupe as kube-scheduler runs it, shown beside the baselines but never one of
# them (they are troupe): kube-scheduler's LeastAllocated plus troupe's rank
# answer at the shipped extender weight, and plus the scaled answer troupe gave
# before ranks.
DEPLOYED = {"single": ["kube", "kube-scaled"], "gangs": []}

# Every measure, its direction and where the simulator's JSON holds it
# (docs/benchmarks.md defines them). Shares are shown in %, waits in minutes.
PCT, MIN = 100.0, 1 / 60.0
MEASURES = [
    Measure("wait_mean", "mean wait, min", LOWER, ("wait_s", "mean"),
            ("wait_s", "mean"), MIN, key=True),
    Measure("wait_p95", "p95 wait, min", LOWER, ("wait_s", "p95"), ("wait_s", "p95"), MIN),
    Measure("wait_gpu_hours", "wait, GPU-hours", LOWER, ("wait_gpu_hours",),
            ("wait_gpu_hours",), key=True),
    # A policy that refuses what it cannot place (kube-tas on a gang larger than
    # one domain of its key) must not look better on waits for it.
    Measure("refused", "jobs refused, % of measured", LOWER, ("jobs_refused",), None,
            PCT, per=("jobs_measured",)),
    Measure("gpu_utilisation", "GPU utilisation, %", HIGHER, ("gpu_utilisation",), None,
            PCT, key=True),
    Measure("nvlink_rate", "NVLink-complete, % of multi-GPU pods", HIGHER,
            ("nvlink_complete", "rate"), ("nvlink_rate",), PCT, multi=True, key=True),
    Measure("link_quality", "mean link quality (0-1)", HIGHER, ("link_quality",),
            ("link_quality",), multi=True, key=True),
    Measure("fragmentation", "free GPUs no N-GPU pod can use, % of free", LOWER,
            ("fragmentation",), None, PCT),
    Measure("topology_fragmentation", "topology fragmentation, % of arrivals", LOWER,
            ("topology_fragmentation",), ("topology_fragmentation",), PCT, key=True),
    Measure("node_fragmentation", "node fragmentation, % of arrivals", LOWER,
            ("node_fragmentation",), ("node_fragmentation",), PCT),
    Measure("domain_fragmentation", "domain fragmentation, % of free GPUs", LOWER,
            ("domain_fragmentation",), None, PCT, kinds=("gangs",), key=True),
    Measure("in_one", "all pods in one {level}, % of gangs", HIGHER, ("in_one",),
            ("in_one",), PCT, kinds=("gangs",), key=True, levels=True),
]
MEASURE_NAMES = [m.name for m in MEASURES]
# A baseline troupe leads on this one is never the best on the others.
REFUSED = next(m for m in MEASURES if m.name == "refused")


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Rerun the placement-quality comparison of docs/benchmarks.md: "
        "troupe's policy against the baselines over many seeds, with a 2-SE verdict "
        "per measure.")
    ap.add_argument("--seeds", type=int, default=10,
                    help="how many seeds, FIRST to FIRST+N-1 (default 10)")
    ap.add_argument("--first-seed", type=int, default=1, help="the first seed (default 1)")
    ap.add_argument("--study", choices=["single", "gangs", "all"], default="all",
                    help="which studies to run (default all)")
    ap.add_argument("--troupe", default=TROUPE, metavar="POLICY",
                    help=f"troupe's policy to judge (default {TROUPE})")
    ap.add_argument("--baselines", metavar="P1,P2,...",
                    help="replace the baseline table for every study run")
    ap.add_argument("--measures", metavar="M1,M2,...",
                    help="only these measures (default all: " + ", ".join(MEASURE_NAMES) + ")")
    ap.add_argument("--overall-only", action="store_true",
                    help="leave out the rows by job size")
    ap.add_argument("--cluster", action="append", default=[], metavar="STUDY=FILE",
                    help="use FILE as the cluster of study STUDY (repeatable)")
    ap.add_argument("--workload", action="append", default=[], metavar="STUDY=FILE",
                    help="use FILE as the trace of study STUDY (repeatable)")
    ap.add_argument("--trace-jobs", type=int, metavar="N",
                    help="set the traces' generate block to N jobs (a quick run)")
    ap.add_argument("--sim-arg", action="append", default=[], metavar="ARG",
                    help="pass ARG on to every troupe simulate run (repeatable), "
                    "e.g. --sim-arg=--until-last-arrival")
    ap.add_argument("--jobs", type=int, default=2,
                    help="simulate runs at a time (default 2)")
    ap.add_argument("--bin", default=os.environ.get("TROUPE_BIN",
                    os.path.join(ROOT, "build", "src", "extender", "troupe")),
                    help="the troupe binary (default $TROUPE_BIN, else build/src/extender/troupe)")
    ap.add_argument("--json", metavar="FILE", help="write every number to FILE")
    ap.add_argument("--plot", metavar="DIR",
                    help="draw a bar chart per study (and the front) into DIR (gnuplot)")
    ap.add_argument("--front", metavar="TEMPLATE",
                    help="a policy family for a Pareto-front plot, {x} replaced by "
                    "each --front-values value, e.g. 'topology{x}'")
    ap.add_argument("--front-values", metavar="A,B,...",
                    help="the values of {x} for --front, each VALUE or LABEL=VALUE "
                    "(LABEL names the point)")
    ap.add_argument("--front-arg", action="append", default=[], metavar="ARG",
                    help="a simulate argument for the family's runs only, {x} replaced "
                    "too, e.g. --front-arg=--weights --front-arg=6,{x},2")
    ap.add_argument("--front-measures", default="wait_mean,nvlink_rate", metavar="X,Y",
                    help="the front's two overall measures, a level of in_one as "
                    "in_one.LEVEL (default wait_mean,nvlink_rate)")
    ap.add_argument("--front-study", metavar="NAME",
                    help="the study the front is drawn on (default the first run, "
                    "e.g. gangs/cluster-gang-nvl72)")
    ap.add_argument("--work-dir", metavar="DIR",
                    help="where the per-seed traces go (default a temporary directory, "
                    "removed at the end)")
    a = ap.parse_args(argv)
    if a.seeds < 1 or a.jobs < 1:
        ap.error("--seeds and --jobs take a number >= 1")
    if bool(a.front) != bool(a.front_values):
        ap.error("--front and --front-values go together")
    if a.front and "{x}" not in a.front + "".join(a.front_arg):
        ap.error("--front: the template (or a --front-arg) must contain {x}")
    return a


def pick_measures(a):
    """The measures --measures names (all by default); an unknown name is an error."""
    if not a.measures:
        return MEASURES
    names = a.measures.split(",")
    bad = [n for n in names if n not in MEASURE_NAMES]
    if bad:
        raise SystemExit(f"sim_quality: unknown measure {', '.join(bad)}; "
                         f"known: {', '.join(MEASURE_NAMES)}")
    return [m for m in MEASURES if m.name in names]


def overrides(pairs, flag):
    """{study: file} of --cluster/--workload STUDY=FILE."""
    out = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k or not v:
            raise SystemExit(f"sim_quality: {flag} takes STUDY=FILE, not \"{p}\"")
        out[k] = v
    return out


def in_root(path):
    return path if os.path.isabs(path) else os.path.join(ROOT, path)


def expand_studies(a):
    """The studies to run, each {name, kind, cluster, trace} with real paths.
    A cluster glob matching nothing, or a missing file, is an error."""
    kinds = ["single", "gangs"] if a.study == "all" else [a.study]
    clusters, traces = overrides(a.cluster, "--cluster"), overrides(a.workload, "--workload")
    out = []
    for kind in kinds:
        for st in STUDIES[kind]:
            cl = clusters.get(st["name"], st["cluster"])
            tr = in_root(traces.get(st["name"], st["trace"]))
            files = sorted(glob.glob(in_root(cl))) if any(c in cl for c in "*?[") \
                else [in_root(cl)]
            if not files or not os.path.isfile(files[0]):
                raise SystemExit(f"sim_quality: study {st['name']}: no cluster file "
                                 f"{cl} (see STUDIES in {__file__})")
            if not os.path.isfile(tr):
                raise SystemExit(f"sim_quality: study {st['name']}: no trace file {tr}")
            for f in files:
                name = st["name"] if len(files) == 1 else \
                    f"{st['name']}/{os.path.splitext(os.path.basename(f))[0]}"
                out.append({"name": name, "kind": kind, "cluster": f, "trace": tr,
                            "args": st.get("args", [])})
    return out


def baselines_for(a, kind):
    return a.baselines.split(",") if a.baselines else BASELINES[kind]


def rel(path):
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def run_studies(a, studies, measures, seeds, workdir):
    """Run and tabulate every study; returns [(study, baselines, results, rows)]."""
    done = []
    for st in studies:
        bl = baselines_for(a, st["kind"])
        deployed = [] if a.baselines else DEPLOYED.get(st["kind"], [])
        pols = [a.troupe] + [b for b in bl + deployed if b != a.troupe]
        res = run.run_study(a.bin, st, pols, seeds, workdir, a.jobs, a.trace_jobs,
                            [*st["args"], *a.sim_arg])
        # Paths shown relative to the source root; "real" keeps the study to rerun.
        shown = dict(st, cluster=rel(st["cluster"]), trace=rel(st["trace"]), real=st)
        barred = report.ineligible(REFUSED, res, a.troupe, pols[1:], seeds,
                                   f"study {st['name']}") + deployed
        rows = report.study_rows(shown, measures, res, a.troupe, pols[1:], seeds,
                                 not a.overall_only, barred)
        done.append((dict(shown, barred=barred, deployed=deployed), pols[1:], res, rows))
    return done


def front_measure(name):
    """The Measure a --front-measures name stands for: an overall one, or
    NAME.LEVEL for one level of a {level: share} measure (in_one.spine)."""
    base, _, level = name.partition(".")
    m = next((m for m in MEASURES if m.name == base and m.path), None)
    if m is None or bool(level) != m.levels:
        return None
    if not level:
        return m
    return dataclasses.replace(m, name=name, label=m.label.format(level=level),
                               path=(*m.path, level), bucket_path=None, levels=False)


def front_values(text):
    """--front-values as (label, value) pairs: each is VALUE or LABEL=VALUE."""
    out = []
    for v in text.split(","):
        label, sep, value = v.partition("=")
        out.append((label, value) if sep and label and value else (v, v))
    return out


def front_points(a, study, baselines, results, seeds, workdir):
    """The front's points: (label, is-family, {measure: (mean, se, n)}) for the
    family's members, troupe's policy and each baseline of <study>. A point
    that refuses more jobs than troupe (by the 2-SE rule), baseline or member,
    is drawn but never on the front: it had an easier cluster."""
    names = a.front_measures.split(",")
    ms = [front_measure(n) for n in names]
    if len(names) != 2 or None in ms:
        raise SystemExit("sim_quality: --front-measures takes two overall measures of "
                         + ", ".join(m.name + (".LEVEL" if m.levels else "")
                                     for m in MEASURES if m.path))
    fam = []
    for label, x in front_values(a.front_values):
        pol = a.front.replace("{x}", x)
        extra = [*study["real"]["args"], *a.sim_arg,
                 *(s.replace("{x}", x) for s in a.front_arg)]
        st = dict(study["real"], name=f"front-{len(fam)}")
        fam.append((a.front.replace("{x}", label) if "{x}" in a.front
                    else f"{pol} x={label}",
                    run.run_study(a.bin, st, [pol], seeds, workdir, a.jobs, a.trace_jobs,
                                  extra)[pol]))
    others = [(p, results[p]) for p in [a.troupe, *baselines]]
    res = dict(fam + others)
    barred = set(report.ineligible(REFUSED, res, a.troupe,
                                   [p for p in res if p != a.troupe], seeds,
                                   f"front of {study['name']}"))
    return plot.front_stats(ms, fam, others, seeds, study["name"], barred), ms


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    measures = pick_measures(a)
    studies = expand_studies(a)
    if not os.access(a.bin, os.X_OK):
        raise SystemExit(f"sim_quality: no troupe binary at {a.bin} (ninja -C build, or --bin)")
    seeds = list(range(a.first_seed, a.first_seed + a.seeds))
    workdir = a.work_dir or tempfile.mkdtemp(prefix="sim-quality.")
    os.makedirs(workdir, exist_ok=True)
    try:
        return emit(a, studies, measures, seeds, workdir)
    except (run.RunError, MissingField) as e:
        print(f"sim_quality: {e}", file=sys.stderr)
        return 1
    finally:
        if not a.work_dir:
            shutil.rmtree(workdir, ignore_errors=True)


def emit(a, studies, measures, seeds, workdir):
    """Run everything, print the tables and the summary, write --json and --plot."""
    done = run_studies(a, studies, measures, seeds, workdir)
    named = []
    for st, bl, _, rows in done:
        print(report.study_markdown(st, rows, a.troupe, bl, seeds, st["barred"],
                                    st["deployed"]) + "\n")
        named += [(st["name"], r) for r in rows]
    front = None
    if a.front:
        pick = [d for d in done if d[0]["name"] == a.front_study] if a.front_study \
            else done[:1]
        if not pick:
            raise SystemExit(f"sim_quality: --front-study {a.front_study}: not a study "
                             f"of this run ({', '.join(d[0]['name'] for d in done)})")
        st, bl, res, _ = pick[0]
        pts, ms = front_points(a, st, bl, res, seeds, workdir)
        front = {"study": st["name"], "measures": [m.name for m in ms], "points": pts}
        print(plot.front_markdown(pts, ms) + "\n")
    if a.plot:
        os.makedirs(a.plot, exist_ok=True)
        for st, bl, _, rows in done:
            print(f"plot: {plot.bar_chart(a.plot, st, rows, a.troupe, bl, len(seeds))}")
        if front:
            print(f"plot: {plot.front_chart(a.plot, front, ms, len(seeds))}")
        print()
    if a.json:
        write_json(a.json, a, done, seeds, front)
    print(report.summary(named, a.troupe, len(seeds)))
    return 0


def no_nan(x):
    """<x> with NaN (a SE of one seed) as null: JSON has no NaN."""
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: no_nan(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [no_nan(v) for v in x]
    return x


def write_json(path, a, done, seeds, front):
    """Every number: per study its rows with each policy's mean, SE and n."""
    out = {"troupe": a.troupe, "seeds": seeds, "studies": [], "front": front}
    for st, bl, _, rows in done:
        out["studies"].append({
            "name": st["name"], "kind": st["kind"], "cluster": st["cluster"],
            "trace": st["trace"], "args": st["args"], "baselines": bl,
            "never_best": st["barred"],
            "rows": [dict(r, stats={p: {"mean": m, "se": se, "n": n}
                                    for p, (m, se, n) in r["stats"].items()})
                     for r in rows]})
    with open(path, "w", encoding="utf-8") as f:
        json.dump(no_nan(out), f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
