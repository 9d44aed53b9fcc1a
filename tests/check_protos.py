#!/usr/bin/env python3
"""The .proto files troupe-node builds from are the pinned release's, unchanged.

    check_protos.py SOURCE_ROOT

src/node/podresources/v1/api.proto and src/node/deviceplugin/v1beta1/api.proto
must equal k8s.io/kubelet's pkg/apis/podresources/v1/api.proto and
pkg/apis/deviceplugin/v1beta1/api.proto at the version tests/e2e/go.mod pins
(the release the rig runs), byte for byte, as the Go module cache holds it
(scripts/lib/k8s.sh fills the cache before the suites run). A copy that drifts
from the kubelet troupe-node talks to fails here, naming the file.
"""
import os
import re
import subprocess
import sys

COPIES = {"src/node/podresources/v1/api.proto":
          ("k8s.io/kubelet", "pkg/apis/podresources/v1/api.proto"),
          "src/node/deviceplugin/v1beta1/api.proto":
          ("k8s.io/kubelet", "pkg/apis/deviceplugin/v1beta1/api.proto")}


def pinned(root, module):
    with open(os.path.join(root, "tests", "e2e", "go.mod"), encoding="utf-8") as f:
        m = re.search(r"^\s*" + re.escape(module) + r"\s+=>\s+\S+\s+(v\S+)", f.read(), re.M)
    if not m:
        sys.exit(f"check_protos: tests/e2e/go.mod pins no version of {module}")
    return m.group(1)


def main(root):
    cache = os.environ.get("GOMODCACHE")
    if not cache:
        try:
            cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                                   check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            # Go's default when GOPATH is not set.
            cache = os.path.join(os.path.expanduser("~"), "go", "pkg", "mod")
    bad = 0
    for copy, (module, path) in COPIES.items():
        upstream = os.path.join(cache, f"{module}@{pinned(root, module)}", path)
        if not os.path.isfile(upstream):
            print(f"check_protos: {upstream} is not in the module cache (scripts/lib/k8s.sh "
                  "downloads it)")
            bad += 1
            continue
        with open(os.path.join(root, copy), "rb") as a, open(upstream, "rb") as b:
            same = a.read() == b.read()
        print(f"{'ok  ' if same else 'FAIL'} {copy} {'==' if same else '!='} {upstream}")
        bad += not same
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
