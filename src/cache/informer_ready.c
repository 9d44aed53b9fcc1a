/* Readiness: whether troupe can serve, from the informer's point of view —
 * initial lists missing, a stream failing to (re)connect, a permission
 * missing — published under a mutex for /readyz and logged once per change;
 * and the SelfSubjectAccessReviews that find missing permissions before a
 * request is refused.
 */
#include "cache/informer.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

/* ---- Readiness --------------------------------------------------------------- */

/* "missing permissions: list pods, watch pods" for the not-ready line. */
static void missing_text(uint32_t missing, char *out, size_t len)
{
	size_t n = (size_t)snprintf(out, len, "missing permission%s",
				    __builtin_popcount(missing) > 1 ? "s" : "");
	const char *sep = ": ";

	for (int p = 0; p < CACHE_PERM_COUNT && n < len; p++) {
		if (!(missing & (1u << p)))
			continue;
		n += (size_t)snprintf(out + n, len - n, "%s%s", sep,
				      cache_permission_get((enum cache_perm)p)->name);
		sep = ", ";
	}
}

/* Work out the readiness from what the streams and checks found, publish it,
 * and log when its state changes. Informer thread. */
void cache__inf_readiness_update(struct cache_informer *inf)
{
	struct cache_readiness r = { .state = CACHE_READY };
	char why[600];

	r.missing = inf->review_denied | inf->request_denied;
	for (int k = 0; k < K_COUNT; k++) {
		/* Another scheduler's objects: their failures are logged, never a
		 * reason to be unready (kind_optional). */
		if (inf->streams[k].failing && !kind_optional((enum kind)k)) {
			snprintf(r.detail, sizeof(r.detail), "%s", inf->streams[k].failure);
			break;
		}
	}
	if (r.missing)
		r.state = CACHE_FORBIDDEN;
	else if (r.detail[0])
		r.state = CACHE_API_UNREACHABLE;
	else if (!cache_is_synced(inf->cache))
		r.state = CACHE_SYNCING;
	pthread_mutex_lock(&inf->lock);
	inf->readiness = r;
	pthread_mutex_unlock(&inf->lock);
	if (r.state == inf->shown)
		return;
	inf->shown = r.state;
	if (r.state == CACHE_READY) {
		log_info("informer", "troupe is ready%s", inf->was_ready ? " again" : "");
		inf->was_ready = true;
	} else if (r.state == CACHE_FORBIDDEN) {
		missing_text(r.missing, why, sizeof(why));
		log_warn("informer", "troupe is not ready: %s", why);
	} else if (r.state == CACHE_API_UNREACHABLE) {
		log_warn("informer", "troupe is not ready: API server unreachable: %s", r.detail);
	}
}

/* A list or watch of <s> was refused (403): its permission is missing until
 * that request succeeds again. */
void cache__inf_request_forbidden(struct stream *s, bool watch, const char *msg)
{
	enum cache_perm p = watch ? kinds[s->kind].watch : kinds[s->kind].list;
	struct cache_informer *inf = s->inf;

	stat_add(&inf->stats.permission_denials, 1);
	if (p >= CACHE_PERM_COUNT || (inf->request_denied & (1u << p)))
		return;
	inf->request_denied |= 1u << p;
	log_error("informer", "%s: forbidden (403): %s", cache_permission_get(p)->name,
		  msg[0] ? msg : "no message");
}

/* A list or watch request of <s> was answered: it is allowed, and the stream
 * is reaching the server. */
void cache__inf_request_answered(struct stream *s, bool watch)
{
	enum cache_perm p = watch ? kinds[s->kind].watch : kinds[s->kind].list;
	struct cache_informer *inf = s->inf;

	if (p < CACHE_PERM_COUNT && (inf->request_denied & (1u << p))) {
		inf->request_denied &= ~(1u << p);
		log_info("informer", "%s: allowed again", cache_permission_get(p)->name);
	}
	/* A watch taken again after ending at once over and over proves nothing
	 * until it lives (cache__inf_health_tick). */
	if (!watch)
		s->healthy_ns = util_now_ns();
	if (!watch || !s->failing || s->short_watches < SHORT_WATCHES_FAILING)
		s->failing = false;
	cache__inf_readiness_update(inf);
}

void cache__inf_watch_ended_at_once(struct stream *s, const char *reason)
{
	char why[FAILURE_REASON_BUF + 64];

	if (++s->short_watches < SHORT_WATCHES_FAILING ||
	    util_elapsed_ns(util_now_ns(), s->healthy_ns) <
		    (uint64_t)SHORT_WATCHES_SPAN_S * 1000000000ULL)
		return;
	snprintf(why, sizeof(why), "ended as soon as it started, %u times in a row (%s)",
		 s->short_watches, reason);
	cache__inf_request_failed(s, true, why);
}

void cache__inf_health_tick(struct cache_informer *inf, uint64_t now)
{
	const uint64_t deadline = (uint64_t)ANSWER_DEADLINE_S * 1000000000ULL;
	const uint64_t healthy = (uint64_t)WATCH_HEALTHY_MS * 1000000ULL;
	char why[FAILURE_REASON_BUF];

	for (int k = 0; k < K_COUNT; k++) {
		struct stream *s = &inf->streams[k];
		bool watch = s->phase == P_WATCHING;
		uint64_t age = util_elapsed_ns(now, s->started_ns);

		if (!s->easy)
			continue;
		if (!s->headers_in && age >= deadline && watch) {
			/* kube-apiserver answers a watch at once: this one will not be,
			 * so it is given up and tried again with backoff. */
			snprintf(s->curl_err, sizeof(s->curl_err), "no answer from the API server "
				 "in %u s", ANSWER_DEADLINE_S);
			cache__inf_on_done(s, CURLE_OPERATION_TIMEDOUT);
		} else if (!s->headers_in && age >= deadline && !s->failing) {
			/* A list is answered once the server has encoded all of it, which
			 * can take a while: failing for /readyz, but left to finish. */
			snprintf(why, sizeof(why), "no answer from the API server in %u s (the "
				 "request is still waiting)", ANSWER_DEADLINE_S);
			log_warn("informer", "list %s: %s", kinds[k].name, why);
			cache__inf_request_failed(s, false, why);
		} else if (watch && s->answered && age >= healthy && !s->short_watches) {
			s->healthy_ns = now;
		} else if (watch && s->answered && s->short_watches && age >= healthy) {
			log_info("informer", "%s watch: has stayed up %.1f s; healthy again",
				 kinds[k].name, WATCH_HEALTHY_MS / 1e3);
			s->short_watches = 0;
			s->healthy_ns = now;
			s->failing = false;
			cache__inf_readiness_update(inf);
		}
	}
}

/* A list or watch request of <s> failed (<reason>): troupe is not ready until
 * one is answered. */
void cache__inf_request_failed(struct stream *s, bool watch, const char *reason)
{
	s->failing = true;
	snprintf(s->failure, sizeof(s->failure), "%s %s: %s", watch ? "watch" : "list",
		 kinds[s->kind].name, reason);
	cache__inf_readiness_update(s->inf);
}

/* What a request that just ended got, for logs and /readyz: libcurl's reason
 * (<curl_err>, else <rc>'s text), or the HTTP status with the message of the
 * Status the server sent in <body> (the message alone in <msg>). */
void cache__inf_describe_failure(CURLcode rc, const char *curl_err, long status,
				 const struct strbuf *body, char *out, size_t len, char *msg,
				 size_t msglen)
{
	msg[0] = '\0';
	if (rc != CURLE_OK)
		snprintf(out, len, "%s", curl_err[0] ? curl_err : curl_easy_strerror(rc));
	else if (cache__status_message(body->buf, body->len, msg, msglen))
		snprintf(out, len, "HTTP %ld: %s", status, msg);
	else
		snprintf(out, len, "HTTP %ld", status);
}

/* ---- Access checks ----------------------------------------------------------- */

static size_t on_review_data(char *ptr, size_t size, size_t n, void *arg)
{
	struct review *rv = arg;

	if (rv->answer.len < MAX_STATUS)
		strbuf_append(&rv->answer, ptr, size * n);
	return size * n;
}

void cache__inf_review_end(struct cache_informer *inf, struct review *rv)
{
	if (rv->easy) {
		curl_multi_remove_handle(inf->multi, rv->easy);
		curl_easy_cleanup(rv->easy);
		rv->easy = NULL;
	}
	curl_slist_free_all(rv->headers);
	rv->headers = NULL;
	free(rv->body);
	rv->body = NULL;
	strbuf_fini(&rv->answer);
}

/* POST the review of permission <p>. Returns 0 or -errno (nothing left open). */
static int review_begin(struct cache_informer *inf, enum cache_perm p)
{
	struct review *rv = &inf->reviews[p];
	struct curl_slist *h;
	int ret = -ENOMEM;

	rv->body = cache__access_review_new(p);
	rv->easy = curl_easy_init();
	if (!rv->body || !rv->easy)
		goto out;
	if (cache__api_prepare(inf->api, rv->easy, REVIEW_PATH, &rv->headers) < 0)
		goto out;
	h = curl_slist_append(rv->headers, "Content-Type: application/json");
	if (!h)
		goto out;
	rv->headers = h;
	curl_easy_setopt(rv->easy, CURLOPT_HTTPHEADER, rv->headers);
	curl_easy_setopt(rv->easy, CURLOPT_POSTFIELDS, rv->body);
	curl_easy_setopt(rv->easy, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(rv->easy, CURLOPT_WRITEFUNCTION, on_review_data);
	curl_easy_setopt(rv->easy, CURLOPT_WRITEDATA, rv);
	rv->curl_err[0] = '\0';
	curl_easy_setopt(rv->easy, CURLOPT_ERRORBUFFER, rv->curl_err);
	if (curl_multi_add_handle(inf->multi, rv->easy) != CURLM_OK) {
		ret = -EIO;
		goto out;
	}
	inf->reviews_running++;
	ret = 0;
out:
	if (ret < 0)
		cache__inf_review_end(inf, rv);
	return ret;
}

/* One round: a review of every permission, all at once. */
void cache__inf_reviews_start(struct cache_informer *inf)
{
	inf->review_warned = false;
	for (int p = 0; p < CACHE_PERM_COUNT; p++) {
		int ret = review_begin(inf, (enum cache_perm)p);

		if (ret < 0 && !inf->review_warned) {
			log_warn("informer", "cannot check permission %s: %s",
				 cache_permission_get((enum cache_perm)p)->name, strerror(-ret));
			inf->review_warned = true;
		}
	}
}

/* What a review's answer says of permission <p>: log it when it changes. */
static void review_answered(struct cache_informer *inf, enum cache_perm p, bool allowed,
			    const char *reason)
{
	const struct cache_permission *perm = cache_permission_get(p);
	uint32_t bit = 1u << p;

	if (!allowed)
		stat_add(&inf->stats.permission_denials, 1);
	if (!allowed && !(inf->review_denied & bit)) {
		inf->review_denied |= bit;
		log_error("informer", "missing permission: %s (group \"%s\"): add it to troupe's "
			  "ClusterRole (config/deploy/rbac.yaml)%s%s", perm->name, perm->group,
			  reason[0] ? "; the API server says: " : "", reason);
	} else if (allowed && (inf->review_denied & bit)) {
		inf->review_denied &= ~bit;
		log_info("informer", "permission granted again: %s (group \"%s\")", perm->name,
			 perm->group);
	} else {
		return;
	}
	cache__inf_readiness_update(inf);
}

void cache__inf_review_done(struct cache_informer *inf, struct review *rv, CURLcode rc)
{
	enum cache_perm p = (enum cache_perm)(rv - inf->reviews);
	char reason[REVIEW_REASON_BUF], why[TROUPE_MESSAGE_BUF];
	bool allowed = false;
	long status = 0;

	curl_easy_getinfo(rv->easy, CURLINFO_RESPONSE_CODE, &status);
	why[0] = '\0';
	if (rc != CURLE_OK || (status != 201 && status != 200)) {
		cache__inf_describe_failure(rc, rv->curl_err, status, &rv->answer, why, sizeof(why),
					    reason, sizeof(reason));
		if (rc == CURLE_OK && status == 401)
			cache__api_refresh_token(inf->api, true);
	} else if (cache__access_review_parse(rv->answer.buf, rv->answer.len, &allowed, reason,
					      sizeof(reason)) < 0) {
		snprintf(why, sizeof(why), "the answer is not a SelfSubjectAccessReview");
	} else {
		review_answered(inf, p, allowed, reason);
	}
	/* A review that could not be made tells nothing about the permission:
	 * keep what was known, say so once a round. */
	if (why[0] && !inf->review_warned) {
		log_warn("informer", "cannot check permission %s (SelfSubjectAccessReview): %s; "
			 "keeping what was known", cache_permission_get(p)->name, why);
		inf->review_warned = true;
	}
	cache__inf_review_end(inf, rv);
	inf->reviews_running--;
}

/* The review <easy> belongs to, or NULL when it is a stream's. */
struct review *cache__inf_review_of(struct cache_informer *inf, CURL *easy)
{
	for (int p = 0; p < CACHE_PERM_COUNT; p++)
		if (inf->reviews[p].easy == easy)
			return &inf->reviews[p];
	return NULL;
}

