/* Loading a cluster snapshot file: the embedded default that stands in for a
 * live API server. The file is what `kubectl get nodes,pods,podgroups -A -o
 * json` (or -o yaml) prints: a v1 List whose items carry their kind. A stream of
 * several YAML documents, each a List or a single object, is accepted too.
 * Nodes are applied before pods so that accounting lands on known nodes.
 */
#include "cache/cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "common/yamljson.h"

enum { SNAPSHOT_MAX_BYTES = 1024 * 1024 * 1024 };

struct load_counts {
	size_t nodes, pods, podgroups, skipped;
};

/* Apply the objects of one kind found in <doc> (a List or a single object). */
static void apply_kind(struct cache *c, const cJSON *doc, const char *want,
		       struct load_counts *n)
{
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(doc, "items");
	const char *kind = json_str(doc, "kind");
	char err[CACHE_ERR_LEN];
	const cJSON *it;
	bool is_list = cJSON_IsArray(items);

	if (!is_list && (!kind || strcmp(kind, want) != 0))
		return;
	for (it = is_list ? items->child : doc; it; it = is_list ? it->next : NULL) {
		const char *k;

		k = json_str(it, "kind");
		if (!k || strcmp(k, want) != 0)
			continue;
		if (strcmp(want, "Node") == 0) {
			struct cache_node *node = cache_node_parse(it, cache_get_opts(c), err,
								   sizeof(err));

			if (!node) {
				log_warn("snapshot", "skipping a Node: %s", err);
				n->skipped++;
			} else if (cache_node_upsert(c, node) == 0) {
				n->nodes++;
			}
		} else if (strcmp(want, "Pod") == 0) {
			struct cache_pod *pod = cache_pod_parse(it, cache_get_opts(c), err,
								sizeof(err));

			if (!pod) {
				log_warn("snapshot", "skipping a Pod: %s", err);
				n->skipped++;
				continue;
			}
			if (pod->demand_error)
				log_warn("snapshot", "pod %s/%s: %s; it holds no GPUs", pod->ns,
					 pod->name, pod->demand_error);
			if (cache_pod_apply(c, pod) == 0)
				n->pods++;
		} else {
			struct cache_podgroup *pg = cache_podgroup_parse(it, cache_get_opts(c), err,
									 sizeof(err));

			if (!pg) {
				log_warn("snapshot", "skipping a PodGroup: %s", err);
				n->skipped++;
			} else if (cache_podgroup_apply(c, pg) == 0) {
				n->podgroups++;
			}
		}
	}
}

static void count_unknown(const cJSON *doc, struct load_counts *n)
{
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(doc, "items");
	const cJSON *it;

	cJSON_ArrayForEach(it, json_list(items)) {
		const char *k = json_str(it, "kind");

		if (!k || (strcmp(k, "Node") && strcmp(k, "Pod") && strcmp(k, "PodGroup"))) {
			log_warn("snapshot", "skipping an item of kind %s", k ? k : "(none)");
			n->skipped++;
		}
	}
}

int cache_snapshot_load(struct cache *c, const char *path, char *err, size_t errlen)
{
	static const char *const kinds[] = { "Node", "Pod", "PodGroup" };
	struct load_counts n = { 0 };
	cJSON *docs = NULL, *root = NULL;
	const cJSON *doc;
	char *buf = NULL;
	size_t len = 0;
	int ret;

	ret = util_read_file(path, SNAPSHOT_MAX_BYTES, &buf, &len);
	if (ret < 0) {
		snprintf(err, errlen, "cannot read %s: %s", path,
			 ret == -EFBIG ? "file larger than 1 GiB" : strerror(-ret));
		goto out;
	}
	if (yamljson_is_json(buf, len)) {
		const char *end = NULL;

		long bad = json_find_unsafe(buf, len);

		if (bad >= 0) {
			snprintf(err, errlen, "%s: control character or \\u0000 at byte %ld", path,
				 bad);
			ret = -EINVAL;
			goto out;
		}
		root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
		/* The document must end the file: trailing bytes mean a damaged or
		 * concatenated file, not a snapshot. */
		if (root && !json_at_end(end, buf + len)) {
			cJSON_Delete(root);
			root = NULL;
		}
		if (!root) {
			snprintf(err, errlen, "%s: malformed JSON near byte %zu", path,
				 end ? (size_t)(end - buf) : (size_t)0);
			ret = -EINVAL;
			goto out;
		}
		docs = cJSON_CreateArray();
		if (!docs) {
			ret = -ENOMEM;
			goto out;
		}
		cJSON_AddItemToArray(docs, root);
		root = NULL;
	} else {
		char yerr[192];

		docs = yamljson_parse(buf, len, yerr, sizeof(yerr));
		if (!docs) {
			snprintf(err, errlen, "%s: %s", path, yerr);
			ret = -EINVAL;
			goto out;
		}
	}
	cJSON_ArrayForEach(doc, docs) {
		if (!cJSON_IsObject(doc)) {
			snprintf(err, errlen, "%s: a document is not an object", path);
			ret = -EINVAL;
			goto out;
		}
	}
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		cJSON_ArrayForEach(doc, docs)
			apply_kind(c, doc, kinds[k], &n);
	cJSON_ArrayForEach(doc, docs)
		count_unknown(doc, &n);
	cache_writer_reclaim(c);
	log_info("snapshot", "loaded %s: %zu nodes, %zu pods, %zu pod groups, %zu skipped", path,
		 n.nodes, n.pods, n.podgroups, n.skipped);
	ret = 0;
out:
	cJSON_Delete(root);
	cJSON_Delete(docs);
	free(buf);
	return ret;
}
