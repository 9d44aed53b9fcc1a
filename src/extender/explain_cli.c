/* `troupe explain`: the answer of GET /debug/explain for a person at a
 * terminal (explain_print.c) or, with -o json, for a script.
 *
 *   troupe explain pod|podgroup NS/NAME --server URL [--token-file F]
 *       asks a running troupe's ops listener (libcurl; a bearer token when
 *       ops.auth is on);
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
#include <curl/curl.h>

#include "common/log.h"
#include "common/util.h"
#include "extender/config.h"

enum {
	EXPLAIN_CLI_TIMEOUT_S = 30,             /* a whole request to --server */
	EXPLAIN_CLI_MAX_BODY = 64 << 20,        /* the most of an answer read */
	EXPLAIN_CLI_TOKEN_MAX = 16384,          /* a bearer token file's size */
	EXPLAIN_CLI_URL_BUF = 2048,
	EXPLAIN_CLI_AUTH_BUF = EXPLAIN_CLI_TOKEN_MAX + 32,
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
	bool too_big;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t add = size * n;
	char *nb;

	if (b->len + add > EXPLAIN_CLI_MAX_BODY) {
		b->too_big = true;
		return 0;
	}
	nb = realloc(b->buf, b->len + add + 1);
	if (!nb)
		return 0;
	memcpy(nb + b->len, p, add);
	b->buf = nb;
	b->len += add;
	b->buf[b->len] = '\0';
	return add;
}

/* The bearer token in <path>, whitespace trimmed, into <out>. */
static int read_token(const char *path, char *out, size_t len, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t n = 0, a = 0;

	if (util_read_file(path, EXPLAIN_CLI_TOKEN_MAX, &buf, &n) < 0) {
		snprintf(err, errlen, "cannot read the token file %s: %s", path, strerror(errno));
		return -1;
	}
	while (a < n && (buf[a] == ' ' || buf[a] == '\n' || buf[a] == '\r' || buf[a] == '\t'))
		a++;
	while (n > a && (buf[n - 1] == ' ' || buf[n - 1] == '\n' || buf[n - 1] == '\r' ||
			 buf[n - 1] == '\t'))
		n--;
	if (n == a || n - a >= len) {
		snprintf(err, errlen, "the token file %s is %s", path, n == a ? "empty" : "too long");
		free(buf);
		return -1;
	}
	memcpy(out, buf + a, n - a);
	out[n - a] = '\0';
	free(buf);
	return 0;
}

/* GET <server>/debug/explain?<what>=<key>...: the status and body. */
static int fetch(const char *server, const char *token_file, const char *what, const char *key,
		 const char *examples, const char *best, long *status, struct body *b, char *err,
		 size_t errlen)
{
	char url[EXPLAIN_CLI_URL_BUF], auth[EXPLAIN_CLI_AUTH_BUF], curl_err[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdr = NULL;
	size_t sl = strlen(server);
	CURL *c;
	char *ek;
	CURLcode rc;
	int ret = -1;

	if (token_file) {
		memcpy(auth, "Authorization: Bearer ", 22);
		if (read_token(token_file, auth + 22, sizeof(auth) - 22, err, errlen) < 0)
			return -1;
	}
	c = curl_easy_init();
	if (!c) {
		snprintf(err, errlen, "cannot start libcurl");
		return -1;
	}
	ek = curl_easy_escape(c, key, 0);
	while (sl && server[sl - 1] == '/')
		sl--;
	if (!ek || snprintf(url, sizeof(url), "%.*s/debug/explain?%s=%s%s%s%s%s", (int)sl, server,
			    what, ek, examples ? "&examples=" : "", examples ? examples : "",
			    best ? "&best=" : "", best ? best : "") >= (int)sizeof(url)) {
		snprintf(err, errlen, "the URL is too long");
		goto out;
	}
	if (token_file)
		hdr = curl_slist_append(hdr, auth);
	hdr = curl_slist_append(hdr, "Accept: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)EXPLAIN_CLI_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	rc = curl_easy_perform(c);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "GET %.300s: %.180s", url,
			 b->too_big ? "the answer is too large" : curl_err[0] ? curl_err
								  : curl_easy_strerror(rc));
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	ret = 0;
out:
	curl_slist_free_all(hdr);
	curl_free(ek);
	curl_easy_cleanup(c);
	return ret;
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
		curl_global_init(CURL_GLOBAL_DEFAULT);
		rc = fetch(server, token_file, what, key, q.examples, q.best, &status, &b, err,
			   sizeof(err));
		curl_global_cleanup();
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
