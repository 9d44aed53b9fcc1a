/* Unit tests for common/strmap.c: the string hash map, its iteration, growth
 * and tombstones.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"

#include "fixture.h"

static void test_strmap_put_get_del_overwrite(void **state)
{
	struct strmap m;
	int a = 1, b = 2, c = 3;
	void *old = &a;

	(void)state;
	strmap_init(&m);
	assert_null(strmap_get(&m, "x", 1));
	assert_null(strmap_del(&m, "x", 1));
	assert_int_equal(strmap_count(&m), 0);

	assert_int_equal(strmap_put(&m, "alpha", 5, &a, &old), 0);
	assert_null(old);
	assert_int_equal(strmap_put(&m, "beta", 4, &b, NULL), 0);
	assert_ptr_equal(strmap_get(&m, "alpha", 5), &a);
	assert_ptr_equal(strmap_get(&m, "beta", 4), &b);
	assert_int_equal(strmap_count(&m), 2);

	/* Overwrite returns the previous value and keeps the count. */
	assert_int_equal(strmap_put(&m, "alpha", 5, &c, &old), 0);
	assert_ptr_equal(old, &a);
	assert_ptr_equal(strmap_get(&m, "alpha", 5), &c);
	assert_int_equal(strmap_count(&m), 2);

	/* Keys are (pointer, length): prefixes and embedded NULs are distinct. */
	assert_null(strmap_get(&m, "alphabet", 4));
	assert_null(strmap_get(&m, "alpha\0", 6));
	assert_ptr_equal(strmap_get(&m, "alphabet", 5), &c);

	assert_ptr_equal(strmap_del(&m, "alpha", 5), &c);
	assert_null(strmap_get(&m, "alpha", 5));
	assert_null(strmap_del(&m, "alpha", 5));
	assert_int_equal(strmap_count(&m), 1);
	assert_ptr_equal(strmap_get(&m, "beta", 4), &b);
	strmap_fini(&m);
	assert_int_equal(strmap_count(&m), 0);
}

static void test_strmap_iteration_visits_each_live_entry_once(void **state)
{
	enum { N = 500 };
	static char keys[N][16];
	static int seen[N];
	struct strmap m;
	const char *k;
	void *v;
	size_t pos = 0, visits = 0;

	(void)state;
	strmap_init(&m);
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		assert_int_equal(strmap_put(&m, keys[i], strlen(keys[i]), &seen[i], NULL), 0);
	}
	for (int i = 0; i < N; i += 3)
		assert_ptr_equal(strmap_del(&m, keys[i], strlen(keys[i])), &seen[i]);
	while (strmap_next(&m, &pos, &k, &v)) {
		int idx = (int)((int *)v - seen);

		assert_in_range(idx, 0, N - 1);
		assert_ptr_equal(k, keys[idx]);
		seen[idx]++;
		visits++;
	}
	assert_int_equal(visits, strmap_count(&m));
	for (int i = 0; i < N; i++)
		assert_int_equal(seen[i], i % 3 == 0 ? 0 : 1);
	/* The end stays the end. */
	assert_false(strmap_next(&m, &pos, &k, &v));
	strmap_fini(&m);
}

/* Growth to 10000 keys, then deletions leave tombstones that later inserts and
 * lookups must step over correctly. */
static void test_strmap_grows_to_10000_keys_with_tombstones(void **state)
{
	enum { N = 10000 };
	char (*keys)[16] = calloc(N, sizeof(*keys));
	int *vals = calloc(N, sizeof(*vals));
	struct strmap m;

	(void)state;
	assert_non_null(keys);
	assert_non_null(vals);
	strmap_init(&m);
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "pod-%d", i);
		assert_int_equal(strmap_put(&m, keys[i], strlen(keys[i]), &vals[i], NULL), 0);
	}
	assert_int_equal(strmap_count(&m), N);
	assert_true(m.cap >= N && (m.cap & (m.cap - 1)) == 0);
	for (int i = 0; i < N; i += 2)
		assert_ptr_equal(strmap_del(&m, keys[i], strlen(keys[i])), &vals[i]);
	assert_int_equal(strmap_count(&m), N / 2);
	for (int i = 0; i < N; i++) {
		void *got = strmap_get(&m, keys[i], strlen(keys[i]));

		if (i % 2)
			assert_ptr_equal(got, &vals[i]);
		else
			assert_null(got);
	}
	/* Put the deleted half back with other values. */
	for (int i = 0; i < N; i += 2) {
		void *old = &vals[0];

		assert_int_equal(strmap_put(&m, keys[i], strlen(keys[i]), &vals[i + 1], &old), 0);
		assert_null(old);
	}
	assert_int_equal(strmap_count(&m), N);
	for (int i = 0; i < N; i++)
		assert_ptr_equal(strmap_get(&m, keys[i], strlen(keys[i])),
				 &vals[i % 2 ? i : i + 1]);
	strmap_fini(&m);
	free(keys);
	free(vals);
}

/* Insert/delete churn with few live keys: tombstones are reclaimed by rebuilds,
 * so the table neither grows without bound nor loops forever on a probe. */
static void test_strmap_churn_keeps_table_small(void **state)
{
	enum { LIVE = 8, OPS = 100000 };
	static char keys[LIVE][16];
	static int vals[LIVE];
	bool present[LIVE] = { false };
	struct strmap m;
	uint64_t seed = 42;

	(void)state;
	strmap_init(&m);
	for (int i = 0; i < OPS; i++) {
		int k = (int)(rng_next(&seed) % LIVE);

		if (present[k]) {
			assert_ptr_equal(strmap_del(&m, keys[k], strlen(keys[k])), &vals[k]);
			present[k] = false;
			continue;
		}
		/* A fresh key every time, as pod UIDs are. */
		snprintf(keys[k], sizeof(keys[k]), "uid-%d-%d", k, i);
		assert_int_equal(strmap_put(&m, keys[k], strlen(keys[k]), &vals[k], NULL), 0);
		present[k] = true;
	}
	for (int k = 0; k < LIVE; k++)
		assert_ptr_equal(strmap_get(&m, keys[k], strlen(keys[k])), present[k] ? &vals[k] : NULL);
	assert_true(m.cap <= 64);
	assert_true(m.used + m.tombs < m.cap);
	strmap_fini(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strmap_put_get_del_overwrite),
		cmocka_unit_test(test_strmap_iteration_visits_each_live_entry_once),
		cmocka_unit_test(test_strmap_grows_to_10000_keys_with_tombstones),
		cmocka_unit_test(test_strmap_churn_keeps_table_small),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
