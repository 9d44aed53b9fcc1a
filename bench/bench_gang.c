/* bench_gang: the time to plan a whole gang (gang_plan_make) over a large
 * cluster, against a same-run baseline that places the same members first-fit
 * with the same device chooser but no domain search.
 *
 *   bench_gang [--nodes N] [--members M] [--gpus K] [--reps R]
 *
 * Nodes carry zone / spine / rack labels (racks of 32 nodes, 8 racks per spine)
 * and random occupancy; the topology is an 8-GPU NVSwitch board. Then the same
 * cluster in a real cache with a real gang manager: the time of the first
 * member's filter (plans and reserves the whole gang) and of the other
 * members' filters (open slots only), over every node. Prints a Markdown table;
 * never fails on a time.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "common/log.h"
#include "common/util.h"
#include "gang/gang.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* First fit: walk the nodes in order, take members while they fit. */
static unsigned first_fit(const struct cache_node_view *v, unsigned n, unsigned members,
			  const struct placement_request *r)
{
	unsigned placed = 0;

	for (unsigned i = 0; i < n && placed < members; i++) {
		uint64_t free_mask = cache_view_free_mask(&v[i]);
		struct placement_choice c;

		while (placed < members &&
		       placement_node_choose(&v[i], r->demand.gpu_resource, free_mask, r->demand.gpus,
					     &r->policy, &c) == 0) {
			free_mask &= ~c.set;
			placed++;
		}
	}
	return placed;
}

/* Node <i> of the benchmark cluster: 8 x H100 in zone i/2500, spine i/256,
 * rack i/32. */
static struct cache_node *bench_node(unsigned i, const struct cache_opts *opts, char *err,
				     size_t errlen)
{
	char json[1024];
	struct cache_node *n;
	cJSON *o;

	snprintf(json, sizeof(json),
		 "{\"metadata\":{\"name\":\"gpu-%05u\",\"labels\":{"
		 "\"topology.kubernetes.io/zone\":\"zone-%u\","
		 "\"network.topology.nvidia.com/spine\":\"spine-%u\","
		 "\"network.topology.nvidia.com/block\":\"rack-%u\","
		 "\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\","
		 "\"nvidia.com/gpu.count\":\"8\"}},"
		 "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\"},"
		 "\"capacity\":{\"nvidia.com/gpu\":\"8\"},"
		 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
		 i, i / 2500, i / 256, i / 32);
	o = cJSON_Parse(json);
	n = cache_node_parse(o, opts, err, errlen);
	cJSON_Delete(o);
	return n;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "nodes", required_argument, NULL, 'n' }, { "members", required_argument, NULL, 'm' },
		{ "gpus", required_argument, NULL, 'g' }, { "reps", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned nodes = 5000, members = 256, k = 8, reps = 200;
	struct cache_opts opts = { .gpu_resources = { "nvidia.com/gpu" }, .n_gpu_resources = 1 };
	struct placement_registry *reg = placement_registry_new();
	struct cache_node **recs;
	struct cache_node_view *views;
	struct placement_request r;
	uint64_t *t_plan, *t_ff;
	unsigned seed = 1, used_nodes = 0;
	int level = 0, opt;

	log_set_level(LOG_WARN);
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		unsigned v = (unsigned)strtoul(optarg, NULL, 10);

		switch (opt) {
		case 'n': nodes = v; break;
		case 'm': members = v; break;
		case 'g': k = v; break;
		case 'r': reps = v; break;
		default:
			fprintf(stderr, "usage: bench_gang [--nodes N] [--members M] [--gpus K] "
				"[--reps R]\n");
			return 2;
		}
	}
	if (!nodes || !members || !k || k > 8 || !reps) {
		fprintf(stderr, "bench_gang: sizes must be positive, --gpus at most 8\n");
		return 2;
	}
	recs = calloc(nodes, sizeof(*recs));
	views = calloc(nodes, sizeof(*views));
	t_plan = calloc(reps, sizeof(*t_plan));
	t_ff = calloc(reps, sizeof(*t_ff));
	for (unsigned i = 0; i < nodes; i++) {
		char err[CACHE_ERR_LEN];

		recs[i] = bench_node(i, &opts, err, sizeof(err));
		recs[i]->derived = placement_topo_derive(recs[i], reg);
		/* Busy cluster: half the nodes partly used, a few full. */
		views[i] = (struct cache_node_view){ recs[i],
			rand_r(&seed) % 2 ? ((uint64_t)rand_r(&seed) & 0xFF) : 0, 0 };
	}
	memset(&r, 0, sizeof(r));
	r.demand.gpus = k;
	for (unsigned i = 0; i < reps; i++) {
		struct gang_plan p;
		char why[256];
		uint64_t t0 = util_now_ns();

		if (gang_plan_make(views, nodes, members, &r, &gang_default_levels, &p, why,
				   sizeof(why)) < 0) {
			fprintf(stderr, "bench_gang: could not plan: %s\n", why);
			return 1;
		}
		t_plan[i] = util_now_ns() - t0;
		level = p.level;
		used_nodes = p.nodes_used;
		gang_plan_fini(&p);
		t0 = util_now_ns();
		if (first_fit(views, nodes, members, &r) != members)
			return 1;
		t_ff[i] = util_now_ns() - t0;
	}
	qsort(t_plan, reps, sizeof(*t_plan), cmp_u64);
	qsort(t_ff, reps, sizeof(*t_ff), cmp_u64);
	printf("# bench_gang: %u members x %u GPUs over %u nodes (racks of 32, 8 racks a spine), "
	       "%u repetitions\n\n", members, k, nodes, reps);
	printf("| measure | value | baseline (same run) | ratio |\n|---|---|---|---|\n");
	printf("| plan p50 | %.3f ms | first-fit, no domains: %.3f ms | %.2f |\n",
	       t_plan[reps / 2] / 1e6, t_ff[reps / 2] / 1e6,
	       (double)t_plan[reps / 2] / (double)t_ff[reps / 2]);
	printf("| plan p99 | %.3f ms | first-fit, no domains: %.3f ms | %.2f |\n",
	       t_plan[reps * 99 / 100] / 1e6, t_ff[reps * 99 / 100] / 1e6,
	       (double)t_plan[reps * 99 / 100] / (double)t_ff[reps * 99 / 100]);
	printf("| nodes used by the plan | %u | | |\n", used_nodes);
	printf("| domain level used (0 zone .. 4 NVLink; -1 none) | %d | | |\n", level);
	/* Gang members' filters through the manager, on a real cache. */
	{
		struct gang_config gcfg;
		struct cache_opts co = opts;
		struct cache *c;
		struct gang_manager *gm;
		struct cache_node_view *cv = calloc(nodes, sizeof(*cv));
		bool *allowed = calloc(nodes, sizeof(*allowed));
		uint64_t *t_member = calloc(members, sizeof(*t_member)), t_first = 0;
		char reason[640], err[CACHE_ERR_LEN];

		co.node_derive = placement_topo_derive;
		co.node_release = placement_topo_release;
		co.hook_ctx = reg;
		c = cache_new(&co);
		for (unsigned i = 0; i < nodes; i++) {
			cache_node_upsert(c, bench_node(i, &co, err, sizeof(err)));
		}
		for (unsigned i = 0; i < members; i++) {
			char json[1024];
			cJSON *o;

			snprintf(json, sizeof(json),
				 "{\"metadata\":{\"name\":\"w-%u\",\"namespace\":\"ml\",\"uid\":\"w-%u\","
				 "\"annotations\":{\"troupe.io/min-member\":\"%u\"},"
				 "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"llm\"}},"
				 "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
				 "{\"nvidia.com/gpu\":\"%u\"}}}]}}", i, i, members, k);
			o = cJSON_Parse(json);
			cache_pod_apply(c, cache_pod_parse(o, &co, err, sizeof(err)));
			cJSON_Delete(o);
		}
		cache_writer_reclaim(c);
		cache_set_synced(c, true);
		gang_config_defaults(&gcfg);
		gcfg.default_timeout_s = 600;
		gcfg.http_timeout_s = 600;
		gcfg.margin_s = 1;
		gm = gang_manager_new(c, &gcfg);
		for (unsigned i = 0; i < members; i++) {
			struct gang_member mb = { 0 };
			char uid[32];
			uint64_t t0;

			snprintf(uid, sizeof(uid), "w-%u", i);
			mb.uid = uid;
			mb.ns = "ml";
			mb.name = uid;
			mb.group = "llm";
			mb.pod_min_member = members;
			mb.req.demand.gpus = k;
			t0 = util_now_ns();
			cache_read_begin(c);
			for (unsigned j = 0; j < nodes; j++)
				cache_node_lookup(c, recs[j]->name, strlen(recs[j]->name), &cv[j]);
			gang_filter(gm, &mb, cv, nodes, allowed, reason, sizeof(reason));
			cache_read_end(c);
			t_member[i] = util_now_ns() - t0;
			if (i == 0)
				t_first = t_member[0];
		}
		qsort(t_member + 1, members - 1, sizeof(*t_member), cmp_u64);
		printf("| first member's filter (plan + reserve the gang), %u nodes | %.3f ms | | |\n",
		       nodes, t_first / 1e6);
		if (members > 1)
			printf("| other members' filter p50 / p99, %u nodes | %.3f / %.3f ms | | |\n",
			       nodes, t_member[1 + (members - 1) / 2] / 1e6,
			       t_member[1 + (members - 1) * 99 / 100] / 1e6);
		gang_manager_free(gm);
		cache_free(c);
		free(cv);
		free(allowed);
		free(t_member);
	}
	for (unsigned i = 0; i < nodes; i++) {
		placement_topo_release((void *)recs[i]->derived, reg);
		cache_node_free(recs[i]);
	}
	placement_registry_free(reg);
	free(recs);
	free(views);
	free(t_plan);
	free(t_ff);
	return 0;
}
