#!/usr/bin/env python3
"""End-to-end: the upstream gang API of the pinned release, with kube-scheduler's
own GangScheduling plugin active next to troupe; and the PodGroups of Volcano and
KAI Scheduler, whose CRDs are installed while troupe runs.

Kubernetes 1.37 serves the PodGroup of scheduling.k8s.io/v1beta1 (1.36:
v1alpha2) behind the GenericWorkload feature gate (beta, off by default), which also turns on the
GangScheduling plugin in every profile. A pod joins a group with
spec.schedulingGroup.podGroupName. Both gate the group: the plugin keeps members
out of the queue until minCount exist (PreEnqueue) and holds them at Permit until
minCount are assumed; troupe plans the whole group at the first member's filter
and holds its binds until the quorum is held. The behaviour chosen
(docs/e2e.md): troupe reads the same PodGroup (its watch of scheduling.k8s.io
v1beta1 PodGroups) and takes minCount as the quorum, as the plugin does; the
plugin's Permit releases all members to binding together, so troupe's held
binds find their quorum at once. Neither waits for the other.

  test_gang_binds_whole              a gang of 3 binds whole, promptly, with
                                     troupe's quorum from the PodGroup's minCount
  test_gang_short_binds_nothing      2 of minCount 3: nothing binds
  test_competing_gangs               two gangs for one gang's room: never partly
                                     bound, and the second runs after the first
  test_podgroup_precedence_across_apis
                                     one group with an upstream PodGroup
                                     (minCount 2) and a Volcano one
                                     (minMember 3): upstream's terms win and
                                     two members bind; deleted, Volcano's
                                     terms are troupe's
  test_volcano_and_kai_podgroups     the CRDs of Volcano's and KAI's PodGroups
                                     applied while troupe runs: troupe picks the
                                     APIs up, and holds each gang for its
                                     PodGroup's minMember (two of three Volcano
                                     members, one of two KAI members: nothing
                                     binds; a label-only gang would have bound),
                                     in the PodGroup's queue, at the weight of
                                     that scheduler's Queue object
"""
import json
import os
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster as rig  # noqa: E402
import invariants  # noqa: E402
from e2e_common import E2E, FAST_TROUPE, gpu_pod, wait_until, module_cluster  # noqa: E402

HOSTS = ["gpu-0000", "gpu-0003", "gpu-0006"]
# APIs that appear while troupe runs are looked for every 2 s (default 300).
TROUPE_CONFIG = FAST_TROUPE.replace("api:\n", "api:\n  podgroup_retry_seconds: 2\n")

# The PodGroup and Queue CRDs of Volcano (scheduling.volcano.sh/v1beta1) and KAI
# Scheduler (PodGroup scheduling.run.ai/v2alpha2, Queue v2) with their real
# group, version, plural and scope; the schema keeps any field, the objects
# below set the real ones.
CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %(plural)s.%(group)s}
spec:
  group: %(group)s
  names: {kind: %(kind)s, listKind: %(kind)sList, plural: %(plural)s, singular: %(singular)s}
  scope: %(scope)s
  versions:
  - name: %(version)s
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""
OTHER_CRDS = "---\n".join(
    CRD % {"group": g, "version": v, "kind": k, "plural": k.lower() + "s",
           "singular": k.lower(), "scope": "Namespaced" if k == "PodGroup" else "Cluster"}
    for g, v, k in (("scheduling.volcano.sh", "v1beta1", "PodGroup"),
                    ("scheduling.run.ai", "v2alpha2", "PodGroup"),
                    ("scheduling.volcano.sh", "v1beta1", "Queue"),
                    ("scheduling.run.ai", "v2", "Queue")))


setUpModule, tearDownModule = module_cluster(
    "workload", nodes=10, troupe_config=TROUPE_CONFIG,
    feature_gates=rig.workload_gates(rig.release_version(os.environ.get("TROUPE_E2E_RELEASE"))))


class UpstreamGang(E2E):

    def group(self, name, min_count, members, gpus=8):
        api = self.c.workload_api
        self.create({"apiVersion": api, "kind": "PodGroup",
                     "metadata": {"name": name},
                     "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}},
                    path="/apis/%s/namespaces/%s/podgroups" % (api, self.ns))
        for i in range(members):
            self.create(gpu_pod("%s-%d" % (name, i), gpus, hosts=HOSTS, scheduling_group=name))

    def bound(self, name):
        return [p for p in self.pods() if p["spec"].get("nodeName")
                and (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == name]

    def explain(self, name):
        """troupe's explanation of pod group <name> (its /debug/explain); {}
        while troupe knows nothing of it (404)."""
        url = "%s/debug/explain?podgroup=%s/%s" % (self.c.troupe_ops_url, self.ns, name)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return {}
            raise

    def explain_gang(self, name):
        return self.explain(name).get("gang", {})

    def test_gang_binds_whole(self):
        # The plugin is really there: kube-scheduler's configuration lists it.
        t0 = time.monotonic()
        self.group("upstream", 3, 3)
        wait_until(lambda: len(self.bound("upstream")) == 3, timeout=90, what="gang bound")
        took = time.monotonic() - t0
        invariants.assert_holds(self.c)
        # No double gate: well inside the plugin's 5-minute Permit timeout
        # and troupe's 60-second gang timeout.
        self.assertLess(took, 60, "the gang took %.0fs to bind" % took)
        nodes = sorted(p["spec"]["nodeName"] for p in self.bound("upstream"))
        self.assertEqual(nodes, HOSTS)
        # troupe's quorum is the PodGroup's minCount, read from the same API.
        gang = self.explain_gang("upstream")
        self.assertEqual((gang["podGroupApi"], gang["quorum"], gang["quorumFrom"]),
                         ("scheduling.k8s.io/v1beta1", 3, "podGroup"), gang)

    def test_gang_short_binds_nothing(self):
        self.group("short", 3, 2)
        self.assert_never_bound(["short-0", "short-1"], 10)
        self.create(gpu_pod("short-2", 8, hosts=HOSTS, scheduling_group="short"))
        wait_until(lambda: len(self.bound("short")) == 3, timeout=90, what="gang bound")

    def test_competing_gangs(self):
        self.group("first", 3, 3)
        self.group("second", 3, 3)
        wait_until(lambda: len(self.bound("first")) == 3 or len(self.bound("second")) == 3,
                   timeout=120, what="one gang bound")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            invariants.assert_holds(self.c, settle=10)
            time.sleep(0.5)
        winner = "first" if len(self.bound("first")) == 3 else "second"
        loser = "second" if winner == "first" else "first"
        self.assertEqual(self.bound(loser), [])
        for i in range(3):
            self.delete_pod("%s-%d" % (winner, i), wait=False)
        wait_until(lambda: len(self.bound(loser)) == 3, timeout=180, what="the other gang bound")

    crds_applied = False

    def other_crds(self):
        """Volcano's and KAI's CRDs, applied while troupe runs (once per
        module): troupe picks each API up."""
        if UpstreamGang.crds_applied:
            return
        mark = len(self.c.log("troupe"))
        self.c.apply(OTHER_CRDS)
        for kind in ("podgroups.scheduling.volcano.sh", "podgroups.scheduling.run.ai",
                     "queues.scheduling.volcano.sh", "queues.scheduling.run.ai"):
            wait_until(lambda: "[informer] %s: listed" % kind in self.c.log("troupe")[mark:],
                       timeout=60, what="troupe listing " + kind)
        UpstreamGang.crds_applied = True

    def test_podgroup_precedence_across_apis(self):
        # One group, two PodGroups: upstream's (minCount 2) and Volcano's
        # (minMember 3). The upstream API comes first (docs/reference.md,
        # PodGroup APIs): two members bind. Its PodGroup deleted, Volcano's
        # gives the terms.
        self.other_crds()
        volcano = "scheduling.volcano.sh/v1beta1"
        self.create({"apiVersion": volcano, "kind": "PodGroup", "metadata": {"name": "both"},
                     "spec": {"minMember": 3, "queue": "research"}},
                    path="/apis/%s/namespaces/%s/podgroups" % (volcano, self.ns))
        self.group("both", 2, 2)
        wait_until(lambda: self.explain_gang("both").get("podGroupApi") == self.c.workload_api,
                   timeout=30, what="troupe taking the upstream PodGroup's terms")
        gang = self.explain_gang("both")
        self.assertEqual((gang["quorum"], gang["quorumFrom"]), (2, "podGroup"), gang)
        for i in range(2):
            self.wait_bound("both-%d" % i, timeout=90)
        # The members deleted first, so nothing names the upstream PodGroup
        # while it goes, then the PodGroup.
        for i in range(2):
            self.delete_pod("both-%d" % i)
        self.c.request("DELETE", "/apis/%s/namespaces/%s/podgroups/both"
                       % (self.c.workload_api, self.ns))
        wait_until(lambda: self.explain_gang("both").get("podGroupApi") == volcano,
                   timeout=60, what="troupe falling back to Volcano's PodGroup (%s)"
                   % self.c.kubectl("get", "podgroups.%s" % self.c.workload_api.split("/")[0],
                                    "-n", self.ns, "-o", "yaml", check=False).stdout[-600:])
        gang = self.explain_gang("both")
        self.assertEqual((gang["quorum"], gang["podGroupQueue"]), (3, "research"), gang)

    def test_volcano_and_kai_podgroups(self):
        self.other_crds()
        # The queues' weights, each from its scheduler's Queue (cluster-scoped).
        for path, name, spec in (
                ("/apis/scheduling.volcano.sh/v1beta1/queues", "research", {"weight": 3}),
                ("/apis/scheduling.run.ai/v2/queues", "team-a",
                 {"resources": {"gpu": {"quota": 8, "overQuotaWeight": 2, "limit": -1}}})):
            status, out = self.c.request("POST", path, {
                "apiVersion": path.split("/")[2] + "/" + path.split("/")[3], "kind": "Queue",
                "metadata": {"name": name}, "spec": spec})
            self.assertEqual(status, 201, out)
            self.addCleanup(self.c.request, "DELETE", path + "/" + name)
        cases = (
            # (API, group, minMember, queue, the pods' group annotation, members,
            #  the queue's weight and where it comes from)
            ("scheduling.volcano.sh/v1beta1", "vc", 3, "research",
             "scheduling.k8s.io/group-name", 3, 3, "Volcano"),
            ("scheduling.run.ai/v2alpha2", "kai", 2, "team-a", "pod-group-name", 2, 2,
             "KAI Scheduler"),
        )
        for api, group, min_member, queue, key, n, weight, weight_from in cases:
            self.create({"apiVersion": api, "kind": "PodGroup",
                         "metadata": {"name": group},
                         "spec": {"minMember": min_member, "queue": queue}},
                        path="/apis/%s/namespaces/%s/podgroups" % (api, self.ns))
            wait_until(lambda: self.explain_gang(group).get("podGroupKnown"), timeout=30,
                       what="troupe seeing PodGroup " + group)
            for i in range(n - 1):
                self.create(gpu_pod("%s-%d" % (group, i), 1, hosts=HOSTS,
                                    annotations={key: group}))
        # One member short of each PodGroup's minMember: nothing binds (with
        # no PodGroup, troupe's settle rule would bind them after 1 s).
        self.assert_never_bound(["vc-0", "vc-1", "kai-0"], 8)
        for api, group, min_member, queue, key, n, weight, weight_from in cases:
            gang = self.explain_gang(group)
            self.assertEqual((gang["podGroupApi"], gang["quorum"], gang["quorumFrom"],
                              gang["podGroupQueue"]),
                             (api, min_member, "podGroup", queue), gang)
            self.create(gpu_pod("%s-%d" % (group, n - 1), 1, hosts=HOSTS,
                                annotations={key: group}))
        for api, group, min_member, queue, key, n, weight, weight_from in cases:
            for i in range(n):
                self.wait_bound("%s-%d" % (group, i), timeout=90)
            # The gang was ordered in its PodGroup's queue, at that Queue's weight.
            self.assertEqual(self.explain_gang(group)["manager"]["queue"], queue)
            q = self.explain(group)["queue"]
            self.assertEqual((q["name"], q["weight"], q["weightFrom"]),
                             (queue, weight, weight_from), q)
        invariants.assert_holds(self.c)


if __name__ == "__main__":
    unittest.main()
