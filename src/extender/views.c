/* Every node's view at once, and the levels a gang plans over: what explain's
 * planNow and preempt's gang check both plan a gang on.
 */
#include "extender/internal.h"

#include <errno.h>
#include <stdlib.h>

static bool collect_view(const struct cache_node_view *v, void *arg)
{
	struct ext_views *vs = arg;

	if (vs->n == vs->cap) {
		size_t cap = vs->cap ? vs->cap * 2 : 256;
		struct cache_node_view *p = realloc(vs->v, cap * sizeof(*p));

		if (!p) {
			vs->oom = true;
			return false;
		}
		vs->v = p;
		vs->cap = cap;
	}
	vs->v[vs->n++] = *v;
	return true;
}

int ext__views_collect(const struct ext_service *svc, struct ext_views *vs)
{
	*vs = (struct ext_views){ 0 };
	cache_node_foreach(svc->cache, collect_view, vs);
	if (!vs->oom)
		return 0;
	ext__views_fini(vs);
	return -ENOMEM;
}

void ext__views_fini(struct ext_views *vs)
{
	free(vs->v);
	*vs = (struct ext_views){ 0 };
}

const struct gang_levels *ext__gang_levels(const struct ext_service *svc, const char *topology,
					   struct gang_levels *required, const char **key)
{
	const struct gang_levels *lv = svc->cfg->gang.levels.n ? &svc->cfg->gang.levels
							       : &gang_default_levels;
	char why[EXT_GANG_REASON_BUF];

	*key = NULL;
	/* A bad value: filter refuses the member with the parse error; the plan
	 * here is then the unconstrained one. */
	if (gang_topology_parse(topology, key, why, sizeof(why)) == 0 && *key) {
		gang_levels_required(lv, *key, required);
		lv = required;
	}
	return lv;
}
