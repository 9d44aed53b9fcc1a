/* Unit tests for common/log.c: level names and which levels are enabled, and
 * the JSON line format (each line one valid document, whatever the message
 * holds).
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
#include <unistd.h>

#include <cjson/cJSON.h>

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

static void test_log_format_parse_names(void **state)
{
	enum log_format f = LOG_FORMAT_JSON;

	(void)state;
	assert_int_equal(log_format_parse("text", &f), 0);
	assert_int_equal(f, LOG_FORMAT_TEXT);
	assert_int_equal(log_format_parse("json", &f), 0);
	assert_int_equal(f, LOG_FORMAT_JSON);
	assert_int_equal(log_format_parse("JSON", &f), -EINVAL);
	assert_int_equal(log_format_parse("", &f), -EINVAL);
}

/* What log_msg writes to stderr while <fn> runs, read back from a file. */
static char *capture_stderr(void (*fn)(void))
{
	char path[] = "/tmp/troupe-log-XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	char *out = calloc(1, 1 << 16);
	FILE *f;

	assert_true(fd >= 0 && saved >= 0 && out);
	fflush(stderr);
	dup2(fd, 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	f = fdopen(fd, "r");
	rewind(f);
	(void)!fread(out, 1, (1 << 16) - 1, f);
	fclose(f);
	unlink(path);
	return out;
}

static void log_hostile(void)
{
	log_set_format(LOG_FORMAT_JSON);
	log_info("http", "plain \"quoted\" back\\slash tab\there");
	log_warn("gang", "line\nbreak and \x01 control");
	log_error("bind", "caf\xc3\xa9 ok, cut \xc3, stray \xff\xfe, surrogate \xed\xa0\x80");
	log_set_format(LOG_FORMAT_TEXT);
}

static void test_log_json_lines_are_valid_documents(void **state)
{
	static const char *const want[][3] = {
		{ "info", "http", "plain \"quoted\" back\\slash tab\there" },
		{ "warn", "gang", "line\nbreak and \x01 control" },
		{ "error", "bind", "caf\xc3\xa9 ok, cut \xef\xbf\xbd, stray \xef\xbf\xbd\xef\xbf\xbd, "
				   "surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
	};
	enum log_level saved = log_get_level();
	char *out, *line, *next;
	unsigned n = 0;

	(void)state;
	log_set_level(LOG_DEBUG);
	out = capture_stderr(log_hostile);
	log_set_level(saved);
	for (line = out; line && *line; line = next) {
		cJSON *j;

		next = strchr(line, '\n');
		assert_non_null(next);
		*next++ = '\0';
		j = cJSON_Parse(line);
		if (!j)
			fail_msg("not JSON: %s", line);
		assert_true(n < ARRAY_SIZE(want));
		assert_string_equal(cJSON_GetObjectItem(j, "level")->valuestring, want[n][0]);
		assert_string_equal(cJSON_GetObjectItem(j, "component")->valuestring, want[n][1]);
		assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring, want[n][2]);
		assert_int_equal(strlen(cJSON_GetObjectItem(j, "time")->valuestring), 24);
		cJSON_Delete(j);
		n++;
	}
	assert_int_equal(n, 3);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log_level_parse_names),
		cmocka_unit_test(test_log_level_name_round_trips),
		cmocka_unit_test(test_log_enabled_follows_level),
		cmocka_unit_test(test_log_format_parse_names),
		cmocka_unit_test(test_log_json_lines_are_valid_documents),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
