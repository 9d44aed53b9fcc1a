/* troupe's entry point: read flags and configuration, load the cluster state,
 * serve until SIGINT or SIGTERM (SIGHUP reloads part of the file: reload.c).
 * Settings apply in this order, later winning:
 * built-in defaults, the --config file, command-line flags.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/api.h"
#include "cache/cache.h"
#include "cache/events.h"
#include "cache/lease.h"
#include "cache/podgroup_status.h"
#include "common/log.h"
#include "common/util.h"
#include "extender/config.h"
#include "extender/explain.h"
#include "extender/cycle.h"
#include "extender/top_choice.h"
#include "placement/placement.h"
#include "extender/server.h"
#include "extender/ops_server.h"
#include "extender/reload.h"
#include "extender/simulate.h"
#include "extender/verbs.h"
#include "troupe_version.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: troupe --kubeconfig FILE [--context NAME] [options]\n"
		"       troupe --api-server URL [--token-file FILE] [options]\n"
		"       troupe [options]              (in a pod: its service account)\n"
		"       troupe --cluster FILE [options]   (a snapshot; binds stay in memory)\n"
		"       troupe explain pod|podgroup NS/NAME ...   (why it is pending; see\n"
		"                       troupe explain --help)\n"
		"       troupe simulate --cluster FILE --workload TRACE [options]\n"
		"                       (what-if replay; see troupe simulate --help)\n"
		"\n"
		"troupe is a Kubernetes scheduler extender for GPU clusters. kube-scheduler calls\n"
		"it over HTTP (POST /filter, /prioritize, /bind, /preempt) to place pods that ask\n"
		"for GPUs. It follows a live cluster through the API server; a snapshot file is\n"
		"for trying it out and for tests.\n"
		"\n"
		"Cluster state (exactly one source):\n"
		"  --kubeconfig FILE    a live API server from a kubeconfig's current context\n"
		"                       (server, certificate-authority(-data), client-certificate/\n"
		"                       -key(-data), token, tokenFile, insecure-skip-tls-verify)\n"
		"  --context NAME       with --kubeconfig: use this context instead\n"
		"  --api-server URL     a live API server at URL (http:// for tests and\n"
		"                       `kubectl proxy`, https:// checked against the system CAs)\n"
		"  --token-file FILE    with --api-server: send the bearer token in FILE (re-read\n"
		"                       when it changes and after a 401)\n"
		"  (in a pod)           with none of the above and KUBERNETES_SERVICE_HOST/PORT\n"
		"                       set, the in-cluster service account is used\n"
		"  --cluster FILE       a cluster snapshot instead of an API server: a v1 List of\n"
		"                       Node, Pod and PodGroup objects, as `kubectl get\n"
		"                       nodes,pods,podgroups -A -o json` (or -o yaml) prints it.\n"
		"                       Binds are kept in memory only.\n"
		"\n"
		"Options:\n"
		"  --listen HOST:PORT   address to serve on (default 127.0.0.1:8888; use\n"
		"                       0.0.0.0:8888 to accept connections from other hosts,\n"
		"                       [::1]:8888 for IPv6, port 0 for any free port)\n"
		"  --ops-address HOST:PORT  address of the ops listener: /healthz /readyz\n"
		"                       /version /debug/state /debug/cache /debug/explain\n"
		"                       /debug/dashboard /metrics (default 127.0.0.1:8889;\n"
		"                       port 0 for any free port; ops.auth in the settings puts\n"
		"                       /debug (but the dashboard page's own files) and /metrics\n"
		"                       behind Kubernetes tokens and RBAC)\n"
		"  --config FILE        troupe's YAML settings (see config/troupe.yaml); flags\n"
		"                       given here override the file. Its queues and log_level\n"
		"                       are reloaded on SIGHUP and when the file changes (a\n"
		"                       mounted ConfigMap); the rest is read at start\n"
		"  --log-level LEVEL    debug, info (default), warn or error; overrides the\n"
		"                       file's log_level\n"
		"  --log-format FORMAT  text (default: TIME LEVEL [component] message) or json\n"
		"                       (one object per line: time, level, component, msg);\n"
		"                       overrides the file's log_format\n"
		"\n");
	/* Two strings: one would pass the 4,095 bytes C99 promises to support. */
	fprintf(out,
		"TLS on the verbs port (kube-scheduler's enableHTTPS and tlsConfig; these\n"
		"override the file's tls.* keys; every file is re-read when it changes):\n"
		"  --tls-cert-file FILE       serve HTTPS with this PEM certificate chain\n"
		"  --tls-key-file FILE        ... and this unencrypted PEM private key\n"
		"  --tls-client-ca-file FILE  require a client certificate signed by a CA in\n"
		"                             FILE (the CA of kube-scheduler's tlsConfig\n"
		"                             certFile)\n"
		"  --tls-allowed-subject NAME who may call: a certificate CN, or, when NAME\n"
		"                             holds '=', the whole subject DN as RFC 4514\n"
		"                             writes it (O=system,CN=kube-scheduler); repeat\n"
		"                             for more\n"
		"\n"
		"  --leader-elect       run as one of several replicas behind a Service: only\n"
		"                       the holder of the Lease (leader_election.namespace/name,\n"
		"                       default kube-system/troupe) is ready and binds\n"
		"  --leader-elect-identity ID\n"
		"                       this replica's holder identity (default host name and\n"
		"                       pid)\n"
		"  -h, --help           show this help and exit\n"
		"  --version            print the version and exit\n"
		"\n"
		"Signals: SIGINT or SIGTERM stop troupe; SIGHUP reloads --config's queues and\n"
		"log_level (a file that does not load changes nothing, and the log says why).\n"
		"Exit status: 0 after SIGINT or SIGTERM, 1 when troupe cannot run, 2 for bad\n"
		"flags or settings.\n"
		"\n"
		"Endpoints: POST /filter /prioritize /bind /preempt and GET /healthz /readyz\n"
		"/version on --listen; GET /healthz /readyz /version /metrics /debug/state\n"
		"/debug/cache /debug/explain?pod=NS/NAME /debug/dashboard (a live page: open\n"
		"it in a browser) on --ops-address. Docs: docs/operations.md and\n"
		"docs/configuration.md.\n");
}

/* Where the cluster state comes from, for logs and replies: a snapshot's path
 * or cache_api_describe's text; longer is cut. */
enum { SOURCE_BUF = 600 };

/* ---- Events ---- */

/* The gang manager's notes as Events on the PodGroup, and on the member pod
 * named, so both `kubectl describe`s show them. The manager's lock is held:
 * this only queues (cache_events_emit). */
static void gang_noted(void *ctx, const struct gang_note *n)
{
	/* The notes that carry state (counts, nodes) key their series too. */
	static const struct { const char *reason, *action; unsigned type; } kinds[] = {
		[GANG_NOTE_PLANNED] = { "GangPlanned", "Scheduling",
					CACHE_EVENT_NORMAL | CACHE_EVENT_BY_NOTE },
		[GANG_NOTE_WAITING] = { "GangWaitingForMembers", "Scheduling",
					CACHE_EVENT_NORMAL | CACHE_EVENT_BY_NOTE },
		[GANG_NOTE_TIMED_OUT] = { "GangTimedOut", "Binding",
					  CACHE_EVENT_WARNING | CACHE_EVENT_BY_NOTE },
		[GANG_NOTE_BOUND] = { "GangBound", "Binding", CACHE_EVENT_NORMAL },
		[GANG_NOTE_HOLD] = { "GangStarvationHold", "Scheduling", CACHE_EVENT_NORMAL },
	};
	const struct cache_event_ref pg = { CACHE_EVENT_PODGROUP_KIND,
					    CACHE_EVENT_PODGROUP_API_VERSION, n->ns, n->name, NULL };
	const struct cache_event_ref pod = { "Pod", "v1", n->ns, n->member_name, n->member_uid };
	unsigned type;

	if ((unsigned)n->kind >= sizeof(kinds) / sizeof(kinds[0]))
		return;
	type = kinds[n->kind].type;
	cache_events_emit(ctx, type, &pg, kinds[n->kind].reason, kinds[n->kind].action, "%s",
			  n->text);
	if (n->member_uid && n->member_name)
		cache_events_emit(ctx, type, &pod, kinds[n->kind].reason, kinds[n->kind].action,
				  "gang %s: %s", n->name, n->text);
}

/* ---- TLS flags ---- */
enum { OPT_TLS_CERT = 256, OPT_TLS_KEY, OPT_TLS_CA, OPT_TLS_SUBJECT, OPT_LOG_FORMAT };

enum { MAX_TLS_SUBJECT_FLAGS = EXT_TLS_MAX_SUBJECTS + 1 };

struct tls_flags {
	const char *cert, *key, *ca;
	const char *subjects[MAX_TLS_SUBJECT_FLAGS];
	unsigned n_subjects;
};

/* Apply the TLS flags over the file's tls.*: given subjects replace the
 * file's list. Returns 0 or -EINVAL with <err> set. */
static int apply_tls_flags(struct ext_config *cfg, const struct tls_flags *f, char *err,
			   size_t errlen)
{
	int ret = 0;

	if (f->cert)
		ret = ext_config_set_tls(cfg, "cert_file", f->cert, err, errlen);
	if (!ret && f->key)
		ret = ext_config_set_tls(cfg, "key_file", f->key, err, errlen);
	if (!ret && f->ca)
		ret = ext_config_set_tls(cfg, "client_ca_file", f->ca, err, errlen);
	if (f->n_subjects)
		cfg->tls.n_allowed_subjects = 0;
	for (unsigned i = 0; !ret && i < f->n_subjects; i++)
		ret = ext_config_set_tls(cfg, "allowed_subjects", f->subjects[i], err, errlen);
	return ret;
}

/* Leader election's namespace and identity where the settings leave them
 * empty: the pod's service-account namespace (else kube-system), and the host
 * name with the pid, as client-go's users make theirs. */
static void leader_election_fill(struct ext_config *cfg)
{
	const char *dir = getenv("TROUPE_SERVICEACCOUNT_DIR");     /* tests only */
	char path[512], host[256] = "troupe", *buf = NULL;
	size_t len, n;

	if (!cfg->leader_election.ns[0]) {
		snprintf(path, sizeof(path), "%s/namespace",
			 dir ? dir : "/var/run/secrets/kubernetes.io/serviceaccount");
		n = 0;
		if (util_read_file(path, 4096, &buf, &len) == 0) {
			while (n < len && buf[n] != '\n' && buf[n] != ' ' && buf[n] != '\r')
				n++;
			if (n && n < sizeof(cfg->leader_election.ns))
				snprintf(cfg->leader_election.ns, sizeof(cfg->leader_election.ns),
					 "%.*s", (int)n, buf);
		}
		free(buf);
		if (!cfg->leader_election.ns[0])
			snprintf(cfg->leader_election.ns, sizeof(cfg->leader_election.ns),
				 "kube-system");
	}
	if (!cfg->leader_election.identity[0]) {
		if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
			snprintf(host, sizeof(host), "troupe");
		host[sizeof(host) - 1] = '\0';
		snprintf(cfg->leader_election.identity, sizeof(cfg->leader_election.identity),
			 "%.200s_%ld", host, (long)getpid());
	}
}

/* Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad usage or settings. */
int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "ops-address", required_argument, NULL, 'o' },
		{ "cluster", required_argument, NULL, 'c' },
		{ "kubeconfig", required_argument, NULL, 'k' },
		{ "context", required_argument, NULL, 'x' },
		{ "api-server", required_argument, NULL, 'a' },
		{ "token-file", required_argument, NULL, 't' },
		{ "config", required_argument, NULL, 'f' },
		{ "log-level", required_argument, NULL, 'v' },
		{ "log-format", required_argument, NULL, OPT_LOG_FORMAT },
		{ "leader-elect", no_argument, NULL, 'L' },
		{ "leader-elect-identity", required_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		/* ---- TLS ---- */
		{ "tls-cert-file", required_argument, NULL, OPT_TLS_CERT },
		{ "tls-key-file", required_argument, NULL, OPT_TLS_KEY },
		{ "tls-client-ca-file", required_argument, NULL, OPT_TLS_CA },
		{ "tls-allowed-subject", required_argument, NULL, OPT_TLS_SUBJECT },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen = NULL, *cluster = NULL, *config = NULL, *level = NULL;
	const char *log_format = NULL;
	const char *kubeconfig = NULL, *context = NULL, *api_url = NULL, *token_file = NULL;
	const char *ops_address = NULL;
	struct ext_ops_server *ops = NULL;
	const char *le_identity = NULL;
	bool le_flag = false;
	struct cache_lease *lease = NULL;
	struct cache_api *api = NULL;
	struct cache_informer *informer = NULL;
	struct cache_binder *binder = NULL;
	struct placement_registry *registry = NULL;
	struct gang_manager *gangs = NULL;
	struct ext_recover *recover = NULL;
	struct cache_events *events = NULL;
	struct cache_pgs *pgstatus = NULL;
	static struct ext_counters counters;
	char source[SOURCE_BUF];
	int sources;
	struct ext_config cfg;
	struct ext_service svc = { 0 };
	struct ext_server *server = NULL;
	struct cache *cache = NULL;
	struct cache_stats st;
	char err[EXT_ERR_LEN];
	sigset_t sigs;
	int opt, sig, ret = 2;
	struct tls_flags tls_flags = { 0 };
	struct ext_reload reload;

	/* Subcommands come first and own the rest of the command line:
	 * `troupe explain ...` (a client of the ops listener, or a snapshot) and
	 * `troupe simulate ...` (a what-if replay over a snapshot). */
	if (argc > 1 && strcmp(argv[1], "explain") == 0)
		return ext_explain_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "simulate") == 0)
		return ext_simulate_main(argc - 1, argv + 1);

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'l': listen = optarg; break;
		case 'o': ops_address = optarg; break;
		case 'c': cluster = optarg; break;
		case 'k': kubeconfig = optarg; break;
		case 'x': context = optarg; break;
		case 'a': api_url = optarg; break;
		case 't': token_file = optarg; break;
		case 'f': config = optarg; break;
		case 'v': level = optarg; break;
		case OPT_LOG_FORMAT: log_format = optarg; break;
		case 'L': le_flag = true; break;
		case 'I': le_identity = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("troupe %s\n", TROUPE_VERSION); return 0;
		/* ---- TLS ---- */
		case OPT_TLS_CERT: tls_flags.cert = optarg; break;
		case OPT_TLS_KEY: tls_flags.key = optarg; break;
		case OPT_TLS_CA: tls_flags.ca = optarg; break;
		case OPT_TLS_SUBJECT:
			if (tls_flags.n_subjects == MAX_TLS_SUBJECT_FLAGS) {
				fprintf(stderr, "troupe: --tls-allowed-subject: at most %d\n",
					EXT_TLS_MAX_SUBJECTS);
				return 2;
			}
			tls_flags.subjects[tls_flags.n_subjects++] = optarg;
			break;
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
	if (ops_address && ext_ops_config_parse_address(&cfg.ops, ops_address, err,
							sizeof(err)) < 0) {
		fprintf(stderr, "troupe: --ops-address: %s\n", err);
		return 2;
	}
	if (level && log_level_parse(level, &cfg.log_level) < 0) {
		fprintf(stderr, "troupe: --log-level must be debug, info, warn or error\n");
		return 2;
	}
	if (log_format) {
		enum log_format lf;

		if (log_format_parse(log_format, &lf) < 0) {
			fprintf(stderr, "troupe: --log-format must be text or json\n");
			return 2;
		}
		snprintf(cfg.log_format, sizeof(cfg.log_format), "%s", log_format);
	}
	/* ---- TLS ---- */
	if (apply_tls_flags(&cfg, &tls_flags, err, sizeof(err)) < 0) {
		fprintf(stderr, "troupe: %s\n", err);
		return 2;
	}
	if (le_flag)
		cfg.leader_election.enabled = true;
	if (le_identity && snprintf(cfg.leader_election.identity,
				    sizeof(cfg.leader_election.identity), "%s", le_identity) >=
			   (int)sizeof(cfg.leader_election.identity)) {
		fprintf(stderr, "troupe: --leader-elect-identity is too long\n");
		return 2;
	}
	if (ext_config_validate(&cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "troupe: %s%s\n", config ? "config: " : "", err);
		return 2;
	}
	sources = !!cluster + !!kubeconfig + !!api_url;
	if (sources > 1) {
		fprintf(stderr, "troupe: give exactly one of --cluster, --kubeconfig and "
			"--api-server\n");
		return 2;
	}
	if (context && !kubeconfig) {
		fprintf(stderr, "troupe: --context goes with --kubeconfig\n");
		return 2;
	}
	if (token_file && !api_url) {
		fprintf(stderr, "troupe: --token-file goes with --api-server\n");
		return 2;
	}
	if (cluster && cfg.leader_election.enabled) {
		fprintf(stderr, "troupe: leader election needs an API server, not --cluster\n");
		return 2;
	}
	if (sources == 0 && !cache_api_in_cluster_available()) {
		fprintf(stderr, "troupe: no cluster state: give --kubeconfig FILE, --api-server URL "
			"or --cluster FILE (a snapshot such as config/examples/cluster-small.json), "
			"or run in a pod; see --help\n");
		return 2;
	}
	log_set_level(cfg.log_level);
	{
		enum log_format lf = LOG_FORMAT_TEXT;

		(void)log_format_parse(cfg.log_format, &lf);     /* validated with the file */
		log_set_format(lf);
	}

	/* Block the stop signals, and SIGHUP (reload troupe.yaml), before any
	 * thread starts so that only sigwait below receives them. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = 1;
	cache_api_global_init();
	/* Each node's GPU topology is derived once, on the cache's writer. */
	registry = placement_registry_new();
	if (!registry) {
		log_error("main", "out of memory");
		goto out;
	}
	cfg.cache.node_derive = placement_topo_derive;
	cfg.cache.node_release = placement_topo_release;
	cfg.cache.hook_ctx = registry;
	cache = cache_new(&cfg.cache);
	if (!cache) {
		log_error("main", "cannot create the cache: %s", strerror(errno));
		goto out;
	}
	if (cluster) {
		if (cache_snapshot_load(cache, cluster, err, sizeof(err)) < 0) {
			log_error("main", "%s", err);
			goto out;
		}
		cache_set_synced(cache, true);
		snprintf(source, sizeof(source), "%s", cluster);
	} else {
		if (kubeconfig)
			api = cache_api_from_kubeconfig(kubeconfig, context, err, sizeof(err));
		else if (api_url)
			api = cache_api_from_url(api_url, token_file, err, sizeof(err));
		else
			api = cache_api_in_cluster(err, sizeof(err));
		if (!api) {
			log_error("main", "%s", err);
			ret = 2;
			goto out;
		}
		snprintf(source, sizeof(source), "%s", cache_api_describe(api));
		/* The informer marks the cache synced once every list is applied
		 * (until then filter says it is syncing) and keeps troupe's
		 * readiness: /readyz answers 503 while a list is missing, a stream
		 * cannot reach the API server or a permission is missing. */
		informer = cache_informer_start(cache, api, &cfg.informer, err, sizeof(err));
		binder = informer ? cache_binder_start(api, cfg.bind_timeout_s * 1000, err,
						       sizeof(err)) : NULL;
		if (!informer || !binder) {
			log_error("main", "%s", err);
			goto out;
		}
		log_info("main", "cluster state from the API server at %s", source);
		if (cfg.leader_election.enabled) {
			/* A standby keeps its informer running (a warm cache for a
			 * takeover) but is not ready and posts nothing. */
			struct cache_lease_opts lo;

			leader_election_fill(&cfg);
			cache_lease_opts_defaults(&lo);
			lo.ns = cfg.leader_election.ns;
			lo.name = cfg.leader_election.name;
			lo.identity = cfg.leader_election.identity;
			lo.lease_duration_s = cfg.leader_election.lease_duration_s;
			lo.renew_deadline_s = cfg.leader_election.renew_deadline_s;
			lo.retry_period_s = cfg.leader_election.retry_period_s;
			lease = cache_lease_start(api, &lo, NULL, NULL, err, sizeof(err));
			if (!lease) {
				log_error("main", "leader election: %s", err);
				goto out;
			}
			cache_binder_set_gate(binder, lease);
		}
	}
	svc.cache = cache;
	svc.cfg = &cfg;
	svc.score = placement_score_find(cfg.score_policy);
	svc.source = source;
	svc.binder = binder;
	svc.lease = lease;
	svc.informer = informer;
	svc.registry = registry;
	if (binder && cfg.events.enabled) {
		/* Events only where troupe talks to an API server; the recorder's
		 * worker posts them, nothing waits for it. */
		events = cache_events_new(cache, api, &cfg.events.opts);
		if (!events)
			log_warn("main", "events: cannot start the recorder (%s); troupe runs "
				 "without Events", strerror(errno));
		cfg.gang.notify = events ? gang_noted : NULL;
		cfg.gang.notify_ctx = events;
		svc.events = events;
	}
	gangs = gang_manager_new(cache, &cfg.gang);
	if (!gangs) {
		log_error("main", "cannot start the gang manager");
		goto out;
	}
	svc.gangs = gangs;
	if (binder && cfg.recover.enabled) {
		/* Gangs a replica left partly bound (recover.c): only where troupe
		 * posts Bindings itself. */
		recover = ext_recover_new(&svc, api, &cfg.recover);
		if (!recover || ext_recover_start(recover) < 0) {
			log_error("main", "cannot start the gang recovery");
			goto out;
		}
		svc.recover = recover;
	}
	if (api && cfg.pgstatus.enabled) {
		/* PodGroup status (cache/podgroup_status.h): its own thread, off
		 * the verbs' path; with leader election the leader's only. */
		pgstatus = cache_pgs_start(cache, api, lease, &cfg.pgstatus, err, sizeof(err));
		if (!pgstatus) {
			log_error("main", "%s", err);
			goto out;
		}
		svc.pgstatus = pgstatus;
	}
	svc.counters = &counters;
	/* Without it (no memory) prioritize only does its own lookups. */
	svc.cycle = ext_cycle_new();
	/* Without it (no memory) troupe_bind_top_choice_total counts nothing. */
	svc.top_choice = ext_top_choice_new();
	server = ext_server_start(&svc, err, sizeof(err));
	if (!server) {
		log_error("main", "%s", err);
		goto out;
	}
	cache_get_stats(cache, &st);
	log_info("main", "troupe %s listening on %s://%s%s%s:%u (cluster %s: %zu nodes, "
		 "%llu of %llu GPUs held%s; scoring %s)", TROUPE_VERSION,
		 ext_server_is_tls(server) ? "https" : "http",
		 strchr(cfg.listen_host, ':') ? "[" : "", cfg.listen_host,
		 strchr(cfg.listen_host, ':') ? "]" : "", ext_server_port(server), source, st.nodes,
		 (unsigned long long)st.gpus_held, (unsigned long long)st.gpus_allocatable,
		 cache_is_synced(cache) ? "" : ", still syncing", cfg.score_policy);
	/* After the line above: tests read the verbs' port from the first
	 * "listening on" line. */
	svc.server = server;
	ops = ext_ops_server_start(&cfg.ops, &svc, api, err, sizeof(err));
	if (!ops) {
		log_error("main", "%s", err);
		goto out;
	}
	ext_reload_init(&reload, config, level != NULL, &cfg);
	for (unsigned ticks = 1;; ticks++) {
		/* Between signals, every 2 s: a look at troupe.yaml (a mounted
		 * ConfigMap changes without a signal); every 10 s housekeeping:
		 * release pods whose Binding was never confirmed
		 * (cache.unconfirmed_bind_seconds), forget pods seen only in
		 * filter calls (cache.filter_only_pod_seconds). */
		struct timespec tick = { 2, 0 };

		sig = sigtimedwait(&sigs, NULL, &tick);
		if (sig == SIGINT || sig == SIGTERM)
			break;
		if (sig == SIGHUP) {
			(void)ext_reload_changed(&reload);      /* seen now */
			ext_reload_apply(&reload, gangs, "SIGHUP");
		} else if (ext_reload_changed(&reload)) {
			ext_reload_apply(&reload, gangs, "the file changed");
		}
		if (ticks % 5 == 0)
			cache_pod_expire(cache, (uint64_t)cfg.unconfirmed_bind_s * 1000000000ULL,
					 (uint64_t)cfg.filter_only_pod_s * 1000000000ULL);
	}
	log_info("main", "received %s; stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
	ret = 0;
	/* Stop leading first and release the Lease, so a standby takes over
	 * at its next attempt instead of after a lease duration; the binder
	 * posts nothing from here on. */
	cache_lease_stop(lease);
out:
	/* Held gang binds and the binder first: they answer every bind still
	 * waiting, which resumes their connections, so the server can then close
	 * cleanly. */
	ext_ops_server_stop(ops);
	ext_recover_stop(recover);      /* no new posts; freed after the binder */
	cache_pgs_stop(pgstatus);       /* before the informer and the Lease it reads */
	gang_manager_shutdown(gangs);
	cache_binder_shutdown(binder);
	/* Their answers are queued on resumed connections: let them go out. */
	ext_server_drain(server, 2000);
	ext_server_stop(server);
	gang_manager_free(gangs);
	ext_cycle_free(svc.cycle);
	ext_top_choice_free(svc.top_choice);
	cache_binder_free(binder);
	/* Its Bindings' answers ran on the binder thread, which is gone now. */
	ext_recover_free(recover);
	/* Nothing emits any more: the gang manager, binder, recovery and
	 * server are stopped. */
	cache_events_free(events);
	cache_lease_free(lease);
	cache_informer_stop(informer);
	cache_free(cache);
	placement_registry_free(registry);
	cache_api_free(api);
	cache_api_global_cleanup();
	return ret;
}
