/* Unit tests for placement/island.c: the largest all-NVLink island against a
 * brute-force maximum clique.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "fixture.h"

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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
