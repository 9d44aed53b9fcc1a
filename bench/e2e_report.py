"""What bench/e2e reports from the saved results of one size: the Markdown tables
(per configuration; (b) over (a) within each repetition; CPU time per pod; the
5,000-node target; the pinning layouts against the main one), the block of the
bench:e2e section of docs/benchmarks.md it replaces (--write-docs), and the
gnuplot figure docs/bench-e2e.png drawn from every size in that section.

Reads only the saved JSON (e2e_runs.py writes it), so --report-only redraws the
docs from results without starting a cluster.
"""
import json
import os
import re
import statistics
import subprocess
import sys

from e2e_runs import LAYOUT_TEXT, log

MODES = {"a": "kube-scheduler alone", "b": "kube-scheduler + troupe"}


# ---- reports ------------------------------------------------------------------

def med(vals):
    vals = [v for v in vals if v is not None]
    return (statistics.median(vals), min(vals), max(vals)) if vals else None


def f(v, digits=0, spread=True):
    if v is None:
        return "-"
    m, lo, hi = v
    s = f"{m:,.{digits}f}"
    if spread and len({round(lo, digits), round(hi, digits)}) > 1:
        s += f" ({lo:,.{digits}f}–{hi:,.{digits}f})"
    return s


def group(runs, **match):
    return [r for r in runs if all(r[k] == v for k, v in match.items())]


def pair_ratios(runs, key, **match):
    """(b)/(a) of <key> for each repetition, a and b from the same repetition."""
    out = []
    for rep in sorted({r["rep"] for r in runs}):
        a = group(runs, mode="a", rep=rep, **match)
        b = group(runs, mode="b", rep=rep, **match)
        if a and b and a[0].get(key) and b[0].get(key) is not None:
            out.append(b[0][key] / a[0][key])
    return med(out)


def workload_label(w, a):
    if w == "bulk":
        return f"bulk (backlog), {a['pods']:,} × 1 GPU"
    if w == "burst":
        return f"bulk (created while scheduling), {a['pods']:,} × 1 GPU"
    if w == "rate":
        return f"steady, {a['rate']:g} pods/s × {a['rate_seconds']:g} s (1 GPU)"
    return f"gang, {a['gangs']} × {a['gang_size']} pods × {a['gang_gpus']} GPUs"


def report(data):
    """Markdown for one size's results (data: the saved JSON)."""
    a, runs, size = data["args"], data["runs"], data["size"]
    pins = data.get("pins") or sorted({r["pin"] for r in runs}, key=lambda p: p != "none")
    main_pin = data.get("main_pin") or pins[0]
    tag = {"": "", "pin": ": pinned or not"}.get(data.get("tag") or "", ": " + (data.get("tag") or ""))
    out = [f"#### {size:,} nodes{tag}",
           "",
           f"{data['date']}. {data['machine']} {data['versions']}",
           "",
           f"{len({r['rep'] for r in runs})} interleaved repetition(s); every figure is the "
           f"median over them (min–max); cluster up (nodes created) in {data['up_seconds']:.0f} s, "
           f"all runs in {data['seconds'] / 60:.1f} min. Pinning: "
           + LAYOUT_TEXT[main_pin] + "."
           + ("" if len(pins) < 2 else " The main tables are the runs pinned so; the last "
              "table compares the other layouts: " + "; ".join(
                  f"*{p}*: {LAYOUT_TEXT[p]}" for p in pins[1:]) + "."),
           "",
           "| workload | percentageOfNodesToScore | scheduler | pods/s | watch p50 / p99 ms "
           "| SLI p50 / p99 ms | cycle ms/pod | troupe ms/pod (share of cycle) | troupe calls/pod "
           "(filter, prioritize, bind) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for w in a["workloads"]:
        for pct in a["percentages"]:
            for mode in ("a", "b"):
                rs = group(runs, workload=w, pct=pct, mode=mode, pin=main_pin)
                if w == "gang" and mode == "a":
                    out.append(f"| {workload_label(w, a)} | {pct} | {MODES['a']} | — | — | — | — "
                               "| — | kube-scheduler alone has no gangs |")
                    continue
                if not rs:
                    continue
                p50, p99 = med([r["p50_ms"] for r in rs]), med([r["p99_ms"] for r in rs])
                s50, s99 = med([r["sli_p50_ms"] for r in rs]), med([r["sli_p99_ms"] for r in rs])
                tms = med([r.get("troupe_ms") for r in rs])
                share = med([r["troupe_ms"] / r["cycle_ms"] for r in rs
                             if r.get("troupe_ms") is not None and r["cycle_ms"]])
                calls = "-"
                withcalls = [r for r in rs if r.get("troupe_requests")]
                if withcalls:
                    calls = " / ".join(
                        f"{statistics.median(r['troupe_requests'][v] / max(r['scheduled'], 1) for r in withcalls):.2f}"
                        for v in ("filter", "prioritize", "bind"))
                out.append(
                    f"| {workload_label(w, a)} | {pct} | {MODES[mode]} "
                    f"| {f(med([r['pods_per_second'] for r in rs]))} "
                    f"| {f(p50, spread=False)} / {f(p99, spread=False)} "
                    f"| {f(s50, spread=False)} / {f(s99, spread=False)} "
                    f"| {f(med([r['cycle_ms'] for r in rs]), 2)} "
                    f"| {f(tms, 2, spread=False)}"
                    + (f" ({share[0] * 100:.0f} %)" if share else "") + f" | {calls} |")
    out += ["", "(b) / (a), each repetition's b over its own a, median (min–max):", "",
            "| workload | percentageOfNodesToScore | pods/s | watch p50 | watch p99 | SLI p50 "
            "| SLI p99 | cycle ms/pod | extra cycle ms/pod (b − a) | troupe's share of the extra |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for w in a["workloads"]:
        if w == "gang":
            continue
        for pct in a["percentages"]:
            m = dict(workload=w, pct=pct, pin=main_pin)
            ra, rb = group(runs, mode="a", **m), group(runs, mode="b", **m)
            if not ra or not rb:
                continue
            extra = med([b["cycle_ms"] - x["cycle_ms"] for b in rb for x in ra
                         if b["rep"] == x["rep"]])
            tshare = med([b["troupe_ms"] / (b["cycle_ms"] - x["cycle_ms"])
                          for b in rb for x in ra if b["rep"] == x["rep"]
                          and b.get("troupe_ms") is not None and b["cycle_ms"] > x["cycle_ms"]])
            out.append(f"| {workload_label(w, a)} | {pct} "
                       f"| **{f(pair_ratios(runs, 'pods_per_second', **m), 2)}** "
                       f"| {f(pair_ratios(runs, 'p50_ms', **m), 2)} "
                       f"| {f(pair_ratios(runs, 'p99_ms', **m), 2)} "
                       f"| {f(pair_ratios(runs, 'sli_p50_ms', **m), 2)} "
                       f"| {f(pair_ratios(runs, 'sli_p99_ms', **m), 2)} "
                       f"| {f(pair_ratios(runs, 'cycle_ms', **m), 2)} "
                       f"| {f(extra, 2)} | "
                       + (f"{tshare[0] * 100:.0f} %" if tshare else "-") + " |")
    comps = [("kube-apiserver", "kube-apiserver"), ("etcd", "etcd"),
             ("kube-controller-manager", "controller-manager"), ("kubesim", "kubesim kubelet"),
             ("kube-scheduler", "kube-scheduler"), ("troupe", "troupe")]
    out += ["", "CPU time per scheduled pod, ms (from /proc/PID/stat over the run; median):", "",
            "| workload | percentageOfNodesToScore | scheduler | "
            + " | ".join(c[1] for c in comps) + " | all |",
            "|---|---|---|" + "---|" * (len(comps) + 1)]
    for w in a["workloads"]:
        for pct in a["percentages"]:
            for mode in ("a", "b"):
                rs = [r for r in group(runs, workload=w, pct=pct, mode=mode, pin=main_pin)
                      if r.get("cpu_ms")]
                if not rs:
                    continue
                cells = [med([r["cpu_ms"].get(c) for r in rs]) for c, _ in comps]
                out.append(f"| {workload_label(w, a)} | {pct} | {MODES[mode]} | "
                           + " | ".join(f"{x[0]:.2f}" if x else "-" for x in cells)
                           + f" | {statistics.median(sum(r['cpu_ms'].values()) for r in rs):.2f} |")
    if size >= 5000 and not data.get("tag"):
        said = []
        for pct, what in ((0, "at the adaptive percentage"),
                          (100, "at 100 %, the shipped setting (which gangs need)")):
            v = pair_ratios(runs, "pods_per_second", workload="bulk", pct=pct, pin=main_pin)
            if v:
                said.append(f"{what} **{'met' if v[0] >= 0.70 else 'missed'}** ({v[0]:.2f})")
        if said:
            out += ["", "Target (a benchmark figure, not a test): (b) at least 70 % of (a)'s "
                    "pods/s at 5,000 nodes, bulk: " + "; ".join(said) + "."]
    if len(pins) > 1:
        base = pins[0]
        out += ["", f"Pinning: pods/s in each layout, and over *{base}* in the same repetition; "
                "(b) / (a) within each layout. Median (min–max):", "",
                "| workload | percentageOfNodesToScore | layout | (a) pods/s | (b) pods/s "
                f"| (a) over *{base}* | (b) over *{base}* | (b) / (a) |",
                "|---|---|---|---|---|---|---|---|"]
        for w in a["workloads"]:
            if w == "gang":
                continue
            for pct in a["percentages"]:
                for pin in pins:
                    cells = []
                    for mode in ("a", "b"):
                        cells.append(f(med([r["pods_per_second"] for r in group(
                            runs, workload=w, pct=pct, mode=mode, pin=pin)])))
                    for mode in ("a", "b"):
                        u = group(runs, workload=w, pct=pct, mode=mode, pin=base)
                        p = group(runs, workload=w, pct=pct, mode=mode, pin=pin)
                        rat = med([x["pods_per_second"] / y["pods_per_second"] for x in p
                                   for y in u if x["rep"] == y["rep"] and y["pods_per_second"]])
                        cells.append("1" if pin == base else f(rat, 2))
                    ab = pair_ratios(runs, "pods_per_second", workload=w, pct=pct, pin=pin)
                    out.append(f"| {workload_label(w, a)} | {pct} | *{pin}* | "
                               + " | ".join(cells) + f" | {f(ab, 2)} |")
    fails = [r for r in runs if r["scheduled"] < r["pods"]]
    if fails:
        out += ["", "Runs that bound fewer pods than they created: " + ", ".join(
            f"{r['mode']} {r['workload']} pct {r['pct']} rep {r['rep']} ({r['scheduled']}/{r['pods']})"
            for r in fails) + "."]
    out.append("")
    return "\n".join(out)


# ---- docs and plot --------------------------------------------------------------

START, END = "<!-- bench:e2e:start -->", "<!-- bench:e2e:end -->"


BLOCK = re.compile(r"<!-- bench:e2e:(\d+(?:-[\w-]+)?):start -->(.*?)<!-- bench:e2e:\1:end -->",
                   re.S)


def block_order(key):
    size, _, tag = key.partition("-")
    return (int(size), tag)


def write_docs(path, key, text):
    """Put <text> in the block <key> (a size, or size-tag) of the bench:e2e section,
    blocks in size order; return the untagged sizes the section now holds."""
    with open(path) as fh:
        doc = fh.read()
    if START not in doc or END not in doc:
        sys.exit(f"{path} has no {START} ... {END} section")
    head, rest = doc.split(START, 1)
    body, tail = rest.split(END, 1)
    parts = {k: t for k, t in BLOCK.findall(body)}
    parts[key] = "\n" + text
    body = "\n" + "\n".join(f"<!-- bench:e2e:{k}:start -->{parts[k]}<!-- bench:e2e:{k}:end -->\n"
                             for k in sorted(parts, key=block_order))
    with open(path, "w") as fh:
        fh.write(head + START + body + END + tail)
    return [int(k) for k in sorted(parts, key=block_order) if "-" not in k]


def plot(sizes, results_dir, path):
    datas = []
    for n in sizes:
        try:
            with open(os.path.join(results_dir, f"{n}.json")) as fh:
                datas.append(json.load(fh))
        except (OSError, ValueError):
            log(f"plot: no saved results for {n} nodes; left out")
    if not datas:
        return
    tp, rt = path + ".tp.dat", path + ".ratio.dat"
    cols = [("a", 0), ("b", 0), ("a", 100), ("b", 100)]
    with open(tp, "w") as t, open(rt, "w") as q:
        t.write("# nodes, then median min max pods/s of a0 b0 a100 b100 (bulk)\n")
        q.write("# nodes, then median min max of (b)/(a) pods/s at 0 and 100 (bulk)\n")
        for d in datas:
            pin = d.get("main_pin") or "none"
            label = f'"{d["size"]:,} nodes"'
            tv = []
            for m, p in cols:
                rs = group(d["runs"], workload="bulk", mode=m, pct=p, pin=pin)
                tv += [f"{x:.2f}" for x in (med([r["pods_per_second"] for r in rs]) or (0, 0, 0))]
            qv = []
            for p in (0, 100):
                v = pair_ratios(d["runs"], "pods_per_second", workload="bulk", pct=p, pin=pin)
                qv += [f"{x:.3f}" for x in (v or (0, 0, 0))]
            t.write(label + " " + " ".join(tv) + "\n")
            q.write(label + " " + " ".join(qv) + "\n")
    titles = ["kube-scheduler alone, adaptive %", "kube-scheduler + troupe, adaptive %",
              "kube-scheduler alone, 100 %", "kube-scheduler + troupe, 100 %"]
    colors = ["#9ecae1", "#3182bd", "#fdae6b", "#e6550d"]
    tp_plot = ", \\\n     ".join(
        f"'{tp}' using {2 + 3 * i}:{3 + 3 * i}:{4 + 3 * i}:xtic(1) title '{titles[i]}' "
        f"lc rgb '{colors[i]}'" for i in range(4))
    script = f"""
set terminal png size 1100,560 font ',11'
set output '{path}'
set multiplot layout 1,2 title 'GPU pods through kube-scheduler v1.37, bulk backlog (bars: median; whiskers: min–max of the interleaved repetitions)' font ',11'
set style data histogram
set style histogram errorbars gap 2 lw 1
set style fill solid 0.9 border -1
set boxwidth 0.9
set grid ytics
set yrange [0:*]
set key below horizontal maxcols 2 font ',9'
set title 'pods scheduled per second'
set ylabel 'pods/s'
plot {tp_plot}
set title '(b) kube-scheduler + troupe over (a) alone, same repetition'
set ylabel '(b) / (a) pods/s'
set yrange [0:1.2]
set arrow 1 from graph 0, first 0.7 to graph 1, first 0.7 nohead dt 2 lw 2 lc rgb '#444444'
set label 1 'target at 5,000 nodes: 0.70' at graph 0.02, first 0.73 font ',9'
plot '{rt}' using 2:3:4:xtic(1) title 'adaptive percentageOfNodesToScore' lc rgb '#3182bd', \\
     '{rt}' using 5:6:7 title 'percentageOfNodesToScore 100' lc rgb '#e6550d'
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.unlink(tp)
    os.unlink(rt)
