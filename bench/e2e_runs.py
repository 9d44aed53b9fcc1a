"""How bench/e2e runs: one local control plane per node count (tests/e2e/cluster.py),
the CPU layouts (--pin) and how they are applied with taskset, one configuration's
run of a workload through kubesim bench (the backlog held while kube-scheduler is
stopped, the scrapes and CPU times before and after, the record saved per run),
the cleaning between runs, and the interleaving of every configuration over the
repetitions (a, b, a, b, ...; every other repetition b first) into the saved
results DIR/results/<N>.json, with the machine and versions they were taken on.

Kept apart from the report (e2e_report.py), which reads only the saved results,
so --report-only (with or without --write-docs) never starts a cluster.
"""
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import cluster as rig  # noqa: E402
from e2e_metrics import parse_metrics, total, hist_delta, hist_quantile, troupe_seconds  # noqa: E402

NS = "bench"
# Which core each component gets with --pin split.
SPLIT = {"etcd": 0, "kube-apiserver": 0, "kube-controller-manager": 0, "kubesim": 0,
         "driver": 0, "kube-scheduler": 1, "troupe": 1}
# Which core each component gets in each --pin layout (none: every core).
LAYOUTS = {
    "none": None,
    "split": SPLIT,
    # kube-scheduler alone on core 1, troupe with the control plane on core 0.
    "sched": dict(SPLIT, troupe=0),
}
LAYOUT_TEXT = {
    "none": "none (every component may run on every core)",
    "split": "kube-apiserver, etcd, kube-controller-manager, kubesim and the driver on core 0; "
             "kube-scheduler and troupe on core 1",
    "sched": "kube-scheduler alone on core 1; everything else, troupe too, on core 0",
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- the cluster ------------------------------------------------------------

class Bench:
    def __init__(self, a, size):
        self.a = a
        self.size = size
        self.cores = os.cpu_count() or 1
        # kube-scheduler's client may make scheduler_qps requests a second, as
        # scheduler_perf allows its scheduler 5,000 (util.go, mustSetupCluster):
        # at the shipped default of 50, kube-scheduler alone would be capped near
        # 50 binds a second and the comparison would measure the rate limiter.
        self.c = rig.Cluster(os.path.join(a.dir, str(size)), nodes=size, with_troupe=True,
                             percentage=0, scheduler_verbosity=a.scheduler_verbosity,
                             scheduler_qps=a.scheduler_qps)
        self.pin = "none"

    def up(self):
        self.c.down()
        t = time.monotonic()
        self.c.up()
        self.up_seconds = time.monotonic() - t
        log(f"[{self.size} nodes] cluster up in {self.up_seconds:.0f} s ({self.c.dir})")

    def down(self):
        self.c.down()

    def configure(self, mode, pct, pin):
        self.c.reconfigure(with_troupe=(mode == "b"), percentage=pct)
        self.apply_pin(pin)

    def apply_pin(self, pin):
        self.pin = pin if self.cores >= 2 and shutil.which("taskset") else "none"
        self.c.pin = LAYOUTS[self.pin]
        every = "0-%d" % (self.cores - 1)
        for name in rig.COMPONENTS:
            pid = self.c.pid(name)
            if not pid or not self.c.alive(name):
                continue
            # -a: every thread. Go programs (1.25 and later) follow a changed
            # affinity mask with GOMAXPROCS within a second or so.
            cpus = str(self.c.pin[name]) if self.c.pin else every
            subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)],
                           capture_output=True, check=True)

    def driver_cmd(self, argv):
        if self.c.pin:
            return ["taskset", "-c", str(self.c.pin["driver"])] + argv
        return argv

    def cpu(self):
        """{component: CPU seconds so far} of every running component."""
        tick = os.sysconf("SC_CLK_TCK")
        out = {}
        for name in rig.COMPONENTS:
            pid = self.c.pid(name)
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                out[name] = (int(fields[11]) + int(fields[12])) / tick
            except (OSError, TypeError, IndexError, ValueError):
                pass
        return out

    def clean(self, timeout=900):
        """Delete the bench namespace's pods and PodGroups (kubesim bench --clean:
        in parallel, grace period 0); wait until they are gone and troupe, if
        running, holds no GPU."""
        r = subprocess.run(self.driver_cmd([
            self.c.bin("kubesim"), "bench", "--kubeconfig", self.c.kubeconfig, "--namespace", NS,
            "--clean", "--timeout", f"{timeout}s"]), capture_output=True, text=True,
            timeout=timeout + 120)
        if r.returncode != 0:
            raise rig.ClusterError(f"kubesim bench --clean failed: {r.stderr[-2000:]}")
        deadline = time.monotonic() + 120
        while self.c.alive("troupe"):
            if total(parse_metrics(self.c.metrics("troupe")), "troupe_gpus_held") == 0:
                break
            if time.monotonic() > deadline:
                raise rig.ClusterError("troupe still holds GPUs after the pods are gone")
            time.sleep(0.2)
        time.sleep(self.a.settle)   # kube-scheduler's cache sees the deletes too

    def scrape(self):
        s = parse_metrics(self.c.metrics("kube-scheduler"))
        t = parse_metrics(self.c.metrics("troupe")) if self.c.alive("troupe") else []
        return s, t

    def run(self, mode, pct, workload, rep):
        a = self.a
        argv = [self.c.bin("kubesim"), "bench", "--kubeconfig", self.c.kubeconfig,
                "--namespace", NS]
        hold = None
        if workload in ("bulk", "burst"):
            pods = a.pods
            argv += ["--pods", str(pods)]
            if workload == "bulk":
                hold = os.path.join(self.c.dir, "hold")
                if os.path.exists(hold):
                    os.unlink(hold)
                argv += ["--hold", hold]
        elif workload == "rate":
            pods = int(a.rate * a.rate_seconds)
            argv += ["--pods", str(pods), "--rate", str(a.rate)]
        else:
            pods = a.gangs * a.gang_size
            argv += ["--gangs", str(a.gangs), "--gang-size", str(a.gang_size),
                     "--gang-gpus", str(a.gang_gpus)]
        timeout = max(120, pods // 5)
        argv += ["--timeout", f"{timeout}s"]
        s0, t0 = self.scrape()
        if hold:
            # The backlog: every pod is created while kube-scheduler is stopped;
            # it starts (and the driver starts counting) once they all exist.
            # It starts afresh, so its counters are the run's own.
            self.c.stop("kube-scheduler")
            s0 = []
        cpu0 = self.cpu()
        wall = time.monotonic()
        errpath = os.path.join(self.c.dir, "driver.err")
        with open(errpath, "w+") as err:
            p = subprocess.Popen(self.driver_cmd(argv), stdout=subprocess.PIPE, stderr=err,
                                 text=True)
            if hold:
                while p.poll() is None:
                    err.seek(0)
                    if "waiting for" in err.read():
                        break
                    time.sleep(0.05)
                with open(hold, "w"):
                    pass
                wall = time.monotonic()
                self.c.start_scheduler()
                cpu0["kube-scheduler"] = 0.0
            try:
                stdout, _ = p.communicate(timeout=timeout + 600)
            except subprocess.TimeoutExpired:
                p.kill()
                stdout, _ = p.communicate()
            err.seek(0)
            stderr = err.read()
        wall = time.monotonic() - wall
        cpu1 = self.cpu()
        s1, t1 = self.scrape()
        line = [l for l in stdout.splitlines() if l.startswith("{")]
        if p.returncode != 0 or not line:
            raise rig.ClusterError(f"kubesim bench failed ({p.returncode}): {stderr[-2000:]}")
        res = json.loads(line[-1])
        sli, (sli_sum, sli_n) = hist_delta(s0, s1, "scheduler_pod_scheduling_sli_duration_seconds")
        _, (alg_sum, alg_n) = hist_delta(s0, s1, "scheduler_scheduling_algorithm_duration_seconds")
        att, (att_sum, att_n) = hist_delta(s0, s1, "scheduler_scheduling_attempt_duration_seconds",
                                           result="scheduled")
        ep = {}
        for point in ("PreFilter", "Filter", "PreScore", "Score", "Reserve", "Permit",
                      "PreBind", "Bind"):
            _, (ssum, _) = hist_delta(s0, s1, "scheduler_framework_extension_point_duration_seconds",
                                      extension_point=point)
            ep[point] = ssum
        attempts = {k: total(s1, "scheduler_schedule_attempts_total", result=k)
                    - total(s0, "scheduler_schedule_attempts_total", result=k)
                    for k in ("scheduled", "unschedulable", "error")}
        sched = max(res["scheduled"], 1)
        rec = dict(res, size=self.size, rep=rep, mode=mode, pct=pct, pin=self.pin,
                   workload=workload, wall_seconds=wall, attempts=attempts,
                   sli_p50_ms=_ms(hist_quantile(0.50, sli)), sli_p99_ms=_ms(hist_quantile(0.99, sli)),
                   sli_mean_ms=sli_sum / sli_n * 1e3 if sli_n else None, sli_count=sli_n,
                   attempt_p50_ms=_ms(hist_quantile(0.50, att)),
                   attempt_p99_ms=_ms(hist_quantile(0.99, att)),
                   cycle_ms=alg_sum / sched * 1e3,
                   algorithm_mean_ms=alg_sum / alg_n * 1e3 if alg_n else None,
                   plugins_ms={k: v / sched * 1e3 for k, v in ep.items()},
                   cpu_ms={k: (cpu1[k] - cpu0.get(k, 0.0)) / sched * 1e3 for k in cpu1})
        if t1:
            ts0, ts1 = troupe_seconds(t0), troupe_seconds(t1)
            tsec = {k: ts1[k] - ts0.get(k, 0.0) for k in ts1}
            rec["troupe_seconds"] = tsec
            rec["troupe_ms"] = sum(tsec.values()) / sched * 1e3
            rec["troupe_requests"] = {
                verb: total(t1, "troupe_requests_total", verb=verb)
                - total(t0, "troupe_requests_total", verb=verb)
                for verb in ("filter", "prioritize", "bind", "preempt")}
            rec["troupe_errors"] = sum(
                total(t1, "troupe_request_errors_total", verb=verb)
                - total(t0, "troupe_request_errors_total", verb=verb)
                for verb in ("filter", "prioritize", "bind", "preempt"))
        return rec


def _ms(v):
    return None if v is None else v * 1e3


# ---- what the results record about where they were taken -------------------------

def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(l.split(":", 1)[1].strip() for l in fh if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as fh:
            kb = int(next(l.split()[1] for l in fh if l.startswith("MemTotal")))
            mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return (f"Machine: {cpu}, {os.cpu_count()} cores (nproc), {mem} memory, "
            f"Linux {platform.release()}.")


def versions(c):
    def first(argv):
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout
            return out.strip().splitlines()[0] if out.strip() else "?"
        except OSError:
            return "?"
    etcd = first([c.bin("etcd"), "--version"]).replace("etcd Version: ", "")
    go = "?"
    try:
        out = subprocess.run(["go", "version", "-m", c.bin("kube-scheduler")], capture_output=True,
                             text=True, timeout=10).stdout
        go = out.splitlines()[0].split()[-1]
    except (OSError, IndexError):
        pass
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "?"
    return (f"Versions: kube-scheduler, kube-apiserver, kube-controller-manager "
            f"{first([c.bin('kube-scheduler'), '--version']).replace('Kubernetes ', '')} "
            f"(built with {go}), etcd {etcd}, {first([c.bin('troupe'), '--version'])} "
            f"(commit {commit}).")


# ---- the interleaving -------------------------------------------------------------

def run_size(a, size):
    b = Bench(a, size)
    runs = []
    results_dir = os.path.join(a.dir, "results")
    os.makedirs(results_dir, exist_ok=True)
    key = f"{size}-{a.tag}" if a.tag else str(size)
    args = {k: getattr(a, k) for k in ("pods", "rate", "rate_seconds", "gangs", "gang_size",
                                       "gang_gpus", "workloads", "percentages", "reps",
                                       "scheduler_qps", "scheduler_verbosity")}
    data = {"size": size, "tag": a.tag, "args": args, "runs": runs,
            "date": datetime.date.today().isoformat(), "machine": machine(),
            "pins": a.pins, "main_pin": a.pins[0]}
    t_all = time.monotonic()
    try:
        b.up()
        data["up_seconds"] = b.up_seconds
        data["versions"] = versions(b.c)
        pins = a.pins
        for rep in range(a.reps):
            for pct in a.percentages:
                for pin in pins:
                    for mode in (("a", "b") if rep % 2 == 0 else ("b", "a")):
                        b.configure(mode, pct, pin)
                        for w in a.workloads:
                            if w == "gang" and mode == "a":
                                continue
                            r = b.run(mode, pct, w, rep)
                            runs.append(r)
                            log(f"[{size} nodes] rep {rep + 1}/{a.reps} pct {pct} pin {b.pin} "
                                f"{mode} {w}: {r['scheduled']}/{r['pods']} bound, "
                                f"{r['pods_per_second']:.0f} pods/s, watch p50/p99 "
                                f"{r['p50_ms']:.0f}/{r['p99_ms']:.0f} ms, cycle "
                                f"{r['cycle_ms']:.2f} ms/pod"
                                + (f", troupe {r['troupe_ms']:.2f} ms/pod" if 'troupe_ms' in r
                                   else "") + f", {r['wall_seconds']:.0f} s")
                            t = time.monotonic()
                            b.clean()
                            r["clean_seconds"] = time.monotonic() - t
                            data["seconds"] = time.monotonic() - t_all
                            with open(os.path.join(results_dir, f"{key}.json.part"), "w") as fh:
                                json.dump(data, fh, indent=1)
    finally:
        b.down()
    data["seconds"] = time.monotonic() - t_all
    path = os.path.join(results_dir, f"{key}.json")
    with open(path, "w") as fh:
        json.dump(data, fh, indent=1)
    os.unlink(path + ".part")
    return data
