/* The gang manager: all-or-nothing admission for pod groups, built on the
 * extender verbs kube-scheduler calls one pod at a time.
 *
 *   filter (first member seen)  plan the whole gang (plan.c) over the offered
 *                               nodes and reserve every slot in the cache: the
 *                               devices count as used for every other pod.
 *   filter (any member)         only nodes with an open slot pass.
 *   bind                        the member claims its slot (the reservation's
 *                               devices pass to the pod without ever being
 *                               free) and its bind is *held*; once the gang's
 *                               quorum is held or bound, every held bind is
 *                               released to post its Binding.
 *   expiry                      a plan not complete by the group's timeout, or
 *                               held binds about to outlive kube-scheduler's
 *                               httpTimeout, is rolled back: reservations
 *                               freed, held members' devices freed and their
 *                               binds answered with an error.
 *
 *   fairness                    a gang refused for lack of capacity waits in
 *                               the queue order: pod priority, then the lowest
 *                               weighted dominant share of its queue (DRF over
 *                               GPU, CPU and memory of the ready nodes), then
 *                               age. A gang behind a waiting gang that would fit
 *                               in the offered capacity is refused, naming it.
 *                               The head of that order, once it has waited
 *                               gang.starvation_seconds, gets capacity held for
 *                               it as it frees (member-sized sets reserved on
 *                               the emptiest nodes), so a stream of small pods
 *                               cannot starve it.
 *
 * Locking: one mutex guards the gang table. It is never held across a call
 * into the cache that could block on I/O (there is none) nor across a release
 * callback; callbacks run after the lock is dropped.
 */
#include "gang/gang.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/strmap.h"
#include "common/util.h"

/* A held bind, and how it is to be answered: the answer is written in place,
 * so releasing a gang's binds needs no memory. */
struct held {
	char uid[129];
	gang_release_fn release;
	void *ctx;
	bool ok;
	char why[512];
};

struct hold {
	char key[400];
	char node[254];
	uint64_t devices;
};

struct gslot {
	char node[254];
	uint64_t devices;
	struct placement_request req;   /* the member request it was planned for */
	char res_key[400];              /* the reservation while unclaimed */
	char member[129];               /* the pod that claimed it, "" when open */
};

struct gang {
	char key[320];                  /* "ns/name" */
	char ns[64];
	char name[254];
	unsigned quorum;
	unsigned timeout_s;
	struct gslot *slots;            /* the plan; NULL when it has none */
	unsigned n_slots;
	struct held *held;
	unsigned n_held, cap_held;
	uint64_t deadline_ns;
	bool deadline_is_http;          /* the held-bind limit, not the group's timeout */
	unsigned generation;            /* bumped per plan, names reservations */
	unsigned moves;                 /* slots moved, names their reservations */
	/* Waiting for capacity (a plan was refused), for the fair order. */
	bool waiting;
	uint64_t waiting_since_ns;
	uint64_t last_seen_ns;          /* a member's last filter */
	int32_t priority;
	char queue[254];
	unsigned need;                  /* members to place */
	uint64_t need_gpus;             /* GPUs they ask in all */
	struct placement_request req;   /* the largest member request (holds) */
	struct hold *holds;             /* capacity held while it starves */
	unsigned n_holds, cap_holds, hold_seq;
	char (*targets)[254];           /* nodes whose freed GPUs are kept for it */
	unsigned n_targets;
	char reason[640];               /* why the last attempt failed */
};

struct gang_manager {
	struct cache *cache;
	struct gang_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;                      /* guarded by lock */
	struct strmap gangs;            /* key -> struct gang; guarded by lock */
	struct gang_stats stats;        /* guarded by lock */
	bool any_holds;                 /* relaxed atomic: some gang holds capacity */
	pthread_t thread;
};

/* Answer held binds taken out of a gang, once the lock is dropped. */
static void run_releases(struct held *r, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		r[i].release(r[i].ctx, r[i].ok, r[i].why);
	free(r);
}

/* ---- Gang table --------------------------------------------------------------- */

static struct gang *gang_get(struct gang_manager *m, const char *ns, const char *name,
			     bool create)
{
	char key[320];
	struct gang *g;

	snprintf(key, sizeof(key), "%s/%s", ns, name);
	g = strmap_get(&m->gangs, key, strlen(key));
	if (g || !create)
		return g;
	g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	snprintf(g->key, sizeof(g->key), "%s", key);
	snprintf(g->ns, sizeof(g->ns), "%s", ns);
	snprintf(g->name, sizeof(g->name), "%s", name);
	g->last_seen_ns = util_now_ns();        /* not idle from birth (forget_idle) */
	if (strmap_put(&m->gangs, g->key, strlen(g->key), g, NULL) < 0) {
		free(g);
		return NULL;
	}
	return g;
}

/* Quorum and timeout: the PodGroup first, then the pod's own annotations.
 * <min_gpus> (may be NULL) receives the PodGroup's minResources GPUs. Returns
 * whether a quorum was named; if not, it is the <exist> members. */
static bool gang_terms_ex(struct gang_manager *m, const struct gang_member *mb, unsigned exist,
			  unsigned *quorum, unsigned *timeout_s, uint32_t *min_gpus)
{
	struct cache_podgroup pg;
	char buf[320];

	*quorum = mb->pod_min_member;
	*timeout_s = m->cfg.default_timeout_s;
	if (min_gpus)
		*min_gpus = 0;
	if (cache_podgroup_get(m->cache, mb->ns, mb->group, &pg, buf, sizeof(buf)) == 0) {
		if (pg.min_member > 0)
			*quorum = (unsigned)pg.min_member;
		if (pg.timeout_s > 0)
			*timeout_s = (unsigned)pg.timeout_s;
		if (min_gpus)
			*min_gpus = pg.min_gpus;
	}
	if (*quorum > 0)
		return true;
	*quorum = exist;        /* no quorum named: the members that exist */
	return false;
}

static void gang_terms(struct gang_manager *m, const struct gang_member *mb, unsigned exist,
		       unsigned *quorum, unsigned *timeout_s)
{
	(void)gang_terms_ex(m, mb, exist, quorum, timeout_s, NULL);
}

static bool planned(const struct gang *g)
{
	return g->slots != NULL;
}

/* Forget a gang's plan: its unclaimed reservations freed. Lock held. */
static void plan_drop(struct gang_manager *m, struct gang *g)
{
	for (unsigned i = 0; i < g->n_slots; i++)
		if (!g->slots[i].member[0])
			cache_reservation_release(m->cache, g->slots[i].res_key);
	free(g->slots);
	g->slots = NULL;
	g->n_slots = 0;
}

/* Take a gang's held binds out to be answered <ok>/<why> once the lock is
 * dropped: the list passes to the caller, so this cannot fail. Lock held. */
static unsigned take_held(struct gang *g, bool ok, const char *why, struct held **out)
{
	unsigned n = g->n_held;

	for (unsigned i = 0; i < n; i++) {
		g->held[i].ok = ok;
		snprintf(g->held[i].why, sizeof(g->held[i].why), "%s", why);
	}
	*out = n ? g->held : NULL;
	if (n) {
		g->held = NULL;
		g->cap_held = 0;
	}
	g->n_held = 0;
	return n;
}

/* Drop a gang's plan: free unclaimed reservations; hand back the held binds to
 * release with an error (their devices freed). Lock held. */
static unsigned gang_rollback(struct gang_manager *m, struct gang *g, const char *why,
			      struct held **out)
{
	for (unsigned i = 0; i < g->n_held; i++)
		cache_pod_forget(m->cache, g->held[i].uid);     /* not bound: devices back */
	plan_drop(m, g);
	snprintf(g->reason, sizeof(g->reason), "%s", why);
	return take_held(g, false, why, out);
}

/* Quorum: members held here plus those already bound (the cache counts both,
 * including members troupe never sees, such as CPU-only launchers that
 * kube-scheduler binds itself). When it is reached, take every held bind out to
 * be posted and drop the plan's open places. Returns how many were taken.
 * Lock held. */
static unsigned quorum_release(struct gang_manager *m, struct gang *g, struct held **out)
{
	unsigned exist, bound;

	*out = NULL;
	if (!planned(g) || !g->n_held)
		return 0;
	cache_group_count(m->cache, g->ns, g->name, &exist, &bound);
	if (bound < g->quorum)
		return 0;
	log_info("gang", "gang %s: quorum of %u reached; posting %u held bindings", g->key,
		 g->quorum, g->n_held);
	m->stats.released++;
	plan_drop(m, g);        /* open places beyond the quorum are not needed */
	return take_held(g, true, "", out);
}

static void mark_waiting(struct gang *g, uint64_t now)
{
	if (!g->waiting) {
		g->waiting = true;
		g->waiting_since_ns = now;
	}
}

/* ---- Fairness: shares, order, holds --------------------------------------------- */

struct usage {
	uint64_t gpus;
	int64_t cpu_milli, mem_bytes;
};

struct shares {
	struct strmap by_queue;         /* queue -> struct usage (owned, key inside) */
	struct cache_stats totals;
};

struct usage_entry {
	struct usage u;
	char queue[254];
};

static void add_usage(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct shares *s = arg;
	struct usage_entry *e;

	(void)uid;
	if (p->state != CACHE_POD_STATE_ASSUMED && p->state != CACHE_POD_STATE_BOUND)
		return;
	e = strmap_get(&s->by_queue, p->queue, strlen(p->queue));
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return;
		snprintf(e->queue, sizeof(e->queue), "%s", p->queue);
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

static void shares_load(struct gang_manager *m, struct shares *s)
{
	strmap_init(&s->by_queue);
	cache_get_stats(m->cache, &s->totals);
	cache_pod_foreach(m->cache, add_usage, s);
}

static void shares_fini(struct shares *s)
{
	size_t pos = 0;
	void *v;

	while (strmap_next(&s->by_queue, &pos, NULL, &v))
		free(v);
	strmap_fini(&s->by_queue);
}

static double queue_weight(const struct gang_manager *m, const char *queue)
{
	for (unsigned i = 0; i < m->cfg.n_queues; i++)
		if (strcmp(m->cfg.queue_names[i], queue) == 0)
			return m->cfg.queue_weights[i] > 0 ? m->cfg.queue_weights[i] : 1.0;
	return 1.0;
}

static double share_of(const struct gang_manager *m, const struct shares *s, const char *queue)
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
	return d / queue_weight(m, queue);
}

double gang_queue_share(struct gang_manager *m, const char *queue)
{
	struct shares s;
	double d;

	shares_load(m, &s);
	d = share_of(m, &s, queue);
	shares_fini(&s);
	return d;
}

/* > 0 when gang a goes before gang b: priority, then share, then age. */
static int precedes(const struct gang_manager *m, const struct shares *s, const struct gang *a,
		    const struct gang *b)
{
	double sa, sb;

	if (a->priority != b->priority)
		return a->priority > b->priority ? 1 : -1;
	sa = share_of(m, s, a->queue);
	sb = share_of(m, s, b->queue);
	if (sa != sb)
		return sa < sb ? 1 : -1;
	if (a->waiting_since_ns != b->waiting_since_ns)
		return a->waiting_since_ns < b->waiting_since_ns ? 1 : -1;
	return strcmp(a->key, b->key) < 0 ? 1 : -1;
}

static void holds_release(struct gang_manager *m, struct gang *g);

/* Whether waiting gang <g> still waits: its quorum of members exists, is not
 * bound, and someone asked about it in the last five minutes. A gang that no
 * longer does stops waiting here and gives back what was held for it. Checked
 * by the once-a-second fairness pass and again whenever the fair order is read,
 * so a gang whose pods were just deleted never makes another wait behind it
 * (found end to end: the next gangs were refused "waits behind" a gang whose
 * pods were gone, and kube-scheduler does not retry a refused pod until a
 * cluster event comes). Lock held. */
static bool still_waiting(struct gang_manager *m, struct gang *g, uint64_t now)
{
	unsigned exist, bound;

	cache_group_count(m->cache, g->ns, g->name, &exist, &bound);
	if (exist >= g->quorum && bound < g->quorum &&
	    now - g->last_seen_ns <= 300ULL * 1000000000ULL)
		return true;
	g->waiting = false;
	holds_release(m, g);
	return false;
}

/* The waiting gang first in the fair order, other than <except>. Lock held. */
static struct gang *head_waiting(struct gang_manager *m, const struct shares *s,
				 const struct gang *except)
{
	struct gang *best = NULL;
	uint64_t now = util_now_ns();
	size_t pos = 0;
	void *v;

	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;

		if (!g->waiting || g == except || !still_waiting(m, g, now))
			continue;
		if (!best || precedes(m, s, g, best) > 0)
			best = g;
	}
	return best;
}

static void holds_release(struct gang_manager *m, struct gang *g)
{
	for (unsigned i = 0; i < g->n_holds; i++)
		cache_reservation_release(m->cache, g->holds[i].key);
	g->n_holds = 0;
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

	if (!v->node->ready || v->node->unschedulable || v->node->gpu_resource != hs->gpu_resource ||
	    f < hs->k)
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

/* Hold capacity for the starving head <g> as it frees: pick target nodes (those
 * already holding for it, then the emptiest) whose allocatable can take all its
 * members, and reserve every GPU that is free on them now. Each pass holds what
 * freed since the last, so small pods cannot creep back in. Lock held. */
static void holds_grow(struct gang_manager *m, struct gang *g)
{
	/* k = 0: every usable node is a candidate, also those with nothing free
	 * now (a target keeps being one while its GPUs free up). */
	struct hold_scan hs = { .gpu_resource = g->req.demand.gpu_resource, .k = 0 };
	unsigned k = g->req.demand.gpus, members = 0;

	if (!k || !g->need)
		return;
	if (!g->n_holds && !g->hold_seq)
		log_info("gang", "gang %s has waited %llus first in the fair order; holding GPUs for "
			 "it as they free", g->key,
			 (unsigned long long)((util_now_ns() - g->waiting_since_ns) / 1000000000ULL));
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
	for (size_t i = 0; i < hs.n && members < g->need; i++) {
		struct cache_node_view v;
		uint64_t free_mask = 0;
		struct hold *h;

		if (g->targets)
			snprintf(g->targets[g->n_targets++], sizeof(g->targets[0]), "%s", hs.c[i].name);
		cache_read_begin(m->cache);
		if (cache_node_lookup(m->cache, hs.c[i].name, strlen(hs.c[i].name), &v)) {
			members += v.node->gpu_allocatable / k;
			free_mask = cache_view_free_mask(&v);
			/* Never more than the free count says (unattributed GPUs). */
			while ((unsigned)__builtin_popcountll(free_mask) > cache_view_free_gpus(&v))
				free_mask &= free_mask - 1;
		}
		cache_read_end(m->cache);
		if (!free_mask)
			continue;
		if (g->n_holds == g->cap_holds) {
			unsigned cap = g->cap_holds ? g->cap_holds * 2 : 8;
			struct hold *nh = realloc(g->holds, cap * sizeof(*nh));

			if (!nh)
				break;
			g->holds = nh;
			g->cap_holds = cap;
		}
		h = &g->holds[g->n_holds];
		snprintf(h->key, sizeof(h->key), "gang-hold/%s/%u", g->key, ++g->hold_seq);
		snprintf(h->node, sizeof(h->node), "%s", hs.c[i].name);
		h->devices = free_mask;
		if (cache_reserve_for(m->cache, h->key, h->node, free_mask, g->queue) == 0)
			g->n_holds++;
	}
	for (size_t i = 0; i < hs.n; i++)
		free((char *)hs.c[i].name);
	free(hs.c);
}

/* Gangs kube-scheduler may never show troupe: when its own fit check finds no
 * node with enough free GPUs for a member, it never calls the extender. The
 * watch shows their pods all the same: a gang whose members exist and are not
 * bound is waiting. */
struct seen_gang {
	char queue[254];
	unsigned exist, bound, min_member;
	int32_t priority;
	struct cache_demand demand;     /* the largest unbound member's */
	unsigned cpu_only;              /* unbound members asking no GPU */
	unsigned by_gpus[65];           /* unbound GPU members by GPU count */
};

/* What the <need> places still to fill ask, as gang_needs counts them: members
 * asking no GPU take none, the largest GPU members first. */
static uint64_t seen_need_gpus(const struct seen_gang *sg, unsigned need)
{
	unsigned places = need - (sg->cpu_only < need ? sg->cpu_only : need - 1);
	uint64_t gpus = 0;

	for (unsigned k = 64; k > 0 && places; k--) {
		unsigned take = sg->by_gpus[k] < places ? sg->by_gpus[k] : places;

		gpus += (uint64_t)take * k;
		places -= take;
	}
	return gpus;
}

static void collect_gang_pods(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct seen_gang *sg = arg;

	(void)uid;
	if (!p->active)
		return;
	if (!sg->exist)
		snprintf(sg->queue, sizeof(sg->queue), "%s", p->queue);
	sg->exist++;
	if (p->node[0]) {
		sg->bound++;            /* as cache_group_count counts it */
	} else if (p->demand_valid && p->demand.gpus == 0) {
		sg->cpu_only++;
	} else {
		if (p->demand.gpus <= 64)
			sg->by_gpus[p->demand.gpus]++;
		if (p->demand.gpus > sg->demand.gpus)
			sg->demand = p->demand;
	}
	if (p->min_member > sg->min_member)
		sg->min_member = p->min_member;
	if (p->priority > sg->priority)
		sg->priority = p->priority;
}

struct discover {
	struct gang_manager *m;
	uint64_t now;
};

/* One pod group from the cache's member index: waiting if every member of its
 * quorum exists and the quorum is not bound. Lock held. */
static void discover_group(const char *ns, const char *group, void *arg)
{
	struct discover *d = arg;
	struct seen_gang sg = { 0 };
	struct gang_member who = { .ns = ns, .group = group };
	unsigned quorum, timeout_s;
	struct gang *g;

	cache_group_foreach(d->m->cache, ns, group, collect_gang_pods, &sg);
	who.pod_min_member = sg.min_member;
	gang_terms(d->m, &who, sg.exist, &quorum, &timeout_s);
	if (quorum <= 1 || sg.exist < quorum || sg.bound >= quorum || !sg.demand.gpus)
		return;
	g = gang_get(d->m, ns, group, true);
	if (!g || planned(g))
		return;
	mark_waiting(g, d->now);
	g->quorum = quorum;
	g->need = quorum - sg.bound;
	g->need_gpus = seen_need_gpus(&sg, g->need);
	g->priority = sg.priority;
	snprintf(g->queue, sizeof(g->queue), "%s", sg.queue);
	g->req.demand = sg.demand;
	g->last_seen_ns = d->now;
}

/* Register gangs seen waiting in the cache (each pod group's members, not
 * every pod). Lock held. */
static void discover_waiting(struct gang_manager *m, uint64_t now)
{
	struct discover d = { m, now };

	cache_groups_foreach(m->cache, discover_group, &d);
}

/* Forget gangs with nothing in flight that nobody asked about for
 * idle_forget_s: a cluster creating many short-lived pod groups must not grow
 * the table forever. A gang that comes back starts afresh. Lock held. */
static void forget_idle(struct gang_manager *m, uint64_t now)
{
	uint64_t idle = (uint64_t)m->cfg.idle_forget_s * 1000000000ULL;
	struct gang *gone[64];
	unsigned n = 0;
	size_t pos = 0;
	void *v;

	/* At most 64 a pass (one pass a second): deleting while walking the map
	 * is not allowed, and this bounds the work under the lock. */
	while (n < 64 && strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;

		if (!planned(g) && !g->waiting && !g->n_held && !g->n_holds && !g->n_targets &&
		    now - g->last_seen_ns > idle)
			gone[n++] = g;
	}
	for (unsigned i = 0; i < n; i++) {
		strmap_del(&m->gangs, gone[i]->key, strlen(gone[i]->key));
		free(gone[i]->slots);
		free(gone[i]->held);
		free(gone[i]->holds);
		free(gone[i]->targets);
		free(gone[i]);
	}
}

/* One fairness pass: drop waiting gangs nobody wants any more, forget idle
 * ones, and hold capacity for the starving head. Lock held. */
static void fairness_tick(struct gang_manager *m, uint64_t now)
{
	struct gang *head;
	struct shares s;
	size_t pos = 0;
	void *v;
	bool holds = false;

	discover_waiting(m, now);
	forget_idle(m, now);
	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;

		if (g->waiting)
			still_waiting(m, g, now);
	}
	shares_load(m, &s);
	head = head_waiting(m, &s, NULL);
	pos = 0;
	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;

		if (g != head && (g->n_holds || g->n_targets))
			holds_release(m, g);
	}
	if (head && now - head->waiting_since_ns >= (uint64_t)m->cfg.starvation_s * 1000000000ULL)
		holds_grow(m, head);
	holds = head && (head->n_holds || head->n_targets);
	__atomic_store_n(&m->any_holds, holds, __ATOMIC_RELAXED);
	shares_fini(&s);
}

bool gang_hold_note(struct gang_manager *m, const char *node, int32_t priority, char *buf,
		    size_t len)
{
	size_t pos = 0;
	void *v;
	bool found = false;

	if (!__atomic_load_n(&m->any_holds, __ATOMIC_RELAXED))
		return false;
	pthread_mutex_lock(&m->lock);
	while (!found && strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;

		if (g->n_targets && g->priority >= priority && hold_on(g, node)) {
			snprintf(buf, len, "troupe: GPUs on this node are held for gang %s (priority "
				 "%d, queue %s, waiting %llus); it goes first", g->key, g->priority,
				 g->queue, (unsigned long long)((util_now_ns() - g->waiting_since_ns) /
								1000000000ULL));
			found = true;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return found;
}

/* ---- Expiry thread ---------------------------------------------------------- */

static void *expiry_main(void *arg)
{
	struct gang_manager *m = arg;

	uint64_t last_fair = 0;

	pthread_mutex_lock(&m->lock);
	while (!m->stop) {
		struct timespec ts;
		uint64_t now = util_now_ns();
		size_t pos = 0;
		void *v;

		if (now - last_fair >= 1000000000ULL) {
			fairness_tick(m, now);
			last_fair = now;
		}

		while (strmap_next(&m->gangs, &pos, NULL, &v)) {
			struct gang *g = v;
			struct held *rel;
			char why[512];
			unsigned n;

			/* A member bound without troupe (seen on the watch) may be
			 * the one that completes the quorum. */
			n = quorum_release(m, g, &rel);
			if (n) {
				pthread_mutex_unlock(&m->lock);
				run_releases(rel, n);
				pthread_mutex_lock(&m->lock);
				pos = 0;
				continue;
			}
			if (!planned(g) || now < g->deadline_ns)
				continue;
			if (g->deadline_is_http)
				snprintf(why, sizeof(why), "gang %s: the plan expired with only %u of "
					 "%u members bound, as held binds had to be answered "
					 "(kube-scheduler's httpTimeout %us less %us); everything it held "
					 "is released",
					 g->key, g->n_held, g->quorum, m->cfg.http_timeout_s,
					 m->cfg.margin_s);
			else
				snprintf(why, sizeof(why), "gang %s: only %u of %u members bound before "
					 "the plan expired (%us); everything it held is released",
					 g->key, g->n_held, g->quorum, g->timeout_s);
			log_warn("gang", "%s", why);
			m->stats.expired++;
			n = gang_rollback(m, g, why, &rel);
			pthread_mutex_unlock(&m->lock);
			run_releases(rel, n);
			pthread_mutex_lock(&m->lock);
			pos = 0;        /* the table may have changed meanwhile */
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&m->wake, &m->lock, &ts);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

struct gang_manager *gang_manager_new(struct cache *c, const struct gang_config *cfg)
{
	struct gang_manager *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->cache = c;
	m->cfg = *cfg;
	/* The keys point into the copy's own buffers, not the caller's. */
	for (unsigned l = 0; l < m->cfg.levels.n; l++)
		for (unsigned k = 0; k < GANG_MAX_KEYS; k++)
			if (m->cfg.levels.keys[l][k])
				m->cfg.levels.keys[l][k] = m->cfg.level_keys[l][k];
	if (!m->cfg.default_timeout_s)
		m->cfg.default_timeout_s = 60;
	if (!m->cfg.http_timeout_s)
		m->cfg.http_timeout_s = 30;
	if (m->cfg.margin_s >= m->cfg.http_timeout_s)
		m->cfg.margin_s = m->cfg.http_timeout_s / 4;
	if (!m->cfg.starvation_s)
		m->cfg.starvation_s = 30;
	if (!m->cfg.idle_forget_s)
		m->cfg.idle_forget_s = 600;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->wake, NULL);
	strmap_init(&m->gangs);
	if (pthread_create(&m->thread, NULL, expiry_main, m) != 0) {
		strmap_fini(&m->gangs);
		free(m);
		errno = EAGAIN;
		return NULL;
	}
	return m;
}

void gang_manager_shutdown(struct gang_manager *m)
{
	size_t pos = 0;
	void *v;
	bool joined;

	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	joined = m->stop;
	m->stop = true;
	pthread_cond_signal(&m->wake);
	pthread_mutex_unlock(&m->lock);
	if (joined)
		return;
	pthread_join(m->thread, NULL);
	pthread_mutex_lock(&m->lock);
	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;
		struct held *rel;
		unsigned n = gang_rollback(m, g, "troupe is stopping", &rel);

		holds_release(m, g);
		g->waiting = false;
		if (n) {
			/* Answered with the lock dropped; nothing new arrives once
			 * stopping, so the walk starts again and finds no more. */
			pthread_mutex_unlock(&m->lock);
			run_releases(rel, n);
			pthread_mutex_lock(&m->lock);
			pos = 0;
		}
	}
	pthread_mutex_unlock(&m->lock);
}

void gang_manager_free(struct gang_manager *m)
{
	size_t pos = 0;
	void *v;

	if (!m)
		return;
	gang_manager_shutdown(m);
	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;

		free(g->slots);
		free(g->held);
		free(g->holds);
		free(g->targets);
		free(g);
	}
	strmap_fini(&m->gangs);
	pthread_cond_destroy(&m->wake);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void gang_get_stats(struct gang_manager *m, struct gang_stats *out)
{
	size_t pos = 0;
	void *v;

	pthread_mutex_lock(&m->lock);
	*out = m->stats;
	out->active = 0;
	out->waiting = 0;
	out->held_sets = 0;
	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;

		out->active += planned(g);
		out->waiting += g->waiting;
		out->held_sets += g->n_holds;
		out->entries++;
	}
	pthread_mutex_unlock(&m->lock);
}

/* ---- What a gang asks: its members' needs ------------------------------------ */

struct member_ask {
	char uid[129];
	struct placement_request req;
};

struct asks {
	const struct gang_member *mb;
	struct member_ask *list;        /* the other members that still need a place */
	unsigned n, cap;
	unsigned cpu_only;              /* members asking no GPU: bound without troupe */
	bool oom;
};

static void collect_ask(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct asks *a = arg;
	struct member_ask *x;
	char err[200];

	if (!p->active || p->node[0] || strcmp(uid, a->mb->uid) == 0)
		return;
	if (p->demand_valid && p->demand.gpus == 0) {
		a->cpu_only++;
		return;
	}
	if (a->n == a->cap) {
		unsigned cap = a->cap ? a->cap * 2 : 16;
		struct member_ask *l = realloc(a->list, cap * sizeof(*l));

		if (!l) {
			a->oom = true;
			return;
		}
		a->list = l;
		a->cap = cap;
	}
	x = &a->list[a->n++];
	snprintf(x->uid, sizeof(x->uid), "%s", uid);
	/* A member whose request troupe cannot read is assumed to ask what this
	 * one asks; so is its policy when its annotation is bad. */
	x->req = a->mb->req;
	if (p->demand_valid) {
		x->req.demand = p->demand;
		if (placement_policy_parse(p->topology[0] ? p->topology : NULL, &x->req.policy, err,
					   sizeof(err)) < 0)
			x->req.policy = a->mb->req.policy;
	}
}

static int by_gpus_desc(const void *a, const void *b)
{
	const struct member_ask *x = a, *y = b;

	if (x->req.demand.gpus != y->req.demand.gpus)
		return x->req.demand.gpus > y->req.demand.gpus ? -1 : 1;
	return strcmp(x->uid, y->uid);
}

static bool same_request(const struct placement_request *a, const struct placement_request *b)
{
	return a->demand.gpus == b->demand.gpus && a->demand.gpu_resource == b->demand.gpu_resource &&
	       a->policy.kind == b->policy.kind && a->policy.min_level == b->policy.min_level;
}

/* The needs of the <members> places gang <g> still wants, as the cache knows
 * its members: this member's own request; each other member not yet bound its
 * own (the largest first when more exist than the quorum needs); members asking
 * no GPU take no place, as they bind without troupe; any member the cache does
 * not know is assumed to ask what this one asks. Returns the number of needs,
 * or 0 with <reason> set. Lock held (the cache walk takes only cache locks). */
static unsigned gang_needs(struct gang_manager *m, const struct gang *g,
			   const struct gang_member *mb, unsigned members, struct gang_need *needs,
			   char *reason, size_t reasonlen)
{
	struct asks a = { .mb = mb };
	unsigned places, n_needs = 0;

	cache_group_foreach(m->cache, mb->ns, mb->group, collect_ask, &a);
	if (a.oom) {
		snprintf(reason, reasonlen, "troupe: out of memory planning gang %s", g->key);
		free(a.list);
		return 0;
	}
	if (a.n)
		qsort(a.list, a.n, sizeof(*a.list), by_gpus_desc);
	places = members - (a.cpu_only < members ? a.cpu_only : members - 1);
	for (unsigned i = 0; i < places; i++) {
		/* This member first; then the others; then the unknown. */
		const struct placement_request *r = i == 0 ? &mb->req
						    : i - 1 < a.n ? &a.list[i - 1].req : &mb->req;
		unsigned j = 0;

		while (j < n_needs && !same_request(&needs[j].req, r))
			j++;
		if (j == GANG_MAX_NEEDS) {
			snprintf(reason, reasonlen, "troupe: gang %s: its members ask for more than %u "
				 "different GPU requests; troupe cannot plan it", g->key,
				 GANG_MAX_NEEDS);
			free(a.list);
			return 0;
		}
		if (j == n_needs)
			needs[n_needs++] = (struct gang_need){ *r, 0 };
		needs[j].count++;
	}
	free(a.list);
	return n_needs;
}

/* ---- Filter ------------------------------------------------------------------- */

int gang_topology_parse(const char *s, const char **key, char *err, size_t errlen)
{
	*key = NULL;
	if (!s || !*s)
		return 0;
	if (strncmp(s, "required:", 9) == 0 && s[9] && !strchr(s + 9, ' ')) {
		*key = s + 9;
		return 0;
	}
	snprintf(err, errlen, "annotation troupe.io/gang-topology=\"%s\" is not "
		 "required:<node-label-key> (e.g. required:network.topology.nvidia.com/block)", s);
	return -EINVAL;
}

/* Whether slot <s> is open and planned for a request like this member's (GPU
 * count, kind and topology policy). */
static bool slot_open_for(const struct gslot *s, const struct gang_member *mb)
{
	return !s->member[0] && same_request(&s->req, &mb->req);
}

/* Whether slot <s> can be this member's: its own already, or open for it. */
static bool slot_for(const struct gslot *s, const struct gang_member *mb)
{
	if (s->member[0])
		return strcmp(s->member, mb->uid) == 0;
	return slot_open_for(s, mb);
}

/* Plan gang <g> whole over the offered <views> and reserve every place. True
 * when it is planned; false with <reason> set when it must wait. Lock held. */
static bool gang_admit(struct gang_manager *m, struct gang *g, const struct gang_member *mb,
		       const struct cache_node_view *views, unsigned n, unsigned members,
		       unsigned timeout_s, uint32_t min_gpus, char *reason, size_t reasonlen)
{
	struct gang_need needs[GANG_MAX_NEEDS];
	struct gang_levels one = { .n = 1, .strict = true };
	const struct gang_levels *levels = m->cfg.levels.n ? &m->cfg.levels : &gang_default_levels;
	struct cache_node_view *own = NULL;
	struct gang_plan plan = { 0 };
	uint64_t offered_free = 0, now;
	unsigned n_needs, i;
	struct gang *w;
	struct shares sh;
	bool ok = false;
	char why[200];

	n_needs = gang_needs(m, g, mb, members, needs, reason, reasonlen);
	if (!n_needs)
		return false;
	g->timeout_s = timeout_s;
	g->need = 0;
	g->need_gpus = 0;
	g->req = needs[0].req;
	for (unsigned j = 0; j < n_needs; j++) {
		g->need += needs[j].count;
		g->need_gpus += needs[j].count * needs[j].req.demand.gpus;
		if (needs[j].req.demand.gpus > g->req.demand.gpus)
			g->req = needs[j].req;
	}
	for (unsigned j = 0; j < n; j++)
		offered_free += cache_view_free_gpus(&views[j]);
	/* The PodGroup's minResources, when it names GPUs, must fit too. */
	if (min_gpus && offered_free < min_gpus && !g->n_holds) {
		snprintf(reason, reasonlen, "troupe: gang %s: its PodGroup's minResources needs %u "
			 "GPUs; the offered nodes have %llu free", g->key, min_gpus,
			 (unsigned long long)offered_free);
		return false;
	}
	/* Fair order: a waiting gang before this one that would fit in what is
	 * offered gets it first; this one is told behind whom. Every gang whose
	 * members wait takes part, also those kube-scheduler has not shown troupe. */
	now = util_now_ns();
	discover_waiting(m, now);
	shares_load(m, &sh);
	w = head_waiting(m, &sh, g);
	if (w && precedes(m, &sh, w, g) > 0 && w->need_gpus <= offered_free) {
		snprintf(reason, reasonlen, "troupe: gang %s waits behind gang %s (priority %d, queue "
			 "%s at share %.2f, ours %.2f); it fits now and goes first", g->key, w->key,
			 w->priority, w->queue, share_of(m, &sh, w->queue),
			 share_of(m, &sh, g->queue));
		shares_fini(&sh);
		m->stats.deferred++;
		mark_waiting(g, now);
		return false;
	}
	shares_fini(&sh);
	/* Capacity held for this gang while it starved is its own to plan on: the
	 * candidates' views count it free, and the holds are dropped just before
	 * the plan is reserved in their place. */
	if (g->n_holds && (own = malloc(n * sizeof(*own)))) {
		memcpy(own, views, n * sizeof(*own));
		for (unsigned h = 0; h < g->n_holds; h++)
			for (unsigned j = 0; j < n; j++)
				if (strcmp(own[j].node->name, g->holds[h].node) == 0)
					own[j].used &= ~g->holds[h].devices;
		views = own;
	}
	one.keys[0][0] = mb->required_key;
	if (gang_plan_mixed(views, n, needs, n_needs, mb->required_key ? &one : levels, &plan, why,
			    sizeof(why)) < 0) {
		snprintf(g->reason, sizeof(g->reason), "troupe: gang %s: %s", g->key, why);
		snprintf(reason, reasonlen, "%s", g->reason);
		m->stats.refused++;
		mark_waiting(g, now);
		goto out;
	}
	g->slots = calloc(plan.n_slots, sizeof(*g->slots));
	if (!g->slots) {
		snprintf(reason, reasonlen, "troupe: out of memory planning gang %s", g->key);
		goto out;
	}
	/* The plan stands: what was held for it is now the plan's to reserve. */
	holds_release(m, g);
	g->generation++;
	g->n_slots = plan.n_slots;
	for (i = 0; i < plan.n_slots; i++) {
		struct gslot *s = &g->slots[i];

		snprintf(s->node, sizeof(s->node), "%s", views[plan.slots[i].node].node->name);
		s->devices = plan.slots[i].devices;
		s->req = needs[plan.slots[i].need].req;
		snprintf(s->res_key, sizeof(s->res_key), "gang-reservation/%s/%u/%u", g->key,
			 g->generation, i);
		if (cache_reserve_for(m->cache, s->res_key, s->node, s->devices, g->queue) < 0)
			break;
	}
	if (i < plan.n_slots) {
		/* Something took a device between planning and reserving. */
		g->n_slots = i;
		plan_drop(m, g);
		snprintf(reason, reasonlen, "troupe: gang %s: capacity changed while it was being "
			 "reserved; it will be planned again", g->key);
		goto out;
	}
	g->waiting = false;
	g->deadline_ns = now + (uint64_t)timeout_s * 1000000000ULL;
	g->deadline_is_http = false;
	g->reason[0] = '\0';
	m->stats.planned++;
	log_info("gang", "gang %s: %u members (%llu GPUs, %u kinds of request) planned on %u nodes "
		 "(%s%s); reserved for %us", g->key, g->need, (unsigned long long)g->need_gpus,
		 n_needs, plan.nodes_used, plan.level >= 0 ? "one domain: " : "no common domain",
		 plan.level >= 0 ? plan.domain : "", timeout_s);
	ok = true;
out:
	gang_plan_fini(&plan);
	free(own);
	return ok;
}

static void newest_member(const struct cache_pod_info *p, const char *uid, void *arg)
{
	uint64_t *newest = arg;

	(void)uid;
	if (p->active && p->known_ns > *newest)
		*newest = p->known_ns;
}

enum gang_verdict gang_filter(struct gang_manager *m, const struct gang_member *mb,
			      const struct cache_node_view *views, unsigned n, bool *allowed,
			      char *reason, size_t reasonlen)
{
	unsigned exist, bound, quorum, timeout_s, any = 0, sized = 0;
	uint32_t min_gpus;
	bool named, settling;
	enum gang_verdict ret = GANG_REFUSED;
	struct strmap open_nodes;
	struct gang *g;

	for (unsigned i = 0; i < n; i++)
		allowed[i] = false;
	reason[0] = '\0';
	if (!mb->group)
		return GANG_NOT_A_GANG;
	cache_group_count(m->cache, mb->ns, mb->group, &exist, &bound);
	named = gang_terms_ex(m, mb, exist, &quorum, &timeout_s, &min_gpus);
	settling = !named && bound < exist && m->cfg.settle_s;
	if (quorum <= 1 && !settling)
		return GANG_NOT_A_GANG;
	pthread_mutex_lock(&m->lock);
	if (m->stop) {
		snprintf(reason, reasonlen, "troupe is stopping");
		goto out;
	}
	g = gang_get(m, mb->ns, mb->group, true);
	if (!g) {
		snprintf(reason, reasonlen, "troupe: out of memory admitting gang %s/%s", mb->ns,
			 mb->group);
		goto out;
	}
	if (!planned(g) && settling) {
		/* The members that exist are the quorum: wait until they stop
		 * arriving, or the first ones would be planned (or placed alone)
		 * before the rest are created. */
		uint64_t newest = 0, settle = (uint64_t)m->cfg.settle_s * 1000000000ULL, now;

		cache_group_foreach(m->cache, mb->ns, mb->group, newest_member, &newest);
		now = util_now_ns();
		if (now - newest < settle) {
			snprintf(reason, reasonlen, "troupe: gang %s names no quorum (no PodGroup "
				 "minMember, min-available label or min-member annotation), so it is "
				 "the members that exist, %u so far; it is planned once none has "
				 "arrived for %us (%.1fs to go)", g->key, exist, m->cfg.settle_s,
				 (double)(settle - (now - newest)) / 1e9);
			ret = GANG_RETRY;
			goto out;
		}
	}
	if (quorum <= 1 || (!planned(g) && bound >= quorum)) {
		/* A gang of one, or complete already (or rebuilt after a restart):
		 * extra members are single pods. */
		ret = GANG_NOT_A_GANG;
		goto out;
	}
	if (exist < quorum) {
		snprintf(reason, reasonlen, "troupe: gang %s waiting for its members: %u of %u "
			 "exist", g->key, exist, quorum);
		goto out;
	}
	g->last_seen_ns = util_now_ns();
	g->priority = mb->priority;
	snprintf(g->queue, sizeof(g->queue), "%s", mb->queue ? mb->queue : mb->ns);
	if (!planned(g)) {
		g->quorum = quorum;
		if (!gang_admit(m, g, mb, views, n, quorum - bound, timeout_s, min_gpus, reason,
				reasonlen))
			goto out;
	}
	/* The nodes with a slot for this member, as a set: one lookup per
	 * candidate instead of a scan of every slot. */
	strmap_init(&open_nodes);
	for (unsigned s = 0; s < g->n_slots; s++)
		if (slot_for(&g->slots[s], mb) &&
		    strmap_put(&open_nodes, g->slots[s].node, strlen(g->slots[s].node),
			       &g->slots[s], NULL) == 0)
			sized++;
	for (unsigned i = 0; i < n; i++)
		if (strmap_get(&open_nodes, views[i].node->name, strlen(views[i].node->name))) {
			allowed[i] = true;
			any++;
		}
	strmap_fini(&open_nodes);
	if (!sized) {
		snprintf(reason, reasonlen, "troupe: gang %s has no open place for a member asking "
			 "%u GPUs with its topology policy; its plan was made for the members' "
			 "requests at the time", g->key, mb->req.demand.gpus);
		goto out;
	}
	if (!any) {
		snprintf(reason, reasonlen, "troupe: gang %s is planned on other nodes", g->key);
		goto out;
	}
	ret = GANG_ALLOWED;
out:
	pthread_mutex_unlock(&m->lock);
	return ret;
}

enum gang_verdict gang_has_slot(struct gang_manager *m, const struct gang_member *mb,
				const char *node, bool *has)
{
	enum gang_verdict ret = GANG_NOT_A_GANG;
	struct gang *g;

	*has = false;
	if (!mb->group)
		return ret;
	pthread_mutex_lock(&m->lock);
	g = gang_get(m, mb->ns, mb->group, false);
	if (g && planned(g)) {
		ret = GANG_ALLOWED;
		for (unsigned s = 0; s < g->n_slots && !*has; s++)
			*has = slot_for(&g->slots[s], mb) && strcmp(g->slots[s].node, node) == 0;
	}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

/* ---- Bind ------------------------------------------------------------------ */

/* Move one open slot of <g> sized for this member onto <node>, when the node
 * has room for the member now: reserve there, then drop the slot's old
 * reservation. Lock held. */
static struct gslot *replan_slot(struct gang_manager *m, struct gang *g,
				 const struct gang_member *mb, const char *node)
{
	struct cache_node_view v;
	struct placement_choice c;
	struct gslot *open = NULL;
	char key[400];
	bool found;

	for (unsigned s = 0; s < g->n_slots && !open; s++)
		if (slot_open_for(&g->slots[s], mb))
			open = &g->slots[s];
	if (!open)
		return NULL;
	cache_read_begin(m->cache);
	found = cache_node_lookup(m->cache, node, strlen(node), &v) &&
		placement_node_choose(&v, cache_view_free_mask(&v), mb->req.demand.gpus,
				      &mb->req.policy, &c) == 0;
	cache_read_end(m->cache);
	if (!found)
		return NULL;
	snprintf(key, sizeof(key), "gang-reservation/%s/%u/moved-%u", g->key, g->generation,
		 ++g->moves);
	if (cache_reserve_for(m->cache, key, node, c.set, g->queue) < 0)
		return NULL;
	cache_reservation_release(m->cache, open->res_key);
	snprintf(open->res_key, sizeof(open->res_key), "%s", key);
	snprintf(open->node, sizeof(open->node), "%s", node);
	open->devices = c.set;
	log_info("gang", "gang %s: a slot moved to node %s, where kube-scheduler bound a member",
		 g->key, node);
	return open;
}

enum gang_bind_result gang_bind(struct gang_manager *m, const struct gang_member *mb,
				const char *node, gang_release_fn release, void *ctx,
				uint64_t *devices, char *reason, size_t reasonlen)
{
	enum gang_bind_result ret = GANG_BIND_NOT_A_GANG;
	struct held *rel = NULL;
	struct gslot *slot = NULL;
	unsigned n_rel = 0, exist, bound;
	struct gang *g;
	int rc;

	reason[0] = '\0';
	if (!mb->group)
		return ret;
	pthread_mutex_lock(&m->lock);
	if (m->stop) {
		ret = GANG_BIND_REFUSED;
		snprintf(reason, reasonlen, "troupe is stopping");
		goto out;
	}
	g = gang_get(m, mb->ns, mb->group, false);
	if (!g || !planned(g)) {
		unsigned quorum, timeout_s;

		/* No plan: a single pod when the gang is complete or no gang at all;
		 * otherwise the member must go through filter again (its plan
		 * expired, or troupe restarted): never bind it alone. */
		cache_group_count(m->cache, mb->ns, mb->group, &exist, &bound);
		gang_terms(m, mb, exist, &quorum, &timeout_s);
		if (quorum > 1 && bound < quorum) {
			ret = GANG_BIND_REFUSED;
			snprintf(reason, reasonlen, "troupe: gang %s/%s has no plan now (%s); the member "
				 "will be placed with the whole gang", mb->ns, mb->group,
				 g && g->reason[0] ? "it expired" : "not planned yet");
		}
		goto out;
	}
	ret = GANG_BIND_REFUSED;
	for (unsigned s = 0; s < g->n_slots && !slot; s++)
		if (slot_open_for(&g->slots[s], mb) && strcmp(g->slots[s].node, node) == 0)
			slot = &g->slots[s];
	if (!slot)
		slot = replan_slot(m, g, mb, node);
	if (!slot) {
		snprintf(reason, reasonlen, "troupe: gang %s has no open slot on node %s and the "
			 "node cannot take one without breaking the plan", g->key, node);
		goto out;
	}
	/* Room to hold the bind first: after the claim nothing may fail. */
	if (g->n_held == g->cap_held) {
		unsigned cap = g->cap_held ? g->cap_held * 2 : 8;
		struct held *h = realloc(g->held, cap * sizeof(*h));

		if (!h) {
			snprintf(reason, reasonlen, "troupe: out of memory holding a gang bind");
			goto out;
		}
		g->held = h;
		g->cap_held = cap;
	}
	rc = cache_reservation_claim(m->cache, slot->res_key, mb->uid);
	if (rc < 0) {
		snprintf(reason, reasonlen, "troupe: gang %s: pod %s/%s cannot take its slot on "
			 "%s (%s)", g->key, mb->ns, mb->name, node, strerror(-rc));
		goto out;
	}
	snprintf(slot->member, sizeof(slot->member), "%s", mb->uid);
	*devices = slot->devices;
	snprintf(g->held[g->n_held].uid, sizeof(g->held[0].uid), "%s", mb->uid);
	g->held[g->n_held].release = release;
	g->held[g->n_held].ctx = ctx;
	g->n_held++;
	if (g->n_held == 1) {
		/* Held binds must be answered before kube-scheduler gives up on them. */
		uint64_t limit = util_now_ns() +
				 (uint64_t)(m->cfg.http_timeout_s - m->cfg.margin_s) * 1000000000ULL;

		if (limit < g->deadline_ns) {
			g->deadline_ns = limit;
			g->deadline_is_http = true;
		}
	}
	ret = GANG_BIND_HELD;
	n_rel = quorum_release(m, g, &rel);
out:
	pthread_mutex_unlock(&m->lock);
	run_releases(rel, n_rel);
	return ret;
}
