/* Unit tests for gang/: which pod group a pod belongs to, from the labels and
 * annotations the common gang schedulers use (kube-interfaces.md section 9).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
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

/* A plan for mixed needs: every slot's devices are free, disjoint and as many
 * as its need asks, each need gets exactly its count, all inside the domain. */
static void check_mixed_plan(const struct cluster *c, const struct gang_plan *p,
			     const struct gang_need *needs, unsigned n_needs)
{
	uint64_t taken[64] = { 0 };
	unsigned got[GANG_MAX_NEEDS] = { 0 }, members = 0;

	for (unsigned j = 0; j < n_needs; j++)
		members += needs[j].count;
	assert_int_equal(p->n_slots, members);
	for (unsigned s = 0; s < p->n_slots; s++) {
		const struct gang_slot *sl = &p->slots[s];

		assert_true(sl->node < c->n);
		assert_true(sl->need < n_needs);
		got[sl->need]++;
		assert_int_equal(__builtin_popcountll(sl->devices), needs[sl->need].req.demand.gpus);
		assert_true((sl->devices & c->views[sl->node].used) == 0);
		assert_true((sl->devices & taken[sl->node]) == 0);
		taken[sl->node] |= sl->devices;
		if (p->level >= 0)
			assert_string_equal(cache_node_label(c->nodes[sl->node],
							     gang_default_levels.keys[p->level][0]),
					    p->domain);
	}
	for (unsigned j = 0; j < n_needs; j++)
		assert_int_equal(got[j], needs[j].count);
}

/* Invariants of any plan of <members> members of <k> GPUs: check_mixed_plan
 * with one need. */
/* gang_plan_mixed over the whole cluster succeeds, and its plan holds
 * (check_mixed_plan). */
static void plan_mixed_ok(const struct cluster *c, const struct gang_need *needs, unsigned n_needs,
			  struct gang_plan *p)
{
	char why[256] = "";
	int ret = gang_plan_mixed(c->views, c->n, needs, n_needs, &gang_default_levels, p, why,
				  sizeof(why));

	if (ret != 0)
		fail_msg("gang_plan_mixed: %d (%s)", ret, why);
	check_mixed_plan(c, p, needs, n_needs);
}

static void check_plan(const struct cluster *c, const struct gang_plan *p, unsigned members,
		       unsigned k)
{
	struct gang_need one = { gpus(k), members };

	check_mixed_plan(c, p, &one, 1);
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

/* troupe.io/gang-topology: required:<key> is one strict level: the gang goes in
 * one domain of that label or is refused, the refusal naming the closest domain;
 * the annotation's value is checked. */
static void test_gang_plan_required_topology_keeps_the_gang_in_one_domain(void **state)
{
	struct cluster c = { 0 };
	struct gang_levels one = { .n = 1, .strict = true };
	struct gang_plan p;
	char why[256] = "", err[256] = "";
	const char *key = NULL;
	struct placement_request r = gpus(8);

	(void)state;
	assert_int_equal(gang_topology_parse("required:network.topology.nvidia.com/block", &key,
					     err, sizeof(err)), 0);
	assert_string_equal(key, "network.topology.nvidia.com/block");
	one.keys[0][0] = key;
	/* rack-a: two empty nodes; rack-b: one empty, one full; one unlabelled. */
	add_node(&c, "a0", 8, "s", "rack-a", 0, true);
	add_node(&c, "a1", 8, "s", "rack-a", 0, true);
	add_node(&c, "b0", 8, "s", "rack-b", 0, true);
	add_node(&c, "b1", 8, "s", "rack-b", 0xFF, true);
	add_node(&c, "x", 8, "s", NULL, 0, true);
	/* 3 x 8 fit in the cluster (a0, a1, b0, x) but in no one rack. */
	assert_int_equal(gang_plan_make(c.views, c.n, 3, &r, &one, &p, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "3 pods x 8 GPUs; largest free network.topology.nvidia.com/block "
			    "domain rack-a holds 2 pods");
	assert_int_equal(p.n_slots, 0);
	/* 2 x 8: rack-a, both members. */
	assert_int_equal(gang_plan_make(c.views, c.n, 2, &r, &one, &p, why, sizeof(why)), 0);
	/* (check_plan knows only the default levels: the slots are checked here.) */
	assert_int_equal(p.n_slots, 2);
	assert_int_equal(p.level, 0);
	assert_string_equal(p.domain, "rack-a");
	assert_true(p.slots[0].node != p.slots[1].node);
	for (unsigned s = 0; s < p.n_slots; s++) {
		assert_string_equal(cache_node_label(c.nodes[p.slots[s].node], key), "rack-a");
		assert_int_equal(p.slots[s].devices, 0xFF);
	}
	gang_plan_fini(&p);
	/* No node carries the label: said so. */
	one.keys[0][0] = "example.com/none";
	assert_int_equal(gang_plan_make(c.views, c.n, 1, &r, &one, &p, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "1 pods x 8 GPUs; no offered node has the label example.com/none");
	/* Bad values are refused with what is expected; none means no requirement. */
	assert_int_equal(gang_topology_parse("required:", &key, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "required:<node-label-key>"));
	assert_int_equal(gang_topology_parse("rack", &key, err, sizeof(err)), -EINVAL);
	assert_int_equal(gang_topology_parse(NULL, &key, err, sizeof(err)), 0);
	assert_null(key);
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

static void test_gang_plan_mixed_needs_share_nodes(void **state)
{
	struct cluster c = { 0 };
	struct gang_plan p;
	char why[256];
	struct gang_need leader_workers[2] = { { gpus(2), 4 }, { gpus(8), 1 } };
	struct gang_need small_first[2] = { { gpus(2), 2 }, { gpus(4), 1 } };
	struct gang_need too_big[2] = { { gpus(8), 3 }, { gpus(1), 2 } };

	(void)state;
	add_node(&c, "n0", 8, "s", "rack-a", 0, true);
	add_node(&c, "n1", 8, "s", "rack-a", 0, true);
	add_node(&c, "n2", 8, "s", "rack-b", 0xF, true);        /* 4 free */
	/* One 8-GPU member and four 2-GPU members: two empty nodes of one rack. */
	plan_mixed_ok(&c, leader_workers, 2, &p);
	assert_int_equal(p.nodes_used, 2);
	assert_string_equal(p.domain, "rack-a");
	gang_plan_fini(&p);
	/* 4 + 2 + 2 GPUs: the 4-GPU member first, the 2-GPU ones in the room
	 * left beside it: one node, not the half-used one and another. */
	plan_mixed_ok(&c, small_first, 2, &p);
	assert_int_equal(p.nodes_used, 1);
	gang_plan_fini(&p);
	/* Three 8-GPU members cannot fit; the reason names both kinds. */
	assert_int_equal(gang_plan_mixed(c.views, c.n, too_big, 2, &gang_default_levels, &p, why,
					 sizeof(why)), -ENOSPC);
	assert_string_equal(why, "3 pods x 8 GPUs + 2 pods x 1 GPU; the offered nodes hold 4");
	assert_int_equal(p.n_slots, 0);
	cluster_free(&c);
}

static const struct cache_opts two_kinds_opts = {
	.gpu_resources = { "nvidia.com/gpu", "amd.com/gpu" }, .n_gpu_resources = 2 };

/* A node advertising 8 of resource <res> (index into two_kinds_opts) in block
 * <block>. */
static void add_kind_node(struct cluster *c, const char *name, unsigned res, const char *block)
{
	char json[1024], err[CACHE_ERR_LEN];
	const char *rn = two_kinds_opts.gpu_resources[res];
	cJSON *o;

	snprintf(json, sizeof(json),
		 "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"network.topology.nvidia.com/block\":"
		 "\"%s\"}},\"status\":{\"allocatable\":{\"%s\":\"8\"},\"capacity\":{\"%s\":\"8\"},"
		 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}", name, block, rn, rn);
	o = cJSON_Parse(json);
	assert_non_null(o);
	c->nodes[c->n] = cache_node_parse(o, &two_kinds_opts, err, sizeof(err));
	assert_non_null(c->nodes[c->n]);
	cJSON_Delete(o);
	c->views[c->n] = (struct cache_node_view){ c->nodes[c->n], 0, 0 };
	c->n++;
}

/* Regressions found in review: (1) a node that gives nothing in a domain's
 * fill must not cut the final fill short (a plan with places missing); (2) a
 * domain whose nodes' first packs add up to less than the gang can still hold
 * it once packed again, and must not be passed over for no common domain. */
static void test_gang_plan_mixed_fills_every_member_into_the_finest_domain(void **state)
{
	struct cluster c = { 0 };
	struct gang_plan p;
	struct gang_need two_kinds[2] = { { gpus(8), 1 }, { gpus(8), 1 } };
	struct gang_need six_four_four[2] = { { gpus(6), 1 }, { gpus(4), 2 } };

	(void)state;
	two_kinds[1].req.demand.gpu_resource = 1;               /* amd.com/gpu */
	add_kind_node(&c, "nv0", 0, "b0");
	add_kind_node(&c, "nv1", 0, "b0");
	add_kind_node(&c, "amd0", 1, "b0");
	plan_mixed_ok(&c, two_kinds, 2, &p);
	assert_string_equal(p.domain, "b0");
	for (unsigned s = 0; s < p.n_slots; s++)
		assert_int_equal(c.nodes[p.slots[s].node]->gpu_resource,
				 two_kinds[p.slots[s].need].req.demand.gpu_resource);
	gang_plan_fini(&p);
	cluster_free(&c);

	/* 6 + 4 + 4 GPUs on two empty 8-GPU nodes of block b0: step 1 packs 6
	 * (then nothing) on each, 12 GPUs in all, yet b0 holds the gang. */
	memset(&c, 0, sizeof(c));
	add_node(&c, "a", 8, "s0", "b0", 0, true);
	add_node(&c, "b", 8, "s0", "b0", 0, true);
	add_node(&c, "far", 8, "s1", "b1", 0, true);
	plan_mixed_ok(&c, six_four_four, 2, &p);
	assert_int_equal(p.level, 3);
	assert_string_equal(p.domain, "b0");
	gang_plan_fini(&p);
	cluster_free(&c);
}

/* Random clusters and random mixes of 1, 2, 4 and 8-GPU members: any plan is
 * valid; a gang that would fit even with every member as large as the largest
 * is never refused; one asking more GPUs than are free always is. */
static void test_gang_plan_mixed_random_clusters_keep_the_invariants(void **state)
{
	unsigned seed = 2026, planned = 0, refused = 0;

	(void)state;
	for (unsigned round = 0; round < 300; round++) {
		struct cluster c = { 0 };
		struct gang_need needs[3];
		unsigned n_needs = 1 + (unsigned)rand_r(&seed) % 3, kmax = 0, demand = 0, free_all = 0;
		unsigned fit_as_max = 0, members = 0, block_fit[4] = { 0 };
		struct gang_plan p;
		char why[256];
		int ret;

		for (unsigned j = 0; j < n_needs; j++) {
			static const unsigned sizes[] = { 1, 2, 3, 4, 6, 8 };

			needs[j] = (struct gang_need){ gpus(sizes[rand_r(&seed) % 6]),
						       1 + (unsigned)rand_r(&seed) % 8 };
			if (needs[j].req.demand.gpus > kmax)
				kmax = needs[j].req.demand.gpus;
			demand += needs[j].count * needs[j].req.demand.gpus;
			members += needs[j].count;
		}
		for (unsigned i = 0; i < 1 + (unsigned)rand_r(&seed) % 30; i++) {
			char name[16], block[16], spine[16];
			uint64_t used = (uint64_t)rand_r(&seed) & 0xFF & (uint64_t)rand_r(&seed);
			unsigned f = 8u - (unsigned)__builtin_popcountll(used);

			snprintf(name, sizeof(name), "n%u", i);
			unsigned b = (unsigned)rand_r(&seed) % 4;

			snprintf(block, sizeof(block), "b%u", b);
			snprintf(spine, sizeof(spine), "s%u", (unsigned)rand_r(&seed) % 2);
			add_node(&c, name, 8, spine, block, used, true);
			free_all += f;
			fit_as_max += f / kmax;
			block_fit[b] += f / kmax;
		}
		ret = gang_plan_mixed(c.views, c.n, needs, n_needs, &gang_default_levels, &p, why,
				      sizeof(why));
		if (ret == 0) {
			check_mixed_plan(&c, &p, needs, n_needs);
			/* A block that holds the gang even with every member as large
			 * as the largest: the plan is in a block (level 3) or finer. */
			for (unsigned b = 0; b < 4; b++)
				if (block_fit[b] >= members && p.level < 3)
					fail_msg("round %u: block b%u holds the gang, plan at level %d",
						 round, b, p.level);
			gang_plan_fini(&p);
			planned++;
		} else {
			assert_int_equal(ret, -ENOSPC);
			if (fit_as_max >= members)
				fail_msg("round %u: refused though every member fits as %u GPUs: %s",
					 round, kmax, why);
			refused++;
		}
		if (demand > free_all)
			assert_int_equal(ret, -ENOSPC);
		cluster_free(&c);
	}
	assert_true(planned > 50 && refused > 10);
}

/* ---- Model-based test: the gang manager over a real cache ------------------------
 *
 * A real struct cache (5 nodes of 8 GPUs) and a real gang manager with a 1 s
 * plan timeout. Random interleavings (fixed seeds) of what kube-scheduler, the
 * watch and other pods do: gang members filtered (over all nodes or a sample)
 * and bound (mostly on an allowed node, sometimes elsewhere), the watch
 * confirming or the API server refusing bindings, stale watch events, pods
 * deleted (held, bound or pending) and re-created, single pods taking and
 * freeing GPUs, and waits for a plan's expiry. After every step:
 *
 *   - no device is held by two entries on a node (reservations included), the
 *     held devices are a subset of the node's usage mask, and popcount(used) +
 *     unattributed <= allocatable;
 *   - every held member holds its devices (assumed, a member-sized set), every
 *     pod troupe would be posting or the watch showed bound holds exactly the
 *     devices the model recorded, every other pod holds nothing;
 *   - a plan round's held binds are released together and all alike: all ok
 *     (quorum) or all not ok (expiry) - never some of each, never one twice;
 *   - after a round ends, none of that gang's reservations remain, and members
 *     released with an error hold nothing;
 *   - a filter ALLOWED only nodes where the gang holds a reservation;
 *   - a member is never placed as a single pod while its gang is incomplete.
 * At the end of each seed, with every plan expired: each node's usage equals
 * the union of what its entries hold.
 *
 * Binds are issued only within 0.6 s of the plan the member's filter saw (as a
 * kube-scheduler binding cycle follows its scheduling cycle); a bind arriving
 * after its plan expired is the dedicated test below.
 */

enum { MN = 5, MGANGS = 3, MSLOTS = 4, MAXPODS = 1024, MAXREL = 512, MAXENT = 1024 };

static const char *const m_nodes[MN] = { "n0", "n1", "n2", "n3", "n4" };

struct mpod {
	char uid[48];
	char name[48];
	int gang;                       /* index in model.gangs; -1: a single pod */
	int slot;                       /* member index in its gang */
	unsigned gpus;
	bool exists;                    /* in the cluster (created, not deleted) */
	bool held;                      /* its bind is held by the manager */
	unsigned round;                 /* the plan round it was held in */
	bool posting;                   /* assumed; its Binding is (would be) posted */
	bool bound;                     /* the watch showed it bound */
	int node;
	uint64_t devices;
};

struct mgang {
	const char *name;
	unsigned quorum, size, gpus;
	unsigned lead_gpus;             /* member 0 asks this many (mixed gangs) */
	int member[MSLOTS];             /* pod index of each member, -1: none */
	bool planned;                   /* a plan the model saw made and not yet end */
	double plan_t;
	unsigned round;                 /* plans made so far */
	unsigned incarnations;
};

struct mrel {
	int pod;
	bool ok;
	char why[200];
};

struct ment {
	char node[256];
	char name[256];
	uint64_t devices;
	unsigned unattr;
	bool reservation;
};

struct model {
	struct cache *c;
	struct gang_manager *gm;
	unsigned seed, step, rng;
	struct mpod pods[MAXPODS];
	unsigned n_pods;
	struct mgang gangs[MGANGS];
	pthread_mutex_t lock;
	struct mrel rel[MAXREL];        /* guarded by lock: releases not yet drained */
	unsigned n_rel;                 /* guarded by lock */
	bool rel_overflow;              /* guarded by lock */
	struct mrel got[MAXREL];        /* drain's scratch */
	struct ment ent[MAXENT];        /* check's scratch */
	unsigned n_ent;
	bool ent_overflow;
	unsigned waits;
	/* What the run exercised. */
	unsigned plans, holds, quorum_rounds, expired_rounds, refused, singles, deletes_held,
		 stale_events, bind_failures, moved_or_refused_binds, extra_singles, confirms,
		 external_binds;
};

#define MFAIL(m, ...)                                                                   \
	do {                                                                            \
		char _b[2048];                                                          \
		snprintf(_b, sizeof(_b), __VA_ARGS__);                                  \
		fail_msg("model seed %u, step %u: %s", (m)->seed, (m)->step, _b);       \
	} while (0)

static double m_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned m_rand(struct model *m, unsigned n)
{
	return n ? (unsigned)rand_r(&m->rng) % n : 0;
}

static void m_release(void *ctx, bool ok, const char *why)
{
	struct { struct model *m; int pod; } *h = ctx;
	struct model *m = h->m;

	pthread_mutex_lock(&m->lock);
	if (m->n_rel < MAXREL) {
		m->rel[m->n_rel].pod = h->pod;
		m->rel[m->n_rel].ok = ok;
		snprintf(m->rel[m->n_rel].why, sizeof(m->rel[0].why), "%s", why ? why : "");
		m->n_rel++;
	} else {
		m->rel_overflow = true;
	}
	pthread_mutex_unlock(&m->lock);
	free(h);
}

static void *m_hold_ctx(struct model *m, int pod)
{
	struct { struct model *m; int pod; } *h = malloc(sizeof(*h));

	assert_non_null(h);
	h->m = m;
	h->pod = pod;
	return h;
}

static cJSON *m_parse(const char *json)
{
	cJSON *o = cJSON_Parse(json);

	assert_non_null(o);
	return o;
}

/* The pod as the watch shows it: on <node> with <devices> (node -1: unbound). */
static void m_apply(struct model *m, const struct mpod *p, int node, uint64_t devices)
{
	char json[1400], labels[128] = "", ann[320] = "", spec_node[64] = "", ids[256];
	char err[CACHE_ERR_LEN];
	struct cache_pod *pod;
	cJSON *o;
	int rc;

	if (p->gang >= 0)
		snprintf(labels, sizeof(labels), "\"labels\":{\"scheduling.x-k8s.io/pod-group\":"
			 "\"%s\"},", m->gangs[p->gang].name);
	if (node >= 0) {
		snprintf(spec_node, sizeof(spec_node), "\"nodeName\":\"%s\",", m_nodes[node]);
		cache_devices_format(devices, ids, sizeof(ids));
		snprintf(ann, sizeof(ann), "\"annotations\":{\"troupe.io/gpu-ids\":\"%s\"},", ids);
	}
	snprintf(json, sizeof(json),
		 "{\"metadata\":{%s%s\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"%s\"},"
		 "\"spec\":{%s\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
		 "{\"nvidia.com/gpu\":\"%u\"}}}]},\"status\":{\"phase\":\"%s\"}}",
		 labels, ann, p->name, p->uid, spec_node, p->gpus, node >= 0 ? "Running" : "Pending");
	o = m_parse(json);
	pod = cache_pod_parse(o, cache_get_opts(m->c), err, sizeof(err));
	cJSON_Delete(o);
	if (!pod)
		MFAIL(m, "pod %s does not parse: %s", p->name, err);
	rc = cache_pod_apply(m->c, pod);
	if (rc != 0)
		MFAIL(m, "cache_pod_apply(%s): %d", p->name, rc);
}

static void m_collect(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct model *m = arg;
	struct ment *e;

	if (!p->devices && !p->unattributed && !p->reservation)
		return;
	if (m->n_ent == MAXENT) {
		m->ent_overflow = true;
		return;
	}
	e = &m->ent[m->n_ent++];
	snprintf(e->node, sizeof(e->node), "%s", p->node);
	snprintf(e->name, sizeof(e->name), "%s", p->reservation ? uid : p->name);
	e->devices = p->devices;
	e->unattr = p->unattributed;
	e->reservation = p->reservation;
}

static void m_entries(struct model *m)
{
	m->n_ent = 0;
	m->ent_overflow = false;
	cache_pod_foreach(m->c, m_collect, m);
	if (m->ent_overflow)
		MFAIL(m, "more than %d entries hold GPUs", MAXENT);
}

/* Whether <e> is a reservation of gang <g> (gang-reservation/ml/<g>/...). */
static bool m_res_of(const struct ment *e, const char *g)
{
	char prefix[96];

	snprintf(prefix, sizeof(prefix), "gang-reservation/ml/%s/", g);
	return e->reservation && strncmp(e->name, prefix, strlen(prefix)) == 0;
}

static unsigned m_reservations(struct model *m, int gi, int node)
{
	unsigned n = 0;

	m_entries(m);
	for (unsigned i = 0; i < m->n_ent; i++)
		if (m_res_of(&m->ent[i], m->gangs[gi].name) &&
		    (node < 0 || strcmp(m->ent[i].node, m_nodes[node]) == 0))
			n++;
	return n;
}

static void m_group_count(struct model *m, int gi, unsigned *exist, unsigned *bound)
{
	cache_group_count(m->c, "ml", m->gangs[gi].name, exist, bound);
}

static int m_node_index(const char *name)
{
	for (int i = 0; i < MN; i++)
		if (strcmp(m_nodes[i], name) == 0)
			return i;
	return -1;
}

/* Take the releases the manager has made; a round's releases are checked only
 * once all of them are in (the expiry thread runs them one after another). */
static void m_drain(struct model *m)
{
	unsigned n = 0;
	double deadline = m_now() + 2.0;

	for (;;) {
		bool complete = true;

		pthread_mutex_lock(&m->lock);
		if (m->rel_overflow) {
			pthread_mutex_unlock(&m->lock);
			MFAIL(m, "more than %d releases pending", MAXREL);
		}
		for (unsigned i = 0; i < m->n_rel && n < MAXREL; i++)
			m->got[n++] = m->rel[i];
		m->n_rel = 0;
		pthread_mutex_unlock(&m->lock);
		for (unsigned i = 0; i < n && complete; i++) {
			const struct mpod *p = &m->pods[m->got[i].pod];

			for (unsigned q = 0; q < m->n_pods && complete; q++) {
				const struct mpod *o = &m->pods[q];
				bool in = false;

				if (!o->held || o->gang != p->gang || o->round != p->round)
					continue;
				for (unsigned j = 0; j < n && !in; j++)
					in = m->got[j].pod == (int)q;
				complete = in;
			}
		}
		if (complete)
			break;
		if (m_now() > deadline)
			MFAIL(m, "gang %s: some held binds of a round were released and others "
			      "were still held 2 s later", m->gangs[m->pods[m->got[0].pod].gang].name);
		usleep(2000);
	}
	/* All alike within a round; each bind released once. */
	for (unsigned i = 0; i < n; i++) {
		const struct mrel *r = &m->got[i];
		const struct mpod *p = &m->pods[r->pod];

		if (!p->held)
			MFAIL(m, "pod %s: a release for a bind that is not held (or released twice): "
			      "ok=%d why=%s", p->name, r->ok, r->why);
		for (unsigned j = 0; j < i; j++) {
			const struct mpod *o = &m->pods[m->got[j].pod];

			if (m->got[j].pod == r->pod)
				MFAIL(m, "pod %s released twice", p->name);
			if (o->gang == p->gang && o->round == p->round && m->got[j].ok != r->ok)
				MFAIL(m, "gang %s round %u: %s released ok=%d (%s) but %s ok=%d (%s)",
				      m->gangs[p->gang].name, p->round, o->name, m->got[j].ok,
				      m->got[j].why, p->name, r->ok, r->why);
		}
	}
	for (unsigned i = 0; i < n; i++) {
		const struct mrel *r = &m->got[i];
		struct mpod *p = &m->pods[r->pod];
		struct mgang *g = &m->gangs[p->gang];
		struct cache_pod_info info;
		bool first = true;

		for (unsigned j = 0; j < i; j++)
			if (m->pods[m->got[j].pod].gang == p->gang &&
			    m->pods[m->got[j].pod].round == p->round)
				first = false;
		if (first) {
			if (r->ok) {
				unsigned exist, bound;

				m->quorum_rounds++;
				m_group_count(m, p->gang, &exist, &bound);
				if (bound < g->quorum)
					MFAIL(m, "gang %s: held binds released to post with only %u of %u "
					      "members held or bound", g->name, bound, g->quorum);
			} else {
				m->expired_rounds++;
			}
			if (p->round == g->round) {
				g->planned = false;
				if (m_reservations(m, p->gang, -1))
					MFAIL(m, "gang %s: %u reservations remain after its round ended "
					      "(ok=%d: %s)", g->name, m_reservations(m, p->gang, -1), r->ok,
					      r->why);
			}
		}
		p->held = false;
		if (!p->exists)
			continue;               /* deleted while held: nothing to post */
		if (cache_pod_get(m->c, p->uid, &info) < 0)
			MFAIL(m, "pod %s exists but the cache does not know it", p->name);
		if (r->ok) {
			if (info.state != CACHE_POD_STATE_ASSUMED ||
			    (unsigned)__builtin_popcountll(info.devices) != p->gpus)
				MFAIL(m, "pod %s released to bind but holds %u devices (state %d)",
				      p->name, (unsigned)__builtin_popcountll(info.devices), info.state);
			p->posting = true;
			p->node = m_node_index(info.node);
			p->devices = info.devices;
		} else if (info.state != CACHE_POD_STATE_PENDING || info.devices || info.unattributed) {
			MFAIL(m, "pod %s: its held bind was answered with an error (%s) but it still "
			      "holds devices %#llx on %s (state %d)", p->name, r->why,
			      (unsigned long long)info.devices, info.node, info.state);
		}
	}
}

/* The invariants; <quiet>: no plan can be changing (every one has expired). */
static void m_check(struct model *m, bool quiet)
{
	uint64_t used[MN] = { 0 }, uni[MN] = { 0 };
	unsigned unattr[MN] = { 0 }, eunattr[MN] = { 0 }, alloc[MN] = { 0 };

	m_drain(m);
	/* Usage first: what entries hold afterwards can only be less (only this
	 * thread claims devices; the expiry thread only frees them). */
	cache_read_begin(m->c);
	for (int i = 0; i < MN; i++) {
		struct cache_node_view v;

		if (!cache_node_lookup(m->c, m_nodes[i], strlen(m_nodes[i]), &v)) {
			cache_read_end(m->c);
			MFAIL(m, "node %s vanished", m_nodes[i]);
		}
		used[i] = v.used;
		unattr[i] = v.unattributed;
		alloc[i] = v.node->gpu_allocatable;
	}
	cache_read_end(m->c);
	m_entries(m);
	for (unsigned k = 0; k < m->n_ent; k++) {
		const struct ment *e = &m->ent[k];
		int i = m_node_index(e->node);

		if (i < 0)
			MFAIL(m, "%s holds GPUs on unknown node %s", e->name, e->node);
		if (uni[i] & e->devices) {
			for (unsigned j = 0; j < k; j++)
				if (strcmp(m->ent[j].node, e->node) == 0 && (m->ent[j].devices & e->devices))
					MFAIL(m, "node %s: devices %#llx held by both %s and %s", e->node,
					      (unsigned long long)(m->ent[j].devices & e->devices),
					      m->ent[j].name, e->name);
		}
		uni[i] |= e->devices;
		eunattr[i] += e->unattr;
		for (int g = 0; g < MGANGS; g++)
			if (m_res_of(e, m->gangs[g].name) && !m->gangs[g].planned)
				MFAIL(m, "reservation %s on %s, but gang %s has no plan the model saw",
				      e->name, e->node, m->gangs[g].name);
	}
	for (int i = 0; i < MN; i++) {
		if ((unsigned)__builtin_popcountll(used[i]) + unattr[i] > alloc[i])
			MFAIL(m, "node %s: %u devices + %u unattributed held, %u allocatable",
			      m_nodes[i], (unsigned)__builtin_popcountll(used[i]), unattr[i], alloc[i]);
		if ((unsigned)__builtin_popcountll(uni[i]) + eunattr[i] > alloc[i])
			MFAIL(m, "node %s: entries hold %u devices + %u unattributed of %u",
			      m_nodes[i], (unsigned)__builtin_popcountll(uni[i]), eunattr[i], alloc[i]);
		if (uni[i] & ~used[i])
			MFAIL(m, "node %s: entries hold %#llx outside the usage mask %#llx", m_nodes[i],
			      (unsigned long long)uni[i], (unsigned long long)used[i]);
		if (quiet && (uni[i] != used[i] || eunattr[i] != unattr[i]))
			MFAIL(m, "node %s at rest: usage %#llx+%u, entries hold %#llx+%u", m_nodes[i],
			      (unsigned long long)used[i], unattr[i], (unsigned long long)uni[i],
			      eunattr[i]);
	}
	for (unsigned q = 0; q < m->n_pods; q++) {
		struct mpod *p = &m->pods[q];
		struct cache_pod_info info;

		if (!p->exists)
			continue;
		if (cache_pod_get(m->c, p->uid, &info) < 0)
			MFAIL(m, "pod %s exists but the cache does not know it", p->name);
		if (p->held) {
			double until = m_now() + 1.0;

			/* A rollback in flight: devices freed, the answer not drained yet. */
			while (p->held && info.state != CACHE_POD_STATE_ASSUMED && m_now() < until) {
				usleep(2000);
				m_drain(m);
				cache_pod_get(m->c, p->uid, &info);
			}
			if (p->held && (info.state != CACHE_POD_STATE_ASSUMED ||
					(unsigned)__builtin_popcountll(info.devices) != p->gpus))
				MFAIL(m, "held member %s holds %#llx (state %d), its bind unanswered",
				      p->name, (unsigned long long)info.devices, info.state);
			if (p->held)
				continue;
		}
		if (p->posting || p->bound) {
			if (info.state != (p->bound ? CACHE_POD_STATE_BOUND : CACHE_POD_STATE_ASSUMED) ||
			    info.devices != p->devices || m_node_index(info.node) != p->node)
				MFAIL(m, "pod %s should hold %#llx on %s (%s) but holds %#llx on %s "
				      "(state %d)", p->name, (unsigned long long)p->devices,
				      m_nodes[p->node], p->bound ? "bound" : "assumed",
				      (unsigned long long)info.devices, info.node, info.state);
		} else if (info.state != CACHE_POD_STATE_PENDING || info.devices || info.unattributed) {
			MFAIL(m, "pod %s should hold nothing but holds %#llx+%u on %s (state %d)",
			      p->name, (unsigned long long)info.devices, info.unattributed, info.node,
			      info.state);
		}
	}
}

static int m_new_pod(struct model *m, int gang, int slot, unsigned gpus)
{
	struct mpod *p;
	int pi;

	if (m->n_pods == MAXPODS)
		return -1;
	pi = (int)m->n_pods++;
	p = &m->pods[pi];
	memset(p, 0, sizeof(*p));
	p->gang = gang;
	p->slot = slot;
	p->gpus = gpus;
	p->node = -1;
	if (gang >= 0) {
		struct mgang *g = &m->gangs[gang];

		snprintf(p->name, sizeof(p->name), "%s-%d", g->name, slot);
		snprintf(p->uid, sizeof(p->uid), "uid-%s-%d-v%u", g->name, slot, ++g->incarnations);
		g->member[slot] = pi;
	} else {
		snprintf(p->name, sizeof(p->name), "single-%d", pi);
		snprintf(p->uid, sizeof(p->uid), "uid-single-%d", pi);
	}
	m_apply(m, p, -1, 0);
	p->exists = true;
	return pi;
}

/* Bind as a single pod would be: the best (lowest) free devices, one CAS. */
static bool m_single_bind(struct model *m, int pi, int node)
{
	struct mpod *p = &m->pods[pi];
	struct cache_node_view v;
	uint64_t free_mask = 0, want = 0;
	unsigned free_n = 0;
	int rc;

	cache_read_begin(m->c);
	if (cache_node_lookup(m->c, m_nodes[node], strlen(m_nodes[node]), &v)) {
		free_mask = cache_view_free_mask(&v);
		free_n = cache_view_free_gpus(&v);
	}
	cache_read_end(m->c);
	if (free_n < p->gpus || (unsigned)__builtin_popcountll(free_mask) < p->gpus)
		return false;
	for (unsigned k = 0; k < p->gpus; k++) {
		uint64_t low = free_mask & -free_mask;

		want |= low;
		free_mask &= ~low;
	}
	rc = cache_pod_assume(m->c, p->uid, m_nodes[node], &want);
	if (rc == -EAGAIN || rc == -ENOSPC)
		return false;
	if (rc != 0)
		MFAIL(m, "assume %s on %s: %d", p->name, m_nodes[node], rc);
	p->posting = true;
	p->node = node;
	p->devices = want;
	return true;
}

static void m_schedule(struct model *m, int pi)
{
	struct mpod *p = &m->pods[pi];
	struct mgang *g = &m->gangs[p->gang];
	struct gang_member mb = { .uid = p->uid, .ns = "ml", .name = p->name, .group = g->name,
				  .req = { .demand = { .gpu_resource = 0, .gpus = p->gpus } } };
	struct cache_node_view views[MN];
	int idx[MN];
	bool allowed[MN], sample = m_rand(m, 5) == 0;
	char reason[640], key[64];
	struct gang_stats s0, s1;
	enum gang_verdict verdict;
	enum gang_bind_result gr;
	unsigned n = 0, exist, bound, n_allowed = 0;
	uint64_t dev = 0;
	void *ctx;
	int node;

	gang_get_stats(m->gm, &s0);
	cache_read_begin(m->c);
	for (int i = 0; i < MN; i++) {
		if (sample && m_rand(m, 2))
			continue;       /* kube-scheduler sampled the nodes */
		if (cache_node_lookup(m->c, m_nodes[i], strlen(m_nodes[i]), &views[n]))
			idx[n++] = i;
	}
	verdict = gang_filter(m->gm, &mb, views, n, allowed, reason, sizeof(reason));
	cache_read_end(m->c);
	gang_get_stats(m->gm, &s1);
	if (s1.planned != s0.planned) {
		g->planned = true;
		g->plan_t = m_now();
		g->round++;
		m->plans++;
	}
	snprintf(key, sizeof(key), "gang ml/%s", g->name);
	m_group_count(m, p->gang, &exist, &bound);
	switch (verdict) {
	case GANG_NOT_A_GANG:
		if (bound < g->quorum)
			MFAIL(m, "filter: member %s of gang %s (bound %u of %u) is to be placed as a "
			      "single pod", p->name, g->name, bound, g->quorum);
		m->extra_singles++;
		if (m_rand(m, 10) < 8)
			m_single_bind(m, pi, (int)m_rand(m, MN));
		return;
	case GANG_REFUSED:
		if (!strstr(reason, key))
			MFAIL(m, "filter refused %s without naming its gang: \"%s\"", p->name, reason);
		m->refused++;
		return;
	case GANG_ALLOWED:
		break;
	default:
		MFAIL(m, "filter: verdict %d", verdict);
	}
	for (unsigned i = 0; i < n; i++) {
		if (!allowed[i])
			continue;
		n_allowed++;
		if (!m_reservations(m, p->gang, idx[i]))
			MFAIL(m, "filter allowed %s on %s, where gang %s holds no reservation", p->name,
			      m_nodes[idx[i]], g->name);
	}
	if (!n_allowed)
		MFAIL(m, "filter ALLOWED %s on no node", p->name);
	if (!g->planned || m_now() - g->plan_t > 0.6 || m_rand(m, 10) == 0)
		return;         /* no binding cycle (or not one soon enough) */
	if (m_rand(m, 100) < 85) {
		unsigned pick = m_rand(m, n_allowed);

		node = -1;
		for (unsigned i = 0; i < n && node < 0; i++)
			if (allowed[i] && pick-- == 0)
				node = idx[i];
	} else {
		node = (int)m_rand(m, MN);
		m->moved_or_refused_binds++;
	}
	m_group_count(m, p->gang, &exist, &bound);
	ctx = m_hold_ctx(m, pi);
	gr = gang_bind(m->gm, &mb, m_nodes[node], m_release, ctx, &dev, reason, sizeof(reason));
	if (gr != GANG_BIND_HELD)
		free(ctx);      /* the manager keeps the context only for a held bind */
	switch (gr) {
	case GANG_BIND_HELD:
		p->held = true;
		p->round = g->round;
		m->holds++;
		if ((unsigned)__builtin_popcountll(dev) != p->gpus)
			MFAIL(m, "bind of %s held with %u devices", p->name,
			      (unsigned)__builtin_popcountll(dev));
		m_drain(m);     /* the quorum's releases come in this very call */
		if (p->held) {
			m_group_count(m, p->gang, &exist, &bound);
			if (bound >= g->quorum)
				MFAIL(m, "gang %s: %u of %u members held or bound, binds still held",
				      g->name, bound, g->quorum);
		}
		break;
	case GANG_BIND_REFUSED:
		if (!strstr(reason, key))
			MFAIL(m, "bind refused %s without naming its gang: \"%s\"", p->name, reason);
		break;
	case GANG_BIND_NOT_A_GANG:
		if (bound < g->quorum)
			MFAIL(m, "bind: member %s of gang %s (bound %u of %u) is bound as a single pod",
			      p->name, g->name, bound, g->quorum);
		m->extra_singles++;
		m_single_bind(m, pi, node);     /* what ext_bind does next */
		break;
	}
}

/* Wait for gang <gi>'s plan to end (its deadline, or quorum): no reservation
 * left, no held bind. */
static void m_wait_plan_end(struct model *m, int gi)
{
	struct mgang *g = &m->gangs[gi];
	double deadline = g->plan_t + 1.0 + 1.5;

	for (;;) {
		bool held = false;

		m_drain(m);
		for (unsigned q = 0; q < m->n_pods; q++)
			held |= m->pods[q].held && m->pods[q].gang == gi;
		if (!held && !m_reservations(m, gi, -1))
			break;
		if (m_now() > deadline)
			MFAIL(m, "gang %s: plan made %.2f s ago still holds %u reservations%s",
			      g->name, m_now() - g->plan_t, m_reservations(m, gi, -1),
			      held ? " and held binds" : "");
		usleep(10000);
	}
	g->planned = false;
}

static int m_pick(struct model *m, bool (*want)(const struct mpod *))
{
	unsigned n = 0;
	int pick = -1;

	for (unsigned q = 0; q < m->n_pods; q++)
		if (want(&m->pods[q]) && m_rand(m, ++n) == 0)
			pick = (int)q;
	return pick;
}

static bool w_posting(const struct mpod *p)
{
	return p->exists && p->posting;
}

static bool w_unbound(const struct mpod *p)
{
	return p->exists && !p->held && !p->posting && !p->bound;
}

/* The watch shows a pending pod bound with free devices: another scheduler
 * bound it, or a Binding whose answer was lost (and was counted as failed)
 * landed after all. */
static void m_external_bind(struct model *m, int pi)
{
	struct mpod *p = &m->pods[pi];
	unsigned first = m_rand(m, MN);

	for (unsigned k = 0; k < MN; k++) {
		int node = (int)((first + k) % MN);
		struct cache_node_view v;
		uint64_t free_mask = 0, want = 0;
		unsigned free_n = 0;

		cache_read_begin(m->c);
		if (cache_node_lookup(m->c, m_nodes[node], strlen(m_nodes[node]), &v)) {
			free_mask = cache_view_free_mask(&v);
			free_n = cache_view_free_gpus(&v);
		}
		cache_read_end(m->c);
		if (free_n < p->gpus || (unsigned)__builtin_popcountll(free_mask) < p->gpus)
			continue;
		for (unsigned i = 0; i < p->gpus; i++) {
			uint64_t high = 1ULL << (63 - __builtin_clzll(free_mask));

			want |= high;
			free_mask &= ~high;
		}
		m_apply(m, p, node, want);
		p->bound = true;
		p->node = node;
		p->devices = want;
		m->external_binds++;
		return;
	}
}

static bool w_assumed(const struct mpod *p)
{
	return p->exists && (p->posting || p->held) && !p->bound;
}

static bool w_gang_pod(const struct mpod *p)
{
	return p->exists && p->gang >= 0;
}

static bool w_single(const struct mpod *p)
{
	return p->exists && p->gang < 0;
}

static void m_step(struct model *m, unsigned r)
{
	int pi;

	if (r < 45) {                                   /* a scheduling cycle */
		int gi = (int)m_rand(m, MGANGS), cand[MSLOTS], nc = 0;
		struct mgang *g = &m->gangs[gi];

		for (unsigned s = 0; s < g->size; s++) {
			const struct mpod *p = g->member[s] >= 0 ? &m->pods[g->member[s]] : NULL;

			if (p && p->exists && !p->held && !p->posting && !p->bound)
				cand[nc++] = g->member[s];
		}
		if (nc)
			m_schedule(m, cand[m_rand(m, (unsigned)nc)]);
	} else if (r < 56) {                            /* the watch: bound, or 500 */
		pi = m_pick(m, w_posting);
		if (pi >= 0) {
			struct mpod *p = &m->pods[pi];

			if (m_rand(m, 100) < 85) {
				m_apply(m, p, p->node, p->devices);
				p->bound = true;
				p->posting = false;
				m->confirms++;
			} else if (!p->bound) {
				if (cache_pod_forget(m->c, p->uid) != 0)
					MFAIL(m, "forget %s failed", p->name);
				p->posting = false;
				m->bind_failures++;
			}
		}
	} else if (r < 60) {                            /* bound by someone else */
		pi = -1;
		/* Mostly a member of a gang with a plan: its quorum then counts a
		 * member that never took a slot. */
		for (unsigned q = 0, n = 0; q < m->n_pods && m_rand(m, 10) < 7; q++)
			if (w_unbound(&m->pods[q]) && m->pods[q].gang >= 0 &&
			    m->gangs[m->pods[q].gang].planned && m_rand(m, ++n) == 0)
				pi = (int)q;
		if (pi < 0)
			pi = m_pick(m, w_unbound);
		if (pi >= 0)
			m_external_bind(m, pi);
	} else if (r < 62) {                            /* a stale event: still unbound */
		pi = m_pick(m, w_assumed);
		if (pi >= 0) {
			m_apply(m, &m->pods[pi], -1, 0);
			m->stale_events++;
		}
	} else if (r < 70) {                            /* a pod deleted */
		pi = m_pick(m, m_rand(m, 10) < 6 ? w_gang_pod : w_single);
		if (pi >= 0) {
			struct mpod *p = &m->pods[pi];

			if (cache_pod_delete(m->c, p->uid) != 0)
				MFAIL(m, "delete %s failed", p->name);
			p->exists = p->posting = p->bound = false;
			if (p->held)
				m->deletes_held++;
			if (p->gang >= 0)
				m->gangs[p->gang].member[p->slot] = -1;
		}
	} else if (r < 80) {                            /* a member (re)created */
		int gi = (int)m_rand(m, MGANGS);

		for (unsigned s = 0; s < m->gangs[gi].size; s++)
			if (m->gangs[gi].member[s] < 0) {
				m_new_pod(m, gi, (int)s,
					  s ? m->gangs[gi].gpus : m->gangs[gi].lead_gpus);
				break;
			}
	} else if (r < 92) {                            /* a single pod arrives */
		static const unsigned sizes[] = { 1, 2, 4 };

		pi = m_new_pod(m, -1, 0, sizes[m_rand(m, 3)]);
		if (pi >= 0) {
			unsigned first = m_rand(m, MN);

			for (unsigned k = 0; k < MN; k++)
				if (m_single_bind(m, pi, (int)((first + k) % MN))) {
					m->singles++;
					break;
				}
		}
	} else if (r < 99) {                            /* a single pod finishes */
		pi = m_pick(m, w_single);
		if (pi >= 0) {
			if (cache_pod_delete(m->c, m->pods[pi].uid) != 0)
				MFAIL(m, "delete %s failed", m->pods[pi].name);
			m->pods[pi].exists = m->pods[pi].posting = m->pods[pi].bound = false;
		}
	} else if (m->waits < 2) {                      /* wait for a plan to expire */
		int best = -1;

		for (int gi = 0; gi < MGANGS; gi++) {
			bool held = false;

			for (unsigned q = 0; q < m->n_pods; q++)
				held |= m->pods[q].held && m->pods[q].gang == gi;
			if (m->gangs[gi].planned && (best < 0 || held))
				best = gi;
		}
		if (best >= 0) {
			m->waits++;
			m_wait_plan_end(m, best);
		}
	}
}

static void m_add_node(struct model *m, const char *name)
{
	char json[512], err[CACHE_ERR_LEN];
	struct cache_node *node;
	cJSON *o;

	snprintf(json, sizeof(json),
		 "{\"metadata\":{\"name\":\"%s\"},\"status\":{\"allocatable\":"
		 "{\"nvidia.com/gpu\":\"8\"},\"capacity\":{\"nvidia.com/gpu\":\"8\"},"
		 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}", name);
	o = m_parse(json);
	node = cache_node_parse(o, cache_get_opts(m->c), err, sizeof(err));
	cJSON_Delete(o);
	assert_non_null(node);
	assert_int_equal(cache_node_upsert(m->c, node), 0);
}

static void m_add_group(struct model *m, const char *name, unsigned min_member)
{
	char json[256], err[CACHE_ERR_LEN];
	struct cache_podgroup *pg;
	cJSON *o;

	snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\"},"
		 "\"spec\":{\"minMember\":%u}}", name, min_member);
	o = m_parse(json);
	pg = cache_podgroup_parse(o, cache_get_opts(m->c), err, sizeof(err));
	cJSON_Delete(o);
	assert_non_null(pg);
	assert_int_equal(cache_podgroup_apply(m->c, pg), 0);
}

static const struct gang_config m_gang_cfg = {
	.default_timeout_s = 1,         /* plans expire after 1 s */
	.http_timeout_s = 30,
	.margin_s = 3,
	.starvation_s = 3600,           /* starvation protection stays out of this test */
};

/* A model whose gangs in <with_pods> (a bit per gang) have their members
 * created; the others have a PodGroup only. */
static struct model *m_new(unsigned seed, unsigned with_pods)
{
	static const struct {
		const char *name;
		unsigned quorum, size, gpus, lead_gpus;
	} gangs[MGANGS] = {
		{ "g1", 3, 4, 4, 4 },   /* one member more than the quorum */
		{ "g2", 2, 2, 8, 8 },   /* whole nodes */
		{ "g3", 4, 4, 2, 4 },   /* mixed: a 4-GPU member and three of 2 */
	};
	struct model *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	m->seed = seed;
	m->rng = seed;
	pthread_mutex_init(&m->lock, NULL);
	m->c = cache_new(&gpu_opts);
	assert_non_null(m->c);
	for (int i = 0; i < MN; i++)
		m_add_node(m, m_nodes[i]);
	cache_set_synced(m->c, true);
	m->gm = gang_manager_new(m->c, &m_gang_cfg);
	assert_non_null(m->gm);
	for (int gi = 0; gi < MGANGS; gi++) {
		struct mgang *g = &m->gangs[gi];

		g->name = gangs[gi].name;
		g->quorum = gangs[gi].quorum;
		g->size = gangs[gi].size;
		g->gpus = gangs[gi].gpus;
		g->lead_gpus = gangs[gi].lead_gpus;
		for (int s = 0; s < MSLOTS; s++)
			g->member[s] = -1;
		m_add_group(m, g->name, g->quorum);
		for (unsigned s = 0; s < g->size && (with_pods & (1u << gi)); s++)
			m_new_pod(m, gi, (int)s, s ? g->gpus : g->lead_gpus);
	}
	return m;
}

static void m_free(struct model *m)
{
	gang_manager_free(m->gm);
	m_drain(m);
	cache_free(m->c);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static void test_gang_model_random_interleavings_keep_the_invariants(void **state)
{
	static const unsigned seeds[] = { 1, 7, 42, 1234 };
	unsigned plans = 0, holds = 0, quorum = 0, expired = 0, refused = 0, singles = 0,
		 deletes_held = 0, stale = 0, failures = 0, moved = 0, extra = 0, confirms = 0,
		 external = 0;
	double t0 = m_now();

	(void)state;
	for (size_t s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
		struct model *m = m_new(seeds[s], 7);

		for (m->step = 0; m->step < 700; m->step++) {
			m_step(m, m_rand(m, 100));
			m_check(m, false);
		}
		/* At rest: every plan ends (quorum or expiry), usage equals holdings. */
		for (int gi = 0; gi < MGANGS; gi++)
			if (m->gangs[gi].planned)
				m_wait_plan_end(m, gi);
		m_check(m, true);
		for (unsigned q = 0; q < m->n_pods; q++)
			if (m->pods[q].held)
				MFAIL(m, "pod %s still held at rest", m->pods[q].name);
		plans += m->plans;
		holds += m->holds;
		quorum += m->quorum_rounds;
		expired += m->expired_rounds;
		refused += m->refused;
		singles += m->singles;
		deletes_held += m->deletes_held;
		stale += m->stale_events;
		failures += m->bind_failures;
		moved += m->moved_or_refused_binds;
		extra += m->extra_singles;
		confirms += m->confirms;
		external += m->external_binds;
		m_free(m);
	}
	print_message("model: %u plans, %u held binds, %u rounds released at quorum, %u expired "
		      "with held binds, %u refusals, %u single pods, %u held members deleted, %u "
		      "stale events, %u failed bindings, %u binds off the plan, %u extra members "
		      "as single pods, %u confirmations, %u bound by someone else; %.1f s\n", plans,
		      holds, quorum, expired, refused, singles, deletes_held, stale, failures, moved,
		      extra, confirms, external, m_now() - t0);
	/* The run must have exercised what it checks. */
	assert_true(plans > 20);
	assert_true(quorum > 5);
	assert_true(expired > 0);
	assert_true(refused > 10);
	assert_true(singles > 20);
	assert_true(stale > 5);
	assert_true(failures > 0);
}

/* kube-scheduler filters a member (the whole gang is planned and reserved);
 * its bind arrives only after the plan expired (a slow binding cycle). The
 * member must not be bound on its own while its gang is incomplete (design.md
 * section 6, invariant 2: "at expiry none"). */
static void test_gang_bind_after_the_plan_expired_is_not_a_single_pod(void **state)
{
	struct model *m = m_new(99, 1u << 1);   /* only g2's members exist */
	struct mpod *p = &m->pods[m->gangs[1].member[0]];      /* g2: 2 x 8 GPUs */
	struct gang_member mb = { .uid = p->uid, .ns = "ml", .name = p->name, .group = "g2",
				  .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	struct cache_node_view views[MN];
	bool allowed[MN];
	char reason[640];
	enum gang_verdict v;
	enum gang_bind_result gr;
	uint64_t dev = 0;
	unsigned n = 0, exist, bound;
	int node = -1;
	void *ctx;

	(void)state;
	cache_read_begin(m->c);
	for (int i = 0; i < MN; i++)
		if (cache_node_lookup(m->c, m_nodes[i], strlen(m_nodes[i]), &views[n]))
			n++;
	v = gang_filter(m->gm, &mb, views, n, allowed, reason, sizeof(reason));
	cache_read_end(m->c);
	assert_int_equal(v, GANG_ALLOWED);
	for (unsigned i = 0; i < n && node < 0; i++)
		if (allowed[i])
			node = (int)i;
	assert_int_equal(m_reservations(m, 1, -1), 2);
	m->gangs[1].planned = true;
	m->gangs[1].plan_t = m_now();
	m_wait_plan_end(m, 1);                  /* expired: no reservation left */
	ctx = m_hold_ctx(m, m->gangs[1].member[0]);
	gr = gang_bind(m->gm, &mb, m_nodes[node], m_release, ctx, &dev, reason, sizeof(reason));
	if (gr != GANG_BIND_HELD)
		free(ctx);
	m_group_count(m, 1, &exist, &bound);
	if (gr == GANG_BIND_NOT_A_GANG) {
		m_free(m);
		fail_msg("gang_bind answered GANG_BIND_NOT_A_GANG for a member of gang ml/g2 whose "
			 "plan expired (%u of %u members bound): ext_bind then binds it as a single "
			 "pod, leaving the gang partly bound", bound, 2u);
	}
	if (gr == GANG_BIND_HELD) {
		/* Held under a new plan is fine: it must then end all-or-nothing. */
		m->pods[m->gangs[1].member[0]].held = true;
		m->gangs[1].planned = true;
		m->gangs[1].plan_t = m_now();
		m_wait_plan_end(m, 1);
	}
	m_check(m, true);
	m_free(m);
}

/* A round at quorum: every held bind released ok in the same call that
 * completed the quorum, open slots' reservations dropped. At expiry: every
 * held bind released not ok, devices and reservations freed. */
static void test_gang_quorum_and_expiry_are_all_or_nothing(void **state)
{
	struct model *m = m_new(5, 1u << 0);    /* g1's members; g3's come later */
	unsigned ok = 0, not_ok = 0;

	(void)state;
	/* g1: quorum 3 of 4 members. Hold two, then the third completes it. */
	for (int s = 0; s < 3; s++) {
		int pi = m->gangs[0].member[s];
		struct mpod *p = &m->pods[pi];
		struct gang_member mb = { .uid = p->uid, .ns = "ml", .name = p->name, .group = "g1",
					  .req = { .demand = { .gpu_resource = 0, .gpus = 4 } } };
		struct cache_node_view views[MN];
		bool allowed[MN];
		char reason[640];
		unsigned n = 0;
		int node = -1;
		uint64_t dev;

		cache_read_begin(m->c);
		for (int i = 0; i < MN; i++)
			if (cache_node_lookup(m->c, m_nodes[i], strlen(m_nodes[i]), &views[n]))
				n++;
		assert_int_equal(gang_filter(m->gm, &mb, views, n, allowed, reason, sizeof(reason)),
				 GANG_ALLOWED);
		cache_read_end(m->c);
		if (s == 0) {
			m->gangs[0].planned = true;
			m->gangs[0].plan_t = m_now();
			m->gangs[0].round = 1;
			assert_int_equal(m_reservations(m, 0, -1), 3);
		}
		for (unsigned i = 0; i < n && node < 0; i++)
			if (allowed[i])
				node = (int)i;
		assert_int_equal(gang_bind(m->gm, &mb, m_nodes[node], m_release, m_hold_ctx(m, pi),
					   &dev, reason, sizeof(reason)), GANG_BIND_HELD);
		p->held = true;
		p->round = 1;
		pthread_mutex_lock(&m->lock);
		if (s < 2)
			assert_int_equal(m->n_rel, 0);
		else
			assert_int_equal(m->n_rel, 3);  /* all three, in the completing call */
		for (unsigned i = 0; i < m->n_rel; i++)
			ok += m->rel[i].ok, not_ok += !m->rel[i].ok;
		pthread_mutex_unlock(&m->lock);
		m_check(m, false);
	}
	assert_int_equal(ok, 3);
	assert_int_equal(not_ok, 0);
	assert_int_equal(m_reservations(m, 0, -1), 0);
	/* g3: quorum 4; hold one member, let the plan expire. (g1 is complete:
	 * nothing waits ahead of g3 in the fair order.) */
	for (unsigned s = 0; s < m->gangs[2].size; s++)
		m_new_pod(m, 2, (int)s, m->gangs[2].gpus);
	{
		int pi = m->gangs[2].member[0];
		struct mpod *p = &m->pods[pi];
		struct gang_member mb = { .uid = p->uid, .ns = "ml", .name = p->name, .group = "g3",
					  .req = { .demand = { .gpu_resource = 0, .gpus = 2 } } };
		struct cache_node_view views[MN];
		bool allowed[MN];
		char reason[640];
		unsigned n = 0;
		int node = -1;
		uint64_t dev;
		struct cache_pod_info info;

		cache_read_begin(m->c);
		for (int i = 0; i < MN; i++)
			if (cache_node_lookup(m->c, m_nodes[i], strlen(m_nodes[i]), &views[n]))
				n++;
		assert_int_equal(gang_filter(m->gm, &mb, views, n, allowed, reason, sizeof(reason)),
				 GANG_ALLOWED);
		cache_read_end(m->c);
		m->gangs[2].planned = true;
		m->gangs[2].plan_t = m_now();
		m->gangs[2].round = 1;
		for (unsigned i = 0; i < n && node < 0; i++)
			if (allowed[i])
				node = (int)i;
		assert_int_equal(gang_bind(m->gm, &mb, m_nodes[node], m_release, m_hold_ctx(m, pi),
					   &dev, reason, sizeof(reason)), GANG_BIND_HELD);
		p->held = true;
		p->round = 1;
		assert_int_equal(cache_pod_get(m->c, p->uid, &info), 0);
		assert_int_equal(info.state, CACHE_POD_STATE_ASSUMED);
		m_wait_plan_end(m, 2);
		assert_false(p->held);
		assert_int_equal(m->expired_rounds, 1);
		assert_int_equal(cache_pod_get(m->c, p->uid, &info), 0);
		assert_int_equal(info.state, CACHE_POD_STATE_PENDING);
		assert_int_equal(info.devices, 0);
	}
	m_check(m, false);
	m_free(m);
}

/* A gang whose members ask different amounts (g3: one 4-GPU member, three of
 * 2): the first member's filter plans a place of each member's own size, so
 * every member, the larger one included, finds a place of its size, binds
 * there, and the last completes the quorum. */
static void test_gang_mixed_members_each_get_a_place_of_their_size(void **state)
{
	struct model *m = m_new(9, 1u << 2);
	static const unsigned order[] = { 1, 2, 0, 3 };         /* a 2-GPU member first */
	struct cache_stats before, after;
	unsigned ok = 0;

	(void)state;
	cache_get_stats(m->c, &before);
	for (unsigned o = 0; o < 4; o++) {
		int pi = m->gangs[2].member[order[o]];
		struct mpod *p = &m->pods[pi];
		struct gang_member mb = { .uid = p->uid, .ns = "ml", .name = p->name, .group = "g3",
					  .req = { .demand = { .gpu_resource = 0, .gpus = p->gpus } } };
		struct cache_node_view views[MN];
		bool allowed[MN];
		char reason[640];
		unsigned n = 0;
		int node = -1;
		uint64_t dev = 0;

		cache_read_begin(m->c);
		for (int i = 0; i < MN; i++)
			if (cache_node_lookup(m->c, m_nodes[i], strlen(m_nodes[i]), &views[n]))
				n++;
		if (gang_filter(m->gm, &mb, views, n, allowed, reason, sizeof(reason)) !=
		    GANG_ALLOWED)
			fail_msg("member %u (%u GPUs) refused: %s", order[o], p->gpus, reason);
		cache_read_end(m->c);
		if (o == 0) {
			m->gangs[2].planned = true;
			m->gangs[2].plan_t = m_now();
			m->gangs[2].round = 1;
			assert_int_equal(m_reservations(m, 2, -1), 4);
			cache_get_stats(m->c, &after);
			/* 4 + 2 + 2 + 2 GPUs reserved, not four of the first one's size,
			 * and charged to the gang's queue (its namespace): 10 of 40. */
			assert_int_equal(after.gpus_held - before.gpus_held, 10);
			assert_true(fabs(gang_queue_share(m->gm, "ml") - 0.25) < 1e-9);
		}
		for (unsigned i = 0; i < n && node < 0; i++)
			if (allowed[i])
				node = (int)i;
		assert_true(node >= 0);
		if (gang_bind(m->gm, &mb, m_nodes[node], m_release, m_hold_ctx(m, pi), &dev, reason,
			      sizeof(reason)) != GANG_BIND_HELD)
			fail_msg("member %u (%u GPUs) not held on %s: %s", order[o], p->gpus,
				 m_nodes[node], reason);
		assert_int_equal(__builtin_popcountll(dev), p->gpus);
		p->held = true;
		p->round = 1;
		pthread_mutex_lock(&m->lock);
		/* Nothing released before the last member; then all four, ok. */
		assert_int_equal(m->n_rel, o < 3 ? 0 : 4);
		for (unsigned i = 0; i < m->n_rel; i++)
			ok += m->rel[i].ok;
		pthread_mutex_unlock(&m->lock);
		m_check(m, false);
	}
	assert_int_equal(ok, 4);
	assert_int_equal(m_reservations(m, 2, -1), 0);
	m_free(m);
}

/* A PodGroup's minResources that the offered nodes cannot hold refuses the gang
 * before anything is planned or reserved. */
static void test_gang_filter_checks_the_podgroup_min_resources(void **state)
{
	struct gang_config cfg = { .default_timeout_s = 5, .http_timeout_s = 30, .margin_s = 3 };
	struct cache *c = cache_new(&gpu_opts);
	struct cache_node_view views[2];
	struct gang_manager *gm;
	struct gang_member mb = { 0 };
	char reason[640], err[CACHE_ERR_LEN];
	bool allowed[2];
	cJSON *o;

	(void)state;
	assert_non_null(c);
	for (int i = 0; i < 2; i++) {
		char json[512];

		snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"n%d\"},\"status\":{\"allocatable\":"
			 "{\"nvidia.com/gpu\":\"8\"},\"capacity\":{\"nvidia.com/gpu\":\"8\"},"
			 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}", i);
		o = cJSON_Parse(json);
		assert_int_equal(cache_node_upsert(c, cache_node_parse(o, &gpu_opts, err, sizeof(err))), 0);
		cJSON_Delete(o);
		snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"w%d\",\"namespace\":\"ml\","
			 "\"uid\":\"w%d\",\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"big\"}},"
			 "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
			 "{\"nvidia.com/gpu\":\"8\"}}}]}}", i, i);
		o = cJSON_Parse(json);
		assert_int_equal(cache_pod_apply(c, cache_pod_parse(o, &gpu_opts, err, sizeof(err))), 0);
		cJSON_Delete(o);
	}
	o = cJSON_Parse("{\"metadata\":{\"name\":\"big\",\"namespace\":\"ml\"},\"spec\":{\"minMember\":2,"
			"\"minResources\":{\"nvidia.com/gpu\":\"32\"}}}");
	assert_int_equal(cache_podgroup_apply(c, cache_podgroup_parse(o, &gpu_opts, err, sizeof(err))),
			 0);
	cJSON_Delete(o);
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	mb.uid = "w0";
	mb.ns = "ml";
	mb.name = "w0";
	mb.group = "big";
	mb.req.demand.gpus = 8;
	cache_read_begin(c);
	assert_true(cache_node_lookup(c, "n0", 2, &views[0]));
	assert_true(cache_node_lookup(c, "n1", 2, &views[1]));
	assert_int_equal(gang_filter(gm, &mb, views, 2, allowed, reason, sizeof(reason)),
			 GANG_REFUSED);
	cache_read_end(c);
	assert_non_null(strstr(reason, "minResources needs 32 GPUs; the offered nodes have 16 free"));
	assert_false(allowed[0] || allowed[1]);
	/* Nothing was reserved. */
	cache_read_begin(c);
	assert_true(cache_node_lookup(c, "n0", 2, &views[0]));
	assert_int_equal(views[0].used, 0);
	cache_read_end(c);
	/* minResources the offered nodes can hold: the gang is planned. */
	o = cJSON_Parse("{\"metadata\":{\"name\":\"big\",\"namespace\":\"ml\"},\"spec\":{\"minMember\":2,"
			"\"minResources\":{\"nvidia.com/gpu\":\"16\"}}}");
	assert_int_equal(cache_podgroup_apply(c, cache_podgroup_parse(o, &gpu_opts, err, sizeof(err))),
			 0);
	cJSON_Delete(o);
	cache_read_begin(c);
	assert_true(cache_node_lookup(c, "n0", 2, &views[0]));
	assert_true(cache_node_lookup(c, "n1", 2, &views[1]));
	assert_int_equal(gang_filter(gm, &mb, views, 2, allowed, reason, sizeof(reason)),
			 GANG_ALLOWED);
	cache_read_end(c);
	assert_true(allowed[0] || allowed[1]);
	gang_manager_free(gm);
	cache_free(c);
}

/* <n> Ready 8-GPU nodes n0, n1, ... in the cache. */
static void cache_nodes(struct cache *c, int n)
{
	char err[CACHE_ERR_LEN];

	for (int i = 0; i < n; i++) {
		char json[512];
		cJSON *o;

		snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"n%d\"},\"status\":{\"allocatable\":"
			 "{\"nvidia.com/gpu\":\"8\"},\"capacity\":{\"nvidia.com/gpu\":\"8\"},"
			 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}", i);
		o = cJSON_Parse(json);
		assert_int_equal(cache_node_upsert(c, cache_node_parse(o, &gpu_opts, err, sizeof(err))), 0);
		cJSON_Delete(o);
	}
}

/* Apply pod <uid> of group "team" (label only: no PodGroup, no quorum named)
 * asking 8 GPUs. */
static void settle_pod(struct cache *c, const char *uid)
{
	char json[512], err[CACHE_ERR_LEN];
	cJSON *o;

	snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\","
		 "\"uid\":\"%s\",\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"team\"}},"
		 "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
		 "{\"nvidia.com/gpu\":\"8\"}}}]}}", uid, uid);
	o = cJSON_Parse(json);
	assert_int_equal(cache_pod_apply(c, cache_pod_parse(o, &gpu_opts, err, sizeof(err))), 0);
	cJSON_Delete(o);
}

static enum gang_verdict settle_filter(struct gang_manager *gm, struct cache *c, const char *uid,
				       bool *allowed, char *reason, size_t len)
{
	struct gang_member mb = { .uid = uid, .ns = "ml", .name = uid, .group = "team",
				  .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	struct cache_node_view views[3];
	enum gang_verdict v;
	unsigned n = 0;

	cache_read_begin(c);
	for (int i = 0; i < 3; i++) {
		char name[8];

		snprintf(name, sizeof(name), "n%d", i);
		if (cache_node_lookup(c, name, strlen(name), &views[n]))
			n++;
	}
	assert_int_equal(n, 3);
	v = gang_filter(gm, &mb, views, n, allowed, reason, len);
	cache_read_end(c);
	return v;
}

/* A gang naming no quorum (label only) is the members that exist; the first
 * member's filter must not plan (or place alone) a gang whose other members
 * are still being created: it is asked to retry until none has arrived for
 * gang.settle_seconds, then the whole gang is planned. */
static void test_gang_without_a_quorum_waits_for_its_members_to_settle(void **state)
{
	struct gang_config cfg = { .default_timeout_s = 10, .http_timeout_s = 30, .margin_s = 3,
				   .settle_s = 2 };
	struct cache *c = cache_new(&gpu_opts);
	struct gang_manager *gm;
	char reason[640];
	bool allowed[3];

	(void)state;
	assert_non_null(c);
	cache_nodes(c, 3);
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	/* One member so far: not placed alone as a gang of one. */
	settle_pod(c, "t0");
	assert_int_equal(settle_filter(gm, c, "t0", allowed, reason, sizeof(reason)), GANG_RETRY);
	assert_non_null(strstr(reason, "names no quorum"));
	assert_non_null(strstr(reason, "1 so far"));
	usleep(1500 * 1000);
	/* A second arrives: the wait starts again from it, so 2.5 s after the
	 * first (past the 2 s) it is still waiting. (A stall only makes the ages
	 * larger; this holds unless the machine stalls for a whole second.) */
	settle_pod(c, "t1");
	usleep(1000 * 1000);
	assert_int_equal(settle_filter(gm, c, "t0", allowed, reason, sizeof(reason)), GANG_RETRY);
	assert_non_null(strstr(reason, "2 so far"));
	/* Settled: planned for both, one node each (8 GPUs a member). */
	for (int i = 0; i < 100 && settle_filter(gm, c, "t0", allowed, reason,
						 sizeof(reason)) == GANG_RETRY; i++)
		usleep(100 * 1000);
	assert_int_equal(settle_filter(gm, c, "t0", allowed, reason, sizeof(reason)),
			 GANG_ALLOWED);
	{
		struct cache_stats st;

		cache_get_stats(c, &st);
		assert_int_equal(st.gpus_held, 16);
	}
	/* Another member created after the plan does not stop the planned gang. */
	settle_pod(c, "t2");
	assert_int_equal(settle_filter(gm, c, "t1", allowed, reason, sizeof(reason)),
			 GANG_ALLOWED);
	gang_manager_free(gm);
	cache_free(c);
}

/* Apply PodGroup <name> (quorum <min>) and <n> members of it asking 8 GPUs. */
static void idle_group(struct cache *c, const char *name, int min, unsigned n)
{
	char json[512], err[CACHE_ERR_LEN];
	cJSON *o;

	snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\"},"
		 "\"spec\":{\"minMember\":%d}}", name, min);
	o = cJSON_Parse(json);
	assert_int_equal(cache_podgroup_apply(c, cache_podgroup_parse(o, &gpu_opts, err,
								       sizeof(err))), 0);
	cJSON_Delete(o);
	for (unsigned i = 0; i < n; i++) {
		snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"%s-%u\",\"namespace\":\"ml\","
			 "\"uid\":\"%s-%u\",\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"%s\"}},"
			 "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
			 "{\"nvidia.com/gpu\":\"8\"}}}]}}", name, i, name, i, name);
		o = cJSON_Parse(json);
		assert_int_equal(cache_pod_apply(c, cache_pod_parse(o, &gpu_opts, err, sizeof(err))),
				 0);
		cJSON_Delete(o);
	}
}

/* Begin a read section and look up nodes n0 and n1 into <views>. */
static void read_two_nodes(struct cache *c, struct cache_node_view *views)
{
	cache_read_begin(c);
	assert_true(cache_node_lookup(c, "n0", 2, &views[0]));
	assert_true(cache_node_lookup(c, "n1", 2, &views[1]));
}

/* A gang whose pods are deleted stops waiting at once, not at the next
 * fairness pass: the next gang is not refused "waits behind" it. (Found end to
 * end: kube-scheduler does not retry a refused pod until a cluster event comes,
 * so one stale refusal could stall a gang for minutes.) */
static void test_gang_deleted_gang_is_nobody_to_wait_behind(void **state)
{
	struct gang_config cfg = { .default_timeout_s = 60, .http_timeout_s = 30, .margin_s = 3 };
	struct cache *c = cache_new(&gpu_opts);
	struct cache_node_view views[2];
	struct gang_manager *gm;
	struct gang_member mb = { .ns = "ml", .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	struct gang_stats st;
	char reason[640];
	bool allowed[2];

	(void)state;
	assert_non_null(c);
	cache_nodes(c, 2);
	idle_group(c, "old", 2, 2);
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	read_two_nodes(c, views);
	/* Offered one node, "old" (2 x 8 GPUs) cannot be planned: it waits. */
	mb.uid = mb.name = "old-0";
	mb.group = "old";
	assert_int_equal(gang_filter(gm, &mb, views, 1, allowed, reason, sizeof(reason)),
			 GANG_REFUSED);
	/* "new", the same shape, waits too, behind "old" (it came later). */
	idle_group(c, "new", 2, 2);
	mb.uid = mb.name = "new-0";
	mb.group = "new";
	assert_int_equal(gang_filter(gm, &mb, views, 1, allowed, reason, sizeof(reason)),
			 GANG_REFUSED);
	cache_read_end(c);
	gang_get_stats(gm, &st);
	assert_int_equal(st.waiting, 2);
	/* "old"'s pods go; offered both nodes, "new" is planned at once. */
	assert_int_equal(cache_pod_delete(c, "old-0"), 0);
	assert_int_equal(cache_pod_delete(c, "old-1"), 0);
	read_two_nodes(c, views);
	reason[0] = '\0';
	assert_int_equal(gang_filter(gm, &mb, views, 2, allowed, reason, sizeof(reason)),
			 GANG_ALLOWED);
	cache_read_end(c);
	gang_get_stats(gm, &st);
	assert_int_equal(st.waiting, 0);
	gang_manager_free(gm);
	cache_free(c);
}

/* The manager forgets a gang that has nothing in flight once nobody asked
 * about it for idle_forget_s, and never one with a plan. */
static void test_gang_idle_entries_are_forgotten_planned_ones_kept(void **state)
{
	struct gang_config cfg = { .default_timeout_s = 60, .http_timeout_s = 30, .margin_s = 3,
				   .idle_forget_s = 1 };
	struct cache *c = cache_new(&gpu_opts);
	struct cache_node_view views[2];
	struct gang_manager *gm;
	struct gang_member mb = { .ns = "ml", .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	struct gang_stats st;
	char reason[640];
	bool allowed[2];

	(void)state;
	assert_non_null(c);
	cache_nodes(c, 2);
	idle_group(c, "whole", 2, 2);           /* both members: it is planned */
	idle_group(c, "short", 3, 1);           /* 1 of 3 members: it waits for them */
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	read_two_nodes(c, views);
	mb.uid = mb.name = "whole-0";
	mb.group = "whole";
	assert_int_equal(gang_filter(gm, &mb, views, 2, allowed, reason, sizeof(reason)),
			 GANG_ALLOWED);
	mb.uid = mb.name = "short-0";
	mb.group = "short";
	assert_int_equal(gang_filter(gm, &mb, views, 2, allowed, reason, sizeof(reason)),
			 GANG_REFUSED);
	cache_read_end(c);
	gang_get_stats(gm, &st);
	assert_int_equal(st.entries, 2);
	for (int i = 0; i < 100; i++) {
		gang_get_stats(gm, &st);
		if (st.entries < 2)
			break;
		usleep(100 * 1000);
	}
	assert_int_equal(st.entries, 1);        /* "short" forgotten ... */
	assert_int_equal(st.active, 1);         /* ... "whole" still planned */
	usleep(1500 * 1000);
	gang_get_stats(gm, &st);
	assert_int_equal(st.entries, 1);
	gang_manager_free(gm);
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_idle_entries_are_forgotten_planned_ones_kept),
		cmocka_unit_test(test_gang_deleted_gang_is_nobody_to_wait_behind),
		cmocka_unit_test(test_gang_filter_checks_the_podgroup_min_resources),
		cmocka_unit_test(test_gang_without_a_quorum_waits_for_its_members_to_settle),
		cmocka_unit_test(test_gang_plan_uses_the_finest_domain_that_holds_the_gang),
		cmocka_unit_test(test_gang_plan_prefers_the_domain_needing_fewest_nodes),
		cmocka_unit_test(test_gang_plan_refuses_with_a_reason_and_skips_unusable_nodes),
		cmocka_unit_test(test_gang_plan_required_topology_keeps_the_gang_in_one_domain),
		cmocka_unit_test(test_gang_plan_random_clusters_keep_the_invariants),
		cmocka_unit_test(test_gang_plan_mixed_needs_share_nodes),
		cmocka_unit_test(test_gang_plan_mixed_fills_every_member_into_the_finest_domain),
		cmocka_unit_test(test_gang_plan_mixed_random_clusters_keep_the_invariants),
		cmocka_unit_test(test_gang_pod_group_table),
		cmocka_unit_test(test_gang_pod_group_intermediate_label_is_recognised),
		cmocka_unit_test(test_gang_pod_group_absent_pod_is_no_group),
		cmocka_unit_test(test_gang_pod_group_no_group_leaves_output_alone),
		cmocka_unit_test(test_gang_pod_group_short_buffer_stays_terminated),
		cmocka_unit_test(test_gang_quorum_and_expiry_are_all_or_nothing),
		cmocka_unit_test(test_gang_mixed_members_each_get_a_place_of_their_size),
		cmocka_unit_test(test_gang_bind_after_the_plan_expired_is_not_a_single_pod),
		cmocka_unit_test(test_gang_model_random_interleavings_keep_the_invariants),
	};

	log_set_level(LOG_ERROR);       /* the manager logs every plan and release */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
