"""troupe's container image, built by scripts/image from the binaries under test
(TROUPE_BIN, the daemon, and TROUPE_NODE_BIN, the node agent) and run the way a
container runtime runs it, with no Docker engine.

The image is checked as a registry and a scanner would see it (every blob
matches its digest, every layer is a complete tar, its files are exactly the
daemon, the node agent, the libraries ldd names for either, no NVIDIA library,
and four files in /etc, all owned by root) and then run as runc runs a pod with
readOnlyRootFilesystem: unpacked by umoci, started by bubblewrap with the image
config's Entrypoint, Cmd, User, Env and WorkingDir, the root filesystem bound
read-only, a tmpfs /tmp, fresh /proc and /dev, every namespace new except the
network (the test talks to it on 127.0.0.1), and troupe as PID 1 of its
namespace, stopped by SIGTERM.

The node agent runs from the same image as the DaemonSet runs it, with
/troupe-node as the command: with no driver in the sandbox it must fail
clearly, and with the fake NVML (tests/node/fake_nvml.c, FAKE_NVML_LIB) and a
topology capture bound in where the host's driver would be, it must read the
GPUs and publish them to the fake API server: the packed libraries suffice for
the whole NVML path, which dlopen() takes at run time, out of ldd's sight.

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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "apiserver"))
from fake_apiserver import FakeAPIServer  # noqa: E402
from troupe_proc import LISTEN_RE, binary, fixture_cluster, source_root  # noqa: E402

TOOLS = ("umoci", "skopeo", "bwrap")
IMAGE_UID = 65532
SHA_RE = re.compile(r"packed /troupe: sha256 ([0-9a-f]{64})")
NODE_SHA_RE = re.compile(r"packed /troupe-node: sha256 ([0-9a-f]{64})")
PROGRAMS = {"/troupe", "/troupe-node"}
# The files outside the libraries; everything else must be one ldd names.
ETC_FILES = {"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/ssl/certs/ca-certificates.crt"}
CLUSTER_IN_IMAGE = "/etc/troupe/cluster.json"   # where a chart's ConfigMap would be
POD4 = {"metadata": {"name": "p", "namespace": "ml", "uid": "uid-p"},
        "spec": {"containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}
FILTER = {"Pod": POD4, "Nodes": None, "NodeNames": ["gpu-a100-1", "cpu-0"]}
# Where the node tests bind the fake NVML and its capture: the place of the
# host driver's files the DaemonSet mounts. The image itself has no /driver.
DRIVER_DIR = "/driver"
FAKE_NVML_IN_IMAGE = DRIVER_DIR + "/libfake_nvml.so"
TOPO_IN_IMAGE = DRIVER_DIR + "/topo.txt"
TOKEN_IN_IMAGE = "/etc/troupe/token"
TOKEN = "node-agent-token"
NO_DRIVER = "cannot load the NVML library libnvidia-ml.so.1"

IMG = {}    # what setUpModule built: paths, config, the sandbox's mode


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def node_binary():
    path = os.environ.get("TROUPE_NODE_BIN")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError("set TROUPE_NODE_BIN to the troupe-node binary (meson test does)")
    return path


def fake_nvml():
    return os.environ.get("FAKE_NVML_LIB",
                          os.path.join(source_root(), "build", "tests", "node", "libfake_nvml.so"))


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


def image_script(out):
    return [os.path.join(source_root(), "scripts", "image"), "--binary", binary(),
            "--node-binary", node_binary(), "--out", out]


def setUpModule():
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        raise unittest.SkipTest(f"{', '.join(missing)} not installed")
    IMG["tmp"] = tempfile.mkdtemp(prefix="troupe-image-")
    out = os.path.join(IMG["tmp"], "out")
    res = run(image_script(out), timeout=600)
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
    for d in ("proc", "dev", "tmp", "etc/troupe", DRIVER_DIR.lstrip("/")):
        os.makedirs(os.path.join(rootfs, d), exist_ok=True)
    for f in (CLUSTER_IN_IMAGE, FAKE_NVML_IN_IMAGE, TOPO_IN_IMAGE, TOKEN_IN_IMAGE):
        open(os.path.join(rootfs, f.lstrip("/")), "w").close()
    # Copies the sandbox's uid can read (the build tree may be 0700).
    IMG["fixture"] = os.path.join(IMG["tmp"], "cluster.json")
    IMG["fake_nvml"] = os.path.join(IMG["tmp"], "libfake_nvml.so")
    IMG["topo"] = os.path.join(IMG["tmp"], "dgx-a100.txt")
    IMG["token"] = os.path.join(IMG["tmp"], "token")
    shutil.copy(fixture_cluster(), IMG["fixture"])
    shutil.copy(fake_nvml(), IMG["fake_nvml"])
    shutil.copy(os.path.join(source_root(), "tests", "data", "topo", "dgx-a100.txt"), IMG["topo"])
    with open(IMG["token"], "w") as f:
        f.write(TOKEN)
    for f in (IMG["fixture"], IMG["topo"], IMG["token"]):
        os.chmod(f, 0o644)
    os.chmod(IMG["fake_nvml"], 0o755)
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


def bwrap_argv(mode, argv, info_fd=None, binds=(), env=None):
    """binds: (host path, path in the image) pairs bound read-only, as a pod's
    volumes; env: variables set beside the config's, as a pod's env."""
    cfg = IMG["config"]["config"]
    uid, gid = image_user()
    cmd = ["bwrap", "--unshare-all", "--share-net", "--unshare-user", "--die-with-parent",
           "--new-session", "--as-pid-1",
           "--ro-bind", IMG["rootfs"], "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
           "--ro-bind", IMG["fixture"], CLUSTER_IN_IMAGE,
           "--uid", str(uid), "--gid", str(gid), "--chdir", cfg.get("WorkingDir") or "/", "--clearenv"]
    for src, dest in binds:
        cmd += ["--ro-bind", src, dest]
    for kv in cfg.get("Env") or []:
        k, _, v = kv.partition("=")
        cmd += ["--setenv", k, v]
    for k, v in (env or {}).items():
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


def container_argv(args=None, command=None):
    """Entrypoint + Cmd, or Entrypoint + args when a pod gives args (they
    replace Cmd, as in Kubernetes); a pod's command replaces Entrypoint and,
    as there, Cmd with it."""
    cfg = IMG["config"]["config"]
    if command is not None:
        return list(command) + list(args or [])
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


def run_container(args, timeout=60, command=None, binds=(), env=None):
    return run(bwrap_argv(IMG["mode"], container_argv(args, command), binds=binds, env=env),
               timeout=timeout, **popen_kwargs(IMG["mode"]))


def driver_binds():
    """The fake NVML and its capture where the host's driver would be mounted,
    and the token the node agent sends to the fake API server."""
    return [(IMG["fake_nvml"], FAKE_NVML_IN_IMAGE), (IMG["topo"], TOPO_IN_IMAGE),
            (IMG["token"], TOKEN_IN_IMAGE)]


class Container:
    """The image's entry point (or a pod's command) running in its sandbox,
    entered once its log matches <ready> (the daemon's listening line by
    default). pid is the program's PID in this (the host's) namespace; inside
    its own it is PID 1."""

    def __init__(self, args, command=None, binds=(), env=None, ready=LISTEN_RE):
        self.args, self.command, self.binds, self.env, self.ready = args, command, binds, env, ready

    def __enter__(self):
        self.log_file = tempfile.TemporaryFile(mode="w+")
        rfd, wfd = os.pipe()
        argv = bwrap_argv(IMG["mode"], container_argv(self.args, self.command), info_fd=wfd,
                          binds=self.binds, env=self.env)
        self.proc = subprocess.Popen(argv,
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
            m = self.ready.search(self.log())
            if m:
                if self.ready is LISTEN_RE:
                    self.host, self.port = m.group(1) or m.group(2), int(m.group(3))
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"the container exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.05)
        self.proc.kill()
        raise AssertionError(f"no {self.ready.pattern!r} in its log within 20 s:\n{self.log()}")

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


def assert_confined(tc, pid):
    """The container's PID 1 <pid> runs as uid and gid 65532 inside (and, when
    bwrap is unprivileged, not as root outside) on a read-only root."""
    with open(f"/proc/{pid}/status") as f:
        nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
    tc.assertEqual(nspid[-1], "1", "the program is not PID 1 of its namespace")
    for field in ("Uid", "Gid"):
        inner, outer = ids_inside(pid, field)
        tc.assertEqual(inner, [IMAGE_UID] * 4, f"{field} inside the container")
        if IMG["mode"] == "unprivileged":
            tc.assertNotIn(0, outer, f"{field} outside: bwrap ran as root")

    # The root as the program sees it refuses a write (EROFS, not EACCES: the
    # mount, not a permission, stops it), and the only writable mounts are the
    # runtime's /tmp, /dev and /proc.
    with tc.assertRaises(OSError) as err:
        os.close(os.open(f"/proc/{pid}/root/probe", os.O_CREAT | os.O_WRONLY, 0o644))
    tc.assertEqual(err.exception.errno, errno.EROFS, err.exception)
    with open(f"/proc/{pid}/mountinfo") as f:
        mounts = [line.split() for line in f]
    root = [m for m in mounts if m[4] == "/"]
    tc.assertEqual(len(root), 1, mounts)
    tc.assertIn("ro", root[0][5].split(","))
    for m in mounts:
        if "rw" in m[5].split(","):
            tc.assertTrue(m[4] in ("/tmp", "/proc", "/dev") or m[4].startswith("/dev/"),
                          f"writable mount {m[4]}")


# --- the tests -----------------------------------------------------------------

class ImageContentTest(unittest.TestCase):
    def test_packed_binary_is_the_one_under_test(self):
        m = SHA_RE.search(IMG["script_output"])
        self.assertIsNotNone(m, IMG["script_output"])
        want = sha256_file(binary())
        self.assertEqual(m.group(1), want, "scripts/image packed another binary")
        self.assertEqual(sha256_file(os.path.join(IMG["rootfs"], "troupe")), want)
        self.assertEqual(IMG["config"]["config"]["Labels"]["io.troupe.binary.sha256"], want)

    def test_packed_node_agent_is_the_one_under_test(self):
        m = NODE_SHA_RE.search(IMG["script_output"])
        self.assertIsNotNone(m, IMG["script_output"])
        want = sha256_file(node_binary())
        self.assertNotEqual(want, sha256_file(binary()))
        self.assertEqual(m.group(1), want, "scripts/image packed another troupe-node")
        self.assertEqual(sha256_file(os.path.join(IMG["rootfs"], "troupe-node")), want)
        self.assertEqual(IMG["config"]["config"]["Labels"]["io.troupe.node-binary.sha256"], want)

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

    def test_contents_are_the_two_programs_their_libraries_and_etc_only(self):
        members = []
        for layer in IMG["manifest"]["layers"]:
            with tarfile.open(blob(layer["digest"])) as t:
                members += t.getmembers()
        files = {"/" + m.name for m in members if m.isfile()}
        self.assertTrue(PROGRAMS <= files, PROGRAMS - files)
        libs = files - ETC_FILES - PROGRAMS
        # The node agent's own (gRPC core, gpr, Abseil, protobuf-c) among them.
        self.assertTrue(ldd_paths(node_binary()) - ldd_paths(binary()), "no library of troupe-node's own")
        self.assertEqual(libs, ldd_paths(binary()) | ldd_paths(node_binary()),
                         "libraries other than those ldd lists")
        self.assertTrue(ETC_FILES <= files, ETC_FILES - files)
        # NVML comes from the host's driver at run time, never from the image.
        nvidia = [m.name for m in members if re.search(r"nvidia|libcuda", m.name, re.I)]
        self.assertEqual(nvidia, [], "an NVIDIA file is in the image")
        for prog in PROGRAMS:
            mode = next(m.mode for m in members if "/" + m.name == prog)
            self.assertEqual(mode & 0o7777, 0o755, f"{prog}: mode {mode:o}")
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
        res = run(image_script(out), timeout=600)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        with open(os.path.join(out, "troupe-oci", "index.json")) as f:
            again = json.load(f)
        self.assertEqual(again["manifests"][0]["digest"], IMG["index"]["manifests"][0]["digest"])

    def test_refuses_a_node_agent_of_another_version(self):
        # One tag names both programs: a troupe-node of another build is
        # refused before anything is written.
        other = os.path.join(IMG["tmp"], "troupe-node-other")
        with open(other, "w") as f:
            f.write("#!/bin/sh\necho troupe-node 0.0.0-other\n")
        os.chmod(other, 0o755)
        out = os.path.join(IMG["tmp"], "refused")
        res = run([os.path.join(source_root(), "scripts", "image"), "--binary", binary(),
                   "--node-binary", other, "--out", out], timeout=600)
        self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
        self.assertIn(f"not 'troupe-node {IMG['tag']}' (the daemon's version)", res.stderr)
        self.assertFalse(os.path.exists(out))

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

            assert_confined(self, c.pid)
            self.assertEqual(c.stop(), 0, f"troupe as PID 1 did not exit 0 on SIGTERM:\n{c.log()}")
            self.assertIn("received SIGTERM", c.log())


class NodeAgentImageTest(unittest.TestCase):
    """/troupe-node from the same image, as the DaemonSet's command."""

    NODE = ["/troupe-node"]

    def test_version_and_help_as_the_daemonsets_command(self):
        res = run_container(["--version"], command=self.NODE)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(res.stdout.strip(), run([node_binary(), "--version"]).stdout.strip())
        self.assertEqual(res.stdout.split()[-1], IMG["tag"], "troupe-node is not the image's version")
        res = run_container(["--help"], command=self.NODE)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("--nvml LIB", res.stdout)

    def test_print_without_a_driver_fails_clearly(self):
        # No driver is mounted and the image packs no NVML: it must say which
        # library it could not load, and print no annotation.
        res = run_container(["--print", "--nvidia-smi", ""], command=self.NODE)
        self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
        self.assertIn(NO_DRIVER, res.stderr)
        self.assertNotIn("troupe.io/gpu-topology", res.stdout)

    def test_print_through_the_fake_nvml_prints_the_topology(self):
        # dlopen() of the fake and every NVML call it answers run on the
        # image's libraries alone; the output is the host build's, byte for byte.
        args = ["--print", "--nvml", FAKE_NVML_IN_IMAGE, "--nvidia-smi", ""]
        res = run_container(args, command=self.NODE, binds=driver_binds(),
                            env={"FAKE_NVML_TOPO": TOPO_IN_IMAGE})
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("troupe.io/gpu-topology:\n", res.stdout)
        topo = res.stdout.split("troupe.io/gpu-topology:\n", 1)[1]
        self.assertIn("NV12", topo)
        self.assertIn("troupe.io/gpu-topology-source: nvml", res.stdout)
        host = run([node_binary(), "--print", "--nvml", IMG["fake_nvml"], "--nvidia-smi", ""],
                   env=dict(os.environ, FAKE_NVML_TOPO=IMG["topo"]))
        self.assertEqual(host.returncode, 0, host.stderr)
        self.assertEqual(res.stdout, host.stdout)

    def run_agent(self, nvml, ready):
        """The agent serving node gpu-0 of a fake API server until SIGTERM, as
        uid 65532 on a read-only root: what it published, and its log."""
        api = FakeAPIServer(token=TOKEN).start()
        self.addCleanup(api.stop)
        api.create("nodes", {"apiVersion": "v1", "kind": "Node",
                             "metadata": {"name": "gpu-0", "annotations": {}},
                             "status": {"capacity": {"nvidia.com/gpu": "8"}}})
        args = ["--node", "gpu-0", "--api-server", api.url, "--token-file", TOKEN_IN_IMAGE,
                "--nvml", nvml, "--nvidia-smi", "", "--no-read-back", "--interval", "5"]
        with Container(args, command=self.NODE, binds=driver_binds(),
                       env={"FAKE_NVML_TOPO": TOPO_IN_IMAGE}, ready=re.compile(ready)) as c:
            assert_confined(self, c.pid)
            self.assertEqual(c.stop(), 0, f"troupe-node as PID 1 did not exit 0 on SIGTERM:\n{c.log()}")
            log = c.log()
        self.assertIn("troupe-node stopping", log)
        return api.get("nodes", "", "gpu-0")["metadata"].get("annotations", {}), log

    def test_agent_without_a_driver_publishes_nothing_and_says_why(self):
        annotations, log = self.run_agent("libnvidia-ml.so.1", "publishing no GPU topology")
        self.assertIn(NO_DRIVER, log)
        self.assertNotIn("troupe.io/gpu-topology", annotations)

    def test_agent_publishes_through_the_fake_nvml(self):
        annotations, log = self.run_agent(FAKE_NVML_IN_IMAGE, "published the topology of 8 GPUs")
        self.assertEqual(annotations.get("troupe.io/gpu-topology-source"), "nvml", log)
        self.assertIn("NV12", annotations["troupe.io/gpu-topology"])
        self.assertEqual(annotations["troupe.io/gpu-uuids"].split(","),
                         [f"GPU-fake-0000-{i:04d}" for i in range(8)])


if __name__ == "__main__":
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        print(f"SKIP: {', '.join(missing)} not installed; scripts/lib/image.sh's ensure_image_tools "
              "(./scripts/test's install step) installs them", file=sys.stderr)
        sys.exit(77)
    unittest.main()
