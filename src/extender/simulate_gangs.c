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
 * leaves are nodes with a pod count each.
 *
 * kai: NVIDIA/KAI-Scheduler pkg/scheduler/plugins/topology/ (job_filtering.go
 * getJobAllocatableDomains and calculateRelevantDomainLevels; sortTree and
 * node_scoring.go calculateNodeScores), and docs/topology. A node lacking a
 * label of any level is not in the topology (isNodePartOfTopology). With a
 * preferred level (the finest network level) and no required one, the
 * relevant levels run from the preferred level up to the root; the first
 * level with a domain whose allocatable pods hold the gang wins. KAI returns
 * that level's fitting domains from a Go map, so their order is not defined;
 * this model bin-packs: the fitting domain with the fewest allocatable pods
 * (ties: levelValues). Inside it, nodes are scored by the order of their
 * preferred-level domain (sortTree: ascending allocatable pods, so the
 * fullest first; score floor((n - i) / n * 10)), then by KAI's default GPU
 * placement, binpack (fewest free GPUs first); each member goes to the best
 * node that still takes one.
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

const char *const sim_gang_planner_names[] = {
	"kueue-bestfit", "kueue-leastfree", "kai", "kube-tas", NULL,
};

/* The network levels (at most GANG_MAX_LEVELS) and the hostname level. */
enum { TREE_MAX = GANG_MAX_LEVELS + 1 };

struct cand {
	unsigned idx;                   /* into the views */
	unsigned cap;                   /* members it takes alone (at most 64) */
	unsigned free;                  /* free GPUs */
	unsigned alloc;                 /* allocatable GPUs */
	const char *val[TREE_MAX];      /* per tree level; the last is the node's name */
	bool all_labels;                /* a non-empty label at every network level */
};

/* One call's state. */
struct gp {
	const struct cache_node_view *views;
	unsigned nviews;
	const struct placement_request *req;
	const struct gang_levels *levels;
	sim_choose_fn chooser;
	uint64_t *rng;
	unsigned members, k;
	struct cand *c;                 /* candidates, sorted by val (tree order) */
	unsigned nc;
	unsigned lv[GANG_MAX_LEVELS];   /* network tree level -> index in levels */
	unsigned nlv;                   /* network levels; tree levels are nlv + 1 */
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
	else if (placement_node_choose(v, mask, g->k, &g->req->policy, &ch) == 0)
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

/* The slots, from (candidate, members) pairs: each member's devices chosen
 * one after another on its node. -ENOSPC when a node gives fewer sets than it
 * counted (a chooser that fails), nothing kept. */
static int assign(struct gp *g, const unsigned *cand, const unsigned *count, unsigned n_pairs,
		  struct gang_plan *out)
{
	unsigned at = 0;

	out->slots = calloc(g->members, sizeof(*out->slots));
	if (!out->slots)
		return -ENOMEM;
	for (unsigned p = 0; p < n_pairs; p++) {
		const struct cand *c = &g->c[cand[p]];
		const struct cache_node_view *v = &g->views[c->idx];
		uint64_t mask = cache_view_free_mask(v), set;

		for (unsigned m = 0; m < count[p]; m++) {
			if (at == g->members || pick_set(g, v, mask, &set) < 0)
				goto refused;
			mask &= ~set;
			out->slots[at++] = (struct gang_slot){ .node = c->idx, .devices = set };
		}
		out->nodes_used += count[p] > 0;
	}
	if (at != g->members)
		goto refused;
	out->n_slots = at;
	return 0;
refused:
	gang_plan_fini(out);
	return -ENOSPC;
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

/* ---- The domain tree (Kueue, KAI) -------------------------------------------- */

/* A domain: a run [lo, hi) of the sorted candidates sharing the values of
 * tree levels 0..level; <state> the pods that fit in it (Kueue's domain.state:
 * a capacity, then the pods assigned). */
struct dom {
	unsigned lo, hi, level;
	unsigned child;                 /* its first child, in the next level's array */
	long state;
};

struct tree {
	struct dom *all;
	struct dom *at[TREE_MAX];       /* each tree level's domains, in tree order */
	unsigned n[TREE_MAX];
	unsigned levels;
};

/* Build the tree over the sorted candidates; a candidate's capacity is
 * capped at <cap_max> (KAI counts up to the gang's size; Kueue does not cap). */
static int tree_build(const struct gp *g, struct tree *t, unsigned cap_max)
{
	unsigned total = 0, *diff = NULL;
	long *prefix = NULL;
	int ret = -ENOMEM;

	memset(t, 0, sizeof(*t));
	t->levels = g->nlv + 1;
	diff = calloc(g->nc + 1, sizeof(*diff));
	prefix = calloc(g->nc + 1, sizeof(*prefix));
	if (!diff || !prefix)
		goto out;
	/* diff[i]: the first level where candidate i's path leaves i - 1's. */
	for (unsigned i = 1; i < g->nc; i++) {
		unsigned l = 0;

		while (l + 1 < t->levels && strcmp(g->c[i].val[l], g->c[i - 1].val[l]) == 0)
			l++;
		diff[i] = l;
	}
	for (unsigned i = 0; i < g->nc; i++)
		prefix[i + 1] = prefix[i] + (g->c[i].cap < cap_max ? g->c[i].cap : cap_max);
	for (unsigned l = 0; l < t->levels; l++) {
		t->n[l] = g->nc ? 1 : 0;
		for (unsigned i = 1; i < g->nc; i++)
			t->n[l] += diff[i] <= l;
		total += t->n[l];
	}
	t->all = calloc(total ? total : 1, sizeof(*t->all));
	if (!t->all)
		goto out;
	for (unsigned l = 0, used = 0; l < t->levels; used += t->n[l], l++) {
		unsigned d = 0;

		t->at[l] = t->all + used;
		for (unsigned i = 0; i < g->nc; i++) {
			if (i > 0 && diff[i] > l)
				continue;
			if (d > 0)
				t->at[l][d - 1].hi = i;
			t->at[l][d++] = (struct dom){ .lo = i, .level = l };
		}
		if (d > 0)
			t->at[l][d - 1].hi = g->nc;
		for (unsigned j = 0; j < d; j++)
			t->at[l][j].state = prefix[t->at[l][j].hi] - prefix[t->at[l][j].lo];
	}
	/* Children: a domain's first child is the next level's domain starting
	 * where it starts (levels nest, so one walk finds them all). */
	for (unsigned l = 0; l + 1 < t->levels; l++)
		for (unsigned j = 0, c = 0; j < t->n[l]; j++) {
			while (t->at[l + 1][c].lo < t->at[l][j].lo)
				c++;
			t->at[l][j].child = c;
		}
	ret = 0;
out:
	free(diff);
	free(prefix);
	return ret;
}

static void tree_fini(struct tree *t)
{
	free(t->all);
	memset(t, 0, sizeof(*t));
}

/* ---- Kueue ------------------------------------------------------------------- */

/* sortedDomains: state descending (BestFit) or ascending (LeastFreeCapacity),
 * ties by levelValues ascending, which is tree order (lo). */
static int dom_desc(const void *a, const void *b)
{
	const struct dom *x = *(const struct dom *const *)a, *y = *(const struct dom *const *)b;

	if (x->state != y->state)
		return x->state > y->state ? -1 : 1;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int dom_asc(const void *a, const void *b)
{
	const struct dom *x = *(const struct dom *const *)a, *y = *(const struct dom *const *)b;

	if (x->state != y->state)
		return x->state < y->state ? -1 : 1;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int dom_lo(const void *a, const void *b)
{
	const struct dom *x = *(const struct dom *const *)a, *y = *(const struct dom *const *)b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* findBestFitDomainBy: the first of <d> with the smallest state that still
 * holds <need>; d[0] when none does. */
static struct dom *best_fit(struct dom **d, unsigned n, long need)
{
	struct dom *best = d[0];

	for (unsigned i = 0; i < n; i++)
		if (d[i]->state >= need && d[i]->state < best->state)
			best = d[i];
	return best;
}

/* updateCountsToMinimumGeneric for pods (no leader, slices of one): take
 * <d> in order until <count> is reached, the last the tightest fit under
 * BestFit; each taken domain's state becomes the pods it gets. Writes the
 * taken ones to <out> and returns how many, 0 when they fall short. */
static unsigned take_min(struct dom **d, unsigned n, long count, bool bestfit, struct dom **out)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++) {
		struct dom *x = d[i];

		if (bestfit && x->state >= count)
			x = best_fit(d + i, n - i, count);
		out[k++] = x;
		if (x->state >= count) {
			x->state = count;
			return k;
		}
		count -= x->state;
	}
	return 0;
}

/* findLevelWithFitDomains for a preferred request, from tree level <level>
 * upwards: the domains to fill (in <out>, returning how many; 0: none can) and
 * the level they are at. */
static unsigned fit_level(struct tree *t, int level, long count, bool bestfit, struct dom **tmp,
			  struct dom **out, unsigned *at)
{
	for (; level >= 0; level--) {
		unsigned n = t->n[level];

		for (unsigned j = 0; j < n; j++)
			tmp[j] = &t->at[level][j];
		qsort(tmp, n, sizeof(*tmp), bestfit ? dom_desc : dom_asc);
		*at = (unsigned)level;
		if (!bestfit) {
			for (unsigned j = 0; j < n; j++)
				if (tmp[j]->state >= count) {
					out[0] = tmp[j];
					return 1;
				}
		} else if (tmp[0]->state >= count) {
			out[0] = best_fit(tmp, n, count);
			return 1;
		}
		if (level == 0) {
			/* No top-level domain holds it: several, greedily. */
			unsigned k = 0;
			long rem = count;

			for (unsigned j = 0; rem > 0 && j < n; j++) {
				struct dom *x = tmp[j];

				if (bestfit && x->state >= rem)
					x = best_fit(tmp + j, n - j, rem);
				out[k++] = x;
				rem -= x->state;
			}
			return rem > 0 ? 0 : k;
		}
	}
	return 0;
}

static int plan_kueue(struct gp *g, bool bestfit, struct gang_plan *out)
{
	struct dom **tmp = NULL, **cur = NULL, **next = NULL;
	unsigned *pc = NULL, *cnt = NULL, ncur, at = 0;
	struct tree t;
	int ret;

	if ((ret = tree_build(g, &t, 64)) < 0)
		return ret;
	ret = -ENOMEM;
	tmp = calloc(g->nc + 1, sizeof(*tmp));
	cur = calloc(g->nc + 1, sizeof(*cur));
	next = calloc(g->nc + 1, sizeof(*next));
	pc = calloc(g->nc + 1, sizeof(*pc));
	cnt = calloc(g->nc + 1, sizeof(*cnt));
	if (!tmp || !cur || !next || !pc || !cnt)
		goto out;
	ret = -ENOSPC;
	if (!g->nc)
		goto out;
	/* Phase 2a from the preferred level: the finest network level (the
	 * hostname level when the nodes carry none). */
	ncur = fit_level(&t, t.levels >= 2 ? (int)t.levels - 2 : 0, g->members, bestfit, tmp, cur,
			 &at);
	if (!ncur)
		goto out;
	memcpy(tmp, cur, ncur * sizeof(*cur));
	if (!(ncur = take_min(tmp, ncur, g->members, bestfit, cur)))
		goto out;
	/* Phase 2b: down a level at a time over the chosen domains' children. */
	for (unsigned l = at; l + 1 < t.levels; l++) {
		unsigned n = 0;

		for (unsigned j = 0; j < ncur; j++)
			for (unsigned c = cur[j]->child;
			     c < t.n[l + 1] && t.at[l + 1][c].lo < cur[j]->hi; c++)
				tmp[n++] = &t.at[l + 1][c];
		qsort(tmp, n, sizeof(*tmp), bestfit ? dom_desc : dom_asc);
		if (!(ncur = take_min(tmp, n, g->members, bestfit, next)))
			goto out;
		memcpy(cur, next, ncur * sizeof(*cur));
	}
	/* The leaves are nodes; buildAssignment lists them in levelValues order. */
	qsort(cur, ncur, sizeof(*cur), dom_lo);
	for (unsigned j = 0; j < ncur; j++) {
		pc[j] = cur[j]->lo;
		cnt[j] = (unsigned)cur[j]->state;
	}
	ret = assign(g, pc, cnt, ncur, out);
out:
	free(tmp);
	free(cur);
	free(next);
	free(pc);
	free(cnt);
	tree_fini(&t);
	return ret;
}

/* ---- KAI --------------------------------------------------------------------- */

static int plan_kai(struct gp *g, struct gang_plan *out)
{
	unsigned *pc = NULL, *cnt = NULL, *rank = NULL, lo = 0, hi = 0, nsub = 0;
	struct dom *chosen = NULL, **sub = NULL;
	unsigned pref = g->nlv ? g->nlv - 1 : 0;
	struct tree t = { 0 };
	unsigned kept = 0;
	long total = 0;
	int ret;

	/* Only nodes with every level's label are in KAI's tree. */
	for (unsigned i = 0; i < g->nc; i++)
		if (g->c[i].all_labels)
			g->c[kept++] = g->c[i];
	g->nc = kept;
	if ((ret = tree_build(g, &t, g->members)) < 0)
		return ret;
	ret = -ENOMEM;
	pc = calloc(g->nc + 1, sizeof(*pc));
	cnt = calloc(g->nc + 1, sizeof(*cnt));
	rank = calloc(g->nc + 1, sizeof(*rank));
	sub = calloc(g->nc + 1, sizeof(*sub));
	if (!pc || !cnt || !rank || !sub)
		goto out;
	/* From the preferred level up: the first level with a fitting domain,
	 * and there the fullest (fewest allocatable pods) that fits. */
	for (int l = g->nlv ? (int)pref : -1; l >= 0 && !chosen; l--)
		for (unsigned j = 0; j < t.n[l]; j++) {
			struct dom *d = &t.at[l][j];

			if (d->state >= (long)g->members && (!chosen || d->state < chosen->state))
				chosen = d;
		}
	for (unsigned i = 0; i < g->nc; i++)
		total += g->c[i].cap < g->members ? g->c[i].cap : g->members;
	ret = -ENOSPC;
	if (chosen) {
		lo = chosen->lo;
		hi = chosen->hi;
	} else if (total >= (long)g->members) {
		hi = g->nc;     /* the root: the whole topology */
	} else {
		goto out;
	}
	/* The preferred-level domains inside, fullest first (sortTree is a
	 * stable ascending sort by allocatable pods), each node scored by its
	 * domain's place as calculateNodeScores does. */
	if (g->nlv)
		for (unsigned j = 0; j < t.n[pref]; j++)
			if (t.at[pref][j].lo >= lo && t.at[pref][j].hi <= hi)
				sub[nsub++] = &t.at[pref][j];
	qsort(sub, nsub, sizeof(*sub), dom_asc);
	for (unsigned s = 0; s < nsub; s++)
		for (unsigned i = sub[s]->lo; i < sub[s]->hi; i++)
			rank[i] = (unsigned)(((nsub - s) * 10) / nsub);
	/* Each member to the best node that still takes one: the topology score,
	 * then binpack (fewest free GPUs), then tree order. */
	for (unsigned m = 0; m < g->members; m++) {
		unsigned best = hi;

		for (unsigned i = lo; i < hi; i++) {
			if (cnt[i] >= g->c[i].cap)
				continue;
			if (best == hi || rank[i] > rank[best] ||
			    (rank[i] == rank[best] &&
			     g->c[i].free - cnt[i] * g->k < g->c[best].free - cnt[best] * g->k))
				best = i;
		}
		if (best == hi)
			goto out;
		cnt[best]++;
	}
	kept = 0;
	for (unsigned i = lo; i < hi; i++)
		if (cnt[i]) {
			pc[kept] = i;
			cnt[kept++] = cnt[i];
		}
	ret = assign(g, pc, cnt, kept, out);
out:
	free(pc);
	free(cnt);
	free(rank);
	free(sub);
	tree_fini(&t);
	return ret;
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
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b, f = g->nlv - 1;
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
	if (!g->nlv || !g->nc) {
		ret = -ENOSPC;
		goto out;
	}
	f = g->nlv - 1;
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

		if (node->gpu_resource != g->req->demand.gpu_resource || !node->gpu_allocatable)
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
	ret = assign(g, pc, pn, np, out);
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

static int plan(enum planner which, const struct cache_node_view *views, unsigned n,
		unsigned members, const struct placement_request *req,
		const struct gang_levels *levels, sim_choose_fn chooser, uint64_t *rng,
		struct gang_plan *out)
{
	struct gp g = {
		.views = views, .nviews = n, .req = req, .chooser = chooser, .rng = rng,
		.members = members, .k = req->demand.gpus,
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
		ret = plan_kueue(&g, true, out);
		break;
	case KUEUE_LEASTFREE:
		ret = plan_kueue(&g, false, out);
		break;
	case KAI:
		ret = plan_kai(&g, out);
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
	return plan(KUEUE_BESTFIT, views, n, members, req, levels, chooser, rng, out);
}

static int kueue_leastfree(const struct cache_node_view *views, unsigned n, unsigned members,
			   const struct placement_request *req, const struct gang_levels *levels,
			   sim_choose_fn chooser, uint64_t *rng, struct gang_plan *out)
{
	return plan(KUEUE_LEASTFREE, views, n, members, req, levels, chooser, rng, out);
}

static int kai(const struct cache_node_view *views, unsigned n, unsigned members,
	       const struct placement_request *req, const struct gang_levels *levels,
	       sim_choose_fn chooser, uint64_t *rng, struct gang_plan *out)
{
	return plan(KAI, views, n, members, req, levels, chooser, rng, out);
}

static int kube_tas(const struct cache_node_view *views, unsigned n, unsigned members,
		    const struct placement_request *req, const struct gang_levels *levels,
		    sim_choose_fn chooser, uint64_t *rng, struct gang_plan *out)
{
	return plan(KUBE_TAS, views, n, members, req, levels, chooser, rng, out);
}

sim_gang_fn sim_gang_planner_find(const char *name)
{
	static const sim_gang_fn fns[] = { kueue_bestfit, kueue_leastfree, kai, kube_tas };

	for (size_t i = 0; name && sim_gang_planner_names[i]; i++)
		if (strcmp(sim_gang_planner_names[i], name) == 0)
			return fns[i];
	return NULL;
}
