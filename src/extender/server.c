/* The only file that talks to libmicrohttpd.
 *
 * Requests are routed on the path after collapsing repeated slashes (a
 * urlPrefix ending in "/" makes kube-scheduler send "//filter") and removing
 * the configured path prefix. POST bodies are gathered per connection up to
 * http.max_body_bytes: a larger Content-Length is refused with 413 before any
 * byte is read, and a chunked body that grows past the cap is discarded and
 * answered 413 once it ends.
 *
 * Worker threads: MHD_USE_EPOLL_INTERNAL_THREAD with a thread pool of one
 * thread per core by default. Suspend/resume is enabled so that a later
 * release can park gang members' binds without blocking a worker.
 */
#include "extender/server.h"
#include "extender/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "common/log.h"
#include "common/util.h"
#include "troupe_version.h"

struct ext_server {
	struct MHD_Daemon *daemon;
	const struct ext_service *svc;
	uint16_t port;
};

/* Binds answered later whose reply is not sent yet (relaxed atomic). */
static unsigned pending_total;

/* Per-connection request state, from the first callback to completion. */
struct request {
	struct strbuf body;
	bool too_large;
	uint64_t started_ns;
	/* A bind answered later: the connection is suspended (no worker thread
	 * waits) until the binder completes <reply> and resumes it. */
	struct MHD_Connection *conn;
	struct ext_counters *counters;
	struct ext_reply reply;
	bool pending;                   /* worker threads only */
	pthread_mutex_t lock;
	bool done;                      /* guarded by lock */
	bool suspended;                 /* guarded by lock */
};

enum route {
	R_NONE = 0,
	R_FILTER,
	R_PRIORITIZE,
	R_BIND,
	R_PREEMPT,
	R_HEALTHZ,
	R_READYZ,
	R_VERSION,
};

static const struct {
	const char *path;
	enum route route;
	bool post;
} routes[] = {
	{ "/filter", R_FILTER, true },
	{ "/prioritize", R_PRIORITIZE, true },
	{ "/bind", R_BIND, true },
	{ "/preempt", R_PREEMPT, true },
	{ "/healthz", R_HEALTHZ, false },
	{ "/readyz", R_READYZ, false },
	{ "/version", R_VERSION, false },
	/* /debug/state, /debug/cache and /metrics are on the ops listener
	 * (ops_server.c) only. */
};

enum {
	/* A request path as routed, after normalise_path: troupe's routes are
	 * short, and a path cut here is none of them (404). */
	ROUTE_PATH_BUF = 256,
	/* One libmicrohttpd log line; longer ones are cut. */
	MHD_LOG_BUF = 512,
};

/* Normalise <url> into <out>: collapse "//", drop a trailing "/", strip the
 * configured prefix. */
static void normalise_path(const char *url, const char *prefix, char *out, size_t len)
{
	size_t n = 0, plen = strlen(prefix);

	for (const char *p = url; *p && *p != '?' && n + 1 < len; p++) {
		if (*p == '/' && n > 0 && out[n - 1] == '/')
			continue;
		out[n++] = *p;
	}
	if (n > 1 && out[n - 1] == '/')
		n--;
	out[n] = '\0';
	while (plen > 1 && prefix[plen - 1] == '/')
		plen--;
	if (plen > 1 && strncmp(out, prefix, plen) == 0 && (out[plen] == '/' || !out[plen]))
		memmove(out, out + plen, n - plen + 1);
}

static enum ext_counter_verb counter_of(enum route route)
{
	switch (route) {
	case R_FILTER: return EXT_C_FILTER;
	case R_PRIORITIZE: return EXT_C_PRIORITIZE;
	case R_BIND: return EXT_C_BIND;
	case R_PREEMPT: return EXT_C_PREEMPT;
	default: return EXT_C_OTHER;
	}
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, unsigned status,
				  struct strbuf *body, const char *allow)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	size_t len = 0;
	char *buf;

	if (strbuf_failed(body)) {
		strbuf_fini(body);
		status = 500;
		strbuf_puts(body, "{\"Error\":\"troupe: out of memory building the reply\"}");
	}
	buf = strbuf_take(body, &len);
	if (!buf)
		return MHD_NO;
	resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				len && buf[0] == '#' ? "text/plain; version=0.0.4"
						     : "application/json");
	if (allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status,
				  const char *allow, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status,
				  const char *allow, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	char msg[EXT_REPLY_ERROR_BUF];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	strbuf_puts(&sb, "{\"Error\":");
	strbuf_put_json_str(&sb, msg, strlen(msg));
	strbuf_putc(&sb, '}');
	return send_reply(conn, status, &sb, allow);
}

static void handle_get(const struct ext_service *svc, enum route route, struct ext_reply *r)
{
	switch (route) {
	case R_HEALTHZ:
		strbuf_puts(&r->body, "{\"status\":\"ok\"}");
		break;
	case R_READYZ:
		ext_readyz(svc, r);
		break;
	case R_VERSION:
		strbuf_puts(&r->body, "{\"name\":\"troupe\",\"version\":\"" TROUPE_VERSION "\"}");
		break;
	default:
		break;
	}
}

/* The binder finished a pending bind (binder thread). */
static void request_done(void *ctx)
{
	struct request *rq = ctx;

	pthread_mutex_lock(&rq->lock);
	rq->done = true;
	if (rq->suspended) {
		rq->suspended = false;
		MHD_resume_connection(rq->conn);
	}
	pthread_mutex_unlock(&rq->lock);
}

static enum MHD_Result send_pending(struct MHD_Connection *conn, struct request *rq,
				    const char *path)
{
	enum MHD_Result ret;

	rq->pending = false;
	__atomic_sub_fetch(&pending_total, 1, __ATOMIC_RELAXED);
	ext_count(rq->counters, EXT_C_BIND, rq->reply.error || rq->reply.status != 200);
	log_debug("http", "POST %s -> %u (%zu bytes in, %zu out, %.0f us, answered later)", path,
		  rq->reply.status, rq->body.len, rq->reply.body.len,
		  (double)(util_now_ns() - rq->started_ns) / 1e3);
	ret = send_reply(conn, rq->reply.status, &rq->reply.body, NULL);
	ext_reply_fini(&rq->reply);
	return ret;
}

/* Run bind; suspend the connection when its answer comes later. */
static enum MHD_Result start_bind(struct MHD_Connection *conn, const struct ext_service *svc,
				  struct request *rq, const char *path)
{
	struct ext_async async = { request_done, rq };
	bool ready;

	ext_reply_init(&rq->reply);
	rq->conn = conn;
	rq->counters = svc->counters;
	rq->pending = true;
	__atomic_add_fetch(&pending_total, 1, __ATOMIC_RELAXED);
	if (ext_bind(svc, rq->body.buf, rq->body.len, &rq->reply, &async))
		return send_pending(conn, rq, path);
	pthread_mutex_lock(&rq->lock);
	ready = rq->done;
	if (!ready) {
		rq->suspended = true;
		MHD_suspend_connection(conn);
	}
	pthread_mutex_unlock(&rq->lock);
	return ready ? send_pending(conn, rq, path) : MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	struct ext_server *s = cls;
	const struct ext_service *svc = s->svc;
	struct request *rq = *con_cls;
	enum route route = R_NONE;
	bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
	bool known_path = false;
	struct ext_reply reply;
	char path[ROUTE_PATH_BUF];
	enum MHD_Result ret;

	(void)version;
	normalise_path(url, svc->cfg->path_prefix, path, sizeof(path));
	if (rq && rq->pending) {
		/* Resumed after the binder answered. */
		bool ready;

		pthread_mutex_lock(&rq->lock);
		ready = rq->done;
		pthread_mutex_unlock(&rq->lock);
		return ready ? send_pending(conn, rq, path) : MHD_YES;
	}
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
		if (strcmp(path, routes[i].path) != 0)
			continue;
		known_path = true;
		if (routes[i].post == post &&
		    (post || strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
		     strcmp(method, MHD_HTTP_METHOD_HEAD) == 0))
			route = routes[i].route;
		else if (!rq)
			return send_error(conn, 405, routes[i].post ? "POST" : "GET, HEAD",
					  "troupe: %s is not allowed on %s", method, path);
	}
	if (route == R_NONE && !rq) {
		if (known_path)
			return MHD_NO;
		log_debug("http", "%s %s: no such endpoint", method, url);
		return send_error(conn, 404, NULL, "troupe: no such endpoint %s", path);
	}
	if (!rq) {
		const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_LENGTH);

		if (post && cl && strtoull(cl, NULL, 10) > svc->cfg->max_body_bytes) {
			log_warn("http", "%s %s: body of %s bytes refused (limit %zu)", method, path,
				 cl, svc->cfg->max_body_bytes);
			return send_error(conn, 413, NULL, "troupe: request body larger than %zu bytes",
					  svc->cfg->max_body_bytes);
		}
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		rq->started_ns = util_now_ns();
		pthread_mutex_init(&rq->lock, NULL);
		*con_cls = rq;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		if (!rq->too_large && rq->body.len + *upload_data_size > svc->cfg->max_body_bytes) {
			rq->too_large = true;
			strbuf_fini(&rq->body);
		}
		if (!rq->too_large)
			strbuf_append(&rq->body, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (rq->too_large) {
		log_warn("http", "%s %s: chunked body exceeded %zu bytes; refused", method, path,
			 svc->cfg->max_body_bytes);
		return send_error(conn, 413, NULL, "troupe: request body larger than %zu bytes",
				  svc->cfg->max_body_bytes);
	}
	if (strbuf_failed(&rq->body))
		return send_error(conn, 503, NULL, "troupe: out of memory reading the request");

	ext_reply_init(&reply);
	if (svc->baseline && post) {
		/* The benchmarks' L0/L1: the same server, body and reply path, no
		 * verb. */
		if (svc->baseline->level >= 1)
			cJSON_Delete(cJSON_ParseWithLength(rq->body.buf ? rq->body.buf : "",
							   rq->body.len));
		strbuf_append(&reply.body, svc->baseline->reply, svc->baseline->reply_len);
		ret = send_reply(conn, 200, &reply.body, NULL);
		ext_reply_fini(&reply);
		return ret;
	}
	switch (route) {
	case R_FILTER:
		ext_filter(svc, rq->body.buf, rq->body.len, &reply);
		break;
	case R_PRIORITIZE:
		ext_prioritize(svc, rq->body.buf, rq->body.len, &reply);
		break;
	case R_BIND:
		ext_reply_fini(&reply);
		return start_bind(conn, svc, rq, path);
	case R_PREEMPT:
		ext_preempt(svc, rq->body.buf, rq->body.len, &reply);
		break;
	default:
		handle_get(svc, route, &reply);
		break;
	}
	ext_count(svc->counters, counter_of(route), reply.error || reply.status != 200);
	log_debug("http", "%s %s -> %u (%zu bytes in, %zu out, %.0f us)", method, path,
		  reply.status, rq->body.len, reply.body.len,
		  (double)(util_now_ns() - rq->started_ns) / 1e3);
	ret = send_reply(conn, reply.status, &reply.body, NULL);
	ext_reply_fini(&reply);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct request *rq = *con_cls;

	(void)cls;
	(void)conn;
	if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK &&
	    toe != MHD_REQUEST_TERMINATED_CLIENT_ABORT && rq)
		log_debug("http", "request ended early (code %d)", (int)toe);
	if (rq) {
		if (rq->pending) {
			__atomic_sub_fetch(&pending_total, 1, __ATOMIC_RELAXED);
			ext_reply_fini(&rq->reply);
		}
		strbuf_fini(&rq->body);
		pthread_mutex_destroy(&rq->lock);
		free(rq);
	}
	*con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[MHD_LOG_BUF];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	log_warn("http", "libmicrohttpd: %s", msg);
}

struct ext_server *ext_server_start(const struct ext_service *svc, char *err, size_t errlen)
{
	const struct ext_config *cfg = svc->cfg;
	struct addrinfo hints = { 0 }, *ai = NULL;
	struct ext_server *s = NULL;
	const union MHD_DaemonInfo *info;
	unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG |
			     MHD_ALLOW_SUSPEND_RESUME;
	unsigned threads = cfg->threads;
	char port[8];
	int rc;

	if (threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		threads = n > 0 ? (unsigned)n : 1;
	}
	snprintf(port, sizeof(port), "%u", cfg->listen_port);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(cfg->listen_host, port, &hints, &ai);
	if (rc != 0) {
		snprintf(err, errlen, "cannot resolve listen host %s: %s", cfg->listen_host,
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
	s->daemon = MHD_start_daemon(flags, cfg->listen_port, NULL, NULL, on_request, s,
				     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				     MHD_OPTION_SOCK_ADDR, ai->ai_addr,
				     MHD_OPTION_THREAD_POOL_SIZE, threads,
				     MHD_OPTION_CONNECTION_LIMIT, cfg->connection_limit,
				     MHD_OPTION_CONNECTION_TIMEOUT, cfg->connection_timeout_s,
				     MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
				     MHD_OPTION_END);
	if (!s->daemon) {
		snprintf(err, errlen, "cannot listen on %s:%u (address in use, or not an address "
			 "of this host?)", cfg->listen_host, cfg->listen_port);
		goto fail;
	}
	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : cfg->listen_port;
	freeaddrinfo(ai);
	log_info("http", "serving with %u threads, connection limit %u, idle timeout %us, "
		 "body limit %zu bytes", threads, cfg->connection_limit, cfg->connection_timeout_s,
		 cfg->max_body_bytes);
	return s;
fail:
	if (ai)
		freeaddrinfo(ai);
	free(s);
	return NULL;
}

void ext_server_drain(struct ext_server *s, unsigned timeout_ms)
{
	uint64_t end = util_now_ns() + (uint64_t)timeout_ms * 1000000ULL;

	if (!s)
		return;
	while (__atomic_load_n(&pending_total, __ATOMIC_RELAXED) && util_now_ns() < end)
		usleep(10000);
}

uint16_t ext_server_port(const struct ext_server *s)
{
	return s->port;
}

void ext_server_stop(struct ext_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->daemon);
	free(s);
}
