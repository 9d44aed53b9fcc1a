/* Unit tests of placement on shared GPUs (choose.c's replica slots, fit.c's
 * refusals): a shared node's devices are replica slots of physical GPUs.
 *
 *   test_distributed_spreads          each replica on the least-used GPU, as
 *                                     NVIDIA's plugin's distributed policy
 *   test_packed_best_fit              one GPU's slots before the next: best fit
 *                                     for the whole request, else the fewest
 *                                     GPUs touched
 *   test_packing_property             over random usage, every choice takes
 *                                     only free slots, exactly k of them; packed
 *                                     never touches more GPUs than needed, and
 *                                     distributed never leaves one GPU two
 *                                     replicas busier than another it could use
 *   test_topology_needs_whole_gpus    a required topology policy on shared
 *                                     GPUs is refused for good, with a reason
 *   test_fail_requests_greater_than_one  refused for good above 1, with the
 *                                     device plugin's setting named
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/placement.h"
#include "fixture.h"

/* <g> GPUs x <r> replicas, time-sliced, with <packing>. */
static struct cache_node shared(unsigned g, unsigned r, enum cache_packing packing)
{
	struct cache_node n = make_node(NV, g * r, g * r, true, false);

	n.gpu_sharing = CACHE_SHARING_TIME_SLICING;
	n.gpu_replicas = (uint8_t)r;
	n.gpu_physical = (uint8_t)g;
	n.gpu_packing = (uint8_t)packing;
	return n;
}

/* xorshift64: the same cases every run. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t choose(const struct cache_node *n, uint64_t used, unsigned k, int *ret)
{
	struct cache_node_view v = { .node = n, .used = used };
	struct placement_policy pol = { .kind = PLACEMENT_POLICY_PREFERRED };
	struct placement_choice ch;

	memset(&ch, 0, sizeof(ch));
	*ret = placement_node_choose(&v, cache_view_free_mask(&v), k, &pol, &ch);
	return *ret == 0 ? ch.set : 0;
}

/* Slots used on GPU <g> of <n> in <mask>. */
static unsigned on_gpu(const struct cache_node *n, uint64_t mask, unsigned g)
{
	return (unsigned)__builtin_popcountll(mask & cache_node_gpu_slots(n, g));
}

static unsigned gpus_touched(const struct cache_node *n, uint64_t mask)
{
	unsigned t = 0;

	for (unsigned g = 0; g < n->gpu_physical; g++)
		t += on_gpu(n, mask, g) > 0;
	return t;
}

static void test_distributed_spreads(void **state)
{
	struct cache_node n = shared(4, 4, CACHE_PACKING_DISTRIBUTED);
	int ret;
	uint64_t set;

	(void)state;
	/* Empty: two replicas on two GPUs, the lowest. */
	set = choose(&n, 0, 2, &ret);
	assert_int_equal(ret, 0);
	assert_true(set == (1ULL << 0 | 1ULL << 4));
	/* GPUs 0 and 1 carry 2 and 1: the next goes to GPU 2, the least used. */
	set = choose(&n, 0x3 | 1ULL << 4, 1, &ret);
	assert_true(set == 1ULL << 8);
	/* Four on an empty node: one on each GPU. */
	set = choose(&n, 0, 4, &ret);
	for (unsigned g = 0; g < 4; g++)
		assert_int_equal(on_gpu(&n, set, g), 1);
	/* More than there are free: refused. */
	set = choose(&n, 0xfffe, 1, &ret);
	assert_true(set == 1);
	choose(&n, 0xffff, 1, &ret);
	assert_int_equal(ret, -ENOSPC);
}

static void test_packed_best_fit(void **state)
{
	struct cache_node n = shared(4, 4, CACHE_PACKING_PACKED);
	int ret;
	uint64_t set;

	(void)state;
	/* Empty: one GPU's slots. */
	set = choose(&n, 0, 3, &ret);
	assert_true(set == 0x7);
	/* GPU 1 has 1 free, GPU 2 has 2: one replica fills GPU 1 (best fit),
	 * two go to GPU 2, and GPU 3 stays whole. */
	assert_true(choose(&n, 0x000f | 0x0070 | 0x0300, 1, &ret) == 1ULL << 7);
	set = choose(&n, 0x000f | 0x0070 | 0x0300, 2, &ret);
	assert_true(set == (0xcULL << 8));
	/* No GPU holds all five: the emptiest first, so two GPUs, not three. */
	set = choose(&n, 0x0001 | 0x0010, 5, &ret);
	assert_int_equal(ret, 0);
	assert_int_equal(__builtin_popcountll(set), 5);
	assert_int_equal(gpus_touched(&n, set), 2);
}

static void test_packing_property(void **state)
{
	uint64_t seed = 0x5eed;

	(void)state;
	for (int iter = 0; iter < 20000; iter++) {
		unsigned g = 1 + (unsigned)(rng_next(&seed) % 8);
		unsigned r = 2 + (unsigned)(rng_next(&seed) % 7);
		enum cache_packing pk = rng_next(&seed) & 1 ? CACHE_PACKING_PACKED
							     : CACHE_PACKING_DISTRIBUTED;
		struct cache_node n = shared(g, r, pk);
		uint64_t used = rng_next(&seed) & cache_node_capacity_mask(&n);
		uint64_t free_mask = cache_node_capacity_mask(&n) & ~used;
		unsigned nfree = (unsigned)__builtin_popcountll(free_mask);
		unsigned k = 1 + (unsigned)(rng_next(&seed) % (g * r));
		int ret;
		uint64_t set = choose(&n, used, k, &ret);

		if (k > nfree) {
			assert_int_equal(ret, -ENOSPC);
			continue;
		}
		assert_int_equal(ret, 0);
		assert_true((set & ~free_mask) == 0);
		assert_int_equal(__builtin_popcountll(set), k);
		if (pk == CACHE_PACKING_PACKED) {
			/* The fewest GPUs that could hold k: take the emptiest first. */
			unsigned fr[64], need = 0, sum = 0;

			for (unsigned i = 0; i < g; i++)
				fr[i] = on_gpu(&n, free_mask, i);
			while (sum < k) {
				unsigned best = 0;

				for (unsigned i = 1; i < g; i++)
					if (fr[i] > fr[best])
						best = i;
				sum += fr[best];
				fr[best] = 0;
				need++;
			}
			if (gpus_touched(&n, set) != need)
				fail_msg("packed: %u GPUs touched, %u needed (g %u r %u k %u used "
					 "%#llx)", gpus_touched(&n, set), need, g, r, k,
					 (unsigned long long)used);
		} else {
			/* After the choice, a GPU that got a replica is no busier than
			 * one more than any GPU that still has a free slot. */
			uint64_t after = used | set;

			for (unsigned a = 0; a < g; a++) {
				if (!on_gpu(&n, set, a))
					continue;
				for (unsigned b = 0; b < g; b++)
					if (on_gpu(&n, ~after & cache_node_capacity_mask(&n), b) &&
					    on_gpu(&n, after, a) > on_gpu(&n, after, b) + 1)
						fail_msg("distributed: GPU %u has %u, GPU %u has %u "
							 "and room (g %u r %u k %u used %#llx)", a,
							 on_gpu(&n, after, a), b, on_gpu(&n, after, b),
							 g, r, k, (unsigned long long)used);
			}
		}
	}
}

static void test_topology_needs_whole_gpus(void **state)
{
	struct cache_node n = shared(8, 4, CACHE_PACKING_DISTRIBUTED);
	struct cache_node_view v = { .node = &n };
	struct placement_request req = { .demand = gpus(NV, 2),
					 .policy = { .kind = PLACEMENT_POLICY_REQUIRED } };
	struct placement_fit fit;

	(void)state;
	assert_int_equal(placement_check_request(&v, &req, gpu_names, &fit),
			 PLACEMENT_UNRESOLVABLE);
	assert_non_null(strstr(fit.reason, "shares its GPUs (time-slicing, 4 per GPU)"));
	assert_non_null(strstr(fit.reason, "needs whole GPUs"));
	/* One replica has no links to need, and preferred is only a preference. */
	req.demand = gpus(NV, 1);
	assert_int_equal(placement_check_request(&v, &req, gpu_names, &fit), PLACEMENT_FITS);
	req.demand = gpus(NV, 2);
	req.policy.kind = PLACEMENT_POLICY_PREFERRED;
	assert_int_equal(placement_check_request(&v, &req, gpu_names, &fit), PLACEMENT_FITS);
}

static void test_fail_requests_greater_than_one(void **state)
{
	struct cache_node n = shared(8, 4, CACHE_PACKING_DISTRIBUTED);
	struct cache_node_view v = { .node = &n };
	struct cache_demand two = gpus(NV, 2), one = gpus(NV, 1);
	struct placement_fit fit;

	(void)state;
	assert_int_equal(placement_check(&v, &two, gpu_names, &fit), PLACEMENT_FITS);
	n.gpu_fail_gt1 = true;
	assert_int_equal(placement_check(&v, &two, gpu_names, &fit), PLACEMENT_UNRESOLVABLE);
	assert_non_null(strstr(fit.reason, "failRequestsGreaterThanOne"));
	assert_non_null(strstr(fit.reason, "pod needs 2"));
	assert_int_equal(placement_check(&v, &one, gpu_names, &fit), PLACEMENT_FITS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_distributed_spreads),
		cmocka_unit_test(test_packed_best_fit),
		cmocka_unit_test(test_packing_property),
		cmocka_unit_test(test_topology_needs_whole_gpus),
		cmocka_unit_test(test_fail_requests_greater_than_one),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
