/* simulate_measure: what a replay counts as it goes. Each node's part of the
 * cluster's totals (free, in use, fragmented, NVLink islands) is kept up to
 * date as pods start and end, with histograms of free counts and of the
 * largest free all-NVLink set, so that a sample or an arrival's
 * fragmentation costs nothing per node; the time integrals over the measured
 * window; the time series; and each node's finest network domain with the
 * free GPUs of each, for domain fragmentation.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "extender/simulate_internal.h"

/* Recount node <i>'s part of the totals after its usage changed. */
void sim__node_update(struct replay *r, unsigned i)
{
	const struct cache_node_view *v = &r->cur[i];
	const struct placement_topo *topo = placement_node_topo(v->node);
	struct node_stat *st = &r->ns[i], old = *st;
	unsigned f = cache_view_free_gpus(v), k = r->s->frag_gpus;

	st->free = f;
	st->used = v->node->gpu_allocatable > f ? v->node->gpu_allocatable - f : 0;
	st->frag = k ? f % k : 0;
	st->island_max = topo && topo->known ? placement_largest_island(topo,
									cache_view_free_mask(v))
					     : f > 0;
	st->island = topo && topo->known && f >= k && st->island_max >= k;
	st->empty = v->used == 0 && v->unattributed == 0;
	if (cache_node_shared(v->node)) {
		st->whole = 0;
		for (unsigned g = 0; g < v->node->gpu_physical; g++)
			st->whole += !(v->used & cache_node_gpu_slots(v->node, g));
	} else {
		st->whole = f;
	}
	r->free_of[i] = f;
	/* Free counts are at most CACHE_MAX_GPUS (a node's device mask). */
	r->free_hist[old.free]--;
	r->island_hist[old.island_max]--;
	r->free_hist[f]++;
	r->island_hist[st->island_max]++;
	if (r->node_dom[i] != UINT_MAX)
		r->dom_free[r->node_dom[i]] += f - old.free;
	r->tot_free += st->free - old.free;
	r->tot_used += st->used - old.used;
	r->tot_frag += st->frag - old.frag;
	r->islands += (unsigned)st->island - (unsigned)old.island;
	r->tot_whole += st->whole - old.whole;
	r->empty_nodes += (unsigned)st->empty - (unsigned)old.empty;
}

/* Free GPUs in finest-level domains with fewer free than the smallest
 * waiting gang asks: free GPUs no waiting gang can use inside one domain. */
static unsigned sim__stranded(const struct replay *r)
{
	unsigned sum = 0;

	if (!r->min_gang_waiting)
		return 0;
	for (unsigned d = 0; d < r->n_dom; d++)
		if (r->dom_free[d] < r->min_gang_waiting)
			sum += r->dom_free[d];
	return sum;
}

/* A measured arrival of <j>: its size's count, and for a job of single pods
 * whether the cluster was fragmented against it (sim_size_stat). */
void sim__count_arrival(struct replay *r, const struct sim_job *j)
{
	struct sim_size_stat *b = &r->out->by_size[sim_size_bucket(j->pods * j->gpus)];
	unsigned k = j->gpus, with_free = 0, with_island = 0;

	b->jobs++;
	if (j->gang >= 2 || k > CACHE_MAX_GPUS)
		return;
	for (unsigned f = k; f <= CACHE_MAX_GPUS; f++) {
		with_free += r->free_hist[f];
		with_island += r->island_hist[f];
	}
	b->frag_jobs++;
	b->node_frag += !with_free && r->tot_free >= k;
	b->topo_frag += k >= 2 && with_free && !with_island;
}

/* Fold the state that held from <from> to <to> into the integrals. */
void sim__account(struct replay *r, double from, double to)
{
	struct sim_result *o = r->out;
	double dt;

	if (to > o->t_end)
		to = o->t_end;
	if (to <= o->t_begin || to <= from)
		return;
	if (from < o->t_begin)
		from = o->t_begin;
	dt = to - from;
	o->busy_integral += dt * r->tot_used;
	o->free_integral += dt * r->tot_free;
	o->frag_integral += dt * r->tot_frag;
	o->island_integral += dt * r->islands;
	o->whole_integral += dt * r->tot_whole;
	o->empty_integral += dt * r->empty_nodes;
	o->stranded_integral += dt * sim__stranded(r);
}

int sim__sample(struct replay *r, double now)
{
	struct sim_result *o = r->out;

	if (o->n_samples && o->samples[o->n_samples - 1].t == now)
		o->n_samples--; /* one sample per instant: the state after it */
	if (o->n_samples == o->cap_samples) {
		size_t nc = o->cap_samples ? o->cap_samples * 2 : 1024;
		struct sim_sample *ns = realloc(o->samples, nc * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		o->samples = ns;
		o->cap_samples = nc;
	}
	o->samples[o->n_samples++] =
		(struct sim_sample){ now, r->tot_used, (unsigned)r->n_waiting, r->islands };
	return 0;
}

/* Each node's finest network domain: the last level of the run's levels it
 * has a label for, numbered in order of first sight. */
int sim__domains_init(struct replay *r)
{
	unsigned n = r->c->n;
	int *dom_level = malloc((n + 1) * sizeof(int));
	const char **dom_value = malloc((n + 1) * sizeof(char *));

	r->node_dom = malloc((n + 1) * sizeof(unsigned));
	r->dom_free = calloc(n + 1, sizeof(unsigned));
	if (!dom_level || !dom_value || !r->node_dom || !r->dom_free) {
		free(dom_level);
		free(dom_value);
		return -ENOMEM;
	}
	r->n_dom = 0;
	for (unsigned i = 0; i < n; i++) {
		const char *v = NULL;
		int l = (int)r->levels->n - 1;
		unsigned d;

		for (; l >= 0 && !(v = gang_domain_of(r->c->base[i].node, r->levels,
						      (unsigned)l)); l--)
			;
		r->node_dom[i] = UINT_MAX;
		if (!v)
			continue;
		for (d = 0; d < r->n_dom; d++)
			if (dom_level[d] == l && strcmp(dom_value[d], v) == 0)
				break;
		if (d == r->n_dom) {
			dom_level[d] = l;
			dom_value[d] = v;
			r->n_dom++;
		}
		r->node_dom[i] = d;
	}
	free(dom_level);
	free(dom_value);
	return 0;
}
