/* Leader election through a coordination.k8s.io/v1 Lease, as client-go's
 * tools/leaderelection does it, so that two or more troupe replicas behind one
 * Service serve with exactly one of them at a time: the leader renews the Lease
 * every retry period; a candidate takes it only once the record it last saw has
 * not changed for the record's leaseDurationSeconds *on the candidate's own
 * monotonic clock* (the wall-clock times in the record are for people, never
 * compared across machines); every write is conditional on the resourceVersion
 * read, so two candidates cannot both win. A leader that cannot renew within
 * the renew deadline stops leading at once, before anyone else may take over
 * (lease duration > renew deadline). On a clean stop the leader releases the
 * Lease (holderIdentity "", leaseDurationSeconds 1), so a standby takes over at
 * its next attempt instead of after a lease duration.
 *
 * The decision (given the record observed, my clock and my state, what to do)
 * is the pure part below, unit-tested on a fake clock; cache_lease_start runs
 * it on a thread of its own against the API server.
 */
#ifndef TROUPE_CACHE_LEASE_H
#define TROUPE_CACHE_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/api.h"
#include "common/limits.h"

/* A holder identity: troupe makes its own from the host name and pid; the API
 * server sets no limit, so a longer holder read from a Lease is cut (and then
 * never taken for troupe's own). */
enum { CACHE_LEASE_HOLDER_BUF = K8S_NAME_BUF };
/* metadata.resourceVersion: an opaque string, etcd's revision in practice. */
enum { CACHE_LEASE_VERSION_BUF = 64 };

/* ---- The decision (pure) ------------------------------------------------- */

/* The Lease's spec, as client-go's LeaderElectionRecord. */
struct cache_lease_record {
	char holder[CACHE_LEASE_HOLDER_BUF];    /* holderIdentity; "": nobody */
	bool holder_cut;                        /* holderIdentity was longer */
	int32_t duration_s;                     /* leaseDurationSeconds */
	int64_t acquire_us, renew_us;           /* wall clock, µs since the epoch; 0 unset */
	int32_t transitions;                    /* leaseTransitions */
	/* metadata.resourceVersion as read ("" for a record written): compared
	 * by cache_lease_observe, never written, so a change the spec does not
	 * show (a renewal within one clock tick) still restarts the clock. */
	char version[CACHE_LEASE_VERSION_BUF];
};

/* What an elector remembers between attempts. Zero-initialised at start. */
struct cache_lease_view {
	bool observed;                  /* rec holds a record read or written */
	struct cache_lease_record rec;  /* the last record read or written */
	uint64_t seen_ns;               /* my monotonic clock when rec last changed */
	uint64_t renewed_ns;            /* when my last successful write was sent; 0 none */
};

enum cache_lease_action {
	CACHE_LEASE_CREATE,     /* no Lease yet: create it, holding it */
	CACHE_LEASE_WAIT,       /* another holder's lease is still valid on my clock */
	CACHE_LEASE_ACQUIRE,    /* take it over: acquireTime now, transitions + 1 */
	CACHE_LEASE_RENEW,      /* mine already: renewTime now, the rest kept */
};

/* Note the record <got> read at <now_ns> (monotonic): when it differs from the
 * one remembered in any field, it becomes the one remembered and its clock
 * starts at <now_ns>. */
void cache_lease_observe(struct cache_lease_view *v, const struct cache_lease_record *got,
			 uint64_t now_ns);

/* What to do now, after cache_lease_observe (or with <found> false: the Lease
 * does not exist). Fills <out> with the record to write for every action but
 * CACHE_LEASE_WAIT. <me>: my identity; <wall_us>: my wall clock, for the
 * record's times; <duration_s>: the lease duration to write. */
enum cache_lease_action cache_lease_decide(const struct cache_lease_view *v, bool found,
					   const char *me, uint64_t now_ns, int64_t wall_us,
					   unsigned duration_s, struct cache_lease_record *out);

/* A write of <rec> sent at <sent_ns> succeeded. */
void cache_lease_wrote(struct cache_lease_view *v, const struct cache_lease_record *rec,
		       uint64_t sent_ns);

/* Whether I may act as the leader at <now_ns>: the record remembered is mine,
 * written by me, and my last successful write was sent less than
 * <renew_deadline_s> ago. */
bool cache_lease_leading(const struct cache_lease_view *v, const char *me, uint64_t now_ns,
			 unsigned renew_deadline_s);

/* The record a leader writes to let go: nobody holds it, for 1 second. */
void cache_lease_release_record(const struct cache_lease_view *v, int64_t wall_us,
				struct cache_lease_record *out);

/* ---- The Lease object on the wire ------------------------------------------ */

/* metav1.MicroTime text, "2026-12-01T16:42:36.123456Z", into <out> (at least
 * CACHE_LEASE_TIME_BUF bytes). */
enum { CACHE_LEASE_TIME_BUF = 32 };
void cache_lease_format_time(int64_t us, char *out, size_t len);
/* RFC 3339 with up to 9 fraction digits and Z or an offset. Returns 0 or -EINVAL. */
int cache_lease_parse_time(const char *s, int64_t *us);
/* Read a Lease's spec from its JSON text. Absent fields are zero. Returns 0, or
 * -EINVAL when <body> is not a Lease object. */
int cache_lease_parse(const char *body, size_t len, struct cache_lease_record *out);
/* <rec> as a LeaseSpec JSON object text (the caller frees it), NULL without memory. */
char *cache_lease_spec_json(const struct cache_lease_record *rec);

/* ---- The elector --------------------------------------------------------------- */

struct cache_lease_opts {
	const char *ns;                 /* the Lease's namespace */
	const char *name;               /* the Lease's name */
	const char *identity;           /* this replica's holderIdentity */
	unsigned lease_duration_s;      /* default 15 */
	unsigned renew_deadline_s;      /* default 10 */
	unsigned retry_period_s;        /* default 2 */
};

void cache_lease_opts_defaults(struct cache_lease_opts *o);
/* Check <o> as client-go does: every field set, lease duration > renew deadline
 * > 1.2 x retry period. Returns 0 or -EINVAL with <err> set. */
int cache_lease_opts_check(const struct cache_lease_opts *o, char *err, size_t errlen);

/* Called on the elector's thread when this replica starts or stops leading;
 * <holder> is who holds the Lease as far as it knows ("" nobody). */
typedef void (*cache_lease_change_fn)(void *arg, bool leading, const char *holder);

struct cache_lease;

/* Start the elector's thread; the strings are copied. Returns NULL with <err>
 * set. */
struct cache_lease *cache_lease_start(struct cache_api *api, const struct cache_lease_opts *opts,
				      cache_lease_change_fn on_change, void *arg, char *err,
				      size_t errlen);
/* Whether this replica leads now: false from the moment its renew deadline
 * passes, even while the thread still waits on the API server. Thread: any. */
bool cache_lease_is_leader(const struct cache_lease *l);
/* Who holds the Lease as last seen ("" nobody, or not read yet). Thread: any. */
void cache_lease_holder(const struct cache_lease *l, char *out, size_t len);
/* Stop the thread; when leading, stop leading at once and release the Lease
 * (one attempt, within the renew deadline). <l> stays valid, never leading, so
 * the binder and /readyz may still ask it until cache_lease_free. A second
 * call does nothing. */
void cache_lease_stop(struct cache_lease *l);
/* Stop (if not yet) and free; after every thread that could ask has stopped. */
void cache_lease_free(struct cache_lease *l);

/* ---- The binder's gate ---------------------------------------------------------- */

/* Make <b> post only while <lease> leads: a Binding queued or retried after
 * this replica lost its Lease completes with -ECANCELED ("not the leader")
 * and is never posted. Call once, before anything is submitted; NULL: no gate.
 * (Declared here, not in api.h, because only leader election needs it.) */
void cache_binder_set_gate(struct cache_binder *b, const struct cache_lease *lease);

#endif
