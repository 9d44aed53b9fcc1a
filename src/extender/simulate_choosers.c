/* simulate_choosers: the device choosers `troupe simulate` can put in place of
 * troupe's own, so that a comparison can say what troupe's chooser is worth.
 * A policy named "binpack+lowest" ranks nodes with the "binpack" score and
 * then takes devices with the "lowest" chooser; a policy with no "+CHOOSER"
 * uses placement_node_choose, the daemon's bind. The baselines are the obvious
 * ways to do without troupe's chooser, bench/sim_placement's (sim_choosers.c):
 *   lowest     the lowest free indices (what a device plugin's default does);
 *   random     a uniformly random free subset;
 *   sum-pairs  the subset with the largest sum of placement_link_weight over
 *              its pairs: best effort, no worst-pair and no fragmentation
 *              term (ties to the lowest indices).
 * They ignore the pod's troupe.io/topology when choosing (the filter still
 * applies it to nodes), as a scheduler without troupe's chooser would.
 * Each returns a set of exactly <k> devices of <free_mask>, or 0.
 */
#include <errno.h>
#include <string.h>

#include "extender/simulate.h"

static uint64_t split(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t choose_lowest(const struct cache_node_view *v, uint64_t free_mask, unsigned k,
			      uint64_t *rng)
{
	uint64_t set = 0;

	(void)v;
	(void)rng;
	for (unsigned i = 0; i < k && free_mask; i++) {
		set |= free_mask & -free_mask;
		free_mask &= free_mask - 1;
	}
	return set;
}

static uint64_t choose_random(const struct cache_node_view *v, uint64_t free_mask, unsigned k,
			      uint64_t *rng)
{
	unsigned idx[CACHE_MAX_GPUS], n = 0;
	uint64_t set = 0;

	(void)v;
	for (; free_mask; free_mask &= free_mask - 1)
		idx[n++] = (unsigned)__builtin_ctzll(free_mask);
	/* A partial Fisher-Yates shuffle: the first k are a uniform k-subset. */
	for (unsigned i = 0; i < k && i < n; i++) {
		unsigned j = i + (unsigned)(((split(rng) >> 11) * 0x1.0p-53) * (n - i));
		unsigned tmp = idx[i];

		idx[i] = idx[j];
		idx[j] = tmp;
		set |= 1ULL << idx[i];
	}
	return set;
}

static uint64_t choose_sum_pairs(const struct cache_node_view *v, uint64_t free_mask,
				 unsigned k, uint64_t *rng)
{
	const struct placement_topo *t = placement_node_topo(v->node);
	uint64_t best = 0;
	uint32_t best_w = 0;

	/* Every subset is too many past 16 devices, and with no links known
	 * there is nothing to sum: the lowest indices then. */
	if (!t || !t->known || __builtin_popcountll(free_mask) > 16)
		return choose_lowest(v, free_mask, k, rng);
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

static const struct {
	const char *name;
	sim_choose_fn fn;
} choosers[] = {
	{ "lowest", choose_lowest },
	{ "random", choose_random },
	{ "sum-pairs", choose_sum_pairs },
};

sim_choose_fn sim_chooser_find(const char *name)
{
	for (size_t i = 0; i < sizeof(choosers) / sizeof(choosers[0]); i++)
		if (strcmp(choosers[i].name, name) == 0)
			return choosers[i].fn;
	return NULL;
}

int sim_policy_split(const char *name, char *score, size_t len, sim_choose_fn *chooser)
{
	const char *plus = strchr(name, '+');
	size_t n = plus ? (size_t)(plus - name) : strlen(name);

	*chooser = NULL;
	if (n >= len)
		return -EINVAL;
	memcpy(score, name, n);
	score[n] = '\0';
	if (!placement_score_find(score))
		return -EINVAL;
	if (plus && !(*chooser = sim_chooser_find(plus + 1)))
		return -EINVAL;
	return 0;
}
