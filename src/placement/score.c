/* Scoring a node: the table of scoring policies, chosen by name from
 * configuration ("scoring.policy"), and the score memo that lets a request over
 * thousands of nodes call the policy once per kind of node.
 *
 * A score depends only on the node's topology class, free device mask, free
 * count and allocatable count (besides the policy, its weights and the
 * request), so two memos keep it: the class's own (one tagged word per free
 * mask, for boards of up to 8 GPUs; shared by every request, so it stays in
 * cache), and a per-thread hash table for unknown or larger boards, whose
 * buckets belong to the memo whose generation they carry.
 *
 * Thread: any. The policy table is constant; the scoring contexts are
 * numbered under ctx_lock; the class memo is read and written with relaxed
 * atomics (a lost race only recomputes).
 */
#include "placement/internal.h"

#include <pthread.h>
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

/* The memo's buckets, per thread; a bucket belongs to the memo whose gen it has. */
enum { MEMO_BITS = 10 };
static __thread struct memo_bucket {
	const void *cls;
	uint64_t free_mask;
	uint32_t free_n, allocatable;
	uint32_t gen;
	uint8_t score;
} tl_buckets[1u << MEMO_BITS];
static __thread uint32_t tl_gen;

/* Scoring contexts - a policy with its weights - by number, so that a class's
 * score memo can tell them apart in its tag. Numbers start at 1; 0 means the
 * table is full (the class memo is then not used). */
enum { CTX_MAX = 1024 };
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ctx {
	const struct placement_score_ops *ops;
	struct placement_weights w;
} ctx_tab[CTX_MAX];                     /* guarded by ctx_lock */
static unsigned ctx_n;                  /* guarded by ctx_lock */
static __thread struct ctx tl_ctx;      /* the last one this thread asked for */
static __thread unsigned tl_ctx_id;

static bool same_ctx(const struct ctx *a, const struct placement_score_ops *ops,
		     const struct placement_weights *w)
{
	return a->ops == ops && a->w.packing == w->packing && a->w.topology == w->topology &&
	       a->w.fragmentation == w->fragmentation && a->w.fit == w->fit;
}

static unsigned ctx_id(const struct placement_score_ops *ops, const struct placement_weights *w)
{
	unsigned id = 0;

	if (tl_ctx_id && same_ctx(&tl_ctx, ops, w))
		return tl_ctx_id;
	pthread_mutex_lock(&ctx_lock);
	for (unsigned i = 0; i < ctx_n && !id; i++)
		if (same_ctx(&ctx_tab[i], ops, w))
			id = i + 1;
	if (!id && ctx_n < CTX_MAX) {
		ctx_tab[ctx_n] = (struct ctx){ ops, *w };
		id = ++ctx_n;
	}
	pthread_mutex_unlock(&ctx_lock);
	if (id) {
		tl_ctx = (struct ctx){ ops, *w };
		tl_ctx_id = id;
	}
	return id;
}

void placement_score_memo_init(struct placement_score_memo *m,
			       const struct placement_score_ops *ops,
			       const struct placement_weights *w,
			       const struct placement_request *req)
{
	unsigned id = ctx_id(ops, w), k = req->demand.gpus;

	m->ops = ops;
	m->w = w;
	m->req = req;
	m->hits = m->misses = 0;
	if (++tl_gen == 0) {
		/* Wrapped: old buckets could carry the new number. */
		memset(tl_buckets, 0, sizeof(tl_buckets));
		tl_gen = 1;
	}
	m->gen = tl_gen;
	m->bucket_mask = (1u << MEMO_BITS) - 1;
	/* The class memo's tag: [8,16) allocatable, [16,24) free count, [24,32)
	 * GPUs asked, [32,36) policy kind, [36,44) its level, [44,64) context;
	 * the score is the low byte. Never 0 when in use. */
	m->tag = 0;
	if (id && k < 256 && (unsigned)req->policy.kind < 16)
		m->tag = (uint64_t)id << 44 | (uint64_t)req->policy.min_level << 36 |
			 (uint64_t)req->policy.kind << 32 | (uint64_t)k << 24;
}

static unsigned compute(struct placement_score_memo *m, const struct cache_node_view *view)
{
	unsigned score = m->ops->score(m->w, view, m->req);

	m->misses++;
	return score > PLACEMENT_FINE_MAX ? PLACEMENT_FINE_MAX : score;
}

unsigned placement_score_memoized(struct placement_score_memo *m,
				  const struct cache_node_view *view)
{
	const void *cls = view->node->derived;
	uint64_t mask = cache_view_free_mask(view);
	uint32_t free_n = cache_view_free_gpus(view), alloc = view->node->gpu_allocatable;
	uint64_t h;
	struct memo_bucket *b;
	unsigned score;

	/* A shared node's score reads which GPUs its used slots are on, which
	 * none of the keys below says: never memoised. */
	if (cache_node_shared(view->node))
		return compute(m, view);
	if (m->tag && cls && mask < 256 && free_n < 256 && alloc < 256) {
		/* The class's own memo: small, shared by every request, so it stays
		 * in cache (one word per free mask of a board of up to 8). */
		uint64_t want = m->tag | (uint64_t)free_n << 16 | (uint64_t)alloc << 8;
		uint64_t *e = &((struct placement_topo *)cls)->score[mask];
		uint64_t v = __atomic_load_n(e, __ATOMIC_RELAXED);

		if ((v & ~(uint64_t)0xff) == want) {
			m->hits++;
			return (unsigned)(v & 0xff);
		}
		score = compute(m, view);
		__atomic_store_n(e, want | score, __ATOMIC_RELAXED);
		return score;
	}
	h = (mask ^ (uint64_t)(uintptr_t)cls ^ ((uint64_t)free_n << 40) ^ ((uint64_t)alloc << 48)) *
	    0x9e3779b97f4a7c15ULL;
	b = &tl_buckets[(h >> (64 - MEMO_BITS)) & m->bucket_mask];
	if (b->gen == m->gen && b->cls == cls && b->free_mask == mask && b->free_n == free_n &&
	    b->allocatable == alloc) {
		m->hits++;
		return b->score;
	}
	score = compute(m, view);
	*b = (struct memo_bucket){ cls, mask, free_n, alloc, m->gen, (uint8_t)score };
	return score;
}

void placement_rank_finish(struct placement_rank *r)
{
	unsigned answer = PLACEMENT_MAX_SCORE;

	/* From the best down: each fine score present takes the next answer;
	 * one absent keeps the answer the next present one will take. */
	for (int f = PLACEMENT_FINE_MAX; f >= 0; f--) {
		r->score[f] = (uint8_t)answer;
		if ((r->seen[f >> 6] >> (f & 63) & 1) && answer > 1)
			answer--;
	}
}
