/* simulate_sizes: a run's measures by job size, for the JSON report and the
 * text one. A job's size is its GPUs (pods x GPUs per pod), bucketed by
 * powers of two (sim_size_bucket): the jobs that cost most to delay are the
 * big ones, and a whole-run mean hides what happens to them.
 *
 * Per size: the measured arrivals; the multi-GPU pods, all-NVLink and link
 * quality; for single-pod jobs, topology fragmentation (an arrival found a
 * node with its GPUs free but none with them all NVLinked) and node
 * fragmentation (no node had its GPUs free while the cluster had as many free
 * in all); the waits and the GPU-hours spent waiting (wait x GPUs, so a big
 * job's wait weighs what it costs); for gangs, the share placed inside one
 * domain of each network level. For the whole run the same, and domain
 * fragmentation: the share of free GPU-time stranded in finest-level domains
 * with fewer free GPUs than the smallest waiting gang asks.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "extender/simulate.h"

void sim_level_name(const struct gang_levels *lv, unsigned l, char *buf, size_t len)
{
	const char *key = l < lv->n ? lv->keys[l][0] : NULL;
	const char *slash = key ? strrchr(key, '/') : NULL;
	const char *name = slash ? slash + 1 : key ? key : "level";

	/* The NVLink domain's keys are topograph's "accelerator" and "domain"
	 * and GFD's nvidia.com/gpu.clique: one name for all of them. */
	for (unsigned k = 0; key && k < GANG_MAX_KEYS && lv->keys[l][k]; k++)
		if (strcmp(lv->keys[l][k], "nvidia.com/gpu.clique") == 0)
			name = "clique";
	snprintf(buf, len, "%s", name);
}

static const struct gang_levels *levels_of(const struct sim_settings *s)
{
	return s->levels && s->levels->n ? s->levels : &gang_default_levels;
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0.0;
}

/* GPU-hours the measured jobs of bucket <bucket> (-1: all) waited. */
static double wait_gpu_hours(const struct sim_result *r, const struct sim_trace *t, int bucket)
{
	double sum = 0;

	for (size_t i = 0; i < t->n; i++) {
		const struct sim_job *j = &t->jobs[i];
		const struct sim_job_result *jr = &r->jobs[i];

		if (!j->measured || !jr->done ||
		    (bucket >= 0 && sim_size_bucket(j->pods * j->gpus) != (unsigned)bucket))
			continue;
		sum += (jr->start - j->arrival) * j->pods * j->gpus;
	}
	return sum / 3600;
}

/* {"<level>": share, ...} of <gangs> gangs, <in_one> of them in one domain. */
static cJSON *in_one_obj(const struct gang_levels *lv, const unsigned long *in_one,
			 unsigned long gangs)
{
	cJSON *o = cJSON_CreateObject();

	for (unsigned l = 0; o && l < lv->n && l < GANG_MAX_LEVELS; l++) {
		char name[GANG_LABEL_BUF];

		sim_level_name(lv, l, name, sizeof(name));
		cJSON_AddNumberToObject(o, name, ratio((double)in_one[l], (double)gangs));
	}
	return o;
}

int sim_sizes_json(cJSON *p, const struct sim_result *r, const struct sim_trace *t,
		   const struct sim_settings *s)
{
	const struct gang_levels *lv = levels_of(s);
	cJSON *arr = cJSON_AddArrayToObject(p, "by_size");
	struct sim_size_stat all = { 0 };

	if (!arr)
		return -ENOMEM;
	for (unsigned b = 0; b < SIM_SIZE_BUCKETS; b++) {
		const struct sim_size_stat *z = &r->by_size[b];
		struct sim_stats st;
		cJSON *o;

		all.frag_jobs += z->frag_jobs;
		all.topo_frag += z->topo_frag;
		all.node_frag += z->node_frag;
		all.gangs += z->gangs;
		for (unsigned l = 0; l < GANG_MAX_LEVELS; l++)
			all.in_one[l] += z->in_one[l];
		if (!z->jobs)
			continue;
		o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(arr, o))
			return -ENOMEM;
		sim_job_stats(r, t, false, -1, (int)b, &st);
		cJSON_AddNumberToObject(o, "size", (double)(1u << b));
		cJSON_AddNumberToObject(o, "jobs", (double)z->jobs);
		cJSON_AddNumberToObject(o, "pods_multi", (double)z->pods_multi);
		cJSON_AddNumberToObject(o, "nvlink_rate",
					ratio((double)z->pods_nvlink, (double)z->pods_multi));
		cJSON_AddNumberToObject(o, "link_quality", ratio(z->quality_sum, (double)z->pods_multi));
		cJSON_AddNumberToObject(o, "topology_fragmentation",
					ratio((double)z->topo_frag, (double)z->frag_jobs));
		cJSON_AddNumberToObject(o, "node_fragmentation",
					ratio((double)z->node_frag, (double)z->frag_jobs));
		cJSON_AddItemToObject(o, "wait_s", sim_stats_json(&st));
		cJSON_AddNumberToObject(o, "wait_gpu_hours", wait_gpu_hours(r, t, (int)b));
		cJSON_AddNumberToObject(o, "gangs", (double)z->gangs);
		if (z->gangs)
			cJSON_AddItemToObject(o, "in_one", in_one_obj(lv, z->in_one, z->gangs));
	}
	cJSON_AddNumberToObject(p, "wait_gpu_hours", wait_gpu_hours(r, t, -1));
	cJSON_AddNumberToObject(p, "topology_fragmentation",
				ratio((double)all.topo_frag, (double)all.frag_jobs));
	cJSON_AddNumberToObject(p, "node_fragmentation",
				ratio((double)all.node_frag, (double)all.frag_jobs));
	cJSON_AddNumberToObject(p, "domain_fragmentation",
				ratio(r->stranded_integral, r->free_integral));
	cJSON_AddNumberToObject(p, "gangs", (double)all.gangs);
	cJSON_AddItemToObject(p, "in_one", in_one_obj(lv, all.in_one, all.gangs));
	return 0;
}

void sim_sizes_text(const struct sim_result *rs, unsigned n, const struct sim_trace *t,
		    const struct sim_settings *s)
{
	const struct gang_levels *lv = levels_of(s);

	printf("\nBy job size (GPUs per job, in powers of two; waits of finished jobs; "
	       "fragmentation of single-pod jobs' arrivals; gangs inside one domain):\n\n");
	printf("| policy | size | jobs | wait, min (mean / p95) | waiting, GPU-h | "
	       "NVLink-complete, %% | node frag., %% | topology frag., %% | gangs in one |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	for (unsigned i = 0; i < n; i++)
		for (unsigned b = 0; b < SIM_SIZE_BUCKETS; b++) {
			const struct sim_size_stat *z = &rs[i].by_size[b];
			struct sim_stats st;

			if (!z->jobs)
				continue;
			sim_job_stats(&rs[i], t, false, -1, (int)b, &st);
			printf("| %s | %u | %lu | %.1f / %.1f | %.0f | %.1f | %.2f | %.2f |",
			       rs[i].policy, 1u << b, z->jobs, st.mean / 60, st.p95 / 60,
			       wait_gpu_hours(&rs[i], t, (int)b),
			       100 * ratio((double)z->pods_nvlink, (double)z->pods_multi),
			       100 * ratio((double)z->node_frag, (double)z->frag_jobs),
			       100 * ratio((double)z->topo_frag, (double)z->frag_jobs));
			for (unsigned l = 0; z->gangs && l < lv->n && l < GANG_MAX_LEVELS; l++) {
				char name[GANG_LABEL_BUF];

				sim_level_name(lv, l, name, sizeof(name));
				printf("%s %s %.0f%%", l ? "," : "", name,
				       100 * ratio((double)z->in_one[l], (double)z->gangs));
			}
			printf("%s |\n", z->gangs ? "" : " -");
		}
}
