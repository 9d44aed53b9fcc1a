/* Bounds on the connections the verbs listener keeps, which libmicrohttpd
 * 0.9.75 cannot give by itself: its only timeout is an inactivity timeout that
 * any byte resets (slowloris at one header byte every 3 s holds a slot for
 * ever), and its limits refuse new connections, so 1,100 idle ones stopped
 * all scheduling. The guard tracks every connection through the server's
 * callbacks and closes, with shutdown(2) so that libmicrohttpd cleans up as
 * for a client that left:
 *
 *   - a connection with no request in progress (idle between requests, or
 *     still sending its headers: libmicrohttpd shows neither) once idle_s
 *     have passed since it opened or its last answer, however many bytes
 *     trickled in;
 *   - a request whose body is not in request_s after its headers;
 *   - when all <slots> are taken, the longest-idle connection, to make room
 *     for the new one (a connection in the middle of a request keeps its
 *     slot until its deadline; if every one is, the new one is closed);
 *   - past <per_client> connections from one address, that address's own
 *     longest-idle connection, so one client cannot take every slot.
 *
 * A connection whose body is in (the verb runs, or a gang member's bind is
 * parked) is never closed by the guard: the verb's own timeouts bound it.
 * Thread: any; one mutex.
 */
#ifndef TROUPE_EXTENDER_CONN_GUARD_H
#define TROUPE_EXTENDER_CONN_GUARD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct conn_guard;
struct conn_guard_conn;

struct conn_guard_config {
	unsigned slots;                 /* connections kept at once (>= 1) */
	unsigned per_client;            /* of them from one address (>= 1) */
	unsigned idle_s;                /* no request in progress: closed after this */
	unsigned request_s;             /* headers to end of body */
	/* The clock (tests); NULL: the monotonic clock. */
	uint64_t (*now_ns)(void *ctx);
	void *clock_ctx;
};

struct conn_guard_stats {
	unsigned open;                  /* connections tracked now */
	unsigned busy;                  /* of them with a request in progress */
	uint64_t displaced;             /* closed to make room for a new one */
	uint64_t idle_expired;          /* closed after idle_s without a request */
	uint64_t request_expired;       /* closed: body not in within request_s */
	uint64_t refused;               /* new ones closed: every slot was busy */
};

/* NULL when out of memory. Starts no thread: the server calls sweep. */
struct conn_guard *conn_guard_new(const struct conn_guard_config *cfg);
void conn_guard_free(struct conn_guard *g);

/* A connection was accepted on <fd> from <addr>. Returns its record (NULL only
 * when out of memory: the connection is then closed). Makes room first when
 * the slots or the client's share are full. */
struct conn_guard_conn *conn_guard_open(struct conn_guard *g, int fd, const struct sockaddr *addr,
					socklen_t addrlen);
/* The server is done with the connection (its fd is still open): frees <c>. */
void conn_guard_closed(struct conn_guard *g, struct conn_guard_conn *c);

/* A request's headers are in / its body is in / its answer was sent. */
void conn_guard_request_begin(struct conn_guard *g, struct conn_guard_conn *c);
void conn_guard_body_done(struct conn_guard *g, struct conn_guard_conn *c);
void conn_guard_request_end(struct conn_guard *g, struct conn_guard_conn *c);

/* Close what has passed its deadline. Call about once a second. */
void conn_guard_sweep(struct conn_guard *g);

void conn_guard_get_stats(struct conn_guard *g, struct conn_guard_stats *out);

#endif
