/* Bounds on what clients can make troupe hold, without HTTP: the memory budget
 * all buffered request bodies share (http.body_budget_bytes), the bodies that
 * draw on it, and a budget of log lines for events a client can repeat at will.
 * server.c uses them; unit tests call them directly.
 *
 * Thread: any; a budget and a log limit are shared (atomics), a body belongs to
 * one request.
 */
#ifndef TROUPE_EXTENDER_BUDGET_H
#define TROUPE_EXTENDER_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The memory all request bodies together may hold. Bodies over
 * EXT_BODY_SMALL_BYTES (config.h) may fill only three quarters of it. */
struct ext_budget {
	size_t total;
	size_t used;                    /* relaxed atomic */
};

/* A request body as it arrives; <reserved> bytes of a budget back it. */
struct ext_body {
	char *buf;                      /* NUL-terminated when not NULL */
	size_t len;
	size_t cap;
	size_t reserved;
};

enum ext_body_result {
	EXT_BODY_OK = 0,
	EXT_BODY_TOO_LARGE,             /* would pass <max> */
	EXT_BODY_OVER_BUDGET,           /* the budget has no room for the growth */
	EXT_BODY_NO_MEMORY,
};

/* Take <n> bytes of <b> for a body that will then hold <total> bytes in all.
 * False, taking nothing, when they do not fit. */
bool ext_budget_take(struct ext_budget *b, size_t n, size_t total);
void ext_budget_give(struct ext_budget *b, size_t n);
size_t ext_budget_used(const struct ext_budget *b);

/* Reserve room for a body of <len> bytes (a Content-Length) before any byte
 * arrives. Returns EXT_BODY_OK or EXT_BODY_OVER_BUDGET. */
enum ext_body_result ext_body_reserve(struct ext_budget *b, struct ext_body *body, size_t len);
/* Append <n> bytes. Room already reserved is used first; a body without
 * (chunked) reserves each growth of its buffer. On any result but EXT_BODY_OK
 * the body is dropped. */
enum ext_body_result ext_body_add(struct ext_budget *b, struct ext_body *body, const char *data,
				  size_t n, size_t max);
/* Free the body and give its reservation back. */
void ext_body_drop(struct ext_budget *b, struct ext_body *body);

/* At most <per_second> lines a second; the line after a gap says how many were
 * left out. Races between threads may let a line more or fewer through. */
struct ext_log_limit {
	unsigned per_second;
	uint64_t window_ns;             /* relaxed atomic: when the current second began */
	unsigned lines;                 /* relaxed atomic: lines in it */
	uint64_t suppressed;            /* relaxed atomic */
};

/* True when a line may be logged at <now_ns>; <left_out> then gets " (N more
 * like it left out since the last line)" or "". */
bool ext_log_limit_pass(struct ext_log_limit *l, uint64_t now_ns, char *left_out, size_t len);

#endif
