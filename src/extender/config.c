/* Configuration. The YAML file is turned into JSON (common/yamljson) and walked
 * against a table of known keys; every key the table does not know is an error
 * naming its full path, so a typo never silently falls back to a default.
 *
 *   listen: 127.0.0.1:8888
 *   log_level: info
 *   http:
 *     threads: 0                    # one per core
 *     connection_limit: 1024        # the longest-idle one makes room
 *     connection_timeout_seconds: 30 # no request in progress (bytes don't count)
 *     connections_per_client: 0     # 0: a quarter of connection_limit
 *     request_deadline_seconds: 10  # headers to the end of the body
 *     max_body_bytes: 67108864
 *     body_budget_bytes: 268435456  # all buffered request bodies together
 *     path_prefix: ""
 *   resources:
 *     gpu: [nvidia.com/gpu]
 *   scoring:
 *     policy: topology
 *     weights: {fit: 100, topology: 3, fragmentation: 2, packing: 0}
 *   api:                            # live API server only
 *     bind_timeout_seconds: 10
 *     page_size: 500
 *     watch_timeout_min_seconds: 300
 *     watch_timeout_max_seconds: 600
 *     backoff_initial_ms: 800
 *     backoff_max_ms: 30000
 *     healthy_reset_seconds: 60
 *     podgroup_retry_seconds: 300
 *     access_check_seconds: 60      # 0: check permissions at start only
 *   cache:
 *     unconfirmed_bind_seconds: 300 # release a Binding never confirmed
 *     filter_only_pod_seconds: 600  # forget a pod seen only in filter calls
 *   ops:                            # /healthz /readyz /version /debug/... /metrics
 *     address: 127.0.0.1:8889
 *     auth: false                   # true: TokenReview + SubjectAccessReview
 *     auth_cache_seconds: 10
 *     auth_cache_entries: 256
 *   tls:                            # off while cert_file is ""
 *     cert_file: ""
 *     key_file: ""
 *     client_ca_file: ""            # set: client certificates required
 *     allowed_subjects: []          # CNs, or RFC 4514 DNs (entries holding '=')
 *   leader_election:                # replicas behind one Service (docs/ha.md)
 *     enabled: false
 *     namespace: ""                 # the service account's, else kube-system
 *     name: troupe                  # the Lease
 *     identity: ""                  # host name and pid
 *     lease_duration_seconds: 15
 *     renew_deadline_seconds: 10
 *     retry_period_seconds: 2
 *
 * What the values must be, together (ext_config_validate), and the TLS keys'
 * setter for the flags, are config_validate.c's.
 */
#include "extender/config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "common/yamljson.h"

enum {
	CONFIG_MAX_BYTES = 1024 * 1024,
	/* A dotted key path ("scoring.weights.packing"); a longer one is cut and
	 * then unknown. */
	KEY_PATH_BUF = 256,
};

void ext_config_defaults(struct ext_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->listen_host, sizeof(cfg->listen_host), "127.0.0.1");
	cfg->listen_port = 8888;
	cfg->log_level = LOG_INFO;
	snprintf(cfg->log_format, sizeof(cfg->log_format), "text");
	cfg->threads = 0;
	cfg->connection_limit = 1024;
	cfg->connection_timeout_s = 30;
	cfg->connections_per_client = 0;        /* a quarter of connection_limit */
	cfg->request_deadline_s = 10;
	cfg->max_body_bytes = 64u * 1024 * 1024;
	/* Whole or time-sliced GPUs, and the name NVIDIA's device plugin gives
	 * shared ones with renameByDefault. */
	snprintf(cfg->gpu_names[0], sizeof(cfg->gpu_names[0]), "nvidia.com/gpu");
	snprintf(cfg->gpu_names[1], sizeof(cfg->gpu_names[1]), "nvidia.com/gpu.shared");
	cfg->cache.gpu_resources[0] = cfg->gpu_names[0];
	cfg->cache.gpu_resources[1] = cfg->gpu_names[1];
	cfg->cache.n_gpu_resources = 2;
	/* Sharing from each node's labels, replicas spread as NVIDIA's plugin
	 * spreads them, no request refused: the device plugin's defaults. */
	for (unsigned i = 0; i < CACHE_MAX_GPU_RESOURCES; i++)
		cfg->cache.sharing[i] = (struct cache_sharing_opts){ .strategy = -1 };
	/* NVIDIA's DRA driver: its GPUs, where a node also has them as
	 * nvidia.com/gpu, are never given twice. */
	snprintf(cfg->dra_driver_names[0], sizeof(cfg->dra_driver_names[0]), "gpu.nvidia.com");
	cfg->cache.dra_drivers[0] = cfg->dra_driver_names[0];
	cfg->cache.n_dra_drivers = 1;
	snprintf(cfg->score_policy, sizeof(cfg->score_policy), "topology");
	/* Chosen with bench/sim_quality.py over ten seeds (docs/placement-quality.md):
	 * best fit by GPUs decides (fit), then the set's links (topology) and
	 * the islands it leaves (fragmentation); packing's share of the node
	 * would send small pods to break whole boards, so it is off. */
	cfg->weights.packing = 0.0;
	cfg->weights.topology = 3.0;
	cfg->weights.fragmentation = 2.0;
	cfg->weights.fit = 100.0;
	cfg->bind_timeout_s = 10;
	cfg->unconfirmed_bind_s = 300;
	cfg->filter_only_pod_s = 600;
	cache_informer_opts_defaults(&cfg->informer);
	gang_config_defaults(&cfg->gang);
	ext_recover_opts_defaults(&cfg->recover);
	cache_pgs_opts_defaults(&cfg->pgstatus);
	ext_ops_config_defaults(&cfg->ops);
	cfg->events.enabled = true;
	cache_events_opts_defaults(&cfg->events.opts);
	/* TLS stays off (empty paths). A quarter of the 1 GiB container limit:
	 * four max-size bodies at once, with room left for what decoding them
	 * costs. */
	cfg->body_budget_bytes = 256u * 1024 * 1024;
	{
		struct cache_lease_opts lo;

		cache_lease_opts_defaults(&lo);
		snprintf(cfg->leader_election.name, sizeof(cfg->leader_election.name), "%s",
			 lo.name);
		cfg->leader_election.lease_duration_s = lo.lease_duration_s;
		cfg->leader_election.renew_deadline_s = lo.renew_deadline_s;
		cfg->leader_election.retry_period_s = lo.retry_period_s;
	}
}

int ext_config_split_address(const char *s, char *host, size_t hostlen, uint16_t *port)
{
	const char *colon, *h = s;
	size_t hlen;
	char *end;
	long p;

	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (!rb || rb[1] != ':')
			return -EINVAL;
		h = s + 1;
		hlen = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || memchr(s, ':', (size_t)(colon - s)))
			return -EINVAL;
		hlen = (size_t)(colon - s);
	}
	if (hlen == 0 || hlen >= hostlen)
		return -EINVAL;
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || p < 0 || p > 65535)
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	*port = (uint16_t)p;
	return 0;
}

int ext_config_parse_listen(struct ext_config *cfg, const char *s, char *err, size_t errlen)
{
	if (ext_config_split_address(s, cfg->listen_host, sizeof(cfg->listen_host),
				     &cfg->listen_port) == 0)
		return 0;
	snprintf(err, errlen, "listen address \"%s\" is not HOST:PORT (e.g. 127.0.0.1:8888, "
		 "[::1]:8888, 0.0.0.0:8888)", s);
	return -EINVAL;
}

/* ---- The key table ------------------------------------------------------ */

enum kind { K_MAP, K_STRING, K_UINT, K_SIZE, K_DOUBLE, K_LOGLEVEL, K_LISTEN, K_STRLIST, K_QUEUES,
	    K_BOOL, K_LEVELS, K_OPS_ADDRESS, K_SUBJECTS, K_DRIVERS, K_SHARING };

struct key {
	const char *path;       /* dotted path from the root */
	enum kind kind;
	size_t off;             /* field in struct ext_config */
	size_t size;            /* for strings: buffer size */
};

#define F(field) offsetof(struct ext_config, field)
#define S(field) sizeof(((struct ext_config *)0)->field)

static const struct key keys[] = {
	{ "listen", K_LISTEN, 0, 0 },
	{ "log_level", K_LOGLEVEL, F(log_level), 0 },
	{ "log_format", K_STRING, F(log_format), S(log_format) },
	{ "http", K_MAP, 0, 0 },
	{ "http.threads", K_UINT, F(threads), 0 },
	{ "http.connection_limit", K_UINT, F(connection_limit), 0 },
	{ "http.connection_timeout_seconds", K_UINT, F(connection_timeout_s), 0 },
	{ "http.connections_per_client", K_UINT, F(connections_per_client), 0 },
	{ "http.request_deadline_seconds", K_UINT, F(request_deadline_s), 0 },
	{ "cache.max_filter_only_pods", K_SIZE, F(cache.max_filter_only_pods), 0 },
	{ "gang.max_entries", K_UINT, F(gang.max_entries), 0 },
	{ "http.max_body_bytes", K_SIZE, F(max_body_bytes), 0 },
	{ "http.path_prefix", K_STRING, F(path_prefix), S(path_prefix) },
	{ "resources", K_MAP, 0, 0 },
	{ "resources.gpu", K_STRLIST, 0, 0 },
	{ "dra", K_MAP, 0, 0 },
	{ "dra.drivers", K_DRIVERS, 0, 0 },
	{ "sharing", K_SHARING, 0, 0 },
	{ "scoring", K_MAP, 0, 0 },
	{ "scoring.policy", K_STRING, F(score_policy), S(score_policy) },
	{ "scoring.weights", K_MAP, 0, 0 },
	{ "scoring.weights.packing", K_DOUBLE, F(weights.packing), 0 },
	{ "scoring.weights.topology", K_DOUBLE, F(weights.topology), 0 },
	{ "scoring.weights.fragmentation", K_DOUBLE, F(weights.fragmentation), 0 },
	{ "scoring.weights.fit", K_DOUBLE, F(weights.fit), 0 },
	{ "api", K_MAP, 0, 0 },
	{ "api.bind_timeout_seconds", K_UINT, F(bind_timeout_s), 0 },
	{ "api.page_size", K_UINT, F(informer.page_size), 0 },
	{ "api.watch_timeout_min_seconds", K_UINT, F(informer.watch_timeout_min_s), 0 },
	{ "api.watch_timeout_max_seconds", K_UINT, F(informer.watch_timeout_max_s), 0 },
	{ "api.backoff_initial_ms", K_UINT, F(informer.backoff_initial_ms), 0 },
	{ "api.backoff_max_ms", K_UINT, F(informer.backoff_max_ms), 0 },
	{ "api.healthy_reset_seconds", K_UINT, F(informer.healthy_reset_s), 0 },
	{ "api.watch_silence_seconds", K_UINT, F(informer.watch_silence_s), 0 },
	{ "api.podgroup_retry_seconds", K_UINT, F(informer.podgroup_retry_s), 0 },
	{ "api.access_check_seconds", K_UINT, F(informer.access_check_s), 0 },
	{ "cache", K_MAP, 0, 0 },
	{ "cache.unconfirmed_bind_seconds", K_UINT, F(unconfirmed_bind_s), 0 },
	{ "cache.filter_only_pod_seconds", K_UINT, F(filter_only_pod_s), 0 },
	{ "gang", K_MAP, 0, 0 },
	{ "gang.default_timeout_seconds", K_UINT, F(gang.default_timeout_s), 0 },
	{ "gang.scheduler_http_timeout_seconds", K_UINT, F(gang.http_timeout_s), 0 },
	{ "gang.margin_seconds", K_UINT, F(gang.margin_s), 0 },
	{ "gang.starvation_seconds", K_UINT, F(gang.starvation_s), 0 },
	{ "gang.starvation_holds", K_BOOL, F(gang.starvation_holds), 0 },
	{ "gang.settle_seconds", K_UINT, F(gang.settle_s), 0 },
	{ "gang.allow_partial_preemption", K_BOOL, F(gang.allow_partial_preemption), 0 },
	{ "gang.recover_partial", K_BOOL, F(recover.enabled), 0 },
	{ "gang.recover_interval_seconds", K_UINT, F(recover.interval_s), 0 },
	{ "gang.recover_grace_seconds", K_UINT, F(recover.grace_s), 0 },
	{ "gang.partial_rollback_seconds", K_UINT, F(recover.rollback_after_s), 0 },
	{ "gang.write_status", K_BOOL, F(pgstatus.enabled), 0 },
	{ "gang.status_interval_seconds", K_UINT, F(pgstatus.interval_s), 0 },
	{ "gang.domain_levels", K_LEVELS, 0, 0 },
	{ "queues", K_QUEUES, 0, 0 },
	{ "ops", K_MAP, 0, 0 },
	{ "ops.address", K_OPS_ADDRESS, 0, 0 },
	{ "ops.auth", K_BOOL, F(ops.auth), 0 },
	{ "ops.auth_cache_seconds", K_UINT, F(ops.auth_cache_s), 0 },
	{ "ops.auth_cache_entries", K_UINT, F(ops.auth_cache_entries), 0 },
	/* ---- TLS and the body budget ---- */
	{ "http.body_budget_bytes", K_SIZE, F(body_budget_bytes), 0 },
	{ "tls", K_MAP, 0, 0 },
	{ "tls.cert_file", K_STRING, F(tls.cert_file), S(tls.cert_file) },
	{ "tls.key_file", K_STRING, F(tls.key_file), S(tls.key_file) },
	{ "tls.client_ca_file", K_STRING, F(tls.client_ca_file), S(tls.client_ca_file) },
	{ "tls.allowed_subjects", K_SUBJECTS, 0, 0 },
	{ "leader_election", K_MAP, 0, 0 },
	{ "leader_election.enabled", K_BOOL, F(leader_election.enabled), 0 },
	{ "leader_election.namespace", K_STRING, F(leader_election.ns), S(leader_election.ns) },
	{ "leader_election.name", K_STRING, F(leader_election.name), S(leader_election.name) },
	{ "leader_election.identity", K_STRING, F(leader_election.identity),
	  S(leader_election.identity) },
	{ "leader_election.lease_duration_seconds", K_UINT, F(leader_election.lease_duration_s), 0 },
	{ "leader_election.renew_deadline_seconds", K_UINT, F(leader_election.renew_deadline_s), 0 },
	{ "leader_election.retry_period_seconds", K_UINT, F(leader_election.retry_period_s), 0 },
	{ "events", K_MAP, 0, 0 },
	{ "events.enabled", K_BOOL, F(events.enabled), 0 },
	{ "events.queue_size", K_UINT, F(events.opts.queue_size), 0 },
	{ "events.qps", K_DOUBLE, F(events.opts.qps), 0 },
	{ "events.burst", K_UINT, F(events.opts.burst), 0 },
	{ "events.series_flush_seconds", K_UINT, F(events.opts.series_flush_s), 0 },
};

static const struct key *key_find(const char *path)
{
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		if (strcmp(keys[i].path, path) == 0)
			return &keys[i];
	return NULL;
}

/* sharing: resource name -> { strategy, replicas, packing,
 * fail_requests_greater_than_one }, each optional. */
static int set_sharing(struct ext_config *cfg, const cJSON *v, char *err, size_t errlen)
{
	const cJSON *res;

	if (!cJSON_IsObject(v)) {
		snprintf(err, errlen, "sharing must be a mapping of resource names "
			 "(nvidia.com/gpu: {strategy: auto, ...})");
		return -EINVAL;
	}
	cfg->n_sharing = 0;
	cJSON_ArrayForEach(res, v) {
		struct cache_sharing_opts o = { .strategy = -1 };
		const cJSON *f;

		if (!res->string || !strchr(res->string, '/') ||
		    strlen(res->string) >= sizeof(cfg->sharing[0].resource)) {
			snprintf(err, errlen, "sharing.%s: the key must be an extended resource name "
				 "such as nvidia.com/gpu", res->string ? res->string : "");
			return -EINVAL;
		}
		if (!cJSON_IsObject(res)) {
			snprintf(err, errlen, "sharing.%s has the wrong type (a mapping expected)",
				 res->string);
			return -EINVAL;
		}
		if (cfg->n_sharing == CACHE_MAX_GPU_RESOURCES) {
			snprintf(err, errlen, "sharing: at most %d resources", CACHE_MAX_GPU_RESOURCES);
			return -EINVAL;
		}
		cJSON_ArrayForEach(f, res) {
			const char *k = f->string;
			const char *sv = cJSON_IsString(f) ? f->valuestring : NULL;
			double d = cJSON_IsNumber(f) ? f->valuedouble : NAN;

			if (strcmp(k, "strategy") == 0) {
				o.strategy = sv && strcmp(sv, "auto") == 0 ? -1 : cache_sharing_parse(sv);
				if (!sv || (o.strategy < 0 && strcmp(sv, "auto") != 0)) {
					snprintf(err, errlen, "sharing.%s.strategy must be one of auto, "
						 "none, time-slicing, mps", res->string);
					return -EINVAL;
				}
			} else if (strcmp(k, "replicas") == 0) {
				if (!(d >= 0 && d <= 255 && d == floor(d))) {
					snprintf(err, errlen, "sharing.%s.replicas must be a whole number "
						 "from 0 (the node's label) to 255", res->string);
					return -EINVAL;
				}
				o.replicas = (unsigned)d;
			} else if (strcmp(k, "packing") == 0) {
				if (sv && strcmp(sv, "packed") == 0) {
					o.packing = CACHE_PACKING_PACKED;
				} else if (sv && strcmp(sv, "distributed") == 0) {
					o.packing = CACHE_PACKING_DISTRIBUTED;
				} else {
					snprintf(err, errlen, "sharing.%s.packing must be packed or "
						 "distributed", res->string);
					return -EINVAL;
				}
			} else if (strcmp(k, "fail_requests_greater_than_one") == 0) {
				if (!cJSON_IsBool(f)) {
					snprintf(err, errlen, "sharing.%s.fail_requests_greater_than_one "
						 "must be true or false", res->string);
					return -EINVAL;
				}
				o.fail_requests_greater_than_one = cJSON_IsTrue(f);
			} else {
				snprintf(err, errlen, "unknown key sharing.%s.%s (known: strategy, "
					 "replicas, packing, fail_requests_greater_than_one)",
					 res->string, k);
				return -EINVAL;
			}
		}
		snprintf(cfg->sharing[cfg->n_sharing].resource,
			 sizeof(cfg->sharing[0].resource), "%s", res->string);
		cfg->sharing[cfg->n_sharing++].opts = o;
	}
	return 0;
}

/* Give each managed resource its sharing entry, by name. */
static int sharing_resolve(struct ext_config *cfg, char *err, size_t errlen)
{
	for (unsigned i = 0; i < CACHE_MAX_GPU_RESOURCES; i++)
		cfg->cache.sharing[i] = (struct cache_sharing_opts){ .strategy = -1 };
	for (unsigned j = 0; j < cfg->n_sharing; j++) {
		unsigned i = 0;

		while (i < cfg->cache.n_gpu_resources &&
		       strcmp(cfg->cache.gpu_resources[i], cfg->sharing[j].resource) != 0)
			i++;
		if (i == cfg->cache.n_gpu_resources) {
			snprintf(err, errlen, "sharing.%s: not a managed resource (resources.gpu)",
				 cfg->sharing[j].resource);
			return -EINVAL;
		}
		cfg->cache.sharing[i] = cfg->sharing[j].opts;
	}
	return 0;
}

static int set_value(struct ext_config *cfg, const struct key *k, const cJSON *v, char *err,
		     size_t errlen)
{
	char *field = (char *)cfg + k->off;
	double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;

	switch (k->kind) {
	case K_MAP:
		if (!cJSON_IsObject(v))
			goto type;
		return 0;
	case K_STRING:
		if (!cJSON_IsString(v))
			goto type;
		if (strlen(v->valuestring) >= k->size) {
			snprintf(err, errlen, "%s is too long", k->path);
			return -EINVAL;
		}
		memcpy(field, v->valuestring, strlen(v->valuestring) + 1);
		return 0;
	case K_UINT:
		if (!(d >= 0 && d <= 1e6 && d == floor(d)))
			goto type;
		*(unsigned *)(void *)field = (unsigned)d;
		return 0;
	case K_SIZE:
		if (!(d >= 0 && d <= 1e12 && d == floor(d)))
			goto type;
		*(size_t *)(void *)field = (size_t)d;
		return 0;
	case K_DOUBLE:
		if (!(d >= 0 && d <= 1e6))
			goto type;
		*(double *)(void *)field = d;
		return 0;
	case K_LOGLEVEL:
		if (!cJSON_IsString(v) || log_level_parse(v->valuestring, &cfg->log_level) < 0) {
			snprintf(err, errlen, "%s must be one of debug, info, warn, error", k->path);
			return -EINVAL;
		}
		return 0;
	case K_LISTEN:
		if (!cJSON_IsString(v))
			goto type;
		return ext_config_parse_listen(cfg, v->valuestring, err, errlen);
	case K_OPS_ADDRESS:
		if (!cJSON_IsString(v))
			goto type;
		return ext_ops_config_parse_address(&cfg->ops, v->valuestring, err, errlen);
	case K_LEVELS: {
		/* Coarse to fine; each entry a label key, or alternatives "a|b". */
		struct gang_config *gc = &cfg->gang;
		const cJSON *it;
		unsigned l = 0;

		if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0 ||
		    cJSON_GetArraySize(v) > GANG_MAX_LEVELS) {
			snprintf(err, errlen, "%s must be a list of 1 to %d node label keys, coarse to "
				 "fine (alternatives as \"a|b\")", k->path, GANG_MAX_LEVELS);
			return -EINVAL;
		}
		memset(&gc->levels, 0, sizeof(gc->levels));
		cJSON_ArrayForEach(it, v) {
			char copy[512], *save = NULL, *tok;
			unsigned n = 0;

			if (!cJSON_IsString(it) || !it->valuestring[0] ||
			    strlen(it->valuestring) >= sizeof(copy)) {
				snprintf(err, errlen, "%s: each level must be a label key", k->path);
				return -EINVAL;
			}
			snprintf(copy, sizeof(copy), "%s", it->valuestring);
			for (tok = strtok_r(copy, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
				if (n == GANG_MAX_KEYS || strlen(tok) >= sizeof(gc->level_keys[0][0])) {
					snprintf(err, errlen, "%s: at most %d keys a level, each under "
						 "128 bytes", k->path, GANG_MAX_KEYS - 1);
					return -EINVAL;
				}
				snprintf(gc->level_keys[l][n], sizeof(gc->level_keys[l][n]), "%s", tok);
				gc->levels.keys[l][n] = gc->level_keys[l][n];
				n++;
			}
			if (n == GANG_MAX_KEYS) {
				snprintf(err, errlen, "%s: at most %d keys a level", k->path,
					 GANG_MAX_KEYS - 1);
				return -EINVAL;
			}
			l++;
		}
		gc->levels.n = l;
		return 0;
	}
	case K_SUBJECTS: {
		/* A list that replaces the default (empty) one; [] is allowed. */
		const cJSON *it;

		if (!cJSON_IsArray(v))
			goto type;
		cfg->tls.n_allowed_subjects = 0;
		cJSON_ArrayForEach(it, v) {
			int ret;

			if (!cJSON_IsString(it)) {
				snprintf(err, errlen, "%s: each entry must be a string (a CN, or a "
					 "DN such as O=system,CN=kube-scheduler)", k->path);
				return -EINVAL;
			}
			ret = ext_config_set_tls(cfg, "allowed_subjects", it->valuestring, err,
						 errlen);
			if (ret < 0)
				return ret;
		}
		return 0;
	}
	case K_BOOL:
		if (!cJSON_IsBool(v))
			goto type;
		*(bool *)(void *)field = cJSON_IsTrue(v);
		return 0;
	case K_QUEUES: {
		/* queue name -> weight; names are free-form, so no key table. */
		const cJSON *it;

		if (!cJSON_IsObject(v))
			goto type;
		cJSON_ArrayForEach(it, v) {
			if (!cJSON_IsNumber(it) || it->valuedouble <= 0 || it->valuedouble > 1e6) {
				snprintf(err, errlen, "queues.%s: the weight must be a number above 0",
					 it->string);
				return -EINVAL;
			}
			if (cfg->gang.n_queues == GANG_MAX_QUEUES ||
			    strlen(it->string) >= sizeof(cfg->gang.queue_names[0])) {
				snprintf(err, errlen, "queues: at most %d queues, names under 64 bytes",
					 GANG_MAX_QUEUES);
				return -EINVAL;
			}
			snprintf(cfg->gang.queue_names[cfg->gang.n_queues],
				 sizeof(cfg->gang.queue_names[0]), "%s", it->string);
			cfg->gang.queue_weights[cfg->gang.n_queues++] = it->valuedouble;
		}
		return 0;
	}
	case K_SHARING:
		return set_sharing(cfg, v, err, errlen);
	case K_DRIVERS: {
		const cJSON *it;
		unsigned n = 0;

		if (!cJSON_IsArray(v))
			goto type;
		cJSON_ArrayForEach(it, v) {
			const char *name = cJSON_IsString(it) ? it->valuestring : NULL;
			bool ok = name && name[0] && strlen(name) < sizeof(cfg->dra_driver_names[0]);

			for (const char *p = name; ok && *p; p++)
				ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
				     *p == '-' || *p == '.';
			if (!ok) {
				snprintf(err, errlen, "%s: each entry must be a DRA driver name such as "
					 "gpu.nvidia.com (lower-case letters, digits, '-' and '.')",
					 k->path);
				return -EINVAL;
			}
			if (n == CACHE_MAX_DRA_DRIVERS) {
				snprintf(err, errlen, "%s: at most %d drivers", k->path,
					 CACHE_MAX_DRA_DRIVERS);
				return -EINVAL;
			}
			snprintf(cfg->dra_driver_names[n], sizeof(cfg->dra_driver_names[n]), "%s", name);
			cfg->cache.dra_drivers[n] = cfg->dra_driver_names[n];
			n++;
		}
		cfg->cache.n_dra_drivers = n;
		return 0;
	}
	case K_STRLIST: {
		const cJSON *it;
		unsigned n = 0;

		if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
			goto type;
		cJSON_ArrayForEach(it, v) {
			if (!cJSON_IsString(it) || !it->valuestring[0] ||
			    strlen(it->valuestring) >= sizeof(cfg->gpu_names[0]) ||
			    !strchr(it->valuestring, '/')) {
				snprintf(err, errlen, "%s: each entry must be an extended resource "
					 "name such as nvidia.com/gpu", k->path);
				return -EINVAL;
			}
			if (n == CACHE_MAX_GPU_RESOURCES) {
				snprintf(err, errlen, "%s: at most %d names", k->path,
					 CACHE_MAX_GPU_RESOURCES);
				return -EINVAL;
			}
			snprintf(cfg->gpu_names[n], sizeof(cfg->gpu_names[n]), "%s",
				 it->valuestring);
			cfg->cache.gpu_resources[n] = cfg->gpu_names[n];
			n++;
		}
		cfg->cache.n_gpu_resources = n;
		return 0;
	}
	}
type:
	snprintf(err, errlen, "%s has the wrong type (%s expected)", k->path,
		 k->kind == K_MAP ? "a mapping" : k->kind == K_STRING || k->kind == K_LISTEN ||
		 k->kind == K_OPS_ADDRESS ?
		 "a string" : k->kind == K_STRLIST ? "a non-empty list of strings" :
		 k->kind == K_SUBJECTS || k->kind == K_DRIVERS ? "a list of strings" :
		 k->kind == K_DOUBLE ? "a number from 0 to 1000000" : k->kind == K_BOOL ? "true or false" :
		 "a whole non-negative number");
	return -EINVAL;
}

static int walk(struct ext_config *cfg, const cJSON *obj, const char *prefix, char *err,
		size_t errlen)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, obj) {
		char path[KEY_PATH_BUF];
		const struct key *k;
		int ret;

		snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", it->string);
		k = key_find(path);
		if (!k) {
			snprintf(err, errlen, "unknown key \"%s\"", path);
			return -EINVAL;
		}
		if (cJSON_IsNull(it))
			continue;       /* "key:" with no value keeps the default */
		ret = set_value(cfg, k, it, err, errlen);
		if (ret < 0)
			return ret;
		if (k->kind == K_MAP && (ret = walk(cfg, it, path, err, errlen)) < 0)
			return ret;
	}
	return 0;
}

int ext_config_load(struct ext_config *cfg, const char *path, char *err, size_t errlen)
{
	char yerr[192], werr[EXT_ERR_LEN];
	cJSON *docs = NULL;
	const cJSON *root;
	char *buf = NULL;
	size_t len;
	int ret;

	ret = util_read_file(path, CONFIG_MAX_BYTES, &buf, &len);
	if (ret < 0) {
		snprintf(err, errlen, "config %s: %s", path,
			 ret == -EFBIG ? "larger than 1 MiB" : strerror(-ret));
		ret = -EINVAL;
		goto out;
	}
	docs = yamljson_parse(buf, len, yerr, sizeof(yerr));
	if (!docs) {
		snprintf(err, errlen, "config %s: %s", path, yerr);
		ret = -EINVAL;
		goto out;
	}
	if (cJSON_GetArraySize(docs) > 1) {
		snprintf(err, errlen, "config %s: expected one YAML document", path);
		ret = -EINVAL;
		goto out;
	}
	root = cJSON_GetArrayItem(docs, 0);
	if (!root || cJSON_IsNull(root)) {
		ret = 0;        /* an empty file keeps every default */
		goto out;
	}
	if (!cJSON_IsObject(root)) {
		snprintf(err, errlen, "config %s: the top level must be a mapping", path);
		ret = -EINVAL;
		goto out;
	}
	ret = walk(cfg, root, "", werr, sizeof(werr));
	if (ret == 0)
		ret = sharing_resolve(cfg, werr, sizeof(werr));
	if (ret < 0)
		snprintf(err, errlen, "config %s: %s", path, werr);
out:
	cJSON_Delete(docs);
	free(buf);
	return ret;
}
