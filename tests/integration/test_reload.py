"""Reloading troupe.yaml while troupe runs (src/extender/reload.c), with the
real binary over the fixture snapshot:

  SIGHUP                 the queues and their weights change, /metrics and the
                         fair order's shares follow at once, the log says what
                         changed and that the rest waits for a restart
  a bad file             unreadable YAML, an unknown key, a bad weight: nothing
                         changes, the log says why, troupe keeps serving
  a ConfigMap's swap     the kubelet replaces the ..data symlink: picked up
                         without a signal
  log_level              the file's level changes; --log-level wins over it
"""
import os
import signal
import time
import unittest

from live_common import wait_until
from troupe_proc import Troupe

WEIGHT = 'troupe_queue_weight{queue="%s"}'
SHARE = 'troupe_queue_dominant_share{queue="%s"}'


def write(path, text):
    """Replace <path> as an editor that renames a new file over it does."""
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class Reload(unittest.TestCase):
    def start(self, text, args=()):
        t = Troupe(config_text=text, args=args)
        t.start()
        self.addCleanup(t.stop)
        return t

    def config_path(self, t):
        return os.path.join(t._tmp.name, "troupe.yaml")

    def hup(self, t, text):
        """Write <text> as the file, send SIGHUP, and return the reload lines
        logged since: the SIGHUP's, and the file watch's should its 2-second
        look come between the write and the signal."""
        start = len(t.log())
        write(self.config_path(t), text)
        t.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "SIGHUP: " in t.log()[start:], 10, "the reload's log line")
        return "\n".join(ln for ln in t.log()[start:].splitlines()
                         if "SIGHUP: " in ln or "the file changed: " in ln)

    def test_sighup_reloads_queue_weights(self):
        t = self.start("queues:\n  ml: 1\n")
        self.assertEqual(t.metric(WEIGHT % "ml"), 1)
        share = t.metric(SHARE % "ml")
        self.assertGreater(share, 0, "the fixture's ml pods hold GPUs")
        line = self.hup(t, "queues:\n  ml: 4\n  research: 2\n")
        self.assertIn("reloaded %s: queues ml=4, research=2 (were ml=1)" % self.config_path(t),
                      line)
        self.assertIn("the other settings take effect at a restart", line)
        self.assertEqual(t.metric(WEIGHT % "ml"), 4)
        self.assertEqual(t.metric(WEIGHT % "research"), 2)
        # The fair order's share is the dominant share over the weight.
        self.assertAlmostEqual(t.metric(SHARE % "ml") * 4, share, places=4)
        # The same file again: nothing changes, and the log says so.
        line = self.hup(t, "queues:\n  ml: 4\n  research: 2\n")
        self.assertIn("queues ml=4, research=2 (unchanged)", line)
        # Queues gone from the file: every queue weighs 1 again.
        line = self.hup(t, "log_level: info\n")
        self.assertIn("queues none (were ml=4, research=2)", line)
        self.assertEqual(t.metric(WEIGHT % "ml"), 1)

    def test_a_bad_file_changes_nothing_and_says_why(self):
        t = self.start("queues:\n  ml: 3\n")
        for text, why in (("queues:\n  ml: -1\n", "queues.ml: the weight must be a number above 0"),
                          ("queues: [ml\n", "config %s: " % self.config_path(t)),
                          ("queuez:\n  ml: 2\n", "queuez")):
            line = self.hup(t, text)
            self.assertIn("not reloaded, keeping the settings in use", line)
            self.assertIn(why, line)
            self.assertEqual(t.metric(WEIGHT % "ml"), 3, text)
            status, _, body = t.request("GET", "/healthz")
            self.assertEqual(status, 200)
        self.assertIsNone(t.proc.poll(), "troupe stopped on a bad reload")
        # A good file after the bad ones applies.
        line = self.hup(t, "queues:\n  ml: 5\n")
        self.assertIn("queues ml=5 (were ml=3)", line)
        self.assertEqual(t.metric(WEIGHT % "ml"), 5)

    def test_a_configmap_update_is_picked_up_without_a_signal(self):
        # The layout a ConfigMap volume has: troupe.yaml -> ..data/troupe.yaml,
        # ..data -> ..<timestamp>/, swapped by renaming a new ..data over it.
        t = Troupe(config_text=None, args=())
        d = t._tmp.name
        os.mkdir(os.path.join(d, "..v1"))
        with open(os.path.join(d, "..v1", "troupe.yaml"), "w") as f:
            f.write("queues:\n  ml: 1\n")
        os.symlink("..v1", os.path.join(d, "..data"))
        os.symlink("..data/troupe.yaml", os.path.join(d, "troupe.yaml"))
        t.args = ["--config", os.path.join(d, "troupe.yaml")]
        t.start()
        self.addCleanup(t.stop)
        self.assertEqual(t.metric(WEIGHT % "ml"), 1)
        os.mkdir(os.path.join(d, "..v2"))
        with open(os.path.join(d, "..v2", "troupe.yaml"), "w") as f:
            f.write("queues:\n  ml: 6\n")
        os.symlink("..v2", os.path.join(d, "..data_tmp"))
        os.replace(os.path.join(d, "..data_tmp"), os.path.join(d, "..data"))
        wait_until(lambda: t.metric(WEIGHT % "ml") == 6, 15, "the swapped file applied")
        self.assertIn("the file changed: reloaded", t.log())

    def test_log_level_follows_the_file_unless_the_flag_is_given(self):
        t = self.start("log_level: info\n")
        t.metrics()
        self.assertNotIn("[ops] GET /metrics ->", t.log())
        line = self.hup(t, "log_level: debug\n")
        self.assertIn("log_level debug (changed)", line)
        # Debug lines from now on: the ops listener logs each request at debug.
        t.metrics()
        wait_until(lambda: "[ops] GET /metrics ->" in t.log(), 10, "a debug line")
        t2 = self.start("log_level: info\n", args=["--log-level", "info"])
        line = self.hup(t2, "log_level: debug\n")
        self.assertIn("log_level info (--log-level wins over the file)", line)
        t2.metrics()
        time.sleep(0.2)
        self.assertNotIn("[ops] GET /metrics ->", t2.log())

if __name__ == "__main__":
    unittest.main()
