/* filter: which of the request's nodes can take the pod now.
 *
 * A single pod is judged node by node (placement_check_request), in one walk
 * over the request's nodes inside one cache read section, after the gang
 * manager's word on nodes whose freed GPUs it holds for a starving gang: one
 * function, ext__judge_node, which `troupe explain` calls too (explain.c). A
 * gang member is judged by the gang manager over all the candidates at once
 * (filter_gang): it plans and reserves the whole gang on first sight. The
 * scores of what passes are left for the prioritize that follows (cycle.h).
 */
#include "extender/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "extender/cycle.h"

/* The request's node <i> (<item> in full mode) passes filter: its own text as
 * sent (or the object printed when its text was not found), or its name. */
static void pass_node(struct ext_filter_out *out, const struct ext_args *a, size_t i,
		      const cJSON *item)
{
	if (a->full_nodes)
		ext_filter_out_pass_object(out, item, a->item_text ? &a->item_text[i] : NULL);
	else
		ext_filter_out_pass_name(out, a->names[i].s, a->names[i].len);
}

struct filter_ctx {
	const struct ext_service *svc;
	const struct ext_args *a;
	const struct cache_pod *pod;
	struct placement_request req;
	struct ext_filter_out out;
	struct ext_cycle_entry *cycle;  /* scores of the passed nodes, for prioritize */
	struct placement_score_memo memo;       /* for those scores */
	char last_reason[PLACEMENT_REASON_LEN];
	char retry[EXT_GANG_REASON_BUF]; /* answer with this error: kube-scheduler retries */
};

void ext__judge_node(const struct ext_service *svc, const char *name,
		     const struct cache_node_view *view, const char *unusable, int32_t priority,
		     const struct placement_request *req, struct ext_node_verdict *out)
{
	out->held = false;
	if (!view) {
		placement_unknown_node(&out->fit);
		if (unusable)
			snprintf(out->fit.reason, sizeof(out->fit.reason), "%s", unusable);
		return;
	}
	/* A starving gang before this pod keeps this node's freed GPUs. */
	if (svc->gangs && gang_hold_note(svc->gangs, name, priority, out->note,
					 sizeof(out->note))) {
		out->held = true;
		out->fit.verdict = PLACEMENT_UNSCHEDULABLE;
		out->fit.why = PLACEMENT_WHY_FITS;      /* placement was not asked */
		snprintf(out->fit.reason, sizeof(out->fit.reason), "%.150s", out->note);
		return;
	}
	placement_check_request(view, req, cache_get_opts(svc->cache)->gpu_resources, &out->fit);
	/* The node's GPUs are DRA devices, not a device plugin's: kube-scheduler's
	 * DRA plugin would serve the extended resource from them (KEP-5004), and
	 * troupe, which places device-plugin GPUs, refuses the node rather than
	 * promise devices it does not allocate (docs/reference.md#dra). */
	if (out->fit.why == PLACEMENT_WHY_NO_GPU_KIND && !view->node->res_mask &&
	    cache_dra_node_devices(svc->cache, view->node->name) > 0)
		snprintf(out->fit.reason, sizeof(out->fit.reason),
			 "troupe: node has no %.40s from a device plugin; its GPUs are DRA "
			 "devices, which troupe does not place (KEP-5004)",
			 cache_get_opts(svc->cache)->gpu_resources[req->demand.gpu_resource]);
}

/* One node of a single pod's filter (ext__walk_nodes' callback): the shared
 * verdict above. A passing node's score is kept for prioritize. */
static void filter_node(const struct node_ref *ref, void *arg)
{
	struct filter_ctx *fc = arg;
	struct ext_node_verdict v;

	ext__judge_node(fc->svc, ref->name, ref->view, ref->unusable, fc->pod->priority, &fc->req,
			&v);
	if (v.held) {
		ext_filter_out_fail(&fc->out, false, ref->name, ref->len, v.note);
		memcpy(fc->last_reason, v.fit.reason, sizeof(v.fit.reason));
		return;
	}
	if (v.fit.verdict == PLACEMENT_FITS) {
		pass_node(&fc->out, fc->a, ref->index, ref->object);
		if (fc->cycle)
			ext_cycle_entry_add(fc->cycle, ref->index,
					    placement_score_memoized(&fc->memo, ref->view));
		return;
	}
	memcpy(fc->last_reason, v.fit.reason, sizeof(v.fit.reason));
	ext_filter_out_fail(&fc->out, v.fit.verdict == PLACEMENT_UNRESOLVABLE, ref->name, ref->len,
			    v.fit.reason);
}

/* A pod that asks for no managed resource: every node passes unchanged. */
/* Every node of the request unresolvable, for <reason>. */
static void refuse_all(const struct ext_args *a, struct ext_filter_out *out, const char *reason)
{
	const cJSON *it = NULL;

	for (size_t x = 0; x < a->n_nodes; x++) {
		const char *name = ext__item_name(a, x, (it = ext__next_item(a, it)));

		if (!name)
			name = "";
		ext_filter_out_fail(out, true, name, strlen(name), reason);
	}
}

static void pass_all(const struct ext_args *a, struct ext_filter_out *out)
{
	const cJSON *it;

	it = NULL;
	for (size_t x = 0; x < a->n_nodes; x++)
		pass_node(out, a, x, (it = ext__next_item(a, it)));
}

/* The filter for a gang member: the gang manager decides which candidates have
 * a slot for it (planning and reserving the whole gang on first sight).
 * Returns false when the pod is not a gang member after all. */
static bool filter_gang(const struct ext_service *svc, const struct ext_args *a,
			struct filter_ctx *fc)
{
	struct gang_member mb = ext__member_of(fc->pod, &fc->req);
	struct cache_node_view *views = NULL;
	struct cache_node **parsed = NULL;
	unsigned *index = NULL, n = 0, total = (unsigned)a->n_nodes;
	enum gang_verdict verdict = GANG_NOT_A_GANG;
	char reason[EXT_GANG_REASON_BUF];
	bool *allowed = NULL;
	const cJSON *it;
	unsigned i = 0;

	if (!svc->gangs || !fc->pod->group)
		return false;
	if (cache_is_live(svc->cache)) {
		struct cache_pod_info info;

		/* A member troupe's watch has not shown yet counts for nothing (a
		 * request cannot invent members), so its gang would look short by it;
		 * answered "waiting for its members", kube-scheduler would set it
		 * aside until some cluster event, minutes when none comes. An error
		 * is retried after its backoff, by when the watch has caught up. */
		if (cache_pod_get(svc->cache, fc->pod->uid, &info) < 0 || !info.from_api) {
			snprintf(fc->retry, sizeof(fc->retry), "troupe: gang member %s/%s is not in "
				 "troupe's watch yet; retry", fc->pod->ns, fc->pod->name);
			return true;
		}
	}
	if (gang_topology_parse(fc->pod->gang_topology, &mb.required_key, reason,
				sizeof(reason)) < 0) {
		/* Every node refused with the reason: the user sees it on the pod. */
		refuse_all(a, &fc->out, reason);
		return true;
	}
	views = calloc(total ? total : 1, sizeof(*views));
	parsed = calloc(total ? total : 1, sizeof(*parsed));
	index = calloc(total ? total : 1, sizeof(*index));
	allowed = calloc(total ? total : 1, sizeof(*allowed));
	if (!views || !parsed || !index || !allowed)
		goto out;
	cache_read_begin(svc->cache);
	/* The candidates troupe knows, in request order; index[] maps back. */
	it = NULL;
	for (i = 0; i < total; i++) {
		if ((it = ext__next_item(a, it))) {
			parsed[i] = ext__request_node_view(svc, it, &views[n]);
			if (parsed[i])
				index[n++] = i;
		} else if (cache_node_lookup(svc->cache, a->names[i].s, a->names[i].len,
					     &views[n])) {
			index[n++] = i;
		}
	}
	verdict = gang_filter(svc->gangs, &mb, views, n, allowed, reason, sizeof(reason));
	if (verdict == GANG_RETRY)
		snprintf(fc->retry, sizeof(fc->retry), "%s", reason);
	else if (verdict != GANG_NOT_A_GANG) {
		unsigned k = 0;

		it = NULL;
		for (i = 0; i < total; i++) {
			const char *name = (it = ext__next_item(a, it))
						   ? (parsed[i] ? parsed[i]->name : "") : a->names[i].s;
			bool known = k < n && index[k] == i;
			unsigned at = k;        /* its place among the known candidates */

			if (known)
				k++;
			if (!known) {
				struct placement_fit fit;

				placement_unknown_node(&fit);
				ext_filter_out_fail(&fc->out, false, name, strlen(name), fit.reason);
			} else if (verdict == GANG_ALLOWED && allowed[at]) {
				pass_node(&fc->out, a, i, it);
			} else {
				ext_filter_out_fail(&fc->out, false, name, strlen(name),
						    verdict == GANG_REFUSED ? reason
						    : "troupe: the gang's plan has no open slot on this node");
			}
		}
		snprintf(fc->last_reason, sizeof(fc->last_reason), "%.150s", reason);
	}
	cache_read_end(svc->cache);
out:
	for (unsigned j = 0; parsed && j < total; j++)
		cache_node_free(parsed[j]);
	free(parsed);
	free(views);
	free(index);
	free(allowed);
	return verdict != GANG_NOT_A_GANG;
}

void ext_filter(const struct ext_service *svc, const char *body, size_t len,
		struct ext_reply *r)
{
	struct filter_ctx fc = { .svc = svc };
	struct ext_args a;
	struct cache_pod *pod = NULL;
	char err[EXT_REQUEST_ERR_BUF], fault[EXT_REPLY_ERROR_BUF];
	uint64_t t0 = util_now_ns();

	ext_filter_out_init(&fc.out);
	if (ext_args_decode(body, len, &a, err, sizeof(err)) < 0) {
		log_warn("extender", "filter: bad request (%zu bytes): %s", len, err);
		ext__reply_error(r, 400, "troupe: bad filter request: %s", err);
		goto out;
	}
	if (!cache_is_synced(svc->cache)) {
		ext__reply_error(r, 200, "troupe: still syncing cluster state from %s; try again shortly",
			    svc->source);
		goto out;
	}
	fault[0] = '\0';
	pod = ext__request_pod(svc, &a, "filter", r, &fc.req, fault);
	if (!pod && fault[0]) {
		/* The pod's own fault: no node will ever do, so every node is
		 * unresolvable (kube-scheduler then neither retries it as an error
		 * nor preempts for it) and the reason shows on the pod. */
		refuse_all(&a, &fc.out, fault);
		ext_filter_out_encode(&fc.out, a.full_nodes, &r->body);
		goto out;
	}
	if (!pod)
		goto out;
	fc.pod = pod;
	fc.a = &a;
	/* Full mode: find each node's text, so a passing one is echoed as sent. */
	if (a.full_nodes)
		ext_args_find_item_texts(&a, body, len);
	if (pod->demand.gpus > 0 && !cache_pod_known(svc->cache, pod->uid)) {
		/* Remember (a copy of) the pod first: bind needs its demand when it
		 * comes before troupe's watch shows the pod (measured on the real
		 * control plane: kube-scheduler binds tens of milliseconds after it
		 * sees a pod, often before troupe's watch delivers it). A pod the
		 * cache knows (the watch, an earlier filter) is not parsed again.
		 * With a live cluster such a pod never counts as a gang member
		 * (cache_set_live): a request's body cannot invent gang members. */
		struct cache_pod *copy = cache_pod_parse(a.pod, cache_get_opts(svc->cache), err,
							 sizeof(err));
		int rc = copy ? cache_pod_remember(svc->cache, copy) : -ENOMEM;

		if (rc == -ENOSPC)
			log_debug("extender", "filter: pod %s/%s not remembered: "
				  "cache.max_filter_only_pods reached", pod->ns, pod->name);
		else if (rc < 0)
			log_warn("extender", "filter: out of memory remembering a pod");
	}
	if (pod->demand.gpus == 0) {
		pass_all(&a, &fc.out);
	} else if (!filter_gang(svc, &a, &fc)) {
		uint64_t changes;

		/* Score what passes, for the prioritize that follows (cycle.h):
		 * names mode, not a gang member (prioritize scores those from
		 * their slots), and no node change under way before any lookup. */
		if (svc->cycle && a.name_bytes && !(svc->gangs && pod->group) &&
		    cache_changes_settled(svc->cache, &changes)) {
			fc.cycle = ext_cycle_entry_new(pod->uid, changes, &fc.req);
			placement_score_memo_init(&fc.memo, svc->score, &svc->cfg->weights, &fc.req);
		}
		ext__walk_nodes(svc, &a, filter_node, &fc);
	}
	if (fc.retry[0]) {
		/* An error, not "no node fits": kube-scheduler retries it after its
		 * backoff instead of waiting for a cluster event. */
		log_info("extender", "filter: pod %s/%s: %s", pod->ns, pod->name, fc.retry);
		ext__reply_error(r, 200, "%s", fc.retry);
		goto out;
	}
	ext_filter_out_encode(&fc.out, a.full_nodes, &r->body);
	if (fc.out.n_pass == 0 && a.n_nodes > 0)
		log_info("extender", "filter: pod %s/%s (%u GPUs): none of %zu nodes fit (%zu never "
			 "can, %zu cannot now); e.g. %s", pod->ns, pod->name, pod->demand.gpus,
			 a.n_nodes, fc.out.n_unresolvable, fc.out.n_failed, fc.last_reason);
	log_debug("extender", "filter: pod %s/%s: %zu nodes -> %zu fit, %zu failed, %zu "
		  "unresolvable in %.0f us", pod->ns, pod->name, a.n_nodes, fc.out.n_pass,
		  fc.out.n_failed, fc.out.n_unresolvable, (double)(util_now_ns() - t0) / 1e3);
	if (svc->counters)
		__atomic_add_fetch(&svc->counters->filter_ns_total, util_now_ns() - t0,
				   __ATOMIC_RELAXED);
	if (fc.cycle) {
		ext_cycle_put(svc->cycle, fc.cycle, &a);        /* takes a's names */
		fc.cycle = NULL;
	}
out:
	ext_cycle_entry_free(fc.cycle);
	cache_pod_free(pod);
	ext_filter_out_fini(&fc.out);
	ext_args_fini(&a);
}
