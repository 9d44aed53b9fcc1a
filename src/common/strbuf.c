/* Growable buffer used by every encoder in troupe. Growth doubles, so
 * appending n bytes costs amortised O(n). */
#include "common/strbuf.h"
#include "common/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void strbuf_init(struct strbuf *sb)
{
	memset(sb, 0, sizeof(*sb));
}

void strbuf_fini(struct strbuf *sb)
{
	free(sb->buf);
	strbuf_init(sb);
}

int strbuf_reserve(struct strbuf *sb, size_t extra)
{
	size_t need, cap;
	char *p;

	if (sb->failed)
		return -ENOMEM;
	if (__builtin_add_overflow(sb->len, extra, &need) || __builtin_add_overflow(need, 1, &need))
		goto fail;
	if (need <= sb->cap)
		return 0;
	cap = sb->cap ? sb->cap : 256;
	while (cap < need) {
		if (__builtin_mul_overflow(cap, 2, &cap))
			goto fail;
	}
	p = realloc(sb->buf, cap);
	if (!p)
		goto fail;
	sb->buf = p;
	sb->cap = cap;
	return 0;
fail:
	sb->failed = true;
	return -ENOMEM;
}

void strbuf__append_slow(struct strbuf *sb, const char *s, size_t len)
{
	if (strbuf_reserve(sb, len) < 0)
		return;
	memcpy(sb->buf + sb->len, s, len);
	sb->len += len;
	sb->buf[sb->len] = '\0';
}

void strbuf_printf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || strbuf_reserve(sb, (size_t)n) < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	sb->len += (size_t)n;
}

void strbuf_put_i64(struct strbuf *sb, int64_t v)
{
	char tmp[24];
	char *p = tmp + sizeof(tmp);
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	strbuf_append(sb, p, (size_t)(tmp + sizeof(tmp) - p));
}

/* Length of the valid UTF-8 sequence starting at s (at most n bytes), or 0. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xE0) == 0xC0) {
		len = 2;
		cp = s[0] & 0x1F;
	} else if ((s[0] & 0xF0) == 0xE0) {
		len = 3;
		cp = s[0] & 0x0F;
	} else if ((s[0] & 0xF8) == 0xF0) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	/* Reject overlong forms, surrogates and values past U+10FFFF. */
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
		return 0;
	return len;
}

#ifdef __SSE2__
/* The common case of a name or a reason: at least 16 bytes, none to escape,
 * room in the buffer. Copies 16 bytes at a time while checking them (the last
 * load overlaps the one before it), and commits only when none needed
 * escaping. Returns whether it appended. */
static bool put_plain(struct strbuf *sb, const char *s, size_t len)
{
	unsigned hit = 0;
	char *d;

	if (len < 16 || sb->failed || sb->cap - sb->len <= len + 2)
		return false;
	d = sb->buf + sb->len + 1;
	for (size_t i = 0; i + 16 <= len; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));

		hit |= json_special16(v);
		_mm_storeu_si128((__m128i *)(void *)(d + i), v);
	}
	{
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + len - 16));

		hit |= json_special16(v);
		_mm_storeu_si128((__m128i *)(void *)(d + len - 16), v);
	}
	if (hit)
		return false;   /* the bytes past sb->len are not part of it yet */
	d[-1] = '"';
	d[len] = '"';
	d[len + 1] = '\0';
	sb->len += len + 2;
	return true;
}
#endif

void strbuf_put_json_str(struct strbuf *sb, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run = 0;

	if (strbuf_reserve(sb, len + 2) < 0)
		return;
#ifdef __SSE2__
	if (put_plain(sb, s, len))
		return;
#endif
	strbuf_putc(sb, '"');
	while (i < len) {
		unsigned char c;
		size_t sl, plain = json_plain_run(s + i, len - i);

		i += plain;
		run += plain;
		if (i >= len)
			break;
		c = u[i];
		strbuf_append(sb, s + i - run, run);
		run = 0;
		if (c >= 0x80 && (sl = utf8_seq_len(u + i, len - i)) > 0) {
			strbuf_append(sb, s + i, sl);
			i += sl;
			continue;
		}
		switch (c) {
		case '"': strbuf_append(sb, "\\\"", 2); break;
		case '\\': strbuf_append(sb, "\\\\", 2); break;
		case '\n': strbuf_append(sb, "\\n", 2); break;
		case '\r': strbuf_append(sb, "\\r", 2); break;
		case '\t': strbuf_append(sb, "\\t", 2); break;
		default: {
			/* Control bytes, and invalid UTF-8 as U+FFFD. */
			char esc[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

			if (c >= 0x80)
				strbuf_append(sb, "\\ufffd", 6);
			else
				strbuf_append(sb, esc, 6);
		}
		}
		i++;
	}
	strbuf_append(sb, s + i - run, run);
	strbuf_putc(sb, '"');
}

bool strbuf_failed(const struct strbuf *sb)
{
	return sb->failed;
}

char *strbuf_take(struct strbuf *sb, size_t *len)
{
	char *p = sb->buf;

	if (!p && !sb->failed) {
		p = malloc(1);
		if (p)
			*p = '\0';
	}
	if (sb->failed) {
		free(p);
		p = NULL;
	}
	if (len)
		*len = sb->len;
	strbuf_init(sb);
	return p;
}
