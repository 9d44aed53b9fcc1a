/* Asking the API server about troupe's own callers, as Kubernetes components
 * that delegate authentication and authorisation do (k8s.io/apiserver's
 * delegating authenticator and authorizer): a TokenReview
 * (authentication.k8s.io/v1) says who a bearer token belongs to, and a
 * SubjectAccessReview (authorization.k8s.io/v1) whether that user may use a
 * non-resource path such as /metrics. The ops listener (src/extender) calls
 * these for requests to /debug/... and /metrics; it caches what they say.
 *
 * Each review is one blocking POST on the calling thread (cache__api_request,
 * its own curl handle): the ops listener runs a thread per connection, and its
 * cache keeps the reviews rare, so nothing is gained by sharing the binder's
 * multi handle. Reviews are not stored by the API server (it answers 201 with
 * the status filled in), so nothing here has a lasting effect in the cluster.
 * Here too: cache__api_may, the SelfSubjectAccessReview by which the event
 * recorder and the PodGroup status writer check troupe's optional
 * permissions. The one request here that has a lasting effect is the pod
 * delete at the end, which shares the same one-shot request.
 */
#include "cache/api_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/limits.h"
#include "common/strbuf.h"
#include "common/util.h"

#define TOKEN_REVIEW_PATH "/apis/authentication.k8s.io/v1/tokenreviews"
#define ACCESS_REVIEW_PATH "/apis/authorization.k8s.io/v1/subjectaccessreviews"
#define SELF_REVIEW_PATH "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

enum {
	/* A review's answer: the spec echoed back and a short status; a longer
	 * answer is not a review (and is cut, then fails to parse). */
	REVIEW_ANSWER_MAX = 256 * 1024,
	/* A whole review may take this long; the connection, 5 s of it. A scrape
	 * waits for it, so it stays short of Prometheus' default 10 s timeout. */
	REVIEW_TIMEOUT_MS = 8000,
};

/* A review's answer: its body, and whether it was cut at the cap. */
struct answer {
	struct strbuf body;
	bool cut;
};

/* Send <method> <path> with <body> (JSON; NULL: none), keeping at most <max>
 * bytes of the answer (0: REVIEW_ANSWER_MAX), with the reviews' time limit;
 * <abort> as in struct cache__api_call. The answer's status in <status> and
 * its body in <a>. Returns as cache__api_request. */
static int send_request(struct cache_api *api, const char *method, const char *path,
			const char *body, size_t max, unsigned timeout_ms, const bool *abort,
			long *status, struct answer *a, char *err, size_t errlen)
{
	struct cache__api_call call = {
		.method = method, .path = path, .content_type = "application/json",
		.body = body, .timeout_ms = timeout_ms, .max_answer = max ? max : REVIEW_ANSWER_MAX,
		.abort = abort,
	};
	int ret = cache__api_request(api, &call, &a->body, err, errlen);

	*status = call.status;
	a->cut = call.cut;
	return ret;
}

static int post(struct cache_api *api, const char *path, const char *body, long *status,
		struct answer *a, char *err, size_t errlen)
{
	return send_request(api, "POST", path, body, 0, REVIEW_TIMEOUT_MS, NULL, status, a, err,
			    errlen);
}

/* The answer <a> to a review of <kind>, parsed; NULL with <err> set when the
 * server refused the review (a Status) or said something else. */
static cJSON *answer_parse(const char *kind, long status, const struct answer *a, char *err,
			   size_t errlen)
{
	char text[TROUPE_MESSAGE_BUF + 32];
	cJSON *root = NULL;
	const char *k;

	if (status != 200 && status != 201) {
		/* 403: troupe may not create the review (its RBAC lacks it). */
		cache__api_status_text(status, a->body.buf, a->body.len, text, sizeof(text));
		snprintf(err, errlen, "%s refused: %s", kind, text);
		return NULL;
	}
	if (!a->cut && a->body.buf)
		root = cJSON_ParseWithLength(a->body.buf, a->body.len);
	k = json_str(root, "kind");
	if (!cJSON_IsObject(root) || (k && strcmp(k, kind) != 0) || !json_obj(root, "status")) {
		snprintf(err, errlen, "the answer is not a %s", kind);
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

int cache_api_token_review(struct cache_api *api, const char *token,
			   struct cache_token_review *out, char *err, size_t errlen)
{
	struct strbuf req = STRBUF_INIT;
	struct answer a = { STRBUF_INIT, false };
	const cJSON *st, *user, *ok;
	const char *s;
	cJSON *root = NULL;
	long status = 0;
	int ret;

	memset(out, 0, sizeof(*out));
	strbuf_puts(&req, "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\","
		    "\"spec\":{\"token\":");
	strbuf_put_json_str(&req, token, strlen(token));
	strbuf_puts(&req, "}}");
	ret = -ENOMEM;
	if (strbuf_failed(&req)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	ret = post(api, TOKEN_REVIEW_PATH, req.buf, &status, &a, err, errlen);
	if (ret < 0)
		goto out;
	ret = -EPROTO;
	root = answer_parse("TokenReview", status, &a, err, errlen);
	if (!root)
		goto out;
	st = json_obj(root, "status");
	ok = cJSON_GetObjectItemCaseSensitive(st, "authenticated");
	user = json_obj(st, "user");
	ret = 0;
	/* authenticated is omitted when false (omitempty). */
	if (!cJSON_IsTrue(ok) || !user || !(s = json_str(user, "username")) || !*s) {
		s = json_str(st, "error");
		snprintf(out->error, sizeof(out->error), "%s",
			 s && *s ? s : "the token is not valid");
		goto out;
	}
	snprintf(out->username, sizeof(out->username), "%s", s);
	s = json_str(user, "uid");
	snprintf(out->uid, sizeof(out->uid), "%s", s ? s : "");
	out->user_json = cJSON_PrintUnformatted(user);
	if (!out->user_json) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
		goto out;
	}
	out->authenticated = true;
out:
	cJSON_Delete(root);
	strbuf_fini(&a.body);
	strbuf_fini(&req);
	return ret;
}

void cache_token_review_fini(struct cache_token_review *r)
{
	free(r->user_json);
	r->user_json = NULL;
}

/* Append the subject of a SubjectAccessReview's spec, taken from a
 * TokenReview's status.user: username becomes user; uid, groups and extra
 * keep their names. */
static int put_subject(struct strbuf *sb, const char *user_json)
{
	cJSON *u = cJSON_Parse(user_json);
	static const char *const keep[] = { "uid", "groups", "extra" };
	const char *name = json_str(u, "username");
	int ret = -EINVAL;

	if (!cJSON_IsObject(u) || !name || !*name)
		goto out;
	strbuf_puts(sb, "\"user\":");
	strbuf_put_json_str(sb, name, strlen(name));
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
		cJSON *v = cJSON_GetObjectItemCaseSensitive(u, keep[i]);
		char *text;

		if (!v || cJSON_IsNull(v))
			continue;
		text = cJSON_PrintUnformatted(v);
		if (!text) {
			ret = -ENOMEM;
			goto out;
		}
		strbuf_printf(sb, ",\"%s\":%s", keep[i], text);
		cJSON_free(text);
	}
	ret = 0;
out:
	cJSON_Delete(u);
	return ret;
}

int cache_api_subject_access_review(struct cache_api *api, const char *user_json,
				    const char *path, const char *verb, bool *allowed,
				    char *reason, size_t reasonlen, char *err, size_t errlen)
{
	struct strbuf req = STRBUF_INIT;
	struct answer a = { STRBUF_INIT, false };
	const cJSON *st, *ok;
	const char *why;
	cJSON *root = NULL;
	long status = 0;
	int ret;

	*allowed = false;
	if (reasonlen)
		reason[0] = '\0';
	strbuf_puts(&req, "{\"apiVersion\":\"authorization.k8s.io/v1\","
		    "\"kind\":\"SubjectAccessReview\",\"spec\":{\"nonResourceAttributes\":"
		    "{\"path\":");
	strbuf_put_json_str(&req, path, strlen(path));
	strbuf_puts(&req, ",\"verb\":");
	strbuf_put_json_str(&req, verb, strlen(verb));
	strbuf_puts(&req, "},");
	ret = put_subject(&req, user_json);
	strbuf_puts(&req, "}}");
	if (ret == -EINVAL) {
		snprintf(err, errlen, "the user has no username");
		goto out;
	}
	if (ret < 0 || strbuf_failed(&req)) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
		goto out;
	}
	ret = post(api, ACCESS_REVIEW_PATH, req.buf, &status, &a, err, errlen);
	if (ret < 0)
		goto out;
	ret = -EPROTO;
	root = answer_parse("SubjectAccessReview", status, &a, err, errlen);
	if (!root)
		goto out;
	st = json_obj(root, "status");
	ok = cJSON_GetObjectItemCaseSensitive(st, "allowed");
	if (!cJSON_IsBool(ok)) {
		snprintf(err, errlen, "the answer is not a SubjectAccessReview (no status.allowed)");
		goto out;
	}
	*allowed = cJSON_IsTrue(ok);
	/* RBAC says nothing when no rule allows; an evaluation error (a binding
	 * to a missing role, a webhook down) explains a denial too. */
	why = json_str(st, "reason");
	if (!why || !*why)
		why = json_str(st, "evaluationError");
	if (why && reasonlen)
		snprintf(reason, reasonlen, "%s", why);
	ret = 0;
out:
	cJSON_Delete(root);
	strbuf_fini(&a.body);
	strbuf_fini(&req);
	return ret;
}

/* ---- troupe's own optional permissions ----------------------------------------
 *
 * The event recorder and the PodGroup status writer ask once whether troupe
 * may do what they need, only to warn: a SelfSubjectAccessReview, as the
 * informer's readiness check posts for the required ones (it on the multi
 * handle, these here, blocking their own thread).
 */

int cache__api_may(struct cache_api *api, const struct cache_permission *perm,
		   unsigned timeout_ms, const bool *abort, char *reason, size_t reasonlen,
		   char *err, size_t errlen)
{
	struct answer a = { STRBUF_INIT, false };
	char *body = cache__access_review_of(perm);
	bool allowed = false;
	cJSON *root = NULL;
	long status = 0;
	int ret = -ENOMEM;

	if (reasonlen)
		reason[0] = '\0';
	if (!body) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	ret = send_request(api, "POST", SELF_REVIEW_PATH, body, 0, timeout_ms, abort, &status, &a,
			   err, errlen);
	if (ret < 0)
		goto out;
	ret = -EPROTO;
	root = answer_parse("SelfSubjectAccessReview", status, &a, err, errlen);
	if (!root)
		goto out;
	if (cache__access_review_parse(a.body.buf, a.body.len, &allowed, reason, reasonlen) < 0) {
		snprintf(err, errlen, "the answer is not a SelfSubjectAccessReview "
			 "(no status.allowed)");
		goto out;
	}
	ret = allowed ? 1 : 0;
out:
	cJSON_Delete(root);
	strbuf_fini(&a.body);
	free(body);
	return ret;
}

/* ---- Deleting a pod -----------------------------------------------------------
 *
 * Not a review, but the same kind of rare, blocking request: the gang recovery
 * (extender/recover.c) deletes the bound members of a gang it cannot complete,
 * so their controller starts the gang again. The UID precondition makes sure
 * only the pod that was planned goes, never a re-created one of the same name.
 */

int cache_api_delete_pod(struct cache_api *api, const char *ns, const char *name,
			 const char *uid, char *err, size_t errlen)
{
	struct answer a = { STRBUF_INIT, false };
	struct strbuf path = STRBUF_INIT, body = STRBUF_INIT;
	long status = 0;
	int ret;

	strbuf_printf(&path, "/api/v1/namespaces/%s/pods/%s", ns, name);
	strbuf_puts(&body, "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\","
		    "\"preconditions\":{\"uid\":");
	strbuf_put_json_str(&body, uid, strlen(uid));
	strbuf_puts(&body, "}}");
	if (strbuf_failed(&path) || strbuf_failed(&body)) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	ret = send_request(api, "DELETE", path.buf, body.buf, 0, REVIEW_TIMEOUT_MS, NULL, &status,
			   &a, err, errlen);
	if (ret < 0)
		goto out;
	if (status == 200 || status == 202) {
		ret = 0;
	} else if (status == 404) {
		ret = -ENOENT;
		snprintf(err, errlen, "the pod is gone already");
	} else {
		/* 409: another pod of that name now. */
		ret = status == 409 ? -ESTALE : status == 403 ? -EACCES : -EIO;
		cache__api_status_text(status, a.body.buf, a.body.len, err, errlen);
	}
out:
	strbuf_fini(&a.body);
	strbuf_fini(&path);
	strbuf_fini(&body);
	return ret;
}

int cache_api_get(struct cache_api *api, const char *path, size_t max, long *status,
		  char **body, size_t *len, char *err, size_t errlen)
{
	struct answer a = { STRBUF_INIT, false };
	int ret = send_request(api, "GET", path, NULL, max, REVIEW_TIMEOUT_MS, NULL, status, &a,
			       err, errlen);

	if (ret == 0 && a.cut) {
		snprintf(err, errlen, "GET %.300s: the answer is larger than %zu bytes", path, max);
		ret = -E2BIG;
	}
	*body = NULL;
	*len = 0;
	if (ret == 0)
		*body = strbuf_take(&a.body, len);
	strbuf_fini(&a.body);
	return ret;
}
