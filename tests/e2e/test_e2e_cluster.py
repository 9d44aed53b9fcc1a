#!/usr/bin/env python3
"""The rig itself, as ./scripts/cluster uses it: up twice is safe, down twice is
safe, everything listens on 127.0.0.1 only, the logs survive down, the
simulated nodes are what nodes.go says, and the simulated kubelet ends a job
after rig.troupe.io/run-seconds."""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster as rig  # noqa: E402

CLI = [sys.executable, os.path.join(rig.HERE, "cluster.py")]


class Rig(unittest.TestCase):

    def setUp(self):
        self.dir = os.path.join(rig.ROOT, "build", "e2e", "rig")
        subprocess.run(CLI + ["down", "--dir", self.dir], capture_output=True)

    def cli(self, *args):
        r = subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=300)
        return r.returncode, r.stdout + r.stderr

    def test_up_twice_down_twice(self):
        rc, out = self.cli("up", "--nodes", "20", "--dir", self.dir)
        self.assertEqual(rc, 0, out)
        self.addCleanup(self.cli, "down", "--dir", self.dir)
        self.assertIn("cluster up (Kubernetes v1.37.2)", out)
        c = rig.Cluster(self.dir)
        pids = dict(c.state["pids"])
        self.assertEqual(sorted(pids), sorted(rig.COMPONENTS))
        # Up again: says so and restarts nothing.
        rc, out = self.cli("up", "--nodes", "20", "--dir", self.dir)
        self.assertEqual(rc, 0, out)
        self.assertIn("already up", out)
        self.assertEqual(rig.Cluster(self.dir).state["pids"], pids)
        # Every listening socket of every component is on loopback.
        ss = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
        mine = [l for l in ss.splitlines() if any("pid=%d," % p in l for p in pids.values())]
        self.assertTrue(mine, ss)
        for line in mine:
            local = line.split()[3]
            self.assertTrue(local.startswith("127.0.0.1:"), "listens beyond loopback: " + line)
        # The nodes, as the layout says.
        nodes = {n["metadata"]["name"]: n for n in c.get("/api/v1/nodes")["items"]}
        self.assertEqual(len(nodes), 20)
        self.assertEqual(nodes["gpu-0000"]["metadata"]["labels"]["rig.troupe.io/kind"], "h100")
        self.assertEqual(nodes["gpu-0001"]["metadata"]["labels"]["rig.troupe.io/kind"], "v100")
        self.assertEqual(nodes["gpu-0002"]["metadata"]["labels"]["rig.troupe.io/kind"], "pcie")
        self.assertTrue(nodes["gpu-0018"]["spec"].get("unschedulable"))
        self.assertEqual([t["key"] for t in nodes["gpu-0017"]["spec"]["taints"]],
                         ["rig.troupe.io/maintenance"])
        self.assertEqual(nodes["gpu-0019"]["status"]["allocatable"]["nvidia.com/gpu"], "7")
        for n in nodes.values():
            ready = [x for x in n["status"]["conditions"] if x["type"] == "Ready"][0]
            self.assertEqual(ready["status"], "True")
            self.assertNotIn("node.kubernetes.io/not-ready",
                             [t["key"] for t in n["spec"].get("taints") or []])
            self.assertIn("GPU0", n["metadata"]["annotations"]["troupe.io/gpu-topology"])
        # The simulated kubelet ends a job: Running, then Succeeded after
        # rig.troupe.io/run-seconds; its GPUs are then free for the next pod.
        from e2e_common import gpu_pod, wait_until
        pod = gpu_pod("job", 8, hosts=["gpu-0000"], run_seconds=1)
        status, out = c.request("POST", "/api/v1/namespaces/default/pods", pod)
        self.assertEqual(status, 201, out)
        path = "/api/v1/namespaces/default/pods/job"
        wait_until(lambda: c.get(path)["status"].get("phase") == "Running", what="job Running")
        done = wait_until(lambda: (lambda p: p if p["status"].get("phase") == "Succeeded"
                                   else None)(c.get(path)), what="job Succeeded")
        self.assertEqual(done["spec"]["nodeName"], "gpu-0000")
        self.assertEqual(
            done["status"]["containerStatuses"][0]["state"]["terminated"]["reason"], "Completed")
        status, out = c.request("POST", "/api/v1/namespaces/default/pods",
                                gpu_pod("next", 8, hosts=["gpu-0000"]))
        self.assertEqual(status, 201, out)
        wait_until(lambda: c.get("/api/v1/namespaces/default/pods/next")["spec"].get("nodeName"),
                   what="the next 8-GPU pod bound where the job ran")
        # troupe runs as its service account, not as an admin.
        self.assertIn("token", open(os.path.join(self.dir, "config", "troupe.kubeconfig")).read())
        rc, out = self.cli("status", "--dir", self.dir)
        self.assertEqual(rc, 0, out)
        # Down, twice.
        rc, out = self.cli("down", "--dir", self.dir)
        self.assertEqual(rc, 0, out)
        self.assertIn("stopped", out)
        for p in pids.values():
            self.assertFalse(os.path.exists("/proc/%d" % p) and
                             open("/proc/%d/stat" % p).read().split(")")[-1].split()[0] != "Z",
                             "pid %d still running" % p)
        rc, out = self.cli("down", "--dir", self.dir)
        self.assertEqual(rc, 0, out)
        self.assertIn("nothing running", out)
        for name in rig.COMPONENTS:
            self.assertTrue(os.path.getsize(os.path.join(self.dir, "logs", name + ".log")) > 0, name)


if __name__ == "__main__":
    unittest.main()
