/* The event recorder (events.h): a bounded queue of occurrences that any
 * thread fills, and one worker thread that turns them into events.k8s.io/v1
 * Events, deduplicated into series and rate-limited per object.
 *
 * The queue is a ring of fixed-size slots allocated once, guarded by one
 * mutex held only to copy a slot in or out: emitting costs a vsnprintf into
 * the caller's stack and a memcpy, never an allocation or a request, so the
 * gang manager may emit under its own lock and bind may emit on its hot path.
 *
 * Everything else belongs to the worker alone and takes no lock: the series
 * table (key -> struct series, as client-go's eventCache: type, reason,
 * action and regarding object; the note is not part of the key) and the
 * per-object token buckets (client-go's spam filter, by source and object).
 * An occurrence whose series exists only counts: count and lastObservedTime
 * grow in memory, and the series is written (a strategic-merge PATCH of
 * `series`, as client-go's createPatchBytesForSeries makes) at its first
 * repeat, then at most every series_flush_s while it grows, and once more
 * when it closes. A new one needs a token from its object's bucket to be
 * created (POST); without one it is dropped and counted, as the spam filter
 * drops it. A PATCH answered 404 (the Event expired, an hour by default)
 * creates it again, as client-go does.
 */
#include "cache/events.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/api_internal.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/strmap.h"
#include "common/util.h"

#define EVENTS_PATH "/apis/events.k8s.io/v1/namespaces/%s/events"
#define NS_PER_S 1000000000ULL

enum {
	/* type|reason|action|kind|ns|name|uid|note hash: room for every part at
	 * its limit. */
	SERIES_KEY_BUF = 8 + 17 + CACHE_EVENT_REASON_BUF + CACHE_EVENT_ACTION_BUF + CACHE_EVENT_KIND_BUF +
			 K8S_NAMESPACE_BUF + K8S_NAME_BUF + K8S_UID_BUF,
	EVENTS_TIMEOUT_MS = 5000,       /* one write; the worker waits for it */
	EVENTS_ANSWER_MAX = 64 * 1024,  /* an Event echoed back; only errors are read */
	EVENTS_MAX_FAILURES = 3,        /* writes of one series before it is given up */
	EVENTS_TICK_MS = 500,           /* the worker looks at due series this often */
	EVENTS_TIME_BUF = 64,           /* "2026-12-01T23:10:00.123456Z" */
	/* A write's error: "HTTP 403: " and the Status message. */
	EVENTS_ERR_BUF = TROUPE_MESSAGE_BUF + 32,
};
/* A failed write is logged, but at most this often (with the count since). */
#define EVENTS_LOG_EVERY_NS (10ULL * NS_PER_S)

/* One occurrence as emitted: a queue slot, and a series' first. */
struct occurrence {
	enum cache_event_type type;     /* CACHE_EVENT_NORMAL or _WARNING */
	bool by_note;                   /* CACHE_EVENT_BY_NOTE */
	uint64_t at_ns;                 /* the recorder's clock */
	struct timespec wall;           /* CLOCK_REALTIME, for eventTime */
	char kind[CACHE_EVENT_KIND_BUF];
	char api_version[CACHE_EVENT_API_VERSION_BUF];
	char ns[K8S_NAMESPACE_BUF];
	char name[K8S_NAME_BUF];
	char uid[K8S_UID_BUF];
	char reason[CACHE_EVENT_REASON_BUF];
	char action[CACHE_EVENT_ACTION_BUF];
	char note[CACHE_EVENT_NOTE_BUF];
};

struct series {
	char key[SERIES_KEY_BUF];
	struct occurrence first;        /* the Event's fields (the first note stays) */
	char ev_name[K8S_NAME_BUF];     /* metadata.name: <regarding>.<hex nanoseconds> */
	unsigned count;
	uint64_t last_ns;
	struct timespec last_wall;      /* series.lastObservedTime */
	uint64_t written_ns;            /* last write attempt */
	unsigned written;               /* the count last written; 0: not created yet */
	unsigned failures;              /* writes failed in a row */
};

struct bucket {
	char key[SERIES_KEY_BUF];       /* kind|ns|name|uid */
	double tokens;
	uint64_t at_ns;
};

struct cache_events {
	struct cache *cache;
	struct cache_api *api;
	struct cache_events_opts opts;
	char controller[CACHE_EVENT_INSTANCE_BUF];
	char instance[CACHE_EVENT_INSTANCE_BUF];

	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct occurrence *ring;        /* opts.queue_size slots */
	unsigned head, n;               /* guarded by lock */
	bool stop;                      /* written under lock; read with __atomic too */
	pthread_t thread;
	bool running;

	/* The worker's own. */
	struct occurrence cur;
	struct strmap series;           /* key -> struct series */
	struct strmap buckets;          /* key -> struct bucket */
	uint64_t fail_logged_ns;
	unsigned fails_unlogged;
	uint64_t last_name_ns;          /* names' times only grow: no two alike */

	/* Counters: relaxed atomics, read by cache_events_get_stats. */
	struct cache_events_stats stats;
};

static void count(uint64_t *ctr)
{
	__atomic_add_fetch(ctr, 1, __ATOMIC_RELAXED);   /* pairs with the loads in get_stats */
}

static uint64_t now_ns(const struct cache_events *r)
{
	return r->opts.now_ns ? r->opts.now_ns(r->opts.clock_ctx) : util_now_ns();
}

void cache_events_opts_defaults(struct cache_events_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->queue_size = 1024;
	o->burst = 25;
	o->qps = 1.0 / 300.0;
	o->series_flush_s = 10;
	o->series_finish_s = 360;
	o->max_series = 4096;
	o->controller = "troupe";
}

const char *cache_events_drop_name(enum cache_events_drop d)
{
	static const char *const names[CACHE_EVENTS_DROP_COUNT] = {
		[CACHE_EVENTS_DROP_QUEUE_FULL] = "queue_full",
		[CACHE_EVENTS_DROP_RATE_LIMITED] = "rate_limited",
		[CACHE_EVENTS_DROP_NO_OBJECT] = "no_object",
		[CACHE_EVENTS_DROP_GAVE_UP] = "gave_up",
	};

	return (unsigned)d < CACHE_EVENTS_DROP_COUNT ? names[d] : "unknown";
}

/* ---- Emitting (any thread) ----------------------------------------------------- */

static void copy_str(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

int cache_events_emit(struct cache_events *r, enum cache_event_type type,
		      const struct cache_event_ref *regarding, const char *reason,
		      const char *action, const char *fmt, ...)
{
	struct occurrence o;
	va_list ap;
	int ret = 0;

	if (!r)
		return 0;
	if (!regarding || !regarding->kind || !regarding->ns || !*regarding->ns ||
	    !regarding->name || !*regarding->name || !reason || !action)
		return -EINVAL;
	/* Everything that costs (formatting, the clocks) is done on the caller's
	 * stack; the lock covers one copy into the ring. */
	o.type = type & CACHE_EVENT_WARNING ? CACHE_EVENT_WARNING : CACHE_EVENT_NORMAL;
	o.by_note = type & CACHE_EVENT_BY_NOTE;
	o.at_ns = now_ns(r);
	clock_gettime(CLOCK_REALTIME, &o.wall);
	copy_str(o.kind, sizeof(o.kind), regarding->kind);
	copy_str(o.api_version, sizeof(o.api_version), regarding->api_version);
	copy_str(o.ns, sizeof(o.ns), regarding->ns);
	copy_str(o.name, sizeof(o.name), regarding->name);
	copy_str(o.uid, sizeof(o.uid), regarding->uid);
	copy_str(o.reason, sizeof(o.reason), reason);
	copy_str(o.action, sizeof(o.action), action);
	va_start(ap, fmt);
	vsnprintf(o.note, sizeof(o.note), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&r->lock);
	if (r->n == r->opts.queue_size) {
		ret = -ENOSPC;
		goto out;
	}
	r->ring[(r->head + r->n) % r->opts.queue_size] = o;
	if (r->n++ == 0)
		pthread_cond_signal(&r->wake);
out:
	pthread_mutex_unlock(&r->lock);
	count(ret ? &r->stats.dropped[CACHE_EVENTS_DROP_QUEUE_FULL] : &r->stats.emitted);
	return ret;
}

/* ---- Writing (the worker) ----------------------------------------------------- */

static int send_request(struct cache_events *r, const char *method, const char *path,
			const char *ctype, const char *body, long *status, char *err,
			size_t errlen)
{
	struct cache__api_call call = {
		.method = method, .path = path, .content_type = ctype, .body = body,
		.timeout_ms = EVENTS_TIMEOUT_MS, .max_answer = EVENTS_ANSWER_MAX,
	};
	struct strbuf ans = STRBUF_INIT;
	int ret;

	if (r->opts.send)
		return r->opts.send(r->opts.send_ctx, method, path, ctype, body, status, err,
				    errlen);
	ret = cache__api_request(r->api, &call, &ans, err, errlen);
	*status = call.status;
	if (ret == 0 && (*status < 200 || *status > 299))
		cache__api_status_text(*status, ans.buf, ans.len, err, errlen);
	strbuf_fini(&ans);
	return ret;
}

/* A MicroTime: RFC 3339 in UTC with microseconds. */
static void micro_time(const struct timespec *t, char *out, size_t len)
{
	struct tm tm;
	char day[24];

	gmtime_r(&t->tv_sec, &tm);
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, len, "%.20s.%06dZ", day, (int)(t->tv_nsec / 1000 % 1000000));
}

static void put_series(struct strbuf *sb, const struct series *s)
{
	char t[EVENTS_TIME_BUF];

	micro_time(&s->last_wall, t, sizeof(t));
	strbuf_printf(sb, "\"series\":{\"count\":%u,\"lastObservedTime\":\"%s\"}", s->count, t);
}

static void put_field(struct strbuf *sb, const char *name, const char *v, bool comma)
{
	strbuf_printf(sb, "%s\"%s\":", comma ? "," : "", name);
	strbuf_put_json_str(sb, v, strlen(v));
}

/* The whole Event of series <s>, for its POST. */
static void event_body(const struct cache_events *r, const struct series *s, struct strbuf *sb)
{
	const struct occurrence *o = &s->first;
	char t[EVENTS_TIME_BUF];

	micro_time(&o->wall, t, sizeof(t));
	strbuf_puts(sb, "{\"apiVersion\":\"events.k8s.io/v1\",\"kind\":\"Event\",\"metadata\":{");
	put_field(sb, "name", s->ev_name, false);
	put_field(sb, "namespace", o->ns, true);
	strbuf_printf(sb, "},\"eventTime\":\"%s\"", t);
	put_field(sb, "reportingController", r->controller, true);
	put_field(sb, "reportingInstance", r->instance, true);
	put_field(sb, "action", o->action, true);
	put_field(sb, "reason", o->reason, true);
	put_field(sb, "type", o->type == CACHE_EVENT_WARNING ? "Warning" : "Normal", true);
	put_field(sb, "note", o->note, true);
	strbuf_puts(sb, ",\"regarding\":{");
	put_field(sb, "apiVersion", o->api_version, false);
	put_field(sb, "kind", o->kind, true);
	put_field(sb, "namespace", o->ns, true);
	put_field(sb, "name", o->name, true);
	if (o->uid[0])
		put_field(sb, "uid", o->uid, true);
	strbuf_putc(sb, '}');
	if (s->count > 1) {
		strbuf_putc(sb, ',');
		put_series(sb, s);
	}
	strbuf_putc(sb, '}');
}

static void write_failed(struct cache_events *r, const struct series *s, const char *method,
			 const char *why)
{
	uint64_t now = now_ns(r);

	count(&r->stats.failed);
	if (r->fail_logged_ns && util_elapsed_ns(now, r->fail_logged_ns) < EVENTS_LOG_EVERY_NS) {
		r->fails_unlogged++;
		return;
	}
	log_warn("events", "cannot %s Event %s/%s (%s on %s %s/%s): %s%s", method, s->first.ns,
		 s->ev_name, s->first.reason, s->first.kind, s->first.ns, s->first.name, why,
		 r->fails_unlogged ? " (and other writes failed since the last such line)" : "");
	r->fail_logged_ns = now ? now : 1;
	r->fails_unlogged = 0;
}

/* Write series <s> as it is now: POST when not created yet (or gone), else
 * PATCH its series. Returns true when written; false when it failed (then it
 * is retried at the next flush, up to EVENTS_MAX_FAILURES times). */
static bool series_write(struct cache_events *r, struct series *s)
{
	struct strbuf path = STRBUF_INIT, body = STRBUF_INIT;
	char err[EVENTS_ERR_BUF] = "";
	bool create = !s->written, ok = false;
	long status = 0;
	int ret;

	s->written_ns = now_ns(r);
again:
	strbuf_fini(&path);
	strbuf_fini(&body);
	strbuf_printf(&path, EVENTS_PATH, s->first.ns);
	if (create) {
		event_body(r, s, &body);
	} else {
		strbuf_printf(&path, "/%s", s->ev_name);
		strbuf_putc(&body, '{');
		put_series(&body, s);
		strbuf_putc(&body, '}');
	}
	if (strbuf_failed(&path) || strbuf_failed(&body)) {
		write_failed(r, s, create ? "create" : "patch", "out of memory");
		goto out;
	}
	ret = send_request(r, create ? "POST" : "PATCH", path.buf,
			   create ? "application/json" : "application/strategic-merge-patch+json",
			   body.buf, &status, err, sizeof(err));
	if (ret == 0 && !create && status == 404) {
		create = true;  /* expired or deleted: create it again, as client-go */
		goto again;
	}
	if (ret < 0 || status < 200 || status > 299) {
		write_failed(r, s, create ? "create" : "patch", err[0] ? err : strerror(-ret));
		/* A request the server refused as such (a 4xx but 408/429) will
		 * be refused again: give the series up at once, as client-go. */
		if (ret == 0 && status >= 400 && status < 500 && status != 408 && status != 429)
			s->failures = EVENTS_MAX_FAILURES;
		else
			s->failures++;
		goto out;
	}
	count(create ? &r->stats.posted : &r->stats.series_updates);
	s->written = s->count;
	s->failures = 0;
	ok = true;
out:
	strbuf_fini(&path);
	strbuf_fini(&body);
	return ok;
}

/* Take a token from the bucket of the object <o> regards, refilled at qps up
 * to burst since it was last looked at. */
static bool bucket_take(struct cache_events *r, const struct occurrence *o, uint64_t now)
{
	char key[SERIES_KEY_BUF];
	struct bucket *b;
	int n = snprintf(key, sizeof(key), "%s|%s|%s|%s", o->kind, o->ns, o->name, o->uid);

	b = strmap_get(&r->buckets, key, (size_t)n);
	if (!b) {
		/* Buckets kept at most as many as series: past that, the full
		 * ones (which forget nothing) go first, then all of them. */
		if (strmap_count(&r->buckets) >= r->opts.max_series) {
			size_t pos = 0;
			void *v;

			while (strmap_next(&r->buckets, &pos, NULL, &v))
				if (((struct bucket *)v)->tokens >= r->opts.burst - 1 ||
				    strmap_count(&r->buckets) >= 2 * (size_t)r->opts.max_series)
					free(strmap_del(&r->buckets, ((struct bucket *)v)->key,
							strlen(((struct bucket *)v)->key)));
		}
		b = calloc(1, sizeof(*b));
		if (!b)
			return false;
		memcpy(b->key, key, (size_t)n + 1);
		b->tokens = r->opts.burst;
		b->at_ns = now;
		if (strmap_put(&r->buckets, b->key, (size_t)n, b, NULL) < 0) {
			free(b);
			return false;
		}
	}
	b->tokens += (double)util_elapsed_ns(now, b->at_ns) / (double)NS_PER_S * r->opts.qps;
	if (b->tokens > r->opts.burst)
		b->tokens = r->opts.burst;
	/* An occurrence queued a while ago may be older than the last look. */
	if (now > b->at_ns)
		b->at_ns = now;
	if (b->tokens < 1.0)
		return false;
	b->tokens -= 1.0;
	return true;
}

static void series_forget(struct cache_events *r, struct series *s)
{
	free(strmap_del(&r->series, s->key, strlen(s->key)));
}

/* Make room for one more series: the one observed longest ago goes. */
static void series_evict(struct cache_events *r)
{
	struct series *old = NULL;
	size_t pos = 0;
	void *v;

	while (strmap_next(&r->series, &pos, NULL, &v))
		if (!old || ((struct series *)v)->last_ns < old->last_ns)
			old = v;
	if (!old)
		return;
	if (old->count != old->written)
		count(&r->stats.dropped[CACHE_EVENTS_DROP_GAVE_UP]);
	series_forget(r, old);
}

/* One occurrence taken from the queue. */
static void take(struct cache_events *r, struct occurrence *o)
{
	char key[SERIES_KEY_BUF], buf[K8S_KEY_BUF + K8S_UID_BUF];
	struct cache_podgroup pg;
	struct series *s;
	uint64_t stamp;
	size_t room;
	int n;

	if (!o->uid[0] && strcmp(o->kind, CACHE_EVENT_PODGROUP_KIND) == 0) {
		/* kubectl describe finds Events by the object's uid too. */
		if (!r->cache || cache_podgroup_get(r->cache, o->ns, o->name, &pg, buf,
						    sizeof(buf)) < 0 || !pg.uid[0]) {
			count(&r->stats.dropped[CACHE_EVENTS_DROP_NO_OBJECT]);
			return;
		}
		copy_str(o->uid, sizeof(o->uid), pg.uid);
		/* The group of whichever API gave the gang its terms. */
		copy_str(o->api_version, sizeof(o->api_version), cache_pg_apis[pg.api].api_version);
	}
	/* With by_note, the note's FNV-1a hash stands for it in the key. */
	n = snprintf(key, sizeof(key), "%d|%s|%s|%s|%s|%s|%s|%016llx", (int)o->type, o->reason,
		     o->action, o->kind, o->ns, o->name, o->uid,
		     o->by_note ? (unsigned long long)strmap_hash(o->note, strlen(o->note)) : 0ULL);
	s = strmap_get(&r->series, key, (size_t)n);
	if (s) {
		s->count++;
		s->last_ns = o->at_ns;
		s->last_wall = o->wall;
		return;         /* written when due (flush_due) */
	}
	if (!bucket_take(r, o, o->at_ns)) {
		count(&r->stats.dropped[CACHE_EVENTS_DROP_RATE_LIMITED]);
		return;
	}
	if (strmap_count(&r->series) >= r->opts.max_series)
		series_evict(r);
	s = calloc(1, sizeof(*s));
	if (!s) {
		count(&r->stats.dropped[CACHE_EVENTS_DROP_GAVE_UP]);
		return;
	}
	memcpy(s->key, key, (size_t)n + 1);
	s->first = *o;
	s->count = 1;
	s->last_ns = o->at_ns;
	s->last_wall = o->wall;
	/* client-go's name: the object's name and the time in hex nanoseconds,
	 * the name cut so the whole stays a valid name. */
	room = sizeof(s->ev_name) - 18;
	stamp = (uint64_t)o->wall.tv_sec * NS_PER_S + (uint64_t)o->wall.tv_nsec;
	if (stamp <= r->last_name_ns)
		stamp = r->last_name_ns + 1;
	r->last_name_ns = stamp;
	snprintf(s->ev_name, sizeof(s->ev_name), "%.*s.%llx", (int)room, o->name,
		 (unsigned long long)stamp);
	if (strmap_put(&r->series, s->key, (size_t)n, s, NULL) < 0) {
		free(s);
		count(&r->stats.dropped[CACHE_EVENTS_DROP_GAVE_UP]);
		return;
	}
	if (!series_write(r, s) && s->failures >= EVENTS_MAX_FAILURES) {
		count(&r->stats.dropped[CACHE_EVENTS_DROP_GAVE_UP]);
		series_forget(r, s);
	}
}

/* Write the series that are due, close those unobserved for series_finish_s. */
static void flush_due(struct cache_events *r)
{
	uint64_t now = now_ns(r), flush = (uint64_t)r->opts.series_flush_s * NS_PER_S;
	uint64_t finish = (uint64_t)r->opts.series_finish_s * NS_PER_S;
	size_t pos = 0;
	void *v;

	while (strmap_next(&r->series, &pos, NULL, &v)) {
		struct series *s = v;
		bool done = util_elapsed_ns(now, s->last_ns) >= finish;
		bool due = s->count != s->written &&
			   (done || s->written == 1 || util_elapsed_ns(now, s->written_ns) >= flush);

		/* Stopping: no more writes (each may wait EVENTS_TIMEOUT_MS). The
		 * load pairs with the store in cache_events_free. */
		if (__atomic_load_n(&r->stop, __ATOMIC_RELAXED))
			return;
		/* A series not created yet (its POST failed) waits a flush. */
		if (!s->written && util_elapsed_ns(now, s->written_ns) < flush && !done)
			due = false;
		if (due && bucket_take(r, &s->first, now) && !series_write(r, s) &&
		    s->failures >= EVENTS_MAX_FAILURES) {
			count(&r->stats.dropped[CACHE_EVENTS_DROP_GAVE_UP]);
			series_forget(r, s);
			continue;
		}
		if (done && (s->count == s->written || s->failures >= EVENTS_MAX_FAILURES)) {
			series_forget(r, s);
		}
	}
}

void cache_events_pump(struct cache_events *r)
{
	for (;;) {
		pthread_mutex_lock(&r->lock);
		if (!r->n || r->stop) {
			pthread_mutex_unlock(&r->lock);
			break;
		}
		r->cur = r->ring[r->head];
		r->head = (r->head + 1) % r->opts.queue_size;
		r->n--;
		pthread_mutex_unlock(&r->lock);
		take(r, &r->cur);
	}
	flush_due(r);
	/* pairs with the load in cache_events_get_stats */
	__atomic_store_n(&r->stats.series, (unsigned)strmap_count(&r->series), __ATOMIC_RELAXED);
}

/* Whether troupe may create and patch events: asked once, only to warn. */
static void check_access(struct cache_events *r)
{
	if (!r->api)
		return;         /* a test's sender */
	for (int p = CACHE_OPT_PERM_CREATE_EVENTS; p <= CACHE_OPT_PERM_PATCH_EVENTS; p++) {
		const struct cache_permission *perm =
			cache_optional_permission_get((enum cache_optional_perm)p);
		char err[EVENTS_ERR_BUF] = "", reason[TROUPE_MESSAGE_BUF] = "";
		int ret = cache__api_may(r->api, perm, EVENTS_TIMEOUT_MS, NULL, reason,
					 sizeof(reason), err, sizeof(err));

		if (ret == 0)
			log_warn("events", "missing permission: %s (group \"%s\"): troupe's Events "
				 "will fail; add it to troupe's ClusterRole "
				 "(config/deploy/rbac.yaml)%s%s", perm->name, perm->group,
				 reason[0] ? ": " : "", reason);
		else if (ret < 0)
			log_info("events", "cannot check permission %s: %s", perm->name, err);
	}
}

static void *worker_main(void *arg)
{
	struct cache_events *r = arg;
	struct timespec until;

	check_access(r);
	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		if (!r->n) {
			until = util_deadline_after_ns(CLOCK_MONOTONIC,
						       (uint64_t)EVENTS_TICK_MS * 1000000ULL);
			pthread_cond_timedwait(&r->wake, &r->lock, &until);
		}
		pthread_mutex_unlock(&r->lock);
		cache_events_pump(r);
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* ---- Lifecycle ----------------------------------------------------------------- */

struct cache_events *cache_events_new(struct cache *c, struct cache_api *api,
				      const struct cache_events_opts *o)
{
	struct cache_events *r;
	pthread_condattr_t ca;
	int err;

	if (!o->queue_size || !o->burst || o->qps < 0 || !o->max_series || (!api && !o->send)) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->ring = calloc(o->queue_size, sizeof(*r->ring));
	if (!r->ring) {
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	r->cache = c;
	r->api = api;
	r->opts = *o;
	copy_str(r->controller, sizeof(r->controller), o->controller ? o->controller : "troupe");
	if (o->instance && *o->instance)
		copy_str(r->instance, sizeof(r->instance), o->instance);
	else if (gethostname(r->instance, sizeof(r->instance) - 1) < 0 || !r->instance[0])
		copy_str(r->instance, sizeof(r->instance), "troupe");
	r->opts.controller = r->controller;
	r->opts.instance = r->instance;
	strmap_init(&r->series);
	strmap_init(&r->buckets);
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (!o->no_thread) {
		err = pthread_create(&r->thread, NULL, worker_main, r);
		if (err) {
			cache_events_free(r);
			errno = err;
			return NULL;
		}
		r->running = true;
	}
	return r;
}

static void map_free(struct strmap *m)
{
	size_t pos = 0;
	void *v;

	while (strmap_next(m, &pos, NULL, &v))
		free(v);
	strmap_fini(m);
}

void cache_events_free(struct cache_events *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	__atomic_store_n(&r->stop, true, __ATOMIC_RELAXED);    /* pairs with flush_due's load */
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
	if (r->running)
		pthread_join(r->thread, NULL);
	map_free(&r->series);
	map_free(&r->buckets);
	pthread_cond_destroy(&r->wake);
	pthread_mutex_destroy(&r->lock);
	free(r->ring);
	free(r);
}

void cache_events_get_stats(const struct cache_events *r, struct cache_events_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!r)
		return;
	/* Relaxed loads: each counter alone is what /metrics needs. */
	out->emitted = __atomic_load_n(&r->stats.emitted, __ATOMIC_RELAXED);
	out->posted = __atomic_load_n(&r->stats.posted, __ATOMIC_RELAXED);
	out->series_updates = __atomic_load_n(&r->stats.series_updates, __ATOMIC_RELAXED);
	out->failed = __atomic_load_n(&r->stats.failed, __ATOMIC_RELAXED);
	for (int d = 0; d < CACHE_EVENTS_DROP_COUNT; d++)
		out->dropped[d] = __atomic_load_n(&r->stats.dropped[d], __ATOMIC_RELAXED);
	out->series = __atomic_load_n(&r->stats.series, __ATOMIC_RELAXED);
	pthread_mutex_lock((pthread_mutex_t *)&r->lock);
	out->queued = r->n;
	pthread_mutex_unlock((pthread_mutex_t *)&r->lock);
}
