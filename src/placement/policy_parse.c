/* Reading the topology policy a pod asks for in its troupe.io/topology
 * annotation: "preferred" (the default, also for no annotation or an empty
 * one), "required" (every pair NVLinked), "required:<LEVEL>" (every pair at
 * LEVEL or better, a level as nvidia-smi prints it, any case) or "none"
 * (ignore topology). What a policy means for a set is decided in choose.c.
 *
 * Thread: any; nothing here keeps state.
 */
#include "placement/topology.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int placement_policy_parse(const char *s, struct placement_policy *out, char *err,
			   size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!s || strcmp(s, "preferred") == 0 || !*s)
		return 0;
	if (strcmp(s, "none") == 0) {
		out->kind = PLACEMENT_POLICY_NONE;
		return 0;
	}
	if (strcmp(s, "required") == 0) {
		out->kind = PLACEMENT_POLICY_REQUIRED;
		return 0;
	}
	if (strncmp(s, "required:", 9) == 0 &&
	    placement_link_parse(s + 9, strlen(s + 9), &out->min_level) == 0 &&
	    out->min_level != PLACEMENT_LINK_NONE) {
		out->kind = PLACEMENT_POLICY_REQUIRED_LEVEL;
		return 0;
	}
	snprintf(err, errlen, "annotation troupe.io/topology=\"%s\" is not one of preferred, "
		 "required, required:<LEVEL> (LEVEL: NV<n>, PIX, PXB, PHB, NODE, SYS) or none", s);
	return -EINVAL;
}
