/* Unit tests for placement/choose.c: the best-connected set of free devices,
 * on nodes whose topology is unknown (the lowest free indices), on real
 * machines (sets derived by hand), and against brute force over random
 * topologies; and the per-class memo, also shared by threads.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

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
	ret = placement_node_choose(v, v->node->gpu_resource, free_mask, want, &pref, &c);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_choose_matches_brute_force),
		cmocka_unit_test(test_placement_choose_memo_agrees_with_direct),
		cmocka_unit_test(test_placement_choose_memo_is_safe_across_threads),
		cmocka_unit_test(test_placement_choose_devices_takes_lowest_free),
		cmocka_unit_test(test_placement_choose_devices_is_deterministic_subset),
		cmocka_unit_test(test_placement_choose_best_sets_on_real_machines),
		cmocka_unit_test(test_placement_choose_unknown_topology_takes_lowest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
