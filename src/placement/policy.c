/* The table of scoring policies, and device choice. */
#include "placement/internal.h"

#include <errno.h>
#include <string.h>


static const struct placement_score_ops *const policies[] = {
	&placement__score_topology,
	&placement__score_binpack,
};

const char *const placement_score_names[] = { "topology", "binpack", NULL };

const struct placement_score_ops *placement_score_find(const char *name)
{
	for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++)
		if (strcmp(policies[i]->name, name) == 0)
			return policies[i];
	return NULL;
}

int placement_choose_devices(const struct cache_node_view *view, uint64_t free_mask,
			     unsigned want, uint64_t *out)
{
	uint64_t set = 0;

	(void)view;
	if ((unsigned)__builtin_popcountll(free_mask) < want)
		return -ENOSPC;
	/* Lowest free indices; topology-aware choice replaces this in [3/5]. */
	for (unsigned i = 0; i < want; i++) {
		uint64_t low = free_mask & -free_mask;

		set |= low;
		free_mask &= ~low;
	}
	*out = set;
	return 0;
}
