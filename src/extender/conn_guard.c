/* The connection guard (conn_guard.h). Records sit on one of two lists: idle
 * (no request in progress), kept in the order they became idle so the head is
 * the longest idle and the idle sweep stops at the first one not expired; and
 * busy (headers in, body not yet), swept in full (at most <slots> long). A
 * record whose body is in is on neither. A record the guard closed is taken
 * off its list at once, so it is never chosen twice, and freed when the server
 * reports the connection gone: libmicrohttpd reports it before it closes the
 * descriptor, and the report takes the guard's lock, so shutdown(2) under that
 * lock never reaches a descriptor that was closed and reused.
 *
 * Each client address has an entry in a hash map (strmap), shared by its
 * records, counting how many of them are on either list: a new connection
 * checks its client's share against that count in O(1), where walking both
 * lists would cost O(slots) for every connection accepted. The entry goes
 * with its address's last record.
 *
 * The closes are logged as a summary at most every 10 s (a flood of them would
 * otherwise flood the log), and counted for /metrics.
 */
#include "extender/conn_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/strmap.h"
#include "common/util.h"

enum conn_state { C_IDLE, C_BUSY, C_RUNNING, C_CLOSING };

enum {
	/* A client's key: 4 (IPv4) or 6 (IPv6) as its first byte, then the
	 * address's 4 or 16 bytes. An unknown address is IPv4 0.0.0.0. */
	CLIENT_KEY_BUF = 17,
};

/* One client address (conn_guard.clients). Guarded by conn_guard.lock. */
struct conn_client {
	char key[CLIENT_KEY_BUF];       /* the map's key points here */
	size_t klen;
	unsigned listed;                /* its records on idle or busy: its share */
	unsigned records;               /* its records not yet freed */
};

struct conn_guard_conn {
	struct conn_guard_conn *prev, *next;    /* on idle or busy; NULL when neither */
	enum conn_state state;
	int fd;
	uint64_t since_ns;              /* became idle, or headers in (busy) */
	struct conn_client *client;     /* its address's entry; set at open */
};

struct conn_list {
	struct conn_guard_conn *head, *tail;
	unsigned n;
};

struct conn_guard {
	struct conn_guard_config cfg;
	pthread_mutex_t lock;
	struct conn_list idle, busy;
	struct strmap clients;          /* key -> struct conn_client */
	unsigned open;                  /* not closing */
	struct conn_guard_stats stats;
	struct conn_guard_stats logged; /* what the last summary line counted */
	uint64_t logged_ns;
};

static uint64_t now_of(const struct conn_guard *g)
{
	return g->cfg.now_ns ? g->cfg.now_ns(g->cfg.clock_ctx) : util_now_ns();
}

/* Both lists count a record towards its client's share. */
static void list_push(struct conn_list *l, struct conn_guard_conn *c)
{
	c->client->listed++;
	c->next = NULL;
	c->prev = l->tail;
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
	l->n++;
}

static void list_remove(struct conn_list *l, struct conn_guard_conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	c->prev = c->next = NULL;
	l->n--;
	c->client->listed--;
}

static struct conn_list *list_of(struct conn_guard *g, const struct conn_guard_conn *c)
{
	return c->state == C_IDLE ? &g->idle : c->state == C_BUSY ? &g->busy : NULL;
}

/* Move <c> to <to>, off its list and onto the new one's tail. Lock held. */
static void enter(struct conn_guard *g, struct conn_guard_conn *c, enum conn_state to)
{
	struct conn_list *l = list_of(g, c);

	if (l)
		list_remove(l, c);
	if (to == C_CLOSING && c->state != C_CLOSING)
		g->open--;
	c->state = to;
	c->since_ns = now_of(g);
	l = list_of(g, c);
	if (l)
		list_push(l, c);
}

/* Close <c> now: the server sees the client gone. Lock held. */
static void close_conn(struct conn_guard *g, struct conn_guard_conn *c, uint64_t *counter)
{
	enter(g, c, C_CLOSING);
	(void)shutdown(c->fd, SHUT_RDWR);
	(*counter)++;
}

/* The longest-idle connection other than <except>, from <c>'s client only
 * when <c> is set. */
static struct conn_guard_conn *oldest_idle(struct conn_guard *g, const struct conn_guard_conn *c,
					   const struct conn_guard_conn *except)
{
	for (struct conn_guard_conn *o = g->idle.head; o; o = o->next)
		if (o != except && (!c || o->client == c->client))
			return o;
	return NULL;
}

static void log_summary(struct conn_guard *g, uint64_t now)
{
	struct conn_guard_stats *s = &g->stats, *l = &g->logged;

	if (now - g->logged_ns < 10000000000ULL && g->logged_ns)
		return;
	if (s->displaced == l->displaced && s->idle_expired == l->idle_expired &&
	    s->request_expired == l->request_expired && s->refused == l->refused)
		return;
	log_warn("http", "connections closed since the last report: %llu to make room for new "
		 "ones (slots %u, %u per client), %llu idle over %us, %llu with a request body "
		 "not in within %us, %llu new ones refused with every slot mid-request; %u open",
		 (unsigned long long)(s->displaced - l->displaced), g->cfg.slots, g->cfg.per_client,
		 (unsigned long long)(s->idle_expired - l->idle_expired), g->cfg.idle_s,
		 (unsigned long long)(s->request_expired - l->request_expired), g->cfg.request_s,
		 (unsigned long long)(s->refused - l->refused), g->open);
	*l = *s;
	g->logged_ns = now;
}

struct conn_guard *conn_guard_new(const struct conn_guard_config *cfg)
{
	struct conn_guard *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->cfg = *cfg;
	if (!g->cfg.slots)
		g->cfg.slots = 1;
	if (!g->cfg.per_client || g->cfg.per_client > g->cfg.slots)
		g->cfg.per_client = g->cfg.slots;
	strmap_init(&g->clients);
	pthread_mutex_init(&g->lock, NULL);
	return g;
}

void conn_guard_free(struct conn_guard *g)
{
	if (!g)
		return;
	/* The server has reported every connection closed before this. */
	for (struct conn_list *l = &g->idle; l; l = l == &g->idle ? &g->busy : NULL)
		while (l->head) {
			struct conn_guard_conn *c = l->head;

			list_remove(l, c);
			free(c);
		}
	{
		size_t pos = 0;
		void *cl;

		while (strmap_next(&g->clients, &pos, NULL, &cl))
			free(cl);
	}
	strmap_fini(&g->clients);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

/* <addr>'s key into <key>; returns its length. */
static size_t client_key(const struct sockaddr *addr, socklen_t addrlen, char *key)
{
	memset(key, 0, CLIENT_KEY_BUF);
	if (addr && addr->sa_family == AF_INET6 && addrlen >= sizeof(struct sockaddr_in6)) {
		key[0] = 6;
		memcpy(key + 1, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
		return 17;
	}
	key[0] = 4;
	if (addr && addr->sa_family == AF_INET && addrlen >= sizeof(struct sockaddr_in))
		memcpy(key + 1, &((const struct sockaddr_in *)addr)->sin_addr, 4);
	return 5;
}

struct conn_guard_conn *conn_guard_open(struct conn_guard *g, int fd, const struct sockaddr *addr,
					socklen_t addrlen)
{
	struct conn_guard_conn *c = calloc(1, sizeof(*c)), *victim;
	/* A new client's entry, allocated before the lock; freed below when the
	 * address has one already. */
	struct conn_client *spare = calloc(1, sizeof(*spare)), *cl;
	char key[CLIENT_KEY_BUF];
	size_t klen = client_key(addr, addrlen, key);

	if (!c || !spare)
		goto fail;
	c->fd = fd;
	c->state = C_RUNNING;   /* on no list until enter() below */
	pthread_mutex_lock(&g->lock);
	cl = strmap_get(&g->clients, key, klen);
	if (!cl) {
		cl = spare;
		memcpy(cl->key, key, klen);
		cl->klen = klen;
		/* The table grows (an allocation) only when distinct clients
		 * outgrow it, rarely and never on a known client's connection. */
		if (strmap_put(&g->clients, cl->key, cl->klen, cl, NULL) < 0) {
			pthread_mutex_unlock(&g->lock);
			goto fail;
		}
		spare = NULL;
	}
	cl->records++;
	c->client = cl;
	g->open++;
	enter(g, c, C_IDLE);
	/* Its client's share first: its own longest-idle connection makes room. */
	if (cl->listed > g->cfg.per_client) {
		victim = oldest_idle(g, c, c);
		close_conn(g, victim ? victim : c, victim ? &g->stats.displaced : &g->stats.refused);
	}
	if (c->state != C_CLOSING && g->open > g->cfg.slots) {
		victim = oldest_idle(g, NULL, c);
		close_conn(g, victim ? victim : c, victim ? &g->stats.displaced : &g->stats.refused);
	}
	log_summary(g, c->since_ns);
	pthread_mutex_unlock(&g->lock);
	free(spare);
	return c;
fail:
	free(spare);
	free(c);
	return NULL;
}

void conn_guard_closed(struct conn_guard *g, struct conn_guard_conn *c)
{
	struct conn_client *gone = NULL;
	struct conn_list *l;

	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	l = list_of(g, c);
	if (l)
		list_remove(l, c);
	if (c->state != C_CLOSING)
		g->open--;
	if (--c->client->records == 0) {
		gone = c->client;
		strmap_del(&g->clients, gone->key, gone->klen);
	}
	pthread_mutex_unlock(&g->lock);
	free(gone);
	free(c);
}

/* Move <c> to <to> unless the guard is closing it. */
static void move(struct conn_guard *g, struct conn_guard_conn *c, enum conn_state to)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	if (c->state != C_CLOSING && c->state != to)
		enter(g, c, to);
	pthread_mutex_unlock(&g->lock);
}

void conn_guard_request_begin(struct conn_guard *g, struct conn_guard_conn *c)
{
	move(g, c, C_BUSY);
}

void conn_guard_body_done(struct conn_guard *g, struct conn_guard_conn *c)
{
	move(g, c, C_RUNNING);
}

void conn_guard_request_end(struct conn_guard *g, struct conn_guard_conn *c)
{
	/* Idle afresh from now, also when the request was answered at once
	 * (an error before its body) and the record never left idle. */
	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	if (c->state != C_CLOSING)
		enter(g, c, C_IDLE);
	pthread_mutex_unlock(&g->lock);
}

void conn_guard_sweep(struct conn_guard *g)
{
	uint64_t now = now_of(g), idle = (uint64_t)g->cfg.idle_s * 1000000000ULL,
		 req = (uint64_t)g->cfg.request_s * 1000000000ULL;
	struct conn_guard_conn *c, *next;

	pthread_mutex_lock(&g->lock);
	/* Oldest first: the first one not expired ends the idle walk. */
	while ((c = g->idle.head) && util_elapsed_ns(now, c->since_ns) >= idle)
		close_conn(g, c, &g->stats.idle_expired);
	for (c = g->busy.head; c; c = next) {
		next = c->next;
		if (util_elapsed_ns(now, c->since_ns) >= req)
			close_conn(g, c, &g->stats.request_expired);
	}
	log_summary(g, now);
	pthread_mutex_unlock(&g->lock);
}

void conn_guard_get_stats(struct conn_guard *g, struct conn_guard_stats *out)
{
	pthread_mutex_lock(&g->lock);
	*out = g->stats;
	out->open = g->open;
	out->busy = g->busy.n;
	pthread_mutex_unlock(&g->lock);
}
