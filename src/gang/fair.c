/* The fair order between gangs, and capacity held for a starving one.
 *
 * A gang refused for lack of capacity waits (WAITING) in the queue order: pod
 * priority, then the lowest weighted dominant share of its queue (DRF over
 * GPU, CPU and memory of the ready nodes), then age (gang__precedes). A gang
 * behind a waiting gang that would fit in the offered capacity is refused,
 * naming it (admit.c). The head of that order, once it has waited
 * gang.starvation_seconds, gets capacity *held* for it as it frees:
 * member-sized sets reserved on the emptiest nodes, so a stream of small pods
 * cannot starve it; filter refuses those nodes to lower pods (held_nodes.c).
 *
 * Shares come from a walk of every pod in the cache, so they are loaded with
 * the manager's lock dropped (gang__shares_load) and handed in.
 */
#include "gang/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "placement/placement.h"

/* ---- Shares ----------------------------------------------------------------- */

struct usage {
	uint64_t gpus;
	int64_t cpu_milli, mem_bytes;
};

struct usage_entry {
	struct usage u;
	char queue[K8S_NAME_BUF];
	/* Its weight, read once (under the manager's lock, at the first share
	 * asked of it), so that one sort sees one weight however the config or a
	 * Queue object changes meanwhile. */
	bool weighed;
	double weight;
};

/* A pod group's queue as gang__group_queue finds it (its PodGroup's
 * spec.queue, cache_podgroup_foreach_winning's), gathered before the walk of
 * every pod, which may not call into the cache. */
struct pg_queue {
	char key[K8S_KEY_BUF];          /* "ns/name", the map's key */
	char queue[K8S_NAME_BUF];       /* "" when that PodGroup names none */
};

static void collect_pg_queue(const struct cache_podgroup *pg, void *arg)
{
	struct strmap *map = arg;
	struct pg_queue *q;
	int n;

	q = calloc(1, sizeof(*q));
	if (!q)
		return;
	n = snprintf(q->key, sizeof(q->key), "%s/%s", pg->ns, pg->name);
	snprintf(q->queue, sizeof(q->queue), "%s", pg->queue);
	if (n <= 0 || (size_t)n >= sizeof(q->key) ||
	    strmap_put(map, q->key, (size_t)n, q, NULL) < 0)
		free(q);
}

struct usage_walk {
	struct shares *s;
	struct strmap *pg_queues;
};

static void add_usage(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct usage_walk *w = arg;
	struct shares *s = w->s;
	const char *queue = p->queue;
	struct usage_entry *e;

	(void)uid;
	if (p->state != CACHE_POD_STATE_ASSUMED && p->state != CACHE_POD_STATE_BOUND)
		return;
	/* A gang member counts where its gang is ordered: its PodGroup's queue
	 * when that names one (a reservation carries its gang's queue already). */
	if (!p->reservation && p->group[0]) {
		char key[K8S_KEY_BUF];
		int n = snprintf(key, sizeof(key), "%s/%s", p->ns, p->group);
		const struct pg_queue *q = n > 0 && (size_t)n < sizeof(key)
					   ? strmap_get(w->pg_queues, key, (size_t)n) : NULL;

		if (q && q->queue[0])
			queue = q->queue;
	}
	e = strmap_get(&s->by_queue, queue, strlen(queue));
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return;
		snprintf(e->queue, sizeof(e->queue), "%s", queue);
		if (strmap_put(&s->by_queue, e->queue, strlen(e->queue), e, NULL) < 0) {
			free(e);
			return;
		}
	}
	e->u.gpus += (uint64_t)__builtin_popcountll(p->devices) + p->unattributed;
	if (!p->reservation) {
		e->u.cpu_milli += p->demand.cpu_milli;
		e->u.mem_bytes += p->demand.mem_bytes;
	}
}

void gang__shares_load(struct gang_manager *m, struct shares *s)
{
	struct strmap pg_queues;
	struct usage_walk w = { s, &pg_queues };
	size_t pos = 0;
	void *v;

	strmap_init(&s->by_queue);
	strmap_init(&pg_queues);
	cache_get_stats(m->cache, &s->totals);
	cache_podgroup_foreach_winning(m->cache, collect_pg_queue, &pg_queues);
	cache_pod_foreach(m->cache, add_usage, &w);
	while (strmap_next(&pg_queues, &pos, NULL, &v))
		free(v);
	strmap_fini(&pg_queues);
}

void gang__shares_fini(struct shares *s)
{
	size_t pos = 0;
	void *v;

	while (strmap_next(&s->by_queue, &pos, NULL, &v))
		free(v);
	strmap_fini(&s->by_queue);
}

double gang_config_queue_weight(const struct gang_config *cfg, const char *queue)
{
	for (unsigned i = 0; i < cfg->n_queues; i++)
		if (strcmp(cfg->queue_names[i], queue) == 0)
			return cfg->queue_weights[i] > 0 ? cfg->queue_weights[i] : 1.0;
	return 1.0;
}

double gang__queue_weight(const struct gang_manager *m, const char *queue, const char **from)
{
	enum cache_queue_api api;
	double w;

	for (unsigned i = 0; i < m->cfg.n_queues; i++)
		if (strcmp(m->cfg.queue_names[i], queue) == 0) {
			if (from)
				*from = "config";
			return m->cfg.queue_weights[i] > 0 ? m->cfg.queue_weights[i] : 1.0;
		}
	if (cache_queue_weight(m->cache, queue, &w, &api)) {
		if (from)
			*from = cache_queue_apis[api].who;
		return w;
	}
	if (from)
		*from = "default";
	return 1.0;
}

double gang__share_of(const struct gang_manager *m, const struct shares *s, const char *queue)
{
	const struct usage_entry *e = strmap_get(&s->by_queue, queue, strlen(queue));
	double d = 0.0;

	if (!e)
		return 0.0;
	if (s->totals.ready_gpus)
		d = (double)e->u.gpus / (double)s->totals.ready_gpus;
	if (s->totals.ready_cpu_milli > 0 && (double)e->u.cpu_milli / s->totals.ready_cpu_milli > d)
		d = (double)e->u.cpu_milli / (double)s->totals.ready_cpu_milli;
	if (s->totals.ready_mem_bytes > 0 && (double)e->u.mem_bytes / s->totals.ready_mem_bytes > d)
		d = (double)e->u.mem_bytes / (double)s->totals.ready_mem_bytes;
	if (!e->weighed) {
		/* The caller's own copy of the shares (gang__shares_load's), only
		 * ever read by the thread that loaded it. */
		struct usage_entry *w = (struct usage_entry *)e;

		w->weight = gang__queue_weight(m, queue, NULL);
		w->weighed = true;
	}
	return d / e->weight;
}

uint64_t gang__queue_gpus(const struct shares *s, const char *queue)
{
	const struct usage_entry *e = strmap_get(&s->by_queue, queue, strlen(queue));

	return e ? e->u.gpus : 0;
}

double gang_queue_share(struct gang_manager *m, const char *queue)
{
	struct shares s;
	double d;

	gang__shares_load(m, &s);
	pthread_mutex_lock(&m->lock);   /* the weights may be reloaded */
	d = gang__share_of(m, &s, queue);
	pthread_mutex_unlock(&m->lock);
	gang__shares_fini(&s);
	return d;
}

void gang_manager_set_queues(struct gang_manager *m, const struct gang_config *from)
{
	pthread_mutex_lock(&m->lock);
	m->cfg.n_queues = from->n_queues;
	memcpy(m->cfg.queue_names, from->queue_names, sizeof(m->cfg.queue_names));
	memcpy(m->cfg.queue_weights, from->queue_weights, sizeof(m->cfg.queue_weights));
	/* The next fairness pass (within a second) orders the waiting gangs by
	 * the new weights and moves any starvation hold to the new head. */
	gang__unlock(m);
}

/* ---- The fair order ----------------------------------------------------------- */

int gang_fair_precedes(const struct gang_fair_key *a, const struct gang_fair_key *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority ? 1 : -1;
	if (a->share != b->share)
		return a->share < b->share ? 1 : -1;
	if (a->waiting_since_ns != b->waiting_since_ns)
		return a->waiting_since_ns < b->waiting_since_ns ? 1 : -1;
	return strcmp(a->key, b->key) < 0 ? 1 : -1;
}

/* The one rule (gang_fair_precedes), on a gang's terms and the shares loaded. */
int gang__precedes(const struct gang_manager *m, const struct shares *s, const struct gang *a,
		   const struct gang *b)
{
	struct gang_fair_key ka = { a->priority, gang__share_of(m, s, a->queue),
				    a->waiting_since_ns, a->key };
	struct gang_fair_key kb = { b->priority, gang__share_of(m, s, b->queue),
				    b->waiting_since_ns, b->key };

	return gang_fair_precedes(&ka, &kb);
}

/* A waiting gang still waits while its quorum of members exists, is not bound,
 * and someone asked about it in the last five minutes. A gang that no longer
 * does stops waiting here and gives back what was held for it. Checked by the
 * once-a-second fairness pass and again whenever the fair order is read, so a
 * gang whose pods were just deleted never makes another wait behind it (found
 * end to end: the next gangs were refused "waits behind" a gang whose pods were
 * gone, and kube-scheduler does not retry a refused pod until a cluster event
 * comes). */
bool gang__still_waiting(struct gang_manager *m, struct gang *g, uint64_t now)
{
	unsigned exist, bound;

	cache_group_count(m->cache, g->ns, g->name, &exist, &bound);
	if (exist >= g->quorum && bound < g->quorum &&
	    util_elapsed_ns(now, g->last_seen_ns) <= 300ULL * 1000000000ULL)
		return true;
	gang__enter(g, GANG_IDLE, now);
	gang__holds_release(m, g);
	return false;
}

struct gang *gang__head_waiting(struct gang_manager *m, const struct shares *s,
				const struct gang *except)
{
	struct gang *best = NULL;
	uint64_t now = gang__now(m);
	size_t pos = 0;
	void *v;

	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;

		if (!gang__waiting(g) || g == except || !gang__still_waiting(m, g, now))
			continue;
		if (!best || gang__precedes(m, s, g, best) > 0)
			best = g;
	}
	return best;
}

/* ---- Starvation holds -------------------------------------------------------- */

void gang__holds_release(struct gang_manager *m, struct gang *g)
{
	for (unsigned i = 0; i < g->n_holds; i++)
		cache_reservation_release(m->cache, g->holds[i].key);
	g->n_holds = 0;
	if (g->n_targets)
		m->holds_dirty = true;
	free(g->targets);
	g->targets = NULL;
	g->n_targets = 0;
}

struct hold_cand {
	const char *name;
	uint32_t free;
};

struct hold_scan {
	struct hold_cand *c;
	size_t n, cap;
	int gpu_resource;
	unsigned k;
};

static bool collect_hold_cand(const struct cache_node_view *v, void *arg)
{
	struct hold_scan *hs = arg;
	uint32_t f = cache_view_free_gpus(v);

	if (placement_node_usable(v->node, hs->gpu_resource) != PLACEMENT_USABLE || f < hs->k)
		return true;
	if (hs->n == hs->cap) {
		size_t cap = hs->cap ? hs->cap * 2 : 64;
		struct hold_cand *c = realloc(hs->c, cap * sizeof(*c));

		if (!c)
			return false;
		hs->c = c;
		hs->cap = cap;
	}
	hs->c[hs->n].name = strdup(v->node->name);
	hs->c[hs->n].free = f;
	if (hs->c[hs->n].name)
		hs->n++;
	return true;
}

static int by_free_desc(const void *a, const void *b)
{
	const struct hold_cand *x = a, *y = b;

	if (x->free != y->free)
		return x->free > y->free ? -1 : 1;
	return strcmp(x->name, y->name);
}

static bool hold_on(const struct gang *g, const char *node)
{
	for (unsigned i = 0; i < g->n_targets; i++)
		if (strcmp(g->targets[i], node) == 0)
			return true;
	return false;
}

/* Hold the GPUs free on target <node> now for <g>; <members> grows by the
 * members the node could take (its allocatable over the member size <k>).
 * False when out of memory: the pass stops there. */
static bool hold_node(struct gang_manager *m, struct gang *g, const char *node, unsigned k,
		      unsigned *members)
{
	struct cache_node_view v;
	uint64_t free_mask = 0;
	struct hold *h;

	cache_read_begin(m->cache);
	if (cache_node_lookup(m->cache, node, strlen(node), &v)) {
		*members += v.node->gpu_allocatable / k;
		free_mask = cache_view_free_mask(&v);
		/* Never more than the free count says (unattributed GPUs). */
		while ((unsigned)__builtin_popcountll(free_mask) > cache_view_free_gpus(&v))
			free_mask &= free_mask - 1;
	}
	cache_read_end(m->cache);
	if (!free_mask)
		return true;
	if (g->n_holds == g->cap_holds) {
		unsigned cap = g->cap_holds ? g->cap_holds * 2 : 8;
		struct hold *nh = realloc(g->holds, cap * sizeof(*nh));

		if (!nh)
			return false;
		g->holds = nh;
		g->cap_holds = cap;
	}
	h = &g->holds[g->n_holds];
	snprintf(h->key, sizeof(h->key), "gang-hold/%s/%u", g->key, ++g->hold_seq);
	snprintf(h->node, sizeof(h->node), "%s", node);
	h->devices = free_mask;
	if (cache_reserve_for(m->cache, h->key, h->node, free_mask, g->queue) == 0)
		g->n_holds++;
	return true;
}

/* Pick target nodes (those already holding for it, then the emptiest) whose
 * allocatable can take all its members, and reserve every GPU that is free on
 * them now. Each pass holds what freed since the last, so small pods cannot
 * creep back in. */
void gang__holds_grow(struct gang_manager *m, struct gang *g)
{
	/* k = 0: every usable node is a candidate, also those with nothing free
	 * now (a target keeps being one while its GPUs free up). */
	struct hold_scan hs = { .gpu_resource = g->req.demand.gpu_resource, .k = 0 };
	unsigned k = g->req.demand.gpus, members = 0;

	if (!k || !g->need)
		return;
	if (!g->n_holds && !g->hold_seq) {
		unsigned long long waited =
			util_elapsed_ns(gang__now(m), g->waiting_since_ns) / 1000000000ULL;

		log_info("gang", "gang %s has waited %llus first in the fair order; holding GPUs for "
			 "it as they free", g->key, waited);
		gang__notify(m, GANG_NOTE_HOLD, g, NULL, "waited %llus first in the fair order "
			     "(queue %s, priority %d); holding GPUs for it as they free", waited,
			     g->queue, g->priority);
	}
	cache_read_begin(m->cache);
	cache_node_foreach(m->cache, collect_hold_cand, &hs);
	cache_read_end(m->cache);
	/* Nodes already holding for it come first, then the emptiest. */
	for (size_t i = 0; i < hs.n; i++)
		if (hold_on(g, hs.c[i].name))
			hs.c[i].free += 1000;
	qsort(hs.c, hs.n, sizeof(*hs.c), by_free_desc);
	free(g->targets);
	g->targets = calloc(hs.n ? hs.n : 1, sizeof(*g->targets));
	g->n_targets = 0;
	m->holds_dirty = true;
	for (size_t i = 0; i < hs.n && members < g->need; i++) {
		if (g->targets)
			snprintf(g->targets[g->n_targets++], sizeof(g->targets[0]), "%s", hs.c[i].name);
		if (!hold_node(m, g, hs.c[i].name, k, &members))
			break;
	}
	for (size_t i = 0; i < hs.n; i++)
		free((char *)hs.c[i].name);
	free(hs.c);
}

/* The fairness pass's first half: drop waiting gangs nobody wants any more,
 * forget idle ones. Lock held. */
static void settle_table(struct gang_manager *m, uint64_t now)
{
	size_t pos = 0;
	void *v;

	gang__discover_waiting(m, now);
	gang__forget_idle(m, now);
	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;

		if (gang__waiting(g))
			gang__still_waiting(m, g, now);
	}
}

/* The second half, on shares loaded after the first: hold capacity for the
 * starving head, and for nobody else. Lock held. */
static void hold_for_head(struct gang_manager *m, const struct shares *s, uint64_t now)
{
	struct gang *head = gang__head_waiting(m, s, NULL);
	size_t pos = 0;
	void *v;

	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;

		if (g != head && (g->n_holds || g->n_targets))
			gang__holds_release(m, g);
	}
	if (head && m->cfg.starvation_holds &&
	    util_elapsed_ns(now, head->waiting_since_ns) >=
		    (uint64_t)m->cfg.starvation_s * 1000000000ULL)
		gang__holds_grow(m, head);
}

void gang__fairness_pass(struct gang_manager *m, uint64_t now)
{
	struct shares s;

	pthread_mutex_lock(&m->lock);
	settle_table(m, now);
	/* The shares see what the first half released. */
	gang__unlock(m);
	gang__shares_load(m, &s);
	pthread_mutex_lock(&m->lock);
	if (!m->stop)
		hold_for_head(m, &s, now);
	gang__unlock(m);
	gang__shares_fini(&s);
}
