"""Each client's share of the verbs port's connections
(http.connections_per_client, src/extender/conn_guard.c), against the real
daemon: a client that holds its share cannot take more, and what it opens
beyond its share costs its own connections, never another client's, while
the scheduler's filters keep being answered.

The guard tells clients apart by their address alone (not the port), so on
loopback each client here binds its own source address: the scheduler
127.0.0.1, the greedy client 127.0.0.2, a third client 127.0.0.3 (all of
127.0.0.0/8 is loopback on Linux). The share is set to 3, not the default (a
quarter of http.connection_limit, 8 here), so the tests fail if the key does
not reach the guard; the slots (32) are never full here, so only the share
closes anything. test_abuse.py has the slots themselves under a flood.
"""
import http.client
import json
import socket
import time
import unittest

from schedclient import gpu_pod
from troupe_proc import Troupe

SLOTS = 32
SHARE = 3
CONFIG = f"""
http:
  connection_limit: {SLOTS}
  connections_per_client: {SHARE}
  connection_timeout_seconds: 300
  request_deadline_seconds: 300
"""
SCHEDULER, GREEDY, OTHER = "127.0.0.1", "127.0.0.2", "127.0.0.3"
NODES = ["gpu-a100-0", "gpu-h100-0"]


def filter_body(name):
    return json.dumps({"Pod": gpu_pod("ml", name, f"uid-{name}", 1), "Nodes": None,
                       "NodeNames": NODES})


def wait_until(cond, timeout=20.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def closed_by_server(s):
    """Whether troupe closed socket <s> (the guard shuts a connection it
    closes down at once: the client reads end of file)."""
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class PerClientTest(unittest.TestCase):
    def setUp(self):
        self.t = Troupe(config_text=CONFIG)
        self.t.start()
        self.addCleanup(self.t.stop)
        self.socks = []

    def tearDown(self):
        for s in self.socks:
            s.close()

    # ---- helpers --------------------------------------------------------------

    def metric(self, name):
        return int(self.t.metric(name))

    def open_idle(self, source):
        """A connection from <source> that sends nothing."""
        s = socket.create_connection((self.t.host, self.t.port), timeout=10,
                                     source_address=(source, 0))
        self.socks.append(s)
        return s

    def keepalive(self, source):
        """A scheduler-side keep-alive connection from <source>, one filter
        answered on it so that it is open and idle."""
        c = http.client.HTTPConnection(self.t.host, self.t.port, timeout=10,
                                       source_address=(source, 0))
        self.addCleanup(c.close)
        self.filter_on(c, "warm")
        return c

    def filter_on(self, conn, name):
        """A filter on <conn>; the answer must be troupe's ordinary one."""
        conn.request("POST", "/filter", body=filter_body(name),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        ans = json.loads(resp.read())
        self.assertEqual(resp.status, 200, ans)
        self.assertFalse(ans.get("Error"), ans)
        self.assertTrue(ans.get("NodeNames"), ans)
        return ans

    def fresh_filter(self, source, name):
        c = http.client.HTTPConnection(self.t.host, self.t.port, timeout=10,
                                       source_address=(source, 0))
        try:
            return self.filter_on(c, name)
        finally:
            c.close()

    def wait_open(self, n):
        wait_until(lambda: self.metric("troupe_http_connections") == n, 20,
                   f"troupe to keep {n} connections open "
                   f"(has {self.metric('troupe_http_connections')})")

    # ---- the cases ------------------------------------------------------------

    def test_the_share_reaches_the_guard(self):
        self.assertIn(f"{SLOTS} connections at most ({SHARE} per client)", self.t.log())

    def test_a_client_holding_its_share_of_idle_connections_cannot_take_more(self):
        sched = [self.keepalive(SCHEDULER) for _ in range(2)]
        ports = [c.sock.getsockname() for c in sched]
        other = self.open_idle(OTHER)
        self.wait_open(3)
        greedy = [self.open_idle(GREEDY) for _ in range(SHARE)]
        self.wait_open(3 + SHARE)
        self.assertEqual([closed_by_server(s) for s in greedy], [False] * SHARE,
                         "a client's share itself is kept")
        # Beyond its share, each new connection closes the client's own
        # longest-idle one: it never holds more than its share.
        extra = 3 * SHARE
        for k in range(1, extra + 1):
            greedy.append(self.open_idle(GREEDY))
            wait_until(lambda: self.metric("troupe_http_connections_displaced_total") == k, 20,
                       f"connection {SHARE + k} of {GREEDY} to displace one")
            self.assertEqual(self.metric("troupe_http_connections"), 3 + SHARE)
            # Normal filters keep being answered, on the scheduler's kept
            # connections and on fresh ones.
            self.filter_on(sched[k % 2], f"kept-{k}")
            self.fresh_filter(SCHEDULER, f"fresh-{k}")
            # Gone before the next step: the scheduler never holds more than
            # its own share here.
            self.wait_open(3 + SHARE)
        # The oldest went, the newest <share> stayed.
        wait_until(lambda: all(closed_by_server(s) for s in greedy[:extra]), 20,
                   "the greedy client's oldest connections to be closed")
        self.assertEqual([closed_by_server(s) for s in greedy[extra:]], [False] * SHARE)
        # No other client paid: the scheduler's connections are the same
        # sockets as before, the third client's idle one is open.
        self.assertEqual([c.sock.getsockname() for c in sched], ports)
        self.assertFalse(closed_by_server(other))
        self.assertEqual(self.metric("troupe_http_connections_refused_total"), 0)
        self.assertEqual(self.metric("troupe_http_connections"), 3 + SHARE)
        self.fresh_filter(OTHER, "other")

    def test_a_client_whose_share_is_mid_request_is_refused_more(self):
        sched = self.keepalive(SCHEDULER)
        port = sched.sock.getsockname()
        # The greedy client's share, each with its headers in and its body
        # not (libmicrohttpd answers "100 Continue" once the headers are in,
        # after troupe marked the request begun): none is idle.
        body = filter_body("slow").encode()
        busy = []
        for i in range(SHARE):
            s = self.open_idle(GREEDY)
            s.sendall(b"POST /filter HTTP/1.1\r\nHost: troupe\r\nContent-Type: application/json"
                      b"\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
            self.assertTrue(s.recv(64).startswith(b"HTTP/1.1 100"), "100 Continue")
            s.sendall(body[:-1])
            busy.append(s)
        self.wait_open(1 + SHARE)
        # One more: no idle connection of its own to make room, so the new
        # one is closed at once; the requests in progress are kept.
        late = self.open_idle(GREEDY)
        wait_until(lambda: self.metric("troupe_http_connections_refused_total") == 1, 20,
                   "the connection beyond the share to be refused")
        wait_until(lambda: closed_by_server(late), 20, "the refused connection closed")
        self.assertEqual(self.metric("troupe_http_connections_displaced_total"), 0)
        self.assertEqual(self.metric("troupe_http_connections"), 1 + SHARE)
        self.assertEqual([closed_by_server(s) for s in busy], [False] * SHARE)
        self.filter_on(sched, "meanwhile")
        self.assertEqual(sched.sock.getsockname(), port)
        # The held requests finish and are answered.
        for s in busy:
            s.setblocking(True)
            s.settimeout(10)
            s.sendall(body[-1:])
            self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))


if __name__ == "__main__":
    unittest.main()
