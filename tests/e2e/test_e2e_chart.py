#!/usr/bin/env python3
"""The Helm chart in config/helm/troupe: linted, rendered for both deployment
models (and with TLS from a Secret or from cert-manager), and every rendered
object applied to the real kube-apiserver with server-side dry-run, which
parses, defaults and validates it as an install would, and answers with JSON
(so this test needs no YAML parser).

helm is the one scripts/lib/k8s.sh (ensure_helm) builds from tests/tools/helm.

  test_lint              helm lint in each mode; bad or misspelt values fail
                         with a message (values.schema.json)
  test_sidecar           troupe beside a second kube-scheduler: the verbs only on
                         127.0.0.1 (no containerPort, no Service, not in the
                         NetworkPolicy), the scheduler's name, Lease and
                         extender entry, probes on the ops port, securityContext
  test_service           troupe behind a Service for the default scheduler:
                         2 replicas, the NetworkPolicy (scheduler to verbs,
                         Prometheus to ops), the scheduler configuration
  test_rbac              the ClusterRole is exactly what troupe does, the same
                         rules as config/deploy/rbac.yaml; the identity follows
                         the release's namespace and service account
  test_admission_policy  the chart's policy is config/deploy/admission-policy.yaml
                         for the release's identity
  test_tls               TLS from a Secret and from cert-manager
  test_node              node.enabled: troupe-node's DaemonSet renders the pod
                         config/deploy/troupe-node.yaml does, its ClusterRole
                         is exactly get and patch on nodes, its policy is
                         config/deploy/node-admission-policy.yaml for the
                         release's identity; values reach the pod; off by
                         default, and bad node.* values fail the schema
  test_sidecar_schedules the sidecar model for real, but for the pod: the
                         chart's service account, RBAC and scheduler
                         configuration applied, the real kube-scheduler run
                         with them as that account, next to the rig's troupe;
                         it takes the Lease the chart names and places a
                         schedulerName: troupe GPU pod through troupe
"""
import json
import os
import re
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster as rig  # noqa: E402
from e2e_common import E2E, gpu_ids, gpu_pod, module_cluster, wait_until  # noqa: E402

CHART = os.path.join(rig.ROOT, "config", "helm", "troupe")
DEPLOY = os.path.join(rig.ROOT, "config", "deploy")
CERT_MANAGER_KINDS = ("Certificate", "Issuer", "ClusterIssuer")

# What troupe does to the cluster (src/cache/access.c's table): the whole of the
# chart's ClusterRole, verb by verb.
TROUPE_RULES = {("", "nodes"): {"list", "watch"},
                ("", "pods"): {"list", "watch", "delete"},   # delete: a gang rolled back
                ("", "pods/binding"): {"create"},
                ("scheduling.x-k8s.io", "podgroups"): {"list", "watch"}}

# What troupe-node does (src/node/publish.c): read its Node, patch its annotations.
NODE_RULES = {("", "nodes"): {"get", "patch"}, ("", "pods"): {"get", "patch"}}
NODE_IDENTITY = "system:serviceaccount:kube-system:troupe-node"

# Nodes and troupe for test_sidecar_schedules; the rest needs only the API server.
setUpModule, tearDownModule = module_cluster("chart", nodes=2)


def helm_bin():
    with open(os.path.join(rig.ROOT, "tests", "tools", "helm", "go.mod")) as f:
        version = re.search(r"^\s*helm\.sh/helm/v3 (\S+)", f.read(), re.M).group(1)
    path = os.path.join(rig.ROOT, "build", "helm", version, "helm")
    if not os.access(path, os.X_OK):
        raise AssertionError("%s is missing: build it with ./scripts/test or "
                             "'source scripts/lib/common.sh; source scripts/lib/k8s.sh; "
                             "ensure_helm'" % path)
    return path


def helm(*args, check=True):
    r = subprocess.run([helm_bin()] + list(args), capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError("helm %s: %s" % (" ".join(args), r.stderr))
    return r


def read(path):
    with open(path) as f:
        return f.read()


def documents(text):
    """The rendered manifest's documents, as text, without the empty ones."""
    docs = re.split(r"^---\s*$", text, flags=re.M)
    return [d for d in docs if re.search(r"^kind:", d, re.M)]


def kind_of(doc):
    return re.search(r"^kind:\s*(\S+)", doc, re.M).group(1)


def rules(role):
    out = {}
    for r in role["rules"]:
        for g in r.get("apiGroups", []):
            for res in r["resources"]:
                out.setdefault((g, res), set()).update(r["verbs"])
    return out


class Chart(E2E):

    def render(self, *sets, ns=None):
        args = ["template", "troupe", CHART, "--namespace", ns or self.ns]
        for s in sets:
            args += ["--set", s]
        return helm(*args).stdout

    def dry_run(self, text):
        """Every object of <text> as the API server would store it (nothing is
        stored): kubectl apply --dry-run=server, answering JSON."""
        r = self.c.kubectl("apply", "--dry-run=server", "-o", "json", "-f", "-", input=text,
                           check=False)
        self.assertEqual(r.returncode, 0, "server-side dry-run refused the chart: " + r.stderr)
        out = json.loads(r.stdout)
        return out["items"] if out.get("kind") == "List" else [out]

    def install(self, *sets):
        """The rendered chart, dry-run applied: {(kind, name): object}. Objects
        of cert-manager's kinds are applied only where its CRDs are installed,
        and otherwise returned as text under ("text", kind, name)."""
        text = self.render(*sets)
        plain, crs = [], {}
        have_cm = self.c.kubectl("get", "crd", "certificates.cert-manager.io",
                                 check=False).returncode == 0
        for d in documents(text):
            if kind_of(d) in CERT_MANAGER_KINDS and not have_cm:
                # No cert-manager in the rig: the API server cannot check these.
                name = re.search(r"^  name:\s*(\S+)", d, re.M).group(1)
                crs[("text", kind_of(d), name)] = d
            else:
                plain.append(d)
        objs = {(o["kind"], o["metadata"]["name"]): o for o in self.dry_run("---\n".join(plain))}
        objs.update(crs)
        return objs

    # ---- pieces ---------------------------------------------------------------

    def config(self, objs, which):
        cm = objs[("ConfigMap", {"troupe": "troupe-config",
                                 "scheduler": "troupe-scheduler-config"}[which])]
        key = {"troupe": "troupe.yaml", "scheduler": "scheduler-config.yaml"}[which]
        return json.loads(cm["data"][key])     # the chart renders JSON, which is YAML

    def assert_hardened(self, dep, root=False):
        """No privilege, no capability, a read-only root; and not root, but
        where <root> (troupe-node: the kubelet's pod-resources directory is
        root's alone), which then must hold no capability at all."""
        spec = dep["spec"]["template"]["spec"]
        if root:
            self.assertEqual(spec["securityContext"].get("runAsUser"), 0)
        else:
            self.assertTrue(spec["securityContext"]["runAsNonRoot"])
            self.assertNotEqual(spec["securityContext"].get("runAsUser"), 0)
        self.assertEqual(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault")
        for c in spec["containers"]:
            sc = c["securityContext"]
            self.assertTrue(sc["readOnlyRootFilesystem"], c["name"])
            if not root:
                self.assertTrue(sc["runAsNonRoot"], c["name"])
            self.assertFalse(sc.get("privileged", False), c["name"])
            self.assertFalse(sc["allowPrivilegeEscalation"], c["name"])
            self.assertEqual(sc["capabilities"]["drop"], ["ALL"], c["name"])
            self.assertNotIn("add", sc["capabilities"], c["name"])
            self.assertEqual(sc["seccompProfile"]["type"], "RuntimeDefault", c["name"])
            self.assertIn("memory", c["resources"]["limits"], c["name"])
            self.assertIn("cpu", c["resources"]["requests"], c["name"])
        self.assertFalse(spec.get("hostNetwork"))

    def troupe_container(self, dep):
        c = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "troupe"]
        self.assertEqual(len(c), 1)
        c = c[0]
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        # Probes on the ops listener, which the chart opens to the kubelet.
        self.assertEqual(ports["ops"], 8889)
        self.assertIn("--ops-address=0.0.0.0:8889", c["args"])
        self.assertEqual(c["readinessProbe"]["httpGet"]["path"], "/readyz")
        self.assertEqual(c["livenessProbe"]["httpGet"]["path"], "/healthz")
        for probe in ("readinessProbe", "livenessProbe"):
            self.assertIn(c[probe]["httpGet"]["port"], ("ops", 8889))
        self.assertEqual(c["resources"]["limits"]["memory"], "1Gi")
        return c, ports

    def extender_matches_shipped(self, ext):
        """Each setting of the rendered extender entry is the one in
        config/scheduler-config.yaml (all but the address and TLS, which the
        mode decides)."""
        shipped = read(os.path.join(rig.ROOT, "config", "scheduler-config.yaml"))
        for k, v in ext.items():
            if k in ("urlPrefix", "enableHTTPS", "tlsConfig", "managedResources"):
                continue
            v = json.dumps(v) if isinstance(v, bool) else str(v)
            self.assertRegex(shipped, r"(?m)^\s*%s: \"?%s\"?\s*(#.*)?$" % (k, re.escape(v)),
                             "extender %s: %s is not what config/scheduler-config.yaml says"
                             % (k, v))
        names = re.findall(r"(?m)^\s*- name: (\S+)\s*$", shipped.split("managedResources:")[1])
        self.assertEqual(names, ["nvidia.com/gpu", "nvidia.com/gpu.shared"])
        self.assertEqual(ext["managedResources"],
                         [{"name": n, "ignoredByScheduler": False} for n in names])
        self.assertIn("ignoredByScheduler: false", shipped)
        self.assertRegex(shipped, r"(?m)^percentageOfNodesToScore: 100$")

    # ---- tests ----------------------------------------------------------------

    def test_lint(self):
        for sets in ([], ["--set", "mode=service"],
                     ["--set", "mode=service,tls.enabled=true,tls.certManager.enabled=true,"
                               "tls.certManager.issuerRef.name=ca"]):
            r = helm("lint", "--strict", CHART, *sets)
            self.assertIn("0 chart(s) failed", r.stdout)
        # values.schema.json refuses what the templates cannot use, naming it.
        for bad, says in (("mode=both", "at '/mode': value must be one of 'sidecar', 'service'"),
                          ("tls.enable=true", "at '/tls': additional properties 'enable'"),
                          ("runAsUser=0", "at '/runAsUser': minimum")):
            r = helm("template", "t", CHART, "--set", bad, check=False)
            self.assertNotEqual(r.returncode, 0, bad)
            self.assertIn(says, r.stderr)
        # And without the schema, the templates still refuse an unknown mode.
        r = helm("template", "t", CHART, "--set", "mode=both", "--skip-schema-validation",
                 check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('mode must be sidecar or service, not "both"', r.stderr)
        r = helm("template", "t", CHART, "--set", "mode=service,tls.enabled=true,"
                 "tls.certManager.enabled=true", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("needs tls.certManager.issuerRef.name", r.stderr)

    def test_sidecar(self):
        objs = self.install()
        self.assertNotIn("Service", {k[0] for k in objs}, "sidecar mode exposes a Service")
        dep = objs[("Deployment", "troupe-scheduler")]
        self.assertEqual(dep["spec"]["replicas"], 2)
        self.assert_hardened(dep)
        names = [c["name"] for c in dep["spec"]["template"]["spec"]["containers"]]
        self.assertEqual(sorted(names), ["kube-scheduler", "troupe"])
        _, ports = self.troupe_container(dep)
        self.assertNotIn(8888, ports.values(), "the verbs port is exposed in sidecar mode")
        self.assertEqual(self.config(objs, "troupe")["listen"], "127.0.0.1:8888")
        sched = self.config(objs, "scheduler")
        self.assertEqual([p["schedulerName"] for p in sched["profiles"]], ["troupe"])
        self.assertEqual(sched["leaderElection"], {
            "leaderElect": True, "resourceLock": "leases", "resourceName": "troupe-scheduler",
            "resourceNamespace": self.ns})
        self.assertEqual(sched["clientConnection"]["kubeconfig"], "")
        (ext,) = sched["extenders"]
        self.assertEqual(ext["urlPrefix"], "http://127.0.0.1:8888")
        self.extender_matches_shipped(ext)
        # The NetworkPolicy lets Prometheus reach the ops and scheduler ports; the
        # verbs port is in no rule.
        np = objs[("NetworkPolicy", "troupe-scheduler")]
        ports = [p["port"] for r in np["spec"]["ingress"] for p in r["ports"]]
        self.assertEqual(sorted(ports), [8889, 10259])
        pdb = objs[("PodDisruptionBudget", "troupe-scheduler")]
        self.assertEqual(pdb["spec"]["minAvailable"], 1)
        self.assertEqual(pdb["spec"]["selector"]["matchLabels"],
                         dep["spec"]["selector"]["matchLabels"])
        # The scheduler in the pod runs as troupe's account, with the scheduler roles.
        bound = {o["roleRef"]["name"] for k, o in objs.items() if k[0] == "ClusterRoleBinding"}
        self.assertTrue({"system:kube-scheduler", "system:volume-scheduler"} <= bound, bound)

    def test_service(self):
        objs = self.install("mode=service")
        dep = objs[("Deployment", "troupe")]
        self.assertEqual(dep["spec"]["replicas"], 2)
        self.assert_hardened(dep)
        self.assertEqual([c["name"] for c in dep["spec"]["template"]["spec"]["containers"]],
                         ["troupe"])
        _, ports = self.troupe_container(dep)
        self.assertEqual(ports["verbs"], 8888)
        self.assertEqual(self.config(objs, "troupe")["listen"], "0.0.0.0:8888")
        svc = objs[("Service", "troupe")]
        self.assertEqual([(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]],
                         [(8888, "verbs")], "the Service carries the verbs port only")
        self.assertEqual(svc["spec"]["selector"], dep["spec"]["selector"]["matchLabels"])
        np = objs[("NetworkPolicy", "troupe")]
        self.assertEqual(np["spec"]["policyTypes"], ["Ingress"])
        by_port = {r["ports"][0]["port"]: r["from"] for r in np["spec"]["ingress"]}
        self.assertEqual(sorted(by_port), [8888, 8889])
        self.assertEqual(by_port[8888][0]["podSelector"]["matchLabels"],
                         {"component": "kube-scheduler"})
        self.assertEqual(by_port[8889][0]["podSelector"]["matchLabels"],
                         {"app.kubernetes.io/name": "prometheus"})
        self.assertIn(("PodDisruptionBudget", "troupe"), objs)
        sched = self.config(objs, "scheduler")
        self.assertEqual([p["schedulerName"] for p in sched["profiles"]], ["default-scheduler"])
        self.assertNotIn("leaderElection", sched)
        (ext,) = sched["extenders"]
        self.assertEqual(ext["urlPrefix"], "http://troupe.%s.svc:8888" % self.ns)
        self.assertFalse(ext["enableHTTPS"])
        self.extender_matches_shipped(ext)
        # No scheduler roles for troupe's account in this mode.
        bound = {o["roleRef"]["name"] for k, o in objs.items() if k[0] == "ClusterRoleBinding"}
        self.assertEqual(bound, {"troupe", "troupe-delegated-auth", "troupe-events",
                                 "troupe-podgroup-status", "troupe-other-schedulers"})

    def test_rbac(self):
        shipped = {(o["kind"], o["metadata"]["name"]): o
                   for o in self.dry_run(read(os.path.join(DEPLOY, "rbac.yaml")))}
        for mode in ("sidecar", "service"):
            objs = self.install("mode=" + mode)
            role = objs[("ClusterRole", "troupe")]
            self.assertEqual(rules(role), TROUPE_RULES, mode)
            self.assertEqual(rules(role), rules(shipped[("ClusterRole", "troupe")]))
            for name in ("troupe-delegated-auth",):
                self.assertEqual(rules(objs[("ClusterRole", name)]),
                                 {("authentication.k8s.io", "tokenreviews"): {"create"},
                                  ("authorization.k8s.io", "subjectaccessreviews"): {"create"}})
                self.assertEqual(rules(objs[("ClusterRole", name)]),
                                 rules(shipped[("ClusterRole", name)]))
            events = objs[("ClusterRole", "troupe-events")]
            self.assertEqual(rules(events), {("events.k8s.io", "events"): {"create", "patch"}})
            self.assertEqual(rules(events), rules(shipped[("ClusterRole", "troupe-events")]))
            # PodGroup status (gang.write_status): a role of its own.
            status = objs[("ClusterRole", "troupe-podgroup-status")]
            self.assertEqual(rules(status), {("scheduling.x-k8s.io", "podgroups/status"):
                                             {"get", "patch"}})
            self.assertEqual(rules(status), rules(shipped[("ClusterRole",
                                                           "troupe-podgroup-status")]))
            # Other schedulers' PodGroups and Queues: read only, a role of its own.
            other = objs[("ClusterRole", "troupe-other-schedulers")]
            want = {(g, "podgroups"): {"list", "watch"} for g in (
                "scheduling.k8s.io", "scheduling.volcano.sh", "scheduling.run.ai")}
            want.update({(g, "queues"): {"list", "watch"} for g in (
                "scheduling.volcano.sh", "scheduling.run.ai")})
            want.update({("resource.k8s.io", r): {"list", "watch"} for r in (
                "resourceslices", "resourceclaims")})
            self.assertEqual(rules(other), want)
            self.assertEqual(rules(other), rules(shipped[("ClusterRole",
                                                          "troupe-other-schedulers")]))
            lease = objs[("Role", "troupe-leader-election")]
            self.assertEqual(lease["metadata"]["namespace"], self.ns)
            self.assertEqual(rules(lease), {("coordination.k8s.io", "leases"):
                                            {"get", "create", "update"}})
            self.assertEqual(rules(lease), rules(shipped[("Role", "troupe-leader-election")]))
            # Nothing else grants troupe's account anything.
            granted = {o["roleRef"]["name"] for k, o in objs.items()
                       if k[0] in ("ClusterRoleBinding", "RoleBinding")}
            extra = {"system:kube-scheduler", "system:volume-scheduler",
                     "extension-apiserver-authentication-reader"} if mode == "sidecar" else set()
            self.assertEqual(granted, {"troupe", "troupe-delegated-auth", "troupe-events",
                                       "troupe-podgroup-status", "troupe-other-schedulers",
                                       "troupe-leader-election"} | extra, mode)
            for k, o in objs.items():
                if k[0] in ("ClusterRoleBinding", "RoleBinding"):
                    self.assertEqual(o["subjects"], [{"kind": "ServiceAccount", "name": "troupe",
                                                      "namespace": self.ns}], k)

    def test_admission_policy(self):
        shipped = {o["kind"]: o for o in self.dry_run(
            read(os.path.join(DEPLOY, "admission-policy.yaml")))}
        objs = self.install("fullnameOverride=gpu-sched", "serviceAccount.name=sched-sa")
        policy = objs[("ValidatingAdmissionPolicy", "gpu-sched-gpu-annotations")]
        binding = objs[("ValidatingAdmissionPolicyBinding", "gpu-sched-gpu-annotations")]
        self.assertEqual(binding["spec"]["policyName"], "gpu-sched-gpu-annotations")
        self.assertEqual(binding["spec"]["validationActions"], ["Deny"])
        (cond,) = policy["spec"]["matchConditions"]
        self.assertEqual(cond["expression"], "request.userInfo.username != "
                         "'system:serviceaccount:%s:sched-sa'" % self.ns)
        # Apart from the identity, the shipped file's policy word for word.
        # (troupe-node's identity first: troupe's is a prefix of it.)
        want = json.loads(json.dumps(shipped["ValidatingAdmissionPolicy"]["spec"]).replace(
            "system:serviceaccount:kube-system:troupe-node", "NODE-IDENTITY").replace(
            "system:serviceaccount:kube-system:troupe", "system:serviceaccount:%s:sched-sa"
            % self.ns).replace("NODE-IDENTITY", "system:serviceaccount:%s:gpu-sched-node"
                               % self.ns))
        self.assertEqual(policy["spec"], want)
        self.assertEqual(shipped["ValidatingAdmissionPolicy"]["spec"]["failurePolicy"], "Fail")
        self.assertEqual(objs[("ServiceAccount", "sched-sa")]["metadata"]["namespace"], self.ns)
        # Off when asked.
        self.assertNotIn("ValidatingAdmissionPolicy",
                         {k[0] for k in self.install("admissionPolicy.enabled=false")})

    def test_tls(self):
        # From a Secret the operator made.
        objs = self.install("mode=service", "tls.enabled=true", "tls.secretName=my-tls")
        self.assertFalse([k for k in objs if k[0] == "text" or k[0] == "Certificate"])
        dep = objs[("Deployment", "troupe")]
        vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
        self.assertEqual(vols["tls"]["secret"]["secretName"], "my-tls")
        c, _ = self.troupe_container(dep)
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        self.assertEqual(mounts["tls"], "/etc/troupe/tls")
        tls = self.config(objs, "troupe")["tls"]
        self.assertEqual((tls["cert_file"], tls["key_file"], tls["client_ca_file"]),
                         ("/etc/troupe/tls/tls.crt", "/etc/troupe/tls/tls.key",
                          "/etc/troupe/tls/ca.crt"))
        self.assertEqual(tls["allowed_subjects"], ["CN=system:kube-scheduler"])
        (ext,) = self.config(objs, "scheduler")["extenders"]
        self.assertEqual(ext["urlPrefix"], "https://troupe.%s.svc:8888" % self.ns)
        self.assertTrue(ext["enableHTTPS"])
        self.assertEqual(sorted(ext["tlsConfig"]), ["caFile", "certFile", "keyFile",
                                                    "serverName"])
        # In sidecar mode the verbs stay on loopback: TLS is not applied there.
        objs = self.install("tls.enabled=true")
        self.assertNotIn("tls", self.config(objs, "troupe"))
        # From cert-manager: the Certificates, rendered only when enabled.
        objs = self.install("mode=service", "tls.enabled=true", "tls.certManager.enabled=true",
                            "tls.certManager.issuerRef.name=troupe-ca",
                            "tls.certManager.issuerRef.kind=ClusterIssuer")
        # The rig has no cert-manager, so the API server cannot check these:
        # install() hands them back as rendered text, checked here.
        certs = {k[2]: o for k, o in objs.items() if k[:2] == ("text", "Certificate")}
        self.assertEqual(sorted(certs), ["troupe-scheduler-client", "troupe-serving"])
        serving = certs["troupe-serving"]
        self.assertIn("secretName: troupe-tls", serving)
        self.assertIn("- troupe.%s.svc\n" % self.ns, serving)
        self.assertIn("server auth", serving)
        self.assertRegex(serving, r"kind: ClusterIssuer\s")
        self.assertIn("name: troupe-ca", serving)
        self.assertIn("commonName: system:kube-scheduler", certs["troupe-scheduler-client"])
        self.assertIn("client auth", certs["troupe-scheduler-client"])
        dep = objs[("Deployment", "troupe")]
        vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
        self.assertEqual(vols["tls"]["secret"]["secretName"], "troupe-tls")

    def test_node(self):
        shipped = {(o["kind"], o["metadata"]["name"]): o for o in self.dry_run(
            read(os.path.join(DEPLOY, "troupe-node.yaml")) + "\n---\n"
            + read(os.path.join(DEPLOY, "node-admission-policy.yaml")))}
        r = helm("lint", "--strict", CHART, "--set", "node.enabled=true")
        self.assertIn("0 chart(s) failed", r.stdout)
        objs = self.install("node.enabled=true")
        node_kinds = ("DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                      "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
        mine = {k for k in objs if k[0] in node_kinds and k[1].startswith("troupe-node")}
        self.assertEqual(mine, set(shipped), "the chart's troupe-node objects are not the "
                         "plain manifests'")
        # RBAC: exactly get and patch on nodes, for troupe-node's account only.
        role = objs[("ClusterRole", "troupe-node")]
        self.assertEqual(rules(role), NODE_RULES)
        self.assertEqual(rules(shipped[("ClusterRole", "troupe-node")]), NODE_RULES)
        crb = objs[("ClusterRoleBinding", "troupe-node")]
        self.assertEqual(crb["roleRef"]["name"], "troupe-node")
        self.assertEqual(crb["subjects"], [{"kind": "ServiceAccount", "name": "troupe-node",
                                            "namespace": self.ns}])
        self.assertEqual(objs[("ServiceAccount", "troupe-node")]["metadata"]["namespace"],
                         self.ns)
        # The policy: the shipped one, word for word, for this release's identity.
        policy = objs[("ValidatingAdmissionPolicy", "troupe-node-annotations")]
        want = json.loads(json.dumps(
            shipped[("ValidatingAdmissionPolicy", "troupe-node-annotations")]["spec"]).replace(
            NODE_IDENTITY, "system:serviceaccount:%s:troupe-node" % self.ns))
        self.assertEqual(policy["spec"], want)
        self.assertEqual(policy["spec"]["failurePolicy"], "Fail")
        binding = objs[("ValidatingAdmissionPolicyBinding", "troupe-node-annotations")]
        self.assertEqual(binding["spec"], shipped[("ValidatingAdmissionPolicyBinding",
                                                    "troupe-node-annotations")]["spec"])
        # The DaemonSet: hardened, and the same pod as the plain manifest's.
        ds = objs[("DaemonSet", "troupe-node")]
        self.assert_hardened(ds, root=True)
        pod = ds["spec"]["template"]["spec"]
        self.assertEqual(pod, shipped[("DaemonSet", "troupe-node")]["spec"]["template"]["spec"])
        self.assertEqual(ds["spec"]["updateStrategy"],
                         shipped[("DaemonSet", "troupe-node")]["spec"]["updateStrategy"])
        (c,) = pod["containers"]
        self.assertEqual(c["command"], ["/troupe-node"])
        self.assertEqual(c["image"], "registry.example/troupe:0.1.0")
        self.assertEqual(c["args"], ["--interval=60",
                                     "--nvml=/host/driver-lib/libnvidia-ml.so.1",
                                     "--nvidia-smi="])
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName")
        # Root for the kubelet's pod-resources directory (0750, root's), with
        # no capability, no escalation and a read-only root.
        self.assertEqual(pod["securityContext"]["runAsUser"], 0)
        self.assertEqual(c["securityContext"]["capabilities"], {"drop": ["ALL"]})
        self.assertIs(c["securityContext"]["allowPrivilegeEscalation"], False)
        self.assertIs(c["securityContext"]["readOnlyRootFilesystem"], True)
        self.assertEqual(c["volumeMounts"], [
            {"name": "driver-lib", "mountPath": "/host/driver-lib", "readOnly": True},
            {"name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources"}])
        vols = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
        self.assertEqual(vols, {"driver-lib": "/usr/lib/x86_64-linux-gnu",
                                "pod-resources": "/var/lib/kubelet/pod-resources"})
        self.assertEqual(pod["nodeSelector"], {"nvidia.com/gpu.present": "true"})
        self.assertIn("nvidia.com/gpu", [t["key"] for t in pod["tolerations"]])
        self.assertEqual(pod["serviceAccountName"], "troupe-node")
        # The values reach the pod and the policy.
        objs = self.install("node.enabled=true", "fullnameOverride=gs",
                            "node.serviceAccount.name=agent", "node.interval=300",
                            "node.driver.hostPath=/run/nvidia/driver/usr/lib64",
                            "node.driver.library=libnvidia-ml.so.550", "node.image.tag=0.2.0",
                            "node.runtimeClassName=nvidia", "node.nodeSelector.gpu=yes",
                            "node.resources.limits.memory=32Mi")
        pod = objs[("DaemonSet", "gs-node")]["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        self.assertEqual(c["image"], "registry.example/troupe:0.2.0")
        self.assertEqual(c["args"][:2], ["--interval=300",
                                         "--nvml=/host/driver-lib/libnvidia-ml.so.550"])
        self.assertEqual({v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}["driver-lib"],
                         "/run/nvidia/driver/usr/lib64")
        self.assertEqual(pod["runtimeClassName"], "nvidia")
        self.assertEqual(pod["nodeSelector"], {"nvidia.com/gpu.present": "true", "gpu": "yes"})
        self.assertEqual(c["resources"]["limits"]["memory"], "32Mi")
        self.assertEqual(pod["serviceAccountName"], "agent")
        (cond,) = objs[("ValidatingAdmissionPolicy", "gs-node-annotations")]["spec"][
            "matchConditions"]
        self.assertEqual(cond["expression"], "request.userInfo.username == "
                         "'system:serviceaccount:%s:agent'" % self.ns)
        self.assertEqual(objs[("ClusterRoleBinding", "gs-node")]["subjects"][0]["name"], "agent")
        # Allocator mode: the flag, and the kubelet's device-plugins directory.
        objs = self.install("node.enabled=true", "node.allocator.enabled=true",
                            "node.allocator.cdiKind=example.com/gpu")
        pod = objs[("DaemonSet", "troupe-node")]["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        self.assertEqual(c["args"][3:], ["--allocator", "--cdi-kind=example.com/gpu"])
        self.assertIn({"name": "device-plugins", "mountPath": "/var/lib/kubelet/device-plugins"},
                      c["volumeMounts"])
        self.assertEqual({v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}[
            "device-plugins"], "/var/lib/kubelet/device-plugins")
        # It lists this node's pods at each GetPreferredAllocation.
        self.assertEqual(rules(objs[("ClusterRole", "troupe-node")]),
                         {**NODE_RULES, ("", "pods"): {"get", "patch", "list"}})
        # No policy where admission policies are off; nothing at all by default.
        kinds = {k for k in self.install("node.enabled=true", "admissionPolicy.enabled=false")}
        self.assertIn(("DaemonSet", "troupe-node"), kinds)
        self.assertNotIn(("ValidatingAdmissionPolicy", "troupe-node-annotations"), kinds)
        off = {k for k in self.install() if "node" in k[1]}
        self.assertEqual(off, set(), "node.enabled=false renders troupe-node objects")
        # Bad node.* values fail the schema, naming the value.
        for bad, says in (("node.interval=1", "at '/node/interval': minimum"),
                          ("node.enable=true", "at '/node': additional properties 'enable'"),
                          ("node.driver.hostPath=lib", "at '/node/driver/hostPath'")):
            r = helm("template", "t", CHART, "--set", bad, check=False)
            self.assertNotEqual(r.returncode, 0, bad)
            self.assertIn(says, r.stderr)

    def test_sidecar_schedules(self):
        # A fullname of its own: the rig's troupe keeps its ClusterRole troupe,
        # and no admission policy for another identity stops its Bindings.
        text = self.render("fullnameOverride=chart-e2e", "admissionPolicy.enabled=false")
        kinds = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                 "ConfigMap")
        real = "---\n".join(d for d in documents(text) if kind_of(d) in kinds)
        self.c.kubectl("apply", "-f", "-", input=real)
        self.addCleanup(self.c.kubectl, "delete", "--ignore-not-found", "--wait=false", "-f", "-",
                        input=real, check=False)
        cm = json.loads(self.c.kubectl("-n", self.ns, "get", "configmap",
                                       "chart-e2e-scheduler-config", "-o", "json").stdout)
        cfg = json.loads(cm["data"]["scheduler-config.yaml"])
        # What the pod would have: the service account's token (a kubeconfig
        # here, where the chart says in-cluster), troupe on 127.0.0.1 (the
        # rig's troupe, on its own port).
        token = self.c.kubectl("-n", self.ns, "create", "token", "chart-e2e").stdout.strip()
        folder = os.path.join(self.c.dir, "config")
        kc = os.path.join(folder, "chart-scheduler.kubeconfig")
        self.c.pki.kubeconfig(kc, self.c.api_url, "chart-e2e", token=token)
        self.assertEqual(cfg["clientConnection"]["kubeconfig"], "")
        cfg["clientConnection"]["kubeconfig"] = kc
        self.assertEqual(cfg["extenders"][0]["urlPrefix"], "http://127.0.0.1:8888")
        cfg["extenders"][0]["urlPrefix"] = self.c.troupe_url
        path = os.path.join(folder, "chart-scheduler-config.yaml")
        with open(path, "w") as f:
            json.dump(cfg, f)
        port = rig.free_port()
        log_path = os.path.join(self.c.logs, "chart-kube-scheduler.log")
        log = open(log_path, "w")
        self.addCleanup(log.close)
        # Its secure port authenticates callers as the chart's account too:
        # TokenReview, SubjectAccessReview and the client-CA ConfigMap.
        proc = subprocess.Popen([self.c.bin("kube-scheduler"), "--config=" + path,
                                 "--authentication-kubeconfig=" + kc,
                                 "--authorization-kubeconfig=" + kc,
                                 "--bind-address=127.0.0.1", "--secure-port=%d" % port, "--v=2"],
                                stdout=log, stderr=subprocess.STDOUT)

        def stop():
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.addCleanup(stop)

        def ready():
            self.assertIsNone(proc.poll(), "the chart's kube-scheduler exited; see " + log_path)
            try:
                return self.c.request("GET", "/readyz", base="https://127.0.0.1:%d" % port,
                                      timeout=5)[0] == 200
            except OSError:         # not listening yet
                return False
        wait_until(ready, timeout=90, what="the chart's kube-scheduler ready (log: %s)" % log_path)
        lease = wait_until(lambda: (lambda s, o: o if s == 200 and o["spec"].get(
            "holderIdentity") else None)(*self.c.request(
                "GET", "/apis/coordination.k8s.io/v1/namespaces/%s/leases/troupe-scheduler"
                % self.ns)), timeout=60, what="the chart's scheduler holding its Lease")
        self.assertIn("leaseDurationSeconds", lease["spec"])
        pod = gpu_pod("placed", 1)
        pod["spec"]["schedulerName"] = "troupe"
        self.create(pod)
        p = self.wait_bound("placed", timeout=90)
        self.assertIsNotNone(gpu_ids(p), "not placed through troupe: %s" % p["metadata"])
        # The default scheduler leaves schedulerName: troupe alone: the chart's did it.
        ev = self.wait_event("placed", "Scheduled")
        self.assertEqual(ev.get("reportingComponent") or ev["source"].get("component"), "troupe")
        self.assertIsNone(proc.poll(), "the chart's kube-scheduler exited")
        with open(log_path) as f:
            forbidden = [line for line in f if "forbidden" in line]
        self.assertEqual(forbidden, [], "the chart's RBAC is short for kube-scheduler")


if __name__ == "__main__":
    unittest.main()
