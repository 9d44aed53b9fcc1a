/* nameidx: see nameidx.h. */
#include "cache/nameidx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct nameidx_table *table_new(size_t entries)
{
	struct nameidx_table *t = calloc(1, sizeof(*t) + entries * sizeof(t->e[0]));

	if (t)
		t->mask = entries - 1;
	return t;
}

/* The smallest power of two, at least 16, that keeps <n> entries at most a
 * third full (so it takes n / 6 more adds before the next rebuild). */
static size_t size_for(size_t n)
{
	size_t s = 16;

	while (s < n * 3)
		s *= 2;
	return s;
}

int nameidx_init(struct nameidx *ix, size_t expect, uint64_t seed)
{
	memset(ix, 0, sizeof(*ix));
	ix->seed = seed;
	ix->t = table_new(size_for(expect));
	return ix->t ? 0 : -ENOMEM;
}

void nameidx_free(struct nameidx *ix)
{
	free(ix->t);
	ix->t = NULL;
}

static uint64_t mix(uint64_t h)
{
	/* MurmurHash3's 64-bit finaliser. */
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

static inline uint64_t load64(const char *p)
{
	uint64_t w;

	memcpy(&w, p, 8);
	return w;
}

static inline uint64_t step(uint64_t h, uint64_t w)
{
	/* For a given h, w -> step(h, w) is one to one (the factor is odd). */
	return (((h << 5) | (h >> 59)) ^ w) * 0x9e3779b97f4a7c15ULL;
}

uint64_t nameidx_hash(const struct nameidx *ix, const char *s, size_t len)
{
	uint64_t h = ix->seed ^ (len * 0xc2b2ae3d27d4eb4fULL);

	/* A word at a time; the last word overlaps the one before it rather
	 * than reading byte by byte (a node name is 10 to 60 bytes). */
	if (len >= 8) {
		const char *last = s + len - 8;

		for (; s < last; s += 8)
			h = step(h, load64(s));
		h = step(h, load64(last));
	} else if (len >= 4) {
		uint32_t a, b;

		memcpy(&a, s, 4);
		memcpy(&b, s + len - 4, 4);
		h = step(h, a | (uint64_t)b << 32);
	} else if (len) {
		h = step(h, (uint64_t)(unsigned char)s[0] | (uint64_t)(unsigned char)s[len / 2] << 8 |
			    (uint64_t)(unsigned char)s[len - 1] << 16);
	}
	return mix(h);
}

/* Writer: place <val> in <t> at the first empty entry of its probe. */
static void place(struct nameidx_table *t, uint64_t hash, void *val)
{
	uint64_t i = hash & t->mask;

	while (t->e[i].val)
		i = (i + 1) & t->mask;
	__atomic_store_n(&t->e[i].hash, hash, __ATOMIC_RELAXED);
	/* Release: a reader that sees the value sees its hash. */
	__atomic_store_n(&t->e[i].val, val, __ATOMIC_RELEASE);
}

int nameidx_put(struct nameidx *ix, uint64_t hash, void *val, struct nameidx_table **old)
{
	struct nameidx_table *t = ix->t;

	*old = NULL;
	if ((ix->live + ix->tombs + 1) * 2 > t->mask + 1) {
		/* Rebuild without the tombstones, with room to grow. */
		struct nameidx_table *n = table_new(size_for(ix->live + 1));

		if (!n)
			return -ENOMEM;
		for (uint64_t i = 0; i <= t->mask; i++)
			if (t->e[i].val && t->e[i].val != NAMEIDX_TOMB)
				place(n, t->e[i].hash, t->e[i].val);
		place(n, hash, val);
		/* Release: the whole table is visible before its pointer. */
		__atomic_store_n(&ix->t, n, __ATOMIC_RELEASE);
		ix->tombs = 0;
		ix->live++;
		*old = t;
		return 0;
	}
	place(t, hash, val);
	ix->live++;
	return 0;
}

bool nameidx_remove(struct nameidx *ix, uint64_t hash, const void *val)
{
	struct nameidx_table *t = ix->t;

	for (uint64_t i = hash & t->mask; t->e[i].val; i = (i + 1) & t->mask) {
		if (t->e[i].val == val) {
			__atomic_store_n(&t->e[i].val, NAMEIDX_TOMB, __ATOMIC_RELEASE);
			ix->live--;
			ix->tombs++;
			return true;
		}
	}
	return false;
}

void *nameidx_iter(const struct nameidx_table *t, uint64_t *pos)
{
	for (; *pos <= t->mask; (*pos)++) {
		void *v = __atomic_load_n(&t->e[*pos].val, __ATOMIC_ACQUIRE);

		if (v && v != NAMEIDX_TOMB) {
			(*pos)++;
			return v;
		}
	}
	return NULL;
}
