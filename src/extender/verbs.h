/* The extender verbs, independent of HTTP: each takes a request body and fills
 * a reply (status and JSON body). server.c routes requests here; unit tests
 * call these directly.
 *
 * Thread: any; verbs share nothing but the cache.
 */
#ifndef TROUPE_EXTENDER_VERBS_H
#define TROUPE_EXTENDER_VERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/api.h"
#include "cache/cache.h"
#include "cache/events.h"
#include "cache/podgroup_status.h"
#include "common/strbuf.h"
#include "extender/config.h"
#include "gang/gang.h"
#include "placement/placement.h"

struct ext_recover;
struct ext_top_choice;

struct ext_service {
	struct cache *cache;
	const struct ext_config *cfg;
	const struct placement_score_ops *score;
	const char *source;             /* where the cluster state comes from, for logs */
	struct cache_binder *binder;    /* posts bindings; NULL in snapshot mode */
	struct cache_informer *informer;        /* NULL in snapshot mode */
	struct placement_registry *registry;    /* topology classes; may be NULL */
	struct gang_manager *gangs;             /* gang admission; NULL disables it */
	struct ext_counters *counters;          /* request counters for /metrics; may be NULL */
	struct ext_cycle *cycle;        /* filter's scores for prioritize (cycle.h); NULL: off */
	struct ext_top_choice *top_choice;      /* prioritize's best nodes for bind
						 * (top_choice.h); NULL: off */
	/* Leader election (cache/lease.h): only the holder serves the verbs and
	 * answers ready; NULL without leader election. */
	const struct cache_lease *lease;
	/* The verbs' HTTP server, for /metrics (connection guard counters); set
	 * once it runs, before the ops listener starts; NULL until then. */
	struct ext_server *server;
	/* Gang recovery (recover.h), for /metrics; NULL when off. */
	struct ext_recover *recover;
	/* Kubernetes Events of troupe's decisions (cache/events.h): emitting
	 * only queues. NULL: off (events.enabled false, or no API server). */
	struct cache_events *events;
	/* The PodGroup status writer (cache/podgroup_status.h), for /metrics;
	 * NULL when off. */
	struct cache_pgs *pgstatus;
	/* Benchmarks only (bench/http_baseline): answer every POST verb with
	 * <reply> after reading the body (level 0), or after also parsing it with
	 * cJSON (level 1); NULL in troupe. */
	const struct ext_baseline *baseline;
};

struct ext_baseline {
	unsigned level;
	const char *reply;
	size_t reply_len;
};

/* Counters the server and the verbs bump (relaxed atomics) and /metrics reads. */
enum ext_counter_verb { EXT_C_FILTER, EXT_C_PRIORITIZE, EXT_C_BIND, EXT_C_PREEMPT, EXT_C_OTHER,
			EXT_C_VERBS };
/* troupe_request_duration_seconds' upper bounds, 50 us to 10 s; one more
 * bucket counts what is slower (+Inf). */
enum { EXT_LATENCY_BOUNDS = 17 };
extern const double ext_latency_bounds_s[EXT_LATENCY_BOUNDS];
struct ext_counters {
	uint64_t requests[EXT_C_VERBS];
	uint64_t errors[EXT_C_VERBS];   /* non-200 answers, or 200 with an Error */
	uint64_t filter_ns_total;       /* server-side time in filter, summed */
	/* Time from a request's headers to its answer, by verb: counts per
	 * bucket (not cumulative; /metrics sums them) and the sum. */
	uint64_t latency[EXT_C_VERBS][EXT_LATENCY_BOUNDS + 1];
	uint64_t latency_ns_sum[EXT_C_VERBS];
};

/* Count one answered request of <verb> that took <elapsed_ns>. Thread: any. */
void ext_count(struct ext_counters *c, enum ext_counter_verb verb, bool error,
	       uint64_t elapsed_ns);

/* How a verb answered later tells its caller: <done>(<ctx>) runs, on another
 * thread, once the reply is complete. */
struct ext_async {
	void (*done)(void *ctx);
	void *ctx;
	/* Who asked ("10.0.0.7:51234"), for refusals' log lines; NULL: not
	 * known. Read only during the call. */
	const char *peer;
};

struct ext_reply {
	unsigned status;                /* HTTP status */
	struct strbuf body;             /* JSON */
	bool error;                     /* the answer carries an Error */
};

void ext_reply_init(struct ext_reply *r);
void ext_reply_fini(struct ext_reply *r);

void ext_filter(const struct ext_service *svc, const char *body, size_t len,
		struct ext_reply *r);
void ext_prioritize(const struct ext_service *svc, const char *body, size_t len,
		    struct ext_reply *r);
/* Returns true when <r> is complete on return. With a live API server the
 * binding is posted asynchronously: it returns false and completes <r> later
 * through <async> (which must then be given). */
bool ext_bind(const struct ext_service *svc, const char *body, size_t len, struct ext_reply *r,
	      const struct ext_async *async);
void ext_preempt(const struct ext_service *svc, const char *body, size_t len,
		 struct ext_reply *r);
/* GET /debug/state: nodes, their GPU usage, pod counts, informer counters. */
void ext_debug_state(const struct ext_service *svc, struct ext_reply *r);
/* GET /readyz: 200 {"status":"ready"}, else 503 with why: {"status":"syncing"},
 * {"status":"api-unreachable","detail":"watch pods: ..."} or
 * {"status":"forbidden","missing":["create pods/binding", ...]}. */
void ext_readyz(const struct ext_service *svc, struct ext_reply *r);
/* GET /metrics: Prometheus text exposition (version 0.0.4). */
void ext_metrics(const struct ext_service *svc, struct ext_reply *r);
/* GET /debug/cache: every node name, pod (with what it occupies) and pod group
 * troupe knows, to compare with the API server. */
void ext_debug_cache(const struct ext_service *svc, struct ext_reply *r);

#endif
