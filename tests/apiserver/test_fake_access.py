#!/usr/bin/env python3
"""Self-tests of who may do what on the fake API server: bearer tokens and
their rotation, SelfSubjectAccessReviews, and the 403s a denied permission
brings, checked before the resource is looked up; TokenReviews and
SubjectAccessReviews of other users, as delegating components post them.

Run alone: python3 tests/apiserver/test_fake_access.py -v
(meson's apiserver-selftest runs every test_fake_*.py).
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from selftest_common import Base, pod, PG  # noqa: E402


class AuthTests(Base):
    server_kwargs = {"token": "t1"}

    def test_token_and_rotation(self):
        st, _, body = self.call("GET", "/api/v1/nodes")
        self.assertEqual(body, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "message": "Unauthorized",
                                "reason": "Unauthorized", "code": 401})
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="bad")[0], 401)
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="t1")[0], 200)
        self.s.rotate_token("t2")
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="t1")[0], 401)
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="t2")[0], 200)
        w = self.watch("/api/v1/nodes?watch=1&timeoutSeconds=1", token="t2")
        self.assertEqual(w.resp.status, 200)


def review(verb, resource, group=None, subresource=None):
    attrs = {"verb": verb, "resource": resource}
    if group is not None:
        attrs["group"] = group
    if subresource is not None:
        attrs["subresource"] = subresource
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs}}


SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
USER = "system:serviceaccount:kube-system:troupe"


class AccessTests(Base):
    """RBAC as a client sees it: SelfSubjectAccessReviews and 403s."""
    server_kwargs = {"token": "t1"}

    def can(self, *args, **kw):
        st, _, body = self.call("POST", SSAR, review(*args, **kw), token="t1")
        self.assertEqual((st, body["kind"], body["apiVersion"]),
                         (201, "SelfSubjectAccessReview", "authorization.k8s.io/v1"), body)
        return body["status"]["allowed"]

    def test_reviews_allow_everything_by_default(self):
        st, _, body = self.call("POST", SSAR, review("create", "pods", "", "binding"), token="t1")
        self.assertEqual(st, 201)
        self.assertEqual(body["spec"], review("create", "pods", "", "binding")["spec"])
        self.assertEqual(body["status"]["allowed"], True)
        self.assertIn("RBAC: allowed by ClusterRoleBinding", body["status"]["reason"])
        self.assertEqual(self.s.access_reviews[-1],
                         {"verb": "create", "resource": "pods", "group": "",
                          "subresource": "binding"})
        # Reviews need authentication like any request.
        self.assertEqual(self.call("POST", SSAR, review("list", "pods"))[0], 401)

    def test_denied_reviews_name_verb_group_resource_and_subresource(self):
        self.s.deny("create", "pods", subresource="binding", requests=False)
        self.s.deny("list", "podgroups", group="scheduling.x-k8s.io", requests=False)
        self.assertFalse(self.can("create", "pods", "", "binding"))
        st, _, body = self.call("POST", SSAR, review("create", "pods", None, "binding"),
                                token="t1")
        self.assertEqual(body["status"], {"allowed": False}, "RBAC gives no reason")
        self.assertTrue(self.can("create", "pods"), "pods itself is another permission")
        self.assertFalse(self.can("list", "podgroups", "scheduling.x-k8s.io"))
        self.assertTrue(self.can("watch", "podgroups", "scheduling.x-k8s.io"))
        self.assertTrue(self.can("list", "podgroups"), "group \"\" is another permission")
        # Only the review changed: the requests themselves still pass.
        self.assertEqual(self.call("GET", PG + "/podgroups", token="t1")[0], 200)
        self.s.allow("create", "pods", subresource="binding")
        self.assertTrue(self.can("create", "pods", "", "binding"))

    def test_review_validation_and_absence(self):
        st, _, body = self.call("POST", SSAR, {"apiVersion": "authorization.k8s.io/v1",
                                               "kind": "SelfSubjectAccessReview", "spec": {}},
                                token="t1")
        self.assertEqual((st, body["reason"]), (422, "Invalid"))
        self.assertIn("exactly one of nonResourceAttributes or resourceAttributes",
                      body["message"])
        st, _, body = self.call("POST", SSAR, {"kind": "Binding"}, token="t1")
        self.assertEqual(st, 400)
        self.assertEqual(self.call("GET", SSAR, token="t1")[0], 405)
        self.s.serve_access_reviews = False
        st, _, body = self.call("POST", SSAR, review("list", "pods"), token="t1")
        self.assertEqual((st, body["message"]),
                         (404, "the server could not find the requested resource"))

    def test_denied_list_and_watch_answer_403(self):
        self.s.create("pods", pod("a"))
        self.s.deny("list", "pods", reviews=False)
        st, _, body = self.call("GET", "/api/v1/pods?limit=500", token="t1")
        self.assertEqual(body, {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'pods is forbidden: User "%s" cannot list resource "pods" in API '
                       'group "" at the cluster scope' % USER,
            "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403})
        self.assertTrue(self.can("list", "pods"), "reviews=False leaves the review allowed")
        st, _, body = self.call("GET", "/api/v1/namespaces/ml/pods", token="t1")
        self.assertEqual(body["message"], 'pods is forbidden: User "%s" cannot list resource '
                         '"pods" in API group "" in the namespace "ml"' % USER)
        # A watch is another verb; an open one keeps streaming when it is denied.
        w = self.watch("/api/v1/pods?watch=1&resourceVersion=0", token="t1")
        self.assertEqual(w.next()["type"], "ADDED")
        self.s.deny("watch", "pods")
        self.assertFalse(self.can("watch", "pods"))
        st, _, body = self.call("GET", "/api/v1/pods?watch=1", token="t1")
        self.assertEqual((st, body["reason"]), (403, "Forbidden"))
        self.s.create("pods", pod("b"))
        self.assertEqual(w.next()["object"]["metadata"]["name"], "b")
        self.s.allow("list", "pods")
        self.s.allow("watch", "pods")
        self.assertEqual(self.call("GET", "/api/v1/pods", token="t1")[0], 200)
        self.assertTrue(self.can("watch", "pods"))

    def test_denied_binding_and_missing_crd(self):
        self.s.create("pods", pod("p"))
        self.s.deny("create", "pods", subresource="binding")
        st, _, body = self.bind("p", "n1", token="t1")
        self.assertEqual((st, body["reason"], body["details"]), (403, "Forbidden",
                         {"name": "p", "kind": "pods"}))
        self.assertEqual(body["message"], 'pods "p" is forbidden: User "%s" cannot create '
                         'resource "pods/binding" in API group "" in the namespace "ml"' % USER)
        self.assertEqual(self.s.bindings, [], "refused before the handler")
        # Authorization runs before routing: without the permission a CRD that is
        # not installed is a 403, with it a 404.
        self.s.podgroups_crd = False
        self.s.deny("list", "podgroups", group="scheduling.x-k8s.io")
        st, _, body = self.call("GET", PG + "/podgroups", token="t1")
        self.assertEqual((st, body["message"]), (403, 'podgroups.scheduling.x-k8s.io is '
                         'forbidden: User "%s" cannot list resource "podgroups" in API group '
                         '"scheduling.x-k8s.io" at the cluster scope' % USER))
        self.s.allow("list", "podgroups", group="scheduling.x-k8s.io")
        self.assertEqual(self.call("GET", PG + "/podgroups", token="t1")[0], 404)


TR = "/apis/authentication.k8s.io/v1/tokenreviews"
SAR = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def token_review(token):
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}}


def path_review(path, user=None, groups=None, verb="get", **more):
    spec = dict({"nonResourceAttributes": {"path": path, "verb": verb}}, **more)
    if user is not None:
        spec["user"] = user
    if groups is not None:
        spec["groups"] = groups
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": spec}


class DelegatedAuthTests(Base):
    """TokenReview and SubjectAccessReview in the shapes of k8s.io/api
    authentication/v1 and authorization/v1."""
    server_kwargs = {"token": "t1"}
    PROM = "system:serviceaccount:monitoring:prometheus"

    def test_token_review_of_known_and_unknown_tokens(self):
        self.s.add_user("prom-token", self.PROM, uid="u-1",
                        groups=["system:serviceaccounts", "system:serviceaccounts:monitoring",
                                "system:authenticated"],
                        extra={"authentication.kubernetes.io/pod-name": ["prom-0"]})
        st, _, body = self.call("POST", TR, token_review("prom-token"), token="t1")
        self.assertEqual(st, 201)
        self.assertEqual((body["kind"], body["apiVersion"]),
                         ("TokenReview", "authentication.k8s.io/v1"))
        self.assertEqual(body["spec"], {"token": "prom-token"})
        self.assertEqual(body["status"], {
            "authenticated": True,
            "user": {"username": self.PROM, "uid": "u-1",
                     "groups": ["system:serviceaccounts", "system:serviceaccounts:monitoring",
                                "system:authenticated"],
                     "extra": {"authentication.kubernetes.io/pod-name": ["prom-0"]}},
            "audiences": ["https://kubernetes.default.svc.cluster.local"]})
        # Unknown: authenticated is omitted (omitempty), user is {}, error says why.
        st, _, body = self.call("POST", TR, token_review("nope"), token="t1")
        self.assertEqual(st, 201)
        self.assertEqual(body["status"], {"user": {}, "error": "invalid bearer token"})
        self.s.remove_user("prom-token")
        st, _, body = self.call("POST", TR, token_review("prom-token"), token="t1")
        self.assertNotIn("authenticated", body["status"])
        self.assertEqual(self.s.token_reviews, ["prom-token", "nope", "prom-token"])

    def test_token_review_validation_and_authorization(self):
        st, _, body = self.call("POST", TR, token_review(""), token="t1")
        self.assertEqual((st, body["reason"], body["message"]), (
            400, "BadRequest", "token is required for TokenReview in authentication"))
        self.assertEqual(self.call("GET", TR, token="t1")[0], 405)
        self.assertEqual(self.call("POST", TR, token_review("x"))[0], 401)
        # The reviewer needs "create tokenreviews" like any request.
        self.s.deny("create", "tokenreviews", group="authentication.k8s.io")
        st, _, body = self.call("POST", TR, token_review("x"), token="t1")
        self.assertEqual((st, body["message"]), (403, 'tokenreviews.authentication.k8s.io is '
                         'forbidden: User "%s" cannot create resource "tokenreviews" in API '
                         'group "authentication.k8s.io" at the cluster scope' % USER))

    def test_subject_access_review_of_paths(self):
        self.s.grant_path(self.PROM, "/metrics")
        self.s.grant_path("debuggers", "/debug/*", verbs=("get", "head"))
        st, _, body = self.call("POST", SAR, path_review("/metrics", self.PROM), token="t1")
        self.assertEqual((st, body["kind"], body["apiVersion"]),
                         (201, "SubjectAccessReview", "authorization.k8s.io/v1"))
        self.assertEqual(body["spec"], path_review("/metrics", self.PROM)["spec"])
        self.assertEqual(body["status"], {"allowed": True, "reason": 'RBAC: allowed by '
                         'ClusterRoleBinding "fake-path-rule" of ClusterRole "fake-path-rule" '
                         'to User "%s"' % self.PROM})

        def allowed(*args, **kw):
            st, _, body = self.call("POST", SAR, path_review(*args, **kw), token="t1")
            self.assertEqual(st, 201, body)
            return body["status"]["allowed"]
        self.assertFalse(allowed("/metrics/extra", self.PROM), "no star: the path only")
        self.assertFalse(allowed("/debug/state", self.PROM))
        self.assertFalse(allowed("/metrics", self.PROM, verb="post"))
        self.assertTrue(allowed("/debug/state", "alice", groups=["debuggers"]))
        self.assertTrue(allowed("/debug/cache", None, groups=["debuggers"]), "groups alone")
        self.assertFalse(allowed("/debugger", "alice", groups=["debuggers"]))
        st, _, body = self.call("POST", SAR, path_review("/debug/x", "bob"), token="t1")
        self.assertEqual(body["status"], {"allowed": False}, "RBAC gives no reason")
        self.s.revoke_paths(self.PROM)
        self.assertFalse(allowed("/metrics", self.PROM))
        self.assertEqual([r["nonResourceAttributes"]["path"] for r in
                          self.s.subject_access_reviews][:2], ["/metrics", "/metrics/extra"])

    def test_subject_access_review_validation(self):
        st, _, body = self.call("POST", SAR, path_review("/metrics"), token="t1")
        self.assertEqual((st, body["reason"]), (422, "Invalid"))
        self.assertIn("at least one of user or group must be specified", body["message"])
        st, _, body = self.call("POST", SAR, {"kind": "SubjectAccessReview",
                                              "spec": {"user": "a"}}, token="t1")
        self.assertEqual(st, 422)
        self.assertIn("exactly one of nonResourceAttributes or resourceAttributes",
                      body["message"])
        self.s.deny("create", "subjectaccessreviews", group="authorization.k8s.io")
        self.assertEqual(self.call("POST", SAR, path_review("/metrics", "a"),
                                   token="t1")[0], 403)


if __name__ == "__main__":
    unittest.main()
