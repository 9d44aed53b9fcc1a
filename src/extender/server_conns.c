/* The guard's owner for the verbs' server (server_conns.h).
 *
 * The sweeper sleeps on a condition variable rather than in sleep(3), so that
 * ext__conns_stop wakes it at once and a server stops without waiting out the
 * second. A connection's record is made from its descriptor and its client's
 * address, the address's length following its family since libmicrohttpd
 * gives only the pointer.
 */
#include "extender/server_conns.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

unsigned ext__conns_per_client(const struct ext_config *cfg)
{
	unsigned q = cfg->connection_limit / 4;

	return cfg->connections_per_client ? cfg->connections_per_client : q ? q : 1;
}

static void *sweep_main(void *arg)
{
	struct ext_conns *c = arg;

	pthread_mutex_lock(&c->stop_lock);
	while (!c->stopping) {
		struct timespec ts;

		pthread_mutex_unlock(&c->stop_lock);
		conn_guard_sweep(c->guard);
		pthread_mutex_lock(&c->stop_lock);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		if (!c->stopping)
			pthread_cond_timedwait(&c->stop_cond, &c->stop_lock, &ts);
	}
	pthread_mutex_unlock(&c->stop_lock);
	return NULL;
}

int ext__conns_start(struct ext_conns *c, const struct ext_config *cfg)
{
	struct conn_guard_config gc = {
		.slots = cfg->connection_limit,
		.per_client = ext__conns_per_client(cfg),
		.idle_s = cfg->connection_timeout_s,
		.request_s = cfg->request_deadline_s,
	};

	c->guard = conn_guard_new(&gc);
	if (!c->guard)
		return -1;
	pthread_mutex_init(&c->stop_lock, NULL);
	pthread_cond_init(&c->stop_cond, NULL);
	if (pthread_create(&c->sweeper, NULL, sweep_main, c) != 0)
		return -1;
	c->sweeping = true;
	return 0;
}

void ext__conns_stop(struct ext_conns *c)
{
	if (!c->guard)
		return;
	if (c->sweeping) {
		pthread_mutex_lock(&c->stop_lock);
		c->stopping = true;
		pthread_cond_signal(&c->stop_cond);
		pthread_mutex_unlock(&c->stop_lock);
		pthread_join(c->sweeper, NULL);
		c->sweeping = false;
	}
	pthread_mutex_destroy(&c->stop_lock);
	pthread_cond_destroy(&c->stop_cond);
	conn_guard_free(c->guard);
	c->guard = NULL;
}

struct conn_guard_conn *ext__conns_open(struct ext_conns *c, struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *fd, *addr;
	const struct sockaddr *sa;

	fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!fd)
		return NULL;
	addr = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	sa = addr ? addr->client_addr : NULL;
	return conn_guard_open(c->guard, fd->connect_fd, sa,
			       sa && sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
							       : sizeof(struct sockaddr_in));
}
