/* Unit tests for placement/score_binpack.c: the "binpack" policy scores a
 * node's GPU utilisation after the pod lands.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>


#include "fixture.h"

static unsigned binpack(double packing, uint32_t capacity, uint32_t alloc, uint64_t used,
			uint32_t unattributed, uint32_t want)
{
	const struct placement_score_ops *ops = placement_score_find("binpack");
	struct placement_weights w = { .packing = packing };
	struct cache_node n = make_node(NV, capacity, alloc, true, false);
	struct cache_node_view v = { &n, used, unattributed };
	struct cache_demand d = gpus(NV, want);

	return ops->score(&w, &v, &(struct placement_request){ .demand = d });
}

struct score_case {
	const char *what;
	uint32_t alloc;
	unsigned held, want;
	unsigned score;
};

/* Utilisation after the pod lands, on the fine 0..250 scale. */
static const struct score_case score_cases[] = {
	{ "pod fills an empty node", 8, 0, 8, 250 },
	{ "pod fills a half-used node", 8, 4, 4, 250 },
	{ "pod fills the last device", 8, 7, 1, 250 },
	{ "pod fills a 6-device node", 6, 2, 4, 250 },
	{ "half of an empty node", 8, 0, 4, 125 },
	{ "half of a 2-device node", 2, 0, 1, 125 },
	{ "one of 64", 64, 0, 1, 4 },
	{ "all of 64", 64, 32, 32, 250 },
};

static void test_placement_binpack_scores_utilisation_after_landing(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(score_cases) / sizeof(score_cases[0]); i++) {
		const struct score_case *c = &score_cases[i];
		unsigned got = binpack(1.0, c->alloc, c->alloc, low_bits(c->held), 0, c->want);

		if (got != c->score)
			fail_msg("case \"%s\": score %u, want %u", c->what, got, c->score);
	}
}

static void test_placement_binpack_fuller_node_scores_higher(void **state)
{
	(void)state;
	/* Two 8-GPU nodes, a 2-GPU pod: the one already 6 full wins. */
	assert_true(binpack(1.0, 8, 8, low_bits(6), 0, 2) > binpack(1.0, 8, 8, 0, 0, 2));
	/* Unattributed holdings make a node just as full as known devices do. */
	assert_int_equal(binpack(1.0, 8, 8, 0, 6, 2), binpack(1.0, 8, 8, low_bits(6), 0, 2));
	assert_true(binpack(1.0, 8, 8, 0, 4, 2) > binpack(1.0, 8, 8, 0, 0, 2));
	/* The same holdings weigh more on a smaller node. */
	assert_true(binpack(1.0, 4, 4, low_bits(2), 0, 1) > binpack(1.0, 8, 8, low_bits(2), 0, 1));
}

/* For every node size, demand and holding: the score is in 0..250, never
 * drops as the node fills, and is 250 exactly when the pod fills the node. */
static void test_placement_binpack_is_bounded_and_monotonic(void **state)
{
	static const uint32_t sizes[] = { 1, 2, 3, 4, 6, 8, 10, 16, 64 };

	(void)state;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint32_t alloc = sizes[s];

		for (uint32_t want = 1; want <= alloc; want++) {
			unsigned prev = 0;

			for (uint32_t held = 0; held + want <= alloc; held++) {
				unsigned sc = binpack(1.0, alloc, alloc, low_bits(held), 0, want);

				assert_in_range(sc, 0, PLACEMENT_FINE_MAX);
				if (sc < prev)
					fail_msg("alloc %u want %u: score fell from %u to %u "
						 "at %u held", alloc, want, prev, sc, held);
				if (held + want == alloc && sc != PLACEMENT_FINE_MAX)
					fail_msg("alloc %u: exact fill scored %u", alloc, sc);
				prev = sc;
			}
		}
	}
}

static void test_placement_binpack_weight_scale_keeps_range(void **state)
{
	static const double weights[] = { 0.001, 0.5, 1.0, 3.0, 1000000.0 };

	(void)state;
	for (size_t i = 0; i < sizeof(weights) / sizeof(weights[0]); i++) {
		/* One term: its weight sets the scale only, not the outcome. */
		assert_int_equal(binpack(weights[i], 8, 8, low_bits(4), 0, 4), PLACEMENT_FINE_MAX);
		assert_int_equal(binpack(weights[i], 8, 8, 0, 0, 4), PLACEMENT_FINE_MAX / 2);
		assert_in_range(binpack(weights[i], 8, 8, low_bits(3), 0, 2), 0, PLACEMENT_FINE_MAX);
	}
}

static void test_placement_binpack_degenerate_nodes_score_zero(void **state)
{
	(void)state;
	/* No allocatable devices: no division by zero, lowest score. */
	assert_int_equal(binpack(1.0, 8, 0, 0, 0, 1), 0);
	/* Over-held nodes stay within range. */
	assert_in_range(binpack(1.0, 8, 8, 0xFF, 4, 1), 0, PLACEMENT_FINE_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_binpack_scores_utilisation_after_landing),
		cmocka_unit_test(test_placement_binpack_fuller_node_scores_higher),
		cmocka_unit_test(test_placement_binpack_is_bounded_and_monotonic),
		cmocka_unit_test(test_placement_binpack_weight_scale_keeps_range),
		cmocka_unit_test(test_placement_binpack_degenerate_nodes_score_zero),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
