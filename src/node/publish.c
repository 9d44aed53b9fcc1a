/* Writing what troupe-node found onto its own Node.
 *
 * The Node is read first (GET), and the annotations are patched (a JSON merge
 * patch of metadata.annotations, nothing else) only when one of them differs:
 * a steady node costs the API server one GET per interval and no write, and
 * the Node's resourceVersion, which every watcher of nodes sees move, stays
 * put. troupe-node writes only its own annotations (NODE_ANN_*), and only on
 * the Node it is told it runs on; the chart's ValidatingAdmissionPolicy holds
 * it to that on the API server's side as well.
 */
#include "node/node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cache/api.h"
#include "cache/cache.h"
#include "common/strbuf.h"

enum { PUBLISH_TIMEOUT_MS = 10000 };

/* The annotation <key> of the Node JSON in <body>, or NULL. */
static const char *annotation(const cJSON *node, const char *key)
{
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(node, "metadata"), "annotations");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool same(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

int node_publish(struct cache_api *api, const char *node, const struct node_gpus *g,
		 bool *changed, char *err, size_t errlen)
{
	struct strbuf path, answer, topo, uuids, patch;
	cJSON *doc = NULL;
	long status = 0;
	char text[NODE_ERR_BUF], unhealthy[CACHE_DEVICES_BUF];
	int ret = -ENOMEM;

	*changed = false;
	strbuf_init(&path);
	strbuf_init(&answer);
	strbuf_init(&topo);
	strbuf_init(&uuids);
	strbuf_init(&patch);
	/* A node name is a DNS subdomain: nothing in it needs escaping. */
	strbuf_printf(&path, "/api/v1/nodes/%s", node);
	node_topo_render(g, &topo);
	node_uuids_render(g, &uuids);
	if (strbuf_failed(&path) || strbuf_failed(&topo) || strbuf_failed(&uuids))
		goto nomem;
	ret = cache_api_call(api, "GET", path.buf, NULL, NULL, PUBLISH_TIMEOUT_MS, &answer,
			     &status, err, errlen);
	if (ret < 0)
		goto out;
	if (status != 200) {
		snprintf(err, errlen, "GET node %s: HTTP %ld%s", node, status,
			 status == 404 ? " (no such node: is --node right?)" :
			 status == 403 ? " (troupe-node may not read its Node: see the chart's RBAC)"
				       : "");
		ret = -EIO;
		goto out;
	}
	doc = cJSON_ParseWithLength(answer.buf ? answer.buf : "", answer.len);
	if (!doc) {
		snprintf(err, errlen, "GET node %s: the answer is not JSON", node);
		ret = -EPROTO;
		goto out;
	}
	cache_devices_format(g->unhealthy, unhealthy, sizeof(unhealthy));
	/* No unhealthy GPU: the annotation is written only to clear one. */
	if (same(annotation(doc, NODE_ANN_TOPOLOGY), topo.buf) &&
	    same(annotation(doc, NODE_ANN_UUIDS), uuids.buf ? uuids.buf : "") &&
	    same(annotation(doc, NODE_ANN_SOURCE), g->source) &&
	    (same(annotation(doc, NODE_ANN_UNHEALTHY), unhealthy) ||
	     (!g->unhealthy && !annotation(doc, NODE_ANN_UNHEALTHY)))) {
		ret = 0;
		goto out;
	}
	strbuf_puts(&patch, "{\"metadata\":{\"annotations\":{\"" NODE_ANN_TOPOLOGY "\":");
	strbuf_put_json_str(&patch, topo.buf, topo.len);
	strbuf_puts(&patch, ",\"" NODE_ANN_UUIDS "\":");
	strbuf_put_json_str(&patch, uuids.buf ? uuids.buf : "", uuids.len);
	strbuf_puts(&patch, ",\"" NODE_ANN_SOURCE "\":");
	strbuf_put_json_str(&patch, g->source, strlen(g->source));
	strbuf_puts(&patch, ",\"" NODE_ANN_UNHEALTHY "\":");
	strbuf_put_json_str(&patch, unhealthy, strlen(unhealthy));
	strbuf_puts(&patch, "}}}");
	if (strbuf_failed(&patch))
		goto nomem;
	strbuf_fini(&answer);
	strbuf_init(&answer);
	ret = cache_api_call(api, "PATCH", path.buf, "application/merge-patch+json", patch.buf,
			     PUBLISH_TIMEOUT_MS, &answer, &status, err, errlen);
	if (ret < 0)
		goto out;
	if (status != 200) {
		cache_api_status_text(status, answer.buf ? answer.buf : "", answer.len, text,
				      sizeof(text));
		snprintf(err, errlen, "PATCH node %s: %s", node, text);
		ret = -EIO;
		goto out;
	}
	*changed = true;
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory building the annotations");
	ret = -ENOMEM;
out:
	cJSON_Delete(doc);
	strbuf_fini(&path);
	strbuf_fini(&answer);
	strbuf_fini(&topo);
	strbuf_fini(&uuids);
	strbuf_fini(&patch);
	return ret;
}
