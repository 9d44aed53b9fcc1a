#!/usr/bin/env python3
"""troupe-node, the topology publisher, against the fake API server.

troupe-node reads the GPUs through the fake NVML (tests/node/fake_nvml.c,
answering from a real machine's capture in tests/data/topo) and writes
troupe.io/gpu-topology, troupe.io/gpu-uuids and troupe.io/gpu-topology-source
onto its own Node by one merge patch, only when they change. Checked here:
what lands on the Node (and that troupe's daemon reads it as the capture's
topology), no write when nothing changed, a write when the GPUs change, other
annotations kept, and the failures: no GPU source (nothing written), an
unknown node, a refused write, bad flags; and the loop ending on SIGTERM.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from fake_apiserver import FakeAPIServer

ROOT = os.environ.get("TROUPE_SOURCE_ROOT",
                      os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NODE_BIN = os.environ.get("TROUPE_NODE_BIN",
                          os.path.join(ROOT, "build", "src", "node", "troupe-node"))
FAKE_NVML = os.environ.get("FAKE_NVML_LIB",
                           os.path.join(ROOT, "build", "tests", "node", "libfake_nvml.so"))
TOPO = os.path.join(ROOT, "tests", "data", "topo")
TOKEN = "node-agent-token"


def node(name, annotations=None):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                         "annotations": dict(annotations or {})},
            "status": {"capacity": {"nvidia.com/gpu": "8"},
                       "allocatable": {"nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


class Base(unittest.TestCase):
    """The fake API server with Node gpu-0, and running troupe-node against it."""

    def setUp(self):
        self.api = FakeAPIServer(token=TOKEN).start()
        self.addCleanup(self.api.stop)
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.token = os.path.join(self.dir.name, "token")
        with open(self.token, "w") as f:
            f.write(TOKEN)
        self.api.create("nodes", node("gpu-0", {"example.com/owner": "team-a"}))

    def run_node(self, *args, capture="dgx-a100.txt", expect=0, extra_env=None):
        env = dict(os.environ)
        env.pop("FAKE_NVML_TOPO", None)
        if capture:
            env["FAKE_NVML_TOPO"] = os.path.join(TOPO, capture)
        env.update(extra_env or {})
        # The read-back (ReadBack below) is off unless a test asks for it.
        rb = [] if any(a.startswith("--pod-resources-socket") for a in args) \
            else ["--no-read-back"]
        p = subprocess.run([NODE_BIN, "--api-server", self.api.url, "--token-file", self.token,
                            "--nvml", FAKE_NVML, "--nvidia-smi", "", *rb, *args],
                           capture_output=True, text=True, env=env, timeout=60)
        if p.returncode != expect:
            self.fail(f"troupe-node exit {p.returncode}, wanted {expect}\n"
                      f"stdout: {p.stdout}\nstderr: {p.stderr}")
        return p

    def annotations(self, name="gpu-0"):
        return self.api.get("nodes", "", name)["metadata"].get("annotations", {})

    def patches(self):
        return [r for r in self.api.requests if r[0] == "PATCH"]

    def simulate_on_published_node(self, jobs, *args):
        """troupe simulate over a snapshot holding Node gpu-0 as published: how
        troupe's own reading of the annotations places <jobs>."""
        snap = os.path.join(self.dir.name, "snap.json")
        with open(snap, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "List", "metadata": {},
                       "items": [self.api.get("nodes", "", "gpu-0")]}, f)
        troupe = os.environ.get("TROUPE_BIN", os.path.join(ROOT, "build", "src", "extender",
                                                           "troupe"))
        p = subprocess.run([troupe, "simulate", "--cluster", snap, "--workload", "/dev/stdin",
                            "-o", "json", *args], input=json.dumps({"jobs": jobs}),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)["policies"][0]

    def run_loop(self, capture, until, what, extra_env=None, *args):
        """troupe-node in its loop (no read-back) until <until>() holds, then
        SIGTERM, which must end it with 0; returns its stderr. <args> come
        after the defaults (a later --interval wins)."""
        env = dict(os.environ, FAKE_NVML_TOPO=os.path.join(TOPO, capture), NODE_NAME="gpu-0",
                   **(extra_env or {}))
        p = subprocess.Popen([NODE_BIN, "--api-server", self.api.url, "--token-file",
                              self.token, "--nvml", FAKE_NVML, "--nvidia-smi", "",
                              "--no-read-back", "--interval", "5", *args], env=env,
                             stderr=subprocess.PIPE, text=True)
        try:
            for cond, text in zip(until, what):
                deadline = time.monotonic() + 30
                while not cond():
                    self.assertLess(time.monotonic(), deadline, text)
                    time.sleep(0.05)
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(timeout=10), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        err = p.stderr.read()
        p.stderr.close()
        return err

    def printed_topology(self, capture):
        env = dict(os.environ, FAKE_NVML_TOPO=os.path.join(TOPO, capture))
        p = subprocess.run([NODE_BIN, "--print", "--nvml", FAKE_NVML, "--nvidia-smi", ""],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.split("troupe.io/gpu-topology:\n", 1)[1]

class NodeAgent(Base):
    def test_publishes_once_and_only_when_changed(self):
        self.run_node("--once", "--node", "gpu-0")
        ann = self.annotations()
        self.assertEqual(ann["troupe.io/gpu-topology"], self.printed_topology("dgx-a100.txt"))
        self.assertEqual(ann["troupe.io/gpu-uuids"].split(","),
                         [f"GPU-fake-0000-{i:04d}" for i in range(8)])
        self.assertEqual(ann["troupe.io/gpu-topology-source"], "nvml")
        self.assertEqual(ann["example.com/owner"], "team-a")      # a merge patch
        self.assertEqual(len(self.patches()), 1)
        # Nothing changed: a GET, no write.
        self.run_node("--once", "--node", "gpu-0")
        self.assertEqual(len(self.patches()), 1)
        # Other GPUs (an H100 board now): written again.
        self.run_node("--once", "--node", "gpu-0", capture="dgx-h100.txt")
        self.assertEqual(len(self.patches()), 2)
        self.assertEqual(self.annotations()["troupe.io/gpu-topology"],
                         self.printed_topology("dgx-h100.txt"))

    def test_troupe_reads_what_it_published(self):
        # troupe's daemon, from a snapshot of the Node as published, says the
        # node's topology came from the annotation with the capture's links.
        self.run_node("--once", "--node", "gpu-0", capture="dgx1-v100.txt")
        out = self.simulate_on_published_node([{"name": "four", "duration": 60, "gpus": 4}],
                                              "--per-job")
        # DGX-1's hybrid cube mesh has all-NVLink 4-GPU sets (0-3): troupe,
        # reading the published matrix, gives the pod one.
        self.assertEqual(out["nvlink_complete"]["rate"], 1.0)

    def test_no_gpu_source_publishes_nothing(self):
        p = self.run_node("--once", "--node", "gpu-0", capture=None, expect=1)
        self.assertIn("publishing no GPU topology for node gpu-0", p.stderr)
        self.assertIn("nvmlInit_v2 failed: Driver Not Loaded", p.stderr)
        self.assertIn("no nvidia-smi fallback", p.stderr)
        self.assertEqual(self.patches(), [])
        self.assertNotIn("troupe.io/gpu-topology", self.annotations())
        p = subprocess.run([NODE_BIN, "--print", "--nvml", "/nonexistent.so", "--nvidia-smi",
                            "/nonexistent/nvidia-smi"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertIn("cannot load the NVML library /nonexistent.so", p.stderr)
        self.assertIn("could not be run", p.stderr)

    def test_unknown_node_and_refused_write(self):
        p = self.run_node("--once", "--node", "gpu-9", expect=1)
        self.assertIn("GET node gpu-9: HTTP 404 (no such node: is --node right?)", p.stderr)
        self.api.deny("patch", "nodes")
        p = self.run_node("--once", "--node", "gpu-0", expect=1)
        self.assertIn("PATCH node gpu-0: HTTP 403", p.stderr)
        self.assertNotIn("troupe.io/gpu-topology", self.annotations())

    def test_bad_flags(self):
        for args, words in ((["--interval", "1"], "--interval takes 5 to 86400"),
                            (["--bogus"], "Usage: troupe-node"),
                            (["--once"], "which node?"),
                            (["--node", "x", "--kubeconfig", "k", "--api-server", "u"],
                             "not both")):
            env = dict(os.environ)
            env.pop("NODE_NAME", None)
            p = subprocess.run([NODE_BIN, *args], capture_output=True, text=True, env=env,
                               timeout=60)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(words, p.stderr)
        h = subprocess.run([NODE_BIN, "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(h.returncode, 0)
        for flag in ("--node", "--kubeconfig", "--api-server", "--token-file", "--nvml",
                     "--nvidia-smi", "--interval", "--once", "--print", "--log-level", "--log-format"):
            self.assertIn(flag, h.stdout)

    def test_a_device_fault_is_published_at_once_and_troupe_skips_the_gpu(self):
        # The fake NVML delivers the XIDs appended to this file while
        # troupe-node waits between rounds (--interval 60: only the event can
        # make it publish again within the test).
        xids = os.path.join(self.dir.name, "xids")
        open(xids, "w").close()

        def published_healthy():
            if self.annotations().get("troupe.io/gpu-unhealthy") != "":
                return False
            with open(xids, "a") as f:
                f.write("2 13\n3 79\n")       # an application's XID, then a device fault
            return True
        err = self.run_loop("dgx-a100.txt",
                            [published_healthy,
                             lambda: self.annotations().get("troupe.io/gpu-unhealthy") == "3"],
                            ["never published healthy", "the fault was never published"],
                            {"FAKE_NVML_XIDS": xids}, "--interval", "60")
        self.assertIn("GPU 3 raised XID 79, a device fault: published as unhealthy", err)
        self.assertNotIn("GPU 2 raised", err)
        # troupe, reading the Node as published, never offers GPU 3: an
        # 8-GPU pod can never fit the 8-GPU node.
        pol = self.simulate_on_published_node([{"name": "eight", "duration": 60, "gpus": 8},
                                               {"name": "seven", "duration": 60, "gpus": 7}])
        self.assertEqual((pol["jobs_refused"], pol["jobs_done"]), (1, 1))

    def test_the_loop_publishes_and_stops_on_sigterm(self):
        err = self.run_loop("pcie-2s.txt",
                            [lambda: "troupe.io/gpu-topology" in self.annotations()],
                            ["never published"])
        self.assertIn("published the topology of", err)
        self.assertIn("troupe-node stopping", err)


PODRESOURCES = os.environ.get("PODRESOURCES_BIN",
                              os.path.join(ROOT, "build", "k8s", "v1.37.2", "podresources"))


def pod(name, node_name, ids=None):
    ann = {"troupe.io/gpu-ids": ids} if ids else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", "uid": "uid-" + name,
                         "annotations": ann},
            "spec": {"nodeName": node_name, "containers": [{
                "name": "c", "image": "x",
                "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
            "status": {"phase": "Running"}}


class ReadBack(Base):
    """The devices the kubelet gave each pod, as the real kubelet's PodResources
    server (k8s.io/kubernetes/pkg/kubelet/apis/podresources, run by
    tests/e2e/cmd/podresources) lists them, written on the pods."""

    def setUp(self):
        super().setUp()
        if not os.access(PODRESOURCES, os.X_OK):
            self.fail(f"no PodResources server at {PODRESOURCES}: scripts/lib/k8s.sh builds it "
                      "(ensure_podresources), as ./scripts/test does")
        self.api.create("nodes", node("gpu-1"))
        self.api.create("pods", pod("p", "gpu-0", "0,1"))
        self.api.create("pods", pod("elsewhere", "gpu-1", "0,1"))
        self.api.create("pods", pod("mig", "gpu-0"))
        self.sock = os.path.join(self.dir.name, "kubelet.sock")
        self.pods_file = os.path.join(self.dir.name, "pods.json")
        self.listing({"p": ["GPU-fake-0000-0002", "GPU-fake-0000-0003"],
                      "elsewhere": ["GPU-fake-0000-0004"], "mig": ["MIG-0000-aaaa"],
                      "gone": ["GPU-fake-0000-0005"]})
        self.server = subprocess.Popen([PODRESOURCES, "--socket", self.sock,
                                        "--pods", self.pods_file],
                                       stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.stop_server)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.sock):
            self.assertIsNone(self.server.poll(), "the PodResources server exited")
            self.assertLess(time.monotonic(), deadline, "the PodResources server never listened")
            time.sleep(0.05)

    def stop_server(self):
        if self.server.poll() is None:
            self.server.terminate()
            self.server.wait(timeout=10)
        self.server.stderr.close()

    def listing(self, devices):
        with open(self.pods_file, "w") as f:
            json.dump({"pods": [{"namespace": "ml", "name": name, "uid": "uid-" + name,
                                 "containers": [{"name": "c", "devices": [
                                     {"resource": "nvidia.com/gpu", "ids": ids}]}]}
                                for name, ids in devices.items()],
                       "allocatable": [{"resource": "nvidia.com/gpu",
                                        "ids": [f"GPU-fake-0000-{i:04d}" for i in range(8)]}]},
                      f)

    def actual(self, name):
        return self.api.get("pods", "ml", name)["metadata"].get("annotations", {}).get(
            "troupe.io/gpu-ids-actual")

    def pod_patches(self):
        return [r for r in self.api.requests if r[0] == "PATCH" and "/pods/" in r[1]]

    def test_devices_are_written_on_the_pods_of_this_node(self):
        p = self.run_node("--once", "--node", "gpu-0", "--pod-resources-socket", self.sock)
        self.assertEqual(self.actual("p"), "2,3")
        self.assertIn("pod ml/p got devices 2,3: written as troupe.io/gpu-ids-actual", p.stderr)
        # Not this node's pod, an id that names no GPU here, a pod that is gone:
        # nothing written, the first two said why.
        self.assertIsNone(self.actual("elsewhere"))
        self.assertIn('pod ml/elsewhere is on node "gpu-1", not gpu-0', p.stderr)
        self.assertIsNone(self.actual("mig"))
        self.assertIn('device id "MIG-0000-aaaa" is no GPU of this node', p.stderr)
        self.assertEqual(len(self.pod_patches()), 1)
        # Unchanged: read, not written.
        self.run_node("--once", "--node", "gpu-0", "--pod-resources-socket", self.sock)
        self.assertEqual(len(self.pod_patches()), 1)
        # The kubelet's answer changes: written again.
        self.listing({"p": ["GPU-fake-0000-0004", "5"]})
        self.run_node("--once", "--node", "gpu-0", "--pod-resources-socket", self.sock)
        self.assertEqual(self.actual("p"), "4,5")
        self.assertEqual(len(self.pod_patches()), 2)

    def test_no_kubelet_socket_is_a_failure_said_once(self):
        p = self.run_node("--once", "--node", "gpu-0", "--pod-resources-socket",
                          os.path.join(self.dir.name, "absent.sock"), expect=1)
        self.assertIn("reading devices back on node gpu-0: gRPC /v1.PodResourcesLister/List",
                      p.stderr)
        # The topology is published all the same.
        self.assertIn("troupe.io/gpu-topology", self.annotations())


if __name__ == "__main__":
    unittest.main()
