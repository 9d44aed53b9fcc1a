/* cycle: what filter learnt about a pod's nodes, kept for the prioritize that
 * follows it - kube-scheduler's CycleState idea, across the two HTTP calls.
 *
 * kube-scheduler schedules one pod at a time: it sends filter the candidate
 * names, then sends prioritize the names that passed every filter, in the
 * order filter returned them. Scoring a node needs the same lookup and fit
 * check filter has just done, so filter scores each node it passes (from the
 * per-request score memo, cheap) and leaves the scores here with the request's
 * names. prioritize takes them when the pod, its request and the cache are
 * the same - no node change under way when filter began its lookups
 * (cache_changes_settled) and none begun since (cache_changes() unchanged), so
 * no node's record or usage changed in between - and answers each name that
 * filter passed, in order (other plugins' gaps skipped), from them; any other
 * name is evaluated as usual. The answer is the one a fresh prioritize would
 * give (tests hold it to that).
 *
 * Thread: any; one mutex guards the few entries kept.
 */
#ifndef TROUPE_EXTENDER_CYCLE_H
#define TROUPE_EXTENDER_CYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "extender/codec.h"
#include "placement/placement.h"

struct ext_cycle;

/* What filter passed for one pod. */
struct ext_cycle_entry {
	char uid[K8S_UID_BUF];
	uint64_t changes;               /* cache_changes_settled() before filter's first lookup */
	struct placement_request req;
	/* The filter request's names (taken from its ext_args: no copy). */
	struct cache_name *names;
	char *name_bytes;
	/* Names that passed, in answer order: request index and score. */
	uint32_t *pass;
	uint8_t *score;
	size_t n_pass, cap;
	bool failed;                    /* out of memory while adding: unusable */
};

struct ext_cycle *ext_cycle_new(void);
void ext_cycle_free(struct ext_cycle *c);

/* Filter: an entry for the pod <uid> asking <req>, with the count
 * cache_changes_settled() gave before any lookup. NULL when out of memory. */
struct ext_cycle_entry *ext_cycle_entry_new(const char *uid, uint64_t changes,
					    const struct placement_request *req);
void ext_cycle_entry_free(struct ext_cycle_entry *e);
/* Filter: request node <index> passed and scores <score>. */
void ext_cycle_entry_add(struct ext_cycle_entry *e, size_t index, unsigned score);
/* Filter: keep <e> (taking the names of <a>, which must come from the names
 * fast path) for the pod's prioritize; replaces an older entry for the same
 * pod, and the oldest entry when all are taken. Frees <e> when it is unusable. */
void ext_cycle_put(struct ext_cycle *c, struct ext_cycle_entry *e, struct ext_args *a);
/* Prioritize: take the entry of pod <uid> if its request equals <req> and
 * cache_changes() still equals <changes>; else NULL (a stale entry is
 * dropped). The caller frees it. */
struct ext_cycle_entry *ext_cycle_take(struct ext_cycle *c, const char *uid, uint64_t changes,
				       const struct placement_request *req);

/* How many entries prioritize took (<used>) and found stale - the cache or
 * the request changed since the filter (<stale>) - and how many names it
 * answered from them (<names>). */
void ext_cycle_get_stats(struct ext_cycle *c, uint64_t *used, uint64_t *stale, uint64_t *names);
/* Prioritize: <n> names were answered from an entry. */
void ext_cycle_count_names(struct ext_cycle *c, uint64_t n);

/* Prioritize: the score filter gave the name <name>, searching forward from
 * <*at> in the pass order (at most a few dozen names ahead: kube-scheduler's
 * other plugins drop some, never reorder). On a match advance <*at> past it
 * and return true. */
bool ext_cycle_score(const struct ext_cycle_entry *e, const struct cache_name *name, size_t *at,
		     unsigned *score);

#endif
