/* The mutation fuzzer's shared parts: what a target is (one parser troupe
 * exposes to the network: a verb body, or an object or stream the API server
 * sends), the mutation engine's entry points (mutate.c), and how a target
 * reports a broken invariant (fuzz_fail: the input is saved as a file first).
 *
 * No libFuzzer: the compiler here is GCC, so fuzz_main.c is the driver, a
 * deterministic seeded loop over mutations of a corpus (tests/data/fuzz/
 * <target>/). The same seed and iteration count replay the same inputs.
 */
#ifndef TROUPE_TESTS_FUZZ_FUZZ_H
#define TROUPE_TESTS_FUZZ_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer: the input being mutated. */
struct fuzz_buf {
	uint8_t *data;
	size_t len, cap;
};

void fuzz_buf_set(struct fuzz_buf *b, const uint8_t *data, size_t len);
/* Replace <n> bytes at <pos> with <m> bytes of <src> (n or m may be 0). */
void fuzz_buf_replace(struct fuzz_buf *b, size_t pos, size_t n, const void *src, size_t m);
void fuzz_buf_fini(struct fuzz_buf *b);

/* One parser under test. <run> feeds it one input and checks the invariants,
 * calling fuzz_fail when one does not hold; it must leave no state behind that
 * changes how the next input is handled (or replaying one saved input would
 * not reproduce). It returns true when the input got past the JSON syntax to
 * the parser's own checks: only such inputs are worth mutating further (the
 * driver's one piece of feedback). <dict>: NULL-terminated words the mutator
 * inserts (the target's key names and typical values). */
struct fuzz_target {
	const char *name;
	const char *const *dict;
	int (*init)(void);
	bool (*run)(const uint8_t *data, size_t len);
	void (*fini)(void);
};

extern const struct fuzz_target fuzz_target_filter, fuzz_target_prioritize, fuzz_target_bind,
	fuzz_target_preempt, fuzz_target_objects, fuzz_target_watch, fuzz_target_list,
	fuzz_target_topo, fuzz_target_plan, fuzz_target_trace;

/* --verbose: the parsers log at debug level and the targets print each
 * answer (for replaying one saved input). */
extern bool fuzz_verbose;

/* xorshift64*: small, deterministic, good enough to pick mutations. */
uint64_t fuzz_rand(uint64_t *s);
/* Uniform in [0, n); 0 when n is 0. */
size_t fuzz_below(uint64_t *s, size_t n);

/* Mutate <b> in place with one to a few stacked mutations, taking material
 * from <other> (another corpus entry) for splices and from <dict>. The result
 * is at most <max_len> bytes. */
void fuzz_mutate(struct fuzz_buf *b, const struct fuzz_buf *other, const char *const *dict,
		 size_t max_len, uint64_t *rng);

/* An invariant does not hold: print why, save the current input (fuzz_main.c)
 * and abort. */
void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#define FUZZ_CHECK(cond, ...) \
	do { \
		if (!(cond)) \
			fuzz_fail(__VA_ARGS__); \
	} while (0)

#endif
