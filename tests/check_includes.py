#!/usr/bin/env python3
"""Fail when a source file includes a troupe header from a module above its own.

The layers, lowest first: common, cache, placement, gang, extender, with node
(troupe-node) beside gang on placement. A module may include its own headers
and those of the modules below it; nothing else. This is
the textual half of the rule; the build enforces the other half, since each
module is compiled with only its own and the lower layers' include directories
(meson.build: layer_inc), and tests/check_layers.py proves that it does.

It also checks that a module's internal.h is included only from that module.
"""
import pathlib
import re
import sys

LAYERS = ["common", "cache", "placement", "gang", "extender", "node"]
# The modules each may include, itself included: a chain from common to
# extender, and node (troupe-node) beside gang, on placement.
SEES = {m: LAYERS[:i + 1] for i, m in enumerate(LAYERS[:5])}
SEES["node"] = ["common", "cache", "placement", "node"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)


def violations(src_root: pathlib.Path):
    for path in sorted(src_root.rglob("*.[ch]")):
        module = path.relative_to(src_root).parts[0]
        if module not in LAYERS:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in INCLUDE.finditer(text):
            target, header = m.group(1), m.group(2)
            line = text.count("\n", 0, m.start()) + 1
            where = f"{path.relative_to(src_root.parent)}:{line}"
            if target not in LAYERS:
                yield f'{where}: includes "{target}/{header}", which is no troupe module'
            elif target not in SEES[module]:
                yield (f'{where}: {module} includes "{target}/{header}" from a higher layer '
                       f'(allowed: {", ".join(SEES[module])})')
            elif header == "internal.h" and target != module:
                yield f'{where}: includes {target}/internal.h, which is private to {target}'


def self_test():
    """The checker must catch an upward include and a foreign internal.h."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src = pathlib.Path(d) / "src"
        (src / "cache").mkdir(parents=True)
        (src / "gang").mkdir()
        (src / "cache" / "ok.c").write_text('#include "common/log.h"\n#include "cache/cache.h"\n')
        (src / "cache" / "up.c").write_text('#include "extender/verbs.h"\n')
        (src / "gang" / "peek.c").write_text('#include "placement/internal.h"\n')
        (src / "node").mkdir()
        (src / "node" / "side.c").write_text('#include "placement/placement.h"\n'
                                             '#include "gang/gang.h"\n')
        found = list(violations(src))
    assert len(found) == 3, found
    assert "side.c:2" in found[2] and "higher layer" in found[2], found
    assert "up.c:1" in found[0] and "higher layer" in found[0], found
    assert "peek.c:1" in found[1] and "private" in found[1], found


def main(argv):
    self_test()
    root = pathlib.Path(argv[1]) if len(argv) > 1 else pathlib.Path(__file__).parent.parent
    src = root / "src"
    if not src.is_dir():
        print(f"check_includes: no src/ under {root}", file=sys.stderr)
        return 2
    bad = list(violations(src))
    for v in bad:
        print(v)
    files = sum(1 for _ in src.rglob("*.[ch]"))
    print(f"check_includes: {files} files, {len(bad)} upward or private includes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
