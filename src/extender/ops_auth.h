/* Who may read the ops listener's /debug/... and /metrics: Kubernetes bearer
 * tokens checked with TokenReviews and SubjectAccessReviews (cache/api.h), and
 * a small cache of their answers. Private to src/extender (ops_server.c).
 */
#ifndef TROUPE_EXTENDER_OPS_AUTH_H
#define TROUPE_EXTENDER_OPS_AUTH_H

#include <stddef.h>

struct cache_api;
struct ext_ops_auth;

/* A checker asking <api>, keeping each answer <ttl_s> seconds (0: none kept),
 * at most <entries> of them. NULL with errno set (ENOMEM). */
struct ext_ops_auth *ext__ops_auth_new(struct cache_api *api, unsigned ttl_s, unsigned entries);
void ext__ops_auth_free(struct ext_ops_auth *a);

/* Whether the request with the Authorization header <authorization> (NULL
 * when absent) may GET <path>: 200; 401 without a bearer token or with one the
 * API server does not accept; 403 when the token's user may not get <path>;
 * 503 when the API server could not answer (never kept). <who> receives the
 * user name when the token was accepted (else ""), <why> what to log and tell
 * the caller. Blocks while a review is in flight. Thread: any. */
unsigned ext__ops_auth_check(struct ext_ops_auth *a, const char *authorization, const char *path,
			     char *who, size_t wholen, char *why, size_t whylen);

#endif
