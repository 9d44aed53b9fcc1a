/* Unit tests of the connection guard (conn_guard.c) on socketpairs and a fake
 * clock: a connection the guard closes reads as closed on the other end. The
 * longest-idle connection makes room when the slots are full, never one in
 * the middle of a request; a client past its share gives up its own; idle and
 * header trickle end at idle_s however many bytes came; a body not in within
 * request_s ends; a running verb is never closed; a client's count goes back
 * to 0 as its connections close. And a property check: over many random
 * sequences the guard never keeps more than <slots> open, never closes a
 * running request, and never chooses a closed one twice. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "extender/conn_guard.h"

static const uint64_t S = 1000000000ULL;

struct clock {
	uint64_t now;
};

static uint64_t clock_now(void *ctx)
{
	return ((struct clock *)ctx)->now;
}

/* One client connection: <ours> is the server's end the guard tracks. */
struct peer {
	int ours, theirs;
	struct conn_guard_conn *c;
	bool freed;
};

static struct sockaddr_in addr_of(unsigned host)
{
	struct sockaddr_in a = { .sin_family = AF_INET };

	a.sin_addr.s_addr = htonl(0x7f000000u | host);
	return a;
}

static void peer_open(struct conn_guard *g, struct peer *p, unsigned host)
{
	int sv[2];
	struct sockaddr_in a = addr_of(host);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	p->ours = sv[0];
	p->theirs = sv[1];
	p->freed = false;
	p->c = conn_guard_open(g, p->ours, (struct sockaddr *)&a, sizeof(a));
	assert_non_null(p->c);
}

/* Whether the guard shut the server's end: the client then reads EOF. */
static bool peer_shut(const struct peer *p)
{
	char b;

	return recv(p->theirs, &b, 1, MSG_DONTWAIT) == 0;
}

/* The server notices and lets go, as libmicrohttpd does after a shutdown. */
static void peer_close(struct conn_guard *g, struct peer *p)
{
	if (p->freed)
		return;
	conn_guard_closed(g, p->c);
	close(p->ours);
	close(p->theirs);
	p->freed = true;
}

static struct conn_guard *guard(struct clock *clk, unsigned slots, unsigned per_client)
{
	struct conn_guard_config cfg = { .slots = slots, .per_client = per_client, .idle_s = 30,
					 .request_s = 10, .now_ns = clock_now, .clock_ctx = clk };
	struct conn_guard *g = conn_guard_new(&cfg);

	assert_non_null(g);
	return g;
}

static void test_full_slots_displace_the_longest_idle_not_a_busy_one(void **state)
{
	struct clock clk = { 100 * S };
	struct conn_guard *g = guard(&clk, 3, 3);
	struct conn_guard_stats st;
	struct peer p[5];

	(void)state;
	peer_open(g, &p[0], 1);
	clk.now += S;
	peer_open(g, &p[1], 2);
	clk.now += S;
	peer_open(g, &p[2], 3);
	/* p[0], the longest idle, is mid-request: p[1] goes instead. */
	conn_guard_request_begin(g, p[0].c);
	clk.now += S;
	peer_open(g, &p[3], 4);
	assert_false(peer_shut(&p[0]));
	assert_true(peer_shut(&p[1]));
	assert_false(peer_shut(&p[2]));
	assert_false(peer_shut(&p[3]));
	peer_close(g, &p[1]);
	/* Every other slot busy too: the newcomer itself is refused. */
	conn_guard_request_begin(g, p[2].c);
	conn_guard_request_begin(g, p[3].c);
	peer_open(g, &p[4], 5);
	assert_true(peer_shut(&p[4]));
	conn_guard_get_stats(g, &st);
	assert_int_equal(st.displaced, 1);
	assert_int_equal(st.refused, 1);
	assert_int_equal(st.open, 3);
	assert_int_equal(st.busy, 3);
	for (int i = 0; i < 5; i++)
		peer_close(g, &p[i]);
	conn_guard_get_stats(g, &st);
	assert_int_equal(st.open, 0);
	conn_guard_free(g);
}

static void test_a_client_past_its_share_gives_up_its_own(void **state)
{
	struct clock clk = { 100 * S };
	struct conn_guard *g = guard(&clk, 10, 2);
	struct peer other, a[3];

	(void)state;
	peer_open(g, &other, 9);        /* the longest idle of all, another client */
	clk.now += S;
	peer_open(g, &a[0], 1);
	clk.now += S;
	peer_open(g, &a[1], 1);
	clk.now += S;
	peer_open(g, &a[2], 1);
	assert_false(peer_shut(&other));
	assert_true(peer_shut(&a[0]));
	assert_false(peer_shut(&a[1]));
	assert_false(peer_shut(&a[2]));
	peer_close(g, &other);
	for (int i = 0; i < 3; i++)
		peer_close(g, &a[i]);
	conn_guard_free(g);
}

/* A client's share is counted afresh as its connections go, however they
 * end (closed idle, mid-request, while the verb runs, or displaced by the
 * guard): with one of its connections kept open throughout (running, so not
 * counted) its count goes back to 0 after each round of closes, so each round
 * it may again open <per_client> and only the one past them displaces. */
static void test_a_client_count_goes_back_to_zero_after_closes(void **state)
{
	struct clock clk = { 100 * S };
	struct conn_guard *g = guard(&clk, 10, 2);
	struct conn_guard_stats st;
	struct peer keep, a[3];

	(void)state;
	peer_open(g, &keep, 1);
	conn_guard_request_begin(g, keep.c);
	conn_guard_body_done(g, keep.c);
	for (int round = 0; round < 4; round++) {
		peer_open(g, &a[0], 1);
		clk.now += S;
		peer_open(g, &a[1], 1);
		clk.now += S;
		assert_false(peer_shut(&a[0]));
		assert_false(peer_shut(&a[1]));
		peer_open(g, &a[2], 1);         /* one past the share: a[0] goes */
		assert_true(peer_shut(&a[0]));
		assert_false(peer_shut(&a[1]));
		assert_false(peer_shut(&a[2]));
		if (round % 2) {
			conn_guard_request_begin(g, a[1].c);
			conn_guard_request_begin(g, a[2].c);
			conn_guard_body_done(g, a[2].c);
		}
		for (int i = 0; i < 3; i++)
			peer_close(g, &a[i]);
		clk.now += S;
	}
	assert_false(peer_shut(&keep));
	conn_guard_get_stats(g, &st);
	assert_int_equal(st.displaced, 4);
	assert_int_equal(st.refused, 0);
	assert_int_equal(st.open, 1);
	peer_close(g, &keep);
	conn_guard_get_stats(g, &st);
	assert_int_equal(st.open, 0);
	conn_guard_free(g);
}

static void test_deadlines_are_not_reset_by_bytes(void **state)
{
	struct clock clk = { 100 * S };
	struct conn_guard *g = guard(&clk, 10, 10);
	struct conn_guard_stats st;
	struct peer idle, body, running, answered;

	(void)state;
	peer_open(g, &idle, 1);         /* idle, or trickling its headers: the same here */
	peer_open(g, &body, 2);
	peer_open(g, &running, 3);
	peer_open(g, &answered, 4);
	conn_guard_request_begin(g, body.c);
	conn_guard_request_begin(g, running.c);
	conn_guard_body_done(g, running.c);
	clk.now += 9 * S;
	conn_guard_sweep(g);
	assert_false(peer_shut(&body));
	clk.now += S;                   /* 10 s since its headers: the body is late */
	conn_guard_sweep(g);
	assert_true(peer_shut(&body));
	/* One answered at 25 s idles afresh from then. */
	clk.now += 15 * S;
	conn_guard_request_begin(g, answered.c);
	conn_guard_body_done(g, answered.c);
	conn_guard_request_end(g, answered.c);
	clk.now += 5 * S;               /* 30 s since the idle one opened */
	conn_guard_sweep(g);
	assert_true(peer_shut(&idle));
	assert_false(peer_shut(&answered));
	assert_false(peer_shut(&running));
	clk.now += 600 * S;             /* a running verb (a parked bind) is never closed */
	conn_guard_sweep(g);
	assert_false(peer_shut(&running));
	assert_true(peer_shut(&answered));
	conn_guard_get_stats(g, &st);
	assert_int_equal(st.request_expired, 1);
	assert_int_equal(st.idle_expired, 2);
	peer_close(g, &idle);
	peer_close(g, &body);
	peer_close(g, &running);
	peer_close(g, &answered);
	conn_guard_free(g);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

enum { PROP_PEERS = 48 };

/* Random opens, requests, answers, clock steps, sweeps and server-side closes
 * over 8 slots: at every step no more than 8 are open and not shut, a running
 * request is never shut, and shut ones stay shut. */
static void test_random_sequences_keep_the_bounds(void **state)
{
	(void)state;
	for (int round = 0; round < 200; round++) {
		struct clock clk = { 1000 * S };
		struct conn_guard *g = guard(&clk, 8, 3 + (unsigned)(rnd() % 6));
		struct peer p[PROP_PEERS];
		enum { NONE, OPEN, BUSY, RUNNING } st[PROP_PEERS] = { NONE };
		bool shut[PROP_PEERS] = { false };
		int n = 0;

		for (int step = 0; step < 400; step++) {
			int i = n ? (int)(rnd() % (unsigned)n) : 0;
			unsigned what = (unsigned)(rnd() % 8);
			unsigned live = 0;

			if ((what == 0 || !n) && n < PROP_PEERS) {
				peer_open(g, &p[n], (unsigned)(rnd() % 4));
				st[n++] = OPEN;
			} else if (shut[i] || p[i].freed) {
				if (!p[i].freed && what == 1)
					peer_close(g, &p[i]);
			} else if (what == 2 && st[i] == OPEN) {
				conn_guard_request_begin(g, p[i].c);
				st[i] = BUSY;
			} else if (what == 3 && st[i] == BUSY) {
				conn_guard_body_done(g, p[i].c);
				st[i] = RUNNING;
			} else if (what == 4 && st[i] == RUNNING) {
				conn_guard_request_end(g, p[i].c);
				st[i] = OPEN;
			} else if (what == 5) {
				clk.now += (rnd() % 12) * S;
				conn_guard_sweep(g);
			} else if (what == 6) {
				peer_close(g, &p[i]);       /* the client left */
			}
			for (int k = 0; k < n; k++) {
				bool now_shut = !p[k].freed && peer_shut(&p[k]);

				if (p[k].freed)
					continue;
				if (shut[k])
					assert_true(now_shut);
				if (now_shut && !shut[k])
					assert_int_not_equal(st[k], RUNNING);
				shut[k] = now_shut;
				live += !now_shut;
			}
			assert_true(live <= 8);
		}
		for (int k = 0; k < n; k++)
			peer_close(g, &p[k]);
		conn_guard_free(g);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_slots_displace_the_longest_idle_not_a_busy_one),
		cmocka_unit_test(test_a_client_past_its_share_gives_up_its_own),
		cmocka_unit_test(test_a_client_count_goes_back_to_zero_after_closes),
		cmocka_unit_test(test_deadlines_are_not_reset_by_bytes),
		cmocka_unit_test(test_random_sequences_keep_the_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
