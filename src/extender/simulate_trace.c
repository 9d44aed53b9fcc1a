/* simulate_trace: the workload trace `troupe simulate --workload` reads, YAML
 * or JSON (src/common/yamljson), and its generator. The format, in full in
 * docs/reference.md ("troupe simulate"):
 *
 *   seed: 1                # ties between equally scored nodes (default 1)
 *   warmup: 0.1            # share of the jobs, in arrival order, not measured
 *   jobs:                  # explicit jobs
 *     - name: train-a      # default job-<n>
 *       arrival: 10m       # seconds, or with s/m/h/d (default 0)
 *       duration: 2h       # each pod's run time once started (required)
 *       pods: 2            # default 1
 *       gpus: 8            # per pod (default 1)
 *       resource: nvidia.com/mig-1g.10gb  # what the pods ask for, one of the
 *                          # config's resources.gpu (default its first)
 *       gang: 2            # pods started together, all or none (default 0: none)
 *       queue: research    # default "default"
 *       priority: 100      # the pods' priority, as a PriorityClass gives it
 *                          # (default 0): first in the fair order
 *       topology: required # troupe.io/topology (default preferred)
 *       count: 3           # this job 3 times (default 1)...
 *       every: 5m          # ...this far apart (default 0)
 *   generate:              # synthetic jobs, added to the explicit ones
 *     jobs: 5000
 *     seed: 1
 *     load: 0.9            # offered load: GPU-seconds asked per second, over
 *                          # the cluster's GPUs; sets the Poisson arrival rate
 *     start: 0             # first arrival no earlier than this
 *     duration: {mean: 1h} # exponential; or {median: 30m, sigma: 1.5}, lognormal
 *     mix:                 # job shapes and their shares (normalised)
 *       - {share: 0.4, gpus: 1}
 *       - {share: 0.1, pods: 4, gpus: 8, gang: 4, queue: training,
 *          duration: {mean: 4h}}
 *
 * The generator's order of draws (shape, interarrival, duration, from one
 * splitmix64 stream seeded with seed ^ "trace") is the one the retired
 * bench/sim_placement drew in, so a seed gives the arrivals its figures came
 * from (test_simulate_trace.c holds them). Bad input is refused with the job and field named; nothing is
 * half-loaded.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/util.h"
#include "common/yamljson.h"
#include "extender/simulate.h"

enum { TRACE_MAX_BYTES = 256 << 20 };

/* The longest time a trace may name, in seconds (about 317 years): far past
 * any workload, and far enough from a double's range that sums of them (an
 * arrival plus count x every plus a duration) stay finite and exact enough. */
static const double TRACE_MAX_SECONDS = 1e10;

struct rng {
	uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

int sim_duration_parse(const char *s, double *out)
{
	char *end = NULL;
	double v;

	if (!s || !*s)
		return -EINVAL;
	v = strtod(s, &end);
	if (end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	if (*end == 's')
		end++;
	else if (*end == 'm')
		v *= 60, end++;
	else if (*end == 'h')
		v *= 3600, end++;
	else if (*end == 'd')
		v *= 86400, end++;
	if (*end || v > TRACE_MAX_SECONDS)
		return -EINVAL;
	*out = v;
	return 0;
}

/* A time field: a number of seconds or a duration string. -ENOENT when absent. */
static int get_time(const cJSON *o, const char *key, double *out)
{
	const cJSON *v = json_get(o, key);

	if (!v)
		return -ENOENT;
	if (cJSON_IsNumber(v)) {
		if (!isfinite(v->valuedouble) || v->valuedouble < 0 ||
		    v->valuedouble > TRACE_MAX_SECONDS)
			return -EINVAL;
		*out = v->valuedouble;
		return 0;
	}
	return cJSON_IsString(v) ? sim_duration_parse(v->valuestring, out) : -EINVAL;
}

/* A whole number in [min, max]; <dflt> when absent. */
static int get_uint(const cJSON *o, const char *key, unsigned min, unsigned max, unsigned dflt,
		    unsigned *out)
{
	const cJSON *v = json_get(o, key);
	int64_t n;

	if (!v) {
		*out = dflt;
		return 0;
	}
	if (cJSON_IsBool(v)) /* gang: true means every pod */
		return -EINVAL;
	if (json_int_in_range(v, min, max, &n) < 0)
		return -EINVAL;
	*out = (unsigned)n;
	return 0;
}

static int queue_index(struct sim_trace *t, const char *name, unsigned *out)
{
	for (unsigned i = 0; i < t->n_queues; i++)
		if (strcmp(t->queues[i], name) == 0) {
			*out = i;
			return 0;
		}
	if (t->n_queues == SIM_MAX_QUEUES || strlen(name) >= SIM_QUEUE_BUF || !*name)
		return -EINVAL;
	snprintf(t->queues[t->n_queues], SIM_QUEUE_BUF, "%s", name);
	*out = t->n_queues++;
	return 0;
}

/* The index of resource name <name> in <t>'s table, added when new. */
static int resource_index(struct sim_trace *t, const char *name, int *out)
{
	for (unsigned i = 0; i < t->n_resources; i++)
		if (strcmp(t->resources[i], name) == 0) {
			*out = (int)i;
			return 0;
		}
	if (t->n_resources == CACHE_MAX_GPU_RESOURCES || !*name ||
	    strlen(name) >= sizeof(t->resources[0]) || !strchr(name, '/'))
		return -EINVAL;
	snprintf(t->resources[t->n_resources], sizeof(t->resources[0]), "%s", name);
	*out = (int)t->n_resources++;
	return 0;
}

/* The shape fields a job and a mix entry share: pods, gpus, resource, gang,
 * queue, priority, topology. <what> names the entry in errors. */
static int shape_parse(struct sim_trace *t, const cJSON *o, struct sim_job *j, const char *what,
		       char *err, size_t errlen)
{
	const cJSON *res = json_get(o, "resource");
	const cJSON *q = json_get(o, "queue"), *topo = json_get(o, "topology");
	const cJSON *gang = json_get(o, "gang"), *prio = json_get(o, "priority");
	char perr[TROUPE_MESSAGE_BUF];
	int64_t p = 0;

	if (get_uint(o, "pods", 1, SIM_MAX_PODS_PER_JOB, 1, &j->pods) < 0) {
		snprintf(err, errlen, "%s: pods must be a whole number from 1 to %u", what,
			 SIM_MAX_PODS_PER_JOB);
		return -EINVAL;
	}
	if (get_uint(o, "gpus", 1, CACHE_MAX_GPUS, 1, &j->gpus) < 0) {
		snprintf(err, errlen, "%s: gpus (per pod) must be a whole number from 1 to %u",
			 what, CACHE_MAX_GPUS);
		return -EINVAL;
	}
	j->resource = -1;
	if (res && (!cJSON_IsString(res) || resource_index(t, res->valuestring, &j->resource) < 0)) {
		snprintf(err, errlen, "%s: resource must be an extended resource name such as "
			 "nvidia.com/gpu, and a trace names at most %d", what,
			 CACHE_MAX_GPU_RESOURCES);
		return -EINVAL;
	}
	if (cJSON_IsBool(gang)) {
		j->gang = cJSON_IsTrue(gang) ? j->pods : 0;
	} else if (get_uint(o, "gang", 0, j->pods, 0, &j->gang) < 0) {
		snprintf(err, errlen, "%s: gang must be true, false or a number of pods from 0 "
			 "to pods (%u)", what, j->pods);
		return -EINVAL;
	}
	if (j->gang == 1)
		j->gang = 0;    /* a gang of one is a pod */
	if (q && !cJSON_IsString(q)) {
		snprintf(err, errlen, "%s: queue must be a string", what);
		return -EINVAL;
	}
	if (queue_index(t, q ? q->valuestring : "default", &j->queue) < 0) {
		snprintf(err, errlen, "%s: queue must be a non-empty name under %d bytes, and a "
			 "trace has at most %d queues", what, SIM_QUEUE_BUF, SIM_MAX_QUEUES);
		return -EINVAL;
	}
	/* A pod's priority is a 32-bit integer (PriorityClass value). */
	if (prio && (cJSON_IsBool(prio) || json_int_in_range(prio, INT32_MIN, INT32_MAX, &p) < 0)) {
		snprintf(err, errlen, "%s: priority must be a whole number from %d to %d", what,
			 INT32_MIN, INT32_MAX);
		return -EINVAL;
	}
	j->priority = (int32_t)p;
	if (topo && (!cJSON_IsString(topo) || placement_policy_parse(topo->valuestring,
								       &j->policy, perr,
								       sizeof(perr)) < 0)) {
		snprintf(err, errlen, "%s: topology: %s", what,
			 cJSON_IsString(topo) ? perr : "must be a string");
		return -EINVAL;
	}
	return 0;
}

static int push(struct sim_trace *t, size_t *cap, const struct sim_job *j)
{
	if (t->n == SIM_MAX_JOBS)
		return -E2BIG;
	if (t->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct sim_job *nj = realloc(t->jobs, nc * sizeof(*nj));

		if (!nj)
			return -ENOMEM;
		t->jobs = nj;
		*cap = nc;
	}
	t->jobs[t->n] = *j;
	t->jobs[t->n].seq = t->n;
	t->n++;
	return 0;
}

static int jobs_parse(struct sim_trace *t, size_t *cap, const cJSON *list, char *err,
		      size_t errlen)
{
	const cJSON *o;
	unsigned idx = 0;

	if (!cJSON_IsArray(list)) {
		snprintf(err, errlen, "jobs must be a list");
		return -EINVAL;
	}
	cJSON_ArrayForEach(o, list) {
		struct sim_job j = { .measured = true };
		const cJSON *name = json_get(o, "name");
		char what[K8S_NAME_BUF + 32];
		unsigned count;
		double every = 0;
		int rc;

		idx++;
		if (!cJSON_IsObject(o)) {
			snprintf(err, errlen, "jobs[%u] must be a map", idx - 1);
			return -EINVAL;
		}
		if (name && (!cJSON_IsString(name) || strlen(name->valuestring) >= K8S_NAME_BUF ||
			     !*name->valuestring)) {
			snprintf(err, errlen, "jobs[%u]: name must be a non-empty string under %d "
				 "bytes", idx - 1, K8S_NAME_BUF);
			return -EINVAL;
		}
		snprintf(j.name, sizeof(j.name), "%s",
			 name ? name->valuestring : "");
		if (!name)
			snprintf(j.name, sizeof(j.name), "job-%u", idx - 1);
		snprintf(what, sizeof(what), "job \"%s\"", j.name);
		rc = get_time(o, "arrival", &j.arrival);
		if (rc == -EINVAL) {
			snprintf(err, errlen, "%s: arrival must be seconds (a number >= 0) or a "
				 "duration such as 90s, 5m, 2h", what);
			return -EINVAL;
		}
		if (get_time(o, "duration", &j.duration) < 0 || j.duration <= 0) {
			snprintf(err, errlen, "%s: duration is required: seconds (a number > 0) or "
				 "a duration such as 90s, 5m, 2h", what);
			return -EINVAL;
		}
		if (shape_parse(t, o, &j, what, err, errlen) < 0)
			return -EINVAL;
		if (get_uint(o, "count", 1, SIM_MAX_JOBS, 1, &count) < 0 ||
		    get_time(o, "every", &every) == -EINVAL) {
			snprintf(err, errlen, "%s: count must be a whole number >= 1 and every a "
				 "duration", what);
			return -EINVAL;
		}
		for (unsigned c = 0; c < count; c++) {
			struct sim_job r = j;

			r.arrival = j.arrival + every * c;
			if (count > 1)
				snprintf(r.name, sizeof(r.name), "%.*s-%u", K8S_NAME_BUF - 12,
					 j.name, c);
			rc = push(t, cap, &r);
			if (rc < 0) {
				snprintf(err, errlen, rc == -E2BIG ? "more than %d jobs" :
					 "out of memory (%d jobs)", SIM_MAX_JOBS);
				return rc == -E2BIG ? -EINVAL : rc;
			}
		}
	}
	return 0;
}

/* A duration distribution: {mean: D} (exponential) or {median: D, sigma: S}
 * (lognormal). */
struct dist {
	double mean, median, sigma;     /* median > 0: lognormal */
};

static int dist_parse(const cJSON *o, struct dist *d)
{
	const cJSON *sigma = json_get(o, "sigma");

	memset(d, 0, sizeof(*d));
	if (!cJSON_IsObject(o))
		return -EINVAL;
	if (get_time(o, "mean", &d->mean) == 0)
		return d->mean > 0 && !json_get(o, "median") ? 0 : -EINVAL;
	if (get_time(o, "median", &d->median) < 0 || d->median <= 0 || !cJSON_IsNumber(sigma) ||
	    sigma->valuedouble < 0 || sigma->valuedouble > 10)
		return -EINVAL;
	d->sigma = sigma->valuedouble;
	return 0;
}

static double dist_mean(const struct dist *d)
{
	return d->median > 0 ? d->median * exp(d->sigma * d->sigma / 2) : d->mean;
}

static double dist_draw(const struct dist *d, struct rng *r)
{
	if (d->median > 0) {
		/* Box-Muller: one normal from two uniforms. */
		double u1 = 1.0 - rng_unit(r), u2 = rng_unit(r);

		return d->median * exp(d->sigma * sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2));
	}
	return -d->mean * log1p(-rng_unit(r));
}

static int generate(struct sim_trace *t, size_t *cap, const cJSON *g, unsigned cluster_gpus,
		    char *err, size_t errlen)
{
	struct sim_job shape[SIM_MAX_MIX];
	struct dist dur[SIM_MAX_MIX], dflt;
	double share[SIM_MAX_MIX], total = 0, mean_gpu_s = 0, load = 0.9, rate, at = 0;
	const cJSON *mix = json_get(g, "mix"), *seed = json_get(g, "seed"), *o;
	const cJSON *lj = json_get(g, "load");
	unsigned n_mix = 0, jobs;
	int64_t seed_v = 1;
	struct rng r;

	if (!cJSON_IsObject(g)) {
		snprintf(err, errlen, "generate must be a map");
		return -EINVAL;
	}
	if (get_uint(g, "jobs", 1, SIM_MAX_JOBS, 0, &jobs) < 0 || jobs == 0) {
		snprintf(err, errlen, "generate.jobs must be a whole number from 1 to %d",
			 SIM_MAX_JOBS);
		return -EINVAL;
	}
	/* Range-checked: a double beyond the integer's range is undefined to cast. */
	if (seed && json_int_in_range(seed, 0, INT64_MAX, &seed_v) < 0) {
		snprintf(err, errlen, "generate.seed must be a whole number >= 0");
		return -EINVAL;
	}
	r.s = (uint64_t)seed_v ^ 0x7472616365ULL;
	if (lj && (!cJSON_IsNumber(lj) || lj->valuedouble <= 0 || lj->valuedouble > 10)) {
		snprintf(err, errlen, "generate.load must be a number in (0, 10]");
		return -EINVAL;
	}
	if (lj)
		load = lj->valuedouble;
	if (get_time(g, "start", &at) == -EINVAL) {
		snprintf(err, errlen, "generate.start must be a duration");
		return -EINVAL;
	}
	/* No default duration is fine when every shape names its own. */
	memset(&dflt, 0, sizeof(dflt));
	if (json_get(g, "duration") && dist_parse(json_get(g, "duration"), &dflt) < 0) {
		snprintf(err, errlen, "generate.duration must be {mean: D} or {median: D, sigma: "
			 "S} (D seconds or 90s, 5m, 2h; S a number in [0, 10])");
		return -EINVAL;
	}
	if (!cJSON_IsArray(mix) || cJSON_GetArraySize(mix) == 0 ||
	    cJSON_GetArraySize(mix) > SIM_MAX_MIX) {
		snprintf(err, errlen, "generate.mix must be a list of 1 to %d job shapes",
			 SIM_MAX_MIX);
		return -EINVAL;
	}
	cJSON_ArrayForEach(o, mix) {
		const cJSON *sh = json_get(o, "share"), *d = json_get(o, "duration");
		char what[64];

		snprintf(what, sizeof(what), "generate.mix[%u]", n_mix);
		memset(&shape[n_mix], 0, sizeof(shape[n_mix]));
		if (!cJSON_IsObject(o) || !cJSON_IsNumber(sh) || !(sh->valuedouble > 0) ||
		    sh->valuedouble > 1e6) {
			snprintf(err, errlen, "%s must be a map with a share in (0, 1e6]", what);
			return -EINVAL;
		}
		if (shape_parse(t, o, &shape[n_mix], what, err, errlen) < 0)
			return -EINVAL;
		dur[n_mix] = dflt;
		if (d && dist_parse(d, &dur[n_mix]) < 0) {
			snprintf(err, errlen, "%s.duration must be {mean: D} or {median: D, sigma: "
				 "S}", what);
			return -EINVAL;
		}
		if (!(dist_mean(&dur[n_mix]) > 0)) {
			snprintf(err, errlen, "%s has no duration, and generate names none", what);
			return -EINVAL;
		}
		share[n_mix] = sh->valuedouble;
		total += share[n_mix];
		n_mix++;
	}
	for (unsigned i = 0; i < n_mix; i++) {
		share[i] /= total;
		mean_gpu_s += share[i] * shape[i].pods * shape[i].gpus * dist_mean(&dur[i]);
	}
	if (cluster_gpus == 0) {
		snprintf(err, errlen, "generate: the cluster has no GPUs to set the load against");
		return -EINVAL;
	}
	rate = load * cluster_gpus / mean_gpu_s;        /* jobs per second */
	for (unsigned i = 0; i < jobs; i++) {
		struct sim_job j;
		double u, acc = 0;
		unsigned s = 0;
		int rc;

		/* The shape is drawn before the interarrival (the order above). */
		u = rng_unit(&r);
		at += -log1p(-rng_unit(&r)) / rate;
		while (s + 1 < n_mix && u >= acc + share[s])
			acc += share[s++];
		j = shape[s];
		j.measured = true;
		j.arrival = at;
		/* A lognormal's tail can reach past any sane time: cut it there. */
		j.duration = fmin(fmax(dist_draw(&dur[s], &r), 1e-3), TRACE_MAX_SECONDS);
		if (at > TRACE_MAX_SECONDS) {
			snprintf(err, errlen, "generate: the arrivals run past %.0f s; raise the "
				 "load or lower the jobs", TRACE_MAX_SECONDS);
			return -EINVAL;
		}
		snprintf(j.name, sizeof(j.name), "gen-%u", i);
		rc = push(t, cap, &j);
		if (rc < 0) {
			snprintf(err, errlen, rc == -E2BIG ? "more than %d jobs" : "out of memory",
				 SIM_MAX_JOBS);
			return rc == -E2BIG ? -EINVAL : rc;
		}
		t->n_generated++;
	}
	return 0;
}

static int by_arrival(const void *a, const void *b)
{
	const struct sim_job *x = a, *y = b;

	if (x->arrival != y->arrival)
		return x->arrival < y->arrival ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int sim_trace_from_json(struct sim_trace *t, const cJSON *doc, unsigned cluster_gpus, char *err,
			size_t errlen)
{
	const cJSON *jobs = json_get(doc, "jobs"), *gen = json_get(doc, "generate");
	const cJSON *seed = json_get(doc, "seed"), *warm = json_get(doc, "warmup");
	size_t cap = 0, n_warm;
	int64_t seed_v = 1;
	int rc = -EINVAL;

	memset(t, 0, sizeof(*t));
	t->seed = 1;
	if (!cJSON_IsObject(doc)) {
		snprintf(err, errlen, "a trace is a map with jobs and/or generate");
		return -EINVAL;
	}
	if (seed && json_int_in_range(seed, 0, INT64_MAX, &seed_v) < 0) {
		snprintf(err, errlen, "seed must be a whole number >= 0");
		return -EINVAL;
	}
	t->seed = (uint64_t)seed_v;
	if (warm && (!cJSON_IsNumber(warm) || warm->valuedouble < 0 || warm->valuedouble >= 1)) {
		snprintf(err, errlen, "warmup must be a share of the jobs in [0, 1)");
		return -EINVAL;
	}
	if (!jobs && !gen) {
		snprintf(err, errlen, "a trace needs jobs, generate or both");
		return -EINVAL;
	}
	if (jobs && (rc = jobs_parse(t, &cap, jobs, err, errlen)) < 0)
		goto fail;
	if (gen && (rc = generate(t, &cap, gen, cluster_gpus, err, errlen)) < 0)
		goto fail;
	if (t->n == 0) {
		snprintf(err, errlen, "the trace has no jobs");
		rc = -EINVAL;
		goto fail;
	}
	qsort(t->jobs, t->n, sizeof(*t->jobs), by_arrival);
	n_warm = warm ? (size_t)(warm->valuedouble * (double)t->n) : 0;
	for (size_t i = 0; i < n_warm; i++)
		t->jobs[i].measured = false;
	return 0;
fail:
	sim_trace_fini(t);
	return rc;
}

int sim_trace_load(struct sim_trace *t, const char *path, unsigned cluster_gpus, char *err,
		   size_t errlen)
{
	char yerr[SIM_ERR_LEN], inner[SIM_ERR_LEN];
	cJSON *docs = NULL;
	const cJSON *doc;
	char *buf = NULL;
	size_t len = 0;
	int rc;

	memset(t, 0, sizeof(*t));
	rc = util_read_file(path, TRACE_MAX_BYTES, &buf, &len);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read the trace %s: %s", path, strerror(-rc));
		return rc;
	}
	if (yamljson_is_json(buf, len)) {
		docs = cJSON_ParseWithLength(buf, len);
		doc = docs;
		if (!docs)
			snprintf(yerr, sizeof(yerr), "not valid JSON");
	} else {
		docs = yamljson_parse(buf, len, yerr, sizeof(yerr));
		doc = docs ? cJSON_GetArrayItem(docs, 0) : NULL;
		if (docs && !doc)
			snprintf(yerr, sizeof(yerr), "the file is empty");
	}
	free(buf);
	if (!doc) {
		snprintf(err, errlen, "trace %s: %s", path, yerr);
		cJSON_Delete(docs);
		return -EINVAL;
	}
	rc = sim_trace_from_json(t, doc, cluster_gpus, inner, sizeof(inner));
	if (rc < 0)
		snprintf(err, errlen, "trace %s: %s", path, inner);
	cJSON_Delete(docs);
	return rc;
}

void sim_trace_fini(struct sim_trace *t)
{
	free(t->jobs);
	t->jobs = NULL;
	t->n = 0;
}

int sim_trace_resolve(struct sim_trace *t, const char *const *names, unsigned n, char *err,
		      size_t errlen)
{
	int map[CACHE_MAX_GPU_RESOURCES];

	for (unsigned i = 0; i < t->n_resources; i++) {
		map[i] = -1;
		for (unsigned k = 0; k < n && map[i] < 0; k++)
			if (strcmp(t->resources[i], names[k]) == 0)
				map[i] = (int)k;
		if (map[i] < 0) {
			snprintf(err, errlen, "the trace asks for %s, which is not among the "
				 "config's resources.gpu", t->resources[i]);
			return -EINVAL;
		}
	}
	for (size_t j = 0; j < t->n; j++)
		t->jobs[j].resource = t->jobs[j].resource < 0 ? 0 : map[t->jobs[j].resource];
	return 0;
}
