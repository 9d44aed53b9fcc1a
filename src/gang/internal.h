/* What the gang manager's files share with each other and with no one else:
 * the gang record and its state, the manager, and the few helpers one file
 * calls in another. The manager is split by decision: the table, its lifecycle
 * and the expiry thread (manager.c); admission at filter (admit.c); the bind
 * barrier (barrier.c); the fair order and starvation holds (fair.c), and the
 * lock-free set of held nodes filter reads (held_nodes.c).
 *
 * Locking: one mutex (gang_manager.lock) guards the gang table and every
 * struct gang in it. Every function here declared "Lock held" expects it.
 */
#ifndef TROUPE_GANG_INTERNAL_H
#define TROUPE_GANG_INTERNAL_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cache/cache.h"
#include "common/limits.h"
#include "common/strmap.h"
#include "common/util.h"
#include "gang/gang.h"

/* Why a parked bind was answered as it was: the expiry message names the gang,
 * its counts and both timeouts, so it gets more room than one reason line. */
#define GANG_WHY_BUF 512

/* A gang's last failure, and the reasons filter returns: the extender's reply
 * buffers for filter are this size, so nothing it is handed is cut. */
#define GANG_REASON_BUF 640

/* A bind parked at the all-or-nothing barrier, and how it is to be answered:
 * the answer is written in place, so releasing a gang's binds needs no memory. */
struct parked {
	char uid[K8S_UID_BUF];
	char name[K8S_NAME_BUF];        /* the pod's, for the plan record */
	gang_release_fn release;
	void *ctx;
	bool ok;
	char why[GANG_WHY_BUF];
};

/* Capacity held for a starving gang: one reservation of the GPUs free on a
 * node when it was taken. */
struct hold {
	char key[TROUPE_RESERVATION_KEY_BUF];
	char node[K8S_NAME_BUF];
	uint64_t devices;
};

/* A plan's place for one member, reserved in the cache until a member claims
 * it. (gang.h's struct gang_slot is the planner's answer, by node index.) */
struct reserved_slot {
	char node[K8S_NAME_BUF];
	uint64_t devices;
	struct placement_request req;   /* the member request it was planned for */
	bool pinned;                    /* planned for a member pinned to its node */
	char res_key[TROUPE_RESERVATION_KEY_BUF];      /* the reservation while unclaimed */
	char member[K8S_UID_BUF];       /* the pod that claimed it, "" when open */
};

/* Where a gang is. Each state says which fields mean something; gang__enter
 * is the one place a gang changes state, and it checks them.
 *
 *   IDLE      no plan and nothing asked of it: members still missing, or its
 *             last plan ended (quorum reached, or expired; <reason> says why).
 *             Whether a gang is complete is the cache's to say (members
 *             bound), so "bound" is not a state kept here: a released gang is
 *             IDLE, and an extra member's filter reads the cache.
 *   WAITING   refused for capacity (or deferred in the fair order) and still
 *             wanted: waiting_since_ns is set; it takes part in the fair order
 *             and may have capacity held for it (holds, targets).
 *   PLANNED   slots reserved, no bind parked yet; deadline_ns is the group's
 *             timeout.
 *   BINDING   slots reserved and n_parked > 0 binds parked at the barrier;
 *             deadline_ns may be the parked binds' limit (deadline_is_http).
 */
enum gang_state {
	GANG_IDLE = 0,
	GANG_WAITING,
	GANG_PLANNED,
	GANG_BINDING,
};

struct gang {
	char key[K8S_KEY_BUF];          /* "ns/name" */
	char ns[K8S_NAMESPACE_BUF];
	char name[K8S_NAME_BUF];
	enum gang_state state;
	unsigned quorum;
	unsigned timeout_s;
	struct reserved_slot *slots;    /* the plan; non-NULL exactly when PLANNED or BINDING */
	unsigned n_slots;
	struct parked *parked;          /* n_parked > 0 exactly when BINDING */
	unsigned n_parked, cap_parked;
	uint64_t deadline_ns;
	bool deadline_is_http;          /* the parked-bind limit, not the group's timeout */
	unsigned generation;            /* bumped per plan, names reservations */
	unsigned moves;                 /* slots moved, names their reservations */
	uint64_t waiting_since_ns;      /* when it last became WAITING (the fair order's age) */
	uint64_t last_seen_ns;          /* a member's last filter */
	int32_t priority;
	char queue[K8S_NAME_BUF];
	unsigned need;                  /* members to place */
	uint64_t need_gpus;             /* GPUs they ask in all */
	struct placement_request req;   /* the largest member request (holds) */
	struct hold *holds;             /* capacity held while it starves */
	unsigned n_holds, cap_holds, hold_seq;
	char (*targets)[K8S_NAME_BUF];  /* nodes whose freed GPUs are kept for it */
	unsigned n_targets;
	char reason[GANG_REASON_BUF];   /* why the last attempt failed */
};

struct held_nodes;

/* Readers of the held-node set count themselves in one of two counters, by
 * the phase's parity; a writer waits for both to drain before freeing a set it
 * replaced (held_nodes.c explains the scheme). */
struct held_nodes_cell {
	struct held_nodes *cur;         /* atomic: the published set, NULL when empty */
	unsigned long phase;            /* atomic: bumped twice per replacement */
	unsigned long readers[2];       /* atomic: readers inside, by phase parity */
};

struct gang_manager {
	struct cache *cache;
	struct gang_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;                      /* guarded by lock */
	struct strmap gangs;            /* key -> struct gang; guarded by lock */
	struct gang_stats stats;        /* guarded by lock */
	bool holds_dirty;               /* guarded by lock: held_nodes is out of date */
	struct held_nodes_cell held_nodes;      /* written under lock, read without */
	uint64_t cap_logged_ns;         /* guarded by lock: last log line about the cap */
	pthread_t thread;
};

/* The manager's clock (gang_config.now_ns; the monotonic clock by default). */
static inline uint64_t gang__now(const struct gang_manager *m)
{
	return m->cfg.now_ns ? m->cfg.now_ns(m->cfg.clock_ctx) : util_now_ns();
}

static inline bool gang__planned(const struct gang *g)
{
	return g->state >= GANG_PLANNED;
}

static inline bool gang__waiting(const struct gang *g)
{
	return g->state == GANG_WAITING;
}

/* Whether two member requests are the same for planning: GPU count, kind and
 * topology policy. */
static inline bool gang__same_request(const struct placement_request *a,
				      const struct placement_request *b)
{
	return a->demand.gpus == b->demand.gpus &&
	       a->demand.gpu_resource == b->demand.gpu_resource &&
	       a->policy.kind == b->policy.kind && a->policy.min_level == b->policy.min_level;
}

/* ---- manager.c: the table, state changes, discovery ---------------------------- */

/* The gang <ns>/<name>; with <create>, a new idle one when there is none. At
 * the entry cap (gang_config.max_entries) the idle entries unseen longest are
 * forgotten first to make room; NULL with errno ENOSPC when none can be (every
 * entry waits, is planned or binds), or ENOMEM. Lock held. */
struct gang *gang__get(struct gang_manager *m, const char *ns, const char *name, bool create);
/* Move <g> to state <to> (the transitions the state comment allows), checking
 * the fields it implies. Entering WAITING stamps waiting_since_ns with <now>. */
void gang__enter(struct gang *g, enum gang_state to, uint64_t now);
/* Register gangs seen waiting in the cache. Lock held. */
void gang__discover_waiting(struct gang_manager *m, uint64_t now);
/* Whether <g> has nothing in flight (no plan, holds, targets or wait), so
 * forgetting it loses nothing a later filter cannot rebuild. */
static inline bool gang__forgettable(const struct gang *g)
{
	return g->state == GANG_IDLE && !g->n_holds && !g->n_targets;
}
/* Forget gangs with nothing in flight nobody asked about for idle_forget_s.
 * Lock held. */
void gang__forget_idle(struct gang_manager *m, uint64_t now);
/* Tell cfg.notify (if set) of <kind> for gang <g>, with the member <mb> (or
 * NULL) and the text from <fmt>. Formats only when someone listens. Lock held. */
void gang__notify(struct gang_manager *m, enum gang_note_kind kind, const struct gang *g,
		  const struct gang_member *mb, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Release the lock, first publishing the held-node set if it changed. */
void gang__unlock(struct gang_manager *m);

/* ---- admit.c: what a gang asks, and its terms ---------------------------------- */

/* The queue gang <ns>/<group> is ordered in, and its members' usage counted
 * in: its PodGroup's spec.queue (Volcano, KAI), else <fallback>. The result may
 * point into <buf> (K8S_KEY_BUF + K8S_UID_BUF + K8S_NAME_BUF holds any). */
const char *gang__group_queue(struct gang_manager *m, const char *ns, const char *group,
			      const char *fallback, char *buf, size_t len);
/* The same for member <mb>: <fallback> is its queue label, else its
 * namespace. */
const char *gang__queue(struct gang_manager *m, const struct gang_member *mb, char *buf,
			size_t len);
/* Quorum and timeout: the PodGroup first, then the pod's own annotations.
 * <min_gpus> (may be NULL) receives the PodGroup's minResources GPUs. Returns
 * whether a quorum was named; if not, it is the <exist> members. */
bool gang__terms(struct gang_manager *m, const struct gang_member *mb, unsigned exist,
		 unsigned *quorum, unsigned *timeout_s, uint32_t *min_gpus);
/* A gang naming no quorum is the members that exist: it waits until they
 * stop arriving (gang.settle_seconds since the newest), or the first ones
 * would be planned, or bound alone, before the rest are created. True with
 * <reason> set while they still arrive. Filter answers a retry then, and bind
 * refuses an unplanned member alike. Lock held. */
bool gang__still_settling(struct gang_manager *m, const struct gang_member *mb, unsigned exist,
			  char *reason, size_t reasonlen);
/* Whether a gang may still be settling at all: it names no quorum, not every
 * member is bound, and gang.settle_seconds is not 0. */
static inline bool gang__may_settle(const struct gang_manager *m, bool named, unsigned exist,
				    unsigned bound)
{
	return !named && bound < exist && m->cfg.settle_s;
}

/* A gang's members as the cache knows them, walked once (gang__census). */
struct member_ask {
	char uid[K8S_UID_BUF];
	struct placement_request req;
	char pinned[K8S_NAME_BUF];      /* the node its nodeSelector pins it to, or "" */
};
/* A place of a pinned need (gang_need.pins): its need and node. */
struct gang_pin {
	unsigned need;
	char node[K8S_NAME_BUF];
};
struct census {
	const struct gang_member *mb;   /* the member asking, or NULL (discovery) */
	struct member_ask *list;        /* unbound members asking GPUs, but <mb> */
	unsigned n, cap;
	unsigned exist, bound;          /* as cache_group_count counts them */
	unsigned cpu_only;              /* unbound members asking no GPU */
	unsigned pinned;                /* those in <list> pinned to a node */
	uint32_t min_member;            /* the largest quorum a member names */
	int32_t priority;               /* the highest member priority */
	char queue[K8S_NAME_BUF];       /* the first member's queue */
	bool oom;
};
/* Walk group <ns>/<group>'s members into <c> (whose mb is set by the caller;
 * free c->list). Lock held or not: it takes only cache locks. */
void gang__census(struct gang_manager *m, const char *ns, const char *group, struct census *c);
/* The one rule for what a gang still asks: the needs (a request and a count
 * each, as the planner takes them) of the <members> places it wants, from its
 * census. The same at admission (c->mb set) and discovery. Members pinned to
 * a node are needs of their own kind (pinned or not is part of the kind), and
 * each pinned place goes into <pins> (room for c->pinned; NULL: not wanted)
 * with its node, *n_pins of them. Returns how many needs, 0 when they are more
 * than GANG_MAX_NEEDS kinds. */
unsigned gang__needs(const struct census *c, unsigned members, struct gang_need *needs,
		     struct gang_pin *pins, unsigned *n_pins);
/* Move an open slot sized for <mb> onto <node> when the node has room for the
 * member now. Lock held. */
struct reserved_slot *gang__replan_slot(struct gang_manager *m, struct gang *g,
					const struct gang_member *mb, const char *node);
bool gang__slot_open_for(const struct reserved_slot *s, const struct gang_member *mb);

/* ---- barrier.c: parked binds and the quorum ----------------------------------- */

/* Answer parked binds taken out of a gang. Never with the lock held. */
void gang__run_releases(struct parked *r, unsigned n, char *plan);
/* Forget a gang's plan: its unclaimed reservations freed. Lock held. */
void gang__plan_drop(struct gang_manager *m, struct gang *g);
/* Drop <g>'s plan and hand back its parked binds to be answered with an error
 * (their devices freed). Lock held. */
unsigned gang__rollback(struct gang_manager *m, struct gang *g, const char *why,
			struct parked **out);
/* When <g>'s quorum is reached, hand back every parked bind to be posted, and
 * in <plan> the plan record their Bindings carry (for gang__run_releases).
 * Lock held. */
unsigned gang__quorum_release(struct gang_manager *m, struct gang *g, struct parked **out,
			      char **plan);

/* ---- fair.c: shares, the fair order, starvation holds -------------------------- */

struct shares {
	struct strmap by_queue;         /* queue -> struct usage_entry (owned, key inside) */
	struct cache_stats totals;
};
/* Each queue's usage from a walk of every pod: never with the lock held. */
void gang__shares_load(struct gang_manager *m, struct shares *s);
void gang__shares_fini(struct shares *s);
/* <queue>'s weight: its entry in troupe's config (queues:; 1 when <= 0), else
 * the first Queue object of another scheduler that has it (Volcano's
 * spec.weight, KAI's GPU overQuotaWeight), else 1; <from> (may be NULL) says
 * which: "config", the scheduler's name, "default". Lock held or not: the
 * config part is the caller's to guard (the manager's lock). */
double gang__queue_weight(const struct gang_manager *m, const char *queue, const char **from);
double gang__share_of(const struct gang_manager *m, const struct shares *s, const char *queue);
/* The GPUs <queue>'s pods hold, from the walk. */
uint64_t gang__queue_gpus(const struct shares *s, const char *queue);
/* > 0 when gang a goes before gang b: priority, then share, then age. */
int gang__precedes(const struct gang_manager *m, const struct shares *s, const struct gang *a,
		   const struct gang *b);
/* The waiting gang first in the fair order, other than <except>. Lock held. */
struct gang *gang__head_waiting(struct gang_manager *m, const struct shares *s,
				const struct gang *except);
/* Whether waiting gang <g> still waits; if not it becomes IDLE. Lock held. */
bool gang__still_waiting(struct gang_manager *m, struct gang *g, uint64_t now);
void gang__holds_release(struct gang_manager *m, struct gang *g);
/* Hold capacity for the starving head <g> as it frees. Lock held. */
void gang__holds_grow(struct gang_manager *m, struct gang *g);
/* One fairness pass at <now>: takes the lock itself, and drops it to load the
 * shares. The expiry thread calls it once a second; tests call it directly. */
void gang__fairness_pass(struct gang_manager *m, uint64_t now);

/* ---- held_nodes.c: the held-node set filter reads without the lock ------------ */

/* Rebuild and publish the set from the table; wait out readers of the set it
 * replaces. Lock held. */
void gang__held_nodes_publish(struct gang_manager *m);
void gang__held_nodes_fini(struct gang_manager *m);

#endif
