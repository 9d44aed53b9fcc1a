/* Shared only inside placement/: the policy tables each policy file exports. */
#ifndef TROUPE_PLACEMENT_INTERNAL_H
#define TROUPE_PLACEMENT_INTERNAL_H

#include "placement/placement.h"

extern const struct placement_score_ops placement__score_binpack;

#endif
