/* simulate_walk: the order a replay tries its waiting jobs in.
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
 */
#include <stdlib.h>
#include <string.h>

#include "extender/simulate_internal.h"

/* What a job's next step asks: a gang's quorum, or one pod, of a resource. */
struct shape {
	unsigned gpus, gang;
	int resource;
	struct placement_policy policy;
};

enum { SHAPES_FAILED = 16 };

static struct shape next_shape(const struct replay *r, size_t job)
{
	const struct sim_job *j = &r->t->jobs[job];

	return (struct shape){ j->gpus, j->gang >= 2 && !r->gang_done[job] ? j->gang : 0,
			       j->resource, j->policy };
}

static bool shape_in(const struct shape *set, unsigned n, const struct shape *s)
{
	for (unsigned i = 0; i < n; i++)
		if (set[i].gpus == s->gpus && set[i].gang == s->gang &&
		    set[i].resource == s->resource && set[i].policy.kind == s->policy.kind &&
		    set[i].policy.min_level == s->policy.min_level)
			return true;
	return false;
}

/* ---- The order ---------------------------------------------------------- */

unsigned sim__list_of(const struct replay *r, size_t job)
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
		/* The held-for gang sees nodes the others do not: its shape's
		 * failures say nothing of it, nor its of theirs. */
		if (job != r->hold_job &&
		    (sh.gpus > max_free || shape_in(failed, n_failed, &sh))) {
			w->job[l][kept[l]++] = job;
			continue;
		}
		done = sim__try_job(r, job, now);
		if (r->started[job] != before_started) {
			/* The state changed: what failed may not fail the same way. */
			n_failed = 0;
			max_free = max_free_now(r);
		}
		if (done && job == r->hold_job) {
			/* Its gang started: the holds go, and what they kept is
			 * everybody's again. */
			memset(r->held, 0, r->c->n * sizeof(*r->held));
			r->hold_job = SIZE_MAX;
			r->masked_gen = UINT64_MAX;
			n_failed = 0;
		}
		if (done)
			continue;
		if (job != r->hold_job && n_failed < SHAPES_FAILED)
			failed[n_failed++] = next_shape(r, job);
		w->job[l][kept[l]++] = job;
	}
	for (unsigned i = 0; i < n_runs; i++)
		w->n[i] = kept[i];
}

/* ---- Holds for a starving gang ----------------------------------------- */

/* The waiting gang first in the fair order (SIZE_MAX: none). Within a list
 * the order does not change, so each list's first gang is its best. */
static size_t head_gang(const struct replay *r)
{
	size_t head = SIZE_MAX;

	for (unsigned l = 0; l < r->n_lists; l++)
		for (size_t x = 0; x < r->wait.n[l]; x++) {
			size_t job = r->wait.job[l][x];

			if (r->t->jobs[job].gang < 2 || r->gang_done[job])
				continue;
			if (head == SIZE_MAX || before(r, job, head))
				head = job;
			break;
		}
	return head;
}

struct hold_cand {
	unsigned node, key;
};

static int by_key_desc(const void *a, const void *b)
{
	const struct hold_cand *x = a, *y = b;

	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	return x->node < y->node ? -1 : x->node > y->node;
}

/* The gang manager's holds (gang__holds_grow in src/gang/fair.c): the head
 * of the fair order among waiting gangs, once it has waited
 * starvation_s, gets target nodes - those already holding for it first,
 * then the emptiest - whose allocatable takes all its members; no other job
 * may use them until it starts. Re-picked at every walk, as the manager
 * re-picks them at every fairness pass. True when the targets changed. */
static bool holds_update(struct replay *r, double now)
{
	size_t head = r->holds_on ? head_gang(r) : SIZE_MAX;
	const struct sim_job *j = head != SIZE_MAX ? &r->t->jobs[head] : NULL;
	struct hold_cand *c = NULL;
	unsigned n = 0, members = 0;
	bool changed = false;

	if (j && now - j->arrival >= r->s->starvation_s && j->gpus > 0)
		c = malloc((r->c->n + 1) * sizeof(*c));
	for (unsigned i = 0; c && i < r->c->n; i++) {
		const struct cache_node *node = r->cur[i].node;

		if (placement_node_usable(node, j->resource) != PLACEMENT_USABLE ||
		    node->gpu_allocatable < j->gpus)
			continue;
		c[n++] = (struct hold_cand){ i, r->ns[i].free + (r->held[i] && r->hold_job == head
									 ? 1000 : 0) };
	}
	if (c)
		qsort(c, n, sizeof(*c), by_key_desc);
	for (unsigned i = 0; i < r->c->n; i++) {
		changed |= r->held[i];
		r->held[i] = false;
	}
	for (unsigned i = 0; c && i < n && members < j->gang; i++) {
		r->held[c[i].node] = true;
		members += r->cur[c[i].node].node->gpu_allocatable / j->gpus;
	}
	/* Re-picked targets, or holds made or dropped: the masked copy is stale
	 * (a re-pick of the same targets changes nothing for the others, but
	 * telling the two apart costs what the walk it saves would). */
	changed |= c != NULL || r->hold_job != SIZE_MAX;
	if (changed)
		r->masked_gen = UINT64_MAX;
	r->hold_job = c ? head : SIZE_MAX;
	free(c);
	return changed;
}

const struct cache_node_view *sim__views_for(struct replay *r, size_t job)
{
	if (r->hold_job == SIZE_MAX || job == r->hold_job)
		return r->cur;
	if (r->masked_gen != r->cur_gen) {
		memcpy(r->masked, r->cur, r->c->n * sizeof(*r->masked));
		for (unsigned i = 0; i < r->c->n; i++)
			if (r->held[i])
				r->masked[i].used = ~0ULL;
		r->masked_gen = r->cur_gen;
	}
	return r->masked;
}

/* A walk at <now>: the new arrivals sorted into their lists' order; then
 * every waiting job when something was freed since the last walk (<freed>),
 * else the new arrivals alone (the others failed against this state). */
void sim__walk(struct replay *r, bool freed, double now)
{
	struct runs fr = r->fresh;

	/* Holds that change free nodes for the others, or take them: every
	 * waiting job is tried again. */
	if (holds_update(r, now))
		freed = true;
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
