/* The fuzzer's driver: load a target's corpus (tests/data/fuzz/<target>/),
 * run every entry as it is, then a fixed number of mutated inputs drawn from a
 * seeded generator, so a run replays exactly. Mutated inputs that got past the
 * JSON syntax (the target says so) join a small pool and are mutated again,
 * for chains of mutations; there is no coverage feedback.
 *
 * Each input is kept where a crash can reach it: a broken invariant
 * (fuzz_fail), a sanitizer's report (its death callback) or a fatal signal
 * writes it to <crash dir>/crash-<target>-<hash> before the process dies, so
 * it can be replayed (--input) and added to the corpus.
 *
 *   fuzz --target NAME [--iterations N] [--seed S] [--corpus DIR]
 *        [--save-crashes DIR] [--max-len BYTES] [--verbose] [--input FILE...]
 *   fuzz --list
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

/* ---- The driver's own target --------------------------------------------------- */

/* canary: breaks on purpose, so tests/fuzz/test_driver.py can check that a
 * failure is caught and its input saved, and that a seed replays: an input
 * whose member "canary" is no longer 1 breaks the invariant, one holding
 * "segv" dies of a signal. */
static bool run_canary(const uint8_t *data, size_t len)
{
	const char *trap = "segv";

	if (len >= 4 && memmem(data, len, trap, 4))
		raise(SIGSEGV);
	if (len >= 12 && memcmp(data, "{\"canary\":", 10) == 0)
		FUZZ_CHECK(memcmp(data + 10, "1}", 2) == 0 || data[10] == ' ',
			   "canary: %.20s", (const char *)data + 10);
	return true;
}

static const struct fuzz_target fuzz_target_canary = { "canary", NULL, NULL, run_canary, NULL };

static const struct fuzz_target *const targets[] = {
	&fuzz_target_filter, &fuzz_target_prioritize, &fuzz_target_bind, &fuzz_target_preempt,
	&fuzz_target_objects, &fuzz_target_watch, &fuzz_target_list, &fuzz_target_topo,
	&fuzz_target_plan, &fuzz_target_trace, &fuzz_target_canary,
};

enum { POOL_MAX = 256, CRASH_PATH_BUF = 4096, PROGRESS_EVERY = 100000 };

/* ---- Saving the input that broke something ---------------------------------- */

/* What is running, for the crash paths (read from a signal handler). */
static const struct fuzz_target *cur_target;
static const uint8_t *cur_data;
static size_t cur_len;
static const char *crash_dir = FUZZ_CRASH_DIR;
bool fuzz_verbose;

static uint64_t fnv1a(const uint8_t *d, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ d[i]) * 0x100000001b3ULL;
	return h;
}

static void say(const char *s)
{
	ssize_t w = write(2, s, strlen(s));

	(void)w;
}

/* Async-signal-safe: only write(2), open(2) and hand-made formatting. */
static void save_current(void)
{
	static const char hex[] = "0123456789abcdef";
	char path[CRASH_PATH_BUF], name[64] = "crash-";
	size_t n = strlen(name);
	uint64_t h;
	int fd;

	if (!cur_target || !cur_data)
		return;
	h = fnv1a(cur_data, cur_len);
	for (const char *t = cur_target->name; *t && n < 40; t++)
		name[n++] = *t;
	name[n++] = '-';
	for (int i = 15; i >= 0; i--)
		name[n++] = hex[(h >> (i * 4)) & 15];
	name[n] = '\0';
	if (strlen(crash_dir) + n + 2 > sizeof(path))
		return;
	strcpy(path, crash_dir);
	strcat(path, "/");
	strcat(path, name);
	mkdir(crash_dir, 0755);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		say("fuzz: cannot save the input to ");
		say(path);
		say("\n");
		return;
	}
	for (size_t off = 0; off < cur_len;) {
		ssize_t w = write(fd, cur_data + off, cur_len - off);

		if (w <= 0)
			break;
		off += (size_t)w;
	}
	close(fd);
	say("fuzz: the input is saved as ");
	say(path);
	say("\nfuzz: replay it with: fuzz --target ");
	say(cur_target->name);
	say(" --input ");
	say(path);
	say("\n");
	cur_data = NULL;        /* once */
}

void fuzz_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz: %s: invariant broken: ", cur_target ? cur_target->name : "?");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	save_current();
	abort();
}

static void on_fatal_signal(int sig)
{
	save_current();
	signal(sig, SIG_DFL);
	raise(sig);
}

#if defined(__SANITIZE_ADDRESS__)
/* From the sanitizers' common interface: run before a report ends the process. */
void __sanitizer_set_death_callback(void (*callback)(void));

/* GCC's UndefinedBehaviorSanitizer is a runtime of its own, whose death
 * callback is not AddressSanitizer's: have it end a halting report with
 * abort(), which on_fatal_signal sees. UBSAN_OPTIONS still overrides this. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
	return "abort_on_error=1:halt_on_error=1:print_stacktrace=1";
}
#endif

/* Under AddressSanitizer its own handler must keep the fatal signals (its
 * report has the stack) and tells us through the death callback; abort()
 * stays ours, for fuzz_fail and UndefinedBehaviorSanitizer. */
static void arm_crash_handlers(void)
{
#if defined(__SANITIZE_ADDRESS__)
	static const int sigs[] = { SIGABRT };

	__sanitizer_set_death_callback(save_current);
#else
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
#endif

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], on_fatal_signal);
}

/* ---- The corpus --------------------------------------------------------------- */

static int read_file(const char *path, struct fuzz_buf *b)
{
	FILE *f = fopen(path, "rb");
	char chunk[65536];
	size_t n;

	if (!f)
		return -errno;
	b->len = 0;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		fuzz_buf_replace(b, b->len, 0, chunk, n);
	fclose(f);
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of <dir>, in name order (readdir's order is the file
 * system's, and a replay must not depend on it). */
static size_t load_corpus(const char *dir, struct fuzz_buf **out)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL, path[CRASH_PATH_BUF];
	size_t n = 0, cap = 0, kept = 0;

	*out = NULL;
	if (!d) {
		fprintf(stderr, "fuzz: cannot open the corpus %s: %s\n", dir, strerror(errno));
		return 0;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				abort();
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), name_cmp);
	*out = calloc(n ? n : 1, sizeof(**out));
	for (size_t i = 0; i < n; i++) {
		int w = snprintf(path, sizeof(path), "%s/%s", dir, names[i]);

		if (w > 0 && (size_t)w < sizeof(path) && read_file(path, &(*out)[kept]) == 0)
			kept++;
		free(names[i]);
	}
	free(names);
	return kept;
}

/* ---- Running ------------------------------------------------------------------- */

static bool run_one(const struct fuzz_target *t, const struct fuzz_buf *b)
{
	bool deep;

	cur_data = b->data;
	cur_len = b->len;
	deep = t->run(b->data, b->len);
	cur_data = NULL;
	return deep;
}

static const struct fuzz_target *find_target(const char *name)
{
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++)
		if (strcmp(targets[i]->name, name) == 0)
			return targets[i];
	return NULL;
}

static void usage(FILE *to)
{
	fprintf(to, "usage: fuzz --target NAME [--iterations N] [--seed S] [--corpus DIR]\n"
		    "            [--save-crashes DIR] [--max-len BYTES] [--verbose]\n"
		    "            [--input FILE...]\n"
		    "       fuzz --list\n"
		    "Runs every corpus entry of tests/data/fuzz/NAME/, then N mutated inputs\n"
		    "(default 1000) drawn from seed S (default 1). An input that breaks an\n"
		    "invariant or trips a sanitizer is saved under the crash directory\n"
		    "(default %s). --input runs only the given files.\n", FUZZ_CRASH_DIR);
}

int main(int argc, char **argv)
{
	const struct fuzz_target *t = NULL;
	unsigned long long iterations = 1000, seed = 1, n_deep = 0;
	size_t max_len = 64 * 1024, n_corpus, n_pool = 0, next_pool = 0;
	const char *corpus_dir = NULL;
	char dir[CRASH_PATH_BUF];
	struct fuzz_buf *corpus, pool[POOL_MAX] = { { 0 } }, cur = { 0 };
	int first_input = 0;
	uint64_t rng, digest = 0;
	int rc = 0;
	bool deep;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--list") == 0) {
			for (size_t k = 0; k + 1 < sizeof(targets) / sizeof(targets[0]); k++)
				printf("%s\n", targets[k]->name);
			return 0;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--verbose") == 0) {
			fuzz_verbose = true;
		} else if (strcmp(a, "--input") == 0) {
			first_input = i + 1;
			break;
		} else if (!v) {
			usage(stderr);
			return 2;
		} else if (strcmp(a, "--target") == 0) {
			if (!(t = find_target(v))) {
				fprintf(stderr, "fuzz: no target %s (--list names them)\n", v);
				return 2;
			}
			i++;
		} else if (strcmp(a, "--iterations") == 0) {
			iterations = strtoull(v, NULL, 10);
			i++;
		} else if (strcmp(a, "--seed") == 0) {
			seed = strtoull(v, NULL, 0);
			i++;
		} else if (strcmp(a, "--corpus") == 0) {
			corpus_dir = v;
			i++;
		} else if (strcmp(a, "--save-crashes") == 0) {
			crash_dir = v;
			i++;
		} else if (strcmp(a, "--max-len") == 0) {
			max_len = strtoull(v, NULL, 10);
			i++;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!t) {
		usage(stderr);
		return 2;
	}
	/* The parsers log every refusal; a million refusals say nothing. */
	log_set_level(fuzz_verbose ? LOG_DEBUG : LOG_ERROR);
	cur_target = t;
	arm_crash_handlers();
	if (t->init && t->init() < 0) {
		fprintf(stderr, "fuzz: %s: setup failed\n", t->name);
		return 1;
	}
	if (first_input) {
		for (int i = first_input; i < argc; i++) {
			if (read_file(argv[i], &cur) < 0) {
				fprintf(stderr, "fuzz: cannot read %s: %s\n", argv[i], strerror(errno));
				rc = 1;
				goto out;
			}
			run_one(t, &cur);
			printf("fuzz: %s: %s: ok\n", t->name, argv[i]);
		}
		goto out;
	}
	if (!corpus_dir) {
		snprintf(dir, sizeof(dir), "%s/%s", FUZZ_CORPUS_ROOT, t->name);
		corpus_dir = dir;
	}
	n_corpus = load_corpus(corpus_dir, &corpus);
	if (!n_corpus) {
		fprintf(stderr, "fuzz: %s: the corpus %s is empty\n", t->name, corpus_dir);
		free(corpus);
		rc = 1;
		goto out;
	}
	for (size_t i = 0; i < n_corpus; i++)
		run_one(t, &corpus[i]);
	rng = seed ^ fnv1a((const uint8_t *)t->name, strlen(t->name));
	for (unsigned long long it = 0; it < iterations; it++) {
		size_t base = fuzz_below(&rng, n_corpus + n_pool);
		const struct fuzz_buf *from = base < n_corpus ? &corpus[base] : &pool[base - n_corpus];
		const struct fuzz_buf *other = &corpus[fuzz_below(&rng, n_corpus)];

		fuzz_buf_set(&cur, from->data, from->len);
		fuzz_mutate(&cur, other, t->dict, max_len, &rng);
		digest = digest * 31 + fnv1a(cur.data, cur.len);
		deep = run_one(t, &cur);
		n_deep += deep;
		if ((it + 1) % PROGRESS_EVERY == 0) {
			printf("fuzz: %s: %llu inputs, %llu past the syntax\n", t->name, it + 1,
			       n_deep);
			fflush(stdout);
		}
		/* One in four inputs that reached the parser's own checks is kept
		 * for further mutation (the pool turns over, so chains stay a few
		 * steps long); malformed JSON would only breed more of itself. */
		if (deep && fuzz_below(&rng, 4) == 0) {
			fuzz_buf_set(&pool[next_pool], cur.data, cur.len);
			next_pool = (next_pool + 1) % POOL_MAX;
			if (n_pool < POOL_MAX)
				n_pool++;
		}
	}
	/* The digest of every input run: the same seed must give the same one. */
	printf("fuzz: %s: %zu corpus entries and %llu mutated inputs (%llu past the "
	       "syntax; seed %llu, digest %016llx): no failure\n", t->name, n_corpus, iterations,
	       n_deep, seed, (unsigned long long)digest);
	for (size_t i = 0; i < n_corpus; i++)
		fuzz_buf_fini(&corpus[i]);
	free(corpus);
	for (size_t i = 0; i < n_pool; i++)
		fuzz_buf_fini(&pool[i]);
out:
	fuzz_buf_fini(&cur);
	if (t->fini)
		t->fini();
	return rc;
}
