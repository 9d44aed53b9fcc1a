/* The "binpack" scoring policy: fuller nodes first, so that whole nodes stay
 * free for the jobs that need them. The packing term is the node's GPU
 * utilisation after this pod lands, in (0, 1]; a pod that fills a node exactly
 * scores 10. Further terms (topology quality, fragmentation) join this sum with
 * their own weights, and the total is scaled back to 0..10. */
#include "placement/internal.h"

#include <math.h>

static unsigned binpack_score(const struct placement_weights *w,
			      const struct cache_node_view *view,
			      const struct cache_demand *demand)
{
	const struct cache_node *n = view->node;
	double total_w = w->packing, sum = 0.0, used;

	if (n->gpu_allocatable == 0 || total_w <= 0.0)
		return 0;
	used = (double)(n->gpu_allocatable - cache_view_free_gpus(view)) + demand->gpus;
	if (used > n->gpu_allocatable)
		used = n->gpu_allocatable;
	sum += w->packing * (used / n->gpu_allocatable);
	return (unsigned)lround(PLACEMENT_MAX_SCORE * sum / total_w);
}

const struct placement_score_ops placement__score_binpack = {
	.name = "binpack",
	.score = binpack_score,
};
