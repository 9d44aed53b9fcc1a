/* The HTTP server: libmicrohttpd in its internal epoll thread-pool mode, routing
 * the extender verbs (the ops endpoints are ops_server.c's), over HTTPS when tls.* is
 * set (with client certificates checked when tls.client_ca_file is).
 */
#ifndef TROUPE_EXTENDER_SERVER_H
#define TROUPE_EXTENDER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "extender/conn_guard.h"
#include "extender/verbs.h"

struct ext_server;

/* Start serving on cfg->listen_host:listen_port. Returns NULL with a message in
 * <err>. <svc> must outlive the server. */
struct ext_server *ext_server_start(const struct ext_service *svc, char *err, size_t errlen);
/* True when serving HTTPS (tls.cert_file set). */
bool ext_server_is_tls(const struct ext_server *s);
/* The port actually bound (useful with port 0). */
uint16_t ext_server_port(const struct ext_server *s);
/* Wait (at most <timeout_ms>) until every bind whose answer came later has been
 * sent: call after answering them (gang and binder shutdown), before stopping. */
void ext_server_drain(struct ext_server *s, unsigned timeout_ms);
/* The connection guard's counters (conn_guard.h). */
void ext_server_guard_stats(struct ext_server *s, struct conn_guard_stats *out);
/* Stop accepting, finish in-flight requests, free. */
void ext_server_stop(struct ext_server *s);

#endif
