/* Shared only by the object parsers (node_parse.c, pod_parse.c): how a
 * record is laid out. Each record is a single allocation: the struct, then its
 * arrays, then its strings. Sizes are summed in a first pass and filled in a
 * second, so a node costs one malloc and one cache-friendly block (the
 * per-node memory budget is a few hundred bytes plus its labels).
 */
#ifndef TROUPE_CACHE_PARSE_H
#define TROUPE_CACHE_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/util.h"

/* Bump allocator over the block being filled. */
struct blk {
	char *p;
	char *end;
};

static inline void *blk_take(struct blk *b, size_t n, size_t align)
{
	uintptr_t at = ((uintptr_t)b->p + align - 1) & ~(uintptr_t)(align - 1);
	char *r = (char *)at;

	b->p = r + n;
	return r;
}

static inline const char *blk_str(struct blk *b, const char *s)
{
	size_t n;
	char *d;

	if (!s)
		return NULL;
	n = strlen(s) + 1;
	d = blk_take(b, n, 1);
	memcpy(d, s, n);
	return d;
}

/* What blk_str takes for <s>, its NUL included. */
static inline size_t str_size(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

/* Milli-units to whole units, rounded up, for any non-negative value
 * ((m + 999) / 1000 overflows near INT64_MAX). */
static inline int64_t milli_to_units_ceil(int64_t m)
{
	return m / 1000 + (m % 1000 > 0);
}

/* A whole count from a ResourceList entry; -1 when absent or malformed. */
static inline int64_t resource_count(const cJSON *list, const char *name)
{
	const cJSON *it = json_get(list, name);
	int64_t milli;

	if (!it || json_quantity_milli(it, &milli) < 0 || milli < 0)
		return -1;
	return milli / 1000;
}

/* A quantity in thousandths from a ResourceList entry; 0 when absent or
 * malformed. */
static inline int64_t resource_milli(const cJSON *list, const char *name)
{
	const cJSON *it = json_get(list, name);
	int64_t milli;

	if (!it || json_quantity_milli(it, &milli) < 0 || milli < 0)
		return 0;
	return milli;
}

/* A parsed node record copied whole (node_parse.c), its pointers moved into the
 * copy; derived data and texts left out, for cache_node_upsert to derive
 * again. NULL without memory or for a record not from cache_node_parse. */
struct cache_node *cache__node_copy(const struct cache_node *n);

#endif
