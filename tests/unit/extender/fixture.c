/* The extender unit tests' shared fixture: the test cluster (tests/data/
 * cluster.json, described in fixture.h) behind an ext_service without gangs
 * (fx_setup), the request builders, and the cluster-state checks. The
 * fixture with a gang manager and a fake binder is gang_fixture.c.
 */
#include "fixture.h"

/* The request shapes of kube-interfaces.md sections 2, 4 and 5. */
const char doc_filter_full[] =
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

const char doc_filter_names[] =
	"{\"Pod\": {\"metadata\": {\"name\": \"train-0\", \"namespace\": \"ml\", "
	"\"uid\": \"5b0e6c1a-1f3d-4a5e-9c11-0d2f8a7e4b10\"}, "
	"\"spec\": {\"containers\": [{\"name\": \"worker\", "
	"\"resources\": {\"limits\": {\"nvidia.com/gpu\": \"4\"}}}]}}, "
	"\"Nodes\": null, \"NodeNames\": [\"gpu-a\", \"gpu-b\", \"gpu-c\"]}";

const char doc_bind[] =
	"{\"PodName\": \"train-0\", \"PodNamespace\": \"ml\", "
	"\"PodUID\": \"5b0e6c1a-1f3d-4a5e-9c11-0d2f8a7e4b10\", \"Node\": \"gpu-a\"}";

const char doc_preempt_meta[] =
	"{\"Pod\": {\"metadata\": {\"name\": \"train-0\", \"namespace\": \"ml\", "
	"\"uid\": \"5b0e6c1a-1f3d-4a5e-9c11-0d2f8a7e4b10\"}, \"spec\": {\"priority\": 1000}}, "
	"\"NodeNameToVictims\": null, "
	"\"NodeNameToMetaVictims\": {"
	"\"gpu-a\": {\"Pods\": [{\"UID\": \"0c7d9e2f-6a41-4b8e-a3b5-7f1e2d3c4b5a\"}], "
	"\"NumPDBViolations\": 0}, "
	"\"gpu-b\": {\"Pods\": [{\"UID\": \"9a8b7c6d-1e2f-4a3b-8c9d-0e1f2a3b4c5d\"}, "
	"{\"UID\": \"1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e\"}], \"NumPDBViolations\": 1}}}";

const char *const cluster_nodes[] = {
	"gpu-a100-0", "gpu-a100-1", "gpu-h100-0", "gpu-h100-1", "gpu-v100-0",
	"gpu-l4-0", "gpu-t4-0", "cpu-0", NULL,
};

/* Every node of the cluster and one troupe has never heard of. */
const char *const request_nodes[] = {
	"gpu-a100-0", "gpu-a100-1", "gpu-h100-0", "gpu-h100-1", "gpu-v100-0",
	"gpu-l4-0", "gpu-t4-0", "cpu-0", "ghost-0", NULL,
};

/* ---- The test cluster behind an ext_service ---------------------------------- */

/* Fill <f> in place: the cache keeps pointers into f->cfg (the GPU resource
 * names), so <f> must not move afterwards. */
int fx_init(struct fx *f)
{
	char err[CACHE_ERR_LEN] = "";

	memset(f, 0, sizeof(*f));
	ext_config_defaults(&f->cfg);
	f->cache = cache_new(&f->cfg.cache);
	if (!f->cache || cache_snapshot_load(f->cache, TEST_CLUSTER, err, sizeof(err)) < 0) {
		print_error("cannot load %s: %s\n", TEST_CLUSTER, err);
		cache_free(f->cache);
		return -1;
	}
	cache_set_synced(f->cache, true);
	f->svc.cache = f->cache;
	f->svc.cfg = &f->cfg;
	f->svc.score = placement_score_find("binpack");
	f->svc.source = "test";
	return 0;
}

void fx_fini(struct fx *f)
{
	cache_free(f->cache);
}

int fx_setup(void **state)
{
	struct fx *f = malloc(sizeof(*f));

	if (!f || fx_init(f) < 0) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

int fx_teardown(void **state)
{
	struct fx *f = *state;

	fx_fini(f);
	free(f);
	return 0;
}

/* Call <verb> and parse its reply, which must be one whole JSON document. */
cJSON *call_len(verb_fn verb, struct fx *f, const char *body, size_t len,
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

cJSON *call(verb_fn verb, struct fx *f, const char *body, unsigned *status)
{
	return call_len(verb, f, body, strlen(body), status);
}

const cJSON *item(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* The reply's Error, which must be present and a string. */
const char *error_of(const cJSON *reply)
{
	const cJSON *e = item(reply, "Error");

	if (!cJSON_IsString(e))
		fail_msg("reply has no string \"Error\"");
	return e->valuestring;
}

void assert_contains(const char *s, const char *part)
{
	if (!s || !strstr(s, part))
		fail_msg("\"%s\" does not contain \"%s\"", s ? s : "(null)", part);
}

/* A reply that says "this request failed": 400, or 200 with a non-empty Error. */
bool is_error_reply(unsigned status, const cJSON *reply)
{
	const cJSON *e = cJSON_IsObject(reply) ? item(reply, "Error") : NULL;

	if (status == 400)
		return cJSON_IsString(e) && e->valuestring[0];
	return status == 200 && cJSON_IsString(e) && e->valuestring[0];
}

/* bind as kube-scheduler's snapshot-mode caller sees it: answered at once. */
void bind_sync(const struct ext_service *svc, const char *body, size_t len,
		      struct ext_reply *r)
{
	assert_true(ext_bind(svc, body, len, r, NULL));
}

/* The four verbs, and their names for messages. */
const verb_fn all_verbs[4] = { ext_filter, ext_prioritize, bind_sync, ext_preempt };
const char *const verb_names[4] = { "filter", "prioritize", "bind", "preempt" };

/* The reply's top-level keys are exactly <keys> (NULL-terminated), each once. */
void assert_keys_exactly(const cJSON *obj, const char *const *keys)
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

const char *const filter_result_keys[] = {
	"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error", NULL,
};

/* ---- Request builders -------------------------------------------------------- */

/* Pod ml/<name> with uid "uid-<name>" and the given container resources. */
cJSON *pod_with(const char *name, const char *resources)
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

cJSON *gpu_pod(const char *name, unsigned gpus)
{
	char res[128];

	if (gpus == 0)
		return pod_with(name, "{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}");
	snprintf(res, sizeof(res), "{\"limits\":{\"nvidia.com/gpu\":\"%u\"}}", gpus);
	return pod_with(name, res);
}

/* ExtenderArgs in names mode (nodeCacheCapable: true). Takes <pod>. */
char *names_args(cJSON *pod, const char *const *names)
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
char *full_args(cJSON *pod, cJSON *items)
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
cJSON *node_obj(const char *name, const char *capacity, const char *allocatable,
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

char *bind_args(const char *ns, const char *name, const char *uid, const char *node)
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
cJSON *filter_names(struct fx *f, const char *name, unsigned gpus,
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
const char *bind_pod(struct fx *f, const char *name, const char *node, cJSON **reply)
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
void place(struct fx *f, const char *name, unsigned gpus, const char *node)
{
	const char *const one[] = { node, NULL };
	cJSON *j = filter_names(f, name, gpus, one);
	cJSON *b;

	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 1);
	cJSON_Delete(j);
	assert_string_equal(bind_pod(f, name, node, &b), "");
	cJSON_Delete(b);
}

bool names_has(const cJSON *reply, const char *name)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, item(reply, "NodeNames"))
		if (cJSON_IsString(it) && strcmp(it->valuestring, name) == 0)
			return true;
	return false;
}

/* Pod <uid> is in state <st> on <node> occupying <devices>. */
void expect_pod(struct fx *f, const char *uid, enum cache_pod_state st, const char *node,
		       uint64_t devices)
{
	struct cache_pod_info info;

	assert_int_equal(cache_pod_get(f->cache, uid, &info), 0);
	if (info.state != st || strcmp(info.node, node) != 0 || info.devices != devices)
		fail_msg("pod %s: state %d on \"%s\" holding %#llx; "
			 "want %d on \"%s\" holding %#llx", uid, info.state, info.node,
			 (unsigned long long)info.devices, st, node, (unsigned long long)devices);
}


/* ---- Cluster state, for "nothing changed" and "never over-committed" --------- */



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

void state_take(struct fx *f, struct cluster_state *s)
{
	memset(s, 0, sizeof(*s));
	cache_get_stats(f->cache, &s->stats);
	cache_read_begin(f->cache);
	cache_node_foreach(f->cache, collect_usage, s);
	cache_read_end(f->cache);
	qsort(s->nodes, s->n, sizeof(s->nodes[0]), usage_cmp);
}

/* Usage and holdings equal; with <pods>, the number of known pods too. */
void assert_state_same(const struct cluster_state *a, const struct cluster_state *b,
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

void assert_never_overcommitted(struct fx *f, const char *when)
{
	struct commit_check c = { 0, "" };

	cache_read_begin(f->cache);
	cache_node_foreach(f->cache, check_commit, &c);
	cache_read_end(f->cache);
	if (c.over)
		fail_msg("%s: %u nodes over-committed, e.g. %s", when, c.over, c.last);
}

uint32_t free_on(struct fx *f, const char *node)
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
void assert_devices_exclusive(struct fx *f, const struct cluster_state *initial,
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
