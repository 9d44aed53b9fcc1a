/* preempt: keep only the candidate nodes where evicting kube-scheduler's
 * proposed victims would really let the pod run, and never propose evicting
 * part of a bound gang (unless gang.allow_partial_preemption). The answer names
 * the victims by UID (NodeNameToMetaVictims), the form kube-scheduler expects
 * back from an extender.
 */
#include "extender/internal.h"

#include <string.h>

#include "common/log.h"
#include "common/util.h"

/* Victims read per candidate node; more are ignored (kube-scheduler proposes
 * the fewest that make room, far below this). */
enum { PREEMPT_MAX_VICTIMS = 256 };

/* Why a candidate node is dropped, or NULL to keep it: evicting its victims
 * must free a device set the preemptor's policy accepts, and must not evict part
 * of a bound gang (unless gang.allow_partial_preemption). */
static const char *preempt_judge(const struct ext_service *svc, const struct placement_request *req,
				 const char *node, const char *const *uids, size_t n_uids)
{
	struct cache_node_view v;
	struct placement_fit fit;
	uint64_t freed = 0;
	uint32_t unattr = 0;
	const char *why = NULL;

	for (size_t i = 0; i < n_uids; i++) {
		struct cache_pod_info pi;

		if (cache_pod_get(svc->cache, uids[i], &pi) < 0)
			continue;       /* unknown to troupe: it occupies nothing troupe counts */
		freed |= pi.devices;
		unattr += pi.unattributed;
		if (pi.group[0] && !svc->cfg->gang.allow_partial_preemption) {
			unsigned exist, bound, here = 0;

			for (size_t j = 0; j < n_uids; j++) {
				struct cache_pod_info pj;

				if (cache_pod_get(svc->cache, uids[j], &pj) == 0 &&
				    strcmp(pj.group, pi.group) == 0 && strcmp(pj.ns, pi.ns) == 0)
					here++;
			}
			cache_group_count(svc->cache, pi.ns, pi.group, &exist, &bound);
			if (bound > here)
				return "would evict part of a bound gang";
		}
	}
	cache_read_begin(svc->cache);
	if (!cache_node_lookup(svc->cache, node, strlen(node), &v)) {
		why = "node unknown to troupe";
	} else {
		v.used &= ~freed;
		v.unattributed = v.unattributed > unattr ? v.unattributed - unattr : 0;
		if (placement_check_request(&v, req, cache_get_opts(svc->cache)->gpu_resources,
					    &fit) != PLACEMENT_FITS)
			why = "evicting these victims would not free a GPU set the pod can use";
	}
	cache_read_end(svc->cache);
	return why;
}

/* Keep only the candidates where preemption would really help this pod, in the
 * meta (UID) form kube-scheduler expects back. */
void ext_preempt(const struct ext_service *svc, const char *body, size_t len,
		 struct ext_reply *r)
{
	const cJSON *pod, *meta, *full, *node;
	struct placement_request req = { 0 };
	struct cache_pod *cp = NULL;
	cJSON *root = NULL;
	char err[EXT_REQUEST_ERR_BUF];
	size_t n = 0, dropped = 0;

	if (ext_preempt_decode(body, len, &root, &pod, &meta, &full, err, sizeof(err)) < 0) {
		log_warn("extender", "preempt: bad request (%zu bytes): %s", len, err);
		ext__reply_error(r, 400, "troupe: bad preempt request: %s", err);
		goto out;
	}
	/* A preemptor troupe cannot read is judged by kube-scheduler alone. */
	if (cJSON_IsObject(pod)) {
		cp = cache_pod_parse(pod, cache_get_opts(svc->cache), err, sizeof(err));
		if (cp && !cp->demand_error) {
			req.demand = cp->demand;
			if (placement_policy_parse(cp->topology, &req.policy, err, sizeof(err)) < 0)
				req.policy.kind = PLACEMENT_POLICY_PREFERRED;
		}
	}
	strbuf_puts(&r->body, "{\"NodeNameToMetaVictims\":{");
	cJSON_ArrayForEach(node, (meta ? meta : full)) {
		const cJSON *pods = cJSON_GetObjectItemCaseSensitive(node, "Pods");
		const cJSON *pdb = cJSON_GetObjectItemCaseSensitive(node, "NumPDBViolations");
		const char *uids[PREEMPT_MAX_VICTIMS];
		const char *why = NULL;
		const cJSON *p;
		size_t k = 0;

		if (!node->string)
			continue;
		cJSON_ArrayForEach(p, json_list(pods)) {
			const char *uid = meta ? json_str(p, "UID")
					       : json_str(json_obj(p, "metadata"), "uid");

			if (uid && k < sizeof(uids) / sizeof(uids[0]))
				uids[k++] = uid;
		}
		if (!k)
			continue;       /* the scheduler refuses an empty victim list */
		if (req.demand.gpus > 0)
			why = preempt_judge(svc, &req, node->string, uids, k);
		if (why) {
			log_debug("extender", "preempt: pod %s/%s: dropping node %s: %s",
				  cp ? cp->ns : "?", cp ? cp->name : "?", node->string, why);
			dropped++;
			continue;
		}
		if (n++)
			strbuf_putc(&r->body, ',');
		strbuf_put_json_str(&r->body, node->string, strlen(node->string));
		strbuf_puts(&r->body, ":{\"Pods\":[");
		for (size_t i = 0; i < k; i++) {
			if (i)
				strbuf_putc(&r->body, ',');
			strbuf_puts(&r->body, "{\"UID\":");
			strbuf_put_json_str(&r->body, uids[i], strlen(uids[i]));
			strbuf_putc(&r->body, '}');
		}
		strbuf_puts(&r->body, "],\"NumPDBViolations\":");
		strbuf_put_i64(&r->body, cJSON_IsNumber(pdb) ? (int64_t)pdb->valuedouble : 0);
		strbuf_putc(&r->body, '}');
	}
	strbuf_puts(&r->body, "}}");
	log_debug("extender", "preempt: kept %zu candidate nodes, dropped %zu", n, dropped);
out:
	cache_pod_free(cp);
	cJSON_Delete(root);
}
