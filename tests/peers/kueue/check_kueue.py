#!/usr/bin/env python3
"""Check troupe simulate's kueue-bestfit planner against Kueue's own code.

    check_kueue.py KUEUE_CASES [--cases 500] [--seed 1] [--profile bestfit|leastfree|both]
                   [--go go]

KUEUE_CASES is the kueue_cases program (meson builds it next to this file). The script
builds main.go with the Go toolchain against sigs.k8s.io/kueue v0.17.0 (the module proxy
serves it; the first build downloads its dependencies and takes minutes). Kueue's package
builds its TAS snapshot with unexported functions, so peer_overlay.go.in must sit inside
pkg/cache/scheduler: the script copies the downloaded module into a temporary directory,
adds the file there and builds with a `replace` to that copy (Go refuses -overlay for
files in the module cache). Nothing of Kueue is kept in this repository. Then it pipes
kueue_cases' random cases through the program. Exit 0 when every case agrees,
1 when one differs (each is printed), 77 (meson's "skipped") without a Go toolchain.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
KUEUE = "sigs.k8s.io/kueue@v0.17.0"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cases_bin", help="the kueue_cases program")
    ap.add_argument("--cases", type=int, default=500, help="random cases (default 500)")
    ap.add_argument("--seed", type=int, default=1, help="their seed (default 1)")
    ap.add_argument("--profile", choices=("bestfit", "leastfree", "both"), default="both",
                    help="kueue-bestfit against a preferred PodSet, kueue-leastfree against an "
                    "unconstrained one (kueue_cases.c says why), or both (default)")
    ap.add_argument("--go", default="go", help="the Go toolchain (default: go on PATH)")
    a = ap.parse_args()
    if not shutil.which(a.go):
        print("check_kueue: no Go toolchain; skipped", file=sys.stderr)
        return 77
    env = dict(os.environ, GOFLAGS="-mod=mod")
    modcache = subprocess.run([a.go, "env", "GOMODCACHE"], capture_output=True, text=True,
                              check=True, env=env).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([a.go, "mod", "download", KUEUE], cwd=HERE, env=env, check=True)
        kueue = os.path.join(tmp, "kueue")
        shutil.copytree(os.path.join(modcache, KUEUE), kueue)
        for root, dirs, files in os.walk(kueue):
            os.chmod(root, 0o755)
        shutil.copy(os.path.join(HERE, "peer_overlay.go.in"),
                    os.path.join(kueue, "pkg", "cache", "scheduler", "zz_troupe_peer.go"))
        src = os.path.join(tmp, "src")
        os.mkdir(src)
        for f in ("main.go", "go.mod", "go.sum"):
            shutil.copy(os.path.join(HERE, f), src)
        subprocess.run([a.go, "mod", "edit", "-replace", "sigs.k8s.io/kueue=" + kueue],
                       cwd=src, env=env, check=True)
        exe = os.path.join(tmp, "check_kueue")
        subprocess.run([a.go, "build", "-o", exe, "."], cwd=src, env=env, check=True)
        worst = 0
        for profile in (("bestfit", "leastfree") if a.profile == "both" else (a.profile,)):
            print(f"check_kueue: {profile}:", flush=True)
            gen = subprocess.Popen([a.cases_bin, str(a.cases), str(a.seed), profile],
                                   stdout=subprocess.PIPE)
            chk = subprocess.run([exe], stdin=gen.stdout)
            gen.stdout.close()
            if gen.wait() != 0:
                print("check_kueue: kueue_cases failed", file=sys.stderr)
                return 2
            worst = max(worst, chk.returncode)
        return worst

if __name__ == "__main__":
    sys.exit(main())
