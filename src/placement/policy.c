/* The table of scoring policies. */
#include "placement/internal.h"

#include <string.h>

static const struct placement_score_ops *const policies[] = {
	&placement__score_topology,
	&placement__score_binpack,
};

const char *const placement_score_names[] = { "topology", "binpack", NULL };

const struct placement_score_ops *placement_score_find(const char *name)
{
	for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++)
		if (strcmp(policies[i]->name, name) == 0)
			return policies[i];
	return NULL;
}

/* The memo's slots, per thread; a slot belongs to the memo whose gen it has. */
enum { MEMO_BITS = 12 };
static __thread struct memo_slot {
	const void *cls;
	uint64_t free_mask;
	uint32_t free_n, allocatable;
	uint32_t gen;
	uint8_t score;
} tl_slots[1u << MEMO_BITS];
static __thread uint32_t tl_gen;

void placement_score_memo_init(struct placement_score_memo *m,
			       const struct placement_score_ops *ops,
			       const struct placement_weights *w,
			       const struct placement_request *req)
{
	m->ops = ops;
	m->w = w;
	m->req = req;
	m->hits = m->misses = 0;
	if (++tl_gen == 0) {
		/* Wrapped: old slots could carry the new number. */
		memset(tl_slots, 0, sizeof(tl_slots));
		tl_gen = 1;
	}
	m->gen = tl_gen;
	m->slot_mask = (1u << MEMO_BITS) - 1;
}

unsigned placement_score_memoized(struct placement_score_memo *m,
				  const struct cache_node_view *view)
{
	const void *cls = view->node->derived;
	uint64_t mask = cache_view_free_mask(view);
	uint32_t free_n = cache_view_free_gpus(view), alloc = view->node->gpu_allocatable;
	uint64_t h = (mask ^ (uint64_t)(uintptr_t)cls ^ ((uint64_t)free_n << 40) ^
		      ((uint64_t)alloc << 48)) * 0x9e3779b97f4a7c15ULL;
	struct memo_slot *s = &tl_slots[(h >> (64 - MEMO_BITS)) & m->slot_mask];
	unsigned score;

	if (s->gen == m->gen && s->cls == cls && s->free_mask == mask && s->free_n == free_n &&
	    s->allocatable == alloc) {
		m->hits++;
		return s->score;
	}
	m->misses++;
	score = m->ops->score(m->w, view, m->req);
	if (score > PLACEMENT_MAX_SCORE)
		score = PLACEMENT_MAX_SCORE;
	*s = (struct memo_slot){ cls, mask, free_n, alloc, m->gen, (uint8_t)score };
	return score;
}
