/* Unit tests of explain (src/extender/explain.c): its per-node verdicts must be
 * filter's, over many random clusters.
 *
 * Each seed makes a cluster as a snapshot - nodes with random GPU kinds and
 * counts, healthy and unhealthy devices, pods holding random devices, cordoned
 * and NotReady nodes, topologies from tests/data/topo and from the built-in
 * profiles (GPU Feature Discovery labels), or none - and a pending pod asking a
 * random count of a random kind under a random topology policy. It loads the
 * snapshot as `troupe --cluster` does, then asks filter (over every node, by
 * name) and explain (every node listed) about that pod: a node explain says
 * fits must be one filter passes; any other must be one filter refuses, with
 * the same message, in the same list (failed or unresolvable), and in the
 * group that message belongs to. The best nodes must fit, come in score order,
 * and carry prioritize's scores.
 *
 * Plus the query's errors (400, 404) and a gang member's answer.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "gang_fixture.h"
#include "extender/explain.h"

enum { SEEDS = 2000, MAX_NODES = 24 };

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return n ? (uint32_t)(rng_state % n) : 0;
}

static const char *const kinds[] = { "nvidia.com/gpu", "amd.com/gpu" };

static const struct {
	const char *file;
	unsigned gpus;
} topo_files[] = {
	{ "dgx-a100.txt", 8 }, { "dgx-h100.txt", 8 }, { "dgx1-v100.txt", 8 },
	{ "pcie-2s.txt", 8 }, { "bridged-4.txt", 4 },
};

static const struct {
	const char *product;
	unsigned gpus;
} products[] = {
	{ "NVIDIA-A100-SXM4-80GB", 8 }, { "NVIDIA-A100-SXM4-40GB", 4 },
	{ "NVIDIA-H100-80GB-HBM3", 8 }, { "NVIDIA-H100-80GB-HBM3", 4 },
	{ "Tesla-V100-SXM2-32GB", 8 }, { "NVIDIA-L4", 4 },
};

static const char *const policies[] = {
	NULL, "preferred", "required", "required:PIX", "required:NV4", "required:NV12", "none",
	"required:SYS",
};

/* Which of explain's groups each of filter's messages (fit.c's texts) belongs
 * to: the first rule that matches, by prefix or, with <anywhere>, anywhere. */
static const struct {
	const char *group;
	const char *text;
	bool anywhere;
} group_messages[] = {
	{ "heldForGang", "troupe: GPUs on this node are held for gang ", false },
	{ "kindMismatch", "troupe: node has no ", false },
	{ "notEnoughCapacity", "troupe: node has ", false },
	{ "notReady", "troupe: node is not Ready", false },
	{ "cordoned", "troupe: node is cordoned", false },
	{ "unhealthyDevices", "troupe: only ", false },
	{ "topologyUnknown", "troupe: node's GPU topology is unknown", false },
	{ "topologyNoSet", " on this node are all ", true },
	{ "topologyNoFreeSet", "troupe: no ", false },
	{ "notEnoughFree", " free, pod needs ", true },
	{ "unknownNode", "troupe: node unknown to troupe", false },
};

/* The group filter's message <msg> belongs to, or NULL. */
static const char *group_of_message(const char *msg)
{
	for (size_t i = 0; i < sizeof(group_messages) / sizeof(group_messages[0]); i++) {
		const char *t = group_messages[i].text;

		if (group_messages[i].anywhere ? strstr(msg, t) != NULL
					       : strncmp(msg, t, strlen(t)) == 0)
			return group_messages[i].group;
	}
	return NULL;
}

static char *read_topo(const char *file)
{
	char path[512], *buf = NULL;
	size_t len;

	snprintf(path, sizeof(path), "%s/tests/data/topo/%s", TROUPE_SOURCE_ROOT, file);
	assert_int_equal(util_read_file(path, 1 << 20, &buf, &len), 0);
	return buf;
}

static void devices_str(uint64_t mask, char *buf, size_t len)
{
	cache_devices_format(mask, buf, len);
}

/* A random node <i>, and the pods holding devices on it, into <items>. */
static void add_node(cJSON *items, unsigned i, unsigned *pod_seq)
{
	cJSON *node = cJSON_CreateObject(), *md, *labels, *ann, *st, *cap, *alloc, *conds, *c;
	char name[32], num[16], ids[64];
	unsigned gpus = 0, allocatable;
	int pick = (int)rnd(10);
	uint64_t used = 0;

	snprintf(name, sizeof(name), "node-%02u", i);
	cJSON_AddStringToObject(node, "kind", "Node");
	md = cJSON_AddObjectToObject(node, "metadata");
	cJSON_AddStringToObject(md, "name", name);
	labels = cJSON_AddObjectToObject(md, "labels");
	ann = cJSON_AddObjectToObject(md, "annotations");
	if (pick < 3) {                 /* a topology annotation */
		unsigned t = rnd(sizeof(topo_files) / sizeof(topo_files[0]));
		char *text = read_topo(topo_files[t].file);

		gpus = topo_files[t].gpus;
		cJSON_AddStringToObject(ann, "troupe.io/gpu-topology", text);
		free(text);
	} else if (pick < 6) {          /* a profile by its GFD labels */
		unsigned p = rnd(sizeof(products) / sizeof(products[0]));

		gpus = products[p].gpus;
		cJSON_AddStringToObject(labels, "nvidia.com/gpu.product", products[p].product);
		snprintf(num, sizeof(num), "%u", gpus);
		cJSON_AddStringToObject(labels, "nvidia.com/gpu.count", num);
	} else if (pick < 9) {          /* nothing known of its links */
		gpus = 1 + rnd(16);
	}                               /* else: no GPUs at all */
	if (rnd(4) == 0)
		cJSON_AddStringToObject(labels, "network.topology.nvidia.com/spine",
					rnd(2) ? "spine-a" : "spine-b");
	st = cJSON_AddObjectToObject(node, "status");
	cap = cJSON_AddObjectToObject(st, "capacity");
	alloc = cJSON_AddObjectToObject(st, "allocatable");
	allocatable = gpus && rnd(5) == 0 ? rnd(gpus + 1) : gpus;
	if (gpus) {
		const char *kind = kinds[rnd(5) == 0];

		snprintf(num, sizeof(num), "%u", gpus);
		cJSON_AddStringToObject(cap, kind, num);
		snprintf(num, sizeof(num), "%u", allocatable);
		cJSON_AddStringToObject(alloc, kind, num);
		if (rnd(6) == 0) {
			devices_str(1ULL << rnd(gpus) | 1ULL << rnd(gpus), ids, sizeof(ids));
			cJSON_AddStringToObject(ann, "troupe.io/gpu-unhealthy", ids);
		}
		/* Pods holding random devices. */
		for (unsigned k = rnd(4); k > 0; k--) {
			uint64_t mask = 0;
			cJSON *pod = cJSON_CreateObject(), *pm, *spec, *ctr, *res, *lim;

			for (unsigned d = 0; d < gpus; d++)
				if (!(used >> d & 1) && rnd(3) == 0)
					mask |= 1ULL << d;
			if (!mask) {
				cJSON_Delete(pod);
				continue;
			}
			used |= mask;
			cJSON_AddStringToObject(pod, "kind", "Pod");
			pm = cJSON_AddObjectToObject(pod, "metadata");
			snprintf(num, sizeof(num), "busy-%u", (*pod_seq)++);
			cJSON_AddStringToObject(pm, "name", num);
			cJSON_AddStringToObject(pm, "namespace", "ml");
			cJSON_AddStringToObject(pm, "uid", num);
			devices_str(mask, ids, sizeof(ids));
			cJSON_AddStringToObject(cJSON_AddObjectToObject(pm, "annotations"),
						"troupe.io/gpu-ids", ids);
			spec = cJSON_AddObjectToObject(pod, "spec");
			cJSON_AddStringToObject(spec, "nodeName", name);
			ctr = cJSON_CreateObject();
			res = cJSON_AddObjectToObject(ctr, "resources");
			lim = cJSON_AddObjectToObject(res, "limits");
			snprintf(num, sizeof(num), "%d", __builtin_popcountll(mask));
			cJSON_AddStringToObject(lim, kind, num);
			cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), ctr);
			cJSON_AddStringToObject(cJSON_AddObjectToObject(pod, "status"), "phase",
						"Running");
			cJSON_AddItemToArray(items, pod);
		}
	}
	conds = cJSON_AddArrayToObject(st, "conditions");
	c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "type", "Ready");
	cJSON_AddStringToObject(c, "status", rnd(8) == 0 ? "False" : "True");
	cJSON_AddItemToArray(conds, c);
	if (rnd(8) == 0)
		cJSON_AddBoolToObject(cJSON_AddObjectToObject(node, "spec"), "unschedulable", true);
	cJSON_AddItemToArray(items, node);
}

/* The pod explained: ml/probe asking a random count of a random kind. */
static cJSON *probe_pod(void)
{
	cJSON *pod = cJSON_CreateObject(), *md, *spec, *ctr, *lim;
	const char *policy = policies[rnd(sizeof(policies) / sizeof(policies[0]))];
	char num[16];

	cJSON_AddStringToObject(pod, "kind", "Pod");
	md = cJSON_AddObjectToObject(pod, "metadata");
	cJSON_AddStringToObject(md, "name", "probe");
	cJSON_AddStringToObject(md, "namespace", "ml");
	cJSON_AddStringToObject(md, "uid", "uid-probe");
	if (policy)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(md, "annotations"),
					"troupe.io/topology", policy);
	spec = cJSON_AddObjectToObject(pod, "spec");
	ctr = cJSON_CreateObject();
	lim = cJSON_AddObjectToObject(cJSON_AddObjectToObject(ctr, "resources"), "limits");
	snprintf(num, sizeof(num), "%u", 1 + rnd(rnd(3) ? 8 : 16));
	cJSON_AddStringToObject(lim, kinds[rnd(6) == 0], num);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), ctr);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(pod, "status"), "phase", "Pending");
	return pod;
}

/* A service over the cluster in <snapshot>: topologies derived as the daemon
 * derives them, two GPU kinds managed, <policy> scoring. */
struct rfx {
	struct ext_config cfg;
	struct placement_registry *registry;
	struct fx f;                    /* cache and service; f.cfg unused */
};

static void rfx_init(struct rfx *r, const char *snapshot, const char *policy)
{
	char path[] = "/tmp/troupe-explain-XXXXXX", err[CACHE_ERR_LEN] = "";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, snapshot, strlen(snapshot)), (ssize_t)strlen(snapshot));
	close(fd);
	memset(r, 0, sizeof(*r));
	ext_config_defaults(&r->cfg);
	snprintf(r->cfg.gpu_names[1], sizeof(r->cfg.gpu_names[1]), "%s", kinds[1]);
	r->cfg.cache.gpu_resources[1] = r->cfg.gpu_names[1];
	r->cfg.cache.n_gpu_resources = 2;
	r->registry = placement_registry_new();
	assert_non_null(r->registry);
	r->cfg.cache.node_derive = placement_topo_derive;
	r->cfg.cache.node_release = placement_topo_release;
	r->cfg.cache.hook_ctx = r->registry;
	r->f.cache = cache_new(&r->cfg.cache);
	assert_non_null(r->f.cache);
	if (cache_snapshot_load(r->f.cache, path, err, sizeof(err)) < 0)
		fail_msg("snapshot: %s", err);
	unlink(path);
	cache_set_synced(r->f.cache, true);
	r->f.svc.cache = r->f.cache;
	r->f.svc.cfg = &r->cfg;
	r->f.svc.score = placement_score_find(policy);
	r->f.svc.source = "test";
}

static void rfx_fini(struct rfx *r)
{
	cache_free(r->f.cache);
	placement_registry_free(r->registry);
}

static cJSON *explain(struct rfx *r, const struct ext_service *svc, const char *pod,
		      const char *group, const char *examples, unsigned *status)
{
	struct ext_explain_query q = { pod, group, examples, "100" };
	struct ext_reply rep;
	cJSON *j;

	ext_reply_init(&rep);
	ext_explain(r ? &r->f.svc : svc, &q, &rep);
	*status = rep.status;
	j = cJSON_ParseWithLength(rep.body.buf, rep.body.len);
	if (!j)
		fail_msg("explain's answer is not JSON: %.*s", (int)rep.body.len, rep.body.buf);
	ext_reply_fini(&rep);
	return j;
}

/* How often each group was seen over the seeds, by group_messages index and
 * "fits" last: the random clusters must reach every reason they can make. */
static unsigned reached[sizeof(group_messages) / sizeof(group_messages[0]) + 1];

/* Explain's answer <ex> (every node listed) and filter's <fr> for the same pod
 * over the same <n> nodes agree: each node explain says fits filter passed;
 * each other one filter refused with the same message, in the list explain's
 * "resolvable" names, and the message belongs to explain's group. */
static void check_agrees(const cJSON *ex, const cJSON *fr, unsigned n, unsigned seed)
{
	unsigned seen = 0;
	const cJSON *g, *e;

	assert_int_equal(item(item(ex, "nodes"), "total")->valueint, (int)n);
	cJSON_ArrayForEach(g, item(item(ex, "nodes"), "groups")) {
		const char *key = item(g, "reason")->valuestring;
		bool resolvable = cJSON_IsTrue(item(g, "resolvable"));
		int count = 0;

		cJSON_ArrayForEach(e, item(g, "examples")) {
			const char *node = item(e, "node")->valuestring;
			const cJSON *failed = cJSON_GetObjectItemCaseSensitive(
				item(fr, "FailedNodes"), node);
			const cJSON *unres = cJSON_GetObjectItemCaseSensitive(
				item(fr, "FailedAndUnresolvableNodes"), node);
			const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
			const cJSON *why = failed ? failed : unres;
			const char *mgroup = why ? group_of_message(why->valuestring) : NULL;

			count++;
			seen++;
			for (size_t x = 0; x < sizeof(group_messages) / sizeof(group_messages[0]); x++)
				reached[x] += strcmp(group_messages[x].group, key) == 0;
			if (strcmp(key, "fits") == 0) {
				reached[sizeof(group_messages) / sizeof(group_messages[0])]++;
				if (!names_has(fr, node) || why)
					fail_msg("seed %u: explain says %s fits; filter refused it: %s",
						 seed, node, why ? why->valuestring : "(not passed)");
				continue;
			}
			if (names_has(fr, node) || !why)
				fail_msg("seed %u: explain says %s is %s (%s); filter passed it", seed,
					 node, key, cJSON_IsString(msg) ? msg->valuestring : "?");
			if (!cJSON_IsString(msg) || strcmp(msg->valuestring, why->valuestring) != 0)
				fail_msg("seed %u: %s: explain says \"%s\", filter \"%s\"", seed, node,
					 cJSON_IsString(msg) ? msg->valuestring : "?",
					 why->valuestring);
			if ((failed != NULL) != resolvable)
				fail_msg("seed %u: %s: explain says resolvable=%d, filter put it in %s",
					 seed, node, resolvable,
					 failed ? "FailedNodes" : "FailedAndUnresolvableNodes");
			if (!mgroup || strcmp(mgroup, key) != 0)
				fail_msg("seed %u: %s is in group %s, but filter says \"%s\" (%s)",
					 seed, node, key, why->valuestring, mgroup ? mgroup : "?");
		}
		assert_int_equal(count, item(g, "count")->valueint);
	}
	assert_int_equal(seen, n);
}

/* One seed: explain and filter agree on every node. */
static void one_cluster(unsigned seed)
{
	cJSON *list = cJSON_CreateObject(), *items, *pod, *fr, *ex, *pr;
	const char *names[MAX_NODES + 1];
	char node_names[MAX_NODES][32], *snap, *args, *pargs;
	unsigned n = 1 + (seed % MAX_NODES), pod_seq = 0, status;
	struct rfx r;
	const cJSON *passed;
	size_t n_pass;

	rng_state = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)seed * 0x2545f4914f6cdd1dULL);
	for (int i = 0; i < 4; i++)
		rnd(2);
	cJSON_AddStringToObject(list, "kind", "List");
	items = cJSON_AddArrayToObject(list, "items");
	for (unsigned i = 0; i < n; i++) {
		add_node(items, i, &pod_seq);
		snprintf(node_names[i], sizeof(node_names[i]), "node-%02u", i);
		names[i] = node_names[i];
	}
	names[n] = NULL;
	pod = probe_pod();
	cJSON_AddItemToArray(items, cJSON_Duplicate(pod, true));
	snap = cJSON_PrintUnformatted(list);
	rfx_init(&r, snap, rnd(2) ? "topology" : "binpack");

	fr = call(ext_filter, &r.f, (args = names_args(cJSON_Duplicate(pod, true), names)),
		  &status);
	assert_int_equal(status, 200);
	ex = explain(&r, NULL, "ml/probe", NULL, "100000", &status);
	if (status != 200)
		fail_msg("seed %u: explain answered %u", seed, status);
	if (strcmp(json_str(ex, "decidedBy"), "nodes") != 0) {
		/* An invalid request (a policy or kind filter refuses at once). */
		assert_true(is_error_reply(200, fr));
		goto out;
	}
	assert_false(is_error_reply(200, fr));
	check_agrees(ex, fr, n, seed);
	/* The best nodes: fitting, best first, with prioritize's scores. */
	passed = item(fr, "NodeNames");
	n_pass = (size_t)cJSON_GetArraySize(passed);
	if (n_pass) {
		const char **pn = calloc(n_pass + 1, sizeof(*pn));
		const cJSON *it, *b;
		size_t k = 0;
		int last = 1000;

		cJSON_ArrayForEach(it, passed)
			pn[k++] = it->valuestring;
		pr = call(ext_prioritize, &r.f, (pargs = names_args(cJSON_Duplicate(pod, true), pn)),
			  &status);
		assert_int_equal(status, 200);
		assert_int_equal(cJSON_GetArraySize(item(ex, "best")), (int)n_pass);
		cJSON_ArrayForEach(b, item(ex, "best")) {
			const char *node = item(b, "node")->valuestring;
			int score = item(b, "score")->valueint, want = -1;

			cJSON_ArrayForEach(it, pr)
				if (strcmp(item(it, "Host")->valuestring, node) == 0)
					want = item(it, "Score")->valueint;
			if (score != want)
				fail_msg("seed %u: %s: explain scores %d, prioritize %d", seed, node,
					 score, want);
			assert_true(score <= last);
			last = score;
			assert_non_null(cJSON_GetObjectItemCaseSensitive(b, "devices"));
		}
		cJSON_Delete(pr);
		free(pargs);
		free(pn);
	}
out:
	cJSON_Delete(pod);
	cJSON_Delete(fr);
	cJSON_Delete(ex);
	free(args);
	free(snap);
	cJSON_Delete(list);
	rfx_fini(&r);
}

/* Over the seeds every group is reached (else the agreement proves little),
 * but unknownNode (explain looks only at the nodes troupe knows) and
 * heldForGang (test_held_nodes_are_filters). */
static void test_agrees_with_filter(void **state)
{
	size_t ng = sizeof(group_messages) / sizeof(group_messages[0]);

	(void)state;
	for (unsigned seed = 0; seed < SEEDS; seed++)
		one_cluster(seed);
	for (size_t x = 0; x < ng; x++)
		if (!reached[x] && strcmp(group_messages[x].group, "unknownNode") != 0 &&
		    strcmp(group_messages[x].group, "heldForGang") != 0)
			fail_msg("no random cluster made a node of group %s",
				 group_messages[x].group);
	assert_true(reached[ng] > 0);
}

static void test_query_errors(void **state)
{
	struct fx *f = *state;
	static const struct {
		const char *pod, *group, *examples;
		unsigned status;
	} cases[] = {
		{ NULL, NULL, NULL, 400 },
		{ "ml/llm-worker-0", "ml/llm", NULL, 400 },
		{ "ml", NULL, NULL, 400 },
		{ "ml/a/b", NULL, NULL, 400 },
		{ "/x", NULL, NULL, 400 },
		{ "ML/x", NULL, NULL, 400 },
		{ "ml/x", NULL, "-1", 400 },
		{ "ml/x", NULL, "lots", 400 },
		{ "ml/nope", NULL, NULL, 404 },
		{ NULL, "ml/nope", NULL, 404 },
		{ "ml/llm-worker-0", NULL, NULL, 200 },
		{ NULL, "ml/llm", NULL, 200 },
		{ "ml/resnet-0", NULL, "0", 200 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ext_explain_query q = { cases[i].pod, cases[i].group, cases[i].examples,
					       NULL };
		struct ext_reply rep;
		cJSON *j;

		ext_reply_init(&rep);
		ext_explain(&f->svc, &q, &rep);
		j = cJSON_ParseWithLength(rep.body.buf, rep.body.len);
		assert_non_null(j);
		if (rep.status != cases[i].status)
			fail_msg("case %zu: %u, want %u: %.*s", i, rep.status, cases[i].status,
				 (int)rep.body.len, rep.body.buf);
		if (rep.status != 200) {
			assert_true(cJSON_IsString(item(j, "error")));
			assert_int_equal(item(j, "code")->valueint, (int)rep.status);
		}
		cJSON_Delete(j);
		ext_reply_fini(&rep);
	}
}

/* The test cluster's gang member: the gang part with its quorum and a plan. */
static void test_gang_member(void **state)
{
	struct fx *f = *state;
	struct ext_explain_query q = { "ml/llm-worker-0", NULL, NULL, NULL };
	struct ext_reply rep;
	const cJSON *gang, *plan, *closest;
	cJSON *j;

	ext_reply_init(&rep);
	ext_explain(&f->svc, &q, &rep);
	assert_int_equal(rep.status, 200);
	j = cJSON_ParseWithLength(rep.body.buf, rep.body.len);
	assert_non_null(j);
	assert_string_equal(item(item(j, "request"), "resource")->valuestring, "nvidia.com/gpu");
	assert_int_equal(item(item(j, "request"), "gpus")->valueint, 8);
	gang = item(j, "gang");
	assert_string_equal(item(gang, "name")->valuestring, "llm");
	assert_int_equal(item(gang, "quorum")->valueint, 2);
	assert_int_equal(item(gang, "members")->valueint, 2);
	plan = item(gang, "planNow");
	assert_true(cJSON_IsTrue(item(plan, "possible")));
	assert_int_equal(cJSON_GetArraySize(item(plan, "slots")), 2);
	/* The finest level (NVLink domain): rack-1's nodes take one 8-GPU
	 * member of the two. */
	closest = item(gang, "closestDomain");
	assert_string_equal(item(closest, "levelKey")->valuestring,
			    "network.topology.nvidia.com/accelerator");
	assert_string_equal(item(closest, "domain")->valuestring, "rack-1");
	assert_int_equal(item(closest, "holds")->valueint, 1);
	assert_int_equal(item(closest, "lacks")->valueint, 1);
	cJSON_Delete(j);
	ext_reply_fini(&rep);
}

/* A starving gang's holds: the nodes filter refuses a lower pod because their
 * freed GPUs are held are explain's heldForGang, with filter's words. The gang
 * (3 x 8 GPUs where two 8-GPU sets are free) waits; with
 * gang.starvation_seconds 0 the manager's next pass (within 100 ms) holds
 * capacity for it. */
static void test_held_nodes_are_filters(void **state)
{
	struct gfx *g = *state;
	const char *const *nodes = cluster_nodes;
	char note[TROUPE_MESSAGE_BUF], err[CACHE_ERR_LEN], *args;
	struct cache_pod *solo;
	unsigned status, held = 0;
	cJSON *j, *fr, *ex, *pod;
	const cJSON *grp;

	gang_manager_shutdown(g->gangs);
	gang_manager_free(g->gangs);
	g->fx.cfg.gang.starvation_s = 0;
	g->fx.cfg.gang.starvation_holds = true;
	g->gangs = gang_manager_new(g->fx.cache, &g->fx.cfg.gang);
	assert_non_null(g->gangs);
	g->fx.svc.gangs = g->gangs;
	gang_create(g, "big", "big", 3, 8, 3);
	j = filter_member(g, "big-0", "big", 3, 8, gpu_nodes);
	assert_string_equal(error_of(j), "");   /* refused on every node: it waits */
	assert_false(names_has(j, "gpu-a100-1"));
	cJSON_Delete(j);
	/* Wait (a deadline, not a time) for the pass to hold something. */
	for (int i = 0; i < 1000; i++) {
		bool any = false;

		for (const char *const *n = nodes; *n; n++)
			any |= gang_hold_note(g->gangs, *n, 0, note, sizeof(note));
		if (any)
			break;
		usleep(10000);
	}
	pod = pod_with("solo", "{\"limits\": {\"nvidia.com/gpu\": \"2\"}}");
	solo = cache_pod_parse(pod, cache_get_opts(g->fx.cache), err, sizeof(err));
	assert_non_null(solo);
	assert_int_equal(cache_pod_remember(g->fx.cache, solo), 0);
	fr = call(ext_filter, &g->fx, (args = names_args(pod, nodes)), &status);
	assert_int_equal(status, 200);
	ex = explain((struct rfx *)NULL, &g->fx.svc, "ml/solo", NULL, "1000", &status);
	assert_int_equal(status, 200);
	check_agrees(ex, fr, 8, 0);
	cJSON_ArrayForEach(grp, item(item(ex, "nodes"), "groups"))
		if (strcmp(item(grp, "reason")->valuestring, "heldForGang") == 0)
			held = (unsigned)item(grp, "count")->valueint;
	if (!held)
		fail_msg("no node held for the starving gang: %s", cJSON_PrintUnformatted(ex));
	cJSON_Delete(fr);
	cJSON_Delete(ex);
	free(args);
}

/* A gang whose pods ask troupe.io/gang-topology required:<key>: planNow is
 * the plan filter would make under it (none, when no node has the label, with
 * filter's words), and names the key. */
static void test_gang_topology_required_in_the_plan(void **state)
{
	struct gfx *g = *state;
	char err[CACHE_ERR_LEN];
	unsigned status;
	cJSON *ex, *fr;
	const cJSON *plan;

	for (unsigned i = 0; i < 2; i++) {
		char name[16];
		cJSON *o;
		struct cache_pod *pod;

		snprintf(name, sizeof(name), "pin-%u", i);
		o = gang_pod(name, "pinned", 2, 8,
			     ",\"troupe.io/gang-topology\":\"required:example.com/none\"");
		pod = cache_pod_parse(o, cache_get_opts(g->fx.cache), err, sizeof(err));
		cJSON_Delete(o);
		assert_non_null(pod);
		assert_int_equal(cache_pod_remember(g->fx.cache, pod), 0);
	}
	ex = explain((struct rfx *)NULL, &g->fx.svc, NULL, "ml/pinned", NULL, &status);
	assert_int_equal(status, 200);
	plan = item(item(ex, "gang"), "planNow");
	assert_false(cJSON_IsTrue(item(plan, "possible")));
	assert_string_equal(item(plan, "requiredKey")->valuestring, "example.com/none");
	assert_non_null(strstr(item(plan, "why")->valuestring,
			       "no offered node has the label example.com/none"));
	/* Filter agrees: the member is refused everywhere. */
	{
		cJSON *pod = gang_pod("pin-0", "pinned", 2, 8, ",\"troupe.io/gang-topology\":"
				      "\"required:example.com/none\"");
		char *args = names_args(pod, gpu_nodes), *text;

		fr = call(ext_filter, &g->fx, args, &status);
		assert_int_equal(status, 200);
		text = cJSON_PrintUnformatted(fr);
		if (!strstr(text, "no offered node has the label example.com/none"))
			fail_msg("filter did not refuse as explain said: %s", text);
		free(text);
		free(args);             /* names_args took <pod> */
	}
	cJSON_Delete(fr);
	cJSON_Delete(ex);
	/* Without the annotation (the test cluster's own gang): requiredKey null. */
	ex = explain((struct rfx *)NULL, &g->fx.svc, NULL, "ml/llm", NULL, &status);
	assert_int_equal(status, 200);
	plan = item(item(ex, "gang"), "planNow");
	assert_true(cJSON_IsTrue(item(plan, "possible")));
	assert_true(cJSON_IsNull(item(plan, "requiredKey")));
	cJSON_Delete(ex);
}

/* A planned gang: the manager's view (state, its plan's slots) is in the
 * answer, and its queue; its open slots are the nodes filter passes to the
 * member still to come. */
static void test_planned_gang_shows_the_managers_plan(void **state)
{
	struct gfx *g = *state;
	const cJSON *m, *slot;
	unsigned status;
	int open_slots = 0;
	cJSON *ex, *fr;

	pair_planned(g);
	ex = explain(NULL, &g->fx.svc, NULL, "ml/pair", NULL, &status);
	assert_int_equal(status, 200);
	m = item(item(ex, "gang"), "manager");
	assert_string_equal(item(m, "state")->valuestring, "planned");
	assert_int_equal(item(m, "quorum")->valueint, 2);
	assert_int_equal(cJSON_GetArraySize(item(m, "plan")), 2);
	cJSON_ArrayForEach(slot, item(m, "plan")) {
		assert_string_equal(item(slot, "devices")->valuestring, "0,1,2,3,4,5,6,7");
		assert_true(strcmp(item(slot, "node")->valuestring, "gpu-a100-1") == 0 ||
			    strcmp(item(slot, "node")->valuestring, "gpu-h100-1") == 0);
	}
	assert_string_equal(item(item(ex, "queue"), "name")->valuestring, "ml");
	assert_int_equal(item(item(ex, "queue"), "plannedGangs")->valueint, 1);
	cJSON_Delete(ex);
	/* The other member: filter passes exactly the plan's open slots. */
	ex = explain(NULL, &g->fx.svc, "ml/w-1", NULL, NULL, &status);
	assert_int_equal(status, 200);
	assert_string_equal(json_str(ex, "decidedBy"), "gang");
	fr = filter_member(g, "w-1", "pair", 2, 8, gpu_nodes);
	cJSON_ArrayForEach(slot, item(item(item(ex, "gang"), "manager"), "plan")) {
		assert_true(cJSON_IsNull(item(slot, "member")));
		assert_true(names_has(fr, item(slot, "node")->valuestring));
		open_slots++;
	}
	assert_int_equal(cJSON_GetArraySize(item(fr, "NodeNames")), open_slots);
	cJSON_Delete(fr);
	cJSON_Delete(ex);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agrees_with_filter),
		cmocka_unit_test_setup_teardown(test_query_errors, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_gang_member, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_held_nodes_are_filters, gfx_setup,
						gfx_teardown),
		cmocka_unit_test_setup_teardown(test_planned_gang_shows_the_managers_plan,
						gfx_setup, gfx_teardown),
		cmocka_unit_test_setup_teardown(test_gang_topology_required_in_the_plan,
						gfx_setup, gfx_teardown),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
