/* The model of the gang manager over a real cache that the barrier, admission
 * and model tests share (model.c: the model's state and invariants;
 * model_steps.c: what kube-scheduler, the watch and other pods do).
 *
 * A real struct cache (5 nodes of 8 GPUs) and a real gang manager with a 1 s
 * plan timeout. Random interleavings (fixed seeds) of what kube-scheduler, the
 * watch and other pods do: gang members filtered (over all nodes or a sample)
 * and bound (mostly on an allowed node, sometimes elsewhere), the watch
 * confirming or the API server refusing bindings, stale watch events, pods
 * deleted (held, bound or pending) and re-created, single pods taking and
 * freeing GPUs, and waits for a plan's expiry. After every step:
 *
 *   - no device is held by two entries on a node (reservations included), the
 *     held devices are a subset of the node's usage mask, and popcount(used) +
 *     unattributed <= allocatable;
 *   - every held member holds its devices (assumed, a member-sized set), every
 *     pod troupe would be posting or the watch showed bound holds exactly the
 *     devices the model recorded, every other pod holds nothing;
 *   - a plan round's held binds are released together and all alike: all ok
 *     (quorum) or all not ok (expiry) - never some of each, never one twice;
 *   - after a round ends, none of that gang's reservations remain, and members
 *     released with an error hold nothing;
 *   - a filter ALLOWED only nodes where the gang holds a reservation;
 *   - a member is never placed as a single pod while its gang is incomplete.
 * At the end of each seed, with every plan expired: each node's usage equals
 * the union of what its entries hold.
 *
 * Binds are issued only within 0.6 s of the plan the member's filter saw (as a
 * kube-scheduler binding cycle follows its scheduling cycle); a bind arriving
 * after its plan expired is the dedicated test below.
 */
#ifndef TROUPE_TEST_GANG_MODEL_H
#define TROUPE_TEST_GANG_MODEL_H

#include "fixture.h"

enum { MN = 5, MGANGS = 3, MSLOTS = 4, MAXPODS = 1024, MAXREL = 512, MAXENT = 1024 };

extern const char *const m_nodes[MN];

struct mpod {
	char uid[48];
	char name[48];
	int gang;                       /* index in model.gangs; -1: a single pod */
	int slot;                       /* member index in its gang */
	unsigned gpus;
	bool exists;                    /* in the cluster (created, not deleted) */
	bool held;                      /* its bind is held by the manager */
	unsigned round;                 /* the plan round it was held in */
	bool posting;                   /* assumed; its Binding is (would be) posted */
	bool bound;                     /* the watch showed it bound */
	int node;
	uint64_t devices;
};

struct mgang {
	const char *name;
	unsigned quorum, size, gpus;
	unsigned lead_gpus;             /* member 0 asks this many (mixed gangs) */
	int member[MSLOTS];             /* pod index of each member, -1: none */
	bool planned;                   /* a plan the model saw made and not yet end */
	double plan_t;
	unsigned round;                 /* plans made so far */
	unsigned incarnations;
};

struct mrel {
	int pod;
	bool ok;
	char why[200];
};

struct ment {
	char node[256];
	char name[256];
	uint64_t devices;
	unsigned unattr;
	bool reservation;
};

struct model {
	struct cache *c;
	struct gang_manager *gm;
	unsigned seed, step, rng;
	struct mpod pods[MAXPODS];
	unsigned n_pods;
	struct mgang gangs[MGANGS];
	pthread_mutex_t lock;
	struct mrel rel[MAXREL];        /* guarded by lock: releases not yet drained */
	unsigned n_rel;                 /* guarded by lock */
	bool rel_overflow;              /* guarded by lock */
	bool bad_plan;                  /* guarded by lock: a release without its plan */
	struct mrel got[MAXREL];        /* drain's scratch */
	struct ment ent[MAXENT];        /* check's scratch */
	unsigned n_ent;
	bool ent_overflow;
	unsigned waits;
	/* What the run exercised. */
	unsigned plans, holds, quorum_rounds, expired_rounds, refused, singles, deletes_held,
		 stale_events, bind_failures, moved_or_refused_binds, extra_singles, confirms,
		 external_binds;
};

#define MFAIL(m, ...)                                                                   \
	do {                                                                            \
		char _b[2048];                                                          \
		snprintf(_b, sizeof(_b), __VA_ARGS__);                                  \
		fail_msg("model seed %u, step %u: %s", (m)->seed, (m)->step, _b);       \
	} while (0)

double m_now(void);
unsigned m_rand(struct model *m, unsigned n);
void m_release(void *ctx, bool ok, const char *why, const char *plan);
void *m_hold_ctx(struct model *m, int pod);
cJSON *m_parse(const char *json);
void m_apply(struct model *m, const struct mpod *p, int node, uint64_t devices);
/* Begin a read section and look up every model node into <views>; returns how
 * many. */
unsigned m_read_views(struct model *m, struct cache_node_view *views);
unsigned m_reservations(struct model *m, int gi, int node);
void m_group_count(struct model *m, int gi, unsigned *exist, unsigned *bound);
void m_drain(struct model *m);
void m_check(struct model *m, bool quiet);
int m_new_pod(struct model *m, int gang, int slot, unsigned gpus);
void m_wait_plan_end(struct model *m, int gi);
void m_step(struct model *m, unsigned r);
struct model *m_new(unsigned seed, unsigned with_pods);
void m_free(struct model *m);

#endif
