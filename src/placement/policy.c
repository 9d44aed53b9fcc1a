/* The table of scoring policies. */
#include "placement/internal.h"

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
