/* nameidx: the store's index of node names, an open-addressing hash table with
 * one writer and many lock-free readers.
 *
 * Why not ck_ht: a lookup over thousands of names (filter and prioritize) is
 * bound by cache misses - the bucket, the name, the node entry, the node record -
 * and ck_ht's buckets are private, so a lookup cannot prefetch them. Here a
 * reader hashes a batch of names first, prefetches their buckets, and only then
 * probes, so the misses of a batch overlap (cache_node_lookup_many).
 *
 * Layout: 2^k entries of { hash, value }, linear probing, at most half full
 * (tombstones included). A value is the caller's pointer (a node entry whose name
 * the caller compares); NULL ends a probe, NAMEIDX_TOMB is a removed entry.
 * An entry only ever goes NULL -> value -> tombstone; tombstones are dropped
 * when the writer rebuilds the table, which it publishes whole (release) and
 * hands back for the caller to retire after an epoch grace period. So a
 * reader that holds a table sees every entry present for its whole read, and
 * one added or removed meanwhile either way.
 *
 * Thread: nameidx_put, _remove and _free on the one writer; the rest anywhere,
 * readers inside an epoch read section.
 */
#ifndef TROUPE_CACHE_NAMEIDX_H
#define TROUPE_CACHE_NAMEIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ck_epoch.h>

#define NAMEIDX_TOMB ((void *)1)

struct nameidx_ent {
	uint64_t hash;                  /* written before val; relaxed */
	void *val;                      /* NULL, NAMEIDX_TOMB or the value; release/acquire */
};

struct nameidx_table {
	ck_epoch_entry_t entry;         /* for retiring it */
	uint64_t mask;                  /* entries - 1 */
	struct nameidx_ent e[];
};

struct nameidx {
	struct nameidx_table *t;        /* writer stores (release), readers load (acquire) */
	uint64_t seed;
	size_t live, tombs;             /* writer only */
};

/* An empty index of <expect> entries' room. Returns 0 or -ENOMEM. */
int nameidx_init(struct nameidx *ix, size_t expect, uint64_t seed);
/* Free the table (no reader may hold it). */
void nameidx_free(struct nameidx *ix);

/* The hash of a name (any bytes). */
uint64_t nameidx_hash(const struct nameidx *ix, const char *s, size_t len);

/* Writer: add <val> (not NULL, not NAMEIDX_TOMB) under <hash>; the caller
 * knows its name is not there. When the table had to be rebuilt, *<old> is
 * the previous one, to retire after a grace period (else NULL). Returns 0 or
 * -ENOMEM (nothing changed). */
int nameidx_put(struct nameidx *ix, uint64_t hash, void *val, struct nameidx_table **old);
/* Writer: remove the entry of <val> under <hash>. Returns whether it was there. */
bool nameidx_remove(struct nameidx *ix, uint64_t hash, const void *val);

/* Reader: the table to read (stable for the read section). */
static inline const struct nameidx_table *nameidx_table(const struct nameidx *ix)
{
	return __atomic_load_n(&ix->t, __ATOMIC_ACQUIRE);
}

/* Reader: where the probe for <hash> starts (to prefetch). */
static inline const struct nameidx_ent *nameidx_bucket(const struct nameidx_table *t,
						       uint64_t hash)
{
	return &t->e[hash & t->mask];
}

/* Reader: the next value under <hash> from probe position <*pos> (start with
 * hash & t->mask), or NULL when there is none. The caller checks the value's
 * name and calls again on a mismatch. */
static inline void *nameidx_next_match(const struct nameidx_table *t, uint64_t hash,
				       uint64_t *pos)
{
	for (uint64_t i = *pos & t->mask;; i = (i + 1) & t->mask) {
		void *v = __atomic_load_n(&t->e[i].val, __ATOMIC_ACQUIRE);

		if (!v)
			return NULL;
		if (v != NAMEIDX_TOMB && __atomic_load_n(&t->e[i].hash, __ATOMIC_RELAXED) == hash) {
			*pos = (i + 1) & t->mask;
			return v;
		}
	}
}

/* Any thread: the next value at or after <*pos> in table order, or NULL at
 * the end (start with 0). */
void *nameidx_iter(const struct nameidx_table *t, uint64_t *pos);

#endif
