/* Unit tests for placement/score.c: finding a scoring policy by name, and the
 * score memo answering exactly what the policy answers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "fixture.h"

static void test_placement_score_find_by_exact_name(void **state)
{
	const struct placement_score_ops *ops = placement_score_find("binpack");
	size_t n = 0;

	(void)state;
	assert_non_null(ops);
	assert_string_equal(ops->name, "binpack");
	assert_non_null(ops->score);
	assert_null(placement_score_find("Binpack"));
	assert_null(placement_score_find("spread"));
	assert_null(placement_score_find(""));
	assert_null(placement_score_find("binpack "));
	/* Every listed name resolves to a policy of that name. */
	for (const char *const *p = placement_score_names; *p; p++, n++) {
		const struct placement_score_ops *o = placement_score_find(*p);

		assert_non_null(o);
		assert_string_equal(o->name, *p);
	}
	assert_true(n >= 1);
}

/* The memo's answer for one node and request equals the policy's own. */
static void memo_check_one(const struct placement_score_ops *ops, const struct placement_topo *cls,
			   unsigned cap, uint64_t used, unsigned k, int kind, int lvl)
{
	static const struct placement_weights w = { 1, 1, 1, 1 };
	struct placement_request req = { .demand = gpus(NV, k) };
	struct placement_score_memo memo;
	struct cache_node n = make_node(NV, cap, cap, true, false);
	struct cache_node_view v = { &n, used, 0 };
	unsigned want;

	n.derived = cls;
	req.policy.kind = (enum placement_policy_kind)kind;
	req.policy.min_level = (uint8_t)lvl;
	placement_score_memo_init(&memo, ops, &w, &req);
	want = ops->score(&w, &v, &req);
	want = want > PLACEMENT_FINE_MAX ? PLACEMENT_FINE_MAX : want;
	if (placement_score_memoized(&memo, &v) != want)
		fail_msg("%s: class %s, held %#llx, %u GPUs, policy %d level %d: memo differs",
			 ops->name, cls->source, (unsigned long long)used, k, kind, lvl);
}

/* The score memo answers exactly what the policy answers, for every policy,
 * over random nodes of a few topology classes (and none), random holdings and
 * random requests; and nodes alike are scored once. */
static void test_placement_score_memo_matches_policy(void **state)
{
	static struct placement_topo cls[3];
	const char *products[3] = { "NVIDIA-A100-SXM4-80GB", "Tesla-V100-SXM2-16GB",
				    "NVIDIA-H100-80GB-HBM3" };
	unsigned counts[3] = { 8, 8, 4 };
	unsigned seed = 12345;

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_int_equal(placement_topo_profile(products[i], counts[i], &cls[i]), 0);
	for (const char *const *p = placement_score_names; *p; p++) {
		const struct placement_score_ops *ops = placement_score_find(*p);

		for (int round = 0; round < 60; round++) {
			struct placement_weights w = { (rand_r(&seed) % 4) / 2.0,
						       (rand_r(&seed) % 4) / 2.0,
						       (rand_r(&seed) % 4) / 2.0,
						       (rand_r(&seed) % 4) * 10.0 };
			struct placement_request req = { .demand = gpus(NV, 1 + rand_r(&seed) % 8) };
			struct placement_score_memo memo;
			unsigned n_nodes = 1000;

			/* Every policy kind, and levels for required:<LEVEL>. */
			req.policy.kind = (enum placement_policy_kind)(rand_r(&seed) % 4);
			req.policy.min_level = (uint8_t)(rand_r(&seed) % (PLACEMENT_LINK_NV0 + 13));
			placement_score_memo_init(&memo, ops, &w, &req);
			/* Every other round with two buckets, so that nodes differing in
			 * only one field of the key often meet in a bucket. */
			if (round % 2)
				memo.bucket_mask = 1;
			for (unsigned i = 0; i < n_nodes; i++) {
				int c = (int)(rand_r(&seed) % 4);       /* 3: unknown topology */
				uint32_t cap = c == 3 ? 8 : counts[c];
				/* Few holdings (in the small rounds), so that nodes often
				 * share a free mask and differ only in the other fields. */
				static const uint64_t held[4] = { 0, 0x01, 0x03, 0x50 };
				uint64_t used = round % 2 ? held[rand_r(&seed) % 4] : (uint64_t)rand_r(&seed);
				struct cache_node n = make_node(NV, cap, cap - rand_r(&seed) % 3, true,
								false);
				struct cache_node_view v = { &n, used & ((1u << cap) - 1),
							     rand_r(&seed) % 3 };
				unsigned want;

				n.derived = c == 3 ? NULL : &cls[c];
				n.unhealthy = rand_r(&seed) % 7 == 0 ? 1u << (rand_r(&seed) % cap) : 0;
				n.derived = rand_r(&seed) % 9 == 0 ? NULL : n.derived;
				want = ops->score(&w, &v, &req);
				if (want > PLACEMENT_FINE_MAX)
					want = PLACEMENT_FINE_MAX;
				assert_int_equal(placement_score_memoized(&memo, &v), want);
			}
			assert_int_equal(memo.hits + memo.misses, n_nodes);
			assert_true(memo.hits > 0);
		}
		/* Requests differing in one field only, one after the other, over
		 * the same node: the class memo, shared by requests, must tell
		 * them apart by every field of its tag. */
		for (int c = 0; c < 3; c++)
		for (uint64_t used = 0; used < 4; used += 3)
		for (unsigned k = 2; k <= 3; k++)
		for (int kind = 0; kind < 4; kind++)
		for (int lvl = PLACEMENT_LINK_NV0 - 3; lvl <= PLACEMENT_LINK_NV0 + 12; lvl += 3) {
			/* base, k+1, base, next kind, base, next level, base */
			static const int vary[7] = { 0, 1, 0, 2, 0, 3, 0 };

			for (int x = 0; x < 7; x++)
				memo_check_one(ops, &cls[c], counts[c], used,
					       k + (vary[x] == 1), (kind + (vary[x] == 2)) % 4,
					       lvl + (vary[x] == 3));
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_score_find_by_exact_name),
		cmocka_unit_test(test_placement_score_memo_matches_policy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
