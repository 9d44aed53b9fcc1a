/* Shared only by the informer's files: its streams and state, and what each
 * file does for the others.
 *
 * The informer: one thread that lists and then watches nodes, pods and pod
 * groups, applying what it learns to the store as its single writer.
 *
 * Each kind is a stream with a small state machine, all driven by one curl
 * multi handle:
 *
 *   LIST (pages of `limit`, following `continue`) --done--> WATCH from the
 *   list's resourceVersion --stream ends (server timeout)--> WATCH again from
 *   the last resourceVersion seen
 *
 * Failures and what they cause:
 *   - 410 (as an HTTP status, or an ERROR event with code 410, on a watch or an
 *     expired `continue`): relist from scratch, then *replace*: objects missing
 *     from the new list are deleted from the cache (their GPUs freed).
 *   - connection errors, 429, 5xx, a stream cut mid-event: watch again from the
 *     last resourceVersion after a capped exponential backoff with jitter
 *     (about 0.8 s doubling to 30 s, reset after a watch stayed up for a
 *     minute). Never a relist: relists are what overload API servers.
 *   - 401: re-read the token file, then back off and retry.
 *   - 404 on a PodGroup list or watch: that API is not served (the CRD is not
 *     installed, the gate is off); for another scheduler's PodGroups, 403 too
 *     (troupe may not read them, kind_optional); that stream is
 *     disabled with one log line, what it had read is forgotten, and it is
 *     retried every few minutes (an API installed later is picked up).
 *   - 403: as any failure, and the permission (list or watch of that kind) is
 *     missing until that request succeeds again.
 *
 * Readiness. The informer is also what knows whether troupe can serve: it is
 * not ready while an initial list is missing, while a stream fails to
 * (re)connect (from its first failed list or watch request until its next list
 * or watch answers 200; a watch that ends after being answered is not a
 * failure, only a new attempt that fails is, so a server ending watches on its
 * timeout never flaps readiness), and while a permission is missing. Missing
 * permissions are learnt from the 403s above and from SelfSubjectAccessReviews
 * of every permission troupe needs, sent at start and every access_check_s on
 * the same multi handle; a review that cannot be made (network, 5xx, the API not
 * served) changes nothing. The result is published under a mutex for /readyz;
 * every change of state is logged once.
 *
 * Watch events are newline-delimited JSON objects that can be split anywhere
 * across reads: bytes are buffered and only complete lines are applied. A
 * partial line left when a stream ends is discarded, never applied.
 *
 * The files: the thread, its loop, start and stop (informer.c); list and
 * watch requests and what their ends cause (informer_stream.c); applying
 * listed objects and watch events, and the sweep after a relist
 * (informer_events.c); readiness and the access reviews (informer_ready.c).
 */
#ifndef TROUPE_CACHE_INFORMER_H
#define TROUPE_CACHE_INFORMER_H

#include <stdbool.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

#include <curl/curl.h>

#include "cache/api_internal.h"
#include "common/limits.h"
#include "common/strbuf.h"
#include "common/strmap.h"

enum kind { K_NODES, K_PODS, K_PODGROUPS, K_PG_UPSTREAM, K_PG_VOLCANO, K_PG_KAI, K_Q_VOLCANO,
	    K_Q_KAI, K_DRA_SLICES, K_DRA_CLAIMS, K_COUNT };

struct kind_info {
	const char *name;
	const char *path;
	/* The permissions its requests need, checked for readiness;
	 * CACHE_PERM_COUNT for an optional kind, which readiness never waits on. */
	enum cache_perm list, watch;
	int pg_api;                     /* enum cache_pg_api of a PodGroup kind; -1 */
	int q_api;                      /* enum cache_queue_api of a Queue kind; -1 */
	int dra;                        /* 1: ResourceSlices, 2: ResourceClaims; 0 */
	const char *what;               /* for logs: "Volcano PodGroups" */
	const char *api_version;        /* of a kind that may not be served, else NULL */
};

/* An optional kind: another scheduler's PodGroups or Queues, or DRA's slices
 * and claims. A 404 (the API is not served) or a 403 (troupe may not read it)
 * disables its stream with one log line, and it is tried again every
 * podgroup_retry_s. DRA's streams do not run at all without a DRA driver
 * configured (cache_opts.dra_drivers). */
static inline bool kind_optional(enum kind k)
{
	return k >= K_PG_UPSTREAM;
}

/* What each stream lists and watches (informer.c). */
extern const struct kind_info kinds[K_COUNT];

#define REVIEW_PATH "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

enum phase {
	P_START,        /* begin a list when due */
	P_LISTING,
	P_WATCH_DUE,    /* begin a watch when due */
	P_WATCHING,
	P_DISABLED,     /* podgroups without the CRD: list again when due */
};

enum { MAX_LINE = 64 * 1024 * 1024, RV_LEN = 64, MAX_STATUS = 64 * 1024 };

/* Text the informer logs, cut to fit a log line: the message of the API
 * server's Status, the reason a request failed ("HTTP 503: " and that message,
 * or libcurl's reason), and the reason a review failed or was denied. */
enum { STATUS_MSG_BUF = 320, FAILURE_REASON_BUF = 360, REVIEW_REASON_BUF = 256 };

/* A server that takes the connection and then says nothing (hung, overloaded,
 * a proxy whose backend is gone) fails no request for minutes: a watch with
 * no answer (its headers) after ANSWER_DEADLINE_S is given up and retried, and
 * a list is failing for /readyz while it still waits. A watch answered 200 that ends before it has
 * lived WATCH_HEALTHY_MS with no event, SHORT_WATCHES_FAILING times in a row
 * and for SHORT_WATCHES_SPAN_S, is failing too (the server cannot serve
 * watches), until one lives that long. A few such ends now and then are
 * normal (a server's timeout may end a watch a moment after it began). */
enum { ANSWER_DEADLINE_S = 10, WATCH_HEALTHY_MS = 500, SHORT_WATCHES_FAILING = 3,
       SHORT_WATCHES_SPAN_S = 5 };

struct stream {
	struct cache_informer *inf;
	enum kind kind;
	enum phase phase;
	CURL *easy;
	struct curl_slist *headers;
	struct strbuf body;             /* a list page, or the Status of a refused watch */
	struct strbuf line;             /* watch bytes not yet ending in a newline */
	char rv[RV_LEN];                /* last resourceVersion seen */
	char *cont;                     /* continue token of the list in progress */
	struct strmap seen;             /* keys listed so far (owned strings) */
	bool synced;                    /* initial list applied (or CRD absent) */
	bool absent_said;               /* disabled (a PodGroup API) and logged so */
	bool relist;                    /* a watch said 410: list again */
	bool broken;                    /* the stream carried something unusable */
	uint64_t due_ns;                /* when P_START / P_WATCH_DUE may proceed */
	unsigned backoff_ms;
	uint64_t started_ns;            /* of the current request */
	uint64_t events_this_watch;
	long retry_after_s;
	bool answered;                  /* the current watch got 200 (headers in) */
	bool headers_in;                /* the current request has its answer's headers */
	unsigned short_watches;         /* answered watches in a row that ended at once */
	uint64_t healthy_ns;            /* when a list or watch last proved the server well */
	bool failing;                   /* the last list or watch request failed */
	char failure[TROUPE_MESSAGE_BUF]; /* what failed: "watch pods: HTTP 503: ..." */
	char curl_err[CURL_ERROR_SIZE]; /* libcurl's detailed reason (TLS, DNS, ...) */
};

/* One SelfSubjectAccessReview in flight. */
struct review {
	CURL *easy;                     /* NULL when none is in flight */
	struct curl_slist *headers;
	char *body;                     /* the review posted */
	struct strbuf answer;
	char curl_err[CURL_ERROR_SIZE];
};

struct cache_informer {
	struct cache *cache;
	struct cache_api *api;
	struct cache_informer_opts opts;
	CURLM *multi;
	pthread_t thread;
	/* Posted once the thread has claimed the cache's writer token: start
	 * returns only then, so no other thread ever writes as the writer after
	 * it (main's housekeeping asks the token whether it may remove entries). */
	sem_t claimed;
	bool stop;                      /* atomic */
	struct stream streams[K_COUNT];
	unsigned rng;
	/* Access checks and what they found: informer thread only. */
	struct review reviews[CACHE_PERM_COUNT];
	unsigned reviews_running;
	uint64_t reviews_due_ns;        /* next round; 0: none */
	bool review_warned;             /* this round already logged a failed review */
	uint32_t review_denied;         /* permissions the last answered review refused */
	uint32_t request_denied;        /* permissions a list or watch was refused (403) */
	enum cache_ready_state shown;   /* the state last logged */
	bool was_ready;
	/* Counters: written by the informer thread, read anywhere (relaxed). */
	struct cache_informer_stats stats;
	/* What /readyz tells: written by the informer thread, read anywhere. */
	pthread_mutex_t lock;
	struct cache_readiness readiness;       /* guarded by lock */
};

static inline void stat_add(uint64_t *ctr, uint64_t n)
{
	__atomic_add_fetch(ctr, n, __ATOMIC_RELAXED);
}

/* ---- Readiness and access reviews (informer_ready.c) ------------------------------ */

/* Work out the readiness from what the streams and checks found, publish it,
 * and log when its state changes. Informer thread. */
void cache__inf_readiness_update(struct cache_informer *inf);

/* A list or watch of <s> was refused (403): its permission is missing until
 * that request succeeds again. */
void cache__inf_request_forbidden(struct stream *s, bool watch, const char *msg);

/* A list or watch request of <s> was answered: it is allowed, and the stream
 * is reaching the server. */
void cache__inf_request_answered(struct stream *s, bool watch);

/* A list or watch request of <s> failed (<reason>): troupe is not ready until
 * one is answered. */
void cache__inf_request_failed(struct stream *s, bool watch, const char *reason);
/* A watch of <s> answered 200 ended at once (<reason>): failing after
 * SHORT_WATCHES_FAILING in a row. */
void cache__inf_watch_ended_at_once(struct stream *s, const char *reason);
/* Once a second: requests waiting past ANSWER_DEADLINE_S are failing, and a
 * watch that has lived WATCH_HEALTHY_MS is healthy again. Informer thread. */
void cache__inf_health_tick(struct cache_informer *inf, uint64_t now);

/* What a request that just ended got, for logs and /readyz: libcurl's reason
 * (<curl_err>, else <rc>'s text), or the HTTP status with the message of the
 * Status the server sent in <body> (the message alone in <msg>). */
void cache__inf_describe_failure(CURLcode rc, const char *curl_err, long status,
				 const struct strbuf *body, char *out, size_t len, char *msg,
				 size_t msglen);

/* One round: a review of every permission, all at once. */
void cache__inf_reviews_start(struct cache_informer *inf);

void cache__inf_review_done(struct cache_informer *inf, struct review *rv, CURLcode rc);

void cache__inf_review_end(struct cache_informer *inf, struct review *rv);

/* The review <easy> belongs to, or NULL when it is a stream's. */
struct review *cache__inf_review_of(struct cache_informer *inf, CURL *easy);

/* ---- Requests (informer_stream.c) ------------------------------------------------ */

void cache__inf_request_end(struct stream *s);

void cache__inf_start_list(struct stream *s);

void cache__inf_start_watch(struct stream *s);

void cache__inf_on_done(struct stream *s, CURLcode rc);

/* ---- Objects and events (informer_events.c) --------------------------------------- */

void cache__inf_seen_clear(struct stream *s);

void cache__inf_seen_add(struct stream *s, const char *key);

void cache__inf_remember_rv(struct stream *s, const char *rv);

/* Apply one object of the stream's kind. <deleted>: it is gone. When <key> is
 * given, the object's identity is written there (for relist bookkeeping). */
void cache__inf_apply_object(struct stream *s, const cJSON *obj, bool deleted, char *key,
			     size_t keylen);

/* After a complete list: delete what the list did not contain. */
void cache__inf_sweep(struct stream *s);

/* Split the stream into lines and apply each complete one. */
size_t cache__inf_on_watch_data(char *ptr, size_t size, size_t n, void *arg);

#endif
