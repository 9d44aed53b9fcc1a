/* Usage: the two words of a node entry saying what its pods occupy, changed
 * only together by a double-word compare-and-swap (ck_pr_cas_64_2), so an
 * assume (bind) and a watch update can never hand out the same device twice;
 * and the counts of changes begun and done that let filter's scores be reused
 * by prioritize only while nothing changed (cache_changes_settled).
 */
#include "cache/internal.h"

#include <errno.h>

#include <ck_pr.h>

uint64_t cache_changes(struct cache *c)
{
	return __atomic_load_n(&c->changes.begun, __ATOMIC_SEQ_CST);
}

bool cache_changes_settled(struct cache *c, uint64_t *count)
{
	/* Begun first: when as many are done, every change it counts is over. */
	*count = __atomic_load_n(&c->changes.begun, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&c->changes.done, __ATOMIC_SEQ_CST) == *count;
}

/* Replace usage <cur> of <e> with <next> if it is still <cur>, counted as a
 * change whether or not it succeeds. Claims both words at once; pairs with
 * every other CAS on usage. */
static bool usage_cas(struct cache *c, struct node_entry *e, uint64_t cur[2], uint64_t next[2])
{
	bool ok;

	change_begin(c);
	ok = ck_pr_cas_64_2(e->usage, cur, next);
	change_end(c);
	return ok;
}

int cache__usage_change(struct cache *c, struct node_entry *e, uint64_t devices, uint32_t unattr,
			int sign)
{
	uint64_t cur[2], next[2];

	for (;;) {
		/* A torn pair only makes the CAS below fail and retry. */
		cur[0] = __atomic_load_n(&e->usage[0], __ATOMIC_RELAXED);
		cur[1] = __atomic_load_n(&e->usage[1], __ATOMIC_RELAXED);
		if (sign > 0) {
			if (cur[0] & devices)
				return -EBUSY;
			next[0] = cur[0] | devices;
			next[1] = cur[1] + unattr;
		} else {
			next[0] = cur[0] & ~devices;
			next[1] = cur[1] >= unattr ? cur[1] - unattr : 0;
		}
		if (usage_cas(c, e, cur, next))
			return 0;
	}
}

int cache__usage_claim(struct cache *c, struct node_entry *e, const struct cache_node *rec,
		       uint64_t want)
{
	uint64_t cur[2], next[2];

	for (;;) {
		/* A torn pair only makes the CAS below fail and retry. */
		cur[0] = __atomic_load_n(&e->usage[0], __ATOMIC_RELAXED);
		cur[1] = __atomic_load_n(&e->usage[1], __ATOMIC_RELAXED);
		if (cur[0] & want)
			return -EAGAIN;
		/* The same bound as cache_view_free_gpus: healthy devices too. */
		if (usage_free_bound(rec, cur[0], (uint32_t)cur[1]) < __builtin_popcountll(want))
			return -ENOSPC;
		next[0] = cur[0] | want;
		next[1] = cur[1];
		/* Check-and-claim in one step. */
		if (usage_cas(c, e, cur, next))
			return 0;
	}
}
