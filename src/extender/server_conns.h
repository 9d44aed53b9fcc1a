/* The verbs' server's side of the connection guard (conn_guard.h): the guard
 * itself, sized from the http.* settings, the sweeper thread that applies its
 * deadlines once a second, and the guard record of each libmicrohttpd
 * connection as it opens. Apart from server.c, which keeps the requests, so
 * that the thread's start and orderly stop read on their own.
 *
 * Shared only inside src/extender/ (hence ext__). Thread: ext__conns_start
 * and ext__conns_stop from the thread that starts and stops the server;
 * ext__conns_open from libmicrohttpd's threads, as conn_guard.h allows.
 */
#ifndef TROUPE_EXTENDER_SERVER_CONNS_H
#define TROUPE_EXTENDER_SERVER_CONNS_H

#include <pthread.h>
#include <stdbool.h>

#include <microhttpd.h>

#include "extender/config.h"
#include "extender/conn_guard.h"

struct ext_conns {
	struct conn_guard *guard;       /* deadlines and slots; NULL: not started */
	pthread_t sweeper;              /* runs conn_guard_sweep once a second */
	pthread_mutex_t stop_lock;
	pthread_cond_t stop_cond;
	bool stopping;                  /* guarded by stop_lock */
	bool sweeping;                  /* the sweeper was started */
};

/* http.connections_per_client, 0 meaning a quarter of the connection limit
 * (at least 1). */
unsigned ext__conns_per_client(const struct ext_config *cfg);
/* Make <c>'s guard from <cfg> and start its sweeper. Returns 0, or -1 (out of
 * memory, or no thread) with <c> for ext__conns_stop to undo. */
int ext__conns_start(struct ext_conns *c, const struct ext_config *cfg);
/* Stop the sweeper and free the guard; nothing when it never started. Call
 * after libmicrohttpd has reported every connection closed. */
void ext__conns_stop(struct ext_conns *c);
/* The guard's record for <conn>, which has just opened; NULL when it cannot be
 * tracked (no descriptor, out of memory). */
struct conn_guard_conn *ext__conns_open(struct ext_conns *c, struct MHD_Connection *conn);

#endif
