/* The "topology" scoring policy (the default): a weighted sum of three terms,
 * each in 0..1, scaled to 0..10.
 *
 *   topology       quality of the best set this node can give the pod now
 *                  (placement_set_quality: NVLink near 1, PCIe lower, across
 *                  sockets lowest; one GPU is always 1);
 *   fragmentation  the share of the free devices' connectivity that is left
 *                  after the pod takes its set: 1 when the choice breaks no
 *                  NVLink island, lower when it splits one;
 *   packing        GPU utilisation after placement (as binpack).
 *
 * kube-scheduler multiplies the result by the extender's weight x 10, so a
 * node's advantage here is worth up to weight x 100 points against the
 * in-tree plugins (see config/scheduler-config.yaml).
 */
#include "placement/internal.h"

#include <math.h>

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

static unsigned topology_score(const struct placement_weights *w,
			       const struct cache_node_view *view,
			       const struct placement_request *req)
{
	const struct placement_topo *t = placement_node_topo(view->node);
	double total = w->packing + w->topology + w->fragmentation, sum = 0.0;
	uint64_t free_mask = cache_view_free_mask(view);
	struct placement_choice c;
	unsigned k = req->demand.gpus;

	if (total <= 0.0 || k == 0)
		return 0;
	if (placement_node_choose(view, free_mask, k, &req->policy, &c) < 0)
		return 0;
	sum += w->packing * placement__packing(view, &req->demand);
	sum += w->topology * placement_set_quality(&c, k, t && t->known);
	if (t && t->known) {
		struct placement_choice before;

		/* Connectivity among the free devices before and after. */
		placement_measure(t, 0, free_mask, &before);
		sum += w->fragmentation * (before.leftover ? (double)c.leftover / before.leftover
							   : 1.0);
	} else {
		sum += w->fragmentation;        /* nothing known to fragment */
	}
	return (unsigned)lround(PLACEMENT_MAX_SCORE * sum / total);
}

const struct placement_score_ops placement__score_topology = {
	.name = "topology",
	.score = topology_score,
};
