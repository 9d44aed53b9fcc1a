/* simulate_report: how a run's counts become what `troupe simulate` prints.
 * The text form is two Markdown tables (one row per policy: waits, completion
 * times, utilisation, fragmentation, NVLink-complete pods; then each queue's
 * share), ready for docs; -o json is the same figures for programs, with
 * every job's pods (node, devices, start) when --per-job asks; the plot is
 * GPU utilisation and waiting jobs over time, one line per policy, drawn by
 * gnuplot as bench/sim_report.c draws its own. Nothing here changes a count.
 *
 * Definitions (docs/reference.md says the same to users):
 *   wait        a job's last pod start less its arrival (a gang's pods start
 *               together);
 *   completion  a job's last pod end less its arrival;
 *   utilisation GPU-seconds in use over GPU-seconds offered, from the first
 *               measured arrival to the last departure (or, with
 *               --until-last-arrival, the last arrival: the other time
 *               averages too); the snapshot's own pods count as in use;
 *   fragmentation  the time average of free GPUs that no job of --frag-gpus
 *               GPUs (8) can use, each node's free count modulo that size, as a
 *               share of the free GPUs;
 *   NVLink-complete  multi-GPU pods whose every pair of devices is NVLinked,
 *               among the measured multi-GPU pods;
 *   link quality placement_set_quality of those pods' sets, averaged (0-1);
 *   NVLink islands  nodes whose free GPUs hold an all-NVLink set of
 *               --frag-gpus, time-averaged (where a large job could still get
 *               a whole NVLink set);
 *   queue share the GPU-hours of a queue's finished jobs over all of them.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "extender/simulate.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest value with at least <p> of the values at or
 * below it. */
static double rank(const double *v, size_t n, double p)
{
	size_t i = (size_t)ceil(p * (double)n);

	return n ? v[i ? i - 1 : 0] : 0.0;
}

static void stats_of(double *v, size_t n, struct sim_stats *out)
{
	double sum = 0;

	memset(out, 0, sizeof(*out));
	out->n = n;
	if (!n)
		return;
	qsort(v, n, sizeof(*v), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	out->mean = sum / (double)n;
	out->p50 = rank(v, n, 0.50);
	out->p95 = rank(v, n, 0.95);
	out->max = v[n - 1];
}

/* Of the jobs in queue <queue> (-1: all). */
void sim_job_stats(const struct sim_result *r, const struct sim_trace *t, bool completion,
		   int queue, int bucket, struct sim_stats *out)
{
	double *v = malloc((t->n + 1) * sizeof(*v));
	size_t n = 0;

	memset(out, 0, sizeof(*out));
	if (!v)
		return;
	for (size_t i = 0; i < t->n; i++) {
		const struct sim_job_result *jr = &r->jobs[i];

		if (!t->jobs[i].measured || !jr->done ||
		    (queue >= 0 && t->jobs[i].queue != (unsigned)queue) ||
		    (bucket >= 0 &&
		     sim_size_bucket(t->jobs[i].pods * t->jobs[i].gpus) != (unsigned)bucket))
			continue;
		v[n++] = (completion ? jr->end : jr->start) - t->jobs[i].arrival;
	}
	stats_of(v, n, out);
	free(v);
}

void sim_wait_stats(const struct sim_result *r, const struct sim_trace *t, bool completion,
		    struct sim_stats *out)
{
	sim_job_stats(r, t, completion, -1, -1, out);
}

/* A job's arguments as job_stats took them before sizes. */
static void job_stats(const struct sim_result *r, const struct sim_trace *t, bool completion,
		      int queue, struct sim_stats *out)
{
	sim_job_stats(r, t, completion, queue, -1, out);
}

static double window(const struct sim_result *r)
{
	return r->t_end > r->t_begin ? r->t_end - r->t_begin : 0.0;
}

static double utilisation(const struct sim_result *r, const struct sim_cluster *c)
{
	return window(r) > 0 && c->gpus ? 100.0 * r->busy_integral / (window(r) * c->gpus) : 0.0;
}

static double fragmentation(const struct sim_result *r)
{
	return r->free_integral > 0 ? 100.0 * r->frag_integral / r->free_integral : 0.0;
}

static double nvlink_rate(const struct sim_result *r)
{
	return r->pods_multi ? 100.0 * r->pods_nvlink / r->pods_multi : 0.0;
}

static double queue_total(const struct sim_result *r, const struct sim_trace *t)
{
	double s = 0;

	for (unsigned q = 0; q < t->n_queues; q++)
		s += r->queue_gpu_s[q];
	return s;
}

/* Queue <q>'s weight in the fair order (0, unset, counts as 1). */
static double queue_weight(const struct sim_settings *s, unsigned q)
{
	return s->queue_weights[q] > 0 ? s->queue_weights[q] : 1.0;
}

void sim_report_text(const struct sim_result *rs, unsigned n, const struct sim_trace *t,
		     const struct sim_cluster *c, const struct sim_settings *s,
		     const char *cluster_path, const char *trace_path)
{
	size_t warm = 0;

	for (size_t i = 0; i < t->n; i++)
		warm += !t->jobs[i].measured;
	printf("# troupe simulate: cluster %s (%u nodes, %u GPUs), trace %s (%zu jobs, %zu "
	       "warm-up, %u queue%s), %s order, seed %llu, weights packing=%g topology=%g "
	       "fragmentation=%g fit=%g%s%s; fragmentation counts free GPUs no %u-GPU pod can "
	       "use\n\n",
	       cluster_path, c->n, c->gpus, trace_path, t->n, warm, t->n_queues,
	       t->n_queues == 1 ? "" : "s", s->fifo ? "fifo" : "fair", (unsigned long long)s->seed,
	       s->w.packing, s->w.topology, s->w.fragmentation, s->w.fit,
	       s->gang_required_key ? ", every gang required in one " : "",
	       s->gang_required_key ? s->gang_required_key : "", s->frag_gpus);
	printf("| policy | jobs done / refused | wait, min (mean / p50 / p95) | completion, min "
	       "(mean / p50 / p95) | GPU utilisation, %% | fragmentation, %% of free GPUs | "
	       "NVLink-complete, %% of multi-GPU pods | mean link quality (0-1) | nodes with a "
	       "free all-NVLink %u-GPU set (time avg) | makespan, h |\n", s->frag_gpus);
	printf("|---|---|---|---|---|---|---|---|---|---|\n");
	for (unsigned i = 0; i < n; i++) {
		const struct sim_result *r = &rs[i];
		struct sim_stats w, ct;

		job_stats(r, t, false, -1, &w);
		job_stats(r, t, true, -1, &ct);
		printf("| %s | %lu / %lu | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.1f | %.1f | "
		       "%.1f (%lu of %lu) | %.3f | %.2f | %.1f |\n",
		       r->policy, r->jobs_done, r->jobs_refused, w.mean / 60, w.p50 / 60,
		       w.p95 / 60, ct.mean / 60, ct.p50 / 60, ct.p95 / 60, utilisation(r, c),
		       fragmentation(r), nvlink_rate(r), r->pods_nvlink, r->pods_multi,
		       r->pods_multi ? r->quality_sum / r->pods_multi : 0.0,
		       window(r) > 0 ? r->island_integral / window(r) : 0.0, r->makespan / 3600);
	}
	/* Shared GPUs (replicas, MIG devices): a GPU is whole only with none of
	 * its devices in use, what a large job or a MIG reconfiguration needs. */
	printf("\nWhole GPUs and nodes (time avg over the window):\n\n");
	printf("| policy | physical GPUs with no device in use | nodes with nothing in use |\n");
	printf("|---|---|---|\n");
	for (unsigned i = 0; i < n; i++)
		printf("| %s | %.2f | %.2f |\n", rs[i].policy,
		       window(&rs[i]) > 0 ? rs[i].whole_integral / window(&rs[i]) : 0.0,
		       window(&rs[i]) > 0 ? rs[i].empty_integral / window(&rs[i]) : 0.0);
	printf("\nQueue shares (GPU-hours of finished jobs, %% of all; mean wait, min):\n\n");
	printf("| policy |");
	for (unsigned q = 0; q < t->n_queues; q++)
		if (queue_weight(s, q) != 1.0)
			printf(" %s (weight %g) |", t->queues[q], queue_weight(s, q));
		else
			printf(" %s |", t->queues[q]);
	printf("\n|---|");
	for (unsigned q = 0; q < t->n_queues; q++)
		printf("---|");
	printf("\n");
	for (unsigned i = 0; i < n; i++) {
		double total = queue_total(&rs[i], t);

		printf("| %s |", rs[i].policy);
		for (unsigned q = 0; q < t->n_queues; q++) {
			struct sim_stats w;

			job_stats(&rs[i], t, false, (int)q, &w);
			printf(" %.1f %% (wait %.1f) |",
			       total > 0 ? 100.0 * rs[i].queue_gpu_s[q] / total : 0.0, w.mean / 60);
		}
		printf("\n");
	}
	sim_sizes_text(rs, n, t, s);
}

cJSON *sim_stats_json(const struct sim_stats *st)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "n", (double)st->n);
	cJSON_AddNumberToObject(o, "mean", st->mean);
	cJSON_AddNumberToObject(o, "p50", st->p50);
	cJSON_AddNumberToObject(o, "p95", st->p95);
	cJSON_AddNumberToObject(o, "max", st->max);
	return o;
}

static cJSON *jobs_json(const struct sim_result *r, const struct sim_trace *t,
			const struct sim_cluster *c)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; i < t->n && arr; i++) {
		const struct sim_job *j = &t->jobs[i];
		const struct sim_job_result *jr = &r->jobs[i];
		cJSON *o = cJSON_CreateObject(), *pods = cJSON_CreateArray();

		cJSON_AddItemToArray(arr, o);
		cJSON_AddStringToObject(o, "name", j->name);
		cJSON_AddStringToObject(o, "queue", t->queues[j->queue]);
		cJSON_AddNumberToObject(o, "arrival", j->arrival);
		cJSON_AddNumberToObject(o, "duration", j->duration);
		cJSON_AddNumberToObject(o, "gpus", j->gpus);
		cJSON_AddNumberToObject(o, "gang", j->gang);
		cJSON_AddBoolToObject(o, "measured", j->measured);
		cJSON_AddBoolToObject(o, "refused", jr->refused);
		cJSON_AddBoolToObject(o, "done", jr->done);
		if (jr->done) {
			cJSON_AddNumberToObject(o, "start", jr->start);
			cJSON_AddNumberToObject(o, "end", jr->end);
		}
		cJSON_AddItemToObject(o, "pods", pods);
		for (unsigned p = 0; jr->pods && jr->done && p < j->pods; p++) {
			cJSON *po = cJSON_CreateObject(), *dev = cJSON_CreateArray();

			cJSON_AddItemToArray(pods, po);
			cJSON_AddNumberToObject(po, "start", jr->pods[p].start);
			cJSON_AddStringToObject(po, "node", c->base[jr->pods[p].node].node->name);
			for (unsigned d = 0; d < CACHE_MAX_GPUS; d++)
				if (jr->pods[p].devices >> d & 1)
					cJSON_AddItemToArray(dev, cJSON_CreateNumber(d));
			cJSON_AddItemToObject(po, "devices", dev);
		}
	}
	return arr;
}

int sim_report_json(const struct sim_result *rs, unsigned n, const struct sim_trace *t,
		    const struct sim_cluster *c, const struct sim_settings *s)
{
	cJSON *root = cJSON_CreateObject(), *pol = cJSON_CreateArray(), *o;
	char *text;

	if (!root || !pol)
		goto oom;
	o = cJSON_AddObjectToObject(root, "cluster");
	cJSON_AddNumberToObject(o, "nodes", c->n);
	cJSON_AddNumberToObject(o, "gpus", c->gpus);
	o = cJSON_AddObjectToObject(root, "trace");
	cJSON_AddNumberToObject(o, "jobs", (double)t->n);
	cJSON_AddNumberToObject(o, "generated", (double)t->n_generated);
	o = cJSON_AddObjectToObject(root, "settings");
	cJSON_AddNumberToObject(o, "seed", (double)s->seed);
	cJSON_AddNumberToObject(o, "packing", s->w.packing);
	cJSON_AddNumberToObject(o, "topology", s->w.topology);
	cJSON_AddNumberToObject(o, "fragmentation", s->w.fragmentation);
	cJSON_AddNumberToObject(o, "fit", s->w.fit);
	cJSON_AddNumberToObject(o, "frag_gpus", s->frag_gpus);
	cJSON_AddStringToObject(o, "order", s->fifo ? "fifo" : "fair");
	if (s->gang_required_key)
		cJSON_AddStringToObject(o, "gang_required_key", s->gang_required_key);
	else
		cJSON_AddNullToObject(o, "gang_required_key");
	cJSON_AddItemToObject(root, "policies", pol);
	for (unsigned i = 0; i < n; i++) {
		const struct sim_result *r = &rs[i];
		cJSON *p = cJSON_CreateObject(), *qs = cJSON_CreateArray(), *nv;
		struct sim_stats st;
		double total = queue_total(r, t);

		cJSON_AddItemToArray(pol, p);
		cJSON_AddStringToObject(p, "policy", r->policy);
		cJSON_AddNumberToObject(p, "jobs_measured", r->jobs_measured);
		cJSON_AddNumberToObject(p, "jobs_done", r->jobs_done);
		cJSON_AddNumberToObject(p, "jobs_refused", r->jobs_refused);
		job_stats(r, t, false, -1, &st);
		cJSON_AddItemToObject(p, "wait_s", sim_stats_json(&st));
		job_stats(r, t, true, -1, &st);
		cJSON_AddItemToObject(p, "completion_s", sim_stats_json(&st));
		cJSON_AddNumberToObject(p, "gpu_utilisation", utilisation(r, c) / 100);
		cJSON_AddNumberToObject(p, "fragmentation", fragmentation(r) / 100);
		nv = cJSON_AddObjectToObject(p, "nvlink_complete");
		cJSON_AddNumberToObject(nv, "pods", r->pods_multi);
		cJSON_AddNumberToObject(nv, "nvlink", r->pods_nvlink);
		cJSON_AddNumberToObject(nv, "rate", nvlink_rate(r) / 100);
		cJSON_AddNumberToObject(p, "link_quality",
					r->pods_multi ? r->quality_sum / r->pods_multi : 0.0);
		cJSON_AddNumberToObject(p, "nvlink_island_nodes",
					window(r) > 0 ? r->island_integral / window(r) : 0.0);
		cJSON_AddNumberToObject(p, "whole_gpus_free",
					window(r) > 0 ? r->whole_integral / window(r) : 0.0);
		cJSON_AddNumberToObject(p, "empty_nodes",
					window(r) > 0 ? r->empty_integral / window(r) : 0.0);
		cJSON_AddNumberToObject(p, "window_begin_s", r->t_begin);
		cJSON_AddNumberToObject(p, "window_end_s", r->t_end);
		cJSON_AddNumberToObject(p, "makespan_s", r->makespan);
		cJSON_AddNumberToObject(p, "peak_gpus_in_use", r->peak_busy);
		cJSON_AddItemToObject(p, "queues", qs);
		for (unsigned q = 0; q < t->n_queues; q++) {
			cJSON *qo = cJSON_CreateObject();

			cJSON_AddItemToArray(qs, qo);
			cJSON_AddStringToObject(qo, "name", t->queues[q]);
			cJSON_AddNumberToObject(qo, "weight", queue_weight(s, q));
			cJSON_AddNumberToObject(qo, "gpu_hours", r->queue_gpu_s[q] / 3600);
			cJSON_AddNumberToObject(qo, "share",
						total > 0 ? r->queue_gpu_s[q] / total : 0.0);
			job_stats(r, t, false, (int)q, &st);
			cJSON_AddItemToObject(qo, "wait_s", sim_stats_json(&st));
		}
		if (sim_sizes_json(p, r, t, s) < 0)
			goto oom;
		if (s->per_job)
			cJSON_AddItemToObject(p, "jobs", jobs_json(r, t, c));
	}
	text = cJSON_PrintUnformatted(root);
	if (!text)
		goto oom;
	puts(text);
	free(text);
	cJSON_Delete(root);
	return 0;
oom:
	cJSON_Delete(root);
	return -ENOMEM;
}

/* ---- Plot --------------------------------------------------------------------------- */

enum { PLOT_BINS = 300 };

/* The time averages of run <r>'s step functions over <bins> equal bins from
 * <t0> to <t1>, one row per bin: every event is a sample, a long trace has
 * millions, and the raw counts jump at each. */
static void plot_block(FILE *f, const struct sim_result *r, const struct sim_cluster *c,
		       double t0, double t1)
{
	double w = (t1 - t0) / PLOT_BINS;
	size_t k = 0;

	fprintf(f, "# policy %s: time_h gpu_utilisation_pct jobs_waiting "
		   "nvlink_island_nodes (averages over %.3f h bins)\n", r->policy, w / 3600);
	for (unsigned b = 0; b < PLOT_BINS && w > 0; b++) {
		double lo = t0 + b * w, hi = lo + w, acc[3] = { 0, 0, 0 };

		/* The sample in force at <lo>: the last at or before it. */
		while (k + 1 < r->n_samples && r->samples[k + 1].t <= lo)
			k++;
		for (size_t j = k; j < r->n_samples && r->samples[j].t < hi; j++) {
			double from = r->samples[j].t > lo ? r->samples[j].t : lo;
			double to = j + 1 < r->n_samples && r->samples[j + 1].t < hi ?
					    r->samples[j + 1].t : hi;

			if (r->samples[j].t > hi || to <= from)
				continue;
			acc[0] += (to - from) * r->samples[j].busy;
			acc[1] += (to - from) * r->samples[j].waiting;
			acc[2] += (to - from) * r->samples[j].islands;
		}
		fprintf(f, "%.4f %.2f %.3f %.3f\n", (lo + w / 2) / 3600,
			c->gpus ? 100.0 * acc[0] / w / c->gpus : 0.0, acc[1] / w, acc[2] / w);
	}
	fprintf(f, "\n\n");
}

int sim_plot(const struct sim_result *rs, unsigned n, const struct sim_cluster *c,
	     const char *data, const char *png, const char *title, unsigned frag_gpus)
{
	const char *panel[3][2] = {
		{ "2", "GPUs in use, %" },
		{ "3", "jobs waiting" },
		{ "4", NULL },  /* its label names --frag-gpus */
	};
	FILE *f = fopen(data, "w");
	double t0 = 0, t1 = 0;
	bool cairo;
	FILE *g;
	int rc;

	if (!f)
		return -errno;
	/* One time axis for every policy: the first sample to the last. */
	for (unsigned i = 0; i < n; i++) {
		if (!rs[i].n_samples)
			continue;
		if (i == 0 || rs[i].samples[0].t < t0)
			t0 = rs[i].samples[0].t;
		if (rs[i].samples[rs[i].n_samples - 1].t > t1)
			t1 = rs[i].samples[rs[i].n_samples - 1].t;
	}
	/* One block per policy (gnuplot's "index"). */
	for (unsigned i = 0; i < n; i++)
		plot_block(f, &rs[i], c, t0, t1);
	if (fclose(f) != 0)
		return -errno;
	if (!png)
		return 0;
	/* pngcairo draws smoother lines; plain png (libgd) is the fallback. */
	cairo = system("gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1") == 0;
	g = popen("gnuplot", "w");
	if (!g)
		return -errno;
	fprintf(g, "set terminal %s size 1100,900\nset output '%s'\n", cairo ? "pngcairo" : "png",
		png);
	fprintf(g, "set multiplot layout 3,1 title \"%s; averages over %.2f h\"\nset grid\n"
		   "set key outside right top\nset lmargin 12\nset rmargin 24\n"
		   "set xrange [%.4f:%.4f]\n",
		title, (t1 - t0) / PLOT_BINS / 3600, t0 / 3600, t1 / 3600);
	if (rs[0].t_begin > t0)
		fprintf(g, "set arrow from %.4f, graph 0 to %.4f, graph 1 nohead dashtype 2\n",
			rs[0].t_begin / 3600, rs[0].t_begin / 3600);
	for (unsigned p = 0; p < 3; p++) {
		if (p == 2)
			fprintf(g, "set xlabel 'time (hours); dashed: the end of the warm-up'\n"
				   "set ylabel \"nodes with a free\\nall-NVLink %u-GPU set\"\n",
				frag_gpus);
		else
			fprintf(g, "set ylabel \"%s\"\n", panel[p][1]);
		fprintf(g, "set yrange [0:*]\nplot ");
		for (unsigned i = 0; i < n; i++)
			fprintf(g, "%s'%s' index %u using 1:%s with lines lw %s title '%s'",
				i ? ", " : "", data, i, panel[p][0], i ? "1.5" : "2.5",
				rs[i].policy);
		fprintf(g, "\n");
	}
	fprintf(g, "unset multiplot\n");
	rc = pclose(g);
	return rc == 0 ? 0 : -EIO;
}
