/* Placing a whole gang at once. Members asking the same are one *need*
 * (gang_need: a request and how many ask it); a gang may have several.
 *
 *   1. Capacity: for each candidate node, what it could take alone: its best
 *      set for one member after another from its free devices
 *      (placement_node_choose, so every member's topology policy holds),
 *      the needs pinned to nodes first (gang_need.pins: their members can go
 *      nowhere else), then the largest. A pinned need takes on each node
 *      just the members pinned there; the others only the offered nodes.
 *   2. Domain: from the finest network level to the coarsest, group the nodes
 *      by that level's label and fill each domain (step 3) to see whether it
 *      holds the whole gang; the first level with one wins, and within it the
 *      tightest domain, the one with the fewest free GPUs (ties: the fewest
 *      nodes, then the least capacity left over), so big domains stay whole.
 *      With no common domain at any level the cluster as a whole is tried,
 *      unless the levels are strict (troupe.io/gang-topology required:<key>,
 *      gang_levels_required): then level 0 is the required one, a finer
 *      level's domain counts only when all its nodes share one level-0
 *      domain, and no domain at level 0 means no plan.
 *   3. Fill: the nodes that take the most GPUs first (ties: the fewest GPUs
 *      left over, then candidate order). A node whose step-1 sets fit in what
 *      is still to place gives them as they are; the node where a need runs
 *      out is packed again with what is left (so its spare room takes the
 *      smaller needs). Largest first, first fit: a heuristic for mixed needs,
 *      exact for one.
 *
 * Cost: step 1 is a memoised choice per member slot; a fill touches at most
 * as many nodes as members and packs again only where a need runs out; the
 * candidates are sorted once.
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

void gang_levels_required(const struct gang_levels *lv, const char *key,
			  struct gang_levels *out)
{
	unsigned from = lv->n;

	memset(out, 0, sizeof(*out));
	out->strict = true;
	out->n = 1;
	out->keys[0][0] = key;
	for (unsigned l = 0; l < lv->n && from == lv->n; l++)
		for (unsigned k = 0; k < GANG_MAX_KEYS && lv->keys[l][k]; k++)
			if (strcmp(lv->keys[l][k], key) == 0)
				from = l + 1;
	for (unsigned l = from; l < lv->n && out->n < GANG_MAX_LEVELS; l++)
		memcpy(out->keys[out->n++], lv->keys[l], sizeof(lv->keys[l]));
}

/* What one node takes: up to 64 sets (a node has at most 64 GPUs). */
struct pack {
	unsigned n;                     /* sets */
	unsigned gpus;                  /* GPUs in them */
	uint8_t per_need[GANG_MAX_NEEDS];
	uint64_t sets[64];
	uint8_t need[64];               /* each set's need */
};

struct cand {
	unsigned idx;                   /* into the caller's views */
	unsigned left;                  /* free GPUs left after its pack */
	struct pack pack;               /* what it takes alone (step 1) */
};

struct planner {
	const struct cache_node_view *views;
	unsigned n_offered;             /* views past this are pinned needs' alone */
	const struct gang_need *needs;
	unsigned n_needs;
	unsigned order[GANG_MAX_NEEDS];         /* needs, pinned then most GPUs first */
	unsigned members, gpus;                 /* the whole gang */
};

/* Pack <v> with at most limit[j] members of each need, largest need first. */
static void pack_node(const struct planner *pl, const struct cache_node_view *v,
		      const unsigned *limit, struct pack *out)
{
	uint64_t free_mask = cache_view_free_mask(v);
	unsigned free_n = cache_view_free_gpus(v), idx = (unsigned)(v - pl->views);

	memset(out, 0, sizeof(*out));
	for (unsigned o = 0; o < pl->n_needs; o++) {
		unsigned j = pl->order[o];
		const struct placement_request *r = &pl->needs[j].req;
		unsigned k = r->demand.gpus, taken = 0, cap = limit[j];
		struct placement_choice ch;

		if (!cache_node_offers(v->node, r->demand.gpu_resource))
			continue;
		/* A pinned need takes here only the members pinned here; the
		 * others go to the offered candidates alone. */
		if (pl->needs[j].pins) {
			if (pl->needs[j].pins[idx] < cap)
				cap = pl->needs[j].pins[idx];
		} else if (idx >= pl->n_offered) {
			continue;
		}
		while (taken < cap && out->n < 64 && free_n >= k &&
		       placement_node_choose(v, r->demand.gpu_resource, free_mask, k, &r->policy, &ch) == 0) {
			out->sets[out->n] = ch.set;
			out->need[out->n++] = (uint8_t)j;
			out->per_need[j]++;
			out->gpus += k;
			free_mask &= ~ch.set;
			free_n -= k;
			taken++;
		}
	}
}

/* Whether node <n> is usable for some need: placement_node_usable, the one
 * rule for it, asked for each need's GPU kind. A node of no need's kind would
 * take nothing in pack_node anyway, so asking it here changes no plan. */
static bool usable(const struct planner *pl, const struct cache_node *n)
{
	for (unsigned j = 0; j < pl->n_needs; j++) {
		int kind = pl->needs[j].req.demand.gpu_resource;

		if (placement_node_usable(n, kind) == PLACEMENT_USABLE)
			return true;
	}
	return false;
}

const char *gang_domain_of(const struct cache_node *n, const struct gang_levels *lv,
			   unsigned level)
{
	for (unsigned k = 0; k < GANG_MAX_KEYS && lv->keys[level][k]; k++) {
		const char *v = cache_node_label(n, lv->keys[level][k]);

		if (v && *v)
			return v;
	}
	return NULL;
}

/* Whether every node of <dom> has one domain at level 0 of <lv>: a strict
 * plan's finer domain must lie inside one required domain, even where the
 * labels do not nest (a block value reused under two spines). */
static bool inside_one(const struct planner *pl, const struct gang_levels *lv,
		       struct cand *const *nodes, unsigned n)
{
	const char *d0 = NULL;

	for (unsigned i = 0; i < n; i++) {
		const char *d = gang_domain_of(pl->views[nodes[i]->idx].node, lv, 0);

		if (!d || (d0 && strcmp(d, d0) != 0))
			return false;
		d0 = d;
	}
	return true;
}

static int by_capacity(const void *a, const void *b)
{
	const struct cand *x = *(const struct cand *const *)a, *y = *(const struct cand *const *)b;

	if (x->pack.gpus != y->pack.gpus)
		return x->pack.gpus > y->pack.gpus ? -1 : 1;
	if (x->left != y->left)
		return x->left < y->left ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

struct fill {
	unsigned placed, nodes, spare;  /* members placed, nodes used, GPUs left over */
};

/* A candidate's free GPUs (what its pack took and what it left). */
static unsigned cand_free(const struct cand *c)
{
	return c->left + c->pack.gpus;
}

/* Fill the gang into <nodes> (sorted) in order; with <slots>, write each
 * member's place there. */
static struct fill fill(const struct planner *pl, struct cand *const *nodes, unsigned n,
			struct gang_slot *slots)
{
	unsigned rem[GANG_MAX_NEEDS];
	struct fill f = { 0 };
	struct pack again;

	for (unsigned j = 0; j < pl->n_needs; j++)
		rem[j] = pl->needs[j].count;
	for (unsigned i = 0; i < n && f.placed < pl->members; i++) {
		const struct pack *p = &nodes[i]->pack;
		unsigned gpus = 0;

		for (unsigned j = 0; j < pl->n_needs; j++)
			if (p->per_need[j] > rem[j]) {
				pack_node(pl, &pl->views[nodes[i]->idx], rem, &again);
				p = &again;
				break;
			}
		if (!p->n)
			continue;
		for (unsigned s = 0; s < p->n; s++) {
			if (slots) {
				slots[f.placed].node = nodes[i]->idx;
				slots[f.placed].devices = p->sets[s];
				slots[f.placed].need = p->need[s];
			}
			rem[p->need[s]]--;
			gpus += pl->needs[p->need[s]].req.demand.gpus;
			f.placed++;
		}
		f.nodes++;
		f.spare += cand_free(nodes[i]) - gpus;  /* a repack may take more than the pack */
	}
	return f;
}

/* "32 pods x 8 GPUs", or "1 pod x 8 GPUs + 4 pods x 2 GPUs" for mixed needs. */
static void describe(const struct planner *pl, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (unsigned o = 0; o < pl->n_needs && at < len; o++) {
		const struct gang_need *nd = &pl->needs[pl->order[o]];
		int w = snprintf(buf + at, len - at, "%s%u pod%s x %u GPU%s", o ? " + " : "",
				 nd->count, nd->count == 1 && pl->n_needs > 1 ? "" : "s",
				 nd->req.demand.gpus, nd->req.demand.gpus == 1 ? "" : "s");

		if (w < 0)
			break;
		at += (size_t)w;
	}
}

struct domain {
	const char *name;
	struct cand **nodes;
	unsigned n, gpus;               /* gpus: free on its candidates */
};

/* A part of the chosen domain one level finer, and how many members it holds. */
struct part {
	unsigned first, n;              /* its nodes: [first, first + n) of the grouping */
	unsigned holds;
	bool taken;
};

static int by_holds(const void *a, const void *b)
{
	const struct part *x = a, *y = b;

	if (x->holds != y->holds)
		return x->holds > y->holds ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* Order the nodes of a domain at <level> (coarser than the finest) by its
 * parts, each node's finest labelled level below <level>, as Kueue's
 * Topology Aware Scheduling fills a domain (KEP-2724, BestFit): the parts
 * that hold the most members first, until what is left fits one part; then
 * the part that holds it most tightly. So a gang that no rack or NVLink
 * clique holds takes as few of them as it can and leaves the others whole,
 * instead of a node from each. Nodes keep their order within a part; the
 * parts not taken follow, for mixed needs the counts only estimate. 0 or
 * -ENOMEM (the nodes are then as they were). */
static int order_by_parts(const struct planner *pl, struct cand **nodes, unsigned n,
			  const struct gang_levels *levels, int level)
{
	struct cand **grouped = malloc((n + 1) * sizeof(*grouped));
	struct part *parts = calloc(n + 1, sizeof(*parts));
	unsigned *part_of = malloc((n + 1) * sizeof(*part_of)), n_parts = 0, at = 0;
	unsigned left = pl->members;
	struct strmap index;
	int ret = -ENOMEM;

	strmap_init(&index);
	if (!grouped || !parts || !part_of)
		goto out;
	for (unsigned i = 0; i < n; i++) {
		const char *d = NULL;
		struct part *p = NULL;

		for (int l = (int)levels->n - 1; l > level && !d; l--)
			d = gang_domain_of(pl->views[nodes[i]->idx].node, levels, (unsigned)l);
		if (d)
			p = strmap_get(&index, d, strlen(d));
		if (!p) {
			p = &parts[n_parts++];
			if (d && strmap_put(&index, d, strlen(d), p, NULL) < 0)
				goto out;
		}
		p->n++;
		part_of[i] = (unsigned)(p - parts);
	}
	/* Group the nodes part by part, each part's in their order. */
	for (unsigned q = 0; q < n_parts; q++) {
		parts[q].first = at;
		at += parts[q].n;
		parts[q].n = 0;
	}
	for (unsigned i = 0; i < n; i++) {
		struct part *p = &parts[part_of[i]];

		grouped[p->first + p->n++] = nodes[i];
	}
	for (unsigned q = 0; q < n_parts; q++)
		parts[q].holds = fill(pl, grouped + parts[q].first, parts[q].n, NULL).placed;
	qsort(parts, n_parts, sizeof(*parts), by_holds);
	at = 0;
	while (left > 0) {
		int pick = -1;

		for (unsigned q = 0; q < n_parts; q++) {
			if (parts[q].taken || !parts[q].holds)
				continue;
			if (pick < 0)
				pick = (int)q;          /* the part holding the most */
			if (parts[q].holds >= left)
				pick = (int)q;          /* sorted: the last is the tightest */
		}
		if (pick < 0)
			break;
		parts[pick].taken = true;
		memcpy(nodes + at, grouped + parts[pick].first, parts[pick].n * sizeof(*nodes));
		at += parts[pick].n;
		left = parts[pick].holds >= left ? 0 : left - parts[pick].holds;
	}
	for (unsigned q = 0; q < n_parts; q++)
		if (!parts[q].taken) {
			memcpy(nodes + at, grouped + parts[q].first, parts[q].n * sizeof(*nodes));
			at += parts[q].n;
		}
	ret = 0;
out:
	strmap_fini(&index);
	free(grouped);
	free(parts);
	free(part_of);
	return ret;
}

/* Whether need <a> is packed before need <b> (planner.order). */
static bool goes_before(const struct gang_need *a, const struct gang_need *b)
{
	if (!a->pins != !b->pins)
		return a->pins != NULL;
	return a->req.demand.gpus > b->req.demand.gpus;
}

int gang_plan_mixed(const struct cache_node_view *views, unsigned n,
		    const struct gang_need *needs, unsigned n_needs,
		    const struct gang_levels *levels, struct gang_plan *out, char *why,
		    size_t whylen)
{
	return gang_plan_pinned(views, n, n, needs, n_needs, levels, out, why, whylen);
}

int gang_plan_pinned(const struct cache_node_view *views, unsigned n, unsigned n_offered,
		     const struct gang_need *needs, unsigned n_needs,
		     const struct gang_levels *levels, struct gang_plan *out, char *why,
		     size_t whylen)
{
	struct planner pl = { .views = views, .n_offered = n_offered, .needs = needs,
			      .n_needs = n_needs };
	unsigned best_dom_gpus = 0;	/* free GPUs of the chosen domain */
	struct cand *cands = NULL, **order = NULL, **best_nodes = NULL;
	struct domain *doms = NULL;
	unsigned ncand = 0, limit[GANG_MAX_NEEDS], most = 0, best_n = 0;
	const char *best_name = NULL, *most_where = NULL;
	struct fill best = { 0 }, all;
	int best_level = -2, ret = -ENOMEM;
	char what[160];
	struct strmap index;

	memset(out, 0, sizeof(*out));
	strmap_init(&index);
	if (n_needs == 0 || n_needs > GANG_MAX_NEEDS) {
		snprintf(why, whylen, n_needs ? "more than %u different member requests"
				      : "nothing to place", GANG_MAX_NEEDS);
		ret = -ENOSPC;
		goto out;
	}
	for (unsigned j = 0; j < n_needs; j++) {
		unsigned k = needs[j].req.demand.gpus, o = j;

		if (k == 0 || k > 64 || needs[j].count == 0) {
			snprintf(why, whylen, "nothing to place");
			ret = -ENOSPC;
			goto out;
		}
		/* Insertion sort, stable: pinned needs first (a node's room goes
		 * to the members that can go nowhere else), then most GPUs. */
		while (o > 0 && goes_before(&needs[j], &needs[pl.order[o - 1]])) {
			pl.order[o] = pl.order[o - 1];
			o--;
		}
		pl.order[o] = j;
		limit[j] = needs[j].count;
		pl.members += needs[j].count;
		pl.gpus += needs[j].count * k;
	}
	describe(&pl, what, sizeof(what));
	cands = calloc(n ? n : 1, sizeof(*cands));
	order = calloc(n ? n : 1, sizeof(*order));
	doms = calloc(n ? n : 1, sizeof(*doms));
	if (!cands || !order || !doms)
		goto out;
	/* 1. What each node can take. */
	for (unsigned i = 0; i < n; i++) {
		struct cand *c = &cands[ncand];

		if (!usable(&pl, views[i].node))
			continue;
		c->idx = i;
		pack_node(&pl, &views[i], limit, &c->pack);
		c->left = cache_view_free_gpus(&views[i]) - c->pack.gpus;
		if (c->pack.n)
			order[ncand++] = c;
	}
	qsort(order, ncand, sizeof(*order), by_capacity);
	all = fill(&pl, order, ncand, NULL);
	if (all.placed < pl.members) {
		snprintf(why, whylen, "%s; the offered nodes%s hold %u", what,
			 n_offered < n ? " and the nodes members are pinned to" : "", all.placed);
		ret = -ENOSPC;
		goto out;
	}
	/* 2. The finest level with a domain that holds the whole gang. */
	for (int level = (int)levels->n - 1; level >= 0 && best_level == -2; level--) {
		unsigned ndom = 0;
		bool oom = false;

		strmap_fini(&index);
		strmap_init(&index);
		for (unsigned i = 0; i < ncand && !oom; i++) {
			const char *d = gang_domain_of(views[order[i]->idx].node, levels,
						       (unsigned)level);
			struct domain *dom;

			if (!d)
				continue;
			dom = strmap_get(&index, d, strlen(d));
			if (!dom) {
				dom = &doms[ndom++];
				memset(dom, 0, sizeof(*dom));
				dom->name = d;
				dom->nodes = calloc(ncand, sizeof(*dom->nodes));
				if (!dom->nodes || strmap_put(&index, d, strlen(d), dom, NULL) < 0)
					oom = true;
			}
			if (!oom) {
				dom->nodes[dom->n++] = order[i];        /* stays sorted */
				dom->gpus += cand_free(order[i]);
			}
		}
		for (unsigned d = 0; d < ndom && !oom; d++) {
			struct fill f;

			/* Too few GPUs cannot hold it; the required level of a
			 * strict plan is filled all the same, to say how close it
			 * came. */
			if (doms[d].gpus < pl.gpus && !(levels->strict && level == 0))
				continue;
			if (levels->strict && level > 0 &&
			    !inside_one(&pl, levels, doms[d].nodes, doms[d].n))
				continue;
			f = fill(&pl, doms[d].nodes, doms[d].n, NULL);
			if (f.placed > most) {
				most = f.placed;
				most_where = doms[d].name;
			}
			if (f.placed < pl.members)
				continue;
			if (best_level == -2 || doms[d].gpus < best_dom_gpus ||
			    (doms[d].gpus == best_dom_gpus &&
			     (f.nodes < best.nodes ||
			      (f.nodes == best.nodes && f.spare < best.spare)))) {
				best_dom_gpus = doms[d].gpus;
				free(best_nodes);
				best_nodes = doms[d].nodes;
				doms[d].nodes = NULL;
				best = f;
				best_n = doms[d].n;
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
		if (most_where)
			snprintf(why, whylen, "%s; largest free %s domain %s holds %u pods", what,
				 levels->keys[0][0], most_where, most);
		else
			snprintf(why, whylen, "%s; no offered node has the label %s", what,
				 levels->keys[0][0]);
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
		best_n = ncand;
	}
	/* 3. Members onto the chosen nodes: by parts when the domain is
	 * coarser than the finest level. */
	if (best_level < (int)levels->n - 1 &&
	    order_by_parts(&pl, best_nodes, best_n, levels, best_level) < 0)
		goto out;
	out->slots = calloc(pl.members, sizeof(*out->slots));
	if (!out->slots)
		goto out;
	/* The same fill as the one that chose the domain (a node may give
	 * nothing in it, so every node of the domain is offered again). */
	all = fill(&pl, best_nodes, best_n, out->slots);
	if (all.placed < pl.members) {
		snprintf(why, whylen, "%s; internal error: the chosen domain holds %u", what,
			 all.placed);
		gang_plan_fini(out);
		ret = -ENOSPC;
		goto out;
	}
	out->n_slots = all.placed;
	out->nodes_used = all.nodes;
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

int gang_plan_make(const struct cache_node_view *views, unsigned n, unsigned members,
		   const struct placement_request *req, const struct gang_levels *levels,
		   struct gang_plan *out, char *why, size_t whylen)
{
	struct gang_need one = { .req = *req, .count = members };

	return gang_plan_mixed(views, n, &one, 1, levels, out, why, whylen);
}

void gang_plan_fini(struct gang_plan *p)
{
	free(p->slots);
	memset(p, 0, sizeof(*p));
}
