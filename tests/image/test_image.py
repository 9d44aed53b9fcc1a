"""troupe's container image, built by scripts/image from the binary under test
and run the way a container runtime runs it, with no Docker engine.

The image is checked as a registry and a scanner would see it (every blob
matches its digest, every layer is a complete tar, its files are exactly the
daemon, the libraries ldd names and four files in /etc, all owned by root) and
then run as runc runs a pod with readOnlyRootFilesystem: unpacked by umoci,
started by bubblewrap with the image config's Entrypoint, Cmd, User, Env and
WorkingDir, the root filesystem bound read-only, a tmpfs /tmp, fresh /proc and
/dev, every namespace new except the network (the test talks to it on
127.0.0.1), and troupe as PID 1 of its namespace, stopped by SIGTERM.

bwrap runs as an unprivileged user (uid 65532 when the test runs as root), so
the sandbox's user namespace is created without privilege, as rootless
runtimes do. Where the kernel forbids that, and the test is root, bwrap runs as
root with --unshare-user --uid 65532 instead, and says so on stderr
(TROUPE_IMAGE_SANDBOX=root forces that fallback, to test it).

Exits 77 (meson's "skipped") only when umoci, skopeo or bwrap is not installed
(scripts/lib/image.sh's ensure_image_tools installs them).
"""
import errno
import gzip
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from troupe_proc import LISTEN_RE, binary, fixture_cluster, source_root  # noqa: E402

TOOLS = ("umoci", "skopeo", "bwrap")
IMAGE_UID = 65532
SHA_RE = re.compile(r"packed /troupe: sha256 ([0-9a-f]{64})")
# The files outside the libraries; everything else must be one ldd names.
ETC_FILES = {"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/ssl/certs/ca-certificates.crt"}
CLUSTER_IN_IMAGE = "/etc/troupe/cluster.json"   # where a chart's ConfigMap would be
POD4 = {"metadata": {"name": "p", "namespace": "ml", "uid": "uid-p"},
        "spec": {"containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}
FILTER = {"Pod": POD4, "Nodes": None, "NodeNames": ["gpu-a100-1", "cpu-0"]}

IMG = {}    # what setUpModule built: paths, config, the sandbox's mode


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def blob(digest):
    algo, _, hexd = digest.partition(":")
    assert algo == "sha256", digest
    return os.path.join(IMG["layout"], "blobs", "sha256", hexd)


def read_json_blob(digest):
    with open(blob(digest), "rb") as f:
        return json.loads(f.read())


def run(cmd, timeout=300, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def ldd_paths(path):
    out = run(["ldd", path]).stdout
    return {os.path.realpath(w) for line in out.splitlines() for w in line.split() if w.startswith("/")}


def make_traversable(path, stop):
    """Let an unprivileged uid reach <path>: tempfile and umoci make 0700 dirs."""
    while True:
        os.chmod(path, os.stat(path).st_mode | 0o055)
        if path == stop:
            return
        path = os.path.dirname(path)


def setUpModule():
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        raise unittest.SkipTest(f"{', '.join(missing)} not installed")
    IMG["tmp"] = tempfile.mkdtemp(prefix="troupe-image-")
    out = os.path.join(IMG["tmp"], "out")
    res = run([os.path.join(source_root(), "scripts", "image"), "--binary", binary(), "--out", out],
              timeout=600)
    if res.returncode != 0:
        raise AssertionError(f"scripts/image failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    IMG["script_output"] = res.stdout + res.stderr
    IMG["layout"] = os.path.join(out, "troupe-oci")
    IMG["archive"] = os.path.join(out, "troupe.tar")
    with open(os.path.join(IMG["layout"], "index.json")) as f:
        index = json.load(f)
    assert len(index["manifests"]) == 1, index
    IMG["index"] = index
    IMG["tag"] = index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
    IMG["manifest"] = read_json_blob(index["manifests"][0]["digest"])
    IMG["config"] = read_json_blob(IMG["manifest"]["config"]["digest"])

    # Unpack as a rootless runtime would, then make what runc makes before it
    # remounts the root read-only: the mount points the container's mounts need.
    bundle = os.path.join(IMG["tmp"], "bundle")
    res = run(["umoci", "unpack", "--rootless", "--image", f"{IMG['layout']}:{IMG['tag']}", bundle])
    if res.returncode != 0:
        raise AssertionError(f"umoci unpack --rootless failed:\n{res.stdout}{res.stderr}")
    rootfs = os.path.join(bundle, "rootfs")
    for d in ("proc", "dev", "tmp", "etc/troupe"):
        os.makedirs(os.path.join(rootfs, d), exist_ok=True)
    open(os.path.join(rootfs, CLUSTER_IN_IMAGE.lstrip("/")), "w").close()
    IMG["fixture"] = os.path.join(IMG["tmp"], "cluster.json")
    shutil.copy(fixture_cluster(), IMG["fixture"])
    os.chmod(IMG["fixture"], 0o644)
    make_traversable(rootfs, IMG["tmp"])
    IMG["rootfs"] = rootfs
    IMG["mode"] = choose_mode()


def tearDownModule():
    if "tmp" in IMG:
        shutil.rmtree(IMG["tmp"], ignore_errors=True)


# --- running the image -------------------------------------------------------

def image_user():
    """The config's User as (uid, gid), names looked up in the image's own
    /etc/passwd and /etc/group as a runtime does."""
    user = IMG["config"]["config"].get("User", "")
    name, _, group = user.partition(":")

    def lookup(value, table):
        if value.isdigit():
            return int(value)
        with open(os.path.join(IMG["rootfs"], "etc", table)) as f:
            for line in f:
                fields = line.split(":")
                if fields[0] == value:
                    return int(fields[2])
        raise AssertionError(f"image User {user!r}: no {value!r} in /etc/{table}")
    uid = lookup(name or "0", "passwd")
    return uid, lookup(group, "group") if group else uid


def drop_to_image_uid():
    os.setgroups([])
    os.setgid(IMAGE_UID)
    os.setuid(IMAGE_UID)


def bwrap_argv(mode, argv, info_fd=None):
    cfg = IMG["config"]["config"]
    uid, gid = image_user()
    cmd = ["bwrap", "--unshare-all", "--share-net", "--unshare-user", "--die-with-parent",
           "--new-session", "--as-pid-1",
           "--ro-bind", IMG["rootfs"], "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
           "--ro-bind", IMG["fixture"], CLUSTER_IN_IMAGE,
           "--uid", str(uid), "--gid", str(gid), "--chdir", cfg.get("WorkingDir") or "/", "--clearenv"]
    for kv in cfg.get("Env") or []:
        k, _, v = kv.partition("=")
        cmd += ["--setenv", k, v]
    if info_fd is not None:
        cmd += ["--info-fd", str(info_fd)]
    return cmd + argv


def popen_kwargs(mode):
    """unprivileged: bwrap runs as uid 65532 (if the test is root) or as the
    test's own user; root: bwrap itself is root (the fallback)."""
    if mode == "unprivileged" and os.geteuid() == 0:
        return {"preexec_fn": drop_to_image_uid}
    return {}


def container_argv(args=None):
    """Entrypoint + Cmd, or Entrypoint + args when a pod gives args (they
    replace Cmd, as in Kubernetes)."""
    cfg = IMG["config"]["config"]
    return list(cfg.get("Entrypoint") or []) + list(cfg.get("Cmd") or [] if args is None else args)


def choose_mode():
    # TROUPE_IMAGE_SANDBOX=root forces the fallback, so that it can be tested
    # on a machine that does not need it.
    forced = os.environ.get("TROUPE_IMAGE_SANDBOX")
    if forced == "root":
        if os.geteuid() != 0:
            raise AssertionError("TROUPE_IMAGE_SANDBOX=root needs the test to run as root")
        return "root"
    if forced not in (None, "", "unprivileged"):
        raise AssertionError(f"TROUPE_IMAGE_SANDBOX={forced!r}: use root or unprivileged")
    res = run(bwrap_argv("unprivileged", container_argv(["--version"])), timeout=60,
              **popen_kwargs("unprivileged"))
    if res.returncode == 0:
        return "unprivileged"
    if os.geteuid() != 0:
        raise AssertionError("bwrap cannot create a user namespace as this user and the test is not "
                             f"root to fall back:\n{res.stderr}")
    print(f"image: bwrap cannot create namespaces as uid {IMAGE_UID} ({res.stderr.strip()}); "
          "falling back to bwrap as root with --unshare-user --uid", file=sys.stderr)
    return "root"


def run_container(args, timeout=60):
    return run(bwrap_argv(IMG["mode"], container_argv(args)), timeout=timeout,
               **popen_kwargs(IMG["mode"]))


class Container:
    """The image's entry point serving in its sandbox. pid is troupe's PID in
    this (the host's) namespace; inside its own it is PID 1."""

    def __init__(self, args):
        self.args = args

    def __enter__(self):
        self.log_file = tempfile.TemporaryFile(mode="w+")
        rfd, wfd = os.pipe()
        self.proc = subprocess.Popen(bwrap_argv(IMG["mode"], container_argv(self.args), info_fd=wfd),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.log_file, pass_fds=[wfd], **popen_kwargs(IMG["mode"]))
        os.close(wfd)
        with os.fdopen(rfd, "rb") as r:
            info = r.read()             # bwrap closes it once the child is set up
        if not info:
            self.proc.wait(timeout=30)
            raise AssertionError(f"bwrap did not start the container ({self.proc.returncode}):\n{self.log()}")
        self.pid = json.loads(info)["child-pid"]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = LISTEN_RE.search(self.log())
            if m:
                self.host, self.port = m.group(1) or m.group(2), int(m.group(3))
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"the container exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.05)
        self.proc.kill()
        raise AssertionError(f"troupe did not listen within 20 s:\n{self.log()}")

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()

    def log(self):
        self.log_file.seek(0)
        return self.log_file.read()

    def stop(self):
        """SIGTERM to the container's PID 1, as a runtime stops it: the exit code."""
        os.kill(self.pid, signal.SIGTERM)
        return self.proc.wait(timeout=30)

    def request(self, method, path, body=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None,
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())
        finally:
            conn.close()


def ids_inside(pid, field):
    """The Uid: or Gid: line of /proc/PID/status, mapped back through the
    process's uid_map or gid_map into its own user namespace."""
    with open(f"/proc/{pid}/status") as f:
        outer = next(line.split()[1:] for line in f if line.startswith(field + ":"))
    with open(f"/proc/{pid}/{'uid' if field == 'Uid' else 'gid'}_map") as f:
        maps = [tuple(map(int, line.split())) for line in f if line.strip()]
    inner = []
    for value in map(int, outer):
        hits = [inside + value - outside for inside, outside, n in maps if outside <= value < outside + n]
        assert hits, f"{field} {value} is not mapped in {maps}"
        inner.append(hits[0])
    return inner, [int(v) for v in outer]


# --- the tests -----------------------------------------------------------------

class ImageContentTest(unittest.TestCase):
    def test_packed_binary_is_the_one_under_test(self):
        m = SHA_RE.search(IMG["script_output"])
        self.assertIsNotNone(m, IMG["script_output"])
        want = sha256_file(binary())
        self.assertEqual(m.group(1), want, "scripts/image packed another binary")
        self.assertEqual(sha256_file(os.path.join(IMG["rootfs"], "troupe")), want)
        self.assertEqual(IMG["config"]["config"]["Labels"]["io.troupe.binary.sha256"], want)

    def test_every_blob_matches_its_digest_and_every_layer_is_a_complete_tar(self):
        blobs = os.listdir(os.path.join(IMG["layout"], "blobs", "sha256"))
        for name in blobs:
            self.assertEqual(sha256_file(os.path.join(IMG["layout"], "blobs", "sha256", name)), name)
        layers = IMG["manifest"]["layers"]
        self.assertEqual(len(layers), len(IMG["config"]["rootfs"]["diff_ids"]))
        for layer, diff_id in zip(layers, IMG["config"]["rootfs"]["diff_ids"]):
            self.assertEqual(os.path.getsize(blob(layer["digest"])), layer["size"])
            with gzip.open(blob(layer["digest"])) as f:
                raw = f.read()
            self.assertEqual("sha256:" + hashlib.sha256(raw).hexdigest(), diff_id)
            # GNU tar and scanners reject a layer without the end-of-archive
            # blocks (umoci 0.4.7's insert writes one); Python's tarfile too.
            with tarfile.open(blob(layer["digest"])) as t:
                t.getmembers()
            self.assertEqual(raw[-1024:], bytes(1024), "layer lacks the tar end-of-archive blocks")

    def test_contents_are_the_daemon_its_libraries_and_etc_only(self):
        members = []
        for layer in IMG["manifest"]["layers"]:
            with tarfile.open(blob(layer["digest"])) as t:
                members += t.getmembers()
        files = {"/" + m.name for m in members if m.isfile()}
        libs = files - ETC_FILES - {"/troupe"}
        self.assertEqual(libs, ldd_paths(binary()), "libraries other than those ldd lists")
        self.assertTrue(ETC_FILES <= files, ETC_FILES - files)
        for m in members:
            self.assertTrue(m.isfile() or m.isdir() or m.issym(), f"{m.name}: type {m.type!r}")
            self.assertEqual((m.uid, m.gid), (0, 0), f"{m.name} is not owned by root")
            self.assertFalse(m.mode & 0o6000, f"{m.name} is setuid or setgid")
            if m.isfile() or m.isdir():
                self.assertFalse(m.mode & 0o002 and m.name != "tmp", f"{m.name} is world-writable")
        names = {"/" + m.name for m in members}
        for shell in ("/bin/sh", "/bin/bash", "/usr/bin/sh", "/bin/busybox"):
            self.assertNotIn(shell, names)
        print(f"image: {len([m for m in members if not m.isdir()])} files, "
              f"{sum(m.size for m in members)} bytes unpacked, "
              f"{sum(layer['size'] for layer in IMG['manifest']['layers'])} bytes compressed",
              file=sys.stderr)

    def test_config_runs_troupe_as_uid_65532_with_oci_labels(self):
        cfg = IMG["config"]
        self.assertEqual((cfg["os"], cfg["architecture"]), ("linux", "amd64"))
        self.assertEqual(cfg["config"]["Entrypoint"], ["/troupe"])
        self.assertEqual(image_user(), (IMAGE_UID, IMAGE_UID))
        labels = cfg["config"]["Labels"]
        self.assertEqual(labels["org.opencontainers.image.licenses"], "Apache-2.0")
        version = run([binary(), "--version"]).stdout.split()[-1]
        self.assertEqual((labels["org.opencontainers.image.version"], IMG["tag"]), (version, version))
        with open(os.path.join(IMG["rootfs"], "etc", "passwd")) as f:
            self.assertIn(f"troupe:x:{IMAGE_UID}:{IMAGE_UID}:", f.read())

    def test_same_binary_and_commit_give_the_same_image_digest(self):
        # Timestamps are the commit's, so a rebuild is byte for byte the same
        # image: a registry sees one digest, and a changed digest means a
        # changed image.
        out = os.path.join(IMG["tmp"], "again")
        res = run([os.path.join(source_root(), "scripts", "image"), "--binary", binary(), "--out", out],
                  timeout=600)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        with open(os.path.join(out, "troupe-oci", "index.json")) as f:
            again = json.load(f)
        self.assertEqual(again["manifests"][0]["digest"], IMG["index"]["manifests"][0]["digest"])

    def test_oci_archive_holds_the_same_image(self):
        res = run(["skopeo", "--insecure-policy", "inspect", "--raw", f"oci-archive:{IMG['archive']}"])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(json.loads(res.stdout), IMG["manifest"])


class ImageRunTest(unittest.TestCase):
    def test_version_and_help_through_the_entrypoint(self):
        res = run_container(["--version"])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(res.stdout.strip(), run([binary(), "--version"]).stdout.strip())
        res = run_container(["--help"])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("--cluster FILE", res.stdout)

    def test_default_cmd_outside_a_pod_fails_clearly(self):
        # Cmd alone (no source flag, no KUBERNETES_SERVICE_HOST) is in-cluster
        # mode; outside a pod troupe must say so and exit 2, not hang.
        self.assertIn("--listen", IMG["config"]["config"].get("Cmd") or [])
        res = run_container(None)
        self.assertEqual(res.returncode, 2, res.stderr)
        self.assertIn("no cluster state", res.stderr)

    def test_serves_filter_as_uid_65532_on_a_read_only_root(self):
        args = ["--cluster", CLUSTER_IN_IMAGE, "--listen", "127.0.0.1:0",
                "--ops-address", "127.0.0.1:0"]     # the network is the host's
        with Container(args) as c:
            self.assertEqual(c.request("GET", "/healthz"), (200, {"status": "ok"}))
            status, body = c.request("POST", "/filter", FILTER)
            self.assertEqual(status, 200, body)
            self.assertEqual(body["NodeNames"], ["gpu-a100-1"])
            self.assertEqual(body["FailedAndUnresolvableNodes"],
                             {"cpu-0": "troupe: node has no nvidia.com/gpu"})

            with open(f"/proc/{c.pid}/status") as f:
                nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
            self.assertEqual(nspid[-1], "1", "troupe is not PID 1 of its namespace")
            for field in ("Uid", "Gid"):
                inner, outer = ids_inside(c.pid, field)
                self.assertEqual(inner, [IMAGE_UID] * 4, f"{field} inside the container")
                if IMG["mode"] == "unprivileged":
                    self.assertNotIn(0, outer, f"{field} outside: bwrap ran as root")

            # The root as troupe sees it refuses a write (EROFS, not EACCES:
            # the mount, not a permission, stops it), and the only writable
            # mounts are the runtime's /tmp, /dev and /proc.
            with self.assertRaises(OSError) as err:
                os.close(os.open(f"/proc/{c.pid}/root/probe", os.O_CREAT | os.O_WRONLY, 0o644))
            self.assertEqual(err.exception.errno, errno.EROFS, err.exception)
            with open(f"/proc/{c.pid}/mountinfo") as f:
                mounts = [line.split() for line in f]
            root = [m for m in mounts if m[4] == "/"]
            self.assertEqual(len(root), 1, mounts)
            self.assertIn("ro", root[0][5].split(","))
            for m in mounts:
                if "rw" in m[5].split(","):
                    self.assertTrue(m[4] in ("/tmp", "/proc", "/dev") or m[4].startswith("/dev/"),
                                    f"writable mount {m[4]}")

            self.assertEqual(c.stop(), 0, f"troupe as PID 1 did not exit 0 on SIGTERM:\n{c.log()}")
            self.assertIn("received SIGTERM", c.log())


if __name__ == "__main__":
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        print(f"SKIP: {', '.join(missing)} not installed; scripts/lib/image.sh's ensure_image_tools "
              "(./scripts/test's install step) installs them", file=sys.stderr)
        sys.exit(77)
    unittest.main()
