/* GET /debug/dashboard.json (dashboard.c, dashboard_gangs.c) on the test
 * cluster and on 5,000 made-up nodes: every GPU's holder (a pod, a gang, a
 * gang's reservation or hold, a pod of unknown devices), domains that add up,
 * the searches, the caps of dashboard.h, and the gangs and queues of a gang
 * manager (gang_fixture.c). The page itself is tested in
 * Chromium (tests/browser/test_dashboard.mjs); this runs under the sanitizers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extender/dashboard.h"
#include "gang_fixture.h"

static cJSON *dash(struct fx *f, const char *q, const char *domain, unsigned page,
		   size_t *bytes)
{
	struct ext_dashboard_query query = { q, domain, page };
	struct ext_reply r;
	cJSON *j;

	ext_reply_init(&r);
	ext_dashboard_json(&f->svc, &query, &r);
	assert_int_equal(r.status, 200);
	assert_false(strbuf_failed(&r.body));
	if (bytes)
		*bytes = r.body.len;
	j = cJSON_ParseWithLengthOpts(r.body.buf, r.body.len + 1, NULL, 1);
	if (!j)
		fail_msg("the dashboard's JSON does not parse: %.200s", r.body.buf);
	ext_reply_fini(&r);
	return j;
}

/* The node called <name> in a reply, or NULL. */
static const cJSON *node_of(const cJSON *j, const char *name)
{
	const cJSON *n;

	cJSON_ArrayForEach(n, item(j, "nodes"))
		if (strcmp(cJSON_GetArrayItem(n, 0)->valuestring, name) == 0)
			return n;
	return NULL;
}

/* The holder of device <dev> of node <name>: its "k n" ("pod ml/resnet-0"),
 * or the code ("free" -1, "unhealthy" -2, "unknown" -3). */
static void holder(const cJSON *j, const char *name, int dev, char *out, size_t len)
{
	const cJSON *n = node_of(j, name), *codes;
	int c;

	assert_non_null(n);
	codes = cJSON_GetArrayItem(n, 4);
	assert_true(dev < cJSON_GetArraySize(codes));
	c = cJSON_GetArrayItem(codes, dev)->valueint;
	if (c >= 0) {
		const cJSON *o = cJSON_GetArrayItem(item(j, "owners"), c);

		assert_non_null(o);
		snprintf(out, len, "%s %s", item(o, "k")->valuestring, item(o, "n")->valuestring);
	} else {
		snprintf(out, len, "%s", c == -1 ? "free" : c == -2 ? "unhealthy" : "unknown");
	}
}

static void expect_holder(const cJSON *j, const char *name, int dev, const char *want)
{
	char got[K8S_KEY_BUF + 16];

	holder(j, name, dev, got, sizeof(got));
	if (strcmp(got, want) != 0)
		fail_msg("%s GPU %d: held by \"%s\", expected \"%s\"", name, dev, got, want);
}

/* Give the cache the pod of JSON <text>, as a watch would. */
static void add_pod_text(struct fx *f, const char *text)
{
	char err[CACHE_ERR_LEN];
	cJSON *obj = cJSON_Parse(text);
	struct cache_pod *pod;

	assert_non_null(obj);
	pod = cache_pod_parse(obj, cache_get_opts(f->cache), err, sizeof(err));
	cJSON_Delete(obj);
	if (!pod)
		fail_msg("pod: %s", err);
	assert_int_equal(cache_pod_apply(f->cache, pod), 0);
}

/* Give the cache node object <obj> (then freed), as a watch would. */
static void add_node_obj(struct fx *f, cJSON *obj)
{
	char err[CACHE_ERR_LEN];
	struct cache_node *n = cache_node_parse(obj, cache_get_opts(f->cache), err, sizeof(err));

	cJSON_Delete(obj);
	if (!n)
		fail_msg("node: %s", err);
	assert_int_equal(cache_node_upsert(f->cache, n), 0);
}

static void test_every_gpu_and_its_holder(void **state)
{
	struct fx *f = *state;
	cJSON *j = dash(f, NULL, NULL, 0, NULL);
	const cJSON *totals = item(j, "totals"), *d;
	int nodes = 0;

	assert_string_equal(item(j, "mode")->valuestring, "full");
	assert_int_equal(item(totals, "nodes")->valueint, 8);
	assert_int_equal(cJSON_GetArraySize(item(j, "nodes")), 8);
	for (int i = 0; i < 4; i++)
		expect_holder(j, "gpu-a100-0", i, "pod ml/resnet-0");
	expect_holder(j, "gpu-a100-0", 4, "free");
	/* Two GPUs of unknown devices: drawn on the first free ones, as the pod's. */
	expect_holder(j, "gpu-h100-0", 0, "pod ml/bert-finetune");
	expect_holder(j, "gpu-h100-0", 1, "pod ml/bert-finetune");
	expect_holder(j, "gpu-h100-0", 2, "free");
	/* The Succeeded pod holds nothing. */
	expect_holder(j, "gpu-a100-1", 0, "free");
	/* Flags: cordoned 2, not ready 1, no GPUs 4. */
	assert_int_equal(cJSON_GetArrayItem(node_of(j, "gpu-l4-0"), 2)->valueint, 2);
	assert_int_equal(cJSON_GetArrayItem(node_of(j, "gpu-t4-0"), 2)->valueint, 1);
	assert_int_equal(cJSON_GetArrayItem(node_of(j, "cpu-0"), 2)->valueint, 4);
	/* Domains (zone, spine, accelerator: the levels nodes carry) add up. */
	assert_int_equal(cJSON_GetArraySize(item(j, "levels")), 3);
	cJSON_ArrayForEach(d, item(j, "domains"))
		nodes += item(d, "n")->valueint;
	assert_int_equal(nodes, 8);
	/* No gang manager: the pod group is listed from the cache, pending. */
	assert_int_equal(cJSON_GetArraySize(item(j, "gangs")), 1);
	assert_string_equal(item(cJSON_GetArrayItem(item(j, "gangs"), 0), "n")->valuestring,
			    "ml/llm");
	assert_string_equal(item(cJSON_GetArrayItem(item(j, "gangs"), 0), "st")->valuestring,
			    "pending");
	assert_int_equal(item(cJSON_GetArrayItem(item(j, "gangs"), 0), "held")->valueint, 0);
	assert_false(cJSON_IsTrue(item(j, "truncated")));
	cJSON_Delete(j);
}

static void test_a_bind_shows_and_searches_find(void **state)
{
	struct fx *f = *state;
	cJSON *j;

	place(f, "dash-pod", 2, "gpu-h100-1");
	j = dash(f, NULL, NULL, 0, NULL);
	expect_holder(j, "gpu-h100-1", 0, "pod ml/dash-pod");
	cJSON_Delete(j);
	/* By node name, case-insensitively. */
	j = dash(f, "A100", NULL, 0, NULL);
	assert_int_equal(item(j, "matched")->valueint, 2);
	assert_non_null(node_of(j, "gpu-a100-0"));
	assert_non_null(node_of(j, "gpu-a100-1"));
	cJSON_Delete(j);
	/* By a holder's name: only the nodes it holds GPUs on, and only their
	 * holders in "owners". */
	j = dash(f, "dash-pod", NULL, 0, NULL);
	assert_int_equal(cJSON_GetArraySize(item(j, "nodes")), 1);
	assert_non_null(node_of(j, "gpu-h100-1"));
	assert_int_equal(cJSON_GetArraySize(item(j, "owners")), 1);
	cJSON_Delete(j);
	/* By domain. */
	j = dash(f, NULL, "zone-b/spine-1/rack-3", 0, NULL);
	assert_int_equal(item(j, "matched")->valueint, 3);
	assert_non_null(node_of(j, "gpu-v100-0"));
	cJSON_Delete(j);
	j = dash(f, "no-such-thing", NULL, 0, NULL);
	assert_int_equal(item(j, "matched")->valueint, 0);
	cJSON_Delete(j);
}

static void test_reservations_and_holds_are_their_gangs(void **state)
{
	struct fx *f = *state;
	cJSON *j;

	assert_int_equal(cache_reserve_for(f->cache, "gang-reservation/ml/llm/3/0", "gpu-a100-1",
					   0x0f, "ml"), 0);
	assert_int_equal(cache_reserve_for(f->cache, "gang-hold/ml/llm/7", "gpu-a100-1", 0x30,
					   "ml"), 0);
	/* Not a gang's key: shown under the key itself. */
	assert_int_equal(cache_reserve_for(f->cache, "gang-hold/odd", "gpu-a100-1", 0x40, "ml"), 0);
	j = dash(f, NULL, NULL, 0, NULL);
	expect_holder(j, "gpu-a100-1", 0, "planned ml/llm");
	expect_holder(j, "gpu-a100-1", 3, "planned ml/llm");
	expect_holder(j, "gpu-a100-1", 4, "held ml/llm");
	expect_holder(j, "gpu-a100-1", 6, "pod gang-hold/odd");
	expect_holder(j, "gpu-a100-1", 7, "free");
	cJSON_Delete(j);
	/* A search by the gang finds its reserved node. */
	j = dash(f, "ml/llm", NULL, 0, NULL);
	assert_int_equal(item(j, "matched")->valueint, 1);
	cJSON_Delete(j);
}

static const cJSON *gang_of(const cJSON *j, const char *name)
{
	const cJSON *g;

	cJSON_ArrayForEach(g, item(j, "gangs"))
		if (strcmp(item(g, "n")->valuestring, name) == 0)
			return g;
	fail_msg("gang %s is not listed", name);
	return NULL;
}

static void test_a_planned_gang_its_places_and_queue(void **state)
{
	struct gfx *g = *state;
	const cJSON *gang, *slots, *q;
	bool ml = false;
	cJSON *j;

	pair_planned(g);
	j = dash(&g->fx, NULL, NULL, 0, NULL);
	gang = gang_of(j, "ml/pair");
	assert_string_equal(item(gang, "st")->valuestring, "planned");
	assert_int_equal(item(gang, "quorum")->valueint, 2);
	assert_int_equal(item(gang, "gpus")->valueint, 16);
	assert_true(item(gang, "left")->valuedouble > 0);
	slots = item(gang, "slots");
	assert_int_equal(cJSON_GetArraySize(slots), 2);
	/* Its reserved GPUs drawn as its own. */
	expect_holder(j, "gpu-a100-1", 0, "planned ml/pair");
	expect_holder(j, "gpu-h100-1", 7, "planned ml/pair");
	assert_int_equal(item(item(j, "gangCounts"), "planned")->valueint, 1);
	cJSON_ArrayForEach(q, item(j, "queues"))
		if (strcmp(item(q, "n")->valuestring, "ml") == 0) {
			ml = true;
			assert_int_equal(item(q, "planned")->valueint, 1);
			assert_true(item(q, "share")->valuedouble > 0);
		}
	assert_true(ml);
	/* The filter behind the plan is in the latency counts the page reads. */
	assert_int_equal(cJSON_GetArraySize(item(item(j, "latency"), "bounds")),
			 EXT_LATENCY_BOUNDS);
	cJSON_Delete(j);
}

/* A group name from an annotation can be any text: the JSON stays JSON. */
static void test_odd_names_are_escaped(void **state)
{
	struct fx *f = *state;
	const char *text = "{\"metadata\":{\"name\":\"odd-0\",\"namespace\":\"ml\",\"uid\":\"uid-odd-0\","
			   "\"annotations\":{\"scheduling.k8s.io/group-name\":\"we\\\"ird</script>\","
			   "\"troupe.io/gpu-ids\":\"7\"}},\"spec\":{\"nodeName\":\"gpu-a100-1\","
			   "\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":"
			   "{\"nvidia.com/gpu\":\"1\"}}}]},\"status\":{\"phase\":\"Running\"}}";
	const cJSON *g;
	bool listed = false;
	cJSON *j;

	add_pod_text(f, text);
	j = dash(f, NULL, NULL, 0, NULL);
	expect_holder(j, "gpu-a100-1", 7, "gang ml/we\"ird</script>");
	cJSON_ArrayForEach(g, item(j, "gangs"))
		listed |= strcmp(item(g, "n")->valuestring, "ml/we\"ird</script>") == 0;
	assert_true(listed);
	cJSON_Delete(j);
}

/* ---- 5,000 nodes ---------------------------------------------------------------- */

enum { BIG_NODES = 5000, BIG_PER_BLOCK = 20 };

static void add_big_cluster(struct fx *f)
{
	for (unsigned i = 0; i < BIG_NODES; i++) {
		char name[64], zone[16], block[16];
		cJSON *obj, *labels;

		snprintf(name, sizeof(name), "big-z%u-b%03u-n%04u", i / 2500, i / BIG_PER_BLOCK, i);
		snprintf(zone, sizeof(zone), "z%u", i / 2500);
		snprintf(block, sizeof(block), "b%03u", i / BIG_PER_BLOCK);
		obj = node_obj(name, "8", "8", true, false);
		labels = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "labels");
		cJSON_AddStringToObject(labels, "topology.kubernetes.io/zone", zone);
		cJSON_AddStringToObject(labels, "network.topology.nvidia.com/block", block);
		add_node_obj(f, obj);
	}
}

static void test_five_thousand_nodes_stay_under_the_caps(void **state)
{
	struct fx *f = *state;
	size_t bytes;
	cJSON *j;
	const cJSON *d;
	int nodes = 0;

	add_big_cluster(f);
	/* The summary: domains only, no node, small. */
	j = dash(f, NULL, NULL, 0, &bytes);
	assert_string_equal(item(j, "mode")->valuestring, "summary");
	assert_int_equal(cJSON_GetArraySize(item(j, "nodes")), 0);
	cJSON_ArrayForEach(d, item(j, "domains"))
		nodes += item(d, "n")->valueint;
	assert_int_equal(nodes, BIG_NODES + 8);
	assert_true(bytes < 64 * 1024);
	cJSON_Delete(j);
	/* One domain's nodes: its values at every level kept (zone, spine,
	 * block, accelerator: the test cluster's nodes carry spine and
	 * accelerator labels), joined with '/'. */
	j = dash(f, NULL, "z1//b200/", 0, NULL);
	assert_int_equal(item(j, "matched")->valueint, BIG_PER_BLOCK);
	assert_int_equal(cJSON_GetArraySize(item(j, "nodes")), BIG_PER_BLOCK);
	cJSON_Delete(j);
	/* A search matching them all: DASH_PAGE_NODES a page, the last page the rest. */
	j = dash(f, "big-", NULL, 0, &bytes);
	assert_int_equal(item(j, "matched")->valueint, BIG_NODES);
	assert_int_equal(cJSON_GetArraySize(item(j, "nodes")), DASH_PAGE_NODES);
	assert_int_equal(item(j, "pages")->valueint,
			 (BIG_NODES + DASH_PAGE_NODES - 1) / DASH_PAGE_NODES);
	assert_true(bytes < DASH_JSON_MAX);
	/* About 60 bytes a node of 8 free GPUs. */
	assert_true(bytes < 100 * DASH_PAGE_NODES + 64 * 1024);
	cJSON_Delete(j);
	j = dash(f, "big-", NULL, BIG_NODES / DASH_PAGE_NODES, NULL);
	assert_int_equal(cJSON_GetArraySize(item(j, "nodes")), BIG_NODES % DASH_PAGE_NODES);
	cJSON_Delete(j);
}

/* A gang whose members all finished is done: not listed. */
static void test_finished_gangs_are_not_listed(void **state)
{
	struct fx *f = *state;
	const char *text = "{\"metadata\":{\"name\":\"done-0\",\"namespace\":\"ml\","
			   "\"uid\":\"uid-done-0\",\"labels\":{\"scheduling.x-k8s.io/pod-group\":"
			   "\"done\"}},\"spec\":{\"nodeName\":\"gpu-a100-1\",\"containers\":[{\"name\":"
			   "\"m\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
			   "\"status\":{\"phase\":\"Succeeded\"}}";
	const cJSON *g;
	cJSON *j;

	add_pod_text(f, text);
	j = dash(f, NULL, NULL, 0, NULL);
	cJSON_ArrayForEach(g, item(j, "gangs"))
		assert_string_not_equal(item(g, "n")->valuestring, "ml/done");
	assert_int_equal(item(item(j, "gangCounts"), "all")->valueint, 1);     /* ml/llm */
	cJSON_Delete(j);
}

/* Long names everywhere: the reply stops short of DASH_JSON_MAX, says it is
 * truncated, and what it sends is whole (every device's holder is listed). */
static void test_the_byte_cap_holds_whatever_the_names(void **state)
{
	struct fx *f = *state;
	char pad[201];
	const cJSON *n;
	size_t bytes;
	cJSON *j;
	int owners, sent = 0;

	memset(pad, 'x', 200);
	pad[200] = '\0';
	/* 2,100 domains of 5 long label values each, about 1 MB of summaries. */
	for (unsigned i = 0; i < 2100; i++) {
		static const char *const keys[] = { "topology.kubernetes.io/zone",
			"network.topology.nvidia.com/datacenter", "network.topology.nvidia.com/spine",
			"network.topology.nvidia.com/block", "network.topology.nvidia.com/accelerator" };
		char name[64], val[128];
		cJSON *obj, *labels;

		snprintf(name, sizeof(name), "long-%04u", i);
		obj = node_obj(name, "8", "8", true, false);
		labels = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "labels");
		for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
			snprintf(val, sizeof(val), "%04u-%.100s", i, pad);
			cJSON_AddStringToObject(labels, keys[k], val);
		}
		add_node_obj(f, obj);
	}
	/* On 480 of them, 8 pods of 200-character names, one a GPU: about 1 MB
	 * of holders for a page of nodes. */
	for (unsigned i = 0; i < 480 * 8; i++) {
		char text[1024];

		snprintf(text, sizeof(text), "{\"metadata\":{\"name\":\"p%04u-%s\",\"namespace\":\"ml\","
			 "\"uid\":\"uid-long-%u\",\"annotations\":{\"troupe.io/gpu-ids\":\"%u\"}},"
			 "\"spec\":{\"nodeName\":\"long-%04u\",\"containers\":[{\"name\":\"m\","
			 "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
			 "\"status\":{\"phase\":\"Running\"}}", i, pad, i, i % 8, i / 8);
		add_pod_text(f, text);
	}
	j = dash(f, NULL, NULL, 0, &bytes);
	assert_true(bytes <= DASH_JSON_MAX);
	assert_true(cJSON_IsTrue(item(j, "truncated")));
	assert_true(cJSON_GetArraySize(item(j, "domains")) < 2100);
	cJSON_Delete(j);
	/* A search for the nodes with pods: fewer than the 480 fit with their
	 * holders, and every holder they name is sent. */
	j = dash(f, "long-0", NULL, 0, &bytes);
	assert_true(bytes <= DASH_JSON_MAX);
	assert_true(cJSON_IsTrue(item(j, "truncated")));
	owners = cJSON_GetArraySize(item(j, "owners"));
	cJSON_ArrayForEach(n, item(j, "nodes")) {
		const cJSON *c;

		cJSON_ArrayForEach(c, cJSON_GetArrayItem(n, 4))
			assert_true(c->valueint < owners);
		sent++;
	}
	/* (Domains took their 384 KiB first: about 200 nodes fit.) */
	assert_true(sent > 100 && sent < 480);
	assert_int_equal(item(j, "matched")->valueint, 1000);
	cJSON_Delete(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_every_gpu_and_its_holder, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_a_bind_shows_and_searches_find, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_reservations_and_holds_are_their_gangs,
						fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_odd_names_are_escaped, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_finished_gangs_are_not_listed, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_the_byte_cap_holds_whatever_the_names,
						fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_five_thousand_nodes_stay_under_the_caps,
						fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_a_planned_gang_its_places_and_queue,
						gfx_setup, gfx_teardown),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
