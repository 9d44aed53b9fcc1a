/* sim_report: how the replay's counts become what sim_placement prints. Two
 * Markdown tables over the measured arrivals, troupe first and each baseline's
 * figure followed by its ratio to troupe's (all-NVLink sets, link quality,
 * topology and node fragmentation, wait, busy GPUs, free islands; then the
 * same by pod size), a closing line on whether troupe beats every baseline,
 * and on request the 8-GPU island series as gnuplot data and a PNG drawn from
 * it. What each figure means is in sim_placement.c's opening comment; nothing
 * here changes a count, and nothing here fails the run on a figure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim_placement.h"

static unsigned long sum_sizes(const unsigned long *v, unsigned from)
{
	unsigned long s = 0;

	for (unsigned i = from; i < SIZES; i++)
		s += v[i];
	return s;
}

static double pct(unsigned long a, unsigned long b)
{
	return b ? 100.0 * a / b : 0.0;
}

struct figures {
	double nvlink, quality, topo_frag, node_frag, wait, busy, isl[3], no8;
};

static void figures_of(const struct run *r, struct figures *f)
{
	const struct stats *s = &r->st;
	double q = 0.0, w = 0.0;

	for (unsigned i = 1; i < SIZES; i++)
		q += s->quality[i];
	for (unsigned i = 0; i < SIZES; i++)
		w += s->wait[i];
	f->nvlink = pct(sum_sizes(s->nvlink, 1), sum_sizes(s->placed, 1));
	f->quality = sum_sizes(s->placed, 1) ? q / sum_sizes(s->placed, 1) : 0.0;
	f->topo_frag = pct(sum_sizes(s->topo_frag, 1), sum_sizes(s->arrivals, 1));
	f->node_frag = pct(sum_sizes(s->node_frag, 0), sum_sizes(s->arrivals, 0));
	f->wait = sum_sizes(s->arrivals, 0) ? w / sum_sizes(s->arrivals, 0) : 0.0;
	f->busy = s->samples ? 100.0 * s->busy / s->samples / r->gpus : 0.0;
	for (unsigned j = 0; j < 3; j++)
		f->isl[j] = s->samples ? s->islands[j] / s->samples : 0.0;
	f->no8 = pct(s->no8, s->samples);
}

/* A baseline's figure next to troupe's: "12.3 (2.05x)" is 2.05 times troupe's. */
static void cell(double v, double troupe, bool is_troupe, int decimals)
{
	printf(" %.*f", decimals, v);
	if (!is_troupe) {
		if (troupe > 0.0)
			printf(" (%.2fx)", v / troupe);
		else
			printf(v > 0.0 ? " (troupe 0)" : " (=)");
	}
	printf(" |");
}

void sim_report(const struct run *runs, const struct trace *tr, unsigned n_nodes, unsigned gpus,
		double load, uint64_t seed, const struct placement_weights *w)
{
	struct figures f[CHOOSERS];

	for (unsigned c = 0; c < CHOOSERS; c++)
		figures_of(&runs[c], &f[c]);
	printf("# sim_placement: %u nodes (NVSwitch 8-GPU, DGX-1 V100 8-GPU, PCIe 8-GPU, "
	       "NVLink-bridge 4-GPU in equal shares; %u GPUs), %zu pods (1/2/4/8 GPUs: "
	       "40/25/20/15 %%, mean life 60 min), offered load %.0f %%, seed %llu; first %zu "
	       "arrivals (%.1f h) are warm-up\n",
	       n_nodes, gpus, tr->n, load * 100, (unsigned long long)seed, tr->warm,
	       tr->t_warm / 60);
	printf("# troupe: score \"topology\" (packing=%g topology=%g fragmentation=%g), "
	       "placement_choose; baselines: score \"binpack\"; (x) = the baseline's figure "
	       "over troupe's\n\n", w->packing, w->topology, w->fragmentation);
	printf("| chooser | all-NVLink sets, %% of multi-GPU pods | mean link quality (0-1) | "
	       "topology fragmentation, %% of multi-GPU arrivals | node fragmentation, %% of "
	       "arrivals | mean wait, min | GPUs busy, %% | nodes with a free all-NVLink 2 / 4 "
	       "/ 8 set (time avg) | time with no free all-NVLink 8-GPU node, %% |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	for (unsigned c = 0; c < CHOOSERS; c++) {
		bool t = c == 0;

		printf("| %s |", runs[c].ch->name);
		cell(f[c].nvlink, f[0].nvlink, t, 1);
		cell(f[c].quality, f[0].quality, t, 3);
		cell(f[c].topo_frag, f[0].topo_frag, t, 2);
		cell(f[c].node_frag, f[0].node_frag, t, 2);
		cell(f[c].wait, f[0].wait, t, 1);
		printf(" %.1f | %.1f / %.1f / %.2f | %.1f |\n", f[c].busy, f[c].isl[0], f[c].isl[1],
		       f[c].isl[2], f[c].no8);
	}

	printf("\nBy pod size (2 / 4 / 8 GPUs; node fragmentation and wait also for 1 GPU "
	       "first):\n\n");
	printf("| chooser | all-NVLink sets, %% (2 / 4 / 8) | mean link quality (2 / 4 / 8) | "
	       "topology fragmentation, %% (2 / 4 / 8) | node fragmentation, %% (1 / 2 / 4 / 8) | "
	       "mean wait, min (1 / 2 / 4 / 8) | waiting at the end | all-NVLink sets, %% of "
	       "multi-GPU pods on nodes with NVLink |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	for (unsigned c = 0; c < CHOOSERS; c++) {
		const struct stats *s = &runs[c].st;

		printf("| %s | %.1f / %.1f / %.1f | %.3f / %.3f / %.3f | %.2f / %.2f / %.2f | "
		       "%.2f / %.2f / %.2f / %.2f | %.1f / %.1f / %.1f / %.1f | %lu | %.1f |\n",
		       runs[c].ch->name, pct(s->nvlink[1], s->placed[1]),
		       pct(s->nvlink[2], s->placed[2]), pct(s->nvlink[3], s->placed[3]),
		       s->placed[1] ? s->quality[1] / s->placed[1] : 0.0,
		       s->placed[2] ? s->quality[2] / s->placed[2] : 0.0,
		       s->placed[3] ? s->quality[3] / s->placed[3] : 0.0,
		       pct(s->topo_frag[1], s->arrivals[1]), pct(s->topo_frag[2], s->arrivals[2]),
		       pct(s->topo_frag[3], s->arrivals[3]), pct(s->node_frag[0], s->arrivals[0]),
		       pct(s->node_frag[1], s->arrivals[1]), pct(s->node_frag[2], s->arrivals[2]),
		       pct(s->node_frag[3], s->arrivals[3]),
		       s->arrivals[0] ? s->wait[0] / s->arrivals[0] : 0.0,
		       s->arrivals[1] ? s->wait[1] / s->arrivals[1] : 0.0,
		       s->arrivals[2] ? s->wait[2] / s->arrivals[2] : 0.0,
		       s->arrivals[3] ? s->wait[3] / s->arrivals[3] : 0.0, s->pending_end,
		       pct(s->nvlink_on_nv_node, sum_sizes(s->on_nv_node, 1)));
	}

	{
		bool frag = true, qual = true, node = true;

		for (unsigned c = 1; c < CHOOSERS; c++) {
			frag &= f[0].topo_frag < f[c].topo_frag;
			node &= f[0].node_frag <= f[c].node_frag;
			qual &= f[0].quality >= f[c].quality;
		}
		printf("\n# troupe vs every baseline: topology fragmentation lower: %s; node "
		       "fragmentation lower or equal: %s; link quality equal or better: %s\n",
		       frag ? "yes" : "no", node ? "yes" : "no", qual ? "yes" : "no");
	}
}

/* ---- Plot --------------------------------------------------------------------------- */

/* Time, then each chooser's free 8-GPU NVLink islands, raw and averaged over the
 * hour before (the raw counts are small integers that jump at every event). */
int sim_plot_data_write(const char *path, const struct run *runs, const struct trace *tr)
{
	size_t win = SAMPLES_PER_LIFE;
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	fprintf(f, "# time_h");
	for (unsigned c = 0; c < CHOOSERS; c++)
		fprintf(f, " %s", runs[c].ch->name);
	for (unsigned c = 0; c < CHOOSERS; c++)
		fprintf(f, " %s_1h", runs[c].ch->name);
	fprintf(f, "\n# nodes able to host an all-NVLink 8-GPU pod; warm-up ends at %.2f h\n",
		tr->t_warm / 60);
	for (size_t i = 0; i < tr->n_samples; i++) {
		size_t from = i + 1 >= win ? i + 1 - win : 0;

		fprintf(f, "%.3f", sample_time(i) / 60);
		for (unsigned c = 0; c < CHOOSERS; c++)
			fprintf(f, " %g", runs[c].series[i]);
		for (unsigned c = 0; c < CHOOSERS; c++) {
			double s = 0.0;

			for (size_t j = from; j <= i; j++)
				s += runs[c].series[j];
			fprintf(f, " %.3f", s / (double)(i + 1 - from));
		}
		fprintf(f, "\n");
	}
	return fclose(f) == 0 ? 0 : -errno;
}

int sim_placement_plot(const char *png, const char *data, const struct run *runs,
		       const struct trace *tr, unsigned n_nodes, uint64_t seed)
{
	/* pngcairo draws smoother lines; plain png (libgd) is the fallback. */
	bool cairo = system("gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1") == 0;
	FILE *g = popen("gnuplot", "w");
	int rc;

	if (!g)
		return -errno;
	fprintf(g, "set terminal %s size 1100,520\n", cairo ? "pngcairo" : "png");
	fprintf(g, "set output '%s'\n", png);
	fprintf(g, "set title \"Nodes able to host an all-NVLink 8-GPU pod over time (%u nodes, "
		   "%zu pods, seed %llu; 1-hour moving average)\"\n",
		n_nodes, tr->n, (unsigned long long)seed);
	fprintf(g, "set xlabel 'time (hours)'\nset ylabel 'nodes'\nset grid\n");
	fprintf(g, "set key top right\nset yrange [0:*]\nset xrange [0:%.3f]\n", tr->t_end / 60);
	fprintf(g, "set arrow from %.3f, graph 0 to %.3f, graph 1 nohead dashtype 2\n",
		tr->t_warm / 60, tr->t_warm / 60);
	fprintf(g, "plot ");
	for (unsigned c = 0; c < CHOOSERS; c++)
		fprintf(g, "%s'%s' using 1:%u with lines lw %s title '%s'", c ? ", " : "", data,
			2 + CHOOSERS + c, c ? "1" : "2", runs[c].ch->name);
	fprintf(g, "\n");
	rc = pclose(g);
	return rc == 0 ? 0 : -EIO;
}
