"""Shared by the gang admission tests (test_gang_*.py): the real troupe against
the test API server, driven by schedclient.Scheduler as kube-scheduler drives
it (one scheduling cycle at a time, every bind in its own thread, backoff and
requeue after errors).

What troupe promises (docs/architecture.md, design.md section 6): the first
member's filter plans and reserves the whole gang; members' binds are held
until the quorum is held or bound, then every binding is posted; a plan not
complete by the PodGroup's scheduleTimeoutSeconds (else
gang.default_timeout_seconds), or whose held binds would outlive
kube-scheduler's httpTimeout less gang.margin_seconds, is rolled back: the
held binds answered with an error and every reservation freed. A gang is
never left partly bound by troupe's choice.

Every case checks both sides: what the client saw and the API server's
objects, and that troupe's cache converges to the server.  The cases, by file:

  test_gang_binds.py       a  a 256-member gang of 8-GPU pods on 512 nodes
                              binds completely
                           b  two gangs that cannot both fit: one completes, the
                              other holds nothing until the first is gone, then
                              completes
                           g  a gang whose members ask different amounts (an
                              8-GPU leader, 4-GPU workers) and a CPU-only
                              launcher kube-scheduler binds without troupe
  test_gang_expiry.py      c  a gang missing a member waits; a member no node can
                              take (NodeAffinity in the client) expires the plan
                              at the group timeout (c2) or before the
                              scheduler's httpTimeout (c3), releasing everything
                           f  a bind arriving after its plan expired
  test_gang_bind_errors.py d  a Binding the API server rejects after quorum: 500
                              (d1), 403 (d2), 429 three times (d3) are retried
                              by troupe; one refused on every post fails only
                              that member, at the held request's deadline (d4)
  test_gang_restart.py     e  troupe killed (e1) or stopped (e2, e3) while
                              members are held, or restarted after (e4)

Queue fairness (DRF) and starvation protection are not tested here.  This
module holds the configurations, the cache monitor and GangCase, whose
helpers build gangs, drive the scheduler and check what was bound.
"""
import threading
import time

from live_common import FAST_CONFIG, LiveCase, wait_until
from schedclient import ExtenderConfig, Scheduler, gang_pod, pod_group

# Short gang timeouts: a plan lives 3 s unless its PodGroup names another
# timeout; held binds are answered 10 - 2 = 8 s after the first was held.
GANG_CONFIG = FAST_CONFIG + """
gang:
  default_timeout_seconds: 3
  scheduler_http_timeout_seconds: 10
  margin_seconds: 2
"""
HTTP_TIMEOUT = 10.0             # the client's extender httpTimeout, as troupe is told
# For the 256-member gang: 256 scheduling cycles of the Python client take 2-3 s
# (6 s under ThreadSanitizer), too close to the 8 s held-bind limit above; this
# case is about scale, so kube-scheduler's httpTimeout is 30 s there.
BIG_CONFIG = FAST_CONFIG + """
gang:
  default_timeout_seconds: 3
  scheduler_http_timeout_seconds: 30
  margin_seconds: 2
"""
NS = "ml"
RESERVATION_NS = "troupe-reservation"   # how /debug/cache shows a gang's reservations


def node(name, gpus=8, labels=None):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {})},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)},
                       "allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def member_name(group, i):
    return f"{group}-{i}"


def reservation_of(entry, group, ns=NS):
    """Whether a /debug/cache pod entry is a reservation of gang ns/group
    (keys are gang-reservation/<ns>/<group>/<generation>/<slot>)."""
    return entry["namespace"] == RESERVATION_NS and \
        entry["name"].startswith(f"gang-reservation/{ns}/{group}/")


def holds_devices(entry):
    return entry["devices"] != "" or entry["unattributed"] > 0


class CacheMonitor:
    """Polls troupe's /debug/cache while a test runs and records, at every
    sample: any device held twice on a node (reservations included) and what
    each gang held (reservations and assumed or bound members).

    /debug/cache walks the pod table stripe by stripe, so one answer is not an
    atomic snapshot: a reservation handed to its member (one step in troupe)
    can show in both entries when the walk passes the reservation before the
    hand-over and the member after it. A device counts as held twice only when
    the same pair of holders shows in two consecutive samples."""

    def __init__(self, troupe, groups, interval=0.02):
        self.troupe = troupe
        self.groups = groups            # group -> set of member uids
        self.interval = interval
        self.double = []
        self._last_pairs = set()
        self.held = {g: [] for g in groups}     # group -> [(time, what)]
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self._stop.set()
        self._thread.join(10)

    def sample(self):
        try:
            cache = self.troupe.cache()
        except (OSError, AssertionError):
            return
        self.samples += 1
        seen, pairs = {}, set()
        now = time.monotonic()
        for p in cache["pods"]:
            for d in filter(None, p["devices"].split(",")):
                key = (p["node"], d)
                if key in seen:
                    pair = (key, seen[key], p["uid"])
                    pairs.add(pair)
                    if pair in self._last_pairs:
                        self.double.append(pair)
                seen[key] = p["uid"]
            for g, uids in self.groups.items():
                if reservation_of(p, g) or (p["uid"] in uids and holds_devices(p)):
                    self.held[g].append((now, p["uid"], p["node"], p["devices"]))
        self._last_pairs = pairs

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)


class GangCase(LiveCase):
    """A LiveCase with the gang tests' helpers; each test_gang_*.py subclasses it."""

    # ---- helpers --------------------------------------------------------------

    def start_troupe(self, config=GANG_CONFIG):
        t = self.start_live(config)
        wait_until(lambda: t.request("GET", "/readyz")[0] == 200, 30, "troupe ready")
        return t

    def add_nodes(self, n, gpus=8, prefix="gpu", labels=None):
        names = []
        for i in range(n):
            name = f"{prefix}-{i:03d}"
            self.srv.create("nodes", node(name, gpus, labels))
            names.append(name)
        return names

    def create_gang(self, group, n, gpus, min_member=None, timeout_s=None, members=None,
                    **pod_kw):
        """The PodGroup (unless min_member is None) and pods 0..n-1 of <group>
        (or only those in <members>); returns {i: server pod}."""
        if min_member is not None:
            self.srv.create("podgroups", pod_group(NS, group, min_member, timeout_s))
        pods = {}
        for i in (members if members is not None else range(n)):
            pods[i] = self.create_member(group, i, gpus, **pod_kw)
        return pods

    def create_member(self, group, i, gpus, **pod_kw):
        p = gang_pod(NS, member_name(group, i), None, gpus, group, **pod_kw)
        del p["metadata"]["uid"]        # the server assigns it
        return self.srv.create("pods", p)

    def wait_cache_sees(self, t, pods, groups=()):
        """troupe's cache has every pod (from the watch) and pod group."""
        want = {p["metadata"]["uid"] for p in pods}

        def seen():
            c = t.cache()
            have = {p["uid"] for p in c["pods"] if p["fromAPI"]}
            pgs = {g["name"] for g in c["podGroups"]}
            return want <= have and set(groups) <= pgs
        wait_until(seen, 20, "troupe's cache to see the gang")

    def scheduler(self, t, ext=None, **kw):
        kw.setdefault("percentage_of_nodes_to_score", 100)
        kw.setdefault("time_scale", 0.05)       # backoff 50 ms doubling to 0.5 s
        ext = ext or ExtenderConfig(http_timeout=HTTP_TIMEOUT)
        s = Scheduler(t.host, t.port, {"items": self.srv.list("nodes")}, ext=ext, **kw)
        self.addCleanup(s.close)
        return s

    def filter(self, t, pod):
        """One filter call naming every node in self.nodes: its answer, checked
        to be an ordinary one (200, no Error, every node judged)."""
        body = {"Pod": pod, "Nodes": None, "NodeNames": self.nodes}
        status, _, ans = t.request("POST", "/filter", body)
        self.assertEqual(status, 200, ans)
        self.assertIsInstance(ans, dict, ans)
        self.assertFalse(ans.get("Error"), ans)
        judged = set(ans.get("NodeNames") or []) | set(ans.get("FailedNodes") or {}) | \
            set(ans.get("FailedAndUnresolvableNodes") or {})
        self.assertEqual(judged, set(self.nodes), ans)
        return ans

    def server_pod(self, name):
        return self.srv.get("pods", NS, name)

    def server_nodes_of(self, group, n):
        return {i: (self.server_pod(member_name(group, i)) or {}).get("spec", {}).get("nodeName")
                for i in range(n)}

    def bindings_for(self, names):
        names = set(names)
        return [b for b in self.srv.bindings if b.get("metadata", {}).get("name") in names]

    def assert_gang_bound(self, group, n, gpus):
        """Every member bound on the server, no node with two members, each
        member's troupe.io/gpu-ids naming <gpus> devices."""
        on = self.server_nodes_of(group, n)
        unbound = sorted(i for i, node_name in on.items() if not node_name)
        self.assertEqual(unbound, [], f"gang {group}: members without spec.nodeName")
        per_node = {}
        for i, node_name in on.items():
            per_node.setdefault(node_name, []).append(i)
        shared = {k: v for k, v in per_node.items() if len(v) > 1}
        self.assertEqual(shared, {}, f"gang {group}: nodes with two members")
        for i in range(n):
            ann = self.server_pod(member_name(group, i))["metadata"].get("annotations", {})
            ids = ann.get("troupe.io/gpu-ids", "")
            self.assertEqual(len([d for d in ids.split(",") if d]), gpus,
                             f"{member_name(group, i)}: troupe.io/gpu-ids={ids!r}")
        return on

    def assert_nothing_bound(self, group, n):
        on = self.server_nodes_of(group, n)
        self.assertEqual({i: v for i, v in on.items() if v}, {},
                         f"gang {group}: members bound on the server")

    def reservations(self, t, group=None):
        return [p for p in t.cache()["pods"] if p["namespace"] == RESERVATION_NS and
                (group is None or reservation_of(p, group))]

    def free_gpus(self, t):
        return {n["name"]: n["gpuFree"] for n in t.state()["nodes"]}

    def metrics(self, t):
        return t.metrics()

    def drive_until(self, sched, cond, timeout, what):
        """Run scheduling cycles until cond() holds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return
            if sched.schedule_one() is None:
                time.sleep(0.005)
        seen = {}
        for o in sched.outcomes:
            key = (o.result, o.error or next(iter(o.reasons.values()), ""))
            seen[key] = seen.get(key, 0) + 1
        self.fail(f"timed out driving the scheduler until {what}; outcomes: {seen}")

    def schedule_whole_gang(self, t, group, n, seed):
        """Create gang <group> of <n> 8-GPU members (quorum n), schedule it
        through <t> and check it bound completely; returns (pods, nodes)."""
        pods = self.create_gang(group, n, 8, min_member=n, timeout_s=60)
        self.wait_cache_sees(t, pods.values(), [group])
        sched = self.scheduler(t, seed=seed)
        for i in range(n):
            sched.add_pod(pods[i])
        sched.run(deadline_s=30)
        self.assertEqual(len(sched.bound()), n)
        return pods, self.assert_gang_bound(group, n, 8)

    def outcomes_of(self, sched, uid):
        return [o for o in sched.outcomes if o.pod == uid]
