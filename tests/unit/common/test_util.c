/* Unit tests for common/util.c: whole-file reads, the monotonic clock, the
 * cJSON accessors and quantities, and the scanners that find what cJSON would
 * accept or cut (json_find_unsafe, json_plain_run).
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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/strbuf.h"
#include "common/util.h"

#include <math.h>

#include "fixture.h"

static void test_util_read_file_reads_whole_file(void **state)
{
	enum { N = 200000 };    /* several times the first buffer size */
	char *data = malloc(N);
	char *path, *buf = NULL;
	size_t len = 0;

	(void)state;
	assert_non_null(data);
	for (size_t i = 0; i < N; i++)
		data[i] = (char)('A' + i % 23);
	path = test_temp_file(data, N);
	assert_int_equal(util_read_file(path, N, &buf, &len), 0);
	assert_int_equal(len, N);
	assert_memory_equal(buf, data, N);
	assert_int_equal(buf[N], '\0');
	free(buf);
	buf = NULL;
	assert_int_equal(util_read_file(path, N - 1, &buf, &len), -EFBIG);
	assert_null(buf);
	unlink(path);
	free(path);
	free(data);
}

static void test_util_read_file_limits_and_errors(void **state)
{
	char *path = test_temp_file("0123456789", 10);
	char *empty = test_temp_file("", 0);
	char *buf = NULL;
	size_t len = 99;

	(void)state;
	assert_int_equal(util_read_file(path, 10, &buf, &len), 0);
	assert_int_equal(len, 10);
	assert_string_equal(buf, "0123456789");
	free(buf);
	buf = NULL;

	assert_int_equal(util_read_file(path, 9, &buf, &len), -EFBIG);
	assert_int_equal(util_read_file(path, 0, &buf, &len), -EFBIG);
	assert_null(buf);

	assert_int_equal(util_read_file(empty, 0, &buf, &len), 0);
	assert_int_equal(len, 0);
	assert_string_equal(buf, "");
	free(buf);
	buf = NULL;

	assert_int_equal(util_read_file("/nonexistent/troupe/file", 100, &buf, &len), -ENOENT);
	assert_int_equal(util_read_file("/tmp", 100, &buf, &len), -EISDIR);
	assert_null(buf);
	unlink(path);
	unlink(empty);
	free(path);
	free(empty);
}

/* "At most <max> bytes" with no practical limit (SIZE_MAX) reads the file. */
static void test_util_read_file_unbounded_max(void **state)
{
	char *path = test_temp_file("hello", 5);
	char *buf = NULL;
	size_t len = 0;
	int ret = util_read_file(path, SIZE_MAX, &buf, &len);
	bool same = ret == 0 && buf && len == 5 && memcmp(buf, "hello", 6) == 0;

	(void)state;
	unlink(path);
	free(path);
	if (!same)
		print_message("util_read_file(max SIZE_MAX): ret %d, %zu bytes [%.*s]; want 0, 5 "
			      "bytes [hello]\n",
			      ret, len, buf ? (int)len : 0, buf ? buf : "");
	free(buf);
	assert_true(same);
}

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ULL + (uint64_t)ts->tv_nsec;
}

/* A deadline is normalised (nanoseconds below a second) and lies <ns> after
 * the clock's reading, whatever the carry: 0, less than a second, whole
 * seconds, and a fraction that carries into the seconds. */
static void test_util_deadline_after_ns_adds_and_carries(void **state)
{
	static const uint64_t steps[] = { 0, 1, 999999999ULL, 1000000000ULL, 2500000000ULL,
					  3999999999ULL };
	static const clockid_t clocks[] = { CLOCK_MONOTONIC, CLOCK_REALTIME };

	(void)state;
	for (size_t c = 0; c < sizeof(clocks) / sizeof(clocks[0]); c++)
		for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
			struct timespec before, after, d;

			clock_gettime(clocks[c], &before);
			d = util_deadline_after_ns(clocks[c], steps[i]);
			clock_gettime(clocks[c], &after);
			assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
			assert_true(ts_ns(&d) >= ts_ns(&before) + steps[i]);
			assert_true(ts_ns(&d) <= ts_ns(&after) + steps[i]);
		}
}

static void test_util_now_ns_is_monotonic(void **state)
{
	uint64_t prev = util_now_ns();

	(void)state;
	assert_true(prev > 0);
	for (int i = 0; i < 1000; i++) {
		uint64_t now = util_now_ns();

		assert_true(now >= prev);
		prev = now;
	}
}

static void test_json_accessors_check_types(void **state)
{
	cJSON *o = cJSON_Parse("{\"s\":\"x\",\"n\":1,\"o\":{},\"l\":[1],\"S\":\"upper\"}");

	(void)state;
	assert_non_null(o);
	assert_string_equal(json_str(o, "s"), "x");
	assert_null(json_str(o, "n"));
	assert_null(json_str(o, "missing"));
	assert_null(json_str(NULL, "s"));
	/* Keys are matched exactly. */
	assert_string_equal(json_str(o, "S"), "upper");
	assert_non_null(json_obj(o, "o"));
	assert_null(json_obj(o, "l"));
	assert_null(json_obj(NULL, "o"));
	assert_non_null(json_list(cJSON_GetObjectItemCaseSensitive(o, "l")));
	assert_null(json_list(cJSON_GetObjectItemCaseSensitive(o, "o")));
	assert_null(json_list(NULL));
	cJSON_Delete(o);
}

static void test_json_quantity_milli_strings_and_numbers(void **state)
{
	static const struct {
		const char *json;       /* the value of key q */
		int ret;
		int64_t want;
	} cases[] = {
		{ "\"500m\"", 0, 500 },
		{ "\"4Gi\"", 0, INT64_C(4294967296000) },
		{ "\"abc\"", -EINVAL, 0 },
		{ "\"1.5\"", 0, 1500 },
		{ "8", 0, 8000 },
		{ "0.1", 0, 100 },
		{ "1.5", 0, 1500 },
		{ "0.0001", 0, 1 },
		{ "1e3", 0, 1000000 },
		{ "-2", 0, -2000 },
		{ "1e300", -ERANGE, 0 },
		{ "true", -EINVAL, 0 },
		{ "null", -EINVAL, 0 },
		{ "{}", -EINVAL, 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[64];
		cJSON *o;
		int64_t got = -12345;
		int ret;

		snprintf(text, sizeof(text), "{\"q\": %s}", cases[i].json);
		o = cJSON_Parse(text);
		assert_non_null(o);
		ret = json_quantity_milli(cJSON_GetObjectItemCaseSensitive(o, "q"), &got);
		if (ret != cases[i].ret || (ret == 0 && got != cases[i].want)) {
			print_message("%s: got ret %d value %" PRId64 "\n", cases[i].json, ret, got);
			bad++;
		}
		cJSON_Delete(o);
	}
	assert_int_equal(bad, 0);
	{
		int64_t got;

		assert_int_equal(json_quantity_milli(NULL, &got), -EINVAL);
	}
}

/* YAML numbers keep their text, and quantities are read from that text exactly. */
static void test_json_quantity_milli_uses_yaml_number_text(void **state)
{
	static const char yaml[] = "a: 0.1\nb: 1e3\nc: 8\nd: \"250m\"\n";
	cJSON *docs, *doc = yaml_one(yaml, &docs);
	int64_t v;

	(void)state;
	assert_int_equal(json_quantity_milli(cJSON_GetObjectItemCaseSensitive(doc, "a"), &v), 0);
	assert_int_equal(v, 100);
	assert_int_equal(json_quantity_milli(cJSON_GetObjectItemCaseSensitive(doc, "b"), &v), 0);
	assert_int_equal(v, 1000000);
	assert_int_equal(json_quantity_milli(cJSON_GetObjectItemCaseSensitive(doc, "c"), &v), 0);
	assert_int_equal(v, 8000);
	assert_int_equal(json_quantity_milli(cJSON_GetObjectItemCaseSensitive(doc, "d"), &v), 0);
	assert_int_equal(v, 250);
	cJSON_Delete(docs);
}

/* json_find_unsafe: what cJSON would accept or truncate is found, with its offset. */
static void test_json_find_unsafe_flags_control_bytes_and_escaped_nul(void **state)
{
	static const struct {
		const char *text;
		size_t len;     /* 0: strlen */
		long want;
	} cases[] = {
		{ "{\"a\": \"b\"}", 0, -1 },
		{ "{\n\t\"a\":\r\n \"b\"}", 0, -1 },
		{ "{\"a\": \"b\\\\u0000\"}", 0, -1 },        /* escaped backslash, then text */
		{ "{\"a\": \"\\u00001\"}", 0, 7 },
		{ "{\"a\": \"x\\u0000\"}", 0, 8 },
		{ "{\"a\": \"\\u0041\"}", 0, -1 },
		{ "{\"a\": \"b\tc\"}", 0, 8 },                /* raw tab inside a string */
		{ "{\"a\":\x01\"b\"}", 0, 5 },
		{ "{\"a\": \"b\0c\"}", 11, 8 },               /* raw NUL inside a string */
		{ "{\"a\"\0: 1}", 9, 4 },                     /* raw NUL between tokens */
		{ "\"\\\"\\u0000\"", 0, 3 },                  /* after an escaped quote */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);

		if (json_find_unsafe(cases[i].text, len) != cases[i].want)
			fail_msg("case %zu: got %ld, want %ld", i,
				 json_find_unsafe(cases[i].text, len), cases[i].want);
	}
}

/* The scalar definitions the fast scanners must agree with. */
static long ref_find_unsafe(const char *buf, size_t len)
{
	bool in_str = false;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (c < 0x20 && (in_str || (c != ' ' && c != '\t' && c != '\n' && c != '\r')))
			return (long)i;
		if (!in_str) {
			in_str = c == '"';
			continue;
		}
		if (c == '"') {
			in_str = false;
		} else if (c == '\\' && i + 1 < len) {
			i++;
			if (buf[i] == 'u' && i + 4 < len && memcmp(buf + i + 1, "0000", 4) == 0)
				return (long)(i - 1);
		}
	}
	return -1;
}

/* Random texts over an alphabet of the bytes that matter (quotes, escapes,
 * control bytes, whitespace, high bytes, "u0000") at every length and
 * alignment around the 16-byte blocks: json_find_unsafe and json_plain_run give
 * the answers of the plain byte-by-byte definitions. */
static void test_json_scanners_agree_with_byte_by_byte(void **state)
{
	static const char *const pieces[] = { "a", "bc", "\"", "\\", "\\\"", "\n", "\t", "\x01",
					      " ", "\xc3\xa9", "\x80", "u0000", "\\u0000",
					      "0000", "xyzxyzxyzxyzxyzxyz", "{\"k\":\"v\"}" };
	unsigned seed = 99, unsafe = 0;
	char text[256];

	(void)state;
	for (unsigned round = 0; round < 20000; round++) {
		size_t len = 0, want_run = 0;
		unsigned n = (unsigned)rand_r(&seed) % 24;

		for (unsigned k = 0; k < n; k++) {
			const char *p = pieces[rand_r(&seed) % (sizeof(pieces) / sizeof(pieces[0]))];
			size_t pl = strlen(p);

			if (len + pl >= sizeof(text))
				break;
			memcpy(text + len, p, pl);
			len += pl;
		}
		if (json_find_unsafe(text, len) != ref_find_unsafe(text, len))
			fail_msg("round %u: json_find_unsafe %ld, by bytes %ld (len %zu)", round,
				 json_find_unsafe(text, len), ref_find_unsafe(text, len), len);
		unsafe += ref_find_unsafe(text, len) >= 0;
		/* Every start alignment within a 16-byte block, for the SIMD loads. */
		for (size_t k = 0; k < 16 && k <= len; k++) {
			want_run = 0;
			while (k + want_run < len) {
				unsigned char c = (unsigned char)text[k + want_run];

				if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80)
					break;
				want_run++;
			}
			assert_int_equal(json_plain_run(text + k, len - k), want_run);
			assert_int_equal(json_find_unsafe(text + k, len - k),
					 ref_find_unsafe(text + k, len - k));
		}
	}
	assert_true(unsafe > 1000 && unsafe < 19000);
}

/* json_find_invalid: every escape JSON does not allow, or that cJSON would
 * decode to something else than was sent, is found at its backslash, with a
 * reason; valid escapes, surrogate pairs included, pass. */
static void test_json_find_invalid_refuses_bad_escapes(void **state)
{
	static const struct {
		const char *text;
		long want;
		const char *why;        /* in the reason */
	} cases[] = {
		{ "{\"a\":\"gpu-a\\u00zz\"}", 11, "four hex digits" },
		{ "{\"a\":\"\\u12\"}", 6, "four hex digits" },
		{ "{\"a\":\"\\u0000\"}", 6, "u0000" },
		{ "{\"a\":\"\\x41\"}", 6, "unknown escape" },
		{ "{\"a\":\"\\'\"}", 6, "unknown escape" },
		{ "{\"a\":\"\\uDC00\"}", 6, "low surrogate" },
		{ "{\"a\":\"x\\uD83D\"}", 7, "high surrogate" },
		{ "{\"a\":\"\\uD83D\\u0041\"}", 6, "high surrogate" },
		{ "{\"a\":\"\\uD83D\\uD83D\"}", 6, "high surrogate" },
		{ "{\"a\":\"b\tc\"}", 7, "control" },
		{ "{\"a\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}", -1, NULL },
		{ "{\"a\":\"\\u00e9\\u00E9\\uFFFF\"}", -1, NULL },
		{ "{\"a\":\"\\uD83D\\uDE00\"}", -1, NULL },     /* a valid pair */
		{ "{\"\\u0041\":\"\\\\u00zz\"}", -1, NULL },    /* an escaped backslash */
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *why = NULL;
		long at = json_find_invalid(cases[i].text, strlen(cases[i].text), &why);

		if (at != cases[i].want)
			fail_msg("case %zu (%s): got %ld, want %ld", i, cases[i].text, at,
				 cases[i].want);
		if (cases[i].why && (!why || !strstr(why, cases[i].why)))
			fail_msg("case %zu: reason \"%s\" does not say \"%s\"", i, why ? why : "",
				 cases[i].why);
		/* What it passes, cJSON reads; \u00zz would have been read too. */
		if (at < 0) {
			cJSON *j = cJSON_Parse(cases[i].text);

			assert_non_null(j);
			cJSON_Delete(j);
		}
	}
	assert_int_equal(json_find_invalid("\"\\u00zz\"", 8, NULL), 1);
}

/* The byte-by-byte definition of json_find_invalid, for the random test. */
static long ref_find_invalid(const char *buf, size_t len)
{
	bool in_str = false;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (c < 0x20 && (in_str || (c != ' ' && c != '\t' && c != '\n' && c != '\r')))
			return (long)i;
		if (!in_str) {
			in_str = c == '"';
			continue;
		}
		if (c == '"') {
			in_str = false;
		} else if (c == '\\') {
			unsigned v = 0, lo = 0;

			if (i + 1 >= len || !strchr("\"\\/bfnrtu", buf[i + 1]) || !buf[i + 1])
				return (long)i;
			if (buf[i + 1] != 'u') {
				i++;
				continue;
			}
			if (i + 6 > len || sscanf(buf + i + 2, "%4x", &v) != 1)
				return (long)i;
			for (int k = 2; k < 6; k++)
				if (!strchr("0123456789abcdefABCDEF", buf[i + k]) || !buf[i + k])
					return (long)i;
			if (v == 0 || (v >= 0xdc00 && v <= 0xdfff))
				return (long)i;
			if (v >= 0xd800 && v <= 0xdbff) {
				if (i + 12 > len || buf[i + 6] != '\\' || buf[i + 7] != 'u')
					return (long)i;
				for (int k = 8; k < 12; k++)
					if (!strchr("0123456789abcdefABCDEF", buf[i + k]) || !buf[i + k])
						return (long)i;
				sscanf(buf + i + 8, "%4x", &lo);
				if (lo < 0xdc00 || lo > 0xdfff)
					return (long)i;
				i += 11;
			} else {
				i += 5;
			}
		}
	}
	return -1;
}

/* Random texts of escapes, good and bad, around the 16-byte blocks: the fast
 * scanner and the definition agree, at every alignment. */
static void test_json_find_invalid_agrees_with_byte_by_byte(void **state)
{
	static const char *const pieces[] = { "a", "\"", "\\", "\\\"", "\\n", "\\q", "\\u",
					      "\\u0041", "\\u00zz", "\\u0000", "\\uD83D",
					      "\\uDE00", "\\uD83D\\uDE00", "\t", "\xc3\xa9",
					      "xyzxyzxyzxyzxyzxyz", "00", "DE" };
	unsigned seed = 7, bad = 0;
	char text[256];

	(void)state;
	for (unsigned round = 0; round < 20000; round++) {
		size_t len = 1;
		unsigned n = (unsigned)rand_r(&seed) % 20;

		text[0] = '"';
		for (unsigned k = 0; k < n; k++) {
			const char *p = pieces[rand_r(&seed) % ARRAY_SIZE(pieces)];
			size_t pl = strlen(p);

			if (len + pl >= sizeof(text))
				break;
			memcpy(text + len, p, pl);
			len += pl;
		}
		for (size_t k = 0; k < 16 && k <= len; k++)
			if (json_find_invalid(text + k, len - k, NULL) !=
			    ref_find_invalid(text + k, len - k))
				fail_msg("round %u at +%zu: fast %ld, by bytes %ld: %.*s", round, k,
					 json_find_invalid(text + k, len - k, NULL),
					 ref_find_invalid(text + k, len - k), (int)len, text);
		bad += ref_find_invalid(text, len) >= 0;
	}
	assert_true(bad > 1000 && bad < 19000);
}

/* A key given twice means its last value, as Go reads it: json_get and the
 * accessors on it, and json_dedupe in every object (small ones pair by pair,
 * large ones hashed), leaving the members in their order. */
static void test_json_duplicate_keys_take_the_last(void **state)
{
	cJSON *j = cJSON_Parse("{\"a\":\"1\",\"b\":{\"x\":1},\"a\":\"2\",\"b\":{\"x\":2,\"x\":3},"
			       "\"l\":[{\"k\":1,\"k\":2}],\"a\":\"3\"}");
	struct strbuf sb = STRBUF_INIT;
	char *s;

	(void)state;
	assert_non_null(j);
	assert_string_equal(json_str(j, "a"), "3");
	assert_int_equal(json_get(json_obj(j, "b"), "x")->valuedouble, 3);
	assert_null(json_get(json_get(j, "a"), "a"));   /* not an object */
	assert_int_equal(json_dedupe(j), 5);
	s = cJSON_PrintUnformatted(j);
	assert_string_equal(s, "{\"b\":{\"x\":3},\"l\":[{\"k\":2}],\"a\":\"3\"}");
	cJSON_free(s);
	cJSON_Delete(j);

	/* 500 members, each key given twice (k0..k249, then again with other
	 * values), and a nested object given three times. */
	strbuf_putc(&sb, '{');
	for (int i = 0; i < 500; i++)
		strbuf_printf(&sb, "%s\"k%d\":%d", i ? "," : "", i % 250, i);
	strbuf_puts(&sb, ",\"o\":1,\"o\":2,\"o\":{\"z\":1,\"z\":4}}");
	j = cJSON_Parse(sb.buf);
	assert_non_null(j);
	assert_int_equal(json_dedupe(j), 250 + 2 + 1);
	assert_int_equal(cJSON_GetArraySize(j), 251);
	for (int i = 0; i < 250; i++) {
		char key[16];

		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, key)->valuedouble, 250 + i);
	}
	assert_int_equal(json_get(json_obj(j, "o"), "z")->valuedouble, 4);
	assert_int_equal(cJSON_GetArraySize(json_obj(j, "o")), 1);
	cJSON_Delete(j);
	strbuf_fini(&sb);
	assert_int_equal(json_dedupe(NULL), 0);
}

/* json_int_in_range: whole numbers in range only; NaN, infinities, fractions,
 * out-of-range values and values past 2^53 are refused, never cast. */
static void test_json_int_in_range_refuses_what_a_cast_would_break(void **state)
{
	static const struct {
		const char *text;
		int64_t min, max;
		int want;
		int64_t value;
	} cases[] = {
		{ "0", 0, INT64_MAX, 0, 0 },
		{ "7", 0, 10, 0, 7 },
		{ "-2147483648", INT32_MIN, INT32_MAX, 0, INT32_MIN },
		{ "2147483648", INT32_MIN, INT32_MAX, -ERANGE, 0 },
		{ "9007199254740992", 0, INT64_MAX, 0, 9007199254740992LL },
		{ "9007199254740994", 0, INT64_MAX, -ERANGE, 0 },
		{ "9223372036854775808", 0, INT64_MAX, -ERANGE, 0 },     /* 2^63 */
		{ "-9223372036854775809", INT64_MIN, 0, -ERANGE, 0 },
		{ "1e999", 0, INT64_MAX, -ERANGE, 0 },                   /* cJSON: infinity */
		{ "-1e999", INT64_MIN, 0, -ERANGE, 0 },
		{ "1.5", 0, 10, -EINVAL, 0 },
		{ "-1", 0, 10, -ERANGE, 0 },
		{ "1e2", 0, 1000, 0, 100 },
		{ "\"3\"", 0, 10, -EINVAL, 0 },
		{ "null", 0, 10, -EINVAL, 0 },
	};
	cJSON *nan = cJSON_CreateNumber(NAN);
	int64_t v;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		cJSON *j = cJSON_Parse(cases[i].text);
		int ret;

		assert_non_null(j);
		v = -12345;
		ret = json_int_in_range(j, cases[i].min, cases[i].max, &v);
		if (ret != cases[i].want || (ret == 0 && v != cases[i].value) ||
		    (ret != 0 && v != -12345))
			fail_msg("case %zu (%s): got %d, %" PRId64, i, cases[i].text, ret, v);
		cJSON_Delete(j);
	}
	assert_int_equal(json_int_in_range(nan, INT64_MIN, INT64_MAX, &v), -ERANGE);
	assert_int_equal(json_int_in_range(NULL, 0, 1, &v), -EINVAL);
	cJSON_Delete(nan);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_find_unsafe_flags_control_bytes_and_escaped_nul),
		cmocka_unit_test(test_json_scanners_agree_with_byte_by_byte),
		cmocka_unit_test(test_util_read_file_reads_whole_file),
		cmocka_unit_test(test_util_read_file_limits_and_errors),
		cmocka_unit_test(test_util_read_file_unbounded_max),
		cmocka_unit_test(test_util_now_ns_is_monotonic),
		cmocka_unit_test(test_util_deadline_after_ns_adds_and_carries),
		cmocka_unit_test(test_json_accessors_check_types),
		cmocka_unit_test(test_json_quantity_milli_strings_and_numbers),
		cmocka_unit_test(test_json_quantity_milli_uses_yaml_number_text),
		cmocka_unit_test(test_json_find_invalid_refuses_bad_escapes),
		cmocka_unit_test(test_json_find_invalid_agrees_with_byte_by_byte),
		cmocka_unit_test(test_json_duplicate_keys_take_the_last),
		cmocka_unit_test(test_json_int_in_range_refuses_what_a_cast_would_break),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
