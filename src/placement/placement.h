/* placement: deciding whether a node can take a pod, how good a home it is, and
 * which devices the pod gets there. Pure functions over plain structs: no I/O,
 * no locks, no allocation on the per-node path.
 *
 * Thread: any. Every function here only reads its arguments.
 */
#ifndef TROUPE_PLACEMENT_PLACEMENT_H
#define TROUPE_PLACEMENT_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "placement/topology.h"

/* PLACEMENT_MAX_SCORE: the top of kube-scheduler's extender scale (extenderv1's
 * MaxExtenderPriority); PLACEMENT_FINE_MAX: the top of a policy's own score,
 * fine enough to order nodes the coarse scale would tie (placement_rank maps
 * one request's fine scores onto the coarse one). */
enum { PLACEMENT_REASON_LEN = 160, PLACEMENT_MAX_SCORE = 10, PLACEMENT_FINE_MAX = 250 };
/* The fit term counts the GPUs a node is left with up to this many: a node
 * left with as many or more scores 0 on it (a whole 8-GPU board's worth). */
enum { PLACEMENT_FIT_SPAN = 8 };

enum placement_verdict {
	PLACEMENT_FITS = 0,
	PLACEMENT_UNSCHEDULABLE,        /* not now: may fit after pods leave or the node heals */
	PLACEMENT_UNRESOLVABLE,         /* never, whatever is evicted */
};

/* Which of placement_check_request's tests refused a node, in its order: what
 * `troupe explain` groups nodes by, so that its groups are filter's own
 * decisions and not a second reading of the node. */
enum placement_why {
	PLACEMENT_WHY_FITS = 0,
	PLACEMENT_WHY_UNKNOWN_NODE,     /* not in troupe's cache */
	PLACEMENT_WHY_NO_GPU_KIND,      /* advertises none of the kind asked */
	PLACEMENT_WHY_CAPACITY,         /* fewer GPUs in all than the pod asks */
	PLACEMENT_WHY_NOT_READY,
	PLACEMENT_WHY_CORDONED,
	PLACEMENT_WHY_UNHEALTHY,        /* too few healthy (allocatable) GPUs */
	PLACEMENT_WHY_FREE,             /* too few free GPUs now */
	PLACEMENT_WHY_TOPOLOGY_UNKNOWN, /* a required policy, and the links are not known */
	PLACEMENT_WHY_TOPOLOGY_NEVER,   /* no set of the node's GPUs meets the policy */
	PLACEMENT_WHY_TOPOLOGY_FREE,    /* no free set meets it now */
	PLACEMENT_WHY_COUNT,
};

struct placement_fit {
	enum placement_verdict verdict;
	enum placement_why why;
	uint32_t free_gpus;
	char reason[PLACEMENT_REASON_LEN];      /* "troupe: ...", empty when it fits */
};

/* What a pod asks of a node: how many GPUs of which kind, and how connected. */
struct placement_request {
	struct cache_demand demand;
	struct placement_policy policy;
};

/* Whether a node takes new pods asking for <gpu_resource> GPUs at all, as far
 * as the node itself says: it advertises that kind (and some of it), is Ready
 * and is not cordoned. The one definition of a usable node: placement_check,
 * the gang planner and starvation holds all ask it. The first failing test,
 * in this order, is returned. */
enum placement_usable {
	PLACEMENT_USABLE = 0,
	PLACEMENT_NO_GPU_KIND,          /* advertises none of <gpu_resource> */
	PLACEMENT_NOT_READY,            /* condition Ready is not True */
	PLACEMENT_CORDONED,             /* spec.unschedulable */
};
/* Inline: filter asks it for every node of every request. */
static inline enum placement_usable placement_node_usable(const struct cache_node *n,
							  int gpu_resource)
{
	if (!cache_node_offers(n, gpu_resource))
		return PLACEMENT_NO_GPU_KIND;
	if (!n->ready)
		return PLACEMENT_NOT_READY;
	if (n->unschedulable)
		return PLACEMENT_CORDONED;
	return PLACEMENT_USABLE;
}

/* Decide whether the node in <view> can take a pod asking <demand>; on a refusal
 * write a reason a person can act on. <resource_names> are the managed names
 * (cache_opts.gpu_resources) for the messages. */
enum placement_verdict placement_check(const struct cache_node_view *view,
				       const struct cache_demand *demand,
				       const char *const *resource_names,
				       struct placement_fit *out);

/* placement_check, and the pod's topology policy: a required policy that no
 * free set meets refuses the node (unresolvable when not even an empty node
 * could meet it). */
enum placement_verdict placement_check_request(const struct cache_node_view *view,
					       const struct placement_request *req,
					       const char *const *resource_names,
					       struct placement_fit *out);

/* The reason given for a node troupe does not know. */
void placement_unknown_node(struct placement_fit *out);

/* Weights of the terms of a node's score (troupe's config, "scoring.weights"). */
struct placement_weights {
	double packing;         /* prefer nodes already partly used */
	double topology;        /* prefer nodes that give this pod a better-connected set */
	double fragmentation;   /* prefer choices that leave connected islands free */
	double fit;             /* prefer nodes left with the fewest free GPUs (best fit) */
};

/* A scoring policy: one table per policy file, chosen by name from config. */
struct placement_score_ops {
	const char *name;
	/* Score 0..PLACEMENT_FINE_MAX for a node that fits (placement_check said
	 * PLACEMENT_FITS). It may read only the node's topology class, free mask,
	 * free count and allocatable count (see placement_score_memo). */
	unsigned (*score)(const struct placement_weights *w, const struct cache_node_view *view,
			  const struct placement_request *req);
};

/* A request's memo of scores. Every policy's score is a function of the node's
 * topology class (node->derived), free device mask, free device count and
 * allocatable count only, besides the weights and the request: nodes alike in
 * those four score alike, so a request over thousands of nodes scores each
 * such kind once. One memo serves one request (one ops, weights and request)
 * inside one cache read section (class pointers stay valid). Its buckets are
 * the calling thread's (no allocation, nothing to clear): a thread uses one
 * memo at a time, and initialising another forgets the last. */
struct placement_score_memo {
	const struct placement_score_ops *ops;
	const struct placement_weights *w;
	const struct placement_request *req;
	uint32_t gen;                   /* this memo's buckets carry it */
	uint64_t tag;                   /* the class memo's tag for this request; 0: unused */
	uint32_t bucket_mask;           /* buckets in use - 1 (tests shrink it) */
	uint64_t hits, misses;
};

void placement_score_memo_init(struct placement_score_memo *m,
			       const struct placement_score_ops *ops,
			       const struct placement_weights *w,
			       const struct placement_request *req);
/* ops->score(w, view, req) capped at PLACEMENT_FINE_MAX, from the memo when a
 * node alike was scored. */
unsigned placement_score_memoized(struct placement_score_memo *m,
				  const struct cache_node_view *view);

/* One request's fine scores onto kube-scheduler's 0..PLACEMENT_MAX_SCORE, by
 * rank: the best fine score among the request's fitting nodes answers 10, the
 * next lower one 9, and so on, the tenth and below 1 (a node that does not
 * fit answers 0, outside this). kube-scheduler adds score x weight x 10 to its
 * in-tree plugins' sum, so a scaled score (fine x 10 / 250) would tie nodes
 * troupe tells apart and let the spreading default pick among them; by rank,
 * troupe's best node is the only one at 10 unless it truly ties, and one
 * rank is worth weight x 10 points (docs/configuration.md). Add every fitting
 * node's fine score, finish, then read each node's answer. */
struct placement_rank {
	uint64_t seen[4];               /* fine scores present, as bits */
	uint8_t score[PLACEMENT_FINE_MAX + 1];  /* fine -> answer, once finished */
};

static inline void placement_rank_init(struct placement_rank *r)
{
	r->seen[0] = r->seen[1] = r->seen[2] = r->seen[3] = 0;
}

static inline void placement_rank_add(struct placement_rank *r, unsigned fine)
{
	fine = fine > PLACEMENT_FINE_MAX ? PLACEMENT_FINE_MAX : fine;
	r->seen[fine >> 6] |= 1ULL << (fine & 63);
}

void placement_rank_finish(struct placement_rank *r);

static inline unsigned placement_rank_score(const struct placement_rank *r, unsigned fine)
{
	return r->score[fine > PLACEMENT_FINE_MAX ? PLACEMENT_FINE_MAX : fine];
}

/* A node's score terms for a pod, each 0..1 (the "topology" policy's, see
 * score_topology.c; "binpack" uses packing alone), and the device set the pod
 * would get there now (placement_node_choose on the free devices). The
 * topology policy's score is their weighted sum, computed here, so what
 * `troupe explain` shows is what scored. Returns 0, or -ENOSPC when no free
 * set meets the pod's policy. */
struct placement_score_terms {
	double packing;         /* GPU utilisation after the pod lands */
	double topology;        /* the chosen set's quality (placement_set_quality) */
	double fragmentation;   /* 1 - the share of the largest free island it breaks */
	double fit;             /* 1 - the GPUs left free, of PLACEMENT_FIT_SPAN */
	struct placement_choice choice;
	bool known;             /* the node's links are known */
};
int placement_score_terms(const struct cache_node_view *view, const struct placement_request *req,
			  struct placement_score_terms *out);

/* The policy called <name>, or NULL. */
const struct placement_score_ops *placement_score_find(const char *name);
/* Names of every policy, NULL-terminated, for --help and errors. */
extern const char *const placement_score_names[];

/* ---- Topology per node ----------------------------------------------------- */

struct placement_registry;

/* The interning table of topology classes; hooks below take it as ctx. */
struct placement_registry *placement_registry_new(void);
void placement_registry_free(struct placement_registry *r);
void placement_registry_stats(const struct placement_registry *r, uint64_t *classes,
			      uint64_t *parse_errors);
/* cache_opts.node_derive / node_release: a node's topology class (annotation,
 * else profile, else NULL for unknown). Cache writer thread only. */
void *placement_topo_derive(const struct cache_node *node, void *ctx);
void placement_topo_release(void *derived, void *ctx);
/* The node's topology class, or NULL when unknown. Inline: filter, scoring
 * and choosing ask it for every node. */
static inline struct placement_topo *placement_node_topo(const struct cache_node *node)
{
	/* The memo inside is the one part of a class that readers write. */
	return (struct placement_topo *)node->derived;
}
/* Choose <k> of <free_mask>'s devices of managed resource <resource> (the
 * pod's demand.gpu_resource) on the node in <view> (see placement_choose;
 * unknown topologies give the lowest free indices, and no set at all for a
 * policy that needs known links; a shared node's replica slots as
 * cache_node.gpu_packing says, only <resource>'s on a MIG mixed node). */
int placement_node_choose(const struct cache_node_view *v, int resource, uint64_t free_mask,
			  unsigned k, const struct placement_policy *policy,
			  struct placement_choice *out);
/* Quality 0..1 of a chosen set for a pod of <k> GPUs. */
double placement_set_quality(const struct placement_choice *c, unsigned k, bool known);

#endif
