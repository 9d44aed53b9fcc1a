/* Gang recovery (recover.c): a thread that finishes, or rolls back, gangs a
 * replica left partly bound, from the plan each bound member carries. */
#ifndef TROUPE_EXTENDER_RECOVER_H
#define TROUPE_EXTENDER_RECOVER_H

#include <stdbool.h>
#include <stdint.h>

struct ext_service;
struct cache_api;

/* gang.recover_partial, gang.recover_interval_seconds,
 * gang.recover_grace_seconds, gang.partial_rollback_seconds. */
struct ext_recover_opts {
	bool enabled;
	unsigned interval_s;            /* between passes */
	/* A gang must look partly bound this long before it is completed here:
	 * longer than a healthy replica takes between a gang's Bindings, so a
	 * replica that is not binding it (a sidecar's idle troupe) does not race
	 * the one that is. */
	unsigned grace_s;
	unsigned rollback_after_s;      /* partly bound this long: roll back; 0: never */
};

struct ext_recover_stats {
	uint64_t passes;
	uint64_t completed;             /* gangs found partly bound, then complete */
	uint64_t bindings;              /* Bindings this module posted and saw accepted */
	uint64_t refused;               /* ... and saw refused */
	uint64_t rolled_back;           /* gangs rolled back */
	uint64_t pods_deleted;
};

void ext_recover_opts_defaults(struct ext_recover_opts *o);
/* A recovery for <svc> (which must outlive it), deleting pods through <api>. */
struct ext_recover *ext_recover_new(const struct ext_service *svc, struct cache_api *api,
				    const struct ext_recover_opts *opts);
/* Start the thread: a pass every interval. Returns 0 or -errno. */
int ext_recover_start(struct ext_recover *rc);
/* One pass now, on the calling thread (tests; the thread runs the same). It
 * does nothing on a standby, before the cache is synced, or without a binder. */
void ext_recover_pass(struct ext_recover *rc);
/* Whether this replica may answer ready as far as recovery goes: without
 * leader election always; with it, once a pass has run since this replica
 * took the Lease, so a gang the old leader left partly bound is being
 * completed before kube-scheduler's retries reach this replica. Thread: any;
 * NULL: true. */
bool ext_recover_ready(const struct ext_recover *rc);
/* Stop the thread (if started): no pass runs from here on. Bindings it posted
 * may still be answered on the binder thread, so free it only once the binder
 * is shut down. NULL is fine. */
void ext_recover_stop(struct ext_recover *rc);
/* Stop the thread (if still running) and free. NULL is fine. */
void ext_recover_free(struct ext_recover *rc);
/* Thread: any; NULL gives zeros. */
void ext_recover_get_stats(const struct ext_recover *rc, struct ext_recover_stats *out);

#endif
