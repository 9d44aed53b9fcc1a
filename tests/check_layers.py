#!/usr/bin/env python3
"""Prove that the build rejects an upward #include.

Each module is compiled with its own layer's include directory and those of the
layers below (meson.build: layer_inc). For every module this takes the real
command that compiles one of its sources (the build's compile_commands.json),
and with it compiles a file that includes one of the module's own headers
(which must compile) and then, for every module above it, a file that includes
that module's header (which must not, because the header is not on the path).

    check_layers.py BUILD_ROOT
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

LAYERS = ["common", "cache", "placement", "gang", "extender", "node"]
# One public header per module, the one its callers include.
HEADER = {"common": "util.h", "cache": "cache.h", "placement": "placement.h",
          "gang": "gang.h", "extender": "verbs.h", "node": "node.h"}
# The modules each one may see, itself included: a chain from common to
# extender, and node (troupe-node) beside gang, on placement.
SEES = {m: LAYERS[:i + 1] for i, m in enumerate(LAYERS[:5])}
SEES["node"] = ["common", "cache", "placement", "node"]


def module_commands(build):
    """module -> (directory, argv) of the build's command for one of its sources."""
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    out = {}
    for e in entries:
        path = os.path.normpath(os.path.join(e["directory"], e["file"]))
        parts = path.split(os.sep)
        # Sources only: code generated into the build tree (src/node's
        # protobuf-c files) is compiled apart, without the module's layers.
        if path.startswith(os.path.abspath(build) + os.sep):
            continue
        if len(parts) >= 3 and parts[-3] == "src" and parts[-2] in LAYERS:
            argv = e.get("arguments") or shlex.split(e["command"])
            out.setdefault(parts[-2], (e["directory"], argv, e["file"]))
    return out


def compiles(cmd, include, workdir):
    directory, argv, source = cmd
    probe = os.path.join(workdir, "probe.c")
    with open(probe, "w", encoding="utf-8") as f:
        f.write(f'#include "{include}"\nint troupe_layer_probe(void);\n'
                'int troupe_layer_probe(void) { return 0; }\n')
    args, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MQ", "-MT"):
            skip = True
            continue
        if a in ("-c", "-MD") or a == source or os.path.basename(a) == os.path.basename(source):
            continue
        args.append(a)
    args += ["-fsyntax-only", probe]
    r = subprocess.run(args, cwd=directory, capture_output=True, text=True)
    return r.returncode == 0, r.stderr


def main():
    cmds = module_commands(sys.argv[1])
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        for module in LAYERS:
            own = f"{module}/{HEADER[module]}"
            if module not in cmds:
                print(f"FAIL {module}: no compile command for src/{module}/ in the build")
                failures += 1
                continue
            ok, err = compiles(cmds[module], own, d)
            if not ok:
                print(f"FAIL {module}: its own header {own} does not compile with its "
                      f"layer's include path:\n{err}")
                failures += 1
                continue
            print(f"ok   {module}: includes {own}")
            for upper in [m for m in LAYERS if m not in SEES[module]]:
                hdr = f"{upper}/{HEADER[upper]}"
                ok, err = compiles(cmds[module], hdr, d)
                if ok:
                    print(f"FAIL {module}: includes {hdr}, not a layer it may see, and it "
                          "compiled")
                    failures += 1
                elif "No such file" not in err and "not found" not in err:
                    print(f"FAIL {module}: including {hdr} failed, but not for want of the "
                          f"file:\n{err}")
                    failures += 1
                else:
                    print(f"ok   {module}: including {hdr} (not below it) fails to compile")
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
