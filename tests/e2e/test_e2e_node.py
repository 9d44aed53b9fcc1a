#!/usr/bin/env python3
"""troupe-node on the rig: the node side end to end, against the real
kube-apiserver, kube-scheduler and troupe.

troupe-node runs for the rig's node gpu-0000 (an 8-GPU H100 board) as its own
identity, system:serviceaccount:kube-system:troupe-node, with a token bound to a
pod on that node (so the API server names the node in the token's user info),
under both admission policies (config/deploy/admission-policy.yaml for pods,
node-admission-policy.yaml for nodes) and the least RBAC it needs. Its NVML is
the fake library (tests/node/fake_nvml.c, answering from the dgx-h100 capture,
with XIDs injected from a file) and its kubelet PodResources API the real
kubelet's server code (tests/e2e/cmd/podresources).

  test_publication_read_back_and_health
    - the topology and UUIDs it reads are on the Node, and troupe places by them;
    - a GPU pod troupe placed on devices A is read back as having got devices B
      (a deliberately wrong plan): the pod carries troupe.io/gpu-ids-actual B,
      and troupe counts B (its /metrics, and the next pods get A);
    - a GPU that raises a device-fault XID is published unhealthy and troupe
      never gives it out: a 5-GPU pod gets exactly the other five free
      devices, and a 1-GPU pod then stays pending though the kubelet still
      reports 8 allocatable.

  test_the_allocator_gives_troupes_choices
    - troupe-node --allocator as the device plugin of the kubelet's own device
      manager (tests/e2e/cmd/devicemanager), with the plain file's RBAC plus
      the rule it says to uncomment for allocator mode: pods kube-scheduler
      and troupe placed on the node, admitted one after another, each get
      exactly troupe's choice, found by listing the node's pods on the real
      API server with the agent's pod-bound token.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster as rig  # noqa: E402
from e2e_common import E2E, apply_node_rbac, gpu_ids, gpu_pod, metric_samples, \
    module_cluster, wait_until  # noqa: E402

DEPLOY = os.path.join(rig.ROOT, "config", "deploy")
BUILD = os.path.join(rig.ROOT, "build")
NODE_BIN = os.environ.get("TROUPE_NODE_BIN", os.path.join(BUILD, "src", "node", "troupe-node"))
FAKE_NVML = os.environ.get("FAKE_NVML_LIB",
                           os.path.join(BUILD, "tests", "node", "libfake_nvml.so"))
PODRESOURCES = os.environ.get("PODRESOURCES_BIN",
                              os.path.join(BUILD, "k8s", "v1.37.2", "podresources"))
DEVICEMANAGER = os.environ.get("DEVICEMANAGER_BIN",
                               os.path.join(BUILD, "k8s", "v1.37.2", "devicemanager"))
TOPO = os.path.join(rig.ROOT, "tests", "data", "topo", "dgx-h100.txt")
NODE = "gpu-0000"
AGENT = "system:serviceaccount:kube-system:troupe-node"

setUpModule, tearDownModule = module_cluster("node", nodes=3)


def uuid(i):
    return "GPU-fake-0000-%04d" % i


class NodeSide(E2E):

    @classmethod
    def setUpClass(cls):
        c = cls.cluster
        for path in (NODE_BIN, FAKE_NVML, PODRESOURCES, DEVICEMANAGER):
            if not os.path.exists(path):
                raise AssertionError(f"{path} is missing: ninja -C build, and "
                                     "scripts/lib/k8s.sh for podresources and devicemanager")
        # troupe-node's identity and RBAC exactly as shipped, with the rule for
        # allocator mode uncommented, so the tests prove the shipped role is
        # enough (the DaemonSet cannot run here).
        apply_node_rbac(c, allocator=True)
        for policy in ("admission-policy.yaml", "node-admission-policy.yaml"):
            c.kubectl("apply", "-f", os.path.join(DEPLOY, policy))

    def setUp(self):
        super().setUp()
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.procs = []
        self.addCleanup(self.stop_procs)

    def stop_procs(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def agent_token(self):
        """A troupe-node token bound to a pod on NODE: the API server puts the
        node's name in its user info, which the policies check."""
        holder = "troupe-node-" + NODE
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": holder, "namespace": "kube-system"},
               "spec": {"schedulerName": "nobody", "serviceAccountName": "troupe-node",
                        "containers": [{"name": "agent", "image": "registry.invalid/x:1"}]}}
        status, out = self.c.request("POST", "/api/v1/namespaces/kube-system/pods", pod)
        self.assertIn(status, (201, 409), out)
        self.addCleanup(self.c.request, "DELETE",
                        "/api/v1/namespaces/kube-system/pods/" + holder)
        status, out = self.c.request(
            "POST", "/api/v1/namespaces/kube-system/pods/%s/binding" % holder,
            {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": holder},
             "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}})
        self.assertIn(status, (201, 409), out)
        uid = self.c.get("/api/v1/namespaces/kube-system/pods/" + holder)["metadata"]["uid"]
        return self.c.kubectl("-n", "kube-system", "create", "token", "troupe-node",
                              "--bound-object-kind", "Pod", "--bound-object-name", holder,
                              "--bound-object-uid", uid).stdout.strip()

    def kubeconfig(self, token):
        path = os.path.join(self.dir.name, "kubeconfig")
        with open(path, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "agent",
                       "clusters": [{"name": "rig", "cluster": {
                           "server": self.c.api_url,
                           "certificate-authority": self.c.pki.path("ca.crt")}}],
                       "users": [{"name": "agent", "user": {"token": token}}],
                       "contexts": [{"name": "agent",
                                     "context": {"cluster": "rig", "user": "agent"}}]}, f)
        return path

    def kubelet_says(self, pods):
        """What the PodResources server answers: {pod name: [device indices]}."""
        with open(self.pods_file + ".tmp", "w") as f:
            json.dump({"pods": [{"namespace": self.ns, "name": name, "uid": uid,
                                 "containers": [{"name": "work", "devices": [
                                     {"resource": "nvidia.com/gpu",
                                      "ids": [uuid(i) for i in ids]}]}]}
                                for name, (uid, ids) in pods.items()],
                       "allocatable": [{"resource": "nvidia.com/gpu",
                                        "ids": [uuid(i) for i in range(8)]}]}, f)
        os.replace(self.pods_file + ".tmp", self.pods_file)

    def node_ann(self):
        return self.c.get("/api/v1/nodes/" + NODE)["metadata"].get("annotations") or {}

    def test_publication_read_back_and_health(self):
        sock = os.path.join(self.dir.name, "kubelet.sock")
        self.pods_file = os.path.join(self.dir.name, "pods.json")
        xids = os.path.join(self.dir.name, "xids")
        open(xids, "w").close()
        self.kubelet_says({})
        self.server_log = open(os.path.join(self.dir.name, "podresources.log"), "w")
        self.addCleanup(self.server_log.close)
        server = subprocess.Popen([PODRESOURCES, "--socket", sock, "--pods", self.pods_file],
                                  stderr=self.server_log)
        self.procs.append(server)
        wait_until(lambda: os.path.exists(sock), timeout=30, what="the PodResources socket")
        log = open(os.path.join(self.dir.name, "troupe-node.log"), "w")
        self.addCleanup(log.close)
        agent = subprocess.Popen(
            [NODE_BIN, "--kubeconfig", self.kubeconfig(self.agent_token()), "--node", NODE,
             "--nvml", FAKE_NVML, "--nvidia-smi", "", "--pod-resources-socket", sock,
             "--interval", "5", "--log-level", "debug"],
            env=dict(os.environ, FAKE_NVML_TOPO=TOPO, FAKE_NVML_XIDS=xids),
            stderr=log)
        self.procs.insert(0, agent)

        def agent_log():
            with open(log.name) as f:
                return f.read()

        def wait(cond, timeout, what):
            """wait_until, failing with troupe-node's log as it is then."""
            try:
                wait_until(cond, timeout=timeout, what=what)
            except AssertionError as e:
                self.fail("%s\n--- troupe-node ---\n%s" % (e, agent_log()))

        # Publication, under the node policy, as the agent.
        wait(lambda: self.node_ann().get("troupe.io/gpu-topology-source") == "nvml",
             60, "the topology published")
        ann = self.node_ann()
        self.assertEqual(ann["troupe.io/gpu-uuids"].split(","), [uuid(i) for i in range(8)])
        self.assertIn("NV18", ann["troupe.io/gpu-topology"])

        # troupe places a 2-GPU pod on NODE; the kubelet "gave" it two others.
        self.create(gpu_pod("work", 2, hosts=[NODE]))
        work = self.wait_bound("work")
        chosen = gpu_ids(work)
        self.assertEqual(len(chosen), 2)
        got = [i for i in (7, 6, 5, 4) if i not in chosen][:2]
        self.kubelet_says({"work": (work["metadata"]["uid"], got)})
        want = ",".join(str(i) for i in sorted(got))
        wait(lambda: (self.pod("work")["metadata"].get("annotations") or {}).get(
            "troupe.io/gpu-ids-actual") == want, 60, "the read-back written")
        # The line is written just after the patch the wait saw: wait for it too.
        line = "pod %s/work got devices %s" % (self.ns, want)
        wait(lambda: line in agent_log(), 10, "the read-back logged")
        wait_until(lambda: metric_samples(self.c.metrics("troupe"),
                                          "troupe_pods_devices_read_back_differ").get("") == 1.0,
                   timeout=30, what="troupe counting the read-back")

        # A device fault on a GPU neither pod holds.
        faulty = next(i for i in range(8) if i not in chosen and i not in got)
        with open(xids, "a") as f:
            f.write("%d 79\n" % faulty)
        wait(lambda: self.node_ann().get("troupe.io/gpu-unhealthy") == str(faulty), 30,
             "the fault published")
        # troupe gives the next pods only the healthy free devices: its own
        # choice for "work" (free again, since the kubelet gave others) among
        # them, never the faulty GPU nor the read-back ones.
        free = sorted(set(range(8)) - set(got) - {faulty})
        self.assertEqual(len(free), 5)
        # The cache may need a moment to see the Node's new annotation.
        time.sleep(2)
        self.create(gpu_pod("big", 5, hosts=[NODE]))
        self.assertEqual(sorted(gpu_ids(self.wait_bound("big"))), free)
        self.create(gpu_pod("one-more", 1, hosts=[NODE]))
        self.assert_never_bound(["one-more"], 10)
        agent.send_signal(signal.SIGTERM)
        self.assertEqual(agent.wait(timeout=15), 0)
        self.assertIn("GPU %d raised XID 79, a device fault" % faulty, agent_log())

    def test_the_allocator_gives_troupes_choices(self):
        kdir = os.path.join(self.dir.name, "dp")
        os.makedirs(kdir)
        pr = os.path.join(self.dir.name, "pr.sock")
        klog = open(os.path.join(self.dir.name, "devicemanager.log"), "w")
        self.addCleanup(klog.close)
        kubelet = subprocess.Popen([DEVICEMANAGER, "--dir", kdir, "--pod-resources-socket", pr],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=klog,
                                   text=True)
        self.procs.append(kubelet)
        self.addCleanup(kubelet.stdout.close)
        self.addCleanup(kubelet.stdin.close)

        def ask(**cmd):
            kubelet.stdin.write(json.dumps(cmd) + "\n")
            kubelet.stdin.flush()
            return json.loads(kubelet.stdout.readline())
        self.assertEqual(json.loads(kubelet.stdout.readline()).get("event"), "ready")
        log = open(os.path.join(self.dir.name, "troupe-node.log"), "w")
        self.addCleanup(log.close)
        agent = subprocess.Popen(
            [NODE_BIN, "--kubeconfig", self.kubeconfig(self.agent_token()), "--node", NODE,
             "--nvml", FAKE_NVML, "--nvidia-smi", "", "--pod-resources-socket", pr,
             "--allocator", "--device-plugin-dir", kdir, "--interval", "5"],
            env=dict(os.environ, FAKE_NVML_TOPO=TOPO), stderr=log)
        self.procs.insert(0, agent)

        def agent_log():
            with open(log.name) as f:
                return f.read()
        got = ask(op="wait", resource="nvidia.com/gpu", allocatable=8, capacity=8, timeout_s=60)
        self.assertTrue(got["ok"], "%s\n--- troupe-node ---\n%s" % (got, agent_log()))
        # One pod after another, as the kubelet admits them; troupe's choice
        # for each is what its container gets.
        for name, n in (("a-two", 2), ("b-one", 1), ("c-four", 4)):
            self.create(gpu_pod(name, n, hosts=[NODE]))
            pod = self.wait_bound(name)
            chosen = sorted(gpu_ids(pod))
            got = ask(op="admit", pod=pod)
            self.assertTrue(got["ok"], "%s\n--- troupe-node ---\n%s" % (got, agent_log()))
            devices = sorted(int(u.rsplit("-", 1)[1]) for u in got["containers"][0]["devices"])
            self.assertEqual(devices, chosen, "%s: troupe chose %s, the kubelet gave %s\n%s" % (
                name, chosen, devices, agent_log()))
            self.assertIn("GPUs for pod %s/%s: its choice" % (self.ns, name), agent_log())
        self.assertNotIn("cannot see this node's pods", agent_log())
        ask(op="quit")
        agent.send_signal(signal.SIGTERM)
        self.assertEqual(agent.wait(timeout=15), 0)


if __name__ == "__main__":
    unittest.main()
