/* Open addressing keeps lookups to one or two cache lines; the table grows at
 * 70% load (live + tombstones) and is rebuilt without tombstones when it does. */
#include "common/strmap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char tombstone_key[1];
#define STRMAP_TOMBSTONE (tombstone_key)

/* FNV-1a with a final avalanche: short keys (node names, UIDs) dominate. */
uint64_t strmap_hash(const char *key, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)key[i];
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

void strmap_init(struct strmap *m)
{
	memset(m, 0, sizeof(*m));
}

void strmap_fini(struct strmap *m)
{
	free(m->slots);
	strmap_init(m);
}

static struct strmap_slot *find(const struct strmap *m, const char *key, size_t len,
				uint64_t h)
{
	size_t mask = m->cap - 1;

	if (!m->cap)
		return NULL;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct strmap_slot *s = &m->slots[i];

		if (!s->key)
			return NULL;
		if (s->key != STRMAP_TOMBSTONE && s->hash == h && s->klen == len &&
		    memcmp(s->key, key, len) == 0)
			return s;
	}
}

static int grow(struct strmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 16;
	struct strmap_slot *slots;

	/* Many tombstones and few live entries: rebuild at the same size. */
	if (m->cap && m->used * 2 < m->cap)
		cap = m->cap;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		struct strmap_slot *s = &m->slots[i];
		size_t j;

		if (!s->key || s->key == STRMAP_TOMBSTONE)
			continue;
		for (j = s->hash & (cap - 1); slots[j].key; j = (j + 1) & (cap - 1))
			;
		slots[j] = *s;
	}
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	m->tombs = 0;
	return 0;
}

void *strmap_get(const struct strmap *m, const char *key, size_t len)
{
	struct strmap_slot *s = find(m, key, len, strmap_hash(key, len));

	return s ? s->value : NULL;
}

int strmap_put(struct strmap *m, const char *key, size_t len, void *value, void **old)
{
	uint64_t h = strmap_hash(key, len);
	struct strmap_slot *s = find(m, key, len, h);
	size_t mask, i;

	if (old)
		*old = NULL;
	if (s) {
		if (old)
			*old = s->value;
		s->key = key;
		s->value = value;
		return 0;
	}
	if ((m->used + m->tombs + 1) * 10 > m->cap * 7 && grow(m) < 0)
		return -ENOMEM;
	mask = m->cap - 1;
	for (i = h & mask; m->slots[i].key && m->slots[i].key != STRMAP_TOMBSTONE;
	     i = (i + 1) & mask)
		;
	if (m->slots[i].key == STRMAP_TOMBSTONE)
		m->tombs--;
	m->slots[i] = (struct strmap_slot){ key, len, h, value };
	m->used++;
	return 0;
}

void *strmap_del(struct strmap *m, const char *key, size_t len)
{
	struct strmap_slot *s = find(m, key, len, strmap_hash(key, len));
	void *v;

	if (!s)
		return NULL;
	v = s->value;
	s->key = STRMAP_TOMBSTONE;
	s->value = NULL;
	m->used--;
	m->tombs++;
	return v;
}

size_t strmap_count(const struct strmap *m)
{
	return m->used;
}

int strmap_next(const struct strmap *m, size_t *pos, const char **key, void **value)
{
	for (; *pos < m->cap; (*pos)++) {
		struct strmap_slot *s = &m->slots[*pos];

		if (s->key && s->key != STRMAP_TOMBSTONE) {
			if (key)
				*key = s->key;
			if (value)
				*value = s->value;
			(*pos)++;
			return 1;
		}
	}
	return 0;
}
