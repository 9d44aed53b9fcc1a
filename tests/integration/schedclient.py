"""A scheduler-side client that calls troupe the way kube-scheduler does.

It follows kube-interfaces.md (pkg/scheduler/schedule_one.go and extender.go):

* One scheduling cycle at a time. In-tree filters first (NodeUnschedulable,
  TaintToleration, NodeResourcesFit counting the managed GPU resource unless
  ignoredByScheduler), over a sample of the nodes when there are 100 or more
  (percentageOfNodesToScore, adaptive when 0: 50 - nodes/125 %, floor 5 %, at
  least 100 nodes, rotating the start index between cycles).
* The extender is called only for pods it is interested in (a container or init
  container names a managed resource in requests or limits).
* filter: POST with NodeNames (nodeCacheCapable) or the full Nodes list. Only
  HTTP 200 counts; a non-empty Error is a scheduling *error* (backoff), not
  "unschedulable". In names mode every returned name must be an input name. If
  both NodeNames and Nodes are null, zero nodes pass.
* No feasible node: the pod is unschedulable and waits for a cluster event
  (pods rejected by an extender are re-queued on any event). An event that
  came during the pod's own cycle sends it to backoff instead (the queue's
  moveRequestCycle), so it is never lost.
* Exactly one feasible node: taken without prioritize.
* prioritize: the extender's Score x weight x 10 is added to the in-tree total
  (in-tree scores are a pluggable function, zero by default); failures are
  ignored. The highest total wins, ties broken at random.
* The pod is assumed in the scheduler's cache, then bound asynchronously through
  the extender's bindVerb, each bind in its own thread as kube-scheduler runs
  each binding cycle in its own goroutine: there is no bound on binds in
  flight, so a bind the extender holds (a gang member waiting for its quorum)
  never blocks another bind or the next scheduling cycle. A failed bind forgets
  the assumption and re-queues the pod with backoff (podInitialBackoffSeconds 1
  doubling to podMaxBackoffSeconds 10; tests may scale time down).
* HTTP as Go's http.Client does it: keep-alive connections from a shared pool
  (utilnet's MaxIdleConnsPerHost 25; more may be open at once), a connection the
  server closed while idle is dropped before reuse, and a POST is re-sent only
  when it could not be written on a reused connection (Go never replays a POST
  whose request went out: a bind whose connection breaks while troupe holds it
  fails).
* In-tree NodeAffinity: spec.nodeSelector must match the node's labels.
* A pod the extender does not bind (not interested, or no bindVerb) is bound by
  the DefaultBinder: POST pods/{name}/binding to the API server when the client
  is given its URL (api_url); without one the bind only happens in the
  client's own cache.
"""
import copy
import http.client
import json
import random
import select
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional


def parse_count(q) -> int:
    """A whole quantity such as "8" (GPU counts are integers)."""
    if q is None:
        return 0
    s = str(q)
    if s.endswith("m"):
        return int(s[:-1]) // 1000
    return int(s)


@dataclass
class ExtenderConfig:
    url_prefix: str = "/"
    filter_verb: str = "filter"
    prioritize_verb: str = "prioritize"
    bind_verb: str = "bind"
    weight: int = 15           # config/scheduler-config.yaml's
    node_cache_capable: bool = True
    http_timeout: float = 30.0
    ignorable: bool = False
    managed_resources: List[str] = field(default_factory=lambda: ["nvidia.com/gpu"])
    ignored_by_scheduler: bool = False


@dataclass
class Outcome:
    pod: str
    result: str                    # bound | unschedulable | error | bind-error
    node: Optional[str] = None
    reasons: Dict[str, str] = field(default_factory=dict)
    error: str = ""


class Scheduler:
    MAX_IDLE_CONNS = 25    # utilnet.SetTransportDefaults: MaxIdleConnsPerHost

    def __init__(self, host, port, cluster, ext=None, seed=1, percentage_of_nodes_to_score=0,
                 time_scale=1.0, in_tree_score: Optional[Callable] = None, bind_workers=None,
                 api_url: Optional[str] = None):
        """bind_workers is accepted for compatibility and ignored: every bind runs
        in its own thread, as kube-scheduler's binding goroutines do."""
        self.host, self.port = host, port
        self.api_url = api_url
        self.ext = ext or ExtenderConfig()
        self.rng = random.Random(seed)
        self.percentage = percentage_of_nodes_to_score
        self.time_scale = time_scale
        self.in_tree_score = in_tree_score or (lambda pod, node: 0)
        self.nodes = {}            # name -> node object (the scheduler's informer view)
        self.node_order = []
        self.on_node = {}          # name -> {uid: gpus} bound or assumed in the scheduler cache
        self.pods = {}             # uid -> pod object
        self.active = []           # uids ready to schedule
        self.backoff = {}          # uid -> monotonic time it may be retried
        self.attempts = {}         # uid -> failed attempts so far
        self.unschedulable = set()
        self.cycle = 0             # scheduling cycles started
        self.move_request_cycle = -1   # the cycle during which the last event came
        self.next_start = 0
        self.outcomes: List[Outcome] = []
        self.lock = threading.Lock()
        self.bind_threads: List[threading.Thread] = []
        self.inflight = 0
        self.idle = []             # keep-alive connections ready for reuse
        self.conns = set()         # every open connection (close() closes them)
        for item in cluster.get("items", []):
            if item.get("kind") == "Node":
                name = item["metadata"]["name"]
                self.nodes[name] = item
                self.node_order.append(name)
                self.on_node.setdefault(name, {})
        for item in cluster.get("items", []):
            if item.get("kind") == "Pod":
                node = item.get("spec", {}).get("nodeName")
                phase = item.get("status", {}).get("phase")
                if node and phase not in ("Succeeded", "Failed"):
                    self.on_node.setdefault(node, {})[self.uid(item)] = self.gpus(item)

    # ---- pods -----------------------------------------------------------

    @staticmethod
    def uid(pod):
        md = pod["metadata"]
        return md.get("uid") or f'{md.get("namespace", "default")}/{md["name"]}'

    def gpus(self, pod):
        total, init_max = 0, 0
        for c in pod.get("spec", {}).get("containers", []):
            res = c.get("resources", {})
            for r in self.ext.managed_resources:
                total += parse_count(res.get("limits", {}).get(r) or res.get("requests", {}).get(r))
        for c in pod.get("spec", {}).get("initContainers", []):
            res = c.get("resources", {})
            for r in self.ext.managed_resources:
                init_max = max(init_max, parse_count(res.get("limits", {}).get(r)))
        return max(total, init_max)

    def interested(self, pod):
        for key in ("containers", "initContainers"):
            for c in pod.get("spec", {}).get(key, []):
                res = c.get("resources", {})
                for r in self.ext.managed_resources:
                    if r in res.get("limits", {}) or r in res.get("requests", {}):
                        return True
        return False

    def add_pod(self, pod):
        uid = self.uid(pod)
        with self.lock:
            self.pods[uid] = pod
            self.active.append(uid)

    def delete_pod(self, uid):
        """A bound pod finished: free it in the scheduler cache (a cluster event)."""
        with self.lock:
            for held in self.on_node.values():
                held.pop(uid, None)
            self._cluster_event()

    def cluster_event(self):
        """Something changed in the cluster (a node, a PodGroup, another pod):
        pods an extender rejected are moved back to the active queue."""
        with self.lock:
            self._cluster_event()

    def retarget(self, host, port):
        """The extender moved (a restarted troupe on a new port): later calls go
        there. Idle connections to the old address are dropped; calls in flight
        finish (or fail) where they are."""
        with self.lock:
            self.host, self.port = host, port
            idle, self.idle = self.idle, []
        for c in idle:
            self._discard(c)

    def _cluster_event(self):
        # Pods an extender rejected have no queueing hints: any event moves them.
        self.active.extend(sorted(self.unschedulable))
        self.unschedulable.clear()
        # A pod in its scheduling cycle now must not miss this event
        # (scheduling_queue.go: moveRequestCycle >= the pod's cycle sends an
        # unschedulable pod to backoff instead of the unschedulable pool).
        self.move_request_cycle = self.cycle

    # ---- HTTP -----------------------------------------------------------

    @staticmethod
    def _stale(conn):
        """Closed by the server while idle (or unexpected bytes): Go's transport
        notices this in its read loop and never reuses such a connection."""
        if conn.sock is None:
            return True
        try:
            readable, _, _ = select.select([conn.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def _acquire(self):
        """(connection, reused) from the idle pool, or a new one."""
        with self.lock:
            while self.idle:
                c = self.idle.pop()
                if c.host == self.host and c.port == self.port and not self._stale(c):
                    return c, True
                self.conns.discard(c)
                c.close()
            c = http.client.HTTPConnection(self.host, self.port, timeout=self.ext.http_timeout)
            self.conns.add(c)
            return c, False

    def _release(self, conn):
        with self.lock:
            if len(self.idle) < self.MAX_IDLE_CONNS and conn.host == self.host and \
                    conn.port == self.port:
                self.idle.append(conn)
                return
            self.conns.discard(conn)
        conn.close()

    def _discard(self, conn):
        with self.lock:
            self.conns.discard(conn)
        conn.close()

    def _post(self, verb, body):
        path = self.ext.url_prefix.rstrip("/") + "/" + verb
        data = json.dumps(body)
        for attempt in range(2):
            conn, reused = self._acquire()
            written = False
            try:
                conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
                written = True
                resp = conn.getresponse()
                raw = resp.read()
            except (ConnectionError, http.client.HTTPException, OSError):
                self._discard(conn)
                # Go re-sends a POST only when nothing was written on a reused
                # connection (nothingWrittenError); a request that went out is
                # never replayed.
                if attempt or written or not reused:
                    raise
                continue
            if resp.will_close:
                self._discard(conn)
            else:
                self._release(conn)
            break
        if resp.status != 200:
            raise RuntimeError(f"failed {verb} with extender at URL {path}, code {resp.status}")
        return json.loads(raw)

    # ---- one cycle --------------------------------------------------------

    def _tolerates(self, pod, taint):
        for t in pod.get("spec", {}).get("tolerations", []) or []:
            if t.get("operator") == "Exists" and not t.get("key"):
                return True
            if t.get("key") == taint.get("key") and (
                    t.get("operator") == "Exists" or t.get("value") == taint.get("value")) and (
                    not t.get("effect") or t.get("effect") == taint.get("effect")):
                return True
        return False

    def _in_tree_fits(self, pod, name, want):
        node = self.nodes[name]
        spec = node.get("spec", {})
        selector = pod.get("spec", {}).get("nodeSelector") or {}
        labels = node.get("metadata", {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in selector.items()):
            return False        # NodeAffinity (spec.nodeSelector)
        if spec.get("unschedulable") and not self._tolerates(
                pod, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
            return False
        for taint in spec.get("taints", []) or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not self._tolerates(pod, taint):
                return False
        if want and not self.ext.ignored_by_scheduler:
            alloc = sum(parse_count(node.get("status", {}).get("allocatable", {}).get(r))
                        for r in self.ext.managed_resources)
            if alloc - sum(self.on_node.get(name, {}).values()) < want:
                return False
        return True

    def _num_to_find(self, n):
        if n < 100 or self.percentage >= 100:
            return n
        pct = self.percentage or max(5, 50 - n // 125)
        return max(100, n * pct // 100)

    def schedule_one(self) -> Optional[Outcome]:
        """Run one scheduling cycle for the next pod; None when nothing is ready."""
        with self.lock:
            now = time.monotonic()
            for uid, ready_at in list(self.backoff.items()):
                if ready_at <= now:
                    del self.backoff[uid]
                    if uid not in self.active:
                        self.active.append(uid)
            if not self.active:
                return None
            uid = self.active.pop(0)
            self.cycle += 1
            pod_cycle = self.cycle
            pod = self.pods[uid]
            want = self.gpus(pod)
            names, n = [], len(self.node_order)
            limit = self._num_to_find(n)
            for i in range(n):
                name = self.node_order[(self.next_start + i) % n]
                if self._in_tree_fits(pod, name, want):
                    names.append(name)
                    if len(names) >= limit:
                        break
            self.next_start = (self.next_start + max(1, i + 1)) % max(1, n)
        out = Outcome(pod=uid, result="unschedulable")
        if self.interested(pod) and self.ext.filter_verb and names:
            try:
                names, out.reasons = self._filter(pod, names)
            except Exception as e:   # an extender error fails the attempt
                if self.ext.ignorable:
                    pass
                else:
                    return self._error(uid, out, str(e))
        if not names:
            with self.lock:
                missed_event = self.move_request_cycle >= pod_cycle
                if not missed_event:
                    self.unschedulable.add(uid)
            if missed_event:
                self._requeue_backoff(uid)
            self.outcomes.append(out)
            return out
        if len(names) == 1:
            host = names[0]
        else:
            host = self._select(pod, names)
        with self.lock:
            self.on_node.setdefault(host, {})[uid] = want      # assume
            self.inflight += 1
        out.node = host
        out.result = "binding"
        self.outcomes.append(out)
        # One thread per bind (kube-scheduler: go sched.bindingCycle(...)).
        t = threading.Thread(target=self._bind, args=(pod, uid, host, out),
                             name=f"bind-{uid}", daemon=True)
        with self.lock:
            self.bind_threads = [b for b in self.bind_threads if b.is_alive()]
            self.bind_threads.append(t)
        t.start()
        return out

    def _filter(self, pod, names):
        if self.ext.node_cache_capable:
            body = {"Pod": pod, "Nodes": None, "NodeNames": names}
        else:
            body = {"Pod": pod, "Nodes": {"metadata": {}, "items": [self.nodes[n] for n in names]},
                    "NodeNames": None}
        res = self._post(self.ext.filter_verb, body)
        if res.get("Error"):
            raise RuntimeError(res["Error"])
        reasons = dict(res.get("FailedNodes") or {})
        reasons.update(res.get("FailedAndUnresolvableNodes") or {})
        if self.ext.node_cache_capable and res.get("NodeNames") is not None:
            kept = list(res["NodeNames"])
            unknown = set(kept) - set(names)
            if unknown:
                raise RuntimeError(f"extender claims a filtered node {sorted(unknown)[0]} "
                                   "which is not found in the input node list")
        elif res.get("Nodes") is not None:
            kept = [item["metadata"]["name"] for item in (res["Nodes"].get("items") or [])]
        else:
            kept = []
        return kept, reasons

    def _select(self, pod, names):
        totals = {n: self.in_tree_score(pod, n) for n in names}
        if self.ext.prioritize_verb and self.interested(pod):
            body = {"Pod": pod, "Nodes": None, "NodeNames": names}
            if not self.ext.node_cache_capable:
                body = {"Pod": pod, "NodeNames": None,
                        "Nodes": {"metadata": {}, "items": [self.nodes[n] for n in names]}}
            try:
                for hp in self._post(self.ext.prioritize_verb, body) or []:
                    if hp.get("Host") in totals:
                        totals[hp["Host"]] += hp.get("Score", 0) * self.ext.weight * 10
            except Exception:
                pass    # prioritize failures are always ignored
        best = max(totals.values())
        top = [n for n in names if totals[n] == best]
        return self.rng.choice(top)

    def _error(self, uid, out, msg):
        out.result = "error"
        out.error = msg
        self._requeue_backoff(uid)
        self.outcomes.append(out)
        return out

    def _requeue_backoff(self, uid):
        with self.lock:
            attempts = self.attempts.get(uid, 0)
            self.attempts[uid] = attempts + 1
            delay = min(1.0 * (2 ** attempts), 10.0) * self.time_scale
            self.backoff[uid] = time.monotonic() + delay

    def _bind(self, pod, uid, host, out):
        md = pod["metadata"]
        err = ""
        try:
            if self.ext.bind_verb and self.interested(pod):
                res = self._post(self.ext.bind_verb, {
                    "PodName": md["name"], "PodNamespace": md.get("namespace", "default"),
                    "PodUID": md.get("uid", ""), "Node": host})
                err = res.get("Error") or ""
            elif self.api_url:
                err = self._default_bind(md, host)
        except Exception as e:
            err = str(e)
        with self.lock:
            self.inflight -= 1
            if err:
                self.on_node.get(host, {}).pop(uid, None)     # forget the assumption
                out.result = "bind-error"
                out.error = err
            else:
                out.result = "bound"
                self._cluster_event()
        if err:
            self._requeue_backoff(uid)

    def _default_bind(self, md, host):
        """kube-scheduler's DefaultBinder: POST a Binding; "" or the error."""
        import urllib.error
        import urllib.request
        ns = md.get("namespace", "default")
        body = json.dumps({"apiVersion": "v1", "kind": "Binding",
                           "metadata": {"name": md["name"], "namespace": ns,
                                        "uid": md.get("uid", "")},
                           "target": {"apiVersion": "v1", "kind": "Node", "name": host}})
        req = urllib.request.Request(
            f"{self.api_url}/api/v1/namespaces/{ns}/pods/{md['name']}/binding",
            data=body.encode(), method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                r.read()
            return ""
        except urllib.error.HTTPError as e:
            return f"binding rejected: {e.code} {e.read()[:200]!r}"

    def run(self, deadline_s=60.0):
        """Cycle until no pod is ready and no bind is in flight, or the deadline."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.schedule_one() is None:
                with self.lock:
                    idle = self.inflight == 0 and not self.active
                    waiting = list(self.backoff.values())
                if idle and not waiting:
                    return
                if idle and waiting and min(waiting) > end:
                    return
                time.sleep(0.002)
        raise TimeoutError("scheduler did not settle")

    def bound(self):
        """uid -> node for every pod this client bound."""
        return {o.pod: o.node for o in self.outcomes if o.result == "bound"}

    def binds_in_flight(self):
        with self.lock:
            return self.inflight

    def wait_binds(self, timeout=None):
        """Wait for every bind started so far to finish; False on timeout."""
        end = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            threads = list(self.bind_threads)
        for t in threads:
            t.join(None if end is None else max(0.0, end - time.monotonic()))
            if t.is_alive():
                return False
        return True

    def close(self):
        """Wait for every bind in flight (each ends within http_timeout), then
        close the connections."""
        self.wait_binds()
        with self.lock:
            conns, self.conns, self.idle = list(self.conns), set(), []
        for c in conns:
            c.close()


def gpu_pod(ns, name, uid, gpus, labels=None, **resources):
    res = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    if resources:
        res.setdefault("requests", {}).update(resources)
    md = {"name": name, "namespace": ns, "uid": uid}
    if labels:
        md["labels"] = labels
    return {"metadata": md, "spec": {"schedulerName": "default-scheduler",
                                     "containers": [{"name": "main", "image": "trainer:1",
                                                     "resources": res}]},
            "status": {"phase": "Pending"}}


def gang_pod(ns, name, uid, gpus, group, labels=None, node_selector=None, **resources):
    """A gang member: gpu_pod with the scheduler-plugins membership label
    scheduling.x-k8s.io/pod-group=<group> (kube-interfaces.md section 9)."""
    labels = dict(labels or {}, **{"scheduling.x-k8s.io/pod-group": group})
    pod = gpu_pod(ns, name, uid, gpus, labels, **resources)
    if node_selector:
        pod["spec"]["nodeSelector"] = dict(node_selector)
    return pod


def pod_group(ns, name, min_member, timeout_s=None, min_resources=None):
    """A scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1)."""
    spec = {"minMember": min_member}
    if timeout_s is not None:
        spec["scheduleTimeoutSeconds"] = timeout_s
    if min_resources:
        spec["minResources"] = dict(min_resources)
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def load_cluster(path):
    with open(path) as f:
        return json.load(f)


def clone(obj):
    return copy.deepcopy(obj)
