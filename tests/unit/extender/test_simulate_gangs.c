/* Unit tests of the peers' gang planners (simulate_gangs.c): properties over
 * many random clusters (every member placed, devices free and distinct, only
 * nodes the filter accepts, a refusal leaving the views as they were, which
 * gangs each planner can place at all), and each planner's defining choice on
 * clusters built by hand (Kueue's KEP-2724 example, the tightest rack, KAI's
 * bin-packing, kube-scheduler's one domain of the key scored by
 * MostAllocated).
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

#include <cjson/cJSON.h>

#include "extender/simulate_gangs.h"

static const struct cache_opts gpu_opts = { .gpu_resources = { "nvidia.com/gpu" },
					    .n_gpu_resources = 1 };

static const char *const names[] = { "nvidia.com/gpu", NULL };

enum { MAX_NODES = 64 };

struct cluster {
	unsigned n;
	struct cache_node *nodes[MAX_NODES];
	struct cache_node_view views[MAX_NODES];
};

enum node_state { READY, NOT_READY, CORDONED };

/* A node with <gpus> GPUs, <used> occupied, in zone/spine/block (NULL: no
 * such label). */
static void add_node(struct cluster *c, const char *name, unsigned gpus, uint64_t used,
		     const char *zone, const char *spine, const char *block, enum node_state st)
{
	char json[1024], labels[512] = "", err[CACHE_ERR_LEN];
	const char *keys[] = { "topology.kubernetes.io/zone", "network.topology.nvidia.com/spine",
			       "network.topology.nvidia.com/block" };
	const char *vals[] = { zone, spine, block };
	cJSON *o;

	for (unsigned i = 0; i < 3; i++)
		if (vals[i])
			snprintf(labels + strlen(labels), sizeof(labels) - strlen(labels),
				 "%s\"%s\":\"%s\"", labels[0] ? "," : "", keys[i], vals[i]);
	snprintf(json, sizeof(json),
		 "{\"metadata\":{\"name\":\"%s\",\"labels\":{%s}},\"spec\":{\"unschedulable\":%s},"
		 "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"%u\"},"
		 "\"capacity\":{\"nvidia.com/gpu\":\"%u\"},"
		 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
		 name, labels, st == CORDONED ? "true" : "false", gpus, gpus,
		 st == NOT_READY ? "False" : "True");
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
	c->n = 0;
}

static struct placement_request gpus(unsigned k)
{
	return (struct placement_request){ .demand = { .gpu_resource = 0, .gpus = k } };
}

/* A test chooser: the highest free indices (unlike troupe's lowest-first on
 * unknown topologies, so a planner that ignored the chooser shows). */
static uint64_t choose_highest(const struct cache_node_view *v, uint64_t free_mask, unsigned k,
			       uint64_t *rng)
{
	uint64_t set = 0;

	(void)v;
	(void)rng;
	for (unsigned i = 0; i < k && free_mask; i++) {
		unsigned b = 63 - (unsigned)__builtin_clzll(free_mask);

		set |= 1ULL << b;
		free_mask &= ~(1ULL << b);
	}
	return set;
}

/* The members node <i> could take: placement_check_request's accepted
 * nodes, free / k (the test nodes' links are unknown, so troupe's chooser
 * takes any free set under the default policy). */
static unsigned cap_of(const struct cluster *c, unsigned i, const struct placement_request *r)
{
	struct placement_fit fit;

	if (placement_check_request(&c->views[i], r, names, &fit) != PLACEMENT_FITS)
		return 0;
	return cache_view_free_gpus(&c->views[i]) / r->demand.gpus;
}

/* Every slot: a node the filter accepts, exactly k free devices, none twice;
 * the members each node got within its capacity. */
static void check_plan(const struct cluster *c, const struct gang_plan *p, unsigned members,
		       const struct placement_request *r)
{
	uint64_t taken[MAX_NODES] = { 0 };

	assert_int_equal(p->n_slots, members);
	assert_non_null(p->slots);
	for (unsigned s = 0; s < p->n_slots; s++) {
		const struct gang_slot *sl = &p->slots[s];
		struct placement_fit fit;

		assert_true(sl->node < c->n);
		assert_int_equal(placement_check_request(&c->views[sl->node], r, names, &fit),
				 PLACEMENT_FITS);
		assert_int_equal(__builtin_popcountll(sl->devices), r->demand.gpus);
		assert_int_equal(sl->devices & ~cache_view_free_mask(&c->views[sl->node]), 0);
		assert_int_equal(sl->devices & taken[sl->node], 0);
		taken[sl->node] |= sl->devices;
	}
}

/* The slots on node <i>. */
static unsigned on_node(const struct gang_plan *p, unsigned i)
{
	unsigned n = 0;

	for (unsigned s = 0; s < p->n_slots; s++)
		n += p->slots[s].node == i;
	return n;
}

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A random cluster: 4..40 nodes of 4 or 8 GPUs, random usage, six blocks in
 * three spines in two zones (a node's block label sometimes missing), a
 * share not Ready or cordoned. */
static void random_cluster(struct cluster *c, uint64_t *s)
{
	unsigned n = 4 + (unsigned)(rnd(s) % 37);

	for (unsigned i = 0; i < n; i++) {
		char name[32], zone[16], spine[16], block[16];
		unsigned g = rnd(s) % 3 ? 8 : 4, r = (unsigned)(rnd(s) % 20);
		uint64_t used = rnd(s) & rnd(s) & ((1ULL << g) - 1);

		snprintf(name, sizeof(name), "node-%02u", i);
		unsigned b = (unsigned)(rnd(s) % 6);

		snprintf(zone, sizeof(zone), "z%u", b / 3);
		snprintf(spine, sizeof(spine), "s%u", b / 2);
		snprintf(block, sizeof(block), "b%u", b);
		add_node(c, name, g, rnd(s) % 4 ? used : 0, zone, spine,
			 rnd(s) % 10 ? block : NULL,
			 r == 0 ? NOT_READY : r == 1 ? CORDONED : READY);
	}
}

/* With choose_highest, what each node gave is its highest free devices. */
static void check_highest(const struct cluster *c, const struct gang_plan *p)
{
	for (unsigned i = 0; i < c->n; i++) {
		uint64_t got = 0, want = 0, mask = cache_view_free_mask(&c->views[i]);
		unsigned n = 0;

		for (unsigned s = 0; s < p->n_slots; s++)
			if (p->slots[s].node == i) {
				got |= p->slots[s].devices;
				n += (unsigned)__builtin_popcountll(p->slots[s].devices);
			}
		want = choose_highest(&c->views[i], mask, n, NULL);
		assert_int_equal(got, want);
	}
}

/* Whether every member's node has one zone, spine and block ("" for none):
 * one of Kueue's block domains, a path of values from the top. */
static bool one_block_path(const struct cluster *c, const struct gang_plan *p)
{
	static const char *const keys[] = { "topology.kubernetes.io/zone",
					    "network.topology.nvidia.com/spine",
					    "network.topology.nvidia.com/block" };

	for (unsigned k = 0; k < 3; k++)
		for (unsigned s = 1; s < p->n_slots; s++) {
			const char *a = cache_node_label(c->nodes[p->slots[0].node], keys[k]);
			const char *b = cache_node_label(c->nodes[p->slots[s].node], keys[k]);

			if (strcmp(a ? a : "", b ? b : "") != 0)
				return false;
		}
	return true;
}

/* Whether some block holds <members> (capacity of the accepted nodes). */
static bool a_block_holds(const struct cluster *c, unsigned members,
			  const struct placement_request *r)
{
	for (unsigned i = 0; i < c->n; i++) {
		const char *b = cache_node_label(c->nodes[i], "network.topology.nvidia.com/block");
		unsigned sum = 0;

		if (!b)
			continue;
		for (unsigned j = 0; j < c->n; j++) {
			const char *bj = cache_node_label(c->nodes[j],
							  "network.topology.nvidia.com/block");

			if (bj && strcmp(b, bj) == 0)
				sum += cap_of(c, j, r);
		}
		if (sum >= members)
			return true;
	}
	return false;
}

static void test_sim_gangs_random_clusters_hold_the_invariants(void **state)
{
	uint64_t s = 15;

	(void)state;
	for (unsigned round = 0; round < 400; round++) {
		static const unsigned ks[] = { 1, 2, 4, 8 };
		struct cluster c = { 0 };
		struct placement_request r = gpus(ks[rnd(&s) % 4]);
		unsigned members = 2 + (unsigned)(rnd(&s) % 15), total = 0;
		struct cache_node_view before[MAX_NODES];

		random_cluster(&c, &s);
		memcpy(before, c.views, sizeof(before));
		for (unsigned i = 0; i < c.n; i++)
			total += cap_of(&c, i, &r);
		for (unsigned pi = 0; sim_gang_planner_names[pi]; pi++) {
			sim_gang_fn fn = sim_gang_planner_find(sim_gang_planner_names[pi]);
			bool kube = strcmp(sim_gang_planner_names[pi], "kube-tas") == 0;
			bool kueue = strncmp(sim_gang_planner_names[pi], "kueue", 5) == 0;

			for (unsigned with = 0; with < 2; with++) {
				uint64_t rng = round;
				struct gang_plan p;
				int ret = fn(c.views, c.n, members, &r, &gang_default_levels,
					     with ? choose_highest : NULL, &rng, &p);

				assert_memory_equal(before, c.views, sizeof(before));
				if (ret == 0) {
					check_plan(&c, &p, members, &r);
					for (unsigned i = 0; i < c.n; i++)
						assert_true(on_node(&p, i) <= cap_of(&c, i, &r));
					if (with)
						check_highest(&c, &p);
				} else {
					assert_int_equal(ret, -ENOSPC);
					assert_int_equal(p.n_slots, 0);
					assert_null(p.slots);
				}
				/* Kueue falls back to several domains: it places
				 * whatever the accepted nodes hold. kube-tas places
				 * exactly what one block holds. KAI never places
				 * more than the cluster holds. */
				if (kueue)
					assert_int_equal(ret == 0, total >= members);
				if (kube)
					assert_int_equal(ret == 0, a_block_holds(&c, members, &r));
				if (total < members)
					assert_int_equal(ret, -ENOSPC);
				/* With a block that holds it, Kueue, KAI and kube-tas
				 * all keep the gang in one block. */
				if (ret == 0 && a_block_holds(&c, members, &r) && kube)
					assert_int_equal(p.level, 3);
				if (ret == 0 && a_block_holds(&c, members, &r) && kueue)
					assert_true(one_block_path(&c, &p));
				gang_plan_fini(&p);
			}
		}
		cluster_free(&c);
	}
}

/* KEP-2724's example ("Computing the assignment"): a rack of four nodes
 * holding 3, 3, 2 and 1 pods, a PodSet of 7. BestFit takes the two 3s and
 * then the node holding exactly 1; LeastFreeCapacity takes 1, 2, 3 and the
 * last 1 on the other 3. */
static void test_sim_gangs_kueue_follows_the_keps_example(void **state)
{
	struct cluster c = { 0 };
	struct placement_request r = gpus(1);
	struct gang_plan p;
	uint64_t rng = 1;

	(void)state;
	add_node(&c, "n1", 4, 0x1, "z", "s", "rack", READY);     /* 3 free */
	add_node(&c, "n2", 4, 0x1, "z", "s", "rack", READY);     /* 3 free */
	add_node(&c, "n3", 4, 0x3, "z", "s", "rack", READY);     /* 2 free */
	add_node(&c, "n4", 4, 0x7, "z", "s", "rack", READY);     /* 1 free */
	assert_int_equal(sim_gang_planner_find("kueue-bestfit")(c.views, c.n, 7, &r,
							       &gang_default_levels, NULL, &rng,
							       &p), 0);
	check_plan(&c, &p, 7, &r);
	assert_int_equal(on_node(&p, 0), 3);
	assert_int_equal(on_node(&p, 1), 3);
	assert_int_equal(on_node(&p, 2), 0);
	assert_int_equal(on_node(&p, 3), 1);
	assert_int_equal(p.level, 3);
	assert_string_equal(p.domain, "rack");
	gang_plan_fini(&p);
	assert_int_equal(sim_gang_planner_find("kueue-leastfree")(c.views, c.n, 7, &r,
								 &gang_default_levels, NULL,
								 &rng, &p), 0);
	check_plan(&c, &p, 7, &r);
	assert_int_equal(on_node(&p, 0), 3);
	assert_int_equal(on_node(&p, 1), 1);
	assert_int_equal(on_node(&p, 2), 2);
	assert_int_equal(on_node(&p, 3), 1);
	gang_plan_fini(&p);
	cluster_free(&c);
}

/* Racks holding 8, 4, 6 and 4 pods of 4 GPUs and a gang of 4: BestFit takes
 * the tightest rack that fits (4), LeastFreeCapacity the one with the least
 * free capacity that fits (also 4), KAI the fullest that fits (4), each the
 * first in label order of the two (rack-b before rack-d); of 5, the 6-pod
 * rack for all three. */
static void test_sim_gangs_take_the_tightest_fitting_rack(void **state)
{
	static const char *const planners[] = { "kueue-bestfit", "kueue-leastfree", "kai" };
	struct cluster c = { 0 };
	struct placement_request r = gpus(4);

	(void)state;
	add_node(&c, "a-1", 8, 0, "z", "s", "rack-a", READY);
	add_node(&c, "a-2", 8, 0, "z", "s", "rack-a", READY);
	add_node(&c, "a-3", 8, 0, "z", "s", "rack-a", READY);
	add_node(&c, "a-4", 8, 0, "z", "s", "rack-a", READY);
	add_node(&c, "b-1", 8, 0, "z", "s", "rack-b", READY);
	add_node(&c, "b-2", 8, 0, "z", "s", "rack-b", READY);
	add_node(&c, "c-1", 8, 0, "z", "s", "rack-c", READY);
	add_node(&c, "c-2", 8, 0, "z", "s", "rack-c", READY);
	add_node(&c, "c-3", 8, 0, "z", "s", "rack-c", READY);
	add_node(&c, "d-1", 8, 0, "z", "s", "rack-d", READY);
	add_node(&c, "d-2", 8, 0, "z", "s", "rack-d", READY);
	for (unsigned pi = 0; pi < 3; pi++) {
		struct gang_plan p;
		uint64_t rng = 1;

		assert_int_equal(sim_gang_planner_find(planners[pi])(c.views, c.n, 4, &r,
								    &gang_default_levels, NULL,
								    &rng, &p), 0);
		check_plan(&c, &p, 4, &r);
		assert_string_equal(p.domain, "rack-b");
		gang_plan_fini(&p);
		assert_int_equal(sim_gang_planner_find(planners[pi])(c.views, c.n, 5, &r,
								    &gang_default_levels, NULL,
								    &rng, &p), 0);
		check_plan(&c, &p, 5, &r);
		assert_string_equal(p.domain, "rack-c");
		gang_plan_fini(&p);
	}
	cluster_free(&c);
}

/* Inside one rack of nodes with 8, 4 and 2 free GPUs, a gang of 3 x 2 GPUs:
 * KAI bin-packs (the 2-free node first, then the 4-free one), Kueue's BestFit
 * puts all three on the node with the most room (the first that fits, the
 * tightest such). */
static void test_sim_gangs_kai_packs_the_fullest_nodes(void **state)
{
	struct cluster c = { 0 };
	struct placement_request r = gpus(2);
	struct gang_plan p;
	uint64_t rng = 1;

	(void)state;
	add_node(&c, "n8", 8, 0x00, "z", "s", "rack", READY);
	add_node(&c, "n4", 8, 0x0f, "z", "s", "rack", READY);
	add_node(&c, "n2", 8, 0x3f, "z", "s", "rack", READY);
	assert_int_equal(sim_gang_planner_find("kai")(c.views, c.n, 3, &r, &gang_default_levels,
						     NULL, &rng, &p), 0);
	check_plan(&c, &p, 3, &r);
	assert_int_equal(on_node(&p, 0), 0);
	assert_int_equal(on_node(&p, 1), 2);
	assert_int_equal(on_node(&p, 2), 1);
	gang_plan_fini(&p);
	assert_int_equal(sim_gang_planner_find("kueue-bestfit")(c.views, c.n, 3, &r,
							       &gang_default_levels, NULL, &rng,
							       &p), 0);
	assert_int_equal(on_node(&p, 0), 3);
	gang_plan_fini(&p);
	cluster_free(&c);
}

/* KAI's example (docs/topology/README.md, "Scheduling Strategy"): zone A
 * with racks of 2, 1, 1 and 1 free GPUs, zone B with three racks of 2, and 3
 * pods of 1 GPU, preferring the rack. No rack holds them; of the zones, A,
 * with fewer available (bin-packing); inside it the rack with the most room
 * first (A1 takes 2), then one more. */
static void test_sim_gangs_kai_follows_its_docs_example(void **state)
{
	struct cluster c = { 0 };
	struct placement_request r = gpus(1);
	struct gang_plan p;
	uint64_t rng = 1;

	(void)state;
	add_node(&c, "a2-1", 1, 0, "za", NULL, "a2", READY);
	add_node(&c, "a1-1", 1, 0, "za", NULL, "a1", READY);
	add_node(&c, "a1-2", 1, 0, "za", NULL, "a1", READY);
	add_node(&c, "a3-1", 1, 0, "za", NULL, "a3", READY);
	add_node(&c, "a4-1", 1, 0, "za", NULL, "a4", READY);
	for (unsigned i = 0; i < 6; i++) {
		char name[16], rack[8];

		snprintf(name, sizeof(name), "b%u-%u", i / 2 + 1, i % 2 + 1);
		snprintf(rack, sizeof(rack), "b%u", i / 2 + 1);
		add_node(&c, name, 1, 0, "zb", NULL, rack, READY);
	}
	assert_int_equal(sim_gang_planner_find("kai")(c.views, c.n, 3, &r, &gang_default_levels,
						     NULL, &rng, &p), 0);
	check_plan(&c, &p, 3, &r);
	assert_string_equal(p.domain, "za");
	assert_int_equal(on_node(&p, 1) + on_node(&p, 2), 2);  /* rack a1 */
	gang_plan_fini(&p);
	cluster_free(&c);
}

/* kube-tas: one placement per block. Two blocks both hold a gang of 4 x 2
 * GPUs; MostAllocated prefers the one whose GPUs end up most in use (r2, half
 * full already); inside it the members spread by LeastAllocated. A gang no
 * block holds is refused though the cluster holds it (no fallback), where
 * Kueue spreads it over both. */
static void test_sim_gangs_kube_tas_scores_one_domain_of_the_key(void **state)
{
	struct cluster c = { 0 };
	struct placement_request r = gpus(2);
	struct gang_plan p;
	uint64_t rng = 1;

	(void)state;
	add_node(&c, "r1-a", 8, 0, "z", "s", "r1", READY);
	add_node(&c, "r1-b", 8, 0, "z", "s", "r1", READY);
	add_node(&c, "r2-a", 8, 0xff, "z", "s", "r2", READY);   /* full: not a candidate */
	add_node(&c, "r2-b", 8, 0, "z", "s", "r2", READY);
	assert_int_equal(sim_gang_planner_find("kube-tas")(c.views, c.n, 4, &r,
							  &gang_default_levels, NULL, &rng, &p),
			 0);
	check_plan(&c, &p, 4, &r);
	assert_string_equal(p.domain, "r2");
	assert_int_equal(on_node(&p, 3), 4);
	gang_plan_fini(&p);
	/* 3 members fit both; LeastAllocated inside r1 spreads them 2 + 1. */
	c.views[3].used = 0xff;
	assert_int_equal(sim_gang_planner_find("kube-tas")(c.views, c.n, 3, &r,
							  &gang_default_levels, NULL, &rng, &p),
			 0);
	assert_string_equal(p.domain, "r1");
	assert_int_equal(on_node(&p, 0), 2);
	assert_int_equal(on_node(&p, 1), 1);
	gang_plan_fini(&p);
	/* 9 members: no block holds them. */
	c.views[3].used = 0;
	assert_int_equal(sim_gang_planner_find("kube-tas")(c.views, c.n, 9, &r,
							  &gang_default_levels, NULL, &rng, &p),
			 -ENOSPC);
	assert_null(p.slots);
	assert_int_equal(sim_gang_planner_find("kueue-bestfit")(c.views, c.n, 9, &r,
							       &gang_default_levels, NULL, &rng,
							       &p), 0);
	check_plan(&c, &p, 9, &r);
	assert_int_equal(p.level, 2);   /* the spine */
	gang_plan_fini(&p);
	/* Keyed on the spine, kube-tas holds them in one. */
	assert_int_equal(sim_gang_planner_find("kube-tas:spine")(c.views, c.n, 9, &r,
								&gang_default_levels, NULL, &rng,
								&p), 0);
	check_plan(&c, &p, 9, &r);
	assert_string_equal(p.domain, "s");
	gang_plan_fini(&p);
	/* Keyed on a level no node carries, it places nothing. */
	assert_int_equal(sim_gang_planner_find("kube-tas:clique")(c.views, c.n, 2, &r,
								 &gang_default_levels, NULL, &rng,
								 &p), -ENOSPC);
	cluster_free(&c);
}

/* The only rack that would hold the gang has a cordoned and a NotReady node:
 * every planner refuses those nodes as the filter does, and places the gang
 * in the other rack or not at all. */
static void test_sim_gangs_refuse_cordoned_and_not_ready_nodes(void **state)
{
	struct cluster c = { 0 };
	struct placement_request r = gpus(8);

	(void)state;
	add_node(&c, "a-1", 8, 0, "z", "s", "rack-a", READY);
	add_node(&c, "a-2", 8, 0, "z", "s", "rack-a", CORDONED);
	add_node(&c, "a-3", 8, 0, "z", "s", "rack-a", NOT_READY);
	add_node(&c, "b-1", 8, 0, "z", "s", "rack-b", READY);
	add_node(&c, "b-2", 8, 0, "z", "s", "rack-b", READY);
	for (unsigned pi = 0; pi < 4; pi++) {
		static const char *const planners[] = { "kueue-bestfit", "kueue-leastfree", "kai",
							"kube-tas" };
		sim_gang_fn fn = sim_gang_planner_find(planners[pi]);
		struct gang_plan p;
		uint64_t rng = 1;

		assert_int_equal(fn(c.views, c.n, 2, &r, &gang_default_levels, NULL, &rng, &p),
				 0);
		check_plan(&c, &p, 2, &r);
		assert_string_equal(p.domain, "rack-b");
		gang_plan_fini(&p);
		assert_int_equal(fn(c.views, c.n, 4, &r, &gang_default_levels, NULL, &rng, &p),
				 -ENOSPC);
		assert_int_equal(p.n_slots, 0);
		gang_plan_fini(&p);
	}
	cluster_free(&c);
}

static void test_sim_gangs_find_knows_the_names(void **state)
{
	struct gang_plan p;
	struct placement_request r = gpus(0);
	uint64_t rng = 1;

	(void)state;
	assert_null(sim_gang_planner_find("kueue"));
	assert_null(sim_gang_planner_find("kube-tas:rack"));
	assert_null(sim_gang_planner_find(""));
	assert_null(sim_gang_planner_find(NULL));
	for (unsigned pi = 0; sim_gang_planner_names[pi]; pi++) {
		assert_non_null(sim_gang_planner_find(sim_gang_planner_names[pi]));
		assert_int_equal(sim_gang_planner_find(sim_gang_planner_names[pi])(
					 NULL, 0, 2, &r, &gang_default_levels, NULL, &rng, &p),
				 -EINVAL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sim_gangs_random_clusters_hold_the_invariants),
		cmocka_unit_test(test_sim_gangs_kueue_follows_the_keps_example),
		cmocka_unit_test(test_sim_gangs_take_the_tightest_fitting_rack),
		cmocka_unit_test(test_sim_gangs_kai_packs_the_fullest_nodes),
		cmocka_unit_test(test_sim_gangs_kai_follows_its_docs_example),
		cmocka_unit_test(test_sim_gangs_kube_tas_scores_one_domain_of_the_key),
		cmocka_unit_test(test_sim_gangs_refuse_cordoned_and_not_ready_nodes),
		cmocka_unit_test(test_sim_gangs_find_knows_the_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
