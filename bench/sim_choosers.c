/* sim_choosers: how each scheduler picks the devices of the node it chose.
 * Node selection is the same for all of them (sim_replay.c); what differs is
 * the score policy named here and the chooser:
 *   troupe    the "topology" score and placement_choose (memoised, exact);
 *   lowest    the "binpack" score, the lowest free indices;
 *   random    the "binpack" score, a random free subset;
 *   sum-pairs the "binpack" score, the subset with the largest sum of
 *             placement_link_weight over its pairs (no worst-pair term, no
 *             fragmentation term; ties to the lowest indices).
 * The baselines are the obvious ways to do without troupe's chooser, so that
 * what the report credits to troupe is the chooser and nothing else.
 * Each returns a set of exactly <k> devices of <free_mask>, or 0.
 */
#include "sim_placement.h"

#include "extender/simulate.h"

static uint64_t choose_troupe(struct run *r, const struct cache_node_view *v,
			      uint64_t free_mask, unsigned k)
{
	static const struct placement_policy preferred = { PLACEMENT_POLICY_PREFERRED, 0 };
	struct placement_choice c;

	(void)r;
	if (placement_node_choose(v, free_mask, k, &preferred, &c) < 0)
		return 0;
	return c.set;
}

/* The baselines are troupe simulate's own (src/extender/simulate_choosers.c),
 * so that the two tools compare troupe with the same baselines, drawn the same
 * way from the run's random state: this benchmark uses the tool's choosers
 * and keeps only its own way in (link matrices built here, no parser). */
static uint64_t baseline(const char *name, struct run *r, const struct cache_node_view *v,
			 uint64_t free_mask, unsigned k)
{
	return sim_chooser_find(name)(v, free_mask, k, &r->rng.s);
}

static uint64_t choose_lowest(struct run *r, const struct cache_node_view *v,
			      uint64_t free_mask, unsigned k)
{
	return baseline("lowest", r, v, free_mask, k);
}

static uint64_t choose_random(struct run *r, const struct cache_node_view *v,
			      uint64_t free_mask, unsigned k)
{
	return baseline("random", r, v, free_mask, k);
}

static uint64_t choose_sum_pairs(struct run *r, const struct cache_node_view *v,
				 uint64_t free_mask, unsigned k)
{
	return baseline("sum-pairs", r, v, free_mask, k);
}

const struct chooser sim_choosers[CHOOSERS] = {
	{ "troupe", "topology", choose_troupe },
	{ "lowest", "binpack", choose_lowest },
	{ "random", "binpack", choose_random },
	{ "sum-pairs", "binpack", choose_sum_pairs },
};
