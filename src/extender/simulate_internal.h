/* simulate_internal: what the files of one replay share (simulate_run.c the
 * event loop and a job's start, simulate_walk.c the order the waiting jobs are
 * tried in and the holds for a starving gang, simulate_measure.c what the run
 * counts as it goes). Nothing outside troupe simulate's replay uses it.
 */
#ifndef TROUPE_EXTENDER_SIMULATE_INTERNAL_H
#define TROUPE_EXTENDER_SIMULATE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "extender/simulate.h"
#include "gang/gang.h"

struct departure {
	double at;
	size_t pod, job;
};

struct node_stat {
	unsigned free, used, frag;      /* free GPUs; in use; free no frag_gpus pod can use */
	unsigned island_max;            /* the largest free all-NVLink set (1 when none known) */
	bool island;                    /* a free all-NVLink set of frag_gpus */
	/* Physical GPUs none of whose devices (replicas, MIG devices) is in
	 * use; whether nothing on the node is. */
	unsigned whole;
	bool empty;
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
	unsigned tot_free, tot_used, tot_frag, islands, tot_whole, empty_nodes;
	/* Nodes by free GPUs and by largest free all-NVLink set: an arrival's
	 * fragmentation is read from them, not from every node. */
	unsigned free_hist[CACHE_MAX_GPUS + 1], island_hist[CACHE_MAX_GPUS + 1];
	/* Each node's finest network domain (an index, UINT_MAX: none) and the
	 * free GPUs of each domain; the smallest waiting gang's GPUs (0: none). */
	unsigned *node_dom, *dom_free, n_dom;
	unsigned min_gang_waiting;
	/* The starving gang whose GPUs troupe's gang manager holds as they free
	 * (SIZE_MAX: none), its target nodes, and for every other job a copy of
	 * the nodes with the targets full, rebuilt when cur_gen moves on. */
	bool holds_on;
	size_t hold_job;
	bool *held;
	struct cache_node_view *masked;
	uint64_t cur_gen, masked_gen;
	unsigned long n_refused;        /* measured or not */
	uint64_t rng;
};

/* simulate_run.c */
struct placement_request sim__job_request(const struct sim_job *j);
/* Start what of job <job> fits now; true when every pod has started. */
bool sim__try_job(struct replay *r, size_t job, double now);

/* simulate_walk.c */
unsigned sim__list_of(const struct replay *r, size_t job);
/* The nodes job <job> may be placed on now: all of them, or with the
 * starving gang's targets full for any other job. */
const struct cache_node_view *sim__views_for(struct replay *r, size_t job);
/* A walk at <now>: the new arrivals into their lists; then every waiting job
 * when something was freed since the last walk (<freed>), else the new ones. */
void sim__walk(struct replay *r, bool freed, double now);

/* simulate_measure.c */
void sim__node_update(struct replay *r, unsigned i);
void sim__count_arrival(struct replay *r, const struct sim_job *j);
void sim__account(struct replay *r, double from, double to);
int sim__sample(struct replay *r, double now);
int sim__domains_init(struct replay *r);

#endif
