#!/usr/bin/env python3
"""The HTTP benchmark: troupe against its same-run baselines, with wrk.

    bench/run_http.py [--sizes 1000,5000,10000,50000] [--duration 5] [--reps 3]
                      [--connections 1] [--plot FILE.png] [--write-docs docs/benchmarks.md]
                      [--smoke]

For each cluster size N: generate the cluster and request bodies
(bench/gen_cluster.py; cached under build/bench-data/), start troupe on it
(--cluster, snapshot mode: no API server), and for each payload

  filter / prioritize with 500 NodeNames and with all N (percentageOfNodesToScore: 100),
  filter with 100, 500 and 2,500 full Node objects (not nodeCacheCapable; at the
  first size of 2,500 nodes or more only, as they do not depend on it),
  filter + prioritize + bind in sequence (bench/wrk/sequence.lua), troupe only, at
  500 names and all N: prioritize over the names filter passed, as kube-scheduler
  sends it (the "prioritize alone" rows repeat one prioritize with no filter first),

run wrk (bench/wrk/*.lua: keep-alive, fixed connections, latency percentiles)
<reps> times against troupe and against the baselines on the same payload:
L0 (troupe's HTTP server reading the body and answering troupe's real reply for
that payload) and L1 (L0 plus parsing the body with cJSON), bench/http_baseline.
With two or more cores, the servers run pinned to core 0 (one worker thread) and
wrk to core 1. Reported: the median of the repetitions and their spread
(min-max), requests/s, p50/p99 latency as wrk measures it, troupe's own
server-side mean filter time (from /metrics), and troupe / baseline ratios.
Prints Markdown; with --write-docs replaces the section between
"<!-- bench:http:start -->" and "<!-- bench:http:end -->" of that file; with
--plot writes a gnuplot PNG of p99 latency against node count. --smoke runs
tiny sizes for a second each (the test suite's regression guard: it checks that
the runs complete and the output parses, never how fast they were).
"""
import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LUA = os.path.join(ROOT, "bench", "wrk")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned(core, argv, cores):
    return (["taskset", "-c", str(core)] + argv) if cores >= 2 and shutil.which("taskset") \
        else argv


def wait_port(port, proc, what, timeout=60, log=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            tail = ""
            if log:
                log.seek(0)
                tail = log.read().decode(errors="replace")[-2000:]
            sys.exit(f"{what} exited with {proc.returncode}\n{tail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not listen on port {port}")


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


class Server:
    """troupe or a baseline, pinned to core 0 with one HTTP worker thread."""

    def __init__(self, argv, cores, what):
        self.port = free_port()
        self.ops_port = free_port()     # troupe's ops listener (/metrics)
        self.what = what
        argv = [a.replace("{port}", str(self.port)).replace("{ops_port}", str(self.ops_port))
                for a in argv]
        # Its log goes to a file: a pipe nobody reads fills up and blocks the
        # server on its next log line.
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(pinned(0, argv, cores), stdout=subprocess.DEVNULL,
                                     stderr=self.log)
        wait_port(self.port, self.proc, what, log=self.log)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def wrk(port, path, script, args, a, cores, connections=None):
    argv = pinned(1 if cores >= 2 else 0, [
        "wrk", "-t1", f"-c{connections or a.connections}", f"-d{a.duration}s", "--latency", "-s",
        os.path.join(LUA, script), f"http://127.0.0.1:{port}{path}", "--"] + args, cores)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=a.duration + 60)
    line = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode != 0 or not line:
        sys.exit(f"wrk failed ({out.returncode}): {out.stderr}{out.stdout[-500:]}")
    r = json.loads(line[-1])
    if r["requests"] == 0:
        sys.exit(f"wrk: no request against {path or script} was answered in {a.duration} s")
    r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
    if r["errors"] or r["non2xx"]:
        sys.exit(f"wrk saw errors against {path}: {r}")
    return r


def summarize(runs):
    """Median and (min, max) of each figure over the repetitions."""
    out = {}
    for k in ("rps", "p50_us", "p99_us", "server_us"):
        vals = [r[k] for r in runs if k in r]
        if vals:
            out[k] = (statistics.median(vals), min(vals), max(vals))
    return out


def gen(size, a):
    d = os.path.join(a.data, str(size))
    man = os.path.join(d, "manifest.json")
    names = "500,all" if size > 500 else "all"
    full = ",".join(str(k) for k in (100, 500, 2500) if k <= size)
    if not os.path.exists(man):
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_cluster.py"),
                        "--nodes", str(size), "--seed", "1", "--names", names,
                        "--full-nodes", full, "--out", d], check=True, stdout=subprocess.DEVNULL)
    with open(man) as f:
        return d, json.load(f)


def run_size(size, a, cores):
    d, man = gen(size, a)
    cfg = os.path.join(a.tmp, "troupe.yaml")
    with open(cfg, "w") as f:
        # Bodies of up to 256 MiB (the 50,000-node full-Nodes requests); the
        # budget for all bodies at once must hold one of them at three quarters.
        f.write("http:\n  threads: 1\n  max_body_bytes: 268435456\n"
                "  body_budget_bytes: 402653184\n")
    troupe = Server([a.troupe, "--cluster", os.path.join(d, "cluster.json"), "--listen",
                     "127.0.0.1:{port}", "--ops-address", "127.0.0.1:{ops_port}", "--config", cfg,
                     "--log-level", "warn"], cores, "troupe")
    rows = []
    try:
        payloads = []
        for k in sorted({min(500, size), size}):
            payloads.append((f"filter, {k} names", "/filter", f"filter-names-{k}.json"))
            payloads.append((f"prioritize alone, {k} names", "/prioritize",
                             f"prioritize-names-{k}.json"))
        for k in (100, 500, 2500):
            # Full Node objects cost the same whatever the cluster's size: one
            # cluster size measures them (a.full_at).
            if k <= size and size == a.full_at:
                payloads.append((f"filter, {k} full Nodes", "/filter", f"filter-nodes-{k}.json"))
        for label, path, fname in payloads:
            body_path = os.path.join(d, fname)
            with open(body_path, "rb") as f:
                body = f.read()
            reply = os.path.join(a.tmp, "reply.json")
            with open(reply, "wb") as f:
                f.write(post(troupe.port, path, body))
            res = {}
            for level in (0, 1):
                base = Server([a.baseline, "--level", str(level), "--reply", reply, "--listen",
                               "127.0.0.1:{port}", "--threads", "1"], cores, f"L{level}")
                try:
                    res[f"L{level}"] = summarize([wrk(base.port, path, "post.lua", [body_path],
                                                      a, cores) for _ in range(a.reps)])
                finally:
                    base.stop()
            runs = []
            for _ in range(a.reps):
                before = (metric(troupe.ops_port, "troupe_filter_seconds_total"),
                          metric(troupe.ops_port, 'troupe_requests_total{verb="filter"}'))
                r = wrk(troupe.port, path, "post.lua", [body_path], a, cores)
                after = (metric(troupe.ops_port, "troupe_filter_seconds_total"),
                         metric(troupe.ops_port, 'troupe_requests_total{verb="filter"}'))
                if path == "/filter" and after[1] > before[1]:
                    r["server_us"] = (after[0] - before[0]) / (after[1] - before[1]) * 1e6
                runs.append(r)
            res["troupe"] = summarize(runs)
            rows.append((label, len(body), res))
        for k in sorted({min(500, size), size}):
            # One connection: the script follows one pod at a time.
            seq = summarize([wrk(troupe.port, "", "sequence.lua",
                                 [os.path.join(d, f"filter-names-{k}.json"),
                                  os.path.join(d, f"names-{k}.txt")], a, cores, connections=1)
                             for _ in range(a.reps)])
            rows.append((f"filter + prioritize + bind, {k} names", 0, {"troupe": seq}))
    finally:
        troupe.stop()
    return man, rows


def fmt(v, spread=True, digits=0):
    if v is None:
        return "-"
    med, lo, hi = v
    s = f"{med:,.{digits}f}"
    return s + (f" ({lo:,.{digits}f}–{hi:,.{digits}f})" if spread else "")


def table(size, man, rows):
    out = [f"#### {size:,} nodes ({man['pods']:,} pods bound, cluster file "
           f"{man['cluster_bytes'] / 1e6:.1f} MB)", "",
           "| payload | body | troupe req/s | L0 req/s | L1 req/s | troupe / L0 | troupe / L1 "
           "| troupe p50 / p99 µs | L0 p50 / p99 µs | L1 p50 / p99 µs | troupe filter, "
           "server-side mean µs |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, nbytes, res in rows:
        t, l0, l1 = res.get("troupe", {}), res.get("L0"), res.get("L1")

        def lat(r):
            return f"{r['p50_us'][0]:,.0f} / {r['p99_us'][0]:,.0f}" if r else "-"

        ratio0 = f"{t['rps'][0] / l0['rps'][0]:.2f}" if l0 else "-"
        ratio1 = f"{t['rps'][0] / l1['rps'][0]:.2f}" if l1 else "-"
        rps = fmt(t["rps"])
        if label.startswith("filter + prioritize"):
            rps = f"{t['rps'][0] / 3:,.0f} sequences/s"
        out.append(f"| {label} | {nbytes / 1e3:,.1f} kB | {rps} | {fmt(l0['rps']) if l0 else '-'} "
                   f"| {fmt(l1['rps']) if l1 else '-'} | {ratio0} | {ratio1} | {lat(t)} "
                   f"| {lat(l0)} | {lat(l1)} | {fmt(t.get('server_us'), digits=0) if 'server_us' in t else '-'} |")
    out.append("")
    return "\n".join(out)


def machine(a, cores):
    def cmd(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
        except OSError:
            return "?"
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    pkgs = cmd(["dpkg-query", "-W", "-f", "${Package} ${Version}\n", "libmicrohttpd12",
                "libcjson1", "libjemalloc2", "wrk"]).replace("\n", ", ")
    buildtype = "?"
    intro = os.path.join(os.path.dirname(os.path.dirname(a.troupe)), "..", "meson-info",
                         "intro-buildoptions.json")
    try:
        with open(intro) as f:
            opts = {o["name"]: o["value"] for o in json.load(f)}
        buildtype = f"buildtype={opts.get('buildtype')}, b_sanitize={opts.get('b_sanitize')}"
    except (OSError, ValueError):
        pass
    return (f"Machine: {cpu}, {cores} cores, Linux {platform.release()}; {pkgs}; troupe "
            f"{buildtype}. wrk -t1 -c{a.connections} -d{a.duration}s, {a.reps} repetitions "
            f"(median, (min–max)); servers {'pinned to core 0, wrk to core 1' if cores >= 2 else 'unpinned (one core)'}; "
            f"one HTTP worker thread in every server.")


def plot(results, path):
    dat = path + ".dat"
    with open(dat, "w") as f:
        f.write("# nodes troupe_all_p99 L0_all_p99 L1_all_p99 troupe_500_p99 troupe_prio_all_p99\n")
        for size, rows in results:
            get = {label: res for label, _, res in rows}
            fa = get.get(f"filter, {size} names", {})
            pa = get.get(f"prioritize alone, {size} names", {})
            f5 = get.get(f"filter, {min(500, size)} names", {})
            vals = [fa.get("troupe", {}).get("p99_us", (0,))[0],
                    (fa.get("L0") or {}).get("p99_us", (0,))[0],
                    (fa.get("L1") or {}).get("p99_us", (0,))[0],
                    f5.get("troupe", {}).get("p99_us", (0,))[0],
                    pa.get("troupe", {}).get("p99_us", (0,))[0]]
            f.write(f"{size} " + " ".join(f"{v:.0f}" for v in vals) + "\n")
    script = f"""
set terminal png size 900,560
set output '{path}'
set title 'troupe: p99 latency (wrk, one connection) against cluster size'
set xlabel 'nodes in the cluster (all named in the request)'
set ylabel 'p99 latency, microseconds'
set logscale xy
set key top left
set grid
plot '{dat}' using 1:2 with linespoints title 'troupe filter, all N names', \\
     '{dat}' using 1:6 with linespoints title 'troupe prioritize alone, all N names', \\
     '{dat}' using 1:3 with linespoints title 'L0 (read + canned reply), same payload', \\
     '{dat}' using 1:4 with linespoints title 'L1 (L0 + cJSON parse), same payload', \\
     '{dat}' using 1:5 with linespoints title 'troupe filter, 500 names'
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.unlink(dat)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,5000,10000,50000")
    ap.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    ap.add_argument("--reps", type=int, default=3, help="wrk runs per payload and server")
    ap.add_argument("--connections", type=int, default=1, help="wrk connections")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--data", help="where generated clusters are kept "
                    "(default BUILD/bench-data)")
    ap.add_argument("--plot", help="write a PNG of p99 latency against node count")
    ap.add_argument("--write-docs", help="replace the bench:http section of this Markdown file")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one second, one rep")
    a = ap.parse_args()
    if a.smoke:
        a.sizes, a.duration, a.reps = "200", 1, 1
    a.troupe = os.path.join(a.build, "src", "extender", "troupe")
    a.baseline = os.path.join(a.build, "bench", "http_baseline")
    a.data = a.data or os.path.join(a.build, "bench-data")
    for p in (a.troupe, a.baseline):
        if not os.access(p, os.X_OK):
            sys.exit(f"{p} is not built (ninja -C {a.build})")
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed (apt-get install wrk)")
    cores = os.cpu_count() or 1
    sizes = [int(x) for x in a.sizes.split(",")]
    a.full_at = next((x for x in sizes if x >= 2500), sizes[0])
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        a.tmp = tmp
        parts = [machine(a, cores), ""]
        for size in sizes:
            man, rows = run_size(size, a, cores)
            results.append((size, rows))
            parts.append(table(size, man, rows))
            print(parts[-1], flush=True)
    text = "\n".join(parts)
    if a.plot:
        plot(results, a.plot)
    if a.write_docs:
        with open(a.write_docs) as f:
            doc = f.read()
        start, end = "<!-- bench:http:start -->", "<!-- bench:http:end -->"
        if start not in doc or end not in doc:
            sys.exit(f"{a.write_docs} has no {start} ... {end} section")
        doc = doc[:doc.index(start) + len(start)] + "\n" + text + "\n" + doc[doc.index(end):]
        with open(a.write_docs, "w") as f:
            f.write(doc)
    print(text.splitlines()[0])
    if a.smoke:
        # The regression guard: every row has figures (never judged by speed).
        for size, rows in results:
            for label, _, res in rows:
                t = res.get("troupe", {})
                if not t.get("rps") or t["rps"][0] <= 0 or t["p99_us"][0] <= 0:
                    sys.exit(f"{size} nodes, {label}: no figures: {res}")
                for base in ("L0", "L1"):
                    if base in res and not res[base]["rps"][0] > 0:
                        sys.exit(f"{size} nodes, {label}: {base} has no figures")
        print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
