/* What troupe must be allowed to do in the cluster, and reading what the API
 * server says about it: the permissions troupe checks with
 * SelfSubjectAccessReviews (one per verb and resource, so that a log line can
 * name exactly the one missing), the review troupe posts for each, the answer's
 * status, and the message of a Status the server sends with a refusal.
 *
 * Pure functions: the informer sends the reviews and keeps what they said.
 */
#include "cache/api_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/strbuf.h"
#include "common/util.h"

/* Every request troupe makes, by the permission it needs. The binder posts
 * pods/<name>/binding, never the legacy namespaces/<ns>/bindings; nothing gets
 * one object, so no "get" is needed. */
static const struct cache_permission permissions[CACHE_PERM_COUNT] = {
	[CACHE_PERM_LIST_NODES] = { "list", "", "nodes", "", "list nodes" },
	[CACHE_PERM_WATCH_NODES] = { "watch", "", "nodes", "", "watch nodes" },
	[CACHE_PERM_LIST_PODS] = { "list", "", "pods", "", "list pods" },
	[CACHE_PERM_WATCH_PODS] = { "watch", "", "pods", "", "watch pods" },
	[CACHE_PERM_BIND_PODS] = { "create", "", "pods", "binding", "create pods/binding" },
	[CACHE_PERM_LIST_PODGROUPS] = { "list", "scheduling.x-k8s.io", "podgroups", "",
					"list podgroups" },
	[CACHE_PERM_WATCH_PODGROUPS] = { "watch", "scheduling.x-k8s.io", "podgroups", "",
					 "watch podgroups" },
	/* extender/recover.c deletes the bound members of a gang it rolls back. */
	[CACHE_PERM_DELETE_PODS] = { "delete", "", "pods", "", "delete pods" },
};

/* The event recorder's (events.c): a POST per new Event, a PATCH per series
 * update. Missing, troupe warns and its events fail, nothing else. */
static const struct cache_permission optional_permissions[CACHE_OPT_PERM_COUNT] = {
	[CACHE_OPT_PERM_CREATE_EVENTS] = { "create", "events.k8s.io", "events", "",
					   "create events" },
	[CACHE_OPT_PERM_PATCH_EVENTS] = { "patch", "events.k8s.io", "events", "",
					  "patch events" },
	/* The PodGroup status writer's (podgroup_status_writer.c), as
	 * scheduler-plugins' controller's RBAC marker names them. Missing, the
	 * status is not written, nothing else. */
	[CACHE_OPT_PERM_GET_PODGROUP_STATUS] = { "get", "scheduling.x-k8s.io", "podgroups",
						 "status", "get podgroups/status" },
	[CACHE_OPT_PERM_PATCH_PODGROUP_STATUS] = { "patch", "scheduling.x-k8s.io", "podgroups",
						   "status", "patch podgroups/status" },
	/* The informer's lists and watches of other schedulers' PodGroups
	 * (informer.c, kinds[]): a 403 disables that stream, nothing else. */
	[CACHE_OPT_PERM_LIST_PG_UPSTREAM] = { "list", "scheduling.k8s.io", "podgroups", "",
					      "list podgroups.scheduling.k8s.io" },
	[CACHE_OPT_PERM_WATCH_PG_UPSTREAM] = { "watch", "scheduling.k8s.io", "podgroups", "",
					       "watch podgroups.scheduling.k8s.io" },
	[CACHE_OPT_PERM_LIST_PG_VOLCANO] = { "list", "scheduling.volcano.sh", "podgroups", "",
					     "list podgroups.scheduling.volcano.sh" },
	[CACHE_OPT_PERM_WATCH_PG_VOLCANO] = { "watch", "scheduling.volcano.sh", "podgroups", "",
					      "watch podgroups.scheduling.volcano.sh" },
	[CACHE_OPT_PERM_LIST_PG_KAI] = { "list", "scheduling.run.ai", "podgroups", "",
					 "list podgroups.scheduling.run.ai" },
	[CACHE_OPT_PERM_WATCH_PG_KAI] = { "watch", "scheduling.run.ai", "podgroups", "",
					  "watch podgroups.scheduling.run.ai" },
	[CACHE_OPT_PERM_LIST_Q_VOLCANO] = { "list", "scheduling.volcano.sh", "queues", "",
					    "list queues.scheduling.volcano.sh" },
	[CACHE_OPT_PERM_WATCH_Q_VOLCANO] = { "watch", "scheduling.volcano.sh", "queues", "",
					     "watch queues.scheduling.volcano.sh" },
	[CACHE_OPT_PERM_LIST_Q_KAI] = { "list", "scheduling.run.ai", "queues", "",
					"list queues.scheduling.run.ai" },
	[CACHE_OPT_PERM_WATCH_Q_KAI] = { "watch", "scheduling.run.ai", "queues", "",
					 "watch queues.scheduling.run.ai" },
	[CACHE_OPT_PERM_LIST_DRA_SLICES] = { "list", "resource.k8s.io", "resourceslices", "",
					     "list resourceslices" },
	[CACHE_OPT_PERM_WATCH_DRA_SLICES] = { "watch", "resource.k8s.io", "resourceslices", "",
					      "watch resourceslices" },
	[CACHE_OPT_PERM_LIST_DRA_CLAIMS] = { "list", "resource.k8s.io", "resourceclaims", "",
					     "list resourceclaims" },
	[CACHE_OPT_PERM_WATCH_DRA_CLAIMS] = { "watch", "resource.k8s.io", "resourceclaims", "",
					      "watch resourceclaims" },
};

const struct cache_permission *cache_permission_get(enum cache_perm p)
{
	return (unsigned)p < CACHE_PERM_COUNT ? &permissions[p] : NULL;
}

const struct cache_permission *cache_optional_permission_get(enum cache_optional_perm p)
{
	return (unsigned)p < CACHE_OPT_PERM_COUNT ? &optional_permissions[p] : NULL;
}

char *cache__access_review_new(enum cache_perm p)
{
	return cache__access_review_of(cache_permission_get(p));
}

char *cache__access_review_of(const struct cache_permission *perm)
{
	struct strbuf sb = STRBUF_INIT;

	if (!perm) {
		errno = EINVAL;
		return NULL;
	}
	strbuf_puts(&sb, "{\"apiVersion\":\"authorization.k8s.io/v1\","
		    "\"kind\":\"SelfSubjectAccessReview\",\"spec\":{\"resourceAttributes\":"
		    "{\"verb\":");
	strbuf_put_json_str(&sb, perm->verb, strlen(perm->verb));
	if (perm->group[0]) {
		strbuf_puts(&sb, ",\"group\":");
		strbuf_put_json_str(&sb, perm->group, strlen(perm->group));
	}
	strbuf_puts(&sb, ",\"resource\":");
	strbuf_put_json_str(&sb, perm->resource, strlen(perm->resource));
	if (perm->subresource[0]) {
		strbuf_puts(&sb, ",\"subresource\":");
		strbuf_put_json_str(&sb, perm->subresource, strlen(perm->subresource));
	}
	strbuf_puts(&sb, "}}}");
	if (strbuf_failed(&sb)) {
		strbuf_fini(&sb);
		errno = ENOMEM;
		return NULL;
	}
	return strbuf_take(&sb, NULL);
}

int cache__access_review_parse(const char *body, size_t len, bool *allowed, char *reason,
			       size_t reasonlen)
{
	cJSON *root = NULL;
	const cJSON *status, *ok;
	const char *kind, *why;
	int ret = -EINVAL;

	if (reasonlen)
		reason[0] = '\0';
	if (!body || !len)
		goto out;
	root = cJSON_ParseWithLength(body, len);
	if (!cJSON_IsObject(root))
		goto out;
	/* A Status (a refusal, an error from a proxy) is not an answer. */
	kind = json_str(root, "kind");
	if (kind && strcmp(kind, "SelfSubjectAccessReview") != 0)
		goto out;
	status = json_obj(root, "status");
	ok = cJSON_GetObjectItemCaseSensitive(status, "allowed");
	if (!cJSON_IsBool(ok))
		goto out;
	*allowed = cJSON_IsTrue(ok);
	/* Why, when the authorizer says; an evaluation error (a binding naming a
	 * role that does not exist, a webhook down) explains a denial too. */
	why = json_str(status, "reason");
	if (!why || !*why)
		why = json_str(status, "evaluationError");
	if (why && reasonlen)
		snprintf(reason, reasonlen, "%s", why);
	ret = 0;
out:
	cJSON_Delete(root);
	return ret;
}

bool cache__status_message(const char *body, size_t len, char *out, size_t outlen)
{
	cJSON *root = NULL;
	const char *msg;
	bool found = false;

	if (outlen)
		out[0] = '\0';
	if (!body || !len || !outlen)
		goto out;
	root = cJSON_ParseWithLength(body, len);
	msg = json_str(root, "message");
	if (msg && *msg) {
		snprintf(out, outlen, "%s", msg);
		found = true;
	}
out:
	cJSON_Delete(root);
	return found;
}
