/* The event recorder: Kubernetes Events (events.k8s.io/v1) that put troupe's
 * decisions where people look, `kubectl describe pod` and `kubectl describe
 * podgroup`. reportingController is "troupe", reportingInstance the pod (or
 * host) name.
 *
 * It records as client-go's recorder does (k8s.io/client-go/tools/events):
 * occurrences with the same type, reason, action, reporting controller and
 * instance and regarding object (the note is not part of the key, unless the
 * caller asks: CACHE_EVENT_BY_NOTE) make one series, first created with a POST, later updated with a PATCH of
 * series.count and series.lastObservedTime; a series nobody observed for
 * series_finish_s is closed. Writes per object are rate-limited by a token
 * bucket as client-go's spam filter (tools/record/events_cache.go) limits them:
 * <burst> at once, then <qps>. Over the limit a new Event is dropped (and
 * counted); a series' update only waits, its count growing meanwhile, so
 * 1,000 refusals of one pod make one Event whose count says 1,000.
 *
 * Callers never wait for the API: cache_events_emit copies the occurrence into
 * a preallocated slot of a bounded queue (one short mutex, no allocation, no
 * I/O) and returns; one worker thread takes them out, keeps the series and the
 * buckets (its own, unlocked), and posts. A full queue drops the occurrence and
 * counts it; a failed post is logged and counted.
 *
 * Thread: cache_events_emit and cache_events_get_stats from any thread, also
 * under a caller's lock; the rest from the thread that owns the recorder.
 */
#ifndef TROUPE_CACHE_EVENTS_H
#define TROUPE_CACHE_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/api.h"
#include "cache/cache.h"

enum {
	CACHE_EVENT_NOTE_BUF = 1024,    /* events.k8s.io refuses a note over 1 kB */
	CACHE_EVENT_REASON_BUF = 64,    /* troupe's reasons are short CamelCase words */
	CACHE_EVENT_ACTION_BUF = 32,
	CACHE_EVENT_KIND_BUF = 32,
	CACHE_EVENT_API_VERSION_BUF = 64,
	CACHE_EVENT_INSTANCE_BUF = 129, /* reportingInstance: at most 128 characters */
};

/* The PodGroup troupe watches (scheduling.x-k8s.io/v1alpha1), as Events regard it. */
#define CACHE_EVENT_PODGROUP_KIND "PodGroup"
#define CACHE_EVENT_PODGROUP_API_VERSION "scheduling.x-k8s.io/v1alpha1"

enum cache_event_type {
	CACHE_EVENT_NORMAL = 0,
	CACHE_EVENT_WARNING = 1,
	/* Or'ed into the type: the note is part of the series key too, so an
	 * occurrence in other words starts an Event of its own. For notes that
	 * carry state ("waiting for its members: 2 of 3 exist"): a series keeps
	 * its first note, as the API server refuses to change an Event's note,
	 * and `kubectl describe` would show the first state for ever. */
	CACHE_EVENT_BY_NOTE = 0x100,
};

/* The object an Event is about (its `regarding`). <uid> NULL or "" for a
 * PodGroup: the worker looks it up in the cache (cache_podgroup_get), so a
 * caller under a lock need not. */
struct cache_event_ref {
	const char *kind;               /* "Pod", CACHE_EVENT_PODGROUP_KIND */
	const char *api_version;        /* "v1", CACHE_EVENT_PODGROUP_API_VERSION */
	const char *ns;
	const char *name;
	const char *uid;
};

/* How the recorder sends a request: in place of the API server in tests.
 * Returns 0 with the answer's <status>, or -errno with <err> set when nothing
 * was answered. */
typedef int (*cache_events_send_fn)(void *ctx, const char *method, const char *path,
				    const char *content_type, const char *body, long *status,
				    char *err, size_t errlen);

struct cache_events_opts {
	unsigned queue_size;            /* occurrences waiting for the worker (1024) */
	unsigned burst;                 /* writes per object at once (25, as client-go) */
	double qps;                     /* writes per object per second after it (1/300) */
	/* A series' new count is written at most this often (10; client-go
	 * refreshes every 30 minutes, but then `kubectl describe` of a pending
	 * pod would show a stale count). Its first repeat is written at once. */
	unsigned series_flush_s;
	unsigned series_finish_s;       /* a series unobserved this long is closed (360) */
	unsigned max_series;            /* series remembered at most (4096) */
	const char *controller;         /* reportingController ("troupe") */
	const char *instance;           /* reportingInstance (the host name when NULL) */
	/* Tests: no worker thread (cache_events_pump does its work), a clock
	 * (monotonic nanoseconds; NULL: util_now_ns), and a sender (NULL: the API). */
	bool no_thread;
	uint64_t (*now_ns)(void *ctx);
	void *clock_ctx;
	cache_events_send_fn send;
	void *send_ctx;
};

/* Fill <o> with every default above. */
void cache_events_opts_defaults(struct cache_events_opts *o);

struct cache_events;

/* Create the recorder and start its worker, which first checks (once) that
 * troupe may create and patch events, warning if not. <c> resolves PodGroup
 * uids; <api> is where Events go (may be NULL when opts->send is set). The
 * strings in <o> are copied. NULL with errno set (EINVAL: a queue size or
 * burst of 0, a negative qps). */
struct cache_events *cache_events_new(struct cache *c, struct cache_api *api,
				      const struct cache_events_opts *o);
/* Stop the worker after the request in flight (what is queued is not posted)
 * and free the recorder. NULL does nothing. Call after every thread that
 * could emit has stopped. */
void cache_events_free(struct cache_events *r);

/* Record one occurrence: <reason> (CamelCase, fixed per kind of decision),
 * <action> ("Scheduling", "Binding", ...), and the note formatted from <fmt>
 * (cut at CACHE_EVENT_NOTE_BUF). Never blocks on the API and allocates
 * nothing. Returns 0 when queued, -ENOSPC when the queue was full (counted as
 * dropped), -EINVAL for a reference without kind, namespace or name. NULL <r>
 * returns 0 (events are off). Thread: any, also under a caller's lock. */
int cache_events_emit(struct cache_events *r, enum cache_event_type type,
		      const struct cache_event_ref *regarding, const char *reason,
		      const char *action, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

/* Tests (opts.no_thread): do what the worker does once — take every queued
 * occurrence, then write the series that are due. */
void cache_events_pump(struct cache_events *r);

/* Why an occurrence was not written. */
enum cache_events_drop {
	CACHE_EVENTS_DROP_QUEUE_FULL,   /* the queue was full when emitted */
	CACHE_EVENTS_DROP_RATE_LIMITED, /* a new Event over its object's bucket */
	CACHE_EVENTS_DROP_NO_OBJECT,    /* a PodGroup the cache does not know (no uid) */
	CACHE_EVENTS_DROP_GAVE_UP,      /* a series abandoned after failed writes, or evicted */
	CACHE_EVENTS_DROP_COUNT
};

/* "queue_full", "rate_limited", "no_object", "gave_up": /metrics labels. */
const char *cache_events_drop_name(enum cache_events_drop d);

struct cache_events_stats {
	uint64_t emitted;               /* occurrences queued */
	uint64_t posted;                /* Events created (POST answered 201) */
	uint64_t series_updates;        /* series written (PATCH answered 200) */
	uint64_t failed;                /* writes that failed (logged) */
	uint64_t dropped[CACHE_EVENTS_DROP_COUNT];
	unsigned queued;                /* occurrences waiting now */
	unsigned series;                /* series remembered now */
};

/* Counters for /metrics (cache_events_stats); zeros for NULL. Thread: any. */
void cache_events_get_stats(const struct cache_events *r, struct cache_events_stats *out);

#endif
