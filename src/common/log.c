/* Logging to stderr with a UTC timestamp, the level and the component. The
 * message is formatted into a stack buffer first so that the whole line goes
 * out in one write and lines of concurrent threads stay whole. */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const level_names[] = { "debug", "info", "warn", "error" };

/* Read on every log call from any thread, written rarely: relaxed atomics. */
static int current_level = LOG_INFO;

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
	fprintf(stderr, "%s.%03ldZ %-5s [%s] %s\n", stamp, ts.tv_nsec / 1000000,
		level_names[level], component, msg);
}
