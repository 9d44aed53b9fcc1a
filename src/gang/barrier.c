/* The all-or-nothing barrier at bind. A gang member's bind claims its reserved
 * slot (the reservation's devices pass to the pod without ever being free) and
 * is *parked*: its answer waits until the gang's quorum is parked or bound,
 * then every parked bind is released to post its Binding. A plan that does not
 * get there is rolled back: its reservations freed, its parked members'
 * devices freed and their binds answered with an error.
 *
 * Parked binds are answered only once the manager's lock is dropped: the
 * answers are taken out of the gang under the lock (take_parked) and run after
 * (gang__run_releases), so a release callback never runs under the lock.
 */
#include "gang/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"

void gang__run_releases(struct parked *r, unsigned n, char *plan)
{
	for (unsigned i = 0; i < n; i++)
		r[i].release(r[i].ctx, r[i].ok, r[i].why, r[i].ok ? plan : NULL);
	free(r);
	free(plan);
}

/* The plan record every member's Binding carries (record.c): the parked
 * members, each on its claimed slot. NULL without memory: the binds still go,
 * and a gang left partly bound then cannot be completed by the next leader,
 * only placed again. Lock held. */
static char *plan_text(const struct gang *g)
{
	struct gang_record r = { .version = GANG_RECORD_VERSION, .quorum = g->quorum,
				 .n = g->n_parked };
	struct timespec ts;
	char *text;

	/* Unique across restarts and replicas: the wall clock, and the plan's
	 * generation for two plans in one microsecond. */
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(r.id, sizeof(r.id), "%llx-%u",
		 (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000,
		 g->generation);
	r.members = calloc(g->n_parked ? g->n_parked : 1, sizeof(*r.members));
	if (!r.members)
		return NULL;
	for (unsigned i = 0; i < g->n_parked; i++) {
		struct gang_record_member *mb = &r.members[i];

		snprintf(mb->uid, sizeof(mb->uid), "%s", g->parked[i].uid);
		snprintf(mb->name, sizeof(mb->name), "%s", g->parked[i].name);
		for (unsigned s = 0; s < g->n_slots; s++)
			if (strcmp(g->slots[s].member, mb->uid) == 0) {
				snprintf(mb->node, sizeof(mb->node), "%s", g->slots[s].node);
				mb->devices = g->slots[s].devices;
			}
	}
	text = gang_record_encode(&r);
	if (text && !strstr(text, "\"members\""))
		log_warn("gang", "gang %s: its plan of %u members is too long to write in full "
			 "(over %d bytes); should troupe stop mid-way, the next leader can only roll "
			 "the gang back", g->key, g->n_parked, GANG_RECORD_MAX);
	gang_record_fini(&r);
	return text;
}

void gang__plan_drop(struct gang_manager *m, struct gang *g)
{
	for (unsigned i = 0; i < g->n_slots; i++)
		if (!g->slots[i].member[0])
			cache_reservation_release(m->cache, g->slots[i].res_key);
	free(g->slots);
	g->slots = NULL;
	g->n_slots = 0;
}

/* Take a gang's parked binds out to be answered <ok>/<why> once the lock is
 * dropped: the list passes to the caller, so this cannot fail. Lock held. */
static unsigned take_parked(struct gang *g, bool ok, const char *why, struct parked **out)
{
	unsigned n = g->n_parked;

	for (unsigned i = 0; i < n; i++) {
		g->parked[i].ok = ok;
		snprintf(g->parked[i].why, sizeof(g->parked[i].why), "%s", why);
	}
	*out = n ? g->parked : NULL;
	if (n) {
		g->parked = NULL;
		g->cap_parked = 0;
	}
	g->n_parked = 0;
	return n;
}

unsigned gang__rollback(struct gang_manager *m, struct gang *g, const char *why,
			struct parked **out)
{
	unsigned n;

	for (unsigned i = 0; i < g->n_parked; i++)
		cache_pod_forget(m->cache, g->parked[i].uid);   /* not bound: devices back */
	gang__plan_drop(m, g);
	snprintf(g->reason, sizeof(g->reason), "%s", why);
	n = take_parked(g, false, why, out);
	if (gang__planned(g))
		gang__enter(g, GANG_IDLE, 0);
	return n;
}

/* Quorum: members parked here plus those already bound (the cache counts both,
 * including members troupe never sees, such as CPU-only launchers that
 * kube-scheduler binds itself). When it is reached, take every parked bind out
 * to be posted and drop the plan's open places. Returns how many were taken. */
unsigned gang__quorum_release(struct gang_manager *m, struct gang *g, struct parked **out,
			      char **plan)
{
	unsigned exist, bound, n;

	*out = NULL;
	*plan = NULL;
	if (g->state != GANG_BINDING)
		return 0;
	cache_group_count(m->cache, g->ns, g->name, &exist, &bound);
	if (bound < g->quorum)
		return 0;
	log_info("gang", "gang %s: quorum of %u reached; posting %u held bindings", g->key,
		 g->quorum, g->n_parked);
	gang__notify(m, GANG_NOTE_BOUND, g, NULL, "quorum of %u reached (%u bound or held); "
		     "posting %u held bindings", g->quorum, bound, g->n_parked);
	m->stats.released++;
	*plan = plan_text(g);
	gang__plan_drop(m, g);  /* open places beyond the quorum are not needed */
	n = take_parked(g, true, "", out);
	gang__enter(g, GANG_IDLE, 0);
	return n;
}

/* Without a plan a member is a single pod only when its gang is complete or no
 * gang at all, and a gang naming no quorum only once its members stopped
 * arriving (the wait its filter answered); otherwise it must go through filter
 * again (its plan expired, or troupe restarted): never bind it alone. Lock
 * held. */
static enum gang_bind_result bind_unplanned(struct gang_manager *m, const struct gang *g,
					    const struct gang_member *mb, char *reason,
					    size_t reasonlen)
{
	unsigned exist, bound, quorum, timeout_s;
	bool named;

	cache_group_count(m->cache, mb->ns, mb->group, &exist, &bound);
	named = gang__terms(m, mb, exist, &quorum, &timeout_s, NULL);
	/* As filter answers: a gang naming no quorum whose members still arrive
	 * is not one member alone yet, even while only one exists. */
	if (gang__may_settle(m, named, exist, bound) &&
	    gang__still_settling(m, mb, exist, reason, reasonlen))
		return GANG_BIND_REFUSED;
	if (quorum <= 1 || bound >= quorum)
		return GANG_BIND_NOT_A_GANG;
	snprintf(reason, reasonlen, "troupe: gang %s/%s has no plan now (%s); the member will be "
		 "placed with the whole gang", mb->ns, mb->group,
		 g && g->reason[0] ? "it expired" : "not planned yet");
	return GANG_BIND_REFUSED;
}

/* Room to park one more bind in <g>; false when out of memory. */
static bool parked_reserve(struct gang *g)
{
	unsigned cap;
	struct parked *p;

	if (g->n_parked < g->cap_parked)
		return true;
	cap = g->cap_parked ? g->cap_parked * 2 : 8;
	p = realloc(g->parked, cap * sizeof(*p));
	if (!p)
		return false;
	g->parked = p;
	g->cap_parked = cap;
	return true;
}

enum gang_bind_result gang_bind(struct gang_manager *m, const struct gang_member *mb,
				const char *node, gang_release_fn release, void *ctx,
				uint64_t *devices, char *reason, size_t reasonlen)
{
	enum gang_bind_result ret = GANG_BIND_NOT_A_GANG;
	struct parked *rel = NULL, *p;
	struct reserved_slot *slot = NULL;
	char *plan = NULL;
	unsigned n_rel = 0;
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
	g = gang__get(m, mb->ns, mb->group, false);
	if (!g || !gang__planned(g)) {
		ret = bind_unplanned(m, g, mb, reason, reasonlen);
		goto out;
	}
	ret = GANG_BIND_REFUSED;
	for (unsigned s = 0; s < g->n_slots && !slot; s++)
		if (gang__slot_open_for(&g->slots[s], mb) && strcmp(g->slots[s].node, node) == 0)
			slot = &g->slots[s];
	if (!slot)
		slot = gang__replan_slot(m, g, mb, node);
	if (!slot) {
		snprintf(reason, reasonlen, "troupe: gang %s has no open slot on node %s and the "
			 "node cannot take one without breaking the plan", g->key, node);
		goto out;
	}
	/* Room to park the bind first: after the claim nothing may fail. */
	if (!parked_reserve(g)) {
		snprintf(reason, reasonlen, "troupe: out of memory holding a gang bind");
		goto out;
	}
	rc = cache_reservation_claim(m->cache, slot->res_key, mb->uid);
	if (rc < 0) {
		snprintf(reason, reasonlen, "troupe: gang %s: pod %s/%s cannot take its slot on "
			 "%s (%s)", g->key, mb->ns, mb->name, node, strerror(-rc));
		goto out;
	}
	snprintf(slot->member, sizeof(slot->member), "%s", mb->uid);
	*devices = slot->devices;
	p = &g->parked[g->n_parked++];
	snprintf(p->uid, sizeof(p->uid), "%s", mb->uid);
	snprintf(p->name, sizeof(p->name), "%s", mb->name ? mb->name : "");
	p->release = release;
	p->ctx = ctx;
	if (g->state == GANG_PLANNED) {
		/* Parked binds must be answered before kube-scheduler gives up on
		 * them. */
		uint64_t limit = gang__now(m) + (uint64_t)(m->cfg.http_timeout_s - m->cfg.margin_s) *
						     1000000000ULL;

		if (limit < g->deadline_ns) {
			g->deadline_ns = limit;
			g->deadline_is_http = true;
		}
		gang__enter(g, GANG_BINDING, 0);
	}
	ret = GANG_BIND_HELD;
	n_rel = gang__quorum_release(m, g, &rel, &plan);
out:
	gang__unlock(m);
	gang__run_releases(rel, n_rel, plan);
	return ret;
}
