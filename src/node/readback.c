/* Read-back: telling troupe which devices each pod's containers really got.
 *
 * The kubelet asks the device plugin which devices to give, and the answer may
 * differ from troupe's choice (troupe.io/gpu-ids). What it gave is in the
 * PodResources API (podresources.c); here those ids become device indices of
 * this node (a UUID NVML reported, or an index) and are written on the pod as
 * troupe.io/gpu-ids-actual, which troupe's cache counts over its own choice.
 *
 * Only pods whose spec.nodeName is this node are written (the kubelet's list
 * is this node's, but the pod is read again to be sure it is the same one),
 * and only when the value differs, by a merge patch of that one annotation.
 * A pod whose ids name no GPU of this node is skipped with the reason logged:
 * a wrong value would be worse than none.
 */
#include "node/node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cache/api.h"
#include "common/log.h"
#include "common/strbuf.h"

enum { READBACK_TIMEOUT_MS = 10000 };

int node_ids_to_mask(const struct node_gpus *g, char *const *ids, size_t n, uint64_t *mask,
		     char *err, size_t errlen)
{
	*mask = 0;
	for (size_t k = 0; k < n; k++) {
		int at = -1;
		char *end = NULL;
		unsigned long idx;

		for (unsigned i = 0; i < g->n && at < 0; i++)
			if (g->gpu[i].uuid[0] && strcmp(g->gpu[i].uuid, ids[k]) == 0)
				at = (int)i;
		if (at < 0 && ids[k][0] >= '0' && ids[k][0] <= '9') {
			idx = strtoul(ids[k], &end, 10);
			if (*end == '\0' && idx < g->n)
				at = (int)idx;
		}
		if (at < 0) {
			snprintf(err, errlen, "device id \"%s\" is no GPU of this node (no UUID NVML "
				 "reported, no index below %u)", ids[k], g->n);
			return -ENOENT;
		}
		if (*mask & (1ULL << at)) {
			snprintf(err, errlen, "device %d listed twice", at);
			return -EINVAL;
		}
		*mask |= 1ULL << at;
	}
	return 0;
}

/* Read pod <ns>/<name>: its node and its read-back annotation (copied into
 * <node>, <actual>). 0, -ENOENT when gone, or -EIO. */
static int pod_get(struct cache_api *api, const char *ns, const char *name, char *node,
		   size_t nodelen, char *actual, size_t actuallen, char *err, size_t errlen)
{
	struct strbuf path, answer;
	cJSON *doc = NULL;
	const cJSON *v;
	long status = 0;
	int ret;

	strbuf_init(&path);
	strbuf_init(&answer);
	strbuf_printf(&path, "/api/v1/namespaces/%s/pods/%s", ns, name);
	ret = strbuf_failed(&path) ? -ENOMEM
		: cache_api_call(api, "GET", path.buf, NULL, NULL, READBACK_TIMEOUT_MS, &answer,
				 &status, err, errlen);
	if (ret < 0)
		goto out;
	if (status == 404) {
		ret = -ENOENT;
		goto out;
	}
	if (status != 200 || !(doc = cJSON_ParseWithLength(answer.buf ? answer.buf : "",
							    answer.len))) {
		snprintf(err, errlen, "GET pod %s/%s: HTTP %ld", ns, name, status);
		ret = -EIO;
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "spec"),
					     "nodeName");
	snprintf(node, nodelen, "%s", cJSON_IsString(v) ? v->valuestring : "");
	v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(doc, "metadata"), "annotations"), NODE_ANN_ACTUAL);
	snprintf(actual, actuallen, "%s", cJSON_IsString(v) ? v->valuestring : "");
	ret = 0;
out:
	cJSON_Delete(doc);
	strbuf_fini(&path);
	strbuf_fini(&answer);
	return ret;
}

static int pod_patch(struct cache_api *api, const char *ns, const char *name, const char *value,
		     char *err, size_t errlen)
{
	struct strbuf path, body, answer;
	long status = 0;
	int ret;

	strbuf_init(&path);
	strbuf_init(&body);
	strbuf_init(&answer);
	strbuf_printf(&path, "/api/v1/namespaces/%s/pods/%s", ns, name);
	strbuf_printf(&body, "{\"metadata\":{\"annotations\":{\"" NODE_ANN_ACTUAL "\":\"%s\"}}}",
		      value);
	ret = strbuf_failed(&path) || strbuf_failed(&body) ? -ENOMEM
		: cache_api_call(api, "PATCH", path.buf, "application/merge-patch+json", body.buf,
				 READBACK_TIMEOUT_MS, &answer, &status, err, errlen);
	if (ret == 0 && status != 200) {
		char text[NODE_ERR_BUF];

		cache_api_status_text(status, answer.buf ? answer.buf : "", answer.len, text,
				      sizeof(text));
		snprintf(err, errlen, "PATCH pod %s/%s: %s", ns, name, text);
		ret = status == 404 ? -ENOENT : -EIO;
	}
	strbuf_fini(&path);
	strbuf_fini(&body);
	strbuf_fini(&answer);
	return ret;
}

int node_readback(struct cache_api *api, const char *node, const struct node_gpus *g,
		  const struct node_pod_devices *pods, size_t n, unsigned *written,
		  unsigned *skipped, char *err, size_t errlen)
{
	*written = 0;
	*skipped = 0;
	for (size_t i = 0; i < n; i++) {
		const struct node_pod_devices *p = &pods[i];
		char why[NODE_ERR_BUF], on[256], have[256], want[192];
		uint64_t mask;
		int rc;

		if (node_ids_to_mask(g, p->ids, p->n_ids, &mask, why, sizeof(why)) < 0) {
			log_warn("node", "pod %s/%s: not reading its devices back: %s", p->ns, p->name,
				 why);
			(*skipped)++;
			continue;
		}
		cache_devices_format(mask, want, sizeof(want));
		rc = pod_get(api, p->ns, p->name, on, sizeof(on), have, sizeof(have), err, errlen);
		if (rc == -ENOENT) {
			(*skipped)++;
			continue;
		}
		if (rc < 0)
			return rc;
		if (strcmp(on, node) != 0) {
			log_warn("node", "pod %s/%s is on node \"%s\", not %s: its devices are not "
				 "read back here", p->ns, p->name, on, node);
			(*skipped)++;
			continue;
		}
		if (strcmp(have, want) == 0)
			continue;
		rc = pod_patch(api, p->ns, p->name, want, err, errlen);
		if (rc == -ENOENT) {
			(*skipped)++;
			continue;
		}
		if (rc < 0)
			return rc;
		log_info("node", "pod %s/%s got devices %s: written as " NODE_ANN_ACTUAL, p->ns,
			 p->name, want);
		(*written)++;
	}
	return 0;
}
