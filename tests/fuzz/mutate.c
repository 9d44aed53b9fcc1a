/* The mutation engine: byte-level mutations (bit flips, byte sets, inserts,
 * deletes, duplicated ranges, splices from another corpus entry, truncation)
 * and JSON-aware ones over a rough tokenisation of the input (numbers swapped
 * for the literals that break integer and float conversions, escapes put into
 * strings, members duplicated, values nested deep, array elements repeated,
 * values swapped for other types or dictionary words). The tokeniser never
 * needs valid JSON: it finds what looks like strings, numbers and literals.
 *
 * Everything is drawn from the caller's generator, so a seed replays.
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The buffer ------------------------------------------------------------ */

static void buf_reserve(struct fuzz_buf *b, size_t need)
{
	size_t cap = b->cap ? b->cap : 256;
	uint8_t *d;

	if (need <= b->cap)
		return;
	while (cap < need)
		cap *= 2;
	d = realloc(b->data, cap);
	if (!d) {
		fprintf(stderr, "fuzz: out of memory (%zu bytes)\n", cap);
		abort();
	}
	b->data = d;
	b->cap = cap;
}

void fuzz_buf_set(struct fuzz_buf *b, const uint8_t *data, size_t len)
{
	buf_reserve(b, len + 1);
	if (len)
		memcpy(b->data, data, len);
	b->len = len;
}

void fuzz_buf_replace(struct fuzz_buf *b, size_t pos, size_t n, const void *src, size_t m)
{
	if (pos > b->len)
		pos = b->len;
	if (n > b->len - pos)
		n = b->len - pos;
	buf_reserve(b, b->len - n + m + 1);
	memmove(b->data + pos + m, b->data + pos + n, b->len - pos - n);
	if (m)
		memcpy(b->data + pos, src, m);
	b->len = b->len - n + m;
}

void fuzz_buf_fini(struct fuzz_buf *b)
{
	free(b->data);
	*b = (struct fuzz_buf){ 0 };
}

uint64_t fuzz_rand(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ULL;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

size_t fuzz_below(uint64_t *s, size_t n)
{
	return n ? (size_t)(fuzz_rand(s) % n) : 0;
}

/* ---- What the JSON-aware mutations put in ------------------------------------ */

/* Numbers at the edges of every conversion the parsers make: double to int64,
 * int32 and uint32, overflow to infinity, negative zero, what JSON forbids. */
static const char *const numbers[] = {
	"1e309", "-1e309", "-0", "0", "-1", "1", "9223372036854775808", "9223372036854775807",
	"-9223372036854775808", "-9223372036854775809", "18446744073709551616",
	"4294967296", "4294967295", "2147483648", "2147483647", "-2147483649", "1.5", "0.5",
	"-0.5", "1e-400", "NaN", "Infinity", "-Infinity", "1E2", "01", "1.", ".5", "+1", "0x10",
	"63", "64", "65", "255", "256", "257", "1e18", "1e19", "99999999999999999999999",
	"2.5e9", "1e6", "-1e18", "4.9e-324", "1.7976931348623157e308", "100000", "1000",
	"65536", "32768", "-32769", "3.000000000000001",
};

/* Escapes and bytes strings should not carry, or carry only one way. */
static const char *const escapes[] = {
	"\\u00zz", "\\ud800", "\\udc00", "\\ud800\\udc00", "\\u0000", "\\u", "\\u12", "\\x41",
	"\\", "\\\"", "\\/", "\\uffff", "\\ufeff", "\\u002f", "\\u0022", "\\u005c", "\xc0\x80",
	"\xed\xa0\x80", "\xff", "\xfe", "\t", "\n", "\r", "\x01", "\x7f", "\\n", "\\b", "\\q",
	"\xe2\x80\xa8", "\xf0\x9f\x98\x80", "%", "%s%n", "/", "..", ",", "\"", "\xc3",
};

/* Values that replace a value of another type. */
static const char *const values[] = {
	"null", "true", "false", "[]", "{}", "\"\"", "\"x\"", "0", "[null]", "[[]]", "{\"\":0}",
	"[1,2,3]", "\"-1\"", "\"1e309\"", "\"9223372036854775808\"", "\"4k\"", "\"1Ei\"",
	"\"0.0001\"", "\"4.5\"", "\"8Ki\"", "\"+4\"", "\"4e\"", "\"1E18\"", "\" 4\"", "\"1m\"",
	"\"0,1,2,3\"", "\"63,63,63\"", "\"64\"", "\"-1,0\"", "\"0-7\"", "\"999999\"",
	"\"True\"", "\"False\"", "\"Unknown\"", "\"Running\"", "\"Pending\"", "\"Succeeded\"",
	"\"2026-01-01T00:00:00Z\"", "\"NoSchedule\"", "\"NoExecute\"", "\"nvidia.com/gpu\"",
};

/* ---- A rough tokenisation ---------------------------------------------------- */

enum tok_kind { T_STRING, T_KEY, T_NUMBER, T_LITERAL, T_OPEN };

struct tok {
	enum tok_kind kind;
	size_t at, len;
};

enum { MAX_TOKS = 4096 };

static size_t string_close(const uint8_t *d, size_t len, size_t at)
{
	size_t i = at + 1;

	while (i < len && d[i] != '"')
		i += d[i] == '\\' ? 2 : 1;
	return i < len ? i : len - 1;
}

static size_t tokenize(const struct fuzz_buf *b, struct tok *t)
{
	const uint8_t *d = b->data;
	size_t n = 0, i = 0;

	while (i < b->len && n < MAX_TOKS) {
		uint8_t c = d[i];

		if (c == '"') {
			size_t e = string_close(d, b->len, i), k = e + 1;

			while (k < b->len && (d[k] == ' ' || d[k] == '\n' || d[k] == '\t'))
				k++;
			t[n++] = (struct tok){ k < b->len && d[k] == ':' ? T_KEY : T_STRING, i,
					       e + 1 - i };
			i = e + 1;
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			size_t s = i;

			while (i < b->len && strchr("0123456789+-.eE", d[i]) && d[i])
				i++;
			t[n++] = (struct tok){ T_NUMBER, s, i - s };
		} else if (c == 't' || c == 'f' || c == 'n') {
			size_t s = i;

			while (i < b->len && d[i] >= 'a' && d[i] <= 'z')
				i++;
			t[n++] = (struct tok){ T_LITERAL, s, i - s };
		} else if (c == '{' || c == '[') {
			t[n++] = (struct tok){ T_OPEN, i, 1 };
			i++;
		} else {
			i++;
		}
	}
	return n;
}

/* The end of the value starting at <at> (balanced brackets, strings skipped). */
static size_t value_end(const struct fuzz_buf *b, size_t at)
{
	const uint8_t *d = b->data;
	int depth = 0;
	size_t i = at;

	if (at >= b->len)
		return b->len;
	if (d[at] != '{' && d[at] != '[') {
		if (d[at] == '"')
			return string_close(d, b->len, at) + 1;
		while (i < b->len && !strchr(",}] \n\t", d[i]))
			i++;
		return i;
	}
	for (; i < b->len; i++) {
		if (d[i] == '"')
			i = string_close(d, b->len, i);
		else if (d[i] == '{' || d[i] == '[')
			depth++;
		else if ((d[i] == '}' || d[i] == ']') && --depth == 0)
			return i + 1;
	}
	return b->len;
}

/* A random token of one of the kinds in <mask> (bit per kind), or -1. */
static long pick(const struct tok *t, size_t n, unsigned mask, uint64_t *rng)
{
	size_t start = fuzz_below(rng, n ? n : 1);

	for (size_t k = 0; k < n; k++) {
		size_t i = (start + k) % n;

		if (mask & (1u << t[i].kind))
			return (long)i;
	}
	return -1;
}

static const char *choose(const char *const *list, size_t n, uint64_t *rng)
{
	return list[fuzz_below(rng, n)];
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static size_t dict_len(const char *const *dict)
{
	size_t n = 0;

	while (dict && dict[n])
		n++;
	return n;
}

/* The position after the value a key token names, its value starting at *vat. */
static size_t member_end(const struct fuzz_buf *b, const struct tok *key, size_t *vat)
{
	size_t i = key->at + key->len;

	while (i < b->len && b->data[i] != ':')
		i++;
	i++;
	while (i < b->len && (b->data[i] == ' ' || b->data[i] == '\n'))
		i++;
	*vat = i;
	return value_end(b, i);
}

/* ---- Mutations ----------------------------------------------------------------- */

static bool mutate_json(struct fuzz_buf *b, const char *const *dict, uint64_t *rng)
{
	static struct tok t[MAX_TOKS];
	size_t n = tokenize(b, t), nd = dict_len(dict);
	long i;
	char tmp[160];

	switch (fuzz_below(rng, 10)) {
	case 0: /* a number at a conversion's edge */
		if ((i = pick(t, n, 1u << T_NUMBER, rng)) < 0)
			return false;
		fuzz_buf_replace(b, t[i].at, t[i].len, tmp,
				 (size_t)snprintf(tmp, sizeof(tmp), "%s", choose(numbers, N(numbers), rng)));
		return true;
	case 1: { /* an escape or odd byte inside a string or key */
		const char *e = choose(escapes, N(escapes), rng);

		if ((i = pick(t, n, (1u << T_STRING) | (1u << T_KEY), rng)) < 0)
			return false;
		fuzz_buf_replace(b, t[i].at + 1 + fuzz_below(rng, t[i].len > 1 ? t[i].len - 1 : 1),
				 0, e, strlen(e));
		return true;
	}
	case 2: { /* a member twice */
		size_t vat, end;

		if ((i = pick(t, n, 1u << T_KEY, rng)) < 0)
			return false;
		end = member_end(b, &t[i], &vat);
		{
			size_t mlen = end - t[i].at;
			uint8_t *copy = malloc(mlen + 1);

			if (!copy)
				return false;
			copy[0] = ',';
			memcpy(copy + 1, b->data + t[i].at, mlen);
			fuzz_buf_replace(b, end, 0, copy, mlen + 1);
			free(copy);
		}
		return true;
	}
	case 3: { /* a value nested deep */
		static const size_t depths[] = { 2, 16, 200, 999, 1001, 3000 };
		size_t d = depths[fuzz_below(rng, N(depths))], at, end;
		bool obj = fuzz_below(rng, 2);
		struct fuzz_buf w = { 0 };

		if ((i = pick(t, n, (1u << T_STRING) | (1u << T_NUMBER) | (1u << T_LITERAL) |
				      (1u << T_OPEN), rng)) < 0)
			return false;
		at = t[i].at;
		end = t[i].kind == T_OPEN ? value_end(b, at) : at + t[i].len;
		for (size_t k = 0; k < d; k++)
			fuzz_buf_replace(&w, w.len, 0, obj ? "{\"a\":" : "[", obj ? 5 : 1);
		fuzz_buf_replace(&w, w.len, 0, b->data + at, end - at);
		for (size_t k = 0; k < d; k++)
			fuzz_buf_replace(&w, w.len, 0, obj ? "}" : "]", 1);
		fuzz_buf_replace(b, at, end - at, w.data, w.len);
		fuzz_buf_fini(&w);
		return true;
	}
	case 4: { /* an object or array element repeated: many nodes, victims, items */
		static const size_t times[] = { 1, 2, 10, 255, 256, 257, 1100 };
		size_t k = times[fuzz_below(rng, N(times))], end;
		struct fuzz_buf w = { 0 };

		if ((i = pick(t, n, (1u << T_OPEN) | (1u << T_STRING), rng)) < 0)
			return false;
		end = t[i].kind == T_OPEN ? value_end(b, t[i].at) : t[i].at + t[i].len;
		for (size_t r = 0; r < k; r++) {
			fuzz_buf_replace(&w, w.len, 0, ",", 1);
			fuzz_buf_replace(&w, w.len, 0, b->data + t[i].at, end - t[i].at);
		}
		fuzz_buf_replace(b, end, 0, w.data, w.len);
		fuzz_buf_fini(&w);
		return true;
	}
	case 5: { /* a value of another type */
		const char *v = choose(values, N(values), rng);
		size_t end;

		if ((i = pick(t, n, (1u << T_STRING) | (1u << T_NUMBER) | (1u << T_LITERAL) |
				      (1u << T_OPEN), rng)) < 0)
			return false;
		end = t[i].kind == T_OPEN ? value_end(b, t[i].at) : t[i].at + t[i].len;
		fuzz_buf_replace(b, t[i].at, end - t[i].at, v, strlen(v));
		return true;
	}
	case 6: { /* a dictionary word for a key or string */
		int len;

		if (!nd || (i = pick(t, n, (1u << T_STRING) | (1u << T_KEY), rng)) < 0)
			return false;
		len = snprintf(tmp, sizeof(tmp), "\"%s\"", dict[fuzz_below(rng, nd)]);
		fuzz_buf_replace(b, t[i].at, t[i].len, tmp, (size_t)len);
		return true;
	}
	case 7: { /* a long string */
		static const size_t lens[] = { 63, 64, 253, 254, 255, 256, 317, 1024, 70000 };
		size_t l = lens[fuzz_below(rng, N(lens))];
		char *s;

		if ((i = pick(t, n, (1u << T_STRING) | (1u << T_KEY), rng)) < 0)
			return false;
		s = malloc(l + 2);
		if (!s)
			return false;
		memset(s, fuzz_below(rng, 2) ? 'a' : '0', l + 2);
		s[0] = s[l + 1] = '"';
		fuzz_buf_replace(b, t[i].at, t[i].len, s, l + 2);
		free(s);
		return true;
	}
	case 8: { /* a member removed */
		size_t vat, end;

		if ((i = pick(t, n, 1u << T_KEY, rng)) < 0)
			return false;
		end = member_end(b, &t[i], &vat);
		if (fuzz_below(rng, 2))
			fuzz_buf_replace(b, t[i].at, end - t[i].at, NULL, 0);
		else
			fuzz_buf_replace(b, vat, end - vat, NULL, 0);   /* "k": with no value */
		return true;
	}
	default: { /* two values swapped */
		long j = pick(t, n, (1u << T_STRING) | (1u << T_NUMBER) | (1u << T_LITERAL), rng);
		size_t ia, ja;
		char *a, *c;

		i = pick(t, n, (1u << T_STRING) | (1u << T_NUMBER) | (1u << T_LITERAL), rng);
		if (i < 0 || j < 0 || i == j)
			return false;
		if (t[i].at > t[j].at) {
			long x = i;

			i = j;
			j = x;
		}
		ia = t[i].len;
		ja = t[j].len;
		a = malloc(ia);
		c = malloc(ja);
		if (a && c) {
			memcpy(a, b->data + t[i].at, ia);
			memcpy(c, b->data + t[j].at, ja);
			fuzz_buf_replace(b, t[j].at, ja, a, ia);
			fuzz_buf_replace(b, t[i].at, ia, c, ja);
		}
		free(a);
		free(c);
		return a && c;
	}
	}
}

static const uint8_t interesting_bytes[] = {
	0, 0xff, '"', '\\', '{', '}', '[', ']', ',', ':', ' ', 0x7f, 0x80, 0xc0, 0xe2, '\n',
	'\r', '0', '9', '-', 'e', '.', 'u', 'n', 't', 'f', 0x01, 0x1f,
};

static void mutate_bytes(struct fuzz_buf *b, const struct fuzz_buf *other, uint64_t *rng)
{
	size_t at = fuzz_below(rng, b->len + 1);

	switch (fuzz_below(rng, 8)) {
	case 0: /* a bit flipped */
		if (b->len)
			b->data[fuzz_below(rng, b->len)] ^= (uint8_t)(1u << fuzz_below(rng, 8));
		break;
	case 1: /* a byte set */
		if (b->len)
			b->data[fuzz_below(rng, b->len)] =
				interesting_bytes[fuzz_below(rng, sizeof(interesting_bytes))];
		break;
	case 2: { /* bytes inserted */
		uint8_t ins[8];
		size_t k = 1 + fuzz_below(rng, sizeof(ins));

		for (size_t i = 0; i < k; i++)
			ins[i] = fuzz_below(rng, 2) ? (uint8_t)fuzz_rand(rng)
				 : interesting_bytes[fuzz_below(rng, sizeof(interesting_bytes))];
		fuzz_buf_replace(b, at, 0, ins, k);
		break;
	}
	case 3: /* a range deleted */
		fuzz_buf_replace(b, at, 1 + fuzz_below(rng, 32), NULL, 0);
		break;
	case 4: { /* a range duplicated elsewhere */
		size_t from = fuzz_below(rng, b->len + 1), k = fuzz_below(rng, 64);
		uint8_t *copy;

		if (k > b->len - from)
			k = b->len - from;
		copy = malloc(k + 1);
		if (!copy)
			break;
		memcpy(copy, b->data + from, k);
		fuzz_buf_replace(b, at, 0, copy, k);
		free(copy);
		break;
	}
	case 5: /* truncated */
		b->len = at;
		break;
	default: { /* a splice from another corpus entry */
		size_t from, k;

		if (!other || !other->len)
			break;
		from = fuzz_below(rng, other->len);
		k = 1 + fuzz_below(rng, other->len - from);
		if (fuzz_below(rng, 2))
			fuzz_buf_replace(b, at, b->len - at, other->data + from, k);
		else
			fuzz_buf_replace(b, at, 0, other->data + from, k);
		break;
	}
	}
}

void fuzz_mutate(struct fuzz_buf *b, const struct fuzz_buf *other, const char *const *dict,
		 size_t max_len, uint64_t *rng)
{
	/* Mostly one mutation, sometimes a few: each one more is likelier to
	 * break the syntax than to reach somewhere new. */
	size_t roll = fuzz_below(rng, 10), stack = roll < 5 ? 1 : roll < 8 ? 2 : 3 + roll % 2;
	struct fuzz_buf keep = { 0 };

	for (size_t s = 0; s < stack; s++) {
		fuzz_buf_set(&keep, b->data, b->len);
		/* Mostly structure-aware: byte noise alone rarely gets past the JSON
		 * parser, but some must, to test the parser's own edges. */
		if (fuzz_below(rng, 5) == 0 || !mutate_json(b, dict, rng))
			mutate_bytes(b, other, rng);
		if (b->len > max_len)
			fuzz_buf_set(b, keep.data, keep.len);
	}
	fuzz_buf_fini(&keep);
}
