/* Unit tests for gang/: which pod group a pod belongs to, from the labels and
 * annotations the common gang schedulers use (kube-interfaces.md section 9).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- The whole-gang planner -------------------------------------------------- */

static const struct cache_opts gpu_opts = { .gpu_resources = { "nvidia.com/gpu" },
					    .n_gpu_resources = 1 };

/* A cluster of test nodes: names, GPU counts, rack/spine labels, usage. */
struct cluster {
	unsigned n;
	struct cache_node *nodes[64];
	struct cache_node_view views[64];
};

static void add_node(struct cluster *c, const char *name, unsigned gpus, const char *spine,
		     const char *block, uint64_t used, bool ready)
{
	char json[1024], labels[512] = "", err[CACHE_ERR_LEN];
	cJSON *o;

	if (spine)
		snprintf(labels + strlen(labels), sizeof(labels) - strlen(labels),
			 "%s\"network.topology.nvidia.com/spine\":\"%s\"", labels[0] ? "," : "", spine);
	if (block)
		snprintf(labels + strlen(labels), sizeof(labels) - strlen(labels),
			 "%s\"network.topology.nvidia.com/block\":\"%s\"", labels[0] ? "," : "", block);
	snprintf(json, sizeof(json),
		 "{\"metadata\":{\"name\":\"%s\",\"labels\":{%s}},\"status\":{\"allocatable\":"
		 "{\"nvidia.com/gpu\":\"%u\"},\"capacity\":{\"nvidia.com/gpu\":\"%u\"},"
		 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
		 name, labels, gpus, gpus, ready ? "True" : "False");
	o = cJSON_Parse(json);
	assert_non_null(o);
	c->nodes[c->n] = cache_node_parse(o, &gpu_opts, err, sizeof(err));
	assert_non_null(c->nodes[c->n]);
	cJSON_Delete(o);
	c->views[c->n] = (struct cache_node_view){ c->nodes[c->n], used, 0 };
	c->n++;
}

static void cluster_free(struct cluster *c)
{
	for (unsigned i = 0; i < c->n; i++)
		cache_node_free(c->nodes[i]);
}

static struct placement_request gpus(unsigned k)
{
	struct placement_request r = { .demand = { .gpu_resource = 0, .gpus = k } };

	return r;
}

/* Invariants of any plan: every member placed, devices free and disjoint on
 * each node, k per member, and all members inside the reported domain. */
static void check_plan(const struct cluster *c, const struct gang_plan *p, unsigned members,
		       unsigned k)
{
	uint64_t taken[64] = { 0 };

	assert_int_equal(p->n_slots, members);
	for (unsigned s = 0; s < p->n_slots; s++) {
		const struct gang_slot *sl = &p->slots[s];

		assert_true(sl->node < c->n);
		assert_int_equal(__builtin_popcountll(sl->devices), k);
		assert_true((sl->devices & c->views[sl->node].used) == 0);
		assert_true((sl->devices & taken[sl->node]) == 0);
		taken[sl->node] |= sl->devices;
		if (p->level >= 0) {
			const char *key = gang_default_levels.keys[p->level][0];

			assert_string_equal(cache_node_label(c->nodes[sl->node], key), p->domain);
		}
	}
}

static void test_gang_plan_uses_the_finest_domain_that_holds_the_gang(void **state)
{
	struct cluster c = { 0 };
	struct gang_plan p;
	char why[256];
	struct placement_request r = gpus(4);

	(void)state;
	/* Two spines of two racks each; racks of 4 nodes with 8 free GPUs. */
	for (unsigned i = 0; i < 16; i++) {
		char name[16], block[16];

		snprintf(name, sizeof(name), "n%02u", i);
		snprintf(block, sizeof(block), "rack-%u", i / 4);
		add_node(&c, name, 8, i < 8 ? "spine-a" : "spine-b", block, 0, true);
	}
	/* 8 members x 4 GPUs = 4 nodes: one rack (block level, 3). */
	assert_int_equal(gang_plan_make(c.views, c.n, 8, &r, &gang_default_levels, &p, why,
					sizeof(why)), 0);
	check_plan(&c, &p, 8, 4);
	assert_int_equal(p.level, 3);
	assert_int_equal(p.nodes_used, 4);
	gang_plan_fini(&p);
	/* 12 members need 6 nodes: no rack holds them, a spine does (level 2). */
	assert_int_equal(gang_plan_make(c.views, c.n, 12, &r, &gang_default_levels, &p, why,
					sizeof(why)), 0);
	check_plan(&c, &p, 12, 4);
	assert_int_equal(p.level, 2);
	gang_plan_fini(&p);
	/* 20 members need 10 nodes: no spine holds them; the cluster does. */
	assert_int_equal(gang_plan_make(c.views, c.n, 20, &r, &gang_default_levels, &p, why,
					sizeof(why)), 0);
	check_plan(&c, &p, 20, 4);
	assert_true(p.level < 2);
	gang_plan_fini(&p);
	cluster_free(&c);
}

static void test_gang_plan_prefers_the_domain_needing_fewest_nodes(void **state)
{
	struct cluster c = { 0 };
	struct gang_plan p;
	char why[256];
	struct placement_request r = gpus(2);

	(void)state;
	/* rack-a: four nodes with 2 free GPUs each; rack-b: one empty 8-GPU node. */
	for (unsigned i = 0; i < 4; i++) {
		char name[16];

		snprintf(name, sizeof(name), "a%u", i);
		add_node(&c, name, 8, "s", "rack-a", 0x3F, true);
	}
	add_node(&c, "b0", 8, "s", "rack-b", 0, true);
	assert_int_equal(gang_plan_make(c.views, c.n, 4, &r, &gang_default_levels, &p, why,
					sizeof(why)), 0);
	check_plan(&c, &p, 4, 2);
	assert_string_equal(p.domain, "rack-b");
	assert_int_equal(p.nodes_used, 1);
	gang_plan_fini(&p);
	cluster_free(&c);
}

static void test_gang_plan_refuses_with_a_reason_and_skips_unusable_nodes(void **state)
{
	struct cluster c = { 0 };
	struct gang_plan p;
	char why[256] = "";
	struct placement_request r = gpus(8);
	struct placement_request req2 = gpus(2);

	(void)state;
	add_node(&c, "ok0", 8, NULL, NULL, 0, true);
	add_node(&c, "ok1", 8, NULL, NULL, 0, true);
	add_node(&c, "down", 8, NULL, NULL, 0, false);          /* not Ready */
	add_node(&c, "busy", 8, NULL, NULL, 0x1, true);         /* 7 free */
	assert_int_equal(gang_plan_make(c.views, c.n, 3, &r, &gang_default_levels, &p, why,
					sizeof(why)), -ENOSPC);
	assert_string_equal(why, "3 pods x 8 GPUs; the offered nodes hold 2");
	assert_int_equal(p.n_slots, 0);
	assert_int_equal(gang_plan_make(c.views, c.n, 2, &r, &gang_default_levels, &p, why,
					sizeof(why)), 0);
	check_plan(&c, &p, 2, 8);
	assert_int_equal(p.level, -1);
	gang_plan_fini(&p);
	/* A policy no node can meet (topology unknown, NVLink required): no room. */
	req2.policy.kind = PLACEMENT_POLICY_REQUIRED;
	assert_int_equal(gang_plan_make(c.views, c.n, 1, &req2, &gang_default_levels, &p, why,
					sizeof(why)), -ENOSPC);
	cluster_free(&c);
}

/* Random clusters: any plan satisfies the invariants, and a refusal only
 * happens when the free GPUs really are too few. */
static void test_gang_plan_random_clusters_keep_the_invariants(void **state)
{
	unsigned seed = 77, planned = 0, refused = 0;

	(void)state;
	for (unsigned round = 0; round < 200; round++) {
		struct cluster c = { 0 };
		unsigned k = 1u << (rand_r(&seed) % 4), members = 1 + (unsigned)rand_r(&seed) % 24;
		unsigned fit = 0;
		struct placement_request r = gpus(k);
		struct gang_plan p;
		char why[256];
		int ret;

		for (unsigned i = 0; i < 1 + (unsigned)rand_r(&seed) % 40; i++) {
			char name[16], block[16], spine[16];
			uint64_t used = (uint64_t)rand_r(&seed) & 0xFF & (uint64_t)rand_r(&seed);

			snprintf(name, sizeof(name), "n%u", i);
			snprintf(block, sizeof(block), "b%u", (unsigned)rand_r(&seed) % 5);
			snprintf(spine, sizeof(spine), "s%u", (unsigned)rand_r(&seed) % 2);
			add_node(&c, name, 8, spine, block, used, true);
			fit += (8u - (unsigned)__builtin_popcountll(used)) / k;
		}
		ret = gang_plan_make(c.views, c.n, members, &r, &gang_default_levels, &p, why,
				     sizeof(why));
		if (fit >= members) {
			if (ret != 0)
				fail_msg("round %u: %u members x %u fit %u, refused: %s", round,
					 members, k, fit, why);
			check_plan(&c, &p, members, k);
			gang_plan_fini(&p);
			planned++;
		} else {
			assert_int_equal(ret, -ENOSPC);
			refused++;
		}
		cluster_free(&c);
	}
	assert_true(planned > 50 && refused > 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_plan_uses_the_finest_domain_that_holds_the_gang),
		cmocka_unit_test(test_gang_plan_prefers_the_domain_needing_fewest_nodes),
		cmocka_unit_test(test_gang_plan_refuses_with_a_reason_and_skips_unusable_nodes),
		cmocka_unit_test(test_gang_plan_random_clusters_keep_the_invariants),
		cmocka_unit_test(test_gang_pod_group_table),
		cmocka_unit_test(test_gang_pod_group_intermediate_label_is_recognised),
		cmocka_unit_test(test_gang_pod_group_absent_pod_is_no_group),
		cmocka_unit_test(test_gang_pod_group_no_group_leaves_output_alone),
		cmocka_unit_test(test_gang_pod_group_short_buffer_stays_terminated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
