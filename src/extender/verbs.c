/* filter, prioritize, bind and preempt.
 *
 * filter and prioritize walk the request's nodes once, inside one cache read
 * section: names are looked up in the store (nodeCacheCapable: true), or node
 * objects are parsed from the request and paired with the store's usage for
 * that name (nodeCacheCapable: false, where the request's objects are
 * authoritative for that call). Neither takes a lock on the node path.
 *
 * bind chooses the devices, then claims them with the store's check-and-claim
 * (cache_pod_assume), retrying when another bind took a device in between.
 */
#include "extender/verbs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "extender/codec.h"
#include "extender/cycle.h"
#include "gang/gang.h"

enum { BIND_ATTEMPTS = 16 };

void ext_reply_init(struct ext_reply *r)
{
	r->status = 200;
	r->error = false;
	strbuf_init(&r->body);
}

void ext_reply_fini(struct ext_reply *r)
{
	strbuf_fini(&r->body);
}

static void reply_error(struct ext_reply *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void reply_error(struct ext_reply *r, unsigned status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->status = status;
	r->error = true;
	strbuf_fini(&r->body);
	ext_encode_error(&r->body, msg);
}

/* ---- Walking the request's nodes ----------------------------------------- */

/* One node of a request, as the per-node callback sees it. */
struct node_ref {
	const char *name;
	size_t len;
	size_t index;                           /* in the request */
	const cJSON *object;                    /* full mode: the request's node */
	const struct cache_node_view *view;     /* NULL: troupe cannot judge it */
	const char *unusable;                   /* why view is NULL (full mode) */
};

typedef void (*node_fn)(const struct node_ref *ref, void *arg);

/* A node object from a full-Nodes request, as a view: the request's object
 * decides capacity and state; the topology class is the watched node's (derived
 * on the writer, valid for this read section); usage is the cache's. Returns
 * the parsed node (the caller frees it), or NULL when it does not parse.
 * Inside a cache read section. */
static struct cache_node *request_node_view(const struct ext_service *svc, const cJSON *it,
					    struct cache_node_view *v)
{
	char err[CACHE_ERR_LEN];
	struct cache_node *node = cache_node_parse(it, cache_get_opts(svc->cache), err,
						   sizeof(err));
	struct cache_node_view known;
	size_t len;

	if (!node)
		return NULL;
	len = strlen(node->name);
	v->node = node;
	if (cache_node_lookup(svc->cache, node->name, len, &known)) {
		node->derived = known.node->derived;
		v->used = known.used;
		v->unattributed = known.unattributed;
	} else {
		/* Not a node troupe knows, but pods it knows may hold GPUs there. */
		cache_usage_lookup(svc->cache, node->name, len, &v->used, &v->unattributed);
	}
	return node;
}

/* Call <fn> for every node of the request, in request order. */
static void walk_nodes(const struct ext_service *svc, const struct ext_args *a, node_fn fn,
		       void *arg)
{
	const cJSON *it;

	cache_read_begin(svc->cache);
	if (!a->full_nodes) {
		/* In batches: look a batch's nodes up together (their memory
		 * fetches overlap; 5,000 nodes do not fit in cache), then
		 * evaluate them. */
		for (size_t x = 0; x < a->n_nodes; x += CACHE_LOOKUP_BATCH) {
			struct cache_node_view v[CACHE_LOOKUP_BATCH];
			bool found[CACHE_LOOKUP_BATCH];
			size_t m = a->n_nodes - x < CACHE_LOOKUP_BATCH ? a->n_nodes - x
								      : CACHE_LOOKUP_BATCH;

			cache_node_lookup_many(svc->cache, &a->names[x], m, v, found);
			for (size_t j = 0; j < m; j++) {
				struct node_ref ref = { a->names[x + j].s, a->names[x + j].len,
							x + j, NULL, found[j] ? &v[j] : NULL, NULL };

				fn(&ref, arg);
			}
		}
	} else {
		size_t x = 0;

		cJSON_ArrayForEach(it, a->node_items) {
			struct cache_node_view v = { 0 };
			struct cache_node *node = request_node_view(svc, it, &v);
			struct node_ref ref = { "", 0, x, it, NULL,
						"troupe: node object has no name" };

			if (node) {
				ref.name = node->name;
				ref.len = strlen(node->name);
				ref.view = &v;
			}
			fn(&ref, arg);
			cache_node_free(node);
			x++;
		}
	}
	cache_read_end(svc->cache);
}

/* Parse the request's pod, its demand and its topology policy into <req>. On
 * failure fill <r> and return NULL. */
static struct cache_pod *request_pod(const struct ext_service *svc, const struct ext_args *a,
				     const char *verb, struct ext_reply *r,
				     struct placement_request *req)
{
	char err[CACHE_ERR_LEN];
	struct cache_pod *pod = cache_pod_parse(a->pod, cache_get_opts(svc->cache), err,
						sizeof(err));

	if (!pod) {
		log_warn("extender", "%s: rejected request: %s", verb, err);
		reply_error(r, 200, "troupe: %s", err);
		return NULL;
	}
	if (pod->demand_error) {
		log_info("extender", "%s: pod %s/%s has an invalid GPU request: %s", verb, pod->ns,
			 pod->name, pod->demand_error);
		reply_error(r, 200, "troupe: pod %s/%s: %s", pod->ns, pod->name, pod->demand_error);
		cache_pod_free(pod);
		return NULL;
	}
	req->demand = pod->demand;
	if (placement_policy_parse(pod->topology, &req->policy, err, sizeof(err)) < 0) {
		log_info("extender", "%s: pod %s/%s: %s", verb, pod->ns, pod->name, err);
		reply_error(r, 200, "troupe: pod %s/%s: %s", pod->ns, pod->name, err);
		cache_pod_free(pod);
		return NULL;
	}
	return pod;
}

static struct gang_member member_of(const struct cache_pod *pod,
				     const struct placement_request *req)
{
	/* required_key stays NULL: filter_gang parses troupe.io/gang-topology
	 * (and reports a bad value); prioritize's slot lookup does not use it. */
	return (struct gang_member){ pod->uid, pod->ns, pod->name, pod->group, pod->min_member,
				     *req, NULL, pod->priority, pod->queue };
}

/* ---- filter ------------------------------------------------------------ */

/* The request's nodes one by one: the object (full mode) after <it>, or NULL. */
static const cJSON *next_item(const struct ext_args *a, const cJSON *it)
{
	if (!a->full_nodes)
		return NULL;
	return it ? it->next : (a->node_items ? a->node_items->child : NULL);
}

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
	char retry[640];                /* answer with this error: kube-scheduler retries */
};

static void filter_node(const struct node_ref *ref, void *arg)
{
	struct filter_ctx *fc = arg;
	struct placement_fit fit;

	if (ref->view && fc->svc->gangs) {
		char note[400];

		/* A starving gang before this pod keeps this node's freed GPUs. */
		if (gang_hold_note(fc->svc->gangs, ref->name, fc->pod->priority, note,
				   sizeof(note))) {
			ext_filter_out_fail(&fc->out, false, ref->name, ref->len, note);
			snprintf(fc->last_reason, sizeof(fc->last_reason), "%.150s", note);
			return;
		}
	}
	if (!ref->view) {
		if (ref->unusable)
			snprintf(fit.reason, sizeof(fit.reason), "%s", ref->unusable);
		else
			placement_unknown_node(&fit);
		fit.verdict = PLACEMENT_UNSCHEDULABLE;
	} else {
		placement_check_request(ref->view, &fc->req,
					cache_get_opts(fc->svc->cache)->gpu_resources, &fit);
	}
	if (fit.verdict == PLACEMENT_FITS) {
		pass_node(&fc->out, fc->a, ref->index, ref->object);
		if (fc->cycle)
			ext_cycle_entry_add(fc->cycle, ref->index,
					    placement_score_memoized(&fc->memo, ref->view));
		return;
	}
	memcpy(fc->last_reason, fit.reason, sizeof(fit.reason));
	ext_filter_out_fail(&fc->out, fit.verdict == PLACEMENT_UNRESOLVABLE, ref->name, ref->len,
			    fit.reason);
}

/* A pod that asks for no managed resource: every node passes unchanged. */
static void pass_all(const struct ext_args *a, struct ext_filter_out *out)
{
	const cJSON *it;

	it = NULL;
	for (size_t x = 0; x < a->n_nodes; x++)
		pass_node(out, a, x, (it = next_item(a, it)));
}

/* The filter for a gang member: the gang manager decides which candidates have
 * a slot for it (planning and reserving the whole gang on first sight).
 * Returns false when the pod is not a gang member after all. */
static bool filter_gang(const struct ext_service *svc, const struct ext_args *a,
			struct filter_ctx *fc)
{
	struct gang_member mb = member_of(fc->pod, &fc->req);
	struct cache_node_view *views = NULL;
	struct cache_node **parsed = NULL;
	unsigned *index = NULL, n = 0, total = (unsigned)a->n_nodes;
	enum gang_verdict verdict = GANG_NOT_A_GANG;
	char reason[640];
	bool *allowed = NULL;
	const cJSON *it;
	unsigned i = 0;

	if (!svc->gangs || !fc->pod->group)
		return false;
	if (gang_topology_parse(fc->pod->gang_topology, &mb.required_key, reason,
				sizeof(reason)) < 0) {
		/* Every node refused with the reason: the user sees it on the pod. */
		it = NULL;
		for (size_t x = 0; x < a->n_nodes; x++) {
			const char *name = (it = next_item(a, it)) ? json_str(json_obj(it, "metadata"),
									      "name")
								    : a->names[x].s;

			if (!name)
				name = "";
			ext_filter_out_fail(&fc->out, true, name, strlen(name), reason);
		}
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
		if ((it = next_item(a, it))) {
			parsed[i] = request_node_view(svc, it, &views[n]);
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
			const char *name = (it = next_item(a, it)) ? (parsed[i] ? parsed[i]->name : "")
								    : a->names[i].s;
			bool known = k < n && index[k] == i;
			unsigned slot = k;

			if (known)
				k++;
			if (!known) {
				struct placement_fit fit;

				placement_unknown_node(&fit);
				ext_filter_out_fail(&fc->out, false, name, strlen(name), fit.reason);
			} else if (verdict == GANG_ALLOWED && allowed[slot]) {
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
	char err[256];
	uint64_t t0 = util_now_ns();

	ext_filter_out_init(&fc.out);
	if (ext_args_decode(body, len, &a, err, sizeof(err)) < 0) {
		log_warn("extender", "filter: bad request (%zu bytes): %s", len, err);
		reply_error(r, 400, "troupe: bad filter request: %s", err);
		goto out;
	}
	if (!cache_is_synced(svc->cache)) {
		reply_error(r, 200, "troupe: still syncing cluster state from %s; try again shortly",
			    svc->source);
		goto out;
	}
	pod = request_pod(svc, &a, "filter", r, &fc.req);
	if (!pod)
		goto out;
	fc.pod = pod;
	fc.a = &a;
	/* Full mode: find each node's text, so a passing one is echoed as sent. */
	if (a.full_nodes)
		ext_args_find_item_texts(&a, body, len);
	if (pod->demand.gpus > 0 && !cache_pod_known(svc->cache, pod->uid)) {
		/* Remember (a copy of) the pod first: bind needs its demand, and a
		 * gang counts its members from the cache. A pod the cache knows
		 * (the watch, an earlier filter) is not parsed again. */
		struct cache_pod *copy = cache_pod_parse(a.pod, cache_get_opts(svc->cache), err,
							 sizeof(err));

		if (!copy || cache_pod_remember(svc->cache, copy) < 0)
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
		walk_nodes(svc, &a, filter_node, &fc);
	}
	if (fc.retry[0]) {
		/* An error, not "no node fits": kube-scheduler retries it after its
		 * backoff instead of waiting for a cluster event. */
		log_info("extender", "filter: pod %s/%s: %s", pod->ns, pod->name, fc.retry);
		reply_error(r, 200, "%s", fc.retry);
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

/* ---- prioritize -------------------------------------------------------- */

struct prio_ctx {
	const struct ext_service *svc;
	const struct cache_pod *pod;
	struct placement_request req;
	struct gang_member mb;          /* the pod as a gang member, if it is one */
	struct placement_score_memo memo;       /* nodes alike score alike */
	bool gang;                      /* gangs are on and the pod names a group */
	struct strbuf *out;
	size_t n;
};

/* One HostPriority of the answer. */
static void put_score(struct prio_ctx *pc, const char *name, size_t len, unsigned score)
{
	if (pc->n++)
		strbuf_putc(pc->out, ',');
	strbuf_puts(pc->out, "{\"Host\":");
	strbuf_put_json_str(pc->out, name, len);
	strbuf_puts(pc->out, ",\"Score\":");
	strbuf_put_i64(pc->out, score);
	strbuf_putc(pc->out, '}');
}

static void prioritize_node(const struct node_ref *ref, void *arg)
{
	struct prio_ctx *pc = arg;
	struct placement_fit fit;
	unsigned score = 0;
	bool has;

	/* A planned gang's member: its slots decide (10), nothing else. */
	if (ref->view && pc->gang &&
	    gang_has_slot(pc->svc->gangs, &pc->mb, ref->name, &has) == GANG_ALLOWED)
		score = has ? PLACEMENT_MAX_SCORE : 0;
	else if (ref->view && pc->pod->demand.gpus > 0 &&
		 placement_check_request(ref->view, &pc->req,
					 cache_get_opts(pc->svc->cache)->gpu_resources,
					 &fit) == PLACEMENT_FITS)
		score = placement_score_memoized(&pc->memo, ref->view);
	put_score(pc, ref->name, ref->len, score);
}

/* Prioritize from the scores the pod's filter left (cycle.h): each name filter
 * passed, in order, is answered from them; any other name as usual. */
static void prioritize_from_filter(const struct ext_service *svc, const struct ext_args *a,
				   const struct ext_cycle_entry *e, struct prio_ctx *pc)
{
	size_t at = 0, reused = 0;

	cache_read_begin(svc->cache);
	for (size_t x = 0; x < a->n_nodes; x++) {
		const struct cache_name *n = &a->names[x];
		struct cache_node_view v;
		unsigned score;

		if (ext_cycle_score(e, n, &at, &score)) {
			put_score(pc, n->s, n->len, score);
			reused++;
			continue;
		}
		prioritize_node(&(struct node_ref){ n->s, n->len, x, NULL,
						    cache_node_lookup(svc->cache, n->s, n->len, &v)
							    ? &v : NULL, NULL }, pc);
	}
	cache_read_end(svc->cache);
	ext_cycle_count_names(svc->cycle, reused);
	log_debug("extender", "prioritize: pod %s/%s: %zu of %zu scores from its filter",
		  pc->pod->ns, pc->pod->name, reused, a->n_nodes);
}

void ext_prioritize(const struct ext_service *svc, const char *body, size_t len,
		    struct ext_reply *r)
{
	struct prio_ctx pc = { .svc = svc, .out = &r->body };
	struct ext_cycle_entry *cycle = NULL;
	struct ext_args a;
	struct cache_pod *pod = NULL;
	char err[256];

	if (ext_args_decode(body, len, &a, err, sizeof(err)) < 0) {
		log_warn("extender", "prioritize: bad request (%zu bytes): %s", len, err);
		reply_error(r, 400, "troupe: bad prioritize request: %s", err);
		goto out;
	}
	pod = request_pod(svc, &a, "prioritize", r, &pc.req);
	if (!pod) {
		/* kube-scheduler ignores prioritize errors; an empty list says the
		 * same without an error on its side. */
		strbuf_fini(&r->body);
		strbuf_puts(&r->body, "[]");
		goto out;
	}
	pc.pod = pod;
	placement_score_memo_init(&pc.memo, svc->score, &svc->cfg->weights, &pc.req);
	pc.gang = svc->gangs && pod->group;
	if (pc.gang)
		pc.mb = member_of(pod, &pc.req);
	strbuf_putc(&r->body, '[');
	if (pod->demand.gpus == 0 && !pc.gang) {
		/* Asks for no managed resource: every node scores 0, with nothing to
		 * look up (as filter passes them all). */
		const cJSON *it = NULL;

		for (size_t x = 0; x < a.n_nodes; x++) {
			const char *name = (it = next_item(&a, it)) ? json_str(json_obj(it, "metadata"),
									      "name")
								    : a.names[x].s;

			put_score(&pc, name ? name : "", name ? strlen(name) : 0, 0);
		}
	} else if ((cycle = svc->cycle && !pc.gang && !a.full_nodes
				? ext_cycle_take(svc->cycle, pod->uid, cache_changes(svc->cache),
						 &pc.req)
				: NULL)) {
		prioritize_from_filter(svc, &a, cycle, &pc);
	} else {
		walk_nodes(svc, &a, prioritize_node, &pc);
	}
	strbuf_putc(&r->body, ']');
out:
	ext_cycle_entry_free(cycle);
	cache_pod_free(pod);
	ext_args_fini(&a);
}

/* ---- bind -------------------------------------------------------------- */

/* A binding posted to the API server, waiting for its answer. */
struct bind_pending {
	const struct ext_service *svc;
	struct ext_reply *r;
	struct ext_async async;
	char uid[129];
	char ns[64];
	char name[254];
	char node[254];
	char ids[256];
	char *ann;                      /* the Binding's annotations, JSON; owned */
	int attempt;                    /* posts so far, minus one */
	uint64_t retry_until_ns;        /* gang member: refusals retried until then; 0: not */
};

static void bind_posted(void *arg, int result, const char *msg, unsigned retry_after_ms);

static void pending_free(struct bind_pending *p)
{
	if (p)
		free(p->ann);
	free(p);
}

enum { BIND_POST_ATTEMPTS = 3, BIND_RETRY_FIRST_MS = 200, BIND_RETRY_MAX_MS = 2000 };

/* Post the same Binding again (binder thread) when that can still help:
 * - a single pod whose outcome is unknown (timeout, connection error, 5xx): at
 *   once, up to BIND_POST_ATTEMPTS posts in all;
 * - a gang member after quorum, refused or unconfirmed (a webhook's 403, a 429,
 *   a 5xx): after a backoff (200 ms doubling to 2 s) while the held request
 *   still has time (kube-scheduler's httpTimeout less the margin). Its devices
 *   stay assumed meanwhile, so a transient refusal never leaves the gang partly
 *   bound. A pod that is gone or bound elsewhere is not retried. */
static bool post_again(struct bind_pending *p, int result, unsigned retry_after_ms)
{
	struct cache_binding b = { p->ns, p->name, p->uid, p->node, p->ids[0] ? p->ann : NULL };
	bool ambiguous = result == -ETIMEDOUT || result == -EIO;
	unsigned delay = 0;

	if (p->retry_until_ns) {
		if (result == 0 || result == -ENOENT || result == -EEXIST || result == -ECANCELED ||
		    result == -ENOMEM)
			return false;
		delay = BIND_RETRY_FIRST_MS << (p->attempt < 4 ? p->attempt : 4);
		if (delay > BIND_RETRY_MAX_MS)
			delay = BIND_RETRY_MAX_MS;
		if (retry_after_ms > delay)
			delay = retry_after_ms;         /* the server said when */
		{
			/* Never past the held request's deadline: one last post just
			 * before it rather than giving up early. */
			uint64_t now = util_now_ns();
			uint64_t left_ms = p->retry_until_ns > now ? (p->retry_until_ns - now) / 1000000u
								    : 0;

			if (left_ms <= BIND_RETRY_FIRST_MS)
				return false;
			if (delay > left_ms - BIND_RETRY_FIRST_MS)
				delay = (unsigned)(left_ms - BIND_RETRY_FIRST_MS);
		}
	} else if (!ambiguous || p->attempt + 1 >= BIND_POST_ATTEMPTS) {
		return false;
	}
	p->attempt++;
	log_info("extender", "bind: %s %s/%s -> node %s: posting again in %u ms%s (attempt %d)",
		 p->retry_until_ns ? "gang member" : "pod", p->ns, p->name, p->node, delay,
		 retry_after_ms && delay == retry_after_ms ? " as its Retry-After says" : "",
		 p->attempt + 1);
	return cache_binder_submit_after(p->svc->binder, &b, delay, bind_posted, p) == 0;
}

/* The API server answered (binder thread): keep or roll back the assumption,
 * then complete the reply. A timeout, a connection error or a 5xx does not say
 * whether the binding was committed: the same Binding is posted again (the UID
 * precondition makes that safe, and a commit shows as 409 "already assigned to
 * this node"); if the outcome stays unknown the devices stay held until the
 * watch shows the pod or cache_pod_expire gives up - never free while the pod
 * may be running on them. */
static void bind_posted(void *arg, int result, const char *msg, unsigned retry_after_ms)
{
	struct bind_pending *p = arg;
	bool ambiguous = result == -ETIMEDOUT || result == -EIO;

	if (post_again(p, result, retry_after_ms))
		return;
	if (result == 0) {
		cache_pod_mark_bind(p->svc->cache, p->uid, true);
		log_info("extender", "bind: pod %s/%s -> node %s, GPU devices [%s] (%s)", p->ns,
			 p->name, p->node, p->ids, msg);
		strbuf_puts(&p->r->body, "{\"Error\":\"\"}");
	} else if (ambiguous) {
		cache_pod_mark_bind(p->svc->cache, p->uid, false);
		log_warn("extender", "bind: pod %s/%s -> node %s: outcome unknown after %d attempts "
			 "(%s); its GPUs stay held until the cluster shows the pod", p->ns, p->name,
			 p->node, p->attempt + 1, msg);
		reply_error(p->r, 200, "troupe: the API server did not confirm binding pod %s/%s "
			    "to node %s (%s); its GPUs stay held until the cluster shows where it is",
			    p->ns, p->name, p->node, msg);
	} else {
		/* The devices go back at once: the pod was not bound. */
		cache_pod_forget(p->svc->cache, p->uid);
		log_warn("extender", "bind: pod %s/%s -> node %s failed, GPUs released: %s", p->ns,
			 p->name, p->node, msg);
		reply_error(p->r, 200, "troupe: binding pod %s/%s to node %s failed: %s", p->ns,
			    p->name, p->node, msg);
	}
	p->async.done(p->async.ctx);
	pending_free(p);
}

/* Post the binding for a pod whose devices are already assumed. Returns true
 * when the reply is complete now (the post could not even be queued). */
static bool bind_post(const struct ext_service *svc, const struct cache_pod_info *info,
		      const char *uid, const char *node, const char *ids, const char *link,
		      const char *uuids, uint64_t retry_until_ns, struct ext_reply *r,
		      const struct ext_async *async)
{
	struct bind_pending *p = calloc(1, sizeof(*p));
	struct cache_binding b;
	struct strbuf ann = STRBUF_INIT;
	int ret;

	if (!p) {
		cache_pod_forget(svc->cache, uid);
		reply_error(r, 200, "troupe: out of memory binding pod %s/%s", info->ns, info->name);
		return true;
	}
	p->svc = svc;
	p->r = r;
	p->async = *async;
	p->retry_until_ns = retry_until_ns;
	snprintf(p->uid, sizeof(p->uid), "%s", uid);
	snprintf(p->ns, sizeof(p->ns), "%s", info->ns);
	snprintf(p->name, sizeof(p->name), "%s", info->name);
	snprintf(p->node, sizeof(p->node), "%s", node);
	snprintf(p->ids, sizeof(p->ids), "%s", ids);
	/* The API server copies the Binding's annotations onto the pod: after a
	 * restart, the watch tells troupe exactly which devices the pod holds. */
	strbuf_puts(&ann, "{\"troupe.io/gpu-ids\":");
	strbuf_put_json_str(&ann, ids, strlen(ids));
	if (link[0]) {
		strbuf_puts(&ann, ",\"troupe.io/gpu-link\":");
		strbuf_put_json_str(&ann, link, strlen(link));
	}
	if (uuids[0]) {
		strbuf_puts(&ann, ",\"troupe.io/gpu-uuids\":");
		strbuf_put_json_str(&ann, uuids, strlen(uuids));
	}
	strbuf_putc(&ann, '}');
	p->ann = strbuf_take(&ann, NULL);
	if (!p->ann) {
		cache_pod_forget(svc->cache, uid);
		reply_error(r, 200, "troupe: out of memory binding pod %s/%s", info->ns, info->name);
		free(p);
		return true;
	}
	b = (struct cache_binding){ info->ns, info->name, uid, node, ids[0] ? p->ann : NULL };
	ret = cache_binder_submit(svc->binder, &b, bind_posted, p);
	if (ret < 0) {
		cache_pod_forget(svc->cache, uid);
		reply_error(r, 200, "troupe: cannot post the binding for pod %s/%s: %s", info->ns,
			    info->name, strerror(-ret));
		pending_free(p);
		return true;
	}
	return false;
}

/* A gang member's bind, held by the gang manager until the gang's quorum. */
struct gang_hold {
	const struct ext_service *svc;
	struct ext_reply *r;
	struct ext_async async;
	struct cache_pod_info info;
	char uid[129];
	char node[254];
	uint64_t devices;
	char ids[256];
	char link[16];
	char uuids[2048];
	uint64_t retry_until_ns;        /* when the held request must be answered */
};

/* The gang manager let the bind go (quorum) or gave up on it (expiry). */
static void gang_released(void *ctx, bool ok, const char *why)
{
	struct gang_hold *h = ctx;
	struct cache_node_view v;
	bool complete = true;

	/* What the Binding records, from the devices the member claimed. */
	cache_devices_format(h->devices, h->ids, sizeof(h->ids));
	cache_read_begin(h->svc->cache);
	if (ok && cache_node_lookup(h->svc->cache, h->node, strlen(h->node), &v)) {
		const struct placement_topo *t = placement_node_topo(v.node);

		if (t && __builtin_popcountll(h->devices) >= 2) {
			struct placement_choice c;

			placement_measure(t, h->devices, h->devices, &c);
			placement_link_name(c.worst, h->link, sizeof(h->link));
		}
		cache_node_uuids(v.node, h->devices, h->uuids, sizeof(h->uuids));
	}
	cache_read_end(h->svc->cache);
	if (!ok) {
		/* The manager has already released the member's devices. */
		log_info("extender", "bind: pod %s/%s: %s", h->info.ns, h->info.name, why);
		reply_error(h->r, 200, "%s", why);
	} else if (h->svc->binder) {
		complete = bind_post(h->svc, &h->info, h->uid, h->node, h->ids, h->link, h->uuids,
				     h->retry_until_ns,
				     h->r, &h->async);
	} else {
		log_info("extender", "bind: pod %s/%s -> node %s, GPU devices [%s] (gang complete)",
			 h->info.ns, h->info.name, h->node, h->ids);
		strbuf_puts(&h->r->body, "{\"Error\":\"\"}");
	}
	if (complete)
		h->async.done(h->async.ctx);
	free(h);
}

static enum gang_bind_result bind_gang(const struct ext_service *svc,
				       const struct cache_pod_info *info,
				       const struct placement_request *req, const char *uid,
				       const char *node, struct ext_reply *r,
				       const struct ext_async *async)
{
	struct gang_member mb = { uid, info->ns, info->name, info->group, info->min_member, *req,
				  NULL, info->priority, info->queue };
	struct gang_hold *h = calloc(1, sizeof(*h));
	enum gang_bind_result gr;
	char reason[512], err[256];

	if (!h) {
		reply_error(r, 200, "troupe: out of memory binding pod %s/%s", info->ns, info->name);
		return GANG_BIND_REFUSED;
	}
	gang_topology_parse(info->gang_topology, &mb.required_key, err, sizeof(err));
	h->svc = svc;
	h->r = r;
	h->async = *async;
	h->info = *info;
	{
		const struct gang_config *g = svc->cfg ? &svc->cfg->gang : NULL;
		unsigned budget = !g ? 27 : g->http_timeout_s > g->margin_s ?
				  g->http_timeout_s - g->margin_s : 1;

		h->retry_until_ns = util_now_ns() + (uint64_t)budget * 1000000000u;
	}
	snprintf(h->uid, sizeof(h->uid), "%s", uid);
	snprintf(h->node, sizeof(h->node), "%s", node);
	gr = gang_bind(svc->gangs, &mb, node, gang_released, h, &h->devices, reason,
		       sizeof(reason));
	if (gr == GANG_BIND_HELD)
		return gr;      /* <h> belongs to the manager now (it may be gone already) */
	free(h);
	if (gr == GANG_BIND_REFUSED) {
		log_info("extender", "bind: pod %s/%s: %s", info->ns, info->name, reason);
		reply_error(r, 200, "%s", reason);
	}
	return gr;
}

bool ext_bind(const struct ext_service *svc, const char *body, size_t len, struct ext_reply *r,
	      const struct ext_async *async)
{
	struct ext_bind_args b;
	struct cache_pod_info info;
	struct cache_node_view v;
	char err[256] = "", ids[256], link[16] = "", uuids[2048] = "";
	struct placement_request req = { 0 };
	uint64_t devices = 0;
	int ret = -EAGAIN;
	bool node_seen = false, complete = true;

	if (ext_bind_args_decode(body, len, &b, err, sizeof(err)) < 0) {
		log_warn("extender", "bind: bad request (%zu bytes): %s", len, err);
		reply_error(r, 400, "troupe: bad bind request: %s", err);
		goto out;
	}
	if (!b.pod_uid[0] || !b.node[0] || !b.pod_name[0]) {
		log_warn("extender", "bind: request lacks PodUID, PodName or Node");
		reply_error(r, 200, "troupe: bind request must name PodName, PodUID and Node");
		goto out;
	}
	if (cache_pod_get(svc->cache, b.pod_uid, &info) < 0) {
		log_warn("extender", "bind: pod %s/%s (uid %s) is unknown; it was not seen by filter "
			 "or the cluster source", b.pod_namespace, b.pod_name, b.pod_uid);
		reply_error(r, 200, "troupe: pod %s/%s (uid %s) is unknown to troupe; it was not seen "
			    "by filter or in the cluster state", b.pod_namespace, b.pod_name,
			    b.pod_uid);
		goto out;
	}
	if (strcmp(info.name, b.pod_name) != 0 ||
	    (b.pod_namespace[0] && strcmp(info.ns, b.pod_namespace) != 0)) {
		reply_error(r, 200, "troupe: uid %s belongs to pod %s/%s, not %s/%s", b.pod_uid,
			    info.ns, info.name, b.pod_namespace, b.pod_name);
		goto out;
	}
	req.demand = info.demand;
	if (!info.demand_valid ||
	    placement_policy_parse(info.topology, &req.policy, err, sizeof(err)) < 0) {
		reply_error(r, 200, "troupe: pod %s/%s has an invalid GPU request%s%s", info.ns,
			    info.name, err[0] ? ": " : "", err);
		goto out;
	}
	if (svc->gangs && info.group[0] && async && info.state == CACHE_POD_STATE_PENDING &&
	    info.demand.gpus > 0) {
		enum gang_bind_result gr = bind_gang(svc, &info, &req, b.pod_uid, b.node, r,
							     async);

		if (gr == GANG_BIND_HELD) {
			complete = false;
			goto out;
		}
		if (gr == GANG_BIND_REFUSED)
			goto out;
	}
	if (info.state == CACHE_POD_STATE_ASSUMED || info.state == CACHE_POD_STATE_BOUND) {
		/* A repeated bind (kube-scheduler retrying after a lost reply). With an
		 * API server it is done only once the cluster accepted the Binding. */
		ret = strcmp(info.node, b.node) == 0 ? -EALREADY : -EEXIST;
		devices = info.devices;
		if (ret == -EALREADY && svc->binder && info.state == CACHE_POD_STATE_ASSUMED &&
		    !info.posted) {
			reply_error(r, 200, "troupe: the binding of pod %s/%s to node %s is still in "
				    "progress%s; retry", info.ns, info.name, b.node,
				    info.uncertain ? " (the API server has not confirmed it)" : "");
			goto out;
		}
	}
	for (int attempt = 0; attempt < BIND_ATTEMPTS && ret == -EAGAIN; attempt++) {
		struct placement_fit fit;
		struct placement_choice choice;

		cache_read_begin(svc->cache);
		if (!cache_node_lookup(svc->cache, b.node, strlen(b.node), &v)) {
			cache_read_end(svc->cache);
			ret = -ENOENT;
			break;
		}
		node_seen = true;
		if (info.demand.gpus > 0 &&
		    placement_check_request(&v, &req, cache_get_opts(svc->cache)->gpu_resources,
					    &fit) != PLACEMENT_FITS) {
			cache_read_end(svc->cache);
			snprintf(err, sizeof(err), "%s", fit.reason);
			ret = -ENOSPC;
			break;
		}
		devices = 0;
		ret = info.demand.gpus == 0 ? 0 : placement_node_choose(&v, cache_view_free_mask(&v),
									 info.demand.gpus,
									 &req.policy, &choice);
		if (ret == 0 && info.demand.gpus > 0) {
			devices = choice.set;
			link[0] = '\0';
			/* The worst link is worth recording only where it is known. */
			if (info.demand.gpus >= 2 && placement_node_topo(v.node))
				placement_link_name(choice.worst, link, sizeof(link));
			cache_node_uuids(v.node, devices, uuids, sizeof(uuids));
		}
		cache_read_end(svc->cache);
		if (ret == 0)
			ret = cache_pod_assume(svc->cache, b.pod_uid, b.node, &devices);
		else
			ret = -EAGAIN;  /* the free mask moved under us: read again */
	}
	cache_devices_format(devices, ids, sizeof(ids));
	switch (ret) {
	case 0:
		if (svc->binder && async) {
			complete = bind_post(svc, &info, b.pod_uid, b.node, ids, link, uuids, 0, r,
					     async);
			break;
		}
		log_info("extender", "bind: pod %s/%s -> node %s, GPU devices [%s]%s%s", info.ns,
			 info.name, b.node, ids, link[0] ? ", worst link " : "", link);
		strbuf_puts(&r->body, "{\"Error\":\"\"}");
		break;
	case -EALREADY:
		log_info("extender", "bind: pod %s/%s already on node %s [%s]; nothing to do",
			 info.ns, info.name, b.node, ids);
		strbuf_puts(&r->body, "{\"Error\":\"\"}");
		break;
	case -EEXIST:
		log_warn("extender", "bind: pod %s/%s is already bound to node %s, not %s", info.ns,
			 info.name, info.node, b.node);
		reply_error(r, 200, "troupe: pod %s/%s is already bound to node %s", info.ns,
			    info.name, info.node);
		break;
	case -ENOENT:
		if (!node_seen) {
			log_warn("extender", "bind: node %s is unknown", b.node);
			reply_error(r, 200, "troupe: node %s is unknown to troupe", b.node);
		} else {
			log_warn("extender", "bind: pod %s/%s or node %s was removed while binding",
				 info.ns, info.name, b.node);
			reply_error(r, 200, "troupe: pod %s/%s or node %s was removed while binding",
				    info.ns, info.name, b.node);
		}
		break;
	case -ENOSPC:
		if (!err[0])
			snprintf(err, sizeof(err), "troupe: node %s no longer has %u free GPUs",
				 b.node, info.demand.gpus);
		log_info("extender", "bind: pod %s/%s no longer fits node %s: %s", info.ns,
			 info.name, b.node, err);
		reply_error(r, 200, "%s (pod %s/%s on node %s; it will be retried)", err, info.ns,
			    info.name, b.node);
		break;
	default:
		log_warn("extender", "bind: pod %s/%s on node %s: could not claim devices after %d "
			 "attempts (%s)", info.ns, info.name, b.node, BIND_ATTEMPTS, strerror(-ret));
		reply_error(r, 200, "troupe: could not claim GPUs on node %s for pod %s/%s (%s)",
			    b.node, info.ns, info.name, strerror(-ret));
		break;
	}
out:
	ext_bind_args_fini(&b);
	return complete;
}

/* ---- preempt ------------------------------------------------------------- */

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
			continue;       /* unknown to troupe: it holds nothing troupe counts */
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
	char err[256];
	size_t n = 0, dropped = 0;

	if (ext_preempt_decode(body, len, &root, &pod, &meta, &full, err, sizeof(err)) < 0) {
		log_warn("extender", "preempt: bad request (%zu bytes): %s", len, err);
		reply_error(r, 400, "troupe: bad preempt request: %s", err);
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
		const char *uids[256];
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

/* ---- debug ------------------------------------------------------------- */

struct debug_ctx {
	struct strbuf *out;
	size_t n;
};

static bool debug_node(const struct cache_node_view *v, void *arg)
{
	struct debug_ctx *dc = arg;
	char ids[256];

	cache_devices_format(v->used, ids, sizeof(ids));
	if (dc->n++)
		strbuf_putc(dc->out, ',');
	strbuf_puts(dc->out, "{\"name\":");
	strbuf_put_json_str(dc->out, v->node->name, strlen(v->node->name));
	strbuf_printf(dc->out, ",\"ready\":%s,\"unschedulable\":%s,\"gpuCapacity\":%u,"
		      "\"gpuAllocatable\":%u,\"gpuFree\":%u,\"gpuUnattributed\":%u,"
		      "\"devicesHeld\":\"%s\"}",
		      v->node->ready ? "true" : "false", v->node->unschedulable ? "true" : "false",
		      v->node->gpu_capacity, v->node->gpu_allocatable, cache_view_free_gpus(v),
		      v->unattributed, ids);
	return true;
}

void ext_debug_state(const struct ext_service *svc, struct ext_reply *r)
{
	struct debug_ctx dc = { &r->body, 0 };
	struct cache_stats st;

	cache_get_stats(svc->cache, &st);
	strbuf_printf(&r->body, "{\"synced\":%s,\"source\":",
		      cache_is_synced(svc->cache) ? "true" : "false");
	strbuf_put_json_str(&r->body, svc->source, strlen(svc->source));
	strbuf_printf(&r->body, ",\"stats\":{\"nodes\":%zu,\"pods\":%zu,\"podsHoldingGPUs\":%zu,"
		      "\"podGroups\":%zu,\"gpusAllocatable\":%llu,\"gpusHeld\":%llu}",
		      st.nodes, st.pods, st.pods_holding, st.podgroups,
		      (unsigned long long)st.gpus_allocatable, (unsigned long long)st.gpus_held);
	if (svc->informer) {
		struct cache_informer_stats is;

		cache_informer_get_stats(svc->informer, &is);
		strbuf_printf(&r->body, ",\"informer\":{\"events\":%llu,\"lists\":%llu,"
			      "\"relists\":%llu,\"watchRestarts\":%llu,\"errors\":%llu,"
			      "\"partialLines\":%llu,\"permissionDenials\":%llu}",
			      (unsigned long long)is.events, (unsigned long long)is.lists,
			      (unsigned long long)is.relists, (unsigned long long)is.watch_restarts,
			      (unsigned long long)is.errors, (unsigned long long)is.partial_lines,
			      (unsigned long long)is.permission_denials);
	}
	strbuf_puts(&r->body, ",\"nodes\":[");
	cache_read_begin(svc->cache);
	cache_node_foreach(svc->cache, debug_node, &dc);
	cache_read_end(svc->cache);
	strbuf_puts(&r->body, "]}");
}

static const char *const state_names[] = { "none", "pending", "assumed", "bound" };

static bool debug_node_name(const struct cache_node_view *v, void *arg)
{
	struct debug_ctx *dc = arg;

	if (dc->n++)
		strbuf_putc(dc->out, ',');
	strbuf_put_json_str(dc->out, v->node->name, strlen(v->node->name));
	return true;
}

static void debug_pod(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct debug_ctx *dc = arg;
	char ids[256];

	cache_devices_format(p->devices, ids, sizeof(ids));
	if (dc->n++)
		strbuf_putc(dc->out, ',');
	strbuf_puts(dc->out, "{\"uid\":");
	strbuf_put_json_str(dc->out, uid, strlen(uid));
	strbuf_puts(dc->out, ",\"namespace\":");
	strbuf_put_json_str(dc->out, p->ns, strlen(p->ns));
	strbuf_puts(dc->out, ",\"name\":");
	strbuf_put_json_str(dc->out, p->name, strlen(p->name));
	strbuf_puts(dc->out, ",\"node\":");
	strbuf_put_json_str(dc->out, p->node, strlen(p->node));
	strbuf_printf(dc->out, ",\"state\":\"%s\",\"fromAPI\":%s,\"gpus\":%u,\"devices\":\"%s\","
		      "\"unattributed\":%u}", state_names[p->state], p->from_api ? "true" : "false",
		      p->demand.gpus, ids, p->unattributed);
}

static void debug_group(const struct cache_podgroup *pg, void *arg)
{
	struct debug_ctx *dc = arg;

	if (dc->n++)
		strbuf_putc(dc->out, ',');
	strbuf_puts(dc->out, "{\"namespace\":");
	strbuf_put_json_str(dc->out, pg->ns, strlen(pg->ns));
	strbuf_puts(dc->out, ",\"name\":");
	strbuf_put_json_str(dc->out, pg->name, strlen(pg->name));
	strbuf_printf(dc->out, ",\"minMember\":%d}", pg->min_member);
}

void ext_debug_cache(const struct ext_service *svc, struct ext_reply *r)
{
	struct debug_ctx dc = { &r->body, 0 };

	strbuf_printf(&r->body, "{\"synced\":%s,\"nodes\":[",
		      cache_is_synced(svc->cache) ? "true" : "false");
	cache_read_begin(svc->cache);
	cache_node_foreach(svc->cache, debug_node_name, &dc);
	cache_read_end(svc->cache);
	strbuf_puts(&r->body, "],\"pods\":[");
	dc.n = 0;
	cache_pod_foreach(svc->cache, debug_pod, &dc);
	strbuf_puts(&r->body, "],\"podGroups\":[");
	dc.n = 0;
	cache_podgroup_foreach(svc->cache, debug_group, &dc);
	strbuf_puts(&r->body, "]}");
}

/* ---- readiness ----------------------------------------------------------------- */

/* With an API server the informer knows (lists, streams, permissions); a
 * snapshot is ready once loaded. */
static void readiness_get(const struct ext_service *svc, struct cache_readiness *out)
{
	if (svc->informer) {
		cache_informer_readiness(svc->informer, out);
		return;
	}
	memset(out, 0, sizeof(*out));
	out->state = cache_is_synced(svc->cache) ? CACHE_READY : CACHE_SYNCING;
}

void ext_readyz(const struct ext_service *svc, struct ext_reply *r)
{
	struct cache_readiness rd;
	const char *sep = "";

	readiness_get(svc, &rd);
	if (rd.state != CACHE_READY)
		r->status = 503;
	switch (rd.state) {
	case CACHE_READY:
		strbuf_puts(&r->body, "{\"status\":\"ready\"}");
		break;
	case CACHE_SYNCING:
		strbuf_puts(&r->body, "{\"status\":\"syncing\"}");
		break;
	case CACHE_API_UNREACHABLE:
		strbuf_puts(&r->body, "{\"status\":\"api-unreachable\",\"detail\":");
		strbuf_put_json_str(&r->body, rd.detail, strlen(rd.detail));
		strbuf_putc(&r->body, '}');
		break;
	case CACHE_FORBIDDEN:
		strbuf_puts(&r->body, "{\"status\":\"forbidden\",\"missing\":[");
		for (int p = 0; p < CACHE_PERM_COUNT; p++) {
			const char *name = cache_permission_get((enum cache_perm)p)->name;

			if (!(rd.missing & (1u << p)))
				continue;
			strbuf_puts(&r->body, sep);
			strbuf_put_json_str(&r->body, name, strlen(name));
			sep = ",";
		}
		strbuf_puts(&r->body, "]}");
		break;
	}
}

/* ---- metrics --------------------------------------------------------------- */

void ext_count(struct ext_counters *c, enum ext_counter_verb verb, bool error)
{
	if (!c)
		return;
	__atomic_add_fetch(&c->requests[verb], 1, __ATOMIC_RELAXED);
	if (error)
		__atomic_add_fetch(&c->errors[verb], 1, __ATOMIC_RELAXED);
}

static void metric(struct strbuf *sb, const char *name, const char *type, const char *help,
		   unsigned long long v)
{
	strbuf_printf(sb, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name, v);
}

/* A counter per verb, one line each. */
static void metric_by_verb(struct strbuf *sb, const char *name, const char *help,
			   const char *const *verbs, const uint64_t *counts)
{
	strbuf_printf(sb, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	for (int i = 0; i < EXT_C_VERBS; i++)
		strbuf_printf(sb, "%s{verb=\"%s\"} %llu\n", name, verbs[i],
			      (unsigned long long)__atomic_load_n(&counts[i], __ATOMIC_RELAXED));
}

void ext_metrics(const struct ext_service *svc, struct ext_reply *r)
{
	static const char *const verbs[EXT_C_VERBS] = { "filter", "prioritize", "bind", "preempt",
							"other" };
	struct strbuf *sb = &r->body;
	struct cache_readiness rd;
	struct cache_stats st;

	cache_get_stats(svc->cache, &st);
	readiness_get(svc, &rd);
	metric(sb, "troupe_synced", "gauge", "1 once every initial list is applied",
	       cache_is_synced(svc->cache));
	metric(sb, "troupe_ready", "gauge",
	       "1 while /readyz answers 200: synced, the API server reachable, no permission "
	       "missing", rd.state == CACHE_READY);
	metric(sb, "troupe_nodes", "gauge", "Nodes in the cache", st.nodes);
	metric(sb, "troupe_pods", "gauge", "Pods in the cache", st.pods);
	metric(sb, "troupe_pods_holding_gpus", "gauge", "Pods holding GPUs", st.pods_holding);
	metric(sb, "troupe_pod_groups", "gauge", "PodGroups in the cache", st.podgroups);
	metric(sb, "troupe_gpus_allocatable", "gauge", "Allocatable GPUs of known nodes",
	       st.gpus_allocatable);
	metric(sb, "troupe_gpus_held", "gauge", "GPUs held by bound or assumed pods",
	       st.gpus_held);
	if (svc->counters) {
		struct ext_counters *c = svc->counters;

		metric_by_verb(sb, "troupe_requests_total", "Requests answered, by verb", verbs,
			       c->requests);
		metric_by_verb(sb, "troupe_request_errors_total", "Requests answered with an error",
			       verbs, c->errors);
		strbuf_printf(sb, "# HELP troupe_filter_seconds_total Server-side time in filter "
			      "(divided by the filter count: the mean)\n"
			      "# TYPE troupe_filter_seconds_total counter\n"
			      "troupe_filter_seconds_total %.6f\n",
			      __atomic_load_n(&c->filter_ns_total, __ATOMIC_RELAXED) / 1e9);
	}
	if (svc->cycle) {
		uint64_t used, stale, names;

		ext_cycle_get_stats(svc->cycle, &used, &stale, &names);
		metric(sb, "troupe_prioritize_from_filter_total", "counter",
		       "Prioritize requests answered from the scores their filter left", used);
		metric(sb, "troupe_prioritize_filter_stale_total", "counter",
		       "Filter scores not used: the cache or the pod's request changed since",
		       stale);
		metric(sb, "troupe_prioritize_names_from_filter_total", "counter",
		       "Node scores prioritize took from its filter instead of computing them",
		       names);
	}
	if (svc->informer) {
		struct cache_informer_stats is;

		cache_informer_get_stats(svc->informer, &is);
		metric(sb, "troupe_watch_events_total", "counter", "Watch events applied", is.events);
		metric(sb, "troupe_lists_total", "counter", "Full lists completed", is.lists);
		metric(sb, "troupe_relists_total", "counter",
		       "Lists caused by an expired resourceVersion (410)", is.relists);
		metric(sb, "troupe_watch_restarts_total", "counter", "Watches re-opened",
		       is.watch_restarts);
		metric(sb, "troupe_api_errors_total", "counter",
		       "Failed API requests (connection, 429, 5xx, ...)", is.errors);
		metric(sb, "troupe_partial_events_total", "counter",
		       "Cut watch events discarded", is.partial_lines);
		metric(sb, "troupe_permission_denials_total", "counter",
		       "Access reviews answering not allowed, and lists or watches refused (403)",
		       is.permission_denials);
		metric(sb, "troupe_permissions_missing", "gauge",
		       "Permissions troupe needs and lacks now (named by /readyz)",
		       (unsigned long long)__builtin_popcount(rd.missing));
	}
	if (svc->gangs) {
		struct gang_stats gs;

		gang_get_stats(svc->gangs, &gs);
		metric(sb, "troupe_gangs_planned_total", "counter", "Gang plans made and reserved",
		       gs.planned);
		metric(sb, "troupe_gangs_refused_total", "counter",
		       "Gang plans refused for lack of capacity", gs.refused);
		metric(sb, "troupe_gangs_deferred_total", "counter",
		       "Gangs told to wait behind a gang earlier in the fair order", gs.deferred);
		metric(sb, "troupe_gangs_expired_total", "counter",
		       "Gang plans rolled back at their deadline", gs.expired);
		metric(sb, "troupe_gangs_released_total", "counter",
		       "Gangs whose held binds were released at quorum", gs.released);
		metric(sb, "troupe_gangs_planned", "gauge", "Gangs with a plan now", gs.active);
		metric(sb, "troupe_gangs_waiting", "gauge", "Gangs waiting for capacity", gs.waiting);
		metric(sb, "troupe_gang_held_sets", "gauge",
		       "Member-sized GPU sets held for a starving gang", gs.held_sets);
		metric(sb, "troupe_gang_entries", "gauge",
		       "Pod groups the gang manager keeps state for", gs.entries);
	}
	if (svc->registry) {
		uint64_t classes, bad;

		placement_registry_stats(svc->registry, &classes, &bad);
		metric(sb, "troupe_topology_classes", "gauge", "Distinct GPU topologies in use",
		       classes);
		metric(sb, "troupe_topology_parse_errors_total", "counter",
		       "Node troupe.io/gpu-topology annotations that could not be read", bad);
	}
}
