/* The request-body memory budget and rate-limited log lines (budget.h).
 *
 * The budget counts what the bodies' buffers really take: a Content-Length
 * body allocates exactly its length (plus the NUL) once, a chunked one grows
 * by doubling from BODY_CHUNK_MIN, and each growth is taken from the budget
 * before the allocation. A compare-and-swap loop takes room only when it
 * fits, so the bodies never hold more than the budget, however many
 * connections race for it.
 */
#include "extender/budget.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extender/config.h"

enum {
	/* A chunked body's first buffer; it doubles from here. */
	BODY_CHUNK_MIN = 64 * 1024,
};

bool ext_budget_take(struct ext_budget *b, size_t n, size_t total)
{
	/* The last quarter is for small bodies only (config.h). */
	size_t limit = total <= EXT_BODY_SMALL_BYTES ? b->total : b->total - b->total / 4;
	size_t used = __atomic_load_n(&b->used, __ATOMIC_RELAXED);

	do {
		if (n > limit || used > limit - n)
			return false;
	} while (!__atomic_compare_exchange_n(&b->used, &used, used + n, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return true;
}

void ext_budget_give(struct ext_budget *b, size_t n)
{
	__atomic_sub_fetch(&b->used, n, __ATOMIC_RELAXED);
}

size_t ext_budget_used(const struct ext_budget *b)
{
	return __atomic_load_n(&b->used, __ATOMIC_RELAXED);
}

enum ext_body_result ext_body_reserve(struct ext_budget *b, struct ext_body *body, size_t len)
{
	size_t n = len + 1;

	if (!ext_budget_take(b, n, n))
		return EXT_BODY_OVER_BUDGET;
	body->reserved += n;
	return EXT_BODY_OK;
}

void ext_body_drop(struct ext_budget *b, struct ext_body *body)
{
	free(body->buf);
	ext_budget_give(b, body->reserved);
	*body = (struct ext_body){ NULL, 0, 0, 0 };
}

enum ext_body_result ext_body_add(struct ext_budget *b, struct ext_body *body, const char *data,
				  size_t n, size_t max)
{
	enum ext_body_result ret = EXT_BODY_OK;
	size_t need = body->len + n + 1, cap;
	char *p;

	if (body->len + n > max) {
		ret = EXT_BODY_TOO_LARGE;
		goto out;
	}
	if (need > body->cap) {
		if (body->reserved >= need) {
			cap = body->reserved;
		} else {
			cap = body->cap ? body->cap : BODY_CHUNK_MIN;
			while (cap < need)
				cap *= 2;
			if (cap > max + 1)
				cap = max + 1;
			if (!ext_budget_take(b, cap - body->reserved, cap)) {
				ret = EXT_BODY_OVER_BUDGET;
				goto out;
			}
			body->reserved = cap;
		}
		p = realloc(body->buf, cap);
		if (!p) {
			ret = EXT_BODY_NO_MEMORY;
			goto out;
		}
		body->buf = p;
		body->cap = cap;
	}
	memcpy(body->buf + body->len, data, n);
	body->len += n;
	body->buf[body->len] = '\0';
out:
	if (ret != EXT_BODY_OK)
		ext_body_drop(b, body);
	return ret;
}

bool ext_log_limit_pass(struct ext_log_limit *l, uint64_t now_ns, char *left_out, size_t len)
{
	uint64_t start = __atomic_load_n(&l->window_ns, __ATOMIC_RELAXED);
	uint64_t n;

	/* The thread that moves the window on resets its count. */
	if (now_ns - start >= 1000000000ULL &&
	    __atomic_compare_exchange_n(&l->window_ns, &start, now_ns, false, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED))
		__atomic_store_n(&l->lines, 0, __ATOMIC_RELAXED);
	if (__atomic_fetch_add(&l->lines, 1, __ATOMIC_RELAXED) >= l->per_second) {
		__atomic_add_fetch(&l->suppressed, 1, __ATOMIC_RELAXED);
		return false;
	}
	n = __atomic_exchange_n(&l->suppressed, 0, __ATOMIC_RELAXED);
	if (n)
		snprintf(left_out, len, " (%llu more like it left out since the last line)",
			 (unsigned long long)n);
	else if (len)
		left_out[0] = '\0';
	return true;
}
