/* simulate_gangs_internal: what simulate_gangs.c (the candidates, the
 * slots, kube-scheduler's planner, the entry points) shares with
 * simulate_gangs_tree.c (the domain tree, Kueue's and KAI's planners). Not
 * for any other file.
 */
#ifndef TROUPE_EXTENDER_SIMULATE_GANGS_INTERNAL_H
#define TROUPE_EXTENDER_SIMULATE_GANGS_INTERNAL_H

#include <stdbool.h>

#include "extender/simulate_gangs.h"

/* The network levels (at most GANG_MAX_LEVELS) and the hostname level. */
enum { TREE_MAX = GANG_MAX_LEVELS + 1 };

struct cand {
	unsigned idx;                   /* into the views */
	unsigned cap;                   /* members it takes alone (at most 64) */
	unsigned free;                  /* free GPUs */
	unsigned alloc;                 /* allocatable GPUs */
	const char *val[TREE_MAX];      /* per tree level; the last is the node's name */
	bool all_labels;                /* a non-empty label at every network level */
};

/* One call's state. */
struct gp {
	const struct cache_node_view *views;
	unsigned nviews;
	const struct placement_request *req;
	const struct gang_levels *levels;
	sim_choose_fn chooser;
	uint64_t *rng;
	unsigned members, k;
	struct cand *c;                 /* candidates, sorted by val (tree order) */
	unsigned nc;
	unsigned lv[GANG_MAX_LEVELS];   /* network tree level -> index in levels */
	unsigned nlv;                   /* network levels; tree levels are nlv + 1 */
	int key_level;                  /* kube-tas's key: an index in levels; -1: the finest */
	unsigned key_tree;              /* that level's network tree level */
};

/* The slots, from (candidate, members) pairs: each member's devices chosen
 * one after another on its node. 0; -ENOSPC when a node gives fewer sets than
 * it counted (a chooser that fails), <out> emptied; -ENOMEM. */
int sim_gang__assign(struct gp *g, const unsigned *cand, const unsigned *count, unsigned n_pairs,
		     struct gang_plan *out);

/* Kueue's TAS, BestFit (<bestfit>) or LeastFreeCapacity, and KAI's topology
 * plugin, over g's candidates (sorted in tree order, every capacity > 0):
 * 0 with <out> filled, -ENOSPC, -ENOMEM. */
int sim_gang__plan_kueue(struct gp *g, bool bestfit, struct gang_plan *out);
int sim_gang__plan_kai(struct gp *g, struct gang_plan *out);

#endif
