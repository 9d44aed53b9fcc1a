/* `troupe explain`: the answer of GET /debug/explain for a person at a
 * terminal (explain_print.c) or, with -o json, for a script.
 *
 *   troupe explain pod|podgroup NS/NAME --server URL [--token-file F]
 *       asks a running troupe's ops listener (through the cache's API client;
 *       a bearer token when ops.auth is on);
 *   troupe explain pod|podgroup NS/NAME --cluster SNAPSHOT [--config F]
 *       loads the snapshot into a cache as `troupe --cluster` does (the same
 *       settings, topologies and gang manager) and answers here, without a
 *       server: the same code answers, so the same words come out.
 *
 * Exit status: 0 answered; 1 no answer (unknown pod, server unreachable or
 * refusing); 2 bad usage.
 */
#include "extender/explain.h"
#include "extender/explain_internal.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cache/api.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/util.h"
#include "extender/config.h"

enum {
	EXPLAIN_CLI_MAX_BODY = 64 << 20,        /* the most of an answer read */
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: troupe explain pod NAMESPACE/NAME --server URL [--token-file FILE] [options]\n"
		"       troupe explain pod NAMESPACE/NAME --cluster SNAPSHOT [--config FILE] [options]\n"
		"       troupe explain podgroup NAMESPACE/NAME (--server URL | --cluster SNAPSHOT) ...\n"
		"\n"
		"Says why a pod or a gang is pending, in troupe's own words: the pod's GPU\n"
		"request and topology policy; every node grouped by the reason filter refuses it\n"
		"(with counts and example nodes, in filter's exact words); for the best nodes the\n"
		"devices troupe would pick and the terms of their score; for a gang its members\n"
		"and quorum, its plan or why there is none, and the closest network domain; the\n"
		"queue's dominant share. The answer is GET /debug/explain's (docs/reference.md).\n"
		"\n"
		"Where the answer comes from (exactly one):\n"
		"  --server URL         a running troupe's ops listener, e.g. http://127.0.0.1:8889\n"
		"                       (https:// is checked against the system CAs)\n"
		"  --token-file FILE    with --server: send the bearer token in FILE, for an ops\n"
		"                       listener with ops.auth on (the token needs RBAC for the\n"
		"                       non-resource URL /debug/explain)\n"
		"  --cluster SNAPSHOT   answer here from a cluster snapshot (a v1 List of Node,\n"
		"                       Pod and PodGroup objects, as `kubectl get\n"
		"                       nodes,pods,podgroups -A -o json` prints it), as\n"
		"                       `troupe --cluster` would\n"
		"  --config FILE        with --cluster: troupe's settings (scoring, GPU resource\n"
		"                       names, gang domain levels, queues), as the daemon reads them\n"
		"\n"
		"Options:\n"
		"  -o, --output FORMAT  text (default: for a person) or json (the endpoint's\n"
		"                       JSON, unchanged)\n"
		"  --examples N         example nodes per reason (default %d; 0 for counts only)\n"
		"  --best N             best nodes shown with their device sets (default %d,\n"
		"                       at most %d)\n"
		"  -h, --help           show this help and exit\n"
		"\n"
		"Exit status: 0 answered, 1 no answer (no such pod or group, the server cannot be\n"
		"reached or refused), 2 bad usage.\n",
		EXPLAIN_EXAMPLES_DEFAULT, EXPLAIN_BEST_DEFAULT, EXPLAIN_BEST_MAX);
}

struct body {
	char *buf;
	size_t len;
};

/* <s> percent-encoded into <sb>, as a query value (RFC 3986's unreserved
 * characters kept). */
static void put_escaped(struct strbuf *sb, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~')
			strbuf_putc(sb, (char)c);
		else
			strbuf_printf(sb, "%%%c%c", hex[c >> 4], hex[c & 15]);
	}
}

/* GET <server>/debug/explain?<what>=<key>...: the status and body, through
 * the cache's API client (the same TLS and bearer token handling as troupe's
 * requests to the API server; libcurl stays in the cache). */
static int fetch(const char *server, const char *token_file, const char *what, const char *key,
		 const char *examples, const char *best, long *status, struct body *b, char *err,
		 size_t errlen)
{
	static const char UNREACHABLE[] = "API server unreachable: ";
	struct strbuf path = STRBUF_INIT;
	char why[TROUPE_MESSAGE_BUF];
	struct cache_api *api;
	size_t sl = strlen(server);
	char *base;
	int rc;

	while (sl && server[sl - 1] == '/')
		sl--;
	base = strndup(server, sl);
	if (!base) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	api = cache_api_from_url(base, token_file, err, errlen);
	free(base);
	if (!api)
		return -1;
	strbuf_printf(&path, "/debug/explain?%s=", what);
	put_escaped(&path, key);
	if (examples) {
		strbuf_puts(&path, "&examples=");
		put_escaped(&path, examples);
	}
	if (best) {
		strbuf_puts(&path, "&best=");
		put_escaped(&path, best);
	}
	rc = cache_api_get(api, path.buf, EXPLAIN_CLI_MAX_BODY, status, &b->buf, &b->len, why,
			   sizeof(why));
	if (rc < 0) {
		/* The client words it for the API server; here it is a troupe. */
		const char *w = strncmp(why, UNREACHABLE, strlen(UNREACHABLE)) == 0 ?
				why + strlen(UNREACHABLE) : why;

		snprintf(err, errlen, "GET %.*s%.200s: %.200s", (int)(sl < 200 ? sl : 200), server,
			 path.buf, w);
	}
	strbuf_fini(&path);
	cache_api_free(api);
	return rc < 0 ? -1 : 0;
}

/* The snapshot mode's gang manager clock: stopped, so that its expiry thread
 * never runs a fairness pass (the first comes once the clock passes 1 s). The
 * answer is then that of a troupe that has just loaded the snapshot, every
 * time, instead of depending on whether the thread's first pass won the race
 * with the question: no gang is waiting or holding yet ("manager": null), and
 * "planNow" says what the planner would do. */
static uint64_t stopped_clock(void *ctx)
{
	(void)ctx;
	return 1;
}

/* Answer here from <snapshot>, as `troupe --cluster` would just after loading
 * it. */
static int local(const char *snapshot, const char *config, const struct ext_explain_query *q,
		 long *status, struct body *b, char *err, size_t errlen)
{
	static struct ext_config cfg;  /* the cache keeps pointers into it */
	struct placement_registry *registry = NULL;
	struct ext_service svc = { 0 };
	struct cache *cache = NULL;
	struct ext_reply r;
	int ret = -1;

	ext_config_defaults(&cfg);
	if (config && ext_config_load(&cfg, config, err, errlen) < 0)
		return -2;
	if (ext_config_validate(&cfg, err, errlen) < 0)
		return -2;
	registry = placement_registry_new();
	if (!registry) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	cfg.cache.node_derive = placement_topo_derive;
	cfg.cache.node_release = placement_topo_release;
	cfg.cache.hook_ctx = registry;
	cache = cache_new(&cfg.cache);
	if (!cache) {
		snprintf(err, errlen, "cannot create the cache: %s", strerror(errno));
		goto out;
	}
	if (cache_snapshot_load(cache, snapshot, err, errlen) < 0)
		goto out;
	cache_set_synced(cache, true);
	svc.cache = cache;
	svc.cfg = &cfg;
	svc.score = placement_score_find(cfg.score_policy);
	svc.source = snapshot;
	svc.registry = registry;
	/* A fresh manager: a snapshot holds no plans, so every gang is idle. */
	cfg.gang.now_ns = stopped_clock;
	svc.gangs = gang_manager_new(cache, &cfg.gang);
	ext_reply_init(&r);
	ext_explain(&svc, q, &r);
	*status = r.status;
	b->buf = strbuf_take(&r.body, &b->len);
	ext_reply_fini(&r);
	if (svc.gangs) {
		gang_manager_shutdown(svc.gangs);
		gang_manager_free(svc.gangs);
	}
	ret = b->buf ? 0 : -1;
	if (ret < 0)
		snprintf(err, errlen, "out of memory");
out:
	cache_free(cache);
	placement_registry_free(registry);
	return ret;
}

/* Why the answer is not one: its error (explain's form, or an ops.auth
 * refusal's Status message). */
static void print_refusal(long status, const struct body *b)
{
	cJSON *j = b->buf ? cJSON_ParseWithLength(b->buf, b->len) : NULL;
	const char *msg = json_str(j, "error");

	if (!msg)
		msg = json_str(j, "message");
	if (msg && strncmp(msg, "troupe: ", 8) == 0)
		msg += 8;
	fprintf(stderr, "troupe explain: %s (HTTP %ld)\n", msg ? msg : "no explanation in the answer",
		status);
	cJSON_Delete(j);
}

int ext_explain_main(int argc, char **argv)
{
	enum { OPT_EXAMPLES = 256, OPT_BEST };
	static const struct option opts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "token-file", required_argument, NULL, 't' },
		{ "cluster", required_argument, NULL, 'c' },
		{ "config", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "examples", required_argument, NULL, OPT_EXAMPLES },
		{ "best", required_argument, NULL, OPT_BEST },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *server = NULL, *token_file = NULL, *cluster = NULL, *config = NULL;
	const char *output = "text", *what, *key;
	struct ext_explain_query q = { 0 };
	struct body b = { 0 };
	char err[EXT_ERR_LEN];
	long status = 0;
	int opt, rc;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		switch (opt) {
		case 's': server = optarg; break;
		case 't': token_file = optarg; break;
		case 'c': cluster = optarg; break;
		case 'f': config = optarg; break;
		case 'o': output = optarg; break;
		case OPT_EXAMPLES: q.examples = optarg; break;
		case OPT_BEST: q.best = optarg; break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "troupe explain: see troupe explain --help\n");
			return 2;
		}
	}
	if (argc - optind != 2 || (strcmp(argv[optind], "pod") != 0 &&
				   strcmp(argv[optind], "podgroup") != 0)) {
		fprintf(stderr, "troupe explain: give what to explain: pod NAMESPACE/NAME or "
			"podgroup NAMESPACE/NAME; see troupe explain --help\n");
		return 2;
	}
	what = argv[optind];
	key = argv[optind + 1];
	if (strcmp(output, "text") != 0 && strcmp(output, "json") != 0) {
		fprintf(stderr, "troupe explain: -o must be text or json\n");
		return 2;
	}
	if (!!server == !!cluster) {
		fprintf(stderr, "troupe explain: give exactly one of --server URL and --cluster "
			"SNAPSHOT\n");
		return 2;
	}
	if (token_file && !server) {
		fprintf(stderr, "troupe explain: --token-file goes with --server\n");
		return 2;
	}
	if (config && !cluster) {
		fprintf(stderr, "troupe explain: --config goes with --cluster (a server has its "
			"own)\n");
		return 2;
	}
	if (strcmp(what, "pod") == 0)
		q.pod = key;
	else
		q.podgroup = key;
	/* Refuse a bad name here, with the server's words, before any work. */
	{
		char ns[K8S_NAMESPACE_BUF], name[K8S_NAME_BUF];

		if (ext__explain_parse_key(what, key, ns, name, err, sizeof(err)) < 0) {
			fprintf(stderr, "troupe explain: %s\n", err);
			return 2;
		}
	}
	log_set_level(LOG_WARN);        /* the snapshot's loading lines are not the answer */
	if (server) {
		cache_api_global_init();
		rc = fetch(server, token_file, what, key, q.examples, q.best, &status, &b, err,
			   sizeof(err));
		cache_api_global_cleanup();
	} else {
		rc = local(cluster, config, &q, &status, &b, err, sizeof(err));
	}
	if (rc < 0) {
		fprintf(stderr, "troupe explain: %s\n", err);
		free(b.buf);
		return rc == -2 ? 2 : 1;
	}
	if (status != 200) {
		print_refusal(status, &b);
		free(b.buf);
		return status == 400 ? 2 : 1;
	}
	if (strcmp(output, "json") == 0)
		fprintf(stdout, "%.*s\n", (int)b.len, b.buf ? b.buf : "");
	else if (ext__explain_print(stdout, b.buf ? b.buf : "", b.len) < 0)
		fprintf(stderr, "troupe explain: the answer is not an explanation: %.200s\n",
			b.buf ? b.buf : "");
	free(b.buf);
	return 0;
}
