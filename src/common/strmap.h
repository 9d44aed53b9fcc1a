/* strmap: a string-keyed open-addressing hash map (linear probing, tombstones).
 *
 * The map stores the key pointer it is given; the caller keeps the key alive for
 * as long as the entry exists (typically the key lives inside the value). Not
 * thread-safe: callers guard it.
 */
#ifndef TROUPE_COMMON_STRMAP_H
#define TROUPE_COMMON_STRMAP_H

#include <stddef.h>
#include <stdint.h>

struct strmap_slot {
	const char *key;        /* NULL: empty; STRMAP_TOMBSTONE: deleted */
	size_t klen;
	uint64_t hash;
	void *value;
};

struct strmap {
	struct strmap_slot *slots;
	size_t cap;             /* power of two, or 0 */
	size_t used;            /* live entries */
	size_t tombs;
};

uint64_t strmap_hash(const char *key, size_t len);

void strmap_init(struct strmap *m);
/* Free the table (not the keys or values). */
void strmap_fini(struct strmap *m);
void *strmap_get(const struct strmap *m, const char *key, size_t len);
/* Insert or replace. Returns the previous value (or NULL) through <old>.
 * Returns 0 or -ENOMEM (the map is unchanged then). */
int strmap_put(struct strmap *m, const char *key, size_t len, void *value, void **old);
/* Remove and return the value, or NULL when absent. */
void *strmap_del(struct strmap *m, const char *key, size_t len);
size_t strmap_count(const struct strmap *m);
/* Iterate: start with *pos = 0; returns false at the end. */
int strmap_next(const struct strmap *m, size_t *pos, const char **key, void **value);

#endif
