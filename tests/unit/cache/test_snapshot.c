/* Unit tests of loading cluster snapshots (snapshot.c): JSON, YAML, several
 * YAML documents, malformed files that change nothing, a missing file.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"
#include "common/log.h"
#include "common/util.h"
#include "common/yamljson.h"
#include "fixture.h"

/* ---- Snapshots ----------------------------------------------------------------- */

#define FIXTURE_CLUSTER_YAML TROUPE_SOURCE_ROOT "/tests/data/cluster.yaml"

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
	assert_int_equal(pi.state, CACHE_POD_STATE_UNACCOUNTED);
	assert_int_equal(pi.devices, 0);
	assert_int_equal(pi.unattributed, 0);
	pi = pod_info(c, "6f1c2a3e-0000-4000-8000-000000000010");
	assert_string_equal(pi.name, "llm-worker-0");
	assert_int_equal(pi.state, CACHE_POD_STATE_UNACCOUNTED);
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

	if (cache_snapshot_load(c, TEST_CLUSTER_JSON, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	check_cluster_small(c);
}

/* The YAML rendering of the same cluster loads to the same state. */
static void test_cache_snapshot_load_cluster_small_yaml(void **state)
{
	struct cache *c = *state;
	char err[CACHE_ERR_LEN] = "";

	if (cache_snapshot_load(c, FIXTURE_CLUSTER_YAML, err, sizeof(err)) != 0)
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
		if (cache_snapshot_load(c, TEST_CLUSTER_JSON, err, sizeof(err)) != 0)
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		CACHE_TEST(test_cache_snapshot_load_cluster_small_json),
		CACHE_TEST(test_cache_snapshot_load_cluster_small_yaml),
		CACHE_TEST(test_cache_snapshot_load_multi_document_yaml),
		cmocka_unit_test(test_cache_snapshot_load_malformed_changes_nothing),
		CACHE_TEST(test_cache_snapshot_load_missing_file),
	};

	/* Skipped items and odd pods log warnings by design; keep output to failures. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
