/* Unit tests of filter on the test cluster without gangs: verdicts in names and
 * full mode, requests that are errors, and that filter never changes usage.
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

#include "fixture.h"

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

/* Pod <name> with <resources>; the last kind is a DRA pod: its container
 * names a claim of the pod's spec.resourceClaims (devices kube-scheduler's
 * DRA plugin allocates), and it asks no managed resource. */
static cJSON *pod_kind(const char *name, const char *resources, bool dra)
{
	cJSON *p = pod_with(name, resources);

	if (dra)
		cJSON_AddItemToObject(cJSON_GetObjectItem(p, "spec"), "resourceClaims",
				      cJSON_Parse("[{\"name\":\"gpu\",\"resourceClaimName\":"
						  "\"train-gpu\"}]"));
	return p;
}

/* A pod that asks for no GPUs: every node passes unchanged, whatever troupe
 * thinks of it, in both modes. That includes a pod with DRA ResourceClaims
 * and no managed resource: its devices are the DRA plugin's to find. */
static void test_ext_filter_pod_without_gpus_passes_every_node(void **state)
{
	struct fx *f = *state;
	static const char *const resources[] = {
		"{\"requests\":{\"cpu\":\"1\"}}",
		"{\"limits\":{\"nvidia.com/gpu\":\"0\"}}",
		"{}",
		"{\"claims\":[{\"name\":\"gpu\"}]}",
	};
	const size_t n_kinds = sizeof(resources) / sizeof(resources[0]);
	struct cache_stats before, after;

	cache_get_stats(f->cache, &before);

	for (size_t r = 0; r < n_kinds; r++) {
		cJSON *items = cJSON_CreateArray(), *sent;
		unsigned status = 0;
		char *body;
		cJSON *j;
		int i = 0;
		const cJSON *it;

		body = names_args(pod_kind("cpu-only", resources[r], r == n_kinds - 1),
				  request_nodes);
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
		body = full_args(pod_kind("cpu-only", resources[r], r == n_kinds - 1), items);
		j = call(ext_filter, f, body, &status);
		free(body);
		assert_int_equal(status, 200);
		assert_true(cJSON_Compare(item(item(j, "Nodes"), "items"), sent, true));
		assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")), 0);
		cJSON_Delete(sent);
		cJSON_Delete(j);
	}
	/* Untouched: nothing remembered, held or assumed for any of them. */
	cache_get_stats(f->cache, &after);
	assert_int_equal(after.pods, before.pods);
	assert_int_equal(after.gpus_held, before.gpus_held);
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

/* An invalid GPU request is the pod's problem, not the node's, and no node
 * will ever take it: 200, no Error (kube-scheduler would retry it as its own
 * error, with backoff, for ever), every node unresolvable with the reason
 * naming the pod and what is wrong. */
static void test_ext_filter_invalid_gpu_request_is_unresolvable_everywhere(void **state)
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
		if (status != 200 || e[0])
			fail_msg("%s: status %u, Error \"%s\"", invalid_requests[i].resources,
				 status, e);
		assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
		assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")), 0);
		for (size_t n = 0; request_nodes[n]; n++) {
			const cJSON *why = item(item(j, "FailedAndUnresolvableNodes"),
						request_nodes[n]);

			if (!cJSON_IsString(why) ||
			    !strstr(why->valuestring, invalid_requests[i].message) ||
			    !strstr(why->valuestring, "ml/bad"))
				fail_msg("%s: node %s: %s", invalid_requests[i].resources,
					 request_nodes[n], cJSON_IsString(why) ? why->valuestring
									       : "not refused");
		}
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

int main(void)
{
#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		FX(test_ext_filter_names_mode_verdicts),
		FX(test_ext_filter_changes_no_usage),
		FX(test_ext_filter_none_fit_gives_empty_array),
		FX(test_ext_filter_both_null_passes_zero_nodes),
		FX(test_ext_filter_names_round_trip_through_escaping),
		FX(test_ext_filter_full_mode_request_objects_are_authoritative),
		FX(test_ext_filter_full_mode_nameless_node_is_refused),
		FX(test_ext_filter_pod_without_gpus_passes_every_node),
		FX(test_ext_filter_invalid_gpu_request_is_unresolvable_everywhere),
		FX(test_ext_filter_malformed_json_is_400),
		FX(test_ext_filter_before_sync_is_an_error),
		FX(test_ext_filter_pod_without_name_is_an_error),
	};
#undef FX

	/* Refusals are logged as warnings; keep the test output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
