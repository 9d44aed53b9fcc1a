/* simulate: the command line of `troupe simulate` and the order of a run:
 * read troupe's configuration (the same file the daemon takes, for its GPU
 * resource names, scoring policy, weights, network-domain levels and queue
 * weights), load the
 * cluster snapshot through the cache as `troupe --cluster` does, read the
 * trace, replay it once per policy (simulate_run.c), print the report and
 * draw the plot (simulate_report.c). simulate.h says what is modelled.
 *
 * It runs in the calling process with no threads, server or API server: the
 * cache is the writer thread's and is only read after the snapshot is loaded,
 * so the node records the views point at live until cache_free.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "extender/config.h"
#include "extender/simulate.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: troupe simulate --cluster SNAPSHOT --workload TRACE [options]\n"
"\n"
"Replay a workload trace over a cluster snapshot in simulated time, through the\n"
"daemon's own decisions (filter, prioritize and bind's placement functions; the\n"
"gang planner), and report job waits and completion times, GPU utilisation,\n"
"fragmentation, NVLink-complete pods and queue shares for each scoring policy.\n"
"\n"
"  --cluster FILE      the cluster: a v1 List of Nodes, Pods and PodGroups (JSON or\n"
"                      YAML, `kubectl get nodes,pods,podgroups -A -o yaml`), as\n"
"                      `troupe --cluster` reads it. Its bound pods keep their GPUs\n"
"                      for the whole run.\n"
"  --workload FILE     the trace (YAML or JSON): jobs with arrival, duration, pods,\n"
"                      GPUs per pod, gang, queue, priority and topology policy,\n"
"                      and/or a generate block of synthetic jobs\n"
"                      (docs/reference.md, config/examples/trace-*.yaml).\n"
"  --config FILE       troupe's configuration file, as the daemon's --config: the GPU\n"
"                      resource names, scoring.policy, scoring.weights,\n"
"                      gang.domain_levels and the queues' weights (queues:) are\n"
"                      taken from it (default: built-in defaults).\n"
"  --policy NAME       the policy to run (default: the config's scoring policy,\n"
"                      \"topology\").\n"
"  --compare A,B,...   run each of these policies over the same trace and put them\n"
"                      side by side (at most %d), e.g. --compare binpack,topology.\n"
"                      A policy is RANKER[+CHOOSER][@GANG]:\n"
"                        RANKER   how a pod's node is chosen: a troupe scoring\n"
"                                 policy (the daemon's best node), kube[:SCORE]\n"
"                                 (kube-scheduler's LeastAllocated plus troupe's\n"
"                                 answer x --extender-weight x 10), kube-scaled[:SCORE]\n"
"                                 (the same with troupe's old scaled answer),\n"
"                                 most-allocated, least-allocated (kube-scheduler\n"
"                                 alone) or best-fit (fewest free GPUs left);\n"
"                        CHOOSER  a baseline device chooser instead of bind's:\n"
"                                 lowest, random, sum-pairs, besteffort\n"
"                                 (go-gpuallocator's, as NVIDIA's device plugin\n"
"                                 for whole GPUs) or distributed (the plugin's\n"
"                                 for replicas and MIG devices);\n"
"                        GANG     a peer's gang planner instead of troupe's:\n"
"                                 kueue-bestfit, kueue-leastfree, kai, kube-tas or\n"
"                                 kube-tas:LEVEL.\n"
"                      e.g. least-allocated+besteffort@kueue-bestfit.\n"
"  --extender-weight N the extender weight the kube rankers model (default %d,\n"
"                      config/scheduler-config.yaml's).\n"
"  --no-holds          no holds for a starving gang even when the config turns them\n"
"                      on: with gang.starvation_holds true, the head of the fair\n"
"                      order among waiting gangs, once it has waited\n"
"                      gang.starvation_seconds, has the emptiest nodes that take all\n"
"                      its members kept from other jobs until it starts, as troupe's\n"
"                      gang manager does (not under a peer's @GANG planner).\n", SIM_MAX_POLICIES, SIM_EXTENDER_WEIGHT);
	fprintf(f,
"  --gang-topology V   every gang as if its pods carried the annotation\n"
"                      troupe.io/gang-topology=V: required:LABEL-KEY keeps each\n"
"                      gang inside one domain of that node label or it waits (and\n"
"                      one larger than every such domain is refused); none, the\n"
"                      default, lets troupe's planner pick the finest level that\n"
"                      holds it. troupe's planner only: not with a @GANG policy.\n");
	fprintf(f,
"  --weights P,T,F[,B] scoring weights packing,topology,fragmentation and fit (B;\n"
"                      0 when left out) (default: the config's, 0,3,2,100).\n"
"  --seed N            seed for ties between equally scored nodes (default: the\n"
"                      trace's seed, else 1). The same seed gives the same run.\n"
"  --order ORDER       the order waiting jobs are retried in: fair (default), the\n"
"                      gang manager's fair order (priority, then the queue with\n"
"                      the lower weighted share of GPUs in use, then the earlier\n"
"                      arrival, then the name), or fifo, arrival order.\n"
"  --frag-gpus N       fragmentation counts the free GPUs no pod of N GPUs could use:\n"
"                      each node's free count modulo N; the NVLink-island measure\n"
"                      counts nodes with N free GPUs all NVLinked (default 8).\n"
"  --plot FILE.png     draw GPU utilisation, waiting jobs and nodes with a free\n"
"                      all-NVLink N-GPU set (N: --frag-gpus) over time, one line\n"
"                      per policy (needs gnuplot).\n"
"  --plot-data FILE    write the plot's time series (gnuplot data) to FILE.\n"
"  --until-last-arrival  end the time averages (utilisation, fragmentation, NVLink\n"
"                      islands) at the last arrival, not the last departure: the\n"
"                      steady state without the cluster draining at the end.\n"
"  -o, --output FMT    text (default: Markdown tables) or json.\n"
"  --per-job           with -o json, every job's pods: start, node and devices.\n"
"  -h, --help          this text.\n"
"\n"
"Scoring policies: ");
	for (const char *const *n = placement_score_names; *n; n++)
		fprintf(f, "%s%s", n == placement_score_names ? "" : ", ", *n);
	fprintf(f, ".\nExit status: 0 done, 1 a runtime failure, 2 bad usage or input.\n");
}

struct node_list {
	struct cache_node_view *v;
	unsigned n, cap;
	int err;
};

static bool collect(const struct cache_node_view *v, void *arg)
{
	struct node_list *l = arg;

	if (l->n == l->cap) {
		unsigned nc = l->cap ? l->cap * 2 : 256;
		struct cache_node_view *nv = realloc(l->v, nc * sizeof(*nv));

		if (!nv) {
			l->err = -ENOMEM;
			return false;
		}
		l->v = nv;
		l->cap = nc;
	}
	l->v[l->n++] = *v;
	return true;
}

/* The GPUs the snapshot's pods hold, by trace queue: the gang manager counts
 * every pod in its queue's share, and they keep their GPUs the whole run. */
struct queue_count {
	const struct sim_trace *t;
	unsigned *gpus;
};

static void count_queue(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct queue_count *qc = arg;

	(void)uid;
	if (p->state != CACHE_POD_STATE_ASSUMED && p->state != CACHE_POD_STATE_BOUND)
		return;
	for (unsigned q = 0; q < qc->t->n_queues; q++)
		if (strcmp(qc->t->queues[q], p->queue) == 0) {
			qc->gpus[q] += (unsigned)__builtin_popcountll(p->devices) + p->unattributed;
			return;
		}
}

/* Split "a,b,c" into <names> (pointers into <buf>). */
static int split_policies(char *buf, const char **names, unsigned *n, char *err, size_t errlen)
{
	*n = 0;
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (*n == SIM_MAX_POLICIES) {
			snprintf(err, errlen, "--compare: at most %d policies", SIM_MAX_POLICIES);
			return -EINVAL;
		}
		struct sim_policy pol;

		if (sim_policy_parse(tok, &pol) < 0) {
			snprintf(err, errlen, "--compare: \"%s\" is not a policy: RANKER[+CHOOSER]"
				 "[@GANG] (see --help)", tok);
			return -EINVAL;
		}
		names[(*n)++] = tok;
	}
	if (!*n) {
		snprintf(err, errlen, "--compare: name at least one policy");
		return -EINVAL;
	}
	return 0;
}

enum { OPT_COMPARE = 256, OPT_WEIGHTS, OPT_SEED, OPT_FRAG, OPT_PLOT, OPT_PLOT_DATA,
       OPT_PER_JOB, OPT_CONFIG, OPT_POLICY, OPT_UNTIL, OPT_ORDER, OPT_EXT_WEIGHT,
       OPT_NO_HOLDS, OPT_GANG_TOPOLOGY };

int ext_simulate_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cluster", required_argument, NULL, 'c' },
		{ "workload", required_argument, NULL, 'w' },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "policy", required_argument, NULL, OPT_POLICY },
		{ "compare", required_argument, NULL, OPT_COMPARE },
		{ "weights", required_argument, NULL, OPT_WEIGHTS },
		{ "order", required_argument, NULL, OPT_ORDER },
		{ "extender-weight", required_argument, NULL, OPT_EXT_WEIGHT },
		{ "no-holds", no_argument, NULL, OPT_NO_HOLDS },
		{ "gang-topology", required_argument, NULL, OPT_GANG_TOPOLOGY },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "frag-gpus", required_argument, NULL, OPT_FRAG },
		{ "plot", required_argument, NULL, OPT_PLOT },
		{ "plot-data", required_argument, NULL, OPT_PLOT_DATA },
		{ "output", required_argument, NULL, 'o' },
		{ "per-job", no_argument, NULL, OPT_PER_JOB },
		{ "until-last-arrival", no_argument, NULL, OPT_UNTIL },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cluster = NULL, *workload = NULL, *config = NULL, *policy = NULL;
	const char *png = NULL, *data = NULL, *format = "text", *names[SIM_MAX_POLICIES];
	char *compare = NULL, err[SIM_ERR_LEN], tmp[] = "/tmp/troupe-simulate.XXXXXX";
	char title[SIM_ERR_LEN];
	struct sim_settings s = { .frag_gpus = 8, .extender_weight = SIM_EXTENDER_WEIGHT };
	struct sim_result res[SIM_MAX_POLICIES];
	struct sim_cluster c = { 0 };
	struct node_list nodes = { 0 };
	struct sim_trace t = { 0 };
	struct placement_registry *registry = NULL;
	struct cache *cache = NULL;
	struct ext_config *cfg = NULL;
	bool weights_set = false, seed_set = false, no_holds = false;
	unsigned n_pol = 0;
	int opt, ret = 2;

	memset(res, 0, sizeof(res));
	optind = 1;     /* argv[0] is "simulate" */
	while ((opt = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		char *end = NULL;

		switch (opt) {
		case 'c': cluster = optarg; break;
		case 'w': workload = optarg; break;
		case OPT_CONFIG: config = optarg; break;
		case OPT_POLICY: policy = optarg; break;
		case OPT_COMPARE: compare = optarg; break;
		case OPT_WEIGHTS:
			s.w.fit = 0;
			{
				int got = sscanf(optarg, "%lf,%lf,%lf,%lf", &s.w.packing,
						 &s.w.topology, &s.w.fragmentation, &s.w.fit);

				if ((got != 3 && got != 4) || s.w.packing < 0 || s.w.topology < 0 ||
				    s.w.fragmentation < 0 || s.w.fit < 0 ||
				    s.w.packing + s.w.topology + s.w.fragmentation + s.w.fit <= 0) {
					fprintf(stderr, "troupe simulate: --weights takes three or "
						"four numbers >= 0, not all 0, PACKING,TOPOLOGY,"
						"FRAGMENTATION[,FIT]\n");
					return 2;
				}
			}
			weights_set = true;
			break;
		case OPT_SEED:
			s.seed = strtoull(optarg, &end, 10);
			if (!*optarg || *end) {
				fprintf(stderr, "troupe simulate: --seed takes a whole number\n");
				return 2;
			}
			seed_set = true;
			break;
		case OPT_EXT_WEIGHT:
			s.extender_weight = (unsigned)strtoul(optarg, &end, 10);
			if (!*optarg || *end || s.extender_weight < 1 ||
			    s.extender_weight > SIM_MAX_EXTENDER_WEIGHT) {
				fprintf(stderr, "troupe simulate: --extender-weight takes 1 to %d\n",
					SIM_MAX_EXTENDER_WEIGHT);
				return 2;
			}
			break;
		case OPT_FRAG:
			s.frag_gpus = (unsigned)strtoul(optarg, &end, 10);
			if (!*optarg || *end || s.frag_gpus < 1 || s.frag_gpus > CACHE_MAX_GPUS) {
				fprintf(stderr, "troupe simulate: --frag-gpus takes 1 to %d\n",
					CACHE_MAX_GPUS);
				return 2;
			}
			break;
		case OPT_PLOT: png = optarg; break;
		case OPT_PLOT_DATA: data = optarg; break;
		case 'o': format = optarg; break;
		case OPT_PER_JOB: s.per_job = true; break;
		case OPT_UNTIL: s.until_last_arrival = true; break;
		case OPT_NO_HOLDS: no_holds = true; s.starvation_s = -1; break;
		case OPT_GANG_TOPOLOGY:
			s.gang_required_key = NULL;
			if (strcmp(optarg, "none") != 0 &&
			    (gang_topology_parse(optarg, &s.gang_required_key, err,
						 sizeof(err)) < 0 || !s.gang_required_key)) {
				fprintf(stderr, "troupe simulate: --gang-topology takes none or "
					"required:<node-label-key>, not \"%s\"\n", optarg);
				return 2;
			}
			break;
		case OPT_ORDER:
			if (strcmp(optarg, "fair") != 0 && strcmp(optarg, "fifo") != 0) {
				fprintf(stderr, "troupe simulate: --order takes fair or fifo\n");
				return 2;
			}
			s.fifo = strcmp(optarg, "fifo") == 0;
			break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "troupe simulate: see troupe simulate --help\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "troupe simulate: unexpected argument \"%s\"; see --help\n",
			argv[optind]);
		return 2;
	}
	if (!cluster || !workload) {
		fprintf(stderr, "troupe simulate: --cluster and --workload are required; see "
			"--help\n");
		return 2;
	}
	if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0) {
		fprintf(stderr, "troupe simulate: -o takes text or json\n");
		return 2;
	}
	if (compare && policy) {
		fprintf(stderr, "troupe simulate: --policy and --compare exclude each other\n");
		return 2;
	}
	if (compare && split_policies(compare, names, &n_pol, err, sizeof(err)) < 0) {
		fprintf(stderr, "troupe simulate: %s\n", err);
		return 2;
	}

	cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		fprintf(stderr, "troupe simulate: out of memory\n");
		return 1;
	}
	ext_config_defaults(cfg);
	if (config && ext_config_load(cfg, config, err, sizeof(err)) < 0) {
		fprintf(stderr, "troupe simulate: %s\n", err);
		goto out;
	}
	if (!n_pol) {
		names[0] = policy ? policy : cfg->score_policy;
		n_pol = 1;
	}
	for (unsigned i = 0; i < n_pol; i++) {
		struct sim_policy pol;

		if (sim_policy_parse(names[i], &pol) < 0) {
			fprintf(stderr, "troupe simulate: unknown policy \"%s\"\n", names[i]);
			goto out;
		}
		if (pol.gang && s.gang_required_key) {
			fprintf(stderr, "troupe simulate: --gang-topology is troupe's annotation, "
				"for troupe's gang planner; policy \"%s\" names a peer's (@GANG)\n",
				names[i]);
			goto out;
		}
	}
	if (!weights_set)
		s.w = cfg->weights;
	s.starvation_s = no_holds || !cfg->gang.starvation_holds ? -1.0
							      : (double)cfg->gang.starvation_s;
	s.levels = &cfg->gang.levels;

	/* The snapshot, read as the daemon reads it. */
	registry = placement_registry_new();
	if (!registry) {
		ret = 1;
		fprintf(stderr, "troupe simulate: out of memory\n");
		goto out;
	}
	cfg->cache.node_derive = placement_topo_derive;
	cfg->cache.node_release = placement_topo_release;
	cfg->cache.hook_ctx = registry;
	cache = cache_new(&cfg->cache);
	if (!cache) {
		ret = 1;
		fprintf(stderr, "troupe simulate: cannot create the cache: %s\n", strerror(errno));
		goto out;
	}
	if (cache_snapshot_load(cache, cluster, err, sizeof(err)) < 0) {
		fprintf(stderr, "troupe simulate: %s\n", err);
		goto out;
	}
	cache_read_begin(cache);
	cache_node_foreach(cache, collect, &nodes);
	cache_read_end(cache);
	if (nodes.err < 0) {
		ret = 1;
		fprintf(stderr, "troupe simulate: out of memory for the nodes\n");
		goto out;
	}
	c.base = nodes.v;
	c.n = nodes.n;
	for (unsigned i = 0; i < c.n; i++)
		if (c.base[i].node->gpu_resource >= 0)
			c.gpus += c.base[i].node->gpu_allocatable;
	if (c.gpus == 0) {
		fprintf(stderr, "troupe simulate: the cluster %s has no node offering GPUs\n",
			cluster);
		goto out;
	}

	if (sim_trace_load(&t, workload, c.gpus, err, sizeof(err)) < 0 ||
	    sim_trace_resolve(&t, cfg->cache.gpu_resources, cfg->cache.n_gpu_resources, err,
			      sizeof(err)) < 0) {
		fprintf(stderr, "troupe simulate: %s\n", err);
		goto out;
	}
	if (!seed_set)
		s.seed = t.seed;
	/* The fair order divides each queue's share by its weight, as the
	 * gang manager does. */
	for (unsigned q = 0; q < t.n_queues; q++)
		s.queue_weights[q] = gang_config_queue_weight(&cfg->gang, t.queues[q]);
	cache_pod_foreach(cache, count_queue, &(struct queue_count){ &t, s.queue_base_gpus });

	ret = 1;
	for (unsigned i = 0; i < n_pol; i++) {
		s.policy = names[i];
		s.log_refusals = i == 0;        /* the same for every policy */
		if (sim_run(&c, &t, &s, &res[i], err, sizeof(err)) < 0) {
			fprintf(stderr, "troupe simulate: %s\n", err);
			goto out;
		}
	}
	if (strcmp(format, "json") == 0) {
		if (sim_report_json(res, n_pol, &t, &c, &s) < 0) {
			fprintf(stderr, "troupe simulate: out of memory for the report\n");
			goto out;
		}
	} else {
		sim_report_text(res, n_pol, &t, &c, &s, cluster, workload);
	}
	ret = 0;
	if (png || data) {
		const char *path = data;
		int fd = -1, rc;

		if (!path) {
			fd = mkstemp(tmp);
			if (fd < 0) {
				fprintf(stderr, "troupe simulate: cannot make a temporary "
					"file: %s\n", strerror(errno));
				ret = 1;
				goto out;
			}
			close(fd);
			path = tmp;
		}
		snprintf(title, sizeof(title), "troupe simulate: %u nodes, %u GPUs, %zu jobs, "
			 "seed %llu", c.n, c.gpus, t.n, (unsigned long long)s.seed);
		rc = sim_plot(res, n_pol, &c, path, png, title, s.frag_gpus);
		if (rc < 0) {
			fprintf(stderr, "troupe simulate: %s\n", rc == -EIO ?
				"gnuplot failed to draw the plot" : strerror(-rc));
			ret = 1;
		} else if (png && strcmp(format, "text") == 0) {
			printf("\n# plot: %s\n", png);
		}
		if (fd >= 0)
			unlink(tmp);
	}
out:
	for (unsigned i = 0; i < n_pol; i++)
		sim_result_fini(&res[i], t.n);
	sim_trace_fini(&t);
	free(nodes.v);
	cache_free(cache);
	placement_registry_free(registry);
	free(cfg);
	return ret;
}
