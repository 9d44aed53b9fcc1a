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

static uint64_t choose_lowest(struct run *r, const struct cache_node_view *v,
			      uint64_t free_mask, unsigned k)
{
	uint64_t set = 0;

	(void)r;
	(void)v;
	for (unsigned i = 0; i < k && free_mask; i++) {
		set |= free_mask & -free_mask;
		free_mask &= free_mask - 1;
	}
	return set;
}

static uint64_t choose_random(struct run *r, const struct cache_node_view *v,
			      uint64_t free_mask, unsigned k)
{
	unsigned idx[PLACEMENT_TOPO_MAX], n = 0;
	uint64_t set = 0;

	(void)v;
	for (; free_mask; free_mask &= free_mask - 1)
		idx[n++] = (unsigned)__builtin_ctzll(free_mask);
	/* A partial Fisher-Yates shuffle: the first k are a uniform k-subset. */
	for (unsigned i = 0; i < k && i < n; i++) {
		unsigned j = i + rng_below(&r->rng, n - i), tmp = idx[i];

		idx[i] = idx[j];
		idx[j] = tmp;
		set |= 1ULL << idx[i];
	}
	return set;
}

static uint64_t choose_sum_pairs(struct run *r, const struct cache_node_view *v,
				 uint64_t free_mask, unsigned k)
{
	const struct placement_topo *t = placement_node_topo(v->node);
	uint64_t best = 0;
	uint32_t best_w = 0;

	(void)r;
	/* Every subset of the free devices (at most 8 here), exactly. */
	for (uint64_t s = free_mask;; s = (s - 1) & free_mask) {
		if ((unsigned)__builtin_popcountll(s) == k) {
			uint32_t w = 0;
			uint64_t diff = s ^ best;

			for (uint64_t a = s; a; a &= a - 1)
				for (uint64_t b = a & (a - 1); b; b &= b - 1)
					w += placement_link_weight(
						t->link[__builtin_ctzll(a)][__builtin_ctzll(b)]);
			/* Ties: the set holding the lowest index where they differ. */
			if (!best || w > best_w || (w == best_w && (s & diff & -diff)))
				best = s, best_w = w;
		}
		if (!s)
			break;
	}
	return best;
}

const struct chooser sim_choosers[CHOOSERS] = {
	{ "troupe", "topology", choose_troupe },
	{ "lowest", "binpack", choose_lowest },
	{ "random", "binpack", choose_random },
	{ "sum-pairs", "binpack", choose_sum_pairs },
};
