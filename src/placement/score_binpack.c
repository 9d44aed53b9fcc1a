/* The "binpack" scoring policy: fuller nodes first, so that whole nodes stay
 * free for the jobs that need them. The score is the node's GPU utilisation
 * after this pod lands, in (0, 1], scaled to 0..PLACEMENT_FINE_MAX (250): a
 * pod that fills a node exactly scores 250. Topology is ignored (see score_topology.c for the policy
 * that weighs it). */
#include "placement/internal.h"

#include <math.h>

double placement__packing(const struct cache_node_view *view, const struct cache_demand *d)
{
	const struct cache_node *n = view->node;
	double used;

	if (n->gpu_allocatable == 0)
		return 0.0;
	used = (double)(n->gpu_allocatable - cache_view_free_gpus(view)) + d->gpus;
	if (used > n->gpu_allocatable)
		used = n->gpu_allocatable;
	return used / n->gpu_allocatable;
}

static unsigned binpack_score(const struct placement_weights *w,
			      const struct cache_node_view *view,
			      const struct placement_request *req)
{
	/* Its one term: no weight changes the order (the default packing
	 * weight, 0, is the topology policy's). */
	(void)w;
	return (unsigned)lround(PLACEMENT_FINE_MAX * placement__packing(view, &req->demand));
}

const struct placement_score_ops placement__score_binpack = {
	.name = "binpack",
	.score = binpack_score,
};
