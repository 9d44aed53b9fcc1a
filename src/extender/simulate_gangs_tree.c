/* simulate_gangs_tree: the domain tree Kueue's and KAI's planners walk, and
 * those two planners (what they model, and their sources, is said at the top
 * of simulate_gangs.c). The candidates arrive sorted by their path of domain
 * values from the top level down to the node's name, so a domain at any
 * level is a run of them, its children the next level's runs inside it, and
 * tree order is Kueue's levelValues order, the tie-break of every sort.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "extender/simulate_gangs_internal.h"

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

int sim_gang__plan_kueue(struct gp *g, bool bestfit, struct gang_plan *out)
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
	ret = sim_gang__assign(g, pc, cnt, ncur, out);
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

int sim_gang__plan_kai(struct gp *g, struct gang_plan *out)
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
	/* The preferred-level domains inside, the most allocatable pods first
	 * (ties: tree order), each node scored by its domain's place as
	 * calculateNodeScores does. */
	if (g->nlv)
		for (unsigned j = 0; j < t.n[pref]; j++)
			if (t.at[pref][j].lo >= lo && t.at[pref][j].hi <= hi)
				sub[nsub++] = &t.at[pref][j];
	qsort(sub, nsub, sizeof(*sub), dom_desc);
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
	ret = sim_gang__assign(g, pc, cnt, kept, out);
out:
	free(pc);
	free(cnt);
	free(rank);
	free(sub);
	tree_fini(&t);
	return ret;
}
