/* Gang recovery: finish, or roll back, a gang that a replica left partly
 * bound.
 *
 * A gang's held bindings are posted one by one once its quorum is in. If the
 * replica posting them dies in between (a crash, a failover, a rolling
 * upgrade), or the API server keeps refusing one after the bind's time ran
 * out, some members are bound and others are not. Every member's Binding
 * carries the gang's whole plan (gang/record.c), so each bound member shows
 * it, and the cache keeps one copy per group (cache_group_plans_foreach).
 *
 * A pass, every gang.recover_interval_seconds on the replica that serves (the
 * leader with leader election; any replica without), looks at each plan:
 *   - every member bound as planned, or the gang's quorum bound: complete;
 *     the plan is done with.
 *   - a member this replica is binding right now, or a plan of its own in
 *     flight for the gang: left alone this pass.
 *   - members still pending (known from the cluster, unbound, not finished):
 *     each is bound as the plan says, if its node still takes it (known,
 *     Ready, not cordoned) and its planned devices are free: they are claimed
 *     in the cache first (cache_pod_assume), the check-and-claim every bind
 *     uses, so no GPU is promised twice. The Binding carries the same plan.
 *   - a gang found partly bound for gang.partial_rollback_seconds without
 *     being completed (its planned node went away, its devices were taken, a
 *     member was deleted and its replacement could not be placed, the API
 *     keeps refusing): rolled back. Its bound members are deleted, each with a
 *     UID precondition, so their controller starts the gang again whole. 0
 *     turns that off (the gang then waits for an operator, logged).
 * A pending member's own scheduling goes on meanwhile: kube-scheduler retries
 * it and the gang manager may place it through the normal path (the bound
 * members count towards the quorum), which also completes the gang.
 *
 * Bindings are posted on the binder thread (its gate stops a standby); the
 * pass itself, and the deletes, run on this module's thread.
 */
#include "extender/recover.h"

#include "extender/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/strmap.h"
#include "common/util.h"

/* How long between log lines about one gang that cannot be completed yet. */
#define RECOVER_LOG_EVERY_NS (30ULL * 1000000000ULL)

/* Why a gang cannot be completed: one member's reason, with its name. */
enum { RECOVER_WHY_BUF = EXT_REPLY_ERROR_BUF + K8S_NAMESPACE_BUF + K8S_NAME_BUF + 16 };

/* A plan seen partly bound, by gang key: since when, and when it last said
 * why it could not be completed. The recovery thread's own. */
struct partial {
	char key[K8S_KEY_BUF];          /* the map's key */
	char id[GANG_RECORD_ID_BUF];
	uint64_t since_ns;
	uint64_t logged_ns;
	bool seen;                      /* in the current pass */
};

struct ext_recover {
	const struct ext_service *svc;
	struct cache_api *api;
	struct ext_recover_opts opts;
	pthread_mutex_t lock;           /* one pass at a time; guards stop */
	pthread_cond_t wake;
	bool stop;
	bool thread_started;
	pthread_t thread;
	struct strmap partial;          /* "ns/group" -> struct partial; under lock */
	/* Leader election: whether this replica led at the thread's last look,
	 * and whether a pass has run since it took the Lease (atomic; /readyz
	 * waits for it). A takeover's pass skips the grace: the old leader,
	 * having lost the Lease, posts nothing more. */
	bool leading;
	bool caught_up;
	bool takeover;                  /* the pass running is a takeover's; under lock */
	struct ext_recover_stats stats; /* relaxed atomics */
};

void ext_recover_opts_defaults(struct ext_recover_opts *o)
{
	o->enabled = true;
	o->interval_s = 2;
	o->grace_s = 5;
	o->rollback_after_s = 300;
}

/* ---- One member's Binding ------------------------------------------------------ */

struct recover_post {
	struct ext_recover *rc;
	unsigned attempt;               /* posts so far, minus one */
	uint64_t retry_until_ns;        /* refusals are posted again until then */
	char uid[K8S_UID_BUF];
	char ns[K8S_NAMESPACE_BUF];
	char name[K8S_NAME_BUF];
	char node[K8S_NAME_BUF];
	char gang[K8S_KEY_BUF];
	char ids[EXT_DEVICE_IDS_BUF];
	char *ann;
};

/* A refused Binding (an admission webhook's 403, a 429, a 5xx) is posted again
 * after a backoff, its devices still claimed, for up to RECOVER_RETRY_NS: a
 * refusal that passes (a webhook that was lagging, a throttle) then still
 * completes the gang from its plan, and meanwhile the claimed member counts
 * as bound, so no other plan is made for it. The backoff is bind.c's for a
 * gang member after quorum (ext__bind_retry_delay_ms), one policy for both. */
#define RECOVER_RETRY_NS (15ULL * 1000000000ULL)

static void recover_posted(void *arg, int result, const char *msg, unsigned retry_after_ms);

/* Post <p> again after a backoff when that can still help. */
static bool post_again(struct recover_post *p, int result, const char *msg,
		       unsigned retry_after_ms)
{
	struct cache_binding b = { p->ns, p->name, p->uid, p->node, p->ann };
	int delay;

	/* An unknown outcome (timeout, connection lost) is left to the watch:
	 * the next pass sees the member bound or not. */
	if (result == -ETIMEDOUT || result == -EIO)
		return false;
	delay = ext__bind_retry_delay_ms(result, p->attempt, retry_after_ms, p->retry_until_ns);
	if (delay < 0)
		return false;
	p->attempt++;
	log_info("recover", "gang %s: binding pod %s/%s -> node %s refused (%s); posting it again "
		 "in %d ms (attempt %u)", p->gang, p->ns, p->name, p->node, msg, delay,
		 p->attempt + 1);
	return cache_binder_submit_after(p->rc->svc->binder, &b, (unsigned)delay, recover_posted,
					 p) == 0;
}

/* The API server answered a Binding this module posted (binder thread). A
 * refusal is posted again for a while (post_again), then gives the devices
 * back; a later pass tries again. */
static void recover_posted(void *arg, int result, const char *msg, unsigned retry_after_ms)
{
	struct recover_post *p = arg;
	struct cache *c = p->rc->svc->cache;

	if (post_again(p, result, msg, retry_after_ms))
		return;
	if (result == 0) {
		cache_pod_mark_bind(c, p->uid, true);
		__atomic_add_fetch(&p->rc->stats.bindings, 1, __ATOMIC_RELAXED);
		log_info("recover", "gang %s: bound pod %s/%s -> node %s, GPU devices [%s], as its "
			 "plan said (%s)", p->gang, p->ns, p->name, p->node, p->ids, msg);
	} else if (result == -ETIMEDOUT || result == -EIO) {
		/* Maybe bound: keep the devices until the watch says. */
		cache_pod_mark_bind(c, p->uid, false);
		log_warn("recover", "gang %s: binding pod %s/%s -> node %s: outcome unknown (%s); "
			 "its GPUs stay held until the cluster shows the pod", p->gang, p->ns,
			 p->name, p->node, msg);
	} else if (result == -ECANCELED) {
		/* Stopping, or the Lease lost: whoever leads next finishes it. */
		cache_pod_forget(c, p->uid);
		log_info("recover", "gang %s: pod %s/%s not bound: %s; whoever leads next binds it "
			 "from the plan", p->gang, p->ns, p->name, msg);
	} else {
		cache_pod_forget(c, p->uid);
		__atomic_add_fetch(&p->rc->stats.refused, 1, __ATOMIC_RELAXED);
		log_warn("recover", "gang %s: binding pod %s/%s -> node %s as its plan said failed, "
			 "GPUs released; trying again: %s", p->gang, p->ns, p->name, p->node, msg);
	}
	free(p->ann);
	free(p);
}

/* Claim member <mb>'s planned devices and post its Binding. Returns 0 when
 * posted; otherwise why not in <why>. */
static int complete_member(struct ext_recover *rc, const char *ns, const char *group,
			   const struct gang_record_member *mb, const struct cache_pod_info *info,
			   const char *plan, char *why, size_t len)
{
	const struct ext_service *svc = rc->svc;
	struct recover_post *p;
	struct cache_binding b;
	uint64_t devices = mb->devices;
	int ret;

	if (ext__bind_check_node(svc, info, mb->node, why, len) < 0)
		return -EPERM;
	ret = cache_pod_assume(svc->cache, mb->uid, mb->node, &devices);
	if (ret == -EALREADY)
		return 0;
	if (ret < 0) {
		snprintf(why, len, "its planned GPUs on node %s are not free (%s)", mb->node,
			 strerror(-ret));
		return ret;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		goto nomem;
	p->rc = rc;
	p->retry_until_ns = util_now_ns() + RECOVER_RETRY_NS;
	snprintf(p->uid, sizeof(p->uid), "%s", mb->uid);
	snprintf(p->ns, sizeof(p->ns), "%s", ns);
	snprintf(p->name, sizeof(p->name), "%s", mb->name);
	snprintf(p->node, sizeof(p->node), "%s", mb->node);
	snprintf(p->gang, sizeof(p->gang), "%s/%s", ns, group);
	p->ann = ext__binding_annotations(svc, mb->node, devices, plan, p->ids, sizeof(p->ids));
	if (!p->ann)
		goto nomem;
	b = (struct cache_binding){ p->ns, p->name, p->uid, p->node, p->ann };
	ret = cache_binder_submit(svc->binder, &b, recover_posted, p);
	if (ret < 0) {
		cache_pod_forget(svc->cache, mb->uid);
		snprintf(why, len, "cannot post its binding (%s)", strerror(-ret));
		free(p->ann);
		free(p);
		return ret;
	}
	return 0;
nomem:
	cache_pod_forget(svc->cache, mb->uid);
	if (p)
		free(p->ann);
	free(p);
	snprintf(why, len, "out of memory");
	return -ENOMEM;
}

/* ---- One plan ------------------------------------------------------------------ */

/* Where each member of a plan is. */
enum member_state {
	M_BOUND,        /* on its planned node */
	M_ELSEWHERE,    /* bound to another node */
	M_PENDING,      /* known from the cluster, unbound, active */
	M_IN_FLIGHT,    /* troupe here is binding it now */
	M_GONE,         /* deleted, finished, or never seen */
};

static enum member_state member_state(struct cache *c, const struct gang_record_member *mb,
				      struct cache_pod_info *info)
{
	if (cache_pod_get(c, mb->uid, info) < 0 || info->reservation)
		return M_GONE;
	if (info->state == CACHE_POD_STATE_ASSUMED && !info->posted)
		return M_IN_FLIGHT;
	if (info->node[0] || info->state == CACHE_POD_STATE_ASSUMED ||
	    info->state == CACHE_POD_STATE_BOUND)
		return strcmp(info->node, mb->node) == 0 ? M_BOUND : M_ELSEWHERE;
	if (!info->active || !info->from_api)
		return M_GONE;
	return M_PENDING;
}

/* The members a rollback deletes: those of the plan bound as planned, or,
 * for a plan too long to list its members, every member of the group bound
 * now. */
struct targets {
	struct gang_record_member *m;
	unsigned n, cap;
};

static void target_add(struct targets *t, const char *uid, const char *name, const char *node)
{
	if (t->n == t->cap) {
		unsigned cap = t->cap ? t->cap * 2 : 8;
		struct gang_record_member *m = realloc(t->m, cap * sizeof(*m));

		if (!m)
			return;         /* fewer deleted this pass; the plan stays for the next */
		t->m = m;
		t->cap = cap;
	}
	snprintf(t->m[t->n].uid, sizeof(t->m[0].uid), "%s", uid);
	snprintf(t->m[t->n].name, sizeof(t->m[0].name), "%s", name);
	snprintf(t->m[t->n].node, sizeof(t->m[0].node), "%s", node);
	t->n++;
}

static void collect_bound(const struct cache_pod_info *p, const char *uid, void *arg)
{
	if (!p->reservation && p->from_api && p->active && p->node[0])
		target_add(arg, uid, p->name, p->node);
}

/* Delete the gang's bound members (each only if still the same pod): their
 * controller starts the gang again. Returns whether every one is gone (else
 * the plan is kept for the next pass). */
static bool roll_back(struct ext_recover *rc, const char *ns, const char *group,
		      const struct gang_record *r, const char *why)
{
	struct targets t = { 0 };
	struct cache_pod_info info;
	char err[TROUPE_MESSAGE_BUF];
	unsigned deleted = 0;
	bool all = true;

	for (unsigned i = 0; r->members && i < r->n; i++)
		if (member_state(rc->svc->cache, &r->members[i], &info) == M_BOUND)
			target_add(&t, r->members[i].uid, r->members[i].name, r->members[i].node);
	if (!r->members)
		cache_group_foreach(rc->svc->cache, ns, group, collect_bound, &t);
	log_warn("recover", "gang %s/%s: rolling back its plan %s, partly bound for %u s without "
		 "being completed (%s): deleting its %u bound members so their controller starts "
		 "the gang again", ns, group, r->id, rc->opts.rollback_after_s, why, t.n);
	for (unsigned i = 0; i < t.n && all; i++) {
		const struct gang_record_member *mb = &t.m[i];
		int ret = cache_api_delete_pod(rc->api, ns, mb->name, mb->uid, err, sizeof(err));

		if (ret == 0 || ret == -ENOENT || ret == -ESTALE) {
			deleted += ret == 0;
			log_info("recover", "gang %s/%s: %s pod %s/%s (uid %s) on node %s", ns, group,
				 ret == 0 ? "deleted" : "did not delete (it is gone already)", ns,
				 mb->name, mb->uid, mb->node);
		} else {
			log_error("recover", "gang %s/%s: cannot delete pod %s/%s (uid %s): %s; the "
				  "gang stays partly bound until it can be", ns, group, ns, mb->name,
				  mb->uid, err);
			all = false;    /* the plan stays: the next pass tries again */
		}
	}
	free(t.m);
	__atomic_add_fetch(&rc->stats.pods_deleted, deleted, __ATOMIC_RELAXED);
	if (all) {
		const struct cache_event_ref pg = { CACHE_EVENT_PODGROUP_KIND,
						    CACHE_EVENT_PODGROUP_API_VERSION, ns, group,
						    NULL };

		__atomic_add_fetch(&rc->stats.rolled_back, 1, __ATOMIC_RELAXED);
		cache_events_emit(rc->svc->events, CACHE_EVENT_WARNING, &pg, "GangRolledBack",
				  "Binding", "plan %s rolled back: partly bound for %u s without "
				  "being completed (%s); deleted %u bound members so their "
				  "controller starts the gang again", r->id, rc->opts.rollback_after_s,
				  why, deleted);
	}
	return all;
}

/* The partial record for <key> (created when <create>); NULL without memory. */
static struct partial *partial_of(struct ext_recover *rc, const char *key, const char *id,
				  uint64_t now)
{
	struct partial *p = strmap_get(&rc->partial, key, strlen(key));

	if (p && strcmp(p->id, id) != 0) {
		snprintf(p->id, sizeof(p->id), "%s", id);       /* another plan: start again */
		p->since_ns = now;
		p->logged_ns = 0;
	}
	if (!p && (p = calloc(1, sizeof(*p)))) {
		snprintf(p->key, sizeof(p->key), "%s", key);
		snprintf(p->id, sizeof(p->id), "%s", id);
		p->since_ns = now;
		if (strmap_put(&rc->partial, p->key, strlen(p->key), p, NULL) < 0) {
			free(p);
			return NULL;
		}
	}
	if (p)
		p->seen = true;
	return p;
}

static void plan_done(struct ext_recover *rc, const char *ns, const char *group, const char *text,
		      const char *key, bool completed)
{
	struct partial *p;

	cache_group_plan_done(rc->svc->cache, ns, group, text);
	p = strmap_del(&rc->partial, key, strlen(key));
	if (p && completed) {
		__atomic_add_fetch(&rc->stats.completed, 1, __ATOMIC_RELAXED);
		log_info("recover", "gang %s: complete again (its plan %s, found partly bound)", key,
			 p->id);
	}
	free(p);
}

static void visit_plan(const char *ns, const char *group, const char *text, void *arg)
{
	struct ext_recover *rc = arg;
	struct cache *c = rc->svc->cache;
	struct gang_record r;
	char key[K8S_KEY_BUF], err[TROUPE_MESSAGE_BUF], why[RECOVER_WHY_BUF] = "";
	unsigned n_bound = 0, n_pending = 0, n_flight = 0, exist, bound;
	uint64_t now = util_now_ns();
	struct partial *p;
	int ret;

	snprintf(key, sizeof(key), "%s/%s", ns, group);
	ret = gang_record_decode(text, &r, err, sizeof(err));
	if (ret < 0) {
		/* Not one this release can act on: said once, then left alone (a
		 * newer plan is the newer release's to finish). */
		log_warn("recover", "gang %s: its members carry a plan troupe cannot use (%s); "
			 "it is left as it is", key, err);
		cache_group_plan_done(c, ns, group, text);
		return;
	}
	if (rc->svc->gangs && gang_in_flight(rc->svc->gangs, ns, group))
		goto out;       /* this replica's own plan: the gang manager's */
	cache_group_count(c, ns, group, &exist, &bound);
	for (unsigned i = 0; r.members && i < r.n; i++) {
		struct cache_pod_info info;

		switch (member_state(c, &r.members[i], &info)) {
		case M_BOUND:
			n_bound++;
			break;
		case M_IN_FLIGHT:
			n_flight++;
			break;
		case M_PENDING:
			n_pending++;
			break;
		default:
			break;
		}
	}
	if (n_flight)
		goto out;       /* being posted now: look again next pass */
	if ((r.members && n_bound == r.n) || bound >= r.quorum || (r.members && !n_bound)) {
		/* Complete; or nothing of this plan is bound any more (its members
		 * were deleted): nothing to finish either way. */
		plan_done(rc, ns, group, text, key, r.members && n_bound > 0);
		goto out;
	}
	p = partial_of(rc, key, r.id, now);
	if (!p || (!rc->takeover &&
		   util_elapsed_ns(now, p->since_ns) < (uint64_t)rc->opts.grace_s * 1000000000ULL))
		goto out;
	for (unsigned i = 0; r.members && i < r.n; i++) {
		const struct gang_record_member *mb = &r.members[i];
		struct cache_pod_info info;
		char one[EXT_REPLY_ERROR_BUF];

		if (member_state(c, mb, &info) != M_PENDING)
			continue;
		if (complete_member(rc, ns, group, mb, &info, text, one, sizeof(one)) < 0 && !why[0])
			snprintf(why, sizeof(why), "pod %s/%s: %s", ns, mb->name, one);
	}
	if (!r.members)
		snprintf(why, sizeof(why), "its plan was too long to list its members");
	else if (!n_pending && !why[0])
		snprintf(why, sizeof(why), "%u of its %u planned members are gone or bound elsewhere "
			 "and the quorum of %u is not bound", r.n - n_bound, r.n, r.quorum);
	if (!why[0])
		goto out;       /* posted: the watch will tell */
	if (rc->opts.rollback_after_s &&
	    util_elapsed_ns(now, p->since_ns) >= (uint64_t)rc->opts.rollback_after_s * 1000000000ULL) {
		if (roll_back(rc, ns, group, &r, why))
			plan_done(rc, ns, group, text, key, false);
	} else if (!p->logged_ns || util_elapsed_ns(now, p->logged_ns) >= RECOVER_LOG_EVERY_NS) {
		p->logged_ns = now ? now : 1;
		log_warn("recover", "gang %s: partly bound (%u of %u members of plan %s) and cannot "
			 "be completed now: %s; %s", key, n_bound, r.n, r.id, why,
			 rc->opts.rollback_after_s ? "it is rolled back if that lasts" :
			 "it waits (gang.partial_rollback_seconds is 0)");
	}
out:
	gang_record_fini(&r);
}

/* One pass; <takeover>: the first since this replica took the Lease. Returns
 * whether it ran (a standby, or a cache not synced yet, runs none). */
static bool pass(struct ext_recover *rc, bool takeover)
{
	const struct ext_service *svc = rc->svc;
	size_t pos = 0;
	void *v;

	if (!svc->binder || !cache_is_synced(svc->cache))
		return false;
	if (svc->lease && !cache_lease_is_leader(svc->lease))
		return false;
	pthread_mutex_lock(&rc->lock);
	rc->takeover = takeover;
	while (strmap_next(&rc->partial, &pos, NULL, &v))
		((struct partial *)v)->seen = false;
	cache_group_plans_foreach(svc->cache, visit_plan, rc);
	/* Plans no member shows any more (the pods went): forget them. */
	pos = 0;
	while (strmap_next(&rc->partial, &pos, NULL, &v))
		if (!((struct partial *)v)->seen) {
			struct partial *p = v;

			strmap_del(&rc->partial, p->key, strlen(p->key));
			free(p);
			pos = 0;
		}
	__atomic_add_fetch(&rc->stats.passes, 1, __ATOMIC_RELAXED);
	rc->takeover = false;
	pthread_mutex_unlock(&rc->lock);
	return true;
}

void ext_recover_pass(struct ext_recover *rc)
{
	(void)pass(rc, false);
}

bool ext_recover_ready(const struct ext_recover *rc)
{
	return !rc || !rc->svc->lease || __atomic_load_n(&rc->caught_up, __ATOMIC_ACQUIRE);
}

/* ---- The thread ------------------------------------------------------------------ */

/* With leader election the thread looks at the Lease this often, so that a
 * takeover's pass (and readiness after it) follows the takeover closely. */
#define RECOVER_LEASE_LOOK_NS (100ULL * 1000000ULL)

/* One look: a takeover's pass at once, else a pass every interval. Not under
 * the lock. */
static void look(struct ext_recover *rc, uint64_t *last_pass_ns)
{
	const struct cache_lease *lease = rc->svc->lease;
	bool leading = !lease || cache_lease_is_leader(lease);
	uint64_t now = util_now_ns();

	if (lease && !leading) {
		rc->leading = false;
		__atomic_store_n(&rc->caught_up, false, __ATOMIC_RELEASE);
		return;
	}
	if (lease && !rc->leading) {
		if (pass(rc, true)) {
			rc->leading = true;
			*last_pass_ns = now;
			__atomic_store_n(&rc->caught_up, true, __ATOMIC_RELEASE);
			log_info("recover", "leading: looked for gangs left partly bound before "
				 "answering ready");
		}
		return;
	}
	if (util_elapsed_ns(now, *last_pass_ns) >= (uint64_t)rc->opts.interval_s * 1000000000ULL) {
		(void)pass(rc, false);
		*last_pass_ns = now;
	}
}

static void *recover_thread(void *arg)
{
	struct ext_recover *rc = arg;
	uint64_t last_pass_ns = util_now_ns();

	pthread_mutex_lock(&rc->lock);
	while (!rc->stop) {
		uint64_t step = rc->svc->lease ? RECOVER_LEASE_LOOK_NS
					       : (uint64_t)rc->opts.interval_s * 1000000000ULL;
		struct timespec ts = util_deadline_after_ns(CLOCK_MONOTONIC, step);

		pthread_cond_timedwait(&rc->wake, &rc->lock, &ts);
		if (rc->stop)
			break;
		pthread_mutex_unlock(&rc->lock);
		look(rc, &last_pass_ns);
		pthread_mutex_lock(&rc->lock);
	}
	pthread_mutex_unlock(&rc->lock);
	return NULL;
}

struct ext_recover *ext_recover_new(const struct ext_service *svc, struct cache_api *api,
				    const struct ext_recover_opts *opts)
{
	struct ext_recover *rc = calloc(1, sizeof(*rc));
	pthread_condattr_t ca;

	if (!rc)
		return NULL;
	rc->svc = svc;
	rc->api = api;
	rc->opts = *opts;
	if (!rc->opts.interval_s)
		rc->opts.interval_s = 1;
	pthread_mutex_init(&rc->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rc->wake, &ca);
	pthread_condattr_destroy(&ca);
	strmap_init(&rc->partial);
	return rc;
}

int ext_recover_start(struct ext_recover *rc)
{
	int ret = pthread_create(&rc->thread, NULL, recover_thread, rc);

	if (ret)
		return -ret;
	rc->thread_started = true;
	return 0;
}

void ext_recover_stop(struct ext_recover *rc)
{
	if (!rc)
		return;
	pthread_mutex_lock(&rc->lock);
	rc->stop = true;
	pthread_cond_broadcast(&rc->wake);
	pthread_mutex_unlock(&rc->lock);
	if (rc->thread_started)
		pthread_join(rc->thread, NULL);
	rc->thread_started = false;
}

void ext_recover_free(struct ext_recover *rc)
{
	size_t pos = 0;
	void *v;

	if (!rc)
		return;
	ext_recover_stop(rc);
	while (strmap_next(&rc->partial, &pos, NULL, &v))
		free(v);
	strmap_fini(&rc->partial);
	pthread_cond_destroy(&rc->wake);
	pthread_mutex_destroy(&rc->lock);
	free(rc);
}

void ext_recover_get_stats(const struct ext_recover *rc, struct ext_recover_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!rc)
		return;
	out->passes = __atomic_load_n(&rc->stats.passes, __ATOMIC_RELAXED);
	out->completed = __atomic_load_n(&rc->stats.completed, __ATOMIC_RELAXED);
	out->bindings = __atomic_load_n(&rc->stats.bindings, __ATOMIC_RELAXED);
	out->refused = __atomic_load_n(&rc->stats.refused, __ATOMIC_RELAXED);
	out->rolled_back = __atomic_load_n(&rc->stats.rolled_back, __ATOMIC_RELAXED);
	out->pods_deleted = __atomic_load_n(&rc->stats.pods_deleted, __ATOMIC_RELAXED);
}
