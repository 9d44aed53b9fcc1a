/* sim_placement's private contract: the types its files share and the few
 * small helpers they all call on the hot path.
 *
 * The program is split along what each part decides: sim_cluster.c what the
 * simulated nodes are (their link matrices and free NVLink islands),
 * sim_trace.c which pods arrive when and for how long, sim_choosers.c how
 * troupe and each baseline picks a node's devices, sim_replay.c how one
 * scheduler plays the trace out and what it counts, sim_report.c how those
 * counts become the printed tables and the plot, sim_placement.c which
 * options run it. Nothing here is used outside bench/sim_placement.
 *
 * The random numbers, the node view and the sample clock are static inline
 * here, as they were static in the one file: the replay loop calls them for
 * every node at every event, and the split must not add a call to them.
 */
#ifndef TROUPE_BENCH_SIM_PLACEMENT_H
#define TROUPE_BENCH_SIM_PLACEMENT_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
static const double mean_life = 60.0;  /* minutes */

/* ---- Random numbers (splitmix64: small, seedable, good enough here) ---------- */

struct rng {
	uint64_t s;
};

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform in [0, n). */
static inline unsigned rng_below(struct rng *r, unsigned n)
{
	return (unsigned)(rng_unit(r) * n);
}

static inline double rng_exp(struct rng *r, double mean)
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

/* The time of island sample <i>, in minutes. */
static inline double sample_time(size_t i)
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

static inline struct cache_node_view node_view(const struct sim_node *sn)
{
	return (struct cache_node_view){ .node = &sn->node, .used = sn->used };
}

/* ---- Between the files ------------------------------------------------------------- */

/* sim_cluster.c: build the KINDS node types of <c> (in the order of the
 * cluster's mix) with their island tables. 0 or -ENOMEM; on failure the
 * topologies already built are the caller's to free, as on success. */
int sim_classes_init(struct node_class *c);

/* sim_trace.c: generate <n> arrivals for a cluster of <gpus> GPUs at offered
 * load <load>, from <seed>. 0 or -ENOMEM; tr->pods is the caller's to free. */
int sim_trace_make(struct trace *tr, size_t n, unsigned gpus, double load, uint64_t seed);

/* sim_choosers.c: troupe first, then the baselines; the report compares every
 * other entry with the first. */
extern const struct chooser sim_choosers[CHOOSERS];

/* sim_replay.c: set up one scheduler <ch> over <n_nodes> nodes mixed from
 * <cls>, replay <tr> through it, free what it holds. sim_run_init returns 0 or
 * -ENOMEM, and sim_run_fini is safe after either (and on a zeroed run). */
int sim_run_init(struct run *r, const struct chooser *ch, const struct trace *tr,
		 const struct node_class *cls, unsigned n_nodes, const struct placement_weights *w,
		 uint64_t seed);
void sim_run_trace(struct run *r);
void sim_run_fini(struct run *r);

/* sim_report.c: print the two tables for the CHOOSERS <runs> (troupe first);
 * write the island series for gnuplot to <path>; draw it to <png>. The last
 * two return 0 or a negative errno (-EIO when gnuplot fails). */
void sim_report(const struct run *runs, const struct trace *tr, unsigned n_nodes, unsigned gpus,
		double load, uint64_t seed, const struct placement_weights *w);
int sim_plot_data_write(const char *path, const struct run *runs, const struct trace *tr);
int sim_placement_plot(const char *png, const char *data, const struct run *runs,
		       const struct trace *tr, unsigned n_nodes, uint64_t seed);

#endif
