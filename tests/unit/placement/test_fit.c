/* Unit tests for placement/fit.c: whether a node can take a pod, the verdict
 * (fits, not now, never) and the reason a person reads.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "fixture.h"

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

/* placement_check on the node and demand of case <c>. */
static enum placement_verdict check_case(const struct check_case *c, struct placement_fit *fit)
{
	struct cache_node n = make_node(c->resource, c->capacity, c->allocatable, c->ready,
					c->cordoned);
	struct cache_node_view v = { &n, c->used, c->unattributed };
	struct cache_demand d = gpus(c->want_resource, c->want);

	return placement_check(&v, &d, gpu_names, fit);
}

static void test_placement_check_verdicts_and_reasons(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(check_cases) / sizeof(check_cases[0]); i++) {
		const struct check_case *c = &check_cases[i];
		struct placement_fit fit;
		enum placement_verdict got;

		/* Poison the output: a fit must clear what was there. */
		memset(&fit, 'x', sizeof(fit));
		got = check_case(c, &fit);
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
		struct placement_fit fit;

		check_case(&check_cases[i], &fit);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_check_verdicts_and_reasons),
		cmocka_unit_test(test_placement_check_refusals_start_with_troupe),
		cmocka_unit_test(test_placement_check_fits_iff_enough_free),
		cmocka_unit_test(test_placement_unknown_node_is_resolvable),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
