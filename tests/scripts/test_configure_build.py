#!/usr/bin/env python3
"""scripts/lib/common.sh's configure_build must leave a build directory
configured exactly as asked, whatever it was before: a directory once set up
for one build (say, without sanitizers) must not run as another. Configures a
scratch directory of this source tree through a sequence of option sets (ninja
stubbed out: nothing is compiled) and reads meson's own view after each.

    test_configure_build.py SOURCE_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.getcwd()
WATCHED = ("buildtype", "b_ndebug", "b_sanitize", "b_lundef", "jemalloc")


def configure(builddir, *opts):
    script = ('set -euo pipefail; . scripts/lib/common.sh; ninja() { :; }; '
              'configure_build "$@"')
    return subprocess.run(["bash", "-c", script, "bash", builddir, *opts], cwd=ROOT,
                          capture_output=True, text=True)


def options(builddir):
    out = subprocess.run(["meson", "introspect", "--buildoptions", builddir], check=True,
                         capture_output=True, text=True).stdout
    have = {o["name"]: o["value"] for o in json.loads(out)}
    return {k: have[k] for k in WATCHED}


class ConfigureBuild(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "b")

    def tearDown(self):
        self.tmp.cleanup()

    def step(self, *opts):
        r = configure(self.dir, *opts)
        self.assertEqual(r.returncode, 0, r.stderr)
        return options(self.dir)

    def test_sanitizer_options_take_and_are_dropped_again(self):
        plain = self.step("-Dbuildtype=debugoptimized", "-Db_ndebug=false")
        self.assertEqual(plain["b_sanitize"], "none")
        self.assertEqual(plain["b_ndebug"], "false")
        asan = self.step("-Db_sanitize=address,undefined", "-Db_lundef=false",
                         "-Djemalloc=disabled", "-Dbuildtype=debug")
        self.assertEqual(asan["b_sanitize"], "address,undefined")
        self.assertFalse(asan["b_lundef"])
        self.assertEqual(asan["jemalloc"], "disabled")
        self.assertEqual(asan["buildtype"], "debug")
        # Back to the plain build: what the sanitizer build set must not stay.
        self.assertEqual(self.step("-Dbuildtype=debugoptimized", "-Db_ndebug=false"), plain)

    def test_a_directory_changed_behind_its_back_is_put_right(self):
        self.step("-Dbuildtype=debugoptimized", "-Db_ndebug=false")
        subprocess.run(["meson", "configure", self.dir, "-Db_sanitize=thread"], check=True,
                       capture_output=True)
        os.unlink(os.path.join(self.dir, ".troupe-options"))
        self.assertEqual(self.step("-Dbuildtype=debugoptimized", "-Db_ndebug=false")["b_sanitize"],
                         "none")


if __name__ == "__main__":
    unittest.main()
