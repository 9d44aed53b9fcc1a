/* Unit tests of preempt for a gang member (preempt.c's gang check): a
 * candidate is kept only when the whole gang then fits, planned on every node
 * as it would be once every candidate's victims are gone, and only the
 * candidates in that plan are kept.
 *
 *   test_keeps_only_the_plans_nodes   three candidates each freeing a node, a
 *                                     gang of two 8-GPU members: exactly two
 *                                     kept, each one the plan takes
 *   test_useless_preemption_dropped   one candidate frees a node, the gang
 *                                     needs two: nothing kept (a single pod
 *                                     asking the same keeps it)
 *   test_member_bound_already         one of two members bound: the one still
 *                                     to place is judged alone
 *   test_plan_keeps_to_the_pods_nodes a free node the members' node affinity
 *                                     excludes is not in the plan: both
 *                                     candidates it allows are kept
 */
#include "fixture.h"
#include "gang_fixture.h"

#include "common/strbuf.h"

/* A low-priority pod ml/<name> bound to <node>, holding GPU devices <ids>. */
static void low_pod(struct gfx *g, const char *name, const char *node, const char *ids)
{
	char json[1024], err[CACHE_ERR_LEN];
	cJSON *o;

	snprintf(json, sizeof(json),
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"uid-%s\","
		 "\"annotations\":{\"troupe.io/gpu-ids\":\"%s\"}},\"spec\":{\"nodeName\":\"%s\","
		 "\"priority\":0,\"containers\":[{\"name\":\"w\",\"resources\":{\"limits\":"
		 "{\"nvidia.com/gpu\":\"8\"}}}]},\"status\":{\"phase\":\"Running\"}}",
		 name, name, ids, node);
	o = cJSON_Parse(json);
	assert_non_null(o);
	assert_int_equal(cache_pod_apply(g->fx.cache, cache_pod_parse(o, &g->fx.cfg.cache, err,
								      sizeof(err))), 0);
	cJSON_Delete(o);
}

/* gpu-a100-1 and gpu-h100-1, the two nodes with 8 GPUs free, filled by
 * low-priority pods: no node has 8 free now (gpu-a100-0 has 4, gpu-h100-0 6). */
static void fill(struct gfx *g)
{
	low_pod(g, "lo-a", "gpu-a100-1", "0,1,2,3,4,5,6,7");
	low_pod(g, "lo-h", "gpu-h100-1", "0,1,2,3,4,5,6,7");
}

/* preempt for pod <pod> (a JSON object) with <victims> as its meta victim map:
 * the kept candidates. */
static cJSON *preempt_for(struct gfx *g, cJSON *pod, const char *victims)
{
	struct strbuf sb = STRBUF_INIT;
	char *text = cJSON_PrintUnformatted(pod);
	cJSON *out, *kept;
	unsigned status = 0;

	strbuf_printf(&sb, "{\"Pod\":%s,\"NodeNameToVictims\":null,\"NodeNameToMetaVictims\":%s}",
		      text, victims);
	assert_false(sb.failed);
	out = call(ext_preempt, &g->fx, sb.buf, &status);
	assert_int_equal(status, 200);
	kept = cJSON_DetachItemFromObjectCaseSensitive(out, "NodeNameToMetaVictims");
	assert_non_null(kept);
	cJSON_Delete(out);
	free(text);
	free(sb.buf);
	return kept;
}

static const char three_candidates[] =
	"{\"gpu-a100-1\":{\"Pods\":[{\"UID\":\"uid-lo-a\"}],\"NumPDBViolations\":0},"
	"\"gpu-h100-1\":{\"Pods\":[{\"UID\":\"uid-lo-h\"}],\"NumPDBViolations\":0},"
	"\"gpu-a100-0\":{\"Pods\":[{\"UID\":\"6f1c2a3e-0000-4000-8000-000000000001\"}],"
	"\"NumPDBViolations\":0}}";

static void test_keeps_only_the_plans_nodes(void **state)
{
	struct gfx *g = *state;
	cJSON *pod, *kept;
	const cJSON *c;
	unsigned n = 0;

	fill(g);
	gang_create(g, "hi", "hi", 2, 8, 2);
	pod = gang_pod("hi-0", "hi", 2, 8, "");
	kept = preempt_for(g, pod, three_candidates);
	/* Each candidate alone frees 8 GPUs for this member; the gang needs two
	 * nodes, so the plan takes two of the three and only they are kept, each
	 * with its victims as kube-scheduler proposed them. */
	cJSON_ArrayForEach(c, kept) {
		n++;
		assert_true(strcmp(c->string, "gpu-a100-1") == 0 ||
			    strcmp(c->string, "gpu-h100-1") == 0 ||
			    strcmp(c->string, "gpu-a100-0") == 0);
		assert_int_equal(cJSON_GetArraySize(item(c, "Pods")), 1);
	}
	assert_int_equal(n, 2);
	cJSON_Delete(kept);
	cJSON_Delete(pod);
}

static void test_useless_preemption_dropped(void **state)
{
	struct gfx *g = *state;
	static const char one[] =
		"{\"gpu-a100-1\":{\"Pods\":[{\"UID\":\"uid-lo-a\"}],\"NumPDBViolations\":0}}";
	cJSON *pod, *kept;

	fill(g);
	gang_create(g, "hi", "hi", 2, 8, 2);
	pod = gang_pod("hi-0", "hi", 2, 8, "");
	kept = preempt_for(g, pod, one);
	/* Evicting lo-a lets hi-0 run, but hi-1 would still have nowhere: the
	 * gang cannot start, so evicting anything is useless. */
	assert_int_equal(cJSON_GetArraySize(kept), 0);
	cJSON_Delete(kept);
	cJSON_Delete(pod);
	/* The same request for a pod of no gang keeps the candidate. */
	pod = pod_with("solo", "{\"limits\":{\"nvidia.com/gpu\":\"8\"}}");
	kept = preempt_for(g, pod, one);
	assert_non_null(item(kept, "gpu-a100-1"));
	cJSON_Delete(kept);
	cJSON_Delete(pod);
}

static void test_member_bound_already(void **state)
{
	struct gfx *g = *state;
	static const char one[] =
		"{\"gpu-a100-1\":{\"Pods\":[{\"UID\":\"uid-lo-a\"}],\"NumPDBViolations\":0}}";
	char err[CACHE_ERR_LEN];
	cJSON *pod, *kept, *bound;

	fill(g);
	gang_create(g, "hi", "hi", 2, 8, 1);
	/* hi-1 runs already, on gpu-v100-0 as the watch shows it. */
	bound = gang_pod("hi-1", "hi", 2, 8, "");
	cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(bound, "spec"), "nodeName",
				"gpu-v100-0");
	cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(bound, "status"),
					       "phase", cJSON_CreateString("Running"));
	assert_int_equal(cache_pod_apply(g->fx.cache, cache_pod_parse(bound, &g->fx.cfg.cache, err,
								      sizeof(err))), 0);
	pod = gang_pod("hi-0", "hi", 2, 8, "");
	kept = preempt_for(g, pod, one);
	/* One member to place: evicting lo-a is enough for it. */
	assert_non_null(item(kept, "gpu-a100-1"));
	cJSON_Delete(kept);
	cJSON_Delete(pod);
	cJSON_Delete(bound);
}

static void test_plan_keeps_to_the_pods_nodes(void **state)
{
	struct gfx *g = *state;
	static const char two[] =
		"{\"gpu-a100-1\":{\"Pods\":[{\"UID\":\"uid-lo-a\"}],\"NumPDBViolations\":0},"
		"\"gpu-h100-1\":{\"Pods\":[{\"UID\":\"uid-lo-h\"}],\"NumPDBViolations\":0}}";
	cJSON *pod, *kept, *aff;

	fill(g);
	/* gpu-a100-0 free: 8 GPUs a member could take, were it allowed there. */
	assert_int_equal(cache_pod_delete(g->fx.cache, "6f1c2a3e-0000-4000-8000-000000000001"), 0);
	gang_create(g, "hi", "hi", 2, 8, 2);
	pod = gang_pod("hi-0", "hi", 2, 8, "");
	aff = cJSON_Parse("{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
			  "{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":"
			  "\"kubernetes.io/hostname\",\"operator\":\"In\",\"values\":"
			  "[\"gpu-a100-1\",\"gpu-h100-1\"]}]}]}}}");
	cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "affinity", aff);
	kept = preempt_for(g, pod, two);
	assert_non_null(item(kept, "gpu-a100-1"));
	assert_non_null(item(kept, "gpu-h100-1"));
	cJSON_Delete(kept);
	cJSON_Delete(pod);
}

int main(void)
{
#define GFX(t) cmocka_unit_test_setup_teardown(t, gfx_setup, gfx_teardown)
	const struct CMUnitTest tests[] = {
		GFX(test_keeps_only_the_plans_nodes),
		GFX(test_useless_preemption_dropped),
		GFX(test_member_bound_already),
		GFX(test_plan_keeps_to_the_pods_nodes),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
