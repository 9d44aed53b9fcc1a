/* Shared only inside cache/: what the API client files (api.c, access.c, the
 * informer, the binder) need from each other, and the two sweeps the informer
 * asks of the store after a relist. libcurl is named here and nowhere in the
 * store's own header (internal.h). */
#ifndef TROUPE_CACHE_API_INTERNAL_H
#define TROUPE_CACHE_API_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include "cache/api.h"
#include "cache/cache.h"

/* Set up <easy> for a request to <path> (with query) on the API server:
 * URL, TLS, credentials, timeouts common to every request. <headers> receives
 * the list to free after the request. Returns 0 or -ENOMEM. */
int cache__api_prepare(struct cache_api *api, CURL *easy, const char *path,
		       struct curl_slist **headers);
/* Re-read the token file when it changed, or always when <force> (after a
 * 401). Thread: any. */
void cache__api_refresh_token(struct cache_api *api, bool force);

/* One blocking request on the calling thread (the event recorder's writes,
 * the reviews, the pod delete, the PodGroup status writer's PATCH and GET):
 * what to send and how long to wait, and what came back. */
struct cache__api_call {
	const char *method, *path;
	const char *content_type;       /* sent as Content-Type unless NULL */
	const char *body;               /* NULL: none */
	unsigned timeout_ms;            /* the whole request; the connection, 5 s of it */
	size_t max_answer;              /* the most of the answer's body kept */
	/* NULL, or a flag (read with a relaxed atomic load) whose setting ends
	 * the request under way at once: stopping never waits out a server that
	 * does not answer. */
	const bool *abort;
	/* NULL: a handle of the call's own. Else this one, reset before and
	 * after, which keeps its connection for the next call. */
	CURL *easy;
	/* Set by the call: */
	long status;                    /* 0 when no answer came */
	bool cut;                       /* the body was longer than max_answer */
};

/* Send <call>: its answer's status in call->status, its body appended to
 * <answer> (at most call->max_answer bytes kept, call->cut set when more
 * came). Returns 0 once the server answered (any status; <err> then ""); -EIO
 * / -ETIMEDOUT when it could not be reached (or call->abort was set), -ENOMEM;
 * then <err> says why. Thread: any. */
struct strbuf;
int cache__api_request(struct cache_api *api, struct cache__api_call *call,
		       struct strbuf *answer, char *err, size_t errlen);
/* "HTTP <status>", then ": " and the message of the v1 Status in <body> when
 * there is one: how a refusal is told in errors and logs. */
void cache__api_status_text(long status, const char *body, size_t len, char *out,
			    size_t outlen);

/* Whether troupe may do <perm>: a SelfSubjectAccessReview sent with
 * <timeout_ms> and <abort> as in struct cache__api_call. Returns 1 (allowed),
 * 0 (denied; <reason> what the server said, or ""), or an error with <err>
 * saying why: -EIO / -ETIMEDOUT / -ENOMEM as cache__api_request, -EPROTO when
 * the server refused the review or its answer is not one. Thread: any. */
int cache__api_may(struct cache_api *api, const struct cache_permission *perm,
		   unsigned timeout_ms, const bool *abort, char *reason, size_t reasonlen,
		   char *err, size_t errlen);

/* The SelfSubjectAccessReview asking for permission <p>, as JSON text the
 * caller frees. NULL with errno set (ENOMEM, EINVAL). */
char *cache__access_review_new(enum cache_perm p);
/* The same for any permission <perm> (NULL: errno EINVAL); <perm> need not be
 * one of enum cache_perm. */
char *cache__access_review_of(const struct cache_permission *perm);
/* Read a SelfSubjectAccessReview answer: <allowed> from status.allowed,
 * <reason> from status.reason (or status.evaluationError; "" when neither).
 * Returns 0, or -EINVAL when <body> is not such an answer (not JSON, another
 * kind, no boolean status.allowed). */
int cache__access_review_parse(const char *body, size_t len, bool *allowed, char *reason,
			       size_t reasonlen);
/* The message of a v1 Status in <body> (what the API server says with an
 * error). Returns false, with <out> "", when there is none. */
bool cache__status_message(const char *body, size_t len, char *out, size_t outlen);

/* Writer: delete every node whose name <keep> rejects. */
void cache__node_sweep(struct cache *c, bool (*keep)(const char *name, void *arg), void *arg);
/* Writer: delete every pod learnt from the cluster (or assumed by troupe)
 * whose UID <keep> rejects. Pods only remembered from a filter call stay. */
void cache__pod_sweep(struct cache *c, bool (*keep)(const char *uid, void *arg), void *arg);

#endif
