/* Unit tests of the whole-gang planner (plan.c): the domain chosen, the nodes
 * used, refusals with reasons, mixed needs, and invariants over random
 * clusters. Pure: no manager, no clock.
 */
#include "fixture.h"

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

/* Node n<i> of 8 GPUs with random usage, in block b<0..blocks-1> (its number
 * into <*block>) and spine s0 or s1, drawn from <seed>. Returns its free GPUs. */
static unsigned add_random_node(struct cluster *c, unsigned i, unsigned blocks, unsigned *seed,
				unsigned *block)
{
	char name[16], blk[16], spine[16];
	uint64_t used = (uint64_t)rand_r(seed) & 0xFF & (uint64_t)rand_r(seed);
	unsigned b = (unsigned)rand_r(seed) % blocks;

	snprintf(name, sizeof(name), "n%u", i);
	snprintf(blk, sizeof(blk), "b%u", b);
	snprintf(spine, sizeof(spine), "s%u", (unsigned)rand_r(seed) % 2);
	add_node(c, name, 8, spine, blk, used, true);
	if (block)
		*block = b;
	return 8u - (unsigned)__builtin_popcountll(used);
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
	struct gang_need one = { .req = gpus(k), .count = members };

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

/* required:<spine key> keeps the default levels finer than the spine: the gang
 * takes the tightest rack inside one spine, as an unconstrained gang would,
 * and never a rack whose nodes straddle two spines (labels that do not nest);
 * with no spine holding it, it is refused rather than spread. */
static void test_gang_plan_required_level_keeps_the_finer_levels(void **state)
{
	struct cluster c = { 0 };
	struct gang_levels lv;
	struct gang_plan p;
	char why[256] = "";
	struct placement_request r = gpus(8);
	const char *spine = "network.topology.nvidia.com/spine";

	(void)state;
	gang_levels_required(&gang_default_levels, spine, &lv);
	assert_true(lv.strict);
	assert_int_equal(lv.n, 3);             /* spine, block, NVLink domain */
	assert_string_equal(lv.keys[0][0], spine);
	assert_null(lv.keys[0][1]);
	assert_string_equal(lv.keys[1][0], "network.topology.nvidia.com/block");
	assert_string_equal(lv.keys[2][2], "nvidia.com/gpu.clique");
	/* spine-a: rack-0 with three empty nodes, rack-1 with two; spine-b:
	 * rack-x, one node in spine-a and one in spine-b, both empty. */
	add_node(&c, "a0", 8, "spine-a", "rack-0", 0, true);
	add_node(&c, "a1", 8, "spine-a", "rack-0", 0, true);
	add_node(&c, "a2", 8, "spine-a", "rack-0", 0, true);
	add_node(&c, "b0", 8, "spine-a", "rack-1", 0, true);
	add_node(&c, "b1", 8, "spine-a", "rack-1", 0, true);
	add_node(&c, "x0", 8, "spine-a", "rack-x", 0, true);
	add_node(&c, "x1", 8, "spine-b", "rack-x", 0, true);
	/* 2 x 8: the tightest rack that lies in one spine is rack-1 (rack-x
	 * has as few free GPUs but straddles the spines). */
	assert_int_equal(gang_plan_make(c.views, c.n, 2, &r, &lv, &p, why, sizeof(why)), 0);
	assert_int_equal(p.level, 1);
	assert_string_equal(p.domain, "rack-1");
	for (unsigned s = 0; s < p.n_slots; s++)
		assert_string_equal(cache_node_label(c.nodes[p.slots[s].node],
						     "network.topology.nvidia.com/block"), "rack-1");
	gang_plan_fini(&p);
	/* 4 x 8: no rack holds them; spine-a does, whole. */
	assert_int_equal(gang_plan_make(c.views, c.n, 4, &r, &lv, &p, why, sizeof(why)), 0);
	assert_int_equal(p.level, 0);
	assert_string_equal(p.domain, "spine-a");
	for (unsigned s = 0; s < p.n_slots; s++)
		assert_string_equal(cache_node_label(c.nodes[p.slots[s].node], spine), "spine-a");
	gang_plan_fini(&p);
	/* 7 x 8 fit the cluster but no spine: refused, naming the closest. */
	assert_int_equal(gang_plan_make(c.views, c.n, 7, &r, &lv, &p, why, sizeof(why)), -ENOSPC);
	assert_string_equal(why, "7 pods x 8 GPUs; largest free network.topology.nvidia.com/spine "
			    "domain spine-a holds 6 pods");
	/* A key no level names: that key alone. */
	gang_levels_required(&gang_default_levels, "example.com/pod", &lv);
	assert_int_equal(lv.n, 1);
	assert_true(lv.strict);
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

		for (unsigned i = 0; i < 1 + (unsigned)rand_r(&seed) % 40; i++)
			fit += add_random_node(&c, i, 5, &seed, NULL) / k;
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
	struct gang_need leader_workers[2] = { { .req = gpus(2), .count = 4 }, { .req = gpus(8), .count = 1 } };
	struct gang_need small_first[2] = { { .req = gpus(2), .count = 2 }, { .req = gpus(4), .count = 1 } };
	struct gang_need too_big[2] = { { .req = gpus(8), .count = 3 }, { .req = gpus(1), .count = 2 } };

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
	struct gang_need two_kinds[2] = { { .req = gpus(8), .count = 1 }, { .req = gpus(8), .count = 1 } };
	struct gang_need six_four_four[2] = { { .req = gpus(6), .count = 1 }, { .req = gpus(4), .count = 2 } };

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

/* Members pinned to one node each (their nodeSelector's hostname, as Kueue's
 * topology-aware scheduling pins them): a pinned need puts on each candidate
 * exactly the members pinned there, the others go to the offered candidates
 * only, never to a candidate there only for a pin; a pin with no room, or
 * none where it points, cannot be placed. */
static void test_gang_plan_pinned_members_go_to_their_nodes(void **state)
{
	struct cluster c = { 0 };
	struct gang_plan p;
	char why[256];
	/* By candidate: one pinned member on d; then one on b and one on d. */
	static const uint16_t on_d[4] = { 0, 0, 0, 1 }, on_b_d[4] = { 0, 1, 0, 1 };
	static const uint16_t two_on_d[4] = { 0, 0, 0, 2 }, nowhere[4] = { 0 };
	struct gang_need needs[2] = { { .req = gpus(8), .count = 1 },
				      { .req = gpus(8), .count = 1, .pins = on_d } };

	(void)state;
	/* Offered: a and b; c and d are there for pins alone. */
	add_node(&c, "a", 8, "s0", "b0", 0, true);
	add_node(&c, "b", 8, "s0", "b0", 0, true);
	add_node(&c, "c", 8, "s0", "b0", 0, true);
	add_node(&c, "d", 8, "s1", "b1", 0, true);
	assert_int_equal(gang_plan_pinned(c.views, 4, 2, needs, 2, &gang_default_levels, &p, why,
					  sizeof(why)), 0);
	assert_int_equal(p.n_slots, 2);
	for (unsigned s = 0; s < p.n_slots; s++)
		assert_int_equal(p.slots[s].node, p.slots[s].need == 1 ? 3u : 0u);
	/* b0 and b1 both used: no common block, the spine level neither. */
	assert_int_equal(p.level, -1);
	gang_plan_fini(&p);
	/* Sixteen-node gangs need no more needs: one pinned need, a place on
	 * each node; here two members pinned to b and d. */
	needs[0].pins = on_b_d;
	needs[0].count = 2;
	assert_int_equal(gang_plan_pinned(c.views, 4, 2, needs, 1, &gang_default_levels, &p, why,
					  sizeof(why)), 0);
	assert_int_equal(p.n_slots, 2);
	assert_int_equal(p.slots[0].node + p.slots[1].node, 1u + 3u);
	assert_true(p.slots[0].node != p.slots[1].node);
	gang_plan_fini(&p);
	/* Two members pinned to one 8-GPU node: one fits, the plan fails. */
	needs[0].pins = two_on_d;
	assert_int_equal(gang_plan_pinned(c.views, 4, 2, needs, 1, &gang_default_levels, &p, why,
					  sizeof(why)), -ENOSPC);
	assert_non_null(strstr(why, "hold 1"));
	/* Pinned where no candidate is (a node troupe does not know). */
	needs[0].pins = nowhere;
	assert_int_equal(gang_plan_pinned(c.views, 4, 2, needs, 1, &gang_default_levels, &p, why,
					  sizeof(why)), -ENOSPC);
	/* Unpinned members never use a candidate past the offered ones. */
	needs[0].pins = NULL;
	needs[0].count = 3;
	assert_int_equal(gang_plan_pinned(c.views, 4, 2, needs, 1, &gang_default_levels, &p, why,
					  sizeof(why)), -ENOSPC);
	cluster_free(&c);
}

/* Random clusters with members pinned to random nodes, offered or not, beside
 * members that are not pinned: any plan holds (check_mixed_plan), puts on each
 * node exactly the members pinned there and the others on offered nodes only;
 * and a gang whose pinned members fit where they are pinned, and whose other
 * members fit in the offered nodes' room left, is never refused (a member
 * that is not pinned never takes a pinned member's room). */
static void test_gang_plan_pinned_random_clusters_keep_the_invariants(void **state)
{
	static const unsigned sizes[] = { 1, 2, 3, 4, 6, 8 };
	unsigned seed = 5710, planned = 0, refused = 0;

	(void)state;
	for (unsigned round = 0; round < 400; round++) {
		struct cluster c = { 0 };
		uint16_t pins[2][64] = { { 0 } };
		unsigned got[3][64] = { { 0 } };
		struct gang_need needs[3];
		unsigned n = 2 + (unsigned)rand_r(&seed) % 20, n_offered = 1 + (unsigned)rand_r(&seed) % n;
		unsigned n_needs = 2 + (unsigned)rand_r(&seed) % 2, fit_free = 0;
		bool pins_fit = true;
		struct gang_plan p;
		char why[256];
		int ret;

		for (unsigned i = 0; i < n; i++)
			add_random_node(&c, i, 4, &seed, NULL);
		/* Need 0 is not pinned; needs 1 and 2 are, each member to a node. */
		for (unsigned j = 0; j < n_needs; j++) {
			needs[j] = (struct gang_need){ .req = gpus(sizes[rand_r(&seed) % 6]) };
			if (j == 0) {
				needs[j].count = 1 + (unsigned)rand_r(&seed) % 6;
				continue;
			}
			needs[j].count = 1 + (unsigned)rand_r(&seed) % 6;
			for (unsigned m = 0; m < needs[j].count; m++)
				pins[j - 1][rand_r(&seed) % n]++;
			needs[j].pins = pins[j - 1];
		}
		for (unsigned i = 0; i < n; i++) {
			unsigned f = cache_view_free_gpus(&c.views[i]), pinned = 0;

			for (unsigned j = 1; j < n_needs; j++)
				pinned += pins[j - 1][i] * needs[j].req.demand.gpus;
			if (pinned > f)
				pins_fit = false;
			else if (i < n_offered)
				fit_free += (f - pinned) / needs[0].req.demand.gpus;
		}
		ret = gang_plan_pinned(c.views, n, n_offered, needs, n_needs, &gang_default_levels,
				       &p, why, sizeof(why));
		if (ret == 0) {
			check_mixed_plan(&c, &p, needs, n_needs);
			for (unsigned s = 0; s < p.n_slots; s++) {
				got[p.slots[s].need][p.slots[s].node]++;
				if (!needs[p.slots[s].need].pins && p.slots[s].node >= n_offered)
					fail_msg("round %u: a member not pinned on n%u, not offered",
						 round, p.slots[s].node);
			}
			for (unsigned j = 1; j < n_needs; j++)
				for (unsigned i = 0; i < n; i++)
					if (got[j][i] != pins[j - 1][i])
						fail_msg("round %u: need %u has %u on n%u, pinned %u",
							 round, j, got[j][i], i, pins[j - 1][i]);
			gang_plan_fini(&p);
			planned++;
		} else {
			assert_int_equal(ret, -ENOSPC);
			if (pins_fit && fit_free >= needs[0].count)
				fail_msg("round %u: refused though every member fits: %s", round, why);
			refused++;
		}
		cluster_free(&c);
	}
	assert_true(planned > 50 && refused > 50);
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

			needs[j] = (struct gang_need){ .req = gpus(sizes[rand_r(&seed) % 6]),
						       .count = 1 + (unsigned)rand_r(&seed) % 8 };
			if (needs[j].req.demand.gpus > kmax)
				kmax = needs[j].req.demand.gpus;
			demand += needs[j].count * needs[j].req.demand.gpus;
			members += needs[j].count;
		}
		for (unsigned i = 0; i < 1 + (unsigned)rand_r(&seed) % 30; i++) {
			unsigned b, f = add_random_node(&c, i, 4, &seed, &b);

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_plan_uses_the_finest_domain_that_holds_the_gang),
		cmocka_unit_test(test_gang_plan_prefers_the_domain_needing_fewest_nodes),
		cmocka_unit_test(test_gang_plan_refuses_with_a_reason_and_skips_unusable_nodes),
		cmocka_unit_test(test_gang_plan_required_topology_keeps_the_gang_in_one_domain),
		cmocka_unit_test(test_gang_plan_required_level_keeps_the_finer_levels),
		cmocka_unit_test(test_gang_plan_random_clusters_keep_the_invariants),
		cmocka_unit_test(test_gang_plan_mixed_needs_share_nodes),
		cmocka_unit_test(test_gang_plan_mixed_fills_every_member_into_the_finest_domain),
		cmocka_unit_test(test_gang_plan_pinned_members_go_to_their_nodes),
		cmocka_unit_test(test_gang_plan_pinned_random_clusters_keep_the_invariants),
		cmocka_unit_test(test_gang_plan_mixed_random_clusters_keep_the_invariants),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
