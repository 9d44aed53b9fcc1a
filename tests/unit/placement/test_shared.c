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
 *   test_mig_mixed_profiles           a MIG mixed node: each profile's devices
 *                                     only, packed onto GPUs already cut up;
 *                                     free counts and refusals per profile
 *   test_mig_mixed_property           over random usage: only free devices of
 *                                     the profile, and never a whole GPU broken
 *                                     while a cut one has room
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
	*ret = placement_node_choose(&v, NV, cache_view_free_mask(&v), k, &pol, &ch);
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

/* 4 GPUs cut all-balanced (MIG mixed): per GPU two of resource 1 (1g), one
 * of 2 (2g), one of 3 (3g), as cache_node_parse lays them out. */
static const char *const mig_names[] = { "nvidia.com/gpu", "nvidia.com/mig-1g.10gb",
					 "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb",
					 "nvidia.com/mig-7g.80gb", NULL };
static uint64_t mig_masks[CACHE_MAX_GPU_RESOURCES] = { 0, 0x3333, 0x4444, 0x8888 };
static uint32_t mig_allocs[CACHE_MAX_GPU_RESOURCES] = { 0, 8, 4, 4 };

static struct cache_node mig_mixed(void)
{
	struct cache_node n = shared(4, 4, CACHE_PACKING_PACKED);

	n.gpu_sharing = CACHE_SHARING_MIG_MIXED;
	n.gpu_resource = 1;
	n.res_mask = mig_masks;
	n.res_alloc = mig_allocs;
	return n;
}

static void test_mig_mixed_profiles(void **state)
{
	struct cache_node n = mig_mixed();
	struct placement_policy pol = { .kind = PLACEMENT_POLICY_PREFERRED };
	struct placement_choice ch;
	struct placement_fit fit;
	struct cache_demand d;
	/* GPU 1's 3g is in use; GPU 2's two 1g are. */
	struct cache_node_view v = { .node = &n, .used = 1ULL << 7 | 0x3ULL << 8 };

	(void)state;
	/* Only the profile's devices, on the GPU already cut up most: a 2g goes
	 * to GPU 2 (two free), not GPU 1 (three); GPUs 0 and 3 stay whole. */
	assert_int_equal(placement_node_choose(&v, 2, cache_view_free_mask(&v), 1, &pol, &ch), 0);
	assert_true(ch.set == 1ULL << 10);
	assert_int_equal(placement_node_choose(&v, 1, cache_view_free_mask(&v), 2, &pol, &ch), 0);
	assert_true(ch.set == (0x3ULL << 4));
	assert_int_equal(placement_node_choose(&v, 3, cache_view_free_mask(&v), 1, &pol, &ch), 0);
	assert_true(ch.set == 1ULL << 11);
	/* Free counts by profile. */
	d = gpus(1, 6);
	assert_int_equal(placement_check(&v, &d, mig_names, &fit), PLACEMENT_FITS);
	assert_int_equal(fit.free_gpus, 6);
	d = gpus(1, 7);
	v.used |= 0x3;
	assert_int_equal(placement_check(&v, &d, mig_names, &fit), PLACEMENT_UNSCHEDULABLE);
	assert_string_equal(fit.reason, "troupe: 4 of 8 nvidia.com/mig-1g.10gb free, pod needs 7");
	/* A profile the node has none of: its profiles named. */
	d = gpus(4, 1);
	assert_int_equal(placement_check(&v, &d, mig_names, &fit), PLACEMENT_UNRESOLVABLE);
	assert_non_null(strstr(fit.reason, "node has no nvidia.com/mig-7g.80gb (MIG mixed: "
				"nvidia.com/mig-1g.10gb x8, nvidia.com/mig-2g.20gb x4, "
				"nvidia.com/mig-3g.40gb x4)"));
	d = gpus(2, 5);
	assert_int_equal(placement_check(&v, &d, mig_names, &fit), PLACEMENT_UNRESOLVABLE);
	assert_string_equal(fit.reason, "troupe: node has 4 nvidia.com/mig-2g.20gb, pod needs 5");
}

/* Over random usage, a MIG mixed choice takes only free devices of the
 * profile asked, never breaks a whole GPU when a cut one has room, and its
 * score prefers a node it leaves with fewer whole GPUs. */
static void test_mig_mixed_property(void **state)
{
	uint64_t seed = 0x3161;

	(void)state;
	for (int iter = 0; iter < 20000; iter++) {
		struct cache_node n = mig_mixed();
		struct cache_node_view v = { .node = &n,
					     .used = rng_next(&seed) & rng_next(&seed) & 0xffff };
		struct placement_policy pol = { .kind = PLACEMENT_POLICY_PREFERRED };
		struct placement_choice ch;
		int r = 1 + (int)(rng_next(&seed) % 3);
		uint64_t mine = mig_masks[r] & cache_view_free_mask(&v);
		bool cut_room = false;

		for (unsigned g = 0; g < 4; g++)
			cut_room |= (v.used & cache_node_gpu_slots(&n, g)) &&
				    (mine & cache_node_gpu_slots(&n, g));
		if (placement_node_choose(&v, r, cache_view_free_mask(&v), 1, &pol, &ch) < 0) {
			assert_true(mine == 0);
			continue;
		}
		assert_int_equal(__builtin_popcountll(ch.set), 1);
		assert_true((ch.set & ~mine) == 0);
		if (cut_room)
			for (unsigned g = 0; g < 4; g++)
				if (ch.set & cache_node_gpu_slots(&n, g))
					assert_true(v.used & cache_node_gpu_slots(&n, g));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_distributed_spreads),
		cmocka_unit_test(test_packed_best_fit),
		cmocka_unit_test(test_packing_property),
		cmocka_unit_test(test_topology_needs_whole_gpus),
		cmocka_unit_test(test_fail_requests_greater_than_one),
		cmocka_unit_test(test_mig_mixed_profiles),
		cmocka_unit_test(test_mig_mixed_property),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
