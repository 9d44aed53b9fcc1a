/* Unit tests for gang/: which pod group a pod belongs to, from the labels and
 * annotations the common gang schedulers use (kube-interfaces.md section 9).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "gang/gang.h"

struct group_case {
	const char *what;
	const char *pod;                /* the pod object, JSON */
	const char *group;              /* "ns/name", or NULL: no group */
};

static const struct group_case group_cases[] = {
	/* Each recognised key on its own. */
	{ "current scheduler-plugins label",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"train\"}}}",
	  "ml/train" },
	{ "older CRD-based label",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"pod-group.scheduling.sigs.k8s.io\":\"train\"}}}",
	  "ml/train" },
	{ "lightweight coscheduling label",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"pod-group.scheduling.sigs.k8s.io/name\":\"train\","
	  "\"pod-group.scheduling.sigs.k8s.io/min-available\":\"4\"}}}",
	  "ml/train" },
	{ "Volcano annotation",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"annotations\":{\"scheduling.k8s.io/group-name\":\"train\"}}}",
	  "ml/train" },
	/* Precedence: first found in the documented order. */
	{ "current label beats the older ones",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"labels\":{"
	  "\"pod-group.scheduling.sigs.k8s.io/name\":\"c\","
	  "\"pod-group.scheduling.sigs.k8s.io\":\"b\","
	  "\"scheduling.x-k8s.io/pod-group\":\"a\"},"
	  "\"annotations\":{\"scheduling.k8s.io/group-name\":\"d\"}}}",
	  "ml/a" },
	{ "older CRD label beats the lightweight one",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"labels\":{"
	  "\"pod-group.scheduling.sigs.k8s.io/name\":\"c\","
	  "\"pod-group.scheduling.sigs.k8s.io\":\"b\"}}}",
	  "ml/b" },
	{ "any label beats the annotation",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"pod-group.scheduling.sigs.k8s.io/name\":\"c\"},"
	  "\"annotations\":{\"scheduling.k8s.io/group-name\":\"d\"}}}",
	  "ml/c" },
	{ "an empty label value is skipped for the next key",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"\"},"
	  "\"annotations\":{\"scheduling.k8s.io/group-name\":\"d\"}}}",
	  "ml/d" },
	{ "a non-string label value is skipped for the next key",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"scheduling.x-k8s.io/pod-group\":7,"
	  "\"pod-group.scheduling.sigs.k8s.io\":\"b\"}}}",
	  "ml/b" },
	/* Namespace. */
	{ "no namespace means default",
	  "{\"metadata\":{\"name\":\"p\","
	  "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"train\"}}}",
	  "default/train" },
	{ "empty namespace means default",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"\","
	  "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"train\"}}}",
	  "default/train" },
	{ "the group is in the pod's own namespace",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"research\","
	  "\"annotations\":{\"scheduling.k8s.io/group-name\":\"nb\"}}}",
	  "research/nb" },
	/* No group. */
	{ "no labels or annotations",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"}}", NULL },
	{ "unrelated labels",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"app\":\"train\",\"scheduling.x-k8s.io/queue\":\"q\"}}}", NULL },
	{ "every key empty",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"labels\":{"
	  "\"scheduling.x-k8s.io/pod-group\":\"\",\"pod-group.scheduling.sigs.k8s.io\":\"\","
	  "\"pod-group.scheduling.sigs.k8s.io/name\":\"\"},"
	  "\"annotations\":{\"scheduling.k8s.io/group-name\":\"\"}}}", NULL },
	{ "the label keys count only as labels",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"annotations\":{\"scheduling.x-k8s.io/pod-group\":\"train\"}}}", NULL },
	{ "the annotation key counts only as an annotation",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"scheduling.k8s.io/group-name\":\"train\"}}}", NULL },
	{ "keys are case-sensitive",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"Scheduling.x-k8s.io/Pod-Group\":\"train\"}}}", NULL },
	{ "labels not an object",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":[\"scheduling.x-k8s.io/pod-group\"]}}", NULL },
	{ "no metadata", "{\"spec\":{}}", NULL },
	{ "metadata not an object", "{\"metadata\":\"ml/train\"}", NULL },
	{ "labels at the top level do not count",
	  "{\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"train\"},"
	  "\"metadata\":{\"name\":\"p\"}}", NULL },
};

static void test_gang_pod_group_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(group_cases) / sizeof(group_cases[0]); i++) {
		const struct group_case *c = &group_cases[i];
		cJSON *pod = cJSON_Parse(c->pod);
		char out[384];
		bool got;

		if (!pod)
			fail_msg("case \"%s\": the test's pod JSON does not parse", c->what);
		memset(out, 'x', sizeof(out));
		out[sizeof(out) - 1] = '\0';
		got = gang_pod_group(pod, out, sizeof(out));
		if (got != (c->group != NULL) || (got && strcmp(out, c->group) != 0))
			fail_msg("case \"%s\": got %s \"%s\", want %s \"%s\"", c->what,
				 got ? "true" : "false", got ? out : "",
				 c->group ? "true" : "false", c->group ? c->group : "");
		cJSON_Delete(pod);
	}
}

/* kube-interfaces.md section 9 lists a fifth membership label, used by the
 * intermediate scheduler-plugins releases, and section 11 says to accept
 * every form listed there. */
static void test_gang_pod_group_intermediate_label_is_recognised(void **state)
{
	cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
				 "\"labels\":{\"scheduling.sigs.k8s.io/pod-group\":\"train\"}}}");
	char out[384] = "";
	bool found;

	(void)state;
	assert_non_null(pod);
	found = gang_pod_group(pod, out, sizeof(out));
	cJSON_Delete(pod);
	assert_true(found);
	assert_string_equal(out, "ml/train");
}

static void test_gang_pod_group_absent_pod_is_no_group(void **state)
{
	char out[16] = "untouched";

	(void)state;
	assert_false(gang_pod_group(NULL, out, sizeof(out)));
	assert_string_equal(out, "untouched");
}

static void test_gang_pod_group_no_group_leaves_output_alone(void **state)
{
	cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"}}");
	char out[16] = "untouched";

	(void)state;
	assert_non_null(pod);
	assert_false(gang_pod_group(pod, out, sizeof(out)));
	assert_string_equal(out, "untouched");
	cJSON_Delete(pod);
}

/* A small buffer gets a terminated prefix, never an overrun. */
static void test_gang_pod_group_short_buffer_stays_terminated(void **state)
{
	cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
				 "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"training\"}}}");
	char out[8 + 1];

	(void)state;
	assert_non_null(pod);
	memset(out, 'x', sizeof(out));
	assert_true(gang_pod_group(pod, out, 6));
	assert_string_equal(out, "ml/tr");
	assert_int_equal(out[6], 'x');
	cJSON_Delete(pod);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_pod_group_table),
		cmocka_unit_test(test_gang_pod_group_intermediate_label_is_recognised),
		cmocka_unit_test(test_gang_pod_group_absent_pod_is_no_group),
		cmocka_unit_test(test_gang_pod_group_no_group_leaves_output_alone),
		cmocka_unit_test(test_gang_pod_group_short_buffer_stays_terminated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
