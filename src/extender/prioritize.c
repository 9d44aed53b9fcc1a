/* prioritize: a 0..10 score for each of the request's nodes.
 *
 * A planned gang's member scores its plan's slots 10 and nothing else; a
 * single pod scores what placement_check_request lets it have, through the
 * scoring policy (memoised: nodes alike score alike), or takes the scores its
 * filter left moments before (cycle.h) when nothing changed since. Those are
 * fine scores (0..250); the answer is their rank among the request's nodes
 * (placement_rank: the best 10, the next 9, ...), so the whole answer is
 * gathered before any of it is written. A single GPU pod's best-ranked nodes
 * are left for its bind, which counts whether kube-scheduler chose one of
 * them (top_choice.h).
 */
#include "extender/internal.h"

#include <string.h>

#include "common/log.h"
#include "extender/cycle.h"
#include "extender/top_choice.h"

/* A node's answer, kept until every node is scored: its name (the request's
 * own, or in the names buffer when the request's copy dies with the call), and
 * its fine score (ranked) or its final score (not ranked). */
struct prio_item {
	const char *name;               /* NULL: at name_at in the names buffer */
	size_t name_at, name_len;
	unsigned score;
	bool ranked;
};

struct prio_ctx {
	const struct ext_service *svc;
	const struct cache_pod *pod;
	struct placement_request req;
	struct gang_member mb;          /* the pod as a gang member, if it is one */
	struct placement_score_memo memo;       /* nodes alike score alike */
	bool gang;                      /* gangs are on and the pod names a group */
	struct strbuf *out;
	bool keep;                      /* false: write each answer as it comes */
	struct prio_item *items;
	size_t n, cap;
	/* Full node objects: a name dies with its node's callback, so kept
	 * names are copied here; names from NodeNames live as long as the
	 * request and are pointed at. */
	bool copy_names;
	struct strbuf names;
	struct placement_rank rank;
	bool oom;
	/* The answer's best nodes, for bind's troupe_bind_top_choice_total
	 * (top_choice.h); a single GPU pod's only. */
	bool top_on;
	struct ext_top_choice_entry top;
};

/* One HostPriority of the answer. */
static void write_score(struct strbuf *out, size_t i, const char *name, size_t len,
			unsigned score)
{
	if (i)
		strbuf_putc(out, ',');
	strbuf_puts(out, "{\"Host\":");
	strbuf_put_json_str(out, name, len);
	strbuf_puts(out, ",\"Score\":");
	strbuf_put_i64(out, score);
	strbuf_putc(out, '}');
}

/* One node's answer: written now when nothing is ranked, else kept. A ranked
 * score is a fine one for placement_rank. */
static void put_score(struct prio_ctx *pc, const char *name, size_t len, unsigned score,
		      bool ranked)
{
	if (!pc->keep) {
		write_score(pc->out, pc->n++, name, len, score);
		return;
	}
	if (pc->n == pc->cap) {
		size_t cap = pc->cap ? pc->cap * 2 : 256;
		struct prio_item *p = realloc(pc->items, cap * sizeof(*p));

		if (!p) {
			pc->oom = true;
			return;
		}
		pc->items = p;
		pc->cap = cap;
	}
	if (pc->copy_names) {
		pc->items[pc->n++] = (struct prio_item){ NULL, pc->names.len, len, score, ranked };
		strbuf_append(&pc->names, name, len);
	} else {
		pc->items[pc->n++] = (struct prio_item){ name, 0, len, score, ranked };
	}
	if (ranked)
		placement_rank_add(&pc->rank, score);
}

/* Write the kept answers, the ranked ones by rank. */
static void write_kept(struct prio_ctx *pc)
{
	placement_rank_finish(&pc->rank);
	for (size_t i = 0; i < pc->n; i++) {
		const struct prio_item *it = &pc->items[i];
		const char *name = it->name ? it->name
					    : it->name_len ? pc->names.buf + it->name_at : "";
		unsigned score = it->ranked ? placement_rank_score(&pc->rank, it->score) : it->score;

		write_score(pc->out, i, name, it->name_len, score);
		if (pc->top_on && it->ranked)
			ext_top_choice_add(&pc->top, name, it->name_len, score);
	}
	if (pc->top_on)
		ext_top_choice_put(pc->svc->top_choice, &pc->top);
}

/* One node's score (ext__walk_nodes' callback): a gang member's slots, or the
 * policy's score where the pod fits, else 0. */
static void prioritize_node(const struct node_ref *ref, void *arg)
{
	struct prio_ctx *pc = arg;
	struct placement_fit fit;
	unsigned score = 0;
	bool has, ranked = false;

	/* A planned gang's member: its slots decide (10), nothing else. */
	if (ref->view && pc->gang &&
	    gang_has_slot(pc->svc->gangs, &pc->mb, ref->name, &has) == GANG_ALLOWED) {
		score = has ? PLACEMENT_MAX_SCORE : 0;
	} else if (ref->view && pc->pod->demand.gpus > 0 &&
		   placement_check_request(ref->view, &pc->req,
					   cache_get_opts(pc->svc->cache)->gpu_resources,
					   &fit) == PLACEMENT_FITS) {
		score = placement_score_memoized(&pc->memo, ref->view);
		ranked = true;
	}
	put_score(pc, ref->name, ref->len, score, ranked);
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
			put_score(pc, n->s, n->len, score, true);
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
	char err[EXT_REQUEST_ERR_BUF];

	if (ext_args_decode(body, len, &a, err, sizeof(err)) < 0) {
		log_warn("extender", "prioritize: bad request (%zu bytes): %s", len, err);
		ext__reply_error(r, 400, "troupe: bad prioritize request: %s", err);
		goto out;
	}
	pod = ext__request_pod(svc, &a, "prioritize", r, &pc.req, NULL);
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
		pc.mb = ext__member_of(pod, &pc.req);
	strbuf_putc(&r->body, '[');
	/* Scores to rank are kept until the last node; none, written at once. */
	pc.keep = pod->demand.gpus > 0 || pc.gang;
	pc.copy_names = a.full_nodes;
	if ((pc.top_on = svc->top_choice && pod->demand.gpus > 0 && !pc.gang))
		ext_top_choice_begin(&pc.top, pod->uid);
	if (!pc.keep) {
		/* Asks for no managed resource: every node scores 0, with nothing to
		 * look up (as filter passes them all). */
		const cJSON *it = NULL;

		for (size_t x = 0; x < a.n_nodes; x++) {
			const char *name = ext__item_name(&a, x, (it = ext__next_item(&a, it)));

			put_score(&pc, name ? name : "", name ? strlen(name) : 0, 0, false);
		}
	} else if ((cycle = svc->cycle && !pc.gang && !a.full_nodes
				? ext_cycle_take(svc->cycle, pod->uid, cache_changes(svc->cache),
						 &pc.req)
				: NULL)) {
		prioritize_from_filter(svc, &a, cycle, &pc);
	} else {
		ext__walk_nodes(svc, &a, prioritize_node, &pc);
	}
	if (pc.oom || strbuf_failed(&pc.names)) {
		/* Out of memory keeping the answers: say nothing rather than half. */
		log_warn("extender", "prioritize: pod %s/%s: out of memory ranking %zu nodes; "
			 "answering no scores", pod->ns, pod->name, a.n_nodes);
		strbuf_fini(&r->body);
		strbuf_puts(&r->body, "[");
	} else if (pc.keep) {
		write_kept(&pc);
	}
	strbuf_putc(&r->body, ']');
out:
	free(pc.items);
	strbuf_fini(&pc.names);
	ext_cycle_entry_free(cycle);
	cache_pod_free(pod);
	ext_args_fini(&a);
}
