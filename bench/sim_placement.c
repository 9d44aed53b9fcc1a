/* sim_placement: how well placement keeps GPU sets connected and NVLink islands
 * whole, on a replayed trace, against same-run baselines.
 *
 *   sim_placement [--nodes N] [--pods M] [--seed S] [--load F] [--weights P,T,F]
 *                 [--plot FILE.png] [--plot-data FILE]
 *
 * The cluster mixes four node types in equal shares, their matrices built here
 * (no parser, no profiles): 8-GPU NVSwitch (every pair NV12), DGX-1 V100 hybrid
 * cube mesh (two NVLinked quads, NV1/NV2, joined by i<->i+4 links, SYS
 * otherwise), an 8-GPU PCIe server (PIX pairs under four switches, PXB within
 * a socket, SYS across) and a 4-GPU box with NVLink bridges on (0,2) and (1,3).
 *
 * The trace, generated once from the seed and replayed for every scheduler:
 * Poisson arrivals of pods asking 1/2/4/8 GPUs (40/25/20/15 %), exponential
 * lifetimes (mean one hour), arrival rate set so that the offered load is
 * --load (0.9) of the cluster's GPUs. The first tenth of the arrivals warms the
 * cluster up and is not measured.
 *
 * Every scheduler runs the same node selection: the real filter
 * (placement_check_request) over every node, a scoring policy from the real
 * table (placement_score_find), the highest score winning and ties broken at
 * random (seeded), as kube-scheduler does. Only the score and the device
 * chooser differ:
 *   troupe    the "topology" score and placement_choose (memoised, exact);
 *   lowest    the "binpack" score, the lowest free indices;
 *   random    the "binpack" score, a random free subset;
 *   sum-pairs the "binpack" score, the subset with the largest sum of
 *             placement_link_weight over its pairs (no worst-pair term, no
 *             fragmentation term; ties to the lowest indices).
 * A pod no node can take waits in a FIFO queue; after every departure the whole
 * queue is retried in order and every pod that fits is placed, so small pods
 * may pass a waiting large one (no head-of-line blocking, as kube-scheduler).
 *
 * What it reports, over the measured arrivals:
 *   all-NVLink sets   multi-GPU pods whose every pair is NVLinked, as a share of
 *                     all placed multi-GPU pods (and, in the second table, of
 *                     those placed on a node that has NVLink at all);
 *   link quality      placement_set_quality of each multi-GPU pod's set, averaged;
 *   topology fragmentation
 *                     multi-GPU arrivals for which some node had k free GPUs but
 *                     no node had k free GPUs that are all NVLinked: the pod would
 *                     have been refused everywhere under "required". (With the
 *                     default "preferred" policy no scheduler here ever refuses a
 *                     node that has k free GPUs, so "rejected while a node had
 *                     enough free GPUs" is literally zero for all of them; this is
 *                     its topological form.) Note that it only counts arrivals
 *                     that found a node with k free: the next measure covers the
 *                     rest;
 *   node fragmentation
 *                     arrivals that found no node with k free GPUs while the
 *                     cluster had k free in total (the classic measure);
 *   mean wait         minutes from arrival to placement, pods still waiting at
 *                     the end counted up to the end;
 *   free islands      sampled every 3 minutes: for each node, the largest set of
 *                     free devices that are pairwise NVLinked; the time average
 *                     of nodes able to host an all-NVLink 2, 4 and 8-GPU pod.
 * With --plot-data the 8-GPU island count per sample is written for gnuplot,
 * and --plot draws it (gnuplot, pngcairo when available, else png).
 *
 * The parts live in files named for what they decide (sim_placement.h draws
 * the map): the node types in sim_cluster.c, the trace in sim_trace.c, troupe's
 * and the baselines' device choosers in sim_choosers.c, the event loop and its
 * counts in sim_replay.c, the tables and the plot in sim_report.c. This file
 * holds the options and the order of the run.
 *
 * This is a benchmark, not a test: it prints figures and never fails on them.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim_placement.h"

static void usage(void)
{
	fprintf(stderr, "usage: sim_placement [--nodes N] [--pods M] [--seed S] [--load F] "
			"[--weights PACKING,TOPOLOGY,FRAGMENTATION] [--plot FILE.png] "
			"[--plot-data FILE]\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "nodes", required_argument, NULL, 'n' },
		{ "pods", required_argument, NULL, 'p' },
		{ "seed", required_argument, NULL, 's' },
		{ "load", required_argument, NULL, 'l' },
		{ "weights", required_argument, NULL, 'w' },
		{ "plot", required_argument, NULL, 'P' },
		{ "plot-data", required_argument, NULL, 'D' },
		{ NULL, 0, NULL, 0 },
	};
	/* troupe's defaults (src/extender/config.c). */
	struct placement_weights w = { .packing = 6, .topology = 1, .fragmentation = 2 };
	unsigned n_nodes = 64;
	unsigned long pods = 50000;
	unsigned long long seed = 1;
	double load = 0.9;
	const char *png = NULL, *data = NULL;
	char tmp[] = "/tmp/sim_placement.XXXXXX";
	struct node_class cls[KINDS] = { 0 };
	struct run runs[CHOOSERS];
	struct trace tr = { 0 };
	unsigned gpus = 0;
	int opt, ret = 1;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		char *end = NULL;

		switch (opt) {
		case 'n': n_nodes = (unsigned)strtoul(optarg, &end, 10); break;
		case 'p': pods = strtoul(optarg, &end, 10); break;
		case 's': seed = strtoull(optarg, &end, 10); break;
		case 'l': load = strtod(optarg, &end); break;
		case 'w':
			if (sscanf(optarg, "%lf,%lf,%lf", &w.packing, &w.topology,
				   &w.fragmentation) != 3) {
				usage();
				return 2;
			}
			end = optarg + strlen(optarg);
			break;
		case 'P': png = optarg; end = optarg + strlen(optarg); break;
		case 'D': data = optarg; end = optarg + strlen(optarg); break;
		default: usage(); return 2;
		}
		if (!end || *end) {
			usage();
			return 2;
		}
	}
	if (optind < argc || n_nodes < KINDS || pods < 100 || load <= 0.0 || load > 2.0 ||
	    w.packing < 0 || w.topology < 0 || w.fragmentation < 0) {
		fprintf(stderr, "sim_placement: --nodes >= %u, --pods >= 100, 0 < --load <= 2, "
				"weights >= 0\n", KINDS);
		usage();
		return 2;
	}
	memset(runs, 0, sizeof(runs));
	if (sim_classes_init(cls) < 0)
		goto out;
	for (unsigned i = 0; i < n_nodes; i++)
		gpus += cls[i % KINDS].topo->n;
	if (sim_trace_make(&tr, pods, gpus, load, seed) < 0)
		goto out;
	for (unsigned c = 0; c < CHOOSERS; c++) {
		if (sim_run_init(&runs[c], &sim_choosers[c], &tr, cls, n_nodes, &w, seed) < 0)
			goto out;
		sim_run_trace(&runs[c]);
	}
	sim_report(runs, &tr, n_nodes, gpus, load, seed, &w);
	ret = 0;
	if (png && !data) {
		int fd = mkstemp(tmp);

		if (fd < 0) {
			perror("sim_placement: mkstemp");
			goto out;
		}
		close(fd);
	}
	if (data || png) {
		const char *path = data ? data : tmp;

		if (sim_plot_data_write(path, runs, &tr) < 0)
			fprintf(stderr, "sim_placement: cannot write %s\n", path);
		else if (png && sim_placement_plot(png, path, runs, &tr, n_nodes, seed) < 0)
			fprintf(stderr, "sim_placement: gnuplot failed to draw %s\n", png);
		else if (png)
			printf("# plot: %s\n", png);
		if (!data)
			unlink(tmp);
	}
out:
	if (ret)
		fprintf(stderr, "sim_placement: out of memory\n");
	for (unsigned c = 0; c < CHOOSERS; c++)
		sim_run_fini(&runs[c]);
	for (unsigned k = 0; k < KINDS; k++)
		free(cls[k].topo);
	free(tr.pods);
	return ret;
}
