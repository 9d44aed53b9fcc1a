/* The informer: one thread that lists and then watches nodes, pods and pod
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
 *   - 404 on the PodGroup list: the CRD is not installed; that stream is
 *     disabled with one log line and retried every few minutes.
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
 */
#include "cache/api_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/strbuf.h"
#include "common/strmap.h"
#include "common/util.h"

enum kind { K_NODES, K_PODS, K_PODGROUPS, K_COUNT };

static const struct {
	const char *name;
	const char *path;
	enum cache_perm list, watch;    /* the permissions its requests need */
} kinds[K_COUNT] = {
	{ "nodes", "/api/v1/nodes", CACHE_PERM_LIST_NODES, CACHE_PERM_WATCH_NODES },
	{ "pods", "/api/v1/pods", CACHE_PERM_LIST_PODS, CACHE_PERM_WATCH_PODS },
	{ "podgroups", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups", CACHE_PERM_LIST_PODGROUPS,
	  CACHE_PERM_WATCH_PODGROUPS },
};

#define REVIEW_PATH "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

enum phase {
	P_START,        /* begin a list when due */
	P_LISTING,
	P_WATCH_DUE,    /* begin a watch when due */
	P_WATCHING,
	P_DISABLED,     /* podgroups without the CRD: list again when due */
};

enum { MAX_LINE = 64 * 1024 * 1024, RV_LEN = 64, MAX_STATUS = 64 * 1024 };

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
	bool relist;                    /* a watch said 410: list again */
	bool broken;                    /* the stream carried something unusable */
	uint64_t due_ns;                /* when P_START / P_WATCH_DUE may proceed */
	unsigned backoff_ms;
	uint64_t started_ns;            /* of the current request */
	uint64_t events_this_watch;
	long retry_after_s;
	bool answered;                  /* the current watch got 200 (headers in) */
	bool failing;                   /* the last list or watch request failed */
	char failure[400];              /* what failed: "watch pods: HTTP 503: ..." */
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

static void stat_add(uint64_t *ctr, uint64_t n)
{
	__atomic_add_fetch(ctr, n, __ATOMIC_RELAXED);
}

void cache_informer_get_stats(const struct cache_informer *inf, struct cache_informer_stats *out)
{
	out->events = __atomic_load_n(&inf->stats.events, __ATOMIC_RELAXED);
	out->lists = __atomic_load_n(&inf->stats.lists, __ATOMIC_RELAXED);
	out->relists = __atomic_load_n(&inf->stats.relists, __ATOMIC_RELAXED);
	out->watch_restarts = __atomic_load_n(&inf->stats.watch_restarts, __ATOMIC_RELAXED);
	out->errors = __atomic_load_n(&inf->stats.errors, __ATOMIC_RELAXED);
	out->partial_lines = __atomic_load_n(&inf->stats.partial_lines, __ATOMIC_RELAXED);
	out->permission_denials = __atomic_load_n(&inf->stats.permission_denials,
						  __ATOMIC_RELAXED);
}

void cache_informer_readiness(struct cache_informer *inf, struct cache_readiness *out)
{
	pthread_mutex_lock(&inf->lock);
	*out = inf->readiness;
	pthread_mutex_unlock(&inf->lock);
}

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
static void readiness_update(struct cache_informer *inf)
{
	struct cache_readiness r = { .state = CACHE_READY };
	char why[600];

	r.missing = inf->review_denied | inf->request_denied;
	for (int k = 0; k < K_COUNT; k++) {
		if (inf->streams[k].failing) {
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
static void request_forbidden(struct stream *s, bool watch, const char *msg)
{
	enum cache_perm p = watch ? kinds[s->kind].watch : kinds[s->kind].list;
	struct cache_informer *inf = s->inf;

	stat_add(&inf->stats.permission_denials, 1);
	if (inf->request_denied & (1u << p))
		return;
	inf->request_denied |= 1u << p;
	log_error("informer", "%s: forbidden (403): %s", cache_permission_get(p)->name,
		  msg[0] ? msg : "no message");
}

/* A list or watch request of <s> was answered: it is allowed, and the stream
 * is reaching the server. */
static void request_answered(struct stream *s, bool watch)
{
	enum cache_perm p = watch ? kinds[s->kind].watch : kinds[s->kind].list;
	struct cache_informer *inf = s->inf;

	if (inf->request_denied & (1u << p)) {
		inf->request_denied &= ~(1u << p);
		log_info("informer", "%s: allowed again", cache_permission_get(p)->name);
	}
	s->failing = false;
	readiness_update(inf);
}

/* A list or watch request of <s> failed (<reason>): troupe is not ready until
 * one is answered. */
static void request_failed(struct stream *s, bool watch, const char *reason)
{
	s->failing = true;
	snprintf(s->failure, sizeof(s->failure), "%s %s: %s", watch ? "watch" : "list",
		 kinds[s->kind].name, reason);
	readiness_update(s->inf);
}

/* What a request that just ended got, for logs and /readyz: libcurl's reason
 * (<curl_err>, else <rc>'s text), or the HTTP status with the message of the
 * Status the server sent in <body> (the message alone in <msg>). */
static void describe_failure(CURLcode rc, const char *curl_err, long status,
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

/* ---- Applying objects ------------------------------------------------------ */

static void seen_clear(struct stream *s)
{
	size_t pos = 0;
	const char *k;

	while (strmap_next(&s->seen, &pos, &k, NULL))
		free((char *)k);
	strmap_fini(&s->seen);
}

static void seen_add(struct stream *s, const char *key)
{
	char *k;

	if (strmap_get(&s->seen, key, strlen(key)))
		return;
	k = strdup(key);
	if (k && strmap_put(&s->seen, k, strlen(k), k, NULL) < 0)
		free(k);
}

static const char *obj_rv(const cJSON *obj)
{
	return json_str(json_obj(obj, "metadata"), "resourceVersion");
}

static void remember_rv(struct stream *s, const char *rv)
{
	if (rv && *rv && strlen(rv) < sizeof(s->rv))
		snprintf(s->rv, sizeof(s->rv), "%s", rv);
}

/* Apply one object of the stream's kind. <deleted>: it is gone. When <key> is
 * given, the object's identity is written there (for relist bookkeeping). */
static void apply_object(struct stream *s, const cJSON *obj, bool deleted, char *key,
			 size_t keylen)
{
	struct cache *c = s->inf->cache;
	const struct cache_opts *opts = cache_get_opts(c);
	char err[CACHE_ERR_LEN];

	if (key)
		key[0] = '\0';
	switch (s->kind) {
	case K_NODES: {
		struct cache_node *n = cache_node_parse(obj, opts, err, sizeof(err));

		if (!n) {
			log_warn("informer", "ignoring a node: %s", err);
			return;
		}
		if (key)
			snprintf(key, keylen, "%s", n->name);
		if (deleted) {
			cache_node_delete(c, n->name);
			cache_node_free(n);
		} else {
			cache_node_upsert(c, n);
		}
		return;
	}
	case K_PODS: {
		struct cache_pod *p = cache_pod_parse(obj, opts, err, sizeof(err));

		if (!p) {
			log_warn("informer", "ignoring a pod: %s", err);
			return;
		}
		if (key)
			snprintf(key, keylen, "%s", p->uid);
		if (deleted) {
			cache_pod_delete(c, p->uid);
			cache_pod_free(p);
		} else {
			cache_pod_apply(c, p);
		}
		return;
	}
	case K_PODGROUPS: {
		struct cache_podgroup *pg = cache_podgroup_parse(obj, opts, err, sizeof(err));

		if (!pg) {
			log_warn("informer", "ignoring a pod group: %s", err);
			return;
		}
		if (key)
			snprintf(key, keylen, "%s/%s", pg->ns, pg->name);
		if (deleted) {
			cache_podgroup_delete(c, pg->ns, pg->name);
			cache_podgroup_free(pg);
		} else {
			cache_podgroup_apply(c, pg);
		}
		return;
	}
	default:
		return;
	}
}

static bool keep_seen(const char *key, void *arg)
{
	struct stream *s = arg;

	return strmap_get(&s->seen, key, strlen(key)) != NULL;
}

struct pg_sweep {
	struct stream *s;
	char (*gone)[320];
	size_t n, cap;
};

static void collect_gone_group(const struct cache_podgroup *pg, void *arg)
{
	struct pg_sweep *sw = arg;
	char key[320];

	snprintf(key, sizeof(key), "%s/%s", pg->ns, pg->name);
	if (keep_seen(key, sw->s))
		return;
	if (sw->n == sw->cap) {
		size_t cap = sw->cap ? sw->cap * 2 : 64;
		char (*g)[320] = realloc(sw->gone, cap * sizeof(*g));

		if (!g)
			return;
		sw->gone = g;
		sw->cap = cap;
	}
	snprintf(sw->gone[sw->n++], sizeof(sw->gone[0]), "%s", key);
}

/* After a complete list: delete what the list did not contain. */
static void sweep(struct stream *s)
{
	struct cache *c = s->inf->cache;

	switch (s->kind) {
	case K_NODES:
		cache__node_sweep(c, keep_seen, s);
		break;
	case K_PODS:
		cache__pod_sweep(c, keep_seen, s);
		break;
	case K_PODGROUPS: {
		struct pg_sweep sw = { s, NULL, 0, 0 };

		cache_podgroup_foreach(c, collect_gone_group, &sw);
		for (size_t i = 0; i < sw.n; i++) {
			char *slash = strchr(sw.gone[i], '/');

			*slash = '\0';
			cache_podgroup_delete(c, sw.gone[i], slash + 1);
		}
		free(sw.gone);
		break;
	}
	default:
		break;
	}
}

/* ---- Requests ------------------------------------------------------------ */

static size_t on_list_data(char *ptr, size_t size, size_t n, void *arg)
{
	struct stream *s = arg;

	strbuf_append(&s->body, ptr, size * n);
	return strbuf_failed(&s->body) ? 0 : size * n;
}

static void handle_event(struct stream *s, const char *text, size_t len);

/* Split the stream into lines and apply each complete one. */
static size_t on_watch_data(char *ptr, size_t size, size_t n, void *arg)
{
	struct stream *s = arg;
	size_t total = size * n, start = 0;

	long code = 0;

	if (__atomic_load_n(&s->inf->stop, __ATOMIC_RELAXED))
		return 0;
	/* A refused watch (403, 410, 429, 5xx) carries a Status, not events: kept
	 * for the log line. */
	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200) {
		if (s->body.len < MAX_STATUS)
			strbuf_append(&s->body, ptr, total);
		return total;
	}
	strbuf_append(&s->line, ptr, total);
	if (strbuf_failed(&s->line) || s->line.len > MAX_LINE) {
		log_warn("informer", "%s watch: an event larger than %d bytes; restarting",
			 kinds[s->kind].name, MAX_LINE);
		s->broken = true;
		return 0;
	}
	for (;;) {
		char *nl = memchr(s->line.buf + start, '\n', s->line.len - start);

		if (!nl)
			break;
		handle_event(s, s->line.buf + start, (size_t)(nl - (s->line.buf + start)));
		start = (size_t)(nl - s->line.buf) + 1;
		if (s->relist || s->broken)
			return 0;       /* abort the transfer; on_done decides what next */
	}
	if (start) {
		memmove(s->line.buf, s->line.buf + start, s->line.len - start);
		s->line.len -= start;
		s->line.buf[s->line.len] = '\0';
	}
	return total;
}

static void handle_event(struct stream *s, const char *text, size_t len)
{
	cJSON *ev;
	const cJSON *obj;
	const char *type;

	while (len && (text[len - 1] == '\r' || text[len - 1] == ' '))
		len--;
	if (!len)
		return;
	ev = cJSON_ParseWithLength(text, len);
	type = json_str(ev, "type");
	obj = json_obj(ev, "object");
	if (!ev || !type || !obj) {
		log_warn("informer", "%s watch: unreadable event (%zu bytes); restarting the watch",
			 kinds[s->kind].name, len);
		s->broken = true;
		goto out;
	}
	if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
		apply_object(s, obj, false, NULL, 0);
		remember_rv(s, obj_rv(obj));
	} else if (strcmp(type, "DELETED") == 0) {
		apply_object(s, obj, true, NULL, 0);
		remember_rv(s, obj_rv(obj));
	} else if (strcmp(type, "BOOKMARK") == 0) {
		remember_rv(s, obj_rv(obj));
	} else if (strcmp(type, "ERROR") == 0) {
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
		const char *msg = json_str(obj, "message");

		if (cJSON_IsNumber(code) && code->valuedouble == 410) {
			log_info("informer", "%s watch: resourceVersion %s expired (%s); relisting",
				 kinds[s->kind].name, s->rv, msg ? msg : "410");
			s->relist = true;
		} else {
			log_warn("informer", "%s watch: error event %d: %s", kinds[s->kind].name,
				 cJSON_IsNumber(code) ? (int)code->valuedouble : 0, msg ? msg : "?");
			s->broken = true;
		}
		goto out;
	} else {
		log_warn("informer", "%s watch: unknown event type %s", kinds[s->kind].name, type);
		goto out;
	}
	s->events_this_watch++;
	stat_add(&s->inf->stats.events, 1);
out:
	cJSON_Delete(ev);
}

static size_t on_header(char *buf, size_t size, size_t n, void *arg)
{
	struct stream *s = arg;
	size_t len = size * n;
	long code = 0;

	if (len > 12 && strncasecmp(buf, "Retry-After:", 12) == 0)
		s->retry_after_s = strtol(buf + 12, NULL, 10);
	/* The blank line after a watch's headers: the server has taken the watch
	 * (it sends them at once, events may take minutes), so the stream is up. */
	if (s->phase == P_WATCHING && !s->answered && (len == 2 || len == 1) &&
	    (buf[0] == '\r' || buf[0] == '\n')) {
		curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code == 200) {
			s->answered = true;
			request_answered(s, true);
		}
	}
	return len;
}

static void request_end(struct stream *s)
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
		request_end(s);
		return -ENOMEM;
	}
	curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
	s->curl_err[0] = '\0';
	curl_easy_setopt(s->easy, CURLOPT_ERRORBUFFER, s->curl_err);
	curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, watch ? on_watch_data : on_list_data);
	curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(s->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(s->easy, CURLOPT_HEADERDATA, s);
	/* A list must finish; a watch lasts as long as the server keeps it, but a
	 * connection that delivers nothing (not even bookmarks) for long is dead. */
	if (!watch) {
		curl_easy_setopt(s->easy, CURLOPT_TIMEOUT_MS, 120000L);
	} else {
		curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_TIME,
				 (long)s->inf->opts.watch_timeout_max_s + 60L);
	}
	s->retry_after_s = 0;
	s->answered = false;
	s->started_ns = util_now_ns();
	if (curl_multi_add_handle(s->inf->multi, s->easy) != CURLM_OK) {
		request_end(s);
		return -EIO;
	}
	return 0;
}

static void start_list(struct stream *s)
{
	char query[2048];
	char *esc = NULL;

	if (!s->cont) {
		seen_clear(s);
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

static void start_watch(struct stream *s)
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

	if (s->retry_after_s > 0 && (unsigned long)s->retry_after_s * 1000 > jittered)
		jittered = (unsigned)(s->retry_after_s > 300 ? 300000 : s->retry_after_s * 1000);
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
	for (int k = 0; k < K_COUNT; k++)
		all = all && inf->streams[k].synced;
	if (all && !cache_is_synced(inf->cache)) {
		cache_set_synced(inf->cache, true);
		log_info("informer", "initial lists applied");
	}
	readiness_update(inf);
}

static void list_page_done(struct stream *s, long status, CURLcode rc)
{
	struct cache_informer *inf = s->inf;
	char reason[360], msg[320], why[400], key[320];
	const cJSON *items, *it, *meta;
	const char *cont;
	cJSON *root;
	size_t n = 0;

	if (rc != CURLE_OK || status != 200) {
		if (rc == CURLE_OK && status == 404 && s->kind == K_PODGROUPS) {
			if (s->phase != P_DISABLED && !s->synced)
				log_info("informer", "PodGroup CRD (scheduling.x-k8s.io/v1alpha1) not "
					 "installed; pod groups come only from pod labels; checking "
					 "again every %u s", inf->opts.podgroup_retry_s);
			free(s->cont);
			s->cont = NULL;
			s->phase = P_DISABLED;
			s->due_ns = util_now_ns() + (uint64_t)inf->opts.podgroup_retry_s * 1000000000ULL;
			/* Authorization comes before the lookup: a 404 is an allowed list. */
			request_answered(s, false);
			mark_synced(s);
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
		describe_failure(rc, s->curl_err, status, &s->body, reason, sizeof(reason), msg,
				 sizeof(msg));
		if (rc == CURLE_OK && status == 403)
			request_forbidden(s, false, msg);
		snprintf(why, sizeof(why), rc != CURLE_OK ? "list failed: %s" : "list answered %s",
			 reason);
		request_failed(s, false, reason);
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
		request_failed(s, false, "the answer is not a list");
		back_off(s, P_START, "list answer is not a list");
		return;
	}
	request_answered(s, false);
	cJSON_ArrayForEach(it, json_list(items)) {
		apply_object(s, it, false, key, sizeof(key));
		if (key[0])
			seen_add(s, key);
		n++;
	}
	if (!s->cont)
		remember_rv(s, json_str(meta, "resourceVersion"));
	cont = json_str(meta, "continue");
	free(s->cont);
	s->cont = cont && *cont ? strdup(cont) : NULL;
	cJSON_Delete(root);
	strbuf_fini(&s->body);
	if (s->cont) {
		start_list(s);
		return;
	}
	sweep(s);
	seen_clear(s);
	strmap_init(&s->seen);
	stat_add(&inf->stats.lists, 1);
	log_info("informer", "%s: listed (%zu in the last page) at resourceVersion %s; watching",
		 kinds[s->kind].name, n, s->rv);
	s->backoff_ms = 0;
	mark_synced(s);
	start_watch(s);
}

static void watch_done(struct stream *s, long status, CURLcode rc)
{
	struct cache_informer *inf = s->inf;
	uint64_t lived = util_now_ns() - s->started_ns;
	char reason[360], msg[320], why[400];

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
		stat_add(&inf->stats.watch_restarts, 1);
		log_debug("informer", "%s watch ended after %.1f s; resuming from %s",
			  kinds[s->kind].name, lived / 1e9, s->rv);
		s->phase = P_WATCH_DUE;
		s->due_ns = 0;
		return;
	}
	if (rc == CURLE_OK && status == 401)
		cache__api_refresh_token(inf->api, true);
	describe_failure(rc, s->curl_err, status, &s->body, reason, sizeof(reason), msg,
			 sizeof(msg));
	if (s->broken)
		snprintf(why, sizeof(why), "watch stream unusable");
	else
		snprintf(why, sizeof(why),
			 rc != CURLE_OK ? "watch failed: %s" : "watch answered %s", reason);
	if (rc == CURLE_OK && status == 403)
		request_forbidden(s, true, msg);
	/* A watch the server had taken and that then broke (cut, stalled, unusable,
	 * ended at once) says nothing of whether troupe can reconnect: the next
	 * attempt does. Only a watch never answered 200 is a failure. */
	if (!s->answered)
		request_failed(s, true, reason);
	stat_add(&inf->stats.watch_restarts, 1);
	back_off(s, P_WATCH_DUE, why);
}

static void on_done(struct stream *s, CURLcode rc)
{
	long status = 0;
	enum phase was = s->phase;

	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
	request_end(s);
	if (rc == CURLE_WRITE_ERROR && (s->relist || s->broken))
		rc = CURLE_OK;  /* we aborted it on purpose */
	if (was == P_LISTING)
		list_page_done(s, status, rc);
	else
		watch_done(s, status, rc);
}

/* ---- Access checks ----------------------------------------------------------- */

static size_t on_review_data(char *ptr, size_t size, size_t n, void *arg)
{
	struct review *rv = arg;

	if (rv->answer.len < MAX_STATUS)
		strbuf_append(&rv->answer, ptr, size * n);
	return size * n;
}

static void review_end(struct cache_informer *inf, struct review *rv)
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
		review_end(inf, rv);
	return ret;
}

/* One round: a review of every permission, all at once. */
static void reviews_start(struct cache_informer *inf)
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
	readiness_update(inf);
}

static void review_done(struct cache_informer *inf, struct review *rv, CURLcode rc)
{
	enum cache_perm p = (enum cache_perm)(rv - inf->reviews);
	char reason[256], why[400];
	bool allowed = false;
	long status = 0;

	curl_easy_getinfo(rv->easy, CURLINFO_RESPONSE_CODE, &status);
	why[0] = '\0';
	if (rc != CURLE_OK || (status != 201 && status != 200)) {
		describe_failure(rc, rv->curl_err, status, &rv->answer, why, sizeof(why), reason,
				 sizeof(reason));
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
	review_end(inf, rv);
	inf->reviews_running--;
}

/* The review <easy> belongs to, or NULL when it is a stream's. */
static struct review *review_of(struct cache_informer *inf, CURL *easy)
{
	for (int p = 0; p < CACHE_PERM_COUNT; p++)
		if (inf->reviews[p].easy == easy)
			return &inf->reviews[p];
	return NULL;
}

/* ---- The thread ------------------------------------------------------------- */

static void *informer_main(void *arg)
{
	struct cache_informer *inf = arg;
	uint64_t last_reclaim = 0;

	/* From here on this thread is the cache's single writer. */
	cache_writer_claim(inf->cache);
	while (!__atomic_load_n(&inf->stop, __ATOMIC_ACQUIRE)) {
		uint64_t now = util_now_ns(), next = now + 1000000000ULL;
		int running, left;
		CURLMsg *msg;

		for (int k = 0; k < K_COUNT; k++) {
			struct stream *s = &inf->streams[k];

			if ((s->phase == P_START || s->phase == P_DISABLED) && s->due_ns <= now)
				start_list(s);
			else if (s->phase == P_WATCH_DUE && s->due_ns <= now)
				start_watch(s);
			if ((s->phase == P_START || s->phase == P_DISABLED ||
			     s->phase == P_WATCH_DUE) && s->due_ns < next)
				next = s->due_ns;
		}
		/* A round still running when the next is due delays it: its end wakes
		 * the poll below. */
		if (inf->reviews_due_ns && !inf->reviews_running) {
			uint64_t period = (uint64_t)inf->opts.access_check_s * 1000000000ULL;

			if (inf->reviews_due_ns <= now) {
				reviews_start(inf);
				inf->reviews_due_ns = period ? now + period : 0;
			}
			if (inf->reviews_due_ns && inf->reviews_due_ns < next)
				next = inf->reviews_due_ns;
		}
		curl_multi_perform(inf->multi, &running);
		while ((msg = curl_multi_info_read(inf->multi, &left))) {
			struct stream *s = NULL;
			struct review *rv;

			if (msg->msg != CURLMSG_DONE)
				continue;
			rv = review_of(inf, msg->easy_handle);
			if (rv) {
				review_done(inf, rv, msg->data.result);
				continue;
			}
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
			on_done(s, msg->data.result);
		}
		if (now - last_reclaim > 1000000000ULL) {
			cache_writer_reclaim(inf->cache);
			last_reclaim = now;
		}
		now = util_now_ns();
		curl_multi_poll(inf->multi, NULL, 0,
				next > now ? (int)((next - now) / 1000000ULL) + 1 : 0, NULL);
	}
	for (int k = 0; k < K_COUNT; k++)
		request_end(&inf->streams[k]);
	for (int p = 0; p < CACHE_PERM_COUNT; p++)
		review_end(inf, &inf->reviews[p]);
	cache_writer_reclaim(inf->cache);
	return NULL;
}

struct cache_informer *cache_informer_start(struct cache *c, struct cache_api *api,
					    const struct cache_informer_opts *opts, char *err,
					    size_t errlen)
{
	struct cache_informer *inf = calloc(1, sizeof(*inf));

	if (!inf) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	inf->cache = c;
	inf->api = api;
	inf->opts = opts ? *opts : (struct cache_informer_opts){ 0 };
	if (!inf->opts.page_size)
		inf->opts.page_size = 500;
	if (!inf->opts.watch_timeout_min_s)
		inf->opts.watch_timeout_min_s = 300;
	if (inf->opts.watch_timeout_max_s < inf->opts.watch_timeout_min_s)
		inf->opts.watch_timeout_max_s = inf->opts.watch_timeout_min_s + 300;
	if (!inf->opts.backoff_initial_ms)
		inf->opts.backoff_initial_ms = 800;
	if (!inf->opts.backoff_max_ms)
		inf->opts.backoff_max_ms = 30000;
	if (!inf->opts.healthy_reset_s)
		inf->opts.healthy_reset_s = 60;
	if (!inf->opts.podgroup_retry_s)
		inf->opts.podgroup_retry_s = 300;
	inf->rng = (unsigned)util_now_ns();
	/* The first round goes with the first lists. */
	inf->reviews_due_ns = util_now_ns();
	inf->shown = CACHE_SYNCING;
	inf->readiness.state = CACHE_SYNCING;
	inf->multi = curl_multi_init();
	if (!inf->multi) {
		snprintf(err, errlen, "cannot create a curl multi handle");
		free(inf);
		return NULL;
	}
	pthread_mutex_init(&inf->lock, NULL);
	for (int k = 0; k < K_COUNT; k++) {
		inf->streams[k].inf = inf;
		inf->streams[k].kind = (enum kind)k;
		inf->streams[k].phase = P_START;
		strmap_init(&inf->streams[k].seen);
	}
	cache_set_synced(c, false);
	if (pthread_create(&inf->thread, NULL, informer_main, inf) != 0) {
		snprintf(err, errlen, "cannot start the informer thread");
		curl_multi_cleanup(inf->multi);
		pthread_mutex_destroy(&inf->lock);
		free(inf);
		return NULL;
	}
	return inf;
}

void cache_informer_stop(struct cache_informer *inf)
{
	if (!inf)
		return;
	__atomic_store_n(&inf->stop, true, __ATOMIC_RELEASE);
	curl_multi_wakeup(inf->multi);
	pthread_join(inf->thread, NULL);
	/* The informer wrote last; the thread that stopped it writes next. */
	cache_writer_claim(inf->cache);
	for (int k = 0; k < K_COUNT; k++) {
		struct stream *s = &inf->streams[k];

		strbuf_fini(&s->body);
		strbuf_fini(&s->line);
		free(s->cont);
		seen_clear(s);
	}
	curl_multi_cleanup(inf->multi);
	pthread_mutex_destroy(&inf->lock);
	free(inf);
}
