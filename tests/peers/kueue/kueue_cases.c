/* kueue_cases: the C half of the Kueue peer check (check_kueue.py). It
 * draws random clusters (zones, spines, blocks, every node labelled at each
 * level, with its hostname; random free GPUs; some nodes cordoned or not
 * Ready), runs troupe simulate's kueue-bestfit planner (simulate_gangs.c) on
 * each, and writes one JSON line per case: the nodes as Kubernetes Node
 * objects, Kueue's topology levels, the GPUs per pod, the pod count, and the
 * plan as pods per node (null when it refused). main.go runs Kueue's own code
 * on the same lines.
 *
 * PROFILE bestfit checks kueue-bestfit against a PodSet preferring the block
 * level. PROFILE leastfree checks kueue-leastfree the one way Kueue v0.17.0
 * still runs LeastFreeCapacity: an unconstrained PodSet, which Kueue places
 * at the hostname level without walking up; so its nodes carry no network
 * labels (the planner then has the hostname level alone, as Kueue does).
 *
 *   kueue_cases [CASES [SEED [PROFILE]]]      (defaults 500, 1, bestfit)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "extender/simulate_gangs.h"

enum { MAX_NODES = 48, NODE_JSON = 1024 };

static const struct cache_opts opts = { .gpu_resources = { "nvidia.com/gpu" },
					.n_gpu_resources = 1 };

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
	unsigned cases = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 500;
	uint64_t s = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
	bool leastfree = argc > 3 && strcmp(argv[3], "leastfree") == 0;
	sim_gang_fn fn = sim_gang_planner_find(leastfree ? "kueue-leastfree" : "kueue-bestfit");

	if (argc > 3 && !leastfree && strcmp(argv[3], "bestfit") != 0) {
		fprintf(stderr, "kueue_cases: PROFILE is bestfit or leastfree, not %s\n", argv[3]);
		return 2;
	}

	for (unsigned c = 0; c < cases; c++) {
		static char json[MAX_NODES][NODE_JSON];
		struct cache_node *nodes[MAX_NODES];
		struct cache_node_view views[MAX_NODES];
		static const unsigned ks[] = { 1, 2, 4, 8 };
		unsigned n = 2 + (unsigned)(rnd(&s) % (MAX_NODES - 1));
		unsigned k = ks[rnd(&s) % 4], members = 1 + (unsigned)(rnd(&s) % 24);
		struct placement_request req = { .demand = { .gpu_resource = 0, .gpus = k } };
		struct gang_plan p;
		uint64_t rng = c;
		int ret;

		for (unsigned i = 0; i < n; i++) {
			unsigned b = (unsigned)(rnd(&s) % 8), free = (unsigned)(rnd(&s) % 9);
			unsigned st = (unsigned)(rnd(&s) % 25);
			char err[CACHE_ERR_LEN];
			cJSON *o;

			/* A node's free GPUs are its allocatable ones: Kueue counts
			 * capacity as allocatable less usage, so the two agree. */
			char net[256] = "";

			if (!leastfree)
				snprintf(net, sizeof(net),
					 ",\"topology.kubernetes.io/zone\":\"z%u\","
					 "\"network.topology.nvidia.com/spine\":\"s%u\","
					 "\"network.topology.nvidia.com/block\":\"b%u\"",
					 b / 4, b / 2, b);
			snprintf(json[i], NODE_JSON,
				 "{\"metadata\":{\"name\":\"n%02u\",\"labels\":{"
				 "\"kubernetes.io/hostname\":\"n%02u\"%s}},"
				 "\"spec\":{\"unschedulable\":%s},"
				 "\"status\":{\"allocatable\":"
				 "{\"nvidia.com/gpu\":\"%u\",\"pods\":\"110\"},"
				 "\"capacity\":{\"nvidia.com/gpu\":\"%u\",\"pods\":\"110\"},"
				 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
				 i, i, net, st == 0 ? "true" : "false", free, free,
				 st == 1 ? "False" : "True");
			o = cJSON_Parse(json[i]);
			nodes[i] = o ? cache_node_parse(o, &opts, err, sizeof(err)) : NULL;
			cJSON_Delete(o);
			if (!nodes[i]) {
				fprintf(stderr, "kueue_cases: node %u does not parse\n", i);
				return 2;
			}
			views[i] = (struct cache_node_view){ nodes[i], 0, 0 };
		}
		ret = fn(views, n, members, &req, &gang_default_levels, NULL, &rng, &p);
		if (leastfree)
			printf("{\"levels\":[\"kubernetes.io/hostname\"],\"unconstrained\":true,");
		else
			printf("{\"levels\":[\"topology.kubernetes.io/zone\","
			       "\"network.topology.nvidia.com/spine\","
			       "\"network.topology.nvidia.com/block\","
			       "\"kubernetes.io/hostname\"],");
		printf("\"k\":%u,\"count\":%u,\"nodes\":[", k, members);
		for (unsigned i = 0; i < n; i++)
			printf("%s%s", i ? "," : "", json[i]);
		printf("],\"ours\":");
		if (ret == 0) {
			unsigned per[MAX_NODES] = { 0 }, first = 1;

			for (unsigned sl = 0; sl < p.n_slots; sl++)
				per[p.slots[sl].node]++;
			printf("{");
			for (unsigned i = 0; i < n; i++)
				if (per[i]) {
					printf("%s\"%s\":%u", first ? "" : ",",
					       nodes[i]->name, per[i]);
					first = 0;
				}
			printf("}");
		} else {
			printf("null");
		}
		printf("}\n");
		gang_plan_fini(&p);
		for (unsigned i = 0; i < n; i++)
			cache_node_free(nodes[i]);
	}
	return 0;
}
