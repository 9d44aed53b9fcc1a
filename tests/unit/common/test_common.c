/* Unit tests for src/common: quantities, the string buffer and its JSON escaping,
 * the string map, YAML to JSON, file and JSON helpers, and log levels.
 *
 * Each case states one behaviour of a header's contract. Where inputs vary the
 * cases are tables; a table checks every row and reports each mismatch before
 * failing, so one run shows every row that disagrees with the contract.
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

#include "common/log.h"
#include "common/quantity.h"
#include "common/strbuf.h"
#include "common/strmap.h"
#include "common/util.h"
#include "common/yamljson.h"

/* A small deterministic generator (xorshift64*), so fuzz cases reproduce. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

/* Write <len> bytes to a new temporary file and return its path (caller
 * unlinks and frees it). */
static char *temp_file_with(const char *data, size_t len)
{
	char *path = strdup("/tmp/troupe-test-common-XXXXXX");
	int fd;

	assert_non_null(path);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	while (len > 0) {
		ssize_t w = write(fd, data, len);

		assert_true(w > 0);
		data += w;
		len -= (size_t)w;
	}
	close(fd);
	return path;
}

/* ---- quantity -------------------------------------------------------------- */

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

/* ---- strbuf ---------------------------------------------------------------- */

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

/* ---- strmap ---------------------------------------------------------------- */

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

/* ---- yamljson ---------------------------------------------------------------- */

/* Parse <yaml>, expect success and one document; return the document (the
 * caller deletes *docs). */
static cJSON *yaml_one(const char *yaml, cJSON **docs)
{
	char err[256];

	*docs = yamljson_parse(yaml, strlen(yaml), err, sizeof(err));
	if (!*docs)
		fail_msg("yamljson_parse failed: %s\n--- input ---\n%s", err, yaml);
	assert_int_equal(cJSON_GetArraySize(*docs), 1);
	return cJSON_GetArrayItem(*docs, 0);
}

enum jtype { J_NULL, J_TRUE, J_FALSE, J_NUMBER, J_STRING };

static void test_yamljson_scalar_types(void **state)
{
	static const struct {
		const char *yaml;       /* the value of key v */
		enum jtype type;
		const char *text;       /* string value, or a number's source text */
		double num;
	} cases[] = {
		{ "8", J_NUMBER, "8", 8 },
		{ "\"8\"", J_STRING, "8", 0 },
		{ "'8'", J_STRING, "8", 0 },
		{ "!!str 8", J_STRING, "8", 0 },
		{ "-3", J_NUMBER, "-3", -3 },
		{ "0.1", J_NUMBER, "0.1", 0.1 },
		{ "1e3", J_NUMBER, "1e3", 1000 },
		{ ".5", J_NUMBER, ".5", 0.5 },
		{ "0x1F", J_NUMBER, "0x1F", 31 },
		{ "4Gi", J_STRING, "4Gi", 0 },
		{ "500m", J_STRING, "500m", 0 },
		{ "1.2.3", J_STRING, "1.2.3", 0 },
		{ "abc", J_STRING, "abc", 0 },
		{ "null", J_NULL, NULL, 0 },
		{ "~", J_NULL, NULL, 0 },
		{ "", J_NULL, NULL, 0 },
		{ "\"null\"", J_STRING, "null", 0 },
		{ "\"\"", J_STRING, "", 0 },
		{ "true", J_TRUE, NULL, 0 },
		{ "True", J_TRUE, NULL, 0 },
		{ "false", J_FALSE, NULL, 0 },
		{ "\"true\"", J_STRING, "true", 0 },
		{ "|\n  two\n  lines\n", J_STRING, "two\nlines\n", 0 },
		{ ">-\n  folded\n  text\n", J_STRING, "folded text", 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char yaml[128], err[256];
		cJSON *docs, *v;
		bool ok;

		snprintf(yaml, sizeof(yaml), "v: %s\n", cases[i].yaml);
		docs = yamljson_parse(yaml, strlen(yaml), err, sizeof(err));
		if (!docs) {
			print_message("[%s]: parse failed: %s\n", cases[i].yaml, err);
			bad++;
			continue;
		}
		v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(docs, 0), "v");
		switch (cases[i].type) {
		case J_NULL: ok = cJSON_IsNull(v); break;
		case J_TRUE: ok = cJSON_IsTrue(v); break;
		case J_FALSE: ok = cJSON_IsFalse(v); break;
		case J_NUMBER:
			ok = cJSON_IsNumber(v) && v->valuedouble == cases[i].num &&
			     v->valuestring && strcmp(v->valuestring, cases[i].text) == 0;
			break;
		default:
			ok = cJSON_IsString(v) && strcmp(v->valuestring, cases[i].text) == 0;
			break;
		}
		if (!ok) {
			char *got = v ? cJSON_PrintUnformatted(v) : NULL;

			print_message("[%s]: got %s\n", cases[i].yaml, got ? got : "(absent)");
			free(got);
			bad++;
		}
		cJSON_Delete(docs);
	}
	assert_int_equal(bad, 0);
}

static void test_yamljson_nested_maps_and_lists(void **state)
{
	static const char yaml[] = "kind: List\n"
				   "items:\n"
				   "  - kind: Node\n"
				   "    metadata:\n"
				   "      name: n1\n"
				   "      labels: {zone: a, \"gpu.count\": \"8\"}\n"
				   "    list: [1, two, [3]]\n"
				   "  - {}\n"
				   "  - []\n"
				   "8: number key\n"
				   "true: bool key\n";
	cJSON *docs, *doc = yaml_one(yaml, &docs);
	const cJSON *items, *n, *labels, *list;

	(void)state;
	assert_true(cJSON_IsObject(doc));
	assert_string_equal(json_str(doc, "kind"), "List");
	items = json_list(cJSON_GetObjectItemCaseSensitive(doc, "items"));
	assert_non_null(items);
	assert_int_equal(cJSON_GetArraySize(items), 3);
	n = cJSON_GetArrayItem(items, 0);
	assert_string_equal(json_str(json_obj(n, "metadata"), "name"), "n1");
	labels = json_obj(json_obj(n, "metadata"), "labels");
	assert_string_equal(json_str(labels, "zone"), "a");
	assert_string_equal(json_str(labels, "gpu.count"), "8");
	list = json_list(cJSON_GetObjectItemCaseSensitive(n, "list"));
	assert_int_equal(cJSON_GetArraySize(list), 3);
	assert_true(cJSON_IsNumber(cJSON_GetArrayItem(list, 0)));
	assert_string_equal(cJSON_GetArrayItem(list, 1)->valuestring, "two");
	assert_true(cJSON_IsArray(cJSON_GetArrayItem(list, 2)));
	assert_true(cJSON_IsObject(cJSON_GetArrayItem(items, 1)));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(items, 1)), 0);
	assert_true(cJSON_IsArray(cJSON_GetArrayItem(items, 2)));
	/* Scalar keys become their text. */
	assert_string_equal(json_str(doc, "8"), "number key");
	assert_string_equal(json_str(doc, "true"), "bool key");
	cJSON_Delete(docs);
}

static void test_yamljson_multiple_documents(void **state)
{
	static const struct {
		const char *yaml;
		int docs;
	} cases[] = {
		{ "", 0 },
		{ "# only a comment\n", 0 },
		{ "a: 1\n", 1 },
		{ "---\na: 1\n", 1 },
		{ "a: 1\n---\nb: 2\n", 2 },
		{ "---\na: 1\n...\n---\nb: 2\n...\n---\n- 3\n", 3 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[256];
		cJSON *docs = yamljson_parse(cases[i].yaml, strlen(cases[i].yaml), err, sizeof(err));

		if (!docs || !cJSON_IsArray(docs) || cJSON_GetArraySize(docs) != cases[i].docs) {
			print_message("case %zu: %s, %d documents, want %d\n", i,
				      docs ? "parsed" : err, docs ? cJSON_GetArraySize(docs) : -1,
				      cases[i].docs);
			bad++;
		}
		cJSON_Delete(docs);
	}
	assert_int_equal(bad, 0);

	{
		static const char two[] = "a: 1\n---\nb: [x]\n";
		char err[256];
		cJSON *docs = yamljson_parse(two, strlen(two), err, sizeof(err));

		assert_non_null(docs);
		assert_int_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(docs, 0), "a")
					 ->valuedouble,
				 1);
		assert_non_null(json_list(
			cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(docs, 1), "b")));
		cJSON_Delete(docs);
	}
}

/* Refusals come back as NULL with a message naming the line and the reason. */
static void test_yamljson_refusals_name_line_and_reason(void **state)
{
	static const struct {
		const char *yaml;
		const char *line;       /* "line N," expected in the message */
		const char *reason;     /* substring expected in the message, or NULL */
	} cases[] = {
		{ "a: &x 1\nb: *x\n", "line 2,", "alias" },
		{ "base: &b {cpu: 1}\nother:\n  <<: *b\n", "line 3,", "alias" },
		{ "a: 1\nb: 2\na: 3\n", "line 3,", "duplicate" },
		{ "m:\n  k: 1\n  k: 2\n", "line 3,", "duplicate" },
		{ "a: 1\nb: 2\n  c: 3\n", "line 3,", NULL },
		{ "a: [1, 2\nb: 3\n", "line ", NULL },
		{ "a: \"unterminated\n", "line ", NULL },
		{ "? [1, 2]\n: v\n", "line 1,", "key" },
		{ "a: 1\n\tb: 2\n", "line 2,", NULL },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[256] = "untouched";
		cJSON *docs = yamljson_parse(cases[i].yaml, strlen(cases[i].yaml), err, sizeof(err));

		if (docs || !strstr(err, cases[i].line) ||
		    (cases[i].reason && !strstr(err, cases[i].reason))) {
			print_message("case %zu: %s, message [%s]\n", i,
				      docs ? "accepted" : "refused", err);
			bad++;
		}
		cJSON_Delete(docs);
	}
	assert_int_equal(bad, 0);
}

/* Build <depth> nested flow sequences: "[[[...]]]". */
static char *nested_flow(size_t depth)
{
	char *s = malloc(2 * depth + 2);

	assert_non_null(s);
	memset(s, '[', depth);
	memset(s + depth, ']', depth);
	s[2 * depth] = '\n';
	s[2 * depth + 1] = '\0';
	return s;
}

static void test_yamljson_depth_is_bounded(void **state)
{
	char err[256];
	char *ok = nested_flow(YAMLJSON_MAX_DEPTH);
	char *deep = nested_flow(YAMLJSON_MAX_DEPTH + 10);
	char *huge = nested_flow(200000);
	cJSON *docs;

	(void)state;
	/* YAMLJSON_MAX_DEPTH levels are accepted. */
	docs = yamljson_parse(ok, strlen(ok), err, sizeof(err));
	assert_non_null(docs);
	cJSON_Delete(docs);

	docs = yamljson_parse(deep, strlen(deep), err, sizeof(err));
	assert_null(docs);
	assert_non_null(strstr(err, "line 1,"));

	/* Far deeper than any stack could take by recursion: refused, no crash. */
	docs = yamljson_parse(huge, strlen(huge), err, sizeof(err));
	assert_null(docs);
	assert_true(err[0] != '\0');
	free(ok);
	free(deep);
	free(huge);
}

/* Block-style nesting is bounded the same way. */
static void test_yamljson_depth_is_bounded_block_style(void **state)
{
	enum { LEVELS = YAMLJSON_MAX_DEPTH + 5 };
	struct strbuf sb = STRBUF_INIT;
	char err[256];
	cJSON *docs;

	(void)state;
	for (int i = 0; i < LEVELS; i++) {
		for (int k = 0; k < i; k++)
			strbuf_putc(&sb, ' ');
		strbuf_puts(&sb, "k:\n");
	}
	docs = yamljson_parse(sb.buf, sb.len, err, sizeof(err));
	assert_null(docs);
	assert_non_null(strstr(err, "line "));
	strbuf_fini(&sb);
}

static void test_yamljson_is_json_first_byte(void **state)
{
	static const struct {
		const char *in;
		int want;
	} cases[] = {
		{ "{}", 1 }, { "[1]", 1 }, { " \n\t\r{", 1 }, { "a: 1", 0 }, { "", 0 },
		{ "   ", 0 }, { "# {", 0 }, { "- [1]", 0 },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		assert_int_equal(!!yamljson_is_json(cases[i].in, strlen(cases[i].in)),
				 cases[i].want);
}

/* ---- util ---------------------------------------------------------------------- */

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
	path = temp_file_with(data, N);
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
	char *path = temp_file_with("0123456789", 10);
	char *empty = temp_file_with("", 0);
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
	char *path = temp_file_with("hello", 5);
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

/* ---- log ----------------------------------------------------------------------- */

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantity_parse_milli_grammar),
		cmocka_unit_test(test_json_find_unsafe_flags_control_bytes_and_escaped_nul),
		cmocka_unit_test(test_json_scanners_agree_with_byte_by_byte),
		cmocka_unit_test(test_quantity_parse_milli_rounds_up),
		cmocka_unit_test(test_quantity_parse_milli_honours_len),
		cmocka_unit_test(test_quantity_parse_count_whole_only),
		cmocka_unit_test(test_strbuf_put_json_str_escapes),
		cmocka_unit_test(test_strbuf_put_json_str_every_length_and_position),
		cmocka_unit_test(test_strbuf_put_json_str_round_trips_through_cjson),
		cmocka_unit_test(test_strbuf_put_json_str_any_bytes_give_valid_json),
		cmocka_unit_test(test_strbuf_put_i64_extremes),
		cmocka_unit_test(test_strbuf_append_grows_and_stays_terminated),
		cmocka_unit_test(test_strbuf_take_empty_gives_empty_string),
		cmocka_unit_test(test_strbuf_failure_is_sticky),
		cmocka_unit_test(test_strbuf_reserve_refuses_impossible_sizes),
		cmocka_unit_test(test_strmap_put_get_del_overwrite),
		cmocka_unit_test(test_strmap_iteration_visits_each_live_entry_once),
		cmocka_unit_test(test_strmap_grows_to_10000_keys_with_tombstones),
		cmocka_unit_test(test_strmap_churn_keeps_table_small),
		cmocka_unit_test(test_yamljson_scalar_types),
		cmocka_unit_test(test_yamljson_nested_maps_and_lists),
		cmocka_unit_test(test_yamljson_multiple_documents),
		cmocka_unit_test(test_yamljson_refusals_name_line_and_reason),
		cmocka_unit_test(test_yamljson_depth_is_bounded),
		cmocka_unit_test(test_yamljson_depth_is_bounded_block_style),
		cmocka_unit_test(test_yamljson_is_json_first_byte),
		cmocka_unit_test(test_util_read_file_reads_whole_file),
		cmocka_unit_test(test_util_read_file_limits_and_errors),
		cmocka_unit_test(test_util_read_file_unbounded_max),
		cmocka_unit_test(test_util_now_ns_is_monotonic),
		cmocka_unit_test(test_json_accessors_check_types),
		cmocka_unit_test(test_json_quantity_milli_strings_and_numbers),
		cmocka_unit_test(test_json_quantity_milli_uses_yaml_number_text),
		cmocka_unit_test(test_log_level_parse_names),
		cmocka_unit_test(test_log_level_name_round_trips),
		cmocka_unit_test(test_log_enabled_follows_level),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
