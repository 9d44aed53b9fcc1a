/* Shared only inside placement/: the policy tables each policy file exports. */
#ifndef TROUPE_PLACEMENT_INTERNAL_H
#define TROUPE_PLACEMENT_INTERNAL_H

#include "placement/placement.h"

extern const struct placement_score_ops placement__score_binpack;
extern const struct placement_score_ops placement__score_topology;

/* The packing term shared by the policies: GPU utilisation after placement. */
double placement__packing(const struct cache_node_view *view, const struct cache_demand *d);

#endif
