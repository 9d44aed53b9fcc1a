/* Unit tests of gang reservations (reserve.c): a reservation is counted as
 * used by everyone, its key is unique, a claim hands its devices to a pod
 * without a moment where they are free, and a release frees them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>

#include "cache/cache.h"
#include "common/log.h"
#include "fixture.h"

static void test_cache_reserve_counts_as_used_and_key_is_unique(void **state)
{
	struct cache *c = *state;
	struct cache_pod_info pi;

	add_node(c, "n", 4, 4);
	assert_int_equal(cache_reserve_for(c, "ml/g#g1/s0", "n", 0x3, "q"), 0);
	assert_usage(c, "n", 0x3, 0);
	pi = pod_info(c, "ml/g#g1/s0");
	assert_true(pi.reservation);
	assert_int_equal(pi.state, CACHE_POD_STATE_ASSUMED);
	assert_string_equal(pi.queue, "q");
	assert_int_equal(cache_reserve(c, "ml/g#g1/s0", "n", 0x4), -EEXIST);
	/* The devices are taken: neither a reservation nor a pod gets them. */
	assert_int_equal(cache_reserve(c, "ml/g#g1/s1", "n", 0x1), -EAGAIN);
	assert_int_equal(cache_reserve(c, "ml/g#g1/s1", "gone", 0x1), -ENOENT);
	assert_usage(c, "n", 0x3, 0);
	assert_int_equal(cache_reservation_release(c, "ml/g#g1/s0"), 0);
	assert_usage(c, "n", 0, 0);
	assert_false(cache_pod_known(c, "ml/g#g1/s0"));
	assert_int_equal(cache_reservation_release(c, "ml/g#g1/s0"), -ENOENT);
}

static void test_cache_reservation_claim_hands_devices_to_the_pod(void **state)
{
	struct cache *c = *state;
	struct cache_pod_info pi;

	add_node(c, "n", 4, 4);
	assert_int_equal(cache_reserve(c, "r", "n", 0x6), 0);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "one", .gpus = 1)), 0);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "two", .gpus = 2)), 0);
	assert_int_equal(cache_reservation_claim(c, "r", "one"), -EINVAL);
	assert_int_equal(cache_reservation_claim(c, "r", "nobody"), -ENOENT);
	assert_int_equal(cache_reservation_claim(c, "r", "two"), 0);
	assert_usage(c, "n", 0x6, 0);
	assert_false(cache_pod_known(c, "r"));
	pi = pod_info(c, "two");
	assert_int_equal(pi.state, CACHE_POD_STATE_ASSUMED);
	assert_string_equal(pi.node, "n");
	assert_int_equal(pi.devices, 0x6);
	{
		char uids[64];

		/* The by-node index lists the pod, no longer the reservation. */
		assert_int_equal(node_pods_str(c, "n", uids, sizeof(uids)), 0);
		assert_string_equal(uids, "two");
	}
	assert_int_equal(cache_pod_forget(c, "two"), 0);
	assert_usage(c, "n", 0, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CACHE_TEST(test_cache_reserve_counts_as_used_and_key_is_unique),
		CACHE_TEST(test_cache_reservation_claim_hands_devices_to_the_pod),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
