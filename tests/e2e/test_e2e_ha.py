#!/usr/bin/env python3
"""End-to-end high availability: two troupe replicas with leader election
(--leader-elect) on the real control plane, behind a Service.

The rig runs one troupe; here two replicas (troupe-a, troupe-b) run on ports
of their own and a small TCP proxy on the rig's troupe port plays the Service
(kube-proxy with a readiness-probed endpoint list): it forwards each new
connection to a replica whose /readyz answers 200, probed every PROBE_S
seconds, and refuses the connection when none does. kube-scheduler talks to
the proxy only, as it would talk to the Service.

  test_one_leader_and_standby_refuses_binds
                                 exactly one replica is ready; the other answers
                                 /readyz 503 {"status":"standby","leader":<it>}
                                 and refuses a bind sent to it anyway
  test_failover_after_sigkill    the leader killed with SIGKILL, RUNS times:
                                 the standby leads and is ready (Lease
                                 transitions + 1, holder the survivor), and a
                                 pod made at the kill is bound through it by the
                                 real kube-scheduler; the times are printed
  test_failover_after_sigterm    the leader stopped cleanly, RUNS times: it
                                 releases the Lease, so the standby takes over
                                 at its next attempt; the times are printed
  test_frozen_leader_wakes_as_standby
                                 the leader frozen (SIGSTOP) past its lease: the
                                 standby takes over; thawed, the old leader is
                                 a standby from its first answer (its lease is
                                 judged on its own clock, not by its thread)
  test_gang_whole_after_leader_killed_mid_quorum
                                 the leader killed with SIGKILL as it posts a
                                 gang's held Bindings, GANG_RUNS times: no GPU is in
                                 two live pods at the kill, and the new leader
                                 finishes every gang (from the plan its bound
                                 members carry, or as kube-scheduler retries)
  test_gang_partly_bound_finished_by_next_leader_after_sigkill
                                 the leader killed between two Bindings of a
                                 gang (a ValidatingAdmissionPolicy holds the
                                 last member's Binding back): the next leader
                                 binds that member exactly where the plan says
                                 before it answers ready; no GPU promised twice
  test_rolling_upgrade_with_a_gang_partly_bound
                                 the same with SIGTERM, then the old replica
                                 started again: a rolling upgrade (standby
                                 replaced first, then the leader) in the middle
                                 of a gang behaves as a failover

troupe's RBAC (config/deploy/rbac.yaml) has no rule for Leases yet; this module
grants get, create and update on Leases in kube-system to troupe's service
account before the replicas start (HaCluster._bootstrap).
"""
import json
import os
import random
import select
import signal
import socket
import statistics
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster as rig           # noqa: E402
import invariants               # noqa: E402
from e2e_common import E2E, FAST_TROUPE, gpu_pod, gpu_ids, wait_until  # noqa: E402

RUNS = int(os.environ.get("TROUPE_E2E_HA_RUNS", "3"))
GANG_RUNS = int(os.environ.get("TROUPE_E2E_HA_GANG_RUNS", "2"))
GANG = 8                        # members of 1 GPU: their Bindings take a while to post
PROBE_S = 0.5                   # the proxy's readiness probe period
LEASE_S, RENEW_S, RETRY_S = 15, 10, 2       # troupe's defaults
REPLICAS = ("troupe-a", "troupe-b")

LEASE_RBAC = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: troupe-leader-election, namespace: kube-system}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: troupe-leader-election, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: troupe-leader-election}
subjects:
- {kind: ServiceAccount, name: troupe, namespace: kube-system}
"""

HA_TROUPE = FAST_TROUPE + """\
leader_election:
  enabled: true
  namespace: kube-system
  name: troupe
  lease_duration_seconds: %d
  renew_deadline_seconds: %d
  retry_period_seconds: %d
""" % (LEASE_S, RENEW_S, RETRY_S)


# Holds back the Binding of the pods it names, as an admission webhook can: the
# API server refuses it (403) while the policy is in place.
HOLD_POLICY = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: e2e-hold-binding}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [pods/binding]
  validations:
  - expression: '!(object.metadata.name in %s)'
    message: "e2e: this Binding is held back"
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: e2e-hold-binding}
spec:
  policyName: e2e-hold-binding
  validationActions: [Deny]
"""


def readyz(port):
    """(status, parsed body) of a replica's /readyz; (0, error) without answer."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=1) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read())
        except ValueError:
            return e.code, {}
    except (OSError, ValueError) as e:
        return 0, str(e)


class ServiceProxy:
    """A Service's part: new connections go to a ready endpoint, probed every
    PROBE_S seconds; none ready, the connection is closed at once."""

    def __init__(self, port, backends):
        self.backends = backends            # name -> port, shared with the cluster
        self.ready = []
        self.stopping = False
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(128)
        for fn in (self._probe, self._accept):
            threading.Thread(target=fn, daemon=True).start()

    def _probe(self):
        while not self.stopping:
            self.ready = [p for p in list(self.backends.values()) if readyz(p)[0] == 200]
            time.sleep(PROBE_S)

    def _accept(self):
        while not self.stopping:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            ready = list(self.ready)
            if not ready:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", ready[0]), timeout=2)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        a.settimeout(None)
        b.settimeout(None)
        try:
            while True:
                r, _, _ = select.select([a, b], [], [], 60)
                if not r:
                    continue
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except OSError:
            pass
        finally:
            a.close()
            b.close()

    def close(self):
        self.stopping = True
        self.sock.close()


class HaCluster(rig.Cluster):
    """The rig with two troupe replicas behind a ServiceProxy on the troupe port."""

    proxy = None

    def _bootstrap(self):
        super()._bootstrap()
        self.kubectl("apply", "-f", "-", input=LEASE_RBAC)

    def replica_port(self, name):
        return self.state["ports"][name]

    def start_replica(self, name):
        kc = os.path.join(self.dir, "config", "troupe.kubeconfig")
        path = os.path.join(self.dir, "config", "troupe-ha.yaml")
        with open(path, "w") as f:
            f.write(HA_TROUPE)
        self.state["ports"][name] = self.state["ports"].get(name) or rig.free_port()
        self._save_state()
        self._spawn(name, [self.bin("troupe"), "--kubeconfig", kc, "--config", path,
                           "--listen", "127.0.0.1:%d" % self.replica_port(name),
                           "--ops-address", "127.0.0.1:0",     # two replicas, one host
                           "--leader-elect-identity", name])
        self._wait(name + " listening", lambda: readyz(self.replica_port(name))[0] in (200, 503),
                   proc=name)
        self.backends[name] = self.replica_port(name)

    def _start_troupe(self, wait_ready):
        self.pki.kubeconfig(os.path.join(self.dir, "config", "troupe.kubeconfig"), self.api_url,
                            "troupe", token=self.troupe_token())
        self.backends = {}
        if not self.proxy:
            self.proxy = ServiceProxy(self.state["ports"]["troupe"], self.backends)
        self.proxy.backends = self.backends
        for name in REPLICAS:
            self.start_replica(name)
        if wait_ready:
            self.wait_troupe_ready()

    def wait_troupe_ready(self, timeout=60):
        self._wait("a troupe replica ready through the Service",
                   lambda: self.troupe_status()[0] == 200, timeout=timeout)

    def down(self):
        for name in REPLICAS:
            if self.alive(name):
                self.stop(name)
        if self.proxy:
            self.proxy.close()
            self.proxy = None
        return super().down()


def lease(c):
    status, out = c.request("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/"
                            "leases/troupe")
    return out["spec"] if status == 200 else None


def setUpModule():
    c = HaCluster(os.path.join(rig.ROOT, "build", "e2e", "ha"), nodes=8,
                  troupe_config=FAST_TROUPE)
    c.down()
    c.up()
    E2E.cluster = c


def tearDownModule():
    if E2E.cluster:
        E2E.cluster.down()


class Ha(E2E):

    def states(self):
        return {n: readyz(self.c.replica_port(n)) for n in REPLICAS}

    def leader(self):
        """The one ready replica, once exactly one is ready and the other stands by
        naming it."""
        def one():
            s = self.states()
            ready = [n for n in REPLICAS if s[n][0] == 200]
            if len(ready) != 1:
                return None
            other = [n for n in REPLICAS if n != ready[0]][0]
            if s[other][0] != 503 or s[other][1].get("status") != "standby":
                return None
            return ready[0] if s[other][1].get("leader") == ready[0] else None
        return wait_until(one, timeout=60, what="one leader and one standby naming it")

    def test_one_leader_and_standby_refuses_binds(self):
        leader = self.leader()
        standby = [n for n in REPLICAS if n != leader][0]
        spec = lease(self.c)
        self.assertEqual(spec["holderIdentity"], leader)
        self.assertEqual(spec["leaseDurationSeconds"], LEASE_S)
        # A pod no scheduler picks up, bound by hand through the standby: refused.
        pod = gpu_pod("by-hand", 1)
        pod["spec"]["schedulerName"] = "nobody"
        out = self.create(pod)
        args = {"PodName": "by-hand", "PodNamespace": self.ns, "PodUID": out["metadata"]["uid"],
                "Node": "gpu-0000"}
        req = urllib.request.Request("http://127.0.0.1:%d/bind" % self.c.replica_port(standby),
                                     data=json.dumps(args).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        # The standby answers every POST verb 503 (Retry-After) naming the
        # leader; its binder would refuse too ("not the leader").
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(req, timeout=30)
        self.assertEqual(caught.exception.code, 503)
        self.assertEqual(caught.exception.headers.get("Retry-After"), "1")
        answer = json.loads(caught.exception.read())
        self.assertIn("this replica is a standby; the leader is " + leader,
                      answer.get("Error", ""), answer)
        self.assertFalse(self.pod("by-hand")["spec"].get("nodeName"))
        # Through the Service, kube-scheduler binds with the leader.
        self.create(gpu_pod("through-service", 1))
        p = self.wait_bound("through-service")
        self.assertIsNotNone(gpu_ids(p))

    def failover(self, how, runs):
        """Stop the leader <runs> times (<how>: "kill" or "stop"); each time the
        standby must lead, and a pod made at that moment be bound through it.
        Returns [(seconds to ready, seconds to the pod bound)]."""
        out = []
        for k in range(runs):
            old = self.leader()
            new = [n for n in REPLICAS if n != old][0]
            before = lease(self.c)
            t0 = time.monotonic()
            if how == "kill":
                self.c.kill(old)
            else:
                self.c.stop(old)
            t_kill = time.monotonic()
            name = "%s-%d" % (how, k)
            self.create(gpu_pod(name, 1))
            wait_until(lambda: readyz(self.c.replica_port(new))[0] == 200, timeout=90,
                       interval=0.05, what="%s ready after the leader's %s" % (new, how))
            t_ready = time.monotonic()
            p = self.wait_bound(name, timeout=120)
            t_bound = time.monotonic()
            self.assertIsNotNone(gpu_ids(p), "bound without troupe's annotations")
            after = lease(self.c)
            self.assertEqual(after["holderIdentity"], new)
            self.assertEqual(after.get("leaseTransitions", 0), before.get("leaseTransitions", 0) + 1)
            if how == "stop":
                self.assertIn("released Lease", self.c.log(old).rpartition("==== ")[2])
            out.append((t_ready - t0, t_bound - t0))
            print("\n%s %d: %s gone after %.2f s, %s ready after %.2f s, pod bound "
                  "after %.2f s" % (how, k, old, t_kill - t0, new, t_ready - t0, t_bound - t0),
                  file=sys.stderr)
            self.c.start_replica(old)
            invariants.assert_holds(self.c, settle=5)
        return out

    def report(self, how, runs):
        ready = [r for r, _ in runs]
        bound = [b for _, b in runs]
        print("\nfailover after %s over %d runs: ready %.2f s median (%.2f-%.2f), first bind "
              "%.2f s median (%.2f-%.2f); lease %d s, renew deadline %d s, retry %d s, "
              "probe %.1f s" % (how, len(runs), statistics.median(ready), min(ready), max(ready),
                                statistics.median(bound), min(bound), max(bound), LEASE_S,
                                RENEW_S, RETRY_S, PROBE_S), file=sys.stderr)

    def test_failover_after_sigkill(self):
        self.report("SIGKILL", self.failover("kill", RUNS))

    def test_failover_after_sigterm(self):
        self.report("SIGTERM", self.failover("stop", RUNS))

    def test_frozen_leader_wakes_as_standby(self):
        old = self.leader()
        new = [n for n in REPLICAS if n != old][0]
        self.c.signal(old, signal.SIGSTOP)
        try:
            wait_until(lambda: readyz(self.c.replica_port(new))[0] == 200, timeout=90,
                       interval=0.05, what="%s ready while %s is frozen" % (new, old))
        finally:
            self.c.signal(old, signal.SIGCONT)
        # From its first answer on, the thawed replica stands by: never two ready.
        seen = []
        for _ in range(40):
            status, body = readyz(self.c.replica_port(old))
            seen.append((status, body.get("status") if isinstance(body, dict) else body))
            self.assertEqual(readyz(self.c.replica_port(new))[0], 200)
            time.sleep(0.05)
        self.assertTrue(all(st == (503, "standby") for st in seen if st[0]), seen)
        self.assertTrue(any(st[0] for st in seen), "%s never answered after SIGCONT" % old)
        self.assertEqual(self.leader(), new)
        wait_until(lambda: "no longer leading" in self.c.log(old).rpartition("==== ")[2],
                   timeout=30, what="%s to log that it no longer leads" % old)
        self.create(gpu_pod("after-thaw", 1))
        self.assertIsNotNone(gpu_ids(self.wait_bound("after-thaw", timeout=120)))

    def test_gang_whole_after_leader_killed_mid_quorum(self):
        rnd = random.Random(int(os.environ.get("TROUPE_E2E_SEED", str(int(time.time())))))
        label = "scheduling.x-k8s.io/pod-group"
        partly = 0
        for k in range(GANG_RUNS):
            leader = self.leader()
            new = [n for n in REPLICAS if n != leader][0]
            name = "gang-%d" % k
            mark = len(self.c.log(leader))
            self.podgroup(name, GANG)
            for i in range(GANG):
                self.create(gpu_pod("%s-%d" % (name, i), 1, labels={label: name}))
            # Strike as the leader starts posting the gang's held Bindings:
            # some may be committed, some not yet.
            wait_until(lambda: "%s/%s: quorum of" % (self.ns, name) in self.c.log(leader)[mark:],
                       timeout=60, interval=0.01, what="the leader posting the gang")
            time.sleep(rnd.uniform(0.0, 0.006))
            self.c.kill(leader)
            bound = sum(1 for p in self.pods(selector=label + "=" + name)
                        if p["spec"].get("nodeName"))
            partly += 0 < bound < GANG
            # At the kill point the gang may be partly bound (that is the
            # point); no GPU may be in two live pods, ever.
            self.assertEqual([v for v in invariants.violations(self.c) if v.startswith("GPU ")],
                             [])
            wait_until(lambda: readyz(self.c.replica_port(new))[0] == 200, timeout=90,
                       what="%s ready" % new)
            wait_until(lambda: all(p["spec"].get("nodeName") for p in self.pods(
                selector=label + "=" + name)), timeout=400, what="gang %s whole" % name)
            print("\ngang %d: %d of %d bound when %s was killed; %s finished it" % (
                k, bound, GANG, leader, new), file=sys.stderr)
            invariants.assert_holds(self.c, settle=10)
            self.c.start_replica(leader)
            self.c.request("DELETE", "/api/v1/namespaces/%s/pods" % self.ns)
            wait_until(lambda: not self.pods(), timeout=60, what="pods deleted")
        print("\nkills that left a gang partly bound: %d of %d" % (partly, GANG_RUNS),
              file=sys.stderr)

    # ---- a gang left partly bound, on purpose ------------------------------------

    def hold_bindings(self, names):
        """Install HOLD_POLICY for <names> and wait until the API server
        enforces it: a dry-run Binding of a probe pod no scheduler picks up is
        refused (dry run: admission runs, nothing is committed, so the probe is
        never bound while the policy is still loading)."""
        probe = "hold-probe-%d" % len(self.pods())
        self.c.apply(HOLD_POLICY % json.dumps(list(names) + [probe]))
        pod = gpu_pod(probe, None)
        pod["spec"]["schedulerName"] = "nobody"
        uid = self.create(pod)["metadata"]["uid"]
        binding = {"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": probe, "uid": uid},
                   "target": {"kind": "Node", "name": "gpu-0000"}}

        def refused():
            status, out = self.c.request("POST", "/api/v1/namespaces/%s/pods/%s/binding"
                                         "?dryRun=All" % (self.ns, probe), binding)
            self.assertIn(status, (201, 403), out)
            return status == 403 and "held back" in str(out)
        wait_until(refused, timeout=30, interval=0.2, what="the hold policy enforced")
        self.delete_pod(probe)

    def release_bindings(self):
        self.c.kubectl("delete", "validatingadmissionpolicybinding", "e2e-hold-binding",
                       "--ignore-not-found")
        self.c.kubectl("delete", "validatingadmissionpolicy", "e2e-hold-binding",
                       "--ignore-not-found")

    def gang_partly_bound_then(self, how):
        """A gang of GANG 1-GPU members whose last member's Binding is held
        back: the leader binds the others and keeps posting that one; then it
        is stopped (<how>: "kill" or "stop"), the hold lifted, and the standby
        must take over and bind the last member from the plan the others carry,
        before it answers ready. Returns (old leader, new leader)."""
        label = "scheduling.x-k8s.io/pod-group"
        name = "held-" + how
        last = "%s-%d" % (name, GANG - 1)
        leader = self.leader()
        new = [n for n in REPLICAS if n != leader][0]
        mark_new = len(self.c.log(new))
        self.hold_bindings([last])
        self.addCleanup(self.release_bindings)
        mark = len(self.c.log(leader))
        self.podgroup(name, GANG)
        for i in range(GANG):
            self.create(gpu_pod("%s-%d" % (name, i), 1, labels={label: name}))
        wait_until(lambda: sum(1 for p in self.pods(selector=label + "=" + name)
                               if p["spec"].get("nodeName")) == GANG - 1, timeout=120,
                   what="all but the held member bound")
        wait_until(lambda: "gang member %s/%s -> node" % (self.ns, last) in
                   self.c.log(leader)[mark:], timeout=30, what="the held Binding posted again")
        t0 = time.monotonic()
        if how == "kill":
            self.c.kill(leader)
        else:
            self.c.stop(leader)
        self.release_bindings()
        pods = {p["metadata"]["name"]: p for p in self.pods(selector=label + "=" + name)}
        self.assertFalse(pods[last]["spec"].get("nodeName"), "the held member is unbound")
        plan = json.loads(pods["%s-0" % name]["metadata"]["annotations"]["troupe.io/gang-plan"])
        self.assertEqual((plan["v"], plan["n"], plan["quorum"]), (1, GANG, GANG))
        planned = {m["pod"]: m for m in plan["members"]}
        self.assertEqual(sorted(planned), sorted(pods))
        self.assertEqual([v for v in invariants.violations(self.c) if v.startswith("GPU ")], [])
        wait_until(lambda: readyz(self.c.replica_port(new))[0] == 200, timeout=90,
                   interval=0.05, what="%s ready" % new)
        t_ready = time.monotonic()
        p = self.wait_bound(last, timeout=60)
        print("\ngang partly bound, leader %s (%s): %s ready after %.2f s, the held member "
              "bound after %.2f s" % (how, leader, new, t_ready - t0, time.monotonic() - t0),
              file=sys.stderr)
        self.assertEqual(p["spec"]["nodeName"], planned[last]["node"])
        self.assertEqual(gpu_ids(p), [int(x) for x in planned[last]["gpus"].split(",")])
        self.assertEqual(json.loads(p["metadata"]["annotations"]["troupe.io/gang-plan"]), plan)
        # The line is written when troupe reads the API server's answer to
        # the Binding, which can come after this test sees the pod bound.
        line = "[recover] gang %s/%s: bound pod %s/%s -> node %s" % (
            self.ns, name, self.ns, last, planned[last]["node"])
        wait_until(lambda: line in self.c.log(new)[mark_new:], timeout=30,
                   what="%s logging %r" % (new, line))
        self.assertIn("leading: looked for gangs left partly bound before answering ready",
                      self.c.log(new)[mark_new:])
        for n, m in planned.items():
            self.assertEqual(self.pod(n)["spec"]["nodeName"], m["node"], n)
        invariants.assert_holds(self.c, settle=5)
        return leader, new

    def test_gang_partly_bound_finished_by_next_leader_after_sigkill(self):
        old, _ = self.gang_partly_bound_then("kill")
        self.c.start_replica(old)

    def test_rolling_upgrade_with_a_gang_partly_bound(self):
        """A rolling upgrade: the standby is replaced first (stopped and
        started: the same binary stands in for the new release), then the
        leader is stopped cleanly in the middle of a gang; the replaced
        standby leads and finishes the gang; the old leader comes back as the
        new release's standby."""
        leader = self.leader()
        standby = [n for n in REPLICAS if n != leader][0]
        self.c.stop(standby)
        self.c.start_replica(standby)
        self.assertEqual(self.leader(), leader)
        old, new = self.gang_partly_bound_then("stop")
        self.assertIn("released Lease", self.c.log(old).rpartition("==== ")[2])
        self.c.start_replica(old)
        self.assertEqual(self.leader(), new)


if __name__ == "__main__":
    unittest.main()
