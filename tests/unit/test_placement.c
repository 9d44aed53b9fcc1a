/* Unit tests for placement/: whether a node can take a pod (verdict and the
 * reason a person reads), the binpack scoring policy, and device choice.
 *
 * Nodes are built as plain structs, the way the cache hands them to placement,
 * so that each case states exactly the node it judges.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "placement/placement.h"

/* The managed resource names, as cache_opts.gpu_resources holds them. */
static const char *const gpu_names[] = { "nvidia.com/gpu", "amd.com/gpu", NULL };

enum { NV = 0, AMD = 1, NONE = -1 };

static struct cache_node make_node(int resource, uint32_t capacity, uint32_t allocatable,
				   bool ready, bool cordoned)
{
	struct cache_node n = {
		.name = "n",
		.gpu_resource = resource,
		.gpu_capacity = capacity,
		.gpu_allocatable = allocatable,
		.ready = ready,
		.unschedulable = cordoned,
	};

	return n;
}

static struct cache_demand gpus(int resource, uint32_t n)
{
	struct cache_demand d = { .gpu_resource = n ? resource : -1, .gpus = n };

	return d;
}

static uint64_t low_bits(unsigned n)
{
	return n >= 64 ? ~0ULL : (1ULL << n) - 1;
}

/* ---- placement_check ------------------------------------------------------ */

struct check_case {
	const char *what;
	int resource;                   /* the node's GPU kind */
	uint32_t capacity, allocatable;
	bool ready, cordoned;
	uint64_t used;
	uint32_t unattributed;
	int want_resource;
	uint32_t want;
	enum placement_verdict verdict;
	const char *reason;
	uint32_t free_gpus;
};

static const struct check_case check_cases[] = {
	/* Fits. */
	{ "empty node, whole node asked", NV, 8, 8, true, false, 0, 0, NV, 8,
	  PLACEMENT_FITS, "", 8 },
	{ "half used, other half asked", NV, 8, 8, true, false, 0x0F, 0, NV, 4,
	  PLACEMENT_FITS, "", 4 },
	{ "unattributed count against free", NV, 8, 8, true, false, 0x03, 2, NV, 4,
	  PLACEMENT_FITS, "", 4 },
	{ "second GPU kind", AMD, 4, 4, true, false, 0, 0, AMD, 4,
	  PLACEMENT_FITS, "", 4 },
	{ "64-device node", NV, 64, 64, true, false, 0, 0, NV, 64,
	  PLACEMENT_FITS, "", 64 },
	/* A pod that asks for no GPUs fits anywhere, whatever state the node is in
	 * (free_gpus is not checked for these). */
	{ "no GPUs asked, node without GPUs", NONE, 0, 0, true, false, 0, 0, NV, 0,
	  PLACEMENT_FITS, "", 0 },
	{ "no GPUs asked, node not Ready", NV, 8, 8, false, false, 0, 0, NV, 0,
	  PLACEMENT_FITS, "", 0 },
	{ "no GPUs asked, node cordoned", NV, 8, 8, true, true, 0, 0, NV, 0,
	  PLACEMENT_FITS, "", 0 },
	{ "no GPUs asked, node full", NV, 8, 8, true, false, 0xFF, 0, NV, 0,
	  PLACEMENT_FITS, "", 0 },
	/* Never: nothing evicted would help. */
	{ "node without GPUs", NONE, 0, 0, true, false, 0, 0, NV, 1,
	  PLACEMENT_UNRESOLVABLE, "troupe: node has no nvidia.com/gpu", 0 },
	{ "node advertising zero GPUs", NV, 0, 0, true, false, 0, 0, NV, 1,
	  PLACEMENT_UNRESOLVABLE, "troupe: node has no nvidia.com/gpu", 0 },
	{ "node with another GPU kind", AMD, 8, 8, true, false, 0, 0, NV, 2,
	  PLACEMENT_UNRESOLVABLE, "troupe: node has no nvidia.com/gpu", 0 },
	{ "pod asks for the second kind", NV, 8, 8, true, false, 0, 0, AMD, 2,
	  PLACEMENT_UNRESOLVABLE, "troupe: node has no amd.com/gpu", 0 },
	{ "capacity below request", NV, 4, 4, true, false, 0, 0, NV, 8,
	  PLACEMENT_UNRESOLVABLE, "troupe: node has 4 nvidia.com/gpu, pod needs 8", 4 },
	{ "capacity below request beats not Ready", NV, 4, 4, false, true, 0, 0, NV, 8,
	  PLACEMENT_UNRESOLVABLE, "troupe: node has 4 nvidia.com/gpu, pod needs 8", 4 },
	/* Not now: may fit after pods leave or the node heals. */
	{ "not Ready", NV, 8, 8, false, false, 0, 0, NV, 1,
	  PLACEMENT_UNSCHEDULABLE, "troupe: node is not Ready", 8 },
	{ "not Ready and cordoned", NV, 8, 8, false, true, 0, 0, NV, 1,
	  PLACEMENT_UNSCHEDULABLE, "troupe: node is not Ready", 8 },
	{ "cordoned", NV, 8, 8, true, true, 0, 0, NV, 1,
	  PLACEMENT_UNSCHEDULABLE, "troupe: node is cordoned (spec.unschedulable)", 8 },
	{ "allocatable below request", NV, 8, 6, true, false, 0, 0, NV, 8,
	  PLACEMENT_UNSCHEDULABLE,
	  "troupe: only 6 of 8 nvidia.com/gpu healthy (allocatable), pod needs 8", 6 },
	{ "too few free", NV, 8, 8, true, false, 0x3F, 0, NV, 4,
	  PLACEMENT_UNSCHEDULABLE, "troupe: 2 of 8 nvidia.com/gpu free, pod needs 4", 2 },
	{ "too few free, held by unattributed pods", NV, 8, 8, true, false, 0, 6, NV, 4,
	  PLACEMENT_UNSCHEDULABLE, "troupe: 2 of 8 nvidia.com/gpu free, pod needs 4", 2 },
	{ "too few free, mixed holdings", NV, 8, 8, true, false, 0x30, 4, NV, 4,
	  PLACEMENT_UNSCHEDULABLE, "troupe: 2 of 8 nvidia.com/gpu free, pod needs 4", 2 },
	{ "too few free counts against allocatable", NV, 8, 6, true, false, 0, 1, NV, 6,
	  PLACEMENT_UNSCHEDULABLE, "troupe: 5 of 6 nvidia.com/gpu free, pod needs 6", 5 },
	{ "over-held node has zero free, never negative", NV, 8, 8, true, false, 0xFF, 3, NV, 1,
	  PLACEMENT_UNSCHEDULABLE, "troupe: 0 of 8 nvidia.com/gpu free, pod needs 1", 0 },
	{ "reason names the pod's GPU kind", AMD, 8, 8, true, false, 0x3F, 0, AMD, 4,
	  PLACEMENT_UNSCHEDULABLE, "troupe: 2 of 8 amd.com/gpu free, pod needs 4", 2 },
};

static void test_placement_check_verdicts_and_reasons(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(check_cases) / sizeof(check_cases[0]); i++) {
		const struct check_case *c = &check_cases[i];
		struct cache_node n = make_node(c->resource, c->capacity, c->allocatable, c->ready,
						c->cordoned);
		struct cache_node_view v = { &n, c->used, c->unattributed };
		struct cache_demand d = gpus(c->want_resource, c->want);
		struct placement_fit fit;
		enum placement_verdict got;

		/* Poison the output: a fit must clear what was there. */
		memset(&fit, 'x', sizeof(fit));
		got = placement_check(&v, &d, gpu_names, &fit);
		if (got != c->verdict || fit.verdict != c->verdict ||
		    strcmp(fit.reason, c->reason) != 0 ||
		    (c->want > 0 && fit.free_gpus != c->free_gpus))
			fail_msg("case \"%s\": got verdict %d/%d reason \"%.*s\" free %u; want %d "
				 "\"%s\" free %u", c->what, got, fit.verdict,
				 (int)sizeof(fit.reason), fit.reason, fit.free_gpus, c->verdict,
				 c->reason, c->free_gpus);
	}
}

static void test_placement_check_refusals_start_with_troupe(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(check_cases) / sizeof(check_cases[0]); i++) {
		const struct check_case *c = &check_cases[i];
		struct cache_node n = make_node(c->resource, c->capacity, c->allocatable, c->ready,
						c->cordoned);
		struct cache_node_view v = { &n, c->used, c->unattributed };
		struct cache_demand d = gpus(c->want_resource, c->want);
		struct placement_fit fit;

		placement_check(&v, &d, gpu_names, &fit);
		if (fit.verdict == PLACEMENT_FITS)
			assert_string_equal(fit.reason, "");
		else
			assert_true(strncmp(fit.reason, "troupe: ", 8) == 0);
		assert_true(memchr(fit.reason, '\0', sizeof(fit.reason)) != NULL);
	}
}

/* Free devices are counted against allocatable, whatever the node's size:
 * a pod fits exactly when allocatable - held >= want. */
static void test_placement_check_fits_iff_enough_free(void **state)
{
	(void)state;
	for (uint32_t alloc = 1; alloc <= 16; alloc++) {
		for (uint32_t held = 0; held <= alloc; held++) {
			for (uint32_t want = 1; want <= alloc; want++) {
				struct cache_node n = make_node(NV, 16, alloc, true, false);
				struct cache_node_view v = { &n, low_bits(held), 0 };
				struct cache_demand d = gpus(NV, want);
				struct placement_fit fit;
				enum placement_verdict got;

				got = placement_check(&v, &d, gpu_names, &fit);

				assert_int_equal(fit.free_gpus, alloc - held);
				if (alloc - held >= want)
					assert_int_equal(got, PLACEMENT_FITS);
				else
					assert_int_equal(got, PLACEMENT_UNSCHEDULABLE);
			}
		}
	}
}

static void test_placement_unknown_node_is_resolvable(void **state)
{
	struct placement_fit fit;

	(void)state;
	memset(&fit, 'x', sizeof(fit));
	placement_unknown_node(&fit);
	assert_int_equal(fit.verdict, PLACEMENT_UNSCHEDULABLE);
	assert_string_equal(fit.reason, "troupe: node unknown to troupe (not in its cache)");
	assert_int_equal(fit.free_gpus, 0);
}

/* ---- Scoring policies ------------------------------------------------------- */

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

/* Utilisation after the pod lands, on a 0..10 scale. */
static const struct score_case score_cases[] = {
	{ "pod fills an empty node", 8, 0, 8, 10 },
	{ "pod fills a half-used node", 8, 4, 4, 10 },
	{ "pod fills the last device", 8, 7, 1, 10 },
	{ "pod fills a 6-device node", 6, 2, 4, 10 },
	{ "half of an empty node", 8, 0, 4, 5 },
	{ "half of a 2-device node", 2, 0, 1, 5 },
	{ "one of 64", 64, 0, 1, 0 },
	{ "all of 64", 64, 32, 32, 10 },
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

/* For every node size, demand and holding: the score is in 0..10, never
 * drops as the node fills, and is 10 exactly when the pod fills the node. */
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

				assert_in_range(sc, 0, PLACEMENT_MAX_SCORE);
				if (sc < prev)
					fail_msg("alloc %u want %u: score fell from %u to %u "
						 "at %u held", alloc, want, prev, sc, held);
				if (held + want == alloc && sc != PLACEMENT_MAX_SCORE)
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
		assert_int_equal(binpack(weights[i], 8, 8, low_bits(4), 0, 4), 10);
		assert_int_equal(binpack(weights[i], 8, 8, 0, 0, 4), 5);
		assert_in_range(binpack(weights[i], 8, 8, low_bits(3), 0, 2), 0, 10);
	}
}

static void test_placement_binpack_degenerate_nodes_score_zero(void **state)
{
	(void)state;
	/* No allocatable devices: no division by zero, lowest score. */
	assert_int_equal(binpack(1.0, 8, 0, 0, 0, 1), 0);
	/* Over-held nodes stay within range. */
	assert_in_range(binpack(1.0, 8, 8, 0xFF, 4, 1), 0, 10);
}

/* ---- Device choice ---------------------------------------------------------- */

struct choose_case {
	uint64_t free_mask;
	unsigned want;
	int ret;
	uint64_t chosen;
};

static const struct choose_case choose_cases[] = {
	{ 0xFF, 3, 0, 0x07 },
	{ 0xFF, 8, 0, 0xFF },
	{ 0xF0, 2, 0, 0x30 },
	{ 0xAA, 3, 0, 0x2A },
	{ 0x81, 2, 0, 0x81 },
	{ 0x0F, 4, 0, 0x0F },
	{ 1ULL << 63, 1, 0, 1ULL << 63 },
	{ ~0ULL, 64, 0, ~0ULL },
	{ ~0ULL, 1, 0, 0x01 },
	{ 0xFF, 0, 0, 0 },
	{ 0, 0, 0, 0 },
	{ 0x0F, 5, -ENOSPC, 0 },
	{ 0, 1, -ENOSPC, 0 },
	{ 0x8000000000000001ULL, 3, -ENOSPC, 0 },
};

static void test_placement_choose_devices_takes_lowest_free(void **state)
{
	struct cache_node n = make_node(NV, 64, 64, true, false);
	struct cache_node_view v = { &n, 0, 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(choose_cases) / sizeof(choose_cases[0]); i++) {
		const struct choose_case *c = &choose_cases[i];
		uint64_t out = 0xDEADBEEFULL;
		int ret = placement_choose_devices(&v, c->free_mask, c->want, &out);

		if (ret != c->ret)
			fail_msg("free %#llx want %u: ret %d, want %d",
				 (unsigned long long)c->free_mask, c->want, ret, c->ret);
		if (ret == 0 && out != c->chosen)
			fail_msg("free %#llx want %u: chose %#llx, want %#llx",
				 (unsigned long long)c->free_mask, c->want,
				 (unsigned long long)out, (unsigned long long)c->chosen);
		if (ret < 0 && out != 0xDEADBEEFULL)
			fail_msg("free %#llx want %u: output written on failure",
				 (unsigned long long)c->free_mask, c->want);
	}
}

/* Over many masks: the choice is a subset of the free devices, of exactly the
 * size asked, the same on every call, and -ENOSPC only when too few are free. */
static void test_placement_choose_devices_is_deterministic_subset(void **state)
{
	struct cache_node n = make_node(NV, 64, 64, true, false);
	struct cache_node_view v = { &n, 0, 0 };
	uint64_t x = 0x9E3779B97F4A7C15ULL;

	(void)state;
	for (int i = 0; i < 2000; i++) {
		uint64_t free_mask, a, b;
		unsigned have, want;
		int ra, rb;

		/* xorshift64: a fixed sequence of masks. */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		free_mask = i % 3 == 0 ? x & (x >> 3) : i % 3 == 1 ? x & 0xFF : x;
		have = (unsigned)__builtin_popcountll(free_mask);
		want = (unsigned)(x >> 58) % 12;
		ra = placement_choose_devices(&v, free_mask, want, &a);
		rb = placement_choose_devices(&v, free_mask, want, &b);
		assert_int_equal(ra, rb);
		if (want > have) {
			assert_int_equal(ra, -ENOSPC);
			continue;
		}
		assert_int_equal(ra, 0);
		assert_int_equal(a, b);
		assert_int_equal(a & ~free_mask, 0);
		assert_int_equal(__builtin_popcountll(a), want);
		/* Lowest first: no free device below the highest chosen is left out. */
		if (a) {
			unsigned highest = 63 - (unsigned)__builtin_clzll(a);

			assert_int_equal(free_mask & low_bits(highest) & ~a, 0);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_check_verdicts_and_reasons),
		cmocka_unit_test(test_placement_check_refusals_start_with_troupe),
		cmocka_unit_test(test_placement_check_fits_iff_enough_free),
		cmocka_unit_test(test_placement_unknown_node_is_resolvable),
		cmocka_unit_test(test_placement_score_find_by_exact_name),
		cmocka_unit_test(test_placement_binpack_scores_utilisation_after_landing),
		cmocka_unit_test(test_placement_binpack_fuller_node_scores_higher),
		cmocka_unit_test(test_placement_binpack_is_bounded_and_monotonic),
		cmocka_unit_test(test_placement_binpack_weight_scale_keeps_range),
		cmocka_unit_test(test_placement_binpack_degenerate_nodes_score_zero),
		cmocka_unit_test(test_placement_choose_devices_takes_lowest_free),
		cmocka_unit_test(test_placement_choose_devices_is_deterministic_subset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
