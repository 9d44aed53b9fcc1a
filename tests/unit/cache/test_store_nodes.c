/* Unit tests of the store's node side (nodes.c, usage.c, nameidx.c): creation,
 * upsert/lookup/replace/delete, the name index against a model, batched
 * lookups, lookups while nodes come and go, change counts, what a view has
 * free, node walks, the synced flag, and the node sweep after a relist.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"
/* cache's own test: the relist sweeps and the reviews are internal to cache/. */
#include "cache/api_internal.h"
#include "cache/nameidx.h"
#include "common/log.h"
#include "common/util.h"
#include "fixture.h"

/* ---- The store ---------------------------------------------------------------- */

static void test_cache_new_refuses_bad_opts(void **state)
{
	struct cache_opts none = { .n_gpu_resources = 0 };
	struct cache_opts many = { .n_gpu_resources = CACHE_MAX_GPU_RESOURCES + 1 };

	(void)state;
	errno = 0;
	assert_null(cache_new(&none));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(cache_new(&many));
	assert_int_equal(errno, EINVAL);
	assert_null(cache_new(NULL));
	cache_free(NULL);
}

static void test_cache_store_upsert_lookup_replace_delete(void **state)
{
	struct cache *c = *state;
	struct cache_stats st;
	struct seen s;

	assert_false(look(c, "gpu-0").found);
	add_node(c, "gpu-0", 8, 8);
	add_node(c, "gpu-1", 4, 4);
	s = look(c, "gpu-0");
	assert_true(s.found);
	assert_int_equal(s.capacity, 8);
	assert_int_equal(s.used, 0);
	assert_int_equal(s.unattributed, 0);
	assert_false(look(c, "gpu-2").found);
	assert_false(look(c, "gpu").found);
	cache_get_stats(c, &st);
	assert_int_equal(st.nodes, 2);
	assert_int_equal(st.gpus_allocatable, 12);

	/* Replacing publishes the new record under the same name. */
	add_node(c, "gpu-0", 8, 5);
	s = look(c, "gpu-0");
	assert_true(s.found);
	assert_int_equal(s.allocatable, 5);
	cache_get_stats(c, &st);
	assert_int_equal(st.nodes, 2);
	assert_int_equal(st.gpus_allocatable, 9);

	assert_int_equal(cache_node_delete(c, "gpu-0"), 0);
	assert_false(look(c, "gpu-0").found);
	assert_true(look(c, "gpu-1").found);
	assert_int_equal(cache_node_delete(c, "gpu-0"), -ENOENT);
	assert_int_equal(cache_node_delete(c, "never"), -ENOENT);
	cache_writer_reclaim(c);
	cache_get_stats(c, &st);
	assert_int_equal(st.nodes, 1);

	/* A deleted name can come back. */
	add_node(c, "gpu-0", 2, 2);
	s = look(c, "gpu-0");
	assert_true(s.found);
	assert_int_equal(s.allocatable, 2);
	cache_writer_reclaim(c);
}

/* ---- The name index --------------------------------------------------------------- */

struct ix_name {
	char s[80];
	size_t len;
	bool in;                        /* the model: present in the index */
};

/* A name of length 1..70, so every branch of the hash (under 4, under 8,
 * whole words, an overlapping last word) is taken. */
static void ix_name_make(struct ix_name *n, int i)
{
	static const char pad[] = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnop";
	int len = 1 + (i * 7) % 70;

	n->len = (size_t)snprintf(n->s, sizeof(n->s), "%x%.*s", i, len, pad);
	n->in = false;
}

static void *ix_find(const struct nameidx *ix, const struct ix_name *n)
{
	const struct nameidx_table *t = nameidx_table(ix);
	uint64_t h = nameidx_hash(ix, n->s, n->len), pos = h;
	struct ix_name *v;

	while ((v = nameidx_next_match(t, h, &pos)))
		if (v->len == n->len && memcmp(v->s, n->s, n->len) == 0)
			return v;
	return NULL;
}

/* Random adds and removes against a model: after each step every name is
 * found exactly when the model holds it, iteration yields each held name
 * once, and the table is rebuilt (tombstones dropped) as it fills. */
static void test_cache_nameidx_against_a_model(void **state)
{
	enum { N = 700, STEPS = 20000 };
	struct ix_name *names = calloc(N, sizeof(*names));
	struct nameidx ix;
	uint64_t rng = 0x1dea;
	size_t live = 0, rebuilds = 0;

	(void)state;
	assert_non_null(names);
	for (int i = 0; i < N; i++)
		ix_name_make(&names[i], i);
	assert_int_equal(nameidx_init(&ix, 4, 7), 0);
	for (int step = 0; step < STEPS; step++) {
		/* Names from the whole set early, from a third of it late: the table
	 * grows, then those late names go in and out, leaving tombstones that
	 * the rebuilds drop. */
		struct ix_name *n = &names[rng_next(&rng) % (step < STEPS / 2 ? N : N / 3)];
		uint64_t h = nameidx_hash(&ix, n->s, n->len);

		if (!n->in) {
			struct nameidx_table *old;

			assert_int_equal(nameidx_put(&ix, h, n, &old), 0);
			if (old) {
				rebuilds++;
				free(old);      /* no reader holds it */
			}
			n->in = true;
			live++;
		} else {
			assert_true(nameidx_remove(&ix, h, n));
			assert_false(nameidx_remove(&ix, h, n));
			n->in = false;
			live--;
		}
		if (step % 97 == 0 || step == STEPS - 1) {
			const struct nameidx_table *t = nameidx_table(&ix);
			uint64_t pos = 0;
			size_t seen = 0;
			struct ix_name *v;

			for (int i = 0; i < N; i++)
				assert_ptr_equal(ix_find(&ix, &names[i]), names[i].in ? &names[i] : NULL);
			while ((v = nameidx_iter(t, &pos))) {
				assert_true(v->in);
				seen++;
			}
			assert_int_equal(seen, live);
			/* At most half full, so every probe ends. */
			assert_true((ix.live + ix.tombs) * 2 <= t->mask + 1);
		}
	}
	assert_true(rebuilds >= 5);
	nameidx_free(&ix);
	free(names);
}

/* The batched lookup answers exactly what one-at-a-time lookups answer, for
 * known, deleted, unknown, prefix, empty and over-long names, in batches of
 * every size. */
static void test_cache_lookup_many_agrees_with_lookup(void **state)
{
	struct cache *c = *state;
	static char names[400][40], long_name[70000];
	struct cache_name q[400];
	uint64_t rng = 42;
	size_t nq = 0;

	for (int i = 0; i < 300; i++) {
		snprintf(names[i], sizeof(names[i]), "node-%d", i);
		add_node(c, names[i], 1 + i % 8, 1 + i % 8);
	}
	for (int i = 0; i < 300; i += 3)
		assert_int_equal(cache_node_delete(c, names[i]), 0);
	cache_writer_reclaim(c);
	for (int i = 300; i < 400; i++)
		snprintf(names[i], sizeof(names[i]), i % 2 ? "node-%d" : "node-%d-x", i - 300);
	for (int i = 0; i < 400; i++)
		q[nq++] = (struct cache_name){ names[i], strlen(names[i]) };
	memset(long_name, 'a', sizeof(long_name) - 1);
	q[17] = (struct cache_name){ "", 0 };
	q[33] = (struct cache_name){ long_name, sizeof(long_name) - 1 };
	q[50] = (struct cache_name){ "node-5", 5 };     /* "node-": a prefix */
	for (size_t i = nq - 1; i > 0; i--) {
		size_t j = rng_next(&rng) % (i + 1);
		struct cache_name t = q[i];

		q[i] = q[j];
		q[j] = t;
	}
	cache_read_begin(c);
	for (size_t at = 0, b = 1; at < nq; at += b, b = b % CACHE_LOOKUP_BATCH + 1) {
		struct cache_node_view v[CACHE_LOOKUP_BATCH];
		bool found[CACHE_LOOKUP_BATCH];
		size_t m = nq - at < b ? nq - at : b;

		cache_node_lookup_many(c, &q[at], m, v, found);
		for (size_t j = 0; j < m; j++) {
			struct cache_node_view one;
			bool f = cache_node_lookup(c, q[at + j].s, q[at + j].len, &one);

			assert_int_equal(found[j], f);
			if (f) {
				assert_ptr_equal(v[j].node, one.node);
				assert_int_equal(v[j].used, one.used);
				assert_int_equal(v[j].unattributed, one.unattributed);
			}
		}
	}
	cache_read_end(c);
}

/* Readers never miss a node that stays, while the writer adds and deletes
 * hundreds of others (so the table is rebuilt under them). Run under TSan in
 * ./scripts/test. */
struct ix_race {
	struct cache *c;
	int stop;                       /* atomic */
	unsigned misses, reads;         /* per reader, summed after join */
};

static void *ix_race_reader(void *arg)
{
	struct ix_race *r = arg;
	struct cache_name q[CACHE_LOOKUP_BATCH];
	char names[CACHE_LOOKUP_BATCH][24];
	unsigned misses = 0, reads = 0;

	for (int i = 0; i < CACHE_LOOKUP_BATCH; i++) {
		snprintf(names[i], sizeof(names[i]), "stay-%d", i * 3);
		q[i] = (struct cache_name){ names[i], strlen(names[i]) };
	}
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		struct cache_node_view v[CACHE_LOOKUP_BATCH];
		bool found[CACHE_LOOKUP_BATCH];

		cache_read_begin(r->c);
		cache_node_lookup_many(r->c, q, CACHE_LOOKUP_BATCH, v, found);
		for (int i = 0; i < CACHE_LOOKUP_BATCH; i++) {
			misses += !found[i] || strcmp(v[i].node->name, names[i]) != 0;
			reads++;
		}
		cache_read_end(r->c);
	}
	__atomic_add_fetch(&r->misses, misses, __ATOMIC_RELAXED);
	__atomic_add_fetch(&r->reads, reads, __ATOMIC_RELAXED);
	return NULL;
}

static void test_cache_lookup_never_misses_a_staying_node(void **state)
{
	struct cache *c = *state;
	struct ix_race r = { .c = c };
	pthread_t tid[2];
	char name[32];

	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "stay-%d", i);
		add_node(c, name, 8, 8);
	}
	for (int t = 0; t < 2; t++)
		assert_int_equal(pthread_create(&tid[t], NULL, ix_race_reader, &r), 0);
	/* 24,000 adds: the index (4,096 entries at first) is rebuilt every
	 * 2,000 or so, while the readers run. */
	for (int round = 0; round < 12; round++) {
		for (int i = 0; i < 2000; i++) {
			snprintf(name, sizeof(name), "churn-%d-%d", round, i);
			add_node(c, name, 4, 4);
		}
		for (int i = 0; i < 2000; i++) {
			snprintf(name, sizeof(name), "churn-%d-%d", round, i);
			assert_int_equal(cache_node_delete(c, name), 0);
		}
		cache_writer_reclaim(c);
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	for (int t = 0; t < 2; t++)
		pthread_join(tid[t], NULL);
	assert_true(r.reads > 0);
	assert_int_equal(r.misses, 0);
}

/* Two values under one hash: each is found by its name (the probe goes on past
 * the other), and removing one leaves the other. */
static void test_cache_nameidx_same_hash(void **state)
{
	struct ix_name a, b;
	struct nameidx ix;
	struct nameidx_table *old;
	const struct nameidx_table *t;
	uint64_t h = 0x1234, pos;

	(void)state;
	ix_name_make(&a, 1);
	ix_name_make(&b, 2);
	assert_int_equal(nameidx_init(&ix, 4, 7), 0);
	assert_int_equal(nameidx_put(&ix, h, &a, &old), 0);
	assert_null(old);
	assert_int_equal(nameidx_put(&ix, h, &b, &old), 0);
	assert_null(old);
	t = nameidx_table(&ix);
	pos = h;
	assert_ptr_equal(nameidx_next_match(t, h, &pos), &a);
	assert_ptr_equal(nameidx_next_match(t, h, &pos), &b);
	assert_null(nameidx_next_match(t, h, &pos));
	assert_false(nameidx_remove(&ix, h + 1, &a));   /* another hash: not there */
	assert_true(nameidx_remove(&ix, h, &a));
	pos = h;
	assert_ptr_equal(nameidx_next_match(t, h, &pos), &b);
	assert_null(nameidx_next_match(t, h, &pos));
	assert_true(nameidx_remove(&ix, h, &b));
	pos = h;
	assert_null(nameidx_next_match(t, h, &pos));
	nameidx_free(&ix);
}

/* Every change to a node record or usage is counted, and the count is settled
 * between changes: what prioritize relies on to reuse filter's scores. */
static void test_cache_changes_count_every_change(void **state)
{
	struct cache *c = *state;
	uint64_t n0, n;
	uint64_t dev = 0x2;

#define CHANGED(what)                                                            \
	do {                                                                     \
		assert_true(cache_changes_settled(c, &n));                       \
		if (n <= n0)                                                     \
			fail_msg("%s was not counted", what);                    \
		assert_int_equal(cache_changes(c), n);                           \
		n0 = n;                                                          \
	} while (0)
	assert_true(cache_changes_settled(c, &n0));
	add_node(c, "gpu-0", 8, 8);
	CHANGED("adding a node");
	add_node(c, "gpu-0", 8, 6);
	CHANGED("replacing a node");
	cache_pod_apply(c, POD(.uid = "p1", .node = "gpu-0", .gpus = 1, .ids = "0"));
	CHANGED("a pod taking a device");
	cache_pod_apply(c, POD(.uid = "p2", .node = "gpu-0", .gpus = 2));
	CHANGED("a pod taking unattributed GPUs");
	assert_int_equal(cache_pod_delete(c, "p1"), 0);
	CHANGED("a pod leaving");
	assert_int_equal(cache_pod_remember(c, pod_make((struct podspec){ .uid = "p3", .gpus = 1 })),
			 0);
	assert_int_equal(cache_pod_assume(c, "p3", "gpu-0", &dev), 0);
	CHANGED("an assume");
	assert_int_equal(cache_pod_forget(c, "p3"), 0);
	CHANGED("a forget");
	assert_int_equal(cache_node_delete(c, "gpu-0"), 0);
	CHANGED("deleting a node");
	/* Nothing changed: the count stays. */
	assert_false(look(c, "gpu-0").found);
	assert_true(cache_changes_settled(c, &n));
	assert_int_equal(n, n0);
#undef CHANGED
}

/* Lookups use the given length, not a terminator. */
static void test_cache_node_lookup_uses_length(void **state)
{
	struct cache *c = *state;
	struct cache_node_view v;
	uint64_t used;
	uint32_t unattr;

	add_node(c, "gpu-1", 8, 8);
	cache_read_begin(c);
	assert_true(cache_node_lookup(c, "gpu-10", 5, &v));
	assert_string_equal(v.node->name, "gpu-1");
	assert_false(cache_node_lookup(c, "gpu-10", 6, &v));
	assert_false(cache_node_lookup(c, "gpu-1", 0, &v));
	assert_true(cache_usage_lookup(c, "gpu-1", 5, &used, &unattr));
	assert_int_equal(used, 0);
	assert_false(cache_usage_lookup(c, "gpu-2", 5, &used, &unattr));
	cache_read_end(c);
}

static void test_cache_view_free_gpus_and_mask(void **state)
{
	static const struct {
		uint32_t cap, alloc;
		uint64_t used;
		uint32_t unattr;
		uint32_t free_gpus;
		uint64_t free_mask;
	} cases[] = {
		{ 8, 8, 0, 0, 8, 0xff },
		{ 8, 8, 0x0f, 0, 4, 0xf0 },
		{ 8, 8, 0x0f, 2, 2, 0xf0 },
		{ 8, 6, 0, 0, 6, 0xff },        /* which two are unhealthy is unknown */
		{ 8, 6, 0x03, 1, 3, 0xfc },
		{ 8, 6, 0x3f, 0, 0, 0 },        /* allocatable used up: nothing free */
		{ 8, 6, 0x03, 5, 0, 0 },        /* over-held: never negative */
		{ 8, 0, 0, 0, 0, 0 },
		{ 64, 64, 0, 0, 64, ~0ULL },
		{ 64, 64, 1ULL << 63, 0, 63, ~0ULL >> 1 },
		{ 0, 0, 0, 0, 0, 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache_node n = { .name = "n", .gpu_capacity = cases[i].cap,
					.gpu_allocatable = cases[i].alloc };
		struct cache_node_view v = { .node = &n, .used = cases[i].used,
					     .unattributed = cases[i].unattr };
		uint32_t fg = cache_view_free_gpus(&v);
		uint64_t fm = cache_view_free_mask(&v);

		if (fg != cases[i].free_gpus || fm != cases[i].free_mask) {
			print_message("case %zu: free %u mask %#" PRIx64 "\n", i, fg, fm);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

struct foreach_acc {
	int visits;
	int stop_after;
	uint32_t gpus;
};

static bool foreach_count(const struct cache_node_view *v, void *arg)
{
	struct foreach_acc *a = arg;

	a->visits++;
	a->gpus += v->node->gpu_allocatable;
	return a->visits != a->stop_after;
}

static void test_cache_node_foreach_visits_live_nodes(void **state)
{
	struct cache *c = *state;
	struct foreach_acc a = { 0 };

	add_node(c, "a", 1, 1);
	add_node(c, "b", 2, 2);
	add_node(c, "c", 4, 4);
	add_node(c, "d", 8, 8);
	assert_int_equal(cache_node_delete(c, "d"), 0);
	cache_read_begin(c);
	cache_node_foreach(c, foreach_count, &a);
	cache_read_end(c);
	assert_int_equal(a.visits, 3);
	assert_int_equal(a.gpus, 7);

	a = (struct foreach_acc){ .stop_after = 2 };
	cache_read_begin(c);
	cache_node_foreach(c, foreach_count, &a);
	cache_read_end(c);
	assert_int_equal(a.visits, 2);
}

static void test_cache_synced_flag(void **state)
{
	struct cache *c = *state;

	assert_false(cache_is_synced(c));
	cache_set_synced(c, true);
	assert_true(cache_is_synced(c));
	cache_set_synced(c, false);
	assert_false(cache_is_synced(c));
	assert_int_equal(cache_get_opts(c)->n_gpu_resources, 1);
	assert_string_equal(cache_get_opts(c)->gpu_resources[0], "nvidia.com/gpu");
}

static void test_cache_node_sweep_deletes_rejected_nodes(void **state)
{
	static const char *const all[] = { "n0", "n1", "n2", "n3", NULL };
	static const char *const some[] = { "n1", "n3", "not-a-node", NULL };
	static const char *const none[] = { NULL };
	static const struct {
		const char *what;
		const char *const *keep;
		bool want[4];           /* n0..n3 still there */
	} cases[] = {
		{ "keep all", all, { true, true, true, true } },
		{ "keep some", some, { false, true, false, true } },
		{ "keep none", none, { false, false, false, false } },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache *c = cache_new(&OPTS);
		struct keep_set k = { cases[i].keep };
		struct cache_stats st;
		char uids[64];
		size_t want_n = 0;

		assert_non_null(c);
		for (int n = 0; n < 4; n++) {
			char name[8];

			snprintf(name, sizeof(name), "n%d", n);
			add_node(c, name, 8, 8);
		}
		/* A pod holds GPUs on n2, another on a node deleted before the sweep. */
		assert_int_equal(cache_pod_apply(c, POD(.uid = "p", .node = "n2", .gpus = 1,
							.ids = "0")),
				 0);
		add_node(c, "gone", 8, 8);
		assert_int_equal(cache_pod_apply(c, POD(.uid = "q", .node = "gone", .gpus = 2)),
				 0);
		assert_int_equal(cache_node_delete(c, "gone"), 0);
		cache__node_sweep(c, keep_listed, &k);
		for (int n = 0; n < 4; n++) {
			char name[8];

			snprintf(name, sizeof(name), "n%d", n);
			want_n += cases[i].want[n];
			if (look(c, name).found != cases[i].want[n]) {
				print_message("%s: %s is %s\n", cases[i].what, name,
					      cases[i].want[n] ? "gone" : "still there");
				bad++;
			}
		}
		cache_get_stats(c, &st);
		if (st.nodes != want_n || look(c, "gone").found) {
			print_message("%s: %zu nodes, want %zu\n", cases[i].what, st.nodes, want_n);
			bad++;
		}
		/* Sweeping nodes leaves pods alone: p still holds its device on n2, so a
		 * node n2 published again starts with it in use. */
		if (pod_info(c, "p").state != CACHE_POD_STATE_BOUND ||
		    node_pods_str(c, "n2", uids, sizeof(uids)) != 0 || strcmp(uids, "p") != 0) {
			print_message("%s: pod p lost its holding on n2 (index [%s])\n",
				      cases[i].what, uids);
			bad++;
		}
		add_node(c, "n2", 8, 8);
		assert_usage(c, "n2", 0x1, 0);
		add_node(c, "gone", 8, 8);
		assert_usage(c, "gone", 0, 2);
		cache_free(c);
	}
	assert_int_equal(bad, 0);
}

/* Which pod is which in the pod sweep below. */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_new_refuses_bad_opts),
		CACHE_TEST(test_cache_store_upsert_lookup_replace_delete),
		cmocka_unit_test(test_cache_nameidx_against_a_model),
		CACHE_TEST(test_cache_lookup_many_agrees_with_lookup),
		CACHE_TEST(test_cache_lookup_never_misses_a_staying_node),
		cmocka_unit_test(test_cache_nameidx_same_hash),
		CACHE_TEST(test_cache_changes_count_every_change),
		CACHE_TEST(test_cache_node_lookup_uses_length),
		cmocka_unit_test(test_cache_view_free_gpus_and_mask),
		CACHE_TEST(test_cache_node_foreach_visits_live_nodes),
		CACHE_TEST(test_cache_synced_flag),
		cmocka_unit_test(test_cache_node_sweep_deletes_rejected_nodes),
	};

	/* Skipped items and odd pods log warnings by design; keep output to failures. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
