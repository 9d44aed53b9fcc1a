/* Unit tests for common/log.c: level names and which levels are enabled.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

#include "fixture.h"

static void test_log_level_parse_names(void **state)
{
	static const struct {
		const char *in;
		int ret;
		enum log_level want;
	} cases[] = {
		{ "debug", 0, LOG_DEBUG }, { "info", 0, LOG_INFO },   { "warn", 0, LOG_WARN },
		{ "warning", 0, LOG_WARN }, { "error", 0, LOG_ERROR }, { "", -EINVAL, 0 },
		{ "verbose", -EINVAL, 0 },  { "errors", -EINVAL, 0 },  { "inf", -EINVAL, 0 },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		enum log_level got = LOG_ERROR + 1;

		assert_int_equal(log_level_parse(cases[i].in, &got), cases[i].ret);
		if (cases[i].ret == 0)
			assert_int_equal(got, cases[i].want);
		else
			assert_int_equal(got, LOG_ERROR + 1);
	}
}

static void test_log_level_name_round_trips(void **state)
{
	(void)state;
	for (int l = LOG_DEBUG; l <= LOG_ERROR; l++) {
		enum log_level back;

		assert_int_equal(log_level_parse(log_level_name((enum log_level)l), &back), 0);
		assert_int_equal(back, l);
	}
	assert_string_equal(log_level_name((enum log_level)99), "?");
}

static void test_log_enabled_follows_level(void **state)
{
	enum log_level saved = log_get_level();

	(void)state;
	log_set_level(LOG_WARN);
	assert_int_equal(log_get_level(), LOG_WARN);
	assert_false(log_enabled(LOG_DEBUG));
	assert_false(log_enabled(LOG_INFO));
	assert_true(log_enabled(LOG_WARN));
	assert_true(log_enabled(LOG_ERROR));
	log_set_level(LOG_DEBUG);
	assert_true(log_enabled(LOG_DEBUG));
	log_set_level(saved);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log_level_parse_names),
		cmocka_unit_test(test_log_level_name_round_trips),
		cmocka_unit_test(test_log_enabled_follows_level),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
