/* Shared helpers; see util.h. */
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <unistd.h>

#include "common/quantity.h"

int util_read_file(const char *path, size_t max, char **out, size_t *len)
{
	int fd = -1, ret = 0;
	char *buf = NULL;
	size_t n = 0, cap = 0;

	if (max > SIZE_MAX / 2)
		max = SIZE_MAX / 2;     /* keeps the size arithmetic below from wrapping */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	for (;;) {
		ssize_t r;

		if (n + 1 >= cap) {
			size_t ncap = cap ? cap * 2 : 65536;
			char *p;

			if (cap > max + 1)
				ncap = cap;
			else if (ncap > max + 2)
				ncap = max + 2;
			p = realloc(buf, ncap);
			if (!p) {
				ret = -ENOMEM;
				goto out;
			}
			buf = p;
			cap = ncap;
		}
		r = read(fd, buf + n, cap - n - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > max) {
			ret = -EFBIG;
			goto out;
		}
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	buf = NULL;
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return ret;
}

uint64_t util_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

struct timespec util_deadline_after_ns(clockid_t clock, uint64_t ns)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	ts.tv_sec += (time_t)(ns / 1000000000ULL);
	ts.tv_nsec += (long)(ns % 1000000000ULL);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

const char *json_str(const cJSON *obj, const char *key)
{
	const cJSON *it = json_get(obj, key);

	return cJSON_IsString(it) ? it->valuestring : NULL;
}

const cJSON *json_obj(const cJSON *obj, const char *key)
{
	const cJSON *it = json_get(obj, key);

	return cJSON_IsObject(it) ? it : NULL;
}

bool json_at_end(const char *p, const char *end)
{
	if (!p)
		return false;
	for (; p < end; p++)
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			return false;
	return true;
}

size_t json_plain_run(const char *s, size_t len)
{
	size_t i = 0;

#ifdef __SSE2__
	for (; i + 16 <= len; i += 16) {
		unsigned m = json_special16(_mm_loadu_si128((const __m128i *)(const void *)(s + i)));

		if (m)
			return i + (size_t)__builtin_ctz(m);
	}
#endif
	/* Eight bytes at a time (SWAR): a byte below 0x20, a quote, a backslash
	 * or one from 0x80 sets its top bit in <hit>; the lowest set bit is exact
	 * (borrows only run upwards; byte order matters for which is lowest). */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	for (; i + 8 <= len; i += 8) {
		const uint64_t ones = 0x0101010101010101ULL, tops = 0x8080808080808080ULL;
		uint64_t x, q, b, hit;

		memcpy(&x, s + i, 8);
		q = x ^ (ones * '"');
		b = x ^ (ones * '\\');
		hit = ((x - ones * 0x20) | ((q - ones) & ~q) | ((b - ones) & ~b) | x) & tops;
		if (hit)
			return i + (size_t)__builtin_ctzll(hit) / 8;
	}
#endif
	for (; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80)
			break;
	}
	return i;
}

/* Whether <buf> holds a byte below 0x20 or a backslash: without either, JSON
 * text can hold nothing json_find_unsafe looks for. */
static bool has_ctl_or_escape(const char *buf, size_t len)
{
	size_t i = 0;

#ifdef __SSE2__
	const __m128i bslash = _mm_set1_epi8('\\'), ctl = _mm_set1_epi8(0x1f);

	for (; i + 16 <= len; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(buf + i));
		__m128i hit = _mm_or_si128(_mm_cmpeq_epi8(_mm_max_epu8(v, ctl), ctl),
					   _mm_cmpeq_epi8(v, bslash));

		if (_mm_movemask_epi8(hit))
			return true;
	}
#endif
	for (; i < len; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == '\\')
			return true;
	return false;
}

static int hex4(const char *p)
{
	int v = 0;

	for (int k = 0; k < 4; k++) {
		char c = p[k];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/* The escape whose backslash is at buf[i]: how many bytes it takes (2, 6, or
 * 12 for a surrogate pair), or 0 with <*why> set when JSON (RFC 8259 section 7)
 * does not allow it or cJSON would decode it to something else than was sent:
 * cJSON reads bad hex digits as 0 ("\u00zz" became NUL and cut the string). */
static size_t escape_len(const char *buf, size_t len, size_t i, const char **why)
{
	int code, low;

	if (i + 1 >= len) {
		*why = "a backslash ends the text";
		return 0;
	}
	switch (buf[i + 1]) {
	case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
		return 2;
	case 'u':
		break;
	default:
		*why = "an unknown escape (JSON has only \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)";
		return 0;
	}
	if (i + 6 > len || (code = hex4(buf + i + 2)) < 0) {
		*why = "\\u not followed by four hex digits";
		return 0;
	}
	if (code == 0) {
		*why = "\\u0000 (it would cut the string short)";
		return 0;
	}
	if (code >= 0xdc00 && code <= 0xdfff) {
		*why = "a lone low surrogate (\\uDC00-\\uDFFF without a high one before it)";
		return 0;
	}
	if (code < 0xd800 || code > 0xdbff)
		return 6;
	if (i + 12 > len || buf[i + 6] != '\\' || buf[i + 7] != 'u' ||
	    (low = hex4(buf + i + 8)) < 0xdc00 || low > 0xdfff) {
		*why = "a high surrogate (\\uD800-\\uDBFF) not followed by a low one";
		return 0;
	}
	return 12;
}

/* json_find_unsafe and json_find_invalid: with <escapes>, every escape is
 * checked (escape_len), else only \u0000. */
static long find_unsafe(const char *buf, size_t len, bool escapes, const char **why)
{
	bool in_str = false;

	/* kube-scheduler's bodies are compact (no newlines) and rarely escape
	 * anything: one pass over the bytes settles it. */
	if (!has_ctl_or_escape(buf, len))
		return -1;

	for (size_t i = 0; i < len; i++) {
		unsigned char c;

		/* Plain bytes never matter, in a string or out of one. */
		i += json_plain_run(buf + i, len - i);
		if (i >= len)
			break;
		c = (unsigned char)buf[i];

		if (c < 0x20 && (in_str || (c != ' ' && c != '\t' && c != '\n' && c != '\r'))) {
			*why = in_str ? "a raw control character inside a string (JSON needs it "
					"escaped)" : "a control character between tokens";
			return (long)i;
		}
		if (!in_str) {
			in_str = c == '"';
			continue;
		}
		if (c == '"') {
			in_str = false;
		} else if (c == '\\' && escapes) {
			size_t n = escape_len(buf, len, i, why);

			if (!n)
				return (long)i;
			i += n - 1;
		} else if (c == '\\' && i + 1 < len) {
			i++;
			if (buf[i] == 'u' && i + 4 < len && memcmp(buf + i + 1, "0000", 4) == 0) {
				*why = "\\u0000 (it would cut the string short)";
				return (long)(i - 1);
			}
		}
	}
	return -1;
}

long json_find_unsafe(const char *buf, size_t len)
{
	const char *why;

	return find_unsafe(buf, len, false, &why);
}

long json_find_invalid(const char *buf, size_t len, const char **why)
{
	const char *unused;

	return find_unsafe(buf, len, true, why ? why : &unused);
}

/* The type test cJSON_IsObject makes, inline: these run for every member. */
static inline bool is_object(const cJSON *it)
{
	return it && (it->type & 0xff) == cJSON_Object;
}

static inline bool is_container(const cJSON *it)
{
	return (it->type & 0xff) == cJSON_Object || (it->type & 0xff) == cJSON_Array;
}

/* Whether two keys are the same, the first byte compared before a call. */
static inline bool same_key(const char *a, const char *b)
{
	return a && b && a[0] == b[0] && strcmp(a, b) == 0;
}

const cJSON *json_get(const cJSON *obj, const char *key)
{
	const cJSON *it, *found = NULL;

	if (!is_object(obj))
		return NULL;
	for (it = obj->child; it; it = it->next)
		if (same_key(it->string, key))
			found = it;
	return found;
}

/* FNV-1a: only to spread the keys of one large object over a table. */
static uint64_t key_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* A table of an object's keys, reused across the objects of one document. */
struct key_table {
	const cJSON **slot;
	size_t mask;            /* slots - 1; 0 before the first use */
};

/* Objects up to this many members are checked pair by pair: cheaper than
 * hashing for the small objects that make up most of a Kubernetes object. */
enum { DEDUPE_PAIRWISE_MAX = 16 };

/* Delete from <obj> every member that a later member of the same name
 * overrides. Returns how many, or -ENOMEM (the object unchanged then). */
static long dedupe_members(cJSON *obj, size_t n, struct key_table *t)
{
	cJSON *it, *next;
	long dropped = 0;

	if (n <= DEDUPE_PAIRWISE_MAX) {
		for (it = obj->child; it; it = next) {
			next = it->next;
			for (const cJSON *later = next; later; later = later->next) {
				if (same_key(it->string, later->string)) {
					cJSON_Delete(cJSON_DetachItemViaPointer(obj, it));
					dropped++;
					break;
				}
			}
		}
		return dropped;
	}
	if (t->mask + 1 < 2 * n) {
		size_t slots = 64;

		while (slots < 2 * n)
			slots *= 2;
		free(t->slot);
		t->slot = malloc(slots * sizeof(*t->slot));
		if (!t->slot) {
			t->mask = 0;
			return -ENOMEM;
		}
		t->mask = slots - 1;
	}
	memset(t->slot, 0, (t->mask + 1) * sizeof(*t->slot));
	/* From the last member back: the first seen of each name is the one
	 * that stays. (child->prev is the last member.) */
	for (it = obj->child->prev; it; it = next) {
		size_t at;

		next = it == obj->child ? NULL : it->prev;
		if (!it->string)
			continue;
		for (at = key_hash(it->string) & t->mask; t->slot[at]; at = (at + 1) & t->mask)
			if (strcmp(t->slot[at]->string, it->string) == 0)
				break;
		if (t->slot[at]) {
			cJSON_Delete(cJSON_DetachItemViaPointer(obj, it));
			dropped++;
		} else {
			t->slot[at] = it;
		}
	}
	return dropped;
}

static long dedupe(cJSON *item, struct key_table *t)
{
	long dropped = 0, d;
	size_t n = 0;

	for (cJSON *c = item->child; c; c = c->next) {
		n++;
		if (!is_container(c))
			continue;
		d = dedupe(c, t);
		if (d < 0)
			return -ENOMEM;
		dropped += d;
	}
	if (!is_object(item) || n < 2)
		return dropped;
	d = dedupe_members(item, n, t);
	return d < 0 ? d : dropped + d;
}

long json_dedupe(cJSON *root)
{
	struct key_table t = { NULL, 0 };
	long ret;

	if (!root || !(cJSON_IsObject(root) || cJSON_IsArray(root)))
		return 0;
	ret = dedupe(root, &t);
	free(t.slot);
	return ret;
}

/* The largest magnitude below which every integer has an exact double. */
#define JSON_EXACT_INT 9007199254740992.0       /* 2^53 */

int json_int_in_range(const cJSON *item, int64_t min, int64_t max, int64_t *out)
{
	double v;
	int64_t i;

	if (!cJSON_IsNumber(item))
		return -EINVAL;
	v = item->valuedouble;
	/* Also false for NaN; beyond 2^53 the number sent cannot be known
	 * exactly, so it is refused rather than rounded. */
	if (!(v >= -JSON_EXACT_INT && v <= JSON_EXACT_INT))
		return -ERANGE;
	i = (int64_t)v;
	if ((double)i != v)
		return -EINVAL;
	if (i < min || i > max)
		return -ERANGE;
	*out = i;
	return 0;
}

const cJSON *json_list(const cJSON *list)
{
	return cJSON_IsArray(list) ? list : NULL;
}

int json_quantity_milli(const cJSON *item, int64_t *milli)
{
	if (cJSON_IsString(item))
		return quantity_parse_milli(item->valuestring, strlen(item->valuestring), milli);
	if (cJSON_IsNumber(item)) {
		double v = item->valuedouble;

		/* YAML numbers keep their text; parse that for exactness. */
		if (item->valuestring)
			return quantity_parse_milli(item->valuestring,
						    strlen(item->valuestring), milli);
		if (!isfinite(v) || fabs(v) > 9.0e15)
			return -ERANGE;
		*milli = (int64_t)ceil(v * 1000.0 - 1e-6);
		return 0;
	}
	return -EINVAL;
}
