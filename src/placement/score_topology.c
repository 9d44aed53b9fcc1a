/* The "topology" scoring policy (the default): a weighted sum of four terms,
 * each in 0..1, scaled to 0..PLACEMENT_FINE_MAX (250; prioritize ranks them
 * onto kube-scheduler's 0..10, placement_rank).
 *
 *   fit            best fit by GPUs: 1 - the free GPUs the node is left with
 *                  (up to PLACEMENT_FIT_SPAN, 8) / 8. Counted in GPUs, not as
 *                  a share of the node: a GPU left on a 4-GPU box is worth
 *                  what one left on an 8-GPU board is, so small pods fill the
 *                  boxes no 8-GPU pod can use before they break a whole board
 *                  (binpack's share does the opposite);
 *   topology       quality of the best set this node can give the pod now
 *                  (placement_set_quality: NVLink near 1, PCIe lower, across
 *                  sockets lowest; one GPU is always 1);
 *   fragmentation  how much of the node's largest free NVLink island the pod
 *                  eats: 1 - (island before - island after) / devices, where
 *                  the island is the largest set of free devices that are all
 *                  pairwise NVLinked. A pod that fits into a small island, or
 *                  lands where there is none to break, scores 1; a pair cut
 *                  out of an empty NVSwitch board scores 0.75;
 *   packing        GPU utilisation after placement (as binpack).
 *
 * The default weights (fit 100, topology 3, fragmentation 2, packing 0) make
 * the order lexicographic: one GPU less left is worth about 30 fine points,
 * all of topology and fragmentation together at most 12, so the best fit
 * always wins and the set's links and islands decide between equal fits.
 * They were chosen by `bench/sim_quality.py` over ten seeds against every
 * baseline (docs/placement-quality.md: the trade-off between waits and
 * islands, and why this point of it).
 *
 * prioritize answers the rank of the node's score among the request's nodes
 * (placement_rank), which kube-scheduler multiplies by the extender's weight
 * x 10: each rank is worth weight x 10 points against the in-tree plugins
 * (see config/scheduler-config.yaml).
 */
#include "placement/internal.h"

#include <errno.h>
#include <math.h>
#include <string.h>

double placement_set_quality(const struct placement_choice *c, unsigned k, bool known)
{
	static const double pcie[] = { 0.5, 0.1, 0.2, 0.3, 0.45, 0.6 };   /* NONE..PIX */

	if (k < 2)
		return 1.0;
	if (!known)
		return 0.5;     /* nothing known: neither rewarded nor punished */
	if (c->worst <= PLACEMENT_LINK_PIX)
		return pcie[c->worst];
	if (!placement_link_is_nvlink(c->worst))
		return 0.6;
	/* One link already beats PCIe; more bonded links approach 1. */
	return 0.8 + 0.2 * fmin(c->worst - PLACEMENT_LINK_NV0, 12) / 12.0;
}

/* Best fit on a shared node, by whole GPUs (none of whose replicas or MIG
 * devices is in use): a choice that keeps every whole GPU whole beats one
 * that breaks one, and then the fewer whole GPUs the node is left with (up to
 * PLACEMENT_FIT_SPAN), the better, so shared pods gather on GPUs and nodes
 * already shared and the rest stay whole for pods that need whole GPUs (or
 * for mig-parted to give back). */
static double shared_fit(const struct cache_node_view *view, uint64_t set)
{
	const struct cache_node *n = view->node;
	unsigned before = 0, after = 0;

	for (unsigned g = 0; g < n->gpu_physical; g++) {
		uint64_t slots = cache_node_gpu_slots(n, g) & ~n->unhealthy;

		if (!slots)
			continue;       /* no device of it can be given */
		before += !(view->used & slots);
		after += !((view->used | set) & slots);
	}
	return (after < before ? 0.0 : 0.5) +
	       0.5 * (1.0 - (double)(after < PLACEMENT_FIT_SPAN ? after : PLACEMENT_FIT_SPAN) /
			    PLACEMENT_FIT_SPAN);
}

int placement_score_terms(const struct cache_node_view *view, const struct placement_request *req,
			  struct placement_score_terms *out)
{
	const struct placement_topo *t = placement_node_topo(view->node);
	uint64_t free_mask = cache_view_free_mask(view);
	unsigned k = req->demand.gpus;

	memset(out, 0, sizeof(*out));
	if (placement_node_choose(view, req->demand.gpu_resource, free_mask, k, &req->policy,
				  &out->choice) < 0)
		return -ENOSPC;
	out->known = t && t->known;
	out->packing = placement__packing(view, &req->demand);
	{
		unsigned f = cache_view_free_gpus(view), left = f > k ? f - k : 0;

		out->fit = 1.0 - (double)(left < PLACEMENT_FIT_SPAN ? left : PLACEMENT_FIT_SPAN) /
				     PLACEMENT_FIT_SPAN;
	}
	out->topology = placement_set_quality(&out->choice, k, out->known);
	if (cache_node_shared(view->node))
		out->fit = shared_fit(view, out->choice.set);
	if (out->known) {
		unsigned before = placement_largest_island(t, free_mask);
		unsigned after = placement_largest_island(t, free_mask & ~out->choice.set);

		out->fragmentation = 1.0 - (double)(before - after) / t->n;
	} else {
		out->fragmentation = 1.0;       /* nothing known to fragment */
	}
	return 0;
}

static unsigned topology_score(const struct placement_weights *w,
			       const struct cache_node_view *view,
			       const struct placement_request *req)
{
	double total = w->packing + w->topology + w->fragmentation + w->fit, sum;
	struct placement_score_terms st;

	if (total <= 0.0 || req->demand.gpus == 0)
		return 0;
	if (placement_score_terms(view, req, &st) < 0)
		return 0;
	sum = w->packing * st.packing + w->topology * st.topology +
	      w->fragmentation * st.fragmentation + w->fit * st.fit;
	return (unsigned)lround(PLACEMENT_FINE_MAX * sum / total);
}

const struct placement_score_ops placement__score_topology = {
	.name = "topology",
	.score = topology_score,
};
