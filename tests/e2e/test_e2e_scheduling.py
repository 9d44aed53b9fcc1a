#!/usr/bin/env python3
"""End-to-end: single pods through the real kube-scheduler calling troupe, on
the real API server, checked by reading pods, events and conditions.

  test_shipped_config_places_gpu_pods      1. the shipped config is accepted;
                                              GPU pods land where troupe says,
                                              with troupe.io/gpu-ids; CPU pods
                                              are unaffected
  test_unschedulable_reason_and_requeue    2. troupe's reason in FailedScheduling
                                              and PodScheduled; 9. the freeing
                                              event requeues the pod
  test_dra_claims_pass_through_troupe_untouched
                                           a pod with a DRA ResourceClaim and
                                              no managed resource never reaches
                                              troupe; one with both gets its
                                              claim from kube-scheduler's DRA
                                              plugin and its GPUs from troupe
  test_gpus_given_through_dra_are_not_offered_again
                                           a node's GPUs published both as
                                              nvidia.com/gpu and by
                                              gpu.nvidia.com's ResourceSlice: a
                                              claim given 3 through DRA, troupe
                                              refuses an 8-GPU pod there and
                                              gives a 5-GPU pod the other five
  test_shared_gpus_from_the_labels         nodes labelled as NVIDIA's GPU
                                              Feature Discovery labels shared
                                              GPUs: time-slicing (replicas
                                              spread, "GPU:replica" ids, a
                                              12-replica pod on 8 GPUs), MPS
                                              (above 1 refused with the reason),
                                              MIG single (slices packed on one
                                              GPU), a required topology refused
  test_extended_resource_served_through_dra_is_never_double_booked
                                           KEP-5004: a DeviceClass serving
                                              nvidia.com/gpu through DRA; a
                                              DRA-only node refused by troupe
                                              with the reason, a device-plugin
                                              node given troupe's devices and no
                                              DRA claim
  test_dra_slices_attributes_give_a_topology
                                           a node with no topology annotation
                                              or profile: required:PHB refused
                                              (unknown), then promised once a
                                              gpu.nvidia.com slice gives its
                                              GPUs' pcieRoot and numaNode
  test_topology_required                   3. troupe.io/topology: required on
                                              NVSwitch, cube-mesh and PCIe nodes
  test_preemption_through_postfilter       6. preemption through troupe's
                                              preempt verb
  test_scheduler_served_through_a_connection_flood
                                           5,000 idle connections and 300
                                              slowloris clients on troupe's
                                              port (from 127.0.0.1, like
                                              kube-scheduler) while the real
                                              kube-scheduler places pods: every
                                              pod is bound, troupe displaced the
                                              idle ones to make room

The cluster: 20 simulated nodes (tests/e2e/cmd/kubesim/nodes.go): gpu-0000 (H100
NVSwitch), gpu-0001 (V100 cube-mesh), gpu-0002 (L40S PCIe), and so on in turn;
gpu-0017 tainted, gpu-0018 cordoned, gpu-0019 with 7 of 8 GPUs allocatable.
"""
import json
import os
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The attackers of the integration test, pointed at the real rig.
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from test_abuse import Attack, raise_fd_limit  # noqa: E402
from e2e_common import (E2E, create_node, gpu_pod, gpu_ids, metric_samples,  # noqa: E402
                        wait_until, module_cluster)


setUpModule, tearDownModule = module_cluster("scheduling", nodes=20)


CUBE_MESH_NVLINK = {  # pairs joined by NVLink on the DGX-1 capture (dgx1-v100.txt)
    frozenset(p) for p in [(0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 5), (2, 3), (2, 6),
                           (3, 7), (4, 5), (4, 6), (4, 7), (5, 6), (5, 7), (6, 7)]}


class Scheduling(E2E):

    def test_shipped_config_places_gpu_pods(self):
        # kube-scheduler is running with config/scheduler-config.yaml as
        # shipped (cluster.py substitutes only urlPrefix and the kubeconfig).
        cfg = self.c.scheduler_config()
        self.assertIn("filterVerb: filter", cfg)
        self.assertIn("bindVerb: bind", cfg)
        before = metric_samples(self.c.metrics("troupe"), "troupe_requests_total")
        sizes = {"one": 1, "two": 2, "four": 4, "eight": 8, "three": 3, "six": 6}
        for name, g in sizes.items():
            self.create(gpu_pod(name, g))
        self.create(gpu_pod("cpu-only", None))
        nodes = {n["metadata"]["name"]: n for n in self.c.get("/api/v1/nodes")["items"]}
        for name, g in sizes.items():
            p = self.wait_bound(name)
            node = nodes[p["spec"]["nodeName"]]
            ids = gpu_ids(p)
            self.assertIsNotNone(ids, "%s has no troupe.io/gpu-ids: %s" % (name, p["metadata"]))
            self.assertEqual(len(ids), g, name)
            self.assertEqual(len(set(ids)), g, name)
            alloc = int(node["status"]["allocatable"]["nvidia.com/gpu"])
            self.assertTrue(all(0 <= i < 8 for i in ids), ids)
            self.assertLessEqual(g, alloc)
            self.assertFalse(node["spec"].get("unschedulable"), "placed on a cordoned node")
            self.assertFalse(node["spec"].get("taints"), "placed on a tainted node")
            self.assertEqual(self.condition(p, "PodScheduled")["status"], "True")
            self.wait_running(name)
        cpu = self.wait_bound("cpu-only")
        self.assertIsNone(gpu_ids(cpu))
        self.assertNotIn("troupe.io/gpu-link", cpu["metadata"].get("annotations") or {})
        # Every GPU pod was filtered and bound through troupe; the CPU pod never
        # reached it (managedResources lists GPU resources only).
        after = metric_samples(self.c.metrics("troupe"), "troupe_requests_total")
        binds = sum(v - before.get(k, 0) for k, v in after.items() if 'verb="bind"' in k)
        self.assertEqual(binds, len(sizes), after)

    def test_unschedulable_reason_and_requeue(self):
        # gpu-0004: troupe is told GPU 7 is unhealthy, kube-scheduler is not
        # (allocatable stays 8). A 4-GPU blocker leaves kube-scheduler seeing 4
        # free and troupe 3, so only troupe refuses the 4-GPU pod.
        node = "gpu-0004"
        self.c.kubectl("annotate", "node", node, "troupe.io/gpu-unhealthy=7", "--overwrite")
        self.addCleanup(self.c.kubectl, "annotate", "node", node, "troupe.io/gpu-unhealthy-")
        time.sleep(1)
        self.create(gpu_pod("blocker", 4, hosts=[node]))
        self.wait_bound("blocker")
        self.create(gpu_pod("waiter", 4, hosts=[node]))
        ev = self.wait_event("waiter", "FailedScheduling", contains="troupe: ")
        self.assertIn("pod needs 4", ev["message"])
        cond = wait_until(lambda: self.condition(self.pod("waiter"), "PodScheduled"),
                          what="PodScheduled condition")
        self.assertEqual(cond["status"], "False")
        self.assertEqual(cond["reason"], "Unschedulable")
        # kube-scheduler counts nodes by reason: "1 troupe: 3 of 8 nvidia.com/gpu
        # free, pod needs 4, 17 node(s) didn't match ...".
        self.assertIn("1 troupe: 3 of 8 nvidia.com/gpu free, pod needs 4", cond["message"])
        # What `kubectl describe pod` shows.
        described = self.c.kubectl("describe", "pod", "waiter", "-n", self.ns).stdout
        self.assertIn("FailedScheduling", described)
        self.assertIn("troupe: ", described)

        # 9. The delete of the blocker is the event that requeues the waiter,
        # not kube-scheduler's periodic flush of unschedulable pods (5 minutes).
        m0 = metric_samples(self.c.metrics("kube-scheduler"), "scheduler_queue_incoming_pods_total")
        t0 = time.monotonic()
        self.delete_pod("blocker")
        p = self.wait_bound("waiter", timeout=60)
        took = time.monotonic() - t0
        self.assertEqual(p["spec"]["nodeName"], node)
        m1 = metric_samples(self.c.metrics("kube-scheduler"), "scheduler_queue_incoming_pods_total")
        delta = {k: v - m0.get(k, 0) for k, v in m1.items() if v - m0.get(k, 0) > 0}
        # The blocker's delete shows first as an update (deletionTimestamp set;
        # kubesim then finishes it), and kube-scheduler counts a terminating
        # pod's resources as freed: either event may be the one.
        moved = {k: v for k, v in delta.items()
                 if ("AssignedPodDelete" in k or "AssignedPodUpdate" in k)
                 and 'queue="unschedulable"' not in k}
        self.assertTrue(moved, "the blocker's delete requeued no pod: %s" % delta)
        self.assertFalse([k for k in delta if "UnschedulableTimeout" in k],
                         "the pod was requeued by the periodic flush: %s" % delta)
        self.assertLess(took, 60)
        self.assertNotIn(7, gpu_ids(p))

    def test_a_pods_own_fault_is_unschedulable_with_the_reason(self):
        # An unknown troupe.io/topology is the pod's fault, not any node's:
        # every node unresolvable with the reason, not an Error that
        # kube-scheduler would retry with backoff as its own.
        self.create(gpu_pod("typo", 2, annotations={"troupe.io/topology": "required:FAST"}))
        cond = wait_until(lambda: self.condition(self.pod("typo"), "PodScheduled"),
                          what="PodScheduled condition")
        self.assertEqual((cond["status"], cond["reason"]), ("False", "Unschedulable"))
        self.assertIn("troupe: pod %s/typo:" % self.ns, cond["message"])
        self.assertIn("troupe.io/topology", cond["message"])
        ev = self.wait_event("typo", "FailedScheduling", contains="troupe.io/topology")
        # kube-scheduler's count of nodes by reason, not its extender-error
        # form, and no preemption tried for it.
        self.assertRegex(ev["message"], r"^0/\d+ nodes are available: .*\d+ troupe: pod ")
        self.assertIn("Preemption is not helpful", ev["message"])

    def dra_devices(self, driver, node, cls, devices, extended_resource=None):
        """A DeviceClass <cls> for <driver>'s devices (serving <extended_resource>
        through DRA when given, KEP-5004), and <driver>'s ResourceSlice of
        <devices> on <node>, as a DRA driver publishes them; both removed after
        the test."""
        sl = "e2e-dra-%s-%s" % (driver.split(".")[1], node)
        spec = {"selectors": [{"cel": {"expression": 'device.driver == "%s"' % driver}}]}
        if extended_resource:
            spec["extendedResourceName"] = extended_resource
        self.c.apply(json.dumps({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": cls}, "spec": spec}))
        self.addCleanup(self.c.kubectl, "delete", "deviceclass", cls, "--ignore-not-found")
        self.c.apply(json.dumps({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": sl},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}))
        self.addCleanup(self.c.kubectl, "delete", "resourceslice", sl, "--ignore-not-found")

    def test_dra_claims_pass_through_troupe_untouched(self):
        # Devices published through DRA (a ResourceSlice of a driver troupe
        # does not manage) are kube-scheduler's DRA plugin's to allocate. A
        # pod asking only a ResourceClaim never reaches troupe (it asks no
        # managed resource); one asking a claim and nvidia.com/gpu gets both:
        # the claim from the DRA plugin, the GPUs from troupe, on the one node
        # whose slice has the devices.
        driver, node = "gpu.example.com", "gpu-0005"
        cls = "e2e-example-gpu"
        self.dra_devices(driver, node, cls, [{"name": "dev-%d" % i, "attributes": {
            "model": {"string": "example"}}} for i in range(2)])
        before = metric_samples(self.c.metrics("troupe"), "troupe_requests_total")
        pods = {"claim-only": None, "claim-and-gpu": 2}
        for name, gpus in pods.items():
            self.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": name},
                         "spec": {"devices": {"requests": [
                             {"name": "dev", "exactly": {"deviceClassName": cls}}]}}},
                        path="/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims" % self.ns)
            pod = gpu_pod(name, gpus)
            pod["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": name}]
            pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "dev"}]
            self.create(pod)
        for name, gpus in pods.items():
            p = self.wait_bound(name)
            self.assertEqual(p["spec"]["nodeName"], node, name)
            claim = wait_until(lambda: self.c.get(
                "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s" % (self.ns, name))
                .get("status", {}).get("allocation"), what="claim %s allocated" % name)
            results = claim["devices"]["results"]
            self.assertEqual([(r["driver"], r["pool"]) for r in results], [(driver, node)])
            ids = gpu_ids(p)
            if gpus is None:
                self.assertIsNone(ids, "troupe annotated a pod it does not place")
            else:
                self.assertEqual(len(set(ids)), gpus, ids)
        devices = {self.c.get("/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s"
                              % (self.ns, n))["status"]["allocation"]["devices"]["results"][0]
                   ["device"] for n in pods}
        self.assertEqual(devices, {"dev-0", "dev-1"}, "one DRA device given twice")
        # troupe filtered and bound only the pod asking nvidia.com/gpu.
        after = metric_samples(self.c.metrics("troupe"), "troupe_requests_total")
        binds = sum(v - before.get(k, 0) for k, v in after.items() if 'verb="bind"' in k)
        self.assertEqual(binds, 1, after)

    def test_gpus_given_through_dra_are_not_offered_again(self):
        # gpu-0004's eight GPUs, published a second time by NVIDIA's DRA
        # driver (gpu.nvidia.com, troupe's default dra.drivers) with their
        # index: a claim kube-scheduler's DRA plugin gives three of them holds
        # them in troupe's cache too, so troupe never offers them again.
        driver, node = "gpu.nvidia.com", "gpu-0004"
        cls = "e2e-nvidia-gpu"
        self.dra_devices(driver, node, cls, [{"name": "gpu-%d" % i, "attributes": {
            "index": {"int": i}, "uuid": {"string": "GPU-e2e-%d" % i}}} for i in range(8)])
        claim = self.create({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "three"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": cls, "allocationMode": "ExactCount", "count": 3}}]}}},
            path="/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims" % self.ns)
        pod = gpu_pod("dra-user", None, hosts=[node])
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "three"}]
        pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        self.create(pod)
        self.assertEqual(self.wait_bound("dra-user")["spec"]["nodeName"], node)
        alloc = wait_until(lambda: self.c.get(
            "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/three" % self.ns)
            .get("status", {}).get("allocation"), what="claim allocated")
        given = sorted(int(r["device"].rsplit("-", 1)[1]) for r in alloc["devices"]["results"])
        self.assertEqual(len(given), 3, alloc)
        # troupe holds them once its watch shows the allocation.
        uid = "dra:" + claim["metadata"]["uid"]
        wait_until(lambda: uid in urllib.request.urlopen(
            self.c.troupe_ops_url + "/debug/cache", timeout=10).read().decode(), timeout=30,
            what="troupe's cache holding the claim's GPUs")
        self.create(gpu_pod("all-eight", 8, hosts=[node]))
        self.create(gpu_pod("the-rest", 5, hosts=[node]))
        p = self.wait_bound("the-rest", timeout=90)
        self.assertEqual(sorted(set(gpu_ids(p)) | set(given)), list(range(8)),
                         "troupe gave a GPU DRA had given")
        self.assert_never_bound(["all-eight"], 8)
        ev = self.wait_event("all-eight", "FailedScheduling")
        self.assertIn("troupe", ev["message"])
        # The claim deleted with its pod: the GPUs are troupe's to give again.
        self.delete_pod("the-rest")
        self.delete_pod("dra-user")
        self.c.request("DELETE", "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/three"
                       % self.ns)
        self.assertEqual(self.wait_bound("all-eight", timeout=120)["spec"]["nodeName"], node)

    def test_shared_gpus_from_the_labels(self):
        # Three nodes as GFD labels them, tainted so that only this test's
        # pods land there; kubesim's kubelet runs pods on them (kind label).
        taint = {"key": "rig.troupe.io/shared", "value": "yes", "effect": "NoSchedule"}
        boards = {
            "shared-ts": ("32", {"nvidia.com/gpu.sharing-strategy": "time-slicing",
                                 "nvidia.com/gpu.replicas": "4",
                                 "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}),
            "shared-mps": ("16", {"nvidia.com/gpu.sharing-strategy": "mps",
                                  "nvidia.com/gpu.replicas": "2",
                                  "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
            "shared-mig": ("56", {"nvidia.com/mig.strategy": "single",
                                  "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb"}),
        }
        for name, (count, labels) in boards.items():
            create_node(self.c, name, {"nvidia.com/gpu": count},
                        labels=dict(labels, **{"rig.troupe.io/kind": "shared"}),
                        annotations={"troupe.io/gpu-uuids": ",".join(
                            "GPU-%s-%d" % (name, i) for i in range(8))}, taints=[taint])
            self.addCleanup(self.c.request, "DELETE", "/api/v1/nodes/" + name)

        def pod(name, gpus, host, annotations=None):
            p = gpu_pod(name, gpus, hosts=[host], annotations=annotations)
            p["spec"]["tolerations"] = [{"key": taint["key"], "operator": "Exists"}]
            return self.create(p)

        def slots(name):
            ann = self.wait_bound(name)["metadata"]["annotations"]
            got = [tuple(int(x) for x in s.split(":")) for s in ann["troupe.io/gpu-ids"].split(",")]
            return got, ann.get("troupe.io/gpu-uuids", "")
        # troupe's watch must show the nodes before it can place on them.
        wait_until(lambda: all(n in urllib.request.urlopen(
            self.c.troupe_ops_url + "/debug/cache", timeout=10).read().decode()
            for n in boards), timeout=30, what="troupe's cache showing the shared nodes")

        # Time-slicing, distributed (the default): eight single replicas, one
        # after another, each on a GPU of its own; the device plugin's names.
        seen = set()
        for i in range(8):
            pod("ts-%d" % i, 1, "shared-ts")
            (g, r), = slots("ts-%d" % i)[0]
            self.assertTrue(0 <= g < 8 and 0 <= r < 4, (g, r))
            seen.add(g)
        self.assertEqual(seen, set(range(8)), "replicas were not spread over the GPUs")
        got, uuids = slots("ts-0")
        self.assertEqual(uuids, "GPU-shared-ts-%d::%d" % got[0])
        # Twelve replicas on the 8-GPU board: slots of the eight GPUs, never
        # "devices 0..11".
        pod("twelve", 12, "shared-ts")
        got, _ = slots("twelve")
        self.assertEqual(len(set(got)), 12)
        self.assertTrue(all(0 <= g < 8 and 0 <= r < 4 for g, r in got), got)
        # Topology needs whole GPUs: refused with the reason, for good.
        pod("linked", 2, "shared-ts", annotations={"troupe.io/topology": "required"})
        ev = self.wait_event("linked", "FailedScheduling", contains="troupe: ")
        self.assertIn("needs whole GPUs", ev["message"])

        # MPS: the device plugin refuses requests above 1, so troupe does.
        pod("mps-two", 2, "shared-mps")
        ev = self.wait_event("mps-two", "FailedScheduling", contains="troupe: ")
        self.assertIn("failRequestsGreaterThanOne", ev["message"])
        pod("mps-one", 1, "shared-mps")
        (g, r), = slots("mps-one")[0]
        self.assertTrue(0 <= g < 8 and 0 <= r < 2, (g, r))

        # MIG single: seven 1g.5gb slices a GPU, packed onto one GPU so the
        # other seven stay whole.
        for i in range(3):
            pod("mig-%d" % i, 1, "shared-mig")
            self.wait_bound("mig-%d" % i)
        gpus = {slots("mig-%d" % i)[0][0][0] for i in range(3)}
        self.assertEqual(len(gpus), 1, "MIG slices spread over GPUs %s" % sorted(gpus))
        self.assert_never_bound(["linked", "mps-two"], 3)

    def test_extended_resource_served_through_dra_is_never_double_booked(self):
        # KEP-5004 (GA in 1.37): a DeviceClass naming nvidia.com/gpu as its
        # extended resource lets kube-scheduler's DRA plugin serve
        # nvidia.com/gpu from DRA devices on nodes that advertise none of it.
        # troupe places device-plugin GPUs only: it refuses such a node with
        # the reason, and on a node whose nvidia.com/gpu comes from a device
        # plugin the pod gets troupe's devices and no DRA claim at all.
        driver, cls = "gpu.nvidia.com", "e2e-gpu-extended"
        create_node(self.c, "dra-only", {}, labels={"rig.troupe.io/kind": "dra"})
        self.addCleanup(self.c.request, "DELETE", "/api/v1/nodes/dra-only")
        self.dra_devices(driver, "dra-only", cls, [
            {"name": "gpu-%d" % i, "attributes": {"index": {"int": i}}} for i in range(4)],
            extended_resource="nvidia.com/gpu")
        wait_until(lambda: "dra-only" in urllib.request.urlopen(
            self.c.troupe_ops_url + "/debug/cache", timeout=10).read().decode(), timeout=30,
            what="troupe's cache showing dra-only")
        self.create(gpu_pod("on-dra", 2, hosts=["dra-only"]))
        ev = self.wait_event("on-dra", "FailedScheduling", contains="troupe: ")
        self.assertIn("its GPUs are DRA devices, which troupe does not place", ev["message"])
        self.assert_never_bound(["on-dra"], 3)
        # The device plugin's node: troupe's devices, no DRA claim made for it.
        self.create(gpu_pod("on-plugin", 2, hosts=["gpu-0006"]))
        p = self.wait_bound("on-plugin")
        self.assertEqual(len(gpu_ids(p)), 2)
        self.assertFalse(p.get("status", {}).get("extendedResourceClaimStatus"), p["status"])
        claims = self.c.get("/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims"
                            % self.ns)["items"]
        self.assertEqual(claims, [], "a DRA claim was made beside troupe's devices")

    def test_dra_slices_attributes_give_a_topology(self):
        # A node with no troupe.io/gpu-topology and no GFD product: its
        # topology is unknown, so required:PHB is refused; once
        # gpu.nvidia.com's slice gives its GPUs' PCIe roots and NUMA nodes
        # (the standard attributes), a pair under one root is promised.
        create_node(self.c, "dra-topo", {"nvidia.com/gpu": "4"},
                    labels={"rig.troupe.io/kind": "dra-topo"})
        self.addCleanup(self.c.request, "DELETE", "/api/v1/nodes/dra-topo")
        wait_until(lambda: "dra-topo" in urllib.request.urlopen(
            self.c.troupe_ops_url + "/debug/cache", timeout=10).read().decode(), timeout=30,
            what="troupe's cache showing dra-topo")
        req = {"troupe.io/topology": "required:PHB"}
        self.create(gpu_pod("early", 2, hosts=["dra-topo"], annotations=req))
        ev = self.wait_event("early", "FailedScheduling", contains="troupe: ")
        self.assertIn("topology is unknown", ev["message"])
        self.delete_pod("early")
        # GPUs 0,3 under one root, 1,2 under another; 0,1 on NUMA node 0.
        roots, numa = ["pci0000:00", "pci0000:40", "pci0000:40", "pci0000:00"], [0, 0, 1, 1]
        self.dra_devices("gpu.nvidia.com", "dra-topo", "e2e-gpu-topo", [
            {"name": "gpu-%d" % i, "attributes": {
                "index": {"int": i}, "resource.kubernetes.io/pcieRoot": {"string": roots[i]},
                "numaNode": {"int": numa[i]}}} for i in range(4)])
        self.create(gpu_pod("paired", 2, hosts=["dra-topo"], annotations=req))
        p = self.wait_bound("paired", timeout=90)
        ids = sorted(gpu_ids(p))
        self.assertIn(ids, ([0, 3], [1, 2]), "GPUs %s are not under one PCIe root" % ids)
        self.assertEqual(p["metadata"]["annotations"].get("troupe.io/gpu-link"), "PHB")

    def test_topology_required(self):
        hosts = ["gpu-0000", "gpu-0001", "gpu-0002"]     # NVSwitch, cube-mesh, PCIe
        req = {"troupe.io/topology": "required"}
        for i in range(5):
            self.create(gpu_pod("req-%d" % i, 4, hosts=hosts, annotations=req))
        placed = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(placed) < 4:
            for i in range(5):
                p = self.pod("req-%d" % i)
                if p["spec"].get("nodeName"):
                    placed[p["metadata"]["name"]] = p
            time.sleep(0.5)
        self.assertEqual(len(placed), 4, "expected two on NVSwitch and two on the cube mesh")
        by_node = {}
        for p in placed.values():
            by_node.setdefault(p["spec"]["nodeName"], []).append(gpu_ids(p))
            link = p["metadata"]["annotations"].get("troupe.io/gpu-link", "")
            self.assertTrue(link.startswith("NV"), "worst link %r is not NVLink" % link)
        self.assertEqual(sorted(by_node), ["gpu-0000", "gpu-0001"], by_node)
        for ids in by_node["gpu-0001"]:
            for a in ids:
                for b in ids:
                    if a < b:
                        self.assertIn(frozenset((a, b)), CUBE_MESH_NVLINK,
                                      "GPUs %d and %d of %s are not NVLinked" % (a, b, ids))
        # The fifth fits no NVLinked set anywhere: the PCIe node is refused
        # for good, the others are full.
        waiting = [n for n in ("req-%d" % i for i in range(5)) if n not in placed][0]
        ev = self.wait_event(waiting, "FailedScheduling", contains="troupe: ")
        self.assertIn("NVLinked", ev["message"])
        # required:PIX on the PCIe board: a pair under one PCIe switch.
        self.create(gpu_pod("pix", 2, hosts=["gpu-0002"],
                            annotations={"troupe.io/topology": "required:PIX"}))
        ids = gpu_ids(self.wait_bound("pix"))
        self.assertEqual(ids[0] // 2, ids[1] // 2, "GPUs %s are not under one switch" % ids)

    def test_preemption_through_postfilter(self):
        for name, value in (("e2e-low", 0), ("e2e-high", 1000000)):
            self.c.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                           {"metadata": {"name": name}, "value": value})
        node = "gpu-0003"
        before = metric_samples(self.c.metrics("troupe"), "troupe_requests_total")
        self.create(gpu_pod("victim", 8, hosts=[node], priority="e2e-low"))
        self.wait_running("victim")
        victim_uid = self.pod("victim")["metadata"]["uid"]
        self.create(gpu_pod("preemptor", 8, hosts=[node], priority="e2e-high"))
        p = self.wait_bound("preemptor", timeout=90)
        self.assertEqual(p["spec"]["nodeName"], node)
        self.assertEqual(len(gpu_ids(p)), 8)
        v = self.pod("victim")
        self.assertTrue(v is None or v["metadata"]["uid"] != victim_uid, "victim still there")
        ev = self.events("victim", reason="Preempted")
        self.assertTrue(ev, "no Preempted event on the victim")
        after = metric_samples(self.c.metrics("troupe"), "troupe_requests_total")
        preempts = sum(v - before.get(k, 0) for k, v in after.items() if 'verb="preempt"' in k)
        self.assertGreaterEqual(preempts, 1, "kube-scheduler did not call troupe's preempt verb")


class Flood(E2E):

    def test_scheduler_served_through_a_connection_flood(self):
        """The connection guard with the real kube-scheduler: its keep-alive
        connections share 127.0.0.1 (and so its per-client share) with the
        attackers, which re-open whatever troupe closes. Every pod made during
        the flood is bound, with troupe's annotations; the scheduling errors
        kube-scheduler saw are counted and printed (a keep-alive connection
        displaced between two requests costs that pod one retry)."""
        raise_fd_limit(20000)
        port = self.c.state["ports"]["troupe"]
        # The same pods without the flood first: the baseline of this run.
        t0 = time.monotonic()
        for i in range(12):
            self.create(gpu_pod("calm-%d" % i, 1 + i % 2))
        for i in range(12):
            self.wait_bound("calm-%d" % i, timeout=120)
        calm = time.monotonic() - t0
        for i in range(12):
            self.delete_pod("calm-%d" % i, wait=False)
        before = metric_samples(self.c.metrics("troupe"),
                                "troupe_http_connections_displaced_total")
        attack = Attack("127.0.0.1", port, idle=5000, slow=300)
        attack.start()
        try:
            time.sleep(3)
            t0 = time.monotonic()
            names = ["flood-%d" % i for i in range(12)]
            for n in names:
                self.create(gpu_pod(n, 1 + len(n) % 2))
            took = {}
            for n in names:
                p = self.wait_bound(n, timeout=120)
                took[n] = time.monotonic() - t0
                self.assertIsNotNone(gpu_ids(p), "%s bound without troupe" % n)
            status = self.c.troupe_status()[0]
        finally:
            attack.close()
        after = metric_samples(self.c.metrics("troupe"), "troupe_http_connections_displaced_total")
        displaced = sum(after.values()) - sum(before.values())
        failed = sum(len(self.events(n, reason="FailedScheduling")) for n in names)
        print("\nflood of 5,000 idle + 300 slowloris: %d pods bound in %.1f s (last; %.1f s "
              "without the flood, x%.1f), %d FailedScheduling events, %d connections displaced, "
              "troupe /readyz %d" % (len(names), max(took.values()), calm,
                                     max(took.values()) / calm, failed, displaced, status),
              file=sys.stderr)
        self.assertEqual(status, 200)
        self.assertGreater(displaced, 1000, "the guard displaced idle connections")
        self.assertGreater(attack.closed_by_server, 1000)
        for n in names:
            self.delete_pod(n, wait=False)


if __name__ == "__main__":
    unittest.main()
