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

int main(void)
{
#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		FX(test_ext_readyz_on_a_snapshot),
		FX(test_ext_debug_state_lists_nodes),
	};
#undef FX

	/* Refusals are logged as warnings; keep the test output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
