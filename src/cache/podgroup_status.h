/* PodGroup status: troupe keeps the status of every scheduling.x-k8s.io/v1alpha1
 * PodGroup it watches up to date, as scheduler-plugins' PodGroup controller
 * does (sigs.k8s.io/scheduler-plugins pkg/controllers/podgroup_controller.go),
 * so that `kubectl get podgroup` shows a gang's phase and counts whether or not
 * that controller runs. A cluster that runs it as well gets the same answers
 * from both: the rules below are the controller's.
 *
 * Only scheduling.x-k8s.io PodGroups are written. The upstream scheduling.k8s.io
 * PodGroup (the one a pod names in spec.schedulingGroup) is kube-scheduler's:
 * it writes that object's PodGroupScheduled condition itself, and troupe never
 * writes it (troupe does not even watch those objects; the cache's PodGroup
 * records are all scheduling.x-k8s.io ones, informer.c).
 *
 * Two parts:
 *  - The rules (pure; podgroup_status.c): from the status read, the group's
 *    spec and its members' phases, the status to write. Unit-tested over many
 *    random member sets.
 *  - The writer (podgroup_status_writer.c): a thread of its own, never on the
 *    verbs' path, that every interval compares what the rules say with what the PodGroup shows and,
 *    only where they differ, sends a merge PATCH to .../podgroups/NAME/status
 *    carrying the resourceVersion read, so a write that came in between fails
 *    with 409 instead of being overwritten: the writer then reads the object
 *    again and retries, at most CACHE_PGS_CONFLICT_RETRIES times. With leader
 *    election it writes only while this replica leads.
 *
 * Errors follow the project convention: 0 or -errno.
 */
#ifndef TROUPE_CACHE_PODGROUP_STATUS_H
#define TROUPE_CACHE_PODGROUP_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/api.h"
#include "cache/cache.h"
#include "cache/lease.h"

/* The phases scheduler-plugins' API defines (apis/scheduling/v1alpha1, type
 * PodGroupPhase). The controller sets every one but Unknown. */
#define CACHE_PG_PENDING "Pending"
#define CACHE_PG_SCHEDULING "Scheduling"
#define CACHE_PG_RUNNING "Running"
#define CACHE_PG_FINISHED "Finished"
#define CACHE_PG_FAILED "Failed"

/* A 409 answer is followed by a fresh read and another attempt this many times
 * at most, per group and pass; the next pass starts over. */
enum { CACHE_PGS_CONFLICT_RETRIES = 5 };

/* The controller's guard: a group still Pending or Scheduling, none of its pods
 * running, whose scheduling started more than this long after it was created,
 * is left alone ("pod may have been GCed"). */
#define CACHE_PGS_GC_GUARD_US (48LL * 3600 * 1000000)

/* ---- The rules (pure) --------------------------------------------------------- */

/* A group's members as the controller lists them (every pod naming the group,
 * finished and terminating ones too), counted by status.phase; <bound>: those
 * on a node. */
struct cache_pgs_members {
	uint32_t total;
	uint32_t bound;
	uint32_t running, succeeded, failed;
};

/* One reconcile of the controller over status <st> (changed in place) of a
 * group with <min_member> created at <created_us>, with members <m>, at
 * <now_us> (µs since the epoch; only scheduleStartTime takes it). Returns
 * whether <st> changed. */
bool cache_pgs_step(struct cache_podgroup_status *st, int32_t min_member, int64_t created_us,
		    const struct cache_pgs_members *m, int64_t now_us);
/* The status to write: cache_pgs_step repeated until it changes nothing (the
 * controller gets there one reconcile per event; troupe writes the end). */
void cache_pgs_desired(const struct cache_podgroup_status *cur, int32_t min_member,
		       int64_t created_us, const struct cache_pgs_members *m, int64_t now_us,
		       struct cache_podgroup_status *out);
bool cache_pgs_status_equal(const struct cache_podgroup_status *a,
			    const struct cache_podgroup_status *b);
/* Whether <phase> is final: the controller never changes it again. */
bool cache_pgs_phase_final(const char *phase);

/* Read metadata.resourceVersion, metadata.creationTimestamp and the status of
 * PodGroup <obj> into <pg> (cache_podgroup_parse calls it). A field that is
 * absent or not of its type reads as unset. */
void cache_podgroup_status_read(const cJSON *obj, struct cache_podgroup *pg);

/* The merge patch that sets <st> on an object last read at <version> (a
 * precondition: the API server answers 409 when the object changed since), as
 * JSON text the caller frees; NULL without memory. */
char *cache_pgs_patch_json(const struct cache_podgroup_status *st, const char *version);

/* ---- The writer ------------------------------------------------------------- */

/* gang.write_status, gang.status_interval_seconds. */
struct cache_pgs_opts {
	bool enabled;                   /* default true */
	unsigned interval_s;            /* between passes; default 2 */
};
void cache_pgs_opts_defaults(struct cache_pgs_opts *o);

struct cache_pgs_stats {
	uint64_t passes;
	uint64_t written;               /* PATCHes accepted */
	uint64_t conflicts;             /* 409 answers (each followed by a fresh read) */
	uint64_t gave_up;               /* groups left for the next pass after the retries */
	uint64_t forbidden;             /* 403 answers */
	uint64_t failed;                /* other failures: unreachable, 5xx, 4xx */
	uint64_t unchanged;             /* groups looked at with nothing to write */
};

struct cache_pgs;

/* Start the writer's thread over <c>, writing through <api>; with <lease>
 * (may be NULL) only while it leads. Returns NULL with <err> set. */
struct cache_pgs *cache_pgs_start(struct cache *c, struct cache_api *api,
				  const struct cache_lease *lease, const struct cache_pgs_opts *o,
				  char *err, size_t errlen);
/* Stop the thread and free. NULL is fine. */
void cache_pgs_stop(struct cache_pgs *w);
/* Thread: any; NULL gives zeros. */
void cache_pgs_get_stats(const struct cache_pgs *w, struct cache_pgs_stats *out);

#endif
