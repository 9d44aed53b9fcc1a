"""The tables of bench/sim_quality.py: rows (a measure, overall or for one job
size bucket, with every policy's mean and SE over seeds and troupe's verdict
against the best baseline), printed as Markdown that pastes into
docs/benchmarks.md, and the summary line that ends the output.
"""
import math
import sys

from sim_quality_stats import (MissingField, best_baseline, dig, mean_se,
                               paired_verdict, value_of)

# gang_default_levels' order, coarsest first: the order of the in-one rows.
LEVELS = ("zone", "datacenter", "spine", "block", "clique")


def levels_in(measure, results, troupe, where):
    """The level names a {level: share} measure has in troupe's first run,
    in LEVELS order (any other name after them)."""
    v = dig(results[troupe][0], measure.path, where)
    if not isinstance(v, dict):
        raise MissingField(f"{where}: \"{'.'.join(measure.path)}\" is not an object "
                           "of levels")
    return [l for l in LEVELS if l in v] + sorted(l for l in v if l not in LEVELS)


def sizes_in(results, where):
    """Every job size bucket any run of any policy has, ascending."""
    sizes = set()
    for p, runs in results.items():
        for obj in runs:
            for b in dig(obj, ("by_size",), f"{where} policy {p}"):
                sizes.add(dig(b, ("size",), f"{where} policy {p} by_size"))
    return sorted(sizes)


def make_row(m, size, level, results, troupe, baselines, seeds, where, eligible=None):
    """One row: every policy's (mean, se, n), the best baseline (of <eligible>,
    default all) and the verdict."""
    stats, seen, per_seed = {}, set(), {}
    for p in [troupe, *baselines]:
        vals = [value_of(m, obj, size, level, f"{where} policy {p} seed {s}")
                for s, obj in zip(seeds, results[p])]
        stats[p] = mean_se(vals)
        per_seed[p] = vals
        seen.update(v for v in vals if v is not None)
    best = best_baseline(stats, baselines if eligible is None else eligible, m.better)
    v = paired_verdict(per_seed[troupe], per_seed[best], m.better) if best else "n/a"
    # One value for every policy on every seed (a bucket of gangs has no
    # single-pod arrival to fragment; every pair of an NVL72 tray is NVLinked):
    # the measure cannot tell policies apart there, so it is not counted.
    if v == "tie" and len(seen) == 1 and len(seeds) > 1:
        v = "same"
    label = m.label.format(level=level) if level else m.label
    return {"measure": m.name + (f".{level}" if level else ""), "label": label,
            "size": size, "better": m.better, "scale": m.scale, "key": m.key,
            "stats": stats, "best": best, "verdict": v, "per_seed": per_seed}


def ineligible(gate, results, troupe, baselines, seeds, where):
    """The baselines that may not be the best one: those troupe leads on the
    <gate> measure (the refused share) by the 2-SE rule. A policy refusing
    jobs troupe runs (kube-tas refuses every gang larger than one domain of
    its key) has an easier cluster, and its waits and shares would be
    compared with troupe's on jobs it never ran. None at all if that would
    leave no baseline."""
    row = make_row(gate, None, None, results, troupe, baselines, seeds, where)
    out = [b for b in baselines
           if paired_verdict(row["per_seed"][troupe], row["per_seed"][b],
                             gate.better) == "leads"]
    return out if len(out) < len(baselines) else []


def study_rows(study, measures, results, troupe, baselines, seeds, by_size=True,
               barred=()):
    """All rows of one study: the overall ones, then by size (unless
    <by_size> is False). Rows no policy has a value for are left out. The
    <barred> baselines are shown but never taken as the best (ineligible)."""
    where = f"study {study['name']}"
    ms = [m for m in measures if study["kind"] in m.kinds]
    ok = [b for b in baselines if b not in barred]

    def row(m, size, lv):
        return make_row(m, size, lv, results, troupe, baselines, seeds, where,
                        baselines if m.name == "refused" else ok)
    rows = []
    for m in ms:
        if m.path is None:
            continue
        for lv in levels_in(m, results, troupe, where) if m.levels else [None]:
            rows.append(row(m, None, lv))
    bucketed = [m for m in ms if m.bucket_path is not None]
    if by_size and bucketed:
        for size in sizes_in(results, where):
            for m in bucketed:
                for lv in levels_in(m, results, troupe, where) if m.levels else [None]:
                    rows.append(row(m, size, lv))
    rows = [r for r in rows if any(n for _, _, n in r["stats"].values())]
    for m in ms:
        if not any(r["measure"].split(".")[0] == m.name for r in rows):
            print(f"sim_quality: {where}: no run has a value of {m.name} (all null)",
                  file=sys.stderr)
    return rows


def fmt(x):
    """A figure with about three significant digits, "-" for none."""
    if x is None or math.isnan(x):
        return "-"
    a = abs(x)
    if a >= 100:
        return f"{x:.0f}"
    return f"{x:.1f}" if a >= 10 else f"{x:.2f}" if a >= 1 else f"{x:.3f}"


def cell(stat, scale):
    m, se, n = stat
    if n == 0:
        return "-"
    return fmt(m * scale) if math.isnan(se) else f"{fmt(m * scale)} ± {fmt(se * scale)}"


def markdown(rows, troupe, baselines, by_size):
    """One Markdown table of <rows> (by size: with a size column)."""
    head = (["size"] if by_size else []) + ["measure", "better",
                                            f"troupe ({troupe})", *baselines,
                                            "best baseline", "verdict"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = ([str(r["size"])] if by_size else []) + [r["label"], r["better"]]
        cells += [cell(r["stats"][p], r["scale"]) for p in [troupe, *baselines]]
        cells += [r["best"] or "-", r["verdict"]]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def study_markdown(study, rows, troupe, baselines, seeds, barred=(), deployed=()):
    """A study's heading, its overall table and its by-size table."""
    out = [f"### {study['name']}: {study['cluster']}, {study['trace']}, "
           f"{len(seeds)} seeds ({seeds[0]}-{seeds[-1]})", "",
           "Mean ± standard error over seeds; verdict: troupe against the best "
           "baseline, decided only beyond 2 SE of the per-seed differences.", ""]
    refusing = [b for b in barred if b not in deployed]
    if refusing:
        out += [f"Never the best baseline, since they refuse more jobs than troupe "
                f"(beyond 2 SE): {', '.join(refusing)}.", ""]
    if deployed:
        out += [f"troupe under kube-scheduler, shown beside the baselines but not one: "
                f"{', '.join(deployed)}.", ""]
    overall = [r for r in rows if r["size"] is None]
    sized = [r for r in rows if r["size"] is not None]
    out.append(markdown(overall, troupe, baselines, False))
    if sized:
        out += ["", "By job size (total GPUs of a job, bucketed to powers of two):", "",
                markdown(sized, troupe, baselines, True)]
    return "\n".join(out)


def row_name(study_name, r):
    return f"{study_name}: {r['label']}" + (f" (size {r['size']})" if r["size"] else "")


def tally(named_rows):
    """{verdict: [row names]} over (study name, row) pairs, "n/a" and "same"
    (one value in every run) left out."""
    t = {"leads": [], "tie": [], "behind": []}
    for name, r in named_rows:
        if r["verdict"] in t:
            t[r["verdict"]].append(row_name(name, r))
    return t


# The stated objective the default is chosen by (docs/placement-quality.md):
# size-weighted waiting. A row troupe is behind on first looks here for the
# trade-off it is part of.
OBJECTIVE = "wait_gpu_hours"


def trade_off(named_rows, study, behind, troupe):
    """Why row <behind> of <study> is a trade-off: the first row of the same
    study where troupe leads <behind>'s best baseline by the paired 2-SE rule,
    looked for in this order: the objective overall, the same measure at
    another size, any overall row, any row. None: that baseline is at least as
    good as troupe on every row (troupe is dominated there)."""
    b = behind["best"]
    mine = [r for name, r in named_rows if name == study and r is not behind
            and b in r["per_seed"] and r["verdict"] != "same"]
    base = behind["measure"]
    tiers = ([r for r in mine if r["measure"] == OBJECTIVE and r["size"] is None],
             [r for r in mine if r["measure"] == base],
             [r for r in mine if r["size"] is None], mine)
    for tier in tiers:
        for r in tier:
            if paired_verdict(r["per_seed"][troupe], r["per_seed"][b], r["better"]) == "leads":
                return r
    return None


def summary(named_rows, troupe, n_seeds):
    """The closing lines: the counts, what troupe is behind on, and whether
    each of those is a measured trade-off (trade_off) or not."""
    t = tally(named_rows)
    total = sum(len(v) for v in t.values())
    same = sum(1 for _, r in named_rows if r["verdict"] == "same")
    line = (f"troupe ({troupe}) vs best baseline over {n_seeds} seeds: leads on "
            f"{len(t['leads'])}, ties on {len(t['tie'])}, behind on {len(t['behind'])} "
            f"of {total} measures")
    if same:
        line += f" ({same} more the same for every policy, not counted)"
    behind = ("behind on: " + "; ".join(t["behind"])) if t["behind"] else "behind on none"
    objective, other, dominated = 0, 0, []
    for name, r in named_rows:
        if r["verdict"] != "behind":
            continue
        why = trade_off(named_rows, name, r, troupe)
        if why is None:
            dominated.append(f"{row_name(name, r)} (by {r['best']})")
        elif why["measure"] == OBJECTIVE and why["size"] is None:
            objective += 1
        else:
            other += 1
    out = [line, behind]
    if t["behind"]:
        out.append(f"trade-offs: of the {len(t['behind'])} rows behind, {objective} are "
                   f"against a policy troupe leads on the objective ({OBJECTIVE}), {other} "
                   f"against one troupe leads on another row; {len(dominated)} against a "
                   "policy as good as troupe on every row" +
                   (": " + "; ".join(dominated) if dominated else ""))
    out.append("goal (lead or tie on every row, or each row behind a measured trade-off): " +
               ("met" if not dominated else "not met"))
    return "\n".join(out)
