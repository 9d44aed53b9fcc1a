/* The verbs' HTTP server over libmicrohttpd (ops_server.c is the ops
 * listener's; http_reply.c holds the routed paths, replies and client names
 * both use).
 *
 * Requests are routed on the path after collapsing repeated slashes (a
 * urlPrefix ending in "/" makes kube-scheduler send "//filter") and removing
 * the configured path prefix (ext__http_route_path). POST bodies are gathered per connection up to
 * http.max_body_bytes: a larger Content-Length is refused with 413 before any
 * byte is read, and a chunked body that grows past the cap is discarded and
 * answered 413 once it ends.
 *
 * All buffered bodies together stay within http.body_budget_bytes (budget.c): a
 * request takes its Content-Length from the budget before any byte is read (a
 * chunked one takes each growth of its buffer) and one that does not fit is
 * answered 503 with Retry-After: 1 at once (a chunked one when it ends, its
 * bytes discarded). Bodies over EXT_BODY_SMALL_BYTES may use only three quarters
 * of the budget, so kube-scheduler's names-only calls always find room.
 *
 * TLS (tls.*, tls.c): libmicrohttpd serves HTTPS with the credentials tls.c
 * hands each handshake; when a client CA is configured, the first request of
 * each connection has the client's certificate checked (again after the CA
 * is reloaded) and a client that is not allowed gets 403 on every request.
 *
 * Connections: the connection guard (conn_guard.c) is told as each one opens,
 * gets its headers, has its body in, is answered and closes; server_conns.c
 * owns the guard and the thread that sweeps it once a second.
 *
 * Worker threads: MHD_USE_EPOLL_INTERNAL_THREAD with a thread pool of one
 * thread per core by default. Suspend/resume is enabled so that a later
 * release can park gang members' binds without blocking a worker.
 */
#include "extender/server.h"
#include "extender/budget.h"
#include "extender/http_reply.h"
#include "extender/internal.h"
#include "extender/server_conns.h"
#include "extender/tls.h"

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

#include "cache/lease.h"
#include "common/cpus.h"
#include "common/log.h"
#include "common/util.h"
#include "extender/conn_guard.h"
#include "extender/standby.h"
#include "troupe_version.h"

struct ext_server {
	struct MHD_Daemon *daemon;
	const struct ext_service *svc;
	uint16_t port;
	struct ext_tls *tls;            /* NULL: plain HTTP */
	struct ext_budget budget;       /* http.body_budget_bytes */
	struct ext_log_limit busy_log, denied_log, mhd_log;
	struct ext_conns conns;         /* the connection guard (server_conns.h) */
};

/* Per connection (libmicrohttpd's socket context). */
struct conn_state {
	struct ext_server *s;
	struct conn_guard_conn *guard;  /* NULL: not tracked (out of memory) */
	bool decided;                   /* peer holds the verdict (connection's thread) */
	struct ext_tls_peer peer;
};

/* Binds answered later whose reply is not sent yet (relaxed atomic). */
static unsigned pending_total;

/* Per-connection request state, from the first callback to completion. */
struct request {
	struct ext_body body;           /* drawing on ext_server.budget */
	enum ext_body_result body_error;
	uint64_t started_ns;
	/* A bind answered later: the connection is suspended (no worker thread
	 * waits) until the binder completes <reply> and resumes it. */
	struct MHD_Connection *conn;
	struct ext_counters *counters;
	struct ext_reply reply;
	/* The connection's guard record (conn_state.guard; NULL: untracked),
	 * looked up once when the request starts rather than at each step. */
	struct conn_guard_conn *guard;
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
	/* A request path as routed (ext__http_route_path): troupe's routes are
	 * short, and a path cut here is none of them (404). */
	ROUTE_PATH_BUF = 256,
	/* Refusals (and libmicrohttpd messages) logged a second, of each kind. */
	LOG_BURST = 5,
};

/* HTTPS: TLS 1.2 and 1.3 only, as kube-scheduler's Go client offers. */
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

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
	ext_count(rq->counters, EXT_C_BIND, rq->reply.error || rq->reply.status != 200,
		  util_now_ns() - rq->started_ns);
	log_debug("http", "POST %s -> %u (%zu bytes in, %zu out, %.0f us, answered later)", path,
		  rq->reply.status, rq->body.len, rq->reply.body.len,
		  (double)(util_now_ns() - rq->started_ns) / 1e3);
	ret = ext__http_send(conn, rq->reply.status, &rq->reply.body, NULL, NULL);
	ext_reply_fini(&rq->reply);
	return ret;
}

/* Run bind; suspend the connection when its answer comes later. */
static enum MHD_Result start_bind(struct MHD_Connection *conn, const struct ext_service *svc,
				  struct request *rq, const char *path)
{
	struct ext_async async = { request_done, rq, NULL };
	char who[EXT_PEER_NAME_BUF];
	bool ready;

	ext__http_peer_name(conn, who, sizeof(who));
	async.peer = who;

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


static enum MHD_Result refuse_busy(struct ext_server *s, struct MHD_Connection *conn,
				   const char *method, const char *path, const char *size)
{
	char who[EXT_PEER_NAME_BUF], left_out[EXT_LEFT_OUT_BUF];

	if (ext_log_limit_pass(&s->busy_log, util_now_ns(), left_out, sizeof(left_out))) {
		ext__http_peer_name(conn, who, sizeof(who));
		log_warn("http", "%s %s from %s: body of %s bytes refused with 503: the budget for "
			 "request bodies is in use (%zu of %zu bytes; http.body_budget_bytes)%s",
			 method, path, who, size,
			 ext_budget_used(&s->budget), s->budget.total, left_out);
	}
	return ext__http_send_error(conn, 503, MHD_HTTP_HEADER_RETRY_AFTER, "1",
				    "troupe: too many request bodies in memory at once; retry");
}

/* ---- TLS ------------------------------------------------------------------ */

static struct conn_state *conn_state_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

static gnutls_session_t session_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);

	return ci ? ci->tls_session : NULL;
}

/* A connection opens (before its handshake) or closes. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct ext_server *s = cls;
	gnutls_session_t session;
	struct conn_state *cs;

	if (code != MHD_CONNECTION_NOTIFY_STARTED) {
		cs = *socket_context;
		/* Before libmicrohttpd closes the descriptor (conn_guard.h). */
		if (cs)
			conn_guard_closed(s->conns.guard, cs->guard);
		free(cs);
		*socket_context = NULL;
		return;
	}
	cs = calloc(1, sizeof(*cs));
	if (cs) {
		cs->s = s;
		cs->guard = ext__conns_open(&s->conns, conn);
	}
	*socket_context = cs;   /* NULL: retrieve_cert fails the handshake */
	if (!s->tls)
		return;
	session = session_of(conn);
	if (session)
		ext_tls_session_start(s->tls, session);
}

/* The connection's guard record, or NULL. */
static struct conn_guard_conn *guard_of(const struct conn_state *cs)
{
	return cs ? cs->guard : NULL;
}

/* GnuTLS asks for the server's certificate (connection's thread). */
static int retrieve_cert(gnutls_session_t session, const struct gnutls_cert_retr_st *info,
			 gnutls_pcert_st **certs, unsigned int *n_certs,
			 gnutls_ocsp_data_st **ocsp, unsigned int *n_ocsp,
			 gnutls_privkey_t *key, unsigned int *flags)
{
	/* libmicrohttpd keeps its connection as the session's pointer. */
	struct MHD_Connection *conn = gnutls_session_get_ptr(session);
	struct conn_state *cs = conn ? conn_state_of(conn) : NULL;

	(void)info;
	*ocsp = NULL;
	*n_ocsp = 0;
	if (!cs)
		return GNUTLS_E_MEMORY_ERROR;
	return ext_tls_retrieve(cs->s->tls, certs, n_certs, key, flags);
}

/* True when the client may call; otherwise the 403 is queued into *ret. The
 * verdict is kept in <cs> (the connection's state; NULL: out of memory, no
 * verdict kept) until the client CA changes. */
static bool client_allowed(struct ext_server *s, struct MHD_Connection *conn,
			   struct conn_state *cs, const char *method, const char *path,
			   enum MHD_Result *ret)
{
	struct ext_tls_peer local, *peer = cs ? &cs->peer : &local;
	unsigned generation = ext_tls_trust_generation(s->tls);
	char who[EXT_PEER_NAME_BUF], left_out[EXT_LEFT_OUT_BUF];

	if (!cs || !cs->decided || cs->peer.trust_generation != generation) {
		gnutls_session_t session = session_of(conn);

		if (session) {
			ext_tls_check_session(s->tls, session, peer);
		} else {
			memset(peer, 0, sizeof(*peer));
			peer->verdict = EXT_TLS_NO_CERT;
			snprintf(peer->reason, sizeof(peer->reason), "no TLS session");
		}
		if (cs)
			cs->decided = true;
		if (peer->verdict == EXT_TLS_ALLOWED && log_enabled(LOG_DEBUG)) {
			ext__http_peer_name(conn, who, sizeof(who));
			log_debug("tls", "client %s at %s allowed", peer->dn, who);
		}
	}
	if (peer->verdict == EXT_TLS_ALLOWED)
		return true;
	if (ext_log_limit_pass(&s->denied_log, util_now_ns(), left_out, sizeof(left_out))) {
		ext__http_peer_name(conn, who, sizeof(who));
		log_warn("tls", "%s %s from %s%s%s refused with 403: %s%s", method, path, who,
			 peer->dn[0] ? " as " : "", peer->dn, peer->reason, left_out);
	}
	*ret = ext__http_send_error(conn, 403, NULL, NULL, "troupe: client certificate refused: %s",
				    peer->reason);
	return false;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	struct ext_server *s = cls;
	const struct ext_service *svc = s->svc;
	struct request *rq = *con_cls;
	struct conn_state *cs = NULL;   /* looked up on the request's first call only */
	enum route route = R_NONE;
	bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
	bool known_path = false;
	struct ext_reply reply;
	char path[ROUTE_PATH_BUF], holder[CACHE_LEASE_HOLDER_BUF];
	enum MHD_Result ret;

	(void)version;
	if (!rq) {
		cs = conn_state_of(conn);
		conn_guard_request_begin(s->conns.guard, guard_of(cs));  /* headers are in */
	}
	ext__http_route_path(url, svc->cfg->path_prefix, path, sizeof(path));
	if (!rq && s->tls && ext_tls_wants_client_cert(s->tls) &&
	    !client_allowed(s, conn, cs, method, path, &ret))
		return ret;
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
			return ext__http_send_error(conn, 405, MHD_HTTP_HEADER_ALLOW,
						    routes[i].post ? "POST" : "GET, HEAD",
						    "troupe: %s is not allowed on %s", method,
						    path);
	}
	if (route == R_NONE && !rq) {
		if (known_path)
			return MHD_NO;
		log_debug("http", "%s %s: no such endpoint", method, url);
		return ext__http_send_error(conn, 404, NULL, NULL, "troupe: no such endpoint %s",
					    path);
	}
	if (!rq) {
		const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_LENGTH);
		unsigned long long want = cl ? strtoull(cl, NULL, 10) : 0;
		struct ext_body reserved = { NULL, 0, 0, 0 };

		if (post && cl && want > svc->cfg->max_body_bytes) {
			log_warn("http", "%s %s: body of %s bytes refused (limit %zu)", method, path,
				 cl, svc->cfg->max_body_bytes);
			return ext__http_send_error(conn, 413, NULL, NULL,
						    "troupe: request body larger than %zu bytes",
						    svc->cfg->max_body_bytes);
		}
		/* The whole body's room, before any byte is read. */
		if (want > 0 && want <= svc->cfg->max_body_bytes &&
		    ext_body_reserve(&s->budget, &reserved, (size_t)want) != EXT_BODY_OK)
			return refuse_busy(s, conn, method, path, cl);
		rq = calloc(1, sizeof(*rq));
		if (!rq) {
			ext_body_drop(&s->budget, &reserved);
			return MHD_NO;
		}
		rq->body = reserved;
		rq->guard = guard_of(cs);
		rq->started_ns = util_now_ns();
		pthread_mutex_init(&rq->lock, NULL);
		*con_cls = rq;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		if (rq->body_error == EXT_BODY_OK)
			rq->body_error = ext_body_add(&s->budget, &rq->body, upload_data,
						      *upload_data_size, svc->cfg->max_body_bytes);
		*upload_data_size = 0;
		return MHD_YES;
	}
	/* The body is in: the verb runs, and the guard leaves the connection to
	 * the verb's own timeouts. */
	conn_guard_body_done(s->conns.guard, rq->guard);
	if (rq->body_error == EXT_BODY_TOO_LARGE) {
		log_warn("http", "%s %s: chunked body exceeded %zu bytes; refused", method, path,
			 svc->cfg->max_body_bytes);
		return ext__http_send_error(conn, 413, NULL, NULL,
					    "troupe: request body larger than %zu bytes",
					    svc->cfg->max_body_bytes);
	}
	if (rq->body_error == EXT_BODY_OVER_BUDGET)
		return refuse_busy(s, conn, method, path, "(chunked)");
	if (rq->body_error == EXT_BODY_NO_MEMORY)
		return ext__http_send_error(conn, 503, MHD_HTTP_HEADER_RETRY_AFTER, "1",
					    "troupe: out of memory reading the request");

	ext_reply_init(&reply);
	if (post && ext_service_is_standby(svc, holder, sizeof(holder))) {
		/* The Service should not have sent this (a standby is not
		 * ready); kube-scheduler retries, and reaches the leader. */
		ext_reply_fini(&reply);
		return ext__http_send_error(conn, 503, MHD_HTTP_HEADER_RETRY_AFTER, "1",
					    "troupe: this replica is a standby; the leader is %s",
					    holder[0] ? holder : "(none yet)");
	}
	if (svc->baseline && post) {
		/* The benchmarks' L0/L1: the same server, body and reply path, no
		 * verb. */
		if (svc->baseline->level >= 1)
			cJSON_Delete(cJSON_ParseWithLength(rq->body.buf ? rq->body.buf : "",
							   rq->body.len));
		strbuf_append(&reply.body, svc->baseline->reply, svc->baseline->reply_len);
		ret = ext__http_send(conn, 200, &reply.body, NULL, NULL);
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
	ext_count(svc->counters, counter_of(route), reply.error || reply.status != 200,
		  util_now_ns() - rq->started_ns);
	log_debug("http", "%s %s -> %u (%zu bytes in, %zu out, %.0f us)", method, path,
		  reply.status, rq->body.len, reply.body.len,
		  (double)(util_now_ns() - rq->started_ns) / 1e3);
	ret = ext__http_send(conn, reply.status, &reply.body, NULL, NULL);
	ext_reply_fini(&reply);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct ext_server *s = cls;
	struct request *rq = *con_cls;

	/* A request answered on its first call (404, 413, a refusal) has no
	 * record to hold its guard: only then is the connection asked again. */
	conn_guard_request_end(s->conns.guard, rq ? rq->guard : guard_of(conn_state_of(conn)));
	if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK &&
	    toe != MHD_REQUEST_TERMINATED_CLIENT_ABORT && rq)
		log_debug("http", "request ended early (code %d)", (int)toe);
	if (rq) {
		if (rq->pending) {
			__atomic_sub_fetch(&pending_total, 1, __ATOMIC_RELAXED);
			ext_reply_fini(&rq->reply);
		}
		ext_body_drop(&s->budget, &rq->body);
		pthread_mutex_destroy(&rq->lock);
		free(rq);
	}
	*con_cls = NULL;
}

/* libmicrohttpd's messages, a few a second: a client can make it log at will
 * (a plain-HTTP client on the HTTPS port, a broken handshake). */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct ext_server *s = cls;

	ext__http_log_mhd("http", &s->mhd_log, fmt, ap);
}

/* Load the TLS credentials into <s>. Returns 0 or -EINVAL with <err> set. */
static int start_tls(struct ext_server *s, const struct ext_config *cfg, char *err,
		     size_t errlen)
{
	char terr[EXT_ERR_LEN];

	if (MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK2) != MHD_YES) {
		snprintf(err, errlen, "tls: this libmicrohttpd was built without HTTPS (or with "
			 "GnuTLS before 3.6.3); troupe cannot serve TLS");
		return -EINVAL;
	}
	s->tls = ext_tls_from_config(&cfg->tls, terr, sizeof(terr));
	if (!s->tls) {
		snprintf(err, errlen, "tls: %s", terr);
		return -EINVAL;
	}
	return 0;
}

/* libmicrohttpd's own connection limit sits this far above the guard's, so
 * that the guard, not a refusal, decides who goes. */
enum { GUARD_MARGIN = 64 };

struct ext_server *ext_server_start(const struct ext_service *svc, char *err, size_t errlen)
{
	const struct ext_config *cfg = svc->cfg;
	struct addrinfo hints = { 0 }, *ai = NULL;
	struct ext_server *s = NULL;
	const union MHD_DaemonInfo *info;
	unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG |
			     MHD_ALLOW_SUSPEND_RESUME;
	unsigned threads = cfg->threads;
	struct cpu_limit cpus;
	char port[8], why[sizeof(cpus.where) + 64] = "";
	int rc;

	if (threads == 0) {
		cpu_limit_get(&cpus);
		threads = cpus.cpus;
		snprintf(why, sizeof(why), " (one per CPU troupe may use: %s%s)",
			 cpus.source == CPU_LIMIT_CGROUP ? "the cgroup quota in " :
			 cpus.source == CPU_LIMIT_AFFINITY ? "its affinity mask" : "the host's cores",
			 cpus.source == CPU_LIMIT_CGROUP ? cpus.where : "");
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
	s->budget.total = cfg->body_budget_bytes;
	s->busy_log.per_second = LOG_BURST;
	s->denied_log.per_second = LOG_BURST;
	s->mhd_log.per_second = LOG_BURST;
	if (cfg->tls.cert_file[0] && start_tls(s, cfg, err, errlen) < 0)
		goto fail;
	if (ext__conns_start(&s->conns, cfg) < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	{
		/* The options both modes share; libmicrohttpd wants the logger first,
		 * and a callback with its argument as (intptr_t, pointer). */
		struct MHD_OptionItem common[] = {
			{ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, s },
			{ MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr },
			{ MHD_OPTION_THREAD_POOL_SIZE, threads, NULL },
			/* The guard keeps connection_limit; libmicrohttpd's own limit,
			 * which refuses, is only a backstop above it. */
			{ MHD_OPTION_CONNECTION_LIMIT, cfg->connection_limit + GUARD_MARGIN, NULL },
			{ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s },
			{ MHD_OPTION_CONNECTION_TIMEOUT, cfg->connection_timeout_s, NULL },
			{ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s },
			{ MHD_OPTION_END, 0, NULL },
		};

		if (s->tls)
			s->daemon = MHD_start_daemon(flags | MHD_USE_TLS, cfg->listen_port, NULL, NULL,
						     on_request, s, MHD_OPTION_ARRAY, common,
						     MHD_OPTION_HTTPS_CERT_CALLBACK2, retrieve_cert,
						     MHD_OPTION_HTTPS_PRIORITIES, TLS_PRIORITIES,
						     MHD_OPTION_END);
		else
			s->daemon = MHD_start_daemon(flags, cfg->listen_port, NULL, NULL, on_request,
						     s, MHD_OPTION_ARRAY, common, MHD_OPTION_END);
	}
	if (!s->daemon) {
		snprintf(err, errlen, "cannot listen on %s:%u (address in use, or not an address "
			 "of this host?)", cfg->listen_host, cfg->listen_port);
		goto fail;
	}
	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : cfg->listen_port;
	freeaddrinfo(ai);
	log_info("http", "serving with %u threads%s; %u connections at most (%u per client), "
		 "closed after %us with no request or %us for a request's body; body limit %zu "
		 "bytes, %zu bytes for all bodies at once", threads, why, cfg->connection_limit,
		 ext__conns_per_client(cfg), cfg->connection_timeout_s, cfg->request_deadline_s,
		 cfg->max_body_bytes, cfg->body_budget_bytes);
	return s;
fail:
	if (ai)
		freeaddrinfo(ai);
	if (s) {
		ext__conns_stop(&s->conns);
		ext_tls_free(s->tls);
	}
	free(s);
	return NULL;
}

bool ext_server_is_tls(const struct ext_server *s)
{
	return s->tls != NULL;
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
	MHD_stop_daemon(s->daemon);     /* reports every connection closed */
	ext__conns_stop(&s->conns);
	ext_tls_free(s->tls);
	free(s);
}

void ext_server_guard_stats(struct ext_server *s, struct conn_guard_stats *out)
{
	conn_guard_get_stats(s->conns.guard, out);
}
