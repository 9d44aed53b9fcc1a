/* What troupe shows about itself: /debug/state, /debug/cache and /readyz on a
 * snapshot.
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

/* The pod in /debug/cache's reply whose name is <name>. */
static const cJSON *cache_pod_named(const cJSON *reply, const char *name)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, item(reply, "pods"))
		if (strcmp(item(it, "name")->valuestring, name) == 0)
			return it;
	fail_msg("/debug/cache lists no pod %s", name);
	return NULL;
}

/* /debug/cache names each pod's accounting state: a Running pod that asks for
 * no GPU, a finished one and a pending one occupy nothing ("not-accounted",
 * not the pod's phase); a running GPU pod is "bound"; troupe's own bind makes
 * it "assumed". */
static void test_ext_debug_cache_pod_states(void **state)
{
	static const struct {
		const char *pod, *state, *node;
	} cases[] = {
		{ "coredns-5d78c9869d-abcde", "not-accounted", "cpu-0" },
		{ "old-eval", "not-accounted", "gpu-a100-1" },
		{ "llm-worker-0", "not-accounted", "" },
		{ "resnet-0", "bound", "gpu-a100-0" },
		{ "first", "assumed", "gpu-h100-1" },
	};
	struct fx *f = *state;
	struct ext_reply r;
	cJSON *j;

	place(f, "first", 4, "gpu-h100-1");
	ext_reply_init(&r);
	ext_debug_cache(&f->svc, &r);
	assert_int_equal(r.status, 200);
	j = cJSON_ParseWithLength(r.body.buf, r.body.len);
	assert_non_null(j);
	assert_true(cJSON_IsTrue(item(j, "synced")));
	assert_int_equal(cJSON_GetArraySize(item(j, "nodes")), 8);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const cJSON *p = cache_pod_named(j, cases[i].pod);

		assert_string_equal(item(p, "state")->valuestring, cases[i].state);
		assert_string_equal(item(p, "node")->valuestring, cases[i].node);
	}
	assert_string_equal(item(cache_pod_named(j, "first"), "devices")->valuestring,
			    "0,1,2,3");
	cJSON_Delete(j);
	ext_reply_fini(&r);
}

int main(void)
{
#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		FX(test_ext_readyz_on_a_snapshot),
		FX(test_ext_debug_state_lists_nodes),
		FX(test_ext_debug_cache_pod_states),
	};
#undef FX

	/* Refusals are logged as warnings; keep the test output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
