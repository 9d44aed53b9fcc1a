"""Running `troupe simulate` for bench/sim_quality.py: one trace per seed, one
simulate process per (study, seed, group of policies), run --jobs at a time.

A seed is set in the trace itself, as docs/benchmarks.md has always rerun
seeds: every `seed:` line of the file (the top-level one, for ties between
equally scored nodes, and the generate block's, for the arrivals) takes the
seed, so seed k is a different workload and a different draw of ties. The
per-seed copies go to the work directory. `troupe simulate --compare` takes at
most MAX_COMPARE policies a run; longer lists are split into groups, which is
exact: the same trace and seed give every policy the same jobs and its own
stream of ties whatever else runs beside it.
"""
import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

# simulate.h's SIM_MAX_POLICIES: the most policies one --compare takes.
MAX_COMPARE = 8

SEED_RE = re.compile(r"^(\s*seed:[ \t]*)\d+", re.M)
# The generate block's job count: an indented "jobs: N" (the top-level
# "jobs:" is a list and has no number after it).
JOBS_RE = re.compile(r"^([ \t]+jobs:[ \t]*)\d+", re.M)


class RunError(Exception):
    """A simulate run or a trace could not be made; the text says which."""


def seeded_trace_text(text, path, seed, jobs=None):
    """The YAML trace <text> with every seed: line set to <seed> and, when
    <jobs> is given, the generate block's job count set to it."""
    text, n = SEED_RE.subn(lambda m: m.group(1) + str(seed), text)
    if n == 0:
        raise RunError(f"{path}: no \"seed:\" line to set the seed on")
    if jobs is not None:
        text, n = JOBS_RE.subn(lambda m: m.group(1) + str(jobs), text)
        if n == 0:
            raise RunError(f"{path}: no generate block \"jobs: N\" line for --trace-jobs")
    return text


def seeded_trace_json(text, path, seed, jobs=None):
    """The same for a JSON trace: "seed" at the top and in "generate"."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise RunError(f"{path}: not JSON: {e}") from None
    doc["seed"] = seed
    gen = doc.get("generate")
    if isinstance(gen, dict):
        gen["seed"] = seed
        if jobs is not None:
            gen["jobs"] = jobs
    elif jobs is not None:
        raise RunError(f"{path}: no generate block for --trace-jobs")
    return json.dumps(doc)


def write_seeded_trace(src, workdir, tag, seed, jobs=None):
    """Write <src> with the seed set under <workdir>; returns the new path."""
    try:
        with open(src, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise RunError(f"cannot read the trace {src}: {e.strerror}") from None
    is_json = src.endswith(".json")
    out = (seeded_trace_json if is_json else seeded_trace_text)(text, src, seed, jobs)
    dst = os.path.join(workdir, f"{tag}-seed{seed}{'.json' if is_json else '.yaml'}")
    with open(dst, "w", encoding="utf-8") as f:
        f.write(out)
    return dst


def groups(policies, size=MAX_COMPARE):
    """<policies> cut into runs of at most <size>."""
    return [policies[i:i + size] for i in range(0, len(policies), size)]


def simulate(binary, cluster, trace, policies, extra=()):
    """One `troupe simulate ... --compare P1,P2 -o json`; returns
    {policy name: its JSON object}. A non-zero exit, a bad JSON or a policy
    missing from it is a RunError carrying simulate's own message."""
    cmd = [binary, "simulate", "--cluster", cluster, "--workload", trace,
           "--compare", ",".join(policies), "-o", "json", *extra]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise RunError(f"cannot run {binary}: {e.strerror}") from None
    if r.returncode != 0:
        msg = "\n".join(l for l in r.stderr.splitlines() if "troupe simulate" in l)
        raise RunError(f"{' '.join(cmd)}\nexited {r.returncode}: "
                       f"{msg or r.stderr.strip()[-2000:]}")
    try:
        doc = json.loads(r.stdout)
        got = {p["policy"]: p for p in doc["policies"]}
    except (ValueError, KeyError, TypeError) as e:
        raise RunError(f"{' '.join(cmd)}: unreadable JSON ({e})") from None
    for p in policies:
        if p not in got:
            raise RunError(f"{' '.join(cmd)}: no result for policy \"{p}\"")
    return got


def run_all(tasks, jobs):
    """Run <tasks> (callables returning a value) <jobs> at a time; returns
    their values in order. The first failure cancels the runs not yet
    started and is raised once the running ones have ended, so no process is
    left behind."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        futures = [ex.submit(t) for t in tasks]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:       # the queued ones need not run
                f.cancel()
            raise


def run_study(binary, study, policies, seeds, workdir, jobs, trace_jobs=None, extra=()):
    """Every policy of <study> over every seed: {policy: [its JSON per seed]},
    the lists in the order of <seeds>."""
    tag = study["name"].replace("/", "-")
    traces = {s: write_seeded_trace(study["trace"], workdir, tag, s, trace_jobs)
              for s in seeds}
    keys, tasks = [], []
    for s in seeds:
        for g in groups(policies):
            keys.append(s)
            tasks.append(lambda s=s, g=g: simulate(binary, study["cluster"], traces[s],
                                                   g, extra))
    results = run_all(tasks, jobs)
    by_seed = {s: {} for s in seeds}
    for s, got in zip(keys, results):
        by_seed[s].update(got)
    return {p: [by_seed[s][p] for s in seeds] for p in policies}
