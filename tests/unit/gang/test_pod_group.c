/* Which pod group a pod belongs to: the rule is the cache's
 * (cache_pod_group_name, and the namespace cache_pod_parse gives the pod), the
 * one the gang manager reads through cache_pod_info. These cases were
 * gang_pod_group's (the gang module's copy, gone); each is checked here
 * against the cache's rule: the group's name from cache_pod_group_name, and,
 * for a pod that names one, the "namespace/name" the cache records when the
 * pod is parsed and applied.
 */
#include "fixture.h"

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
	{ "Kubernetes workload API field",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"},"
	  "\"spec\":{\"schedulingGroup\":{\"podGroupName\":\"train\"}}}",
	  "ml/train" },
	{ "Kueue label",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"kueue.x-k8s.io/pod-group-name\":\"train\"}}}",
	  "ml/train" },
	/* Precedence: first found in the documented order. */
	{ "the workload API field beats every label",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"a\"}},"
	  "\"spec\":{\"schedulingGroup\":{\"podGroupName\":\"w\"}}}",
	  "ml/w" },
	{ "an empty workload API field is skipped",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"a\"}},"
	  "\"spec\":{\"schedulingGroup\":{\"podGroupName\":\"\"}}}",
	  "ml/a" },
	{ "the Volcano annotation beats the Kueue label",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"labels\":{\"kueue.x-k8s.io/pod-group-name\":\"k\"},"
	  "\"annotations\":{\"scheduling.k8s.io/group-name\":\"d\"}}}",
	  "ml/d" },
	{ "the Kueue key counts only as a label",
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
	  "\"annotations\":{\"kueue.x-k8s.io/pod-group-name\":\"k\"}}}", NULL },
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

/* The pod group as the cache records <pod> under it: "namespace/group" from
 * cache_pod_parse and cache_pod_apply, read back with cache_pod_get. */
static void recorded_group(const cJSON *pod, char *out, size_t len)
{
	struct cache *c = cache_new(&gpu_opts);
	struct cache_pod_info info;
	char err[CACHE_ERR_LEN];
	static const char *const uids[] = { "ml/p", "default/p", "research/p" };
	struct cache_pod *p;
	size_t i = 0;

	assert_non_null(c);
	p = cache_pod_parse(pod, &gpu_opts, err, sizeof(err));
	if (!p)
		fail_msg("cache_pod_parse: %s", err);
	assert_int_equal(cache_pod_apply(c, p), 0);
	/* No uid in the cases: the cache names the pod "namespace/name". */
	while (i < sizeof(uids) / sizeof(uids[0]) && cache_pod_get(c, uids[i], &info) != 0)
		i++;
	assert_true(i < sizeof(uids) / sizeof(uids[0]));
	snprintf(out, len, "%s/%s", info.ns, info.group[0] ? info.group : "(none)");
	cache_free(c);
}

static void check_case(const struct group_case *c)
{
	cJSON *pod = cJSON_Parse(c->pod);
	const char *name;

	if (!pod)
		fail_msg("case \"%s\": the test's pod JSON does not parse", c->what);
	name = cache_pod_group_name(pod);
	if ((name != NULL) != (c->group != NULL) ||
	    (name && strcmp(name, strchr(c->group, '/') + 1) != 0))
		fail_msg("case \"%s\": cache_pod_group_name gave \"%s\", want \"%s\"", c->what,
			 name ? name : "(none)", c->group ? strchr(c->group, '/') + 1 : "(none)");
	if (c->group) {
		char got[K8S_KEY_BUF + 16];

		recorded_group(pod, got, sizeof(got));
		if (strcmp(got, c->group) != 0)
			fail_msg("case \"%s\": the cache records the pod in \"%s\", want \"%s\"",
				 c->what, got, c->group);
	}
	cJSON_Delete(pod);
}

static void test_gang_pod_group_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(group_cases) / sizeof(group_cases[0]); i++)
		check_case(&group_cases[i]);
}

/* kube-interfaces.md section 9 lists a fifth membership label, used by the
 * intermediate scheduler-plugins releases, and section 11 says to accept
 * every form listed there. */
static void test_gang_pod_group_intermediate_label_is_recognised(void **state)
{
	static const struct group_case c = {
		"intermediate scheduler-plugins label",
		"{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
		"\"labels\":{\"scheduling.sigs.k8s.io/pod-group\":\"train\"}}}",
		"ml/train",
	};

	(void)state;
	check_case(&c);
}

static void test_gang_pod_group_absent_pod_is_no_group(void **state)
{
	(void)state;
	assert_null(cache_pod_group_name(NULL));
}

/* A pod naming no group is recorded with none: the manager then treats it as
 * a single pod. */
static void test_gang_pod_group_no_group_is_recorded_as_none(void **state)
{
	cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"}}");
	char got[K8S_KEY_BUF + 16];

	(void)state;
	assert_non_null(pod);
	assert_null(cache_pod_group_name(pod));
	recorded_group(pod, got, sizeof(got));
	assert_string_equal(got, "ml/(none)");
	cJSON_Delete(pod);
}

/* The name returned points into the pod object: the whole value, however long
 * a valid name is (253 characters), never a cut copy. */
static void test_gang_pod_group_long_name_is_whole(void **state)
{
	char name[K8S_NAME_BUF], json[K8S_NAME_BUF + 200];
	cJSON *pod;

	(void)state;
	memset(name, 'g', K8S_NAME_MAX);
	name[K8S_NAME_MAX] = '\0';
	snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
		 "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"%s\"}}}", name);
	pod = cJSON_Parse(json);
	assert_non_null(pod);
	assert_string_equal(cache_pod_group_name(pod), name);
	cJSON_Delete(pod);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_pod_group_table),
		cmocka_unit_test(test_gang_pod_group_intermediate_label_is_recognised),
		cmocka_unit_test(test_gang_pod_group_absent_pod_is_no_group),
		cmocka_unit_test(test_gang_pod_group_no_group_is_recorded_as_none),
		cmocka_unit_test(test_gang_pod_group_long_name_is_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
