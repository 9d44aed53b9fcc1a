/* Unit tests of node_match.c: a pod's nodeSelector, required node affinity
 * (every operator, matchFields) and tolerations of a node's taints, as
 * kube-scheduler's NodeAffinity and TaintToleration plugins judge them.
 */
#include "fixture.h"

#include "extender/node_match.h"

/* Node "n1" with labels zone=a, gpus=8, kubernetes.io/hostname=n1 and the
 * taint dedicated=ml:NoSchedule (and a PreferNoSchedule one, never binding). */
static struct cache_node *node(void)
{
	static const char json[] =
		"{\"metadata\":{\"name\":\"n1\",\"labels\":{\"zone\":\"a\",\"gpus\":\"8\","
		"\"kubernetes.io/hostname\":\"n1\"}},\"spec\":{\"taints\":[{\"key\":\"dedicated\","
		"\"value\":\"ml\",\"effect\":\"NoSchedule\"},{\"key\":\"soft\",\"effect\":"
		"\"PreferNoSchedule\"}]},\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"},"
		"\"allocatable\":{\"nvidia.com/gpu\":\"8\"},\"conditions\":[{\"type\":\"Ready\","
		"\"status\":\"True\"}]}}";
	struct cache_opts o = { .gpu_resources = { "nvidia.com/gpu" }, .n_gpu_resources = 1 };
	char err[CACHE_ERR_LEN];
	cJSON *j = cJSON_Parse(json);
	struct cache_node *n = cache_node_parse(j, &o, err, sizeof(err));

	cJSON_Delete(j);
	assert_non_null(n);
	return n;
}

#define TOLERATE "\"tolerations\":[{\"key\":\"dedicated\",\"operator\":\"Equal\",\"value\":\"ml\"," \
		 "\"effect\":\"NoSchedule\"}]"
#define TERM(expr) "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\"" \
		   ":{\"nodeSelectorTerms\":[" expr "]}}}"

static void test_pod_may_use_node(void **state)
{
	static const struct {
		const char *spec;
		bool want;
	} cases[] = {
		/* Taints: untolerated NoSchedule refuses; tolerated by Equal, by
		 * Exists on the key, by an empty key with Exists. */
		{ "{}", false },
		{ "{" TOLERATE "}", true },
		{ "{\"tolerations\":[{\"key\":\"dedicated\",\"operator\":\"Exists\"}]}", true },
		{ "{\"tolerations\":[{\"operator\":\"Exists\"}]}", true },
		{ "{\"tolerations\":[{\"key\":\"dedicated\",\"value\":\"other\"}]}", false },
		{ "{\"tolerations\":[{\"key\":\"dedicated\",\"operator\":\"Exists\","
		  "\"effect\":\"NoExecute\"}]}", false },
		/* nodeSelector. */
		{ "{" TOLERATE ",\"nodeSelector\":{\"zone\":\"a\"}}", true },
		{ "{" TOLERATE ",\"nodeSelector\":{\"zone\":\"b\"}}", false },
		{ "{" TOLERATE ",\"nodeSelector\":{\"rack\":\"a\"}}", false },
		/* Required node affinity: every operator, terms ORed, requirements ANDed. */
		{ "{" TOLERATE "," TERM("{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\","
		  "\"values\":[\"b\",\"a\"]}]}") "}", true },
		{ "{" TOLERATE "," TERM("{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":"
		  "\"NotIn\",\"values\":[\"a\"]}]}") "}", false },
		{ "{" TOLERATE "," TERM("{\"matchExpressions\":[{\"key\":\"rack\",\"operator\":"
		  "\"NotIn\",\"values\":[\"a\"]}]}") "}", true },
		{ "{" TOLERATE "," TERM("{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":"
		  "\"Exists\"},{\"key\":\"rack\",\"operator\":\"DoesNotExist\"}]}") "}", true },
		{ "{" TOLERATE "," TERM("{\"matchExpressions\":[{\"key\":\"gpus\",\"operator\":\"Gt\","
		  "\"values\":[\"4\"]}]}") "}", true },
		{ "{" TOLERATE "," TERM("{\"matchExpressions\":[{\"key\":\"gpus\",\"operator\":\"Lt\","
		  "\"values\":[\"4\"]}]}") "}", false },
		{ "{" TOLERATE "," TERM("{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"Gt\","
		  "\"values\":[\"4\"]}]}") "}", false },
		{ "{" TOLERATE "," TERM("{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":"
		  "\"Near\",\"values\":[\"a\"]}]}") "}", false },
		{ "{" TOLERATE "," TERM("{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\","
		  "\"values\":[\"b\"]}]},{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":"
		  "\"In\",\"values\":[\"n1\"]}]}") "}", true },
		{ "{" TOLERATE "," TERM("{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":"
		  "\"NotIn\",\"values\":[\"n1\"]}]}") "}", false },
		{ "{" TOLERATE "," TERM("{}") "}", false },
		{ "{" TOLERATE "," TERM("") "}", false },
		{ "{" TOLERATE ",\"affinity\":{\"nodeAffinity\":{}}}", true },
	};
	struct cache_node *n = node();
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char json[2048];
		cJSON *pod;
		bool got;

		snprintf(json, sizeof(json), "{\"spec\":%s}", cases[i].spec);
		pod = cJSON_Parse(json);
		if (!pod)
			fail_msg("case %zu does not parse: %s", i, json);
		got = ext_pod_may_use_node(pod, n);
		if (got != cases[i].want) {
			print_message("case %zu %s: got %d\n", i, cases[i].spec, got);
			bad++;
		}
		cJSON_Delete(pod);
	}
	cache_node_free(n);
	assert_int_equal(bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pod_may_use_node),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
