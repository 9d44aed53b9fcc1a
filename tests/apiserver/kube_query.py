"""How the fake API server reads a request's query and body the way
kube-apiserver does: label and field selectors, strconv.ParseBool and
resourceVersion parameters, ListOptions validation, continue tokens and the
RFC 7386 merge patch.

Pure functions, apart from fake_apiserver.py's state, so list, watch and write
paths parse alike.
"""

import base64
import copy
import json
import re
import time

from kube_api import _get_path, _goquote, APIError, err_bad_request, err_invalid

# ---------------------------------------------------------------------------
# Selectors
# ---------------------------------------------------------------------------

# [DNS-subdomain prefix "/"] name
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _split_top(s):
    """Split on commas outside parentheses ("a in (x,y),b" -> two terms)."""
    out, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def parse_label_selector(s):
    """labels.Parse subset: k=v, k==v, k!=v, k, !k, k in (..), k notin (..)."""
    reqs = []
    if not s.strip():
        return reqs
    for term in _split_top(s):
        t = term.strip()
        m = re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", t)
        if m:
            key, op = m.group(1), m.group(2)
            vals = {v.strip() for v in m.group(3).split(",")}
            req = (op, key, vals)
        elif t.startswith("!"):
            key, vals = t[1:].strip(), None
            req = ("!", key, None)
        else:
            m = re.fullmatch(r"([^=!\s]+)\s*(==|!=|=)\s*(\S*)", t)
            if m:
                key, op, val = m.group(1), m.group(2), m.group(3)
                vals = {val}
                req = ("!=" if op == "!=" else "=", key, val)
            elif re.fullmatch(r"[^=!\s(),]+", t):
                key, vals = t, None
                req = ("exists", key, None)
            else:
                raise err_bad_request("unable to parse requirement: found '%s', expected: "
                                      "identifier" % t)
        if not _LABEL_KEY.match(key) or len(key.split("/")[-1]) > 63:
            raise err_bad_request("unable to parse requirement: <nil>: Invalid value: %s: "
                                  "name part must consist of alphanumeric characters, '-', "
                                  "'_' or '.'" % _goquote(key))
        for v in vals or ():
            if not _LABEL_VALUE.match(v) or len(v) > 63:
                raise err_bad_request("unable to parse requirement: values[0][%s]: Invalid "
                                      "value: %s: a valid label must be an empty string or "
                                      "consist of alphanumeric characters" % (key, _goquote(v)))
        reqs.append(req)
    return reqs


def label_match(reqs, obj):
    labels = _get_path(obj, "metadata.labels", None) or {}
    for op, key, val in reqs:
        have = key in labels
        if op == "=" and not (have and labels[key] == val):
            return False
        if op == "!=" and have and labels[key] == val:
            return False
        if op == "exists" and not have:
            return False
        if op == "!" and have:
            return False
        if op == "in" and not (have and labels[key] in val):
            return False
        if op == "notin" and have and labels[key] in val:
            return False
    return True


def parse_field_selector(s, info):
    """fields.ParseSelector: comma-AND of k=v, k==v, k!=v on supported fields."""
    reqs = []
    if not s.strip():
        return reqs
    for term in s.split(","):
        m = re.fullmatch(r"([^=!]+)(!=|==|=)(.*)", term)
        if not m:
            raise err_bad_request("invalid selector: '%s'; can't understand '%s'" % (s, term))
        field, op, val = m.group(1).strip(), m.group(2), m.group(3)
        if field not in info.field_labels:
            if info.builtin:
                raise err_bad_request("field label not supported: " + field)
            raise err_bad_request("%s is not a known field selector: only \"metadata.name\", "
                                  "\"metadata.namespace\"" % _goquote(field))
        reqs.append((field, op != "!=", val))
    return reqs


def field_match(reqs, info, obj):
    for field, equal, val in reqs:
        if (info.field_labels[field](obj) == val) != equal:
            return False
    return True


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def dumps(obj):
    # Go's encoding/json: compact, UTF-8 (no \u escapes for non-ASCII).
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch: objects merge recursively, null deletes,
    anything else (arrays included) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def _parse_bool(q, name, default=False):
    """strconv.ParseBool, as the query-parameter converter uses it."""
    if name not in q:
        return default
    v = q[name]
    if v in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if v in ("0", "f", "F", "false", "FALSE", "False", ""):
        return False
    raise err_bad_request("%s: invalid value %s: strconv.ParseBool: parsing %s: invalid syntax"
                          % (name, _goquote(v), _goquote(v)))


def _parse_rv(value, what="resourceVersion"):
    try:
        rv = int(value)
        if rv < 0:
            raise ValueError
        return rv
    except ValueError:
        raise APIError(400, "invalid %s: %s" % (what, _goquote(value)), "BadRequest")


def encode_continue(rv, start_key):
    """storage.EncodeContinue: base64url (no padding) of JSON {v, rv, start}."""
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start_key},
                     separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_continue(token):
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        d = json.loads(raw)
        if d.get("v") != "meta.k8s.io/v1":
            raise ValueError("server does not recognize this encoded key")
        rv, start = int(d["rv"]), d["start"]
        if not isinstance(start, str) or not start or "/.." in "/" + start:
            raise ValueError("continue key is not valid")
        return rv, start
    except (ValueError, KeyError, TypeError) as e:
        raise err_bad_request("invalid continue token: %s" % e)


def _validate_list_options(q, watch):
    """metainternalversion validation.ValidateListOptions (422 Invalid)."""
    errs = []
    match = q.get("resourceVersionMatch", "")
    rv = q.get("resourceVersion", "")
    send_initial = q.get("sendInitialEvents")
    if send_initial is not None:
        if not watch:
            errs.append(("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"))
        else:
            if match != "NotOlderThan":
                errs.append(("resourceVersionMatch", "Forbidden: sendInitialEvents requires "
                             "setting resourceVersionMatch to NotOlderThan"))
            if not _parse_bool(q, "allowWatchBookmarks") and _parse_bool(q, "sendInitialEvents"):
                errs.append(("allowWatchBookmarks", "Forbidden: sendInitialEvents requires "
                             "setting allowWatchBookmarks to true"))
    elif match:
        if watch:
            errs.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden "
                         "for watch unless sendInitialEvents is provided"))
        elif match not in ("NotOlderThan", "Exact"):
            errs.append(("resourceVersionMatch", 'Unsupported value: %s: supported values: '
                         '"Exact", "NotOlderThan", ""' % _goquote(match)))
        elif not rv:
            errs.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden "
                         "unless resourceVersion is provided"))
        elif q.get("continue"):
            errs.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden "
                         "when continue is provided"))
        elif match == "Exact" and rv == "0":
            errs.append(("resourceVersionMatch", 'Forbidden: resourceVersionMatch "exact" is '
                         'forbidden for resourceVersion "0"'))
    if errs:
        raise err_invalid("ListOptions", "meta.k8s.io", "", errs)
