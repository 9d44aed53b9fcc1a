#!/usr/bin/env python3
"""The fuzz driver itself (tests/fuzz/fuzz_main.c) must catch what breaks and
keep the input, and a seed must replay: run its canary target (which breaks
on purpose) and a real one, and read what it left.

    test_driver.py FUZZ_BINARY
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

FUZZ = sys.argv.pop(1) if len(sys.argv) > 1 else "build/tests/fuzz/fuzz"


def fuzz(*args):
    return subprocess.run([FUZZ, *args], capture_output=True, text=True, errors="replace",
                          timeout=240)


class Driver(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.corpus = os.path.join(self.tmp.name, "corpus")
        self.crashes = os.path.join(self.tmp.name, "crashes")
        os.mkdir(self.corpus)

    def tearDown(self):
        self.tmp.cleanup()

    def seed(self, name, text):
        with open(os.path.join(self.corpus, name), "w") as f:
            f.write(text)

    def saved(self):
        names = os.listdir(self.crashes) if os.path.isdir(self.crashes) else []
        self.assertEqual(len(names), 1, f"crash files: {names}")
        path = os.path.join(self.crashes, names[0])
        with open(path, "rb") as f:
            return path, f.read()

    def test_a_broken_invariant_saves_the_mutated_input_and_replays(self):
        self.seed("one", '{"canary":1}')
        r = fuzz("--target", "canary", "--corpus", self.corpus, "--save-crashes",
                 self.crashes, "--iterations", "100000", "--seed", "3")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("invariant broken: canary", r.stderr)
        path, data = self.saved()
        self.assertIn(path, r.stderr, "the saved file is named")
        self.assertTrue(data.startswith(b'{"canary":') and data[10:12] != b"1}", data)
        # The file alone reproduces it.
        again = fuzz("--target", "canary", "--save-crashes", self.crashes, "--input", path)
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("invariant broken", again.stderr)

    def test_a_fatal_signal_saves_the_input(self):
        self.seed("trap", "x segv")
        r = fuzz("--target", "canary", "--corpus", self.corpus, "--save-crashes",
                 self.crashes, "--iterations", "1")
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(self.saved()[1], b"x segv")

    def test_a_seed_replays_exactly(self):
        def digest(seed):
            r = fuzz("--target", "objects", "--iterations", "300", "--seed", str(seed),
                     "--save-crashes", self.crashes)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            m = re.search(r"digest ([0-9a-f]{16})", r.stdout)
            self.assertTrue(m, r.stdout)
            return m.group(1)
        self.assertEqual(digest(7), digest(7))
        self.assertNotEqual(digest(7), digest(8))

    def test_an_empty_corpus_is_an_error(self):
        r = fuzz("--target", "filter", "--corpus", self.corpus, "--iterations", "1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("is empty", r.stderr)

    def test_every_target_has_a_corpus(self):
        r = fuzz("--list")
        self.assertEqual(r.returncode, 0)
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "fuzz")
        targets = r.stdout.split()
        self.assertEqual(sorted(targets), sorted(os.listdir(root)))


if __name__ == "__main__":
    unittest.main()
