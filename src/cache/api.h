/* The Kubernetes API client side of the cache: where the API server is and how
 * to authenticate (api.c), the permissions troupe needs (access.c), the
 * informer that lists and watches nodes, pods and pod groups into the store and
 * keeps troupe's readiness (informer.c), and the binder that posts pod bindings
 * (binder.c). Only api.c, informer.c and binder.c touch libcurl.
 *
 * Threads: the informer runs one thread of its own and is the store's single
 * writer while it runs; the binder runs one thread driving every binding POST
 * concurrently. A struct cache_api is immutable after creation except for its
 * bearer token, which any thread may refresh (guarded inside).
 */
#ifndef TROUPE_CACHE_API_H
#define TROUPE_CACHE_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"

struct cache_api;

/* From a kubeconfig file: its current-context (or <context> when not NULL):
 * server, certificate-authority(-data), insecure-skip-tls-verify,
 * client-certificate(-data), client-key(-data), token, tokenFile. Relative
 * paths are relative to the file's folder. Returns NULL with <err> set. */
struct cache_api *cache_api_from_kubeconfig(const char *path, const char *context, char *err,
					    size_t errlen);
/* In-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT with the
 * service account's token and CA. Returns NULL with <err> set when either
 * variable is missing or the files cannot be read. */
struct cache_api *cache_api_in_cluster(char *err, size_t errlen);
/* A plain base URL (http:// for tests and `kubectl proxy`, https:// verified
 * against the system CAs), optionally with a bearer token file. */
struct cache_api *cache_api_from_url(const char *url, const char *token_file, char *err,
				     size_t errlen);
/* Once per process, before any other thread starts / after all stopped. */
void cache_api_global_init(void);
void cache_api_global_cleanup(void);
/* True when the in-cluster variables are set. */
bool cache_api_in_cluster_available(void);
void cache_api_free(struct cache_api *api);
/* "https://10.0.0.1:443 (in-cluster service account)", for logs. */
const char *cache_api_describe(const struct cache_api *api);

/* One blocking request for a program beside the daemon (troupe-node's GET and
 * PATCH of its own Node): <method> <path> with <body> (NULL: none) sent as
 * <content_type>, waiting at most <timeout_ms>. The answer's status goes to
 * <status> and its body (at most 4 MiB) to <answer>. Returns 0 once the server
 * answered (any status); -EIO / -ETIMEDOUT / -ENOMEM with <err> saying why.
 * Thread: any. */
struct strbuf;
int cache_api_call(struct cache_api *api, const char *method, const char *path,
		   const char *content_type, const char *body, unsigned timeout_ms,
		   struct strbuf *answer, long *status, char *err, size_t errlen);

/* "HTTP <status>", then ": " and the message of the v1 Status in <body> when
 * there is one (an admission policy's refusal, say), cut to <outlen>. */
void cache_api_status_text(long status, const char *body, size_t len, char *out, size_t outlen);

/* ---- Permissions ----------------------------------------------------------- */

/* What troupe must be allowed to do, one verb on one resource each, as the
 * informer checks them (SelfSubjectAccessReview) and as /readyz names them. */
enum cache_perm {
	CACHE_PERM_LIST_NODES,
	CACHE_PERM_WATCH_NODES,
	CACHE_PERM_LIST_PODS,
	CACHE_PERM_WATCH_PODS,
	CACHE_PERM_BIND_PODS,           /* create pods/binding */
	CACHE_PERM_LIST_PODGROUPS,
	CACHE_PERM_WATCH_PODGROUPS,
	CACHE_PERM_DELETE_PODS,         /* rolling back a gang left partly bound */
	CACHE_PERM_COUNT
};

struct cache_permission {
	const char *verb;               /* "list" */
	const char *group;              /* API group, "" for the core group */
	const char *resource;           /* "pods" */
	const char *subresource;        /* "binding", or "" */
	const char *name;               /* "create pods/binding", for logs and /readyz */
};

/* The permission <p> (static storage), or NULL when out of range. */
const struct cache_permission *cache_permission_get(enum cache_perm p);

/* Permissions troupe can do without: the event recorder (events.h) and the
 * PodGroup status writer (podgroup_status.h) check theirs once (at start; per
 * leadership) and only warn when one is missing, so they never fail readiness
 * and the informer does not review them. */
enum cache_optional_perm {
	CACHE_OPT_PERM_CREATE_EVENTS,   /* create events.k8s.io events */
	CACHE_OPT_PERM_PATCH_EVENTS,    /* patch events.k8s.io events (a series' count) */
	CACHE_OPT_PERM_GET_PODGROUP_STATUS,     /* scheduling.x-k8s.io podgroups/status */
	CACHE_OPT_PERM_PATCH_PODGROUP_STATUS,
	/* Other schedulers' PodGroups (informer.c's optional streams): missing,
	 * their gangs take their quorum from pod labels, nothing else. */
	CACHE_OPT_PERM_LIST_PG_UPSTREAM,        /* scheduling.k8s.io podgroups */
	CACHE_OPT_PERM_WATCH_PG_UPSTREAM,
	CACHE_OPT_PERM_LIST_PG_VOLCANO,         /* scheduling.volcano.sh podgroups */
	CACHE_OPT_PERM_WATCH_PG_VOLCANO,
	CACHE_OPT_PERM_LIST_PG_KAI,             /* scheduling.run.ai podgroups */
	CACHE_OPT_PERM_WATCH_PG_KAI,
	/* Their Queues, for the weights (informer.c's optional streams). */
	CACHE_OPT_PERM_LIST_Q_VOLCANO,          /* scheduling.volcano.sh queues */
	CACHE_OPT_PERM_WATCH_Q_VOLCANO,
	CACHE_OPT_PERM_LIST_Q_KAI,              /* scheduling.run.ai queues */
	CACHE_OPT_PERM_WATCH_Q_KAI,
	/* DRA's slices and claims (dra.c), for GPUs given through DRA. */
	CACHE_OPT_PERM_LIST_DRA_SLICES,         /* resource.k8s.io resourceslices */
	CACHE_OPT_PERM_WATCH_DRA_SLICES,
	CACHE_OPT_PERM_LIST_DRA_CLAIMS,         /* resource.k8s.io resourceclaims */
	CACHE_OPT_PERM_WATCH_DRA_CLAIMS,
	CACHE_OPT_PERM_COUNT
};

/* The optional permission <p> (static storage), or NULL when out of range. */
const struct cache_permission *cache_optional_permission_get(enum cache_optional_perm p);

/* ---- Informer ------------------------------------------------------------- */

struct cache_informer_opts {
	unsigned page_size;             /* list limit; default 500 */
	unsigned watch_timeout_min_s;   /* server-side watch timeout, randomised in */
	unsigned watch_timeout_max_s;   /* [min, max]; default 300..600 */
	unsigned backoff_initial_ms;    /* default 800 */
	unsigned backoff_max_ms;        /* default 30000 */
	unsigned healthy_reset_s;       /* a watch up this long resets backoff; default 60 */
	unsigned podgroup_retry_s;      /* retry a missing PodGroup CRD after; default 300 */
	/* A watch that brings nothing, not even a bookmark, for this long is cut
	 * and started again (kube-apiserver sends a bookmark about every minute
	 * when asked, as troupe does): a server that hangs with the watch open
	 * shows as a new watch left unanswered (ANSWER_DEADLINE_S), so /readyz
	 * fails within this plus 10 s. Default 150. */
	unsigned watch_silence_s;
	/* Check every permission again this often; 0: only once, at start. Unlike
	 * the fields above, 0 is kept. */
	unsigned access_check_s;
};

/* Every default above, the one place they are written: troupe's configuration
 * starts from them, and cache_informer_start fills a zero field (but
 * access_check_s) from them. */
void cache_informer_opts_defaults(struct cache_informer_opts *opts);

struct cache_informer;

/* Start the informer thread: list then watch nodes, pods and
 * scheduling.x-k8s.io/v1alpha1 podgroups into <c>, and check troupe's
 * permissions (at once, then every opts->access_check_s). The cache is marked
 * synced once every initial list is applied. Returns NULL with <err> set. */
struct cache_informer *cache_informer_start(struct cache *c, struct cache_api *api,
					    const struct cache_informer_opts *opts, char *err,
					    size_t errlen);
/* Stop the thread and free the informer. */
void cache_informer_stop(struct cache_informer *inf);

/* Counters, for logs, /metrics and tests. Thread: any. */
struct cache_informer_stats {
	uint64_t events;                /* watch events applied */
	uint64_t lists;                 /* full lists completed */
	uint64_t relists;               /* lists caused by 410 Gone/Expired */
	uint64_t watch_restarts;        /* watches re-opened from a resourceVersion */
	uint64_t errors;                /* failed requests (connection, 429, 5xx, ...) */
	uint64_t partial_lines;         /* cut events discarded */
	uint64_t permission_denials;    /* reviews answering "not allowed", and 403s */
};
void cache_informer_get_stats(const struct cache_informer *inf, struct cache_informer_stats *out);

/* Whether troupe can serve with the informer's cluster state, worst first. */
enum cache_ready_state {
	CACHE_READY,
	CACHE_SYNCING,                  /* an initial list is not applied yet */
	CACHE_API_UNREACHABLE,          /* a list or watch cannot (re)connect */
	CACHE_FORBIDDEN,                /* a permission is missing */
};

struct cache_readiness {
	enum cache_ready_state state;
	/* Bit (1u << enum cache_perm) per permission missing: a review said "not
	 * allowed", or a list or watch was refused (403) and has not succeeded
	 * since. Non-zero exactly when state is CACHE_FORBIDDEN. */
	uint32_t missing;
	/* The first failing list or watch, e.g. "watch pods: HTTP 503: ...";
	 * "" when none is failing. */
	char detail[512];
};

/* A copy of the informer's readiness. Thread: any. */
void cache_informer_readiness(struct cache_informer *inf, struct cache_readiness *out);

/* ---- Binder ----------------------------------------------------------------- */

struct cache_binder;

/* A binding to post: POST /api/v1/namespaces/<ns>/pods/<name>/binding with the
 * pod UID as precondition and <annotations> (a JSON object text, or NULL)
 * copied onto the pod by the API server. The strings are copied. */
struct cache_binding {
	const char *ns;
	const char *name;
	const char *uid;
	const char *node;
	const char *annotations;
};

/* Called once per submitted binding, on the binder thread. <result>: 0 bound
 * (201, or 409 because the pod is already on this very node); -EEXIST the pod
 * is on another node or the UID precondition failed; -ENOENT the pod is gone;
 * -EACCES 401/403; -EINVAL another 4xx (429 included: refused, not committed);
 * -ETIMEDOUT; -EIO a 5xx or a connection error (the outcome is unknown). <msg>
 * says what the API server said; <retry_after_ms> is its Retry-After header
 * (sent with 429 and some 503s), 0 when absent. */
typedef void (*cache_bind_done_fn)(void *arg, int result, const char *msg,
				   unsigned retry_after_ms);

struct cache_binder *cache_binder_start(struct cache_api *api, unsigned timeout_ms, char *err,
					size_t errlen);
/* Queue a binding. Returns 0, or -ENOMEM / -ESHUTDOWN (then <done> is not
 * called). Thread: any. */
int cache_binder_submit(struct cache_binder *b, const struct cache_binding *bind,
			cache_bind_done_fn done, void *arg);
/* The same, but the post starts no sooner than <delay_ms> from now (a retry
 * after a refusal); until then it waits in the binder, not in a thread. */
int cache_binder_submit_after(struct cache_binder *b, const struct cache_binding *bind,
			      unsigned delay_ms, cache_bind_done_fn done, void *arg);
/* Stop the thread: bindings still queued or in flight complete with
 * -ECANCELED, later submits fail with -ESHUTDOWN. The struct stays valid, so
 * threads still holding it (HTTP workers) are safe until cache_binder_free. */
void cache_binder_shutdown(struct cache_binder *b);
/* Free it; call after every thread that could submit has stopped. */
void cache_binder_free(struct cache_binder *b);

/* ---- Reviews of troupe's callers (review.c) ---------------------------------- */

/* A user name or uid in a review's answer, or its error text; longer is cut. */
enum { CACHE_REVIEW_NAME_BUF = 512 };

/* What a TokenReview said about a bearer token. */
struct cache_token_review {
	bool authenticated;
	char username[CACHE_REVIEW_NAME_BUF];   /* status.user.username */
	char uid[CACHE_REVIEW_NAME_BUF];        /* status.user.uid, "" when none */
	/* status.user (username, uid, groups, extra) as JSON text, for
	 * cache_api_subject_access_review; NULL unless authenticated. Freed by
	 * cache_token_review_fini. */
	char *user_json;
	/* Why the token is not accepted (status.error), "" when it is. */
	char error[CACHE_REVIEW_NAME_BUF];
};

/* Post a TokenReview (authentication.k8s.io/v1) of <token> and fill <out>.
 * Returns 0 when the API server answered, authenticated or not; -EIO or
 * -ETIMEDOUT when it could not be reached, -EPROTO when it refused the review
 * (troupe lacks "create tokenreviews": HTTP 403) or answered something else,
 * -ENOMEM; then <err> says why. Blocks up to about 8 s. Thread: any. */
int cache_api_token_review(struct cache_api *api, const char *token,
			   struct cache_token_review *out, char *err, size_t errlen);
void cache_token_review_fini(struct cache_token_review *r);

/* Post a SubjectAccessReview (authorization.k8s.io/v1) asking whether the user
 * <user_json> (a TokenReview's status.user) may <verb> the non-resource URL
 * <path>: <allowed>, and in <reason> status.reason or status.evaluationError
 * ("" when neither). Returns 0 when answered; otherwise as
 * cache_api_token_review (-EPROTO: troupe lacks "create
 * subjectaccessreviews"). Thread: any. */
int cache_api_subject_access_review(struct cache_api *api, const char *user_json,
				    const char *path, const char *verb, bool *allowed,
				    char *reason, size_t reasonlen, char *err, size_t errlen);

/* Delete pod <ns>/<name> if its UID is still <uid> (a precondition), as one
 * blocking request on the calling thread. Returns 0 (deleted, or being
 * deleted); -ENOENT when the pod is gone; -ESTALE when the name is another
 * pod's now; -EACCES when troupe may not; -EIO / -ETIMEDOUT / -ENOMEM. <err>
 * says why. */
int cache_api_delete_pod(struct cache_api *api, const char *ns, const char *name,
			 const char *uid, char *err, size_t errlen);

/* GET <path> (with its query, escaped by the caller) from the server <api>
 * names, as a blocking request on the calling thread: `troupe explain
 * --server` asks a troupe's ops listener so, with the same TLS and bearer
 * token handling as every API request. Returns 0 once the server answered
 * (any status; the body, NUL-terminated and the caller's to free, in <body>
 * and <len>, at most <max> bytes), -E2BIG for a longer answer, -EIO /
 * -ETIMEDOUT / -ENOMEM; <err> says why. */
int cache_api_get(struct cache_api *api, const char *path, size_t max, long *status,
		  char **body, size_t *len, char *err, size_t errlen);

#endif
