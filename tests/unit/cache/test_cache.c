/* Unit tests for src/cache: parsing Node and Pod objects, a pod's demand as
 * Kubernetes computes it, device lists, the node store, GPU accounting by pods,
 * assume/forget, snapshot loading, a concurrent property test of assume, pod
 * groups, the by-node index, the sweeps after a relist, where the API server is
 * and how troupe authenticates to it (kubeconfig, in-cluster, plain URL), and the
 * permissions troupe checks: its reviews and how their answers are read.
 *
 * Objects are written as JSON with single quotes (json_sq turns them into
 * double quotes), so each case reads like the object it stands for. Tables
 * check every row and report each mismatch before failing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "cache/api.h"
#include "cache/cache.h"
/* cache's own test: the relist sweeps and the request set-up are internal to cache/. */
#include "cache/api_internal.h"
#include "cache/nameidx.h"
#include "common/log.h"
#include "common/util.h"
#include "common/yamljson.h"

static const struct cache_opts OPTS = {
	.gpu_resources = { "nvidia.com/gpu" },
	.n_gpu_resources = 1,
};

static const struct cache_opts OPTS2 = {
	.gpu_resources = { "nvidia.com/gpu", "amd.com/gpu" },
	.n_gpu_resources = 2,
};

/* ---- Helpers -------------------------------------------------------------- */

/* Copy JSON written with single quotes into <out>, quotes made double. */
static void sq_text(char *out, size_t len, const char *text)
{
	snprintf(out, len, "%s", text);
	for (char *p = out; *p; p++)
		if (*p == '\'')
			*p = '"';
}

/* Parse JSON written with single quotes. */
static cJSON *json_sq(const char *text)
{
	size_t len = strlen(text) + 1;
	char *s = malloc(len);
	cJSON *j;

	assert_non_null(s);
	sq_text(s, len, text);
	j = cJSON_Parse(s);
	if (!j)
		fail_msg("test JSON does not parse: %s", s);
	free(s);
	return j;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

/* A Node with <cap>/<alloc> GPUs (-1 leaves the field out), Ready. */
static cJSON *node_json(const char *name, int cap, int alloc)
{
	char capf[64] = "", allocf[64] = "", text[1024];

	if (cap >= 0)
		snprintf(capf, sizeof(capf), ",'nvidia.com/gpu':'%d'", cap);
	if (alloc >= 0)
		snprintf(allocf, sizeof(allocf), ",'nvidia.com/gpu':'%d'", alloc);
	snprintf(text, sizeof(text),
		 "{'kind':'Node','metadata':{'name':'%s'},"
		 "'status':{'capacity':{'cpu':'16'%s},'allocatable':{'cpu':'16'%s},"
		 "'conditions':[{'type':'Ready','status':'True'}]}}",
		 name, capf, allocf);
	return json_sq(text);
}

static struct cache_node *node_new(const char *name, int cap, int alloc)
{
	cJSON *j = node_json(name, cap, alloc);
	char err[CACHE_ERR_LEN] = "";
	struct cache_node *n = cache_node_parse(j, &OPTS, err, sizeof(err));

	if (!n)
		fail_msg("cache_node_parse(%s): %s", name, err);
	cJSON_Delete(j);
	return n;
}

static void add_node(struct cache *c, const char *name, int cap, int alloc)
{
	assert_int_equal(cache_node_upsert(c, node_new(name, cap, alloc)), 0);
}

struct podspec {
	const char *uid;        /* also the pod's name */
	const char *node;       /* spec.nodeName, or NULL */
	unsigned gpus;          /* limits[nvidia.com/gpu] */
	const char *phase;      /* NULL: Running when bound, else Pending */
	const char *ids;        /* troupe.io/gpu-ids, or NULL */
	bool deleting;
};

static struct cache_pod *pod_make(struct podspec s)
{
	char ann[128] = "", del[80] = "", node[300] = "", text[2048];
	char err[CACHE_ERR_LEN] = "";
	struct cache_pod *p;
	cJSON *j;

	if (s.ids)
		snprintf(ann, sizeof(ann), ",'annotations':{'troupe.io/gpu-ids':'%s'}", s.ids);
	if (s.deleting)
		snprintf(del, sizeof(del), ",'deletionTimestamp':'2024-01-01T00:00:00Z'");
	if (s.node)
		snprintf(node, sizeof(node), "'nodeName':'%s',", s.node);
	if (!s.phase)
		s.phase = s.node ? "Running" : "Pending";
	snprintf(text, sizeof(text),
		 "{'kind':'Pod','metadata':{'name':'%s','namespace':'ml','uid':'%s'%s%s},"
		 "'spec':{%s'containers':[{'name':'main','resources':"
		 "{'limits':{'nvidia.com/gpu':'%u'},'requests':{'cpu':'1'}}}]},"
		 "'status':{'phase':'%s'}}",
		 s.uid, s.uid, ann, del, node, s.gpus, s.phase);
	j = json_sq(text);
	p = cache_pod_parse(j, &OPTS, err, sizeof(err));
	if (!p)
		fail_msg("cache_pod_parse(%s): %s", s.uid, err);
	cJSON_Delete(j);
	return p;
}

#define POD(...) pod_make((struct podspec){ __VA_ARGS__ })

/* What a reader sees of a node, copied out of a read section. */
struct seen {
	bool found;
	uint64_t used;
	uint32_t unattributed;
	uint32_t free_gpus;
	uint64_t free_mask;
	uint32_t capacity, allocatable;
};

static struct seen look(struct cache *c, const char *name)
{
	struct seen s = { 0 };
	struct cache_node_view v;

	cache_read_begin(c);
	if (cache_node_lookup(c, name, strlen(name), &v)) {
		s.found = true;
		s.used = v.used;
		s.unattributed = v.unattributed;
		s.free_gpus = cache_view_free_gpus(&v);
		s.free_mask = cache_view_free_mask(&v);
		s.capacity = v.node->gpu_capacity;
		s.allocatable = v.node->gpu_allocatable;
	}
	cache_read_end(c);
	return s;
}

static void assert_usage(struct cache *c, const char *node, uint64_t used, uint32_t unattr)
{
	struct seen s = look(c, node);

	if (!s.found)
		fail_msg("node %s is not in the cache", node);
	if (s.used != used || s.unattributed != unattr)
		fail_msg("node %s: used %#" PRIx64 " unattributed %u; want used %#" PRIx64
			 " unattributed %u",
			 node, s.used, s.unattributed, used, unattr);
}

static struct cache_pod_info pod_info(struct cache *c, const char *uid)
{
	struct cache_pod_info pi;

	if (cache_pod_get(c, uid, &pi) != 0)
		fail_msg("pod %s is not in the cache", uid);
	return pi;
}

static int cache_setup(void **state)
{
	struct cache *c = cache_new(&OPTS);

	if (!c)
		return -1;
	*state = c;
	return 0;
}

static int cache_teardown(void **state)
{
	cache_free(*state);
	return 0;
}

static char *temp_file_with(const char *text)
{
	char *path = strdup("/tmp/troupe-test-cache-XXXXXX");
	size_t len = strlen(text);
	int fd;

	assert_non_null(path);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	while (len > 0) {
		ssize_t w = write(fd, text, len);

		assert_true(w > 0);
		text += w;
		len -= (size_t)w;
	}
	close(fd);
	return path;
}

/* ---- cache_node_parse ------------------------------------------------------- */

static void test_cache_node_parse_gpu_capacity_and_allocatable(void **state)
{
	static const struct {
		int cap, alloc;                 /* -1: field absent */
		int resource;
		uint32_t want_cap, want_alloc;
	} cases[] = {
		{ 8, 8, 0, 8, 8 },
		{ 8, 6, 0, 8, 6 },              /* unhealthy devices are not allocatable */
		{ 8, 0, 0, 8, 0 },
		{ -1, 4, 0, 4, 4 },
		{ 8, -1, 0, 8, 8 },             /* no allocatable: all devices usable */
		{ 4, 8, 0, 8, 8 },
		{ 64, 64, 0, 64, 64 },
		{ 100, 100, 0, 64, 64 },        /* the mask names 64 devices */
		{ 100, 50, 0, 64, 50 },
		{ 0, 0, -1, 0, 0 },
		{ -1, -1, -1, 0, 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache_node *n = node_new("n", cases[i].cap, cases[i].alloc);

		if (n->gpu_resource != cases[i].resource || n->gpu_capacity != cases[i].want_cap ||
		    n->gpu_allocatable != cases[i].want_alloc) {
			print_message("capacity %d allocatable %d: got resource %d %u/%u, want %d "
				      "%u/%u\n",
				      cases[i].cap, cases[i].alloc, n->gpu_resource, n->gpu_capacity,
				      n->gpu_allocatable, cases[i].resource, cases[i].want_cap,
				      cases[i].want_alloc);
			bad++;
		}
		cache_node_free(n);
	}
	assert_int_equal(bad, 0);
}

/* A node offers the first managed resource it advertises. */
static void test_cache_node_parse_picks_first_advertised_resource(void **state)
{
	static const struct {
		const char *status;
		int resource;
		uint32_t cap;
	} cases[] = {
		{ "{'allocatable':{'amd.com/gpu':'4'}}", 1, 4 },
		{ "{'allocatable':{'amd.com/gpu':'4','nvidia.com/gpu':'2'}}", 0, 2 },
		{ "{'allocatable':{'nvidia.com/gpu':'0','amd.com/gpu':'4'}}", 1, 4 },
		{ "{'allocatable':{'example.com/fpga':'4'}}", -1, 0 },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[256], err[CACHE_ERR_LEN];
		cJSON *j;
		struct cache_node *n;

		snprintf(text, sizeof(text), "{'metadata':{'name':'n'},'status':%s}",
			 cases[i].status);
		j = json_sq(text);
		n = cache_node_parse(j, &OPTS2, err, sizeof(err));
		assert_non_null(n);
		assert_int_equal(n->gpu_resource, cases[i].resource);
		assert_int_equal(n->gpu_capacity, cases[i].cap);
		cache_node_free(n);
		cJSON_Delete(j);
	}
}

static void test_cache_node_parse_cpu_and_memory_are_allocatable(void **state)
{
	cJSON *j = json_sq("{'metadata':{'name':'n'},'status':{"
			   "'capacity':{'cpu':'96','memory':'2Gi'},"
			   "'allocatable':{'cpu':'95500m','memory':'1Gi'}}}");
	char err[CACHE_ERR_LEN];
	struct cache_node *n = cache_node_parse(j, &OPTS, err, sizeof(err));

	(void)state;
	assert_non_null(n);
	assert_string_equal(n->name, "n");
	assert_int_equal(n->cpu_milli, 95500);
	assert_int_equal(n->mem_bytes, INT64_C(1073741824));
	cache_node_free(n);
	cJSON_Delete(j);
}

static void test_cache_node_parse_ready_condition(void **state)
{
	static const struct {
		const char *status;
		bool ready;
	} cases[] = {
		{ "{'conditions':[{'type':'Ready','status':'True'}]}", true },
		{ "{'conditions':[{'type':'Ready','status':'False'}]}", false },
		{ "{'conditions':[{'type':'Ready','status':'Unknown'}]}", false },
		{ "{'conditions':[{'type':'Ready'}]}", false },
		{ "{'conditions':[{'type':'MemoryPressure','status':'True'}]}", false },
		{ "{'conditions':[{'type':'MemoryPressure','status':'False'},"
		  "{'type':'Ready','status':'True'}]}",
		  true },
		{ "{'conditions':[]}", false },
		{ "{}", false },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[512], err[CACHE_ERR_LEN];
		cJSON *j;
		struct cache_node *n;

		snprintf(text, sizeof(text), "{'metadata':{'name':'n'},'status':%s}",
			 cases[i].status);
		j = json_sq(text);
		n = cache_node_parse(j, &OPTS, err, sizeof(err));
		assert_non_null(n);
		if (n->ready != cases[i].ready) {
			print_message("%s: ready %d, want %d\n", cases[i].status, n->ready,
				      cases[i].ready);
			bad++;
		}
		cache_node_free(n);
		cJSON_Delete(j);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_node_parse_unschedulable(void **state)
{
	static const struct {
		const char *spec;
		bool unschedulable;
	} cases[] = {
		{ "{'unschedulable':true}", true },
		{ "{'unschedulable':false}", false },
		{ "{}", false },
		{ "{'unschedulable':'true'}", false },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[256], err[CACHE_ERR_LEN];
		cJSON *j;
		struct cache_node *n;

		snprintf(text, sizeof(text), "{'metadata':{'name':'n'},'spec':%s}", cases[i].spec);
		j = json_sq(text);
		n = cache_node_parse(j, &OPTS, err, sizeof(err));
		assert_non_null(n);
		assert_int_equal(n->unschedulable, cases[i].unschedulable);
		cache_node_free(n);
		cJSON_Delete(j);
	}
}

static void test_cache_node_parse_labels_sorted_and_looked_up(void **state)
{
	cJSON *j = json_sq("{'metadata':{'name':'n','labels':{"
			   "'zone':'a','kubernetes.io/hostname':'n','b':'2','a':'1',"
			   "'nvidia.com/gpu.product':'A100','empty':''}}}");
	char err[CACHE_ERR_LEN];
	struct cache_node *n = cache_node_parse(j, &OPTS, err, sizeof(err));

	(void)state;
	cJSON_Delete(j);
	assert_non_null(n);
	assert_int_equal(n->n_labels, 6);
	for (unsigned i = 1; i < n->n_labels; i++)
		assert_true(strcmp(n->labels[i - 1].key, n->labels[i].key) < 0);
	assert_string_equal(cache_node_label(n, "zone"), "a");
	assert_string_equal(cache_node_label(n, "a"), "1");
	assert_string_equal(cache_node_label(n, "b"), "2");
	assert_string_equal(cache_node_label(n, "kubernetes.io/hostname"), "n");
	assert_string_equal(cache_node_label(n, "nvidia.com/gpu.product"), "A100");
	assert_string_equal(cache_node_label(n, "empty"), "");
	assert_null(cache_node_label(n, "missing"));
	assert_null(cache_node_label(n, "zon"));
	assert_null(cache_node_label(n, ""));
	cache_node_free(n);

	/* A node without labels. */
	n = node_new("bare", 8, 8);
	assert_int_equal(n->n_labels, 0);
	assert_null(cache_node_label(n, "zone"));
	cache_node_free(n);
}

static void test_cache_node_parse_taints(void **state)
{
	cJSON *j = json_sq("{'metadata':{'name':'n'},'spec':{'taints':["
			   "{'key':'node.kubernetes.io/unschedulable','effect':'NoSchedule'},"
			   "{'key':'gpu','value':'reserved','effect':'NoExecute'}]}}");
	char err[CACHE_ERR_LEN];
	struct cache_node *n = cache_node_parse(j, &OPTS, err, sizeof(err));

	(void)state;
	cJSON_Delete(j);
	assert_non_null(n);
	assert_int_equal(n->n_taints, 2);
	assert_string_equal(n->taints[0].key, "node.kubernetes.io/unschedulable");
	assert_null(n->taints[0].value);
	assert_string_equal(n->taints[0].effect, "NoSchedule");
	assert_string_equal(n->taints[1].key, "gpu");
	assert_string_equal(n->taints[1].value, "reserved");
	assert_string_equal(n->taints[1].effect, "NoExecute");
	cache_node_free(n);
}

static void test_cache_node_parse_requires_name(void **state)
{
	static const char *const cases[] = {
		"{}",
		"{'metadata':{}}",
		"{'metadata':{'name':''}}",
		"{'metadata':{'name':7}}",
		"{'metadata':'n'}",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		cJSON *j = json_sq(cases[i]);
		char err[CACHE_ERR_LEN] = "";

		assert_null(cache_node_parse(j, &OPTS, err, sizeof(err)));
		assert_true(err[0] != '\0');
		cJSON_Delete(j);
	}
}

/* ---- cache_demand_compute ----------------------------------------------------- */

struct demand_case {
	const char *what;
	const struct cache_opts *opts;
	const char *spec;
	int ret;
	int resource;
	uint32_t gpus;
	int64_t cpu_milli;
	int64_t mem_bytes;
	const char *err_has;    /* substring of the message when ret < 0 */
};

#define GI INT64_C(1073741824)
#define MI INT64_C(1048576)

static const struct demand_case demand_cases[] = {
	{ "one container, GPU limit only", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'2'}}}]}",
	  0, 0, 2, 0, 0, NULL },
	{ "GPU limit as a JSON number", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':2}}}]}",
	  0, 0, 2, 0, 0, NULL },
	{ "app containers are summed", &OPTS,
	  "{'containers':["
	  "{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1','cpu':'2'},"
	  "'requests':{'cpu':'500m','memory':'1Gi'}}},"
	  "{'name':'b','resources':{'limits':{'nvidia.com/gpu':'2'},"
	  "'requests':{'cpu':'1','memory':'512Mi'}}}]}",
	  0, 0, 3, 1500, GI + 512 * MI, NULL },
	{ "largest init container wins over a smaller sum", &OPTS,
	  "{'initContainers':["
	  "{'name':'i1','resources':{'limits':{'nvidia.com/gpu':'4'},'requests':{'cpu':'500m'}}},"
	  "{'name':'i2','resources':{'limits':{'nvidia.com/gpu':'2'},'requests':{'cpu':'3'}}}],"
	  "'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'},"
	  "'requests':{'cpu':'1'}}}]}",
	  0, 0, 4, 3000, 0, NULL },
	{ "sum wins over smaller init containers", &OPTS,
	  "{'initContainers':[{'name':'i','resources':{'limits':{'nvidia.com/gpu':'3'}}}],"
	  "'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'2'}}},"
	  "{'name':'b','resources':{'limits':{'nvidia.com/gpu':'2'}}}]}",
	  0, 0, 4, 0, 0, NULL },
	{ "sidecar adds to the app containers", &OPTS,
	  "{'initContainers':[{'name':'s','restartPolicy':'Always','resources':"
	  "{'limits':{'nvidia.com/gpu':'1'},'requests':{'cpu':'1'}}}],"
	  "'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'2'},"
	  "'requests':{'cpu':'2'}}}]}",
	  0, 0, 3, 3000, 0, NULL },
	{ "sidecar runs beside a later init container", &OPTS,
	  "{'initContainers':["
	  "{'name':'s','restartPolicy':'Always','resources':{'requests':{'cpu':'1'}}},"
	  "{'name':'i','resources':{'requests':{'cpu':'4'}}}],"
	  "'containers':[{'name':'a','resources':{'requests':{'cpu':'2'}}}]}",
	  0, -1, 0, 5000, 0, NULL },
	{ "sidecar started after an init container does not run beside it", &OPTS,
	  "{'initContainers':["
	  "{'name':'i','resources':{'requests':{'cpu':'4'}}},"
	  "{'name':'s','restartPolicy':'Always','resources':{'requests':{'cpu':'1'}}}],"
	  "'containers':[{'name':'a','resources':{'requests':{'cpu':'2'}}}]}",
	  0, -1, 0, 4000, 0, NULL },
	{ "sidecar GPUs count beside a later init container", &OPTS,
	  "{'initContainers':["
	  "{'name':'s','restartPolicy':'Always','resources':{'limits':{'nvidia.com/gpu':'1'}}},"
	  "{'name':'i','resources':{'limits':{'nvidia.com/gpu':'2'}}}],"
	  "'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}",
	  0, 0, 3, 0, 0, NULL },
	{ "two sidecars accumulate", &OPTS,
	  "{'initContainers':["
	  "{'name':'s1','restartPolicy':'Always','resources':{'requests':{'memory':'1Gi'}}},"
	  "{'name':'i','resources':{'requests':{'memory':'2Gi'}}},"
	  "{'name':'s2','restartPolicy':'Always','resources':{'requests':{'memory':'1Gi'}}},"
	  "{'name':'j','resources':{'requests':{'memory':'3Gi'}}}],"
	  "'containers':[{'name':'a','resources':{'requests':{'memory':'1Gi'}}}]}",
	  0, -1, 0, 0, 5 * GI, NULL },
	{ "init container with restartPolicy Never is not a sidecar", &OPTS,
	  "{'initContainers':[{'name':'i','restartPolicy':'Never','resources':"
	  "{'requests':{'cpu':'1'}}}],"
	  "'containers':[{'name':'a','resources':{'requests':{'cpu':'2'}}}]}",
	  0, -1, 0, 2000, 0, NULL },
	{ "pod overhead is added", &OPTS,
	  "{'containers':[{'name':'a','resources':{'requests':{'cpu':'1','memory':'1Gi'}}}],"
	  "'overhead':{'cpu':'250m','memory':'64Mi'}}",
	  0, -1, 0, 1250, GI + 64 * MI, NULL },
	{ "overhead is added after the init maximum", &OPTS,
	  "{'initContainers':[{'name':'i','resources':{'requests':{'cpu':'4'}}}],"
	  "'containers':[{'name':'a','resources':{'requests':{'cpu':'1'}}}],"
	  "'overhead':{'cpu':'100m'}}",
	  0, -1, 0, 4100, 0, NULL },
	{ "GPU requests equal to limits", &OPTS,
	  "{'containers':[{'name':'a','resources':{'requests':{'nvidia.com/gpu':'2'},"
	  "'limits':{'nvidia.com/gpu':'2'}}}]}",
	  0, 0, 2, 0, 0, NULL },
	{ "2000m GPUs is two", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'2000m'}}}]}",
	  0, 0, 2, 0, 0, NULL },
	{ "GPU request differs from limit", &OPTS,
	  "{'containers':[{'name':'a','resources':{'requests':{'nvidia.com/gpu':'1'},"
	  "'limits':{'nvidia.com/gpu':'2'}}}]}",
	  -EINVAL, -1, 0, 0, 0, "must equal" },
	{ "GPU request without a limit", &OPTS,
	  "{'containers':[{'name':'a','resources':{'requests':{'nvidia.com/gpu':'1'}}}]}",
	  -EINVAL, -1, 0, 0, 0, "limit" },
	{ "init container GPU request without a limit", &OPTS,
	  "{'initContainers':[{'name':'i','resources':{'requests':{'nvidia.com/gpu':'1'}}}],"
	  "'containers':[]}",
	  -EINVAL, -1, 0, 0, 0, "limit" },
	{ "fractional GPU", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1.5'}}}]}",
	  -EINVAL, -1, 0, 0, 0, "whole" },
	{ "milli GPU", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'500m'}}}]}",
	  -EINVAL, -1, 0, 0, 0, "whole" },
	{ "negative GPU", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'-1'}}}]}",
	  -EINVAL, -1, 0, 0, 0, NULL },
	{ "GPU limit that is no quantity", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'two'}}}]}",
	  -EINVAL, -1, 0, 0, 0, NULL },
	{ "more GPUs than any node has", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'65'}}}]}",
	  -EINVAL, -1, 0, 0, 0, NULL },
	{ "two managed GPU kinds in one pod", &OPTS2,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'}}},"
	  "{'name':'b','resources':{'limits':{'amd.com/gpu':'1'}}}]}",
	  -EINVAL, -1, 0, 0, 0, "both" },
	{ "the second managed kind alone", &OPTS2,
	  "{'containers':[{'name':'a','resources':{'limits':{'amd.com/gpu':'2'}}}]}",
	  0, 1, 2, 0, 0, NULL },
	{ "unmanaged extended resources are ignored", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'example.com/fpga':'3'}}}]}",
	  0, -1, 0, 0, 0, NULL },
	{ "cpu and memory default to their limits", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'cpu':'2','memory':'1Gi'}}}]}",
	  0, -1, 0, 2000, GI, NULL },
	{ "a request is used over its limit", &OPTS,
	  "{'containers':[{'name':'a','resources':{'requests':{'cpu':'1'},"
	  "'limits':{'cpu':'2','memory':'2Gi'}}}]}",
	  0, -1, 0, 1000, 2 * GI, NULL },
	{ "bad cpu quantity", &OPTS,
	  "{'containers':[{'name':'a','resources':{'requests':{'cpu':'lots'}}}]}",
	  -EINVAL, -1, 0, 0, 0, "cpu" },
	{ "no containers", &OPTS, "{}", 0, -1, 0, 0, 0, NULL },
	{ "containers is not a list", &OPTS, "{'containers':{}}", -EINVAL, -1, 0, 0, 0, NULL },
	{ "initContainers is not a list", &OPTS, "{'initContainers':'x'}", -EINVAL, -1, 0, 0, 0,
	  NULL },
};

static void test_cache_demand_compute_as_kubernetes_does(void **state)
{
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(demand_cases); i++) {
		const struct demand_case *dc = &demand_cases[i];
		cJSON *spec = json_sq(dc->spec);
		struct cache_demand d;
		char err[CACHE_ERR_LEN] = "";
		int ret = cache_demand_compute(spec, dc->opts, &d, err, sizeof(err));
		bool ok = ret == dc->ret;

		if (ok && ret == 0)
			ok = d.gpu_resource == dc->resource && d.gpus == dc->gpus &&
			     d.cpu_milli == dc->cpu_milli && d.mem_bytes == dc->mem_bytes;
		if (ok && ret < 0)
			ok = err[0] && (!dc->err_has || strstr(err, dc->err_has));
		if (!ok) {
			print_message("%s: ret %d resource %d gpus %u cpu %" PRId64 " mem %" PRId64
				      " err [%s]\n",
				      dc->what, ret, d.gpu_resource, d.gpus, d.cpu_milli, d.mem_bytes,
				      err);
			bad++;
		}
		cJSON_Delete(spec);
	}
	assert_int_equal(bad, 0);
}

/* ---- cache_pod_parse ------------------------------------------------------------ */

static struct cache_pod *pod_parse_sq(const char *text, char *err, size_t errlen)
{
	cJSON *j = json_sq(text);
	struct cache_pod *p = cache_pod_parse(j, &OPTS, err, errlen);

	cJSON_Delete(j);
	return p;
}

static void test_cache_pod_parse_identity(void **state)
{
	char err[CACHE_ERR_LEN];
	struct cache_pod *p;

	(void)state;
	p = pod_parse_sq("{'metadata':{'name':'w','namespace':'ml','uid':'u-1'},"
			 "'spec':{'nodeName':'gpu-0','containers':[]}}",
			 err, sizeof(err));
	assert_non_null(p);
	assert_string_equal(p->uid, "u-1");
	assert_string_equal(p->ns, "ml");
	assert_string_equal(p->name, "w");
	assert_string_equal(p->node, "gpu-0");
	assert_null(p->demand_error);
	assert_int_equal(p->demand.gpu_resource, -1);
	cache_pod_free(p);

	/* No uid: synthesised as namespace/name. */
	p = pod_parse_sq("{'metadata':{'name':'w','namespace':'ml'},'spec':{}}", err, sizeof(err));
	assert_non_null(p);
	assert_string_equal(p->uid, "ml/w");
	assert_null(p->node);
	cache_pod_free(p);

	/* No namespace: "default". */
	p = pod_parse_sq("{'metadata':{'name':'w','uid':''},'spec':{'nodeName':''}}", err,
			 sizeof(err));
	assert_non_null(p);
	assert_string_equal(p->ns, "default");
	assert_string_equal(p->uid, "default/w");
	assert_null(p->node);
	cache_pod_free(p);
}

/* The quorum a pod names itself, from each key kube-interfaces.md lists, in
 * its order; a value that is not a whole number from 1 to 100,000 is skipped
 * for the next key. */
static void test_cache_pod_parse_quorum_keys(void **state)
{
	static const struct {
		const char *what, *meta;
		uint32_t want;
	} cases[] = {
		{ "coscheduling label", "'labels':{'pod-group.scheduling.sigs.k8s.io/min-available':'4'}", 4 },
		{ "coscheduling annotation",
		  "'annotations':{'pod-group.scheduling.sigs.k8s.io/min-available':'5'}", 5 },
		{ "Kueue total count", "'annotations':{'kueue.x-k8s.io/pod-group-total-count':'6'}", 6 },
		{ "troupe annotation", "'annotations':{'troupe.io/min-member':'7'}", 7 },
		{ "the label beats the annotations",
		  "'labels':{'pod-group.scheduling.sigs.k8s.io/min-available':'4'},"
		  "'annotations':{'troupe.io/min-member':'7'}", 4 },
		{ "Kueue beats troupe's annotation",
		  "'annotations':{'kueue.x-k8s.io/pod-group-total-count':'6','troupe.io/min-member':'7'}",
		  6 },
		{ "zero is skipped", "'annotations':{'kueue.x-k8s.io/pod-group-total-count':'0',"
		  "'troupe.io/min-member':'7'}", 7 },
		{ "not a number is skipped", "'annotations':{'troupe.io/min-member':'four'}", 0 },
		{ "a sign is not a number", "'annotations':{'troupe.io/min-member':'-3'}", 0 },
		{ "trailing text is not a number", "'annotations':{'troupe.io/min-member':'3x'}", 0 },
		{ "over 100,000 is skipped", "'annotations':{'troupe.io/min-member':'100001'}", 0 },
		{ "100,000 is kept", "'annotations':{'troupe.io/min-member':'100000'}", 100000 },
		{ "none", "'labels':{'app':'x'}", 0 },
	};
	char text[512], err[CACHE_ERR_LEN];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache_pod *p;

		snprintf(text, sizeof(text), "{'metadata':{'name':'w','namespace':'ml','uid':'u',%s},"
			 "'spec':{}}", cases[i].meta);
		p = pod_parse_sq(text, err, sizeof(err));
		assert_non_null(p);
		if (p->min_member != cases[i].want)
			fail_msg("%s: quorum %u, want %u", cases[i].what, p->min_member, cases[i].want);
		cache_pod_free(p);
	}
}

static void test_cache_pod_parse_requires_name(void **state)
{
	static const char *const cases[] = {
		"{'spec':{}}",
		"{'metadata':{'namespace':'ml'},'spec':{}}",
		"{'metadata':{'name':''},'spec':{}}",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "";

		assert_null(pod_parse_sq(cases[i], err, sizeof(err)));
		assert_true(err[0] != '\0');
	}
}

static void test_cache_pod_parse_phases(void **state)
{
	static const struct {
		const char *status;
		enum cache_pod_phase phase;
	} cases[] = {
		{ "{'phase':'Pending'}", CACHE_POD_PENDING },
		{ "{'phase':'Running'}", CACHE_POD_RUNNING },
		{ "{'phase':'Succeeded'}", CACHE_POD_SUCCEEDED },
		{ "{'phase':'Failed'}", CACHE_POD_FAILED },
		{ "{'phase':'Unknown'}", CACHE_POD_UNKNOWN },
		{ "{'phase':'Sideways'}", CACHE_POD_UNKNOWN },
		{ "{}", CACHE_POD_PENDING },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[256], err[CACHE_ERR_LEN];
		struct cache_pod *p;

		snprintf(text, sizeof(text), "{'metadata':{'name':'p'},'spec':{},'status':%s}",
			 cases[i].status);
		p = pod_parse_sq(text, err, sizeof(err));
		assert_non_null(p);
		assert_int_equal(p->phase, cases[i].phase);
		cache_pod_free(p);
	}
}

static void test_cache_pod_parse_deletion_timestamp(void **state)
{
	static const struct {
		const char *meta_extra;
		bool deleting;
	} cases[] = {
		{ ",'deletionTimestamp':'2024-05-01T10:00:00Z'", true },
		{ ",'deletionTimestamp':null", false },
		{ "", false },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[256], err[CACHE_ERR_LEN];
		struct cache_pod *p;

		snprintf(text, sizeof(text), "{'metadata':{'name':'p'%s},'spec':{}}",
			 cases[i].meta_extra);
		p = pod_parse_sq(text, err, sizeof(err));
		assert_non_null(p);
		assert_int_equal(p->deleting, cases[i].deleting);
		cache_pod_free(p);
	}
}

/* The annotation counts only when it parses and names as many devices as the
 * pod asks for. */
static void test_cache_pod_parse_gpu_ids_annotation(void **state)
{
	static const struct {
		unsigned gpus;
		const char *ids;
		bool has;
		uint64_t devices;
	} cases[] = {
		{ 2, "0,1", true, 0x3 },
		{ 2, "6,7", true, 0xc0 },
		{ 2, "7,6", true, 0xc0 },
		{ 1, "63", true, 1ULL << 63 },
		{ 2, "0", false, 0 },
		{ 2, "0,1,2", false, 0 },
		{ 2, "a,b", false, 0 },
		{ 2, "", false, 0 },
		{ 2, "1,1", false, 0 },
		{ 2, "1,64", false, 0 },
		{ 2, NULL, false, 0 },
		{ 0, "0", false, 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache_pod *p = POD(.uid = "p", .node = "n", .gpus = cases[i].gpus,
					  .ids = cases[i].ids);

		if (p->has_devices != cases[i].has || p->devices != cases[i].devices) {
			print_message("gpus %u ids [%s]: has %d devices %#" PRIx64 "\n",
				      cases[i].gpus, cases[i].ids ? cases[i].ids : "(none)",
				      p->has_devices, p->devices);
			bad++;
		}
		cache_pod_free(p);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_pod_parse_bad_gpu_request_sets_demand_error(void **state)
{
	char err[CACHE_ERR_LEN] = "";
	struct cache_pod *p;

	(void)state;
	p = pod_parse_sq("{'metadata':{'name':'p','namespace':'ml',"
			 "'annotations':{'troupe.io/gpu-ids':'0'}},"
			 "'spec':{'nodeName':'n','containers':[{'name':'c','resources':"
			 "{'requests':{'nvidia.com/gpu':'1'}}}]}}",
			 err, sizeof(err));
	/* Not a parse failure: the pod exists, its request is what is wrong. */
	assert_non_null(p);
	assert_non_null(p->demand_error);
	assert_non_null(strstr(p->demand_error, "limit"));
	assert_int_equal(p->demand.gpus, 0);
	assert_int_equal(p->demand.gpu_resource, -1);
	assert_false(p->has_devices);
	cache_pod_free(p);

	p = pod_parse_sq("{'metadata':{'name':'p'}}", err, sizeof(err));
	assert_non_null(p);
	assert_non_null(p->demand_error);
	cache_pod_free(p);

	p = POD(.uid = "ok", .gpus = 4);
	assert_null(p->demand_error);
	assert_int_equal(p->demand.gpus, 4);
	assert_int_equal(p->demand.gpu_resource, 0);
	assert_int_equal(p->demand.cpu_milli, 1000);
	cache_pod_free(p);
}

/* ---- Devices -------------------------------------------------------------------- */

static void test_cache_devices_format_parse_round_trip(void **state)
{
	static const struct {
		uint64_t mask;
		const char *text;
	} cases[] = {
		{ 0x1, "0" },
		{ 0x9, "0,3" },
		{ 0x29, "0,3,5" },
		{ 0xf0, "4,5,6,7" },
		{ 1ULL << 63, "63" },
		{ (1ULL << 63) | 1, "0,63" },
	};
	char buf[256];
	uint64_t seed = 7;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		uint64_t back = 0;

		cache_devices_format(cases[i].mask, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].text);
		assert_int_equal(cache_devices_parse(cases[i].text, &back), 0);
		assert_int_equal(back, cases[i].mask);
	}
	cache_devices_format(0, buf, sizeof(buf));
	assert_string_equal(buf, "");
	for (int i = 0; i < 2000; i++) {
		uint64_t m = rng_next(&seed) & rng_next(&seed), back = 0;

		if (i == 0)
			m = ~0ULL;
		if (!m)
			continue;
		cache_devices_format(m, buf, sizeof(buf));
		assert_int_equal(cache_devices_parse(buf, &back), 0);
		assert_int_equal(back, m);
	}
}

static void test_cache_devices_parse_rejects(void **state)
{
	static const char *const cases[] = {
		"", "1,,2", "64", "100", "1,1", "a", "1,", ",1", "-1", "1 2", "1;2", "0x1",
		"99999999999999999999",
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		uint64_t m = 0xabcdef;

		if (cache_devices_parse(cases[i], &m) != -EINVAL || m != 0xabcdef) {
			print_message("[%s] accepted or mask written (%#" PRIx64 ")\n", cases[i], m);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	assert_int_equal(cache_devices_parse(NULL, &(uint64_t){ 0 }), -EINVAL);
}

/* A short buffer is never overrun and stays terminated. */
static void test_cache_devices_format_short_buffer(void **state)
{
	char buf[16];

	(void)state;
	for (size_t len = 1; len < 8; len++) {
		memset(buf, 'X', sizeof(buf));
		cache_devices_format(0xffff, buf, len);
		assert_true(memchr(buf, '\0', len) != NULL);
		for (size_t k = len; k < sizeof(buf); k++)
			assert_int_equal(buf[k], 'X');
	}
}

/* ---- The store ---------------------------------------------------------------- */

static void test_cache_new_refuses_bad_opts(void **state)
{
	struct cache_opts none = { .n_gpu_resources = 0 };
	struct cache_opts many = { .n_gpu_resources = CACHE_MAX_GPU_RESOURCES + 1 };

	(void)state;
	errno = 0;
	assert_null(cache_new(&none));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(cache_new(&many));
	assert_int_equal(errno, EINVAL);
	assert_null(cache_new(NULL));
	cache_free(NULL);
}

static void test_cache_store_upsert_lookup_replace_delete(void **state)
{
	struct cache *c = *state;
	struct cache_stats st;
	struct seen s;

	assert_false(look(c, "gpu-0").found);
	add_node(c, "gpu-0", 8, 8);
	add_node(c, "gpu-1", 4, 4);
	s = look(c, "gpu-0");
	assert_true(s.found);
	assert_int_equal(s.capacity, 8);
	assert_int_equal(s.used, 0);
	assert_int_equal(s.unattributed, 0);
	assert_false(look(c, "gpu-2").found);
	assert_false(look(c, "gpu").found);
	cache_get_stats(c, &st);
	assert_int_equal(st.nodes, 2);
	assert_int_equal(st.gpus_allocatable, 12);

	/* Replacing publishes the new record under the same name. */
	add_node(c, "gpu-0", 8, 5);
	s = look(c, "gpu-0");
	assert_true(s.found);
	assert_int_equal(s.allocatable, 5);
	cache_get_stats(c, &st);
	assert_int_equal(st.nodes, 2);
	assert_int_equal(st.gpus_allocatable, 9);

	assert_int_equal(cache_node_delete(c, "gpu-0"), 0);
	assert_false(look(c, "gpu-0").found);
	assert_true(look(c, "gpu-1").found);
	assert_int_equal(cache_node_delete(c, "gpu-0"), -ENOENT);
	assert_int_equal(cache_node_delete(c, "never"), -ENOENT);
	cache_writer_reclaim(c);
	cache_get_stats(c, &st);
	assert_int_equal(st.nodes, 1);

	/* A deleted name can come back. */
	add_node(c, "gpu-0", 2, 2);
	s = look(c, "gpu-0");
	assert_true(s.found);
	assert_int_equal(s.allocatable, 2);
	cache_writer_reclaim(c);
}

/* ---- The name index --------------------------------------------------------------- */

struct ix_name {
	char s[80];
	size_t len;
	bool in;                        /* the model: present in the index */
};

/* A name of length 1..70, so every branch of the hash (under 4, under 8,
 * whole words, an overlapping last word) is taken. */
static void ix_name_make(struct ix_name *n, int i)
{
	static const char pad[] = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnop";
	int len = 1 + (i * 7) % 70;

	n->len = (size_t)snprintf(n->s, sizeof(n->s), "%x%.*s", i, len, pad);
	n->in = false;
}

static void *ix_find(const struct nameidx *ix, const struct ix_name *n)
{
	const struct nameidx_table *t = nameidx_table(ix);
	uint64_t h = nameidx_hash(ix, n->s, n->len), pos = h;
	struct ix_name *v;

	while ((v = nameidx_next_match(t, h, &pos)))
		if (v->len == n->len && memcmp(v->s, n->s, n->len) == 0)
			return v;
	return NULL;
}

/* Random adds and removes against a model: after each step every name is
 * found exactly when the model holds it, iteration yields each held name
 * once, and the table is rebuilt (tombstones dropped) as it fills. */
static void test_cache_nameidx_against_a_model(void **state)
{
	enum { N = 700, STEPS = 20000 };
	struct ix_name *names = calloc(N, sizeof(*names));
	struct nameidx ix;
	uint64_t rng = 0x1dea;
	size_t live = 0, rebuilds = 0;

	(void)state;
	assert_non_null(names);
	for (int i = 0; i < N; i++)
		ix_name_make(&names[i], i);
	assert_int_equal(nameidx_init(&ix, 4, 7), 0);
	for (int step = 0; step < STEPS; step++) {
		/* Names from the whole set early, from a third of it late: the table
	 * grows, then those late names go in and out, leaving tombstones that
	 * the rebuilds drop. */
		struct ix_name *n = &names[rng_next(&rng) % (step < STEPS / 2 ? N : N / 3)];
		uint64_t h = nameidx_hash(&ix, n->s, n->len);

		if (!n->in) {
			struct nameidx_table *old;

			assert_int_equal(nameidx_put(&ix, h, n, &old), 0);
			if (old) {
				rebuilds++;
				free(old);      /* no reader holds it */
			}
			n->in = true;
			live++;
		} else {
			assert_true(nameidx_remove(&ix, h, n));
			assert_false(nameidx_remove(&ix, h, n));
			n->in = false;
			live--;
		}
		if (step % 97 == 0 || step == STEPS - 1) {
			const struct nameidx_table *t = nameidx_table(&ix);
			uint64_t pos = 0;
			size_t seen = 0;
			struct ix_name *v;

			for (int i = 0; i < N; i++)
				assert_ptr_equal(ix_find(&ix, &names[i]), names[i].in ? &names[i] : NULL);
			while ((v = nameidx_iter(t, &pos))) {
				assert_true(v->in);
				seen++;
			}
			assert_int_equal(seen, live);
			/* At most half full, so every probe ends. */
			assert_true((ix.live + ix.tombs) * 2 <= t->mask + 1);
		}
	}
	assert_true(rebuilds >= 5);
	nameidx_free(&ix);
	free(names);
}

/* The batched lookup answers exactly what one-at-a-time lookups answer, for
 * known, deleted, unknown, prefix, empty and over-long names, in batches of
 * every size. */
static void test_cache_lookup_many_agrees_with_lookup(void **state)
{
	struct cache *c = *state;
	static char names[400][40], long_name[70000];
	struct cache_name q[400];
	uint64_t rng = 42;
	size_t nq = 0;

	for (int i = 0; i < 300; i++) {
		snprintf(names[i], sizeof(names[i]), "node-%d", i);
		add_node(c, names[i], 1 + i % 8, 1 + i % 8);
	}
	for (int i = 0; i < 300; i += 3)
		assert_int_equal(cache_node_delete(c, names[i]), 0);
	cache_writer_reclaim(c);
	for (int i = 300; i < 400; i++)
		snprintf(names[i], sizeof(names[i]), i % 2 ? "node-%d" : "node-%d-x", i - 300);
	for (int i = 0; i < 400; i++)
		q[nq++] = (struct cache_name){ names[i], strlen(names[i]) };
	memset(long_name, 'a', sizeof(long_name) - 1);
	q[17] = (struct cache_name){ "", 0 };
	q[33] = (struct cache_name){ long_name, sizeof(long_name) - 1 };
	q[50] = (struct cache_name){ "node-5", 5 };     /* "node-": a prefix */
	for (size_t i = nq - 1; i > 0; i--) {
		size_t j = rng_next(&rng) % (i + 1);
		struct cache_name t = q[i];

		q[i] = q[j];
		q[j] = t;
	}
	cache_read_begin(c);
	for (size_t at = 0, b = 1; at < nq; at += b, b = b % CACHE_LOOKUP_BATCH + 1) {
		struct cache_node_view v[CACHE_LOOKUP_BATCH];
		bool found[CACHE_LOOKUP_BATCH];
		size_t m = nq - at < b ? nq - at : b;

		cache_node_lookup_many(c, &q[at], m, v, found);
		for (size_t j = 0; j < m; j++) {
			struct cache_node_view one;
			bool f = cache_node_lookup(c, q[at + j].s, q[at + j].len, &one);

			assert_int_equal(found[j], f);
			if (f) {
				assert_ptr_equal(v[j].node, one.node);
				assert_int_equal(v[j].used, one.used);
				assert_int_equal(v[j].unattributed, one.unattributed);
			}
		}
	}
	cache_read_end(c);
}

/* Readers never miss a node that stays, while the writer adds and deletes
 * hundreds of others (so the table is rebuilt under them). Run under TSan in
 * ./scripts/test. */
struct ix_race {
	struct cache *c;
	int stop;                       /* atomic */
	unsigned misses, reads;         /* per reader, summed after join */
};

static void *ix_race_reader(void *arg)
{
	struct ix_race *r = arg;
	struct cache_name q[CACHE_LOOKUP_BATCH];
	char names[CACHE_LOOKUP_BATCH][24];
	unsigned misses = 0, reads = 0;

	for (int i = 0; i < CACHE_LOOKUP_BATCH; i++) {
		snprintf(names[i], sizeof(names[i]), "stay-%d", i * 3);
		q[i] = (struct cache_name){ names[i], strlen(names[i]) };
	}
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		struct cache_node_view v[CACHE_LOOKUP_BATCH];
		bool found[CACHE_LOOKUP_BATCH];

		cache_read_begin(r->c);
		cache_node_lookup_many(r->c, q, CACHE_LOOKUP_BATCH, v, found);
		for (int i = 0; i < CACHE_LOOKUP_BATCH; i++) {
			misses += !found[i] || strcmp(v[i].node->name, names[i]) != 0;
			reads++;
		}
		cache_read_end(r->c);
	}
	__atomic_add_fetch(&r->misses, misses, __ATOMIC_RELAXED);
	__atomic_add_fetch(&r->reads, reads, __ATOMIC_RELAXED);
	return NULL;
}

static void test_cache_lookup_never_misses_a_staying_node(void **state)
{
	struct cache *c = *state;
	struct ix_race r = { .c = c };
	pthread_t tid[2];
	char name[32];

	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "stay-%d", i);
		add_node(c, name, 8, 8);
	}
	for (int t = 0; t < 2; t++)
		assert_int_equal(pthread_create(&tid[t], NULL, ix_race_reader, &r), 0);
	/* 24,000 adds: the index (4,096 entries at first) is rebuilt every
	 * 2,000 or so, while the readers run. */
	for (int round = 0; round < 12; round++) {
		for (int i = 0; i < 2000; i++) {
			snprintf(name, sizeof(name), "churn-%d-%d", round, i);
			add_node(c, name, 4, 4);
		}
		for (int i = 0; i < 2000; i++) {
			snprintf(name, sizeof(name), "churn-%d-%d", round, i);
			assert_int_equal(cache_node_delete(c, name), 0);
		}
		cache_writer_reclaim(c);
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	for (int t = 0; t < 2; t++)
		pthread_join(tid[t], NULL);
	assert_true(r.reads > 0);
	assert_int_equal(r.misses, 0);
}

/* Two values under one hash: each is found by its name (the probe goes on past
 * the other), and removing one leaves the other. */
static void test_cache_nameidx_same_hash(void **state)
{
	struct ix_name a, b;
	struct nameidx ix;
	struct nameidx_table *old;
	const struct nameidx_table *t;
	uint64_t h = 0x1234, pos;

	(void)state;
	ix_name_make(&a, 1);
	ix_name_make(&b, 2);
	assert_int_equal(nameidx_init(&ix, 4, 7), 0);
	assert_int_equal(nameidx_put(&ix, h, &a, &old), 0);
	assert_null(old);
	assert_int_equal(nameidx_put(&ix, h, &b, &old), 0);
	assert_null(old);
	t = nameidx_table(&ix);
	pos = h;
	assert_ptr_equal(nameidx_next_match(t, h, &pos), &a);
	assert_ptr_equal(nameidx_next_match(t, h, &pos), &b);
	assert_null(nameidx_next_match(t, h, &pos));
	assert_false(nameidx_remove(&ix, h + 1, &a));   /* another hash: not there */
	assert_true(nameidx_remove(&ix, h, &a));
	pos = h;
	assert_ptr_equal(nameidx_next_match(t, h, &pos), &b);
	assert_null(nameidx_next_match(t, h, &pos));
	assert_true(nameidx_remove(&ix, h, &b));
	pos = h;
	assert_null(nameidx_next_match(t, h, &pos));
	nameidx_free(&ix);
}

/* Every change to a node record or usage is counted, and the count is settled
 * between changes: what prioritize relies on to reuse filter's scores. */
static void test_cache_changes_count_every_change(void **state)
{
	struct cache *c = *state;
	uint64_t n0, n;
	uint64_t dev = 0x2;

#define CHANGED(what)                                                            \
	do {                                                                     \
		assert_true(cache_changes_settled(c, &n));                       \
		if (n <= n0)                                                     \
			fail_msg("%s was not counted", what);                    \
		assert_int_equal(cache_changes(c), n);                           \
		n0 = n;                                                          \
	} while (0)
	assert_true(cache_changes_settled(c, &n0));
	add_node(c, "gpu-0", 8, 8);
	CHANGED("adding a node");
	add_node(c, "gpu-0", 8, 6);
	CHANGED("replacing a node");
	cache_pod_apply(c, POD(.uid = "p1", .node = "gpu-0", .gpus = 1, .ids = "0"));
	CHANGED("a pod taking a device");
	cache_pod_apply(c, POD(.uid = "p2", .node = "gpu-0", .gpus = 2));
	CHANGED("a pod taking unattributed GPUs");
	assert_int_equal(cache_pod_delete(c, "p1"), 0);
	CHANGED("a pod leaving");
	assert_int_equal(cache_pod_remember(c, pod_make((struct podspec){ .uid = "p3", .gpus = 1 })),
			 0);
	assert_int_equal(cache_pod_assume(c, "p3", "gpu-0", &dev), 0);
	CHANGED("an assume");
	assert_int_equal(cache_pod_forget(c, "p3"), 0);
	CHANGED("a forget");
	assert_int_equal(cache_node_delete(c, "gpu-0"), 0);
	CHANGED("deleting a node");
	/* Nothing changed: the count stays. */
	assert_false(look(c, "gpu-0").found);
	assert_true(cache_changes_settled(c, &n));
	assert_int_equal(n, n0);
#undef CHANGED
}

/* Lookups use the given length, not a terminator. */
static void test_cache_node_lookup_uses_length(void **state)
{
	struct cache *c = *state;
	struct cache_node_view v;
	uint64_t used;
	uint32_t unattr;

	add_node(c, "gpu-1", 8, 8);
	cache_read_begin(c);
	assert_true(cache_node_lookup(c, "gpu-10", 5, &v));
	assert_string_equal(v.node->name, "gpu-1");
	assert_false(cache_node_lookup(c, "gpu-10", 6, &v));
	assert_false(cache_node_lookup(c, "gpu-1", 0, &v));
	assert_true(cache_usage_lookup(c, "gpu-1", 5, &used, &unattr));
	assert_int_equal(used, 0);
	assert_false(cache_usage_lookup(c, "gpu-2", 5, &used, &unattr));
	cache_read_end(c);
}

static void test_cache_view_free_gpus_and_mask(void **state)
{
	static const struct {
		uint32_t cap, alloc;
		uint64_t used;
		uint32_t unattr;
		uint32_t free_gpus;
		uint64_t free_mask;
	} cases[] = {
		{ 8, 8, 0, 0, 8, 0xff },
		{ 8, 8, 0x0f, 0, 4, 0xf0 },
		{ 8, 8, 0x0f, 2, 2, 0xf0 },
		{ 8, 6, 0, 0, 6, 0xff },        /* which two are unhealthy is unknown */
		{ 8, 6, 0x03, 1, 3, 0xfc },
		{ 8, 6, 0x3f, 0, 0, 0 },        /* allocatable used up: nothing free */
		{ 8, 6, 0x03, 5, 0, 0 },        /* over-held: never negative */
		{ 8, 0, 0, 0, 0, 0 },
		{ 64, 64, 0, 0, 64, ~0ULL },
		{ 64, 64, 1ULL << 63, 0, 63, ~0ULL >> 1 },
		{ 0, 0, 0, 0, 0, 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache_node n = { .name = "n", .gpu_capacity = cases[i].cap,
					.gpu_allocatable = cases[i].alloc };
		struct cache_node_view v = { .node = &n, .used = cases[i].used,
					     .unattributed = cases[i].unattr };
		uint32_t fg = cache_view_free_gpus(&v);
		uint64_t fm = cache_view_free_mask(&v);

		if (fg != cases[i].free_gpus || fm != cases[i].free_mask) {
			print_message("case %zu: free %u mask %#" PRIx64 "\n", i, fg, fm);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

struct foreach_acc {
	int visits;
	int stop_after;
	uint32_t gpus;
};

static bool foreach_count(const struct cache_node_view *v, void *arg)
{
	struct foreach_acc *a = arg;

	a->visits++;
	a->gpus += v->node->gpu_allocatable;
	return a->visits != a->stop_after;
}

static void test_cache_node_foreach_visits_live_nodes(void **state)
{
	struct cache *c = *state;
	struct foreach_acc a = { 0 };

	add_node(c, "a", 1, 1);
	add_node(c, "b", 2, 2);
	add_node(c, "c", 4, 4);
	add_node(c, "d", 8, 8);
	assert_int_equal(cache_node_delete(c, "d"), 0);
	cache_read_begin(c);
	cache_node_foreach(c, foreach_count, &a);
	cache_read_end(c);
	assert_int_equal(a.visits, 3);
	assert_int_equal(a.gpus, 7);

	a = (struct foreach_acc){ .stop_after = 2 };
	cache_read_begin(c);
	cache_node_foreach(c, foreach_count, &a);
	cache_read_end(c);
	assert_int_equal(a.visits, 2);
}

static void test_cache_synced_flag(void **state)
{
	struct cache *c = *state;

	assert_false(cache_is_synced(c));
	cache_set_synced(c, true);
	assert_true(cache_is_synced(c));
	cache_set_synced(c, false);
	assert_false(cache_is_synced(c));
	assert_int_equal(cache_get_opts(c)->n_gpu_resources, 1);
	assert_string_equal(cache_get_opts(c)->gpu_resources[0], "nvidia.com/gpu");
}

/* ---- Pod accounting (watch facts) ------------------------------------------------ */

static void test_cache_pod_apply_annotated_pod_holds_its_devices(void **state)
{
	struct cache *c = *state;
	struct cache_pod_info pi;

	add_node(c, "n", 8, 8);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "p", .node = "n", .gpus = 2, .ids = "2,3")),
			 0);
	assert_usage(c, "n", 0x0c, 0);
	pi = pod_info(c, "p");
	assert_int_equal(pi.state, CACHE_POD_STATE_BOUND);
	assert_string_equal(pi.node, "n");
	assert_string_equal(pi.ns, "ml");
	assert_string_equal(pi.name, "p");
	assert_int_equal(pi.devices, 0x0c);
	assert_int_equal(pi.unattributed, 0);
	assert_true(pi.demand_valid);
	assert_int_equal(pi.demand.gpus, 2);

	/* The same fact again changes nothing. */
	assert_int_equal(cache_pod_apply(c, POD(.uid = "p", .node = "n", .gpus = 2, .ids = "2,3")),
			 0);
	assert_usage(c, "n", 0x0c, 0);

	/* New devices replace the old ones. */
	assert_int_equal(cache_pod_apply(c, POD(.uid = "p", .node = "n", .gpus = 2, .ids = "5,6")),
			 0);
	assert_usage(c, "n", 0x60, 0);
	assert_int_equal(pod_info(c, "p").devices, 0x60);
}

static void test_cache_pod_apply_unannotated_pod_counts_unattributed(void **state)
{
	struct cache *c = *state;
	struct cache_pod_info pi;
	struct seen s;

	add_node(c, "n", 8, 8);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "p", .node = "n", .gpus = 3)), 0);
	assert_usage(c, "n", 0, 3);
	s = look(c, "n");
	assert_int_equal(s.free_gpus, 5);
	pi = pod_info(c, "p");
	assert_int_equal(pi.state, CACHE_POD_STATE_BOUND);
	assert_int_equal(pi.devices, 0);
	assert_int_equal(pi.unattributed, 3);
	/* Invalid annotations are no better than none. */
	assert_int_equal(cache_pod_apply(c, POD(.uid = "q", .node = "n", .gpus = 1, .ids = "x")),
			 0);
	assert_usage(c, "n", 0, 4);
}

static void test_cache_pod_apply_non_running_pods_hold_nothing(void **state)
{
	static const struct {
		const char *what;
		const char *node;
		const char *phase;
		bool deleting;
		unsigned gpus;
	} cases[] = {
		{ "succeeded", "n", "Succeeded", false, 2 },
		{ "failed", "n", "Failed", false, 2 },
		{ "being deleted", "n", "Running", true, 2 },
		{ "not bound", NULL, "Pending", false, 2 },
		{ "asks for no GPUs", "n", "Running", false, 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache *c = cache_new(&OPTS);
		struct cache_pod_info pi;
		struct seen s;

		assert_non_null(c);
		add_node(c, "n", 8, 8);
		assert_int_equal(cache_pod_apply(c, POD(.uid = "p", .node = cases[i].node,
							.gpus = cases[i].gpus,
							.phase = cases[i].phase, .ids = "0,1",
							.deleting = cases[i].deleting)),
				 0);
		s = look(c, "n");
		pi = pod_info(c, "p");
		if (s.used || s.unattributed || pi.state != CACHE_POD_STATE_PENDING || pi.devices ||
		    pi.unattributed) {
			print_message("%s: used %#" PRIx64 " unattributed %u state %d\n",
				      cases[i].what, s.used, s.unattributed, pi.state);
			bad++;
		}
		cache_free(c);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_pod_apply_finishing_releases(void **state)
{
	static const struct {
		const char *phase;
		bool deleting;
	} ends[] = { { "Succeeded", false }, { "Failed", false }, { "Running", true } };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ends); i++) {
		struct cache *c = cache_new(&OPTS);

		assert_non_null(c);
		add_node(c, "n", 8, 8);
		assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "n", .gpus = 2,
							.ids = "0,1")),
				 0);
		assert_int_equal(cache_pod_apply(c, POD(.uid = "b", .node = "n", .gpus = 2)), 0);
		assert_usage(c, "n", 0x3, 2);
		assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "n", .gpus = 2,
							.ids = "0,1", .phase = ends[i].phase,
							.deleting = ends[i].deleting)),
				 0);
		assert_int_equal(cache_pod_apply(c, POD(.uid = "b", .node = "n", .gpus = 2,
							.phase = ends[i].phase,
							.deleting = ends[i].deleting)),
				 0);
		assert_usage(c, "n", 0, 0);
		assert_int_equal(pod_info(c, "a").state, CACHE_POD_STATE_PENDING);
		cache_free(c);
	}
}

static void test_cache_pod_delete_releases(void **state)
{
	struct cache *c = *state;
	struct cache_pod_info pi;
	struct cache_stats st;

	add_node(c, "n", 8, 8);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "n", .gpus = 4,
						.ids = "0,1,2,3")),
			 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "b", .node = "n", .gpus = 1)), 0);
	cache_get_stats(c, &st);
	assert_int_equal(st.pods, 2);
	assert_int_equal(st.pods_holding, 2);
	assert_int_equal(st.gpus_held, 5);
	assert_int_equal(cache_pod_delete(c, "a"), 0);
	assert_usage(c, "n", 0, 1);
	assert_int_equal(cache_pod_get(c, "a", &pi), -ENOENT);
	assert_int_equal(cache_pod_delete(c, "b"), 0);
	assert_usage(c, "n", 0, 0);
	assert_int_equal(cache_pod_delete(c, "b"), -ENOENT);
	assert_int_equal(cache_pod_delete(c, "never"), -ENOENT);
	cache_get_stats(c, &st);
	assert_int_equal(st.pods, 0);
	assert_int_equal(st.gpus_held, 0);
}

/* Two pods naming the same devices: the first keeps them, the second is
 * counted, but not by device. */
static void test_cache_pod_apply_duplicate_devices_count_unattributed(void **state)
{
	struct cache *c = *state;
	struct cache_pod_info pi;

	add_node(c, "n", 8, 8);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "n", .gpus = 2, .ids = "0,1")),
			 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "b", .node = "n", .gpus = 2, .ids = "1,2")),
			 0);
	assert_usage(c, "n", 0x3, 2);
	pi = pod_info(c, "b");
	assert_int_equal(pi.state, CACHE_POD_STATE_BOUND);
	assert_int_equal(pi.devices, 0);
	assert_int_equal(pi.unattributed, 2);
	/* Releasing either leaves exactly the other's holding. */
	assert_int_equal(cache_pod_delete(c, "a"), 0);
	assert_usage(c, "n", 0, 2);
	assert_int_equal(cache_pod_delete(c, "b"), 0);
	assert_usage(c, "n", 0, 0);
}

/* A pod seen on a node before the node itself: the usage waits for the node. */
static void test_cache_pod_apply_before_node_is_known(void **state)
{
	struct cache *c = *state;

	assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "late", .gpus = 2,
						.ids = "0,1")),
			 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "b", .node = "late", .gpus = 1)), 0);
	assert_false(look(c, "late").found);
	cache_writer_reclaim(c);
	add_node(c, "late", 8, 8);
	assert_usage(c, "late", 0x3, 1);
	assert_int_equal(cache_pod_delete(c, "a"), 0);
	assert_int_equal(cache_pod_delete(c, "b"), 0);
	assert_usage(c, "late", 0, 0);
}

/* Same as above, but the pod's devices change while its node is still unknown:
 * the node must still arrive to find the pod's current holding. */
static void test_cache_pod_apply_changes_before_node_is_known(void **state)
{
	struct cache *c = *state;
	struct cache_pod_info pi;

	assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "late", .gpus = 2,
						.ids = "0,1")),
			 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "late", .gpus = 2,
						.ids = "2,3")),
			 0);
	pi = pod_info(c, "a");
	assert_int_equal(pi.devices, 0xc);
	cache_writer_reclaim(c);
	add_node(c, "late", 8, 8);
	assert_usage(c, "late", 0xc, 0);
	assert_int_equal(cache_pod_delete(c, "a"), 0);
	cache_writer_reclaim(c);
	assert_usage(c, "late", 0, 0);
}

/* A node deleted while pods hold GPUs on it: the pods still release cleanly,
 * and a node of the same name later starts empty. */
static void test_cache_node_delete_then_pods_release(void **state)
{
	struct cache *c = *state;
	struct cache_stats st;
	uint64_t dev = 0x3;

	add_node(c, "n", 8, 8);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "w", .node = "n", .gpus = 1, .ids = "7")),
			 0);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 2)), 0);
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), 0);
	assert_int_equal(cache_node_delete(c, "n"), 0);
	assert_false(look(c, "n").found);
	cache_writer_reclaim(c);
	assert_int_equal(cache_pod_forget(c, "a"), 0);
	assert_int_equal(cache_pod_delete(c, "w"), 0);
	assert_int_equal(cache_pod_delete(c, "a"), 0);
	cache_writer_reclaim(c);
	cache_get_stats(c, &st);
	assert_int_equal(st.nodes, 0);
	assert_int_equal(st.pods, 0);
	add_node(c, "n", 8, 8);
	assert_usage(c, "n", 0, 0);
}

/* ---- Assume and forget --------------------------------------------------------- */

static void test_cache_pod_assume_takes_exactly_the_devices(void **state)
{
	struct cache *c = *state;
	struct cache_pod_info pi;
	struct seen s;
	uint64_t dev;

	add_node(c, "n", 8, 8);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 2)), 0);
	pi = pod_info(c, "a");
	assert_int_equal(pi.state, CACHE_POD_STATE_PENDING);
	assert_string_equal(pi.node, "");

	s = look(c, "n");
	assert_int_equal(s.free_mask, 0xff);
	dev = 0x30;
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), 0);
	assert_int_equal(dev, 0x30);
	assert_usage(c, "n", 0x30, 0);
	s = look(c, "n");
	assert_int_equal(s.free_gpus, 6);
	assert_int_equal(s.free_mask, 0xcf);
	pi = pod_info(c, "a");
	assert_int_equal(pi.state, CACHE_POD_STATE_ASSUMED);
	assert_string_equal(pi.node, "n");
	assert_int_equal(pi.devices, 0x30);
}

static void test_cache_pod_assume_again_on_same_node_is_already(void **state)
{
	struct cache *c = *state;
	uint64_t dev = 0x3;

	add_node(c, "n", 8, 8);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 2)), 0);
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), 0);
	dev = 0x3;
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), -EALREADY);
	assert_int_equal(dev, 0x3);
	/* Asked for other devices: told which it holds, and nothing changes. */
	dev = 0xc;
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), -EALREADY);
	assert_int_equal(dev, 0x3);
	assert_usage(c, "n", 0x3, 0);
}

static void test_cache_pod_assume_elsewhere_is_exist(void **state)
{
	struct cache *c = *state;
	uint64_t dev = 0x3;

	add_node(c, "n", 8, 8);
	add_node(c, "m", 8, 8);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 2)), 0);
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), 0);
	dev = 0x3;
	assert_int_equal(cache_pod_assume(c, "a", "m", &dev), -EEXIST);
	assert_usage(c, "m", 0, 0);
	assert_usage(c, "n", 0x3, 0);

	/* A pod the watch shows bound elsewhere is refused the same way. */
	assert_int_equal(cache_pod_apply(c, POD(.uid = "b", .node = "n", .gpus = 1)), 0);
	dev = 0x1;
	assert_int_equal(cache_pod_assume(c, "b", "m", &dev), -EEXIST);
	assert_usage(c, "m", 0, 0);
}

static void test_cache_pod_assume_taken_devices_is_again(void **state)
{
	struct cache *c = *state;
	uint64_t dev = 0x3;

	add_node(c, "n", 8, 8);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 2)), 0);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "b", .gpus = 2)), 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "w", .node = "n", .gpus = 1, .ids = "4")),
			 0);
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), 0);
	dev = 0x6;      /* device 1 is a's */
	assert_int_equal(cache_pod_assume(c, "b", "n", &dev), -EAGAIN);
	dev = 0x18;     /* device 4 is w's */
	assert_int_equal(cache_pod_assume(c, "b", "n", &dev), -EAGAIN);
	assert_int_equal(pod_info(c, "b").state, CACHE_POD_STATE_PENDING);
	assert_usage(c, "n", 0x13, 0);
	dev = 0xc;
	assert_int_equal(cache_pod_assume(c, "b", "n", &dev), 0);
	assert_usage(c, "n", 0x1f, 0);
}

static void test_cache_pod_assume_too_few_free_is_nospc(void **state)
{
	struct cache *c = *state;
	uint64_t dev;

	/* GPUs held by pods of unknown devices leave too few, though the
	 * requested devices are not named by anyone. */
	add_node(c, "n", 4, 4);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "w", .node = "n", .gpus = 3)), 0);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 2)), 0);
	dev = 0x3;
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), -ENOSPC);
	assert_usage(c, "n", 0, 3);

	/* Allocatable below capacity: the mask has room, the count has not. */
	add_node(c, "sick", 8, 2);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "b", .gpus = 4)), 0);
	dev = 0xf;
	assert_int_equal(cache_pod_assume(c, "b", "sick", &dev), -ENOSPC);
	assert_usage(c, "sick", 0, 0);
	assert_int_equal(pod_info(c, "b").state, CACHE_POD_STATE_PENDING);

	/* Once the holder goes, it fits. */
	assert_int_equal(cache_pod_delete(c, "w"), 0);
	dev = 0x3;
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), 0);
}

static void test_cache_pod_assume_wrong_devices_is_inval(void **state)
{
	static const struct {
		unsigned gpus;
		uint64_t devices;
	} cases[] = {
		{ 2, 0x1 },             /* fewer than asked */
		{ 2, 0x7 },             /* more than asked */
		{ 2, 0 },
		{ 1, 0x10 },            /* device 4 on a 4-device node */
		{ 2, 0x81 },
		{ 1, 1ULL << 63 },
	};
	struct cache *c = *state;

	add_node(c, "n", 4, 4);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char uid[16];
		uint64_t dev = cases[i].devices;

		snprintf(uid, sizeof(uid), "p%zu", i);
		assert_int_equal(cache_pod_remember(c, POD(.uid = uid, .gpus = cases[i].gpus)), 0);
		assert_int_equal(cache_pod_assume(c, uid, "n", &dev), -EINVAL);
		assert_int_equal(pod_info(c, uid).state, CACHE_POD_STATE_PENDING);
	}
	assert_usage(c, "n", 0, 0);
}

static void test_cache_pod_assume_unknown_is_noent(void **state)
{
	struct cache *c = *state;
	uint64_t dev = 0x1;

	add_node(c, "n", 8, 8);
	add_node(c, "gone", 8, 8);
	assert_int_equal(cache_pod_assume(c, "nobody", "n", &dev), -ENOENT);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 1)), 0);
	assert_int_equal(cache_pod_assume(c, "a", "nowhere", &dev), -ENOENT);
	assert_int_equal(cache_node_delete(c, "gone"), 0);
	assert_int_equal(cache_pod_assume(c, "a", "gone", &dev), -ENOENT);
	assert_int_equal(pod_info(c, "a").state, CACHE_POD_STATE_PENDING);
	assert_usage(c, "n", 0, 0);
	cache_writer_reclaim(c);
}

static void test_cache_pod_remember_keeps_what_is_known(void **state)
{
	struct cache *c = *state;
	struct cache_pod_info pi;

	assert_int_equal(cache_pod_get(c, "a", &pi), -ENOENT);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 2)), 0);
	assert_int_equal(pod_info(c, "a").demand.gpus, 2);
	/* Remembering again does nothing: the first is kept. */
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 4)), 0);
	assert_int_equal(pod_info(c, "a").demand.gpus, 2);
	/* The watch is newer than a remembered request. */
	assert_int_equal(cache_pod_apply(c, POD(.uid = "b", .gpus = 8)), 0);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "b", .gpus = 1)), 0);
	pi = pod_info(c, "b");
	assert_int_equal(pi.demand.gpus, 8);
	assert_int_equal(pi.state, CACHE_POD_STATE_PENDING);
}

static void test_cache_pod_forget_releases(void **state)
{
	struct cache *c = *state;
	uint64_t dev = 0xf0;

	add_node(c, "n", 8, 8);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 4)), 0);
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), 0);
	assert_usage(c, "n", 0xf0, 0);
	assert_int_equal(cache_pod_forget(c, "a"), 0);
	assert_usage(c, "n", 0, 0);
	assert_int_equal(pod_info(c, "a").state, CACHE_POD_STATE_PENDING);
	assert_int_equal(pod_info(c, "a").devices, 0);
	assert_int_equal(cache_pod_forget(c, "a"), -ENOENT);
	assert_int_equal(cache_pod_forget(c, "nobody"), -ENOENT);
	/* Forgotten, it may be assumed again, anywhere. */
	dev = 0x0f;
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), 0);
	assert_usage(c, "n", 0x0f, 0);

	/* What the watch says a pod holds is not troupe's to forget. */
	assert_int_equal(cache_pod_apply(c, POD(.uid = "w", .node = "n", .gpus = 1)), 0);
	assert_int_equal(cache_pod_forget(c, "w"), -ENOENT);
	assert_usage(c, "n", 0x0f, 1);
}

/* A watch event from before troupe's bind (no nodeName yet) keeps the assumption. */
static void test_cache_pod_assume_survives_stale_unbound_update(void **state)
{
	struct cache *c = *state;
	struct cache_pod_info pi;
	uint64_t dev = 0x3;

	add_node(c, "n", 8, 8);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 2)), 0);
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .gpus = 2, .phase = "Pending")), 0);
	pi = pod_info(c, "a");
	assert_int_equal(pi.state, CACHE_POD_STATE_ASSUMED);
	assert_int_equal(pi.devices, 0x3);
	assert_usage(c, "n", 0x3, 0);
	assert_int_equal(cache_pod_forget(c, "a"), 0);
	assert_usage(c, "n", 0, 0);
}

/* The watch confirming troupe's bind keeps the devices troupe chose. */
static void test_cache_pod_assume_confirmed_by_watch_keeps_devices(void **state)
{
	static const char *const confirm_ids[] = { NULL, "4,5" };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(confirm_ids); i++) {
		struct cache *c = cache_new(&OPTS);
		struct cache_pod_info pi;
		uint64_t dev = 0x30;

		assert_non_null(c);
		add_node(c, "n", 8, 8);
		assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 2)), 0);
		assert_int_equal(cache_pod_assume(c, "a", "n", &dev), 0);
		assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "n", .gpus = 2,
							.phase = "Pending",
							.ids = confirm_ids[i])),
				 0);
		pi = pod_info(c, "a");
		assert_int_equal(pi.state, CACHE_POD_STATE_BOUND);
		assert_int_equal(pi.devices, 0x30);
		assert_int_equal(pi.unattributed, 0);
		assert_usage(c, "n", 0x30, 0);
		/* Bound now: no longer troupe's to forget. */
		assert_int_equal(cache_pod_forget(c, "a"), -ENOENT);
		assert_usage(c, "n", 0x30, 0);
		/* Finished: released. */
		assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "n", .gpus = 2,
							.phase = "Succeeded")),
				 0);
		assert_usage(c, "n", 0, 0);
		cache_free(c);
	}
}

/* After the confirmation, the pod's later events (it starts running; its
 * status changes) still carry no annotation, because troupe does not write
 * one at bind time. The devices troupe chose stay the pod's: they must not
 * turn into an unattributed count, which would let another bind take them. */
static void test_cache_pod_bound_by_troupe_keeps_devices_on_later_events(void **state)
{
	struct cache *c = *state;
	struct cache_pod_info pi;
	uint64_t dev = 0x30;

	add_node(c, "n", 8, 8);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 2)), 0);
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "n", .gpus = 2,
						.phase = "Pending")),
			 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "n", .gpus = 2,
						.phase = "Running")),
			 0);
	pi = pod_info(c, "a");
	assert_int_equal(pi.state, CACHE_POD_STATE_BOUND);
	assert_int_equal(pi.devices, 0x30);
	assert_int_equal(pi.unattributed, 0);
	assert_usage(c, "n", 0x30, 0);

	/* So another bind cannot be handed the same devices. */
	assert_int_equal(cache_pod_remember(c, POD(.uid = "b", .gpus = 2)), 0);
	dev = 0x30;
	assert_int_equal(cache_pod_assume(c, "b", "n", &dev), -EAGAIN);
}

/* The watch shows the pod on another node than assumed: the watch wins. */
static void test_cache_pod_assume_overruled_by_watch(void **state)
{
	struct cache *c = *state;
	struct cache_pod_info pi;
	uint64_t dev = 0x3;

	add_node(c, "n", 8, 8);
	add_node(c, "m", 8, 8);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "a", .gpus = 2)), 0);
	assert_int_equal(cache_pod_assume(c, "a", "n", &dev), 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "m", .gpus = 2)), 0);
	assert_usage(c, "n", 0, 0);
	assert_usage(c, "m", 0, 2);
	pi = pod_info(c, "a");
	assert_int_equal(pi.state, CACHE_POD_STATE_BOUND);
	assert_string_equal(pi.node, "m");

	/* Deleted after an assume: released. */
	assert_int_equal(cache_pod_remember(c, POD(.uid = "b", .gpus = 1)), 0);
	dev = 0x80;
	assert_int_equal(cache_pod_assume(c, "b", "n", &dev), 0);
	assert_int_equal(cache_pod_delete(c, "b"), 0);
	assert_usage(c, "n", 0, 0);
}

/* ---- Snapshots ----------------------------------------------------------------- */

#define CLUSTER_SMALL_JSON TROUPE_SOURCE_ROOT "/config/examples/cluster-small.json"
#define CLUSTER_SMALL_YAML TROUPE_SOURCE_ROOT "/config/examples/cluster-small.yaml"

static void check_cluster_small(struct cache *c)
{
	struct cache_stats st;
	struct cache_pod_info pi;
	struct cache_node_view v;

	cache_get_stats(c, &st);
	assert_int_equal(st.nodes, 8);
	assert_int_equal(st.pods, 7);
	assert_int_equal(st.pods_holding, 3);
	assert_int_equal(st.gpus_allocatable, 46);
	assert_int_equal(st.gpus_held, 7);

	assert_usage(c, "gpu-a100-0", 0xf, 0);          /* resnet-0, annotated 0-3 */
	assert_usage(c, "gpu-h100-0", 0, 2);            /* bert-finetune, no annotation */
	assert_usage(c, "gpu-v100-0", 0, 1);
	assert_usage(c, "gpu-a100-1", 0, 0);            /* old-eval has Succeeded */
	assert_int_equal(look(c, "gpu-v100-0").allocatable, 6);
	assert_int_equal(look(c, "gpu-v100-0").free_gpus, 5);

	pi = pod_info(c, "6f1c2a3e-0000-4000-8000-000000000001");
	assert_int_equal(pi.state, CACHE_POD_STATE_BOUND);
	assert_string_equal(pi.name, "resnet-0");
	assert_int_equal(pi.devices, 0xf);
	pi = pod_info(c, "6f1c2a3e-0000-4000-8000-000000000004");
	assert_string_equal(pi.name, "old-eval");
	assert_int_equal(pi.state, CACHE_POD_STATE_PENDING);
	assert_int_equal(pi.devices, 0);
	assert_int_equal(pi.unattributed, 0);
	pi = pod_info(c, "6f1c2a3e-0000-4000-8000-000000000010");
	assert_string_equal(pi.name, "llm-worker-0");
	assert_int_equal(pi.state, CACHE_POD_STATE_PENDING);
	assert_int_equal(pi.demand.gpus, 8);

	cache_read_begin(c);
	assert_true(cache_node_lookup(c, "gpu-l4-0", 8, &v));
	assert_true(v.node->unschedulable);
	assert_int_equal(v.node->n_taints, 1);
	assert_true(cache_node_lookup(c, "gpu-t4-0", 8, &v));
	assert_false(v.node->ready);
	assert_true(cache_node_lookup(c, "gpu-a100-0", 10, &v));
	assert_true(v.node->ready);
	assert_string_equal(cache_node_label(v.node, "nvidia.com/gpu.product"),
			    "NVIDIA-A100-SXM4-80GB");
	assert_int_equal(v.node->cpu_milli, 96000);
	assert_true(cache_node_lookup(c, "cpu-0", 5, &v));
	assert_int_equal(v.node->gpu_resource, -1);
	cache_read_end(c);
}

static void test_cache_snapshot_load_cluster_small_json(void **state)
{
	struct cache *c = *state;
	char err[CACHE_ERR_LEN] = "";

	if (cache_snapshot_load(c, CLUSTER_SMALL_JSON, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	check_cluster_small(c);
}

/* The YAML rendering of the same cluster loads to the same state. */
static void test_cache_snapshot_load_cluster_small_yaml(void **state)
{
	struct cache *c = *state;
	char err[CACHE_ERR_LEN] = "";

	if (access(CLUSTER_SMALL_YAML, R_OK) != 0)
		skip();
	if (cache_snapshot_load(c, CLUSTER_SMALL_YAML, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	check_cluster_small(c);
}

static void test_cache_snapshot_load_multi_document_yaml(void **state)
{
	static const char yaml[] =
		"# pods may come before their nodes; nodes are applied first\n"
		"apiVersion: v1\n"
		"kind: List\n"
		"items:\n"
		"  - apiVersion: v1\n"
		"    kind: Pod\n"
		"    metadata:\n"
		"      name: early\n"
		"      namespace: ml\n"
		"      uid: u-early\n"
		"      annotations: {troupe.io/gpu-ids: \"1,2\"}\n"
		"    spec:\n"
		"      nodeName: y-0\n"
		"      containers:\n"
		"        - name: main\n"
		"          resources: {limits: {nvidia.com/gpu: 2}}\n"
		"    status: {phase: Running}\n"
		"---\n"
		"apiVersion: v1\n"
		"kind: Node\n"
		"metadata: {name: y-0, labels: {zone: b}}\n"
		"status:\n"
		"  capacity: {nvidia.com/gpu: 4, cpu: 16, memory: 64Gi}\n"
		"  allocatable: {nvidia.com/gpu: 4, cpu: 15500m, memory: 60Gi}\n"
		"  conditions: [{type: Ready, status: \"True\"}]\n"
		"---\n"
		"kind: List\n"
		"items:\n"
		"  - kind: Node\n"
		"    metadata: {name: y-1}\n"
		"    status: {allocatable: {nvidia.com/gpu: \"2\"}}\n"
		"  - kind: Pod\n"
		"    metadata: {name: plain, namespace: ml}\n"
		"    spec:\n"
		"      nodeName: y-1\n"
		"      containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]\n"
		"  - kind: ConfigMap\n"
		"    metadata: {name: ignored}\n"
		"  - kind: Node\n"
		"    metadata: {}\n"
		"  - kind: PodGroup\n"
		"    metadata: {name: gang}\n";
	struct cache *c = *state;
	char *path = temp_file_with(yaml);
	char err[CACHE_ERR_LEN] = "";
	struct cache_node_view v;
	struct cache_pod_info pi;
	struct cache_stats st;
	int ret = cache_snapshot_load(c, path, err, sizeof(err));

	unlink(path);
	free(path);
	if (ret != 0)
		fail_msg("%s", err);
	cache_get_stats(c, &st);
	assert_int_equal(st.nodes, 2);
	assert_int_equal(st.pods, 2);
	assert_usage(c, "y-0", 0x6, 0);
	assert_usage(c, "y-1", 0, 1);
	cache_read_begin(c);
	assert_true(cache_node_lookup(c, "y-0", 3, &v));
	assert_int_equal(v.node->cpu_milli, 15500);
	assert_int_equal(v.node->mem_bytes, 60 * GI);
	assert_true(v.node->ready);
	assert_string_equal(cache_node_label(v.node, "zone"), "b");
	cache_read_end(c);
	pi = pod_info(c, "u-early");
	assert_int_equal(pi.state, CACHE_POD_STATE_BOUND);
	assert_int_equal(pi.devices, 0x6);
	pi = pod_info(c, "ml/plain");
	assert_int_equal(pi.state, CACHE_POD_STATE_BOUND);
	assert_int_equal(pi.unattributed, 1);
}

/* A file that cannot be parsed is an error, and nothing of it is applied. */
static void test_cache_snapshot_load_malformed_changes_nothing(void **state)
{
	static const struct {
		const char *what;
		const char *text;
	} cases[] = {
		{ "truncated JSON", "{\"kind\":\"List\",\"items\":[{\"kind\":\"Node\"," },
		{ "JSON with trailing garbage",
		  "{\"kind\":\"List\",\"items\":[{\"kind\":\"Node\",\"metadata\":{\"name\":\"x-new\"}}]}"
		  "\n}garbage" },
		{ "two JSON documents",
		  "{\"kind\":\"Node\",\"metadata\":{\"name\":\"x-new\"}}\n"
		  "{\"kind\":\"Node\",\"metadata\":{\"name\":\"x-new2\"}}\n" },
		{ "bad YAML indentation",
		  "kind: List\nitems:\n  - kind: Node\n metadata: {name: x-new}\n" },
		{ "YAML list document", "- kind: Node\n  metadata: {name: x-new}\n" },
		{ "malformed second YAML document",
		  "kind: Node\nmetadata: {name: x-new}\n---\nkind: [\n" },
		{ "scalar second YAML document", "kind: Node\nmetadata: {name: x-new}\n---\ntext\n" },
		{ "YAML alias", "kind: Node\nmetadata: &m {name: x-new}\nother: *m\n" },
		{ "YAML duplicate key", "kind: Node\nmetadata: {name: x-new}\nkind: Pod\n" },
	};
	char err[CACHE_ERR_LEN];
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache *c = cache_new(&OPTS);
		char *path = temp_file_with(cases[i].text);
		struct cache_stats before, after;
		int ret;

		assert_non_null(c);
		if (cache_snapshot_load(c, CLUSTER_SMALL_JSON, err, sizeof(err)) != 0)
			fail_msg("%s", err);
		cache_get_stats(c, &before);
		err[0] = '\0';
		ret = cache_snapshot_load(c, path, err, sizeof(err));
		cache_get_stats(c, &after);
		if (ret >= 0 || !strstr(err, path) || look(c, "x-new").found ||
		    memcmp(&before, &after, sizeof(before)) != 0) {
			print_message("%s: ret %d, err [%s], x-new %s, %zu nodes before, %zu "
				      "after\n",
				      cases[i].what, ret, err,
				      look(c, "x-new").found ? "added" : "absent", before.nodes,
				      after.nodes);
			bad++;
		}
		else
			check_cluster_small(c);
		unlink(path);
		free(path);
		cache_free(c);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_snapshot_load_missing_file(void **state)
{
	struct cache *c = *state;
	char err[CACHE_ERR_LEN] = "";
	struct cache_stats st;

	assert_int_equal(cache_snapshot_load(c, "/nonexistent/troupe/snapshot.json", err,
					     sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/troupe/snapshot.json"));
	cache_get_stats(c, &st);
	assert_int_equal(st.nodes, 0);
	assert_int_equal(st.pods, 0);
}

/* ---- Concurrent assume: a property test ------------------------------------------ */

/* PT_THREADS binders remember and assume pods of 1, 2, 4 or 8 GPUs on a few
 * nodes, choosing the lowest free devices of a fresh lookup (sometimes the
 * highest, so that racing binds also differ in devices and only the free count
 * can stop the second one), and forget some of them again. One writer
 * meanwhile applies watch-style traffic: node records published again, a node
 * deleted and re-added, unrelated pods on another node coming and going, and
 * stale (unbound) versions of the binders' own pods.
 *
 * Each binder mirrors every successful assume into a shared ownership mask per
 * node, and clears the mirror before it forgets. If the cache ever handed the
 * same device to two pods at once, the mirror would see the bit already set;
 * a per-node count checks the allocatable limit the same way. At the end the
 * cache's usage must equal the mirror.
 */
enum { PT_THREADS = 8, PT_PODS = 1500, PT_NODES = 3, PT_W_PODS = 16, PT_KEEP = 2 };

static const unsigned pt_sizes[] = { 1, 2, 4, 8 };
static const uint32_t pt_alloc[PT_NODES] = { 8, 8, 6 };        /* capacity 8 each */
static const char *const pt_node[PT_NODES] = { "pt-0", "pt-1", "pt-2" };

struct pt_shared {
	struct cache *c;
	unsigned demand[PT_THREADS][PT_PODS];
	uint64_t owned[PT_NODES];       /* atomic: devices of live assumes */
	int held[PT_NODES];             /* atomic: GPUs of live assumes */
	int overlaps;                   /* atomic: a device handed out twice */
	int over_alloc;                 /* atomic: more held than allocatable */
	int bad_already;                /* atomic: -EALREADY gave other devices */
	int unexpected;                 /* atomic: any other surprising result */
	int last_unexpected;            /* atomic: the last such return code */
	int assumed;                    /* atomic: successful assumes */
	int contended;                  /* atomic: -EAGAIN or -ENOSPC */
	int binders_done;               /* atomic */
	pthread_barrier_t start;        /* binders and writer begin together */
};

struct pt_binder {
	struct pt_shared *sh;
	int id;
	uint64_t rng;
	int node[PT_PODS];              /* -1: holds nothing */
	uint64_t dev[PT_PODS];
	int keep[PT_KEEP];              /* pods still held, oldest first */
	int n_keep;
};

static void pt_uid(char *buf, size_t len, int t, int i)
{
	snprintf(buf, len, "pt-%d-%d", t, i);
}

static void pt_note(int *counter, struct pt_shared *sh, int code)
{
	__atomic_add_fetch(counter, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&sh->last_unexpected, code, __ATOMIC_SEQ_CST);
}

/* Pick the <want> lowest (or highest) set bits of <mask>, or 0 when there
 * are fewer. */
static uint64_t pick_bits(uint64_t mask, unsigned want, bool highest)
{
	uint64_t out = 0;

	while (want > 0 && mask) {
		uint64_t bit = highest ? 1ULL << (63 - __builtin_clzll(mask)) : mask & -mask;

		out |= bit;
		mask &= ~bit;
		want--;
	}
	return want ? 0 : out;
}

static void pt_forget(struct pt_binder *b, int i)
{
	struct pt_shared *sh = b->sh;
	char uid[32];
	int n = b->node[i];

	/* Clear the mirror first: the devices are still the cache's until the
	 * forget below, so no other binder can take them in between. */
	__atomic_fetch_and(&sh->owned[n], ~b->dev[i], __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&sh->held[n], __builtin_popcountll(b->dev[i]), __ATOMIC_SEQ_CST);
	pt_uid(uid, sizeof(uid), b->id, i);
	if (cache_pod_forget(sh->c, uid) != 0)
		pt_note(&sh->unexpected, sh, -1000);
	b->node[i] = -1;
	b->dev[i] = 0;
}

static void *pt_binder_main(void *arg)
{
	struct pt_binder *b = arg;
	struct pt_shared *sh = b->sh;

	pthread_barrier_wait(&sh->start);
	for (int i = 0; i < PT_PODS; i++) {
		unsigned want = sh->demand[b->id][i];
		char uid[32];

		b->node[i] = -1;
		pt_uid(uid, sizeof(uid), b->id, i);
		if (cache_pod_remember(sh->c, POD(.uid = uid, .gpus = want)) != 0)
			pt_note(&sh->unexpected, sh, -1001);
		for (int attempt = 0; attempt < 6; attempt++) {
			int n = (int)(rng_next(&b->rng) % PT_NODES);
			struct cache_node_view v;
			uint64_t dev = 0, old;
			bool found;
			int ret;

			cache_read_begin(sh->c);
			found = cache_node_lookup(sh->c, pt_node[n], strlen(pt_node[n]), &v);
			if (found && cache_view_free_gpus(&v) >= want)
				dev = pick_bits(cache_view_free_mask(&v), want,
						rng_next(&b->rng) % 4 == 0);
			cache_read_end(sh->c);
			if (!dev)
				continue;
			ret = cache_pod_assume(sh->c, uid, pt_node[n], &dev);
			if (ret == -EAGAIN || ret == -ENOSPC || ret == -ENOENT) {
				/* Usage changed or the node is being re-added: try again. */
				__atomic_add_fetch(&sh->contended, 1, __ATOMIC_SEQ_CST);
				continue;
			}
			if (ret != 0) {
				pt_note(&sh->unexpected, sh, ret);
				break;
			}
			__atomic_add_fetch(&sh->assumed, 1, __ATOMIC_SEQ_CST);
			old = __atomic_fetch_or(&sh->owned[n], dev, __ATOMIC_SEQ_CST);
			if (old & dev)
				pt_note(&sh->overlaps, sh, 0);
			if (__atomic_add_fetch(&sh->held[n], (int)want, __ATOMIC_SEQ_CST) >
			    (int)pt_alloc[n])
				pt_note(&sh->over_alloc, sh, 0);
			b->node[i] = n;
			b->dev[i] = dev;
			/* Binding twice is idempotent and reports what is held. */
			if (rng_next(&b->rng) % 4 == 0) {
				uint64_t again = ~dev & 0xff;

				if (cache_pod_assume(sh->c, uid, pt_node[n], &again) != -EALREADY ||
				    again != dev)
					pt_note(&sh->bad_already, sh, 0);
			}
			break;
		}
		/* Hold at most PT_KEEP pods, and give the oldest up when nothing
		 * fitted, so devices keep changing hands; now and then forget the
		 * newest at once instead. */
		if (b->node[i] >= 0 && rng_next(&b->rng) % 8 == 0) {
			pt_forget(b, i);
		} else if (b->n_keep == PT_KEEP || (b->node[i] < 0 && b->n_keep > 0)) {
			pt_forget(b, b->keep[0]);
			memmove(b->keep, b->keep + 1, sizeof(b->keep[0]) * (PT_KEEP - 1));
			b->n_keep--;
		}
		if (b->node[i] >= 0)
			b->keep[b->n_keep++] = i;
	}
	__atomic_add_fetch(&sh->binders_done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

struct pt_writer {
	struct pt_shared *sh;
	uint64_t rng;
	int rounds;
	bool w_live[PT_W_PODS];
};

static void pt_publish_node(struct cache *c, int n, int round)
{
	char text[512], err[CACHE_ERR_LEN];
	cJSON *j;
	struct cache_node *node;

	snprintf(text, sizeof(text),
		 "{'metadata':{'name':'%s','labels':{'round':'%d'}},'status':{"
		 "'capacity':{'nvidia.com/gpu':'8'},'allocatable':{'nvidia.com/gpu':'%u'}}}",
		 n < PT_NODES ? pt_node[n] : "pt-w", round, n < PT_NODES ? pt_alloc[n] : 8);
	j = json_sq(text);
	node = cache_node_parse(j, &OPTS, err, sizeof(err));
	cJSON_Delete(j);
	if (node)
		cache_node_upsert(c, node);
}

static void *pt_writer_main(void *arg)
{
	struct pt_writer *w = arg;
	struct pt_shared *sh = w->sh;
	struct cache *c = sh->c;

	/* The test's thread created the cache and published the nodes; from
	 * here on this thread writes. */
	cache_writer_claim(c);
	pthread_barrier_wait(&sh->start);
	while (__atomic_load_n(&sh->binders_done, __ATOMIC_SEQ_CST) < PT_THREADS) {
		uint64_t r = rng_next(&w->rng);
		int k = (int)((r >> 8) % PT_W_PODS);
		char uid[32];

		w->rounds++;
		switch (r % 8) {
		case 0:
		case 1:
			pt_publish_node(c, (int)((r >> 16) % (PT_NODES + 1)), w->rounds);
			break;
		case 2:
			/* Deleted and back: assumes in between see -ENOENT. */
			if (cache_node_delete(c, pt_node[(r >> 16) % PT_NODES]) == 0)
				pt_publish_node(c, (int)((r >> 16) % PT_NODES), w->rounds);
			break;
		case 3: {
			/* Another pod, on the watch-only node, with its own devices. */
			char ids[8];

			snprintf(uid, sizeof(uid), "w-%d", k);
			snprintf(ids, sizeof(ids), "%d", k % 8);
			cache_pod_apply(c, POD(.uid = uid, .node = "pt-w", .gpus = 1, .ids = ids));
			w->w_live[k] = true;
			break;
		}
		case 4:
			snprintf(uid, sizeof(uid), "w-%d", k);
			if (w->w_live[k])
				cache_pod_apply(c, POD(.uid = uid, .node = "pt-w", .gpus = 1,
						       .phase = "Succeeded"));
			if (cache_pod_delete(c, uid) == 0 && !w->w_live[k])
				pt_note(&sh->unexpected, sh, -1002);
			w->w_live[k] = false;
			break;
		case 5: {
			/* A stale, unbound version of a binder's pod. */
			int t = (int)((r >> 16) % PT_THREADS), i = (int)((r >> 24) % PT_PODS);

			pt_uid(uid, sizeof(uid), t, i);
			cache_pod_apply(c, POD(.uid = uid, .gpus = sh->demand[t][i],
					       .phase = "Pending"));
			break;
		}
		default:
			cache_writer_reclaim(c);
			break;
		}
	}
	return NULL;
}

static void pt_run(uint64_t seed)
{
	struct pt_shared *sh = calloc(1, sizeof(*sh));
	struct pt_binder *b = calloc(PT_THREADS, sizeof(*b));
	struct pt_writer w = { 0 };
	pthread_t tid[PT_THREADS], wid;
	uint64_t rng = seed;

	assert_non_null(sh);
	assert_non_null(b);
	sh->c = cache_new(&OPTS);
	assert_non_null(sh->c);
	for (int n = 0; n <= PT_NODES; n++)
		pt_publish_node(sh->c, n, 0);
	for (int t = 0; t < PT_THREADS; t++)
		for (int i = 0; i < PT_PODS; i++)
			sh->demand[t][i] = pt_sizes[rng_next(&rng) % ARRAY_SIZE(pt_sizes)];
	assert_int_equal(pthread_barrier_init(&sh->start, NULL, PT_THREADS + 1), 0);
	w.sh = sh;
	w.rng = rng_next(&rng) | 1;
	assert_int_equal(pthread_create(&wid, NULL, pt_writer_main, &w), 0);
	for (int t = 0; t < PT_THREADS; t++) {
		b[t].sh = sh;
		b[t].id = t;
		b[t].rng = rng_next(&rng) | 1;
		assert_int_equal(pthread_create(&tid[t], NULL, pt_binder_main, &b[t]), 0);
	}
	for (int t = 0; t < PT_THREADS; t++)
		pthread_join(tid[t], NULL);
	pthread_join(wid, NULL);
	cache_writer_claim(sh->c);      /* the forgets below may drop node entries */
	pthread_barrier_destroy(&sh->start);

	if (sh->overlaps || sh->over_alloc || sh->bad_already || sh->unexpected)
		fail_msg("seed %#" PRIx64 ": %d overlapping assumes, %d over allocatable, %d bad "
			 "-EALREADY, %d unexpected (last %d); of %d assumes, %d retried",
			 seed, sh->overlaps, sh->over_alloc, sh->bad_already, sh->unexpected,
			 sh->last_unexpected, sh->assumed, sh->contended);
	/* The run must have exercised something. */
	assert_true(sh->assumed >= PT_THREADS * 10);

	/* The cache holds exactly what the binders still hold. */
	for (int n = 0; n < PT_NODES; n++) {
		struct seen s = look(sh->c, pt_node[n]);

		assert_true(s.found);
		if (s.used != sh->owned[n] || s.unattributed != 0)
			fail_msg("seed %#" PRIx64 ": %s used %#" PRIx64 " unattributed %u, binders "
				 "hold %#" PRIx64,
				 seed, pt_node[n], s.used, s.unattributed, sh->owned[n]);
		assert_true((uint32_t)__builtin_popcountll(s.used) <= pt_alloc[n]);
	}
	for (int t = 0; t < PT_THREADS; t++) {
		for (int i = 0; i < PT_PODS; i++) {
			char uid[32];
			struct cache_pod_info pi;

			pt_uid(uid, sizeof(uid), t, i);
			pi = pod_info(sh->c, uid);
			if (b[t].node[i] < 0) {
				assert_int_equal(pi.state, CACHE_POD_STATE_PENDING);
				continue;
			}
			assert_int_equal(pi.state, CACHE_POD_STATE_ASSUMED);
			assert_string_equal(pi.node, pt_node[b[t].node[i]]);
			assert_int_equal(pi.devices, b[t].dev[i]);
			pt_forget(&b[t], i);
		}
	}
	assert_int_equal(sh->unexpected, 0);
	for (int n = 0; n < PT_NODES; n++)
		assert_usage(sh->c, pt_node[n], 0, 0);
	cache_free(sh->c);
	free(b);
	free(sh);
}

static void test_cache_pod_assume_concurrent_never_double_books(void **state)
{
	/* Fixed seeds, so that a failure names its seed and reproduces. */
	static const uint64_t seeds[] = { 1, 2, 3, 0x5eed, 0xdeadbeef, 20240601 };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(seeds); i++)
		pt_run(seeds[i]);
}

/* ---- Pod groups ------------------------------------------------------------------ */

static struct cache_podgroup *podgroup_parse_sq(const char *text, const struct cache_opts *opts,
						 char *err, size_t errlen)
{
	cJSON *j = json_sq(text);
	struct cache_podgroup *pg = cache_podgroup_parse(j, opts, err, errlen);

	cJSON_Delete(j);
	return pg;
}

static void test_cache_podgroup_parse_fields(void **state)
{
	/* Parsed with OPTS2: both nvidia.com/gpu and amd.com/gpu are managed. */
	static const struct {
		const char *what;
		const char *json;
		const char *ns, *name;
		int32_t min_member, timeout_s;
		uint32_t min_gpus;
		int64_t cpu_milli, mem_bytes;
	} cases[] = {
		{ "everything",
		  "{'metadata':{'name':'train','namespace':'ml'},'spec':{'minMember':4,"
		  "'scheduleTimeoutSeconds':120,'minResources':{'nvidia.com/gpu':'16','cpu':'64',"
		  "'memory':'256Gi'}}}",
		  "ml", "train", 4, 120, 16, 64000, 256 * GI },
		{ "no spec, no namespace", "{'metadata':{'name':'g'}}",
		  "default", "g", 0, 0, 0, 0, 0 },
		{ "empty namespace",
		  "{'metadata':{'name':'g','namespace':''},'spec':{'minMember':2}}",
		  "default", "g", 2, 0, 0, 0, 0 },
		{ "fractional cpu, decimal memory",
		  "{'metadata':{'name':'g','namespace':'a'},'spec':{'minResources':"
		  "{'cpu':'1500m','memory':'1G'}}}",
		  "a", "g", 0, 0, 0, 1500, INT64_C(1000000000) },
		{ "numbers as YAML gives them",
		  "{'metadata':{'name':'g','namespace':'a'},'spec':{'minMember':3,"
		  "'minResources':{'nvidia.com/gpu':8,'cpu':2}}}",
		  "a", "g", 3, 0, 8, 2000, 0 },
		{ "GPUs of every managed kind",
		  "{'metadata':{'name':'g','namespace':'a'},'spec':{'minResources':"
		  "{'amd.com/gpu':'2','nvidia.com/gpu':'1'}}}",
		  "a", "g", 0, 0, 3, 0, 0 },
		{ "unmanaged resources are not GPUs",
		  "{'metadata':{'name':'g','namespace':'a'},'spec':{'minResources':"
		  "{'example.com/fpga':'4'}}}",
		  "a", "g", 0, 0, 0, 0, 0 },
		{ "negative and non-numeric counts are absent",
		  "{'metadata':{'name':'g','namespace':'a'},'spec':{'minMember':-1,"
		  "'scheduleTimeoutSeconds':'60','minResources':{'nvidia.com/gpu':'-2'}}}",
		  "a", "g", 0, 0, 0, 0, 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "";
		struct cache_podgroup *pg = podgroup_parse_sq(cases[i].json, &OPTS2, err,
							      sizeof(err));

		if (!pg) {
			print_message("%s: not parsed: %s\n", cases[i].what, err);
			bad++;
			continue;
		}
		if (strcmp(pg->ns, cases[i].ns) != 0 || strcmp(pg->name, cases[i].name) != 0 ||
		    pg->min_member != cases[i].min_member || pg->timeout_s != cases[i].timeout_s ||
		    pg->min_gpus != cases[i].min_gpus || pg->min_cpu_milli != cases[i].cpu_milli ||
		    pg->min_mem_bytes != cases[i].mem_bytes) {
			print_message("%s: got %s/%s minMember %d timeout %d gpus %u cpu %" PRId64
				      "m mem %" PRId64 "; want %s/%s %d %d %u %" PRId64 "m %" PRId64
				      "\n",
				      cases[i].what, pg->ns, pg->name, pg->min_member,
				      pg->timeout_s, pg->min_gpus, pg->min_cpu_milli,
				      pg->min_mem_bytes, cases[i].ns, cases[i].name,
				      cases[i].min_member, cases[i].timeout_s, cases[i].min_gpus,
				      cases[i].cpu_milli, cases[i].mem_bytes);
			bad++;
		}
		cache_podgroup_free(pg);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_podgroup_parse_requires_name(void **state)
{
	static const struct {
		const char *json;
		const char *want;       /* in the message */
	} cases[] = {
		{ "{}", "name" },
		{ "{'metadata':{'namespace':'ml'}}", "name" },
		{ "{'metadata':{'name':''}}", "name" },
		{ "{'metadata':{'name':7}}", "name" },
		{ "{'metadata':{'name':'x','namespace':"
		  "'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn'}}",
		  "namespace" },        /* 64 characters */
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "";
		struct cache_podgroup *pg = podgroup_parse_sq(cases[i].json, &OPTS, err,
							      sizeof(err));

		if (pg || !strstr(err, cases[i].want)) {
			print_message("%s: got %s, message [%s]\n", cases[i].json,
				      pg ? "a pod group" : "NULL", err);
			bad++;
		}
		cache_podgroup_free(pg);
	}
	assert_int_equal(bad, 0);
	cache_podgroup_free(NULL);
}

static struct cache_podgroup *podgroup_new(const char *ns, const char *name, int min_member,
					   unsigned gpus)
{
	char text[512], err[CACHE_ERR_LEN] = "";
	struct cache_podgroup *pg;

	snprintf(text, sizeof(text),
		 "{'kind':'PodGroup','metadata':{'name':'%s','namespace':'%s'},"
		 "'spec':{'minMember':%d,'minResources':{'nvidia.com/gpu':'%u'}}}",
		 name, ns, min_member, gpus);
	pg = podgroup_parse_sq(text, &OPTS, err, sizeof(err));
	if (!pg)
		fail_msg("cache_podgroup_parse(%s/%s): %s", ns, name, err);
	return pg;
}

struct group_seen {
	char keys[16][96];
	size_t n;
};

static int str_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void collect_group(const struct cache_podgroup *pg, void *arg)
{
	struct group_seen *gs = arg;

	if (gs->n < ARRAY_SIZE(gs->keys))
		snprintf(gs->keys[gs->n], sizeof(gs->keys[0]), "%s/%s=%d", pg->ns, pg->name,
			 pg->min_member);
	gs->n++;
}

/* Every pod group in the cache as "ns/name=minMember", sorted and comma-joined. */
static void groups_str(struct cache *c, char *out, size_t len)
{
	struct group_seen gs = { .n = 0 };
	size_t at = 0;

	cache_podgroup_foreach(c, collect_group, &gs);
	assert_true(gs.n <= ARRAY_SIZE(gs.keys));
	qsort(gs.keys, gs.n, sizeof(gs.keys[0]), str_cmp);
	out[0] = '\0';
	for (size_t i = 0; i < gs.n; i++)
		at += (size_t)snprintf(out + at, len - at, "%s%s", i ? "," : "", gs.keys[i]);
}

static size_t podgroup_count(struct cache *c)
{
	struct cache_stats st;

	cache_get_stats(c, &st);
	return st.podgroups;
}

static void test_cache_podgroup_apply_get_replace_delete(void **state)
{
	struct cache *c = *state;
	struct cache_podgroup pg;
	char buf[320], all[512];

	assert_int_equal(podgroup_count(c), 0);
	assert_int_equal(cache_podgroup_get(c, "ml", "train", &pg, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(cache_podgroup_apply(c, podgroup_new("ml", "train", 4, 16)), 0);
	assert_int_equal(cache_podgroup_apply(c, podgroup_new("ml", "eval", 2, 2)), 0);
	assert_int_equal(cache_podgroup_apply(c, podgroup_new("other", "train", 8, 0)), 0);
	assert_int_equal(podgroup_count(c), 3);

	memset(&pg, 0, sizeof(pg));
	assert_int_equal(cache_podgroup_get(c, "ml", "train", &pg, buf, sizeof(buf)), 0);
	assert_string_equal(pg.ns, "ml");
	assert_string_equal(pg.name, "train");
	assert_int_equal(pg.min_member, 4);
	assert_int_equal(pg.min_gpus, 16);
	/* The copy's strings live in the caller's buffer, not in the cache. */
	assert_true(pg.ns >= buf && pg.ns < buf + sizeof(buf));
	assert_true(pg.name >= buf && pg.name < buf + sizeof(buf));
	assert_int_equal(cache_podgroup_get(c, "other", "train", &pg, buf, sizeof(buf)), 0);
	assert_string_equal(pg.ns, "other");
	assert_int_equal(pg.min_member, 8);
	assert_int_equal(cache_podgroup_get(c, "ml", "none", &pg, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(cache_podgroup_get(c, "none", "train", &pg, buf, sizeof(buf)), -ENOENT);

	/* Applying the same ns/name again replaces it. */
	assert_int_equal(cache_podgroup_apply(c, podgroup_new("ml", "train", 6, 24)), 0);
	assert_int_equal(podgroup_count(c), 3);
	assert_int_equal(cache_podgroup_get(c, "ml", "train", &pg, buf, sizeof(buf)), 0);
	assert_int_equal(pg.min_member, 6);
	assert_int_equal(pg.min_gpus, 24);
	groups_str(c, all, sizeof(all));
	assert_string_equal(all, "ml/eval=2,ml/train=6,other/train=8");

	assert_int_equal(cache_podgroup_delete(c, "ml", "train"), 0);
	assert_int_equal(cache_podgroup_get(c, "ml", "train", &pg, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(cache_podgroup_delete(c, "ml", "train"), -ENOENT);
	assert_int_equal(cache_podgroup_delete(c, "other", "none"), -ENOENT);
	assert_int_equal(podgroup_count(c), 2);
	groups_str(c, all, sizeof(all));
	assert_string_equal(all, "ml/eval=2,other/train=8");
	/* Pod groups are not pods: pod counts are untouched. */
	{
		struct cache_stats st;

		cache_get_stats(c, &st);
		assert_int_equal(st.pods, 0);
		assert_int_equal(st.nodes, 0);
	}
}

/* ---- The by-node index ------------------------------------------------------------ */

struct uid_seen {
	char uids[64][32];
	size_t n;
};

static void collect_uid(const char *uid, void *arg)
{
	struct uid_seen *us = arg;

	if (us->n < ARRAY_SIZE(us->uids))
		snprintf(us->uids[us->n], sizeof(us->uids[0]), "%s", uid);
	us->n++;
}

/* What cache_node_pods lists for <node>: its return value, and the UIDs sorted and
 * comma-joined in <out> (a UID listed twice shows twice). */
static int node_pods_str(struct cache *c, const char *node, char *out, size_t len)
{
	struct uid_seen us = { .n = 0 };
	size_t at = 0;
	int ret = cache_node_pods(c, node, collect_uid, &us);

	assert_true(us.n <= ARRAY_SIZE(us.uids));
	qsort(us.uids, us.n, sizeof(us.uids[0]), str_cmp);
	out[0] = '\0';
	for (size_t i = 0; i < us.n; i++)
		at += (size_t)snprintf(out + at, len - at, "%s%s", i ? "," : "", us.uids[i]);
	return ret;
}

enum idx_op { IDX_APPLY, IDX_ASSUME, IDX_FORGET, IDX_DELETE, IDX_NODE_AGAIN };

/* One scenario, step by step: after each step, n and m list exactly the pods that
 * hold GPUs there. */
static void test_cache_node_pods_lists_pods_holding_gpus(void **state)
{
	static const struct {
		const char *what;
		enum idx_op op;
		const char *uid;
		const char *node;       /* apply: spec.nodeName; assume: where */
		unsigned gpus;
		const char *ids;        /* apply: the annotation; assume: the devices */
		const char *phase;
		bool deleting;
		const char *on_n, *on_m;
	} steps[] = {
		{ "annotated bound pod", IDX_APPLY, "a", "n", 2, "0,1", NULL, false, "a", "" },
		{ "unannotated bound pod", IDX_APPLY, "b", "n", 1, NULL, NULL, false, "a,b", "" },
		{ "the same fact again", IDX_APPLY, "a", "n", 2, "0,1", NULL, false, "a,b", "" },
		{ "other devices, same node", IDX_APPLY, "a", "n", 2, "2,3", NULL, false, "a,b",
		  "" },
		{ "unbound pod", IDX_APPLY, "c", NULL, 1, NULL, NULL, false, "a,b", "" },
		{ "pod without GPUs", IDX_APPLY, "d", "n", 0, NULL, NULL, false, "a,b", "" },
		{ "finished pod", IDX_APPLY, "e", "n", 1, "7", "Succeeded", false, "a,b", "" },
		{ "devices another pod holds", IDX_APPLY, "f", "n", 2, "2,3", NULL, false, "a,b,f",
		  "" },
		{ "pod on m", IDX_APPLY, "g", "m", 1, "0", NULL, false, "a,b,f", "g" },
		{ "assume on n", IDX_ASSUME, "h", "n", 2, "4,5", NULL, false, "a,b,f,h", "g" },
		{ "assume confirmed by the watch", IDX_APPLY, "h", "n", 2, NULL, "Pending", false,
		  "a,b,f,h", "g" },
		{ "assume on m", IDX_ASSUME, "i", "m", 1, "1", NULL, false, "a,b,f,h", "g,i" },
		{ "node record published again", IDX_NODE_AGAIN, NULL, "m", 0, NULL, NULL, false,
		  "a,b,f,h", "g,i" },
		{ "forget", IDX_FORGET, "i", NULL, 0, NULL, NULL, false, "a,b,f,h", "g" },
		{ "moved to m", IDX_APPLY, "a", "m", 2, "2,3", NULL, false, "b,f,h", "a,g" },
		{ "finished", IDX_APPLY, "b", "n", 1, NULL, "Failed", false, "f,h", "a,g" },
		{ "being deleted", IDX_APPLY, "g", "m", 1, "0", NULL, true, "f,h", "a" },
		{ "deleted", IDX_DELETE, "f", NULL, 0, NULL, NULL, false, "h", "a" },
		{ "deleted after confirmation", IDX_DELETE, "h", NULL, 0, NULL, NULL, false, "",
		  "a" },
		{ "deleted on m", IDX_DELETE, "a", NULL, 0, NULL, NULL, false, "", "" },
	};
	struct cache *c = *state;
	int bad = 0;

	add_node(c, "n", 8, 8);
	add_node(c, "m", 8, 8);
	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		char on_n[256], on_m[256];
		uint64_t dev = 0;
		int rn, rm;

		switch (steps[i].op) {
		case IDX_APPLY:
			assert_int_equal(cache_pod_apply(c, POD(.uid = steps[i].uid,
								.node = steps[i].node,
								.gpus = steps[i].gpus,
								.ids = steps[i].ids,
								.phase = steps[i].phase,
								.deleting = steps[i].deleting)),
					 0);
			break;
		case IDX_ASSUME:
			assert_int_equal(cache_devices_parse(steps[i].ids, &dev), 0);
			assert_int_equal(cache_pod_remember(c, POD(.uid = steps[i].uid,
								   .gpus = steps[i].gpus)),
					 0);
			assert_int_equal(cache_pod_assume(c, steps[i].uid, steps[i].node, &dev), 0);
			break;
		case IDX_FORGET:
			assert_int_equal(cache_pod_forget(c, steps[i].uid), 0);
			break;
		case IDX_DELETE:
			assert_int_equal(cache_pod_delete(c, steps[i].uid), 0);
			break;
		case IDX_NODE_AGAIN:
			add_node(c, steps[i].node, 8, 8);
			break;
		}
		rn = node_pods_str(c, "n", on_n, sizeof(on_n));
		rm = node_pods_str(c, "m", on_m, sizeof(on_m));
		if (rn != 0 || rm != 0 || strcmp(on_n, steps[i].on_n) != 0 ||
		    strcmp(on_m, steps[i].on_m) != 0) {
			print_message("after step %zu (%s): n lists [%s] (%d), m lists [%s] (%d); "
				      "want [%s], [%s]\n",
				      i, steps[i].what, on_n, rn, on_m, rm, steps[i].on_n,
				      steps[i].on_m);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	assert_usage(c, "n", 0, 0);
	assert_usage(c, "m", 0, 0);
}

static void test_cache_node_pods_unknown_node_is_noent(void **state)
{
	struct cache *c = *state;
	char uids[256];

	assert_int_equal(node_pods_str(c, "nowhere", uids, sizeof(uids)), -ENOENT);
	assert_string_equal(uids, "");
	/* A known node holding nothing lists nothing. */
	add_node(c, "n", 8, 8);
	assert_int_equal(node_pods_str(c, "n", uids, sizeof(uids)), 0);
	assert_string_equal(uids, "");
	/* The name is matched whole. */
	assert_int_equal(node_pods_str(c, "n2", uids, sizeof(uids)), -ENOENT);
	assert_int_equal(node_pods_str(c, "", uids, sizeof(uids)), -ENOENT);

	/* A node troupe knows only through the pods on it lists them... */
	assert_int_equal(cache_pod_apply(c, POD(.uid = "p", .node = "late", .gpus = 1)), 0);
	assert_int_equal(node_pods_str(c, "late", uids, sizeof(uids)), 0);
	assert_string_equal(uids, "p");
	/* ...and is forgotten with the last of them. */
	assert_int_equal(cache_pod_delete(c, "p"), 0);
	assert_int_equal(node_pods_str(c, "late", uids, sizeof(uids)), -ENOENT);

	/* A deleted node still lists the pods holding GPUs on it, until they go. */
	assert_int_equal(cache_pod_apply(c, POD(.uid = "q", .node = "n", .gpus = 2, .ids = "0,1")),
			 0);
	assert_int_equal(cache_node_delete(c, "n"), 0);
	assert_int_equal(node_pods_str(c, "n", uids, sizeof(uids)), 0);
	assert_string_equal(uids, "q");
	assert_int_equal(cache_pod_delete(c, "q"), 0);
	cache_writer_reclaim(c);
	assert_int_equal(node_pods_str(c, "n", uids, sizeof(uids)), -ENOENT);
}

/* ---- Sweeps after a relist -------------------------------------------------------- */

/* A keep callback: keeps exactly the names listed (NULL-terminated). */
struct keep_set {
	const char *const *names;
};

static bool keep_listed(const char *key, void *arg)
{
	struct keep_set *k = arg;

	for (const char *const *p = k->names; *p; p++)
		if (strcmp(*p, key) == 0)
			return true;
	return false;
}

static void test_cache_node_sweep_deletes_rejected_nodes(void **state)
{
	static const char *const all[] = { "n0", "n1", "n2", "n3", NULL };
	static const char *const some[] = { "n1", "n3", "not-a-node", NULL };
	static const char *const none[] = { NULL };
	static const struct {
		const char *what;
		const char *const *keep;
		bool want[4];           /* n0..n3 still there */
	} cases[] = {
		{ "keep all", all, { true, true, true, true } },
		{ "keep some", some, { false, true, false, true } },
		{ "keep none", none, { false, false, false, false } },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache *c = cache_new(&OPTS);
		struct keep_set k = { cases[i].keep };
		struct cache_stats st;
		char uids[64];
		size_t want_n = 0;

		assert_non_null(c);
		for (int n = 0; n < 4; n++) {
			char name[8];

			snprintf(name, sizeof(name), "n%d", n);
			add_node(c, name, 8, 8);
		}
		/* A pod holds GPUs on n2, another on a node deleted before the sweep. */
		assert_int_equal(cache_pod_apply(c, POD(.uid = "p", .node = "n2", .gpus = 1,
							.ids = "0")),
				 0);
		add_node(c, "gone", 8, 8);
		assert_int_equal(cache_pod_apply(c, POD(.uid = "q", .node = "gone", .gpus = 2)),
				 0);
		assert_int_equal(cache_node_delete(c, "gone"), 0);
		cache__node_sweep(c, keep_listed, &k);
		for (int n = 0; n < 4; n++) {
			char name[8];

			snprintf(name, sizeof(name), "n%d", n);
			want_n += cases[i].want[n];
			if (look(c, name).found != cases[i].want[n]) {
				print_message("%s: %s is %s\n", cases[i].what, name,
					      cases[i].want[n] ? "gone" : "still there");
				bad++;
			}
		}
		cache_get_stats(c, &st);
		if (st.nodes != want_n || look(c, "gone").found) {
			print_message("%s: %zu nodes, want %zu\n", cases[i].what, st.nodes, want_n);
			bad++;
		}
		/* Sweeping nodes leaves pods alone: p still holds its device on n2, so a
		 * node n2 published again starts with it in use. */
		if (pod_info(c, "p").state != CACHE_POD_STATE_BOUND ||
		    node_pods_str(c, "n2", uids, sizeof(uids)) != 0 || strcmp(uids, "p") != 0) {
			print_message("%s: pod p lost its holding on n2 (index [%s])\n",
				      cases[i].what, uids);
			bad++;
		}
		add_node(c, "n2", 8, 8);
		assert_usage(c, "n2", 0x1, 0);
		add_node(c, "gone", 8, 8);
		assert_usage(c, "gone", 0, 2);
		cache_free(c);
	}
	assert_int_equal(bad, 0);
}

/* Which pod is which in the pod sweep below. */
struct sweep_pod {
	const char *uid;
	const char *how;        /* how it came to the cache */
	bool from_api;          /* before the sweep */
	bool kept_by_callback;
	bool survives;
};

static void test_cache_pod_sweep_deletes_rejected_api_pods_keeps_assumed(void **state)
{
	static const struct sweep_pod pods[] = {
		{ "a", "bound on n, devices 0,1", true, false, false },
		{ "b", "bound on n, 1 unattributed", true, false, false },
		{ "c", "pending, from the API", true, false, false },
		{ "q", "remembered, then seen pending in the API", true, false, false },
		{ "z", "bound on a node troupe does not know", true, false, false },
		/* Assumed pods are never swept: created after the list's version
		 * and bound meanwhile, they are simply not in the list yet. */
		{ "s", "remembered and assumed on n, devices 4,5", false, false, true },
		{ "r", "remembered only", false, false, true },
		{ "u", "remembered, assumed and forgotten", false, false, true },
		{ "t", "remembered and assumed on m, device 0", false, true, true },
		{ "k", "bound on m, device 1", true, true, true },
	};
	static const char *const keep_tk[] = { "t", "k", NULL };
	struct cache *c = *state;
	struct keep_set keep_all = { NULL }, keep = { keep_tk };
	const char *all[ARRAY_SIZE(pods) + 1];
	struct cache_stats before, after;
	char uids[128];
	uint64_t dev;
	int bad = 0;

	add_node(c, "n", 8, 8);
	add_node(c, "m", 8, 8);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "a", .node = "n", .gpus = 2, .ids = "0,1")),
			 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "b", .node = "n", .gpus = 1)), 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "c", .gpus = 1)), 0);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "q", .gpus = 1)), 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "q", .gpus = 1)), 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "z", .node = "late", .gpus = 1)), 0);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "s", .gpus = 2)), 0);
	dev = 0x30;
	assert_int_equal(cache_pod_assume(c, "s", "n", &dev), 0);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "r", .gpus = 2)), 0);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "u", .gpus = 1)), 0);
	dev = 0x40;
	assert_int_equal(cache_pod_assume(c, "u", "n", &dev), 0);
	assert_int_equal(cache_pod_forget(c, "u"), 0);
	assert_int_equal(cache_pod_remember(c, POD(.uid = "t", .gpus = 1)), 0);
	dev = 0x1;
	assert_int_equal(cache_pod_assume(c, "t", "m", &dev), 0);
	assert_int_equal(cache_pod_apply(c, POD(.uid = "k", .node = "m", .gpus = 1, .ids = "1")),
			 0);
	assert_usage(c, "n", 0x33, 1);
	assert_usage(c, "m", 0x3, 0);
	for (size_t i = 0; i < ARRAY_SIZE(pods); i++) {
		struct cache_pod_info pi = pod_info(c, pods[i].uid);

		if (pi.from_api != pods[i].from_api) {
			print_message("%s (%s): from_api %d, want %d\n", pods[i].uid, pods[i].how,
				      pi.from_api, pods[i].from_api);
			bad++;
		}
		all[i] = pods[i].uid;
	}
	all[ARRAY_SIZE(pods)] = NULL;
	assert_int_equal(bad, 0);

	/* A list that still holds every pod changes nothing. */
	keep_all.names = all;
	cache_get_stats(c, &before);
	cache__pod_sweep(c, keep_listed, &keep_all);
	cache_get_stats(c, &after);
	assert_memory_equal(&before, &after, sizeof(before));
	assert_int_equal(before.pods, ARRAY_SIZE(pods));

	cache__pod_sweep(c, keep_listed, &keep);
	for (size_t i = 0; i < ARRAY_SIZE(pods); i++) {
		struct cache_pod_info pi;
		int ret = cache_pod_get(c, pods[i].uid, &pi);

		if ((ret == 0) != pods[i].survives) {
			print_message("%s (%s): %s by the sweep\n", pods[i].uid, pods[i].how,
				      ret == 0 ? "kept" : "deleted");
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	/* What the swept pods held is free again; what the kept ones hold is not. */
	assert_usage(c, "n", 0x30, 0);
	assert_usage(c, "m", 0x3, 0);
	assert_int_equal(node_pods_str(c, "n", uids, sizeof(uids)), 0);
	assert_string_equal(uids, "s");
	assert_int_equal(node_pods_str(c, "m", uids, sizeof(uids)), 0);
	assert_string_equal(uids, "k,t");
	assert_int_equal(node_pods_str(c, "late", uids, sizeof(uids)), -ENOENT);
	/* Remembered pods stay as they were: pending, not from the API. */
	for (size_t i = 0; i < 2; i++) {
		const char *uid = i ? "u" : "r";
		struct cache_pod_info pi = pod_info(c, uid);

		assert_int_equal(pi.state, CACHE_POD_STATE_PENDING);
		assert_false(pi.from_api);
		assert_int_equal(pi.devices, 0);
		assert_string_equal(pi.node, "");
	}
	assert_int_equal(pod_info(c, "t").state, CACHE_POD_STATE_ASSUMED);
	assert_int_equal(pod_info(c, "t").devices, 0x1);
	assert_int_equal(pod_info(c, "k").state, CACHE_POD_STATE_BOUND);
	assert_int_equal(pod_info(c, "k").devices, 0x2);
	cache_get_stats(c, &after);
	assert_int_equal(after.pods, 5);
	assert_int_equal(after.pods_holding, 3);
	assert_int_equal(after.gpus_held, 4);
	/* The assumed pod survived with its devices; forgetting it frees them. */
	assert_int_equal(pod_info(c, "s").state, CACHE_POD_STATE_ASSUMED);
	assert_int_equal(cache_pod_forget(c, "s"), 0);
	assert_usage(c, "n", 0, 0);
}

/* ---- cache_pod_foreach ------------------------------------------------------------- */

/* Enough pods that every stripe of the pod table holds some. */
enum { FE_PODS = 512, FE_NODES = 4 };

struct foreach_seen {
	int visits[FE_PODS];
	int stray;              /* UIDs the test never made */
	struct cache_pod_info info[FE_PODS];
};

static void collect_pod(const struct cache_pod_info *pi, const char *uid, void *arg)
{
	struct foreach_seen *fs = arg;
	int i;

	if (sscanf(uid, "fe-%d", &i) != 1 || i < 0 || i >= FE_PODS) {
		fs->stray++;
		return;
	}
	fs->visits[i]++;
	fs->info[i] = *pi;
}

static void test_cache_pod_foreach_visits_every_pod_once(void **state)
{
	static const char *const nodes[FE_NODES] = { "fe-n0", "fe-n1", "fe-n2", "fe-n3" };
	struct cache *c = *state;
	struct foreach_seen *fs = calloc(1, sizeof(*fs));
	int bad = 0;

	assert_non_null(fs);
	for (size_t n = 0; n < ARRAY_SIZE(nodes); n++)
		add_node(c, nodes[n], 64, 64);
	/* Four kinds of pod, in turn: bound (from the API), assumed, remembered only,
	 * pending (from the API). Each group of four goes to the next node in turn, and
	 * its assumed pod takes the next device there: 32 assumed and 32 bound GPUs fill
	 * each node's 64. */
	for (int i = 0; i < FE_PODS; i++) {
		char uid[16];
		const char *node = nodes[(i / 4) % FE_NODES];
		uint64_t dev = 1ULL << (i / 4 / FE_NODES);

		snprintf(uid, sizeof(uid), "fe-%d", i);
		switch (i % 4) {
		case 0:
			assert_int_equal(cache_pod_apply(c, POD(.uid = uid, .node = node,
								.gpus = 1)),
					 0);
			break;
		case 1:
			assert_int_equal(cache_pod_remember(c, POD(.uid = uid, .gpus = 1)), 0);
			assert_int_equal(cache_pod_assume(c, uid, node, &dev), 0);
			break;
		case 2:
			assert_int_equal(cache_pod_remember(c, POD(.uid = uid, .gpus = 2)), 0);
			break;
		default:
			assert_int_equal(cache_pod_apply(c, POD(.uid = uid, .gpus = 3)), 0);
			break;
		}
	}
	cache_pod_foreach(c, collect_pod, fs);
	assert_int_equal(fs->stray, 0);
	for (int i = 0; i < FE_PODS; i++) {
		const struct cache_pod_info *pi = &fs->info[i];
		char uid[16];
		static const enum cache_pod_state want_state[] = {
			CACHE_POD_STATE_BOUND, CACHE_POD_STATE_ASSUMED, CACHE_POD_STATE_PENDING,
			CACHE_POD_STATE_PENDING,
		};
		static const bool want_api[] = { true, false, false, true };
		static const unsigned want_gpus[] = { 1, 1, 2, 3 };
		const char *want_node = i % 4 < 2 ? nodes[(i / 4) % FE_NODES] : "";
		uint64_t want_dev = i % 4 == 1 ? 1ULL << (i / 4 / FE_NODES) : 0;
		uint32_t want_unattr = i % 4 == 0 ? 1 : 0;

		snprintf(uid, sizeof(uid), "fe-%d", i);
		if (fs->visits[i] != 1 || pi->state != want_state[i % 4] ||
		    pi->from_api != want_api[i % 4] || strcmp(pi->node, want_node) != 0 ||
		    pi->devices != want_dev || pi->unattributed != want_unattr ||
		    pi->demand.gpus != want_gpus[i % 4] || strcmp(pi->name, uid) != 0 ||
		    strcmp(pi->ns, "ml") != 0 || !pi->demand_valid) {
			print_message("%s: %d visits, state %d from_api %d node [%s] devices %#"
				      PRIx64 " unattributed %u gpus %u name %s/%s\n",
				      uid, fs->visits[i], pi->state, pi->from_api, pi->node,
				      pi->devices, pi->unattributed, pi->demand.gpus, pi->ns,
				      pi->name);
			bad++;
		}
	}
	free(fs);
	assert_int_equal(bad, 0);
}

/* ---- API sources: kubeconfig, in-cluster, URL ---------------------------------------- */

/* A throwaway self-signed certificate and its key. Nothing trusts them: they only let
 * libcurl load a client certificate, a key and a CA bundle without complaint. */
static const char TEST_CERT_PEM[] =
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBhDCCASmgAwIBAgIUBpt3N2+E4jIrbHVlpGh/LV8SZ6UwCgYIKoZIzj0EAwIw\n"
	"FjEUMBIGA1UEAwwLdHJvdXBlLXRlc3QwIBcNMjYxMTI5MTMwOTQzWhgPMjEyNjEx\n"
	"MDUxMzA5NDNaMBYxFDASBgNVBAMMC3Ryb3VwZS10ZXN0MFkwEwYHKoZIzj0CAQYI\n"
	"KoZIzj0DAQcDQgAEVKzpz0BRR2BVpdJHIMq8BJJwLl+fuckYR2cOHlhBYrr6aX1M\n"
	"5EHaA0/ukU0tUyorzxlQyXiBrTOUv2QcmTVZ+qNTMFEwHQYDVR0OBBYEFErgRsPV\n"
	"jv1zBYO0Nzw7HT2gWWs1MB8GA1UdIwQYMBaAFErgRsPVjv1zBYO0Nzw7HT2gWWs1\n"
	"MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAOmHPRzW1ite5jIx\n"
	"eBHS5kUE7m3cxcrLnEASaOih8JCZAiEAjIhDOKqQVTHtTn/ZFfAWHjZo49BdN+lA\n"
	"28QtRtZNRFo=\n"
	"-----END CERTIFICATE-----\n";
static const char TEST_KEY_PEM[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgdfJMJV4uEnAEcp+q\n"
	"74irIdsr53TZ4EtLyknDIiCER9ehRANCAARUrOnPQFFHYFWl0kcgyrwEknAuX5+5\n"
	"yRhHZw4eWEFiuvppfUzkQdoDT+6RTS1TKivPGVDJeIGtM5S/ZByZNVn6\n"
	"-----END PRIVATE KEY-----\n";

static char *b64_encode(const char *in, size_t n)
{
	static const char alpha[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

	assert_non_null(out);
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)(unsigned char)in[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)(unsigned char)in[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)in[i + 2];
		*o++ = alpha[(v >> 18) & 63];
		*o++ = alpha[(v >> 12) & 63];
		*o++ = i + 1 < n ? alpha[(v >> 6) & 63] : '=';
		*o++ = i + 2 < n ? alpha[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

static const char *const API_ENV[] = {
	"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "TROUPE_SERVICEACCOUNT_DIR",
};

/* Each API test gets a fresh folder under /tmp; teardown puts the environment and
 * the working folder back as they were and removes the folder, also after a
 * failed assertion. */
struct api_fix {
	char dir[64];
	char *env[ARRAY_SIZE(API_ENV)];
	int cwd;
};

static int api_setup(void **state)
{
	struct api_fix *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/troupe-test-api-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	for (size_t i = 0; i < ARRAY_SIZE(API_ENV); i++) {
		const char *v = getenv(API_ENV[i]);

		f->env[i] = v ? strdup(v) : NULL;
	}
	f->cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	*state = f;
	return 0;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

static int api_teardown(void **state)
{
	struct api_fix *f = *state;
	int ret = 0;

	for (size_t i = 0; i < ARRAY_SIZE(API_ENV); i++) {
		if (f->env[i])
			setenv(API_ENV[i], f->env[i], 1);
		else
			unsetenv(API_ENV[i]);
		free(f->env[i]);
	}
	if (f->cwd >= 0) {
		if (fchdir(f->cwd) != 0)
			ret = -1;
		close(f->cwd);
	}
	if (nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
		ret = -1;
	free(f);
	return ret;
}

static void write_all(int fd, const char *text)
{
	size_t len = strlen(text);

	while (len > 0) {
		ssize_t w = write(fd, text, len);

		assert_true(w > 0);
		text += w;
		len -= (size_t)w;
	}
}

/* Make every folder of <path> up to its last '/', from offset <from> on. */
static void mkdirs(char *path, size_t from)
{
	for (char *p = path + from; (p = strchr(p, '/')); p++) {
		*p = '\0';
		assert_true(mkdir(path, 0700) == 0 || errno == EEXIST);
		*p = '/';
	}
}

/* Write <text> to <rel> inside the test's folder, making the folders on the way.
 * Returns the full path; the caller frees it. */
static char *fix_write(struct api_fix *f, const char *rel, const char *text)
{
	char *path = NULL;
	int fd;

	assert_true(asprintf(&path, "%s/%s", f->dir, rel) > 0);
	mkdirs(path, strlen(f->dir) + 1);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	write_all(fd, text);
	close(fd);
	return path;
}

/* A kubeconfig file with <yaml>, made by mkstemp in the test's folder (or in its
 * sub-folder <sub> when not NULL). The caller frees the path. */
static char *fix_kubeconfig_in(struct api_fix *f, const char *sub, const char *yaml)
{
	char *path = NULL;
	int fd;

	if (sub) {
		char *dir = NULL;

		assert_true(asprintf(&dir, "%s/%s/", f->dir, sub) > 0);
		mkdirs(dir, strlen(f->dir) + 1);
		free(dir);
	}
	assert_true(asprintf(&path, "%s/%s%skubeconfig-XXXXXX", f->dir, sub ? sub : "",
			     sub ? "/" : "") > 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	write_all(fd, yaml);
	close(fd);
	return path;
}

static char *fix_kubeconfig(struct api_fix *f, const char *yaml)
{
	return fix_kubeconfig_in(f, NULL, yaml);
}

/* A kubeconfig (in sub-folder <sub> when not NULL) with one context "test" whose
 * cluster and user maps hold the YAML flow entries <cluster> and <user>. */
static char *fix_kubeconfig_with(struct api_fix *f, const char *sub, const char *cluster,
				 const char *user)
{
	char text[8192];

	snprintf(text, sizeof(text),
		 "apiVersion: v1\n"
		 "kind: Config\n"
		 "current-context: test\n"
		 "clusters:\n"
		 "- name: c\n"
		 "  cluster: {server: 'https://127.0.0.1:6443'%s%s}\n"
		 "contexts:\n"
		 "- name: test\n"
		 "  context: {cluster: c, user: u}\n"
		 "users:\n"
		 "- name: u\n"
		 "  user: {%s}\n",
		 cluster[0] ? ", " : "", cluster, user);
	return fix_kubeconfig_in(f, sub, text);
}

/* What one request through <api> sends, and how it ends. */
struct api_req {
	char auth[512];                 /* the Authorization header's value, "" without */
	char url[512];                  /* the URL requested ("" unless sent) */
	CURLcode code;                  /* how the request ended (CURLE_OK unless sent) */
	char msg[CURL_ERROR_SIZE];
};

/* A listening socket on a free loopback port, non-blocking. Returns the port. */
static int loopback_listener(int *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

/* Prepare a request through <api> as the informer and binder do, and note what it
 * would send. With <send>, also run it, whatever host the URL names, against a
 * loopback listener that answers anything with a reply that is not TLS: libcurl
 * loads the TLS credentials once connected (failing with CURLE_SSL_CACERT_BADFILE or
 * CURLE_SSL_CERTPROBLEM, naming the file, when one is unusable), then fails on the
 * reply with CURLE_SSL_CONNECT_ERROR. Nothing leaves the host; the loop waits on
 * the sockets, with a deadline. */
static struct api_req api_request(struct cache_api *api, bool send)
{
	static const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
	struct api_req r = { .code = CURLE_OK };
	struct curl_slist *headers = NULL, *redirect = NULL;
	char *url = NULL, connect_to[64];
	int lfd, sfd = -1, port, running = 1, left;
	uint64_t deadline = util_now_ns() + UINT64_C(10000000000);
	CURL *e = curl_easy_init();
	CURLM *m;
	CURLMsg *done;

	assert_non_null(e);
	assert_int_equal(cache__api_prepare(api, e, "/api/v1/nodes", &headers), 0);
	for (const struct curl_slist *l = headers; l; l = l->next)
		if (strncmp(l->data, "Authorization: ", 15) == 0)
			snprintf(r.auth, sizeof(r.auth), "%s", l->data + 15);
	if (!send)
		goto out;
	lfd = loopback_listener(&port);
	snprintf(connect_to, sizeof(connect_to), "::127.0.0.1:%d", port);
	redirect = curl_slist_append(NULL, connect_to);
	assert_non_null(redirect);
	curl_easy_setopt(e, CURLOPT_CONNECT_TO, redirect);
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r.msg);
	m = curl_multi_init();
	assert_non_null(m);
	assert_int_equal(curl_multi_add_handle(m, e), CURLM_OK);
	while (running && util_now_ns() < deadline) {
		struct curl_waitfd w = { .fd = lfd, .events = CURL_WAIT_POLLIN };

		assert_int_equal(curl_multi_perform(m, &running), CURLM_OK);
		if (sfd < 0 && (sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
			assert_int_equal(write(sfd, reply, sizeof(reply) - 1),
					 (ssize_t)sizeof(reply) - 1);
		if (running)
			curl_multi_poll(m, &w, sfd < 0 ? 1 : 0, 100, NULL);
	}
	done = curl_multi_info_read(m, &left);
	if (!done || done->msg != CURLMSG_DONE)
		fail_msg("the request did not end before its deadline");
	r.code = done->data.result;
	if (curl_easy_getinfo(e, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK && url)
		snprintf(r.url, sizeof(r.url), "%s", url);
	curl_multi_remove_handle(m, e);
	curl_multi_cleanup(m);
	curl_slist_free_all(redirect);
	if (sfd >= 0)
		close(sfd);
	close(lfd);
out:
	curl_easy_cleanup(e);
	curl_slist_free_all(headers);
	return r;
}

static bool path_char(char ch)
{
	return isalnum((unsigned char)ch) || ch == '/' || ch == '.' || ch == '-' || ch == '_';
}

/* Whether <msg> names exactly <path>, not a longer path that contains it. */
static bool names_file(const char *msg, const char *path)
{
	size_t n = strlen(path);

	for (const char *p = msg; (p = strstr(p, path)); p++)
		if ((p == msg || !path_char(p[-1])) && !path_char(p[n]))
			return true;
	return false;
}


static void test_cache_api_free_null(void **state)
{
	(void)state;
	cache_api_free(NULL);
}

static void test_cache_api_from_url_schemes(void **state)
{
	static const struct {
		const char *url;
		const char *base;       /* NULL: refused */
	} cases[] = {
		{ "http://127.0.0.1:8001", "http://127.0.0.1:8001" },
		{ "https://k8s.example.com:6443", "https://k8s.example.com:6443" },
		{ "https://k8s.example.com:6443/", "https://k8s.example.com:6443" },
		{ "http://127.0.0.1:8001///", "http://127.0.0.1:8001" },
		{ "ftp://k8s.example.com", NULL },
		{ "unix:///run/kube.sock", NULL },
		{ "127.0.0.1:6443", NULL },
		{ "k8s.example.com", NULL },
		{ "http:/127.0.0.1", NULL },
		{ "", NULL },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "";
		struct cache_api *a = cache_api_from_url(cases[i].url, NULL, err, sizeof(err));

		if (cases[i].base) {
			if (!a || strcmp(cache_api_describe(a), cases[i].base) != 0 ||
			    api_request(a, false).auth[0] != '\0') {
				print_message("%s: %s [%s]\n", cases[i].url,
					      a ? "described as" : "refused:",
					      a ? cache_api_describe(a) : err);
				bad++;
			}
		} else if (a || !strstr(err, "http://") || !strstr(err, "https://") ||
			   !strstr(err, cases[i].url)) {
			print_message("%s: %s, message [%s]\n", cases[i].url,
				      a ? "accepted" : "refused", err);
			bad++;
		}
		cache_api_free(a);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_api_from_url_token_file(void **state)
{
	struct api_fix *f = *state;
	char *token = fix_write(f, "token", "  s3cret-token\n\n");
	char *missing = NULL, want[512], err[CACHE_ERR_LEN] = "";
	struct cache_api *a;

	a = cache_api_from_url("http://127.0.0.1:8001/", token, err, sizeof(err));
	if (!a)
		fail_msg("%s", err);
	snprintf(want, sizeof(want), "http://127.0.0.1:8001, token from %s", token);
	assert_string_equal(cache_api_describe(a), want);
	/* Surrounding blanks and newlines are not part of the token. */
	assert_string_equal(api_request(a, false).auth, "Bearer s3cret-token");
	cache_api_free(a);

	assert_true(asprintf(&missing, "%s/no-such-token", f->dir) > 0);
	err[0] = '\0';
	a = cache_api_from_url("https://127.0.0.1:6443", missing, err, sizeof(err));
	assert_null(a);
	assert_non_null(strstr(err, "cannot read token file"));
	assert_true(names_file(err, missing));
	free(missing);
	free(token);
}

/* A rotated token file is read again when asked (after a 401), and a file that
 * has gone keeps the token troupe has. */
static void test_cache_api_refresh_token_rereads_the_file(void **state)
{
	struct api_fix *f = *state;
	char *token = fix_write(f, "token", "first\n");
	char err[CACHE_ERR_LEN] = "";
	struct cache_api *a = cache_api_from_url("http://127.0.0.1:8001", token, err, sizeof(err));

	if (!a)
		fail_msg("%s", err);
	assert_string_equal(api_request(a, false).auth, "Bearer first");
	free(fix_write(f, "token", "second\n"));
	cache__api_refresh_token(a, true);
	assert_string_equal(api_request(a, false).auth, "Bearer second");
	assert_int_equal(unlink(token), 0);
	cache__api_refresh_token(a, true);
	assert_string_equal(api_request(a, false).auth, "Bearer second");
	cache_api_free(a);
	free(token);
}

/* ---- in-cluster ---- */

static void test_cache_api_in_cluster_requires_service_variables(void **state)
{
	static const struct {
		const char *host, *port;        /* NULL: unset */
	} cases[] = {
		{ NULL, NULL },
		{ "10.96.0.1", NULL },
		{ NULL, "443" },
		{ "", "443" },
		{ "10.96.0.1", "" },
	};
	struct api_fix *f = *state;
	char *sa = NULL;
	int bad = 0;

	/* Even with a usable service account folder. */
	free(fix_write(f, "sa/token", "t\n"));
	free(fix_write(f, "sa/ca.crt", TEST_CERT_PEM));
	assert_true(asprintf(&sa, "%s/sa", f->dir) > 0);
	setenv("TROUPE_SERVICEACCOUNT_DIR", sa, 1);
	free(sa);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "";
		struct cache_api *a;

		if (cases[i].host)
			setenv("KUBERNETES_SERVICE_HOST", cases[i].host, 1);
		else
			unsetenv("KUBERNETES_SERVICE_HOST");
		if (cases[i].port)
			setenv("KUBERNETES_SERVICE_PORT", cases[i].port, 1);
		else
			unsetenv("KUBERNETES_SERVICE_PORT");
		a = cache_api_in_cluster(err, sizeof(err));
		if (a || cache_api_in_cluster_available() ||
		    !strstr(err, "KUBERNETES_SERVICE_HOST") ||
		    !strstr(err, "KUBERNETES_SERVICE_PORT")) {
			print_message("host %s port %s: %s, available %d, message [%s]\n",
				      cases[i].host ? cases[i].host : "(unset)",
				      cases[i].port ? cases[i].port : "(unset)",
				      a ? "accepted" : "refused", cache_api_in_cluster_available(),
				      err);
			bad++;
		}
		cache_api_free(a);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_api_in_cluster_reads_service_account(void **state)
{
	static const struct {
		const char *host, *port;
		const char *base;
	} cases[] = {
		{ "10.96.0.1", "443", "https://10.96.0.1:443" },
		{ "kubernetes.default.svc", "6443", "https://kubernetes.default.svc:6443" },
		{ "fd00:10:96::1", "443", "https://[fd00:10:96::1]:443" },
	};
	struct api_fix *f = *state;
	char *sa = NULL;
	int bad = 0;

	free(fix_write(f, "sa/token", "sa-token\n"));
	free(fix_write(f, "sa/ca.crt", TEST_CERT_PEM));
	assert_true(asprintf(&sa, "%s/sa", f->dir) > 0);
	setenv("TROUPE_SERVICEACCOUNT_DIR", sa, 1);
	free(sa);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "", want[256];
		struct cache_api *a;

		setenv("KUBERNETES_SERVICE_HOST", cases[i].host, 1);
		setenv("KUBERNETES_SERVICE_PORT", cases[i].port, 1);
		assert_true(cache_api_in_cluster_available());
		a = cache_api_in_cluster(err, sizeof(err));
		snprintf(want, sizeof(want), "%s (in-cluster service account)", cases[i].base);
		if (!a || strcmp(cache_api_describe(a), want) != 0 ||
		    strcmp(api_request(a, false).auth, "Bearer sa-token") != 0) {
			print_message("%s:%s: %s [%s]\n", cases[i].host, cases[i].port,
				      a ? "described as" : "refused:",
				      a ? cache_api_describe(a) : err);
			bad++;
		}
		cache_api_free(a);
	}
	assert_int_equal(bad, 0);
}

/* The service account's ca.crt is the CA requests trust. */
static void test_cache_api_in_cluster_trusts_service_account_ca(void **state)
{
	struct api_fix *f = *state;
	char *ca = fix_write(f, "sa/ca.crt", "not a certificate\n");
	char *sa = NULL, err[CACHE_ERR_LEN] = "";
	struct cache_api *a;
	struct api_req r;

	free(fix_write(f, "sa/token", "sa-token\n"));
	assert_true(asprintf(&sa, "%s/sa", f->dir) > 0);
	setenv("TROUPE_SERVICEACCOUNT_DIR", sa, 1);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	a = cache_api_in_cluster(err, sizeof(err));
	if (!a)
		fail_msg("%s", err);
	r = api_request(a, true);
	assert_string_equal(r.url, "https://10.96.0.1:443/api/v1/nodes");
	if (r.code != CURLE_SSL_CACERT_BADFILE || !names_file(r.msg, ca))
		fail_msg("want the CA %s refused; got curl %d [%s]", ca, r.code, r.msg);
	cache_api_free(a);
	/* A good ca.crt is accepted: the request gets as far as the reply. */
	free(fix_write(f, "sa/ca.crt", TEST_CERT_PEM));
	a = cache_api_in_cluster(err, sizeof(err));
	if (!a)
		fail_msg("%s", err);
	r = api_request(a, true);
	if (r.code != CURLE_SSL_CONNECT_ERROR)
		fail_msg("want a failure on the reply; got curl %d [%s]", r.code, r.msg);
	cache_api_free(a);
	free(ca);
	free(sa);
}

/* Either service account file missing is an error at start-up (api.h: "the files
 * cannot be read"), naming the file. */
static void test_cache_api_in_cluster_missing_file_is_error(void **state)
{
	static const char *const files[] = { "token", "ca.crt" };
	struct api_fix *f = *state;
	int bad = 0;

	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char sub[16], rel[64], *sa = NULL, *missing = NULL, err[CACHE_ERR_LEN] = "";
		struct cache_api *a;

		/* A folder holding every file but files[i]. */
		snprintf(sub, sizeof(sub), "sa%zu", i);
		for (size_t k = 0; k < ARRAY_SIZE(files); k++) {
			if (k == i)
				continue;
			snprintf(rel, sizeof(rel), "%s/%s", sub, files[k]);
			free(fix_write(f, rel, strcmp(files[k], "token") == 0 ? "t\n" :
					       TEST_CERT_PEM));
		}
		assert_true(asprintf(&sa, "%s/%s", f->dir, sub) > 0);
		assert_true(asprintf(&missing, "%s/%s", sa, files[i]) > 0);
		setenv("TROUPE_SERVICEACCOUNT_DIR", sa, 1);
		a = cache_api_in_cluster(err, sizeof(err));
		if (a || !names_file(err, missing)) {
			print_message("without %s: %s, message [%s]\n", files[i],
				      a ? "accepted" : "refused", err);
			bad++;
		}
		cache_api_free(a);
		free(sa);
		free(missing);
	}
	assert_int_equal(bad, 0);
}

/* ---- kubeconfig ---- */

static const char KUBECONFIG_TWO_CONTEXTS[] =
	"apiVersion: v1\n"
	"kind: Config\n"
	"preferences: {}\n"
	"current-context: b\n"
	"clusters:\n"
	"- name: ca\n"
	"  cluster:\n"
	"    server: https://127.0.0.1:6443\n"
	"- name: cb\n"
	"  cluster:\n"
	"    server: https://127.0.0.2:7443/\n"
	"    insecure-skip-tls-verify: true\n"
	"contexts:\n"
	"- name: a\n"
	"  context: {cluster: ca, user: ua, namespace: ml}\n"
	"- name: b\n"
	"  context: {cluster: cb, user: ub}\n"
	"users:\n"
	"- name: ua\n"
	"  user: {token: token-a}\n"
	"- name: ub\n"
	"  user: {token: token-b}\n";

static void test_cache_api_from_kubeconfig_picks_context(void **state)
{
	static const struct {
		const char *context;    /* the argument; NULL: current-context */
		const char *name;       /* the context used */
		const char *base;
		const char *auth;
		bool insecure;
	} cases[] = {
		{ NULL, "b", "https://127.0.0.2:7443", "Bearer token-b", true },
		{ "a", "a", "https://127.0.0.1:6443", "Bearer token-a", false },
		{ "b", "b", "https://127.0.0.2:7443", "Bearer token-b", true },
	};
	struct api_fix *f = *state;
	char *path = fix_kubeconfig(f, KUBECONFIG_TWO_CONTEXTS);
	int bad = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "", want_ctx[64], want_url[128];
		struct cache_api *a = cache_api_from_kubeconfig(path, cases[i].context, err,
								sizeof(err));
		const char *d;
		struct api_req r;

		if (!a) {
			print_message("context %s: refused: %s\n",
				      cases[i].context ? cases[i].context : "(current)", err);
			bad++;
			continue;
		}
		d = cache_api_describe(a);
		r = api_request(a, true);
		snprintf(want_ctx, sizeof(want_ctx), "context %s", cases[i].name);
		snprintf(want_url, sizeof(want_url), "%s/api/v1/nodes", cases[i].base);
		if (strncmp(d, cases[i].base, strlen(cases[i].base)) != 0 ||
		    d[strlen(cases[i].base)] != ' ' || !strstr(d, want_ctx) || !strstr(d, path) ||
		    (strstr(d, "TLS not verified") != NULL) != cases[i].insecure ||
		    strcmp(r.auth, cases[i].auth) != 0 || strcmp(r.url, want_url) != 0) {
			print_message("context %s: described as [%s], sent [%s] to [%s]\n",
				      cases[i].context ? cases[i].context : "(current)", d, r.auth,
				      r.url);
			bad++;
		}
		cache_api_free(a);
	}
	free(path);
	assert_int_equal(bad, 0);
}

static void test_cache_api_from_kubeconfig_refuses(void **state)
{
	static const struct {
		const char *what;
		const char *yaml;
		const char *context;
		const char *want;       /* in the message */
		bool names_path;        /* the message names the kubeconfig */
	} cases[] = {
		{ "no current-context",
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "no current-context", true },
		{ "empty current-context",
		  "current-context: ''\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "no current-context", true },
		{ "empty file", "", NULL, "no current-context", true },
		{ "unknown current-context",
		  "current-context: y\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "context \"y\" not found", true },
		{ "unknown context argument",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  "nope", "context \"nope\" not found", true },
		{ "no contexts at all", "current-context: x\n", NULL, "context \"x\" not found",
		  true },
		{ "context naming a missing cluster",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: other}}]\n",
		  NULL, "context \"x\" names no cluster with a server", true },
		{ "context without a cluster",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {user: u}}]\n",
		  NULL, "context \"x\" names no cluster with a server", true },
		{ "cluster without a server",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {insecure-skip-tls-verify: true}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "context \"x\" names no cluster with a server", true },
		{ "exec plugin",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
		  "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1,"
		  " command: aws, args: [eks, get-token]}}}]\n",
		  NULL, "exec", true },
		{ "auth-provider plugin",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
		  "users: [{name: u, user: {auth-provider: {name: gcp}}}]\n",
		  NULL, "exec", true },
		{ "server without a scheme",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: '127.0.0.1:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "http://", false },
		{ "server with another scheme",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'unix:///run/kube.sock'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "https://", false },
		{ "invalid certificate-authority-data",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443',"
		  " certificate-authority-data: 'not*base64'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "base64", true },
		{ "invalid client-certificate-data",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
		  "users: [{name: u, user: {client-certificate-data: 'bad-base64_'}}]\n",
		  NULL, "base64", true },
		{ "invalid client-key-data",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
		  "users: [{name: u, user: {client-certificate-data: 'aGVsbG8=',"
		  " client-key-data: 'aGVs!bG8='}}]\n",
		  NULL, "base64", true },
		{ "missing tokenFile",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
		  "users: [{name: u, user: {tokenFile: no-such-token}}]\n",
		  NULL, "cannot read tokenFile no-such-token", true },
		{ "malformed YAML", "current-context: x\nclusters: [\n", NULL, "", true },
	};
	struct api_fix *f = *state;
	int bad = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *path = fix_kubeconfig(f, cases[i].yaml);
		char err[CACHE_ERR_LEN] = "";
		struct cache_api *a = cache_api_from_kubeconfig(path, cases[i].context, err,
								sizeof(err));

		if (a || !err[0] || !strstr(err, cases[i].want) ||
		    (cases[i].names_path && !names_file(err, path))) {
			print_message("%s: %s, message [%s]\n", cases[i].what,
				      a ? "accepted" : "refused", err);
			bad++;
		}
		cache_api_free(a);
		free(path);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_api_from_kubeconfig_missing_file(void **state)
{
	struct api_fix *f = *state;
	char *path = NULL, err[CACHE_ERR_LEN] = "";

	assert_true(asprintf(&path, "%s/no-such-kubeconfig", f->dir) > 0);
	assert_null(cache_api_from_kubeconfig(path, NULL, err, sizeof(err)));
	assert_true(names_file(err, path));
	assert_non_null(strstr(err, strerror(ENOENT)));
	free(path);
}

/* A token given inline, or in a tokenFile relative to the kubeconfig's folder (not
 * to the working folder). */
static void test_cache_api_from_kubeconfig_token_and_token_file(void **state)
{
	static const struct {
		const char *what;
		const char *user;
		const char *auth;       /* NULL: refused */
	} cases[] = {
		{ "inline token", "token: 'inline-token'", "Bearer inline-token" },
		{ "tokenFile beside the kubeconfig", "tokenFile: token", "Bearer beside" },
		{ "tokenFile in a sub-folder", "tokenFile: secrets/token", "Bearer in-secrets" },
		{ "tokenFile up a folder", "tokenFile: ../up-token", "Bearer up" },
		{ "absolute tokenFile", "tokenFile: ABS", "Bearer beside" },
		/* Present only relative to the working folder, which does not count. */
		{ "tokenFile relative to the working folder", "tokenFile: cwd-token", NULL },
		{ "no credentials", "username: nobody", "" },
	};
	struct api_fix *f = *state;
	char *beside = fix_write(f, "kc/token", "beside\n");
	int bad = 0;

	free(fix_write(f, "kc/secrets/token", "in-secrets"));
	free(fix_write(f, "up-token", "up\n"));
	free(fix_write(f, "cwd-token", "cwd\n"));
	assert_int_equal(chdir(f->dir), 0);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char user[512], text[1024], err[CACHE_ERR_LEN] = "";
		struct cache_api *a;
		char *path;

		if (strcmp(cases[i].user, "tokenFile: ABS") == 0)
			snprintf(user, sizeof(user), "tokenFile: '%s'", beside);
		else
			snprintf(user, sizeof(user), "%s", cases[i].user);
		snprintf(text, sizeof(text),
			 "current-context: x\n"
			 "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
			 "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
			 "users: [{name: u, user: {%s}}]\n",
			 user);
		path = fix_kubeconfig_in(f, "kc", text);
		a = cache_api_from_kubeconfig(path, NULL, err, sizeof(err));
		if (cases[i].auth ? !a || strcmp(api_request(a, false).auth, cases[i].auth) != 0
				  : a != NULL || !strstr(err, "cannot read tokenFile")) {
			print_message("%s: %s, sends [%s]\n", cases[i].what,
				      a ? "accepted" : err, a ? api_request(a, false).auth : "");
			bad++;
		}
		cache_api_free(a);
		free(path);
	}
	free(beside);
	assert_int_equal(bad, 0);
}

/* A kubeconfig named by a relative path: its files are relative to its folder,
 * itself relative to the working folder. */
static void test_cache_api_from_kubeconfig_relative_path(void **state)
{
	struct api_fix *f = *state;
	char *path = fix_kubeconfig_with(f, "kc", "", "tokenFile: secrets/token");
	char err[CACHE_ERR_LEN] = "";
	struct cache_api *a;

	free(fix_write(f, "kc/secrets/token", "relative\n"));
	assert_int_equal(chdir(f->dir), 0);
	a = cache_api_from_kubeconfig(path + strlen(f->dir) + 1, NULL, err, sizeof(err));
	if (!a)
		fail_msg("%s", err);
	assert_string_equal(api_request(a, false).auth, "Bearer relative");
	cache_api_free(a);
	free(path);
}

/* Certificate and key files relative to the kubeconfig's folder: libcurl is handed
 * the resolved path, which it names when the file is unusable. */
static void test_cache_api_from_kubeconfig_relative_tls_files(void **state)
{
	static const struct {
		const char *what;
		const char *cluster, *user;
		const char *files[3];           /* created with the test certificate or key */
		CURLcode want;                  /* how the request ends */
		const char *named;              /* the file the failure names */
	} cases[] = {
		{ "certificate-authority", "certificate-authority: pki/ca.crt", "", { NULL },
		  CURLE_SSL_CACERT_BADFILE, "kc/pki/ca.crt" },
		{ "client-certificate", "", "client-certificate: pki/client.crt", { NULL },
		  CURLE_SSL_CERTPROBLEM, "kc/pki/client.crt" },
		{ "client-key", "", "client-certificate: pki/client.crt, client-key: client.key",
		  { "kc/pki/client.crt" }, CURLE_SSL_CERTPROBLEM, "kc/client.key" },
		{ "every file usable", "certificate-authority: ../ca.crt",
		  "client-certificate: pki/client.crt, client-key: pki/client.key",
		  { "ca.crt", "kc/pki/client.crt", "kc/pki/client.key" }, CURLE_SSL_CONNECT_ERROR,
		  NULL },
	};
	struct api_fix *f = *state;
	int bad = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char sub[16], kc[32], err[CACHE_ERR_LEN] = "", *named = NULL;
		struct cache_api *a;
		struct api_req r;
		char *path;

		/* Each case in a folder of its own, so files do not carry over. */
		snprintf(sub, sizeof(sub), "case%zu", i);
		for (size_t k = 0; k < ARRAY_SIZE(cases[i].files) && cases[i].files[k]; k++) {
			char rel[128];

			snprintf(rel, sizeof(rel), "%s/%s", sub, cases[i].files[k]);
			free(fix_write(f, rel, strstr(rel, ".key") ? TEST_KEY_PEM : TEST_CERT_PEM));
		}
		snprintf(kc, sizeof(kc), "%s/kc", sub);
		path = fix_kubeconfig_with(f, kc, cases[i].cluster, cases[i].user);
		a = cache_api_from_kubeconfig(path, NULL, err, sizeof(err));
		if (!a) {
			print_message("%s: refused: %s\n", cases[i].what, err);
			bad++;
			free(path);
			continue;
		}
		r = api_request(a, true);
		if (cases[i].named)
			assert_true(asprintf(&named, "%s/%s/%s", f->dir, sub, cases[i].named) > 0);
		if (r.code != cases[i].want || (named && !names_file(r.msg, named))) {
			print_message("%s: curl %d [%s]; want %d naming %s\n", cases[i].what,
				      r.code, r.msg, cases[i].want, named ? named : "nothing");
			bad++;
		}
		free(named);
		cache_api_free(a);
		free(path);
	}
	assert_int_equal(bad, 0);
}

/* *-data fields are base64 of the PEM text: decoded, they load as the files would. */
static void test_cache_api_from_kubeconfig_inline_data(void **state)
{
	struct api_fix *f = *state;
	char *cert = b64_encode(TEST_CERT_PEM, strlen(TEST_CERT_PEM));
	char *key = b64_encode(TEST_KEY_PEM, strlen(TEST_KEY_PEM));
	const char *junk_text = "not a certificate";
	char *junk = b64_encode(junk_text, strlen(junk_text));
	char *missing_key = NULL;
	const struct {
		const char *what;
		const char *ca, *cert, *key;    /* base64; NULL: left out */
		const char *key_file;
		CURLcode want;                  /* how the request ends */
		const char *named;
	} cases[] = {
		{ "every field usable", cert, cert, key, NULL, CURLE_SSL_CONNECT_ERROR, NULL },
		{ "client certificate from data, key from a file", NULL, cert, NULL, "missing.key",
		  CURLE_SSL_CERTPROBLEM, "missing.key" },
		{ "a CA that is not a certificate", junk, NULL, NULL, NULL,
		  CURLE_SSL_CACERT_BADFILE, NULL },
		{ "a client certificate that is not one", NULL, junk, NULL, NULL,
		  CURLE_SSL_CERTPROBLEM, NULL },
	};
	int bad = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char cluster[2048] = "", user[4096] = "", err[CACHE_ERR_LEN] = "";
		struct cache_api *a;
		struct api_req r;
		char *path;

		if (cases[i].ca)
			snprintf(cluster, sizeof(cluster), "certificate-authority-data: '%s'",
				 cases[i].ca);
		snprintf(user, sizeof(user), "%s%s%s%s%s%s%s%s%s",
			 cases[i].cert ? "client-certificate-data: '" : "",
			 cases[i].cert ? cases[i].cert : "", cases[i].cert ? "', " : "",
			 cases[i].key ? "client-key-data: '" : "", cases[i].key ? cases[i].key : "",
			 cases[i].key ? "', " : "", cases[i].key_file ? "client-key: '" : "",
			 cases[i].key_file ? cases[i].key_file : "",
			 cases[i].key_file ? "', " : "");
		path = fix_kubeconfig_with(f, NULL, cluster, user);
		a = cache_api_from_kubeconfig(path, NULL, err, sizeof(err));
		free(path);
		if (!a) {
			print_message("%s: refused: %s\n", cases[i].what, err);
			bad++;
			continue;
		}
		r = api_request(a, true);
		if (cases[i].named)
			assert_true(asprintf(&missing_key, "%s/%s", f->dir, cases[i].named) > 0);
		if (r.code != cases[i].want || (missing_key && !names_file(r.msg, missing_key))) {
			print_message("%s: curl %d [%s]; want %d\n", cases[i].what, r.code, r.msg,
				      cases[i].want);
			bad++;
		}
		free(missing_key);
		missing_key = NULL;
		cache_api_free(a);
	}
	free(cert);
	free(key);
	free(junk);
	assert_int_equal(bad, 0);
}

static void test_cache_api_from_kubeconfig_insecure_skip_tls_verify(void **state)
{
	static const struct {
		const char *cluster;
		bool insecure;
	} cases[] = {
		{ "insecure-skip-tls-verify: true", true },
		{ "insecure-skip-tls-verify: false", false },
		{ "", false },
	};
	struct api_fix *f = *state;
	int bad = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *path = fix_kubeconfig_with(f, NULL, cases[i].cluster, "token: t");
		char err[CACHE_ERR_LEN] = "";
		struct cache_api *a = cache_api_from_kubeconfig(path, NULL, err, sizeof(err));

		if (!a || (strstr(cache_api_describe(a), "TLS not verified") != NULL) !=
				  cases[i].insecure) {
			print_message("[%s]: %s\n", cases[i].cluster,
				      a ? cache_api_describe(a) : err);
			bad++;
		}
		cache_api_free(a);
		free(path);
	}
	assert_int_equal(bad, 0);
}

/* ---- Permissions ------------------------------------------------------------ */

/* Each permission's review names exactly its verb, group, resource and
 * subresource, the last two only when there are any. */
static void test_cache_access_review_new_names_the_permission(void **state)
{
	static const struct {
		enum cache_perm p;
		const char *name;
		const char *want;
	} cases[] = {
		{ CACHE_PERM_LIST_NODES, "list nodes",
		  "{'apiVersion':'authorization.k8s.io/v1','kind':'SelfSubjectAccessReview',"
		  "'spec':{'resourceAttributes':{'verb':'list','resource':'nodes'}}}" },
		{ CACHE_PERM_WATCH_PODS, "watch pods",
		  "{'apiVersion':'authorization.k8s.io/v1','kind':'SelfSubjectAccessReview',"
		  "'spec':{'resourceAttributes':{'verb':'watch','resource':'pods'}}}" },
		{ CACHE_PERM_BIND_PODS, "create pods/binding",
		  "{'apiVersion':'authorization.k8s.io/v1','kind':'SelfSubjectAccessReview',"
		  "'spec':{'resourceAttributes':{'verb':'create','resource':'pods',"
		  "'subresource':'binding'}}}" },
		{ CACHE_PERM_LIST_PODGROUPS, "list podgroups",
		  "{'apiVersion':'authorization.k8s.io/v1','kind':'SelfSubjectAccessReview',"
		  "'spec':{'resourceAttributes':{'verb':'list','group':'scheduling.x-k8s.io',"
		  "'resource':'podgroups'}}}" },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *got = cache__access_review_new(cases[i].p), want[512];

		sq_text(want, sizeof(want), cases[i].want);
		if (!got || strcmp(got, want) != 0 ||
		    strcmp(cache_permission_get(cases[i].p)->name, cases[i].name) != 0) {
			print_message("%s: got %s\n", cases[i].name, got ? got : "NULL");
			bad++;
		}
		free(got);
	}
	assert_int_equal(bad, 0);
	/* Every permission has a review and a name; none past the end. */
	for (int p = 0; p < CACHE_PERM_COUNT; p++) {
		char *got = cache__access_review_new((enum cache_perm)p);

		assert_non_null(got);
		assert_non_null(strstr(got, cache_permission_get((enum cache_perm)p)->verb));
		free(got);
	}
	assert_null(cache_permission_get(CACHE_PERM_COUNT));
	errno = 0;
	assert_null(cache__access_review_new(CACHE_PERM_COUNT));
	assert_int_equal(errno, EINVAL);
}

static void test_cache_access_review_parse_answers(void **state)
{
	static const struct {
		const char *body;       /* single quotes for double */
		int ret;
		bool allowed;
		const char *reason;
	} cases[] = {
		{ "{'kind':'SelfSubjectAccessReview','apiVersion':'authorization.k8s.io/v1',"
		  "'status':{'allowed':true,'reason':'RBAC: allowed by ClusterRoleBinding'}}",
		  0, true, "RBAC: allowed by ClusterRoleBinding" },
		{ "{'kind':'SelfSubjectAccessReview','status':{'allowed':false}}", 0, false, "" },
		{ "{'status':{'allowed':false,'denied':true,'reason':'webhook says no'}}",
		  0, false, "webhook says no" },
		{ "{'status':{'allowed':false,'evaluationError':'clusterrole troupe not found'}}",
		  0, false, "clusterrole troupe not found" },
		{ "{'status':{'allowed':true,'reason':7}}", 0, true, "" },
		/* Not answers: */
		{ "{'kind':'SelfSubjectAccessReview','status':{}}", -EINVAL, false, "" },
		{ "{'kind':'SelfSubjectAccessReview'}", -EINVAL, false, "" },
		{ "{'status':{'allowed':'true'}}", -EINVAL, false, "" },
		{ "{'status':{'allowed':1}}", -EINVAL, false, "" },
		{ "{'status':[true]}", -EINVAL, false, "" },
		{ "{'kind':'Status','apiVersion':'v1','status':{'allowed':true},'code':403}",
		  -EINVAL, false, "" },
		{ "[{'status':{'allowed':true}}]", -EINVAL, false, "" },
		{ "{'status':{'allowed':true}", -EINVAL, false, "" },
		{ "<html>502 Bad Gateway</html>", -EINVAL, false, "" },
		{ "", -EINVAL, false, "" },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char body[512], reason[64] = "x";
		bool allowed = !cases[i].allowed;
		int ret;

		sq_text(body, sizeof(body), cases[i].body);
		ret = cache__access_review_parse(body, strlen(body), &allowed, reason,
						 sizeof(reason));
		if (ret != cases[i].ret || (ret == 0 && allowed != cases[i].allowed) ||
		    strcmp(reason, cases[i].reason) != 0) {
			print_message("%s: ret %d allowed %d reason [%s]\n", body, ret, allowed,
				      reason);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	/* A NULL body (no answer at all) and a reason cut to its buffer. */
	{
		const char *long_reason = "{\"status\":{\"allowed\":true,\"reason\":\"0123456789\"}}";
		char reason[5];
		bool allowed = false;

		assert_int_equal(cache__access_review_parse(NULL, 0, &allowed, reason,
							    sizeof(reason)), -EINVAL);
		assert_int_equal(cache__access_review_parse(long_reason, strlen(long_reason),
							    &allowed, reason, sizeof(reason)), 0);
		assert_true(allowed);
		assert_string_equal(reason, "0123");
	}
}

static const char *yaml_text(const cJSON *j)
{
	return cJSON_IsString(j) ? j->valuestring : "(not a string)";
}

/* The permission <verb> on <resource> ("pods/binding") in <group> is, or -1. */
static int perm_of(const char *group, const char *resource, const char *verb)
{
	for (int p = 0; p < CACHE_PERM_COUNT; p++) {
		const struct cache_permission *perm = cache_permission_get((enum cache_perm)p);
		char res[128];

		snprintf(res, sizeof(res), "%s%s%s", perm->resource, perm->subresource[0] ? "/" : "",
			 perm->subresource);
		if (strcmp(group, perm->group) == 0 && strcmp(resource, res) == 0 &&
		    strcmp(verb, perm->verb) == 0)
			return p;
	}
	return -1;
}

/* config/deploy/rbac.yaml grants exactly what troupe checks it needs: each
 * (group, resource[/subresource], verb) of its ClusterRole is one permission of
 * the table, and each permission is granted, so a rule troupe does not use
 * cannot creep in and one it does cannot be forgotten. */
static void test_cache_permissions_are_the_shipped_cluster_role(void **state)
{
	bool granted[CACHE_PERM_COUNT] = { false };
	const cJSON *doc, *rule, *g, *r, *v;
	char *buf = NULL, err[192] = "";
	cJSON *docs;
	size_t len;
	int roles = 0;

	(void)state;
	assert_int_equal(util_read_file(TROUPE_SOURCE_ROOT "/config/deploy/rbac.yaml", 1 << 20,
					&buf, &len), 0);
	docs = yamljson_parse(buf, len, err, sizeof(err));
	if (!docs)
		fail_msg("rbac.yaml: %s", err);
	cJSON_ArrayForEach(doc, docs) {
		if (!json_str(doc, "kind") || strcmp(json_str(doc, "kind"), "ClusterRole") != 0)
			continue;
		roles++;
		cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(doc, "rules")) {
			const cJSON *groups = cJSON_GetObjectItemCaseSensitive(rule, "apiGroups");
			const cJSON *resources = cJSON_GetObjectItemCaseSensitive(rule, "resources");
			const cJSON *verbs = cJSON_GetObjectItemCaseSensitive(rule, "verbs");

			cJSON_ArrayForEach(g, groups) {
				cJSON_ArrayForEach(r, resources) {
					cJSON_ArrayForEach(v, verbs) {
						int p = perm_of(yaml_text(g), yaml_text(r),
								yaml_text(v));

						if (p < 0)
							fail_msg("rbac.yaml grants %s on %s (group \"%s\"), "
								 "which troupe does not use", yaml_text(v),
								 yaml_text(r), yaml_text(g));
						granted[p] = true;
					}
				}
			}
		}
	}
	assert_int_equal(roles, 1);
	for (int p = 0; p < CACHE_PERM_COUNT; p++)
		if (!granted[p])
			fail_msg("rbac.yaml does not grant %s",
				 cache_permission_get((enum cache_perm)p)->name);
	cJSON_Delete(docs);
	free(buf);
}

static void test_cache_status_message_reads_a_status(void **state)
{
	static const struct {
		const char *body;
		bool found;
		const char *want;
	} cases[] = {
		{ "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":"
		  "\"pods is forbidden: User \\\"u\\\" cannot list resource \\\"pods\\\"\","
		  "\"reason\":\"Forbidden\",\"code\":403}\n",
		  true, "pods is forbidden: User \"u\" cannot list resource \"pods\"" },
		{ "{\"kind\":\"Status\",\"message\":\"\"}", false, "" },
		{ "{\"message\":42}", false, "" },
		{ "Forbidden", false, "" },
		{ "", false, "" },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char out[128] = "x";
		bool found = cache__status_message(cases[i].body, strlen(cases[i].body), out,
						   sizeof(out));

		if (found != cases[i].found || strcmp(out, cases[i].want) != 0) {
			print_message("%s: %d [%s]\n", cases[i].body, found, out);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

/* ---- main -------------------------------------------------------------------- */

#define CACHE_TEST(f) cmocka_unit_test_setup_teardown(f, cache_setup, cache_teardown)
#define API_TEST(f) cmocka_unit_test_setup_teardown(f, api_setup, api_teardown)

/* troupe.io/gpu-uuids maps device indices to UUIDs; every device asked for must
 * be named, else nothing is written. */
static void test_cache_node_uuids_by_index(void **state)
{
	static const struct {
		const char *list;
		uint64_t mask;
		bool ok;
		const char *want;
	} cases[] = {
		{ "GPU-a,GPU-b,GPU-c,GPU-d", 0x5, true, "GPU-a,GPU-c" },
		{ "GPU-a,GPU-b,GPU-c,GPU-d", 0x8, true, "GPU-d" },
		{ "GPU-a,GPU-b", 0x4, false, "" },              /* index 2 not listed */
		{ "GPU-a,,GPU-c", 0x2, false, "" },             /* empty entry */
		{ NULL, 0x1, false, "" },
		{ "GPU-a", 0, false, "" },
	};
	struct cache_opts opts = { .gpu_resources = { "nvidia.com/gpu" }, .n_gpu_resources = 1 };

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char json[512], err[CACHE_ERR_LEN], buf[256];
		struct cache_node *n;
		cJSON *o;
		bool ok;

		if (cases[i].list)
			snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"n\",\"annotations\":"
				 "{\"troupe.io/gpu-uuids\":\"%s\"}}}", cases[i].list);
		else
			snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"n\"}}");
		o = cJSON_Parse(json);
		n = cache_node_parse(o, &opts, err, sizeof(err));
		assert_non_null(n);
		ok = cache_node_uuids(n, cases[i].mask, buf, sizeof(buf));
		if (ok != cases[i].ok || strcmp(buf, cases[i].want) != 0)
			fail_msg("case %zu: ok=%d buf=\"%s\"", i, ok, buf);
		cache_node_free(n);
		cJSON_Delete(o);
	}
}

/* ---- Pod-group member index -------------------------------------------------- */

struct brute_count {
	const char *group;
	bool any;                       /* count finished pods too */
	unsigned exist, bound;
};

/* cache_groups_foreach's callback: a bit per group a, b, c. */
static void list_group(const char *ns, const char *group, void *arg)
{
	unsigned *bits = arg;

	assert_string_equal(ns, "ml");
	assert_int_equal(strlen(group), 1);
	assert_true(group[0] >= 'a' && group[0] <= 'c');
	assert_false(*bits & (1u << (group[0] - 'a')));      /* once each */
	*bits |= 1u << (group[0] - 'a');
}

static void brute_one(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct brute_count *b = arg;

	(void)uid;
	if (p->reservation || strcmp(p->ns, "ml") || strcmp(p->group, b->group) ||
	    (!p->active && !b->any))
		return;
	b->exist++;
	b->bound += p->node[0] != '\0';
}

static struct cache_pod *group_pod(const char *uid, const char *group, const char *node,
				   const char *phase, bool deleting)
{
	char text[1024], labels[128] = "", err[CACHE_ERR_LEN] = "";
	struct cache_pod *p;
	cJSON *j;

	if (group)
		snprintf(labels, sizeof(labels), ",'labels':{'scheduling.x-k8s.io/pod-group':'%s'}",
			 group);
	snprintf(text, sizeof(text),
		 "{'kind':'Pod','metadata':{'name':'%s','namespace':'ml','uid':'%s'%s%s},"
		 "'spec':{%s%s%s'containers':[{'name':'main','resources':"
		 "{'limits':{'nvidia.com/gpu':'1'}}}]},'status':{'phase':'%s'}}",
		 uid, uid, labels, deleting ? ",'deletionTimestamp':'2024-01-01T00:00:00Z'" : "",
		 node ? "'nodeName':'" : "", node ? node : "", node ? "'," : "", phase);
	j = json_sq(text);
	p = cache_pod_parse(j, &OPTS, err, sizeof(err));
	if (!p)
		fail_msg("cache_pod_parse(%s): %s", uid, err);
	cJSON_Delete(j);
	return p;
}

/* Random pods joining, leaving and changing groups (apply, remember, delete,
 * assume/forget, a relist sweep, the remembered-pod expiry): after every step
 * the indexed counts and walks agree with a scan of every pod. */
static void test_cache_group_index_matches_a_full_scan(void **state)
{
	static const char *const groups[] = { "a", "b", "c" };
	struct cache *c = cache_new(&OPTS);
	unsigned seed = 11, checks = 0;

	(void)state;
	assert_non_null(c);
	add_node(c, "n0", 8, 8);
	add_node(c, "n1", 8, 8);
	for (unsigned step = 0; step < 3000; step++) {
		char uid[16];
		const char *group = rand_r(&seed) % 4 ? groups[rand_r(&seed) % 3] : NULL;
		unsigned op = (unsigned)rand_r(&seed) % 10;

		snprintf(uid, sizeof(uid), "p%u", (unsigned)rand_r(&seed) % 40);
		if (op < 4) {
			static const char *const phases[] = { "Pending", "Running", "Succeeded" };
			const char *node = rand_r(&seed) % 2 ? "n0" : NULL;

			cache_pod_apply(c, group_pod(uid, group, node,
						     phases[node ? 1 + rand_r(&seed) % 2 : 0],
						     rand_r(&seed) % 8 == 0));
		} else if (op < 6) {
			cache_pod_remember(c, group_pod(uid, group, NULL, "Pending", false));
		} else if (op < 7) {
			uint64_t dev = 1ULL << (rand_r(&seed) % 8);

			if (cache_pod_assume(c, uid, "n1", &dev) == 0 && rand_r(&seed) % 2)
				cache_pod_forget(c, uid);
		} else if (op < 9) {
			cache_pod_delete(c, uid);
		} else if (rand_r(&seed) % 2) {
			const char *const keep[] = { "p1", "p2", "p3", "p4", "p5", NULL };
			struct keep_set ks = { keep };

			cache__pod_sweep(c, keep_listed, &ks);
		} else {
			cache_pod_expire(c, UINT64_MAX, 0);     /* forgets remembered pods */
		}
		{
			struct cache_pod_info pi;

			/* cache_pod_known agrees with a full copy. */
			assert_int_equal(cache_pod_known(c, uid), cache_pod_get(c, uid, &pi) == 0);
		}
		for (unsigned g = 0; g < 3; g++) {
			struct brute_count b = { .group = groups[g] };
			unsigned exist, bound;

			cache_pod_foreach(c, brute_one, &b);
			cache_group_count(c, "ml", groups[g], &exist, &bound);
			if (exist != b.exist || bound != b.bound)
				fail_msg("step %u group %s: index %u/%u, scan %u/%u", step, groups[g],
					 exist, bound, b.exist, b.bound);
			checks += b.exist > 0;
		}
		{
			/* The groups listed are exactly those with a member known. */
			unsigned listed = 0, want = 0;

			cache_groups_foreach(c, list_group, &listed);
			for (unsigned g = 0; g < 3; g++) {
				struct brute_count b = { .group = groups[g], .any = true };

				cache_pod_foreach(c, brute_one, &b);
				want |= (b.exist > 0) << g;
			}
			if (listed != want)
				fail_msg("step %u: groups listed %#x, known %#x", step, listed, want);
		}
	}
	assert_true(checks > 1000);
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_node_uuids_by_index),
		cmocka_unit_test(test_cache_group_index_matches_a_full_scan),
		cmocka_unit_test(test_cache_node_parse_gpu_capacity_and_allocatable),
		cmocka_unit_test(test_cache_node_parse_picks_first_advertised_resource),
		cmocka_unit_test(test_cache_node_parse_cpu_and_memory_are_allocatable),
		cmocka_unit_test(test_cache_node_parse_ready_condition),
		cmocka_unit_test(test_cache_node_parse_unschedulable),
		cmocka_unit_test(test_cache_node_parse_labels_sorted_and_looked_up),
		cmocka_unit_test(test_cache_node_parse_taints),
		cmocka_unit_test(test_cache_node_parse_requires_name),
		cmocka_unit_test(test_cache_demand_compute_as_kubernetes_does),
		cmocka_unit_test(test_cache_pod_parse_identity),
		cmocka_unit_test(test_cache_pod_parse_quorum_keys),
		cmocka_unit_test(test_cache_pod_parse_requires_name),
		cmocka_unit_test(test_cache_pod_parse_phases),
		cmocka_unit_test(test_cache_pod_parse_deletion_timestamp),
		cmocka_unit_test(test_cache_pod_parse_gpu_ids_annotation),
		cmocka_unit_test(test_cache_pod_parse_bad_gpu_request_sets_demand_error),
		cmocka_unit_test(test_cache_devices_format_parse_round_trip),
		cmocka_unit_test(test_cache_devices_parse_rejects),
		cmocka_unit_test(test_cache_devices_format_short_buffer),
		cmocka_unit_test(test_cache_new_refuses_bad_opts),
		CACHE_TEST(test_cache_store_upsert_lookup_replace_delete),
		CACHE_TEST(test_cache_node_lookup_uses_length),
		cmocka_unit_test(test_cache_view_free_gpus_and_mask),
		CACHE_TEST(test_cache_node_foreach_visits_live_nodes),
		cmocka_unit_test(test_cache_nameidx_against_a_model),
		cmocka_unit_test(test_cache_nameidx_same_hash),
		CACHE_TEST(test_cache_changes_count_every_change),
		CACHE_TEST(test_cache_lookup_many_agrees_with_lookup),
		CACHE_TEST(test_cache_lookup_never_misses_a_staying_node),
		CACHE_TEST(test_cache_synced_flag),
		CACHE_TEST(test_cache_pod_apply_annotated_pod_holds_its_devices),
		CACHE_TEST(test_cache_pod_apply_unannotated_pod_counts_unattributed),
		cmocka_unit_test(test_cache_pod_apply_non_running_pods_hold_nothing),
		cmocka_unit_test(test_cache_pod_apply_finishing_releases),
		CACHE_TEST(test_cache_pod_delete_releases),
		CACHE_TEST(test_cache_pod_apply_duplicate_devices_count_unattributed),
		CACHE_TEST(test_cache_pod_apply_before_node_is_known),
		CACHE_TEST(test_cache_pod_apply_changes_before_node_is_known),
		CACHE_TEST(test_cache_node_delete_then_pods_release),
		CACHE_TEST(test_cache_pod_assume_takes_exactly_the_devices),
		CACHE_TEST(test_cache_pod_assume_again_on_same_node_is_already),
		CACHE_TEST(test_cache_pod_assume_elsewhere_is_exist),
		CACHE_TEST(test_cache_pod_assume_taken_devices_is_again),
		CACHE_TEST(test_cache_pod_assume_too_few_free_is_nospc),
		CACHE_TEST(test_cache_pod_assume_wrong_devices_is_inval),
		CACHE_TEST(test_cache_pod_assume_unknown_is_noent),
		CACHE_TEST(test_cache_pod_remember_keeps_what_is_known),
		CACHE_TEST(test_cache_pod_forget_releases),
		CACHE_TEST(test_cache_pod_assume_survives_stale_unbound_update),
		cmocka_unit_test(test_cache_pod_assume_confirmed_by_watch_keeps_devices),
		CACHE_TEST(test_cache_pod_bound_by_troupe_keeps_devices_on_later_events),
		CACHE_TEST(test_cache_pod_assume_overruled_by_watch),
		CACHE_TEST(test_cache_snapshot_load_cluster_small_json),
		CACHE_TEST(test_cache_snapshot_load_cluster_small_yaml),
		CACHE_TEST(test_cache_snapshot_load_multi_document_yaml),
		cmocka_unit_test(test_cache_snapshot_load_malformed_changes_nothing),
		CACHE_TEST(test_cache_snapshot_load_missing_file),
		cmocka_unit_test(test_cache_pod_assume_concurrent_never_double_books),
		cmocka_unit_test(test_cache_podgroup_parse_fields),
		cmocka_unit_test(test_cache_podgroup_parse_requires_name),
		CACHE_TEST(test_cache_podgroup_apply_get_replace_delete),
		CACHE_TEST(test_cache_node_pods_lists_pods_holding_gpus),
		CACHE_TEST(test_cache_node_pods_unknown_node_is_noent),
		cmocka_unit_test(test_cache_node_sweep_deletes_rejected_nodes),
		CACHE_TEST(test_cache_pod_sweep_deletes_rejected_api_pods_keeps_assumed),
		CACHE_TEST(test_cache_pod_foreach_visits_every_pod_once),
		cmocka_unit_test(test_cache_api_free_null),
		cmocka_unit_test(test_cache_api_from_url_schemes),
		API_TEST(test_cache_api_from_url_token_file),
		API_TEST(test_cache_api_refresh_token_rereads_the_file),
		API_TEST(test_cache_api_in_cluster_requires_service_variables),
		API_TEST(test_cache_api_in_cluster_reads_service_account),
		API_TEST(test_cache_api_in_cluster_trusts_service_account_ca),
		API_TEST(test_cache_api_in_cluster_missing_file_is_error),
		API_TEST(test_cache_api_from_kubeconfig_picks_context),
		API_TEST(test_cache_api_from_kubeconfig_refuses),
		API_TEST(test_cache_api_from_kubeconfig_missing_file),
		API_TEST(test_cache_api_from_kubeconfig_token_and_token_file),
		API_TEST(test_cache_api_from_kubeconfig_relative_path),
		API_TEST(test_cache_api_from_kubeconfig_relative_tls_files),
		API_TEST(test_cache_api_from_kubeconfig_inline_data),
		API_TEST(test_cache_api_from_kubeconfig_insecure_skip_tls_verify),
		cmocka_unit_test(test_cache_access_review_new_names_the_permission),
		cmocka_unit_test(test_cache_access_review_parse_answers),
		cmocka_unit_test(test_cache_status_message_reads_a_status),
		cmocka_unit_test(test_cache_permissions_are_the_shipped_cluster_role),
	};
	int ret;

	/* Skipped items and odd pods log warnings by design; keep output to failures. */
	log_set_level(LOG_ERROR);
	cache_api_global_init();
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	cache_api_global_cleanup();
	return ret;
}
