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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The memo's answer for one node and request equals the policy's own. */
static void memo_check_one(const struct placement_score_ops *ops, const struct placement_topo *cls,
			   unsigned cap, uint64_t used, unsigned k, int kind, int lvl)
{
	static const struct placement_weights w = { 1, 1, 1 };
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
	want = want > PLACEMENT_MAX_SCORE ? PLACEMENT_MAX_SCORE : want;
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
						       (rand_r(&seed) % 4) / 2.0 };
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
				if (want > PLACEMENT_MAX_SCORE)
					want = PLACEMENT_MAX_SCORE;
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

/* Device choice on a node whose topology is unknown: the lowest free indices
 * (placement_node_choose; zero devices is the empty set). */
static int choose_lowest(const struct cache_node_view *v, uint64_t free_mask, unsigned want,
			 uint64_t *out)
{
	struct placement_policy pref = { PLACEMENT_POLICY_PREFERRED, 0 };
	struct placement_choice c;
	int ret;

	if (want == 0) {
		*out = 0;
		return 0;
	}
	ret = placement_node_choose(v, free_mask, want, &pref, &c);
	if (ret == 0)
		*out = c.set;
	return ret;
}

static void test_placement_choose_devices_takes_lowest_free(void **state)
{
	struct cache_node n = make_node(NV, 64, 64, true, false);
	struct cache_node_view v = { &n, 0, 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(choose_cases) / sizeof(choose_cases[0]); i++) {
		const struct choose_case *c = &choose_cases[i];
		uint64_t out = 0xDEADBEEFULL;
		int ret = choose_lowest(&v, c->free_mask, c->want, &out);

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
		uint64_t free_mask, a = 0, b = 0;
		unsigned have, want;
		int ra, rb;

		/* xorshift64: a fixed sequence of masks. */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		free_mask = i % 3 == 0 ? x & (x >> 3) : i % 3 == 1 ? x & 0xFF : x;
		have = (unsigned)__builtin_popcountll(free_mask);
		want = (unsigned)(x >> 58) % 12;
		ra = choose_lowest(&v, free_mask, want, &a);
		rb = choose_lowest(&v, free_mask, want, &b);
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

/* ---- Topology: nvidia-smi topo -m text ---------------------------------------- */

/* Short names for the levels in the tables below. */
#define L_X PLACEMENT_LINK_NONE
#define L_SYS PLACEMENT_LINK_SYS
#define L_NODE PLACEMENT_LINK_NODE
#define L_PHB PLACEMENT_LINK_PHB
#define L_PXB PLACEMENT_LINK_PXB
#define L_PIX PLACEMENT_LINK_PIX
#define L_NV(n) (PLACEMENT_LINK_NV0 + (n))

/* The legend every current driver prints under the matrix. */
#define NVSMI_LEGEND                                                                               \
	"Legend:\n"                                                                                \
	"\n"                                                                                       \
	"  X    = Self\n"                                                                          \
	"  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "  \
	"(e.g., QPI/UPI)\n"                                                                        \
	"  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "       \
	"Bridges within a NUMA node\n"                                                             \
	"  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"  \
	"  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "  \
	"Bridge)\n"                                                                                \
	"  PIX  = Connection traversing at most a single PCIe bridge\n"                            \
	"  NV#  = Connection traversing a bonded set of # NVLinks\n"


/* DGX-1 class 8x V100-SXM2: the hybrid cube mesh (NV1/NV2 within each half,
 * one link to the twin in the other half, SYS otherwise). Source: nvidia-smi topo
 * -m of a NERSC Cori GPU node, kept in a public job script on GitHub: space
 * separated as a terminal shows it, the older mlx4_0/mlx5_<n> NIC names, CPU and
 * NUMA Affinity but no GPU NUMA ID, NIC rows and no legend. */
static const char fx_dgx1_v100[] =
	"        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    mlx4_0  mlx5_0  "
	"mlx5_1  mlx5_2  mlx5_3  mlx5_4  mlx5_5  mlx5_6  mlx5_7  CPU Affinity    NUMA Affinity\n"
	"GPU0     X      NV1     NV1     NV2     NV2     SYS     SYS     SYS     SYS     PIX     "
	"PIX     NODE    NODE    SYS     SYS     SYS     SYS     0-19,40-59      0\n"
	"GPU1    NV1      X      NV2     NV1     SYS     NV2     SYS     SYS     SYS     PIX     "
	"PIX     NODE    NODE    SYS     SYS     SYS     SYS     0-19,40-59      0\n"
	"GPU2    NV1     NV2      X      NV2     SYS     SYS     NV1     SYS     SYS     NODE    "
	"NODE    PIX     PIX     SYS     SYS     SYS     SYS     0-19,40-59      0\n"
	"GPU3    NV2     NV1     NV2      X      SYS     SYS     SYS     NV1     SYS     NODE    "
	"NODE    PIX     PIX     SYS     SYS     SYS     SYS     0-19,40-59      0\n"
	"GPU4    NV2     SYS     SYS     SYS      X      NV1     NV1     NV2     NODE    SYS     "
	"SYS     SYS     SYS     PIX     PIX     NODE    NODE    20-39,60-79     1\n"
	"GPU5    SYS     NV2     SYS     SYS     NV1      X      NV2     NV1     NODE    SYS     "
	"SYS     SYS     SYS     PIX     PIX     NODE    NODE    20-39,60-79     1\n"
	"GPU6    SYS     SYS     NV1     SYS     NV1     NV2      X      NV2     NODE    SYS     "
	"SYS     SYS     SYS     NODE    NODE    PIX     PIX     20-39,60-79     1\n"
	"GPU7    SYS     SYS     SYS     NV1     NV2     NV1     NV2      X      NODE    SYS     "
	"SYS     SYS     SYS     NODE    NODE    PIX     PIX     20-39,60-79     1\n"
	"mlx4_0  SYS     SYS     SYS     SYS     NODE    NODE    NODE    NODE     X      SYS     "
	"SYS     SYS     SYS     NODE    NODE    NODE    NODE\n"
	"mlx5_0  PIX     PIX     NODE    NODE    SYS     SYS     SYS     SYS     SYS      X      "
	"PIX     NODE    NODE    SYS     SYS     SYS     SYS\n"
	"mlx5_1  PIX     PIX     NODE    NODE    SYS     SYS     SYS     SYS     SYS     PIX     "
	" X      NODE    NODE    SYS     SYS     SYS     SYS\n"
	"mlx5_2  NODE    NODE    PIX     PIX     SYS     SYS     SYS     SYS     SYS     NODE    "
	"NODE     X      PIX     SYS     SYS     SYS     SYS\n"
	"mlx5_3  NODE    NODE    PIX     PIX     SYS     SYS     SYS     SYS     SYS     NODE    "
	"NODE    PIX      X      SYS     SYS     SYS     SYS\n"
	"mlx5_4  SYS     SYS     SYS     SYS     PIX     PIX     NODE    NODE    NODE    SYS     "
	"SYS     SYS     SYS      X      PIX     NODE    NODE\n"
	"mlx5_5  SYS     SYS     SYS     SYS     PIX     PIX     NODE    NODE    NODE    SYS     "
	"SYS     SYS     SYS     PIX      X      NODE    NODE\n"
	"mlx5_6  SYS     SYS     SYS     SYS     NODE    NODE    PIX     PIX     NODE    SYS     "
	"SYS     SYS     SYS     NODE    NODE     X      PIX\n"
	"mlx5_7  SYS     SYS     SYS     SYS     NODE    NODE    PIX     PIX     NODE    SYS     "
	"SYS     SYS     SYS     NODE    NODE    PIX      X \n";

/* DGX A100 (8x A100-SXM4-40GB, NVSwitch): NV12 everywhere, twelve NICs, each
 * GPU pair on its own NUMA node (the AMD sockets in NPS4 mode: 3, 1 | 7, 5).
 * Source: NVIDIA/nccl issue 1505, whose GPU0-GPU4 rows are as printed there;
 * GPU5-GPU7 follow the same board's pattern. Space separated, all three
 * affinity columns, legend and NIC legend; the twelve NIC rows are left out
 * (C limits a string constant to 4095 bytes; the other fixtures carry theirs). */
static const char fx_dgx_a100[] =
	"        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    NIC0    NIC1    "
	"NIC2    NIC3    NIC4    NIC5    NIC6    NIC7    NIC8    NIC9    NIC10   NIC11   "
	"CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
	"GPU0     X      NV12    NV12    NV12    NV12    NV12    NV12    NV12    PXB     PXB     "
	"SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     "
	"48-63,176-191   3               N/A\n"
	"GPU1    NV12     X      NV12    NV12    NV12    NV12    NV12    NV12    PXB     PXB     "
	"SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     "
	"48-63,176-191   3               N/A\n"
	"GPU2    NV12    NV12     X      NV12    NV12    NV12    NV12    NV12    SYS     SYS     "
	"PXB     PXB     SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     "
	"16-31,144-159   1               N/A\n"
	"GPU3    NV12    NV12    NV12     X      NV12    NV12    NV12    NV12    SYS     SYS     "
	"PXB     PXB     SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     "
	"16-31,144-159   1               N/A\n"
	"GPU4    NV12    NV12    NV12    NV12     X      NV12    NV12    NV12    SYS     SYS     "
	"SYS     SYS     SYS     SYS     PXB     PXB     SYS     SYS     SYS     SYS     "
	"112-127,240-255 7               N/A\n"
	"GPU5    NV12    NV12    NV12    NV12    NV12     X      NV12    NV12    SYS     SYS     "
	"SYS     SYS     SYS     SYS     PXB     PXB     SYS     SYS     SYS     SYS     "
	"112-127,240-255 7               N/A\n"
	"GPU6    NV12    NV12    NV12    NV12    NV12    NV12     X      NV12    SYS     SYS     "
	"SYS     SYS     SYS     SYS     SYS     SYS     PXB     PXB     SYS     SYS     "
	"80-95,208-223   5               N/A\n"
	"GPU7    NV12    NV12    NV12    NV12    NV12    NV12    NV12     X      SYS     SYS     "
	"SYS     SYS     SYS     SYS     SYS     SYS     PXB     PXB     SYS     SYS     "
	"80-95,208-223   5               N/A\n"
	"\n"
	NVSMI_LEGEND
	"\n"
	"NIC Legend:\n"
	"\n"
	"  NIC0: mlx5_0\n"
	"  NIC1: mlx5_1\n"
	"  NIC2: mlx5_2\n"
	"  NIC3: mlx5_3\n"
	"  NIC4: mlx5_4\n"
	"  NIC5: mlx5_5\n"
	"  NIC6: mlx5_6\n"
	"  NIC7: mlx5_7\n"
	"  NIC8: mlx5_8\n"
	"  NIC9: mlx5_9\n"
	"  NIC10: mlx5_10\n"
	"  NIC11: mlx5_11\n";

/* DGX H100 (8x H100 80GB HBM3, NVSwitch): NV18 everywhere, GPUs 0-3 on NUMA 0
 * and 4-7 on NUMA 1. Source: vllm-project/vllm issue 13855 (the GPU rows as
 * printed there, where a paste had fused some NIC cells; the NIC rows follow).
 * Written with the tabs nvidia-smi really prints: " X " on the diagonal, and
 * "\t\t" before GPU NUMA ID. */
static const char fx_dgx_h100[] =
	"\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tNIC2\tNIC3\tNIC4\tNIC5\t"
	"NIC6\tNIC7\tNIC8\tNIC9\tNIC10\tNIC11\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
	"GPU0\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tPXB\tNODE\tNODE\tNODE\tNODE\tNODE\t"
	"SYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
	"GPU1\tNV18\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNODE\tNODE\tNODE\tPXB\tNODE\tNODE\t"
	"SYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
	"GPU2\tNV18\tNV18\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNODE\tNODE\tNODE\tNODE\tPXB\tNODE\t"
	"SYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
	"GPU3\tNV18\tNV18\tNV18\t X \tNV18\tNV18\tNV18\tNV18\tNODE\tNODE\tNODE\tNODE\tNODE\tPXB\t"
	"SYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
	"GPU4\tNV18\tNV18\tNV18\tNV18\t X \tNV18\tNV18\tNV18\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPXB\t"
	"NODE\tNODE\tNODE\tNODE\tNODE\t56-111,168-223\t1\t\tN/A\n"
	"GPU5\tNV18\tNV18\tNV18\tNV18\tNV18\t X \tNV18\tNV18\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t"
	"NODE\tNODE\tNODE\tPXB\tNODE\tNODE\t56-111,168-223\t1\t\tN/A\n"
	"GPU6\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\t X \tNV18\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t"
	"NODE\tNODE\tNODE\tNODE\tPXB\tNODE\t56-111,168-223\t1\t\tN/A\n"
	"GPU7\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t"
	"NODE\tNODE\tNODE\tNODE\tNODE\tPXB\t56-111,168-223\t1\t\tN/A\n"
	"NIC0\tPXB\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t X \tNODE\tNODE\tNODE\tNODE\tNODE\t"
	"SYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
	"NIC1\tNODE\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tNODE\t X \tPIX\tNODE\tNODE\tNODE\t"
	"SYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
	"NIC2\tNODE\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tNODE\tPIX\t X \tNODE\tNODE\tNODE\t"
	"SYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
	"NIC3\tNODE\tPXB\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tNODE\t X \tNODE\tNODE\t"
	"SYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
	"NIC4\tNODE\tNODE\tPXB\tNODE\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tNODE\tNODE\t X \tNODE\t"
	"SYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
	"NIC5\tNODE\tNODE\tNODE\tPXB\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tNODE\tNODE\tNODE\t X \t"
	"SYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
	"NIC6\tSYS\tSYS\tSYS\tSYS\tPXB\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \t"
	"NODE\tNODE\tNODE\tNODE\tNODE\n"
	"NIC7\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tNODE\t"
	" X \tPIX\tNODE\tNODE\tNODE\n"
	"NIC8\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tNODE\t"
	"PIX\t X \tNODE\tNODE\tNODE\n"
	"NIC9\tSYS\tSYS\tSYS\tSYS\tNODE\tPXB\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tNODE\t"
	"NODE\tNODE\t X \tNODE\tNODE\n"
	"NIC10\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tPXB\tNODE\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tNODE\t"
	"NODE\tNODE\tNODE\t X \tNODE\n"
	"NIC11\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tNODE\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tNODE\t"
	"NODE\tNODE\tNODE\tNODE\t X \n"
	"\n"
	NVSMI_LEGEND
	"\n"
	"NIC Legend:\n"
	"\n"
	"  NIC0: mlx5_0\n"
	"  NIC1: mlx5_1\n"
	"  NIC2: mlx5_2\n"
	"  NIC3: mlx5_3\n"
	"  NIC4: mlx5_4\n"
	"  NIC5: mlx5_5\n"
	"  NIC6: mlx5_6\n"
	"  NIC7: mlx5_7\n"
	"  NIC8: mlx5_8\n"
	"  NIC9: mlx5_9\n"
	"  NIC10: mlx5_10\n"
	"  NIC11: mlx5_11\n";

/* A two-socket 8-GPU PCIe server with PCIe switches (the common 4U shape): on
 * socket 0 two switches under one root port (PIX within a switch, PXB across);
 * on socket 1 two switches on separate root ports (PIX, then NODE); SYS across
 * the sockets. Composed from the levels such machines print (e.g. the PIX/PHB/
 * SYS server in kubernetes/kubernetes issue 53497), with affinity lists in the
 * 0-23,48-71 form and one NIC. */
static const char fx_pcie_2s[] =
	"        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    NIC0    "
	"CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
	"GPU0     X      PIX     PXB     PXB     SYS     SYS     SYS     SYS     PXB     "
	"0-23,48-71      0               N/A\n"
	"GPU1    PIX      X      PXB     PXB     SYS     SYS     SYS     SYS     PXB     "
	"0-23,48-71      0               N/A\n"
	"GPU2    PXB     PXB      X      PIX     SYS     SYS     SYS     SYS     PIX     "
	"0-23,48-71      0               N/A\n"
	"GPU3    PXB     PXB     PIX      X      SYS     SYS     SYS     SYS     PIX     "
	"0-23,48-71      0               N/A\n"
	"GPU4    SYS     SYS     SYS     SYS      X      PIX     NODE    NODE    SYS     "
	"24-47,72-95     1               N/A\n"
	"GPU5    SYS     SYS     SYS     SYS     PIX      X      NODE    NODE    SYS     "
	"24-47,72-95     1               N/A\n"
	"GPU6    SYS     SYS     SYS     SYS     NODE    NODE     X      PIX     SYS     "
	"24-47,72-95     1               N/A\n"
	"GPU7    SYS     SYS     SYS     SYS     NODE    NODE    PIX      X      SYS     "
	"24-47,72-95     1               N/A\n"
	"NIC0    PXB     PXB     PIX     PIX     SYS     SYS     SYS     SYS      X \n"
	"\n"
	NVSMI_LEGEND
	"\n"
	"NIC Legend:\n"
	"\n"
	"  NIC0: mlx5_0\n";

/* Four consumer cards (RTX 3090 class) on one socket, NVLink-bridged in pairs
 * whose indices are not adjacent: 0-2 and 1-3 (NV4: a 3090 bridge bonds four
 * links); PHB or NODE otherwise. Composed; the tab layout with "0-31\t0\t\tN/A"
 * is the one in the club-3090 rig reports on GitHub (e.g. issue 1229). */
static const char fx_bridged[] =
	"\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
	"GPU0\t X \tPHB\tNV4\tNODE\t0-31\t0\t\tN/A\n"
	"GPU1\tPHB\t X \tNODE\tNV4\t0-31\t0\t\tN/A\n"
	"GPU2\tNV4\tNODE\t X \tPHB\t0-31\t0\t\tN/A\n"
	"GPU3\tNODE\tNV4\tPHB\t X \t0-31\t0\t\tN/A\n"
	"\n"
	NVSMI_LEGEND;

/* A workstation with two GPUs on socket 0 (NODE) and a lone GPU on socket 1
 * (SYS to both). Composed after the two-socket workstation in club-3090 issue
 * 178, written with spaces. */
static const char fx_lone[] =
	"        GPU0    GPU1    GPU2    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
	"GPU0     X      NODE    SYS     0-7,16-23       0               N/A\n"
	"GPU1    NODE     X      SYS     0-7,16-23       0               N/A\n"
	"GPU2    SYS     SYS      X      8-15,24-31      1               N/A\n"
	"\n"
	NVSMI_LEGEND;


/* Four V100s with NV1/NV2 links, an older driver: one NIC column named mlx5_0,
 * CPU Affinity only, and a NIC row that ends in a tab. Source: an nvidia-smi
 * topo -m capture in a public repository, found by code search. */
static const char fx_cpu_affinity_only[] =
	"\tGPU0\tGPU1\tGPU2\tGPU3\tmlx5_0\tCPU Affinity\n"
	"GPU0\t X \tNV1\tNV1\tNV2\tSYS\t0-15\n"
	"GPU1\tNV1\t X \tNV2\tNV1\tSYS\t0-15\n"
	"GPU2\tNV1\tNV2\t X \tNV2\tSYS\t0-15\n"
	"GPU3\tNV2\tNV1\tNV2\t X \tSYS\t0-15\n"
	"mlx5_0\tSYS\tSYS\tSYS\tSYS\t X \t\n"
	"\n"
	NVSMI_LEGEND;

/* A 2017 driver on an 8-GPU PCIe server: PIX within a switch, PHB across
 * switches, SYS across sockets, one mlx4_0 column, CPU Affinity only, and the
 * long runs of trailing spaces of the original. Source: kubernetes/kubernetes
 * issue 53497 (GPU0-GPU4 rows as printed; GPU5-GPU7 and the NIC row follow). */
static const char fx_old_driver[] =
	"        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    mlx4_0  "
	"CPU Affinity                    \n"
	"GPU0     X      PIX     PHB     PHB     SYS     SYS     SYS     SYS     PHB     "
	"0-9,20-29                       \n"
	"GPU1    PIX      X      PHB     PHB     SYS     SYS     SYS     SYS     PHB     "
	"0-9,20-29                       \n"
	"GPU2    PHB     PHB      X      PIX     SYS     SYS     SYS     SYS     PHB     "
	"0-9,20-29                       \n"
	"GPU3    PHB     PHB     PIX      X      SYS     SYS     SYS     SYS     PHB     "
	"0-9,20-29                       \n"
	"GPU4    SYS     SYS     SYS     SYS      X      PIX     PHB     PHB     SYS     "
	"10-19,30-39                     \n"
	"GPU5    SYS     SYS     SYS     SYS     PIX      X      PHB     PHB     SYS     "
	"10-19,30-39                     \n"
	"GPU6    SYS     SYS     SYS     SYS     PHB     PHB      X      PIX     SYS     "
	"10-19,30-39                     \n"
	"GPU7    SYS     SYS     SYS     SYS     PHB     PHB     PIX      X      SYS     "
	"10-19,30-39                     \n"
	"mlx4_0  PHB     PHB     PHB     PHB     SYS     SYS     SYS     SYS      X      \n";

/* Two GPUs on two sockets where the driver could not tell GPU0's NUMA node:
 * "N/A" in the NUMA Affinity cell. Source: club-3090 issue 178 on GitHub, as
 * printed (tabs, and the extra tab nvidia-smi writes before an N/A). */
static const char fx_numa_na[] =
	"\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
	"GPU0\t X \tSYS\t0-7,16-23\t\tN/A\t\tN/A\n"
	"GPU1\tSYS\t X \t8-15,24-31\t1\t\tN/A\n"
	"\n"
	NVSMI_LEGEND;

/* No affinity columns at all, as drivers print where they cannot see the host
 * (some VMs): nothing but the matrix, and a trailing space after the last X. */
static const char fx_no_affinity[] =
	"        GPU0    GPU1\n"
	"GPU0     X      NV2\n"
	"GPU1    NV2      X \n";

/* An empty CPU Affinity cell in text aligned the way a terminal shows it: the
 * NUMA node is read from the cell under the NUMA Affinity heading. */
static const char fx_empty_cpu_aligned[] =
	"        GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
	"GPU0     X      PHB                     0               N/A\n"
	"GPU1    PHB      X                      1               N/A\n";

/* The same empty cell as tabs, which do not line up under the headings: which
 * cell is which cannot be told, so the NUMA node is unknown. */
static const char fx_empty_cpu_tabs[] =
	"\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
	"GPU0\t X \tPHB\t\t0\t\tN/A\n"
	"GPU1\tPHB\t X \t\t1\t\tN/A\n";

/* Pasted from a Windows terminal: a shell prompt above, CRLF line ends, trailing
 * blanks, and SOC, which drivers before 384 printed for SYS. */
static const char fx_crlf_prompt_soc[] =
	"$ nvidia-smi topo -m\r\n"
	"\r\n"
	"\tGPU0\tGPU1\tGPU2\tCPU Affinity   \r\n"
	"GPU0\t X \tPIX\tSOC\t0-11,24-35   \r\n"
	"GPU1\tPIX\t X \tSOC\t0-11,24-35\t\r\n"
	"GPU2\tSOC\tSOC\t X \t12-23,36-47 \r\n"
	"\r\n"
	"Legend:\r\n"
	"\r\n"
	"  X    = Self\r\n";

/* Every fixture above, with what it must parse to. */
enum fx {
	FX_DGX1_V100,
	FX_DGX_A100,
	FX_DGX_H100,
	FX_PCIE_2S,
	FX_BRIDGED,
	FX_LONE,
	FX_CPU_AFFINITY_ONLY,
	FX_OLD_DRIVER,
	FX_NUMA_NA,
	FX_NO_AFFINITY,
	FX_EMPTY_CPU_ALIGNED,
	FX_EMPTY_CPU_TABS,
	FX_CRLF_PROMPT_SOC,
	FX_COUNT
};

struct link_check {
	uint8_t i, j, level;
};

struct fixture {
	const char *name;
	const char *text;
	unsigned n;
	int8_t numa[8];
	struct link_check links[8];     /* ends at the first { 0, 0, 0 } */
};

static const struct fixture fixtures[FX_COUNT] = {
	[FX_DGX1_V100] = { "DGX-1 V100", fx_dgx1_v100, 8, { 0, 0, 0, 0, 1, 1, 1, 1 },
			   { { 0, 1, L_NV(1) }, { 0, 3, L_NV(2) }, { 0, 4, L_NV(2) },
			     { 0, 5, L_SYS }, { 2, 6, L_NV(1) }, { 3, 7, L_NV(1) },
			     { 5, 6, L_NV(2) }, { 7, 6, L_NV(2) } } },
	[FX_DGX_A100] = { "DGX A100", fx_dgx_a100, 8, { 3, 3, 1, 1, 7, 7, 5, 5 },
			  { { 0, 1, L_NV(12) }, { 0, 7, L_NV(12) }, { 7, 0, L_NV(12) },
			    { 3, 4, L_NV(12) } } },
	[FX_DGX_H100] = { "DGX H100 (tabs)", fx_dgx_h100, 8, { 0, 0, 0, 0, 1, 1, 1, 1 },
			  { { 0, 1, L_NV(18) }, { 0, 7, L_NV(18) }, { 6, 5, L_NV(18) } } },
	[FX_PCIE_2S] = { "2-socket PCIe server", fx_pcie_2s, 8, { 0, 0, 0, 0, 1, 1, 1, 1 },
			 { { 0, 1, L_PIX }, { 0, 2, L_PXB }, { 1, 3, L_PXB }, { 3, 4, L_SYS },
			   { 4, 5, L_PIX }, { 4, 6, L_NODE }, { 6, 7, L_PIX } } },
	[FX_BRIDGED] = { "bridged consumer pairs", fx_bridged, 4, { 0, 0, 0, 0 },
			 { { 0, 2, L_NV(4) }, { 1, 3, L_NV(4) }, { 0, 1, L_PHB },
			   { 2, 3, L_PHB }, { 0, 3, L_NODE }, { 1, 2, L_NODE } } },
	[FX_LONE] = { "lone GPU on socket 1", fx_lone, 3, { 0, 0, 1 },
		      { { 0, 1, L_NODE }, { 0, 2, L_SYS }, { 1, 2, L_SYS } } },
	[FX_CPU_AFFINITY_ONLY] = { "CPU Affinity only", fx_cpu_affinity_only, 4,
				   { -1, -1, -1, -1 },
				   { { 0, 1, L_NV(1) }, { 0, 3, L_NV(2) }, { 1, 2, L_NV(2) },
				     { 2, 3, L_NV(2) } } },
	[FX_OLD_DRIVER] = { "2017 driver, trailing spaces", fx_old_driver, 8,
			    { -1, -1, -1, -1, -1, -1, -1, -1 },
			    { { 0, 1, L_PIX }, { 0, 2, L_PHB }, { 0, 4, L_SYS },
			      { 6, 7, L_PIX }, { 5, 7, L_PHB } } },
	[FX_NUMA_NA] = { "NUMA Affinity N/A", fx_numa_na, 2, { -1, 1 }, { { 0, 1, L_SYS } } },
	[FX_NO_AFFINITY] = { "no affinity columns", fx_no_affinity, 2, { -1, -1 },
			     { { 0, 1, L_NV(2) } } },
	[FX_EMPTY_CPU_ALIGNED] = { "empty CPU cell, aligned", fx_empty_cpu_aligned, 2, { 0, 1 },
				   { { 0, 1, L_PHB } } },
	[FX_EMPTY_CPU_TABS] = { "empty CPU cell, tabs", fx_empty_cpu_tabs, 2, { -1, -1 },
				{ { 0, 1, L_PHB } } },
	[FX_CRLF_PROMPT_SOC] = { "CRLF, prompt, SOC", fx_crlf_prompt_soc, 3, { -1, -1, -1 },
				 { { 0, 1, L_PIX }, { 0, 2, L_SYS }, { 1, 2, L_SYS } } },
};

/* Big enough for a 64-device topology with its memo: never on the stack. */
static struct placement_topo topo_got, topo_want;

/* Each fixture parsed once; placement_choose keeps its memo in here. */
static struct placement_topo fixture_topos[FX_COUNT];

static struct placement_topo *fixture_topo(enum fx f)
{
	static bool parsed[FX_COUNT];
	char err[256];

	if (!parsed[f]) {
		if (placement_topo_parse(fixtures[f].text, strlen(fixtures[f].text),
					 &fixture_topos[f], err, sizeof(err)) != 0)
			fail_msg("fixture \"%s\": %s", fixtures[f].name, err);
		parsed[f] = true;
	}
	return &fixture_topos[f];
}

/* The rules every accepted topology keeps, whatever its source. */
static void assert_well_formed(const struct placement_topo *t)
{
	for (unsigned i = 0; i < PLACEMENT_TOPO_MAX; i++) {
		for (unsigned j = 0; j < PLACEMENT_TOPO_MAX; j++) {
			if (i >= t->n || j >= t->n || i == j)
				assert_int_equal(t->link[i][j], L_X);
			else
				assert_int_not_equal(t->link[i][j], L_X);
			assert_int_equal(t->link[i][j], t->link[j][i]);
		}
		if (i >= t->n)
			assert_int_equal(t->numa[i], -1);
	}
	assert_int_equal(t->refs, 0);
	for (unsigned i = 0; i < PLACEMENT_MEMO_BUCKETS; i++)
		assert_int_equal(t->memo[i], 0);
}

static void test_placement_link_parse_spellings(void **state)
{
	static const struct {
		const char *s;
		size_t len;             /* 0: strlen(s) */
		int ret;
		uint8_t level;
	} cases[] = {
		{ "X", 0, 0, L_X },
		{ "SYS", 0, 0, L_SYS },
		{ "SOC", 0, 0, L_SYS },         /* the name before driver 384 */
		{ "NODE", 0, 0, L_NODE },
		{ "PHB", 0, 0, L_PHB },
		{ "PXB", 0, 0, L_PXB },
		{ "PIX", 0, 0, L_PIX },
		{ "NV1", 0, 0, L_NV(1) },
		{ "NV12", 0, 0, L_NV(12) },
		{ "NV18", 0, 0, L_NV(18) },
		{ "NV38", 0, 0, PLACEMENT_LINK_MAX_NV },
		{ "pix", 0, 0, L_PIX },         /* as a person types it in an annotation */
		{ "nv4", 0, 0, L_NV(4) },
		{ "PIXEL", 3, 0, L_PIX },       /* only <len> bytes are read */
		{ "NV12 ", 4, 0, L_NV(12) },
		{ "", 0, -EINVAL, 0 },
		{ "NV", 0, -EINVAL, 0 },
		{ "NV0", 0, -EINVAL, 0 },
		{ "NV012", 0, -EINVAL, 0 },
		{ "NV39", 0, -EINVAL, 0 },      /* beyond PLACEMENT_LINK_MAX_NV */
		{ "NV100", 0, -EINVAL, 0 },
		{ "NV1x", 0, -EINVAL, 0 },
		{ "NV#", 0, -EINVAL, 0 },
		{ "PIXEL", 0, -EINVAL, 0 },
		{ "SYSTEM", 0, -EINVAL, 0 },
		{ "N/A", 0, -EINVAL, 0 },
		{ "GNS", 0, -EINVAL, 0 },       /* a topo -p2p cell, not a link level */
		{ "NODENODE", 0, -EINVAL, 0 },  /* two cells fused by a bad paste */
		{ " X ", 0, -EINVAL, 0 },       /* cells arrive trimmed */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t level = 0xEE;
		size_t len = cases[i].len ? cases[i].len : strlen(cases[i].s);
		int ret = placement_link_parse(cases[i].s, len, &level);

		if (ret != cases[i].ret || (ret == 0 && level != cases[i].level) ||
		    (ret != 0 && level != 0xEE))
			fail_msg("\"%.*s\": ret %d level %u; want %d level %u", (int)len,
				 cases[i].s, ret, level, cases[i].ret, cases[i].level);
	}
}

/* Every level's name parses back to it; every value that is no level gets a
 * name that does not parse, so a corrupt level never passes for a good one. */
static void test_placement_link_name_round_trips(void **state)
{
	char buf[8];
	uint8_t back;

	(void)state;
	for (unsigned v = 0; v <= 255; v++) {
		bool valid = v <= L_PIX || (v > PLACEMENT_LINK_NV0 && v <= PLACEMENT_LINK_MAX_NV);
		const char *name = placement_link_name((uint8_t)v, buf, sizeof(buf));

		assert_ptr_equal(name, buf);
		assert_true(strlen(name) > 0 && strlen(name) < sizeof(buf));
		if (valid) {
			assert_int_equal(placement_link_parse(name, strlen(name), &back), 0);
			assert_int_equal(back, v);
		} else {
			assert_int_equal(placement_link_parse(name, strlen(name), &back), -EINVAL);
		}
	}
	assert_string_equal(placement_link_name(L_SYS, buf, sizeof(buf)), "SYS");
	assert_string_equal(placement_link_name(L_X, buf, sizeof(buf)), "X");
	assert_string_equal(placement_link_name(L_NV(18), buf, sizeof(buf)), "NV18");
	assert_string_equal(placement_link_name(PLACEMENT_LINK_MAX_NV, buf, sizeof(buf)), "NV38");
	/* A short buffer is cut, never overrun. */
	assert_string_equal(placement_link_name(L_NV(18), buf, 3), "NV");
}

static void test_placement_topo_parse_real_machines(void **state)
{
	(void)state;
	for (unsigned f = 0; f < FX_COUNT; f++) {
		const struct fixture *fx = &fixtures[f];
		char err[256] = "untouched";
		int ret;

		memset(&topo_got, 0xA5, sizeof(topo_got));
		ret = placement_topo_parse(fx->text, strlen(fx->text), &topo_got, err, sizeof(err));
		if (ret != 0)
			fail_msg("fixture \"%s\": %d, %s", fx->name, ret, err);
		assert_string_equal(err, "");
		assert_int_equal(topo_got.n, fx->n);
		assert_true(topo_got.known);
		assert_string_equal(topo_got.source, "annotation");
		assert_int_equal(topo_got.hash, 0);
		assert_well_formed(&topo_got);
		for (unsigned i = 0; i < fx->n; i++)
			if (topo_got.numa[i] != fx->numa[i])
				fail_msg("fixture \"%s\": GPU%u on NUMA %d, want %d", fx->name, i,
					 topo_got.numa[i], fx->numa[i]);
		for (const struct link_check *l = fx->links; l->level; l++)
			if (topo_got.link[l->i][l->j] != l->level)
				fail_msg("fixture \"%s\": GPU%u-GPU%u is %u, want %u", fx->name,
					 l->i, l->j, topo_got.link[l->i][l->j], l->level);
	}
}

/* Rewrite <in> with CRLF line ends and blanks at the ends of lines, or with
 * every tab expanded to spaces as a terminal shows it. */
static char *rewrite(const char *in, bool crlf_and_trailing, bool expand_tabs)
{
	char *out = malloc(strlen(in) * 8 + 1), *o = out;
	size_t col = 0;

	assert_non_null(out);
	for (const char *p = in; *p; p++) {
		if (*p == '\n' && crlf_and_trailing) {
			memcpy(o, " \t \r", 4);
			o += 4;
		}
		if (*p == '\t' && expand_tabs) {
			do
				*o++ = ' ';
			while (++col % 8);
			continue;
		}
		*o++ = *p;
		col = *p == '\n' ? 0 : col + 1;
	}
	*o = '\0';
	return out;
}

static void test_placement_topo_parse_ignores_line_ends_blanks_and_tabs(void **state)
{
	char err[256];

	(void)state;
	for (unsigned f = 0; f < FX_COUNT; f++) {
		const struct placement_topo *want = fixture_topo(f);

		for (int v = 0; v < 2; v++) {
			char *text = rewrite(fixtures[f].text, v == 0, v == 1);
			int ret = placement_topo_parse(text, strlen(text), &topo_got, err,
						       sizeof(err));

			if (ret != 0)
				fail_msg("fixture \"%s\" %s: %s", fixtures[f].name,
					 v ? "tabs expanded" : "CRLF", err);
			assert_int_equal(topo_got.n, want->n);
			assert_memory_equal(topo_got.numa, want->numa, sizeof(want->numa));
			assert_memory_equal(topo_got.link, want->link, sizeof(want->link));
			free(text);
		}
	}
}

struct bad_text {
	const char *what;
	const char *text;
	const char *message;            /* a part of the error message */
};

#define TWO_GPU_HEADER "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"

static const struct bad_text bad_texts[] = {
	{ "empty", "", "no header" },
	{ "blank lines only", "\n  \n\t\r\n", "no header" },
	{ "garbage", "\x01\x7f garbage \xff\xfe\n", "no header" },
	{ "JSON, not nvidia-smi", "{\"gpus\": 8, \"links\": \"NV12\"}", "no header" },
	{ "no GPU columns", "\tCPU Affinity\tNUMA Affinity\nLegend:\n", "no header" },
	{ "rows without a header", "GPU0\t X \tNV1\nGPU1\tNV1\t X \n", "GPU row where" },
	{ "header only", TWO_GPU_HEADER, "0 of 2 GPU rows" },
	{ "header, then the legend", TWO_GPU_HEADER "\n" NVSMI_LEGEND, "0 of 2 GPU rows" },
	{ "asymmetric", TWO_GPU_HEADER "GPU0\t X \tNV2\t0-7\t0\t\tN/A\n"
			"GPU1\tNV1\t X \t0-7\t0\t\tN/A\n", "GPU0-GPU1 is NV2 one way and NV1" },
	{ "asymmetric far apart", "\tGPU0\tGPU1\tGPU2\n"
				  "GPU0\t X \tPIX\tSYS\nGPU1\tPIX\t X \tSYS\n"
				  "GPU2\tNODE\tSYS\t X \n", "GPU0-GPU2 is SYS one way and NODE" },
	{ "no X on the diagonal", TWO_GPU_HEADER "GPU0\tNV1\tNV1\t0-7\t0\t\tN/A\n"
				  "GPU1\tNV1\t X \t0-7\t0\t\tN/A\n", "its own cell is \"NV1\"" },
	{ "X off the diagonal", "\tGPU0\tGPU1\nGPU0\t X \t X \nGPU1\t X \t X \n",
	  "X off the diagonal" },
	{ "unknown level", "\tGPU0\tGPU1\nGPU0\t X \tNV\nGPU1\tNV\t X \n",
	  "unknown link level \"NV\"" },
	{ "control characters quoted", "\tGPU0\tGPU1\nGPU0\t X \tNV\x1b[2J\n", "\"NV?[2J\"" },
	{ "level past NV38", "\tGPU0\tGPU1\nGPU0\t X \tNV40\nGPU1\tNV40\t X \n", "\"NV40\"" },
	{ "topo -p2p matrix", " \tGPU0\tGPU1\t\n GPU0\tX\tGNS\t\n GPU1\tGNS\tX\t\n", "\"GNS\"" },
	{ "fused NIC cells", "\tGPU0\tGPU1\tNIC0\tNIC1\n"
			     "GPU0\t X \tNV18\tPXB\tNODE\nGPU1\tNV18\t X \tNODENODE\n",
	  "\"NODENODE\"" },
	{ "row one cell short", "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tPIX\tSYS\nGPU1\tPIX\t X \n"
				"GPU2\tSYS\tSYS\t X \n", "row GPU1 has 2 cells" },
	{ "row one cell short before affinity", TWO_GPU_HEADER "GPU0\t X \tNV4\t0-7\t0\t\tN/A\n"
						 "GPU1\tNV4\t0-7\t0\t\tN/A\n",
	  "unknown link level \"0-7\"" },
	{ "row one cell long", "\tGPU0\tGPU1\nGPU0\t X \tPIX\tPIX\nGPU1\tPIX\t X \n",
	  "more cells than the header" },
	{ "rows out of order", "\tGPU0\tGPU1\nGPU1\tPIX\t X \nGPU0\t X \tPIX\n",
	  "expected row GPU0, found \"GPU1\"" },
	{ "a row missing", "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tPIX\tSYS\n"
			   "GPU2\tSYS\tSYS\t X \n", "expected row GPU1" },
	{ "more rows than columns", "\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n"
				    "GPU2\tPIX\tPIX\t X \n", "row GPU2, but the header has 2" },
	{ "legend before the last row", "\tGPU0\tGPU1\nGPU0\t X \tPIX\n\n" NVSMI_LEGEND,
	  "1 of 2 GPU rows" },
	{ "duplicate header column", "\tGPU0\tGPU0\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n",
	  "header column GPU0" },
	{ "header columns out of order", "\tGPU0\tGPU2\tGPU1\n",
	  "header column GPU2 where the next GPU" },
	{ "GPU column after a NIC column", "\tGPU0\tNIC0\tGPU1\n",
	  "header column GPU1 where no more GPU columns" },
	{ "affinity heading twice", "\tGPU0\tCPU Affinity\tCPU Affinity\nGPU0\t X \t0\t0\n",
	  "affinity column twice" },
	{ "unknown column after the affinity", "\tGPU0\tCPU Affinity\tFan\nGPU0\t X \t0\t0\n",
	  "unexpected header column \"Fan\"" },
	{ "GPU with a leading zero", "\tGPU0\tGPU01\n", "unexpected header column \"GPU01\"" },
};

static void test_placement_topo_parse_rejects_malformed_text(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad_texts) / sizeof(bad_texts[0]); i++) {
		const struct bad_text *b = &bad_texts[i];
		char err[256] = "";
		int ret;

		memset(&topo_got, 0x5A, sizeof(topo_got));
		memcpy(&topo_want, &topo_got, sizeof(topo_got));
		ret = placement_topo_parse(b->text, strlen(b->text), &topo_got, err, sizeof(err));
		if (ret != -EINVAL || !strstr(err, b->message))
			fail_msg("case \"%s\": ret %d, message \"%s\"; want -EINVAL and \"%s\"",
				 b->what, ret, err, b->message);
		if (memcmp(&topo_got, &topo_want, sizeof(topo_got)) != 0)
			fail_msg("case \"%s\": <out> written on failure", b->what);
	}
	/* A NULL text, and no room for a message, are refused just the same. */
	assert_int_equal(placement_topo_parse(NULL, 0, &topo_got, NULL, 0), -EINVAL);
	assert_int_equal(placement_topo_parse("x", 1, &topo_got, NULL, 0), -EINVAL);
	assert_memory_equal(&topo_got, &topo_want, sizeof(topo_got));
}

/* A text cut anywhere (an annotation truncated, a paste that stopped short) is
 * refused or, once every GPU row is whole, gives the full matrix: never a part
 * of one, and <out> is untouched whenever it is refused. */
static void test_placement_topo_parse_cut_text_never_gives_a_partial_matrix(void **state)
{
	static const enum fx cut[] = { FX_DGX1_V100, FX_DGX_H100, FX_BRIDGED, FX_CRLF_PROMPT_SOC };
	char err[256];

	(void)state;
	for (size_t c = 0; c < sizeof(cut) / sizeof(cut[0]); c++) {
		const struct placement_topo *full = fixture_topo(cut[c]);
		const char *text = fixtures[cut[c]].text;
		size_t len = strlen(text), accepted = 0;

		for (size_t l = 0; l < len; l++) {
			/* A copy of the prefix only, so nothing can be read past it. */
			char *prefix = malloc(l ? l : 1);
			int ret;

			assert_non_null(prefix);
			memcpy(prefix, text, l);
			memset(&topo_got, 0x5A, sizeof(topo_got));
			ret = placement_topo_parse(prefix, l, &topo_got, err, sizeof(err));
			free(prefix);
			if (ret == 0) {
				accepted++;
				assert_int_equal(topo_got.n, full->n);
				assert_memory_equal(topo_got.link, full->link, sizeof(full->link));
				continue;
			}
			assert_int_equal(ret, -EINVAL);
			assert_int_equal(topo_got.n, 0x5A);
			assert_int_equal(topo_got.link[0][1], 0x5A);
		}
		/* Cut before its last GPU row ends, no fixture parses. */
		assert_true(accepted > 0 && accepted < len);
	}
}

/* The text of an n-GPU node whose every pair is NV1 (tabs, no affinity). */
static char *square_text(unsigned n)
{
	size_t cap = (size_t)(n + 2) * (n + 1) * 8, used = 0;
	char *s = malloc(cap);

	assert_non_null(s);
	for (unsigned i = 0; i < n; i++)
		used += (size_t)snprintf(s + used, cap - used, "\tGPU%u", i);
	used += (size_t)snprintf(s + used, cap - used, "\n");
	for (unsigned i = 0; i < n; i++) {
		used += (size_t)snprintf(s + used, cap - used, "GPU%u", i);
		for (unsigned j = 0; j < n; j++)
			used += (size_t)snprintf(s + used, cap - used, "\t%s",
						 i == j ? " X " : "NV1");
		used += (size_t)snprintf(s + used, cap - used, "\n");
	}
	return s;
}

static void test_placement_topo_parse_takes_1_to_64_gpus(void **state)
{
	static const unsigned sizes[] = { 1, 2, 17, 63, 64, 65, 80 };
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *text = square_text(sizes[i]);
		int ret;

		memset(&topo_got, 0x5A, sizeof(topo_got));
		ret = placement_topo_parse(text, strlen(text), &topo_got, err, sizeof(err));
		free(text);
		if (sizes[i] <= PLACEMENT_TOPO_MAX) {
			if (ret != 0)
				fail_msg("%u GPUs: %s", sizes[i], err);
			assert_int_equal(topo_got.n, sizes[i]);
			assert_well_formed(&topo_got);
			assert_int_equal(topo_got.link[sizes[i] - 1][0],
					 sizes[i] > 1 ? L_NV(1) : L_X);
		} else {
			assert_int_equal(ret, -EINVAL);
			assert_non_null(strstr(err, "more than 64 GPUs"));
			assert_int_equal(topo_got.n, 0x5A);
		}
	}
}

static void test_placement_topo_unknown_is_all_equal(void **state)
{
	(void)state;
	memset(&topo_got, 0x5A, sizeof(topo_got));
	placement_topo_unknown(8, &topo_got);
	assert_int_equal(topo_got.n, 8);
	assert_false(topo_got.known);
	assert_string_equal(topo_got.source, "unknown");
	for (unsigned i = 0; i < PLACEMENT_TOPO_MAX; i++) {
		assert_int_equal(topo_got.numa[i], -1);
		for (unsigned j = 0; j < PLACEMENT_TOPO_MAX; j++)
			assert_int_equal(topo_got.link[i][j], L_X);
	}
	assert_int_equal(topo_got.refs, 0);
	assert_int_equal(topo_got.hash, 0);
}

/* ---- Topology: built-in profiles ---------------------------------------------- */

struct profile_case {
	const char *product;            /* nvidia.com/gpu.product */
	unsigned count;                 /* nvidia.com/gpu.count */
	const char *source;             /* NULL: no profile (-ENOENT) */
	struct link_check link;         /* one pair's level */
	int8_t numa0, numa_last;
};

static const struct profile_case profile_cases[] = {
	{ "NVIDIA-A100-SXM4-80GB", 8, "profile hgx-a100-8", { 0, 7, L_NV(12) }, 0, 1 },
	{ "A100-SXM4-40GB", 8, "profile hgx-a100-8", { 3, 4, L_NV(12) }, 0, 1 },
	{ "nvidia-a100-sxm4-80gb", 8, "profile hgx-a100-8", { 1, 2, L_NV(12) }, 0, 1 },
	{ "NVIDIA A100-SXM4-80GB", 8, "profile hgx-a100-8", { 1, 2, L_NV(12) }, 0, 1 },
	{ "NVIDIA-A100-SXM4-80GB", 4, "profile hgx-a100-4", { 0, 3, L_NV(4) }, -1, -1 },
	{ "NVIDIA-H100-80GB-HBM3", 8, "profile hgx-h100-8", { 0, 7, L_NV(18) }, 0, 1 },
	{ "NVIDIA-H100-SXM5-80GB", 8, "profile hgx-h100-8", { 2, 5, L_NV(18) }, 0, 1 },
	{ "NVIDIA-H200", 8, "profile hgx-h100-8", { 0, 1, L_NV(18) }, 0, 1 },
	{ "NVIDIA-H200-141GB-HBM3e", 8, "profile hgx-h100-8", { 0, 1, L_NV(18) }, 0, 1 },
	{ "NVIDIA-H100-80GB-HBM3", 4, "profile hgx-h100-4", { 1, 3, L_NV(6) }, -1, -1 },
	{ "Tesla-V100-SXM2-32GB", 8, "profile dgx1-v100", { 0, 3, L_NV(2) }, 0, 1 },
	{ "Tesla-V100-SXM2-16GB", 8, "profile dgx1-v100", { 0, 1, L_NV(1) }, 0, 1 },
	{ "Tesla-V100-SXM2-16GB", 8, "profile dgx1-v100", { 0, 5, L_SYS }, 0, 1 },
	{ "Tesla-V100-SXM2-16GB", 8, "profile dgx1-v100", { 2, 6, L_NV(1) }, 0, 1 },
	/* The count must be the profile's. */
	{ "NVIDIA-A100-SXM4-80GB", 2, NULL, { 0 }, 0, 0 },
	{ "NVIDIA-A100-SXM4-80GB", 16, NULL, { 0 }, 0, 0 },
	{ "NVIDIA-H100-80GB-HBM3", 0, NULL, { 0 }, 0, 0 },
	{ "Tesla-V100-SXM2-16GB", 4, NULL, { 0 }, 0, 0 },
	/* Cards whose links depend on slots and bridges, and MIG slices. */
	{ "NVIDIA-A100-PCIE-40GB", 8, NULL, { 0 }, 0, 0 },
	{ "NVIDIA-H100-PCIe", 8, NULL, { 0 }, 0, 0 },
	{ "NVIDIA-H100-NVL", 8, NULL, { 0 }, 0, 0 },
	{ "NVIDIA-H200-NVL", 4, NULL, { 0 }, 0, 0 },
	{ "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", 8, NULL, { 0 }, 0, 0 },
	{ "Tesla-V100-PCIE-32GB", 8, NULL, { 0 }, 0, 0 },
	{ "Tesla-V100-SXM3-32GB", 16, NULL, { 0 }, 0, 0 },   /* DGX-2: not a profile */
	{ "NVIDIA-GH200-480GB", 8, NULL, { 0 }, 0, 0 },      /* "H200" inside a word */
	{ "NVIDIA-GeForce-RTX-3090", 4, NULL, { 0 }, 0, 0 },
	{ "", 8, NULL, { 0 }, 0, 0 },
	{ NULL, 8, NULL, { 0 }, 0, 0 },
};

static void test_placement_topo_profile_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(profile_cases) / sizeof(profile_cases[0]); i++) {
		const struct profile_case *c = &profile_cases[i];
		int ret;

		memset(&topo_got, 0x5A, sizeof(topo_got));
		memcpy(&topo_want, &topo_got, sizeof(topo_got));
		ret = placement_topo_profile(c->product, c->count, &topo_got);
		if (!c->source) {
			if (ret != -ENOENT || memcmp(&topo_got, &topo_want, sizeof(topo_got)))
				fail_msg("\"%s\" x%u: ret %d or <out> written; want -ENOENT",
					 c->product ? c->product : "(null)", c->count, ret);
			continue;
		}
		if (ret != 0 || strcmp(topo_got.source, c->source) != 0)
			fail_msg("\"%s\" x%u: ret %d source \"%s\"; want \"%s\"", c->product,
				 c->count, ret, ret == 0 ? topo_got.source : "", c->source);
		assert_int_equal(topo_got.n, c->count);
		assert_true(topo_got.known);
		assert_well_formed(&topo_got);
		assert_int_equal(topo_got.link[c->link.i][c->link.j], c->link.level);
		assert_int_equal(topo_got.numa[0], c->numa0);
		assert_int_equal(topo_got.numa[c->count - 1], c->numa_last);
	}
}

/* A profile is the matrix its source machines print: the DGX-1 profile cell for
 * cell with the Cori fixture, the H100 one with the DGX H100 fixture, the A100
 * one link for link with the DGX A100 fixture (whose NUMA ids are NPS4's). */
static void test_placement_topo_profile_matches_real_machines(void **state)
{
	static const struct {
		const char *product;
		enum fx fx;
		bool same_numa;
	} pairs[] = {
		{ "Tesla-V100-SXM2-32GB", FX_DGX1_V100, true },
		{ "NVIDIA-H100-80GB-HBM3", FX_DGX_H100, true },
		{ "NVIDIA-A100-SXM4-40GB", FX_DGX_A100, false },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		const struct placement_topo *real = fixture_topo(pairs[i].fx);

		assert_int_equal(placement_topo_profile(pairs[i].product, 8, &topo_got), 0);
		assert_int_equal(topo_got.n, real->n);
		assert_memory_equal(topo_got.link, real->link, sizeof(real->link));
		if (pairs[i].same_numa)
			assert_memory_equal(topo_got.numa, real->numa, sizeof(real->numa));
	}
}

/* ---- Topology: the best sets on real machines ---------------------------------- */

struct best_case {
	enum fx fx;
	uint64_t free_mask;
	unsigned k;
	int ret;
	uint64_t set;
};

/* Derived by hand from the chooser's order: (1) the worst pair link, higher
 * first; (2) the summed pair weights (SYS 1, NODE 2, PHB 3, PXB 4, PIX 6, NV<n>
 * 10 + 5n); (3) fewer NUMA nodes; (4) more weight left among the free devices
 * not taken; (5) the set holding the lowest index where two sets differ. */
static const struct best_case best_cases[] = {
	/* DGX-1: every GPU has the same links (2x NV1, 2x NV2, 3x SYS), so one GPU
	 * ties on everything: GPU0. */
	{ FX_DGX1_V100, 0xFF, 1, 0, 0x01 },
	/* GPUs 0-4 free: GPU4's links to the others are NV2 + 3x SYS, the least
	 * that any one of them takes away; 0-3 stay a whole NVLinked quad. */
	{ FX_DGX1_V100, 0x1F, 1, 0, 0x10 },
	/* NV2 pairs are best: 0-3, 1-2, 2-3, 4-7, 5-6, 6-7 on one socket (0-4 and
	 * 1-5 span two); they leave the same weight free; 0-3 has GPU0. */
	{ FX_DGX1_V100, 0xFF, 2, 0, 0x09 },
	/* GPU1 busy: of the one-socket NV2 pairs, 2-3 takes the least weight from
	 * the rest (links touched 53 + 58 - 20 against 58 + 58 - 20 for 0-3). */
	{ FX_DGX1_V100, 0xFD, 2, 0, 0x0C },
	/* Only 4-7 free: 4-7 and 5-6 each leave an NV2 pair, 6-7 leaves NV1 (4-5). */
	{ FX_DGX1_V100, 0xF0, 2, 0, 0x90 },
	/* Four all NVLinked exist only as the quads 0-3 and 4-7 (worst NV1, 3x NV1
	 * + 3x NV2 each); both leave the other quad: 0-3. */
	{ FX_DGX1_V100, 0xFF, 4, 0, 0x0F },
	/* GPUs 0 and 4 busy: no quad, every four has a SYS pair. Most weight: 77
	 * for {1,2,3,5}, {1,5,6,7}, {1,2,5,6}; the first two leave an NV2 pair
	 * (6-7, 2-3), the third NV1 (3-7); then the lower index: {1,2,3,5}. */
	{ FX_DGX1_V100, 0xEE, 4, 0, 0x2E },
	{ FX_DGX1_V100, 0xFF, 8, 0, 0xFF },
	/* DGX A100: NV12 everywhere, so NUMA decides (3,3 | 1,1 | 7,7 | 5,5). */
	{ FX_DGX_A100, 0xFF, 1, 0, 0x01 },
	{ FX_DGX_A100, 0xFF, 2, 0, 0x03 },
	/* Free 1, 2, 4-7: 1-2 is lowest but spans NUMA 3 and 1; 4-5 is one node. */
	{ FX_DGX_A100, 0xF6, 2, 0, 0x30 },
	{ FX_DGX_A100, 0xFF, 4, 0, 0x0F },
	/* GPU0 busy: two whole NUMA pairs, 2-3 and 4-5, beat any four with GPU1. */
	{ FX_DGX_A100, 0xFE, 4, 0, 0x3C },
	{ FX_DGX_A100, 0xFF, 8, 0, 0xFF },
	/* DGX H100: NV18 everywhere; sockets 0-3 and 4-7. */
	{ FX_DGX_H100, 0xFF, 1, 0, 0x01 },
	{ FX_DGX_H100, 0xFF, 2, 0, 0x03 },
	{ FX_DGX_H100, 0xFF, 4, 0, 0x0F },
	/* GPU3 busy: 4-7 is the only four on one socket. */
	{ FX_DGX_H100, 0xF7, 4, 0, 0xF0 },
	/* GPUs 0 and 4 busy: every four spans both sockets; lowest: 1, 2, 3, 5. */
	{ FX_DGX_H100, 0xEE, 4, 0, 0x2E },
	{ FX_DGX_H100, 0xFF, 8, 0, 0xFF },
	/* PCIe server: socket 0's GPUs carry PIX + 2x PXB (weight 18 with the SYS
	 * pairs), socket 1's PIX + 2x NODE (14): one GPU comes from socket 1. */
	{ FX_PCIE_2S, 0xFF, 1, 0, 0x10 },
	/* PIX pairs 0-1, 2-3, 4-5, 6-7; socket 1's take less from the rest: 4-5. */
	{ FX_PCIE_2S, 0xFF, 2, 0, 0x30 },
	/* GPUs 0-1 busy: 2-3 takes 20 - 6 from the rest, 4-5 takes 24 - 6. */
	{ FX_PCIE_2S, 0xFC, 2, 0, 0x0C },
	/* Four: 0-3 (worst PXB) beats 4-7 (worst NODE) and any mix (SYS). */
	{ FX_PCIE_2S, 0xFF, 4, 0, 0x0F },
	/* GPU0 busy: 4-7 (NODE) beats any four across the sockets (SYS). */
	{ FX_PCIE_2S, 0xFE, 4, 0, 0xF0 },
	{ FX_PCIE_2S, 0xFF, 8, 0, 0xFF },
	/* Bridged pairs 0-2 and 1-3: the pairs are NVLinked, the indices are not
	 * adjacent. Each GPU has NV4 + PHB + NODE: one GPU ties, GPU0. */
	{ FX_BRIDGED, 0x0F, 1, 0, 0x01 },
	{ FX_BRIDGED, 0x0F, 2, 0, 0x05 },
	{ FX_BRIDGED, 0x0E, 2, 0, 0x0A },
	{ FX_BRIDGED, 0x07, 2, 0, 0x05 },
	{ FX_BRIDGED, 0x0F, 4, 0, 0x0F },
	{ FX_BRIDGED, 0x0F, 8, -ENOSPC, 0 },
	/* Lone GPU2 on socket 1: a one-GPU pod takes it and keeps the NODE pair. */
	{ FX_LONE, 0x07, 1, 0, 0x04 },
	{ FX_LONE, 0x07, 2, 0, 0x03 },
	{ FX_LONE, 0x05, 2, 0, 0x05 },
	{ FX_LONE, 0x07, 4, -ENOSPC, 0 },
	{ FX_LONE, 0x07, 8, -ENOSPC, 0 },
};

static void test_placement_choose_best_sets_on_real_machines(void **state)
{
	const struct placement_policy preferred = { PLACEMENT_POLICY_PREFERRED, 0 };

	(void)state;
	for (int pass = 0; pass < 2; pass++) {
		/* The second pass answers from the memo the first one filled. */
		for (size_t i = 0; i < sizeof(best_cases) / sizeof(best_cases[0]); i++) {
			const struct best_case *c = &best_cases[i];
			struct placement_topo *t = fixture_topo(c->fx);
			struct placement_choice got, exact;
			int ret, ret_exact;

			memset(&got, 0, sizeof(got));
			ret = placement_choose(t, c->free_mask, c->k, &preferred, &got);
			if (ret != c->ret || (ret == 0 && got.set != c->set))
				fail_msg("%s, free %#llx, k %u (pass %d): ret %d set %#llx; "
					 "want %d %#llx", fixtures[c->fx].name,
					 (unsigned long long)c->free_mask, c->k, pass, ret,
					 (unsigned long long)got.set, c->ret,
					 (unsigned long long)c->set);
			ret_exact = placement_choose_exact(t, c->free_mask, c->k, &preferred,
							   &exact);
			assert_int_equal(ret_exact, ret);
			if (ret == 0)
				assert_int_equal(exact.set, got.set);
		}
	}
}

/* An unknown topology: every pair equal, so the lowest free indices. */
static void test_placement_choose_unknown_topology_takes_lowest(void **state)
{
	const struct placement_policy preferred = { PLACEMENT_POLICY_PREFERRED, 0 };
	struct placement_choice got;

	(void)state;
	placement_topo_unknown(8, &topo_got);
	assert_int_equal(placement_choose(&topo_got, 0xFF, 4, &preferred, &got), 0);
	assert_int_equal(got.set, 0x0F);
	assert_int_equal(placement_choose(&topo_got, 0xAA, 2, &preferred, &got), 0);
	assert_int_equal(got.set, 0x0A);
}

/* ---- Property tests: the chooser against brute force ---------------------- */

/* A random topology of n devices: symmetric levels from SYS up to NV4, two
 * NUMA nodes. Deterministic for a seed. */
static void random_topo(struct placement_topo *t, unsigned n, unsigned *seed)
{
	static const uint8_t levels[] = {
		PLACEMENT_LINK_SYS, PLACEMENT_LINK_NODE, PLACEMENT_LINK_PHB, PLACEMENT_LINK_PXB,
		PLACEMENT_LINK_PIX, PLACEMENT_LINK_NV0 + 1, PLACEMENT_LINK_NV0 + 2,
		PLACEMENT_LINK_NV0 + 4,
	};

	memset(t, 0, sizeof(*t));
	t->n = (uint8_t)n;
	t->known = true;
	for (unsigned i = 0; i < n; i++)
		t->numa[i] = (int8_t)(rand_r(seed) % 2);
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = i + 1; j < n; j++)
			t->link[i][j] = t->link[j][i] = levels[rand_r(seed) % sizeof(levels)];
}

/* The documented order, written again independently of choose.c: > 0 when the
 * set a is better than b. */
static int prop_better(const struct placement_topo *t, uint64_t a, uint64_t b, uint64_t free_mask)
{
	struct placement_choice x, y;
	uint64_t d;

	placement_measure(t, a, free_mask, &x);
	placement_measure(t, b, free_mask, &y);
	if (x.worst != y.worst)
		return x.worst > y.worst ? 1 : -1;
	if (x.bandwidth != y.bandwidth)
		return x.bandwidth > y.bandwidth ? 1 : -1;
	if (x.numa_nodes != y.numa_nodes)
		return x.numa_nodes < y.numa_nodes ? 1 : -1;
	if (x.leftover != y.leftover)
		return x.leftover > y.leftover ? 1 : -1;
	d = a ^ b;
	return d ? ((a & d & -d) ? 1 : -1) : 0;
}

static bool prop_allowed(const struct placement_topo *t, uint64_t set,
			 const struct placement_policy *p)
{
	uint8_t worst = 0xff;

	if (__builtin_popcountll(set) < 2 || p->kind == PLACEMENT_POLICY_PREFERRED ||
	    p->kind == PLACEMENT_POLICY_NONE)
		return true;
	for (unsigned i = 0; i < t->n; i++)
		for (unsigned j = i + 1; j < t->n; j++)
			if ((set >> i & 1) && (set >> j & 1) && t->link[i][j] < worst)
				worst = t->link[i][j];
	return p->kind == PLACEMENT_POLICY_REQUIRED ? worst > PLACEMENT_LINK_NV0
						    : worst >= p->min_level;
}

/* Every k-subset of free_mask by brute force: the best allowed one, or 0. */
static uint64_t prop_best(const struct placement_topo *t, uint64_t free_mask, unsigned k,
			  const struct placement_policy *p)
{
	uint64_t best = 0;

	for (uint64_t s = 1; s < (1ULL << t->n); s++) {
		if ((s & ~free_mask) || (unsigned)__builtin_popcountll(s) != k ||
		    !prop_allowed(t, s, p))
			continue;
		if (!best || prop_better(t, s, best, free_mask) > 0)
			best = s;
	}
	return best;
}

static void test_placement_choose_matches_brute_force(void **state)
{
	static const struct placement_policy policies[] = {
		{ PLACEMENT_POLICY_PREFERRED, 0 },
		{ PLACEMENT_POLICY_REQUIRED, 0 },
		{ PLACEMENT_POLICY_REQUIRED_LEVEL, PLACEMENT_LINK_PIX },
		{ PLACEMENT_POLICY_REQUIRED_LEVEL, PLACEMENT_LINK_NV0 + 2 },
	};
	unsigned seed = 20261129, checked = 0, refused = 0;
	struct placement_topo *t = malloc(sizeof(*t));

	(void)state;
	assert_non_null(t);
	for (unsigned round = 0; round < 300; round++) {
		unsigned n = 2 + (unsigned)rand_r(&seed) % 9;   /* 2..10 devices */
		uint64_t all = (1ULL << n) - 1;

		random_topo(t, n, &seed);
		for (unsigned q = 0; q < 12; q++) {
			uint64_t free_mask = (uint64_t)rand_r(&seed) & all;
			unsigned nfree = (unsigned)__builtin_popcountll(free_mask);
			const struct placement_policy *p = &policies[rand_r(&seed) % 4];
			unsigned k = nfree ? 1 + (unsigned)rand_r(&seed) % nfree : 1;
			uint64_t want = prop_best(t, free_mask, k, p);
			struct placement_choice c;
			int ret = placement_choose(t, free_mask, k, p, &c);

			if (!want) {
				if (ret != -ENOSPC)
					fail_msg("round %u: n=%u free=%#llx k=%u policy=%d: chose %#llx, "
						 "but no allowed set exists", round, n,
						 (unsigned long long)free_mask, k, p->kind,
						 (unsigned long long)c.set);
				refused++;
				continue;
			}
			if (ret != 0 || c.set != want)
				fail_msg("round %u: n=%u free=%#llx k=%u policy=%d: got %d/%#llx, "
					 "brute force %#llx", round, n, (unsigned long long)free_mask, k,
					 p->kind, ret, (unsigned long long)c.set,
					 (unsigned long long)want);
			/* Always free, always k, and the policy holds. */
			assert_true((c.set & ~free_mask) == 0);
			assert_int_equal(__builtin_popcountll(c.set), k);
			assert_true(prop_allowed(t, c.set, p));
			checked++;
		}
	}
	/* The run must have exercised both outcomes. */
	assert_true(checked > 1000);
	assert_true(refused > 50);
	free(t);
}

/* The memoised answers equal the direct search, also on repeated (memo hit)
 * queries. */
static void test_placement_choose_memo_agrees_with_direct(void **state)
{
	struct placement_topo *t = malloc(sizeof(*t));
	struct placement_policy pref = { PLACEMENT_POLICY_PREFERRED, 0 };
	unsigned seed = 7;

	(void)state;
	assert_non_null(t);
	random_topo(t, 12, &seed);
	for (unsigned pass = 0; pass < 3; pass++) {
		unsigned s2 = 99;

		for (unsigned q = 0; q < 3000; q++) {
			uint64_t free_mask = (uint64_t)rand_r(&s2) & 0xfff;
			unsigned nfree = (unsigned)__builtin_popcountll(free_mask);
			unsigned k = nfree ? 1 + (unsigned)rand_r(&s2) % nfree : 1;
			struct placement_choice a, b;
			int ra = placement_choose(t, free_mask, k, &pref, &a);
			int rb = placement_choose_exact(t, free_mask, k, &pref, &b);

			assert_int_equal(ra, rb);
			if (ra == 0) {
				assert_true(a.set == b.set);
				assert_int_equal(a.worst, b.worst);
				assert_int_equal(a.leftover, b.leftover);
			}
		}
	}
	free(t);
}

struct memo_race {
	struct placement_topo *t;
	unsigned seed;
	unsigned mismatches;
};

static void *memo_race_main(void *arg)
{
	struct memo_race *m = arg;
	struct placement_policy pref = { PLACEMENT_POLICY_PREFERRED, 0 };

	for (unsigned q = 0; q < 4000; q++) {
		uint64_t free_mask = (uint64_t)rand_r(&m->seed) & 0xff;
		unsigned nfree = (unsigned)__builtin_popcountll(free_mask);
		unsigned k = nfree ? 1 + (unsigned)rand_r(&m->seed) % nfree : 1;
		struct placement_choice a, b;
		int ra = placement_choose(m->t, free_mask, k, &pref, &a);
		int rb = placement_choose_exact(m->t, free_mask, k, &pref, &b);

		if (ra != rb || (ra == 0 && a.set != b.set))
			m->mismatches++;
	}
	return NULL;
}

/* Threads sharing one class's memo never read a wrong answer. */
static void test_placement_choose_memo_is_safe_across_threads(void **state)
{
	struct placement_topo *t = malloc(sizeof(*t));
	struct memo_race r[4];
	pthread_t th[4];
	unsigned seed = 3;

	(void)state;
	assert_non_null(t);
	random_topo(t, 8, &seed);
	for (int i = 0; i < 4; i++) {
		r[i] = (struct memo_race){ t, 1000u + (unsigned)i, 0 };
		pthread_create(&th[i], NULL, memo_race_main, &r[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(r[i].mismatches, 0);
	}
	free(t);
}

/* The largest all-NVLink island equals a brute-force maximum clique. */
static void test_placement_largest_island_matches_brute_force(void **state)
{
	struct placement_topo *t = malloc(sizeof(*t));
	unsigned seed = 4242, nonzero = 0;

	(void)state;
	assert_non_null(t);
	for (unsigned round = 0; round < 200; round++) {
		unsigned n = 1 + (unsigned)rand_r(&seed) % 10;
		uint64_t all = (1ULL << n) - 1;

		random_topo(t, n, &seed);
		for (unsigned q = 0; q < 10; q++) {
			uint64_t mask = (uint64_t)rand_r(&seed) & all;
			unsigned want = 0;

			for (uint64_t sub = mask;; sub = (sub - 1) & mask) {
				bool clique = true;

				for (unsigned i = 0; i < n && clique; i++)
					for (unsigned j = i + 1; j < n && clique; j++)
						if ((sub >> i & 1) && (sub >> j & 1) &&
						    !placement_link_is_nvlink(t->link[i][j]))
							clique = false;
				if (clique && (unsigned)__builtin_popcountll(sub) > want)
					want = (unsigned)__builtin_popcountll(sub);
				if (!sub)
					break;
			}
			/* Twice: the second answer comes from the class's memo (n <= 8). */
			for (int again = 0; again < 2; again++)
				if (placement_largest_island(t, mask) != want)
					fail_msg("n=%u mask=%#llx (call %d): island %u, brute force %u",
						 n, (unsigned long long)mask, again + 1,
						 placement_largest_island(t, mask), want);
			nonzero += want > 1;
		}
	}
	assert_true(nonzero > 100);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_largest_island_matches_brute_force),
		cmocka_unit_test(test_placement_choose_matches_brute_force),
		cmocka_unit_test(test_placement_choose_memo_agrees_with_direct),
		cmocka_unit_test(test_placement_choose_memo_is_safe_across_threads),
		cmocka_unit_test(test_placement_check_verdicts_and_reasons),
		cmocka_unit_test(test_placement_check_refusals_start_with_troupe),
		cmocka_unit_test(test_placement_check_fits_iff_enough_free),
		cmocka_unit_test(test_placement_unknown_node_is_resolvable),
		cmocka_unit_test(test_placement_score_find_by_exact_name),
		cmocka_unit_test(test_placement_score_memo_matches_policy),
		cmocka_unit_test(test_placement_binpack_scores_utilisation_after_landing),
		cmocka_unit_test(test_placement_binpack_fuller_node_scores_higher),
		cmocka_unit_test(test_placement_binpack_is_bounded_and_monotonic),
		cmocka_unit_test(test_placement_binpack_weight_scale_keeps_range),
		cmocka_unit_test(test_placement_binpack_degenerate_nodes_score_zero),
		cmocka_unit_test(test_placement_choose_devices_takes_lowest_free),
		cmocka_unit_test(test_placement_choose_devices_is_deterministic_subset),
		cmocka_unit_test(test_placement_link_parse_spellings),
		cmocka_unit_test(test_placement_link_name_round_trips),
		cmocka_unit_test(test_placement_topo_parse_real_machines),
		cmocka_unit_test(test_placement_topo_parse_ignores_line_ends_blanks_and_tabs),
		cmocka_unit_test(test_placement_topo_parse_rejects_malformed_text),
		cmocka_unit_test(test_placement_topo_parse_cut_text_never_gives_a_partial_matrix),
		cmocka_unit_test(test_placement_topo_parse_takes_1_to_64_gpus),
		cmocka_unit_test(test_placement_topo_unknown_is_all_equal),
		cmocka_unit_test(test_placement_topo_profile_table),
		cmocka_unit_test(test_placement_topo_profile_matches_real_machines),
		cmocka_unit_test(test_placement_choose_best_sets_on_real_machines),
		cmocka_unit_test(test_placement_choose_unknown_topology_takes_lowest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
