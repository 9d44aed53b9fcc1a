/* budget.c: how request bodies draw on the shared memory budget, the room kept
 * for small bodies, and the log-line limit (time given, never read).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "extender/budget.h"
#include "extender/config.h"

#define MiB ((size_t)1024 * 1024)

static void test_ext_budget_take_keeps_a_quarter_for_small_bodies(void **state)
{
	struct ext_budget b = { 64 * MiB, 0 };

	(void)state;
	/* Large bodies: up to 48 MiB together. */
	assert_true(ext_budget_take(&b, 40 * MiB, 40 * MiB));
	assert_false(ext_budget_take(&b, 9 * MiB, 9 * MiB));
	assert_true(ext_budget_take(&b, 8 * MiB, 8 * MiB));
	assert_false(ext_budget_take(&b, 2 * MiB, 2 * MiB));
	/* Small ones may use the rest. */
	for (int i = 0; i < 16; i++)
		assert_true(ext_budget_take(&b, MiB, MiB));
	assert_false(ext_budget_take(&b, 1, 1));
	assert_int_equal(ext_budget_used(&b), 64 * MiB);
	ext_budget_give(&b, 64 * MiB);
	assert_int_equal(ext_budget_used(&b), 0);
	/* Never more than the budget, even for one. */
	assert_false(ext_budget_take(&b, 65 * MiB, 65 * MiB));
	assert_int_equal(ext_budget_used(&b), 0);
}

static void test_ext_body_content_length_is_reserved_once(void **state)
{
	struct ext_budget b = { 8 * MiB, 0 };
	struct ext_body body = { NULL, 0, 0, 0 };
	static char piece[4096];

	(void)state;
	memset(piece, 'x', sizeof(piece));
	assert_int_equal(ext_body_reserve(&b, &body, 3 * MiB), EXT_BODY_OK);
	assert_int_equal(ext_budget_used(&b), 3 * MiB + 1);
	for (size_t n = 0; n < 3 * MiB; n += sizeof(piece))
		assert_int_equal(ext_body_add(&b, &body, piece, sizeof(piece), 16 * MiB), EXT_BODY_OK);
	assert_int_equal(body.len, 3 * MiB);
	assert_int_equal(body.cap, 3 * MiB + 1);
	assert_int_equal(ext_budget_used(&b), 3 * MiB + 1);
	assert_int_equal(body.buf[body.len], '\0');
	/* The next one does not fit in the large bodies' 6 MiB. */
	{
		struct ext_body other = { NULL, 0, 0, 0 };

		assert_int_equal(ext_body_reserve(&b, &other, 4 * MiB), EXT_BODY_OVER_BUDGET);
		assert_int_equal(ext_budget_used(&b), 3 * MiB + 1);
	}
	ext_body_drop(&b, &body);
	assert_int_equal(ext_budget_used(&b), 0);
	assert_null(body.buf);
}

static void test_ext_body_chunked_growth_draws_and_gives_back(void **state)
{
	struct ext_budget b = { 4 * MiB, 0 };
	struct ext_body body = { NULL, 0, 0, 0 };
	static char piece[256 * 1024];
	enum ext_body_result r = EXT_BODY_OK;
	int pieces = 0;

	(void)state;
	memset(piece, 'y', sizeof(piece));
	while (r == EXT_BODY_OK) {
		r = ext_body_add(&b, &body, piece, sizeof(piece), 64 * MiB);
		if (r == EXT_BODY_OK) {
			pieces++;
			/* What the buffer takes is what the budget counts. */
			assert_int_equal(ext_budget_used(&b), body.cap);
			assert_true(body.cap <= 3 * MiB);
		}
	}
	assert_int_equal(r, EXT_BODY_OVER_BUDGET);
	assert_true(pieces >= 4);
	assert_null(body.buf);
	assert_int_equal(ext_budget_used(&b), 0);
	/* Past max_body_bytes: too large, and nothing kept. */
	assert_int_equal(ext_body_add(&b, &body, piece, sizeof(piece), 1000), EXT_BODY_TOO_LARGE);
	assert_int_equal(ext_budget_used(&b), 0);
}

static void test_ext_log_limit_passes_a_burst_a_second_and_counts_the_rest(void **state)
{
	struct ext_log_limit l = { .per_second = 3 };
	char left[64];
	uint64_t t0 = 5000000000ULL;

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_true(ext_log_limit_pass(&l, t0 + (uint64_t)i, left, sizeof(left)));
	assert_string_equal(left, "");
	for (int i = 0; i < 7; i++)
		assert_false(ext_log_limit_pass(&l, t0 + 100 + (uint64_t)i, left, sizeof(left)));
	assert_true(ext_log_limit_pass(&l, t0 + 1000000000ULL, left, sizeof(left)));
	assert_string_equal(left, " (7 more like it left out since the last line)");
	assert_true(ext_log_limit_pass(&l, t0 + 1000000001ULL, left, sizeof(left)));
	assert_string_equal(left, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ext_budget_take_keeps_a_quarter_for_small_bodies),
		cmocka_unit_test(test_ext_body_content_length_is_reserved_once),
		cmocka_unit_test(test_ext_body_chunked_growth_draws_and_gives_back),
		cmocka_unit_test(test_ext_log_limit_passes_a_burst_a_second_and_counts_the_rest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
