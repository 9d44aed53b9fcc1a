/* The ops listener: troupe's second libmicrohttpd daemon (server.c runs the
 * first, for the scheduler verbs), serving what people, probes and Prometheus
 * read, on its own address (ops.address, 127.0.0.1:8889 by default):
 *
 *   GET /healthz /readyz /version        always open (kubelet probes them)
 *   GET /debug/state /debug/cache        behind authentication when ops.auth
 *   GET /metrics /debug/explain          is on (ops_auth.c)
 *   GET /debug/dashboard.json
 *   GET /debug/dashboard (.js .css)      always open: the page's own files, the
 *                                        same for everyone (its data is the JSON)
 *
 * Apart from the verbs so that the verbs' address can stay reachable by
 * kube-scheduler alone, and so that what the ops paths reveal (every pod
 * troupe knows, its counters) can be protected as Kubernetes components
 * protect theirs, without putting a review on the verbs' hot path.
 *
 * A thread per connection (at most OPS_CONNECTION_LIMIT, OPS_PER_IP_CONNECTION_LIMIT
 * from one address): a request may wait for a TokenReview and a
 * SubjectAccessReview, and a waiting request must not hold up the kubelet's
 * probes behind it, as it would in a small pool.
 */
#include "extender/ops_server.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "cache/api.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/util.h"
#include "extender/config.h"
#include "extender/dashboard.h"
#include "extender/explain.h"
#include "extender/http_reply.h"
#include "extender/ops_auth.h"
#include "extender/verbs.h"
#include "troupe_version.h"

enum {
	/* Probes, a scraper or two and a person: a handful of connections. */
	OPS_CONNECTION_LIMIT = 64,
	/* From one address at most this many, so that one client holding
	 * connections open cannot starve the kubelet's probes. */
	OPS_PER_IP_CONNECTION_LIMIT = 16,
	/* An idle connection closes after this long. */
	OPS_CONNECTION_TIMEOUT_S = 30,
	/* A path as routed; a longer one is no route (404). */
	OPS_PATH_BUF = 256,
};

struct ext_ops_server {
	struct MHD_Daemon *daemon;
	const struct ext_service *svc;
	struct ext_ops_auth *auth;      /* NULL: ops.auth off */
	uint16_t port;
};

enum ops_route { O_HEALTHZ, O_READYZ, O_VERSION, O_DEBUG_STATE, O_DEBUG_CACHE, O_METRICS,
		 O_DEBUG_EXPLAIN, O_DASHBOARD_JSON, O_DASHBOARD_FILE };

static const struct {
	const char *path;
	enum ops_route route;
	bool protected;                 /* needs authentication when ops.auth is on */
} ops_routes[] = {
	{ "/healthz", O_HEALTHZ, false },
	{ "/readyz", O_READYZ, false },
	{ "/version", O_VERSION, false },
	{ "/debug/state", O_DEBUG_STATE, true },
	{ "/debug/cache", O_DEBUG_CACHE, true },
	{ "/metrics", O_METRICS, true },
	{ "/debug/explain", O_DEBUG_EXPLAIN, true },
	{ "/debug/dashboard.json", O_DASHBOARD_JSON, true },
	{ "/debug/dashboard", O_DASHBOARD_FILE, false },
	{ "/debug/dashboard.js", O_DASHBOARD_FILE, false },
	{ "/debug/dashboard.css", O_DASHBOARD_FILE, false },
};

/* A marker for "headers seen, wait for the end of the request". */
static int request_started;

void ext_ops_config_defaults(struct ext_ops_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->host, sizeof(c->host), "127.0.0.1");
	c->port = 8889;
	c->auth = false;
	c->auth_cache_s = 10;
	c->auth_cache_entries = 256;
}

/* The same grammar as --listen (config.c), into this listener's own fields;
 * only the wording of the error is this listener's. */
int ext_ops_config_parse_address(struct ext_ops_config *c, const char *s, char *err,
				 size_t errlen)
{
	if (ext_config_split_address(s, c->host, sizeof(c->host), &c->port) == 0)
		return 0;
	snprintf(err, errlen, "ops address \"%s\" is not HOST:PORT (e.g. 127.0.0.1:8889, "
		 "[::1]:8889, 0.0.0.0:8889)", s);
	return -EINVAL;
}

int ext_ops_config_validate(const struct ext_ops_config *c, char *err, size_t errlen)
{
	if (c->auth_cache_s > 3600) {
		snprintf(err, errlen, "ops.auth_cache_seconds must be at most 3600 (a revoked "
			 "token or role would be honoured that long)");
		return -EINVAL;
	}
	if (c->auth_cache_entries < 1 || c->auth_cache_entries > 65536) {
		snprintf(err, errlen, "ops.auth_cache_entries must be 1 to 65536");
		return -EINVAL;
	}
	return 0;
}

/* A refusal as kube-apiserver words it: a v1 Status with its reason. */
static enum MHD_Result send_status(struct MHD_Connection *conn, unsigned status, const char *msg)
{
	struct strbuf sb = STRBUF_INIT;
	const char *reason = status == 401 ? "Unauthorized" : status == 403 ? "Forbidden"
									 : "ServiceUnavailable";

	strbuf_puts(&sb, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
		    "\"status\":\"Failure\",\"message\":");
	strbuf_put_json_str(&sb, msg, strlen(msg));
	strbuf_printf(&sb, ",\"reason\":\"%s\",\"code\":%u}", reason, status);
	return ext__http_send(conn, status, &sb,
			      status == 401 ? MHD_HTTP_HEADER_WWW_AUTHENTICATE : NULL,
			      "Bearer realm=\"troupe\"");
}

/* ops.auth: false when the request may go on; true when it is refused, the
 * refusal queued into <ret>. Every refusal is logged with the caller's address
 * and user. */
static bool refused(struct ext_ops_server *s, struct MHD_Connection *conn, const char *method,
		    const char *path, enum MHD_Result *ret)
{
	const char *authz = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
							MHD_HTTP_HEADER_AUTHORIZATION);
	char who[CACHE_REVIEW_NAME_BUF], why[TROUPE_MESSAGE_BUF], peer[EXT_PEER_NAME_BUF];
	unsigned status = ext__ops_auth_check(s->auth, authz, path, who, sizeof(who), why,
					      sizeof(why));

	ext__http_peer_name(conn, peer, sizeof(peer));
	if (status == 200) {
		log_debug("ops", "%s %s from %s: user \"%s\" allowed%s%s", method, path, peer, who,
			  why[0] ? ": " : "", why);
		return false;
	}
	if (status == 401)
		log_warn("ops", "%s %s from %s refused (401 Unauthorized): %s", method, path, peer,
			 why);
	else if (status == 403)
		log_warn("ops", "%s %s from %s by user \"%s\" refused (403 Forbidden): %s", method,
			 path, peer, who, why);
	else
		log_warn("ops", "%s %s from %s%s%s%s not answered (503): %s", method, path, peer,
			 who[0] ? " by user \"" : "", who, who[0] ? "\"" : "", why);
	/* The caller learns only what kube-apiserver would tell it. */
	*ret = send_status(conn, status, status == 401 ? "Unauthorized" : status == 403 ? why :
			   "troupe cannot check the caller with the API server now");
	return true;
}

static void answer(const struct ext_service *svc, struct MHD_Connection *conn,
		   enum ops_route route, struct ext_reply *r)
{
	switch (route) {
	case O_HEALTHZ:
		strbuf_puts(&r->body, "{\"status\":\"ok\"}");
		break;
	case O_READYZ:
		ext_readyz(svc, r);
		break;
	case O_VERSION:
		strbuf_puts(&r->body, "{\"name\":\"troupe\",\"version\":\"" TROUPE_VERSION "\"}");
		break;
	case O_DEBUG_STATE:
		ext_debug_state(svc, r);
		break;
	case O_DEBUG_CACHE:
		ext_debug_cache(svc, r);
		break;
	case O_METRICS:
		ext_metrics(svc, r);
		break;
	case O_DEBUG_EXPLAIN: {
		/* The query's arguments, as libmicrohttpd decoded them. */
		struct ext_explain_query q = {
			MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "pod"),
			MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "podgroup"),
			MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "examples"),
			MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "best"),
		};

		ext_explain(svc, &q, r);
		break;
	}
	case O_DASHBOARD_JSON:
	case O_DASHBOARD_FILE:
		break;                  /* ext_dashboard_serve */
	}
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	struct ext_ops_server *s = cls;
	bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
		   strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
	char path[OPS_PATH_BUF];
	struct ext_reply reply;
	enum MHD_Result ret;
	uint64_t t0 = util_now_ns();    /* a GET's headers are all it has */
	int found = -1;

	(void)version;
	(void)upload_data;
	if (!*con_cls) {
		*con_cls = &request_started;
		return MHD_YES;
	}
	if (*upload_data_size) {
		*upload_data_size = 0;  /* a GET's body means nothing here */
		return MHD_YES;
	}
	ext__http_route_path(url, NULL, path, sizeof(path));
	for (size_t i = 0; i < ARRAY_SIZE(ops_routes); i++)
		if (strcmp(path, ops_routes[i].path) == 0)
			found = (int)i;
	if (found < 0) {
		log_debug("ops", "%s %s: no such endpoint", method, url);
		return ext__http_send_error(conn, 404, NULL, NULL,
					    "troupe: no such endpoint %s on the ops listener",
					    path);
	}
	if (!get) {
		return ext__http_send_error(conn, 405, MHD_HTTP_HEADER_ALLOW, "GET, HEAD",
					    "troupe: %s is not allowed on %s", method, path);
	}
	if (s->auth && ops_routes[found].protected && refused(s, conn, method, path, &ret)) {
		ext_count(s->svc->counters, EXT_C_OTHER, true, util_now_ns() - t0);
		return ret;
	}
	if (ops_routes[found].route == O_DASHBOARD_JSON ||
	    ops_routes[found].route == O_DASHBOARD_FILE)
		return ext_dashboard_serve(s->svc, conn, path, t0);
	ext_reply_init(&reply);
	answer(s->svc, conn, ops_routes[found].route, &reply);
	ext_count(s->svc->counters, EXT_C_OTHER, reply.error || reply.status != 200,
		  util_now_ns() - t0);
	log_debug("ops", "%s %s -> %u (%zu bytes)", method, path, reply.status, reply.body.len);
	ret = ext__http_send(conn, reply.status, &reply.body, NULL, NULL);
	ext_reply_fini(&reply);
	return ret;
}

/* libmicrohttpd's messages, every one: the ops listener (127.0.0.1 by
 * default, no TLS) has no handshakes a client can fail at will. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	ext__http_log_mhd("ops", NULL, fmt, ap);
}

struct ext_ops_server *ext_ops_server_start(const struct ext_ops_config *cfg,
					    const struct ext_service *svc, struct cache_api *api,
					    char *err, size_t errlen)
{
	struct addrinfo hints = { 0 }, *ai = NULL;
	struct ext_ops_server *s = NULL;
	const union MHD_DaemonInfo *info;
	unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			     MHD_USE_ERROR_LOG;
	bool v6 = strchr(cfg->host, ':') != NULL;
	char port[8];
	int rc;

	if (cfg->auth && !api) {
		snprintf(err, errlen, "ops.auth needs a live API server to check tokens with (a "
			 "--cluster snapshot has none)");
		goto fail;
	}
	snprintf(port, sizeof(port), "%u", cfg->port);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(cfg->host, port, &hints, &ai);
	if (rc != 0) {
		snprintf(err, errlen, "cannot resolve ops address host %s: %s", cfg->host,
			 gai_strerror(rc));
		goto fail;
	}
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	s->svc = svc;
	if (cfg->auth) {
		s->auth = ext__ops_auth_new(api, cfg->auth_cache_s, cfg->auth_cache_entries);
		if (!s->auth) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
	}
	s->daemon = MHD_start_daemon(flags, cfg->port, NULL, NULL, on_request, s,
				     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				     MHD_OPTION_SOCK_ADDR, ai->ai_addr,
				     MHD_OPTION_CONNECTION_LIMIT, (unsigned)OPS_CONNECTION_LIMIT,
				     MHD_OPTION_PER_IP_CONNECTION_LIMIT,
				     (unsigned)OPS_PER_IP_CONNECTION_LIMIT,
				     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)OPS_CONNECTION_TIMEOUT_S,
				     MHD_OPTION_END);
	if (!s->daemon) {
		snprintf(err, errlen, "cannot listen on the ops address %s:%u (address in use, or "
			 "not an address of this host?)", cfg->host, cfg->port);
		goto fail;
	}
	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : cfg->port;
	freeaddrinfo(ai);
	/* The wording the tests read the port from (tests/integration/troupe_proc.py). */
	log_info("ops", "ops listening on http://%s%s%s:%u (/healthz /readyz /version and the "
		 "page of /debug/dashboard open; /debug/* /metrics %s)", v6 ? "[" : "", cfg->host,
		 v6 ? "]" : "", s->port,
		 cfg->auth ? "need a bearer token that TokenReview and SubjectAccessReview accept"
			   : "open to anyone who reaches this address");
	if (cfg->auth)
		log_info("ops", "ops.auth: keeping review answers %us, at most %u", cfg->auth_cache_s,
			 cfg->auth_cache_entries);
	return s;
fail:
	if (ai)
		freeaddrinfo(ai);
	if (s)
		ext__ops_auth_free(s->auth);
	free(s);
	return NULL;
}

uint16_t ext_ops_server_port(const struct ext_ops_server *s)
{
	return s->port;
}

void ext_ops_server_stop(struct ext_ops_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->daemon);
	ext__ops_auth_free(s->auth);
	free(s);
}
