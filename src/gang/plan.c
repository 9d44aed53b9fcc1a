/* Placing a whole gang at once.
 *
 *   1. Capacity: for each candidate node, how many members it can take, by
 *      taking the best set for one member after another from its free devices
 *      (placement_node_choose, so a topology policy holds for every member).
 *   2. Domain: from the finest network level to the coarsest, group the nodes
 *      by that level's label and keep the domains whose capacity holds the whole
 *      gang; the first level with one wins, and within it the domain that needs
 *      the fewest nodes (ties: the one with the least capacity left over, so big
 *      domains stay whole). With no common domain at any level the cluster as a
 *      whole is tried.
 *   3. Nodes: inside the domain, the nodes that take the most members first
 *      (ties: less left over, then candidate order), until every member has a
 *      place; each member's devices are the sets found in step 1.
 *
 * Cost: step 1 is a memoised choice per member slot; steps 2 and 3 sort the
 * candidates once per level.
 */
#include "gang/gang.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"

const struct gang_levels gang_default_levels = {
	.n = 5,
	.keys = {
		{ "topology.kubernetes.io/zone", NULL },
		{ "network.topology.nvidia.com/datacenter", "fabric.topograph.run/tier-3", NULL },
		{ "network.topology.nvidia.com/spine", "fabric.topograph.run/tier-2", NULL },
		{ "network.topology.nvidia.com/block", "fabric.topograph.run/tier-1", NULL },
		{ "network.topology.nvidia.com/accelerator", "accelerator.topograph.run/domain",
		  "nvidia.com/gpu.clique" },
	},
};

struct cand {
	unsigned idx;                   /* into the caller's views */
	unsigned cap;                   /* members it can take */
	uint64_t sets[64];              /* their devices, best first */
};

static const char *domain_of(const struct cache_node *n, const struct gang_levels *lv,
			     unsigned level)
{
	for (unsigned k = 0; k < GANG_MAX_KEYS && lv->keys[level][k]; k++) {
		const char *v = cache_node_label(n, lv->keys[level][k]);

		if (v && *v)
			return v;
	}
	return NULL;
}

static int by_capacity(const void *a, const void *b)
{
	const struct cand *x = *(const struct cand *const *)a, *y = *(const struct cand *const *)b;

	if (x->cap != y->cap)
		return x->cap > y->cap ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* How many of <members> the nodes in <group> (sorted) need, or 0 if too few. */
static unsigned nodes_needed(struct cand *const *group, unsigned n, unsigned members,
			     unsigned *spare)
{
	unsigned got = 0;

	for (unsigned i = 0; i < n; i++) {
		got += group[i]->cap;
		if (got >= members) {
			*spare = got - members;
			return i + 1;
		}
	}
	return 0;
}

struct domain {
	const char *name;
	struct cand **nodes;
	unsigned n, cap;
};

int gang_plan_make(const struct cache_node_view *views, unsigned n, unsigned members,
		   const struct placement_request *req, const struct gang_levels *levels,
		   struct gang_plan *out, char *why, size_t whylen)
{
	struct cand *cands = NULL, **order = NULL, **best_nodes = NULL;
	struct domain *doms = NULL;
	unsigned ncand = 0, total = 0, best_count = 0, best_spare = 0, k = req->demand.gpus;
	const char *best_name = NULL;
	int best_level = -2, ret = -ENOMEM;
	bool oom = false;
	struct strmap index;

	memset(out, 0, sizeof(*out));
	strmap_init(&index);
	if (members == 0 || k == 0 || k > 64) {
		snprintf(why, whylen, "nothing to place");
		ret = -ENOSPC;
		goto out;
	}
	cands = calloc(n ? n : 1, sizeof(*cands));
	order = calloc(n ? n : 1, sizeof(*order));
	doms = calloc(n ? n : 1, sizeof(*doms));
	if (!cands || !order || !doms)
		goto out;
	/* 1. What each node can take. */
	for (unsigned i = 0; i < n; i++) {
		struct cand *c = &cands[ncand];
		uint64_t free_mask = cache_view_free_mask(&views[i]);
		unsigned free_n = cache_view_free_gpus(&views[i]);
		struct placement_choice ch;

		if (views[i].node->gpu_resource != req->demand.gpu_resource || !views[i].node->ready ||
		    views[i].node->unschedulable)
			continue;
		c->idx = i;
		while (c->cap < members && c->cap < 64 && free_n >= k &&
		       placement_node_choose(&views[i], free_mask, k, &req->policy, &ch) == 0) {
			c->sets[c->cap++] = ch.set;
			free_mask &= ~ch.set;
			free_n -= k;
		}
		if (c->cap) {
			order[ncand++] = c;
			total += c->cap;
		}
	}
	if (total < members) {
		snprintf(why, whylen, "%u pods x %u GPUs; the offered nodes hold %u", members, k,
			 total);
		ret = -ENOSPC;
		goto out;
	}
	qsort(order, ncand, sizeof(*order), by_capacity);
	/* 2. The finest level with a domain that holds the whole gang. */
	for (int level = (int)levels->n - 1; level >= 0 && best_level == -2; level--) {
		unsigned ndom = 0;

		strmap_fini(&index);
		strmap_init(&index);
		for (unsigned i = 0; i < ncand; i++) {
			const char *d = domain_of(views[order[i]->idx].node, levels, (unsigned)level);
			struct domain *dom;

			if (!d)
				continue;
			dom = strmap_get(&index, d, strlen(d));
			if (!dom) {
				dom = &doms[ndom++];
				memset(dom, 0, sizeof(*dom));
				dom->name = d;
				dom->nodes = calloc(ncand, sizeof(*dom->nodes));
				if (!dom->nodes || strmap_put(&index, d, strlen(d), dom, NULL) < 0) {
					oom = true;
					break;
				}
			}
			dom->nodes[dom->n++] = order[i];        /* stays sorted */
			dom->cap += order[i]->cap;
		}
		for (unsigned d = 0; d < ndom && !oom; d++) {
			unsigned spare = 0, need;

			if (doms[d].cap < members)
				continue;
			need = nodes_needed(doms[d].nodes, doms[d].n, members, &spare);
			if (best_level == -2 || need < best_count ||
			    (need == best_count && spare < best_spare)) {
				free(best_nodes);
				best_nodes = doms[d].nodes;
				doms[d].nodes = NULL;
				best_count = need;
				best_spare = spare;
				best_name = doms[d].name;
				best_level = level;
			}
		}
		for (unsigned d = 0; d < ndom; d++)
			free(doms[d].nodes);
		if (oom)
			goto out;
	}
	if (best_level == -2 && levels->strict) {
		/* Say how close the best domain came. */
		unsigned most = 0;
		const char *where = NULL;

		strmap_fini(&index);
		strmap_init(&index);
		for (unsigned i = 0, nd = 0; i < ncand; i++) {
			const char *d = domain_of(views[order[i]->idx].node, levels, levels->n - 1);
			struct domain *dom;

			if (!d)
				continue;
			dom = strmap_get(&index, d, strlen(d));
			if (!dom) {
				dom = &doms[nd++];
				memset(dom, 0, sizeof(*dom));
				dom->name = d;
				if (strmap_put(&index, d, strlen(d), dom, NULL) < 0)
					goto out;
			}
			dom->cap += order[i]->cap;
			if (dom->cap > most) {
				most = dom->cap;
				where = d;
			}
		}
		if (where)
			snprintf(why, whylen, "%u pods x %u GPUs; largest free %s domain %s holds %u pods",
				 members, k, levels->keys[levels->n - 1][0], where, most);
		else
			snprintf(why, whylen, "%u pods x %u GPUs; no offered node has the label %s",
				 members, k, levels->keys[levels->n - 1][0]);
		ret = -ENOSPC;
		goto out;
	}
	if (best_level == -2) {
		/* No common domain: the cluster as one. */
		best_nodes = malloc(ncand * sizeof(*best_nodes));
		if (!best_nodes)
			goto out;
		memcpy(best_nodes, order, ncand * sizeof(*order));
		best_level = -1;
		best_name = "";
	}
	/* 3. Members onto the chosen nodes, fullest-fitting first. */
	out->slots = calloc(members, sizeof(*out->slots));
	if (!out->slots)
		goto out;
	for (unsigned i = 0, placed = 0; placed < members; i++) {
		for (unsigned s = 0; s < best_nodes[i]->cap && placed < members; s++) {
			out->slots[placed].node = best_nodes[i]->idx;
			out->slots[placed].devices = best_nodes[i]->sets[s];
			placed++;
		}
		out->nodes_used = i + 1;
	}
	out->n_slots = members;
	out->level = best_level;
	snprintf(out->domain, sizeof(out->domain), "%s", best_name);
	ret = 0;
out:
	if (ret == -ENOMEM)
		snprintf(why, whylen, "out of memory planning the gang");
	strmap_fini(&index);
	free(best_nodes);
	free(doms);
	free(order);
	free(cands);
	return ret;
}

void gang_plan_fini(struct gang_plan *p)
{
	free(p->slots);
	memset(p, 0, sizeof(*p));
}
