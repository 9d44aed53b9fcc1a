/* sim_replay: how one scheduler plays the trace out, and what it counts on the
 * way. Every scheduler runs the same node selection: the real filter
 * (placement_check_request) over every node, a scoring policy from the real
 * table (placement_score_find), the highest score winning and ties broken at
 * random (seeded), as kube-scheduler does; only the score and the device
 * chooser (sim_choosers.c) differ. A pod no node can take waits in a FIFO
 * queue; after every departure the whole queue is retried in order and every
 * pod that fits is placed, so small pods may pass a waiting large one (no
 * head-of-line blocking, as kube-scheduler). Departures are a binary heap on
 * the time they are due.
 *
 * The counts (struct stats) are taken here, where the events happen: the
 * placed sets' links and quality, the fragmentation each measured arrival
 * finds, the waits, and the free islands sampled every 3 minutes. Turning them
 * into figures is sim_report.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_placement.h"

static const char *const resource_names[] = { "nvidia.com/gpu", NULL };

/* The departures, a binary min-heap on r->heap by the time each is due. */
static void heap_push(struct run *r, double at, uint32_t pod)
{
	size_t i = r->heap_len++;

	while (i > 0 && r->heap[(i - 1) / 2].at > at) {
		r->heap[i] = r->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	r->heap[i] = (struct departure){ at, pod };
}

static struct departure heap_pop(struct run *r)
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

/* The node the scheduler picks for a pod of <k> GPUs, or -1: the real filter,
 * then the policy's score, the best winning and ties drawn at random. */
static int pick_node(struct run *r, unsigned k)
{
	struct placement_request req = { .demand = { .gpu_resource = 0, .gpus = k } };
	unsigned best_score = 0, ties = 0;
	int best = -1;

	for (unsigned i = 0; i < r->n_nodes; i++) {
		struct cache_node_view v = node_view(&r->nodes[i]);
		struct placement_fit fit;
		unsigned s;

		if (placement_check_request(&v, &req, resource_names, &fit) != PLACEMENT_FITS)
			continue;
		s = r->score->score(&r->w, &v, &req);
		if (best < 0 || s > best_score) {
			best = (int)i;
			best_score = s;
			ties = 1;
		} else if (s == best_score && rng_below(&r->rng, ++ties) == 0) {
			best = (int)i;
		}
	}
	return best;
}

static bool try_place(struct run *r, uint32_t p, double now)
{
	const struct pod *pod = &r->tr->pods[p];
	unsigned k = pod_size[pod->size];
	int n = pick_node(r, k);
	struct sim_node *sn;
	struct cache_node_view v;
	struct placement_choice c;
	uint64_t free_mask, set;

	if (n < 0)
		return false;
	sn = &r->nodes[n];
	v = node_view(sn);
	free_mask = cache_view_free_mask(&v);
	set = r->ch->choose(r, &v, free_mask, k);
	if ((unsigned)__builtin_popcountll(set) != k || (set & ~free_mask)) {
		fprintf(stderr, "sim_placement: %s chose a bad set %#llx of %#llx for %u GPUs\n",
			r->ch->name, (unsigned long long)set, (unsigned long long)free_mask, k);
		abort();
	}
	sn->used |= set;
	r->where[p] = n;
	r->devices[p] = set;
	r->start[p] = now;
	heap_push(r, now + pod->life, p);
	if (p < r->tr->warm)
		return true;
	r->st.placed[pod->size]++;
	r->st.wait[pod->size] += now - pod->arrive;
	if (k >= 2) {
		placement_measure(sn->cls->topo, set, free_mask, &c);
		r->st.quality[pod->size] += placement_set_quality(&c, k, sn->cls->topo->known);
		if (placement_link_is_nvlink(c.worst))
			r->st.nvlink[pod->size]++;
		if (sn->cls->island[(1u << sn->cls->topo->n) - 1] >= 2) {
			r->st.on_nv_node[pod->size]++;
			r->st.nvlink_on_nv_node += placement_link_is_nvlink(c.worst);
		}
	}
	return true;
}

/* Measure the cluster as a pod of <k> GPUs finds it on arrival. */
static void on_arrival(struct run *r, const struct pod *pod)
{
	unsigned k = pod_size[pod->size], total = 0;
	bool fits = false, nvlink = false;

	for (unsigned i = 0; i < r->n_nodes; i++) {
		struct cache_node_view v = node_view(&r->nodes[i]);
		unsigned f = cache_view_free_gpus(&v);

		total += f;
		fits |= f >= k;
		nvlink |= r->nodes[i].cls->island[cache_view_free_mask(&v) & 0xff] >= k;
	}
	r->st.arrivals[pod->size]++;
	/* Node-level: no single node has k free although the cluster has. */
	if (!fits && total >= k)
		r->st.node_frag[pod->size]++;
	/* Topology-level: a node has k free, but no node has k free that are all
	 * NVLinked, so "required" would be refused everywhere. */
	if (k >= 2 && fits && !nvlink)
		r->st.topo_frag[pod->size]++;
}

static void retry_pending(struct run *r, double now)
{
	size_t kept = 0;
	unsigned max_free = 0;

	for (unsigned i = 0; i < r->n_nodes; i++) {
		struct cache_node_view v = node_view(&r->nodes[i]);
		unsigned f = cache_view_free_gpus(&v);

		max_free = f > max_free ? f : max_free;
	}
	for (size_t i = 0; i < r->pending_len; i++) {
		uint32_t p = r->pending[i];

		/* The max only shrinks during a pass: a cheap way past pods that
		 * cannot fit anywhere. */
		if (pod_size[r->tr->pods[p].size] > max_free || !try_place(r, p, now))
			r->pending[kept++] = p;
	}
	r->pending_len = kept;
}

static void sample(struct run *r, size_t idx)
{
	unsigned isl[3] = { 0, 0, 0 }, busy = 0;

	for (unsigned i = 0; i < r->n_nodes; i++) {
		struct cache_node_view v = node_view(&r->nodes[i]);
		unsigned s = r->nodes[i].cls->island[cache_view_free_mask(&v) & 0xff];

		busy += r->nodes[i].node.gpu_allocatable - cache_view_free_gpus(&v);
		isl[0] += s >= 2;
		isl[1] += s >= 4;
		isl[2] += s >= 8;
	}
	r->series[idx] = (float)isl[2];
	if (sample_time(idx) < r->tr->t_warm)
		return;
	r->st.samples++;
	for (unsigned j = 0; j < 3; j++)
		r->st.islands[j] += isl[j];
	r->st.no8 += isl[2] == 0;
	r->st.busy += busy;
}

void sim_run_trace(struct run *r)
{
	const struct trace *tr = r->tr;
	size_t next = 0, smp = 0;

	while (next < tr->n) {
		double ta = tr->pods[next].arrive;
		double td = r->heap_len ? r->heap[0].at : INFINITY;
		double t = ta < td ? ta : td;

		/* Usage is constant between events. */
		while (smp < tr->n_samples && sample_time(smp) < t)
			sample(r, smp++);
		if (td < ta) {
			struct departure d = heap_pop(r);

			r->nodes[r->where[d.pod]].used &= ~r->devices[d.pod];
			retry_pending(r, t);
			continue;
		}
		if (next >= tr->warm)
			on_arrival(r, &tr->pods[next]);
		/* Every waiting pod failed at the last change and nothing has been
		 * freed since, so FIFO order lets this one try straight away. */
		if (!try_place(r, (uint32_t)next, t))
			r->pending[r->pending_len++] = (uint32_t)next;
		next++;
	}
	while (smp < tr->n_samples)
		sample(r, smp++);
	for (size_t i = 0; i < r->pending_len; i++) {
		const struct pod *pod = &tr->pods[r->pending[i]];

		if (r->pending[i] < tr->warm)
			continue;
		r->st.pending_end++;
		r->st.wait[pod->size] += tr->t_end - pod->arrive;
	}
}

int sim_run_init(struct run *r, const struct chooser *ch, const struct trace *tr,
		 const struct node_class *cls, unsigned n_nodes, const struct placement_weights *w,
		 uint64_t seed)
{
	memset(r, 0, sizeof(*r));
	r->ch = ch;
	r->score = placement_score_find(ch->score);
	r->w = *w;
	r->rng.s = seed ^ 0x5c4ed01eULL;
	r->tr = tr;
	r->n_nodes = n_nodes;
	r->nodes = calloc(n_nodes, sizeof(*r->nodes));
	r->where = malloc(tr->n * sizeof(*r->where));
	r->devices = calloc(tr->n, sizeof(*r->devices));
	r->start = calloc(tr->n, sizeof(*r->start));
	r->heap = calloc(tr->n, sizeof(*r->heap));
	r->pending = calloc(tr->n, sizeof(*r->pending));
	r->series = calloc(tr->n_samples, sizeof(*r->series));
	if (!r->score || !r->nodes || !r->where || !r->devices || !r->start || !r->heap ||
	    !r->pending || !r->series)
		return -ENOMEM;
	for (size_t i = 0; i < tr->n; i++)
		r->where[i] = -1;
	for (unsigned i = 0; i < n_nodes; i++) {
		/* Interleaved so that every cluster size keeps the mix. */
		const struct node_class *c = &cls[i % KINDS];
		struct sim_node *sn = &r->nodes[i];

		sn->cls = c;
		sn->node.name = c->name;
		sn->node.gpu_resource = 0;
		sn->node.gpu_capacity = c->topo->n;
		sn->node.gpu_allocatable = c->topo->n;
		sn->node.ready = true;
		sn->node.derived = c->topo;
		r->gpus += c->topo->n;
	}
	return 0;
}

void sim_run_fini(struct run *r)
{
	free(r->nodes);
	free(r->where);
	free(r->devices);
	free(r->start);
	free(r->heap);
	free(r->pending);
	free(r->series);
}
