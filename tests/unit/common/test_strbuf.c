/* Unit tests for common/strbuf.c: the growable buffer, and its JSON string
 * escaping checked against cJSON and an independent UTF-8 check.
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

#include <cjson/cJSON.h>

#include "common/strbuf.h"
#include "common/util.h"

#include "fixture.h"

/* An independent UTF-8 check: well-formed, no overlongs, no surrogates. */
static bool utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t len;
		uint32_t cp, min;

		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xC2 && c <= 0xDF) {
			len = 2, cp = c & 0x1F, min = 0x80;
		} else if (c >= 0xE0 && c <= 0xEF) {
			len = 3, cp = c & 0x0F, min = 0x800;
		} else if (c >= 0xF0 && c <= 0xF4) {
			len = 4, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (i + len > n)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		if (cp < min || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
			return false;
		i += len;
	}
	return true;
}

/* Escape <in> and return the text (caller frees). */
static char *json_escape(const char *in, size_t len, size_t *outlen)
{
	struct strbuf sb = STRBUF_INIT;
	char *out;

	strbuf_put_json_str(&sb, in, len);
	assert_false(strbuf_failed(&sb));
	out = strbuf_take(&sb, outlen);
	assert_non_null(out);
	return out;
}

static void test_strbuf_put_json_str_escapes(void **state)
{
	static const struct {
		const char *in;
		size_t len;
		const char *want;
	} cases[] = {
		{ "plain", 5, "\"plain\"" },
		{ "", 0, "\"\"" },
		{ "say \"hi\"", 8, "\"say \\\"hi\\\"\"" },
		{ "a\\b", 3, "\"a\\\\b\"" },
		{ "\n\r\t", 3, "\"\\n\\r\\t\"" },
		{ "\x01\x1f", 2, "\"\\u0001\\u001f\"" },
		{ "\b\f", 2, "\"\\u0008\\u000c\"" },
		{ "a\0b", 3, "\"a\\u0000b\"" },
		{ "\x7f", 1, "\"\x7f\"" },
		{ "/", 1, "\"/\"" },
		/* Valid UTF-8 passes through unchanged. */
		{ "caf\xc3\xa9", 5, "\"caf\xc3\xa9\"" },
		{ "\xe2\x82\xac", 3, "\"\xe2\x82\xac\"" },
		{ "\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\"" },
		{ "\xef\xbf\xbf", 3, "\"\xef\xbf\xbf\"" },
		{ "\xf4\x8f\xbf\xbf", 4, "\"\xf4\x8f\xbf\xbf\"" },
		/* Each invalid byte becomes U+FFFD. */
		{ "\xff", 1, "\"\\ufffd\"" },
		{ "a\x80z", 3, "\"a\\ufffdz\"" },
		{ "\xc3", 1, "\"\\ufffd\"" },
		{ "\xc3(", 2, "\"\\ufffd(\"" },
		{ "\xc0\xaf", 2, "\"\\ufffd\\ufffd\"" },
		{ "\xe0\x80\xaf", 3, "\"\\ufffd\\ufffd\\ufffd\"" },
		{ "\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"" },
		{ "\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" },
		{ "\xe2\x82", 2, "\"\\ufffd\\ufffd\"" },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t len;
		char *out = json_escape(cases[i].in, cases[i].len, &len);

		if (strcmp(out, cases[i].want) != 0 || len != strlen(cases[i].want)) {
			print_message("case %zu: got [%s], want [%s]\n", i, out, cases[i].want);
			bad++;
		}
		free(out);
	}
	assert_int_equal(bad, 0);
}

/* Every length up to 80, plain or with one byte to escape at every position,
 * appended after earlier content: the 16-bytes-at-a-time path for plain text
 * and the escaping path give the same text as escaping byte by byte, and the
 * earlier content and the terminator are intact. */
static void test_strbuf_put_json_str_every_length_and_position(void **state)
{
	static const char special[] = { '"', '\\', '\n', 0x01, (char)0xff };
	static const char *const escaped[] = { "\\\"", "\\\\", "\\n", "\\u0001", "\\ufffd" };

	(void)state;
	for (size_t len = 0; len <= 80; len++) {
		for (size_t at = 0; at <= len; at++) {          /* at == len: plain */
			for (size_t k = 0; k < (at < len ? ARRAY_SIZE(special) : 1); k++) {
				struct strbuf sb = STRBUF_INIT;
				char in[81], want[200];
				size_t w = 0;

				for (size_t i = 0; i < len; i++)
					in[i] = (char)('a' + (i * 7 + len) % 26);
				if (at < len)
					in[at] = special[k];
				strbuf_puts(&sb, "prefix,");
				strbuf_put_json_str(&sb, in, len);
				w += (size_t)snprintf(want + w, sizeof(want) - w, "prefix,\"");
				for (size_t i = 0; i < len; i++)
					w += (size_t)snprintf(want + w, sizeof(want) - w, "%s",
							      i == at ? escaped[k]
								      : (char[2]){ in[i], 0 });
				snprintf(want + w, sizeof(want) - w, "\"");
				assert_false(strbuf_failed(&sb));
				assert_string_equal(sb.buf, want);
				assert_int_equal(sb.len, strlen(want));
				strbuf_fini(&sb);
			}
		}
	}
}

/* For valid UTF-8 without NUL, the output parses back to the same string. */
static void test_strbuf_put_json_str_round_trips_through_cjson(void **state)
{
	static const char *const inputs[] = {
		"plain", "", "say \"hi\"", "back\\slash", "line\nbreak\r\ttab", "\x01\x02\x1f",
		"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "{\"json\": [1, 2]}", "\x7f",
		"</script>",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(inputs); i++) {
		char *out = json_escape(inputs[i], strlen(inputs[i]), NULL);
		cJSON *j = cJSON_Parse(out);

		assert_non_null(j);
		assert_true(cJSON_IsString(j));
		assert_string_equal(j->valuestring, inputs[i]);
		cJSON_Delete(j);
		free(out);
	}
}

/* Property: for any bytes, the output is one valid JSON string literal in valid
 * UTF-8 with no raw control characters; for valid UTF-8 input it round-trips. */
static void test_strbuf_put_json_str_any_bytes_give_valid_json(void **state)
{
	uint64_t seed = 0x9e3779b97f4a7c15ULL;

	(void)state;
	for (int iter = 0; iter < 3000; iter++) {
		unsigned char in[48];
		size_t len = rng_next(&seed) % sizeof(in), outlen;
		char *out;
		cJSON *j;

		for (size_t k = 0; k < len; k++) {
			uint64_t r = rng_next(&seed);

			/* Favour bytes that matter: ASCII, specials, UTF-8 leads. */
			if (r % 4 == 0)
				in[k] = (unsigned char)"\"\\\n\x01"[(r >> 8) % 4];
			else
				in[k] = (unsigned char)(r >> 16);
		}
		out = json_escape((const char *)in, len, &outlen);
		assert_int_equal(strlen(out), outlen);
		assert_true(outlen >= 2 && out[0] == '"' && out[outlen - 1] == '"');
		assert_true(utf8_valid((const unsigned char *)out, outlen));
		for (size_t k = 0; k < outlen; k++)
			assert_true((unsigned char)out[k] >= 0x20);
		j = cJSON_Parse(out);
		assert_non_null(j);
		assert_true(cJSON_IsString(j));
		if (utf8_valid(in, len) && !memchr(in, 0, len)) {
			assert_int_equal(strlen(j->valuestring), len);
			assert_memory_equal(j->valuestring, in, len);
		}
		cJSON_Delete(j);
		free(out);
	}
}

static void test_strbuf_put_i64_extremes(void **state)
{
	static const int64_t values[] = { 0, 1, -1, 9, 10, -10, 42, 1000000007, INT64_MAX,
					  INT64_MIN, INT64_MIN + 1 };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(values); i++) {
		struct strbuf sb = STRBUF_INIT;
		char want[32];

		strbuf_puts(&sb, "v=");
		strbuf_put_i64(&sb, values[i]);
		snprintf(want, sizeof(want), "v=%" PRId64, values[i]);
		assert_string_equal(sb.buf, want);
		assert_int_equal(sb.len, strlen(want));
		strbuf_fini(&sb);
	}
}

static void test_strbuf_append_grows_and_stays_terminated(void **state)
{
	struct strbuf sb;
	char *out;
	size_t len;

	(void)state;
	strbuf_init(&sb);
	for (int i = 0; i < 10000; i++) {
		strbuf_putc(&sb, (char)('a' + i % 26));
		assert_int_equal(sb.buf[sb.len], '\0');
	}
	strbuf_printf(&sb, "|%d|%s|", 12345, "end");
	strbuf_append(&sb, "xyz", 2);
	assert_int_equal(sb.len, 10000 + strlen("|12345|end|") + 2);
	assert_true(sb.cap > sb.len);
	for (int i = 0; i < 10000; i++)
		assert_int_equal(sb.buf[i], 'a' + i % 26);
	assert_string_equal(sb.buf + 10000, "|12345|end|xy");
	assert_false(strbuf_failed(&sb));
	out = strbuf_take(&sb, &len);
	assert_int_equal(len, 10000 + 13);
	assert_int_equal(out[len], '\0');
	/* Taking resets the buffer. */
	assert_null(sb.buf);
	assert_int_equal(sb.len, 0);
	free(out);
}

static void test_strbuf_take_empty_gives_empty_string(void **state)
{
	struct strbuf sb = STRBUF_INIT;
	size_t len = 99;
	char *out = strbuf_take(&sb, &len);

	(void)state;
	assert_non_null(out);
	assert_string_equal(out, "");
	assert_int_equal(len, 0);
	free(out);
}

/* After one failed reservation every append does nothing, and take gives NULL. */
static void test_strbuf_failure_is_sticky(void **state)
{
	struct strbuf sb = STRBUF_INIT;

	(void)state;
	strbuf_puts(&sb, "ok");
	assert_int_equal(strbuf_reserve(&sb, SIZE_MAX - 16), -ENOMEM);
	assert_true(strbuf_failed(&sb));
	strbuf_puts(&sb, "more");
	strbuf_put_i64(&sb, 7);
	strbuf_put_json_str(&sb, "x", 1);
	assert_int_equal(sb.len, 2);
	assert_int_equal(strbuf_reserve(&sb, 1), -ENOMEM);
	assert_null(strbuf_take(&sb, NULL));
	assert_false(strbuf_failed(&sb));
}

/* A reservation no size_t can hold fails rather than wrapping around. */
static void test_strbuf_reserve_refuses_impossible_sizes(void **state)
{
	static const size_t extras[] = { SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 2, SIZE_MAX / 2 + 1 };
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(extras); i++) {
		struct strbuf sb = STRBUF_INIT;
		int ret;

		strbuf_puts(&sb, "ok");
		ret = strbuf_reserve(&sb, extras[i]);
		if (ret != -ENOMEM || !strbuf_failed(&sb)) {
			print_message("strbuf_reserve(len 2, extra %#zx): got %d, failed=%d; want "
				      "-ENOMEM, failed=1\n",
				      extras[i], ret, strbuf_failed(&sb));
			bad++;
		}
		strbuf_fini(&sb);
	}
	assert_int_equal(bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strbuf_put_json_str_escapes),
		cmocka_unit_test(test_strbuf_put_json_str_every_length_and_position),
		cmocka_unit_test(test_strbuf_put_json_str_round_trips_through_cjson),
		cmocka_unit_test(test_strbuf_put_json_str_any_bytes_give_valid_json),
		cmocka_unit_test(test_strbuf_put_i64_extremes),
		cmocka_unit_test(test_strbuf_append_grows_and_stays_terminated),
		cmocka_unit_test(test_strbuf_take_empty_gives_empty_string),
		cmocka_unit_test(test_strbuf_failure_is_sticky),
		cmocka_unit_test(test_strbuf_reserve_refuses_impossible_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
