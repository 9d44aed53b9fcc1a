/* A growable byte buffer for building responses, with JSON string escaping.
 *
 * Allocation failure is sticky: after one, every append does nothing and
 * strbuf_failed() is true, so a caller checks once at the end instead of after
 * every append.
 */
#ifndef TROUPE_COMMON_STRBUF_H
#define TROUPE_COMMON_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct strbuf {
	char *buf;      /* NUL-terminated when not NULL */
	size_t len;
	size_t cap;
	bool failed;
};

#define STRBUF_INIT { NULL, 0, 0, false }

void strbuf_init(struct strbuf *sb);
void strbuf_fini(struct strbuf *sb);
/* Reserve room for <extra> more bytes. Returns 0 or -ENOMEM. */
int strbuf_reserve(struct strbuf *sb, size_t extra);
/* Appends: inline when the room is there (responses are built from many small
 * pieces), else strbuf__append_slow grows the buffer. */
void strbuf__append_slow(struct strbuf *sb, const char *s, size_t len);

static inline void strbuf_append(struct strbuf *sb, const char *s, size_t len)
{
	if (!sb->failed && len < sb->cap - sb->len) {   /* cap > len once allocated */
		memcpy(sb->buf + sb->len, s, len);
		sb->len += len;
		sb->buf[sb->len] = '\0';
		return;
	}
	strbuf__append_slow(sb, s, len);
}

static inline void strbuf_puts(struct strbuf *sb, const char *s)
{
	strbuf_append(sb, s, strlen(s));
}

static inline void strbuf_putc(struct strbuf *sb, char c)
{
	if (!sb->failed && 1 < sb->cap - sb->len) {
		sb->buf[sb->len++] = c;
		sb->buf[sb->len] = '\0';
		return;
	}
	strbuf__append_slow(sb, &c, 1);
}
void strbuf_printf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_put_i64(struct strbuf *sb, int64_t v);
/* Append <s> as a JSON string literal, quotes included. Control characters
 * and invalid UTF-8 bytes are escaped so the output is always valid JSON. */
void strbuf_put_json_str(struct strbuf *sb, const char *s, size_t len);
bool strbuf_failed(const struct strbuf *sb);
/* Hand the buffer to the caller (who frees it with free()); sb is reset. */
char *strbuf_take(struct strbuf *sb, size_t *len);

#endif
