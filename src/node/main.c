/* troupe-node's main(): flags, then the publishing loop.
 *
 * Every --interval seconds (and once at start) it reads the GPUs (NVML, else
 * nvidia-smi, node.h) and writes them onto its Node when they changed. A node
 * where neither source works is said so once, each time the reason changes,
 * and nothing is published: troupe then falls back to its profiles or treats
 * the topology as unknown, as before. --print shows what would be published
 * without an API server; --once publishes once and exits (status 1 when that
 * failed), for a Job or a test. --allocator also runs the device plugin
 * (plugin.c) on a thread of its own, handed the GPUs and their health after
 * every read.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/api.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "node/node.h"
#include "troupe_version.h"

static volatile sig_atomic_t stopping;

/* Both sources' reasons, and the words around them. */
enum { READ_ERR_BUF = 2 * NODE_ERR_BUF + 64 };

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: troupe-node [--node NAME] [--kubeconfig FILE | --api-server URL] [options]\n"
		"       troupe-node --print [--nvml LIB] [--nvidia-smi PATH]\n"
		"\n"
		"troupe's node agent: publishes this node's GPU topology (troupe.io/gpu-topology,\n"
		"the matrix nvidia-smi topo -m prints) and GPU UUIDs (troupe.io/gpu-uuids) on its\n"
		"own Node, read from NVML, else from nvidia-smi, and only when they change; and\n"
		"writes the devices the kubelet gave each pod (troupe.io/gpu-ids-actual).\n"
		"\n"
		"Options:\n"
		"  --node NAME          the Node it runs on (default $NODE_NAME, which the\n"
		"                       DaemonSet sets from spec.nodeName).\n"
		"  --kubeconfig FILE    the API server of a kubeconfig's current context.\n"
		"  --api-server URL     the API server at URL (http:// for tests, https://\n"
		"                       checked against the system CAs), with --token-file.\n"
		"  --token-file FILE    with --api-server: the bearer token to send.\n"
		"                       Default (none of the three): in-cluster, the pod's\n"
		"                       service account.\n"
		"  --nvml LIB           the NVML library to dlopen (default libnvidia-ml.so.1,\n"
		"                       from the driver; a path for a fake in tests).\n"
		"  --nvidia-smi PATH    the fallback where NVML cannot be loaded (default\n"
		"                       nvidia-smi, searched in $PATH); \"\" for none.\n"
		"  --pod-resources-socket PATH\n"
		"                       the kubelet's PodResources API (default\n"
		"                       /var/lib/kubelet/pod-resources/kubelet.sock): each pod's\n"
		"                       devices as the kubelet gave them are written on the pod\n"
		"                       as troupe.io/gpu-ids-actual, which troupe believes.\n"
		"  --resource NAME      the device resource read back (default nvidia.com/gpu).\n"
		"  --no-read-back       publish the topology only.\n"
		"  --allocator          also be the kubelet's device plugin for --resource, in\n"
		"                       place of NVIDIA's (whole GPUs): the kubelet is told\n"
		"                       troupe's choice for each pod (GetPreferredAllocation),\n"
		"                       containers get NVIDIA_VISIBLE_DEVICES and CDI names, and a\n"
		"                       GPU with a device fault is reported Unhealthy.\n"
		"  --device-plugin-dir DIR\n"
		"                       with --allocator: the kubelet's device plugin directory\n"
		"                       (default /var/lib/kubelet/device-plugins), where it\n"
		"                       serves troupe-<resource>.sock and registers at kubelet.sock.\n"
		"  --cdi-kind KIND      with --allocator: the CDI device kind of the names\n"
		"                       Allocate answers, KIND=<device id> (default nvidia.com/gpu,\n"
		"                       as the NVIDIA container toolkit's CDI spec names GPUs).\n"
		"  --interval SECONDS   how often to look again (default 60, 5 to 86400); in\n"
		"                       between it waits for NVML's XID events, and a GPU that\n"
		"                       raises a device fault is published at once in\n"
		"                       troupe.io/gpu-unhealthy, which troupe never offers.\n"
		"  --once               publish once and exit: 0 published or unchanged, 1 not.\n"
		"  --print              print the annotations it would write and exit (no API\n"
		"                       server): 0, or 1 when no GPU source works.\n"
		"  --log-level LEVEL    error, warn, info (default) or debug.\n"
		"  --log-format FORMAT  text (default) or json, one object per line.\n"
		"  --version            print the version.\n"
		"  -h, --help           this text.\n");
}

/* The GPUs from NVML, else nvidia-smi; -ENOENT with both reasons in <err>
 * when neither works. */
static int read_gpus(const char *nvml, const char *smi, struct node_gpus *g, char *err,
		     size_t errlen)
{
	char nerr[NODE_ERR_BUF], serr[NODE_ERR_BUF];
	int rc = node_nvml_read(nvml, g, nerr, sizeof(nerr));

	if (rc == 0)
		return 0;
	if (!smi[0]) {
		snprintf(err, errlen, "%s; no nvidia-smi fallback (--nvidia-smi \"\")", nerr);
		return rc;
	}
	if (node_smi_read(smi, g, serr, sizeof(serr)) == 0) {
		log_info("node", "NVML unavailable (%s); read the topology from %s topo -m", nerr,
			 smi);
		return 0;
	}
	snprintf(err, errlen, "%s; and %s", nerr, serr);
	return -ENOENT;
}

static int print_once(const char *nvml, const char *smi)
{
	struct node_gpus *g = calloc(1, sizeof(*g));
	struct strbuf topo, uuids;
	char err[READ_ERR_BUF];
	int ret = 1;

	if (!g) {
		fprintf(stderr, "troupe-node: out of memory\n");
		return 1;
	}
	strbuf_init(&topo);
	strbuf_init(&uuids);
	if (read_gpus(nvml, smi, g, err, sizeof(err)) < 0) {
		fprintf(stderr, "troupe-node: no GPU topology: %s\n", err);
		goto out;
	}
	node_topo_render(g, &topo);
	node_uuids_render(g, &uuids);
	printf("%s: %s\n%s: %s\n%s:\n%s", NODE_ANN_SOURCE, g->source, NODE_ANN_UUIDS,
	       uuids.buf ? uuids.buf : "", NODE_ANN_TOPOLOGY, topo.buf ? topo.buf : "");
	ret = 0;
out:
	strbuf_fini(&topo);
	strbuf_fini(&uuids);
	free(g);
	return ret;
}

/* What a round does beyond publishing: the read-back, and its last failure
 * (logged again only when its words change). */
struct readback_opts {
	const char *socket;             /* NULL: no read-back */
	const char *resource;
	char last_err[READ_ERR_BUF];
};

/* The read-back part of a round. 0 or -1 (logged). */
static int read_back(struct cache_api *api, const char *node, const struct node_gpus *g,
		     struct readback_opts *rb)
{
	struct node_pod_devices *pods = NULL;
	char err[READ_ERR_BUF];
	unsigned written = 0, skipped = 0;
	size_t n = 0;
	int rc;

	rc = node_podresources_list(rb->socket, rb->resource, &pods, &n, err, sizeof(err));
	if (rc == 0)
		rc = node_readback(api, node, g, pods, n, &written, &skipped, err, sizeof(err));
	node_pod_devices_free(pods, n);
	if (rc < 0) {
		if (strcmp(err, rb->last_err) != 0)
			log_warn("node", "reading devices back on node %s: %s", node, err);
		snprintf(rb->last_err, sizeof(rb->last_err), "%s", err);
		return -1;
	}
	if (rb->last_err[0])
		log_info("node", "reading devices back on node %s again", node);
	rb->last_err[0] = '\0';
	log_debug("node", "node %s: %zu pods hold %s; %u written, %u skipped", node, n,
		  rb->resource, written, skipped);
	return 0;
}

/* One round: read and publish, then read back. 0 done (written or
 * unchanged), -1 not. Logs what happened; a failure is logged again only when
 * its words change. */
static int round_once(struct cache_api *api, const char *node, const char *nvml,
		      const char *smi, char *last_err, size_t last_len, struct readback_opts *rb,
		      uint64_t unhealthy, struct node_plugin *plugin)
{
	struct node_gpus *g = calloc(1, sizeof(*g));
	char err[READ_ERR_BUF];
	bool changed = false;
	int ret = -1;

	if (!g) {
		log_error("node", "out of memory");
		return -1;
	}
	if (read_gpus(nvml, smi, g, err, sizeof(err)) < 0) {
		if (strcmp(err, last_err) != 0)
			log_warn("node", "publishing no GPU topology for node %s: %s", node, err);
		snprintf(last_err, last_len, "%s", err);
		goto out;
	}
	g->unhealthy = unhealthy & (g->n >= 64 ? ~0ULL : (1ULL << g->n) - 1);
	if (plugin)
		node_plugin_set_gpus(plugin, g);
	if (node_publish(api, node, g, &changed, err, sizeof(err)) < 0) {
		if (strcmp(err, last_err) != 0)
			log_warn("node", "cannot publish the GPU topology of node %s: %s", node, err);
		snprintf(last_err, last_len, "%s", err);
		goto out;
	}
	if (changed)
		log_info("node", "published the topology of %u GPUs on node %s (from %s)", g->n,
			 node, g->source);
	else
		log_debug("node", "node %s: the topology of its %u GPUs is unchanged", node, g->n);
	last_err[0] = '\0';
	ret = rb->socket ? read_back(api, node, g, rb) : 0;
out:
	free(g);
	return ret;
}

/* Between two rounds: wait <interval> seconds for device faults NVML reports
 * (or just sleep where it reports none), ending early on a fault or SIGTERM.
 * Returns the GPUs newly faulted, each logged; <last_err> keeps the last
 * reason the watch could not run, logged once. */
static uint64_t wait_for_faults(const char *nvml, unsigned interval, uint64_t known,
				char *last_err, size_t last_len)
{
	struct node_xid seen[16];
	unsigned n = sizeof(seen) / sizeof(seen[0]);
	char err[NODE_ERR_BUF];
	uint64_t fresh = 0;

	if (node_nvml_watch(nvml, interval * 1000u, &stopping, seen, &n, err, sizeof(err)) < 0) {
		struct timespec ts = { 1, 0 };

		if (strcmp(err, last_err) != 0)
			log_info("node", "not watching for GPU faults: %s", err);
		snprintf(last_err, last_len, "%s", err);
		/* Sleep a second at a time so SIGTERM ends it at once. */
		for (unsigned s = 0; s < interval && !stopping; s++)
			nanosleep(&ts, NULL);
		return 0;
	}
	last_err[0] = '\0';
	for (unsigned i = 0; i < n; i++) {
		if (seen[i].gpu >= 64 || ((known | fresh) & (1ULL << seen[i].gpu)))
			continue;
		fresh |= 1ULL << seen[i].gpu;
		log_warn("node", "GPU %u raised XID %llu, a device fault: published as unhealthy "
			 "(" NODE_ANN_UNHEALTHY "), troupe offers it no more until troupe-node "
			 "restarts", seen[i].gpu, seen[i].xid);
	}
	return fresh;
}

/* The API server of --kubeconfig, else --api-server, else in-cluster. */
static struct cache_api *connect_api(const char *kubeconfig, const char *url, const char *token,
				     char *err, size_t errlen)
{
	if (kubeconfig)
		return cache_api_from_kubeconfig(kubeconfig, NULL, err, errlen);
	if (url)
		return cache_api_from_url(url, token, err, errlen);
	return cache_api_in_cluster(err, errlen);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "node", required_argument, NULL, 'n' },
		{ "kubeconfig", required_argument, NULL, 'k' },
		{ "api-server", required_argument, NULL, 'a' },
		{ "token-file", required_argument, NULL, 't' },
		{ "nvml", required_argument, NULL, 'L' },
		{ "nvidia-smi", required_argument, NULL, 'S' },
		{ "interval", required_argument, NULL, 'i' },
		{ "once", no_argument, NULL, 'o' },
		{ "print", no_argument, NULL, 'p' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "log-format", required_argument, NULL, 'F' },
		{ "pod-resources-socket", required_argument, NULL, 'P' },
		{ "resource", required_argument, NULL, 'R' },
		{ "no-read-back", no_argument, NULL, 'N' },
		{ "allocator", no_argument, NULL, 'A' },
		{ "device-plugin-dir", required_argument, NULL, 'D' },
		{ "cdi-kind", required_argument, NULL, 'C' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *node = getenv("NODE_NAME"), *kubeconfig = NULL, *url = NULL;
	const char *token = NULL, *nvml = "libnvidia-ml.so.1", *smi = "nvidia-smi";
	char err[NODE_ERR_BUF], last_err[READ_ERR_BUF] = "";
	struct cache_api *api = NULL, *plugin_api = NULL;
	struct node_plugin *plugin = NULL;
	const char *pr_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
	const char *dp_dir = "/var/lib/kubelet/device-plugins", *cdi_kind = "nvidia.com/gpu";
	bool allocator = false, read_back = true;
	struct readback_opts rb = { .resource = "nvidia.com/gpu" };
	bool once = false, print = false;
	uint64_t unhealthy = 0;
	char watch_err[NODE_ERR_BUF] = "";
	enum log_level level;
	enum log_format format;
	long interval = 60;
	int opt, ret = 1;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end = NULL;

		switch (opt) {
		case 'n': node = optarg; break;
		case 'k': kubeconfig = optarg; break;
		case 'a': url = optarg; break;
		case 't': token = optarg; break;
		case 'L': nvml = optarg; break;
		case 'S': smi = optarg; break;
		case 'o': once = true; break;
		case 'P': pr_socket = optarg; break;
		case 'R': rb.resource = optarg; break;
		case 'N': read_back = false; break;
		case 'A': allocator = true; break;
		case 'D': dp_dir = optarg; break;
		case 'C': cdi_kind = optarg; break;
		case 'p': print = true; break;
		case 'i':
			interval = strtol(optarg, &end, 10);
			if (!*optarg || *end || interval < 5 || interval > 86400) {
				fprintf(stderr, "troupe-node: --interval takes 5 to 86400 seconds\n");
				return 2;
			}
			break;
		case 'l':
			if (log_level_parse(optarg, &level) < 0) {
				fprintf(stderr, "troupe-node: --log-level takes error, warn, info or "
					"debug\n");
				return 2;
			}
			log_set_level(level);
			break;
		case 'F':
			if (log_format_parse(optarg, &format) < 0) {
				fprintf(stderr, "troupe-node: --log-format takes text or json\n");
				return 2;
			}
			log_set_format(format);
			break;
		case 'V': printf("troupe-node %s\n", TROUPE_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "troupe-node: unexpected argument \"%s\"; see --help\n",
			argv[optind]);
		return 2;
	}
	rb.socket = read_back ? pr_socket : NULL;
	if (allocator && (once || print)) {
		fprintf(stderr, "troupe-node: --allocator serves until stopped: not with --once or "
			"--print\n");
		return 2;
	}
	if (!*cdi_kind || !strchr(cdi_kind, '/') || strchr(cdi_kind, '=')) {
		fprintf(stderr, "troupe-node: --cdi-kind takes VENDOR/CLASS, as nvidia.com/gpu\n");
		return 2;
	}
	if (print)
		return print_once(nvml, smi);
	if (!node || !*node) {
		fprintf(stderr, "troupe-node: which node? give --node NAME or set NODE_NAME\n");
		return 2;
	}
	if (kubeconfig && url) {
		fprintf(stderr, "troupe-node: give --kubeconfig or --api-server, not both\n");
		return 2;
	}
	if (token && !url) {
		fprintf(stderr, "troupe-node: --token-file goes with --api-server\n");
		return 2;
	}
	cache_api_global_init();
	api = connect_api(kubeconfig, url, token, err, sizeof(err));
	if (!api) {
		fprintf(stderr, "troupe-node: %s\n", err);
		goto out;
	}
	log_info("node", "troupe-node %s for node %s, API server %s, every %lds; read-back %s%s; "
		 "device plugin %s%s", TROUPE_VERSION, node, cache_api_describe(api), interval,
		 rb.socket ? "from " : "off", rb.socket ? rb.socket : "",
		 allocator ? "for " : "off", allocator ? rb.resource : "");
	if (once) {
		ret = round_once(api, node, nvml, smi, last_err, sizeof(last_err), &rb, 0, NULL) == 0
			      ? 0 : 1;
		goto out;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	if (allocator) {
		char endpoint[128];
		struct node_plugin_opts po = {
			.dir = dp_dir, .endpoint = endpoint, .resource = rb.resource,
			.cdi_kind = cdi_kind, .pod_resources = pr_socket, .node = node,
		};

		/* "troupe-nvidia.com-gpu.sock": one socket per resource. */
		snprintf(endpoint, sizeof(endpoint), "troupe-%.100s.sock", rb.resource);
		for (char *c = endpoint; *c; c++)
			if (*c == '/')
				*c = '-';
		/* The plugin's thread has a connection of its own. */
		plugin_api = connect_api(kubeconfig, url, token, err, sizeof(err));
		po.api = plugin_api;
		if (!plugin_api || !(plugin = node_plugin_start(&po, err, sizeof(err)))) {
			fprintf(stderr, "troupe-node: the device plugin: %s\n", err);
			goto out;
		}
	}
	while (!stopping) {
		round_once(api, node, nvml, smi, last_err, sizeof(last_err), &rb, unhealthy, plugin);
		unhealthy |= wait_for_faults(nvml, (unsigned)interval, unhealthy, watch_err,
					     sizeof(watch_err));
	}
	log_info("node", "troupe-node stopping");
	ret = 0;
out:
	node_plugin_stop(plugin);
	cache_api_free(plugin_api);
	cache_api_free(api);
	cache_api_global_cleanup();
	return ret;
}
