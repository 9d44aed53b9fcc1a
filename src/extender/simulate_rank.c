/* simulate_rank: which node a pod goes to, under a simulator policy's ranker,
 * and what a policy string names.
 *
 * A policy is RANKER[+CHOOSER][@GANG] (sim_policy_parse). The rankers:
 *   SCORE            a troupe scoring policy (placement_score_find): the node
 *                    with the best fine score wins. That is the daemon's
 *                    choice under kube-scheduler when nothing else tells the
 *                    nodes apart: prioritize answers the rank of the fine
 *                    score (placement_rank), so the best is alone at 10;
 *   kube[:SCORE]     kube-scheduler's default profile with troupe as its
 *                    extender: NodeResourcesFit's LeastAllocated plus troupe's
 *                    rank answer x the extender weight x 10. Trace pods ask for
 *                    GPUs only; LeastAllocated is taken over the GPUs, as it
 *                    would be over CPU and memory asked in proportion to them
 *                    (BalancedAllocation is then the same on every node, and
 *                    the other default plugins see no taints, affinities or
 *                    spread constraints in a trace: equal everywhere);
 *   kube-scaled[:SCORE]  the same with the answer troupe gave before ranks:
 *                    the fine score scaled to 0..10 and rounded, so that nodes
 *                    troupe tells apart can tie and LeastAllocated picks;
 *   most-allocated   kube-scheduler alone with NodeResourcesFit's
 *   least-allocated  MostAllocated / LeastAllocated over the GPUs
 *                    (noderesources/most_allocated.go, least_allocated.go:
 *                    requested x 100 / capacity, integers);
 *   best-fit         the node left with the fewest free GPUs.
 * Every ranker sees only the nodes placement_check_request accepts (the
 * filter), and equal totals are drawn at random, as kube-scheduler's
 * selectHost does (reservoir sampling, one draw per tie).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "extender/simulate.h"
#include "extender/simulate_gangs.h"

static const struct {
	const char *name;
	enum sim_ranker ranker;
} rankers[] = {
	{ "kube", SIM_RANK_KUBE },
	{ "kube-scaled", SIM_RANK_KUBE_SCALED },
	{ "most-allocated", SIM_RANK_MOST_ALLOCATED },
	{ "least-allocated", SIM_RANK_LEAST_ALLOCATED },
	{ "best-fit", SIM_RANK_BEST_FIT },
};

const char *const sim_ranker_names[] = { "kube[:SCORE]", "kube-scaled[:SCORE]",
					 "most-allocated", "least-allocated", "best-fit", NULL };

/* Copy [s, s+n) into <out> (of <len>), 0 or -EINVAL when it does not fit. */
static int copy_part(char *out, size_t len, const char *s, size_t n)
{
	if (n >= len)
		return -EINVAL;
	memcpy(out, s, n);
	out[n] = '\0';
	return 0;
}

int sim_policy_parse(const char *name, struct sim_policy *p)
{
	const char *at = strchr(name, '@');
	const char *end = at ? at : name + strlen(name);
	const char *plus = memchr(name, '+', (size_t)(end - name));
	const char *rank_end = plus ? plus : end;
	const char *colon = memchr(name, ':', (size_t)(rank_end - name));
	char head[SIM_QUEUE_BUF], part[SIM_QUEUE_BUF];

	memset(p, 0, sizeof(*p));
	p->ranker = SIM_RANK_SCORE;
	if (copy_part(head, sizeof(head), name, (size_t)((colon ? colon : rank_end) - name)) < 0)
		return -EINVAL;
	snprintf(p->score, sizeof(p->score), "%s", head);
	for (size_t i = 0; i < sizeof(rankers) / sizeof(rankers[0]); i++)
		if (strcmp(rankers[i].name, head) == 0) {
			p->ranker = rankers[i].ranker;
			snprintf(p->score, sizeof(p->score), "topology");
		}
	if (colon) {
		/* Only kube and kube-scaled carry a troupe policy of their own. */
		if (p->ranker != SIM_RANK_KUBE && p->ranker != SIM_RANK_KUBE_SCALED)
			return -EINVAL;
		if (copy_part(p->score, sizeof(p->score), colon + 1,
			      (size_t)(rank_end - colon - 1)) < 0)
			return -EINVAL;
	}
	if (!placement_score_find(p->score))
		return -EINVAL;
	if (plus) {
		if (copy_part(part, sizeof(part), plus + 1, (size_t)(end - plus - 1)) < 0 ||
		    !(p->chooser = sim_chooser_find(part)))
			return -EINVAL;
	}
	if (at && !(p->gang = sim_gang_planner_find(at + 1)))
		return -EINVAL;
	return 0;
}

/* kube-scheduler's NodeResourcesFit scores over the GPUs, integers as its
 * code computes them (MaxNodeScore 100). */
static long least_allocated(const struct cache_node_view *v, unsigned k)
{
	long cap = v->node->gpu_allocatable, req = (long)(cap - cache_view_free_gpus(v)) + k;

	return cap > 0 && req <= cap ? (cap - req) * 100 / cap : 0;
}

static long most_allocated(const struct cache_node_view *v, unsigned k)
{
	long cap = v->node->gpu_allocatable, req = (long)(cap - cache_view_free_gpus(v)) + k;

	return cap > 0 ? (req > cap ? cap : req) * 100 / cap : 0;
}

/* The node's total under a ranker that needs no other node's score. */
static long total_alone(const struct sim_rank_args *a, const struct cache_node_view *v,
			unsigned fine)
{
	unsigned k = a->req->demand.gpus;

	switch (a->policy->ranker) {
	case SIM_RANK_MOST_ALLOCATED: return most_allocated(v, k);
	case SIM_RANK_LEAST_ALLOCATED: return least_allocated(v, k);
	case SIM_RANK_BEST_FIT: return -(long)(cache_view_free_gpus(v) - k);
	case SIM_RANK_KUBE_SCALED:
		return least_allocated(v, k) +
		       (long)((fine * PLACEMENT_MAX_SCORE + PLACEMENT_FINE_MAX / 2) /
			      PLACEMENT_FINE_MAX) * a->extender_weight * 10;
	default: return (long)fine;
	}
}

int sim_pick_node(const struct sim_rank_args *a, uint64_t *rng, unsigned *best_set,
		  unsigned *n_best)
{
	/* For refusal texts only, which the simulator never shows. */
	static const char *const names[CACHE_MAX_GPU_RESOURCES + 1] = {
		"gpu", "gpu", "gpu", "gpu", "gpu", "gpu", "gpu", "gpu", NULL,
	};
	const struct sim_policy *p = a->policy;
	bool scored = p->ranker == SIM_RANK_SCORE || p->ranker == SIM_RANK_KUBE ||
		      p->ranker == SIM_RANK_KUBE_SCALED;
	struct placement_score_memo memo;
	struct placement_rank rank;
	unsigned n_fit = 0, ties = 0;
	long best_total = 0;
	int best = -1;

	if (scored)
		placement_score_memo_init(&memo, a->ops, a->w, a->req);
	placement_rank_init(&rank);
	/* Pass 1: the nodes filter accepts, with their fine scores. */
	for (unsigned i = 0; i < a->n; i++) {
		struct placement_fit fit;

		/* A node with fewer free GPUs than the pod asks is one filter
		 * refuses: skipped on the caller's count, without asking. */
		if (a->free_hint && a->free_hint[i] < a->req->demand.gpus)
			continue;
		if (placement_check_request(&a->views[i], a->req, names, &fit) != PLACEMENT_FITS)
			continue;
		a->fit_idx[n_fit] = i;
		a->fit_fine[n_fit] = scored ? placement_score_memoized(&memo, &a->views[i]) : 0;
		if (p->ranker == SIM_RANK_KUBE)
			placement_rank_add(&rank, a->fit_fine[n_fit]);
		n_fit++;
	}
	if (p->ranker == SIM_RANK_KUBE)
		placement_rank_finish(&rank);
	/* Pass 2: the totals; the best wins, ties drawn at random. */
	if (n_best)
		*n_best = 0;
	for (unsigned f = 0; f < n_fit; f++) {
		const struct cache_node_view *v = &a->views[a->fit_idx[f]];
		long total = p->ranker == SIM_RANK_KUBE
				     ? least_allocated(v, a->req->demand.gpus) +
					       (long)placement_rank_score(&rank, a->fit_fine[f]) *
						       a->extender_weight * 10
				     : total_alone(a, v, a->fit_fine[f]);

		if (best < 0 || total > best_total) {
			best = (int)a->fit_idx[f];
			best_total = total;
			ties = 1;
			if (n_best)
				*n_best = 0;
		} else if (total == best_total && sim_rng_next(rng) % ++ties == 0) {
			best = (int)a->fit_idx[f]; /* reservoir sampling: each tie equally likely */
		} else if (total != best_total) {
			continue;
		}
		if (best_set && n_best)
			best_set[(*n_best)++] = a->fit_idx[f];
	}
	return best;
}
