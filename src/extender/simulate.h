/* simulate: `troupe simulate`, the what-if simulator. It loads a cluster
 * snapshot as the daemon does (cache_snapshot_load with placement's topology
 * hook), replays a workload trace over it in simulated time, and reports what
 * each scoring policy would have done: job waits and completion times, GPU
 * utilisation, fragmentation, NVLink-complete pods and queue shares, with a
 * plot.
 *
 * The decisions are the daemon's own functions, not copies: a pod's nodes are
 * those placement_check_request accepts (filter), ranked by
 * placement_score_memoized under the policy of placement_score_find
 * (prioritize), the best winning and ties drawn at random as kube-scheduler
 * does; its devices are placement_node_choose's (bind); a gang's members are
 * placed all at once by gang_plan_make, the planner the gang manager runs at
 * admission; the waiting jobs are retried in the order of gang_fair_precedes,
 * the rule the gang manager orders waiting gangs by. What the simulator does
 * not model is said in docs (starvation holds, a gang refused behind a
 * waiting one, preemption, plan timeouts).
 *
 * The files: simulate.c the command line and the order of a run,
 * simulate_trace.c the trace format (and its generator), simulate_run.c the
 * event loop and what it counts, simulate_report.c the tables, the JSON and
 * the plot. Only ext_simulate_main is for main.c; the rest is shared between
 * those files (and the unit test).
 *
 * Errors: 0 or -errno, with a message in <err> where a function takes one.
 */
#ifndef TROUPE_EXTENDER_SIMULATE_H
#define TROUPE_EXTENDER_SIMULATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "common/limits.h"
#include "gang/gang.h"
#include "placement/placement.h"

/* `troupe simulate ARGS`: argv[0] is "simulate". Exit codes as the daemon's:
 * 0 done, 1 a runtime failure, 2 bad usage or input. */
int ext_simulate_main(int argc, char **argv);

enum {
	SIM_ERR_LEN = 512,
	SIM_MAX_QUEUES = 64,
	SIM_QUEUE_BUF = 64,
	SIM_MAX_POLICIES = 8,
	SIM_MAX_PODS_PER_JOB = 4096,
	SIM_MAX_JOBS = 2000000,
	SIM_MAX_MIX = 32,
	/* The extender weight of config/scheduler-config.yaml, for the kube
	 * rankers (tests/unit/extender/test_config.c holds them equal). */
	SIM_EXTENDER_WEIGHT = 15,
	SIM_MAX_EXTENDER_WEIGHT = 1000000,
};

/* ---- The trace --------------------------------------------------------------- */

struct sim_job {
	char name[K8S_NAME_BUF];
	double arrival;                 /* seconds from the trace's start */
	double duration;                /* seconds each pod runs once started */
	unsigned pods;                  /* >= 1 */
	unsigned gpus;                  /* per pod, >= 1 */
	/* What the pods ask for: an index in the config's resources.gpu once
	 * sim_trace_resolve ran (in sim_trace.resources before, -1: the first). */
	int resource;
	unsigned gang;                  /* pods started together (0: none, each on its own) */
	unsigned queue;                 /* index in sim_trace.queues */
	int32_t priority;               /* the pods' priority (default 0) */
	struct placement_policy policy; /* troupe.io/topology */
	bool measured;                  /* false: warm-up, not counted */
	size_t seq;                     /* order in the file, then generated: ties */
};

struct sim_trace {
	struct sim_job *jobs;           /* sorted by arrival, stable */
	size_t n;
	char queues[SIM_MAX_QUEUES][SIM_QUEUE_BUF];
	unsigned n_queues;
	char resources[CACHE_MAX_GPU_RESOURCES][128];  /* the jobs' resource names */
	unsigned n_resources;
	uint64_t seed;                  /* ties between nodes */
	size_t n_generated;             /* of n, how many the generator made */
};

/* Read the trace at <path> (YAML or JSON), generating its synthetic part for
 * a cluster of <cluster_gpus> GPUs. 0, or -EINVAL / -ENOENT / -ENOMEM with a
 * message naming the job and field in <err>. sim_trace_fini frees it. */
int sim_trace_load(struct sim_trace *t, const char *path, unsigned cluster_gpus, char *err,
		   size_t errlen);
/* The same from a parsed document (the unit test's way in). */
struct cJSON;
int sim_trace_from_json(struct sim_trace *t, const struct cJSON *doc, unsigned cluster_gpus,
			char *err, size_t errlen);
void sim_trace_fini(struct sim_trace *t);
/* Turn each job's resource name into its index in the managed names <names>
 * (of <n>); a job naming none asks for the first. -EINVAL with the name in
 * <err> when one is not managed. */
int sim_trace_resolve(struct sim_trace *t, const char *const *names, unsigned n, char *err,
		      size_t errlen);

/* "90", "90s", "1.5m", "2h", "1d" (a number is seconds) into seconds. */
int sim_duration_parse(const char *s, double *out);

/* ---- One run: a policy over the cluster --------------------------------------- */

struct sim_cluster {
	struct cache_node_view *base;   /* every node, with the snapshot's usage */
	unsigned n;
	unsigned gpus;                  /* allocatable over the nodes that offer GPUs */
};

struct sim_sample {
	double t;
	unsigned busy;                  /* GPUs in use */
	unsigned waiting;               /* jobs with a pod not started */
	unsigned islands;               /* nodes with a free all-NVLink set of frag_gpus */
};

/* Where and when one pod ran (kept with per_job only). */
struct sim_pod_result {
	double start;
	unsigned node;                  /* index in sim_cluster.base */
	uint64_t devices;
};

struct sim_job_result {
	double start;                   /* every pod started (gang: all at once) */
	double end;                     /* the last pod ended */
	double first_start;
	struct sim_pod_result *pods;    /* per pod; only with per_job */
	bool refused;                   /* can never fit the cluster */
	bool done;
};

struct sim_settings {
	const char *policy;             /* a name of placement_score_find */
	struct placement_weights w;
	unsigned extender_weight;       /* kube rankers: config/scheduler-config.yaml's */
	const struct gang_levels *levels;       /* NULL or n == 0: gang_default_levels */
	/* Every gang as if its pods carried troupe.io/gang-topology
	 * required:<key>: troupe's planner keeps it inside one domain of the
	 * label or it waits (NULL: none). Not for a peer's @GANG planner. */
	const char *gang_required_key;
	uint64_t seed;
	unsigned frag_gpus;             /* fragmentation: free GPUs no job of this size can use */
	bool per_job;                   /* keep each pod's start */
	bool log_refusals;              /* say on stderr why the first jobs are refused */
	/* The time averages end at the last arrival (a steady state, as
	 * bench/sim_quality.py measures) instead of the last departure. */
	bool until_last_arrival;
	/* The order the waiting jobs are tried in at every retry. false: the
	 * gang manager's fair order, gang_fair_precedes over each job's
	 * priority, its queue's weighted share (GPUs only: the GPUs of the
	 * queue's pods, the snapshot's and the trace's, over the cluster's, over
	 * its weight), its arrival and its name. true (--order fifo): arrival order. */
	bool fifo;
	/* Holds for a starving gang, as troupe's gang manager makes them
	 * (gang.starvation_seconds): the head of the fair order among waiting
	 * gangs, once it has waited this long, has the emptiest nodes that can
	 * take all its members kept from every other job until it starts. Only
	 * under troupe's own gang planner (no @GANG); negative: no holds. */
	double starvation_s;
	/* Each trace queue's weight, as sim_trace.queues indexes them (the
	 * config's queues:); 0 counts as 1. */
	double queue_weights[SIM_MAX_QUEUES];
	/* The GPUs the snapshot's pods hold in each trace queue (their queue
	 * label, else their namespace): part of its share the whole run. */
	unsigned queue_base_gpus[SIM_MAX_QUEUES];
};

/* Jobs by size: the job's GPUs (pods x GPUs per pod), bucket b holding sizes
 * [2^b, 2^(b+1)), the last everything above. */
enum { SIM_SIZE_BUCKETS = 12 };

static inline unsigned sim_size_bucket(unsigned gpus)
{
	unsigned b = gpus ? 31u - (unsigned)__builtin_clz(gpus) : 0;

	return b < SIM_SIZE_BUCKETS ? b : SIM_SIZE_BUCKETS - 1;
}

/* What the measured jobs of one size did (the report adds their waits). */
struct sim_size_stat {
	unsigned long jobs;             /* measured arrivals */
	unsigned long pods_multi, pods_nvlink;  /* multi-GPU pods; all-NVLink ones */
	double quality_sum;
	/* Single-pod jobs' arrivals: frag_jobs of them, then those that found
	 * some node with the GPUs free but none with them all NVLinked
	 * (topology), and those that found no node with them free while the
	 * cluster had as many free in all (node). */
	unsigned long frag_jobs, topo_frag, node_frag;
	unsigned long gangs;            /* gangs placed */
	unsigned long in_one[GANG_MAX_LEVELS];  /* of them, inside one domain of a level */
};

struct sim_result {
	const char *policy;
	struct sim_job_result *jobs;    /* one per trace job */
	unsigned long jobs_measured, jobs_done, jobs_refused;
	unsigned long pods_multi, pods_nvlink;  /* measured multi-GPU pods; all-NVLink ones */
	double quality_sum;             /* placement_set_quality over those pods */
	double t_begin, t_end;          /* the measured window */
	double makespan;                /* first arrival to last departure */
	double busy_integral;           /* GPU-seconds in use over the window */
	double free_integral, frag_integral;    /* GPU-seconds free; of them fragmented */
	double island_integral;         /* node-seconds with a free all-NVLink frag_gpus set */
	/* GPU-seconds of physical GPUs with no device in use (a shared GPU
	 * counts only when none of its replicas or MIG devices is), and
	 * node-seconds of nodes with nothing in use. */
	double whole_integral, empty_integral;
	unsigned peak_busy;             /* most GPUs the trace's pods held at once */
	double queue_gpu_s[SIM_MAX_QUEUES];     /* measured GPU-seconds by queue */
	struct sim_size_stat by_size[SIM_SIZE_BUCKETS];
	/* GPU-seconds free in finest-level domains with fewer free GPUs than the
	 * smallest waiting gang asks (while one waits): domain fragmentation. */
	double stranded_integral;
	struct sim_sample *samples;
	size_t n_samples, cap_samples;
};

/* Replay <t> over <c> under <s>. 0, -EINVAL (an unknown policy) or -ENOMEM;
 * sim_result_fini frees it either way. */
int sim_run(const struct sim_cluster *c, const struct sim_trace *t,
	    const struct sim_settings *s, struct sim_result *out, char *err, size_t errlen);
void sim_result_fini(struct sim_result *r, size_t n_jobs);

/* ---- Baseline device choosers (simulate_choosers.c) ---------------------------- */

/* A set of exactly <k> devices of <free_mask> on the node in <v>, or 0; <rng>
 * is the run's random state. */
typedef uint64_t (*sim_choose_fn)(const struct cache_node_view *v, uint64_t free_mask,
				  unsigned k, uint64_t *rng);
/* "lowest", "random", "sum-pairs" or "besteffort", else NULL. */
sim_choose_fn sim_chooser_find(const char *name);

/* A gang planner of the peers (simulate_gangs.h): <members> slots for pods
 * asking <req> over <views>, or -ENOSPC. */
struct gang_plan;
typedef int (*sim_gang_fn)(const struct cache_node_view *views, unsigned n, unsigned members,
			   const struct placement_request *req, const struct gang_levels *levels,
			   sim_choose_fn chooser, uint64_t *rng, struct gang_plan *out);

/* The run's random numbers (splitmix64): node ties and the random chooser. */
static inline uint64_t sim_rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* ---- Policies: RANKER[+CHOOSER][@GANG] (simulate_rank.c) ------------------------- */

enum sim_ranker {
	SIM_RANK_SCORE,                 /* troupe's fine score (the daemon's best node) */
	SIM_RANK_KUBE,                  /* kube-scheduler's LeastAllocated + troupe's rank */
	SIM_RANK_KUBE_SCALED,           /* the same with troupe's old scaled 0..10 answer */
	SIM_RANK_MOST_ALLOCATED,
	SIM_RANK_LEAST_ALLOCATED,
	SIM_RANK_BEST_FIT,
};

struct sim_policy {
	enum sim_ranker ranker;
	char score[SIM_QUEUE_BUF];      /* troupe's scoring policy (placement_score_find) */
	sim_choose_fn chooser;          /* NULL: placement_node_choose, bind's */
	sim_gang_fn gang;               /* NULL: gang_plan_make, the gang manager's */
};

/* Parse a policy name: "topology", "binpack+lowest", "kube:topology",
 * "least-allocated+besteffort@kueue-bestfit". 0, or -EINVAL when a part is
 * unknown. */
int sim_policy_parse(const char *name, struct sim_policy *out);
/* The simulator's own rankers, NULL-terminated, for --help. */
extern const char *const sim_ranker_names[];

struct sim_rank_args {
	const struct sim_policy *policy;
	const struct placement_score_ops *ops;  /* policy->score's */
	const struct placement_weights *w;
	unsigned extender_weight;       /* kube rankers: the extender's weight */
	const struct cache_node_view *views;
	unsigned n;
	const struct placement_request *req;
	const unsigned *free_hint;      /* NULL, or each node's free GPUs (a fast refusal) */
	unsigned *fit_idx, *fit_fine;   /* scratch of n entries each */
};

/* The node a pod asking a->req goes to: the best total among the nodes the
 * filter accepts, ties drawn from <rng>; -1 when none fits. With <best_set>
 * (room for n) every node tied at the best total is listed, *n_best of them:
 * what the daemon's prioritize answers 10 for under SIM_RANK_SCORE. */
int sim_pick_node(const struct sim_rank_args *a, uint64_t *rng, unsigned *best_set,
		  unsigned *n_best);

/* ---- Reports ----------------------------------------------------------------------- */

struct sim_stats {
	double mean, p50, p95, max;
	unsigned long n;
};

/* Waits (or completion times) of the measured, finished jobs: of queue
 * <queue> and size bucket <bucket> (sim_size_bucket), -1 for any. */
void sim_job_stats(const struct sim_result *r, const struct sim_trace *t, bool completion,
		   int queue, int bucket, struct sim_stats *out);
/* Waits and completion times of the measured, finished jobs. */
void sim_wait_stats(const struct sim_result *r, const struct sim_trace *t, bool completion,
		    struct sim_stats *out);

void sim_report_text(const struct sim_result *rs, unsigned n, const struct sim_trace *t,
		     const struct sim_cluster *c, const struct sim_settings *s,
		     const char *cluster_path, const char *trace_path);
/* {"n", "mean", "p50", "p95", "max"} of <st>, or NULL when out of memory. */
struct cJSON *sim_stats_json(const struct sim_stats *st);
/* Run <r>'s measures by job size, and those of the whole run they add up
 * to, into the JSON object <p> (simulate_sizes.c). 0 or -ENOMEM. */
int sim_sizes_json(struct cJSON *p, const struct sim_result *r, const struct sim_trace *t,
		   const struct sim_settings *s);
/* The same as a Markdown table per policy, on stdout. */
void sim_sizes_text(const struct sim_result *rs, unsigned n, const struct sim_trace *t,
		    const struct sim_settings *s);
/* The name of level <l> of <lv>: its first key's last part ("zone", "spine"),
 * "clique" for the NVLink domain's. */
void sim_level_name(const struct gang_levels *lv, unsigned l, char *buf, size_t len);
/* The JSON report on stdout. 0 or -ENOMEM. */
int sim_report_json(const struct sim_result *rs, unsigned n, const struct sim_trace *t,
		    const struct sim_cluster *c, const struct sim_settings *s);
/* Write the time series for gnuplot to <data> (per policy: time, GPUs in
 * use, jobs waiting, NVLink-island nodes), and draw <png> from it when <png>
 * is set. 0, -errno, or -EIO when gnuplot fails. */
int sim_plot(const struct sim_result *rs, unsigned n, const struct sim_cluster *c,
	     const char *data, const char *png, const char *title, unsigned frag_gpus);

#endif
