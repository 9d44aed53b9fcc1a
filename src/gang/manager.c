/* The gang manager: all-or-nothing admission for pod groups, built on the
 * extender verbs kube-scheduler calls one pod at a time. This file holds the
 * gang table and each gang's state changes, the manager's lifecycle, the
 * defaults, and the expiry thread; the verbs' halves live in admit.c (filter),
 * barrier.c (bind) and fair.c (the fair order and starvation holds).
 *
 *   expiry    a plan not complete by the group's timeout, or parked binds
 *             about to outlive kube-scheduler's httpTimeout, is rolled back:
 *             reservations freed, parked members' devices freed and their
 *             binds answered with an error. Once a second the thread also runs
 *             the fairness pass and registers gangs the cache shows waiting
 *             that kube-scheduler never showed troupe.
 *
 * Locking: one mutex guards the gang table. It is never held across a release
 * callback (callbacks run after the lock is dropped) nor across a walk of every
 * pod (the shares are loaded without it).
 */
#include "gang/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"

void gang_config_defaults(struct gang_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->default_timeout_s = 60;
	cfg->http_timeout_s = 30;
	cfg->margin_s = 3;
	cfg->starvation_s = 30;
	cfg->starvation_holds = false;
	cfg->settle_s = 2;
	cfg->idle_forget_s = 600;
	cfg->max_entries = GANG_MAX_ENTRIES_DEFAULT;
}

unsigned gang_bind_budget_s(const struct gang_config *cfg)
{
	struct gang_config d;

	if (!cfg) {
		gang_config_defaults(&d);
		cfg = &d;
	}
	return cfg->http_timeout_s > cfg->margin_s ? cfg->http_timeout_s - cfg->margin_s : 1;
}

/* ---- The table and each gang's state ----------------------------------------- */

void gang__notify(struct gang_manager *m, enum gang_note_kind kind, const struct gang *g,
		  const struct gang_member *mb, const char *fmt, ...)
{
	char text[GANG_WHY_BUF];
	struct gang_note note = { kind, g->ns, g->name, mb ? mb->uid : NULL,
				  mb ? mb->name : NULL, text };
	va_list ap;

	if (!m->cfg.notify)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	m->cfg.notify(m->cfg.notify_ctx, &note);
}

static void gang_free(struct gang *g);

/* Forget at most this many entries a walk when the table is full: the walk
 * costs the table, so it is paid once per batch of new entries. */
enum { GANG_DROP_BATCH = 64 };
/* Log lines about the cap at most this often. */
#define GANG_CAP_LOG_NS (10ULL * 1000000000ULL)

static size_t entries_cap(const struct gang_manager *m)
{
	return m->cfg.max_entries ? m->cfg.max_entries : GANG_MAX_ENTRIES_DEFAULT;
}

/* The <n> (at most <k>) forgettable gangs unseen longest, in <old>, kept as a
 * max-heap on last_seen_ns: offer <g>. */
static void oldest_offer(struct gang **old, unsigned *n, unsigned k, struct gang *g)
{
	unsigned i;

	if (*n < k) {
		for (i = (*n)++; i && old[(i - 1) / 2]->last_seen_ns < g->last_seen_ns;
		     i = (i - 1) / 2)
			old[i] = old[(i - 1) / 2];
		old[i] = g;
		return;
	}
	if (g->last_seen_ns >= old[0]->last_seen_ns)
		return;
	for (i = 0;;) {
		unsigned l = 2 * i + 1, r = l + 1, big = i;
		uint64_t bv = g->last_seen_ns;

		if (l < *n && old[l]->last_seen_ns > bv) {
			big = l;
			bv = old[l]->last_seen_ns;
		}
		if (r < *n && old[r]->last_seen_ns > bv)
			big = r;
		if (big == i)
			break;
		old[i] = old[big];
		i = big;
	}
	old[i] = g;
}

/* The table is full: forget the forgettable gangs unseen longest, a batch at
 * a time. Returns how many. Lock held. */
static unsigned make_room(struct gang_manager *m, size_t cap)
{
	struct gang *old[GANG_DROP_BATCH];
	unsigned n = 0, k = GANG_DROP_BATCH;
	size_t pos = 0;
	void *v;
	uint64_t now = gang__now(m);

	if (cap / 64 < k)
		k = cap / 64 ? (unsigned)(cap / 64) : 1;
	while (strmap_next(&m->gangs, &pos, NULL, &v))
		if (gang__forgettable(v))
			oldest_offer(old, &n, k, v);
	for (unsigned i = 0; i < n; i++) {
		strmap_del(&m->gangs, old[i]->key, strlen(old[i]->key));
		gang_free(old[i]);
	}
	m->stats.entries_dropped += n;
	if (!m->cap_logged_ns || util_elapsed_ns(now, m->cap_logged_ns) >= GANG_CAP_LOG_NS) {
		m->cap_logged_ns = now;
		if (n)
			log_warn("gang", "%zu pod groups known, the cap (gang.max_entries): forgot "
				 "the %u idle the longest (%llu so far); a gang that comes back "
				 "starts afresh", cap, n,
				 (unsigned long long)m->stats.entries_dropped);
		else
			log_warn("gang", "%zu pod groups known, the cap (gang.max_entries), and every "
				 "one waits, is planned or binds: a new group is refused", cap);
	}
	return n;
}

struct gang *gang__get(struct gang_manager *m, const char *ns, const char *name, bool create)
{
	char key[K8S_KEY_BUF];
	struct gang *g;
	size_t cap = entries_cap(m);

	snprintf(key, sizeof(key), "%s/%s", ns, name);
	g = strmap_get(&m->gangs, key, strlen(key));
	if (g || !create)
		return g;
	if (strmap_count(&m->gangs) >= cap && !make_room(m, cap)) {
		m->stats.entries_refused++;
		errno = ENOSPC;
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	snprintf(g->key, sizeof(g->key), "%s", key);
	snprintf(g->ns, sizeof(g->ns), "%s", ns);
	snprintf(g->name, sizeof(g->name), "%s", name);
	g->last_seen_ns = gang__now(m);        /* not idle from birth (forget_idle) */
	if (strmap_put(&m->gangs, g->key, strlen(g->key), g, NULL) < 0) {
		free(g);
		return NULL;
	}
	return g;
}

static void gang_free(struct gang *g)
{
	free(g->slots);
	free(g->parked);
	free(g->holds);
	free(g->targets);
	free(g);
}

void gang__enter(struct gang *g, enum gang_state to, uint64_t now)
{
	switch (to) {
	case GANG_IDLE:
		break;
	case GANG_WAITING:
		/* Refused again while waiting keeps its place (its age). */
		assert(g->state == GANG_IDLE || g->state == GANG_WAITING);
		if (g->state != GANG_WAITING)
			g->waiting_since_ns = now;
		break;
	case GANG_PLANNED:
		assert(g->state == GANG_IDLE || g->state == GANG_WAITING);
		break;
	case GANG_BINDING:
		assert(g->state == GANG_PLANNED);
		break;
	}
	g->state = to;
	/* The fields each state implies (internal.h). */
	assert((g->slots != NULL) == gang__planned(g));
	assert((g->n_parked > 0) == (g->state == GANG_BINDING));
}

void gang__unlock(struct gang_manager *m)
{
	if (m->holds_dirty)
		gang__held_nodes_publish(m);
	pthread_mutex_unlock(&m->lock);
}

/* ---- Gangs kube-scheduler never showed troupe -------------------------------- */

struct discover {
	struct gang_manager *m;
	uint64_t now;
};

/* One pod group from the cache's member index: waiting if every member of its
 * quorum exists and the quorum is not bound. When kube-scheduler's own fit
 * check finds no node with enough free GPUs for a member, it never calls the
 * extender; the watch shows the pods all the same. Lock held. */
static void discover_group(const char *ns, const char *group, void *arg)
{
	struct discover *d = arg;
	struct census c = { .mb = NULL };
	struct gang_member who = { .ns = ns, .group = group };
	struct gang_need needs[GANG_MAX_NEEDS];
	unsigned quorum, timeout_s, n_needs = 0;
	char queue_buf[K8S_KEY_BUF + K8S_UID_BUF + K8S_NAME_BUF];
	const char *queue;
	struct gang *g;
	uint64_t gpus = 0;

	gang__census(d->m, ns, group, &c);
	who.pod_min_member = c.min_member;
	(void)gang__terms(d->m, &who, c.exist, &quorum, &timeout_s, NULL);
	if (quorum <= 1 || c.exist < quorum || c.bound >= quorum || c.oom)
		goto out;
	n_needs = gang__needs(&c, quorum - c.bound, needs, NULL, NULL);
	for (unsigned j = 0; j < n_needs; j++)
		gpus += (uint64_t)needs[j].count * needs[j].req.demand.gpus;
	if (!gpus)
		goto out;       /* no member asks a GPU: nothing troupe places */
	g = gang__get(d->m, ns, group, true);
	if (!g || gang__planned(g))
		goto out;
	gang__enter(g, GANG_WAITING, d->now);
	g->quorum = quorum;
	queue = gang__group_queue(d->m, ns, group, c.queue, queue_buf, sizeof(queue_buf));
	if (g->n_targets && (g->priority != c.priority || strcmp(g->queue, queue) != 0))
		d->m->holds_dirty = true;       /* the held-node set names both */
	g->need = 0;
	g->req = needs[0].req;
	for (unsigned j = 0; j < n_needs; j++) {
		g->need += needs[j].count;
		if (needs[j].req.demand.gpus > g->req.demand.gpus)
			g->req = needs[j].req;
	}
	g->need_gpus = gpus;
	g->priority = c.priority;
	snprintf(g->queue, sizeof(g->queue), "%s", queue);
	g->last_seen_ns = d->now;
out:
	free(c.list);
}

void gang__discover_waiting(struct gang_manager *m, uint64_t now)
{
	struct discover d = { m, now };

	/* Only a watch shows gangs as they are: a snapshot file's pending pods
	 * are a picture nobody schedules, so there a gang waits only once a
	 * filter call showed a member; discovering them would hold nodes for,
	 * and defer real gangs to, gangs no scheduler asks about. */
	if (!cache_is_live(m->cache))
		return;
	cache_groups_foreach(m->cache, discover_group, &d);
}

/* A cluster creating many short-lived pod groups must not grow the table
 * forever. A gang that comes back starts afresh. */
void gang__forget_idle(struct gang_manager *m, uint64_t now)
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

		if (gang__forgettable(g) && util_elapsed_ns(now, g->last_seen_ns) > idle)
			gone[n++] = g;
	}
	for (unsigned i = 0; i < n; i++) {
		strmap_del(&m->gangs, gone[i]->key, strlen(gone[i]->key));
		gang_free(gone[i]);
	}
}

/* ---- Expiry thread ---------------------------------------------------------- */

/* Why <g>'s plan is rolled back at its deadline. */
static void expiry_why(const struct gang_manager *m, const struct gang *g, char *why, size_t len)
{
	if (g->deadline_is_http)
		snprintf(why, len, "gang %s: the plan expired with only %u of %u members bound, as "
			 "held binds had to be answered (kube-scheduler's httpTimeout %us less %us); "
			 "everything it held is released", g->key, g->n_parked, g->quorum,
			 m->cfg.http_timeout_s, m->cfg.margin_s);
	else
		snprintf(why, len, "gang %s: only %u of %u members bound before the plan expired "
			 "(%us); everything it held is released", g->key, g->n_parked, g->quorum,
			 g->timeout_s);
}

/* One walk of the table: release gangs whose quorum completed without troupe,
 * roll back those past their deadline. Lock held; dropped to answer binds. */
static void expire(struct gang_manager *m, uint64_t now)
{
	size_t pos = 0;
	void *v;

	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;
		struct parked *rel;
		char why[GANG_WHY_BUF], *plan;
		unsigned n;

		/* A member bound without troupe (seen on the watch) may be the one
		 * that completes the quorum. */
		n = gang__quorum_release(m, g, &rel, &plan);
		if (n) {
			gang__unlock(m);
			gang__run_releases(rel, n, plan);
			pthread_mutex_lock(&m->lock);
			pos = 0;
			continue;
		}
		if (!gang__planned(g) || now < g->deadline_ns)
			continue;
		expiry_why(m, g, why, sizeof(why));
		log_warn("gang", "%s", why);
		gang__notify(m, GANG_NOTE_TIMED_OUT, g, NULL, "%s", why);
		m->stats.expired++;
		n = gang__rollback(m, g, why, &rel);
		gang__unlock(m);
		gang__run_releases(rel, n, NULL);
		pthread_mutex_lock(&m->lock);
		pos = 0;        /* the table may have changed meanwhile */
	}
}

static void *expiry_main(void *arg)
{
	struct gang_manager *m = arg;
	uint64_t last_fair = 0;

	pthread_mutex_lock(&m->lock);
	while (!m->stop) {
		struct timespec ts;
		uint64_t now = gang__now(m);

		if (now - last_fair >= 1000000000ULL) {
			gang__unlock(m);
			gang__fairness_pass(m, now);
			pthread_mutex_lock(&m->lock);
			last_fair = now;
			if (m->stop)
				break;
		}
		expire(m, now);
		if (m->holds_dirty)
			gang__held_nodes_publish(m);    /* the wait drops the lock */
		ts = util_deadline_after_ns(CLOCK_REALTIME, 100ULL * 1000 * 1000);
		pthread_cond_timedwait(&m->wake, &m->lock, &ts);
	}
	gang__unlock(m);
	return NULL;
}

/* ---- Lifecycle ---------------------------------------------------------------- */

struct gang_manager *gang_manager_new(struct cache *c, const struct gang_config *cfg)
{
	struct gang_manager *m;

	/* The extender's config check refuses these too; a manager given them
	 * by another caller refuses rather than guess. */
	if (!cfg->default_timeout_s || !cfg->http_timeout_s ||
	    cfg->margin_s >= cfg->http_timeout_s) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->cache = c;
	m->cfg = *cfg;
	/* The keys point into the copy's own buffers, not the caller's. */
	for (unsigned l = 0; l < m->cfg.levels.n; l++)
		for (unsigned k = 0; k < GANG_MAX_KEYS; k++)
			if (m->cfg.levels.keys[l][k])
				m->cfg.levels.keys[l][k] = m->cfg.level_keys[l][k];
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->wake, NULL);
	strmap_init(&m->gangs);
	if (pthread_create(&m->thread, NULL, expiry_main, m) != 0) {
		strmap_fini(&m->gangs);
		pthread_cond_destroy(&m->wake);
		pthread_mutex_destroy(&m->lock);
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
		struct parked *rel;
		unsigned n = gang__rollback(m, g, "troupe is stopping", &rel);

		gang__holds_release(m, g);
		gang__enter(g, GANG_IDLE, 0);
		if (n) {
			/* Answered with the lock dropped; nothing new arrives once
			 * stopping, so the walk starts again and finds no more. */
			gang__unlock(m);
			gang__run_releases(rel, n, NULL);
			pthread_mutex_lock(&m->lock);
			pos = 0;
		}
	}
	gang__unlock(m);
}

void gang_manager_free(struct gang_manager *m)
{
	size_t pos = 0;
	void *v;

	if (!m)
		return;
	gang_manager_shutdown(m);
	while (strmap_next(&m->gangs, &pos, NULL, &v))
		gang_free(v);
	strmap_fini(&m->gangs);
	gang__held_nodes_fini(m);
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

		out->active += gang__planned(g);
		out->waiting += gang__waiting(g);
		out->held_sets += g->n_holds;
		out->entries++;
	}
	pthread_mutex_unlock(&m->lock);
}

bool gang_in_flight(struct gang_manager *m, const char *ns, const char *name)
{
	struct gang *g;
	bool busy;

	pthread_mutex_lock(&m->lock);
	g = gang__get(m, ns, name, false);
	busy = g && gang__planned(g);
	pthread_mutex_unlock(&m->lock);
	return busy;
}
