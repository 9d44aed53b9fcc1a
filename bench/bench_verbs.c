/* bench_verbs: troupe's server-side time per request, in process, on a cluster
 * and request bodies from bench/gen_cluster.py.
 *
 *   bench_verbs --data DIR [--reps R]
 *   bench_verbs --unknown-names N [--reps R]
 *
 * Loads DIR/cluster.json into a cache exactly as troupe --cluster does (the
 * topology registry included), then times, per body in DIR: request decode
 * (ext_args_decode, with MB/s), the per-node evaluation (placement check of every
 * named node), response encode (every named node passing), and the whole verbs
 * (ext_filter, ext_prioritize, their sum) at the sizes generated - what a
 * request costs troupe between reading the body and handing back the reply,
 * without HTTP. Memory per node is what the allocator holds after the load
 * (jemalloc's stats.allocated when linked with it), per node. Prints Markdown;
 * never fails on a time.
 *
 * --unknown-names N times a filter of a one-GPU pod over names troupe does not
 * know (the cluster of --data, or an empty cache), at N/4 and N names, each
 * against a baseline measured in the same run on the same body: its decode
 * alone (ext_args_decode), linear in the body. Linear filtering keeps the
 * ratio filter / decode about the same at both sizes and N costs about four
 * times N/4 (caches and page faults push it somewhat above). Over
 * TROUPE_MAX_NODE_NAMES the request is refused (decode is the refusal), and its
 * cost must not grow with N: the list is scanned up to the limit, never copied.
 */
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "extender/codec.h"
#include "extender/config.h"
#include "extender/cycle.h"
#include "extender/verbs.h"
#include "gang/gang.h"
#include "placement/placement.h"

#ifdef TROUPE_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

static size_t allocated(void)
{
#ifdef TROUPE_HAVE_JEMALLOC
	uint64_t epoch = 1;
	size_t sz = sizeof(epoch), v = 0, vsz = sizeof(v);

	mallctl("epoch", &epoch, &sz, &epoch, sz);
	if (mallctl("stats.allocated", &v, &vsz, NULL, 0) == 0)
		return v;
#endif
	return 0;
}

/* The whole of <path> (up to 1 GiB), NUL-terminated, or NULL. */
static char *slurp(const char *path, size_t *len)
{
	char *buf = NULL;

	return util_read_file(path, (size_t)1 << 30, &buf, len) == 0 ? buf : NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct dist {
	double p50, p99;
};

static struct dist dist_of(double *t, unsigned n)
{
	qsort(t, n, sizeof(*t), cmp_double);
	return (struct dist){ t[n / 2], t[(size_t)((n - 1) * 0.99)] };
}

enum what { W_DECODE, W_EVAL, W_ENCODE, W_FILTER, W_PRIORITIZE, W_FILTER_UNKNOWN };

/* One timed operation on <body>, in microseconds. */
static double once(const struct ext_service *svc, enum what w, const char *body, size_t len)
{
	struct ext_args a;
	struct ext_reply r;
	char err[256];
	uint64_t t0 = 0, t1 = 0;

	ext_reply_init(&r);
	if (w == W_FILTER || w == W_PRIORITIZE || w == W_FILTER_UNKNOWN) {
		t0 = util_now_ns();
		if (w != W_PRIORITIZE)
			ext_filter(svc, body, len, &r);
		else
			ext_prioritize(svc, body, len, &r);
		t1 = util_now_ns();
		if (w == W_FILTER_UNKNOWN ? !strstr(r.body.buf, "\"NodeNames\":[]") &&
					    !(r.status == 400 && strstr(r.body.buf, "at most"))
					  : r.status != 200 || r.error) {
			fprintf(stderr, "bench_verbs: the verb answered %u: %.*s\n", r.status,
				(int)(r.body.len < 300 ? r.body.len : 300), r.body.buf);
			exit(1);
		}
		ext_reply_fini(&r);
		return (double)(t1 - t0) / 1e3;
	}
	ext_reply_fini(&r);
	if (w == W_DECODE) {
		t0 = util_now_ns();
		/* (Over TROUPE_MAX_NODE_NAMES, decode is the refusal.) */
		if (ext_args_decode(body, len, &a, err, sizeof(err)) < 0 && !strstr(err, "at most")) {
			fprintf(stderr, "bench_verbs: %s\n", err);
			exit(1);
		}
		t1 = util_now_ns();
		ext_args_fini(&a);
		return (double)(t1 - t0) / 1e3;
	}
	if (ext_args_decode(body, len, &a, err, sizeof(err)) < 0 || a.full_nodes) {
		ext_args_fini(&a);
		return -1;
	}
	if (w == W_EVAL) {
		struct placement_request req = { .demand = { .gpu_resource = 0, .gpus = 1 } };
		const char *const *names = cache_get_opts(svc->cache)->gpu_resources;
		unsigned fits = 0;

		t0 = util_now_ns();
		cache_read_begin(svc->cache);
		for (size_t x = 0; x < a.n_nodes; x++) {
			struct cache_node_view v;
			struct placement_fit fit;

			if (cache_node_lookup(svc->cache, a.names[x].s, a.names[x].len, &v)) {
				placement_check_request(&v, &req, names, &fit);
				fits += fit.verdict == PLACEMENT_FITS;
			}
		}
		cache_read_end(svc->cache);
		t1 = util_now_ns();
		ext_args_fini(&a);
		return fits ? (double)(t1 - t0) / 1e3 : (double)(t1 - t0) / 1e3;
	} else {
		struct ext_filter_out out;
		struct strbuf sb = STRBUF_INIT;

		ext_filter_out_init(&out);
		for (size_t x = 0; x < a.n_nodes; x++)
			ext_filter_out_pass_name(&out, a.names[x].s, a.names[x].len);
		t0 = util_now_ns();
		ext_filter_out_encode(&out, false, &sb);
		t1 = util_now_ns();
		strbuf_fini(&sb);
		ext_filter_out_fini(&out);
		ext_args_fini(&a);
		return (double)(t1 - t0) / 1e3;
	}
}

static struct dist measure(const struct ext_service *svc, enum what w, const char *body,
			   size_t len, unsigned reps)
{
	double *t = calloc(reps, sizeof(*t));
	struct dist d;

	if (!t)
		exit(1);
	for (unsigned i = 0; i < (reps < 20 ? 2 : reps / 10); i++)
		(void)once(svc, w, body, len);          /* warm-up */
	for (unsigned i = 0; i < reps; i++)
		t[i] = once(svc, w, body, len);
	d = dist_of(t, reps);
	free(t);
	return d;
}

/* The prioritize body kube-scheduler sends after <body>'s filter: the same
 * pod, over the names the filter passed (in its order). Caller frees. */
static char *prioritize_body(const struct ext_service *svc, const char *body, size_t len)
{
	struct ext_reply r;
	cJSON *req = cJSON_ParseWithLength(body, len), *ans;
	char *out = NULL;

	ext_reply_init(&r);
	ext_filter(svc, body, len, &r);
	ans = cJSON_ParseWithLength(r.body.buf, r.body.len);
	if (req && ans && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(ans, "NodeNames"))) {
		cJSON_ReplaceItemInObjectCaseSensitive(
			req, "NodeNames",
			cJSON_DetachItemFromObjectCaseSensitive(ans, "NodeNames"));
		out = cJSON_PrintUnformatted(req);
	}
	cJSON_Delete(ans);
	cJSON_Delete(req);
	ext_reply_fini(&r);
	return out;
}

/* A filter body for a one-GPU pod over <n> names no node has. Caller frees. */
static char *unknown_names_body(size_t n, size_t *len)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_puts(&sb, "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\","
			"\"uid\":\"u-unknown\"},\"spec\":{\"containers\":[{\"name\":\"c\","
			"\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}},"
			"\"Nodes\":null,\"NodeNames\":[");
	for (size_t i = 0; i < n; i++)
		strbuf_printf(&sb, "%s\"unknown-node-%07zu\"", i ? "," : "", i);
	strbuf_puts(&sb, "]}");
	if (sb.failed)
		exit(1);
	*len = sb.len;
	return sb.buf;
}

/* --unknown-names: filter over unknown names at n/4 and n, each against its
 * decode in the same run (see the top of the file). */
static int unknown_names(const struct ext_service *svc, size_t n, unsigned reps)
{
	double per[2] = { 0, 0 }, fil[2] = { 0, 0 };

	printf("# bench_verbs: filter over names troupe does not know, %u repetitions\n\n", reps);
	printf("| names | body | decode p50 (baseline) | ext_filter p50 | filter / decode | answer |\n"
	       "|---|---|---|---|---|---|\n");
	for (int k = 0; k < 2; k++) {
		size_t m = k == 0 ? n / 4 : n, len;
		char *body = unknown_names_body(m, &len);
		struct dist dec = measure(svc, W_DECODE, body, len, reps);
		struct dist f = measure(svc, W_FILTER_UNKNOWN, body, len, reps);

		per[k] = f.p50 / dec.p50;
		fil[k] = f.p50;
		printf("| %zu | %.1f MB | %.0f µs | %.0f µs | %.2f | %s |\n", m, (double)len / 1e6,
		       dec.p50, f.p50, per[k],
		       m > TROUPE_MAX_NODE_NAMES ? "400: over TROUPE_MAX_NODE_NAMES" : "every name failed");
		free(body);
	}
	printf("\n%zu names cost %.2f times %zu names (4 when linear); filter / decode goes "
	       "%.2f -> %.2f\n", n, fil[1] / fil[0], n / 4, per[0], per[1]);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "data", required_argument, NULL, 'd' }, { "reps", required_argument, NULL, 'r' },
		{ "unknown-names", required_argument, NULL, 'u' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = NULL;
	unsigned reps = 300;
	size_t unknown = 0;
	struct ext_config cfg;
	struct ext_service svc = { 0 };
	struct placement_registry *reg;
	struct cache_stats st;
	struct cache *c;
	char path[4096], err[512], *files[64];
	unsigned nfiles = 0;
	size_t before;
	DIR *dd;
	struct dirent *de;
	int opt;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (opt == 'd')
			dir = optarg;
		else if (opt == 'r')
			reps = (unsigned)strtoul(optarg, NULL, 10);
		else if (opt == 'u')
			unknown = strtoul(optarg, NULL, 10);
		else
			goto usage;
	}
	if ((!dir && !unknown) || !reps || (unknown && unknown < 4)) {
usage:
		fprintf(stderr, "usage: bench_verbs --data DIR (from bench/gen_cluster.py) "
			"[--reps R]\n       bench_verbs --unknown-names N (at least 4) [--reps R]\n");
		return 2;
	}
	log_set_level(LOG_ERROR);
	ext_config_defaults(&cfg);
	reg = placement_registry_new();
	cfg.cache.node_derive = placement_topo_derive;
	cfg.cache.node_release = placement_topo_release;
	cfg.cache.hook_ctx = reg;
	before = allocated();
	c = cache_new(&cfg.cache);
	snprintf(path, sizeof(path), "%s/cluster.json", dir ? dir : "(none)");
	if (!reg || !c || (dir && cache_snapshot_load(c, path, err, sizeof(err)) < 0)) {
		fprintf(stderr, "bench_verbs: %s\n", c ? err : "out of memory");
		return 1;
	}
	cache_set_synced(c, true);
	cache_get_stats(c, &st);
	svc.cache = c;
	svc.cfg = &cfg;
	svc.score = placement_score_find(cfg.score_policy);
	svc.source = path;
	svc.registry = reg;
	svc.gangs = gang_manager_new(c, &cfg.gang);
	svc.cycle = ext_cycle_new();    /* as troupe runs */
	if (unknown) {
		int ret = unknown_names(&svc, unknown, reps);

		gang_manager_free(svc.gangs);
		ext_cycle_free(svc.cycle);
		cache_free(c);
		placement_registry_free(reg);
		return ret;
	}
	printf("# bench_verbs: %zu nodes, %zu pods from %s, %u repetitions\n\n", st.nodes, st.pods,
	       dir, reps);
	printf("| measure | value |\n|---|---|\n");
	if (allocated())
		printf("| memory after loading the cluster, per node (nodes, pods, topology) | %.0f B |\n",
		       (double)(allocated() - before) / (double)st.nodes);
	dd = opendir(dir);
	while (dd && (de = readdir(dd)) && nfiles < 64)
		if (strncmp(de->d_name, "filter-", 7) == 0)
			files[nfiles++] = strdup(de->d_name);
	if (dd)
		closedir(dd);
	qsort(files, nfiles, sizeof(*files), by_name);
	for (unsigned i = 0; i < nfiles; i++) {
		size_t len = 0;
		char *body, *pbody = NULL;
		bool names = strncmp(files[i], "filter-names-", 13) == 0;
		unsigned k = (unsigned)strtoul(files[i] + (names ? 13 : 13), NULL, 10);
		unsigned r = reps;
		struct dist dec, fil;

		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		body = slurp(path, &len);
		if (!body)
			continue;
		if (len > 4u << 20)
			r = reps / 10 > 10 ? reps / 10 : 10;    /* megabytes a request */
		k = (unsigned)strtoul(strrchr(files[i], '-') + 1, NULL, 10);
		dec = measure(&svc, W_DECODE, body, len, r);
		printf("| %s (%u %s, %.1f kB): decode p50 / p99 | %.1f / %.1f µs (%.0f MB/s at p50) |\n",
		       files[i], k, names ? "names" : "full Nodes", (double)len / 1e3, dec.p50, dec.p99,
		       (double)len / dec.p50);
		if (names) {
			struct dist ev = measure(&svc, W_EVAL, body, len, r);
			struct dist en = measure(&svc, W_ENCODE, body, len, r);

			printf("| %s: per-node evaluation (lookup + fit + topology) | %.0f ns a node |\n",
			       files[i], ev.p50 * 1e3 / k);
			printf("| %s: encode, every node passing, p50 | %.1f µs |\n", files[i], en.p50);
		}
		fil = measure(&svc, W_FILTER, body, len, r);
		printf("| %s: ext_filter p50 / p99 | %.1f / %.1f µs |\n", files[i], fil.p50, fil.p99);
		if (names) {
			struct dist pr, cold, both;
			double *t = calloc(r, sizeof(*t));
			char *seq = prioritize_body(&svc, body, len);
			struct ext_cycle *cycle = svc.cycle;

			snprintf(path, sizeof(path), "%s/prioritize-names-%u.json", dir, k);
			pbody = slurp(path, &len);
			if (pbody && t && seq) {
				/* Alone: every name of the body, no filter before it. */
				svc.cycle = NULL;
				pr = measure(&svc, W_PRIORITIZE, pbody, len, r);
				/* What kube-scheduler sends: filter, then prioritize over the
				 * names filter passed - without, then with, the scores filter
				 * leaves for it (extender/cycle.h). */
				for (unsigned j = 0; j < r; j++)
					t[j] = once(&svc, W_FILTER, body, strlen(body)) +
					       once(&svc, W_PRIORITIZE, seq, strlen(seq));
				cold = dist_of(t, r);
				svc.cycle = cycle;
				for (unsigned j = 0; j < r; j++)
					t[j] = once(&svc, W_FILTER, body, strlen(body)) +
					       once(&svc, W_PRIORITIZE, seq, strlen(seq));
				both = dist_of(t, r);
				printf("| %s: ext_prioritize alone, every name, p50 / p99 | %.1f / %.1f µs |\n",
				       files[i], pr.p50, pr.p99);
				printf("| %u names: filter + prioritize (over the names filter passed), "
				       "prioritize doing its own lookups, p50 / p99 | %.1f / %.1f µs |\n", k,
				       cold.p50, cold.p99);
				printf("| %u names: filter + prioritize p50 / p99 | %.1f / %.1f µs |\n", k,
				       both.p50, both.p99);
			}
			free(seq);
			free(t);
			free(pbody);
		}
		free(body);
		free(files[i]);
	}
	gang_manager_free(svc.gangs);
	ext_cycle_free(svc.cycle);
	cache_free(c);
	placement_registry_free(reg);
	return 0;
}
