/* Unit tests for extender/: the wire codec, troupe's configuration, and the
 * four verbs called without HTTP on the example cluster.
 *
 * The example cluster (config/examples/cluster-small.json):
 *   gpu-a100-0  8 GPUs, devices 0-3 held by ml/resnet-0         -> 4 free
 *   gpu-a100-1  8 GPUs, its only pod Succeeded                  -> 8 free
 *   gpu-h100-0  8 GPUs, 2 held by a pod with unknown devices    -> 6 free
 *   gpu-h100-1  8 GPUs                                          -> 8 free
 *   gpu-v100-0  capacity 8, allocatable 6, 1 held (unattributed) -> 5 free
 *   gpu-l4-0    4 GPUs, cordoned
 *   gpu-t4-0    4 GPUs, Ready=Unknown
 *   cpu-0       no GPUs
 * plus two pending 8-GPU pods ml/llm-worker-0 and ml/llm-worker-1.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/util.h"
#include "common/yamljson.h"
#include "extender/codec.h"
#include "extender/config.h"
#include "extender/cycle.h"
#include "extender/verbs.h"
#include "placement/placement.h"

#define CLUSTER_SMALL TROUPE_SOURCE_ROOT "/config/examples/cluster-small.json"

/* The request shapes of kube-interfaces.md sections 2, 4 and 5. */
static const char doc_filter_full[] =
	"{\"Pod\": {\"metadata\": {\"name\": \"train-0\", \"namespace\": \"ml\", "
	"\"uid\": \"5b0e6c1a-1f3d-4a5e-9c11-0d2f8a7e4b10\", "
	"\"labels\": {\"scheduling.x-k8s.io/pod-group\": \"train\"}}, "
	"\"spec\": {\"schedulerName\": \"default-scheduler\", "
	"\"containers\": [{\"name\": \"worker\", \"image\": \"registry.example/trainer:1\", "
	"\"resources\": {\"limits\": {\"nvidia.com/gpu\": \"4\"}, "
	"\"requests\": {\"nvidia.com/gpu\": \"4\"}}}]}, \"status\": {\"phase\": \"Pending\"}}, "
	"\"Nodes\": {\"metadata\": {}, \"items\": ["
	"{\"metadata\": {\"name\": \"gpu-a\"}, "
	"\"status\": {\"allocatable\": {\"nvidia.com/gpu\": \"8\"}}}, "
	"{\"metadata\": {\"name\": \"gpu-b\"}, "
	"\"status\": {\"allocatable\": {\"nvidia.com/gpu\": \"8\"}}}]}, "
	"\"NodeNames\": null}";

static const char doc_filter_names[] =
	"{\"Pod\": {\"metadata\": {\"name\": \"train-0\", \"namespace\": \"ml\", "
	"\"uid\": \"5b0e6c1a-1f3d-4a5e-9c11-0d2f8a7e4b10\"}, "
	"\"spec\": {\"containers\": [{\"name\": \"worker\", "
	"\"resources\": {\"limits\": {\"nvidia.com/gpu\": \"4\"}}}]}}, "
	"\"Nodes\": null, \"NodeNames\": [\"gpu-a\", \"gpu-b\", \"gpu-c\"]}";

static const char doc_bind[] =
	"{\"PodName\": \"train-0\", \"PodNamespace\": \"ml\", "
	"\"PodUID\": \"5b0e6c1a-1f3d-4a5e-9c11-0d2f8a7e4b10\", \"Node\": \"gpu-a\"}";

static const char doc_preempt_meta[] =
	"{\"Pod\": {\"metadata\": {\"name\": \"train-0\", \"namespace\": \"ml\", "
	"\"uid\": \"5b0e6c1a-1f3d-4a5e-9c11-0d2f8a7e4b10\"}, \"spec\": {\"priority\": 1000}}, "
	"\"NodeNameToVictims\": null, "
	"\"NodeNameToMetaVictims\": {"
	"\"gpu-a\": {\"Pods\": [{\"UID\": \"0c7d9e2f-6a41-4b8e-a3b5-7f1e2d3c4b5a\"}], "
	"\"NumPDBViolations\": 0}, "
	"\"gpu-b\": {\"Pods\": [{\"UID\": \"9a8b7c6d-1e2f-4a3b-8c9d-0e1f2a3b4c5d\"}, "
	"{\"UID\": \"1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e\"}], \"NumPDBViolations\": 1}}}";

static const char *const cluster_nodes[] = {
	"gpu-a100-0", "gpu-a100-1", "gpu-h100-0", "gpu-h100-1", "gpu-v100-0",
	"gpu-l4-0", "gpu-t4-0", "cpu-0", NULL,
};

/* Every node of the cluster and one troupe has never heard of. */
static const char *const request_nodes[] = {
	"gpu-a100-0", "gpu-a100-1", "gpu-h100-0", "gpu-h100-1", "gpu-v100-0",
	"gpu-l4-0", "gpu-t4-0", "cpu-0", "ghost-0", NULL,
};

/* ---- Fixture: the example cluster behind an ext_service ---------------------- */

struct fx {
	struct ext_config cfg;
	struct cache *cache;
	struct ext_service svc;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char err[CACHE_ERR_LEN] = "";

	if (!f)
		return -1;
	ext_config_defaults(&f->cfg);
	f->cache = cache_new(&f->cfg.cache);
	if (!f->cache || cache_snapshot_load(f->cache, CLUSTER_SMALL, err, sizeof(err)) < 0) {
		print_error("cannot load %s: %s\n", CLUSTER_SMALL, err);
		cache_free(f->cache);
		free(f);
		return -1;
	}
	cache_set_synced(f->cache, true);
	f->svc.cache = f->cache;
	f->svc.cfg = &f->cfg;
	f->svc.score = placement_score_find("binpack");
	f->svc.source = "test";
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	cache_free(f->cache);
	free(f);
	return 0;
}

typedef void (*verb_fn)(const struct ext_service *svc, const char *body, size_t len,
			struct ext_reply *r);

/* Call <verb> and parse its reply, which must be one whole JSON document. */
static cJSON *call_len(verb_fn verb, struct fx *f, const char *body, size_t len,
		       unsigned *status)
{
	struct ext_reply r;
	const char *end = NULL;
	cJSON *j;

	ext_reply_init(&r);
	verb(&f->svc, body, len, &r);
	if (status)
		*status = r.status;
	if (strbuf_failed(&r.body) || !r.body.buf)
		fail_msg("empty or failed reply body (status %u)", r.status);
	j = cJSON_ParseWithLengthOpts(r.body.buf, r.body.len + 1, &end, 1);
	if (!j)
		fail_msg("reply is not one JSON document: %.300s", r.body.buf);
	ext_reply_fini(&r);
	return j;
}

static cJSON *call(verb_fn verb, struct fx *f, const char *body, unsigned *status)
{
	return call_len(verb, f, body, strlen(body), status);
}

static const cJSON *item(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* The reply's Error, which must be present and a string. */
static const char *error_of(const cJSON *reply)
{
	const cJSON *e = item(reply, "Error");

	if (!cJSON_IsString(e))
		fail_msg("reply has no string \"Error\"");
	return e->valuestring;
}

static void assert_contains(const char *s, const char *part)
{
	if (!s || !strstr(s, part))
		fail_msg("\"%s\" does not contain \"%s\"", s ? s : "(null)", part);
}

/* A reply that says "this request failed": 400, or 200 with a non-empty Error. */
static bool is_error_reply(unsigned status, const cJSON *reply)
{
	const cJSON *e = cJSON_IsObject(reply) ? item(reply, "Error") : NULL;

	if (status == 400)
		return cJSON_IsString(e) && e->valuestring[0];
	return status == 200 && cJSON_IsString(e) && e->valuestring[0];
}

/* bind as kube-scheduler's snapshot-mode caller sees it: answered at once. */
static void bind_sync(const struct ext_service *svc, const char *body, size_t len,
		      struct ext_reply *r)
{
	assert_true(ext_bind(svc, body, len, r, NULL));
}

static const verb_fn all_verbs[] = { ext_filter, ext_prioritize, bind_sync, ext_preempt };
static const char *const verb_names[] = { "filter", "prioritize", "bind", "preempt" };

/* ---- Request builders -------------------------------------------------------- */

/* Pod ml/<name> with uid "uid-<name>" and the given container resources. */
static cJSON *pod_with(const char *name, const char *resources)
{
	char buf[1024];
	cJSON *p;

	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"uid-%s\"},"
		 "\"spec\":{\"schedulerName\":\"default-scheduler\",\"containers\":[{\"name\":"
		 "\"worker\",\"resources\":%s}]},\"status\":{\"phase\":\"Pending\"}}",
		 name, name, resources);
	p = cJSON_Parse(buf);
	if (!p)
		fail_msg("test pod does not parse: %s", buf);
	return p;
}

static cJSON *gpu_pod(const char *name, unsigned gpus)
{
	char res[128];

	if (gpus == 0)
		return pod_with(name, "{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}");
	snprintf(res, sizeof(res), "{\"limits\":{\"nvidia.com/gpu\":\"%u\"}}", gpus);
	return pod_with(name, res);
}

/* ExtenderArgs in names mode (nodeCacheCapable: true). Takes <pod>. */
static char *names_args(cJSON *pod, const char *const *names)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *arr;
	char *s;

	cJSON_AddItemToObject(root, "Pod", pod);
	cJSON_AddNullToObject(root, "Nodes");
	arr = cJSON_AddArrayToObject(root, "NodeNames");
	for (; names && *names; names++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(*names));
	s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	assert_non_null(s);
	return s;
}

/* ExtenderArgs in full mode (nodeCacheCapable: false). Takes <pod> and <items>. */
static char *full_args(cJSON *pod, cJSON *items)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *nodes = cJSON_CreateObject();
	char *s;

	cJSON_AddItemToObject(root, "Pod", pod);
	cJSON_AddItemToObject(nodes, "metadata", cJSON_CreateObject());
	cJSON_AddItemToObject(nodes, "items", items);
	cJSON_AddItemToObject(root, "Nodes", nodes);
	cJSON_AddNullToObject(root, "NodeNames");
	s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	assert_non_null(s);
	return s;
}

/* A Node object as the scheduler's informer has it. <capacity> and
 * <allocatable> are GPU counts as strings, or NULL to leave them out. */
static cJSON *node_obj(const char *name, const char *capacity, const char *allocatable,
		       bool ready, bool cordoned)
{
	char buf[1024], cap[96] = "", alloc[96] = "";
	cJSON *n;

	if (capacity)
		snprintf(cap, sizeof(cap), ",\"nvidia.com/gpu\":\"%s\"", capacity);
	if (allocatable)
		snprintf(alloc, sizeof(alloc), ",\"nvidia.com/gpu\":\"%s\"", allocatable);
	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"kubernetes.io/hostname\":\"%s\"}},"
		 "\"spec\":{%s},\"status\":{\"capacity\":{\"cpu\":\"64\"%s},"
		 "\"allocatable\":{\"cpu\":\"64\"%s},\"conditions\":[{\"type\":\"Ready\","
		 "\"status\":\"%s\"}]}}",
		 name, name, cordoned ? "\"unschedulable\":true" : "", cap, alloc,
		 ready ? "True" : "False");
	n = cJSON_Parse(buf);
	if (!n)
		fail_msg("test node does not parse: %s", buf);
	return n;
}

static char *bind_args(const char *ns, const char *name, const char *uid, const char *node)
{
	cJSON *root = cJSON_CreateObject();
	char *s;

	cJSON_AddStringToObject(root, "PodName", name);
	cJSON_AddStringToObject(root, "PodNamespace", ns);
	cJSON_AddStringToObject(root, "PodUID", uid);
	cJSON_AddStringToObject(root, "Node", node);
	s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	assert_non_null(s);
	return s;
}

/* Filter pod ml/<name> (<gpus> GPUs) over <nodes>; the reply must not be an error. */
static cJSON *filter_names(struct fx *f, const char *name, unsigned gpus,
			   const char *const *nodes)
{
	char *body = names_args(gpu_pod(name, gpus), nodes);
	unsigned status = 0;
	cJSON *j = call(ext_filter, f, body, &status);

	free(body);
	assert_int_equal(status, 200);
	assert_string_equal(error_of(j), "");
	return j;
}

/* Bind pod ml/<name> (uid "uid-<name>") to <node>; return the reply's Error. The
 * caller frees *reply. */
static const char *bind_pod(struct fx *f, const char *name, const char *node, cJSON **reply)
{
	char uid[300];
	char *body;
	unsigned status = 0;

	snprintf(uid, sizeof(uid), "uid-%s", name);
	body = bind_args("ml", name, uid, node);
	*reply = call(bind_sync, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	return error_of(*reply);
}

/* Filter then bind, expecting both to succeed. */
static void place(struct fx *f, const char *name, unsigned gpus, const char *node)
{
	const char *const one[] = { node, NULL };
	cJSON *j = filter_names(f, name, gpus, one);
	cJSON *b;

	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 1);
	cJSON_Delete(j);
	assert_string_equal(bind_pod(f, name, node, &b), "");
	cJSON_Delete(b);
}

static bool names_has(const cJSON *reply, const char *name)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, item(reply, "NodeNames"))
		if (cJSON_IsString(it) && strcmp(it->valuestring, name) == 0)
			return true;
	return false;
}

/* ---- Cluster state, for "nothing changed" and "never over-committed" --------- */

struct node_usage {
	char name[64];
	uint64_t used;
	uint32_t unattributed;
	uint32_t allocatable;
};

struct cluster_state {
	struct cache_stats stats;
	size_t n;
	struct node_usage nodes[32];
};

static bool collect_usage(const struct cache_node_view *v, void *arg)
{
	struct cluster_state *s = arg;

	if (s->n < sizeof(s->nodes) / sizeof(s->nodes[0])) {
		struct node_usage *u = &s->nodes[s->n++];

		snprintf(u->name, sizeof(u->name), "%s", v->node->name);
		u->used = v->used;
		u->unattributed = v->unattributed;
		u->allocatable = v->node->gpu_allocatable;
	}
	return true;
}

static int usage_cmp(const void *a, const void *b)
{
	return strcmp(((const struct node_usage *)a)->name, ((const struct node_usage *)b)->name);
}

static void state_take(struct fx *f, struct cluster_state *s)
{
	memset(s, 0, sizeof(*s));
	cache_get_stats(f->cache, &s->stats);
	cache_read_begin(f->cache);
	cache_node_foreach(f->cache, collect_usage, s);
	cache_read_end(f->cache);
	qsort(s->nodes, s->n, sizeof(s->nodes[0]), usage_cmp);
}

/* Usage and holdings equal; with <pods>, the number of known pods too. */
static void assert_state_same(const struct cluster_state *a, const struct cluster_state *b,
			      bool pods, const char *what)
{
	if (a->stats.nodes != b->stats.nodes || a->stats.pods_holding != b->stats.pods_holding ||
	    a->stats.gpus_allocatable != b->stats.gpus_allocatable ||
	    a->stats.gpus_held != b->stats.gpus_held || (pods && a->stats.pods != b->stats.pods))
		fail_msg("%s: cache stats changed (nodes %zu->%zu, pods %zu->%zu, "
			 "holding %zu->%zu, held %llu->%llu)", what, a->stats.nodes,
			 b->stats.nodes, a->stats.pods, b->stats.pods, a->stats.pods_holding,
			 b->stats.pods_holding,
			 (unsigned long long)a->stats.gpus_held,
			 (unsigned long long)b->stats.gpus_held);
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->nodes[i].name, b->nodes[i].name) != 0 ||
		    a->nodes[i].used != b->nodes[i].used ||
		    a->nodes[i].unattributed != b->nodes[i].unattributed)
			fail_msg("%s: usage of node %s changed (%#llx+%u -> %#llx+%u)", what,
				 a->nodes[i].name, (unsigned long long)a->nodes[i].used,
				 a->nodes[i].unattributed, (unsigned long long)b->nodes[i].used,
				 b->nodes[i].unattributed);
}

struct commit_check {
	unsigned over;
	char last[64];
};

static bool check_commit(const struct cache_node_view *v, void *arg)
{
	struct commit_check *c = arg;
	uint64_t cap = v->node->gpu_capacity >= 64 ? ~0ULL : (1ULL << v->node->gpu_capacity) - 1;

	if ((uint32_t)__builtin_popcountll(v->used) + v->unattributed > v->node->gpu_allocatable ||
	    (v->used & ~cap)) {
		c->over++;
		snprintf(c->last, sizeof(c->last), "%s", v->node->name);
	}
	return true;
}

static void assert_never_overcommitted(struct fx *f, const char *when)
{
	struct commit_check c = { 0, "" };

	cache_read_begin(f->cache);
	cache_node_foreach(f->cache, check_commit, &c);
	cache_read_end(f->cache);
	if (c.over)
		fail_msg("%s: %u nodes over-committed, e.g. %s", when, c.over, c.last);
}

static uint32_t free_on(struct fx *f, const char *node)
{
	struct cache_node_view v;
	uint32_t n;

	cache_read_begin(f->cache);
	if (!cache_node_lookup(f->cache, node, strlen(node), &v)) {
		cache_read_end(f->cache);
		fail_msg("node %s is not in the cache", node);
	}
	n = cache_view_free_gpus(&v);
	cache_read_end(f->cache);
	return n;
}

/* Pods <uids> were bound by the test since <initial>: on every node, no device
 * is held twice, each pod holds exactly its demand, and the node's usage mask
 * is what it was plus the devices those pods hold. */
static void assert_devices_exclusive(struct fx *f, const struct cluster_state *initial,
				     const char (*uids)[64], size_t n)
{
	struct cluster_state now;
	size_t bound = 0;

	state_take(f, &now);
	assert_int_equal(now.n, initial->n);
	for (size_t i = 0; i < now.n; i++) {
		uint64_t seen = initial->nodes[i].used;

		assert_string_equal(now.nodes[i].name, initial->nodes[i].name);
		for (size_t k = 0; k < n; k++) {
			struct cache_pod_info info;

			assert_int_equal(cache_pod_get(f->cache, uids[k], &info), 0);
			if (strcmp(info.node, now.nodes[i].name) != 0)
				continue;
			if (info.devices & seen)
				fail_msg("node %s: pod %s holds devices %#llx, some already "
					 "held (%#llx)", info.node, uids[k],
					 (unsigned long long)info.devices,
					 (unsigned long long)seen);
			if ((uint32_t)__builtin_popcountll(info.devices) != info.demand.gpus)
				fail_msg("pod %s holds %d devices for %u GPUs", uids[k],
					 __builtin_popcountll(info.devices), info.demand.gpus);
			seen |= info.devices;
			bound++;
		}
		if (seen != now.nodes[i].used)
			fail_msg("node %s: usage %#llx, holdings %#llx", now.nodes[i].name,
				 (unsigned long long)now.nodes[i].used, (unsigned long long)seen);
	}
	assert_int_equal(bound, n);
}

/* ============================================================================
 * Codec
 * ========================================================================== */

static void test_ext_args_decode_names_mode_request(void **state)
{
	struct ext_args a;
	char err[256] = "";

	(void)state;
	assert_int_equal(ext_args_decode(doc_filter_names, strlen(doc_filter_names), &a, err,
					 sizeof(err)), 0);
	assert_false(a.full_nodes);
	assert_int_equal(a.n_nodes, 3);
	assert_null(a.node_items);
	assert_non_null(a.names);
	assert_string_equal(a.names[2].s, "gpu-c");
	assert_int_equal(a.names[2].len, 5);
	assert_true(cJSON_IsObject(a.pod));
	assert_string_equal(item(item(a.pod, "metadata"), "name")->valuestring, "train-0");
	ext_args_fini(&a);
}

/* NodeNames is read straight from the body when it is a plain list of names
 * at the top level (the fast path). Each body here is decoded twice: as is, and
 * with a space before the colon, which only the general (cJSON) path reads;
 * both must give the same verdict, names and pod. */
static void test_ext_args_decode_names_fast_path_matches_cjson(void **state)
{
	static const char *const bodies[] = {
		"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"Nodes\":null,\"NodeNames\":[\"a\",\"b-1\",\"c.d\"]}",
		"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNames\":[]}",
		"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNames\": [ \"a\" , \"b\" ] }",
		"{\"NodeNames\":[\"x\"],\"Pod\":{\"metadata\":{\"name\":\"p\"}}}",
		/* escaped, non-ASCII, empty and non-string entries: general path */
		"{\"Pod\":{},\"NodeNames\":[\"a\\u0062\",\"b\"]}",
		"{\"Pod\":{},\"NodeNames\":[\"\xc3\xa9t\xc3\xa9\"]}",
		"{\"Pod\":{},\"NodeNames\":[\"a\",\"\"]}",
		"{\"Pod\":{},\"NodeNames\":[\"a\",7]}",
		"{\"Pod\":{},\"NodeNames\":[\"a\",]}",
		"{\"Pod\":{},\"NodeNames\":[\"a\"}",
		/* the key inside a string or a nested object is not the top level */
		"{\"Pod\":{\"metadata\":{\"annotations\":{\"x\":\"\\\"NodeNames\\\":[\\\"evil\\\"]\"}}},"
		"\"NodeNames\":[\"real\"]}",
		"{\"Pod\":{\"spec\":{\"NodeNames\":[\"inner\"]}},\"NodeNames\":[\"outer\"]}",
		"{\"Pod\":{\"spec\":{\"NodeNames\":[\"inner\"]}},\"Nodes\":{\"items\":[]}}",
		/* malformed elsewhere, names fine */
		"{\"Pod\":{\"metadata\":},\"NodeNames\":[\"a\"]}",
		"{\"Pod\":{},\"NodeNames\":[\"a\"]} trailing",
		"{\"Pod\":{},\"NodeNames\":[\"a\"],\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"z\"}}]}}",
		"{\"Pod\":{},\"NodeNames\":[\"a\"],\"NodeNames\":[\"b\"]}",
		"{\"Pod\":\"nope\",\"NodeNames\":[\"a\"]}",
	};
	unsigned fast_ok = 0;

	(void)state;
	for (size_t b = 0; b < ARRAY_SIZE(bodies); b++) {
		char slow[1024], *k;
		struct ext_args fa, sa;
		char ferr[256] = "", serr[256] = "";
		int fr, sr;

		snprintf(slow, sizeof(slow), "%s", bodies[b]);
		/* "NodeNames": -> "NodeNames" : (the first top-level-looking one) */
		k = strstr(slow, "\"NodeNames\":");
		while (k) {
			memmove(k + 12, k + 11, strlen(k + 11) + 1);
			k[11] = ' ';
			k = strstr(k + 13, "\"NodeNames\":");
		}
		fr = ext_args_decode(bodies[b], strlen(bodies[b]), &fa, ferr, sizeof(ferr));
		sr = ext_args_decode(slow, strlen(slow), &sa, serr, sizeof(serr));
		if (fr != sr)
			fail_msg("body %zu: fast %d (%s), cJSON %d (%s)", b, fr, ferr, sr, serr);
		assert_null(sa.name_bytes);     /* the spaced body took the cJSON path */
		if (fr == 0) {
			assert_int_equal(fa.full_nodes, sa.full_nodes);
			assert_int_equal(fa.n_nodes, sa.n_nodes);
			assert_int_equal(fa.names == NULL, sa.names == NULL);
			for (size_t i = 0; fa.names && i < fa.n_nodes; i++) {
				assert_string_equal(fa.names[i].s, sa.names[i].s);
				assert_int_equal(fa.names[i].len, sa.names[i].len);
				assert_int_equal(strlen(fa.names[i].s), fa.names[i].len);
			}
			assert_int_equal(cJSON_IsObject(fa.pod), cJSON_IsObject(sa.pod));
			fast_ok += fa.name_bytes != NULL;
		} else {
			/* The same message; byte offsets differ by the added space. */
			for (char *e = ferr; *e; e++)
				if (*e >= '0' && *e <= '9')
					*e = '#';
			for (char *e = serr; *e; e++)
				if (*e >= '0' && *e <= '9')
					*e = '#';
			assert_string_equal(ferr, serr);
		}
		ext_args_fini(&fa);
		ext_args_fini(&sa);
	}
	assert_true(fast_ok >= 5);      /* the fast path did run */
}

/* NodeNames before a large Pod: the names and the pod decode as sent, and the
 * names keep only the list's bytes (a cycle entry may hold them long after). */
static void test_ext_args_decode_names_before_a_large_pod(void **state)
{
	char *body = malloc(20000), err[256] = "";
	struct ext_args a;
	const cJSON *ann;
	size_t at;

	(void)state;
	assert_non_null(body);
	at = (size_t)sprintf(body, "{\"NodeNames\":[\"n-1\",\"n-2\",\"n-3\"],\"Pod\":{\"metadata\":"
			      "{\"name\":\"p\",\"annotations\":{\"big\":\"");
	memset(body + at, 'x', 12000);
	at += 12000;
	sprintf(body + at, "\"}}}}");
	assert_int_equal(ext_args_decode(body, strlen(body), &a, err, sizeof(err)), 0);
	assert_non_null(a.name_bytes);  /* the fast path */
	assert_int_equal(a.n_nodes, 3);
	assert_string_equal(a.names[0].s, "n-1");
	assert_string_equal(a.names[2].s, "n-3");
	assert_int_equal(a.names[2].len, 3);
	ann = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a.pod, "metadata"),
						 "annotations"), "big");
	assert_true(cJSON_IsString(ann));
	assert_int_equal(strlen(ann->valuestring), 12000);
	/* The names live in a copy of the list only, not of the pod after it. */
	assert_true(malloc_usable_size(a.name_bytes) < 1024);
	ext_args_fini(&a);
	free(body);
}

/* Full mode: each item's text is found in the body exactly (so a passing node
 * is echoed as sent): it parses to the very object cJSON read, whatever the
 * spacing, escapes, nesting or numbers; when the body is odd the texts are left
 * out (NULL) and cJSON prints the node instead. */
static void test_ext_args_decode_finds_each_full_node_text(void **state)
{
	static const char *const bodies[] = {
		"{\"Pod\":{},\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]},\"NodeNames\":null}",
		"{ \"Pod\" : {\"x\":\"\\\"Nodes\\\":{\\\"items\\\":[1]}\"} ,\n \"Nodes\" : { \"metadata\":{}, \"items\" : [\n"
		"  {\"metadata\":{\"name\":\"q\\\"uote\",\"labels\":{\"k\":\"v]}\"}},\"status\":{\"n\":[1,2,[3]],\"x\":-1.5e3}} ,\n"
		"  {\"metadata\":{\"name\":\"z\"},\"spec\":{\"unschedulable\":true},\"v\":null} ] } }",
		"{\"Pod\":{},\"Nodes\":{\"items\":[]}}",
		"{\"Pod\":{},\"Nodes\":{\"it\\u0065ms\":[{\"metadata\":{\"name\":\"e\"}}]}}",
	};
	unsigned found = 0;

	(void)state;
	for (size_t b = 0; b < ARRAY_SIZE(bodies); b++) {
		struct ext_args a;
		char err[256] = "";
		const cJSON *it;
		size_t i = 0;

		assert_int_equal(ext_args_decode(bodies[b], strlen(bodies[b]), &a, err, sizeof(err)),
				 0);
		assert_true(a.full_nodes);
		assert_null(a.item_text);       /* decode alone does not look for them */
		ext_args_find_item_texts(&a, bodies[b], strlen(bodies[b]));
		if (!a.item_text) {
			ext_args_fini(&a);
			continue;
		}
		cJSON_ArrayForEach(it, a.node_items) {
			cJSON *t = cJSON_ParseWithLength(a.item_text[i].s, a.item_text[i].len);

			if (!t || !cJSON_Compare(t, it, true))
				fail_msg("body %zu item %zu: text %.*s", b, i, (int)a.item_text[i].len,
					 a.item_text[i].s);
			cJSON_Delete(t);
			i++;
			found++;
		}
		ext_args_fini(&a);
	}
	assert_int_equal(found, 4);
}

static void test_ext_args_decode_full_mode_request(void **state)
{
	struct ext_args a;
	char err[256] = "";

	(void)state;
	assert_int_equal(ext_args_decode(doc_filter_full, strlen(doc_filter_full), &a, err,
					 sizeof(err)), 0);
	assert_true(a.full_nodes);
	assert_int_equal(a.n_nodes, 2);
	assert_null(a.names);
	assert_true(cJSON_IsArray(a.node_items));
	assert_string_equal(item(item(cJSON_GetArrayItem(a.node_items, 1), "metadata"),
				 "name")->valuestring, "gpu-b");
	assert_string_equal(item(item(a.pod, "metadata"), "uid")->valuestring,
			    "5b0e6c1a-1f3d-4a5e-9c11-0d2f8a7e4b10");
	ext_args_fini(&a);
}

/* Requests that carry no nodes: zero nodes, whichever mode. */
static void test_ext_args_decode_no_nodes(void **state)
{
	static const char *const bodies[] = {
		"{\"Pod\":{},\"Nodes\":null,\"NodeNames\":null}",
		"{\"Pod\":{}}",
		"{\"Pod\":{},\"Nodes\":null,\"NodeNames\":[]}",
		"{\"Pod\":{},\"Nodes\":{\"metadata\":{},\"items\":[]},\"NodeNames\":null}",
		"{\"Pod\":{},\"Nodes\":{\"metadata\":{},\"items\":null},\"NodeNames\":null}",
		/* Keys are Go field names, matched exactly: these are not node lists. */
		"{\"Pod\":{},\"nodeNames\":[\"gpu-a\"],\"nodes\":{\"items\":[{}]}}",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		struct ext_args a;
		char err[256] = "";
		int ret = ext_args_decode(bodies[i], strlen(bodies[i]), &a, err, sizeof(err));

		if (ret != 0 || a.n_nodes != 0)
			fail_msg("%s: ret %d, %zu nodes (%s)", bodies[i], ret, a.n_nodes, err);
		ext_args_fini(&a);
	}
}

struct decode_error_case {
	const char *body;
	size_t len;                     /* 0: strlen(body) */
	const char *message;            /* part of the error message */
};

static const struct decode_error_case args_errors[] = {
	{ "", 0, "empty request body" },
	{ "[]", 0, "must be a JSON object" },
	{ "null", 0, "must be a JSON object" },
	{ "42", 0, "must be a JSON object" },
	{ "\"Pod\"", 0, "must be a JSON object" },
	{ "{", 0, "malformed JSON" },
	{ "   ", 0, "malformed JSON" },
	{ "{\"Pod\":{}", 0, "malformed JSON" },
	{ "{\"Pod\":{},\"NodeNames\":[\"gpu-a\"", 0, "malformed JSON" },
	{ "{\"Pod\":{},\"NodeNames\":[\"gpu-a\",]}", 0, "malformed JSON" },
	{ "{'Pod':{}}", 0, "malformed JSON" },
	/* Truncated by the length, not by the text. */
	{ "{\"Pod\":{}}", 8, "malformed JSON" },
	{ "{\"NodeNames\":[\"gpu-a\"]}", 0, "\"Pod\" must be a pod object" },
	{ "{\"Pod\":null,\"NodeNames\":[\"gpu-a\"]}", 0, "\"Pod\" must be a pod object" },
	{ "{\"Pod\":\"train-0\"}", 0, "\"Pod\" must be a pod object" },
	{ "{\"Pod\":[{}]}", 0, "\"Pod\" must be a pod object" },
	{ "{\"pod\":{}}", 0, "\"Pod\" must be a pod object" },
	{ "{\"Pod\":{},\"NodeNames\":\"gpu-a\"}", 0, "\"NodeNames\" must be a list" },
	{ "{\"Pod\":{},\"NodeNames\":{\"gpu-a\":true}}", 0, "\"NodeNames\" must be a list" },
	{ "{\"Pod\":{},\"NodeNames\":7}", 0, "\"NodeNames\" must be a list" },
	{ "{\"Pod\":{},\"NodeNames\":[\"gpu-a\",1]}", 0, "\"NodeNames\" entries" },
	{ "{\"Pod\":{},\"NodeNames\":[null]}", 0, "\"NodeNames\" entries" },
	{ "{\"Pod\":{},\"NodeNames\":[[\"gpu-a\"]]}", 0, "\"NodeNames\" entries" },
	{ "{\"Pod\":{},\"NodeNames\":[\"\"]}", 0, "\"NodeNames\" entries" },
	{ "{\"Pod\":{},\"Nodes\":[]}", 0, "\"Nodes\" must be a NodeList" },
	{ "{\"Pod\":{},\"Nodes\":\"gpu-a\"}", 0, "\"Nodes\" must be a NodeList" },
	{ "{\"Pod\":{},\"Nodes\":{\"items\":{}}}", 0, "\"Nodes\" must be a NodeList" },
	{ "{\"Pod\":{},\"Nodes\":{\"items\":\"gpu-a\"}}", 0, "\"Nodes\" must be a NodeList" },
	{ "{\"Pod\":{},\"Nodes\":{\"items\":[\"gpu-a\"]}}", 0, "\"Nodes.items\" entries" },
	{ "{\"Pod\":{},\"Nodes\":{\"items\":[{},1]}}", 0, "\"Nodes.items\" entries" },
	{ "{\"Pod\":{},\"Nodes\":{\"items\":[null]}}", 0, "\"Nodes.items\" entries" },
};

static void test_ext_args_decode_rejects_with_a_reason(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(args_errors) / sizeof(args_errors[0]); i++) {
		const struct decode_error_case *c = &args_errors[i];
		size_t len = c->len ? c->len : strlen(c->body);
		char *copy = malloc(len ? len : 1);
		struct ext_args a;
		char err[256] = "";
		int ret;

		/* An exact-size buffer, no terminator: the decoder must honour len. */
		memcpy(copy, c->body, len);
		ret = ext_args_decode(copy, len, &a, err, sizeof(err));
		if (ret != -EINVAL || !strstr(err, c->message))
			fail_msg("%.*s: ret %d, error \"%s\"; want -EINVAL and \"%s\"", (int)len,
				 c->body, ret, err, c->message);
		ext_args_fini(&a);
		free(copy);
	}
}

static void test_ext_bind_args_decode_reads_every_field(void **state)
{
	struct ext_bind_args b;
	char err[256] = "";

	(void)state;
	assert_int_equal(ext_bind_args_decode(doc_bind, strlen(doc_bind), &b, err, sizeof(err)),
			 0);
	assert_string_equal(b.pod_name, "train-0");
	assert_string_equal(b.pod_namespace, "ml");
	assert_string_equal(b.pod_uid, "5b0e6c1a-1f3d-4a5e-9c11-0d2f8a7e4b10");
	assert_string_equal(b.node, "gpu-a");
	ext_bind_args_fini(&b);
}

/* Absent or null fields read as empty strings (the verb then refuses them). */
static void test_ext_bind_args_decode_missing_fields_are_empty(void **state)
{
	static const char body[] = "{\"PodName\":\"train-0\",\"PodNamespace\":null}";
	struct ext_bind_args b;
	char err[256] = "";

	(void)state;
	assert_int_equal(ext_bind_args_decode(body, strlen(body), &b, err, sizeof(err)), 0);
	assert_string_equal(b.pod_name, "train-0");
	assert_string_equal(b.pod_namespace, "");
	assert_string_equal(b.pod_uid, "");
	assert_string_equal(b.node, "");
	ext_bind_args_fini(&b);
}

static const struct decode_error_case bind_errors[] = {
	{ "", 0, "empty request body" },
	{ "[]", 0, "must be a JSON object" },
	{ "{\"PodName\":\"train-0\"", 0, "malformed JSON" },
	{ "{\"PodName\":1,\"PodNamespace\":\"ml\",\"PodUID\":\"u\",\"Node\":\"gpu-a\"}", 0,
	  "must be strings" },
	{ "{\"PodName\":\"p\",\"PodNamespace\":true,\"PodUID\":\"u\",\"Node\":\"gpu-a\"}", 0,
	  "must be strings" },
	{ "{\"PodName\":\"p\",\"PodNamespace\":\"ml\",\"PodUID\":{},\"Node\":\"gpu-a\"}", 0,
	  "must be strings" },
	{ "{\"PodName\":\"p\",\"PodNamespace\":\"ml\",\"PodUID\":\"u\",\"Node\":[\"gpu-a\"]}", 0,
	  "must be strings" },
};

static void test_ext_bind_args_decode_rejects_with_a_reason(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bind_errors) / sizeof(bind_errors[0]); i++) {
		const struct decode_error_case *c = &bind_errors[i];
		size_t len = strlen(c->body);
		struct ext_bind_args b;
		char err[256] = "";
		int ret = ext_bind_args_decode(c->body, len, &b, err, sizeof(err));

		if (ret != -EINVAL || !strstr(err, c->message))
			fail_msg("%s: ret %d, error \"%s\"; want -EINVAL and \"%s\"", c->body, ret,
				 err, c->message);
		ext_bind_args_fini(&b);
	}
}

static void test_ext_preempt_decode_meta_full_and_none(void **state)
{
	static const char full[] =
		"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToMetaVictims\":null,"
		"\"NodeNameToVictims\":{\"gpu-a\":{\"Pods\":[{\"metadata\":{\"uid\":\"u1\"}}],"
		"\"NumPDBViolations\":0}}}";
	static const char none[] = "{\"Pod\":{},\"NodeNameToVictims\":null,"
				   "\"NodeNameToMetaVictims\":null}";
	const cJSON *pod, *meta, *fullv;
	cJSON *root = NULL;
	char err[256] = "";

	(void)state;
	assert_int_equal(ext_preempt_decode(doc_preempt_meta, strlen(doc_preempt_meta), &root,
					    &pod, &meta, &fullv, err, sizeof(err)), 0);
	assert_true(cJSON_IsObject(pod));
	assert_non_null(meta);
	assert_null(fullv);
	assert_int_equal(cJSON_GetArraySize(meta), 2);
	cJSON_Delete(root);

	assert_int_equal(ext_preempt_decode(full, strlen(full), &root, &pod, &meta, &fullv, err,
					    sizeof(err)), 0);
	assert_null(meta);
	assert_non_null(fullv);
	cJSON_Delete(root);

	assert_int_equal(ext_preempt_decode(none, strlen(none), &root, &pod, &meta, &fullv, err,
					    sizeof(err)), 0);
	assert_null(meta);
	assert_null(fullv);
	cJSON_Delete(root);
}

static void test_ext_preempt_decode_rejects_with_a_reason(void **state)
{
	static const struct decode_error_case cases[] = {
		{ "", 0, "empty request body" },
		{ "[1]", 0, "must be a JSON object" },
		{ "{\"NodeNameToMetaVictims\":{", 0, "malformed JSON" },
		{ "{\"NodeNameToMetaVictims\":[]}", 0, "victim maps must be objects" },
		{ "{\"NodeNameToVictims\":\"gpu-a\"}", 0, "victim maps must be objects" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const cJSON *pod, *meta, *fullv;
		cJSON *root = NULL;
		char err[256] = "";
		int ret = ext_preempt_decode(cases[i].body, strlen(cases[i].body), &root, &pod,
					     &meta, &fullv, err, sizeof(err));

		if (ret != -EINVAL || !strstr(err, cases[i].message))
			fail_msg("%s: ret %d, error \"%s\"", cases[i].body, ret, err);
		cJSON_Delete(root);
	}
}

/* The reply's top-level keys are exactly <keys> (NULL-terminated), each once. */
static void assert_keys_exactly(const cJSON *obj, const char *const *keys)
{
	const cJSON *it;
	size_t n = 0, want = 0;

	for (const char *const *k = keys; *k; k++, want++)
		if (!cJSON_GetObjectItemCaseSensitive(obj, *k))
			fail_msg("key \"%s\" missing", *k);
	cJSON_ArrayForEach(it, obj) {
		bool known = false;

		for (const char *const *k = keys; *k; k++)
			known |= strcmp(it->string, *k) == 0;
		if (!known)
			fail_msg("unexpected key \"%s\"", it->string);
		n++;
	}
	assert_int_equal(n, want);
}

static const char *const filter_result_keys[] = {
	"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error", NULL,
};

static cJSON *encode_and_parse(const struct ext_filter_out *out, bool full)
{
	struct strbuf sb = STRBUF_INIT;
	cJSON *j;

	ext_filter_out_encode(out, full, &sb);
	assert_false(strbuf_failed(&sb));
	j = cJSON_ParseWithLengthOpts(sb.buf, sb.len + 1, NULL, 1);
	if (!j)
		fail_msg("encoded filter result is not JSON: %s", sb.buf);
	strbuf_fini(&sb);
	return j;
}

static void test_ext_filter_out_encode_names_mode_round_trips(void **state)
{
	static const char weird[] = "gpu-\"q\"\\-\xc3\xbc-\x01";
	struct ext_filter_out out;
	cJSON *j;
	const cJSON *names;

	(void)state;
	ext_filter_out_init(&out);
	ext_filter_out_pass_name(&out, "gpu-a", 5);
	ext_filter_out_pass_name(&out, weird, strlen(weird));
	ext_filter_out_fail(&out, false, "gpu-b", 5, "troupe: 2 of 8 nvidia.com/gpu free, "
			    "pod needs 4");
	ext_filter_out_fail(&out, false, "gpu-\"c\"", 7, "reason with \"quotes\"\nand a newline");
	ext_filter_out_fail(&out, true, "cpu-0", 5, "troupe: node has no nvidia.com/gpu");
	j = encode_and_parse(&out, false);
	ext_filter_out_fini(&out);

	assert_keys_exactly(j, filter_result_keys);
	assert_true(cJSON_IsNull(item(j, "Nodes")));
	names = item(j, "NodeNames");
	assert_true(cJSON_IsArray(names));
	assert_int_equal(cJSON_GetArraySize(names), 2);
	assert_string_equal(cJSON_GetArrayItem(names, 0)->valuestring, "gpu-a");
	assert_string_equal(cJSON_GetArrayItem(names, 1)->valuestring, weird);
	assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")), 2);
	assert_string_equal(item(item(j, "FailedNodes"), "gpu-b")->valuestring,
			    "troupe: 2 of 8 nvidia.com/gpu free, pod needs 4");
	assert_string_equal(item(item(j, "FailedNodes"), "gpu-\"c\"")->valuestring,
			    "reason with \"quotes\"\nand a newline");
	assert_int_equal(cJSON_GetArraySize(item(j, "FailedAndUnresolvableNodes")), 1);
	assert_string_equal(item(item(j, "FailedAndUnresolvableNodes"), "cpu-0")->valuestring,
			    "troupe: node has no nvidia.com/gpu");
	assert_string_equal(error_of(j), "");
	cJSON_Delete(j);
}

/* Nothing passes: NodeNames is [] (null would mean an error to some readers and
 * "zero nodes" to kube-scheduler; an array is unambiguous). */
static void test_ext_filter_out_encode_none_pass_is_empty_array(void **state)
{
	struct ext_filter_out out;
	cJSON *j;

	(void)state;
	ext_filter_out_init(&out);
	j = encode_and_parse(&out, false);
	assert_keys_exactly(j, filter_result_keys);
	assert_true(cJSON_IsArray(item(j, "NodeNames")));
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	assert_true(cJSON_IsObject(item(j, "FailedNodes")));
	assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")), 0);
	assert_true(cJSON_IsObject(item(j, "FailedAndUnresolvableNodes")));
	assert_string_equal(error_of(j), "");
	cJSON_Delete(j);

	ext_filter_out_fail(&out, false, "gpu-a", 5, "troupe: node is not Ready");
	j = encode_and_parse(&out, false);
	assert_true(cJSON_IsArray(item(j, "NodeNames")));
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	cJSON_Delete(j);
	ext_filter_out_fini(&out);
}

static void test_ext_filter_out_encode_full_mode_echoes_objects(void **state)
{
	cJSON *a = node_obj("gpu-a", "8", "8", true, false);
	cJSON *b = node_obj("gpu-\\\"b\\\"", NULL, "2", false, true);
	struct ext_filter_out out;
	const cJSON *nodes, *items;
	cJSON *j;

	(void)state;
	ext_filter_out_init(&out);
	ext_filter_out_pass_object(&out, a, NULL);
	ext_filter_out_pass_object(&out, b, NULL);
	j = encode_and_parse(&out, true);
	ext_filter_out_fini(&out);

	assert_keys_exactly(j, filter_result_keys);
	assert_true(cJSON_IsNull(item(j, "NodeNames")));
	nodes = item(j, "Nodes");
	assert_true(cJSON_IsObject(nodes));
	items = item(nodes, "items");
	assert_int_equal(cJSON_GetArraySize(items), 2);
	assert_true(cJSON_Compare(cJSON_GetArrayItem(items, 0), a, true));
	assert_true(cJSON_Compare(cJSON_GetArrayItem(items, 1), b, true));
	cJSON_Delete(j);

	/* None pass: an empty item list, not a missing one. */
	ext_filter_out_init(&out);
	j = encode_and_parse(&out, true);
	ext_filter_out_fini(&out);
	assert_true(cJSON_IsArray(item(item(j, "Nodes"), "items")));
	assert_int_equal(cJSON_GetArraySize(item(item(j, "Nodes"), "items")), 0);
	cJSON_Delete(j);
	cJSON_Delete(a);
	cJSON_Delete(b);
}

static void test_ext_encode_error_round_trips(void **state)
{
	static const char msg[] = "troupe: bad \"filter\" request:\n\tnear \\ byte \x01 \xc3\xa9";
	struct strbuf sb = STRBUF_INIT;
	cJSON *j;

	(void)state;
	ext_encode_error(&sb, msg);
	j = cJSON_ParseWithLengthOpts(sb.buf, sb.len + 1, NULL, 1);
	assert_non_null(j);
	assert_keys_exactly(j, filter_result_keys);
	assert_string_equal(error_of(j), msg);
	assert_true(cJSON_IsNull(item(j, "NodeNames")));
	assert_true(cJSON_IsNull(item(j, "Nodes")));
	assert_true(cJSON_IsNull(item(j, "FailedNodes")));
	assert_true(cJSON_IsNull(item(j, "FailedAndUnresolvableNodes")));
	cJSON_Delete(j);
	strbuf_fini(&sb);
}

/* ============================================================================
 * Configuration
 * ========================================================================== */

static void assert_config_defaults(const struct ext_config *c)
{
	char err[EXT_ERR_LEN] = "";

	assert_string_equal(c->listen_host, "127.0.0.1");
	assert_int_equal(c->listen_port, 8888);
	assert_int_equal(c->log_level, LOG_INFO);
	assert_int_equal(c->threads, 0);
	assert_int_equal(c->connection_limit, 1024);
	assert_int_equal(c->connection_timeout_s, 30);
	assert_int_equal(c->max_body_bytes, 64u * 1024 * 1024);
	assert_string_equal(c->path_prefix, "");
	assert_int_equal(c->cache.n_gpu_resources, 1);
	assert_string_equal(c->cache.gpu_resources[0], "nvidia.com/gpu");
	assert_string_equal(c->score_policy, "topology");
	assert_true(c->weights.packing == 6.0);
	assert_true(c->weights.topology == 1.0);
	assert_true(c->weights.fragmentation == 2.0);
	assert_int_equal(c->informer.access_check_s, 60);
	assert_int_equal(ext_config_validate(c, err, sizeof(err)), 0);
}

static void test_ext_config_defaults_values(void **state)
{
	struct ext_config cfg;

	(void)state;
	memset(&cfg, 0x5A, sizeof(cfg));
	ext_config_defaults(&cfg);
	assert_config_defaults(&cfg);
	/* The resource names live inside the config itself. */
	assert_ptr_equal(cfg.cache.gpu_resources[0], cfg.gpu_names[0]);
}

/* Write <text> to a new temporary file; its path goes to <path>. */
static void temp_file(char path[64], const char *text)
{
	size_t len = strlen(text), done = 0;
	int fd;

	snprintf(path, 64, "/tmp/troupe-test-config-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);

		assert_true(n > 0);
		done += (size_t)n;
	}
	assert_int_equal(close(fd), 0);
}

static int load_text(struct ext_config *cfg, const char *text, char *err, size_t errlen)
{
	char path[64];
	int ret;

	temp_file(path, text);
	ret = ext_config_load(cfg, path, err, errlen);
	unlink(path);
	return ret;
}

static void test_ext_config_load_sets_every_key(void **state)
{
	static const char yaml[] =
		"# every key troupe knows\n"
		"listen: \"[::1]:9000\"\n"
		"log_level: debug\n"
		"http:\n"
		"  threads: 4\n"
		"  connection_limit: 64\n"
		"  connection_timeout_seconds: 10\n"
		"  max_body_bytes: 1048576\n"
		"  path_prefix: /sched\n"
		"resources:\n"
		"  gpu: [nvidia.com/gpu, amd.com/gpu]\n"
		"scoring:\n"
		"  policy: binpack\n"
		"  weights:\n"
		"    packing: 2.5\n"
		"api:\n"
		"  access_check_seconds: 0\n";
	struct ext_config cfg;
	char err[EXT_ERR_LEN] = "";

	(void)state;
	ext_config_defaults(&cfg);
	if (load_text(&cfg, yaml, err, sizeof(err)) != 0)
		fail_msg("load failed: %s", err);
	assert_string_equal(cfg.listen_host, "::1");
	assert_int_equal(cfg.listen_port, 9000);
	assert_int_equal(cfg.log_level, LOG_DEBUG);
	assert_int_equal(cfg.threads, 4);
	assert_int_equal(cfg.connection_limit, 64);
	assert_int_equal(cfg.connection_timeout_s, 10);
	assert_int_equal(cfg.max_body_bytes, 1048576);
	assert_string_equal(cfg.path_prefix, "/sched");
	assert_int_equal(cfg.cache.n_gpu_resources, 2);
	assert_string_equal(cfg.cache.gpu_resources[0], "nvidia.com/gpu");
	assert_string_equal(cfg.cache.gpu_resources[1], "amd.com/gpu");
	assert_string_equal(cfg.score_policy, "binpack");
	assert_true(cfg.weights.packing == 2.5);
	/* 0 is kept: permissions are then checked at start only. */
	assert_int_equal(cfg.informer.access_check_s, 0);
	assert_int_equal(ext_config_validate(&cfg, err, sizeof(err)), 0);
}

static void test_ext_config_load_empty_file_keeps_defaults(void **state)
{
	static const char *const texts[] = {
		"", "\n", "# nothing but a comment\n", "---\n", "http:\n", "http:\n  threads:\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct ext_config cfg;
		char err[EXT_ERR_LEN] = "";

		ext_config_defaults(&cfg);
		if (load_text(&cfg, texts[i], err, sizeof(err)) != 0)
			fail_msg("\"%s\": %s", texts[i], err);
		assert_config_defaults(&cfg);
	}
}

struct config_error_case {
	const char *yaml;
	const char *message;            /* part of the error, naming the key */
};

static const struct config_error_case unknown_keys[] = {
	{ "http:\n  thraeds: 4\n", "unknown key \"http.thraeds\"" },
	{ "lisen: 127.0.0.1:8888\n", "unknown key \"lisen\"" },
	{ "scoring:\n  weights:\n    pakcing: 1\n", "unknown key \"scoring.weights.pakcing\"" },
	{ "resources:\n  gpus: [nvidia.com/gpu]\n", "unknown key \"resources.gpus\"" },
	{ "http:\n  threads: 2\nHTTP:\n  threads: 2\n", "unknown key \"HTTP\"" },
	{ "threads: 2\n", "unknown key \"threads\"" },
};

static const struct config_error_case wrong_types[] = {
	{ "http: 5\n", "http has the wrong type" },
	{ "http:\n  threads: many\n", "http.threads" },
	{ "http:\n  threads: -1\n", "http.threads" },
	{ "http:\n  threads: 1.5\n", "http.threads" },
	{ "http:\n  connection_limit: [1]\n", "http.connection_limit" },
	{ "http:\n  connection_timeout_seconds: true\n", "http.connection_timeout_seconds" },
	{ "http:\n  max_body_bytes: 64Mi\n", "http.max_body_bytes" },
	{ "http:\n  path_prefix: 7\n", "http.path_prefix" },
	{ "listen: 8888\n", "listen" },
	{ "listen: nohost\n", "listen" },
	{ "log_level: loud\n", "log_level" },
	{ "resources: [nvidia.com/gpu]\n", "resources" },
	{ "resources:\n  gpu: nvidia.com/gpu\n", "resources.gpu" },
	{ "resources:\n  gpu: []\n", "resources.gpu" },
	{ "resources:\n  gpu: [gpu]\n", "resources.gpu" },
	{ "resources:\n  gpu: [1]\n", "resources.gpu" },
	{ "scoring:\n  policy: [binpack]\n", "scoring.policy" },
	{ "scoring:\n  weights: 1\n", "scoring.weights" },
	{ "scoring:\n  weights:\n    packing: -1\n", "scoring.weights.packing" },
	{ "scoring:\n  weights:\n    packing: heavy\n", "scoring.weights.packing" },
	{ "api:\n  access_check_seconds: -1\n", "api.access_check_seconds" },
	{ "api:\n  access_check_seconds: 1m\n", "api.access_check_seconds" },
};

static void expect_config_errors(const struct config_error_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct ext_config cfg;
		char err[EXT_ERR_LEN] = "";
		int ret;

		ext_config_defaults(&cfg);
		ret = load_text(&cfg, cases[i].yaml, err, sizeof(err));
		if (ret != -EINVAL || !strstr(err, cases[i].message))
			fail_msg("%s: ret %d, error \"%s\"; want -EINVAL naming \"%s\"",
				 cases[i].yaml, ret, err, cases[i].message);
	}
}

static void test_ext_config_load_unknown_key_names_dotted_path(void **state)
{
	(void)state;
	expect_config_errors(unknown_keys, sizeof(unknown_keys) / sizeof(unknown_keys[0]));
}

static void test_ext_config_load_wrong_type_names_key(void **state)
{
	(void)state;
	expect_config_errors(wrong_types, sizeof(wrong_types) / sizeof(wrong_types[0]));
}

static void test_ext_config_load_rejects_unusable_files(void **state)
{
	static const struct config_error_case cases[] = {
		{ "- listen\n- http\n", "top level must be a mapping" },
		{ "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n", "one YAML document" },
		{ "http: [\n", "config /tmp/troupe-test-config-" },
		{ "http:\n  threads: &a 1\n  connection_limit: *a\n", "config /tmp/" },
	};
	struct ext_config cfg;
	char err[EXT_ERR_LEN] = "";

	(void)state;
	expect_config_errors(cases, sizeof(cases) / sizeof(cases[0]));
	ext_config_defaults(&cfg);
	assert_int_equal(ext_config_load(&cfg, "/nonexistent/troupe.yaml", err, sizeof(err)),
			 -EINVAL);
	assert_contains(err, "/nonexistent/troupe.yaml");
	assert_config_defaults(&cfg);
}

struct listen_case {
	const char *in;
	int ret;
	const char *host;
	unsigned port;
};

static const struct listen_case listen_cases[] = {
	{ "127.0.0.1:8888", 0, "127.0.0.1", 8888 },
	{ "[::1]:9000", 0, "::1", 9000 },
	{ "0.0.0.0:0", 0, "0.0.0.0", 0 },
	{ "localhost:65535", 0, "localhost", 65535 },
	{ "[fe80::1%eth0]:80", 0, "fe80::1%eth0", 80 },
	{ "host", -EINVAL, NULL, 0 },
	{ ":80", -EINVAL, NULL, 0 },
	{ "1.2.3.4:70000", -EINVAL, NULL, 0 },
	{ "[::1]8888", -EINVAL, NULL, 0 },
	{ "::1:80", -EINVAL, NULL, 0 },
	{ "host:", -EINVAL, NULL, 0 },
	{ "host:-1", -EINVAL, NULL, 0 },
	{ "host:80x", -EINVAL, NULL, 0 },
	{ "host:65536", -EINVAL, NULL, 0 },
	{ "host:99999999999999999999", -EINVAL, NULL, 0 },
	{ "[::1]", -EINVAL, NULL, 0 },
	{ "[::1:80", -EINVAL, NULL, 0 },
	{ "[]:80", -EINVAL, NULL, 0 },
	{ "", -EINVAL, NULL, 0 },
};

static void test_ext_config_parse_listen_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(listen_cases) / sizeof(listen_cases[0]); i++) {
		const struct listen_case *c = &listen_cases[i];
		struct ext_config cfg;
		char err[EXT_ERR_LEN] = "";
		int ret;

		ext_config_defaults(&cfg);
		ret = ext_config_parse_listen(&cfg, c->in, err, sizeof(err));
		if (ret != c->ret)
			fail_msg("\"%s\": ret %d, want %d", c->in, ret, c->ret);
		if (ret == 0) {
			if (strcmp(cfg.listen_host, c->host) != 0 || cfg.listen_port != c->port)
				fail_msg("\"%s\": got %s port %u", c->in, cfg.listen_host,
					 cfg.listen_port);
			continue;
		}
		/* A refused address names itself and leaves the setting alone. */
		if (!strstr(err, c->in) || !strstr(err, "HOST:PORT"))
			fail_msg("\"%s\": error \"%s\"", c->in, err);
		assert_string_equal(cfg.listen_host, "127.0.0.1");
		assert_int_equal(cfg.listen_port, 8888);
	}
}

struct validate_case {
	const char *what;
	void (*change)(struct ext_config *cfg);
	const char *message;            /* NULL: valid */
};

static void cfg_unknown_policy(struct ext_config *c)
{
	snprintf(c->score_policy, sizeof(c->score_policy), "spread");
}

static void cfg_zero_weight(struct ext_config *c)
{
	c->weights.packing = 0;
	c->weights.topology = 0;
	c->weights.fragmentation = 0;
}

static void cfg_negative_weight(struct ext_config *c)
{
	c->weights.topology = -1;
}

static void cfg_nan_weight(struct ext_config *c)
{
	c->weights.fragmentation = NAN;
}

static void cfg_tiny_body(struct ext_config *c)
{
	c->max_body_bytes = 100;
}

static void cfg_smallest_body(struct ext_config *c)
{
	c->max_body_bytes = 1024;
}

static void cfg_few_connections(struct ext_config *c)
{
	c->connection_limit = 3;
}

static void cfg_many_threads(struct ext_config *c)
{
	c->threads = 257;
}

static void cfg_relative_prefix(struct ext_config *c)
{
	snprintf(c->path_prefix, sizeof(c->path_prefix), "sched");
}

static void cfg_prefix(struct ext_config *c)
{
	snprintf(c->path_prefix, sizeof(c->path_prefix), "/sched");
}

static void cfg_nothing(struct ext_config *c)
{
	(void)c;
}

static const struct validate_case validate_cases[] = {
	{ "defaults", cfg_nothing, NULL },
	{ "unknown scoring policy", cfg_unknown_policy, "scoring.policy \"spread\" is unknown" },
	{ "zero weight", cfg_zero_weight, "scoring.weights" },
	{ "negative weight", cfg_negative_weight, "scoring.weights.topology must be a number >= 0" },
	{ "NaN weight", cfg_nan_weight, "scoring.weights.fragmentation must be a number >= 0" },
	{ "tiny body cap", cfg_tiny_body, "http.max_body_bytes" },
	{ "smallest body cap", cfg_smallest_body, NULL },
	{ "too few connections", cfg_few_connections, "http.connection_limit" },
	{ "too many threads", cfg_many_threads, "http.threads" },
	{ "relative path prefix", cfg_relative_prefix, "http.path_prefix" },
	{ "path prefix", cfg_prefix, NULL },
};

static void test_ext_config_validate_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(validate_cases) / sizeof(validate_cases[0]); i++) {
		const struct validate_case *c = &validate_cases[i];
		struct ext_config cfg;
		char err[EXT_ERR_LEN] = "";
		int ret;

		ext_config_defaults(&cfg);
		c->change(&cfg);
		ret = ext_config_validate(&cfg, err, sizeof(err));
		if (c->message ? ret != -EINVAL || !strstr(err, c->message) : ret != 0)
			fail_msg("%s: ret %d, error \"%s\"", c->what, ret, err);
	}
}

/* ============================================================================
 * filter
 * ========================================================================== */

enum where { PASS, FAILED, UNRESOLVABLE };

struct verdict_case {
	unsigned gpus;
	const char *node;
	enum where where;
	const char *reason;
};

static const struct verdict_case names_verdicts[] = {
	{ 4, "gpu-a100-0", PASS, NULL },
	{ 4, "gpu-a100-1", PASS, NULL },
	{ 4, "gpu-h100-0", PASS, NULL },
	{ 4, "gpu-h100-1", PASS, NULL },
	{ 4, "gpu-v100-0", PASS, NULL },
	{ 4, "gpu-l4-0", FAILED, "troupe: node is cordoned (spec.unschedulable)" },
	{ 4, "gpu-t4-0", FAILED, "troupe: node is not Ready" },
	{ 4, "cpu-0", UNRESOLVABLE, "troupe: node has no nvidia.com/gpu" },
	{ 4, "ghost-0", FAILED, "troupe: node unknown to troupe (not in its cache)" },

	{ 6, "gpu-a100-0", FAILED, "troupe: 4 of 8 nvidia.com/gpu free, pod needs 6" },
	{ 6, "gpu-a100-1", PASS, NULL },
	{ 6, "gpu-h100-0", PASS, NULL },
	{ 6, "gpu-h100-1", PASS, NULL },
	{ 6, "gpu-v100-0", FAILED, "troupe: 5 of 6 nvidia.com/gpu free, pod needs 6" },
	{ 6, "gpu-l4-0", UNRESOLVABLE, "troupe: node has 4 nvidia.com/gpu, pod needs 6" },
	{ 6, "gpu-t4-0", UNRESOLVABLE, "troupe: node has 4 nvidia.com/gpu, pod needs 6" },
	{ 6, "cpu-0", UNRESOLVABLE, "troupe: node has no nvidia.com/gpu" },
	{ 6, "ghost-0", FAILED, "troupe: node unknown to troupe (not in its cache)" },

	{ 8, "gpu-a100-0", FAILED, "troupe: 4 of 8 nvidia.com/gpu free, pod needs 8" },
	{ 8, "gpu-a100-1", PASS, NULL },
	{ 8, "gpu-h100-0", FAILED, "troupe: 6 of 8 nvidia.com/gpu free, pod needs 8" },
	{ 8, "gpu-h100-1", PASS, NULL },
	{ 8, "gpu-v100-0", FAILED,
	  "troupe: only 6 of 8 nvidia.com/gpu healthy (allocatable), pod needs 8" },
	{ 8, "gpu-l4-0", UNRESOLVABLE, "troupe: node has 4 nvidia.com/gpu, pod needs 8" },
	{ 8, "gpu-t4-0", UNRESOLVABLE, "troupe: node has 4 nvidia.com/gpu, pod needs 8" },
	{ 8, "cpu-0", UNRESOLVABLE, "troupe: node has no nvidia.com/gpu" },
	{ 8, "ghost-0", FAILED, "troupe: node unknown to troupe (not in its cache)" },
};

/* Each case's node is in exactly the collection the case names, with its
 * reason, and in no other. */
static void check_verdict(const cJSON *reply, const struct verdict_case *c)
{
	const cJSON *failed = item(item(reply, "FailedNodes"), c->node);
	const cJSON *unres = item(item(reply, "FailedAndUnresolvableNodes"), c->node);
	bool passed = names_has(reply, c->node);
	const cJSON *reason = c->where == FAILED ? failed : c->where == UNRESOLVABLE ? unres : NULL;

	if (passed != (c->where == PASS) || (failed != NULL) != (c->where == FAILED) ||
	    (unres != NULL) != (c->where == UNRESOLVABLE))
		fail_msg("%u GPUs on %s: passed %d, failed %d, unresolvable %d; want %d", c->gpus,
			 c->node, passed, failed != NULL, unres != NULL, c->where);
	if (reason && (!cJSON_IsString(reason) || strcmp(reason->valuestring, c->reason) != 0))
		fail_msg("%u GPUs on %s: reason \"%s\", want \"%s\"", c->gpus, c->node,
			 cJSON_IsString(reason) ? reason->valuestring : "?", c->reason);
}

static void test_ext_filter_names_mode_verdicts(void **state)
{
	struct fx *f = *state;
	static const unsigned sizes[] = { 4, 6, 8 };

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		char name[32];
		cJSON *j;
		size_t rows = 0;

		snprintf(name, sizeof(name), "verdicts-%u", sizes[s]);
		j = filter_names(f, name, sizes[s], request_nodes);
		assert_true(cJSON_IsNull(item(j, "Nodes")));
		assert_keys_exactly(j, filter_result_keys);
		for (size_t i = 0; i < sizeof(names_verdicts) / sizeof(names_verdicts[0]); i++) {
			if (names_verdicts[i].gpus != sizes[s])
				continue;
			check_verdict(j, &names_verdicts[i]);
			rows++;
		}
		/* Every input node is answered for, once. */
		assert_int_equal(rows, 9);
		assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")) +
				 cJSON_GetArraySize(item(j, "FailedNodes")) +
				 cJSON_GetArraySize(item(j, "FailedAndUnresolvableNodes")), 9);
		cJSON_Delete(j);
	}
}

/* Filter judges; it does not take anything. */
static void test_ext_filter_changes_no_usage(void **state)
{
	struct fx *f = *state;
	struct cluster_state before, after;
	cJSON *j;

	state_take(f, &before);
	j = filter_names(f, "just-looking", 4, request_nodes);
	cJSON_Delete(j);
	j = filter_names(f, "just-looking", 4, request_nodes);
	cJSON_Delete(j);
	state_take(f, &after);
	assert_state_same(&before, &after, false, "after two filters");
}

static void test_ext_filter_none_fit_gives_empty_array(void **state)
{
	struct fx *f = *state;
	static const char *const none[] = { NULL };
	cJSON *j = filter_names(f, "too-big", 16, request_nodes);

	assert_true(cJSON_IsArray(item(j, "NodeNames")));
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")) +
			 cJSON_GetArraySize(item(j, "FailedAndUnresolvableNodes")), 9);
	cJSON_Delete(j);

	j = filter_names(f, "no-candidates", 4, none);
	assert_true(cJSON_IsArray(item(j, "NodeNames")));
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")), 0);
	cJSON_Delete(j);
}

/* Neither NodeNames nor Nodes: zero nodes pass (not "all"). */
static void test_ext_filter_both_null_passes_zero_nodes(void **state)
{
	struct fx *f = *state;
	cJSON *root = cJSON_CreateObject();
	unsigned status = 0;
	char *body;
	cJSON *j;

	cJSON_AddItemToObject(root, "Pod", gpu_pod("nothing", 4));
	cJSON_AddNullToObject(root, "Nodes");
	cJSON_AddNullToObject(root, "NodeNames");
	body = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	j = call(ext_filter, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_string_equal(error_of(j), "");
	assert_true(cJSON_IsArray(item(j, "NodeNames")));
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	cJSON_Delete(j);
}

/* Names that need escaping come back as the same names. */
static void test_ext_filter_names_round_trip_through_escaping(void **state)
{
	struct fx *f = *state;
	static const char *const odd[] = { "gpu-\"quoted\"", "back\\slash", "\xc3\xa9t\xc3\xa9",
					   "tab\there", NULL };
	cJSON *j = filter_names(f, "odd-names", 1, odd);

	for (const char *const *n = odd; *n; n++)
		if (!cJSON_IsString(item(item(j, "FailedNodes"), *n)))
			fail_msg("node \"%s\" is missing from FailedNodes", *n);
	cJSON_Delete(j);
}

struct full_case {
	const char *name;
	const char *capacity, *allocatable;
	bool ready, cordoned;
	enum where where;
	const char *reason;
};

/* A 4-GPU pod; the request's node objects decide, the cache adds only usage. */
static const struct full_case full_cases[] = {
	/* Cache: 4 of 8 free; the object agrees on 8. */
	{ "gpu-a100-0", "8", "8", true, false, PASS, NULL },
	/* Not in the cache at all: judged from the object alone. */
	{ "gpu-new-0", "8", "8", true, false, PASS, NULL },
	/* Cache says 8 healthy; the object says 2. */
	{ "gpu-a100-1", "8", "2", true, false, FAILED,
	  "troupe: only 2 of 8 nvidia.com/gpu healthy (allocatable), pod needs 4" },
	/* Only allocatable given: capacity is taken to be the same. */
	{ "gpu-h100-1", NULL, "2", true, false, UNRESOLVABLE,
	  "troupe: node has 2 nvidia.com/gpu, pod needs 4" },
	/* Cache says cordoned; the object says schedulable. */
	{ "gpu-l4-0", "4", "4", true, false, PASS, NULL },
	/* Cache says NotReady; the object says Ready. */
	{ "gpu-t4-0", "4", "4", true, false, PASS, NULL },
	/* Cache says fine; the object says cordoned, or not Ready. */
	{ "gpu-v100-0", "8", "8", true, true, FAILED,
	  "troupe: node is cordoned (spec.unschedulable)" },
	{ "gpu-new-1", "8", "8", false, false, FAILED, "troupe: node is not Ready" },
	/* Cache usage still counts: 2 unattributed on gpu-h100-0, object says 5. */
	{ "gpu-h100-0", "8", "5", true, false, FAILED,
	  "troupe: 3 of 5 nvidia.com/gpu free, pod needs 4" },
	{ "cpu-0", NULL, NULL, true, false, UNRESOLVABLE, "troupe: node has no nvidia.com/gpu" },
};

static void test_ext_filter_full_mode_request_objects_are_authoritative(void **state)
{
	struct fx *f = *state;
	size_t n = sizeof(full_cases) / sizeof(full_cases[0]);
	cJSON *items = cJSON_CreateArray(), *sent;
	const cJSON *out_items;
	unsigned status = 0;
	size_t k = 0;
	char *body;
	cJSON *j;

	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(items, node_obj(full_cases[i].name, full_cases[i].capacity,
						     full_cases[i].allocatable, full_cases[i].ready,
						     full_cases[i].cordoned));
	sent = cJSON_Duplicate(items, true);
	body = full_args(gpu_pod("full-4", 4), items);
	j = call(ext_filter, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_string_equal(error_of(j), "");
	assert_keys_exactly(j, filter_result_keys);
	assert_true(cJSON_IsNull(item(j, "NodeNames")));
	out_items = item(item(j, "Nodes"), "items");
	assert_true(cJSON_IsArray(out_items));
	for (size_t i = 0; i < n; i++) {
		const struct full_case *c = &full_cases[i];
		const cJSON *failed = item(item(j, "FailedNodes"), c->name);
		const cJSON *unres = item(item(j, "FailedAndUnresolvableNodes"), c->name);

		if (c->where == PASS) {
			/* Passing nodes come back as the very objects sent, in order. */
			const cJSON *got = cJSON_GetArrayItem(out_items, (int)k++);

			if (!got || !cJSON_Compare(got, cJSON_GetArrayItem(sent, (int)i), true))
				fail_msg("node %s: not echoed as sent", c->name);
			assert_null(failed);
			assert_null(unres);
			continue;
		}
		if ((failed != NULL) != (c->where == FAILED) ||
		    (unres != NULL) != (c->where == UNRESOLVABLE))
			fail_msg("node %s: failed %d unresolvable %d, want %d", c->name,
				 failed != NULL, unres != NULL, c->where);
		if (strcmp((failed ? failed : unres)->valuestring, c->reason) != 0)
			fail_msg("node %s: reason \"%s\", want \"%s\"", c->name,
				 (failed ? failed : unres)->valuestring, c->reason);
	}
	assert_int_equal(cJSON_GetArraySize(out_items), k);
	cJSON_Delete(sent);
	cJSON_Delete(j);
}

static void test_ext_filter_full_mode_nameless_node_is_refused(void **state)
{
	struct fx *f = *state;
	cJSON *items = cJSON_CreateArray();
	unsigned status = 0;
	char *body;
	cJSON *j;

	cJSON_AddItemToArray(items, cJSON_Parse("{\"metadata\":{},\"status\":{\"allocatable\":"
						"{\"nvidia.com/gpu\":\"8\"}}}"));
	cJSON_AddItemToArray(items, node_obj("gpu-h100-1", "8", "8", true, false));
	body = full_args(gpu_pod("nameless", 2), items);
	j = call(ext_filter, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_string_equal(error_of(j), "");
	assert_int_equal(cJSON_GetArraySize(item(item(j, "Nodes"), "items")), 1);
	assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")) +
			 cJSON_GetArraySize(item(j, "FailedAndUnresolvableNodes")), 1);
	cJSON_Delete(j);
}

/* A pod that asks for no GPUs: every node passes unchanged, whatever troupe
 * thinks of it, in both modes. */
static void test_ext_filter_pod_without_gpus_passes_every_node(void **state)
{
	struct fx *f = *state;
	static const char *const resources[] = {
		"{\"requests\":{\"cpu\":\"1\"}}",
		"{\"limits\":{\"nvidia.com/gpu\":\"0\"}}",
		"{}",
	};

	for (size_t r = 0; r < sizeof(resources) / sizeof(resources[0]); r++) {
		cJSON *items = cJSON_CreateArray(), *sent;
		unsigned status = 0;
		char *body;
		cJSON *j;
		int i = 0;
		const cJSON *it;

		body = names_args(pod_with("cpu-only", resources[r]), request_nodes);
		j = call(ext_filter, f, body, &status);
		free(body);
		assert_int_equal(status, 200);
		assert_string_equal(error_of(j), "");
		assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 9);
		cJSON_ArrayForEach(it, item(j, "NodeNames"))
			assert_string_equal(it->valuestring, request_nodes[i++]);
		assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")), 0);
		assert_int_equal(cJSON_GetArraySize(item(j, "FailedAndUnresolvableNodes")), 0);
		cJSON_Delete(j);

		cJSON_AddItemToArray(items, node_obj("cpu-0", NULL, NULL, true, false));
		cJSON_AddItemToArray(items, node_obj("gpu-t4-0", "4", "4", false, true));
		cJSON_AddItemToArray(items, cJSON_Parse("{\"metadata\":{}}"));
		sent = cJSON_Duplicate(items, true);
		body = full_args(pod_with("cpu-only", resources[r]), items);
		j = call(ext_filter, f, body, &status);
		free(body);
		assert_int_equal(status, 200);
		assert_true(cJSON_Compare(item(item(j, "Nodes"), "items"), sent, true));
		assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")), 0);
		cJSON_Delete(sent);
		cJSON_Delete(j);
	}
}

struct invalid_case {
	const char *resources;
	const char *message;
};

static const struct invalid_case invalid_requests[] = {
	{ "{\"requests\":{\"nvidia.com/gpu\":\"2\"}}", "without a limit" },
	{ "{\"requests\":{\"nvidia.com/gpu\":\"2\"},\"limits\":{\"nvidia.com/gpu\":\"4\"}}",
	  "must equal its limit" },
	{ "{\"limits\":{\"nvidia.com/gpu\":\"1.5\"}}", "whole, non-negative" },
	{ "{\"limits\":{\"nvidia.com/gpu\":\"-1\"}}", "whole, non-negative" },
	{ "{\"limits\":{\"nvidia.com/gpu\":\"500m\"}}", "whole, non-negative" },
	{ "{\"limits\":{\"nvidia.com/gpu\":\"four\"}}", "whole, non-negative" },
	{ "{\"limits\":{\"nvidia.com/gpu\":true}}", "whole, non-negative" },
	{ "{\"limits\":{\"nvidia.com/gpu\":\"65\"}}", "no node offers more than 64" },
	{ "{\"limits\":{\"nvidia.com/gpu\":1e300}}", "nvidia.com/gpu" },
	{ "{\"limits\":{\"nvidia.com/gpu\":\"9223372036854775807\"}}", "nvidia.com/gpu" },
};

/* An invalid GPU request is the pod's problem, not the node's: 200 with Error
 * naming the pod and what is wrong. */
static void test_ext_filter_invalid_gpu_request_is_an_error(void **state)
{
	struct fx *f = *state;

	for (size_t i = 0; i < sizeof(invalid_requests) / sizeof(invalid_requests[0]); i++) {
		struct cluster_state before, after;
		unsigned status = 0;
		char *body;
		cJSON *j;
		const char *e;

		state_take(f, &before);
		body = names_args(pod_with("bad", invalid_requests[i].resources), request_nodes);
		j = call(ext_filter, f, body, &status);
		free(body);
		e = error_of(j);
		if (status != 200 || !strstr(e, invalid_requests[i].message) ||
		    !strstr(e, "ml/bad"))
			fail_msg("%s: status %u, Error \"%s\"", invalid_requests[i].resources,
				 status, e);
		cJSON_Delete(j);
		state_take(f, &after);
		assert_state_same(&before, &after, true, invalid_requests[i].resources);
	}
}

static void test_ext_filter_malformed_json_is_400(void **state)
{
	struct fx *f = *state;
	static const char *const bodies[] = {
		"{\"Pod\":", "not json", "", "[{\"Pod\":{}}]", "{\"Pod\":\"x\"}",
		"{\"Pod\":{},\"NodeNames\":\"gpu-a100-0\"}",
	};

	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		unsigned status = 0;
		cJSON *j = call(ext_filter, f, bodies[i], &status);

		if (status != 400 || !error_of(j)[0])
			fail_msg("%s: status %u, Error \"%s\"", bodies[i], status, error_of(j));
		assert_contains(error_of(j), "bad filter request");
		cJSON_Delete(j);
	}
	/* No body at all, as the server passes it. */
	for (size_t v = 0; v < sizeof(all_verbs) / sizeof(all_verbs[0]); v++) {
		unsigned status = 0;
		cJSON *j = call_len(all_verbs[v], f, NULL, 0, &status);

		assert_int_equal(status, 400);
		assert_contains(error_of(j), "empty request body");
		cJSON_Delete(j);
	}
}

static void test_ext_filter_before_sync_is_an_error(void **state)
{
	struct fx *f = *state;
	unsigned status = 0;
	char *body = names_args(gpu_pod("early", 1), request_nodes);
	cJSON *j;

	cache_set_synced(f->cache, false);
	j = call(ext_filter, f, body, &status);
	assert_int_equal(status, 200);
	assert_contains(error_of(j), "still syncing");
	cJSON_Delete(j);
	cache_set_synced(f->cache, true);
	j = call(ext_filter, f, body, &status);
	assert_string_equal(error_of(j), "");
	cJSON_Delete(j);
	free(body);
}

/* Without an API server (a snapshot), /readyz follows the cache being loaded. */
static void test_ext_readyz_on_a_snapshot(void **state)
{
	static const struct {
		bool synced;
		unsigned status;
		const char *body;
	} cases[] = {
		{ false, 503, "{\"status\":\"syncing\"}" },
		{ true, 200, "{\"status\":\"ready\"}" },
	};
	struct fx *f = *state;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct ext_reply r;

		cache_set_synced(f->cache, cases[i].synced);
		ext_reply_init(&r);
		ext_readyz(&f->svc, &r);
		assert_int_equal(r.status, cases[i].status);
		assert_string_equal(r.body.buf, cases[i].body);
		ext_reply_fini(&r);
	}
}

static void test_ext_filter_pod_without_name_is_an_error(void **state)
{
	struct fx *f = *state;
	static const char *const bodies[] = {
		"{\"Pod\":{},\"NodeNames\":[\"gpu-a100-0\"]}",
		"{\"Pod\":{\"metadata\":{\"name\":5}},\"NodeNames\":[\"gpu-a100-0\"]}",
		"{\"Pod\":{\"metadata\":{\"name\":\"\"},\"spec\":{}},"
		"\"NodeNames\":[\"gpu-a100-0\"]}",
	};

	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		unsigned status = 0;
		cJSON *j = call(ext_filter, f, bodies[i], &status);

		assert_int_equal(status, 200);
		assert_contains(error_of(j), "metadata.name");
		cJSON_Delete(j);
	}
}

/* ============================================================================
 * prioritize
 * ========================================================================== */

/* Host -> Score from a prioritize reply, checking its shape on the way. */
static int score_of(const cJSON *reply, const char *host)
{
	const cJSON *it;
	int found = -1, n = 0;

	cJSON_ArrayForEach(it, reply) {
		static const char *const keys[] = { "Host", "Score", NULL };
		const cJSON *h = item(it, "Host"), *s = item(it, "Score");

		assert_keys_exactly(it, keys);
		assert_true(cJSON_IsString(h));
		assert_true(cJSON_IsNumber(s));
		if (strcmp(h->valuestring, host) == 0) {
			found = s->valueint;
			n++;
		}
	}
	if (n != 1)
		fail_msg("host %s appears %d times", host, n);
	return found;
}

static void test_ext_prioritize_scores_every_input_node(void **state)
{
	struct fx *f = *state;
	struct cluster_state before, after;
	unsigned status = 0;
	char *body = names_args(gpu_pod("prio-4", 4), request_nodes);
	cJSON *j;

	state_take(f, &before);
	j = call(ext_prioritize, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_true(cJSON_IsArray(j));
	assert_int_equal(cJSON_GetArraySize(j), 9);
	for (const char *const *n = request_nodes; *n; n++)
		assert_in_range(score_of(j, *n), 0, PLACEMENT_MAX_SCORE);
	/* Nodes the pod cannot use score nothing. */
	assert_int_equal(score_of(j, "gpu-l4-0"), 0);
	assert_int_equal(score_of(j, "gpu-t4-0"), 0);
	assert_int_equal(score_of(j, "cpu-0"), 0);
	assert_int_equal(score_of(j, "ghost-0"), 0);
	/* Fuller homes first: 4 on 4 free fills gpu-a100-0 exactly. */
	assert_int_equal(score_of(j, "gpu-a100-0"), PLACEMENT_MAX_SCORE);
	assert_true(score_of(j, "gpu-a100-0") > score_of(j, "gpu-h100-0"));
	assert_true(score_of(j, "gpu-h100-0") > score_of(j, "gpu-h100-1"));
	assert_true(score_of(j, "gpu-v100-0") > score_of(j, "gpu-a100-1"));
	assert_int_equal(score_of(j, "gpu-a100-1"), score_of(j, "gpu-h100-1"));
	assert_true(score_of(j, "gpu-h100-1") > 0);
	cJSON_Delete(j);

	/* A node the pod does not fit any more scores nothing either. */
	body = names_args(gpu_pod("prio-6", 6), request_nodes);
	j = call(ext_prioritize, f, body, &status);
	free(body);
	assert_int_equal(score_of(j, "gpu-a100-0"), 0);
	assert_int_equal(score_of(j, "gpu-v100-0"), 0);
	assert_true(score_of(j, "gpu-h100-0") > score_of(j, "gpu-h100-1"));
	cJSON_Delete(j);

	/* A pod asking no GPU: every node named once, each scored 0, in both modes. */
	body = names_args(gpu_pod("prio-0", 0), request_nodes);
	j = call(ext_prioritize, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_int_equal(cJSON_GetArraySize(j), 9);
	for (const char *const *n = request_nodes; *n; n++)
		assert_int_equal(score_of(j, *n), 0);
	cJSON_Delete(j);
	{
		cJSON *items = cJSON_CreateArray();

		cJSON_AddItemToArray(items, node_obj("gpu-a100-0", "8", "8", true, false));
		cJSON_AddItemToArray(items, node_obj("gpu-new-0", "8", "8", true, false));
		body = full_args(gpu_pod("prio-0-full", 0), items);
		j = call(ext_prioritize, f, body, &status);
		free(body);
		assert_int_equal(cJSON_GetArraySize(j), 2);
		assert_int_equal(score_of(j, "gpu-new-0"), 0);
		assert_int_equal(score_of(j, "gpu-a100-0"), 0);
		cJSON_Delete(j);
	}

	state_take(f, &after);
	assert_state_same(&before, &after, true, "after prioritize");
}

static void test_ext_prioritize_full_mode_uses_request_objects(void **state)
{
	struct fx *f = *state;
	cJSON *items = cJSON_CreateArray();
	unsigned status = 0;
	char *body;
	cJSON *j;

	cJSON_AddItemToArray(items, node_obj("gpu-a100-0", "8", "8", true, false));
	cJSON_AddItemToArray(items, node_obj("gpu-new-0", "8", "8", true, false));
	cJSON_AddItemToArray(items, node_obj("gpu-h100-1", "8", "8", true, true));
	cJSON_AddItemToArray(items, node_obj("gpu-a100-1", "4", "4", true, false));
	body = full_args(gpu_pod("prio-full", 4), items);
	j = call(ext_prioritize, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_int_equal(cJSON_GetArraySize(j), 4);
	assert_int_equal(score_of(j, "gpu-a100-0"), PLACEMENT_MAX_SCORE);
	/* The object says 4 GPUs: this pod fills it. */
	assert_int_equal(score_of(j, "gpu-a100-1"), PLACEMENT_MAX_SCORE);
	assert_true(score_of(j, "gpu-new-0") > 0);
	assert_true(score_of(j, "gpu-new-0") < PLACEMENT_MAX_SCORE);
	assert_int_equal(score_of(j, "gpu-h100-1"), 0);
	cJSON_Delete(j);
}

static void test_ext_prioritize_bad_requests(void **state)
{
	struct fx *f = *state;
	unsigned status = 0;
	char *body;
	cJSON *j;

	/* An invalid pod gets an empty list: kube-scheduler ignores errors anyway. */
	body = names_args(pod_with("bad", "{\"requests\":{\"nvidia.com/gpu\":\"2\"}}"),
			  request_nodes);
	j = call(ext_prioritize, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_true(cJSON_IsArray(j));
	assert_int_equal(cJSON_GetArraySize(j), 0);
	cJSON_Delete(j);

	j = call(ext_prioritize, f, "{\"Pod\":{", &status);
	assert_int_equal(status, 400);
	assert_contains(error_of(j), "bad prioritize request");
	cJSON_Delete(j);
}

/* ============================================================================
 * bind
 * ========================================================================== */

static void expect_pod(struct fx *f, const char *uid, enum cache_pod_state st, const char *node,
		       uint64_t devices)
{
	struct cache_pod_info info;

	assert_int_equal(cache_pod_get(f->cache, uid, &info), 0);
	if (info.state != st || strcmp(info.node, node) != 0 || info.devices != devices)
		fail_msg("pod %s: state %d on \"%s\" holding %#llx; "
			 "want %d on \"%s\" holding %#llx", uid, info.state, info.node,
			 (unsigned long long)info.devices, st, node, (unsigned long long)devices);
}

static void test_ext_bind_after_filter_assumes_gpus(void **state)
{
	struct fx *f = *state;
	static const char *const h100[] = { "gpu-h100-0", NULL };
	struct cache_stats before, after;
	cJSON *j, *b;

	cache_get_stats(f->cache, &before);
	place(f, "first", 4, "gpu-h100-0");
	/* Lowest free devices; the 2 unattributed GPUs count but name no device. */
	expect_pod(f, "uid-first", CACHE_POD_STATE_ASSUMED, "gpu-h100-0", 0x0F);
	assert_int_equal(free_on(f, "gpu-h100-0"), 2);
	cache_get_stats(f->cache, &after);
	assert_int_equal(after.gpus_held, before.gpus_held + 4);
	assert_int_equal(after.pods_holding, before.pods_holding + 1);

	/* The next filter sees what the bind took. */
	j = filter_names(f, "second", 4, h100);
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	assert_string_equal(item(item(j, "FailedNodes"), "gpu-h100-0")->valuestring,
			    "troupe: 2 of 8 nvidia.com/gpu free, pod needs 4");
	cJSON_Delete(j);

	/* A pod that still fits takes the next devices up. */
	place(f, "third", 2, "gpu-h100-0");
	expect_pod(f, "uid-third", CACHE_POD_STATE_ASSUMED, "gpu-h100-0", 0x30);
	assert_int_equal(free_on(f, "gpu-h100-0"), 0);

	/* Around devices held by a known pod (resnet-0 holds 0-3 on gpu-a100-0). */
	place(f, "fourth", 2, "gpu-a100-0");
	expect_pod(f, "uid-fourth", CACHE_POD_STATE_ASSUMED, "gpu-a100-0", 0x30);
	assert_string_equal(bind_pod(f, "fourth", "gpu-a100-0", &b), "");
	cJSON_Delete(b);
	assert_never_overcommitted(f, "after binds");
}

static void test_ext_bind_is_idempotent_for_same_node(void **state)
{
	struct fx *f = *state;
	struct cluster_state before, after;
	cJSON *b;

	place(f, "again", 2, "gpu-h100-1");
	state_take(f, &before);
	for (int i = 0; i < 3; i++) {
		/* kube-scheduler retrying after a lost reply: success, nothing more taken. */
		assert_string_equal(bind_pod(f, "again", "gpu-h100-1", &b), "");
		assert_keys_exactly(b, (const char *const[]){ "Error", NULL });
		cJSON_Delete(b);
	}
	state_take(f, &after);
	assert_state_same(&before, &after, true, "after repeated binds");
	expect_pod(f, "uid-again", CACHE_POD_STATE_ASSUMED, "gpu-h100-1", 0x03);
}

static void test_ext_bind_to_another_node_after_success_is_an_error(void **state)
{
	struct fx *f = *state;
	struct cluster_state before, after;
	cJSON *b;

	place(f, "moved", 2, "gpu-h100-1");
	state_take(f, &before);
	assert_contains(bind_pod(f, "moved", "gpu-a100-1", &b),
			"troupe: pod ml/moved is already bound to node gpu-h100-1");
	cJSON_Delete(b);
	state_take(f, &after);
	assert_state_same(&before, &after, true, "after bind elsewhere");
	expect_pod(f, "uid-moved", CACHE_POD_STATE_ASSUMED, "gpu-h100-1", 0x03);
}

/* Pods the cluster source shows bound already. */
static void test_ext_bind_of_a_bound_pod(void **state)
{
	struct fx *f = *state;
	static const char uid[] = "6f1c2a3e-0000-4000-8000-000000000001";
	struct cluster_state before, after;
	unsigned status = 0;
	char *body;
	cJSON *j;

	state_take(f, &before);
	body = bind_args("ml", "resnet-0", uid, "gpu-a100-0");
	j = call(bind_sync, f, body, &status);
	free(body);
	assert_string_equal(error_of(j), "");
	cJSON_Delete(j);
	body = bind_args("ml", "resnet-0", uid, "gpu-a100-1");
	j = call(bind_sync, f, body, &status);
	free(body);
	assert_contains(error_of(j), "already bound to node gpu-a100-0");
	cJSON_Delete(j);
	state_take(f, &after);
	assert_state_same(&before, &after, true, "after binding a bound pod");
}

/* A pending pod the cluster source knows needs no filter first. */
static void test_ext_bind_of_a_known_pending_pod(void **state)
{
	struct fx *f = *state;
	static const char uid[] = "6f1c2a3e-0000-4000-8000-000000000010";
	unsigned status = 0;
	char *body = bind_args("ml", "llm-worker-0", uid, "gpu-a100-1");
	cJSON *j = call(bind_sync, f, body, &status);

	free(body);
	assert_int_equal(status, 200);
	assert_string_equal(error_of(j), "");
	cJSON_Delete(j);
	expect_pod(f, uid, CACHE_POD_STATE_ASSUMED, "gpu-a100-1", 0xFF);
	assert_int_equal(free_on(f, "gpu-a100-1"), 0);
}

struct refused_bind {
	const char *ns, *name, *uid, *node;
	const char *message;
};

static const struct refused_bind refused_binds[] = {
	/* No room, or a node the pod can never use: the pod stays as it was. */
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-a100-0",
	  "troupe: 4 of 8 nvidia.com/gpu free, pod needs 8 (pod ml/llm-worker-0 on node "
	  "gpu-a100-0; it will be retried)" },
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-v100-0",
	  "troupe: only 6 of 8 nvidia.com/gpu healthy (allocatable), pod needs 8" },
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-l4-0",
	  "troupe: node has 4 nvidia.com/gpu, pod needs 8" },
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "cpu-0",
	  "troupe: node has no nvidia.com/gpu" },
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "ghost-0",
	  "troupe: node ghost-0 is unknown to troupe" },
	/* Unknown pod. */
	{ "ml", "stranger", "uid-never-seen", "gpu-a100-1", "uid-never-seen" },
	/* The uid belongs to another pod. */
	{ "ml", "impostor", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-a100-1",
	  "belongs to pod ml/llm-worker-0" },
	{ "research", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-a100-1",
	  "belongs to pod ml/llm-worker-0" },
	/* Missing fields. */
	{ "ml", "llm-worker-0", "", "gpu-a100-1", "must name PodName, PodUID and Node" },
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "",
	  "must name PodName, PodUID and Node" },
	{ "ml", "", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-a100-1",
	  "must name PodName, PodUID and Node" },
};

static void test_ext_bind_refusals_change_nothing(void **state)
{
	struct fx *f = *state;

	for (size_t i = 0; i < sizeof(refused_binds) / sizeof(refused_binds[0]); i++) {
		const struct refused_bind *c = &refused_binds[i];
		struct cluster_state before, after;
		unsigned status = 0;
		char *body = bind_args(c->ns, c->name, c->uid, c->node);
		cJSON *j;

		state_take(f, &before);
		j = call(bind_sync, f, body, &status);
		free(body);
		if (status != 200 || !strstr(error_of(j), c->message))
			fail_msg("bind %s/%s to %s: status %u, Error \"%s\"; want \"%s\"", c->ns,
				 c->name, c->node, status, error_of(j), c->message);
		cJSON_Delete(j);
		state_take(f, &after);
		assert_state_same(&before, &after, true, c->message);
	}
	expect_pod(f, "6f1c2a3e-0000-4000-8000-000000000010", CACHE_POD_STATE_PENDING, "", 0);
}

/* A pod whose bind was refused for room can still be bound where it fits. */
static void test_ext_bind_after_a_refusal_still_works(void **state)
{
	struct fx *f = *state;
	cJSON *b;

	place(f, "fill-a100-0", 4, "gpu-a100-0");
	assert_contains(bind_pod(f, "fill-a100-0", "gpu-h100-1", &b), "already bound");
	cJSON_Delete(b);
	{
		const char *const one[] = { "gpu-a100-0", NULL };
		cJSON *j = filter_names(f, "late", 1, one);

		assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
		cJSON_Delete(j);
	}
	assert_contains(bind_pod(f, "late", "gpu-a100-0", &b),
			"troupe: 0 of 8 nvidia.com/gpu free, pod needs 1");
	cJSON_Delete(b);
	assert_string_equal(bind_pod(f, "late", "gpu-a100-1", &b), "");
	cJSON_Delete(b);
	expect_pod(f, "uid-late", CACHE_POD_STATE_ASSUMED, "gpu-a100-1", 0x01);
}

static void test_ext_bind_malformed_is_400(void **state)
{
	struct fx *f = *state;
	static const char *const bodies[] = {
		"{\"PodName\":", "[]",
		"{\"PodName\":\"p\",\"PodNamespace\":\"ml\",\"PodUID\":7,\"Node\":\"gpu-a100-1\"}",
	};

	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		unsigned status = 0;
		cJSON *j = call(bind_sync, f, bodies[i], &status);

		assert_int_equal(status, 400);
		assert_contains(error_of(j), "bad bind request");
		cJSON_Delete(j);
	}
}

/* Many pods of 1, 2, 4 and 8 GPUs, each filtered then bound to a node filter
 * offered: every bind succeeds, no node is ever over-committed, a bind to a
 * node filter refused fails, and at the end every free GPU of every usable
 * node is taken (4 + 8 + 6 + 8 + 5 = 31). */
static void test_ext_filter_bind_sequence_never_overcommits(void **state)
{
	struct fx *f = *state;
	static const unsigned sizes[] = { 1, 2, 4, 8 };
	static const char *const usable[] = { "gpu-a100-0", "gpu-a100-1", "gpu-h100-0",
					      "gpu-h100-1", "gpu-v100-0", NULL };
	unsigned bound_gpus = 0, refused = 0, x = 12345;
	char (*bound)[64] = calloc(400, sizeof(*bound));
	struct cluster_state initial;
	size_t n_bound = 0;
	char name[32];
	int i;

	assert_non_null(bound);
	state_take(f, &initial);
	for (i = 0; i < 400; i++) {
		unsigned gpus = sizes[(x = x * 1103515245u + 12345u) >> 16 & 3];
		const cJSON *names, *failed;
		cJSON *j, *b;
		int n;

		if (i >= 200)
			gpus = 1;       /* then top up every last GPU */
		snprintf(name, sizeof(name), "seq-%d", i);
		j = filter_names(f, name, gpus, cluster_nodes);
		names = item(j, "NodeNames");
		failed = item(j, "FailedNodes");
		n = cJSON_GetArraySize(names);
		/* Binding where filter said no must fail and change nothing. */
		if (failed->child) {
			struct cluster_state before, after;

			state_take(f, &before);
			if (!bind_pod(f, name, failed->child->string, &b)[0])
				fail_msg("pod %s (%u GPUs) bound to %s, which filter "
					 "refused: %s", name, gpus, failed->child->string,
					 failed->child->valuestring);
			cJSON_Delete(b);
			state_take(f, &after);
			assert_state_same(&before, &after, false, name);
		}
		if (n == 0) {
			refused++;
			cJSON_Delete(j);
			if (i >= 200)
				break;
			continue;
		}
		{
			int pick = (int)(x % (unsigned)n);
			const char *node = cJSON_GetArrayItem(names, pick)->valuestring;
			const char *e = bind_pod(f, name, node, &b);

			if (e[0])
				fail_msg("pod %s (%u GPUs) on %s, offered by filter: %s", name,
					 gpus, node, e);
			cJSON_Delete(b);
		}
		snprintf(bound[n_bound++], sizeof(bound[0]), "uid-%s", name);
		bound_gpus += gpus;
		cJSON_Delete(j);
		assert_never_overcommitted(f, name);
	}
	assert_true(i < 400);
	assert_true(refused > 0);
	assert_int_equal(bound_gpus, 31);
	for (const char *const *u = usable; *u; u++)
		assert_int_equal(free_on(f, *u), 0);
	assert_devices_exclusive(f, &initial, (const char (*)[64])bound, n_bound);
	free(bound);
}

/* Verbs may run on any thread. Racers released together filter and bind
 * concurrently, all choosing the first node offered; losing a race is a
 * refusal ("free, pod needs"), never an over-commit or a device held twice,
 * and together they take exactly the 31 free GPUs. Repeated on fresh caches.
 * Workers only record; the main thread asserts. */
enum { RACERS = 4, RACE_ROUNDS = 30 };

struct racer {
	struct fx *f;
	pthread_barrier_t *start;
	int id;
	unsigned bound_gpus;
	unsigned lost;
	unsigned unexpected;
	size_t n_bound;
	char bound[40][64];             /* uids; 31 GPUs make at most 31 pods */
	char last_unexpected[200];
};

static void *racer_run(void *arg)
{
	struct racer *r = arg;
	unsigned seq = 0, gpus = r->id % 2 ? 2 : 1;

	pthread_barrier_wait(r->start);
	while (seq < 2000) {
		char name[48], uid[64], *body;
		const cJSON *first;
		struct ext_reply rep;
		cJSON *j, *b;

		/* A fresh pod per attempt, so its remembered demand is this one. */
		snprintf(name, sizeof(name), "race-%d-%u", r->id, seq++);
		snprintf(uid, sizeof(uid), "uid-%s", name);
		body = names_args(gpu_pod(name, gpus), cluster_nodes);
		ext_reply_init(&rep);
		ext_filter(&r->f->svc, body, strlen(body), &rep);
		free(body);
		j = cJSON_Parse(rep.body.buf);
		ext_reply_fini(&rep);
		first = cJSON_GetArrayItem(item(j, "NodeNames"), 0);
		if (!cJSON_IsString(first)) {
			cJSON_Delete(j);
			if (gpus == 1)
				break;  /* the cluster is full */
			gpus = 1;
			continue;
		}
		body = bind_args("ml", name, uid, first->valuestring);
		cJSON_Delete(j);
		ext_reply_init(&rep);
		ext_bind(&r->f->svc, body, strlen(body), &rep, NULL);
		free(body);
		b = cJSON_Parse(rep.body.buf);
		ext_reply_fini(&rep);
		if (cJSON_IsString(item(b, "Error")) && !item(b, "Error")->valuestring[0]) {
			r->bound_gpus += gpus;
			if (r->n_bound < sizeof(r->bound) / sizeof(r->bound[0]))
				snprintf(r->bound[r->n_bound++], sizeof(r->bound[0]), "%s", uid);
		} else if (cJSON_IsString(item(b, "Error")) &&
			   strstr(item(b, "Error")->valuestring, "free, pod needs")) {
			r->lost++;
		} else {
			r->unexpected++;
			snprintf(r->last_unexpected, sizeof(r->last_unexpected), "%s",
				 cJSON_IsString(item(b, "Error")) ? item(b, "Error")->valuestring
								   : "(no Error)");
		}
		cJSON_Delete(b);
	}
	return NULL;
}

static void race_round(struct fx *f)
{
	static const char *const usable[] = { "gpu-a100-0", "gpu-a100-1", "gpu-h100-0",
					      "gpu-h100-1", "gpu-v100-0", NULL };
	static struct racer racers[RACERS];
	static char uids[RACERS * 40][64];
	struct cluster_state initial;
	pthread_barrier_t start;
	pthread_t th[RACERS];
	unsigned total = 0;
	size_t n = 0;

	state_take(f, &initial);
	assert_int_equal(pthread_barrier_init(&start, NULL, RACERS), 0);
	for (int i = 0; i < RACERS; i++) {
		memset(&racers[i], 0, sizeof(racers[i]));
		racers[i].f = f;
		racers[i].start = &start;
		racers[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, racer_run, &racers[i]), 0);
	}
	for (int i = 0; i < RACERS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < RACERS; i++) {
		if (racers[i].unexpected)
			fail_msg("racer %d: %u unexpected bind replies, e.g. \"%s\"", i,
				 racers[i].unexpected, racers[i].last_unexpected);
		total += racers[i].bound_gpus;
		for (size_t k = 0; k < racers[i].n_bound; k++)
			memcpy(uids[n++], racers[i].bound[k], sizeof(uids[0]));
	}
	assert_never_overcommitted(f, "after concurrent binds");
	assert_int_equal(total, 31);
	for (const char *const *u = usable; *u; u++)
		assert_int_equal(free_on(f, *u), 0);
	assert_devices_exclusive(f, &initial, (const char (*)[64])uids, n);
}

static void test_ext_bind_concurrent_binds_never_overcommit(void **state)
{
	(void)state;
	for (int round = 0; round < RACE_ROUNDS; round++) {
		void *fx = NULL;

		assert_int_equal(fx_setup(&fx), 0);
		race_round(fx);
		fx_teardown(&fx);
	}
}

/* ============================================================================
 * Bad input: an error reply, never a crash, and nothing changes
 * ========================================================================== */


/* Call every verb with <len> bytes of <body> in an exact-size buffer; each must
 * answer with an error and leave the cache as it was. */
static void expect_rejected_everywhere(struct fx *f, const char *body, size_t len,
				       const char *what)
{
	struct cluster_state before, after;
	char *copy = malloc(len ? len : 1);

	assert_non_null(copy);
	memcpy(copy, body, len);
	state_take(f, &before);
	for (size_t v = 0; v < sizeof(all_verbs) / sizeof(all_verbs[0]); v++) {
		unsigned status = 0;
		cJSON *j = call_len(all_verbs[v], f, copy, len, &status);

		/* prioritize answers an invalid pod with [], which is also a refusal. */
		if (!is_error_reply(status, j) &&
		    !(all_verbs[v] == ext_prioritize && status == 200 && cJSON_IsArray(j) &&
		      cJSON_GetArraySize(j) == 0))
			fail_msg("%s: %s accepted it (status %u)", what, verb_names[v], status);
		cJSON_Delete(j);
	}
	state_take(f, &after);
	assert_state_same(&before, &after, true, what);
	free(copy);
}

static void test_ext_verbs_reject_every_truncation(void **state)
{
	struct fx *f = *state;
	char *bodies[3];

	bodies[0] = names_args(gpu_pod("trunc", 4), cluster_nodes);
	bodies[1] = bind_args("ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010",
			      "gpu-a100-1");
	bodies[2] = strdup(doc_preempt_meta);
	for (size_t b = 0; b < 3; b++) {
		size_t len = strlen(bodies[b]);

		for (size_t cut = 0; cut < len; cut++) {
			char what[64];

			snprintf(what, sizeof(what), "body %zu cut at %zu of %zu", b, cut, len);
			expect_rejected_everywhere(f, bodies[b], cut, what);
		}
		free(bodies[b]);
	}
}

/* <prefix>, <depth> nested arrays, <suffix>; the caller frees. */
static char *nested_arrays(const char *prefix, size_t depth, const char *suffix)
{
	size_t pl = strlen(prefix), sl = strlen(suffix);
	char *s = malloc(pl + depth * 2 + sl + 1);

	assert_non_null(s);
	memcpy(s, prefix, pl);
	memset(s + pl, '[', depth);
	memset(s + pl + depth, ']', depth);
	memcpy(s + pl + 2 * depth, suffix, sl + 1);
	return s;
}

static void test_ext_verbs_reject_deep_nesting(void **state)
{
	struct fx *f = *state;
	char *s;

	s = nested_arrays("", 100000, "");
	expect_rejected_everywhere(f, s, strlen(s), "100000 nested arrays");
	free(s);
	s = nested_arrays("{\"Pod\":", 100000, ",\"NodeNames\":[\"gpu-a100-1\"],"
		   "\"PodName\":\"p\",\"PodUID\":\"u\",\"Node\":\"gpu-a100-1\","
		   "\"NodeNameToMetaVictims\":{}}");
	expect_rejected_everywhere(f, s, strlen(s), "100000 nested arrays under Pod");
	free(s);
	/* Objects nested as deep, each with a key. */
	{
		size_t depth = 100000, at = 0;
		char *o = malloc(depth * 6 + 2);

		assert_non_null(o);
		for (size_t i = 0; i < depth; i++) {
			memcpy(o + at, "{\"a\":", 5);
			at += 5;
		}
		o[at++] = '1';
		memset(o + at, '}', depth);
		at += depth;
		expect_rejected_everywhere(f, o, at, "100000 nested objects");
		free(o);
	}
}

static char *huge_string(size_t n, char c)
{
	char *s = malloc(n + 1);

	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* Each body is before + HUGE + between + HUGE + after: one huge string where
 * filter and prioritize look, one where bind looks. preempt refuses the
 * victim map's type. */
struct huge_case {
	const char *before, *between, *after;
};

#define HUGE_POD_SPEC "\"spec\":{\"containers\":[{\"resources\":{\"limits\":" \
	"{\"nvidia.com/gpu\":\"1\"}}}]}},\"NodeNames\":[\"gpu-a100-1\"],"
#define LLM_UID "6f1c2a3e-0000-4000-8000-000000000010"

static const struct huge_case huge_cases[] = {
	/* pod name; bind's PodName */
	{ "{\"Pod\":{\"metadata\":{\"name\":\"",
	  "\",\"namespace\":\"ml\"}," HUGE_POD_SPEC "\"PodName\":\"",
	  "\",\"PodUID\":\"u\",\"Node\":\"gpu-a100-1\",\"NodeNameToMetaVictims\":7}" },
	/* pod namespace; bind's PodUID */
	{ "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"",
	  "\"}," HUGE_POD_SPEC "\"PodName\":\"p\",\"PodUID\":\"",
	  "\",\"Node\":\"gpu-a100-1\",\"NodeNameToMetaVictims\":7}" },
	/* pod uid; bind's Node, for a pod troupe knows */
	{ "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"uid\":\"",
	  "\"}," HUGE_POD_SPEC "\"PodName\":\"llm-worker-0\",\"PodUID\":\"" LLM_UID
	  "\",\"Node\":\"",
	  "\",\"NodeNameToMetaVictims\":7}" },
	/* GPU quantity; bind's PodNamespace, for a pod troupe knows */
	{ "{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":"
	  "{\"limits\":{\"nvidia.com/gpu\":\"",
	  "\"}}}]}},\"NodeNames\":[\"gpu-a100-1\"],\"PodName\":\"llm-worker-0\","
	  "\"PodUID\":\"" LLM_UID "\",\"Node\":\"gpu-a100-1\",\"PodNamespace\":\"",
	  "\",\"NodeNameToMetaVictims\":7}" },
};

static void test_ext_verbs_reject_huge_strings(void **state)
{
	struct fx *f = *state;
	size_t big = (size_t)1 << 20;

	for (size_t i = 0; i < sizeof(huge_cases) / sizeof(huge_cases[0]); i++) {
		const struct huge_case *c = &huge_cases[i];
		size_t lb = strlen(c->before), lm = strlen(c->between), la = strlen(c->after);
		char *body = malloc(lb + lm + la + 2 * big);
		char what[32];
		char *p = body;

		assert_non_null(body);
		memcpy(p, c->before, lb);
		memset(p += lb, 'a', big);
		memcpy(p += big, c->between, lm);
		memset(p += lm, 'b', big);
		memcpy(p += big, c->after, la);
		snprintf(what, sizeof(what), "huge strings, case %zu", i);
		expect_rejected_everywhere(f, body, lb + lm + la + 2 * big, what);
		free(body);
	}
}

/* A node name far beyond any valid name is not an error, only unknown. */
static void test_ext_filter_huge_node_name_is_unknown(void **state)
{
	struct fx *f = *state;
	char *big = huge_string(70000, 'n');
	const char *const names[] = { big, "gpu-a100-1", NULL };
	struct cluster_state before, after;
	cJSON *j;

	state_take(f, &before);
	j = filter_names(f, "big-name", 1, names);
	assert_false(names_has(j, big));
	assert_true(names_has(j, "gpu-a100-1"));
	assert_string_equal(item(item(j, "FailedNodes"), big)->valuestring,
			    "troupe: node unknown to troupe (not in its cache)");
	cJSON_Delete(j);
	state_take(f, &after);
	assert_state_same(&before, &after, false, "huge node name");
	free(big);
}

static const char *const wrong_typed[] = {
	"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":\"worker\"}},"
	"\"NodeNames\":[\"gpu-a100-1\"],\"PodName\":1,\"NodeNameToMetaVictims\":[]}",
	"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"initContainers\":{}}},"
	"\"NodeNames\":[\"gpu-a100-1\"],\"PodUID\":[],\"NodeNameToVictims\":\"x\"}",
	"{\"Pod\":{\"metadata\":[\"name\",\"p\"]},\"NodeNames\":[\"gpu-a100-1\"],"
	"\"Node\":{},\"NodeNameToMetaVictims\":1}",
	"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":"
	"{\"limits\":{\"nvidia.com/gpu\":[4]}}}]}},\"NodeNames\":[\"gpu-a100-1\"],"
	"\"PodNamespace\":false,\"NodeNameToMetaVictims\":true}",
	"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":"
	"{\"limits\":{\"nvidia.com/gpu\":\"4\"}}}],\"overhead\":{\"nvidia.com/gpu\":{}}}},"
	"\"NodeNames\":[\"gpu-a100-1\"],\"PodName\":null,\"PodUID\":2,"
	"\"NodeNameToMetaVictims\":\"\"}",
	"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":"
	"{\"limits\":{\"nvidia.com/gpu\":\"4\"}}}]}},\"NodeNames\":[4],\"PodUID\":4.5,"
	"\"NodeNameToVictims\":[]}",
};

static void test_ext_verbs_reject_wrong_types(void **state)
{
	struct fx *f = *state;

	for (size_t i = 0; i < sizeof(wrong_typed) / sizeof(wrong_typed[0]); i++)
		expect_rejected_everywhere(f, wrong_typed[i], strlen(wrong_typed[i]),
					   wrong_typed[i]);
}

/* <body> with <ins> (<ins_len> bytes, NULs allowed) inserted after the first
 * <marker>. The caller frees. */
static char *splice(const char *body, const char *marker, const char *ins, size_t ins_len,
		    size_t *len)
{
	const char *at = strstr(body, marker);
	size_t blen = strlen(body), head;
	char *s;

	assert_non_null(at);
	head = (size_t)(at - body) + strlen(marker);
	s = malloc(blen + ins_len);
	assert_non_null(s);
	memcpy(s, body, head);
	memcpy(s + head, ins, ins_len);
	memcpy(s + head + ins_len, body + head, blen - head);
	*len = blen + ins_len;
	return s;
}

struct nul_case {
	verb_fn verb;
	const char *what;
	const char *marker;             /* the NUL goes right after this */
	const char *ins;
	size_t ins_len;
};

/* One valid request per verb: filter and prioritize a 1-GPU pod on gpu-a100-1,
 * bind the pending ml/llm-worker-0 there, preempt from kube-interfaces.md. */
static char *valid_body(verb_fn verb)
{
	static const char *const one[] = { "gpu-a100-1", NULL };

	if (verb == bind_sync)
		return bind_args("ml", "llm-worker-0", LLM_UID, "gpu-a100-1");
	if (verb == ext_preempt)
		return strdup(doc_preempt_meta);
	return names_args(gpu_pod("p", 1), one);
}

/* Each verb refuses its valid request once the NUL is in, leaving the cache
 * as it was, and accepts it without the NUL. */
static void expect_nul_rejected(struct fx *f, const struct nul_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct nul_case *c = &cases[i];
		struct cluster_state before, after;
		char *body = valid_body(c->verb);
		size_t len;
		char *bad = splice(body, c->marker, c->ins, c->ins_len, &len);
		unsigned status = 0;
		bool refused;
		cJSON *j;

		state_take(f, &before);
		j = call_len(c->verb, f, bad, len, &status);
		refused = is_error_reply(status, j) ||
			  (c->verb == ext_prioritize && cJSON_IsArray(j) && !cJSON_GetArraySize(j));
		cJSON_Delete(j);
		free(bad);
		if (!refused) {
			free(body);
			fail_msg("%s: accepted (status %u)", c->what, status);
		}
		state_take(f, &after);
		assert_state_same(&before, &after, true, c->what);
		/* Control: without the NUL the same request is fine. */
		j = call(c->verb, f, body, &status);
		assert_int_equal(status, 200);
		assert_false(is_error_reply(status, j));
		cJSON_Delete(j);
		free(body);
	}
}

/* JSON whitespace is space, tab, CR and LF only; a NUL between tokens makes a
 * body malformed. */
static void test_ext_verbs_reject_nul_between_tokens(void **state)
{
	static const struct nul_case cases[] = {
		{ ext_filter, "filter, NUL after \"Pod\":", "\"Pod\":", "\0", 1 },
		{ ext_prioritize, "prioritize, NUL after \"Pod\":", "\"Pod\":", "\0", 1 },
		{ bind_sync, "bind, NUL after \"PodUID\":", "\"PodUID\":", "\0", 1 },
		{ ext_preempt, "preempt, NUL after \"Pod\":", "\"Pod\":", "\0", 1 },
		{ ext_filter, "filter, NUL before the body", "", "\0", 1 },
	};

	expect_nul_rejected(*state, cases, sizeof(cases) / sizeof(cases[0]));
}

/* A raw NUL inside a string is malformed JSON too (RFC 8259 section 7: control
 * characters in strings must be escaped). Read as a C string it would cut
 * "gpu-a100-1<NUL>evil" to "gpu-a100-1", a name the scheduler never sent, and
 * bind "<uid><NUL>x" to the pod <uid>. */
static void test_ext_verbs_reject_nul_inside_strings(void **state)
{
	static const struct nul_case cases[] = {
		{ ext_filter, "filter, NUL in a node name", "[\"gpu-a100-1", "\0evil", 5 },
		{ ext_prioritize, "prioritize, NUL in a node name", "[\"gpu-a100-1", "\0evil", 5 },
		{ bind_sync, "bind, NUL in PodUID", "\"PodUID\":\"" LLM_UID, "\0x", 2 },
		{ bind_sync, "bind, NUL in Node", "\"Node\":\"gpu-a100-1", "\0x", 2 },
		{ ext_preempt, "preempt, NUL in a victim UID",
		  "\"UID\": \"0c7d9e2f-6a41-4b8e-a3b5-7f1e2d3c4b5a", "\0x", 2 },
	};

	expect_nul_rejected(*state, cases, sizeof(cases) / sizeof(cases[0]));
}

/* "\u0000" is valid JSON, but a name or UID holding U+0000 is not the name
 * or UID before it: it must not alias a real node or pod. */
static void test_ext_verbs_escaped_nul_does_not_alias(void **state)
{
	struct fx *f = *state;
	static const char filter_body[] =
		"{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"uid-esc\"},"
		"\"spec\":{\"containers\":[{\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"1\"}}}]}},\"NodeNames\":[\"gpu-a100-1\\u0000evil\"]}";
	static const char bind_body[] =
		"{\"PodName\":\"llm-worker-0\",\"PodNamespace\":\"ml\",\"PodUID\":\"" LLM_UID
		"\\u0000x\",\"Node\":\"gpu-a100-1\"}";
	struct cluster_state before, after;
	unsigned status = 0;
	bool aliased;
	cJSON *j;


	j = call(ext_filter, f, filter_body, &status);
	aliased = names_has(j, "gpu-a100-1");
	cJSON_Delete(j);
	if (aliased)
		fail_msg("filter answered \"gpu-a100-1\" for \"gpu-a100-1\\u0000evil\"");

	state_take(f, &before);
	j = call(bind_sync, f, bind_body, &status);
	aliased = !is_error_reply(status, j);
	cJSON_Delete(j);
	if (aliased)
		fail_msg("bind of uid \"%s\\u0000x\" succeeded", LLM_UID);
	state_take(f, &after);
	assert_state_same(&before, &after, true, "bind with an escaped NUL in PodUID");
	expect_pod(f, LLM_UID, CACHE_POD_STATE_PENDING, "", 0);
}

/* ============================================================================
 * prioritize from the scores filter left (extender/cycle.h)
 * ========================================================================== */

static uint64_t cy_rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A cluster of <n> nodes of three known boards (by GFD labels) and one
 * unknown, some not Ready or cordoned or short of allocatable, with random
 * devices held; topology classes derived as troupe does. */
static struct cache *cy_cluster(struct ext_config *cfg, struct placement_registry *reg, int n,
				uint64_t *rng)
{
	static const char *const product[4] = { "NVIDIA-A100-SXM4-80GB", "Tesla-V100-SXM2-16GB",
						"NVIDIA-H100-80GB-HBM3", "Acme-X1" };
	static const unsigned count[4] = { 8, 8, 4, 8 };
	char err[CACHE_ERR_LEN], text[1024];
	struct cache *c;

	ext_config_defaults(cfg);
	cfg->cache.node_derive = placement_topo_derive;
	cfg->cache.node_release = placement_topo_release;
	cfg->cache.hook_ctx = reg;
	c = cache_new(&cfg->cache);
	assert_non_null(c);
	for (int i = 0; i < n; i++) {
		int b = (int)(cy_rng(rng) % 4);
		unsigned cap = count[b], alloc = cap - (cy_rng(rng) % 5 == 0 ? 1 : 0);
		uint64_t held = cy_rng(rng) & ((1u << cap) - 1) & cy_rng(rng);
		struct cache_node *node;
		cJSON *j;

		snprintf(text, sizeof(text),
			 "{\"metadata\":{\"name\":\"cy-%d\",\"labels\":{\"nvidia.com/gpu.product\":"
			 "\"%s\",\"nvidia.com/gpu.count\":\"%u\"}},\"spec\":{\"unschedulable\":%s},"
			 "\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"%u\"},\"allocatable\":"
			 "{\"nvidia.com/gpu\":\"%u\",\"cpu\":\"64\",\"memory\":\"512Gi\"},"
			 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
			 i, product[b], cap, cy_rng(rng) % 30 == 0 ? "true" : "false", cap, alloc,
			 cy_rng(rng) % 30 == 0 ? "False" : "True");
		j = cJSON_Parse(text);
		node = cache_node_parse(j, &cfg->cache, err, sizeof(err));
		cJSON_Delete(j);
		assert_non_null(node);
		assert_int_equal(cache_node_upsert(c, node), 0);
		for (unsigned d = 0; d < cap; d++) {
			struct cache_pod *pod;

			if (!(held & (1u << d)))
				continue;
			snprintf(text, sizeof(text),
				 "{\"metadata\":{\"name\":\"h-%d-%u\",\"namespace\":\"ml\",\"uid\":"
				 "\"h-%d-%u\",\"annotations\":{\"troupe.io/gpu-ids\":\"%u\"}},"
				 "\"spec\":{\"nodeName\":\"cy-%d\",\"containers\":[{\"name\":\"w\","
				 "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
				 "\"status\":{\"phase\":\"Running\"}}", i, d, i, d, d, i);
			j = cJSON_Parse(text);
			pod = cache_pod_parse(j, &cfg->cache, err, sizeof(err));
			cJSON_Delete(j);
			assert_non_null(pod);
			assert_int_equal(cache_pod_apply(c, pod), 0);
		}
	}
	cache_set_synced(c, true);
	return c;
}

/* The whole reply of <verb> for <body>, as text (caller frees). */
static char *cy_call(verb_fn verb, const struct ext_service *svc, const char *body)
{
	struct ext_reply r;
	char *out;

	ext_reply_init(&r);
	verb(svc, body, strlen(body), &r);
	assert_int_equal(r.status, 200);
	out = strdup(r.body.buf ? r.body.buf : "");
	ext_reply_fini(&r);
	return out;
}

/* Property: prioritize answers exactly what it answers with no filter scores
 * to reuse, over random clusters, pods (1 to 8 GPUs, topology policies) and
 * name lists: the names filter passed; a subsequence of them with a failing
 * node and an unknown one mixed in (other plugins drop, kube-scheduler never
 * adds, but troupe must not care); the passed names reversed; and after the
 * cache changed between filter and prioritize. The reuse must really happen
 * in the first two kinds, and never after a change. */
static void test_ext_prioritize_from_filter_equals_fresh(void **state)
{
	static const char *const policies[] = { NULL, "preferred", "none", "required" };
	struct placement_registry *reg = placement_registry_new();
	struct ext_config cfg;
	uint64_t rng = 0xc7c1e, used0 = 0, stale0 = 0, names0 = 0, used, stale, reused;
	struct ext_service svc = { 0 };
	struct cache *c;
	enum { N = 300 };

	(void)state;
	assert_non_null(reg);
	c = cy_cluster(&cfg, reg, N, &rng);
	svc.cache = c;
	svc.cfg = &cfg;
	svc.score = placement_score_find("topology");
	svc.source = "test";
	svc.cycle = ext_cycle_new();
	assert_non_null(svc.cycle);
	for (int round = 0; round < 80; round++) {
		int kind = round % 4;
		unsigned k = 1u << (cy_rng(&rng) % 4);
		const char *pol = policies[cy_rng(&rng) % 4];
		char podname[32], res[300], *fbody, *pbody, *fans, *with, *fresh;
		const char *names[N + 2];
		size_t nn = 0;
		cJSON *ans, *pass, *pod, *it;
		struct ext_cycle *cycle = svc.cycle;

		snprintf(podname, sizeof(podname), "cy-pod-%d", round);
		snprintf(res, sizeof(res), "{\"limits\":{\"nvidia.com/gpu\":\"%u\"}}", k);
		pod = pod_with(podname, res);
		if (pol)
			cJSON_AddItemToObject(cJSON_AddObjectToObject(cJSON_GetObjectItem(pod,
											   "metadata"),
								      "annotations"),
					      "troupe.io/topology", cJSON_CreateString(pol));
		/* Filter over a random two thirds of the nodes, in random order. */
		{
			static char nm[N][16];

			for (int i = 0; i < N; i++) {
				snprintf(nm[i], sizeof(nm[i]), "cy-%d", i);
				if (cy_rng(&rng) % 3)
					names[nn++] = nm[i];
			}
		}
		for (size_t i = nn - 1; i > 0; i--) {
			size_t j = cy_rng(&rng) % (i + 1);
			const char *t = names[i];

			names[i] = names[j];
			names[j] = t;
		}
		names[nn] = NULL;
		fbody = names_args(cJSON_Duplicate(pod, true), names);
		fans = cy_call(ext_filter, &svc, fbody);
		ans = cJSON_Parse(fans);
		pass = cJSON_GetObjectItemCaseSensitive(ans, "NodeNames");
		assert_true(cJSON_IsArray(pass));
		/* The prioritize list. */
		nn = 0;
		cJSON_ArrayForEach(it, pass) {
			if (kind == 1 && cy_rng(&rng) % 3 == 0)
				continue;       /* dropped by another plugin */
			names[nn++] = it->valuestring;
			if (kind == 1 && nn == 3)
				names[nn++] = "ghost-0";
		}
		if (kind == 1)
			names[nn++] = "cy-0";   /* may or may not have passed */
		if (kind == 2)
			for (size_t i = 0; i < nn / 2; i++) {
				const char *t = names[i];

				names[i] = names[nn - 1 - i];
				names[nn - 1 - i] = t;
			}
		names[nn] = NULL;
		pbody = names_args(cJSON_Duplicate(pod, true), names);
		if (kind == 3 && nn > 0) {
			/* A bind in between: the first passed node loses devices. */
			char err[CACHE_ERR_LEN], text[600];
			struct cache_pod *p;
			char uid[32];
			int r = -EAGAIN;
			cJSON *j;

			snprintf(text, sizeof(text),
				 "{\"metadata\":{\"name\":\"b-%d\",\"namespace\":\"ml\",\"uid\":\"b-%d\"},"
				 "\"spec\":{\"containers\":[{\"name\":\"w\",\"resources\":{\"limits\":"
				 "{\"nvidia.com/gpu\":\"1\"}}}]}}", round, round);
			j = cJSON_Parse(text);
			p = cache_pod_parse(j, &cfg.cache, err, sizeof(err));
			cJSON_Delete(j);
			assert_non_null(p);
			assert_int_equal(cache_pod_remember(c, p), 0);
			snprintf(uid, sizeof(uid), "b-%d", round);
			for (unsigned d = 0; d < 8 && r != 0; d++)
				r = cache_pod_assume(c, uid, names[0], &(uint64_t){ 1ULL << d });
			if (r != 0)
				nn = 0;         /* the node had nothing free: nothing changed */
		}
		with = cy_call(ext_prioritize, &svc, pbody);
		svc.cycle = NULL;
		fresh = cy_call(ext_prioritize, &svc, pbody);
		svc.cycle = cycle;
		if (strcmp(with, fresh) != 0)
			fail_msg("round %d (kind %d, %u GPUs, policy %s): prioritize from filter "
				 "answered\n%.400s\nbut afresh\n%.400s", round, kind, k,
				 pol ? pol : "(none)", with, fresh);
		ext_cycle_get_stats(svc.cycle, &used, &stale, &reused);
		if (kind <= 1 && nn > 0)
			assert_int_equal(used, used0 + 1);
		/* Every name filter passed was answered from its score: all of
		 * them in order, all but the two added in the subsequence. */
		if (kind == 0)
			assert_int_equal(reused - names0, nn);
		if (kind == 1)
			assert_true(reused - names0 + 2 >= nn && reused - names0 <= nn - 1);
		if (kind == 3 && nn > 0) {
			/* (nn == 0 here when no device could be taken: no change) */
			assert_int_equal(used, used0);
			assert_int_equal(stale, stale0 + 1);
		}
		used0 = used;
		stale0 = stale;
		names0 = reused;
		free(with);
		free(fresh);
		free(pbody);
		cJSON_Delete(ans);
		free(fans);
		free(fbody);
		cJSON_Delete(pod);
	}
	ext_cycle_free(svc.cycle);
	cache_free(c);
	placement_registry_free(reg);
}

/* The few entries kept: the oldest goes when a fifth pod is filtered; a pod
 * filtered again replaces its entry; an entry serves one prioritize; a pod whose
 * request changed since its filter is scored afresh. Every answer equals a
 * fresh one. */
static void test_ext_prioritize_from_filter_entries(void **state)
{
	struct placement_registry *reg = placement_registry_new();
	struct ext_service svc = { 0 };
	struct ext_config cfg;
	uint64_t rng = 0x5eed, used, stale, names;
	const char *list[41];
	char nm[40][16], *fb[6], *pb[6];
	struct cache *c;

	(void)state;
	assert_non_null(reg);
	c = cy_cluster(&cfg, reg, 40, &rng);
	svc.cache = c;
	svc.cfg = &cfg;
	svc.score = placement_score_find("topology");
	svc.source = "test";
	svc.cycle = ext_cycle_new();
	for (int i = 0; i < 40; i++) {
		snprintf(nm[i], sizeof(nm[i]), "cy-%d", i);
		list[i] = nm[i];
	}
	list[40] = NULL;
	/* Pods 0..4 ask 1 GPU; 5 is pod 0 again (same UID) asking 2. */
	for (int p = 0; p < 6; p++) {
		char name[16];

		snprintf(name, sizeof(name), "e-%d", p % 5);
		fb[p] = names_args(gpu_pod(name, p == 5 ? 2 : 1), list);
		pb[p] = names_args(gpu_pod(name, p == 5 ? 2 : 1), list);
	}
#define EXPECT(body, n_used, n_stale)                                                    \
	do {                                                                             \
		char *with = cy_call(ext_prioritize, &svc, body), *fresh;                \
		struct ext_cycle *keep = svc.cycle;                                      \
                                                                                         \
		svc.cycle = NULL;                                                        \
		fresh = cy_call(ext_prioritize, &svc, body);                             \
		svc.cycle = keep;                                                        \
		assert_string_equal(with, fresh);                                        \
		ext_cycle_get_stats(svc.cycle, &used, &stale, &names);                   \
		assert_int_equal(used, n_used);                                          \
		assert_int_equal(stale, n_stale);                                        \
		free(with);                                                              \
		free(fresh);                                                             \
	} while (0)
	for (int p = 0; p < 5; p++)
		free(cy_call(ext_filter, &svc, fb[p]));
	EXPECT(pb[0], 0, 0);    /* the oldest of five went */
	EXPECT(pb[4], 1, 0);
	EXPECT(pb[4], 1, 0);    /* taken: a second prioritize scores afresh */
	free(cy_call(ext_filter, &svc, fb[1]));
	free(cy_call(ext_filter, &svc, fb[1]));  /* filtered again: replaces its entry */
	EXPECT(pb[1], 2, 0);
	EXPECT(pb[2], 3, 0);
	/* Pod e-0 filtered asking 2 GPUs, then prioritized asking 1. */
	free(cy_call(ext_filter, &svc, fb[5]));
	EXPECT(pb[0], 3, 1);
#undef EXPECT
	assert_true(names > 0);
	for (int p = 0; p < 6; p++) {
		free(fb[p]);
		free(pb[p]);
	}
	ext_cycle_free(svc.cycle);
	cache_free(c);
	placement_registry_free(reg);
}

/* ============================================================================
 * preempt
 * ========================================================================== */

static void test_ext_preempt_passes_meta_victims_through(void **state)
{
	struct fx *f = *state;
	static const char *const keys[] = { "NodeNameToMetaVictims", NULL };
	unsigned status = 0;
	cJSON *in = cJSON_Parse(doc_preempt_meta);
	cJSON *j = call(ext_preempt, f, doc_preempt_meta, &status);

	assert_int_equal(status, 200);
	assert_keys_exactly(j, keys);
	assert_true(cJSON_Compare(item(j, "NodeNameToMetaVictims"),
				  item(in, "NodeNameToMetaVictims"), true));
	cJSON_Delete(j);
	cJSON_Delete(in);
}

static void test_ext_preempt_full_victims_come_back_as_uids(void **state)
{
	struct fx *f = *state;
	static const char body[] =
		"{\"Pod\":{\"metadata\":{\"name\":\"train-0\",\"namespace\":\"ml\",\"uid\":\"p\"}},"
		"\"NodeNameToMetaVictims\":null,\"NodeNameToVictims\":{"
		"\"gpu-a100-0\":{\"Pods\":[{\"metadata\":{\"name\":\"resnet-0\","
		"\"namespace\":\"ml\","
		"\"uid\":\"6f1c2a3e-0000-4000-8000-000000000001\"},\"spec\":{\"nodeName\":"
		"\"gpu-a100-0\"}}],\"NumPDBViolations\":2},"
		"\"gpu-h100-0\":{\"Pods\":[{\"metadata\":{\"name\":\"a\",\"uid\":\"u-a\"}},"
		"{\"metadata\":{\"name\":\"b\",\"uid\":\"u-b\"}}],\"NumPDBViolations\":0}}}";
	static const char want[] =
		"{\"gpu-a100-0\":{\"Pods\":[{\"UID\":\"6f1c2a3e-0000-4000-8000-000000000001\"}],"
		"\"NumPDBViolations\":2},"
		"\"gpu-h100-0\":{\"Pods\":[{\"UID\":\"u-a\"},{\"UID\":\"u-b\"}],"
		"\"NumPDBViolations\":0}}";
	static const char *const keys[] = { "NodeNameToMetaVictims", NULL };
	unsigned status = 0;
	cJSON *w = cJSON_Parse(want);
	cJSON *j = call(ext_preempt, f, body, &status);

	assert_int_equal(status, 200);
	assert_keys_exactly(j, keys);
	assert_true(cJSON_Compare(item(j, "NodeNameToMetaVictims"), w, true));
	cJSON_Delete(j);
	cJSON_Delete(w);
}

static void test_ext_preempt_without_victims_is_empty_map(void **state)
{
	struct fx *f = *state;
	unsigned status = 0;
	cJSON *j = call(ext_preempt, f, "{\"Pod\":{},\"NodeNameToVictims\":null,"
			"\"NodeNameToMetaVictims\":null}", &status);

	assert_int_equal(status, 200);
	assert_true(cJSON_IsObject(item(j, "NodeNameToMetaVictims")));
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNameToMetaVictims")), 0);
	cJSON_Delete(j);

	j = call(ext_preempt, f, "{\"NodeNameToMetaVictims\":[", &status);
	assert_int_equal(status, 400);
	assert_contains(error_of(j), "bad preempt request");
	cJSON_Delete(j);
}

/* ============================================================================
 * /debug/state
 * ========================================================================== */

static void test_ext_debug_state_lists_nodes(void **state)
{
	struct fx *f = *state;
	struct ext_reply r;
	const cJSON *nodes, *it;
	cJSON *j;
	size_t n = 0;

	ext_reply_init(&r);
	ext_debug_state(&f->svc, &r);
	j = cJSON_ParseWithLengthOpts(r.body.buf, r.body.len + 1, NULL, 1);
	ext_reply_fini(&r);
	assert_non_null(j);
	assert_true(cJSON_IsTrue(item(j, "synced")));
	assert_string_equal(item(j, "source")->valuestring, "test");
	assert_int_equal(item(item(j, "stats"), "nodes")->valueint, 8);
	nodes = item(j, "nodes");
	assert_true(cJSON_IsArray(nodes));
	cJSON_ArrayForEach(it, nodes) {
		const char *name = item(it, "name")->valuestring;
		bool known = false;

		for (const char *const *c = cluster_nodes; *c; c++)
			known |= strcmp(*c, name) == 0;
		assert_true(known);
		if (strcmp(name, "gpu-a100-0") == 0) {
			assert_int_equal(item(it, "gpuFree")->valueint, 4);
			assert_string_equal(item(it, "devicesHeld")->valuestring, "0,1,2,3");
		}
		if (strcmp(name, "gpu-h100-0") == 0)
			assert_int_equal(item(it, "gpuUnattributed")->valueint, 2);
		if (strcmp(name, "gpu-l4-0") == 0)
			assert_true(cJSON_IsTrue(item(it, "unschedulable")));
		if (strcmp(name, "gpu-t4-0") == 0)
			assert_true(cJSON_IsFalse(item(it, "ready")));
		n++;
	}
	assert_int_equal(n, 8);
	cJSON_Delete(j);
}

/* ---- Shipped configuration files ----------------------------------------- */

/* config/troupe.yaml documents every default: loading it must change nothing. */
static void test_ext_config_shipped_troupe_yaml_is_the_defaults(void **state)
{
	struct ext_config def, file;
	char err[EXT_ERR_LEN] = "";

	(void)state;
	ext_config_defaults(&def);
	ext_config_defaults(&file);
	file.listen_port = 1;   /* the file must set it back */
	file.weights.packing = 7;
	if (ext_config_load(&file, TROUPE_SOURCE_ROOT "/config/troupe.yaml", err, sizeof(err)) < 0)
		fail_msg("config/troupe.yaml: %s", err);
	assert_string_equal(file.listen_host, def.listen_host);
	assert_int_equal(file.listen_port, def.listen_port);
	assert_int_equal(file.log_level, def.log_level);
	assert_int_equal(file.threads, def.threads);
	assert_int_equal(file.connection_limit, def.connection_limit);
	assert_int_equal(file.connection_timeout_s, def.connection_timeout_s);
	assert_int_equal(file.max_body_bytes, def.max_body_bytes);
	assert_string_equal(file.path_prefix, def.path_prefix);
	assert_int_equal(file.cache.n_gpu_resources, def.cache.n_gpu_resources);
	assert_string_equal(file.cache.gpu_resources[0], def.cache.gpu_resources[0]);
	assert_string_equal(file.score_policy, def.score_policy);
	assert_true(file.weights.packing == def.weights.packing);
	assert_int_equal(file.informer.access_check_s, def.informer.access_check_s);
	assert_int_equal(ext_config_validate(&file, err, sizeof(err)), 0);
}

static const cJSON *child(const cJSON *o, const char *k)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!it)
		fail_msg("scheduler-config.yaml: missing %s", k);
	return it;
}

/* config/scheduler-config.yaml must register troupe the way troupe serves:
 * the four verbs at troupe's paths, names-only requests, GPUs managed, a
 * positive weight, and a timeout long enough for held binds. */
static void test_ext_config_shipped_scheduler_config_matches_troupe(void **state)
{
	char *buf = NULL, err[256];
	size_t len;
	cJSON *docs;
	const cJSON *doc, *ext, *mr;
	struct ext_config def;
	const char *timeout;

	(void)state;
	ext_config_defaults(&def);
	assert_int_equal(util_read_file(TROUPE_SOURCE_ROOT "/config/scheduler-config.yaml",
					1 << 20, &buf, &len), 0);
	docs = yamljson_parse(buf, len, err, sizeof(err));
	if (!docs)
		fail_msg("scheduler-config.yaml: %s", err);
	doc = cJSON_GetArrayItem(docs, 0);
	assert_string_equal(child(doc, "apiVersion")->valuestring,
			    "kubescheduler.config.k8s.io/v1");
	assert_string_equal(child(doc, "kind")->valuestring, "KubeSchedulerConfiguration");
	assert_int_equal(cJSON_GetArraySize(child(doc, "extenders")), 1);
	ext = cJSON_GetArrayItem(child(doc, "extenders"), 0);
	assert_string_equal(child(ext, "filterVerb")->valuestring, "filter");
	assert_string_equal(child(ext, "prioritizeVerb")->valuestring, "prioritize");
	assert_string_equal(child(ext, "bindVerb")->valuestring, "bind");
	assert_string_equal(child(ext, "preemptVerb")->valuestring, "preempt");
	assert_true(cJSON_IsTrue(child(ext, "nodeCacheCapable")));
	assert_true(cJSON_IsFalse(child(ext, "ignorable")));
	assert_true(child(ext, "weight")->valuedouble > 0);
	timeout = child(ext, "httpTimeout")->valuestring;
	assert_non_null(timeout);
	/* A Go duration in seconds, at least kube-scheduler's 5 s default. */
	assert_true(strtol(timeout, NULL, 10) >= 5 && strcmp(timeout + strlen(timeout) - 1, "s") == 0);
	mr = cJSON_GetArrayItem(child(ext, "managedResources"), 0);
	assert_string_equal(child(mr, "name")->valuestring, def.cache.gpu_resources[0]);
	assert_true(cJSON_IsBool(child(mr, "ignoredByScheduler")));
	assert_true(strncmp(child(ext, "urlPrefix")->valuestring, "http", 4) == 0);
	cJSON_Delete(docs);
	free(buf);
}

/* ---- preempt: keep only candidates where eviction really helps --------------- */

static cJSON *preempt_call(struct fx *f, unsigned gpus, const char *victims_json)
{
	char body[2048];

	snprintf(body, sizeof(body),
		 "{\"Pod\":{\"metadata\":{\"name\":\"big\",\"namespace\":\"ml\",\"uid\":\"u-big\"},"
		 "\"spec\":{\"priority\":1000,\"containers\":[{\"name\":\"w\",\"resources\":{\"limits\":"
		 "{\"nvidia.com/gpu\":\"%u\"}}}]}},\"NodeNameToVictims\":null,"
		 "\"NodeNameToMetaVictims\":%s}", gpus, victims_json);
	return call(ext_preempt, f, body, NULL);
}

static void test_ext_preempt_keeps_only_nodes_where_eviction_frees_enough(void **state)
{
	struct fx *f = *state;
	cJSON *out;
	const cJSON *m;

	/* gpu-a100-0: resnet-0 holds devices 0-3. Evicting it frees 8 for an 8-GPU
	 * pod: kept. gpu-h100-0: bert-finetune holds 2 GPUs; evicting a pod troupe
	 * does not know frees nothing, and 6 free are not 8: dropped. */
	out = preempt_call(f, 8, "{\"gpu-a100-0\":{\"Pods\":[{\"UID\":"
			      "\"6f1c2a3e-0000-4000-8000-000000000001\"}],\"NumPDBViolations\":1},"
			      "\"gpu-h100-0\":{\"Pods\":[{\"UID\":\"not-known\"}],\"NumPDBViolations\":0}}");
	m = item(out, "NodeNameToMetaVictims");
	assert_non_null(item(m, "gpu-a100-0"));
	assert_int_equal(item(item(m, "gpu-a100-0"), "NumPDBViolations")->valuedouble, 1);
	assert_null(item(m, "gpu-h100-0"));
	cJSON_Delete(out);
	/* Evicting bert-finetune on gpu-h100-0 frees its 2: 8 free, kept. */
	out = preempt_call(f, 8, "{\"gpu-h100-0\":{\"Pods\":[{\"UID\":"
			      "\"6f1c2a3e-0000-4000-8000-000000000002\"}],\"NumPDBViolations\":0}}");
	assert_non_null(item(item(out, "NodeNameToMetaVictims"), "gpu-h100-0"));
	cJSON_Delete(out);
	/* An empty victim list is never proposed; unknown nodes are dropped. */
	out = preempt_call(f, 1, "{\"gpu-a100-1\":{\"Pods\":[],\"NumPDBViolations\":0},"
			      "\"nowhere\":{\"Pods\":[{\"UID\":\"x\"}],\"NumPDBViolations\":0}}");
	assert_null(item(item(out, "NodeNameToMetaVictims"), "gpu-a100-1"));
	assert_null(item(item(out, "NodeNameToMetaVictims"), "nowhere"));
	cJSON_Delete(out);
}

static void test_ext_preempt_never_splits_a_bound_gang(void **state)
{
	struct fx *f = *state;
	char err[CACHE_ERR_LEN];
	cJSON *out, *o;

	/* Two members of gang ml/team bound on two nodes. Evicting one of them
	 * would leave the gang half running: that candidate is dropped. */
	for (int i = 0; i < 2; i++) {
		char json[1024];

		snprintf(json, sizeof(json),
			 "{\"metadata\":{\"name\":\"team-%d\",\"namespace\":\"ml\",\"uid\":\"team-%d\","
			 "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"team\"}},"
			 "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"w\",\"resources\":"
			 "{\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]},\"status\":{\"phase\":\"Running\"}}",
			 i, i, i ? "gpu-h100-1" : "gpu-a100-1");
		o = cJSON_Parse(json);
		assert_int_equal(cache_pod_apply(f->cache, cache_pod_parse(o, &f->cfg.cache, err,
									   sizeof(err))), 0);
		cJSON_Delete(o);
	}
	out = preempt_call(f, 8, "{\"gpu-a100-1\":{\"Pods\":[{\"UID\":\"team-0\"}],"
			      "\"NumPDBViolations\":0}}");
	assert_null(item(item(out, "NodeNameToMetaVictims"), "gpu-a100-1"));
	cJSON_Delete(out);
	/* With partial preemption allowed, the same candidate is kept. */
	f->cfg.gang.allow_partial_preemption = true;
	out = preempt_call(f, 8, "{\"gpu-a100-1\":{\"Pods\":[{\"UID\":\"team-0\"}],"
			      "\"NumPDBViolations\":0}}");
	assert_non_null(item(item(out, "NodeNameToMetaVictims"), "gpu-a100-1"));
	cJSON_Delete(out);
}

/* gang.domain_levels: coarse to fine, alternatives split on "|". */
static void test_ext_config_domain_levels(void **state)
{
	struct ext_config cfg;
	char path[] = "/tmp/troupe-levels-XXXXXX", err[EXT_ERR_LEN] = "";
	int fd = mkstemp(path);
	const char *text = "gang:\n  domain_levels:\n  - topology.kubernetes.io/zone\n"
			   "  - rack|network.topology.nvidia.com/block\n";

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ext_config_defaults(&cfg);
	assert_int_equal(ext_config_load(&cfg, path, err, sizeof(err)), 0);
	assert_int_equal(cfg.gang.levels.n, 2);
	assert_string_equal(cfg.gang.levels.keys[0][0], "topology.kubernetes.io/zone");
	assert_null(cfg.gang.levels.keys[0][1]);
	assert_string_equal(cfg.gang.levels.keys[1][0], "rack");
	assert_string_equal(cfg.gang.levels.keys[1][1], "network.topology.nvidia.com/block");
	{
		FILE *f = fopen(path, "w");

		assert_non_null(f);
		fputs("gang:\n  domain_levels: []\n", f);
		fclose(f);
	}
	assert_int_equal(ext_config_load(&cfg, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "gang.domain_levels"));
	unlink(path);
}

int main(void)
{
#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ext_config_domain_levels),
		cmocka_unit_test_setup_teardown(test_ext_preempt_keeps_only_nodes_where_eviction_frees_enough,
						fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_ext_preempt_never_splits_a_bound_gang, fx_setup,
						fx_teardown),
		/* codec */
		cmocka_unit_test(test_ext_args_decode_names_mode_request),
		cmocka_unit_test(test_ext_args_decode_names_fast_path_matches_cjson),
		cmocka_unit_test(test_ext_args_decode_names_before_a_large_pod),
		cmocka_unit_test(test_ext_args_decode_finds_each_full_node_text),
		cmocka_unit_test(test_ext_args_decode_full_mode_request),
		cmocka_unit_test(test_ext_args_decode_no_nodes),
		cmocka_unit_test(test_ext_args_decode_rejects_with_a_reason),
		cmocka_unit_test(test_ext_bind_args_decode_reads_every_field),
		cmocka_unit_test(test_ext_bind_args_decode_missing_fields_are_empty),
		cmocka_unit_test(test_ext_bind_args_decode_rejects_with_a_reason),
		cmocka_unit_test(test_ext_preempt_decode_meta_full_and_none),
		cmocka_unit_test(test_ext_preempt_decode_rejects_with_a_reason),
		cmocka_unit_test(test_ext_filter_out_encode_names_mode_round_trips),
		cmocka_unit_test(test_ext_filter_out_encode_none_pass_is_empty_array),
		cmocka_unit_test(test_ext_filter_out_encode_full_mode_echoes_objects),
		cmocka_unit_test(test_ext_encode_error_round_trips),
		/* config */
		cmocka_unit_test(test_ext_config_defaults_values),
		cmocka_unit_test(test_ext_config_load_sets_every_key),
		cmocka_unit_test(test_ext_config_load_empty_file_keeps_defaults),
		cmocka_unit_test(test_ext_config_load_unknown_key_names_dotted_path),
		cmocka_unit_test(test_ext_config_load_wrong_type_names_key),
		cmocka_unit_test(test_ext_config_load_rejects_unusable_files),
		cmocka_unit_test(test_ext_config_parse_listen_table),
		cmocka_unit_test(test_ext_config_validate_table),
		cmocka_unit_test(test_ext_config_shipped_troupe_yaml_is_the_defaults),
		cmocka_unit_test(test_ext_config_shipped_scheduler_config_matches_troupe),
		/* filter */
		FX(test_ext_filter_names_mode_verdicts),
		FX(test_ext_filter_changes_no_usage),
		FX(test_ext_filter_none_fit_gives_empty_array),
		FX(test_ext_filter_both_null_passes_zero_nodes),
		FX(test_ext_filter_names_round_trip_through_escaping),
		FX(test_ext_filter_full_mode_request_objects_are_authoritative),
		FX(test_ext_filter_full_mode_nameless_node_is_refused),
		FX(test_ext_filter_pod_without_gpus_passes_every_node),
		FX(test_ext_filter_invalid_gpu_request_is_an_error),
		FX(test_ext_filter_malformed_json_is_400),
		FX(test_ext_filter_before_sync_is_an_error),
		FX(test_ext_readyz_on_a_snapshot),
		FX(test_ext_filter_pod_without_name_is_an_error),
		FX(test_ext_filter_huge_node_name_is_unknown),
		/* prioritize */
		FX(test_ext_prioritize_scores_every_input_node),
		FX(test_ext_prioritize_full_mode_uses_request_objects),
		FX(test_ext_prioritize_bad_requests),
		cmocka_unit_test(test_ext_prioritize_from_filter_equals_fresh),
		cmocka_unit_test(test_ext_prioritize_from_filter_entries),
		/* bind */
		FX(test_ext_bind_after_filter_assumes_gpus),
		FX(test_ext_bind_is_idempotent_for_same_node),
		FX(test_ext_bind_to_another_node_after_success_is_an_error),
		FX(test_ext_bind_of_a_bound_pod),
		FX(test_ext_bind_of_a_known_pending_pod),
		FX(test_ext_bind_refusals_change_nothing),
		FX(test_ext_bind_after_a_refusal_still_works),
		FX(test_ext_bind_malformed_is_400),
		FX(test_ext_filter_bind_sequence_never_overcommits),
		cmocka_unit_test(test_ext_bind_concurrent_binds_never_overcommit),
		/* bad input */
		FX(test_ext_verbs_reject_every_truncation),
		FX(test_ext_verbs_reject_deep_nesting),
		FX(test_ext_verbs_reject_huge_strings),
		FX(test_ext_verbs_reject_wrong_types),
		FX(test_ext_verbs_reject_nul_between_tokens),
		FX(test_ext_verbs_reject_nul_inside_strings),
		FX(test_ext_verbs_escaped_nul_does_not_alias),
		/* preempt, debug */
		FX(test_ext_preempt_passes_meta_victims_through),
		FX(test_ext_preempt_full_victims_come_back_as_uids),
		FX(test_ext_preempt_without_victims_is_empty_map),
		FX(test_ext_debug_state_lists_nodes),
	};
#undef FX

	/* Refusals are logged as warnings; keep the test output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
