"""Shared by the live-API-server integration tests: start the test API server
and troupe against it, wait for convergence, compare troupe's cache with the
server's objects."""
import json
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "apiserver"))

from fake_apiserver import FakeAPIServer  # noqa: E402
from troupe_proc import Troupe, fixture_cluster  # noqa: E402

# Short timeouts and backoffs so that faults heal in test time; the defaults are
# in config/troupe.yaml.
FAST_CONFIG = """
api:
  bind_timeout_seconds: 5
  page_size: 50
  watch_timeout_min_seconds: 20
  watch_timeout_max_seconds: 30
  backoff_initial_ms: 50
  backoff_max_ms: 400
  healthy_reset_seconds: 2
  podgroup_retry_seconds: 1
"""


def wait_until(cond, timeout=20.0, what="condition"):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            last = cond()
            if last:
                return last
        except (ConnectionError, OSError, AssertionError) as e:
            last = e
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def gpu_count(pod):
    total = 0
    for c in pod.get("spec", {}).get("containers", []):
        lim = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        total += int(lim) if lim else 0
    return total


def holds(pod):
    return bool(pod.get("spec", {}).get("nodeName") and gpu_count(pod) > 0
                and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")
                and not pod["metadata"].get("deletionTimestamp"))


def differences(troupe, srv):
    """What differs between troupe's cache and the server; [] when equal."""
    cache = troupe.cache()
    diffs = []
    nodes = {n["metadata"]["name"] for n in srv.list("nodes")}
    if set(cache["nodes"]) != nodes:
        diffs.append(f"nodes: troupe-only {sorted(set(cache['nodes']) - nodes)[:5]}, "
                     f"server-only {sorted(nodes - set(cache['nodes']))[:5]}")
    server_pods = {p["metadata"]["uid"]: p for p in srv.list("pods")}
    cached = {p["uid"]: p for p in cache["pods"] if p["fromAPI"]}
    if set(cached) != set(server_pods):
        diffs.append(f"pods: troupe-only {sorted(set(cached) - set(server_pods))[:5]}, "
                     f"server-only {sorted(set(server_pods) - set(cached))[:5]}")
    for uid, p in server_pods.items():
        c = cached.get(uid)
        if not c:
            continue
        held = c["devices"] != "" or c["unattributed"] > 0
        if holds(p) != held:
            diffs.append(f"pod {uid}: server holds={holds(p)}, troupe holds={held}")
        elif held and c["node"] != p["spec"]["nodeName"]:
            diffs.append(f"pod {uid}: server node {p['spec']['nodeName']}, troupe {c['node']}")
        # The node agent's read-back, when valid (one device per GPU asked),
        # is what troupe counts.
        anns = p["metadata"].get("annotations", {})
        ann = anns.get("troupe.io/gpu-ids")
        actual = anns.get("troupe.io/gpu-ids-actual")
        if actual and len(actual.split(",")) == gpu_count(p):
            ann = actual
        if held and ann and c["devices"] != ann:
            diffs.append(f"pod {uid}: annotation {ann}, troupe devices {c['devices']}")
    groups = {(g["metadata"]["namespace"], g["metadata"]["name"]) for g in srv.list("podgroups")}
    cgroups = {(g["namespace"], g["name"]) for g in cache["podGroups"]}
    if groups != cgroups:
        diffs.append(f"pod groups differ: {sorted(groups ^ cgroups)[:5]}")
    return diffs


def assert_converges(test, troupe, srv, timeout=20.0):
    try:
        wait_until(lambda: not differences(troupe, srv), timeout, "cache == server")
    except AssertionError:
        test.fail(f"troupe's cache never matched the server: {differences(troupe, srv)}\n"
                  f"--- troupe log ---\n{troupe.log()[-4000:]}")


def assert_no_device_twice(test, troupe):
    """Invariant 1: on every node, no device is held by two pods."""
    seen = {}
    for p in troupe.cache()["pods"]:
        for d in filter(None, p["devices"].split(",")):
            key = (p["node"], d)
            test.assertNotIn(key, seen, f"device {d} on {p['node']} held by {seen.get(key)} "
                             f"and {p['uid']}")
            seen[key] = p["uid"]
    for n in troupe.state()["nodes"]:
        test.assertGreaterEqual(n["gpuFree"], 0)


def load_fixture_cluster(srv):
    with open(fixture_cluster()) as f:
        srv.load_list(json.load(f))


def live(srv, config=FAST_CONFIG, **kw):
    return Troupe(source=["--api-server", srv.url], config_text=config, **kw)


def kubeconfig_for(srv, token_file, folder):
    path = os.path.join(folder, "kubeconfig")
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
current-context: test
clusters:
- name: fake
  cluster:
    server: {srv.url}
users:
- name: troupe
  user:
    tokenFile: {os.path.basename(token_file)}
contexts:
- name: test
  context: {{cluster: fake, user: troupe}}
""")
    return path


def tmpdir():
    return tempfile.TemporaryDirectory(prefix="troupe-live-")


class LiveCase(unittest.TestCase):
    """A test API server for each test, and troupe against it: both stopped at
    the test's end."""

    def setUp(self):
        self.srv = FakeAPIServer()
        self.srv.start()
        self.addCleanup(self.srv.stop)

    def start_live(self, config=FAST_CONFIG):
        t = live(self.srv, config=config)
        t.start()
        self.addCleanup(t.stop)
        return t
