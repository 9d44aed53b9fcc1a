/* cycle: see cycle.h. */
#include "extender/cycle.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	CYCLE_ENTRIES = 4,      /* pods whose prioritize may still come */
	CYCLE_LOOKAHEAD = 64,   /* passed names prioritize may skip at once */
};

struct ext_cycle {
	pthread_mutex_t lock;
	struct ext_cycle_entry *e[CYCLE_ENTRIES];      /* guarded by lock */
	uint64_t stamp[CYCLE_ENTRIES];                  /* when put; oldest goes first */
	uint64_t clock;
	uint64_t used, stale;                           /* guarded by lock */
	uint64_t names;                                 /* relaxed atomic */
};

struct ext_cycle *ext_cycle_new(void)
{
	struct ext_cycle *c = calloc(1, sizeof(*c));

	if (c)
		pthread_mutex_init(&c->lock, NULL);
	return c;
}

void ext_cycle_free(struct ext_cycle *c)
{
	if (!c)
		return;
	for (int i = 0; i < CYCLE_ENTRIES; i++)
		ext_cycle_entry_free(c->e[i]);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

struct ext_cycle_entry *ext_cycle_entry_new(const char *uid, uint64_t changes,
					    const struct placement_request *req)
{
	struct ext_cycle_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	if (snprintf(e->uid, sizeof(e->uid), "%s", uid) >= (int)sizeof(e->uid)) {
		free(e);
		return NULL;    /* a UID that long is refused elsewhere anyway */
	}
	e->changes = changes;
	e->req = *req;
	return e;
}

void ext_cycle_entry_free(struct ext_cycle_entry *e)
{
	if (!e)
		return;
	free(e->names);
	free(e->name_bytes);
	free(e->pass);
	free(e->score);
	free(e);
}

void ext_cycle_entry_add(struct ext_cycle_entry *e, size_t index, unsigned score)
{
	if (e->failed)
		return;
	if (e->n_pass == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 512;
		uint32_t *p = realloc(e->pass, cap * sizeof(*p));
		uint8_t *s;

		if (p)
			e->pass = p;
		s = p ? realloc(e->score, cap) : NULL;
		if (!s) {
			e->failed = true;
			return;
		}
		e->score = s;
		e->cap = cap;
	}
	e->pass[e->n_pass] = (uint32_t)index;
	e->score[e->n_pass++] = (uint8_t)(score < 255 ? score : 255);
}

static bool same_request(const struct placement_request *a, const struct placement_request *b)
{
	return a->demand.gpu_resource == b->demand.gpu_resource &&
	       a->demand.gpus == b->demand.gpus && a->demand.cpu_milli == b->demand.cpu_milli &&
	       a->demand.mem_bytes == b->demand.mem_bytes && a->policy.kind == b->policy.kind &&
	       a->policy.min_level == b->policy.min_level;
}

void ext_cycle_put(struct ext_cycle *c, struct ext_cycle_entry *e, struct ext_args *a)
{
	struct ext_cycle_entry *old = NULL;
	int at = 0;

	if (e->failed || !a->name_bytes) {
		ext_cycle_entry_free(e);
		return;
	}
	e->names = a->names;
	e->name_bytes = a->name_bytes;
	a->names = NULL;
	a->name_bytes = NULL;
	a->n_nodes = 0;
	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < CYCLE_ENTRIES; i++) {
		if (c->e[i] && strcmp(c->e[i]->uid, e->uid) == 0) {
			at = i;
			break;
		}
		if (!c->e[i] || (c->e[at] && c->stamp[i] < c->stamp[at]))
			at = i;
	}
	old = c->e[at];
	c->e[at] = e;
	c->stamp[at] = ++c->clock;
	pthread_mutex_unlock(&c->lock);
	ext_cycle_entry_free(old);
}

struct ext_cycle_entry *ext_cycle_take(struct ext_cycle *c, const char *uid, uint64_t changes,
				       const struct placement_request *req)
{
	struct ext_cycle_entry *e = NULL;

	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < CYCLE_ENTRIES; i++) {
		if (c->e[i] && strcmp(c->e[i]->uid, uid) == 0) {
			e = c->e[i];
			c->e[i] = NULL;
			break;
		}
	}
	if (e && (e->changes != changes || !same_request(&e->req, req))) {
		c->stale++;
		pthread_mutex_unlock(&c->lock);
		ext_cycle_entry_free(e);
		return NULL;
	}
	c->used += e != NULL;
	pthread_mutex_unlock(&c->lock);
	return e;
}

void ext_cycle_get_stats(struct ext_cycle *c, uint64_t *used, uint64_t *stale, uint64_t *names)
{
	pthread_mutex_lock(&c->lock);
	*used = c->used;
	*stale = c->stale;
	pthread_mutex_unlock(&c->lock);
	*names = __atomic_load_n(&c->names, __ATOMIC_RELAXED);
}

void ext_cycle_count_names(struct ext_cycle *c, uint64_t n)
{
	/* No lock: prioritize already took it once, in ext_cycle_take. */
	__atomic_add_fetch(&c->names, n, __ATOMIC_RELAXED);
}

bool ext_cycle_score(const struct ext_cycle_entry *e, const struct cache_name *name, size_t *at,
		     unsigned *score)
{
	size_t end = e->n_pass - *at < CYCLE_LOOKAHEAD ? e->n_pass : *at + CYCLE_LOOKAHEAD;

	for (size_t j = *at; j < end; j++) {
		const struct cache_name *n = &e->names[e->pass[j]];

		if (n->len == name->len && memcmp(n->s, name->s, n->len) == 0) {
			*score = e->score[j];
			*at = j + 1;
			return true;
		}
	}
	return false;
}
