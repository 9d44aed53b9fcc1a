/* simulate_gangs: troupe's peers' gang placement, written from their code
 * and design documents, for `troupe simulate` to compare troupe's planner
 * with. Each planner is the peer's choice of *nodes*; devices on a node come
 * from the simulator's chooser (or troupe's own placement_node_choose), so a
 * comparison can vary the two separately.
 *
 * What every planner shares. The candidates are the nodes
 * placement_check_request accepts for one member (what troupe's filter would
 * offer; the peers equally leave out nodes that are NotReady or cordoned:
 * Kueue's tas_nodes_cache.go keeps only schedulable, Ready nodes). A node's
 * capacity is the members it could take alone: how many device sets the
 * chooser gives one after another from its free devices (the peers' "pods
 * that fit", Kueue's requests.CountIn and KAI's calcNodeAccommodation, on
 * GPUs; CPU, memory and the pods limit are not modelled). The network levels
 * are those of <levels> that some candidate carries a label for (an admin's
 * Topology lists only levels the nodes have); a node without a label at a
 * level has the value "" there.
 *
 * kueue-bestfit, kueue-leastfree: sigs.k8s.io/kueue v0.17.0,
 * pkg/cache/scheduler/tas_flavor_snapshot.go (findTopologyAssignment,
 * findLevelWithFitDomains, updateCountsToMinimumGeneric, sortedDomains,
 * findBestFitDomainBy), and KEP-2724 (keps/2724-topology-aware-scheduling,
 * "Computing the assignment"). The levels are the network levels then
 * kubernetes.io/hostname; a domain is a path of values from the top (Kueue's
 * levelValues), its state the pods that fit in it. The request is
 * podset-preferred-topology at the finest network level. From that level
 * upwards, the first level where one domain holds the whole gang: BestFit
 * sorts the level's domains by state descending (ties: levelValues
 * ascending) and takes the first of the smallest states that still fit;
 * LeastFreeCapacity sorts ascending and takes the first that fits. At the top
 * level with no domain holding it, domains are taken greedily in that order
 * (BestFit choosing the tightest fit for the last). Then down level by level:
 * the chosen domains' children, sorted the same way, taken greedily until the
 * count is reached, BestFit again choosing the last as the tightest fit. The
 * leaves are nodes with a pod count each. tests/peers/kueue/ runs v0.17.0's
 * own code on random clusters and compares (BestFit with a preferred level;
 * LeastFreeCapacity as v0.17.0 still runs it, unconstrained, hostname only).
 *
 * kai: NVIDIA/KAI-Scheduler docs/topology/README.md ("Scheduling
 * Strategy", commit d6c52d1) and pkg/scheduler/plugins/topology/
 * (job_filtering.go getJobAllocatableDomains and
 * calculateRelevantDomainLevels, node_scoring.go calculateNodeScores,
 * topology_plugin.go isNodePartOfTopology). A node lacking a label of any
 * level is not in the topology. With a preferred level (the finest network
 * level) and no required one, the relevant levels run from the preferred
 * level up to the root; the first level with a domain whose allocatable
 * pods hold the gang wins, and there, bin-packing, the domain with the least
 * available relative to the request: the fewest allocatable pods (ties:
 * levelValues; the code takes the level's domains from a Go map, in no
 * defined order). Inside it, nodes are scored by the order of their
 * preferred-level domain, the one with the most allocatable pods first (the
 * document's "more available resources ... are prioritized", so the gang
 * crowds into as few of them as it can; an earlier sortTree sorted the other
 * way), score floor((n - i) / n * 10), then by KAI's default GPU placement,
 * binpack (fewest free GPUs first); each member goes to the best node that
 * still takes one.
 *
 * kube-tas: KEP-5732 (kubernetes/enhancements
 * keps/sig-scheduling/5732-topology-aware-workload-scheduling): a
 * TopologyConstraint names one label key; the TopologyPlacementGenerator
 * makes one Placement per distinct value of it (here: the finest network
 * level's value, gang_domain_of), the pods are scheduled pod by pod inside
 * each (the default algorithm: kube-scheduler's default NodeResourcesFit
 * score, LeastAllocated, here on GPUs), a Placement is feasible when every
 * member fits, and the feasible ones are scored by NodeResourcesFit's
 * MostAllocated (the placement's GPUs in use after it, over its GPUs: the
 * tightest fit); the highest wins, ties to the first value in label order.
 * There is no fallback to a coarser key (the KEP leaves prioritized
 * placements to a later KEP), and PercentageOfPlacementsToScore (beta) is not
 * modelled: every placement is scored.
 */
#include "extender/simulate_gangs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "extender/simulate_gangs_internal.h"

/* kube-tas keys on the finest level the nodes carry; kube-tas:LEVEL on
 * that level of the run's levels, named by gang_default_levels' order. */
const char *const sim_gang_planner_names[] = {
	"kueue-bestfit", "kueue-leastfree", "kai", "kube-tas", "kube-tas:zone",
	"kube-tas:datacenter", "kube-tas:spine", "kube-tas:block", "kube-tas:clique", NULL,
};

/* Names for placement_check_request's refusal texts, which nothing reads
 * here; one per resource index the request may carry. */
static const char *const resource_names[CACHE_MAX_GPU_RESOURCES + 1] = {
	"nvidia.com/gpu", "nvidia.com/gpu", "nvidia.com/gpu", "nvidia.com/gpu",
	"nvidia.com/gpu", "nvidia.com/gpu", "nvidia.com/gpu", "nvidia.com/gpu", NULL,
};

/* One member's devices on <v> from <mask>: the chooser's, else troupe's.
 * A set that is not exactly k free devices counts as none. */
static int pick_set(const struct gp *g, const struct cache_node_view *v, uint64_t mask,
		    uint64_t *set)
{
	struct placement_choice ch;
	uint64_t s;

	if ((unsigned)__builtin_popcountll(mask) < g->k)
		return -ENOSPC;
	if (g->chooser)
		s = g->chooser(v, mask, g->k, g->rng);
	else if (placement_node_choose(v, g->req->demand.gpu_resource, mask, g->k, &g->req->policy, &ch) == 0)
		s = ch.set;
	else
		return -ENOSPC;
	if ((unsigned)__builtin_popcountll(s) != g->k || (s & ~mask))
		return -ENOSPC;
	*set = s;
	return 0;
}

/* Members <v> takes alone. A baseline chooser takes any k free devices (it
 * ignores the pod's policy), so its count is free / k without drawing from
 * the run's random stream; troupe's chooser is asked set after set. */
static unsigned capacity(const struct gp *g, const struct cache_node_view *v)
{
	uint64_t mask = cache_view_free_mask(v), set;
	unsigned n = 0;

	if (g->chooser)
		return cache_view_free_gpus(v) / g->k;
	while (n < 64 && pick_set(g, v, mask, &set) == 0) {
		mask &= ~set;
		n++;
	}
	return n;
}

static int cand_cmp(const void *a, const void *b, void *ctx)
{
	const struct cand *x = a, *y = b;
	unsigned levels = *(const unsigned *)ctx;

	for (unsigned l = 0; l < levels; l++) {
		int c = strcmp(x->val[l], y->val[l]);

		if (c)
			return c;
	}
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The candidates and the network levels they carry, sorted in tree order. */
static int collect(struct gp *g, unsigned n)
{
	bool present[GANG_MAX_LEVELS] = { false };
	unsigned levels;

	g->c = calloc(n ? n : 1, sizeof(*g->c));
	if (!g->c)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		struct placement_fit fit;
		struct cand *c = &g->c[g->nc];

		if (placement_check_request(&g->views[i], g->req, resource_names, &fit) !=
		    PLACEMENT_FITS)
			continue;
		c->idx = i;
		c->cap = capacity(g, &g->views[i]);
		if (!c->cap)
			continue;
		c->free = cache_view_free_gpus(&g->views[i]);
		c->alloc = g->views[i].node->gpu_allocatable;
		for (unsigned l = 0; l < g->levels->n && l < GANG_MAX_LEVELS; l++)
			if (gang_domain_of(g->views[i].node, g->levels, l))
				present[l] = true;
		g->nc++;
	}
	for (unsigned l = 0; l < g->levels->n && l < GANG_MAX_LEVELS; l++)
		if (present[l])
			g->lv[g->nlv++] = l;
	for (unsigned i = 0; i < g->nc; i++) {
		struct cand *c = &g->c[i];

		c->all_labels = true;
		for (unsigned t = 0; t < g->nlv; t++) {
			const char *d = gang_domain_of(g->views[c->idx].node, g->levels, g->lv[t]);

			c->val[t] = d ? d : "";
			c->all_labels &= d != NULL;
		}
		c->val[g->nlv] = g->views[c->idx].node->name;
	}
	levels = g->nlv + 1;
	qsort_r(g->c, g->nc, sizeof(*g->c), cand_cmp, &levels);
	return 0;
}

/* The slots, from (candidate, members) pairs (simulate_gangs_internal.h). */
int sim_gang__assign(struct gp *g, const unsigned *cand, const unsigned *count, unsigned n_pairs,
		     struct gang_plan *out)
{
	unsigned at = 0;
	int ret = -ENOSPC;

	/* calloc, as gang_plan_fini frees it (the gang planner's own way). */
	out->slots = calloc(g->members, sizeof(*out->slots));
	if (!out->slots)
		return -ENOMEM;
	for (unsigned p = 0; p < n_pairs; p++) {
		const struct cand *c = &g->c[cand[p]];
		const struct cache_node_view *v = &g->views[c->idx];
		uint64_t mask = cache_view_free_mask(v), set;

		for (unsigned m = 0; m < count[p]; m++) {
			if (at == g->members || pick_set(g, v, mask, &set) < 0)
				goto out;
			mask &= ~set;
			out->slots[at++] = (struct gang_slot){ .node = c->idx, .devices = set };
		}
		out->nodes_used += count[p] > 0;
	}
	if (at != g->members)
		goto out;
	out->n_slots = at;
	ret = 0;
out:
	if (ret < 0)
		gang_plan_fini(out);
	return ret;
}

/* The plan's common domain, told the way troupe's planner tells it: the
 * finest level of <levels> where every member's node has one same value. */
static void plan_domain(const struct gp *g, struct gang_plan *out)
{
	out->level = -1;
	out->domain[0] = '\0';
	for (int l = (int)g->levels->n - 1; l >= 0; l--) {
		const char *d0 = gang_domain_of(g->views[out->slots[0].node].node, g->levels,
						(unsigned)l);
		bool same = d0 != NULL;

		for (unsigned i = 1; i < out->n_slots && same; i++) {
			const char *d = gang_domain_of(g->views[out->slots[i].node].node,
						       g->levels, (unsigned)l);

			same = d && strcmp(d, d0) == 0;
		}
		if (same) {
			out->level = l;
			snprintf(out->domain, sizeof(out->domain), "%s", d0);
			return;
		}
	}
}

/* ---- kube-scheduler (KEP-5732) ------------------------------------------------ */

struct placement {
	const char *value;              /* the label's value */
	unsigned lo, hi;                /* its candidates, a run of order[] */
	uint64_t alloc, used;           /* GPUs of all its nodes; in use now */
};

static int by_value(const void *a, const void *b, void *ctx)
{
	const struct gp *g = ctx;
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b, f = g->key_tree;
	int c = strcmp(g->c[x].val[f], g->c[y].val[f]);

	return c ? c : x < y ? -1 : x > y;
}

/* Schedule the members pod by pod inside placement <p>: each to the node
 * LeastAllocated scores highest, (free after) / allocatable, ties to the
 * first. <cnt> (per candidate, zero on entry) receives the members each node
 * gets. Whether every member fits. */
static bool place_in(const struct gp *g, const unsigned *order, const struct placement *p,
		     unsigned *cnt)
{
	for (unsigned m = 0; m < g->members; m++) {
		const struct cand *best = NULL;
		unsigned bi = 0;

		for (unsigned o = p->lo; o < p->hi; o++) {
			const struct cand *c = &g->c[order[o]];
			uint64_t after, best_after;

			if (cnt[order[o]] >= c->cap)
				continue;
			after = c->free - (cnt[order[o]] + 1) * g->k;
			best_after = best ? best->free - (cnt[bi] + 1) * g->k : 0;
			if (!best || after * best->alloc > best_after * c->alloc) {
				best = c;
				bi = order[o];
			}
		}
		if (!best)
			return false;
		cnt[bi]++;
	}
	return true;
}

static int plan_kube_tas(struct gp *g, struct gang_plan *out)
{
	unsigned *order = NULL, *cnt = NULL, *pc = NULL, *pn = NULL, no = 0, np = 0, f;
	struct placement *pl = NULL, *best = NULL;
	uint64_t best_num = 0, best_den = 1;
	struct strmap index;
	int ret = -ENOMEM;

	strmap_init(&index);
	ret = -ENOSPC;
	if (!g->nlv || !g->nc)
		goto out;
	g->key_tree = g->nlv;
	for (unsigned t = 0; t < g->nlv; t++)
		if (g->key_level < 0 ? t == g->nlv - 1 : g->lv[t] == (unsigned)g->key_level)
			g->key_tree = t;
	if (g->key_tree == g->nlv)
		goto out;       /* no candidate carries the key */
	f = g->key_tree;
	ret = -ENOMEM;
	order = calloc(g->nc, sizeof(*order));
	cnt = calloc(g->nc, sizeof(*cnt));
	pc = calloc(g->nc, sizeof(*pc));
	pn = calloc(g->nc, sizeof(*pn));
	pl = calloc(g->nc, sizeof(*pl));
	if (!order || !cnt || !pc || !pn || !pl)
		goto out;
	/* One placement per value of the key; nodes without it are in none. */
	for (unsigned i = 0; i < g->nc; i++)
		if (g->c[i].val[f][0])
			order[no++] = i;
	qsort_r(order, no, sizeof(*order), by_value, g);
	for (unsigned o = 0; o < no; o++) {
		if (o == 0 || strcmp(g->c[order[o]].val[f], pl[np - 1].value) != 0) {
			if (np)
				pl[np - 1].hi = o;
			pl[np++] = (struct placement){ .value = g->c[order[o]].val[f], .lo = o };
			if (strmap_put(&index, pl[np - 1].value, strlen(pl[np - 1].value),
				       &pl[np - 1], NULL) < 0)
				goto out;
		}
	}
	if (np)
		pl[np - 1].hi = no;
	/* MostAllocated counts every node of the placement, the full and the
	 * refused ones too: a nearly full rack is the tight fit. */
	for (unsigned i = 0; i < g->nviews; i++) {
		const struct cache_node *node = g->views[i].node;
		const char *d;
		struct placement *p;

		if (!cache_node_offers(node, g->req->demand.gpu_resource) || !node->gpu_allocatable)
			continue;
		d = gang_domain_of(node, g->levels, g->lv[f]);
		if (!d || !(p = strmap_get(&index, d, strlen(d))))
			continue;
		p->alloc += node->gpu_allocatable;
		p->used += node->gpu_allocatable - cache_view_free_gpus(&g->views[i]);
	}
	for (unsigned p = 0; p < np; p++) {
		uint64_t num = pl[p].used + (uint64_t)g->members * g->k, den = pl[p].alloc;
		bool fits;

		for (unsigned o = pl[p].lo; o < pl[p].hi; o++)
			cnt[order[o]] = 0;
		fits = place_in(g, order, &pl[p], cnt);
		if (fits && den && (!best || num * best_den > best_num * den)) {
			best = &pl[p];
			best_num = num;
			best_den = den;
		}
	}
	ret = -ENOSPC;
	if (!best)
		goto out;
	memset(cnt, 0, g->nc * sizeof(*cnt));
	place_in(g, order, best, cnt);
	np = 0;
	for (unsigned o = best->lo; o < best->hi; o++)
		if (cnt[order[o]]) {
			pc[np] = order[o];
			pn[np++] = cnt[order[o]];
		}
	ret = sim_gang__assign(g, pc, pn, np, out);
out:
	strmap_fini(&index);
	free(order);
	free(cnt);
	free(pc);
	free(pn);
	free(pl);
	return ret;
}

/* ---- The entry points --------------------------------------------------------- */

enum planner { KUEUE_BESTFIT, KUEUE_LEASTFREE, KAI, KUBE_TAS };

/* <key_level>: kube-tas's key, an index in the levels (-1: the finest). */
static int plan(enum planner which, int key_level, const struct cache_node_view *views,
		unsigned n, unsigned members, const struct placement_request *req,
		const struct gang_levels *levels, sim_choose_fn chooser, uint64_t *rng,
		struct gang_plan *out)
{
	struct gp g = {
		.views = views, .nviews = n, .req = req, .chooser = chooser, .rng = rng,
		.members = members, .k = req->demand.gpus, .key_level = key_level,
		.levels = levels && levels->n ? levels : &gang_default_levels,
	};
	unsigned long total = 0;
	int ret;

	memset(out, 0, sizeof(*out));
	out->level = -1;
	if (!members || !g.k || g.k > 64)
		return -EINVAL;
	if ((ret = collect(&g, n)) < 0)
		goto out;
	for (unsigned i = 0; i < g.nc; i++)
		total += g.c[i].cap;
	ret = -ENOSPC;
	if (total < members)
		goto out;
	switch (which) {
	case KUEUE_BESTFIT:
		ret = sim_gang__plan_kueue(&g, true, out);
		break;
	case KUEUE_LEASTFREE:
		ret = sim_gang__plan_kueue(&g, false, out);
		break;
	case KAI:
		ret = sim_gang__plan_kai(&g, out);
		break;
	case KUBE_TAS:
		ret = plan_kube_tas(&g, out);
		break;
	}
	if (ret == 0)
		plan_domain(&g, out);
out:
	if (ret < 0)
		gang_plan_fini(out);
	free(g.c);
	return ret;
}

static int kueue_bestfit(const struct cache_node_view *views, unsigned n, unsigned members,
			 const struct placement_request *req, const struct gang_levels *levels,
			 sim_choose_fn chooser, uint64_t *rng, struct gang_plan *out)
{
	return plan(KUEUE_BESTFIT, -1, views, n, members, req, levels, chooser, rng, out);
}

static int kueue_leastfree(const struct cache_node_view *views, unsigned n, unsigned members,
			   const struct placement_request *req, const struct gang_levels *levels,
			   sim_choose_fn chooser, uint64_t *rng, struct gang_plan *out)
{
	return plan(KUEUE_LEASTFREE, -1, views, n, members, req, levels, chooser, rng, out);
}

static int kai(const struct cache_node_view *views, unsigned n, unsigned members,
	       const struct placement_request *req, const struct gang_levels *levels,
	       sim_choose_fn chooser, uint64_t *rng, struct gang_plan *out)
{
	return plan(KAI, -1, views, n, members, req, levels, chooser, rng, out);
}

static int kube_tas(const struct cache_node_view *views, unsigned n, unsigned members,
		    const struct placement_request *req, const struct gang_levels *levels,
		    sim_choose_fn chooser, uint64_t *rng, struct gang_plan *out)
{
	return plan(KUBE_TAS, -1, views, n, members, req, levels, chooser, rng, out);
}

/* kube-tas with the key at level <L> of the run's levels. */
#define KUBE_TAS_AT(fn, L)                                                                      \
	static int fn(const struct cache_node_view *views, unsigned n, unsigned members,        \
		      const struct placement_request *req, const struct gang_levels *levels,    \
		      sim_choose_fn chooser, uint64_t *rng, struct gang_plan *out)              \
	{                                                                                       \
		return plan(KUBE_TAS, L, views, n, members, req, levels, chooser, rng, out);    \
	}
KUBE_TAS_AT(kube_tas_0, 0)
KUBE_TAS_AT(kube_tas_1, 1)
KUBE_TAS_AT(kube_tas_2, 2)
KUBE_TAS_AT(kube_tas_3, 3)
KUBE_TAS_AT(kube_tas_4, 4)

sim_gang_fn sim_gang_planner_find(const char *name)
{
	static const sim_gang_fn fns[] = { kueue_bestfit, kueue_leastfree, kai, kube_tas,
					   kube_tas_0, kube_tas_1, kube_tas_2, kube_tas_3,
					   kube_tas_4 };

	for (size_t i = 0; name && sim_gang_planner_names[i]; i++)
		if (strcmp(sim_gang_planner_names[i], name) == 0)
			return fns[i];
	return NULL;
}
