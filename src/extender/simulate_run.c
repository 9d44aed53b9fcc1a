/* simulate_run: one replay of the trace over the cluster under one scoring
 * policy, in simulated time, and what it counts on the way.
 *
 * The cluster starts as the snapshot left it: its bound pods keep their GPUs
 * for the whole run (they have no known end). At every change the scheduler
 * walks the waiting jobs and starts every pod that fits, so a small job may
 * pass a large one that cannot start (no head-of-line blocking, as
 * kube-scheduler retries each pending pod on its own). When nothing was freed
 * since the last walk only the new arrivals are tried: the others failed
 * against the same state.
 *
 * The walk's order is the gang manager's fair order (gang_fair_precedes, the
 * daemon's one rule): the higher priority first, then the queue with the
 * lower weighted share, then the earlier arrival, then the name. The share is
 * read afresh at each step, as the daemon reads it at each admission, so a
 * start that raises a queue's share can put another queue's job before that
 * queue's next one. Jobs wait in one list per queue, each sorted by the terms
 * that do not change (within a queue the share is the same), and a step takes
 * the best of the lists' heads: a merge, not a sort per walk. With --order
 * fifo there is one list in arrival order (the trace's, ties in file order).
 *
 * The decisions are the daemon's functions. A pod on its own: every node
 * placement_check_request accepts (filter), scored by
 * placement_score_memoized with the run's policy and weights (prioritize),
 * the best winning and equal scores drawn at random (kube-scheduler's
 * selectHost), its devices from placement_node_choose under the job's
 * topology policy (bind). A gang: its <gang> first pods at once, where
 * gang_plan_make (the gang manager's planner) puts them, or not at all; the
 * pods beyond the quorum then start one by one as above.
 *
 * Departures at one instant are all applied before the scheduler walks, so a
 * job waiting on another's GPUs starts exactly when that one ends.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gang/gang.h"
#include "extender/simulate.h"

/* Trace pods ask for the first managed resource name (nvidia.com/gpu by
 * default); nodes offering another kind are never chosen. */
enum { SIM_GPU_RESOURCE = 0 };

struct departure {
	double at;
	size_t pod, job;
};

struct node_stat {
	unsigned free, used, frag;      /* free GPUs; in use; free no frag_gpus pod can use */
	unsigned island_max;            /* the largest free all-NVLink set (1 when none known) */
	bool island;                    /* a free all-NVLink set of frag_gpus */
};

/* Jobs in lists: one per queue (one with fifo), each in the order of
 * before() at equal shares. */
struct runs {
	size_t *job[SIM_MAX_QUEUES];    /* room for every job of the list */
	size_t n[SIM_MAX_QUEUES];
};

struct replay {
	const struct sim_cluster *c;
	const struct sim_trace *t;
	const struct sim_settings *s;
	const struct gang_levels *levels;
	const struct placement_score_ops *ops;
	struct sim_policy pol;
	struct sim_rank_args rank;      /* the ranker's arguments, but the views */
	struct sim_result *out;
	struct cache_node_view *cur;    /* the nodes as the run has them */
	size_t *pod_base;               /* first pod of each job in the pod arrays */
	unsigned *started;              /* pods started per job */
	bool *gang_done;
	unsigned *pod_node;
	uint64_t *pod_devices;
	struct departure *heap;
	size_t heap_len;
	/* The waiting jobs, and the arrivals since the last walk (in arrival
	 * order until it sorts them). */
	struct runs wait, fresh;
	unsigned n_lists;
	size_t n_waiting;
	unsigned queue_gpus[SIM_MAX_QUEUES];    /* GPUs each queue's pods hold */
	unsigned busy;                  /* GPUs the trace's pods hold */
	/* What each node adds to the cluster's totals, kept up to date as pods
	 * start and end, so that a sample costs nothing per node. */
	struct node_stat *ns;
	unsigned *free_of;              /* each node's free GPUs (ns[i].free), for the ranker */
	unsigned tot_free, tot_used, tot_frag, islands;
	/* Nodes by free GPUs and by largest free all-NVLink set: an arrival's
	 * fragmentation is read from them, not from every node. */
	unsigned free_hist[CACHE_MAX_GPUS + 1], island_hist[CACHE_MAX_GPUS + 1];
	/* Each node's finest network domain (an index, UINT_MAX: none) and the
	 * free GPUs of each domain; the smallest waiting gang's GPUs (0: none). */
	unsigned *node_dom, *dom_free, n_dom;
	unsigned min_gang_waiting;
	unsigned long n_refused;        /* measured or not */
	uint64_t rng;
};

static void heap_push(struct replay *r, double at, size_t pod, size_t job)
{
	size_t i = r->heap_len++;

	while (i > 0 && r->heap[(i - 1) / 2].at > at) {
		r->heap[i] = r->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	r->heap[i] = (struct departure){ at, pod, job };
}

static struct departure heap_pop(struct replay *r)
{
	struct departure top = r->heap[0], last = r->heap[--r->heap_len];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= r->heap_len)
			break;
		if (c + 1 < r->heap_len && r->heap[c + 1].at < r->heap[c].at)
			c++;
		if (r->heap[c].at >= last.at)
			break;
		r->heap[i] = r->heap[c];
		i = c;
	}
	if (r->heap_len)
		r->heap[i] = last;
	return top;
}

static struct placement_request job_request(const struct sim_job *j)
{
	return (struct placement_request){
		.demand = { .gpu_resource = SIM_GPU_RESOURCE, .gpus = j->gpus },
		.policy = j->policy,
	};
}

/* The node a pod of <j> goes to in <views> under the run's ranker, or -1. */
static int pick_node(struct replay *r, const struct cache_node_view *views,
		     const struct sim_job *j)
{
	struct placement_request req = job_request(j);
	struct sim_rank_args a = r->rank;

	a.views = views;
	a.req = &req;
	a.free_hint = views == r->cur ? r->free_of : NULL;
	return sim_pick_node(&a, &r->rng, NULL, NULL);
}

/* Recount node <i>'s part of the totals after its usage changed. */
static void node_update(struct replay *r, unsigned i)
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
}

static void pod_start(struct replay *r, size_t job, unsigned node, uint64_t devices, double now)
{
	const struct sim_job *j = &r->t->jobs[job];
	struct sim_job_result *jr = &r->out->jobs[job];
	struct cache_node_view *v = &r->cur[node];
	size_t pod = r->pod_base[job] + r->started[job];

	if (j->measured && j->gpus >= 2) {
		const struct placement_topo *topo = placement_node_topo(v->node);
		struct sim_size_stat *b = &r->out->by_size[sim_size_bucket(j->pods * j->gpus)];
		struct placement_choice c;

		r->out->pods_multi++;
		b->pods_multi++;
		if (topo && topo->known) {
			bool nv;
			double q;

			placement_measure(topo, devices, cache_view_free_mask(v), &c);
			nv = placement_link_is_nvlink(c.worst);
			q = placement_set_quality(&c, j->gpus, true);
			r->out->pods_nvlink += nv;
			r->out->quality_sum += q;
			b->pods_nvlink += nv;
			b->quality_sum += q;
		}
	}
	if (v->used & devices) {
		/* The daemon's functions handed out a device twice: a bug, never a
		 * figure to report. */
		fprintf(stderr, "troupe simulate: BUG: %s got devices %#llx of node %s, in use "
			"(%#llx)\n", j->name, (unsigned long long)devices, v->node->name,
			(unsigned long long)v->used);
		abort();
	}
	v->used |= devices;
	node_update(r, node);
	r->busy += j->gpus;
	r->queue_gpus[j->queue] += j->gpus;
	if (r->busy > r->out->peak_busy)
		r->out->peak_busy = r->busy;
	r->pod_node[pod] = node;
	r->pod_devices[pod] = devices;
	if (jr->pods)
		jr->pods[r->started[job]] = (struct sim_pod_result){ now, node, devices };
	if (r->started[job] == 0)
		jr->first_start = now;
	if (++r->started[job] == j->pods)
		jr->start = now;
	heap_push(r, now + j->duration, pod, job);
}

/* Plan the quorum of gang <j> over <views>: the run's gang planner, else the
 * gang manager's. 0 or a negative errno; gang_plan_fini after either. */
static int plan_gang(struct replay *r, const struct cache_node_view *views,
		     const struct sim_job *j, struct gang_plan *plan)
{
	struct placement_request req = job_request(j);
	char why[TROUPE_MESSAGE_BUF];

	memset(plan, 0, sizeof(*plan));
	if (r->pol.gang)
		return r->pol.gang(views, r->c->n, j->gang, &req, r->levels, r->pol.chooser,
				   &r->rng, plan);
	return gang_plan_make(views, r->c->n, j->gang, &req, r->levels, plan, why, sizeof(why));
}

/* A measured gang placed by <plan>: count it, and at each level whether its
 * members share one domain. */
static void count_gang(struct replay *r, const struct sim_job *j, const struct gang_plan *plan)
{
	struct sim_size_stat *b = &r->out->by_size[sim_size_bucket(j->pods * j->gpus)];

	b->gangs++;
	for (unsigned l = 0; l < r->levels->n && l < GANG_MAX_LEVELS; l++) {
		const char *d0 = NULL;
		bool one = plan->n_slots > 0;

		for (unsigned i = 0; i < plan->n_slots && one; i++) {
			const char *d = gang_domain_of(r->cur[plan->slots[i].node].node, r->levels, l);

			one = d && (!d0 || strcmp(d, d0) == 0);
			d0 = d0 ? d0 : d;
		}
		b->in_one[l] += one;
	}
}

/* Start what of job <job> fits now; true when every pod has started. */
static bool try_job(struct replay *r, size_t job, double now)
{
	const struct sim_job *j = &r->t->jobs[job];
	if (j->gang >= 2 && !r->gang_done[job]) {
		struct gang_plan plan;

		if (plan_gang(r, r->cur, j, &plan) < 0) {
			gang_plan_fini(&plan);
			return false;
		}
		if (j->measured)
			count_gang(r, j, &plan);
		for (unsigned i = 0; i < plan.n_slots; i++)
			pod_start(r, job, plan.slots[i].node, plan.slots[i].devices, now);
		gang_plan_fini(&plan);
		r->gang_done[job] = true;
	}
	while (r->started[job] < j->pods) {
		int n = pick_node(r, r->cur, j);
		struct placement_choice c;
		uint64_t free_mask;

		if (n < 0)
			return false;
		free_mask = cache_view_free_mask(&r->cur[n]);
		if (r->pol.chooser) {
			c.set = r->pol.chooser(&r->cur[n], free_mask, j->gpus, &r->rng);
			if ((unsigned)__builtin_popcountll(c.set) != j->gpus ||
			    (c.set & ~free_mask))
				return false;
		} else if (placement_node_choose(&r->cur[n], free_mask, j->gpus, &j->policy,
						 &c) < 0) {
			return false;
		}
		pod_start(r, job, (unsigned)n, c.set, now);
	}
	return true;
}

enum { SIM_REFUSALS_LOGGED = 10 };

/* Whether job <j> could start on the cluster as the snapshot left it; one that
 * cannot is refused, never waits. The first few refusals say why on stderr
 * (the run's first policy only: the others would repeat them). */
static bool fits_at_all(struct replay *r, const struct sim_job *j)
{
	char why[TROUPE_MESSAGE_BUF];

	if (j->gang >= 2) {
		struct gang_plan plan;
		int rc = plan_gang(r, r->c->base, j, &plan);

		gang_plan_fini(&plan);
		if (rc < 0) {
			snprintf(why, sizeof(why), "no placement of its %u members of %u GPUs, "
				 "on the cluster as the snapshot left it (%s)", j->gang, j->gpus, strerror(-rc));
			goto refused;
		}
	}
	if (pick_node(r, r->c->base, j) >= 0)
		return true;
	snprintf(why, sizeof(why), "no node could ever hold a pod of %u GPUs with topology "
		 "policy %s", j->gpus,
		 j->policy.kind == PLACEMENT_POLICY_PREFERRED ? "preferred" :
		 j->policy.kind == PLACEMENT_POLICY_NONE ? "none" : "required");
refused:
	if (r->s->log_refusals && r->n_refused < SIM_REFUSALS_LOGGED)
		fprintf(stderr, "troupe simulate: %s: refused, the cluster can never hold it: %s\n",
			j->name, why);
	else if (r->s->log_refusals && r->n_refused == SIM_REFUSALS_LOGGED)
		fprintf(stderr, "troupe simulate: more jobs refused; the report counts them\n");
	r->n_refused++;
	return false;
}

/* What a job's next step asks: a gang's quorum, or one pod. */
struct shape {
	unsigned gpus, gang;
	struct placement_policy policy;
};

enum { SHAPES_FAILED = 16 };

static struct shape next_shape(const struct replay *r, size_t job)
{
	const struct sim_job *j = &r->t->jobs[job];

	return (struct shape){ j->gpus, j->gang >= 2 && !r->gang_done[job] ? j->gang : 0,
			       j->policy };
}

static bool shape_in(const struct shape *set, unsigned n, const struct shape *s)
{
	for (unsigned i = 0; i < n; i++)
		if (set[i].gpus == s->gpus && set[i].gang == s->gang &&
		    set[i].policy.kind == s->policy.kind &&
		    set[i].policy.min_level == s->policy.min_level)
			return true;
	return false;
}

/* ---- The order ---------------------------------------------------------- */

static unsigned list_of(const struct replay *r, size_t job)
{
	return r->s->fifo ? 0 : r->t->jobs[job].queue;
}

/* Job <job>'s terms in the fair order now. */
static struct gang_fair_key fair_key(const struct replay *r, size_t job)
{
	const struct sim_job *j = &r->t->jobs[job];
	double w = r->s->queue_weights[j->queue] > 0 ? r->s->queue_weights[j->queue] : 1.0;

	return (struct gang_fair_key){
		.priority = j->priority,
		.share = r->c->gpus ? (double)r->queue_gpus[j->queue] / r->c->gpus / w : 0.0,
		/* Arrivals are at most TRACE_MAX_SECONDS (1e10 s): 1e19 ns fits a
		 * uint64_t (not a long long, so no llround). */
		.waiting_since_ns = (uint64_t)(j->arrival * 1e9 + 0.5),
		.key = j->name,
	};
}

/* Whether job <a> is tried before job <b> now: the daemon's rule, and when
 * it ranks neither first (the same terms and name), the trace's order. */
static bool before(const struct replay *r, size_t a, size_t b)
{
	struct gang_fair_key ka, kb;

	if (r->s->fifo)
		return a < b;
	ka = fair_key(r, a);
	kb = fair_key(r, b);
	if (gang_fair_precedes(&ka, &kb) > 0)
		return true;
	if (gang_fair_precedes(&kb, &ka) > 0)
		return false;
	return a < b;
}

static int by_before(const void *x, const void *y, void *arg)
{
	size_t a = *(const size_t *)x, b = *(const size_t *)y;

	if (a == b)
		return 0;
	return before(arg, a, b) ? -1 : 1;
}

/* Merge the sorted <f> (<nf> jobs) into list <l>, from the back: list l has
 * room for every job of its queue. New arrivals mostly go at the end. */
static void list_merge(struct replay *r, unsigned l, const size_t *f, size_t nf)
{
	size_t *a = r->wait.job[l];
	size_t i = r->wait.n[l], j = nf, k = i + nf;

	while (j > 0) {
		if (i > 0 && before(r, f[j - 1], a[i - 1]))
			a[--k] = a[--i];
		else
			a[--k] = f[--j];
	}
	r->wait.n[l] += nf;
}

/* ---- The walk -------------------------------------------------------------- */

static unsigned max_free_now(const struct replay *r)
{
	unsigned max_free = 0;

	for (unsigned i = 0; i < r->c->n; i++) {
		unsigned f = cache_view_free_gpus(&r->cur[i]);

		max_free = f > max_free ? f : max_free;
	}
	return max_free;
}

/* Try the jobs of <w> in order (the best of the runs' heads at each step),
 * start what fits, keep the rest in order. The decisions are functions of the
 * cluster's state, so while nothing starts, a shape that failed fails again:
 * an overloaded cluster's thousands of waiting jobs cost a lookup each, not a
 * pass over the nodes. */
static void walk_runs(struct replay *r, struct runs *w, unsigned n_runs, double now)
{
	struct shape failed[SHAPES_FAILED];
	unsigned n_failed = 0, max_free = max_free_now(r);
	size_t rd[SIM_MAX_QUEUES] = { 0 }, kept[SIM_MAX_QUEUES] = { 0 };

	for (;;) {
		size_t job;
		struct shape sh;
		unsigned before_started, l = n_runs;
		bool done;

		for (unsigned i = 0; i < n_runs; i++)
			if (rd[i] < w->n[i] &&
			    (l == n_runs || before(r, w->job[i][rd[i]], w->job[l][rd[l]])))
				l = i;
		if (l == n_runs)
			break;
		job = w->job[l][rd[l]++];
		sh = next_shape(r, job);
		before_started = r->started[job];
		/* The largest free count only shrinks during a walk: a cheap way
		 * past jobs that cannot fit anywhere. */
		if (sh.gpus > max_free || shape_in(failed, n_failed, &sh)) {
			w->job[l][kept[l]++] = job;
			continue;
		}
		done = try_job(r, job, now);
		if (r->started[job] != before_started) {
			/* The state changed: what failed may not fail the same way. */
			n_failed = 0;
			max_free = max_free_now(r);
		}
		if (done)
			continue;
		if (n_failed < SHAPES_FAILED)
			failed[n_failed++] = next_shape(r, job);
		w->job[l][kept[l]++] = job;
	}
	for (unsigned i = 0; i < n_runs; i++)
		w->n[i] = kept[i];
}

/* A walk at <now>: the new arrivals sorted into their lists' order; then
 * every waiting job when something was freed since the last walk (<freed>),
 * else the new arrivals alone (the others failed against this state). */
static void walk(struct replay *r, bool freed, double now)
{
	struct runs fr = r->fresh;

	for (unsigned l = 0; l < r->n_lists; l++) {
		r->fresh.n[l] = 0;
		if (fr.n[l] > 1 && !r->s->fifo)
			qsort_r(fr.job[l], fr.n[l], sizeof(size_t), by_before, r);
	}
	if (freed) {
		for (unsigned l = 0; l < r->n_lists; l++)
			list_merge(r, l, fr.job[l], fr.n[l]);
		walk_runs(r, &r->wait, r->n_lists, now);
	} else {
		walk_runs(r, &fr, r->n_lists, now);
		for (unsigned l = 0; l < r->n_lists; l++)
			list_merge(r, l, fr.job[l], fr.n[l]);
	}
	r->n_waiting = 0;
	r->min_gang_waiting = 0;
	for (unsigned l = 0; l < r->n_lists; l++) {
		r->n_waiting += r->wait.n[l];
		for (size_t x = 0; x < r->wait.n[l]; x++) {
			const struct sim_job *j = &r->t->jobs[r->wait.job[l][x]];
			unsigned g = j->gang * j->gpus;

			if (j->gang >= 2 && !r->gang_done[r->wait.job[l][x]] &&
			    (!r->min_gang_waiting || g < r->min_gang_waiting))
				r->min_gang_waiting = g;
		}
	}
}

/* Free GPUs in finest-level domains with fewer free than the smallest
 * waiting gang asks: free GPUs no waiting gang can use inside one domain. */
static unsigned stranded(const struct replay *r)
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
static void count_arrival(struct replay *r, const struct sim_job *j)
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
static void account(struct replay *r, double from, double to)
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
	o->stranded_integral += dt * stranded(r);
}

static int sample(struct replay *r, double now)
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
static int domains_init(struct replay *r)
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

static int replay_init(struct replay *r, size_t total_pods)
{
	const struct sim_trace *t = r->t;

	r->cur = malloc(r->c->n * sizeof(*r->cur) + 1);
	r->pod_base = malloc(t->n * sizeof(*r->pod_base));
	r->started = calloc(t->n, sizeof(*r->started));
	r->gang_done = calloc(t->n, sizeof(*r->gang_done));
	r->pod_node = malloc(total_pods * sizeof(*r->pod_node));
	r->pod_devices = malloc(total_pods * sizeof(*r->pod_devices));
	r->heap = malloc(total_pods * sizeof(*r->heap));
	r->n_lists = r->s->fifo ? 1 : (t->n_queues ? t->n_queues : 1);
	for (size_t i = 0; i < t->n; i++)
		r->wait.n[list_of(r, i)]++;     /* each list's room, then emptied */
	for (unsigned l = 0; l < r->n_lists; l++) {
		r->wait.job[l] = malloc((r->wait.n[l] + 1) * sizeof(size_t));
		r->fresh.job[l] = malloc((r->wait.n[l] + 1) * sizeof(size_t));
		r->wait.n[l] = 0;
		if (!r->wait.job[l] || !r->fresh.job[l])
			return -ENOMEM;
	}
	r->out->jobs = calloc(t->n, sizeof(*r->out->jobs));
	r->ns = calloc(r->c->n + 1, sizeof(*r->ns));
	r->free_of = calloc(r->c->n + 1, sizeof(*r->free_of));
	r->rank.fit_idx = malloc((r->c->n + 1) * sizeof(unsigned));
	r->rank.fit_fine = malloc((r->c->n + 1) * sizeof(unsigned));
	if (!r->ns || !r->cur || !r->pod_base || !r->started || !r->gang_done || !r->pod_node ||
	    !r->pod_devices || !r->heap || !r->out->jobs || !r->free_of || !r->rank.fit_idx ||
	    !r->rank.fit_fine || domains_init(r) < 0)
		return -ENOMEM;
	memcpy(r->cur, r->c->base, r->c->n * sizeof(*r->cur));
	/* Every node starts counted at nothing free; node_update moves it. */
	r->free_hist[0] = r->island_hist[0] = r->c->n;
	for (unsigned i = 0; i < r->c->n; i++)
		node_update(r, i);
	for (size_t i = 0, p = 0; i < t->n; i++) {
		r->pod_base[i] = p;
		p += t->jobs[i].pods;
		if (r->s->per_job) {
			r->out->jobs[i].pods = calloc(t->jobs[i].pods,
						      sizeof(*r->out->jobs[i].pods));
			if (!r->out->jobs[i].pods)
				return -ENOMEM;
		}
	}
	return 0;
}

static void replay_fini(struct replay *r)
{
	free(r->cur);
	free(r->pod_base);
	free(r->started);
	free(r->gang_done);
	free(r->pod_node);
	free(r->pod_devices);
	free(r->heap);
	for (unsigned l = 0; l < r->n_lists; l++) {
		free(r->wait.job[l]);
		free(r->fresh.job[l]);
	}
	free(r->ns);
	free(r->free_of);
	free(r->rank.fit_idx);
	free(r->rank.fit_fine);
	free(r->node_dom);
	free(r->dom_free);
}

int sim_run(const struct sim_cluster *c, const struct sim_trace *t,
	    const struct sim_settings *s, struct sim_result *out, char *err, size_t errlen)
{
	struct replay r = { .c = c, .t = t, .s = s, .out = out };
	size_t total_pods = 0, next = 0;
	double now = 0, last = 0;
	bool begun = false;
	int rc;

	memset(out, 0, sizeof(*out));
	out->policy = s->policy;
	if (sim_policy_parse(s->policy, &r.pol) == 0)
		r.ops = placement_score_find(r.pol.score);
	if (!r.ops) {
		snprintf(err, errlen, "unknown policy \"%s\"", s->policy);
		return -EINVAL;
	}
	r.rank = (struct sim_rank_args){ .policy = &r.pol, .ops = r.ops, .w = &s->w,
					 .extender_weight = s->extender_weight, .n = c->n };
	r.levels = s->levels && s->levels->n ? s->levels : &gang_default_levels;
	memcpy(r.queue_gpus, s->queue_base_gpus, sizeof(r.queue_gpus));
	r.rng = s->seed ^ 0x5c4ed01eULL;
	for (size_t i = 0; i < t->n; i++)
		total_pods += t->jobs[i].pods;
	rc = replay_init(&r, total_pods + 1);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory for %zu jobs", t->n);
		goto out;
	}
	for (size_t i = 0; i < t->n; i++)
		if (t->jobs[i].measured) {
			out->t_begin = t->jobs[i].arrival;
			break;
		}
	/* Until the run ends, the window is open at its far end. */
	out->t_end = s->until_last_arrival && t->jobs[t->n - 1].arrival > out->t_begin ?
			     t->jobs[t->n - 1].arrival : INFINITY;
	for (;;) {
		double ta = next < t->n ? t->jobs[next].arrival : INFINITY;
		double td = r.heap_len ? r.heap[0].at : INFINITY;
		bool freed = false;

		if (next == t->n && !r.heap_len)
			break;
		now = ta < td ? ta : td;
		if (begun)
			account(&r, last, now);
		begun = true;
		last = now;
		while (r.heap_len && r.heap[0].at <= now) {
			struct departure d = heap_pop(&r);
			size_t job = d.job;

			r.cur[r.pod_node[d.pod]].used &= ~r.pod_devices[d.pod];
			node_update(&r, r.pod_node[d.pod]);
			r.busy -= t->jobs[job].gpus;
			r.queue_gpus[t->jobs[job].queue] -= t->jobs[job].gpus;
			if (d.at > out->jobs[job].end)
				out->jobs[job].end = d.at;
			freed = true;
		}
		while (next < t->n && t->jobs[next].arrival <= now) {
			const struct sim_job *j = &t->jobs[next];

			out->jobs_measured += j->measured;
			if (j->measured)
				count_arrival(&r, j);
			if (!fits_at_all(&r, j)) {
				out->jobs[next].refused = true;
				out->jobs_refused += j->measured;
			} else {
				unsigned l = list_of(&r, next);

				r.fresh.job[l][r.fresh.n[l]++] = next;
			}
			next++;
		}
		walk(&r, freed, now);
		if (sample(&r, now) < 0) {
			rc = -ENOMEM;
			snprintf(err, errlen, "out of memory for the time series");
			goto out;
		}
	}
	if (out->t_end > now)
		out->t_end = now;
	out->makespan = now - t->jobs[0].arrival;
	for (size_t i = 0; i < t->n; i++) {
		struct sim_job_result *jr = &out->jobs[i];

		jr->done = !jr->refused && r.started[i] == t->jobs[i].pods;
		if (jr->done && t->jobs[i].measured) {
			out->jobs_done++;
			out->queue_gpu_s[t->jobs[i].queue] +=
				(double)t->jobs[i].pods * t->jobs[i].gpus * t->jobs[i].duration;
		}
	}
	rc = 0;
out:
	replay_fini(&r);
	return rc;
}

void sim_result_fini(struct sim_result *r, size_t n_jobs)
{
	if (r->jobs)
		for (size_t i = 0; i < n_jobs; i++)
			free(r->jobs[i].pods);
	free(r->jobs);
	free(r->samples);
	memset(r, 0, sizeof(*r));
}
