/* Logging: one line per event on stderr, "TIME LEVEL [component] message", or
 * with the JSON format one object per line for log pipelines:
 * {"time":"2026-12-01T20:01:26.565Z","level":"info","component":"main","msg":"..."}.
 *
 * Every line is written with a single fprintf, so lines from different threads
 * never interleave. The level is process-wide and may be changed at any time.
 */
#ifndef TROUPE_COMMON_LOG_H
#define TROUPE_COMMON_LOG_H

#include <stdbool.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Set the lowest level that is printed. Thread: any. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

enum log_format { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON };
/* Set the line format (text by default). Thread: any, but set it at start. */
void log_set_format(enum log_format format);
/* Parse "text" or "json". Returns 0 or -EINVAL. */
int log_format_parse(const char *s, enum log_format *out);

/* Parse "debug", "info", "warn" or "error". Returns 0 or -EINVAL. */
int log_level_parse(const char *s, enum log_level *out);
const char *log_level_name(enum log_level level);

/* True when a message at <level> would be printed; lets callers skip building
 * expensive messages. */
bool log_enabled(enum log_level level);

void log_msg(enum log_level level, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_debug(comp, ...) \
	do { \
		if (log_enabled(LOG_DEBUG)) \
			log_msg(LOG_DEBUG, comp, __VA_ARGS__); \
	} while (0)
#define log_info(comp, ...) log_msg(LOG_INFO, comp, __VA_ARGS__)
#define log_warn(comp, ...) log_msg(LOG_WARN, comp, __VA_ARGS__)
#define log_error(comp, ...) log_msg(LOG_ERROR, comp, __VA_ARGS__)

#endif
