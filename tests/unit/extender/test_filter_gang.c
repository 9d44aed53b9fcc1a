/* Unit tests of filter and prioritize for gang members (filter_gang), on the
 * test cluster with a gang manager (gang_fixture.h): the whole gang is planned
 * and reserved at its first member's filter, each member passes only the nodes
 * its plan has an open slot on, a refusal names why on every node, and
 * prioritize scores the plan's slots.
 */
#include "gang_fixture.h"

/* The whole gang is planned and reserved at its first member's filter: two
 * 8-GPU members can only go to the two nodes with 8 free GPUs, whose GPUs the
 * reservation then takes from everyone else. */
static void test_ext_filter_gang_plans_and_reserves_the_whole_gang(void **state)
{
	struct gfx *g = *state;
	const cJSON *names;
	cJSON *j;

	gang_create(g, "w", "pair", 2, 8, 2);
	j = filter_member(g, "w-0", "pair", 2, 8, gpu_nodes);
	names = item(j, "NodeNames");

	assert_string_equal(error_of(j), "");
	assert_int_equal(cJSON_GetArraySize(names), 2);
	assert_true(names_has(j, "gpu-a100-1"));
	assert_true(names_has(j, "gpu-h100-1"));
	assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")), 2);
	cJSON_Delete(j);
	/* Reserved: a single pod no longer finds 8 free GPUs there. */
	assert_int_equal(free_on(&g->fx, "gpu-a100-1"), 0);
	assert_int_equal(free_on(&g->fx, "gpu-h100-1"), 0);
	assert_int_equal(free_on(&g->fx, "gpu-a100-0"), 4);
	j = filter_names(&g->fx, "single", 8, gpu_nodes);
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	cJSON_Delete(j);
}

/* The second member's filter uses the plan made at the first's: it is offered
 * the same slots again, and no second plan is made. */
static void test_ext_filter_gang_second_member_uses_the_plan(void **state)
{
	struct gfx *g = *state;
	struct gang_stats st;
	cJSON *j;

	pair_planned(g);
	j = filter_member(g, "w-1", "pair", 2, 8, gpu_nodes);
	assert_string_equal(error_of(j), "");
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 2);
	assert_true(names_has(j, "gpu-a100-1"));
	assert_true(names_has(j, "gpu-h100-1"));
	cJSON_Delete(j);
	gang_get_stats(g->gangs, &st);
	assert_int_equal(st.planned, 1);
	assert_int_equal(st.active, 1);
}

/* Until its members exist the gang is not planned: every node fails with the
 * wait, and nothing is reserved. */
static void test_ext_filter_gang_waits_for_its_members(void **state)
{
	struct gfx *g = *state;
	struct cluster_state before, after;
	const cJSON *failed;
	cJSON *j;

	state_take(&g->fx, &before);
	j = filter_member(g, "w-0", "pair", 2, 8, gpu_nodes);
	assert_string_equal(error_of(j), "");
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	failed = item(j, "FailedNodes");
	assert_int_equal(cJSON_GetArraySize(failed), 4);
	assert_contains(item(failed, "gpu-h100-1")->valuestring, "1 of 2 exist");
	cJSON_Delete(j);
	state_take(&g->fx, &after);
	assert_state_same(&before, &after, false, "waiting gang");
}

/* Member <name> of gang "pair" (quorum 2, 8 GPUs) as the watch shows it. */
static void watched(struct gfx *g, const char *name)
{
	char err[CACHE_ERR_LEN];
	cJSON *pod = gang_pod(name, "pair", 2, 8, "");

	assert_int_equal(cache_pod_apply(g->fx.cache, cache_pod_parse(pod, &g->fx.cfg.cache, err,
								      sizeof(err))), 0);
	cJSON_Delete(pod);
}

/* With a live cluster, a member the watch has not shown yet (known only from
 * its own filter request) is answered with an error, retried by kube-scheduler
 * after its backoff, not "waiting for its members" (which would set it aside
 * until some cluster event); once the watch shows it, it is judged as usual. */
static void test_ext_filter_gang_member_not_watched_yet_is_retried(void **state)
{
	struct gfx *g = *state;
	cJSON *j;

	cache_set_live(g->fx.cache);
	watched(g, "w-0");                      /* w-1: not yet */
	j = filter_member(g, "w-1", "pair", 2, 8, gpu_nodes);
	assert_contains(error_of(j), "gang member ml/w-1 is not in troupe's watch yet; retry");
	cJSON_Delete(j);
	/* The watch shows it: planned (both exist). */
	watched(g, "w-1");
	j = filter_member(g, "w-1", "pair", 2, 8, gpu_nodes);
	assert_string_equal(error_of(j), "");
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 2);
	cJSON_Delete(j);
}

/* A gang the candidates cannot hold is refused on every node with the reason,
 * and reserves nothing. */
static void test_ext_filter_gang_too_big_is_refused_everywhere(void **state)
{
	struct gfx *g = *state;
	struct cluster_state before, after;
	const cJSON *it;
	cJSON *j;
	size_t n = 0;

	gang_create(g, "big", "big", 3, 8, 3);
	state_take(&g->fx, &before);
	j = filter_member(g, "big-0", "big", 3, 8, gpu_nodes);
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	cJSON_ArrayForEach(it, item(j, "FailedNodes")) {
		assert_true(cJSON_IsString(it));
		assert_true(it->valuestring[0] != '\0');
		n++;
	}
	cJSON_ArrayForEach(it, item(j, "FailedAndUnresolvableNodes"))
		n++;
	assert_int_equal(n, 4);
	cJSON_Delete(j);
	state_take(&g->fx, &after);
	assert_state_same(&before, &after, false, "refused gang");
}

/* A bad troupe.io/gang-topology refuses every node, unresolvably, with the
 * parser's reason: the user sees it on the pod. */
static void test_ext_filter_gang_bad_topology_annotation(void **state)
{
	struct gfx *g = *state;
	char *body = names_args(gang_pod("t-0", "topo", 2, 8,
					 ",\"troupe.io/gang-topology\":\"sometimes\""), gpu_nodes);
	const cJSON *failed;
	unsigned status = 0;
	cJSON *j = call(ext_filter, &g->fx, body, &status);

	free(body);
	assert_int_equal(status, 200);
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	failed = item(j, "FailedAndUnresolvableNodes");
	assert_int_equal(cJSON_GetArraySize(failed), 4);
	for (const char *const *n = gpu_nodes; *n; n++)
		assert_true(cJSON_IsString(item(failed, *n)));
	assert_contains(item(failed, "gpu-a100-1")->valuestring, "gang-topology");
	cJSON_Delete(j);
}

/* Without a gang manager the same pod is placed as a single pod. */
static void test_ext_filter_gang_member_without_manager_is_single(void **state)
{
	struct gfx *g = *state;
	cJSON *j;

	g->fx.svc.gangs = NULL;
	gang_create(g, "w", "pair", 2, 8, 2);
	j = filter_member(g, "w-0", "pair", 2, 8, gpu_nodes);
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 2);
	cJSON_Delete(j);
	/* Nothing reserved. */
	assert_int_equal(free_on(&g->fx, "gpu-a100-1"), 8);
	assert_int_equal(free_on(&g->fx, "gpu-h100-1"), 8);
}

static int score_on(const cJSON *reply, const char *host)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, reply)
		if (strcmp(item(it, "Host")->valuestring, host) == 0)
			return (int)item(it, "Score")->valuedouble;
	fail_msg("no score for %s", host);
	return -1;
}

/* A planned member's prioritize: its plan's slots score 10, every other node 0. */
static void test_ext_prioritize_gang_member_scores_its_slots(void **state)
{
	struct gfx *g = *state;
	char *body;
	cJSON *j;

	pair_planned(g);
	body = names_args(gang_pod("w-0", "pair", 2, 8, ""), gpu_nodes);
	j = call(ext_prioritize, &g->fx, body, NULL);
	free(body);
	assert_int_equal(cJSON_GetArraySize(j), 4);
	assert_int_equal(score_on(j, "gpu-a100-1"), 10);
	assert_int_equal(score_on(j, "gpu-h100-1"), 10);
	assert_int_equal(score_on(j, "gpu-a100-0"), 0);
	assert_int_equal(score_on(j, "gpu-h100-0"), 0);
	cJSON_Delete(j);
}

int main(void)
{
#define GFX(t) cmocka_unit_test_setup_teardown(t, gfx_setup, gfx_teardown)
	const struct CMUnitTest tests[] = {
		GFX(test_ext_filter_gang_plans_and_reserves_the_whole_gang),
		GFX(test_ext_filter_gang_second_member_uses_the_plan),
		GFX(test_ext_filter_gang_waits_for_its_members),
		GFX(test_ext_filter_gang_member_not_watched_yet_is_retried),
		GFX(test_ext_filter_gang_too_big_is_refused_everywhere),
		GFX(test_ext_filter_gang_bad_topology_annotation),
		GFX(test_ext_filter_gang_member_without_manager_is_single),
		GFX(test_ext_prioritize_gang_member_scores_its_slots),
	};
#undef GFX

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
