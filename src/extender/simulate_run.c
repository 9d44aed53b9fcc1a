/* simulate_run: one replay of the trace over the cluster under one scoring
 * policy, in simulated time, and what it counts on the way.
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

#include "extender/simulate_internal.h"

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

struct placement_request sim__job_request(const struct sim_job *j)
{
	return (struct placement_request){
		.demand = { .gpu_resource = j->resource, .gpus = j->gpus },
		.policy = j->policy,
	};
}

/* The node a pod of <j> goes to in <views> under the run's ranker, or -1. */
static int pick_node(struct replay *r, const struct cache_node_view *views,
		     const struct sim_job *j)
{
	struct placement_request req = sim__job_request(j);
	struct sim_rank_args a = r->rank;

	a.views = views;
	a.req = &req;
	a.free_hint = views == r->cur ? r->free_of : NULL;
	return sim_pick_node(&a, &r->rng, NULL, NULL);
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
	r->cur_gen++;
	sim__node_update(r, node);
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
	struct placement_request req = sim__job_request(j);
	char why[TROUPE_MESSAGE_BUF];

	struct gang_levels one;

	memset(plan, 0, sizeof(*plan));
	if (r->pol.gang)
		return r->pol.gang(views, r->c->n, j->gang, &req, r->levels, r->pol.chooser,
				   &r->rng, plan);
	/* troupe.io/gang-topology required:<key>: the gang manager's own
	 * one-level strict plan (gang_admit). */
	if (r->s->gang_required_key)
		gang_levels_required(r->levels, r->s->gang_required_key, &one);
	return gang_plan_make(views, r->c->n, j->gang, &req,
			      r->s->gang_required_key ? &one : r->levels, plan, why, sizeof(why));
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

bool sim__try_job(struct replay *r, size_t job, double now)
{
	const struct sim_job *j = &r->t->jobs[job];

	if (j->gang >= 2 && !r->gang_done[job]) {
		struct gang_plan plan;

		if (plan_gang(r, sim__views_for(r, job), j, &plan) < 0) {
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
		int n = pick_node(r, sim__views_for(r, job), j);
		struct placement_choice c;
		uint64_t free_mask;

		if (n < 0)
			return false;
		free_mask = cache_view_free_mask(&r->cur[n]);
		if (r->pol.chooser) {
			/* A baseline takes the job's resource's devices only. */
			free_mask &= cache_node_res_devices(r->cur[n].node, j->resource);
			c.set = r->pol.chooser(&r->cur[n], free_mask, j->gpus, &r->rng);
			if ((unsigned)__builtin_popcountll(c.set) != j->gpus ||
			    (c.set & ~free_mask))
				return false;
		} else if (placement_node_choose(&r->cur[n], j->resource, free_mask, j->gpus, &j->policy,
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
		r->wait.n[sim__list_of(r, i)]++;     /* each list's room, then emptied */
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
	r->held = calloc(r->c->n + 1, sizeof(*r->held));
	r->masked = malloc((r->c->n + 1) * sizeof(*r->masked));
	r->rank.fit_idx = malloc((r->c->n + 1) * sizeof(unsigned));
	r->rank.fit_fine = malloc((r->c->n + 1) * sizeof(unsigned));
	if (!r->ns || !r->cur || !r->pod_base || !r->started || !r->gang_done || !r->pod_node ||
	    !r->pod_devices || !r->heap || !r->out->jobs || !r->free_of || !r->held ||
	    !r->masked || !r->rank.fit_idx ||
	    !r->rank.fit_fine || sim__domains_init(r) < 0)
		return -ENOMEM;
	memcpy(r->cur, r->c->base, r->c->n * sizeof(*r->cur));
	/* Every node starts counted at nothing free; node_update moves it. */
	r->free_hist[0] = r->island_hist[0] = r->c->n;
	for (unsigned i = 0; i < r->c->n; i++)
		sim__node_update(r, i);
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
	free(r->held);
	free(r->masked);
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
	/* Holds are troupe's gang manager's: not under a peer's planner. */
	r.holds_on = !r.pol.gang && s->starvation_s >= 0;
	r.hold_job = SIZE_MAX;
	r.masked_gen = UINT64_MAX;
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
			sim__account(&r, last, now);
		begun = true;
		last = now;
		while (r.heap_len && r.heap[0].at <= now) {
			struct departure d = heap_pop(&r);
			size_t job = d.job;

			r.cur[r.pod_node[d.pod]].used &= ~r.pod_devices[d.pod];
			r.cur_gen++;
			sim__node_update(&r, r.pod_node[d.pod]);
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
				sim__count_arrival(&r, j);
			if (!fits_at_all(&r, j)) {
				out->jobs[next].refused = true;
				out->jobs_refused += j->measured;
			} else {
				unsigned l = sim__list_of(&r, next);

				r.fresh.job[l][r.fresh.n[l]++] = next;
			}
			next++;
		}
		sim__walk(&r, freed, now);
		if (sim__sample(&r, now) < 0) {
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
