/* sim_placement: how well placement keeps GPU sets connected and NVLink islands
 * whole, on a replayed trace, against same-run baselines.
 *
 *   sim_placement [--nodes N] [--pods M] [--seed S] [--load F] [--weights P,T,F]
 *                 [--plot FILE.png] [--plot-data FILE]
 *
 * The cluster mixes four node types in equal shares, their matrices built here
 * (no parser, no profiles): 8-GPU NVSwitch (every pair NV12), DGX-1 V100 hybrid
 * cube mesh (two NVLinked quads, NV1/NV2, joined by i<->i+4 links, SYS
 * otherwise), an 8-GPU PCIe server (PIX pairs under four switches, PXB within
 * a socket, SYS across) and a 4-GPU box with NVLink bridges on (0,2) and (1,3).
 *
 * The trace, generated once from the seed and replayed for every scheduler:
 * Poisson arrivals of pods asking 1/2/4/8 GPUs (40/25/20/15 %), exponential
 * lifetimes (mean one hour), arrival rate set so that the offered load is
 * --load (0.9) of the cluster's GPUs. The first tenth of the arrivals warms the
 * cluster up and is not measured.
 *
 * Every scheduler runs the same node selection: the real filter
 * (placement_check_request) over every node, a scoring policy from the real
 * table (placement_score_find), the highest score winning and ties broken at
 * random (seeded), as kube-scheduler does. Only the score and the device
 * chooser differ:
 *   troupe    the "topology" score and placement_choose (memoised, exact);
 *   lowest    the "binpack" score, the lowest free indices;
 *   random    the "binpack" score, a random free subset;
 *   sum-pairs the "binpack" score, the subset with the largest sum of
 *             placement_link_weight over its pairs (no worst-pair term, no
 *             fragmentation term; ties to the lowest indices).
 * A pod no node can take waits in a FIFO queue; after every departure the whole
 * queue is retried in order and every pod that fits is placed, so small pods
 * may pass a waiting large one (no head-of-line blocking, as kube-scheduler).
 *
 * What it reports, over the measured arrivals:
 *   all-NVLink sets   multi-GPU pods whose every pair is NVLinked, as a share of
 *                     all placed multi-GPU pods (and, in the second table, of
 *                     those placed on a node that has NVLink at all);
 *   link quality      placement_set_quality of each multi-GPU pod's set, averaged;
 *   topology fragmentation
 *                     multi-GPU arrivals for which some node had k free GPUs but
 *                     no node had k free GPUs that are all NVLinked: the pod would
 *                     have been refused everywhere under "required". (With the
 *                     default "preferred" policy no scheduler here ever refuses a
 *                     node that has k free GPUs, so "rejected while a node had
 *                     enough free GPUs" is literally zero for all of them; this is
 *                     its topological form.) Note that it only counts arrivals
 *                     that found a node with k free: the next measure covers the
 *                     rest;
 *   node fragmentation
 *                     arrivals that found no node with k free GPUs while the
 *                     cluster had k free in total (the classic measure);
 *   mean wait         minutes from arrival to placement, pods still waiting at
 *                     the end counted up to the end;
 *   free islands      sampled every 3 minutes: for each node, the largest set of
 *                     free devices that are pairwise NVLinked; the time average
 *                     of nodes able to host an all-NVLink 2, 4 and 8-GPU pod.
 * With --plot-data the 8-GPU island count per sample is written for gnuplot,
 * and --plot draws it (gnuplot, pngcairo when available, else png).
 *
 * This is a benchmark, not a test: it prints figures and never fails on them.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "placement/placement.h"
#include "placement/topology.h"

enum {
	KINDS = 4,              /* node types, in equal shares */
	SIZES = 4,              /* pod sizes 1, 2, 4, 8 */
	CHOOSERS = 4,
	SAMPLES_PER_LIFE = 20,  /* island samples per mean lifetime */
	NV = PLACEMENT_LINK_NV0,
};

static const unsigned pod_size[SIZES] = { 1, 2, 4, 8 };
static const double size_share[SIZES] = { 0.40, 0.25, 0.20, 0.15 };
static const double mean_life = 60.0;  /* minutes */
static const char *const resource_names[] = { "nvidia.com/gpu", NULL };

/* ---- Random numbers (splitmix64: small, seedable, good enough here) ---------- */

struct rng {
	uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform in [0, n). */
static unsigned rng_below(struct rng *r, unsigned n)
{
	return (unsigned)(rng_unit(r) * n);
}

static double rng_exp(struct rng *r, double mean)
{
	return -mean * log1p(-rng_unit(r));
}

/* ---- Node types ------------------------------------------------------------------- */

struct node_class {
	const char *name;
	struct placement_topo *topo;    /* heap: the memo inside is 32 KiB */
	/* The largest set of devices of each free mask that are all pairwise
	 * NVLinked (a free NVLink island), for masks of up to 8 devices. */
	uint8_t island[256];
};

static void link_set(struct placement_topo *t, unsigned i, unsigned j, uint8_t level)
{
	t->link[i][j] = level;
	t->link[j][i] = level;
}

static void topo_start(struct placement_topo *t, unsigned n, const char *source)
{
	memset(t, 0, sizeof(*t));
	t->n = (uint8_t)n;
	t->known = true;
	snprintf(t->source, sizeof(t->source), "%s", source);
	for (unsigned i = 0; i < PLACEMENT_TOPO_MAX; i++)
		t->numa[i] = -1;
}

/* Every pair on NV12 through NVSwitch (HGX A100/H100). */
static void topo_nvswitch(struct placement_topo *t)
{
	topo_start(t, 8, "sim nvswitch-8");
	for (unsigned i = 0; i < 8; i++) {
		t->numa[i] = (int8_t)(i / 4);
		for (unsigned j = i + 1; j < 8; j++)
			link_set(t, i, j, NV + 12);
	}
}

/* DGX-1 V100, as its `nvidia-smi topo -m` prints it: quads 0-3 and 4-7 fully
 * NVLinked with one or two links per pair, i and i+4 joined by one or two
 * links, every other pair across the SMP interconnect. Six links per GPU. */
static void topo_dgx1(struct placement_topo *t)
{
	static const uint8_t nv[8][8] = {
		{ 0, 1, 1, 2, 2, 0, 0, 0 }, { 1, 0, 2, 1, 0, 2, 0, 0 },
		{ 1, 2, 0, 2, 0, 0, 1, 0 }, { 2, 1, 2, 0, 0, 0, 0, 1 },
		{ 2, 0, 0, 0, 0, 1, 1, 2 }, { 0, 2, 0, 0, 1, 0, 2, 1 },
		{ 0, 0, 1, 0, 1, 2, 0, 2 }, { 0, 0, 0, 1, 2, 1, 2, 0 },
	};

	topo_start(t, 8, "sim dgx-1 v100");
	for (unsigned i = 0; i < 8; i++) {
		t->numa[i] = (int8_t)(i / 4);
		for (unsigned j = i + 1; j < 8; j++)
			link_set(t, i, j, nv[i][j] ? (uint8_t)(NV + nv[i][j]) : PLACEMENT_LINK_SYS);
	}
}

/* An 8-GPU PCIe server: pairs under one switch (PIX), switches of a socket
 * behind a host bridge's bridges (PXB), the two sockets across SYS. */
static void topo_pcie(struct placement_topo *t)
{
	topo_start(t, 8, "sim pcie-8");
	for (unsigned i = 0; i < 8; i++) {
		t->numa[i] = (int8_t)(i / 4);
		for (unsigned j = i + 1; j < 8; j++)
			link_set(t, i, j, i / 2 == j / 2   ? PLACEMENT_LINK_PIX
					  : i / 4 == j / 4 ? PLACEMENT_LINK_PXB
							   : PLACEMENT_LINK_SYS);
	}
}

/* A 4-GPU workstation: NVLink bridges (NV4) on 0-2 and 1-3, PHB otherwise. */
static void topo_bridge(struct placement_topo *t)
{
	topo_start(t, 4, "sim nvlink-bridge-4");
	for (unsigned i = 0; i < 4; i++) {
		t->numa[i] = 0;
		for (unsigned j = i + 1; j < 4; j++)
			link_set(t, i, j, j == i + 2 ? NV + 4 : PLACEMENT_LINK_PHB);
	}
}

static void class_islands(struct node_class *c)
{
	const struct placement_topo *t = c->topo;
	unsigned full = 1u << t->n;

	for (unsigned m = 0; m < full; m++) {
		bool clique = true;

		for (unsigned i = 0; i < t->n && clique; i++)
			for (unsigned j = i + 1; j < t->n && clique; j++)
				if ((m >> i & 1) && (m >> j & 1) &&
				    !placement_link_is_nvlink(t->link[i][j]))
					clique = false;
		if (clique) {
			c->island[m] = (uint8_t)__builtin_popcount(m);
			continue;
		}
		/* Subsets are smaller numbers: already known. */
		c->island[m] = 0;
		for (unsigned i = 0; i < t->n; i++)
			if ((m >> i & 1) && c->island[m & ~(1u << i)] > c->island[m])
				c->island[m] = c->island[m & ~(1u << i)];
	}
}

static int classes_init(struct node_class *c)
{
	static void (*const build[KINDS])(struct placement_topo *) = {
		topo_nvswitch, topo_dgx1, topo_pcie, topo_bridge,
	};
	static const char *const names[KINDS] = { "NVSwitch 8-GPU", "DGX-1 V100 8-GPU",
						  "PCIe 8-GPU", "NVLink-bridge 4-GPU" };

	for (unsigned k = 0; k < KINDS; k++) {
		c[k].name = names[k];
		c[k].topo = calloc(1, sizeof(*c[k].topo));
		if (!c[k].topo)
			return -ENOMEM;
		build[k](c[k].topo);
		class_islands(&c[k]);
	}
	return 0;
}

/* ---- The trace ---------------------------------------------------------------------- */

struct pod {
	double arrive;          /* minutes */
	double life;            /* minutes of running once placed */
	uint8_t size;           /* index in pod_size */
};

struct trace {
	struct pod *pods;
	size_t n;
	size_t warm;            /* arrivals before this index are not measured */
	double t_warm, t_end;
	size_t n_samples;       /* island samples, every mean_life / SAMPLES_PER_LIFE */
};

static int trace_make(struct trace *tr, size_t n, unsigned gpus, double load, uint64_t seed)
{
	struct rng r = { seed ^ 0x7472616365ULL };
	double mean_k = 0.0, rate, t = 0.0;

	for (unsigned s = 0; s < SIZES; s++)
		mean_k += size_share[s] * pod_size[s];
	rate = load * gpus / (mean_k * mean_life);      /* pods per minute */
	tr->pods = calloc(n, sizeof(*tr->pods));
	if (!tr->pods)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		double u = rng_unit(&r), acc = 0.0;
		unsigned s = 0;

		t += rng_exp(&r, 1.0 / rate);
		while (s + 1 < SIZES && u >= acc + size_share[s])
			acc += size_share[s++];
		tr->pods[i].arrive = t;
		tr->pods[i].size = (uint8_t)s;
		tr->pods[i].life = rng_exp(&r, mean_life);
	}
	tr->n = n;
	tr->warm = n / 10;
	tr->t_warm = tr->pods[tr->warm].arrive;
	tr->t_end = t;
	tr->n_samples = (size_t)(t / (mean_life / SAMPLES_PER_LIFE)) + 1;
	return 0;
}

static double sample_time(size_t i)
{
	return (double)i * mean_life / SAMPLES_PER_LIFE;
}

/* ---- A scheduler over the simulated cluster ----------------------------------------- */

struct sim_node {
	struct cache_node node;
	const struct node_class *cls;
	uint64_t used;
};

struct run;

struct chooser {
	const char *name;
	const char *score;      /* node ranking: a policy of placement_score_find */
	uint64_t (*choose)(struct run *r, const struct cache_node_view *v, uint64_t free_mask,
			   unsigned k);
};

struct departure {
	double at;
	uint32_t pod;
};

struct stats {
	unsigned long arrivals[SIZES];  /* measured arrivals */
	unsigned long placed[SIZES];
	unsigned long nvlink[SIZES];    /* placed on an all-NVLink set */
	unsigned long on_nv_node[SIZES];        /* placed on a node with any NVLink */
	unsigned long nvlink_on_nv_node;        /* all-NVLink among those, all sizes */
	double quality[SIZES];          /* summed placement_set_quality */
	unsigned long topo_frag[SIZES];
	unsigned long node_frag[SIZES];
	double wait[SIZES];             /* summed minutes waited (censored at the end) */
	unsigned long pending_end;
	unsigned long samples;
	double islands[3];              /* nodes with a free island >= 2, 4, 8, summed */
	unsigned long no8;              /* samples without a free 8-GPU NVLink island */
	double busy;                    /* GPUs in use, summed over samples */
};

struct run {
	const struct chooser *ch;
	const struct placement_score_ops *score;
	struct placement_weights w;
	struct rng rng;                 /* node ties and the random chooser */
	struct sim_node *nodes;
	unsigned n_nodes, gpus;
	const struct trace *tr;
	int32_t *where;                 /* node of each pod, -1 when not placed */
	uint64_t *devices;
	double *start;
	struct departure *heap;
	size_t heap_len;
	uint32_t *pending;
	size_t pending_len;
	float *series;                  /* free 8-GPU NVLink islands at each sample */
	struct stats st;
};

static struct cache_node_view node_view(const struct sim_node *sn)
{
	return (struct cache_node_view){ .node = &sn->node, .used = sn->used };
}

static uint64_t choose_troupe(struct run *r, const struct cache_node_view *v,
			      uint64_t free_mask, unsigned k)
{
	static const struct placement_policy preferred = { PLACEMENT_POLICY_PREFERRED, 0 };
	struct placement_choice c;

	(void)r;
	if (placement_node_choose(v, free_mask, k, &preferred, &c) < 0)
		return 0;
	return c.set;
}

static uint64_t choose_lowest(struct run *r, const struct cache_node_view *v,
			      uint64_t free_mask, unsigned k)
{
	uint64_t set = 0;

	(void)r;
	(void)v;
	for (unsigned i = 0; i < k && free_mask; i++) {
		set |= free_mask & -free_mask;
		free_mask &= free_mask - 1;
	}
	return set;
}

static uint64_t choose_random(struct run *r, const struct cache_node_view *v,
			      uint64_t free_mask, unsigned k)
{
	unsigned idx[PLACEMENT_TOPO_MAX], n = 0;
	uint64_t set = 0;

	(void)v;
	for (; free_mask; free_mask &= free_mask - 1)
		idx[n++] = (unsigned)__builtin_ctzll(free_mask);
	/* A partial Fisher-Yates shuffle: the first k are a uniform k-subset. */
	for (unsigned i = 0; i < k && i < n; i++) {
		unsigned j = i + rng_below(&r->rng, n - i), tmp = idx[i];

		idx[i] = idx[j];
		idx[j] = tmp;
		set |= 1ULL << idx[i];
	}
	return set;
}

static uint64_t choose_sum_pairs(struct run *r, const struct cache_node_view *v,
				 uint64_t free_mask, unsigned k)
{
	const struct placement_topo *t = placement_node_topo(v->node);
	uint64_t best = 0;
	uint32_t best_w = 0;

	(void)r;
	/* Every subset of the free devices (at most 8 here), exactly. */
	for (uint64_t s = free_mask;; s = (s - 1) & free_mask) {
		if ((unsigned)__builtin_popcountll(s) == k) {
			uint32_t w = 0;
			uint64_t diff = s ^ best;

			for (uint64_t a = s; a; a &= a - 1)
				for (uint64_t b = a & (a - 1); b; b &= b - 1)
					w += placement_link_weight(
						t->link[__builtin_ctzll(a)][__builtin_ctzll(b)]);
			/* Ties: the set holding the lowest index where they differ. */
			if (!best || w > best_w || (w == best_w && (s & diff & -diff)))
				best = s, best_w = w;
		}
		if (!s)
			break;
	}
	return best;
}

static const struct chooser choosers[CHOOSERS] = {
	{ "troupe", "topology", choose_troupe },
	{ "lowest", "binpack", choose_lowest },
	{ "random", "binpack", choose_random },
	{ "sum-pairs", "binpack", choose_sum_pairs },
};

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

static void run_trace(struct run *r)
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

static int run_init(struct run *r, const struct chooser *ch, const struct trace *tr,
		    const struct node_class *cls, unsigned n_nodes,
		    const struct placement_weights *w, uint64_t seed)
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

static void run_fini(struct run *r)
{
	free(r->nodes);
	free(r->where);
	free(r->devices);
	free(r->start);
	free(r->heap);
	free(r->pending);
	free(r->series);
}

/* ---- Report ------------------------------------------------------------------------- */

static unsigned long sum_sizes(const unsigned long *v, unsigned from)
{
	unsigned long s = 0;

	for (unsigned i = from; i < SIZES; i++)
		s += v[i];
	return s;
}

static double pct(unsigned long a, unsigned long b)
{
	return b ? 100.0 * a / b : 0.0;
}

struct figures {
	double nvlink, quality, topo_frag, node_frag, wait, busy, isl[3], no8;
};

static void figures_of(const struct run *r, struct figures *f)
{
	const struct stats *s = &r->st;
	double q = 0.0, w = 0.0;

	for (unsigned i = 1; i < SIZES; i++)
		q += s->quality[i];
	for (unsigned i = 0; i < SIZES; i++)
		w += s->wait[i];
	f->nvlink = pct(sum_sizes(s->nvlink, 1), sum_sizes(s->placed, 1));
	f->quality = sum_sizes(s->placed, 1) ? q / sum_sizes(s->placed, 1) : 0.0;
	f->topo_frag = pct(sum_sizes(s->topo_frag, 1), sum_sizes(s->arrivals, 1));
	f->node_frag = pct(sum_sizes(s->node_frag, 0), sum_sizes(s->arrivals, 0));
	f->wait = sum_sizes(s->arrivals, 0) ? w / sum_sizes(s->arrivals, 0) : 0.0;
	f->busy = s->samples ? 100.0 * s->busy / s->samples / r->gpus : 0.0;
	for (unsigned j = 0; j < 3; j++)
		f->isl[j] = s->samples ? s->islands[j] / s->samples : 0.0;
	f->no8 = pct(s->no8, s->samples);
}

/* A baseline's figure next to troupe's: "12.3 (2.05x)" is 2.05 times troupe's. */
static void cell(double v, double troupe, bool is_troupe, int decimals)
{
	printf(" %.*f", decimals, v);
	if (!is_troupe) {
		if (troupe > 0.0)
			printf(" (%.2fx)", v / troupe);
		else
			printf(v > 0.0 ? " (troupe 0)" : " (=)");
	}
	printf(" |");
}

static void report(const struct run *runs, const struct trace *tr, unsigned n_nodes,
		   unsigned gpus, double load, uint64_t seed, const struct placement_weights *w)
{
	struct figures f[CHOOSERS];

	for (unsigned c = 0; c < CHOOSERS; c++)
		figures_of(&runs[c], &f[c]);
	printf("# sim_placement: %u nodes (NVSwitch 8-GPU, DGX-1 V100 8-GPU, PCIe 8-GPU, "
	       "NVLink-bridge 4-GPU in equal shares; %u GPUs), %zu pods (1/2/4/8 GPUs: "
	       "40/25/20/15 %%, mean life 60 min), offered load %.0f %%, seed %llu; first %zu "
	       "arrivals (%.1f h) are warm-up\n",
	       n_nodes, gpus, tr->n, load * 100, (unsigned long long)seed, tr->warm,
	       tr->t_warm / 60);
	printf("# troupe: score \"topology\" (packing=%g topology=%g fragmentation=%g), "
	       "placement_choose; baselines: score \"binpack\"; (x) = the baseline's figure "
	       "over troupe's\n\n", w->packing, w->topology, w->fragmentation);
	printf("| chooser | all-NVLink sets, %% of multi-GPU pods | mean link quality (0-1) | "
	       "topology fragmentation, %% of multi-GPU arrivals | node fragmentation, %% of "
	       "arrivals | mean wait, min | GPUs busy, %% | nodes with a free all-NVLink 2 / 4 "
	       "/ 8 set (time avg) | time with no free all-NVLink 8-GPU node, %% |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	for (unsigned c = 0; c < CHOOSERS; c++) {
		bool t = c == 0;

		printf("| %s |", runs[c].ch->name);
		cell(f[c].nvlink, f[0].nvlink, t, 1);
		cell(f[c].quality, f[0].quality, t, 3);
		cell(f[c].topo_frag, f[0].topo_frag, t, 2);
		cell(f[c].node_frag, f[0].node_frag, t, 2);
		cell(f[c].wait, f[0].wait, t, 1);
		printf(" %.1f | %.1f / %.1f / %.2f | %.1f |\n", f[c].busy, f[c].isl[0], f[c].isl[1],
		       f[c].isl[2], f[c].no8);
	}

	printf("\nBy pod size (2 / 4 / 8 GPUs; node fragmentation and wait also for 1 GPU "
	       "first):\n\n");
	printf("| chooser | all-NVLink sets, %% (2 / 4 / 8) | mean link quality (2 / 4 / 8) | "
	       "topology fragmentation, %% (2 / 4 / 8) | node fragmentation, %% (1 / 2 / 4 / 8) | "
	       "mean wait, min (1 / 2 / 4 / 8) | waiting at the end | all-NVLink sets, %% of "
	       "multi-GPU pods on nodes with NVLink |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	for (unsigned c = 0; c < CHOOSERS; c++) {
		const struct stats *s = &runs[c].st;

		printf("| %s | %.1f / %.1f / %.1f | %.3f / %.3f / %.3f | %.2f / %.2f / %.2f | "
		       "%.2f / %.2f / %.2f / %.2f | %.1f / %.1f / %.1f / %.1f | %lu | %.1f |\n",
		       runs[c].ch->name, pct(s->nvlink[1], s->placed[1]),
		       pct(s->nvlink[2], s->placed[2]), pct(s->nvlink[3], s->placed[3]),
		       s->placed[1] ? s->quality[1] / s->placed[1] : 0.0,
		       s->placed[2] ? s->quality[2] / s->placed[2] : 0.0,
		       s->placed[3] ? s->quality[3] / s->placed[3] : 0.0,
		       pct(s->topo_frag[1], s->arrivals[1]), pct(s->topo_frag[2], s->arrivals[2]),
		       pct(s->topo_frag[3], s->arrivals[3]), pct(s->node_frag[0], s->arrivals[0]),
		       pct(s->node_frag[1], s->arrivals[1]), pct(s->node_frag[2], s->arrivals[2]),
		       pct(s->node_frag[3], s->arrivals[3]),
		       s->arrivals[0] ? s->wait[0] / s->arrivals[0] : 0.0,
		       s->arrivals[1] ? s->wait[1] / s->arrivals[1] : 0.0,
		       s->arrivals[2] ? s->wait[2] / s->arrivals[2] : 0.0,
		       s->arrivals[3] ? s->wait[3] / s->arrivals[3] : 0.0, s->pending_end,
		       pct(s->nvlink_on_nv_node, sum_sizes(s->on_nv_node, 1)));
	}

	{
		bool frag = true, qual = true, node = true;

		for (unsigned c = 1; c < CHOOSERS; c++) {
			frag &= f[0].topo_frag < f[c].topo_frag;
			node &= f[0].node_frag <= f[c].node_frag;
			qual &= f[0].quality >= f[c].quality;
		}
		printf("\n# troupe vs every baseline: topology fragmentation lower: %s; node "
		       "fragmentation lower or equal: %s; link quality equal or better: %s\n",
		       frag ? "yes" : "no", node ? "yes" : "no", qual ? "yes" : "no");
	}
}

/* ---- Plot --------------------------------------------------------------------------- */

/* Time, then each chooser's free 8-GPU NVLink islands, raw and averaged over the
 * hour before (the raw counts are small integers that jump at every event). */
static int write_plot_data(const char *path, const struct run *runs, const struct trace *tr)
{
	size_t win = SAMPLES_PER_LIFE;
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	fprintf(f, "# time_h");
	for (unsigned c = 0; c < CHOOSERS; c++)
		fprintf(f, " %s", runs[c].ch->name);
	for (unsigned c = 0; c < CHOOSERS; c++)
		fprintf(f, " %s_1h", runs[c].ch->name);
	fprintf(f, "\n# nodes able to host an all-NVLink 8-GPU pod; warm-up ends at %.2f h\n",
		tr->t_warm / 60);
	for (size_t i = 0; i < tr->n_samples; i++) {
		size_t from = i + 1 >= win ? i + 1 - win : 0;

		fprintf(f, "%.3f", sample_time(i) / 60);
		for (unsigned c = 0; c < CHOOSERS; c++)
			fprintf(f, " %g", runs[c].series[i]);
		for (unsigned c = 0; c < CHOOSERS; c++) {
			double s = 0.0;

			for (size_t j = from; j <= i; j++)
				s += runs[c].series[j];
			fprintf(f, " %.3f", s / (double)(i + 1 - from));
		}
		fprintf(f, "\n");
	}
	return fclose(f) == 0 ? 0 : -errno;
}

static int plot(const char *png, const char *data, const struct run *runs,
		const struct trace *tr, unsigned n_nodes, uint64_t seed)
{
	/* pngcairo draws smoother lines; plain png (libgd) is the fallback. */
	bool cairo = system("gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1") == 0;
	FILE *g = popen("gnuplot", "w");
	int rc;

	if (!g)
		return -errno;
	fprintf(g, "set terminal %s size 1100,520\n", cairo ? "pngcairo" : "png");
	fprintf(g, "set output '%s'\n", png);
	fprintf(g, "set title \"Nodes able to host an all-NVLink 8-GPU pod over time (%u nodes, "
		   "%zu pods, seed %llu; 1-hour moving average)\"\n",
		n_nodes, tr->n, (unsigned long long)seed);
	fprintf(g, "set xlabel 'time (hours)'\nset ylabel 'nodes'\nset grid\n");
	fprintf(g, "set key top right\nset yrange [0:*]\nset xrange [0:%.3f]\n", tr->t_end / 60);
	fprintf(g, "set arrow from %.3f, graph 0 to %.3f, graph 1 nohead dashtype 2\n",
		tr->t_warm / 60, tr->t_warm / 60);
	fprintf(g, "plot ");
	for (unsigned c = 0; c < CHOOSERS; c++)
		fprintf(g, "%s'%s' using 1:%u with lines lw %s title '%s'", c ? ", " : "", data,
			2 + CHOOSERS + c, c ? "1" : "2", runs[c].ch->name);
	fprintf(g, "\n");
	rc = pclose(g);
	return rc == 0 ? 0 : -EIO;
}

/* ---- main --------------------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr, "usage: sim_placement [--nodes N] [--pods M] [--seed S] [--load F] "
			"[--weights PACKING,TOPOLOGY,FRAGMENTATION] [--plot FILE.png] "
			"[--plot-data FILE]\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "nodes", required_argument, NULL, 'n' },
		{ "pods", required_argument, NULL, 'p' },
		{ "seed", required_argument, NULL, 's' },
		{ "load", required_argument, NULL, 'l' },
		{ "weights", required_argument, NULL, 'w' },
		{ "plot", required_argument, NULL, 'P' },
		{ "plot-data", required_argument, NULL, 'D' },
		{ NULL, 0, NULL, 0 },
	};
	/* troupe's defaults (src/extender/config.c). */
	struct placement_weights w = { .packing = 6, .topology = 1, .fragmentation = 2 };
	unsigned n_nodes = 64;
	unsigned long pods = 50000;
	unsigned long long seed = 1;
	double load = 0.9;
	const char *png = NULL, *data = NULL;
	char tmp[] = "/tmp/sim_placement.XXXXXX";
	struct node_class cls[KINDS] = { 0 };
	struct run runs[CHOOSERS];
	struct trace tr = { 0 };
	unsigned gpus = 0;
	int opt, ret = 1;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		char *end = NULL;

		switch (opt) {
		case 'n': n_nodes = (unsigned)strtoul(optarg, &end, 10); break;
		case 'p': pods = strtoul(optarg, &end, 10); break;
		case 's': seed = strtoull(optarg, &end, 10); break;
		case 'l': load = strtod(optarg, &end); break;
		case 'w':
			if (sscanf(optarg, "%lf,%lf,%lf", &w.packing, &w.topology,
				   &w.fragmentation) != 3) {
				usage();
				return 2;
			}
			end = optarg + strlen(optarg);
			break;
		case 'P': png = optarg; end = optarg + strlen(optarg); break;
		case 'D': data = optarg; end = optarg + strlen(optarg); break;
		default: usage(); return 2;
		}
		if (!end || *end) {
			usage();
			return 2;
		}
	}
	if (optind < argc || n_nodes < KINDS || pods < 100 || load <= 0.0 || load > 2.0 ||
	    w.packing < 0 || w.topology < 0 || w.fragmentation < 0) {
		fprintf(stderr, "sim_placement: --nodes >= %u, --pods >= 100, 0 < --load <= 2, "
				"weights >= 0\n", KINDS);
		usage();
		return 2;
	}
	memset(runs, 0, sizeof(runs));
	if (classes_init(cls) < 0)
		goto out;
	for (unsigned i = 0; i < n_nodes; i++)
		gpus += cls[i % KINDS].topo->n;
	if (trace_make(&tr, pods, gpus, load, seed) < 0)
		goto out;
	for (unsigned c = 0; c < CHOOSERS; c++) {
		if (run_init(&runs[c], &choosers[c], &tr, cls, n_nodes, &w, seed) < 0)
			goto out;
		run_trace(&runs[c]);
	}
	report(runs, &tr, n_nodes, gpus, load, seed, &w);
	ret = 0;
	if (png && !data) {
		int fd = mkstemp(tmp);

		if (fd < 0) {
			perror("sim_placement: mkstemp");
			goto out;
		}
		close(fd);
	}
	if (data || png) {
		const char *path = data ? data : tmp;

		if (write_plot_data(path, runs, &tr) < 0)
			fprintf(stderr, "sim_placement: cannot write %s\n", path);
		else if (png && plot(png, path, runs, &tr, n_nodes, seed) < 0)
			fprintf(stderr, "sim_placement: gnuplot failed to draw %s\n", png);
		else if (png)
			printf("# plot: %s\n", png);
		if (!data)
			unlink(tmp);
	}
out:
	if (ret)
		fprintf(stderr, "sim_placement: out of memory\n");
	for (unsigned c = 0; c < CHOOSERS; c++)
		run_fini(&runs[c]);
	for (unsigned k = 0; k < KINDS; k++)
		free(cls[k].topo);
	free(tr.pods);
	return ret;
}
