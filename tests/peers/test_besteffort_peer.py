#!/usr/bin/env python3
"""troupe simulate's "besteffort" chooser against NVIDIA's go-gpuallocator itself.

The chooser (choose_besteffort in src/extender/simulate_choosers.c) is a C port
of go-gpuallocator's best-effort policy, the one k8s-device-plugin's
GetPreferredAllocation runs. This test gives the same random cases to the C
port (besteffort_cases, built by meson) and to the real Go policy
(tests/peers/gpuallocator, a Go module pinning the release the port follows)
and fails on any difference, printing the case.

  test_boards        >= 600 cases over bench/gen_sim_cluster.py's four machine
                     types (nvswitch, dgx1, pcie, bridge): random free masks
                     and counts, and every count with all devices free
  test_random_boards random link matrices of 2..12 devices (every level,
                     NVLink counts past the Go code's cap of 18, unknown NUMA),
                     so that padded answers and odd ties come up too
  test_padding       a case where the Go policy's answer holds padding (a nil
                     device): the port must keep its real devices and take the
                     lowest other free ones

The Go program is built once into build/peers/gpuallocator/<version>/ of the
source tree, keyed by its go.mod, go.sum and main.go (as scripts/lib/k8s.sh
caches the Kubernetes components); without Go or the module the test fails
saying how to build it. BESTEFFORT_SEED changes the cases (default 15).

  BESTEFFORT_CASES=build/tests/peers/besteffort_cases \\
      TROUPE_SOURCE_ROOT=. python3 tests/peers/test_besteffort_peer.py -v
"""
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import unittest

ROOT = os.environ.get("TROUPE_SOURCE_ROOT") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MODULE = os.path.join(ROOT, "tests", "peers", "gpuallocator")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import gen_sim_cluster  # noqa: E402  (the boards the benchmark runs on)

SEED = int(os.environ.get("BESTEFFORT_SEED", "15"))
# scripts/lib/k8s.sh's toolchain for the test modules; the machine's go is
# used when it is at least that.
GO_TOOLCHAIN = "go1.26.8+auto"
LEVELS = ["SYS", "NODE", "PHB", "PXB", "PIX"] + ["NV%d" % n for n in (1, 2, 3, 4, 6, 8, 12, 18, 20)]


def module_version():
    with open(os.path.join(MODULE, "go.mod")) as f:
        for line in f:
            words = line.split()
            if words[:2] == ["require", "github.com/NVIDIA/go-gpuallocator"]:
                return words[2]
            if words[:1] == ["github.com/NVIDIA/go-gpuallocator"]:
                return words[1]
    raise AssertionError("tests/peers/gpuallocator/go.mod names no go-gpuallocator version")


def build_hint(out):
    return ("build it with:\n  (cd tests/peers/gpuallocator && GOTOOLCHAIN=%s "
            "GOFLAGS=-mod=readonly go build -trimpath -o %s .)\n"
            "(the module comes through the Go module proxy; Go is test tooling only, "
            "scripts/lib/k8s.sh's ensure_go installs it)" % (GO_TOOLCHAIN, out))


def go_peer():
    """The Go peer's path, built first when missing or stale."""
    out_dir = os.path.join(ROOT, "build", "peers", "gpuallocator", module_version())
    out = os.path.join(out_dir, "gpuallocator-peer")
    h = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        with open(os.path.join(MODULE, name), "rb") as f:
            h.update(f.read())
    want = h.hexdigest()[:16]
    stamp = os.path.join(out_dir, ".stamp")
    try:
        with open(stamp) as f:
            if f.read().strip() == want and os.access(out, os.X_OK):
                return out
    except OSError:
        pass
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK)
                                else None)
    if not go:
        raise AssertionError("no Go toolchain to build the go-gpuallocator peer; "
                             + build_hint(out))
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("GOTOOLCHAIN", GO_TOOLCHAIN)
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()
    tmp = out + ".tmp.%d" % os.getpid()
    print("building the go-gpuallocator %s peer into %s" % (module_version(), out_dir), flush=True)
    p = subprocess.run([go, "build", "-trimpath", "-o", tmp, "."], cwd=MODULE, env=env,
                       capture_output=True, text=True, timeout=840)
    if p.returncode != 0:
        raise AssertionError("building the go-gpuallocator peer failed:\n%s\n%s"
                             % (p.stdout + p.stderr, build_hint(out)))
    os.replace(tmp, out)
    with open(stamp, "w") as f:
        f.write(want + "\n")
    return out


def board(kind):
    """A gen_sim_cluster board: its link matrix and NUMA nodes, as its
    troupe.io/gpu-topology annotation says them."""
    rows = [line.split("\t") for line in gen_sim_cluster.topo_text(kind).splitlines()[1:]]
    links = [[c.strip() for c in r[1:-2]] for r in rows]
    numa = [int(r[-1]) for r in rows]
    return links, numa


def random_board(rnd):
    n = rnd.randint(2, 12)
    links = [["X"] * n for _ in range(n)]
    # Few levels per board make ties, many make fine distinctions: both.
    palette = rnd.sample(LEVELS, rnd.randint(1, len(LEVELS)))
    for i in range(n):
        for j in range(i + 1, n):
            links[i][j] = links[j][i] = rnd.choice(palette)
    numa = [rnd.choice([-1, 0, 1]) if rnd.random() < 0.2 else i * 2 // n for i in range(n)]
    return links, numa


def random_case(rnd, links, numa, tag):
    n = len(links)
    free = sorted(rnd.sample(range(n), rnd.randint(1, n)))
    return {"tag": tag, "links": links, "numa": numa, "free": free,
            "k": rnd.randint(1, len(free))}


def run(prog, cases):
    p = subprocess.run([prog], input=json.dumps(cases), capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        raise AssertionError("%s failed (%d): %s" % (prog, p.returncode, p.stderr))
    lines = p.stdout.splitlines()
    if len(lines) != len(cases):
        raise AssertionError("%s answered %d of %d cases" % (prog, len(lines), len(cases)))
    return lines


def expected(go_line, case):
    """What the port must answer for the Go policy's answer: its devices in
    index order, a padded answer completed with the lowest other free devices."""
    if go_line == "none":
        return "none"
    real = [int(w) for w in go_line.split() if w != "-"]
    for f in case["free"]:
        if len(real) >= case["k"]:
            break
        if f not in real:
            real.append(f)
    return " ".join(str(d) for d in sorted(real))


class BestEffortPeer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ours = os.environ.get("BESTEFFORT_CASES")
        if not cls.ours or not os.access(cls.ours, os.X_OK):
            raise AssertionError("BESTEFFORT_CASES must name the besteffort_cases program "
                                 "(meson builds it: build/tests/peers/besteffort_cases)")
        cls.go = go_peer()

    def compare(self, cases):
        go = run(self.go, cases)
        ours = run(self.ours, cases)
        padded = 0
        for case, g, o in zip(cases, go, ours):
            want = expected(g, case)
            padded += "-" in g.split()
            if o != want:
                self.fail("the C port and go-gpuallocator differ on %s:\n  case %s\n"
                          "  go-gpuallocator: %s (so the port must answer %s)\n"
                          "  C port:          %s"
                          % (case["tag"], json.dumps({k: v for k, v in case.items() if k != "tag"}),
                             g, want, o))
        return padded

    def test_boards(self):
        rnd = random.Random(SEED)
        cases = []
        for kind in gen_sim_cluster.KINDS:
            links, numa = board(kind)
            for k in range(1, len(links) + 1):
                cases.append({"tag": "%s all free, k=%d" % (kind, k), "links": links,
                              "numa": numa, "free": list(range(len(links))), "k": k})
            for i in range(150):
                cases.append(random_case(rnd, links, numa, "%s case %d" % (kind, i)))
        self.assertGreaterEqual(len(cases), 500)
        self.compare(cases)
        print("%d cases on %s: the same answers" % (len(cases), ", ".join(gen_sim_cluster.KINDS)))

    def test_random_boards(self):
        rnd = random.Random(SEED + 1)
        cases = [random_case(rnd, *random_board(rnd), tag="random board %d" % i)
                 for i in range(1500)]
        padded = self.compare(cases)
        print("%d cases on random boards (%d with padding in the Go answer): the same answers"
              % (len(cases), padded))

    def test_padding(self):
        # Five devices, k = 3, padded to six: the best partition is {0,2,pad}
        # and {1,3,4}, and its padded set (0-2 NV12 on one NUMA node, 1220)
        # outscores the full one (PXB + NV4 + NV4 across NUMA nodes, 860).
        links = [["X", "NODE", "NV12", "NODE", "PHB"], ["NODE", "X", "PXB", "PXB", "NV4"],
                 ["NV12", "PXB", "X", "PIX", "PXB"], ["NODE", "PXB", "PIX", "X", "NV4"],
                 ["PHB", "NV4", "PXB", "NV4", "X"]]
        case = {"tag": "padding", "links": links, "numa": [0, 1, 0, 1, 0],
                "free": [0, 1, 2, 3, 4], "k": 3}
        self.assertEqual(run(self.go, [case]), ["0 2 -"], "go-gpuallocator's padded answer")
        self.assertEqual(self.compare([case]), 1)
        self.assertEqual(run(self.ours, [case]), ["0 1 2"])


if __name__ == "__main__":
    unittest.main()
