/* bench_cache: how fast the cache takes watch events, what filter costs while
 * events stream in, and what a node and a pod cost in memory.
 *
 *   bench_cache [--nodes N] [--pods M] [--events E] [--filter-nodes K] [--reps R]
 *
 * Everything runs in-process on the real code paths (cJSON parse, the record
 * parsers, the store's writer functions, ext_filter). Figures are printed as a
 * Markdown table with same-run baselines, so they can be compared across noisy
 * machines as ratios:
 *   - event apply: cJSON parsing alone of the same event lines (what any C
 *     informer must pay) versus parse + decode + apply;
 *   - filter while streaming: the same filter with the writer idle.
 * Memory is jemalloc's stats.allocated before and after loading, per object.
 * This is a benchmark, not a test: it never fails on a time.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jemalloc/jemalloc.h>

#include "cache/cache.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/util.h"
#include "extender/config.h"
#include "extender/verbs.h"

struct opts {
	unsigned nodes, pods, events, filter_nodes, reps;
};

static size_t allocated(void)
{
	uint64_t epoch = 1;
	size_t sz = sizeof(epoch), v = 0, vsz = sizeof(v);

	mallctl("epoch", &epoch, &sz, &epoch, sz);
	if (mallctl("stats.allocated", &v, &vsz, NULL, 0) != 0)
		return 0;
	return v;
}

static void node_json(struct strbuf *sb, unsigned i)
{
	strbuf_printf(sb,
		      "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"gpu-node-%05u\","
		      "\"resourceVersion\":\"%u\",\"labels\":{\"kubernetes.io/hostname\":\"gpu-node-%05u\","
		      "\"kubernetes.io/os\":\"linux\",\"kubernetes.io/arch\":\"amd64\","
		      "\"node.kubernetes.io/instance-type\":\"p5.48xlarge\","
		      "\"topology.kubernetes.io/region\":\"us-east-1\","
		      "\"topology.kubernetes.io/zone\":\"us-east-1a\","
		      "\"network.topology.nvidia.com/spine\":\"spine-%u\","
		      "\"network.topology.nvidia.com/accelerator\":\"rack-%u\","
		      "\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\",\"nvidia.com/gpu.count\":\"8\","
		      "\"nvidia.com/gpu.memory\":\"81559\",\"nvidia.com/cuda.driver.major\":\"550\"}},"
		      "\"spec\":{\"taints\":[{\"key\":\"nvidia.com/gpu\",\"value\":\"present\","
		      "\"effect\":\"NoSchedule\"}]},\"status\":{\"capacity\":{\"cpu\":\"192\","
		      "\"memory\":\"2097152Mi\",\"nvidia.com/gpu\":\"8\",\"pods\":\"110\"},"
		      "\"allocatable\":{\"cpu\":\"191500m\",\"memory\":\"2080000Mi\",\"nvidia.com/gpu\":\"8\","
		      "\"pods\":\"110\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
		      i, 1000 + i, i, i / 256, i / 32);
}

/* One watch event line for pod <i>: bound to a node, 1 GPU. */
static void pod_event(struct strbuf *sb, const char *type, unsigned i, unsigned node, unsigned rv)
{
	strbuf_printf(sb,
		      "{\"type\":\"%s\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":"
		      "{\"name\":\"train-%u\",\"namespace\":\"ml\",\"uid\":\"00000000-0000-4000-8000-%012u\","
		      "\"resourceVersion\":\"%u\",\"labels\":{\"app\":\"trainer\",\"job\":\"job-%u\"}},"
		      "\"spec\":{\"nodeName\":\"gpu-node-%05u\",\"schedulerName\":\"default-scheduler\","
		      "\"containers\":[{\"name\":\"main\",\"image\":\"registry.example/train:1\","
		      "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\",\"memory\":\"64Gi\"},"
		      "\"requests\":{\"cpu\":\"8\",\"memory\":\"64Gi\"}}}]},"
		      "\"status\":{\"phase\":\"Running\"}}}\n",
		      type, i, i, rv, i / 8, node);
}

static double now_s(void)
{
	return util_now_ns() / 1e9;
}

/* Apply one event line as the informer does. */
static void apply_line(struct cache *c, const char *line, size_t len)
{
	char err[CACHE_ERR_LEN];
	cJSON *ev = cJSON_ParseWithLength(line, len);
	const cJSON *obj = cJSON_GetObjectItemCaseSensitive(ev, "object");
	const char *type = json_str(ev, "type");
	struct cache_pod *p = cache_pod_parse(obj, cache_get_opts(c), err, sizeof(err));

	if (p && type && strcmp(type, "DELETED") == 0) {
		cache_pod_delete(c, p->uid);
		cache_pod_free(p);
	} else if (p) {
		cache_pod_apply(c, p);
	}
	cJSON_Delete(ev);
}

static void lines_each(const struct strbuf *sb, void (*fn)(const char *, size_t, void *), void *arg)
{
	const char *p = sb->buf, *end = sb->buf + sb->len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		fn(p, (size_t)(nl - p), arg);
		p = nl + 1;
	}
}

static void parse_only(const char *line, size_t len, void *arg)
{
	cJSON_Delete(cJSON_ParseWithLength(line, len));
	(void)arg;
}

static void apply_cb(const char *line, size_t len, void *arg)
{
	apply_line(arg, line, len);
}

static struct cache *load_nodes(const struct ext_config *cfg, unsigned n, size_t *bytes)
{
	struct cache *c = cache_new(&cfg->cache);
	size_t before = allocated();
	char err[CACHE_ERR_LEN];

	for (unsigned i = 0; i < n; i++) {
		struct strbuf sb = STRBUF_INIT;
		cJSON *o;

		node_json(&sb, i);
		o = cJSON_Parse(sb.buf);
		cache_node_upsert(c, cache_node_parse(o, &cfg->cache, err, sizeof(err)));
		cJSON_Delete(o);
		strbuf_fini(&sb);
	}
	cache_writer_reclaim(c);
	*bytes = allocated() - before;
	cache_set_synced(c, true);
	return c;
}

/* ---- filter while the writer streams events --------------------------------- */

struct streamer {
	struct cache *c;
	const struct strbuf *events;
	volatile int stop;
	unsigned long applied;
};

static void *stream_main(void *arg)
{
	struct streamer *st = arg;

	/* This thread replays the watch: it is the cache's writer, as the
	 * informer's thread is in the daemon. */
	cache_writer_claim(st->c);
	while (!st->stop) {
		const char *p = st->events->buf, *end = p + st->events->len;

		while (p < end && !st->stop) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));

			apply_line(st->c, p, (size_t)(nl - p));
			st->applied++;
			p = nl + 1;
		}
		cache_writer_reclaim(st->c);
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void filter_latency(const struct ext_service *svc, const char *body, unsigned reps,
			   double *p50, double *p99)
{
	double *t = calloc(reps, sizeof(*t));

	for (unsigned i = 0; i < reps; i++) {
		struct ext_reply r;
		double t0 = now_s();

		ext_reply_init(&r);
		ext_filter(svc, body, strlen(body), &r);
		t[i] = (now_s() - t0) * 1e6;
		ext_reply_fini(&r);
	}
	qsort(t, reps, sizeof(*t), cmp_double);
	*p50 = t[reps / 2];
	*p99 = t[(size_t)(reps * 0.99)];
	free(t);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "nodes", required_argument, NULL, 'n' }, { "pods", required_argument, NULL, 'p' },
		{ "events", required_argument, NULL, 'e' },
		{ "filter-nodes", required_argument, NULL, 'f' },
		{ "reps", required_argument, NULL, 'r' }, { NULL, 0, NULL, 0 },
	};
	struct opts o = { 5000, 20000, 200000, 500, 2000 };
	struct ext_config cfg;
	struct ext_service svc = { 0 };
	struct strbuf events = STRBUF_INIT, body = STRBUF_INIT;
	struct streamer st = { 0 };
	pthread_t th;
	size_t node_bytes, before;
	double t0, t_parse, t_apply, q50, q99, s50, s99;
	struct cache *c;
	int opt;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		unsigned v = (unsigned)strtoul(optarg, NULL, 10);

		switch (opt) {
		case 'n': o.nodes = v; break;
		case 'p': o.pods = v; break;
		case 'e': o.events = v; break;
		case 'f': o.filter_nodes = v; break;
		case 'r': o.reps = v; break;
		default:
			fprintf(stderr, "usage: bench_cache [--nodes N] [--pods M] [--events E] "
				"[--filter-nodes K] [--reps R]\n");
			return 2;
		}
	}
	if (o.filter_nodes > o.nodes)
		o.filter_nodes = o.nodes;
	if (!o.nodes || !o.pods || !o.events || !o.reps) {
		fprintf(stderr, "bench_cache: sizes must be positive\n");
		return 2;
	}
	/* Only the figures: a full cluster would log every refused filter. */
	log_set_level(LOG_WARN);
	ext_config_defaults(&cfg);
	c = load_nodes(&cfg, o.nodes, &node_bytes);

	/* Pods: ADDED for each, then the event mix (MODIFIED, DELETED+ADDED). */
	for (unsigned i = 0; i < o.pods; i++)
		pod_event(&events, "ADDED", i, i % o.nodes, 2000000 + i);
	before = allocated();
	lines_each(&events, apply_cb, c);
	cache_writer_reclaim(c);
	{
		size_t pod_bytes = allocated() - before;
		struct strbuf mix = STRBUF_INIT;

		for (unsigned i = 0; i < o.events; i++) {
			unsigned pod = (i * 2654435761u) % o.pods;

			pod_event(&mix, i % 10 == 9 ? "DELETED" : "MODIFIED", pod, pod % o.nodes,
				  3000000 + i);
		}
		t0 = now_s();
		lines_each(&mix, parse_only, NULL);
		t_parse = now_s() - t0;
		t0 = now_s();
		lines_each(&mix, apply_cb, c);
		t_apply = now_s() - t0;

		printf("# bench_cache: %u nodes (8 GPUs each), %u pods, %u events, filter over %u "
		       "names\n\n", o.nodes, o.pods, o.events, o.filter_nodes);
		printf("| measure | value | baseline (same run) | ratio |\n|---|---|---|---|\n");
		printf("| watch events applied per second (1 thread) | %.0f | cJSON parse only: "
		       "%.0f/s | %.2f of parse-only |\n", o.events / t_apply, o.events / t_parse,
		       t_parse / t_apply);
		printf("| memory per node (8 GPUs, 12 labels, 1 taint) | %.0f B | | |\n",
		       (double)node_bytes / o.nodes);
		printf("| memory per pod | %.0f B | | |\n", (double)pod_bytes / o.pods);
		strbuf_fini(&mix);
	}

	/* Filter latency, quiet and while the writer streams pod events. */
	svc.cache = c;
	svc.cfg = &cfg;
	svc.score = placement_score_find(cfg.score_policy);
	svc.source = "bench";
	strbuf_puts(&body, "{\"Pod\":{\"metadata\":{\"name\":\"probe\",\"namespace\":\"ml\","
			   "\"uid\":\"probe-uid\"},\"spec\":{\"containers\":[{\"name\":\"main\","
			   "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"4\"}}}]}},"
			   "\"Nodes\":null,\"NodeNames\":[");
	for (unsigned i = 0; i < o.filter_nodes; i++)
		strbuf_printf(&body, "%s\"gpu-node-%05u\"", i ? "," : "",
			      (i * 7919u) % o.nodes);
	strbuf_puts(&body, "]}");
	filter_latency(&svc, body.buf, o.reps, &q50, &q99);
	st.c = c;
	st.events = &events;
	pthread_create(&th, NULL, stream_main, &st);
	filter_latency(&svc, body.buf, o.reps, &s50, &s99);
	st.stop = 1;
	pthread_join(th, NULL);
	printf("| filter p50, %u names, while events stream | %.1f us | idle writer: %.1f us | "
	       "%.2f |\n", o.filter_nodes, s50, q50, s50 / q50);
	printf("| filter p99, %u names, while events stream | %.1f us | idle writer: %.1f us | "
	       "%.2f |\n", o.filter_nodes, s99, q99, s99 / q99);
	printf("| events applied during the streaming run | %lu | | |\n", st.applied);
	strbuf_fini(&events);
	strbuf_fini(&body);
	cache_free(c);
	return 0;
}
