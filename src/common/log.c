/* Logging to stderr with a UTC timestamp, the level and the component. The
 * message is formatted into a stack buffer first so that the whole line goes
 * out in one write and lines of concurrent threads stay whole.
 *
 * The JSON format escapes the message as JSON requires: quotes, backslashes
 * and control bytes; a byte that is not part of valid UTF-8 (a client's bytes
 * quoted in a message) becomes U+FFFD, so every line is a valid document. */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const level_names[] = { "debug", "info", "warn", "error" };

/* Read on every log call from any thread, written rarely: relaxed atomics. */
static int current_level = LOG_INFO;
static int current_format = LOG_FORMAT_TEXT;

void log_set_format(enum log_format format)
{
	__atomic_store_n(&current_format, (int)format, __ATOMIC_RELAXED);
}

int log_format_parse(const char *s, enum log_format *out)
{
	if (strcmp(s, "text") == 0)
		*out = LOG_FORMAT_TEXT;
	else if (strcmp(s, "json") == 0)
		*out = LOG_FORMAT_JSON;
	else
		return -EINVAL;
	return 0;
}

/* The length of the valid UTF-8 sequence at <p> (at most <left> bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t left)
{
	size_t n = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] <= 0xdf ? 2 :
		   p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;

	if (!n || n > left)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((n == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (n == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
	    (n == 4 && p[0] == 0xf0 && p[1] < 0x90) || (n == 4 && p[0] == 0xf4 && p[1] >= 0x90))
		return 0;       /* overlong, a surrogate, or past U+10FFFF */
	return n;
}

/* <in> as the inside of a JSON string into <out> (cut, never mid-escape). */
static void json_escape(const char *in, char *out, size_t len)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t o = 0, left = strlen(in);

	while (*p) {
		char esc[8];
		size_t n = utf8_len(p, left), w;

		if (*p == '"' || *p == '\\') {
			snprintf(esc, sizeof(esc), "\\%c", *p);
		} else if (*p < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", *p);
		} else if (!n) {
			snprintf(esc, sizeof(esc), "\\ufffd");
		} else {
			if (o + n >= len)
				break;
			memcpy(out + o, p, n);
			o += n;
			p += n;
			left -= n;
			continue;
		}
		w = strlen(esc);
		if (o + w >= len)
			break;
		memcpy(out + o, esc, w);
		o += w;
		p++;
		left--;
	}
	out[o] = '\0';
}

void log_set_level(enum log_level level)
{
	__atomic_store_n(&current_level, (int)level, __ATOMIC_RELAXED);
}

enum log_level log_get_level(void)
{
	return (enum log_level)__atomic_load_n(&current_level, __ATOMIC_RELAXED);
}

bool log_enabled(enum log_level level)
{
	return (int)level >= __atomic_load_n(&current_level, __ATOMIC_RELAXED);
}

int log_level_parse(const char *s, enum log_level *out)
{
	for (int i = LOG_DEBUG; i <= LOG_ERROR; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	if (strcmp(s, "warning") == 0) {
		*out = LOG_WARN;
		return 0;
	}
	return -EINVAL;
}

const char *log_level_name(enum log_level level)
{
	if ((int)level < LOG_DEBUG || level > LOG_ERROR)
		return "?";
	return level_names[level];
}

void log_msg(enum log_level level, const char *component, const char *fmt, ...)
{
	char msg[2048];
	char stamp[32];
	struct timespec ts;
	struct tm tm;
	va_list ap;

	if (!log_enabled(level))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (__atomic_load_n(&current_format, __ATOMIC_RELAXED) == LOG_FORMAT_JSON) {
		char esc[sizeof(msg) * 2], comp[64];

		json_escape(msg, esc, sizeof(esc));
		json_escape(component, comp, sizeof(comp));
		fprintf(stderr, "{\"time\":\"%s.%03ldZ\",\"level\":\"%s\",\"component\":\"%s\","
			"\"msg\":\"%s\"}\n", stamp, ts.tv_nsec / 1000000, level_names[level], comp,
			esc);
		return;
	}
	fprintf(stderr, "%s.%03ldZ %-5s [%s] %s\n", stamp, ts.tv_nsec / 1000000,
		level_names[level], component, msg);
}
