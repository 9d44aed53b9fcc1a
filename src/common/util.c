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

const char *json_str(const cJSON *obj, const char *key)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(it) ? it->valuestring : NULL;
}

const cJSON *json_obj(const cJSON *obj, const char *key)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

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

long json_find_unsafe(const char *buf, size_t len)
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
