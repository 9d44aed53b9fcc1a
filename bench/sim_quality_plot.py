"""The plots of bench/sim_quality.py, drawn with gnuplot (as `troupe simulate
--plot` draws its own; pngcairo when gnuplot has it, else png): per study a bar
chart of the key measures, one panel each, every policy's mean with error bars
of two standard errors (the width the verdict uses); and a Pareto front of two
measures over a policy family (say a weight swept) with troupe's policy and the
baselines as points, the non-dominated ones marked. Also the front's Markdown
table. Nothing here changes a number.
"""
import math
import os
import subprocess

from sim_quality_stats import mean_se, non_dominated, value_of


def terminal():
    """pngcairo draws smoother text; plain png (libgd) is the fallback."""
    r = subprocess.run(["gnuplot", "-e", "set terminal pngcairo"], capture_output=True)
    return "pngcairo" if r.returncode == 0 else "png"


def gnuplot(script, png):
    """Run <script>; returns <png>, or raises SystemExit with gnuplot's words."""
    try:
        r = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
    except OSError as e:
        raise SystemExit(f"sim_quality: cannot run gnuplot for --plot: {e.strerror}")
    if r.returncode != 0:
        raise SystemExit(f"sim_quality: gnuplot failed on {png}: {r.stderr.strip()}")
    return png


def quote(s):
    return '"' + s.replace('"', "'") + '"'


def num(x):
    return "NaN" if x is None or math.isnan(x) else repr(x)


def panel(i, r, pols):
    """One measure's data block and plot command: bar x per policy."""
    lines, top = [f"$d{i} << EOD"], 0.0
    for x, p in enumerate(pols):
        m, se, n = r["stats"][p]
        err = 0.0 if math.isnan(se) else 2 * se * r["scale"]
        lines.append(f"{x} {quote(p)} {num(m * r['scale'] if n else None)} {num(err)}")
        if n:
            top = max(top, m * r["scale"] + err)
    lines.append("EOD")
    # The y range by hand: autoscaling leaves the error bars out of it.
    lines.append(f"set yrange [0:{num(top * 1.1 if top > 0 else 1.0)}]")
    lines.append(f"set title {quote(r['label'] + ' (' + r['better'] + ' is better)')}")
    lines.append(f"plot $d{i} every ::0::0 using 1:3:4:xtic(2) with boxerrorbars "
                 f"lc rgb '#1f77b4' notitle, $d{i} every ::1 using 1:3:4:xtic(2) "
                 "with boxerrorbars lc rgb '#aaaaaa' notitle")
    return lines


def bar_chart(outdir, study, rows, troupe, baselines, n_seeds):
    """DIR/sim_quality_<study>.png: the key overall measures, one panel each."""
    # A measure with one value in every run ("same") draws an empty panel.
    keyed = [r for r in rows if r["key"] and r["size"] is None and r["verdict"] != "same"]
    if not keyed:
        raise SystemExit(f"sim_quality: study {study['name']}: no key measure to plot")
    pols = [troupe, *baselines]
    cols = 2
    nrows = (len(keyed) + cols - 1) // cols
    png = os.path.join(outdir, f"sim_quality_{study['name'].replace('/', '-')}.png")
    # noenhanced: "@" and "_" in policy names are gnuplot's markup otherwise.
    s = [f"set terminal {terminal()} size 1200,{460 * nrows} noenhanced",
         f"set output {quote(png)}",
         "set style fill solid 0.8 border -1", "set boxwidth 0.7",
         "set xtics rotate by 90 right font ',8'", "set grid ytics",
         f"set xrange [-0.6:{len(pols) - 0.4}]", "set bmargin 14",
         f"set multiplot layout {nrows},{cols} title "
         f"{quote(study['name'] + ': mean over ' + str(n_seeds) + ' seeds, error bars 2 SE')}"]
    for i, r in enumerate(keyed):
        s += panel(i, r, pols)
    s.append("unset multiplot")
    return gnuplot("\n".join(s) + "\n", png)


def front_stats(ms, family, others, seeds, where, barred=()):
    """The front's points: {label, family, values: {measure: [mean, se, n]},
    front, barred}. <family> and <others>: (label, [JSON object per seed])
    pairs; the <barred> labels are drawn but never on the front."""
    pts = []
    for fam, group in ((True, family), (False, others)):
        for label, runs in group:
            vals = {m.name: list(mean_se([value_of(m, o, None, None, f"{where} {label} "
                                                   f"seed {s}")
                                          for s, o in zip(seeds, runs)]))
                    for m in ms}
            pts.append({"label": label, "family": fam, "values": vals, "front": False,
                        "barred": label in barred})
    ok = [p for p in pts if not p["barred"]]
    coords = [tuple(p["values"][m.name][0] for m in ms) for p in ok]
    for i in non_dominated(coords, [m.better for m in ms]):
        ok[i]["front"] = True
    return pts


def front_markdown(pts, ms):
    """The front as a table: each point's two means ± SE, and whether it is on it."""
    head = ["point", "family", *(f"{m.label} ({m.better})" for m in ms), "non-dominated"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in pts:
        cells = [p["label"], "yes" if p["family"] else "no"]
        for m in ms:
            mean, se, n = p["values"][m.name]
            cells.append("-" if not n else f"{mean * m.scale:.3g} ± "
                         f"{(0 if math.isnan(se) else se) * m.scale:.2g}")
        cells.append("yes" if p["front"] else
                     "refuses more jobs than troupe" if p["barred"] else "")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def front_chart(outdir, front, ms, n_seeds):
    """DIR/sim_quality_front_<study>.png: every point with 2-SE bars both
    ways; the family joined by a line, the non-dominated points ringed."""
    slug = front["study"].replace("/", "-")
    png = os.path.join(outdir, f"sim_quality_front_{slug}.png")
    rows = []
    for p in front["points"]:
        (mx, sx, _), (my, sy, _) = (p["values"][m.name] for m in ms)
        ex = 0.0 if math.isnan(sx) else 2 * sx * ms[0].scale
        ey = 0.0 if math.isnan(sy) else 2 * sy * ms[1].scale
        rows.append((p, f"{num(mx * ms[0].scale)} {num(my * ms[1].scale)} {num(ex)} "
                     f"{num(ey)} {quote(p['label'])}"))
    s = [f"set terminal {terminal()} size 1000,750 noenhanced", f"set output {quote(png)}",
         f"set title {quote(front['study'] + ': ' + str(n_seeds) + ' seeds, bars 2 SE')}",
         f"set xlabel {quote(ms[0].label + ' (' + ms[0].better + ' is better)')}",
         f"set ylabel {quote(ms[1].label + ' (' + ms[1].better + ' is better)')}",
         "set grid", "set key outside right"]
    # A point that refuses jobs is grey and outside the family's line. A
    # block with no point is left out of the plot command (gnuplot fails, or
    # crashes, on an empty or NaN-only one).
    blocks = {name: [t for p, t in rows if keep(p)] for name, keep in (
        ("fam", lambda p: p["family"] and not p["barred"]),
        ("oth", lambda p: not p["family"] and not p["barred"]),
        ("bar", lambda p: p["barred"]), ("nd", lambda p: p["front"]))}
    clauses = {
        "fam": ["$fam using 1:2 with lines lc rgb '#1f77b4' title 'family'",
                "$fam using 1:2:3:4 with xyerrorbars pt 7 lc rgb '#1f77b4' notitle",
                "$fam using 1:2:5 with labels offset 1,1 font ',8' notitle"],
        "oth": ["$oth using 1:2:3:4 with xyerrorbars pt 5 lc rgb '#d62728' "
                "title 'troupe and baselines'",
                "$oth using 1:2:5 with labels offset 1,-1 font ',8' notitle"],
        "bar": ["$bar using 1:2:3:4 with xyerrorbars pt 4 lc rgb '#999999' "
                "title 'refuses more jobs than troupe'",
                "$bar using 1:2:5 with labels offset 1,-1 font ',8' tc rgb '#999999' "
                "notitle"],
        "nd": ["$nd using 1:2 with points pt 6 ps 3 lc rgb 'black' title 'non-dominated'"],
    }
    plots = []
    for name, block in blocks.items():
        if block:
            s += [f"${name} << EOD", *block, "EOD"]
            plots += clauses[name]
    s.append("plot " + ", ".join(plots))
    return gnuplot("\n".join(s) + "\n", png)
