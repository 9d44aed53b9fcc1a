/* Small helpers shared by every module: whole-file reads, monotonic time and
 * the cJSON accessors that Kubernetes objects need (quantities may arrive as
 * strings or numbers), with what keeps cJSON reading a document as Go (the
 * API server, kube-scheduler) wrote it: text checks before parsing, the last
 * of duplicate keys, and range-checked integers. */
#ifndef TROUPE_COMMON_UTIL_H
#define TROUPE_COMMON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Read all of <path> (at most <max> bytes) into a NUL-terminated buffer the
 * caller frees. Returns 0, -errno, or -EFBIG when the file is larger. */
int util_read_file(const char *path, size_t max, char **out, size_t *len);

/* Monotonic clock in nanoseconds. */
uint64_t util_now_ns(void);
/* The moment <ns> nanoseconds from now on <clock>, for pthread_cond_timedwait:
 * CLOCK_MONOTONIC for a condition variable made with that clock (the
 * threads' waits, so a clock step cannot stretch them), CLOCK_REALTIME for a
 * default one. */
struct timespec util_deadline_after_ns(clockid_t clock, uint64_t ns);

/* How long before <now> the moment <then> was: 0 when <then> is later. A pass
 * reads the clock once and then compares it with stamps other threads may
 * write after that reading; a plain unsigned difference would wrap to ~584
 * years and make a gang just refused "starving" or a pod just seen "stale". */
static inline uint64_t util_elapsed_ns(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

/* <obj>[key] (exact key), the last member of that name when there are several
 * (as Go's encoding/json takes it: kube-scheduler and the API server are Go,
 * and cJSON's own lookups return the first), or NULL when absent or <obj> is
 * not an object. */
const cJSON *json_get(const cJSON *obj, const char *key);
/* Delete, in every object of the document <root>, each member that a later
 * member of the same name overrides, so lookups and walks over the members see
 * what Go sees. Linear in the document (objects over 16 members are hashed).
 * Returns how many members were deleted, or -ENOMEM with some objects done and
 * the rest as they were. */
long json_dedupe(cJSON *root);
/* <item> as a whole number in [<min>, <max>] into <out>. Returns 0; -EINVAL
 * when it is not a number or has a fractional part; -ERANGE when it is outside
 * the range, not finite, or beyond 2^53 in magnitude (where a double no longer
 * holds every integer, so the number sent is not known exactly). Every
 * double-to-integer conversion of JSON input goes through this: a cast of a
 * value out of the target's range is undefined behaviour in C. */
int json_int_in_range(const cJSON *item, int64_t min, int64_t max, int64_t *out);
/* The string value of <obj>[key] (json_get), or NULL when absent or not a
 * string. */
const char *json_str(const cJSON *obj, const char *key);
/* <obj>[key] (json_get) when it is an object, else NULL. */
const cJSON *json_obj(const cJSON *obj, const char *key);
/* <list> when it is an array, else NULL (for cJSON_ArrayForEach). */
const cJSON *json_list(const cJSON *list);
/* True when only JSON whitespace lies between <p> (where cJSON stopped) and
 * <end>: the document was the whole input. */
bool json_at_end(const char *p, const char *end);
/* Check JSON text for what cJSON would quietly accept or truncate: raw control
 * bytes (JSON allows only tab, CR and LF, and only between tokens) and the
 * escape \u0000 (cJSON cuts the string there, so "a\u0000b" would read as
 * "a"). Returns -1 when clean, else the offset of the offending byte. */
long json_find_unsafe(const char *buf, size_t len);
/* What json_find_unsafe finds, and every escape JSON does not allow or cJSON
 * would decode to something else than was sent: a letter other than
 * " \ / b f n r t u after a backslash, \u without four hex digits (cJSON
 * reads "\u00zz" as NUL, which cut a node name short), and a surrogate
 * without its pair. Returns -1 when clean, else the offset of the offending
 * byte (an escape's backslash) with a phrase saying what is wrong in <*why>
 * (static text; <why> may be NULL). As fast as json_find_unsafe on text
 * without a backslash or control byte. */
long json_find_invalid(const char *buf, size_t len, const char **why);
/* The length of the longest prefix of <s> holding only bytes JSON text carries
 * as they are: none below 0x20, no '"', no '\\', nothing from 0x80 (16 bytes at
 * a time with SSE2). The scanners above and the string encoder skip such runs. */
size_t json_plain_run(const char *s, size_t len);
#ifdef __SSE2__
#include <emmintrin.h>
/* The bytes of <v> that JSON text cannot carry as they are (json_plain_run),
 * as a bit mask. */
static inline unsigned json_special16(__m128i v)
{
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
	const __m128i ctl = _mm_set1_epi8(0x1f);
	/* v <= 0x1f (unsigned) exactly when max(v, 0x1f) == 0x1f. */
	__m128i low = _mm_cmpeq_epi8(_mm_max_epu8(v, ctl), ctl);
	__m128i hit = _mm_or_si128(low, _mm_or_si128(_mm_cmpeq_epi8(v, quote),
						      _mm_cmpeq_epi8(v, bslash)));

	/* movemask of v itself: the bytes from 0x80. */
	return (unsigned)_mm_movemask_epi8(hit) | (unsigned)_mm_movemask_epi8(v);
}
#endif
/* A quantity (string, or number as YAML gives it) in milli-units.
 * Returns 0, -EINVAL or -ERANGE. */
int json_quantity_milli(const cJSON *item, int64_t *milli);

#endif
