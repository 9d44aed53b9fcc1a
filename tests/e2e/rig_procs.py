"""How the local rig (cluster.py) runs its components as processes: free
ports below the ephemeral range, and a retry with new ones when another
program took a port first; spawning each component in its own session with
its log in DIR/logs/ and its pid in DIR/state.json; waiting for it to become
healthy, noticing if it died; stopping, killing and reaping it.

Processes is a mixin of cluster.Cluster, which owns the state it records
(state, _save_state, dir, logs, pin, _children).
"""
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import time

class ClusterError(RuntimeError):
    pass


class PortInUse(ClusterError):
    """A component could not listen: another program took its port first."""


def free_port():
    """A port free now, below the kernel's ephemeral range (32768 and up), so that
    the many outgoing connections of a busy rig cannot take it before the
    component that is given it listens there. A clash with another program is
    still possible; _spawn_listening retries with a new port."""
    rnd = random.Random()
    for _ in range(200):
        port = rnd.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise ClusterError("no free port in 20000-32000 on 127.0.0.1")


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


class Processes:
    """The components' processes (mixin of cluster.Cluster)."""

    def pid(self, name):
        return self.state.get("pids", {}).get(name)

    def alive(self, name):
        pid = self.pid(name)
        if not pid:
            return False
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        # A zombie of ours is not alive.
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(")")[-1].split()[0] != "Z"
        except OSError:
            return False

    def _log(self, name):
        os.makedirs(self.logs, exist_ok=True)
        f = open(os.path.join(self.logs, name + ".log"), "a")
        f.write("\n==== %s started %s ====\n" % (name, time.strftime("%Y-%m-%dT%H:%M:%S")))
        f.flush()
        return f

    def _spawn(self, name, cmd):
        exe = cmd[0]
        if not os.access(exe, os.X_OK):
            raise ClusterError(f"{name}: {exe} is missing; run ./scripts/cluster up, which builds it")
        if self.pin and name in self.pin:
            cmd = [shutil.which("taskset") or "taskset", "-c", str(self.pin[name])] + list(cmd)
        log = self._log(name)
        log.write("$ %s\n" % " ".join(cmd))
        log.flush()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True, cwd=self.dir)
        log.close()
        self.state.setdefault("pids", {})[name] = p.pid
        self.state.setdefault("commands", {})[name] = cmd
        self._save_state()
        self._children[name] = p
        return p

    def _wait(self, what, cond, timeout=60, proc=None):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if proc and not self.alive(proc):
                last_run = self.log(proc).rpartition("==== %s started" % proc)[2]
                err = PortInUse if re.search(r"address (already )?in use", last_run) else ClusterError
                raise err(f"{proc} exited while waiting for {what}; see "
                          f"{os.path.join(self.logs, proc + '.log')}")
            try:
                if cond():
                    return
            except Exception as e:   # not up yet: connection refused, 503, ...
                last = e
            time.sleep(0.2)
        raise ClusterError(f"timed out after {timeout}s waiting for {what} ({last})")

    def _retry_ports(self, keys, start):
        """Run <start>; if its component lost a port race, give it new ports
        (state["ports"][k] for k in <keys>) and try again, three times at most."""
        for attempt in range(3):
            try:
                return start()
            except PortInUse:
                if attempt == 2:
                    raise
                for k in keys:
                    self.state["ports"][k] = free_port()
                self._save_state()

    def signal(self, name, sig):
        pid = self.pid(name)
        if pid:
            try:
                os.killpg(pid, sig)
            except OSError:
                pass

    def stop(self, name, timeout=15):
        """SIGTERM, then SIGKILL after <timeout> seconds; the process is reaped."""
        if not self.pid(name):
            return
        self.signal(name, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.alive(name) and time.monotonic() < deadline:
            self._reap(name)
            time.sleep(0.05)
        self.kill(name)

    def kill(self, name):
        """SIGKILL, as a crash would: no chance to clean up. The process is reaped
        and forgotten."""
        if self.alive(name):
            self.signal(name, signal.SIGKILL)
        while self.alive(name):
            self._reap(name)
            time.sleep(0.01)
        self._reap(name)
        self.state.get("pids", {}).pop(name, None)
        self._save_state()

    def _reap(self, name):
        p = self._children.get(name)
        if p is not None:
            p.poll()

    def log(self, name):
        try:
            with open(os.path.join(self.logs, name + ".log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""
