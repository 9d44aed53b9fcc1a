/* Authentication and authorisation of the ops listener's protected paths, as
 * k8s.io/apiserver's delegating authenticator and authorizer do them for
 * kube-scheduler's and kube-controller-manager's /metrics: the bearer token
 * goes to the API server in a TokenReview, and the user it names in a
 * SubjectAccessReview for {path, verb: get}. RBAC then decides, with a
 * ClusterRole rule on nonResourceURLs such as "/metrics" or "/debug/" with a trailing star.
 *
 * Both answers, yes and no, are kept ttl seconds (10 s by default, the
 * delegating defaults), so that a Prometheus scraping every few seconds costs
 * the API server two reviews per ttl, not two per scrape. A failure to ask
 * (API server unreachable, troupe not allowed to create reviews) is never
 * kept: the next request asks again.
 *
 * The cache is a fixed table of entries scanned under one mutex; keys are
 * the token itself ("T" + token) and the user and path of an access check
 * ("S" + path + NUL + user JSON). Tokens are compared in constant time, so
 * how long a refusal takes says nothing about a cached token. Nothing is
 * allocated or freed while the mutex is held: a new entry is built first and
 * swapped in, the old one freed after.
 */
#include "extender/ops_auth.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cache/api.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"

enum {
	/* A bearer token longer than this is refused unread (401): service
	 * account JWTs are about 1 KiB, OIDC ones a few. */
	OPS_TOKEN_MAX = 16 * 1024,
	/* A user (name, uid, groups, extra) as the cache keeps it; a longer one
	 * is used for the request but not kept. */
	OPS_USER_JSON_BUF = 4096,
};

struct entry {
	char *key;              /* NULL: free slot */
	size_t keylen;
	uint64_t expires_ns;
	unsigned status;        /* 200, or 401 (token) / 403 (access) */
	char *user;             /* token entries that authenticated: the user JSON */
	char who[CACHE_REVIEW_NAME_BUF];
	char why[TROUPE_MESSAGE_BUF];
};

struct ext_ops_auth {
	struct cache_api *api;
	uint64_t ttl_ns;
	unsigned n;
	pthread_mutex_t lock;
	struct entry *e;        /* [n]; guarded by lock */
};

struct ext_ops_auth *ext__ops_auth_new(struct cache_api *api, unsigned ttl_s, unsigned entries)
{
	struct ext_ops_auth *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->api = api;
	a->ttl_ns = (uint64_t)ttl_s * 1000000000ULL;
	a->n = ttl_s ? entries : 0;
	if (a->n) {
		a->e = calloc(a->n, sizeof(*a->e));
		if (!a->e) {
			free(a);
			errno = ENOMEM;
			return NULL;
		}
	}
	pthread_mutex_init(&a->lock, NULL);
	return a;
}

static void entry_fini(struct entry *e)
{
	free(e->key);
	free(e->user);
	memset(e, 0, sizeof(*e));
}

void ext__ops_auth_free(struct ext_ops_auth *a)
{
	if (!a)
		return;
	for (unsigned i = 0; i < a->n; i++)
		entry_fini(&a->e[i]);
	free(a->e);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

/* Equal keys, in time that depends only on the length. */
static bool key_equal(const char *x, const char *y, size_t len)
{
	unsigned char d = 0;

	for (size_t i = 0; i < len; i++)
		d |= (unsigned char)(x[i] ^ y[i]);
	return d == 0;
}

/* A live entry for <key>: copies its answer out and returns true. <user> (of
 * OPS_USER_JSON_BUF bytes, or NULL) receives a token entry's user JSON. */
static bool lookup(struct ext_ops_auth *a, const char *key, size_t keylen, unsigned *status,
		   char *who, size_t wholen, char *why, size_t whylen, char *user)
{
	uint64_t now = util_now_ns();
	bool hit = false;

	if (!a->n)
		return false;
	pthread_mutex_lock(&a->lock);
	for (unsigned i = 0; i < a->n; i++) {
		struct entry *e = &a->e[i];

		if (!e->key || e->keylen != keylen || e->expires_ns <= now ||
		    !key_equal(e->key, key, keylen))
			continue;
		*status = e->status;
		snprintf(who, wholen, "%s", e->who);
		snprintf(why, whylen, "%s", e->why);
		if (user)
			snprintf(user, OPS_USER_JSON_BUF, "%s", e->user ? e->user : "");
		hit = true;
		break;
	}
	pthread_mutex_unlock(&a->lock);
	return hit;
}

/* Keep an answer: in the slot of the same key, else a free or expired one,
 * else the one closest to expiry. <user> is copied. Out of memory: not kept. */
static void store(struct ext_ops_auth *a, const char *key, size_t keylen, unsigned status,
		  const char *who, const char *why, const char *user)
{
	struct entry ne = { 0 }, old;
	uint64_t now = util_now_ns();
	unsigned pick = 0, same = UINT32_MAX, free_slot = UINT32_MAX;

	if (!a->n || (user && strlen(user) >= OPS_USER_JSON_BUF))
		return;
	ne.key = malloc(keylen);
	ne.user = user ? strdup(user) : NULL;
	if (!ne.key || (user && !ne.user)) {
		entry_fini(&ne);
		return;
	}
	memcpy(ne.key, key, keylen);
	ne.keylen = keylen;
	ne.expires_ns = now + a->ttl_ns;
	ne.status = status;
	snprintf(ne.who, sizeof(ne.who), "%s", who);
	snprintf(ne.why, sizeof(ne.why), "%s", why);
	pthread_mutex_lock(&a->lock);
	for (unsigned i = 0; i < a->n; i++) {
		struct entry *e = &a->e[i];

		if (e->key && e->keylen == keylen && key_equal(e->key, key, keylen)) {
			same = i;
			break;
		}
		if (free_slot == UINT32_MAX && (!e->key || e->expires_ns <= now))
			free_slot = i;
		if (e->key && e->expires_ns < a->e[pick].expires_ns)
			pick = i;
	}
	if (same != UINT32_MAX)
		pick = same;
	else if (free_slot != UINT32_MAX)
		pick = free_slot;
	old = a->e[pick];
	a->e[pick] = ne;
	pthread_mutex_unlock(&a->lock);
	entry_fini(&old);
}

/* "Bearer <token>" (the scheme in any case) -> the token, else NULL. */
static const char *bearer_token(const char *authorization)
{
	const char *t;

	if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return NULL;
	for (t = authorization + 7; *t == ' '; t++)
		;
	return *t ? t : NULL;
}

/* Build "<tag><a>\0<b>" for a cache key; NULL when out of memory. */
static char *key_new(char tag, const char *x, const char *y, size_t *len)
{
	size_t lx = strlen(x), ly = y ? strlen(y) + 1 : 0;
	char *k = malloc(1 + lx + ly);

	if (!k)
		return NULL;
	k[0] = tag;
	memcpy(k + 1, x, lx);
	if (y) {
		k[1 + lx] = '\0';
		memcpy(k + 2 + lx, y, ly - 1);
	}
	*len = 1 + lx + ly;
	return k;
}

/* Who the token is: 200 with <who> and the user JSON in <user> (the caller
 * frees *user_heap when set), 401, or 503. */
static unsigned authenticate(struct ext_ops_auth *a, const char *token, char *who, size_t wholen,
			     char *why, size_t whylen, char *user, char **user_heap)
{
	struct cache_token_review tr;
	char err[TROUPE_MESSAGE_BUF];
	unsigned status = 503;
	size_t keylen = 0;
	char *key = key_new('T', token, NULL, &keylen);
	int rc;

	if (!key) {
		snprintf(why, whylen, "out of memory");
		return 503;
	}
	if (lookup(a, key, keylen, &status, who, wholen, why, whylen, user))
		goto out;
	rc = cache_api_token_review(a->api, token, &tr, err, sizeof(err));
	if (rc < 0) {
		snprintf(why, whylen, "cannot check the token with a TokenReview: %s", err);
		status = 503;
		goto out;
	}
	if (!tr.authenticated) {
		status = 401;
		snprintf(why, whylen, "the token is not accepted: %s", tr.error);
		store(a, key, keylen, status, "", why, NULL);
	} else {
		status = 200;
		snprintf(who, wholen, "%s", tr.username);
		why[0] = '\0';
		log_debug("ops", "TokenReview: the token is user \"%s\"", tr.username);
		store(a, key, keylen, status, who, "", tr.user_json);
		*user_heap = tr.user_json;
		tr.user_json = NULL;
	}
	cache_token_review_fini(&tr);
out:
	free(key);
	return status;
}

/* Whether <user_json> may get <path>: 200, 403 or 503. */
static unsigned authorize(struct ext_ops_auth *a, const char *user_json, const char *path,
			  const char *who, char *why, size_t whylen)
{
	char reason[TROUPE_MESSAGE_BUF], err[TROUPE_MESSAGE_BUF], cached_who[CACHE_REVIEW_NAME_BUF];
	unsigned status = 503;
	size_t keylen = 0;
	char *key = key_new('S', path, user_json, &keylen);
	bool allowed;
	int rc;

	if (!key) {
		snprintf(why, whylen, "out of memory");
		return 503;
	}
	if (lookup(a, key, keylen, &status, cached_who, sizeof(cached_who), why, whylen, NULL))
		goto out;
	rc = cache_api_subject_access_review(a->api, user_json, path, "get", &allowed, reason,
					     sizeof(reason), err, sizeof(err));
	if (rc < 0) {
		snprintf(why, whylen, "cannot check access with a SubjectAccessReview: %s", err);
		status = 503;
		goto out;
	}
	status = allowed ? 200 : 403;
	/* The wording of kube-apiserver's own 403 (responsewriters.Forbidden). */
	if (allowed)
		snprintf(why, whylen, "%s", reason);
	else
		snprintf(why, whylen, "forbidden: User \"%s\" cannot get path \"%s\"%s%s", who, path,
			 reason[0] ? ": " : "", reason);
	store(a, key, keylen, status, who, why, NULL);
out:
	free(key);
	return status;
}

unsigned ext__ops_auth_check(struct ext_ops_auth *a, const char *authorization, const char *path,
			     char *who, size_t wholen, char *why, size_t whylen)
{
	char user[OPS_USER_JSON_BUF];
	char *user_heap = NULL;
	const char *token = bearer_token(authorization);
	unsigned status;

	who[0] = '\0';
	user[0] = '\0';
	if (!token) {
		snprintf(why, whylen, authorization ? "the Authorization header is not \"Bearer "
			 "<token>\"" : "no bearer token (Authorization header)");
		return 401;
	}
	if (strlen(token) > OPS_TOKEN_MAX) {
		snprintf(why, whylen, "the bearer token is longer than %d bytes", OPS_TOKEN_MAX);
		return 401;
	}
	status = authenticate(a, token, who, wholen, why, whylen, user, &user_heap);
	if (status == 200)
		status = authorize(a, user_heap ? user_heap : user, path, who, why, whylen);
	free(user_heap);
	return status;
}
