/* Unit tests for common/quantity.c: Kubernetes quantities in thousandths and
 * whole counts, as the API server accepts them.
 *
 * Where inputs vary the cases are tables; a table checks every row and reports
 * each mismatch before failing, so one run shows every row that disagrees with
 * the contract.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/quantity.h"
#include "common/util.h"

#include "fixture.h"

struct quantity_case {
	const char *in;
	int ret;
	int64_t want;           /* meaningful when ret == 0 */
};

static void check_quantity_table(const struct quantity_case *cases, size_t n, bool count)
{
	int bad = 0;

	for (size_t i = 0; i < n; i++) {
		int64_t got = INT64_C(0x5a5a5a5a);
		int ret = count ? quantity_parse_count(cases[i].in, strlen(cases[i].in), &got)
				: quantity_parse_milli(cases[i].in, strlen(cases[i].in), &got);

		if (ret != cases[i].ret || (ret == 0 && got != cases[i].want)) {
			print_message("quantity_parse_%s(\"%s\"): got ret %d value %" PRId64
				      ", want ret %d value %" PRId64 "\n",
				      count ? "count" : "milli", cases[i].in, ret, got, cases[i].ret,
				      cases[i].want);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

static void test_quantity_parse_milli_grammar(void **state)
{
	static const struct quantity_case cases[] = {
		{ "8", 0, 8000 },
		{ "0", 0, 0 },
		{ "500m", 0, 500 },
		{ "1.5", 0, 1500 },
		{ "0.1", 0, 100 },
		{ ".5", 0, 500 },
		{ "1.", 0, 1000 },
		{ "+2", 0, 2000 },
		{ "-1", 0, -1000 },
		{ "1k", 0, 1000000 },
		{ "100M", 0, INT64_C(100000000000) },
		{ "1e3", 0, 1000000 },
		{ "1E3", 0, 1000000 },
		{ "1e-3", 0, 1 },
		{ "1e+2", 0, 100000 },
		{ "4Gi", 0, INT64_C(4) * 1024 * 1024 * 1024 * 1000 },
		{ "1Mi", 0, INT64_C(1048576000) },
		{ "1.5Ki", 0, 1536000 },
		{ "0.5Gi", 0, INT64_C(536870912000) },
		{ "1P", 0, INT64_C(1000000000000000000) },
		/* "E" alone is the exa suffix (10^18), as in apimachinery. */
		{ "0.001E", 0, INT64_C(1000000000000000000) },
		{ "", -EINVAL, 0 },
		{ "abc", -EINVAL, 0 },
		{ "+", -EINVAL, 0 },
		{ "-", -EINVAL, 0 },
		{ ".", -EINVAL, 0 },
		{ "1.2.3", -EINVAL, 0 },
		{ "1 ", -EINVAL, 0 },
		{ " 1", -EINVAL, 0 },
		{ "--1", -EINVAL, 0 },
		{ "1Qi", -EINVAL, 0 },
		{ "1ki", -EINVAL, 0 },
		{ "1KiB", -EINVAL, 0 },
		{ "1x", -EINVAL, 0 },
		{ "1e", -EINVAL, 0 },
		{ "1e+", -EINVAL, 0 },
		{ "1e3x", -EINVAL, 0 },
		{ "9999999999999999999", -ERANGE, 0 },
		{ "10P", -ERANGE, 0 },
		{ "1E", -ERANGE, 0 },
		{ "1e400", -ERANGE, 0 },
		{ "9000000000000000Ki", -ERANGE, 0 },
	};

	(void)state;
	check_quantity_table(cases, ARRAY_SIZE(cases), false);
}

/* Fractions of a milli-unit are rounded up, as Kubernetes does. */
static void test_quantity_parse_milli_rounds_up(void **state)
{
	static const struct quantity_case cases[] = {
		{ "1n", 0, 1 },
		{ "1u", 0, 1 },
		{ "999999n", 0, 1 },
		{ "1000001n", 0, 2 },
		{ "0.0001", 0, 1 },
		{ "0.0011", 0, 2 },
		{ "1e-9", 0, 1 },
		{ "0n", 0, 0 },
	};

	(void)state;
	check_quantity_table(cases, ARRAY_SIZE(cases), false);
}

/* Only <len> bytes are read: the input need not be NUL-terminated there. */
static void test_quantity_parse_milli_honours_len(void **state)
{
	int64_t v = 0;

	(void)state;
	assert_int_equal(quantity_parse_milli("8Gi", 1, &v), 0);
	assert_int_equal(v, 8000);
	assert_int_equal(quantity_parse_milli("500mX", 4, &v), 0);
	assert_int_equal(v, 500);
	assert_int_equal(quantity_parse_milli("8", 0, &v), -EINVAL);
}

static void test_quantity_parse_count_whole_only(void **state)
{
	static const struct quantity_case cases[] = {
		{ "8", 0, 8 },
		{ "0", 0, 0 },
		{ "2000m", 0, 2 },
		{ "1k", 0, 1000 },
		{ "1e1", 0, 10 },
		{ "1.5", -EINVAL, 0 },
		{ "1500m", -EINVAL, 0 },
		{ "1n", -EINVAL, 0 },
		{ "-1", -EINVAL, 0 },
		{ "", -EINVAL, 0 },
		{ "abc", -EINVAL, 0 },
		{ "9999999999999999999", -ERANGE, 0 },
	};

	(void)state;
	check_quantity_table(cases, ARRAY_SIZE(cases), true);
}

/* Fraction digits past what int64 carries round the result up once: the old
 * code added one per dropped digit, which overflowed at INT64_MAX (undefined
 * behaviour; the result came back negative) and over-rounded. */
static void test_quantity_parse_milli_dropped_digits_round_once(void **state)
{
	static const struct {
		const char *s;
		int64_t want;
	} cases[] = {
		/* 0.9223372036854775799 and twenty dropped 9s: 922.33... milli */
		{ "922337203685477579.999999999999999999999e-18", 923 },
		{ "922337203685477580.9999999999e-18", 923 },
		{ "922337203685477579.91e-15", 922338 },
	};
	int64_t v;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		v = 0;
		assert_int_equal(quantity_parse_milli(cases[i].s, strlen(cases[i].s), &v), 0);
		if (v != cases[i].want)
			fail_msg("%s: got %lld, want %lld", cases[i].s, (long long)v,
				 (long long)cases[i].want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantity_parse_milli_grammar),
		cmocka_unit_test(test_quantity_parse_milli_rounds_up),
		cmocka_unit_test(test_quantity_parse_milli_honours_len),
		cmocka_unit_test(test_quantity_parse_count_whole_only),
		cmocka_unit_test(test_quantity_parse_milli_dropped_digits_round_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
