/* The informer's requests: each kind's list (pages of `limit`, following
 * `continue`) and watch, begun on the multi handle, and what each end causes:
 * the next page, a watch from the list's resourceVersion, a relist after 410,
 * a backoff after a failure (informer.h tells the whole state machine).
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

/* ---- Requests ------------------------------------------------------------ */

static size_t on_list_data(char *ptr, size_t size, size_t n, void *arg)
{
	struct stream *s = arg;

	strbuf_append(&s->body, ptr, size * n);
	return strbuf_failed(&s->body) ? 0 : size * n;
}

static size_t on_header(char *buf, size_t size, size_t n, void *arg)
{
	struct stream *s = arg;
	size_t len = size * n;
	long code = 0;

	if (len > 12 && strncasecmp(buf, "Retry-After:", 12) == 0)
		s->retry_after_s = strtol(buf + 12, NULL, 10);
	if ((len == 2 || len == 1) && (buf[0] == '\r' || buf[0] == '\n'))
		s->headers_in = true;   /* answered, whatever it says (ANSWER_DEADLINE_S) */
	/* The blank line after a watch's headers: the server has taken the watch
	 * (it sends them at once, events may take minutes), so the stream is up. */
	if (s->phase == P_WATCHING && !s->answered && (len == 2 || len == 1) &&
	    (buf[0] == '\r' || buf[0] == '\n')) {
		curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code == 200) {
			s->answered = true;
			cache__inf_request_answered(s, true);
		}
	}
	return len;
}

void cache__inf_request_end(struct stream *s)
{
	if (s->easy) {
		curl_multi_remove_handle(s->inf->multi, s->easy);
		curl_easy_cleanup(s->easy);
		s->easy = NULL;
	}
	curl_slist_free_all(s->headers);
	s->headers = NULL;
}

static int request_begin(struct stream *s, const char *query, bool watch)
{
	char path[4096];

	s->easy = curl_easy_init();
	if (!s->easy)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s?%s", kinds[s->kind].path, query);
	if (cache__api_prepare(s->inf->api, s->easy, path, &s->headers) < 0) {
		cache__inf_request_end(s);
		return -ENOMEM;
	}
	curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
	s->curl_err[0] = '\0';
	curl_easy_setopt(s->easy, CURLOPT_ERRORBUFFER, s->curl_err);
	curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION,
			 watch ? cache__inf_on_watch_data : on_list_data);
	curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(s->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(s->easy, CURLOPT_HEADERDATA, s);
	/* A list must finish; a watch lasts as long as the server keeps it, but a
	 * connection that delivers nothing, not even the bookmark kube-apiserver
	 * sends about every minute, for watch_silence_s is cut: the next watch
	 * then tells whether the server still answers. */
	if (!watch) {
		curl_easy_setopt(s->easy, CURLOPT_TIMEOUT_MS, 120000L);
	} else {
		curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_TIME, (long)s->inf->opts.watch_silence_s);
	}
	s->retry_after_s = 0;
	s->answered = false;
	s->headers_in = false;
	s->started_ns = util_now_ns();
	if (curl_multi_add_handle(s->inf->multi, s->easy) != CURLM_OK) {
		cache__inf_request_end(s);
		return -EIO;
	}
	return 0;
}

void cache__inf_start_list(struct stream *s)
{
	char query[2048];
	char *esc = NULL;

	if (!s->cont) {
		cache__inf_seen_clear(s);
		strmap_init(&s->seen);
	}
	strbuf_fini(&s->body);
	if (s->cont) {
		esc = curl_easy_escape(NULL, s->cont, 0);
		snprintf(query, sizeof(query), "limit=%u&continue=%s", s->inf->opts.page_size,
			 esc ? esc : "");
		curl_free(esc);
	} else {
		snprintf(query, sizeof(query), "limit=%u", s->inf->opts.page_size);
	}
	s->phase = P_LISTING;
	if (request_begin(s, query, false) < 0) {
		s->phase = P_START;
		s->due_ns = util_now_ns() + 1000000000ULL;
	}
}

static unsigned rand_between(struct cache_informer *inf, unsigned lo, unsigned hi)
{
	return hi > lo ? lo + (unsigned)rand_r(&inf->rng) % (hi - lo + 1) : lo;
}

void cache__inf_start_watch(struct stream *s)
{
	char query[512];
	char *esc = curl_easy_escape(NULL, s->rv, 0);

	/* A randomised server-side timeout spreads reconnects over time. */
	snprintf(query, sizeof(query),
		 "watch=1&resourceVersion=%s&allowWatchBookmarks=true&timeoutSeconds=%u",
		 esc ? esc : s->rv, rand_between(s->inf, s->inf->opts.watch_timeout_min_s,
						 s->inf->opts.watch_timeout_max_s));
	curl_free(esc);
	strbuf_fini(&s->line);
	strbuf_fini(&s->body);
	s->relist = false;
	s->broken = false;
	s->events_this_watch = 0;
	s->phase = P_WATCHING;
	if (request_begin(s, query, true) < 0) {
		s->phase = P_WATCH_DUE;
		s->due_ns = util_now_ns() + 1000000000ULL;
	}
}

/* Schedule the next attempt after a failure: capped exponential backoff with
 * +-25% jitter, never earlier than a Retry-After the server gave. */
static void back_off(struct stream *s, enum phase next, const char *why)
{
	struct cache_informer *inf = s->inf;
	unsigned ms = s->backoff_ms ? s->backoff_ms : inf->opts.backoff_initial_ms;
	unsigned jittered = ms - ms / 4 + rand_between(inf, 0, ms / 2);

	/* Capped in seconds before it is made milliseconds: a Retry-After of
	 * 2^64 / 1000 s or more would wrap the product to a few milliseconds, and
	 * be ignored rather than capped. */
	if (s->retry_after_s > 0) {
		unsigned asked = s->retry_after_s > 300 ? 300000 : (unsigned)s->retry_after_s * 1000;

		if (asked > jittered)
			jittered = asked;
	}
	s->backoff_ms = ms * 2 > inf->opts.backoff_max_ms ? inf->opts.backoff_max_ms : ms * 2;
	s->phase = next;
	s->due_ns = util_now_ns() + (uint64_t)jittered * 1000000ULL;
	stat_add(&inf->stats.errors, 1);
	log_warn("informer", "%s: %s; retrying in %.1f s", kinds[s->kind].name, why,
		 jittered / 1000.0);
}

static void mark_synced(struct stream *s)
{
	struct cache_informer *inf = s->inf;
	bool all = true;

	s->synced = true;
	/* Readiness never waits for another scheduler's objects (kind_optional):
	 * their APIs may be slow or broken without troupe's own being so. */
	for (int k = 0; k < K_COUNT; k++)
		all = all && (inf->streams[k].synced || kind_optional((enum kind)k));
	if (all && !cache_is_synced(inf->cache)) {
		cache_set_synced(inf->cache, true);
		log_info("informer", "initial lists applied");
	}
	cache__inf_readiness_update(inf);
}

/* A PodGroup or Queue API that is not served (404), or, for another
 * scheduler's, that troupe may not read (403): its objects are not known (a
 * gang then takes its quorum from its pods' labels, a queue its weight from
 * troupe's config or 1); the list is tried again every podgroup_retry_s, so an
 * API installed later is picked up. Said once until a list of it succeeds
 * again. */
static void disable_optional(struct stream *s, long status, bool watch)
{
	struct cache_informer *inf = s->inf;
	const struct kind_info *k = &kinds[s->kind];

	if (!s->absent_said) {
		s->absent_said = true;
		if (status == 404)
			log_info("informer", "%s (%s) are not served here; checking again every "
				 "%u s", k->what, k->api_version, inf->opts.podgroup_retry_s);
		else
			log_warn("informer", "%s (%s): troupe may not %s them (403); %s; grant "
				 "list and watch on %s to read them (checking again every %u s)",
				 k->what, k->api_version, watch ? "watch" : "list",
				 k->pg_api >= 0 ? "their gangs take their quorum from pod labels"
				 : k->dra ? "GPUs given through DRA are not counted"
					  : "their weights are not used",
				 k->name, inf->opts.podgroup_retry_s);
	}
	free(s->cont);
	s->cont = NULL;
	/* What it had read is forgotten: an API gone, or no longer readable,
	 * says nothing of its groups any more. */
	cache__inf_seen_clear(s);
	strmap_init(&s->seen);
	cache__inf_sweep(s);
	s->phase = P_DISABLED;
	s->failing = false;
	s->due_ns = util_now_ns() + (uint64_t)inf->opts.podgroup_retry_s * 1000000000ULL;
	/* Authorization comes before the lookup: a 404 is an allowed list. */
	if (status == 404)
		cache__inf_request_answered(s, watch);
	mark_synced(s);
}

static void list_page_done(struct stream *s, long status, CURLcode rc)
{
	struct cache_informer *inf = s->inf;
	char reason[FAILURE_REASON_BUF], msg[STATUS_MSG_BUF], why[TROUPE_MESSAGE_BUF];
	char key[K8S_KEY_BUF];
	const cJSON *items, *it, *meta;
	const char *cont;
	cJSON *root;
	size_t n = 0;

	if (rc != CURLE_OK || status != 200) {
		if (rc == CURLE_OK && (status == 404 || (status == 403 && kind_optional(s->kind))) &&
		    kinds[s->kind].api_version) {
			disable_optional(s, status, false);
			return;
		}
		if (rc == CURLE_OK && status == 410 && s->cont) {
			log_info("informer", "%s: list continue token expired; listing again",
				 kinds[s->kind].name);
			free(s->cont);
			s->cont = NULL;
			s->phase = P_START;
			s->due_ns = 0;
			return;
		}
		if (rc == CURLE_OK && status == 401)
			cache__api_refresh_token(inf->api, true);
		cache__inf_describe_failure(rc, s->curl_err, status, &s->body, reason, sizeof(reason),
					    msg, sizeof(msg));
		if (rc == CURLE_OK && status == 403)
			cache__inf_request_forbidden(s, false, msg);
		snprintf(why, sizeof(why), rc != CURLE_OK ? "list failed: %s" : "list answered %s",
			 reason);
		cache__inf_request_failed(s, false, reason);
		free(s->cont);
		s->cont = NULL;
		back_off(s, P_START, why);
		return;
	}
	root = cJSON_ParseWithLength(s->body.buf ? s->body.buf : "", s->body.len);
	items = cJSON_GetObjectItemCaseSensitive(root, "items");
	meta = json_obj(root, "metadata");
	if (!root || (items && !cJSON_IsArray(items) && !cJSON_IsNull(items))) {
		cJSON_Delete(root);
		free(s->cont);
		s->cont = NULL;
		cache__inf_request_failed(s, false, "the answer is not a list");
		back_off(s, P_START, "list answer is not a list");
		return;
	}
	cache__inf_request_answered(s, false);
	s->absent_said = false;         /* served and readable: a later 404 or 403 is news */
	cJSON_ArrayForEach(it, json_list(items)) {
		cache__inf_apply_object(s, it, false, key, sizeof(key));
		if (key[0])
			cache__inf_seen_add(s, key);
		n++;
	}
	if (!s->cont)
		cache__inf_remember_rv(s, json_str(meta, "resourceVersion"));
	cont = json_str(meta, "continue");
	free(s->cont);
	s->cont = cont && *cont ? strdup(cont) : NULL;
	cJSON_Delete(root);
	strbuf_fini(&s->body);
	if (s->cont) {
		cache__inf_start_list(s);
		return;
	}
	cache__inf_sweep(s);
	cache__inf_seen_clear(s);
	strmap_init(&s->seen);
	stat_add(&inf->stats.lists, 1);
	log_info("informer", "%s: listed (%zu in the last page) at resourceVersion %s; watching",
		 kinds[s->kind].name, n, s->rv);
	s->backoff_ms = 0;
	mark_synced(s);
	cache__inf_start_watch(s);
}

static void watch_done(struct stream *s, long status, CURLcode rc)
{
	struct cache_informer *inf = s->inf;
	uint64_t lived = util_now_ns() - s->started_ns;
	char reason[FAILURE_REASON_BUF], msg[STATUS_MSG_BUF], why[TROUPE_MESSAGE_BUF];

	if (s->line.len > 0) {
		/* A cut stream: what is left is part of an event. Never apply it. */
		log_info("informer", "%s watch: discarding a partial event of %zu bytes",
			 kinds[s->kind].name, s->line.len);
		stat_add(&inf->stats.partial_lines, 1);
		strbuf_fini(&s->line);
	}
	if (lived >= (uint64_t)inf->opts.healthy_reset_s * 1000000000ULL)
		s->backoff_ms = 0;      /* it was healthy: the next failure starts small */
	if (s->relist || (rc == CURLE_OK && status == 410)) {
		stat_add(&inf->stats.relists, 1);
		if (!s->relist)
			log_info("informer", "%s watch: resourceVersion %s expired (HTTP 410); "
				 "relisting", kinds[s->kind].name, s->rv);
		s->relist = false;
		s->phase = P_START;
		s->due_ns = 0;
		return;
	}
	if (rc == CURLE_OK && status == 200 && !s->broken &&
	    (s->events_this_watch > 0 || lived > 1000000000ULL)) {
		/* The server ended the watch (its timeout): resume at once. */
		s->short_watches = 0;
		s->healthy_ns = util_now_ns();
		stat_add(&inf->stats.watch_restarts, 1);
		log_debug("informer", "%s watch ended after %.1f s; resuming from %s",
			  kinds[s->kind].name, lived / 1e9, s->rv);
		s->phase = P_WATCH_DUE;
		s->due_ns = 0;
		return;
	}
	if (rc == CURLE_OK && (status == 404 || (status == 403 && kind_optional(s->kind))) &&
	    kinds[s->kind].api_version) {
		disable_optional(s, status, true);
		return;
	}
	if (rc == CURLE_OK && status == 401)
		cache__api_refresh_token(inf->api, true);
	cache__inf_describe_failure(rc, s->curl_err, status, &s->body, reason, sizeof(reason), msg,
				    sizeof(msg));
	if (s->broken)
		snprintf(why, sizeof(why), "watch stream unusable");
	else
		snprintf(why, sizeof(why),
			 rc != CURLE_OK ? "watch failed: %s" : "watch answered %s", reason);
	if (rc == CURLE_OK && status == 403)
		cache__inf_request_forbidden(s, true, msg);
	/* A watch the server had taken and that then broke (cut, stalled, unusable,
	 * ended at once) says nothing of whether troupe can reconnect: the next
	 * attempt does. Only a watch never answered 200 is a failure. */
	if (!s->answered)
		cache__inf_request_failed(s, true, reason);
	else if (s->events_this_watch == 0 && lived < (uint64_t)WATCH_HEALTHY_MS * 1000000ULL)
		cache__inf_watch_ended_at_once(s, s->broken ? "stream unusable" : reason);
	else {
		s->short_watches = 0;   /* it lived, or carried events */
		s->healthy_ns = util_now_ns();
	}
	stat_add(&inf->stats.watch_restarts, 1);
	back_off(s, P_WATCH_DUE, why);
}

void cache__inf_on_done(struct stream *s, CURLcode rc)
{
	long status = 0;
	enum phase was = s->phase;

	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
	cache__inf_request_end(s);
	if (rc == CURLE_WRITE_ERROR && (s->relist || s->broken))
		rc = CURLE_OK;  /* we aborted it on purpose */
	if (was == P_LISTING)
		list_page_done(s, status, rc);
	else
		watch_done(s, status, rc);
}

