/* Placeholder: replaced by the built-in server profiles. */
#include "placement/topology.h"

#include <errno.h>

int placement_topo_profile(const char *product, unsigned count, struct placement_topo *out)
{
	(void)product;
	(void)count;
	(void)out;
	return -ENOENT;
}
