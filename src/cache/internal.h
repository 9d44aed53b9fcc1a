/* Shared only inside cache/: what the API client files need from each other
 * and from the store. */
#ifndef TROUPE_CACHE_INTERNAL_H
#define TROUPE_CACHE_INTERNAL_H

#include <stdbool.h>

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

/* Writer: delete every node whose name <keep> rejects. */
void cache__node_sweep(struct cache *c, bool (*keep)(const char *name, void *arg), void *arg);
/* Writer: delete every pod learnt from the cluster (or assumed by troupe)
 * whose UID <keep> rejects. Pods only remembered from a filter call stay. */
void cache__pod_sweep(struct cache *c, bool (*keep)(const char *uid, void *arg), void *arg);

#endif
