/* troupe's entry point: read flags and configuration, load the cluster state,
 * serve until SIGINT or SIGTERM. Settings apply in this order, later winning:
 * built-in defaults, the --config file, command-line flags.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "common/log.h"
#include "extender/config.h"
#include "extender/server.h"
#include "extender/verbs.h"
#include "troupe_version.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: troupe --cluster FILE [options]\n"
		"\n"
		"troupe is a Kubernetes scheduler extender for GPU clusters. kube-scheduler calls\n"
		"it over HTTP (POST /filter, /prioritize, /bind, /preempt) to place pods that ask\n"
		"for GPUs.\n"
		"\n"
		"Cluster state (one source is required):\n"
		"  --cluster FILE       a cluster snapshot: a v1 List of Node, Pod and PodGroup\n"
		"                       objects, as `kubectl get nodes,pods,podgroups -A -o json`\n"
		"                       (or -o yaml) prints it. troupe schedules against it and\n"
		"                       keeps its own binds in memory.\n"
		"\n"
		"Options:\n"
		"  --listen HOST:PORT   address to serve on (default 127.0.0.1:8888; use\n"
		"                       0.0.0.0:8888 to accept connections from other hosts,\n"
		"                       [::1]:8888 for IPv6, port 0 for any free port)\n"
		"  --config FILE        troupe's YAML settings (see config/troupe.yaml); flags\n"
		"                       given here override the file\n"
		"  --log-level LEVEL    debug, info (default), warn or error\n"
		"  --help               show this help and exit\n"
		"  --version            print the version and exit\n"
		"\n"
		"Endpoints: POST /filter /prioritize /bind /preempt; GET /healthz /readyz\n"
		"/version /debug/state. Docs: docs/operations.md and docs/configuration.md.\n");
}

/* Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad usage or settings. */
int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "cluster", required_argument, NULL, 'c' },
		{ "config", required_argument, NULL, 'f' },
		{ "log-level", required_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen = NULL, *cluster = NULL, *config = NULL, *level = NULL;
	struct ext_config cfg;
	struct ext_service svc = { 0 };
	struct ext_server *server = NULL;
	struct cache *cache = NULL;
	struct cache_stats st;
	char err[EXT_ERR_LEN];
	sigset_t sigs;
	int opt, sig, ret = 2;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'l': listen = optarg; break;
		case 'c': cluster = optarg; break;
		case 'f': config = optarg; break;
		case 'v': level = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("troupe %s\n", TROUPE_VERSION); return 0;
		default:
			fprintf(stderr, "troupe: see --help for the flags\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "troupe: unexpected argument \"%s\"; see --help\n", argv[optind]);
		return 2;
	}
	ext_config_defaults(&cfg);
	if (config && ext_config_load(&cfg, config, err, sizeof(err)) < 0) {
		fprintf(stderr, "troupe: %s\n", err);
		return 2;
	}
	if (listen && ext_config_parse_listen(&cfg, listen, err, sizeof(err)) < 0) {
		fprintf(stderr, "troupe: --listen: %s\n", err);
		return 2;
	}
	if (level && log_level_parse(level, &cfg.log_level) < 0) {
		fprintf(stderr, "troupe: --log-level must be debug, info, warn or error\n");
		return 2;
	}
	if (ext_config_validate(&cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "troupe: %s%s\n", config ? "config: " : "", err);
		return 2;
	}
	if (!cluster) {
		fprintf(stderr, "troupe: no cluster state: give --cluster FILE (a snapshot such as "
			"config/examples/cluster-small.json); see --help\n");
		return 2;
	}
	log_set_level(cfg.log_level);

	/* Block the stop signals before any thread starts so that only sigwait
	 * below receives them. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = 1;
	cache = cache_new(&cfg.cache);
	if (!cache) {
		log_error("main", "cannot create the cache: %s", strerror(errno));
		goto out;
	}
	if (cache_snapshot_load(cache, cluster, err, sizeof(err)) < 0) {
		log_error("main", "%s", err);
		goto out;
	}
	cache_set_synced(cache, true);
	svc.cache = cache;
	svc.cfg = &cfg;
	svc.score = placement_score_find(cfg.score_policy);
	svc.source = cluster;
	server = ext_server_start(&svc, err, sizeof(err));
	if (!server) {
		log_error("main", "%s", err);
		goto out;
	}
	cache_get_stats(cache, &st);
	log_info("main", "troupe %s listening on http://%s%s%s:%u (cluster %s: %zu nodes, "
		 "%llu of %llu GPUs held; scoring %s)", TROUPE_VERSION,
		 strchr(cfg.listen_host, ':') ? "[" : "", cfg.listen_host,
		 strchr(cfg.listen_host, ':') ? "]" : "", ext_server_port(server), cluster, st.nodes,
		 (unsigned long long)st.gpus_held, (unsigned long long)st.gpus_allocatable,
		 cfg.score_policy);
	for (;;) {
		if (sigwait(&sigs, &sig) == 0 && (sig == SIGINT || sig == SIGTERM))
			break;
	}
	log_info("main", "received %s; stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
	ret = 0;
out:
	ext_server_stop(server);
	cache_free(cache);
	return ret;
}
