#!/usr/bin/env python3
"""troupe-node's allocator mode against the kubelet's own device manager.

The "kubelet" is tests/e2e/cmd/devicemanager: the pinned release's device
manager (k8s.io/kubernetes/pkg/kubelet/cm/devicemanager) with its
registration server, checkpoint and allocation code, and the release's
PodResources server answering from it. troupe-node serves the device plugin
API v1beta1 with the fake NVML (a DGX A100 capture) and reads this node's pods
from the fake API server, where each carries troupe's choice in
troupe.io/gpu-ids. Checked here:

  - registration: the device manager sees 8 healthy GPUs;
  - a sequence of pods admitted one by one, with choices deliberately unlike
    the device manager's own order: every container gets exactly troupe's
    choice, NVIDIA_VISIBLE_DEVICES with the UUIDs and the CDI names; the share
    is printed as the measured figure (it must be 100 %: no case in this
    sequence is ambiguous);
  - the ambiguous case (two pods of one size, both choices free, the younger
    admitted first): the allocation differs from troupe's choice, and the
    read-back (troupe.io/gpu-ids-actual) says what each really got, and troupe's
    own cache (the daemon, watching the same API server) counts that;
  - a device fault (an XID from the fake NVML) lowering allocatable, not
    capacity;
  - a kubelet restart (every socket deleted): troupe-node registers again and
    allocates as before.
"""
import json
import os
import random
import select
import signal
import subprocess
import tempfile
import time
import unittest

from fake_apiserver import FakeAPIServer
from live_common import FAST_CONFIG, kubeconfig_for
from troupe_proc import Troupe

ROOT = os.environ.get("TROUPE_SOURCE_ROOT",
                      os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NODE_BIN = os.environ.get("TROUPE_NODE_BIN",
                          os.path.join(ROOT, "build", "src", "node", "troupe-node"))
FAKE_NVML = os.environ.get("FAKE_NVML_LIB",
                           os.path.join(ROOT, "build", "tests", "node", "libfake_nvml.so"))
DEVICEMANAGER = os.environ.get("DEVICEMANAGER_BIN",
                               os.path.join(ROOT, "build", "k8s", "v1.37.2", "devicemanager"))
TOPO = os.path.join(ROOT, "tests", "data", "topo")
TOKEN = "device-plugin-token"
RES = "nvidia.com/gpu"


def uuid(i):
    return f"GPU-fake-0000-{i:04d}"


def index(u):
    return int(u.rsplit("-", 1)[1])


def fmt(devs):
    return ",".join(str(i) for i in sorted(devs))


class Kubelet:
    """The device manager harness, one JSON command per line."""

    def __init__(self, dirname, log):
        self.dir = os.path.join(dirname, "device-plugins")
        os.makedirs(self.dir)
        self.pr = os.path.join(dirname, "pod-resources.sock")
        self.p = subprocess.Popen([DEVICEMANAGER, "--dir", self.dir,
                                   "--pod-resources-socket", self.pr],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                  text=True)
        ready = self.read(60)
        if ready.get("event") != "ready":
            raise AssertionError(f"the device manager did not start: {ready}")

    def read(self, timeout):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            raise AssertionError(f"the device manager said nothing in {timeout}s")
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError(f"the device manager exited ({self.p.poll()})")
        return json.loads(line)

    def do(self, timeout=60, **cmd):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        return self.read(timeout)

    def wait(self, allocatable, capacity=None, timeout=30):
        cmd = {"op": "wait", "resource": RES, "allocatable": allocatable, "timeout_s": timeout}
        if capacity is not None:
            cmd["capacity"] = capacity
        return self.do(timeout + 10, **cmd)

    def stop(self):
        if self.p.poll() is None:
            try:
                self.do(10, op="quit")
            except (AssertionError, BrokenPipeError, OSError):
                pass
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p.stdin.close()
        self.p.stdout.close()


class AllocatorBase(unittest.TestCase):
    def setUp(self):
        for path in (NODE_BIN, FAKE_NVML, DEVICEMANAGER):
            if not os.access(path, os.R_OK):
                self.fail(f"{path} is missing: meson builds troupe-node and the fake NVML; "
                          "scripts/lib/k8s.sh builds the device manager (ensure_devicemanager)")
        self.api = FakeAPIServer(token=TOKEN).start()
        self.addCleanup(self.api.stop)
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        d = self.tmp.name
        self.token = os.path.join(d, "token")
        with open(self.token, "w") as f:
            f.write(TOKEN)
        self.api.create("nodes", {"apiVersion": "v1", "kind": "Node",
                                  "metadata": {"name": "gpu-0", "annotations": {}},
                                  "status": {"capacity": {RES: "8"}, "allocatable": {RES: "8"}}})
        self.kubelet_log = open(os.path.join(d, "devicemanager.log"), "w")
        self.addCleanup(self.kubelet_log.close)
        self.kubelet = Kubelet(d, self.kubelet_log)
        self.addCleanup(self.kubelet.stop)
        self.xids = os.path.join(d, "xids")
        open(self.xids, "w").close()
        self.node_log_path = os.path.join(d, "troupe-node.log")
        self.node_log = open(self.node_log_path, "w")
        self.addCleanup(self.node_log.close)
        env = dict(os.environ, FAKE_NVML_TOPO=os.path.join(TOPO, "dgx-a100.txt"),
                   FAKE_NVML_XIDS=self.xids)
        self.node = subprocess.Popen(
            [NODE_BIN, "--node", "gpu-0", "--api-server", self.api.url, "--token-file",
             self.token, "--nvml", FAKE_NVML, "--nvidia-smi", "", "--allocator",
             "--device-plugin-dir", self.kubelet.dir, "--pod-resources-socket", self.kubelet.pr,
             "--interval", "5"], env=env, stderr=self.node_log)
        self.addCleanup(self.stop_node)
        got = self.kubelet.wait(8, 8)
        self.assertTrue(got["ok"], f"troupe-node never registered 8 GPUs: {got}\n{self.log()}")
        # The kubelet lists the devices before it answers Register: wait for
        # troupe-node's line saying the registration finished too, so a test
        # starts from a settled plugin.
        deadline = time.monotonic() + 10
        while "registered nvidia.com/gpu with the kubelet" not in self.log():
            self.assertLess(time.monotonic(), deadline, self.log())
            time.sleep(0.05)
        self.created = 0

    def stop_node(self):
        if self.node.poll() is None:
            self.node.send_signal(signal.SIGTERM)
            try:
                self.assertEqual(self.node.wait(timeout=20), 0, self.log())
            finally:
                if self.node.poll() is None:
                    self.node.kill()
                    self.node.wait()

    def log(self):
        self.node_log.flush()
        with open(self.node_log_path) as f:
            return f.read()

    def pod(self, name, choice, count=None):
        """A pod bound to gpu-0 with troupe's choice, each younger than the last."""
        self.created += 1
        count = count if count is not None else len(choice)
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "ml", "uid": "uid-" + name,
                             "creationTimestamp": "2026-01-01T%02d:%02d:%02dZ" % (
                                 self.created // 3600, self.created // 60 % 60,
                                 self.created % 60),
                             "annotations": {"troupe.io/gpu-ids": fmt(choice)}},
                "spec": {"nodeName": "gpu-0", "containers": [{
                    "name": "c", "image": "x",
                    "resources": {"limits": {RES: str(count)}, "requests": {RES: str(count)}}}]},
                "status": {"phase": "Pending"}}
        self.api.create("pods", body)
        return self.api.get("pods", "ml", name)

    def admit(self, pod):
        got = self.kubelet.do(op="admit", pod=pod)
        self.assertTrue(got["ok"], f"admitting {pod['metadata']['name']}: {got}\n{self.log()}")
        return got["containers"][0]

    def remove(self, name):
        got = self.kubelet.do(op="remove", uid="uid-" + name)
        self.assertTrue(got["ok"], got)
        self.api.delete("pods", "ml", name)

    def actual(self, name):
        return self.api.get("pods", "ml", name)["metadata"].get("annotations", {}).get(
            "troupe.io/gpu-ids-actual")


class Allocator(AllocatorBase):
    def test_a_sequence_of_pods_gets_troupes_choices(self):
        rng = random.Random(16)
        free, live = set(range(8)), {}
        equal = total = 0
        for step in range(60):
            # Now and then a pod ends, freeing its devices.
            if live and (rng.random() < 0.4 or len(free) < 2):
                name = rng.choice(sorted(live))
                self.remove(name)
                free |= live.pop(name)
            size = rng.choice([1, 2, 4])
            if size > len(free):
                continue
            # Not the lowest free indices: what the device manager alone
            # would not give.
            choice = set(rng.sample(sorted(free), size))
            name = f"p{step}"
            c = self.admit(self.pod(name, choice))
            got = {index(u) for u in c["devices"]}
            total += 1
            equal += got == choice
            self.assertEqual(got, choice, f"{name}: troupe chose {fmt(choice)}, the kubelet "
                             f"gave {fmt(got)}\n{self.log()}")
            ids = ",".join(uuid(i) for i in sorted(choice))
            self.assertEqual(",".join(sorted(c["envs"]["NVIDIA_VISIBLE_DEVICES"].split(","))), ids)
            self.assertEqual(sorted(c["cdi"]), sorted(f"{RES}={uuid(i)}" for i in choice))
            free -= got
            live[name] = got
        self.assertGreater(total, 30)
        print(f"allocator mode: {equal} of {total} pods got troupe's choice "
              f"({100.0 * equal / total:.1f} %), none ambiguous")
        # The read-back agrees for every pod still running.
        deadline = time.monotonic() + 30
        while any(self.actual(n) != fmt(d) for n, d in live.items()):
            self.assertLess(time.monotonic(), deadline, "the read-back never caught up")
            time.sleep(0.2)

    def test_batches_admitted_in_any_order(self):
        """Pods bound in batches of one to three and admitted in a random order,
        as a kubelet may: the ambiguous cases now happen by themselves. Every
        admission is classed by the rule as worked out here: ambiguous (two or
        more waiting pods of that size whose choices are free and differ),
        displaced (its choice was given away by an earlier ambiguous answer), or
        plain, which must get troupe's choice every time. Prints the shares."""
        rng = random.Random(1616)
        live, actual = {}, {}
        plain = plain_equal = amb = amb_equal = displaced = 0
        for step in range(40):
            for name in [n for n in sorted(live) if rng.random() < 0.5]:
                self.remove(name)
                del live[name]
            free = set(range(8)) - set().union(*live.values())
            batch = []
            for k in range(rng.randint(1, 3)):
                size = rng.choice([1, 2, 2, 4])
                if size > len(free):
                    break
                choice = set(rng.sample(sorted(free), size))
                free -= choice
                batch.append((f"b{step}-{k}", choice, self.pod(f"b{step}-{k}", choice)))
            rng.shuffle(batch)
            for i, (name, choice, body) in enumerate(batch):
                avail = set(range(8)) - set().union(*live.values())
                waiting = [c for _, c, _ in batch[i:] if len(c) == len(choice) and c <= avail]
                ambiguous = len({frozenset(c) for c in waiting}) > 1
                got = {index(u) for u in self.admit(body)["devices"]}
                live[name] = got
                actual[name] = got
                if ambiguous:
                    amb += 1
                    amb_equal += got == choice
                elif not choice <= avail:
                    displaced += 1
                else:
                    plain += 1
                    plain_equal += got == choice
                    self.assertEqual(got, choice, f"{name} (not ambiguous): troupe chose "
                                     f"{fmt(choice)}, the kubelet gave {fmt(got)}\n{self.log()}")
        self.assertGreater(plain, 20)
        self.assertGreater(amb, 0, "the sequence met no ambiguous case")
        print(f"allocator mode, batches in random order: {plain_equal} of {plain} plain "
              f"admissions got troupe's choice ({100.0 * plain_equal / plain:.1f} %); "
              f"ambiguous {amb} ({amb_equal} still equal), displaced by them {displaced}")
        # Whatever happened, the read-back tells troupe the truth for every pod
        # still running.
        deadline = time.monotonic() + 30
        while any(self.actual(n) != fmt(d) for n, d in live.items()):
            self.assertLess(time.monotonic(), deadline, "the read-back never caught up: " + str(
                {n: (self.actual(n), fmt(d)) for n, d in live.items()}))
            time.sleep(0.2)

    def test_the_ambiguous_case_is_read_back(self):
        old = self.pod("old", {0, 1})
        young = self.pod("young", {4, 5})
        # The kubelet admits the younger first: GetPreferredAllocation cannot
        # tell them apart and answers the oldest's choice.
        got_young = {index(u) for u in self.admit(young)["devices"]}
        got_old = {index(u) for u in self.admit(old)["devices"]}
        self.assertEqual(got_young, {0, 1})
        self.assertNotEqual(got_old, {0, 1})
        self.assertIn("ambiguous, 2 pods on this node await 2 GPUs", self.log())
        # Both corrected by the read-back.
        deadline = time.monotonic() + 30
        while (self.actual("young"), self.actual("old")) != (fmt(got_young), fmt(got_old)):
            self.assertLess(time.monotonic(), deadline,
                            f"read-back: young {self.actual('young')}, old {self.actual('old')}")
            time.sleep(0.2)
        # And troupe's cache, watching the same API server, counts what they
        # got, not what it chose.
        troupe = Troupe(source=["--kubeconfig", kubeconfig_for(self.api, self.token,
                                                               self.tmp.name)],
                        config_text=FAST_CONFIG)
        troupe.start()
        self.addCleanup(troupe.stop)

        def cached():
            return {p["uid"]: p["devices"] for p in troupe.cache()["pods"]}
        want = {"uid-young": fmt(got_young), "uid-old": fmt(got_old)}
        deadline = time.monotonic() + 30
        while {u: cached().get(u) for u in want} != want:
            self.assertLess(time.monotonic(), deadline, f"troupe's cache: {cached()}")
            time.sleep(0.2)
        self.assertEqual(troupe.metric("troupe_pods_devices_read_back_differ"), 2)
        print(f"allocator mode, ambiguous: young got {fmt(got_young)} (chose 4,5), old got "
              f"{fmt(got_old)} (chose 0,1); both read back, and troupe's cache counts them")

    def test_a_device_fault_lowers_allocatable_not_capacity(self):
        with open(self.xids, "a") as f:
            f.write("2 13\n3 79\n")      # an application's XID, then a device fault
        got = self.kubelet.wait(7, 8)
        self.assertTrue(got["ok"], f"{got}\n{self.log()}")
        self.assertIn(uuid(3), got["unhealthy"])
        self.assertNotIn(uuid(2), got["unhealthy"])
        self.assertIn("ListAndWatch: 8 GPUs, 1 unhealthy", self.log())

    def test_a_kubelet_restart_is_followed_by_registering_again(self):
        restarted = "was removed (the kubelet restarted)"
        registered = "registered nvidia.com/gpu with the kubelet"
        got = self.kubelet.do(op="restart")
        self.assertTrue(got["ok"], got)
        got = self.kubelet.wait(8, 8)
        self.assertTrue(got["ok"], f"not registered again: {got}\n{self.log()}")
        self.assertIn(restarted, self.log())
        # The kubelet lists the devices before it answers Register, so the
        # line saying so may come a moment after the capacity; only the lines
        # after the restart's count.
        deadline = time.monotonic() + 10
        while self.log().split(restarted, 1)[-1].count(registered) != 1:
            self.assertLess(time.monotonic(), deadline, self.log())
            time.sleep(0.05)
        c = self.admit(self.pod("after", {6, 7}))
        self.assertEqual({index(u) for u in c["devices"]}, {6, 7})


class Flags(unittest.TestCase):
    def run_node(self, *args):
        return subprocess.run([NODE_BIN, "--node", "n", *args], capture_output=True, text=True,
                              timeout=30)

    def test_bad_flags(self):
        p = self.run_node("--allocator", "--once")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--allocator serves until stopped", p.stderr)
        p = self.run_node("--cdi-kind", "gpu")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--cdi-kind takes VENDOR/CLASS", p.stderr)
        p = subprocess.run([NODE_BIN, "--help"], capture_output=True, text=True, timeout=30)
        for flag in ("--allocator", "--device-plugin-dir", "--cdi-kind"):
            self.assertIn(flag, p.stdout)


if __name__ == "__main__":
    unittest.main()
