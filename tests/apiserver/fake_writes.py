"""The fake API server's writes: create, replace and merge-patch of an object
or its /status with optimistic concurrency, and pod Bindings with the checks,
messages and status codes of BindingREST.Create
(pkg/registry/core/pod/storage/storage.go).

WriteHandler is a mixin of the request handler (fake_http._Handler); it
commits through the server's ObjectStore (fake_store.py).
"""

import copy
import json
import random

from kube_api import (KINDS, MODIFIED, ADDED, MSG_OBJECT_MODIFIED, STORAGE_ERR_INVALID_OBJ,
                      APIError, _goquote, err_already_exists, err_bad_request, err_conflict,
                      err_invalid, err_not_found, err_untyped, status_body)
from kube_query import merge_patch, now_rfc3339

class WriteHandler:
    """POST, PUT and PATCH of objects, and Bindings (mixin of the handler)."""

    # -- writes -------------------------------------------------------------

    def _json_body(self, body, what):
        try:
            obj = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise err_bad_request("the object provided is unrecognized (must be of type %s): "
                                  "couldn't get version/kind; json parse error: %s (%s)"
                                  % (what, e, body[:64].decode("utf-8", "replace")))
        if not isinstance(obj, dict):
            raise err_bad_request("the object provided is unrecognized (must be of type %s): "
                                  "couldn't get version/kind; json parse error: json: cannot "
                                  "unmarshal %s into Go value of type struct"
                                  % (what, type(obj).__name__))
        return obj

    def _check_type(self, obj, kind, api_version):
        """The decoder refuses a body of another kind or group/version (400)."""
        if obj.get("apiVersion") not in (None, "", api_version):
            raise err_bad_request("the API version in the data (%s) does not match the expected "
                                  "API version (%s)" % (obj.get("apiVersion"), api_version))
        if obj.get("kind") not in (None, "", kind):
            raise err_bad_request("the object provided is unrecognized (must be of type %s): "
                                  "%s is not a %s" % (kind, _goquote(obj.get("kind")), kind))

    def _create(self, info, ns, body):
        fake = self.fake
        obj = self._json_body(body, info.kind)
        self._check_type(obj, info.kind, info.api_version)
        meta = obj.setdefault("metadata", {})
        if info.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise err_bad_request("the namespace of the provided object does not match the "
                                      "namespace sent on the request")
            meta["namespace"] = ns
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(
                random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
        if not meta.get("name"):
            raise err_invalid(info.kind, info.group, "", [("metadata.name", "Required value: "
                              "name or generateName is required")])
        for k in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            meta.pop(k, None)
        if info.plural == "pods":
            # PrepareForCreate resets status; the pod starts Pending.
            obj["status"] = {"phase": "Pending"}
        with fake._lock:
            new = fake._normalise(info, obj)
            key = fake._key_of(info, new)
            if key in fake._objs[info.plural]:
                raise err_already_exists(info, meta["name"])
            new = fake._commit(info, ADDED, key, new)
        self._send(201, new)

    def _write(self, info, ns, name, sub, body):
        """PUT (replace) or PATCH (merge patch) of an object or its /status."""
        fake = self.fake
        if self.command == "PATCH":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if ctype != "application/merge-patch+json":
                raise APIError(415, "the body of the request was in an unknown format - "
                               "accepted media types include: application/merge-patch+json",
                               "UnsupportedMediaType")
        if sub == "status" and fake.status_write_hook:   # fake_podgroup_status.py
            body = fake.status_write_hook(info, ns, name, self.command, body) or body
        obj = self._json_body(body, info.kind)
        with fake._lock:
            key = fake._key(info, ns, name)
            old = fake._objs[info.plural].get(key)
            if old is None:
                raise err_not_found(info, name)
            if self.command == "PATCH":
                new = merge_patch(old, obj)
                rv = (obj.get("metadata") or {}).get("resourceVersion")
            else:
                self._check_type(obj, info.kind, info.api_version)
                new = copy.deepcopy(obj)
                rv = (new.get("metadata") or {}).get("resourceVersion")
                if not rv and not info.unconditional_update:
                    raise err_invalid(info.kind, info.group, name, [(
                        "metadata.resourceVersion",
                        "Invalid value: 0x0: must be specified for an update")])
            meta = new.setdefault("metadata", {})
            if meta.get("name", name) != name:
                raise err_bad_request("the name of the object (%s) does not match the name on "
                                      "the URL (%s)" % (meta.get("name"), name))
            if info.namespaced and meta.get("namespace", ns) != ns:
                raise err_bad_request("the namespace of the provided object does not match the "
                                      "namespace sent on the request")
            if rv and rv != old["metadata"]["resourceVersion"]:
                # Optimistic concurrency on metadata.resourceVersion.
                raise err_conflict(info.plural, info.group, name, MSG_OBJECT_MODIFIED)
            uid = meta.get("uid")
            if uid and uid != old["metadata"]["uid"]:
                raise err_conflict(info.plural, info.group, name,
                                   "Precondition failed: UID in precondition: %s, UID in object "
                                   "meta: %s" % (uid, old["metadata"]["uid"]))
            # All three kinds have a status subresource: the main resource
            # ignores status changes and /status ignores everything else.
            if sub == "status":
                status = new.get("status")
                new = copy.deepcopy(old)
                if status is None:
                    new.pop("status", None)
                else:
                    new["status"] = status
            elif "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
            for k in ("uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds"):
                if k in old["metadata"]:
                    new["metadata"][k] = old["metadata"][k]
                else:
                    new["metadata"].pop(k, None)
            new["metadata"]["name"] = name
            if info.namespaced:
                new["metadata"]["namespace"] = ns
            new = fake._normalise(info, new, old)
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            if new == old:
                result = old        # no-op writes do not bump the version (etcd3 store)
            else:
                result = fake._commit(info, MODIFIED, key, new)
        self._send(200, result)

    # -- delete -------------------------------------------------------------

    def _delete(self, info, ns, name, body):
        """DELETE of one object, with DeleteOptions' preconditions (uid,
        resourceVersion) checked as storage does (409 with its StorageError
        text). A pod goes at once, as one with gracePeriodSeconds 0 would
        (nothing here plays a kubelet that would confirm it); every deletion is
        recorded in fake.deletions."""
        fake = self.fake
        opts = self._json_body(body, "DeleteOptions") if body else {}
        pre = opts.get("preconditions") or {}
        if not isinstance(pre, dict):
            raise err_bad_request("preconditions must be an object")
        with fake._lock:
            key = fake._key(info, ns, name)
            obj = fake._objs[info.plural].get(key)
            if obj is None:
                raise err_not_found(info, name)
            for field, want, have in (("UID", pre.get("uid"), obj["metadata"].get("uid")),
                                      ("ResourceVersion", pre.get("resourceVersion"),
                                       obj["metadata"].get("resourceVersion"))):
                if want and want != have:
                    raise err_conflict(info.plural, info.group, name, (
                        "StorageError: invalid object, Code: %d, Key: /registry/%s/%s/%s, "
                        "ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: %s in "
                        "precondition: %s, %s in object meta: %s")
                        % (STORAGE_ERR_INVALID_OBJ, info.plural, ns, name, field, want, field,
                           have))
            fake.deletions.append((info.plural, ns, name, pre.get("uid")))
        gone = fake.delete(info.plural, ns, name)
        self._send(200, gone)

    # -- binding ------------------------------------------------------------

    def _binding(self, ns, url_name, body):
        """POST pods/{name}/binding, or the legacy namespaces/{ns}/bindings (the
        name then comes from the body).  Mirrors BindingREST.Create."""
        fake = self.fake
        b = self._json_body(body, "Binding")
        with fake._lock:
            fake.bindings.append(copy.deepcopy(b))
        self._check_type(b, "Binding", "v1")
        meta = b.get("metadata") or {}
        if not isinstance(meta, dict):
            raise err_bad_request("metadata must be an object")
        bname = meta.get("name") or ""
        if meta.get("namespace") and meta["namespace"] != ns:
            raise err_bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
        name = bname if url_name is None else url_name
        if name != bname:
            raise err_bad_request("name in URL does not match name in Binding object")
        if not name:
            raise err_bad_request("Name parameter required.")
        target = b.get("target") or {}
        if not isinstance(target, dict):
            raise err_bad_request("target must be an object")
        errs = []
        # validation.ValidatePodBinding; its errors are returned untyped
        # (errs.ToAggregate()), which the apiserver turns into a 500.
        if target.get("kind") not in (None, "", "Node"):
            errs.append('target.kind: Unsupported value: %s: supported values: "Node", "<empty>"'
                        % _goquote(target.get("kind")))
        if not target.get("name"):
            errs.append("target.name: Required value")
        if errs:
            raise err_untyped(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")

        info = KINDS["pods"]
        with fake._lock:
            key = fake._key(info, ns, name)
            pod = fake._objs["pods"].get(key)
            if pod is None:
                raise err_not_found(info, name)
            # Preconditions fail inside storage (storage.Preconditions.Check), so
            # the text is the StorageError's and the Conflict is on "pods".
            for field, want, have in (("UID", meta.get("uid"), pod["metadata"]["uid"]),
                                      ("ResourceVersion", meta.get("resourceVersion"),
                                       pod["metadata"]["resourceVersion"])):
                if want and want != have:
                    raise err_conflict("pods", "", name, (
                        "StorageError: invalid object, Code: %d, Key: /registry/pods/%s/%s, "
                        "ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: %s in "
                        "precondition: %s, %s in object meta: %s")
                        % (STORAGE_ERR_INVALID_OBJ, ns, name, field, want, field, have))
            spec = pod.get("spec") or {}
            if pod["metadata"].get("deletionTimestamp"):
                raise err_conflict("pods/binding", "", name, "pod %s is being deleted, cannot "
                                   "be assigned to a host" % name)
            if spec.get("nodeName"):
                raise err_conflict("pods/binding", "", name, "pod %s is already assigned to "
                                   "node %s" % (name, _goquote(spec["nodeName"])))
            if spec.get("schedulingGates"):
                raise err_conflict("pods/binding", "", name,
                                   "pod %s has non-empty .spec.schedulingGates" % name)
            new = copy.deepcopy(pod)
            new.setdefault("spec", {})["nodeName"] = target["name"]
            ann = new["metadata"].get("annotations") or {}
            ann.update(meta.get("annotations") or {})
            new["metadata"]["annotations"] = ann
            _set_pod_scheduled(new)
            fake._commit(info, MODIFIED, key, new)
        self._send(201, status_body(201, None, status="Success"))


def _set_pod_scheduled(pod):
    """podutil.UpdatePodCondition(PodScheduled=True): replace the condition,
    keeping lastTransitionTime when the status did not change."""
    status = pod.setdefault("status", {})
    conds = status.setdefault("conditions", [])
    cond = {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339()}
    for i, c in enumerate(conds):
        if c.get("type") == "PodScheduled":
            if c.get("status") == "True" and c.get("lastTransitionTime"):
                cond["lastTransitionTime"] = c["lastTransitionTime"]
            conds[i] = cond
            return
    conds.append(cond)
