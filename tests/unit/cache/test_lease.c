/* Unit tests of leader election's pure part (lease.c) on a fake clock: when a
 * candidate may take the Lease (only once the record it saw has not changed
 * for the record's duration on its own clock), what a leader writes when it
 * renews and releases, when it must stop leading (renew deadline), the Lease's
 * wire form, the options' rules, and two electors sharing one Lease through a
 * fake API server with resourceVersions: never two leaders at once, and a
 * standby takes over after a crash and at once after a release.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cache/lease.h"
#include "common/log.h"

#define S 1000000000ULL         /* one second on the fake monotonic clock */
#define T0 (1000 * S)           /* an arbitrary start, far from zero */
#define WALL0 1796000000000000LL        /* an arbitrary wall clock, in µs */

static struct cache_lease_record rec(const char *holder, int32_t dur, int32_t transitions,
				     int64_t renew_us)
{
	struct cache_lease_record r;

	memset(&r, 0, sizeof(r));
	snprintf(r.holder, sizeof(r.holder), "%s", holder);
	r.duration_s = dur;
	r.transitions = transitions;
	r.acquire_us = WALL0;
	r.renew_us = renew_us;
	return r;
}

/* ---- The decision ------------------------------------------------------------ */

static void test_lease_missing_is_created_holding_it(void **state)
{
	struct cache_lease_view v = { 0 };
	struct cache_lease_record out;

	(void)state;
	assert_int_equal(cache_lease_decide(&v, false, "me", T0, WALL0, 15, &out),
			 CACHE_LEASE_CREATE);
	assert_string_equal(out.holder, "me");
	assert_int_equal(out.duration_s, 15);
	assert_int_equal(out.transitions, 0);
	assert_true(out.acquire_us == WALL0 && out.renew_us == WALL0);
}

/* Another holder's record is valid until it has been unchanged for its
 * duration on my clock - whatever its renewTime says (another machine's
 * clock: here an hour behind). */
static void test_lease_taken_only_after_duration_on_my_clock(void **state)
{
	struct cache_lease_view v = { 0 };
	struct cache_lease_record other = rec("other", 15, 3, WALL0 - 3600LL * 1000000),
				  out;

	(void)state;
	cache_lease_observe(&v, &other, T0);
	assert_int_equal(cache_lease_decide(&v, true, "me", T0, WALL0, 15, &out), CACHE_LEASE_WAIT);
	/* Re-reading the same record does not restart its clock. */
	cache_lease_observe(&v, &other, T0 + 10 * S);
	assert_int_equal(cache_lease_decide(&v, true, "me", T0 + 15 * S - 1, WALL0, 15, &out),
			 CACHE_LEASE_WAIT);
	assert_int_equal(cache_lease_decide(&v, true, "me", T0 + 15 * S, WALL0 + 7, 15, &out),
			 CACHE_LEASE_ACQUIRE);
	assert_string_equal(out.holder, "me");
	assert_int_equal(out.transitions, 4);
	assert_true(out.acquire_us == WALL0 + 7 && out.renew_us == WALL0 + 7);
}

/* Each renewal seen restarts the clock: a live leader is never taken over. */
static void test_lease_renewal_seen_restarts_the_clock(void **state)
{
	struct cache_lease_view v = { 0 };
	struct cache_lease_record out, r = rec("other", 15, 0, WALL0);

	(void)state;
	cache_lease_observe(&v, &r, T0);
	r.renew_us += 2000000;
	cache_lease_observe(&v, &r, T0 + 12 * S);
	assert_int_equal(cache_lease_decide(&v, true, "me", T0 + 20 * S, WALL0, 15, &out),
			 CACHE_LEASE_WAIT);
	assert_int_equal(cache_lease_decide(&v, true, "me", T0 + 27 * S, WALL0, 15, &out),
			 CACHE_LEASE_ACQUIRE);
}

/* A write the spec does not show (a renewal within one tick of the holder's
 * clock) still shows in the resourceVersion, and restarts the clock. */
static void test_lease_new_version_restarts_the_clock(void **state)
{
	struct cache_lease_view v = { 0 };
	struct cache_lease_record out, r = rec("other", 15, 0, WALL0);

	(void)state;
	snprintf(r.version, sizeof(r.version), "7");
	cache_lease_observe(&v, &r, T0);
	snprintf(r.version, sizeof(r.version), "8");
	cache_lease_observe(&v, &r, T0 + 10 * S);
	assert_int_equal(cache_lease_decide(&v, true, "me", T0 + 20 * S, WALL0, 15, &out),
			 CACHE_LEASE_WAIT);
}

/* The record's own duration counts, not mine; a released record (nobody,
 * 1 s) is taken at once. */
static void test_lease_record_duration_and_release(void **state)
{
	struct cache_lease_view v = { 0 };
	struct cache_lease_record out, r = rec("other", 60, 5, WALL0);

	(void)state;
	cache_lease_observe(&v, &r, T0);
	assert_int_equal(cache_lease_decide(&v, true, "me", T0 + 30 * S, WALL0, 15, &out),
			 CACHE_LEASE_WAIT);
	r = rec("", 1, 5, WALL0);
	cache_lease_observe(&v, &r, T0 + 31 * S);
	assert_int_equal(cache_lease_decide(&v, true, "me", T0 + 31 * S, WALL0, 15, &out),
			 CACHE_LEASE_ACQUIRE);
	assert_int_equal(out.transitions, 6);
	/* A zero or negative duration is no duration. */
	r = rec("other", -5, 0, WALL0);
	cache_lease_observe(&v, &r, T0 + 40 * S);
	assert_int_equal(cache_lease_decide(&v, true, "me", T0 + 40 * S, WALL0, 15, &out),
			 CACHE_LEASE_ACQUIRE);
}

/* A renewal keeps acquireTime and transitions and moves renewTime. */
static void test_lease_renew_keeps_acquire_and_transitions(void **state)
{
	struct cache_lease_view v = { 0 };
	struct cache_lease_record out, r = rec("me", 15, 2, WALL0);

	(void)state;
	r.acquire_us = WALL0 - 99;
	cache_lease_observe(&v, &r, T0);
	assert_int_equal(cache_lease_decide(&v, true, "me", T0 + S, WALL0 + 5, 15, &out),
			 CACHE_LEASE_RENEW);
	assert_true(out.acquire_us == WALL0 - 99 && out.renew_us == WALL0 + 5);
	assert_int_equal(out.transitions, 2);
}

/* Leading needs my own successful write, less than the renew deadline ago,
 * of a record that is still the one remembered. */
static void test_lease_leading_ends_at_the_renew_deadline(void **state)
{
	struct cache_lease_view v = { 0 };
	struct cache_lease_record r = rec("me", 15, 0, WALL0), other = rec("other", 15, 1, WALL0);

	(void)state;
	/* Seen as mine (a restart with the same identity) but never written. */
	cache_lease_observe(&v, &r, T0);
	assert_false(cache_lease_leading(&v, "me", T0, 10));
	cache_lease_wrote(&v, &r, T0 + S);
	assert_true(cache_lease_leading(&v, "me", T0 + S, 10));
	assert_true(cache_lease_leading(&v, "me", T0 + 11 * S - 1, 10));
	assert_false(cache_lease_leading(&v, "me", T0 + 11 * S, 10));
	assert_false(cache_lease_leading(&v, "someone-else", T0 + 2 * S, 10));
	/* Another holder's record read: no longer leading, at once. */
	cache_lease_observe(&v, &other, T0 + 2 * S);
	assert_false(cache_lease_leading(&v, "me", T0 + 2 * S, 10));
}

/* A holder longer than the buffer is cut and never taken for mine. */
static void test_lease_cut_holder_is_never_me(void **state)
{
	struct cache_lease_view v = { 0 };
	struct cache_lease_record out, r = rec("", 15, 0, WALL0);

	(void)state;
	memset(r.holder, 'a', sizeof(r.holder) - 1);
	r.holder_cut = true;
	cache_lease_observe(&v, &r, T0);
	assert_int_equal(cache_lease_decide(&v, true, r.holder, T0, WALL0, 15, &out),
			 CACHE_LEASE_WAIT);
}

static void test_lease_release_record(void **state)
{
	struct cache_lease_view v = { 0 };
	struct cache_lease_record out, r = rec("me", 15, 7, WALL0);

	(void)state;
	cache_lease_wrote(&v, &r, T0);
	cache_lease_release_record(&v, WALL0 + 1, &out);
	assert_string_equal(out.holder, "");
	assert_int_equal(out.duration_s, 1);
	assert_int_equal(out.transitions, 7);
	assert_true(out.acquire_us == WALL0 + 1 && out.renew_us == WALL0 + 1);
	/* Written, it ends leading. */
	cache_lease_wrote(&v, &out, T0 + S);
	assert_false(cache_lease_leading(&v, "me", T0 + S, 10));
}

/* ---- The wire form ---------------------------------------------------------------- */

static void test_lease_time_text(void **state)
{
	char buf[CACHE_LEASE_TIME_BUF];
	int64_t us;

	(void)state;
	cache_lease_format_time(WALL0 + 123456, buf, sizeof(buf));
	assert_int_equal(cache_lease_parse_time(buf, &us), 0);
	assert_true(us == WALL0 + 123456);
	assert_int_equal(cache_lease_parse_time("2026-12-01T16:42:36.123456Z", &us), 0);
	cache_lease_format_time(us, buf, sizeof(buf));
	assert_string_equal(buf, "2026-12-01T16:42:36.123456Z");
	assert_int_equal(cache_lease_parse_time("2026-12-01T17:42:36.1234569+01:00", &us), 0);
	cache_lease_format_time(us, buf, sizeof(buf));
	assert_string_equal(buf, "2026-12-01T16:42:36.123456Z");
	assert_int_equal(cache_lease_parse_time("2026-12-01T16:42:36Z", &us), 0);
	cache_lease_format_time(us, buf, sizeof(buf));
	assert_string_equal(buf, "2026-12-01T16:42:36.000000Z");
	assert_int_equal(cache_lease_parse_time("2026-12-01T16:42:36", &us), -EINVAL);
	assert_int_equal(cache_lease_parse_time("2026-12-01T16:42:36.Z", &us), -EINVAL);
	assert_int_equal(cache_lease_parse_time("yesterday", &us), -EINVAL);
	assert_int_equal(cache_lease_parse_time("2026-12-01T16:42:36Zjunk", &us), -EINVAL);
}

static void test_lease_parse_and_spec(void **state)
{
	const char *lease = "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\","
			    "\"metadata\":{\"name\":\"troupe\",\"resourceVersion\":\"42\"},"
			    "\"spec\":{\"holderIdentity\":\"host_12\",\"leaseDurationSeconds\":15,"
			    "\"acquireTime\":\"2026-12-01T16:42:36.000001Z\","
			    "\"renewTime\":\"2026-12-01T16:42:38.500000Z\",\"leaseTransitions\":3}}";
	struct cache_lease_record r, back;
	char *spec, *obj;

	(void)state;
	assert_int_equal(cache_lease_parse(lease, strlen(lease), &r), 0);
	assert_string_equal(r.holder, "host_12");
	assert_int_equal(r.duration_s, 15);
	assert_int_equal(r.transitions, 3);
	assert_true(r.renew_us - r.acquire_us == 2499999);
	assert_string_equal(r.version, "42");
	memset(r.version, 0, sizeof(r.version));      /* read, never written */
	spec = cache_lease_spec_json(&r);
	assert_non_null(spec);
	obj = malloc(strlen(spec) + 32);
	sprintf(obj, "{\"spec\":%s}", spec);
	assert_int_equal(cache_lease_parse(obj, strlen(obj), &back), 0);
	assert_memory_equal(&r, &back, sizeof(r));
	free(obj);
	free(spec);
	/* An empty spec is nobody's; another kind or no JSON is refused. */
	assert_int_equal(cache_lease_parse("{\"kind\":\"Lease\"}", 16, &r), 0);
	assert_string_equal(r.holder, "");
	assert_int_equal(cache_lease_parse("{\"kind\":\"Pod\"}", 14, &r), -EINVAL);
	assert_int_equal(cache_lease_parse("nope", 4, &r), -EINVAL);
}

static void test_lease_opts_rules(void **state)
{
	struct cache_lease_opts o;
	char err[256];

	(void)state;
	cache_lease_opts_defaults(&o);
	o.identity = "host_1";
	assert_int_equal(cache_lease_opts_check(&o, err, sizeof(err)), 0);
	o.renew_deadline_s = 15;
	assert_int_equal(cache_lease_opts_check(&o, err, sizeof(err)), -EINVAL);
	o.renew_deadline_s = 2;         /* 2 <= 1.2 x 2 */
	assert_int_equal(cache_lease_opts_check(&o, err, sizeof(err)), -EINVAL);
	o.renew_deadline_s = 3;
	assert_int_equal(cache_lease_opts_check(&o, err, sizeof(err)), 0);
	o.retry_period_s = 0;
	assert_int_equal(cache_lease_opts_check(&o, err, sizeof(err)), -EINVAL);
	cache_lease_opts_defaults(&o);
	o.identity = "";
	assert_int_equal(cache_lease_opts_check(&o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "identity"));
}

/* ---- Two electors, one Lease ---------------------------------------------------- */

/* The fake API server: one Lease and its resourceVersion. */
struct store {
	bool exists;
	struct cache_lease_record rec;
	unsigned rv;
};

struct elector {
	const char *me;
	struct cache_lease_view v;
	bool alive;
};

/* One attempt as lease.c's attempt() makes it: read, decide, and write
 * conditionally on the resourceVersion read. */
static void step(struct elector *e, struct store *st, uint64_t now, bool release)
{
	struct cache_lease_record want;
	enum cache_lease_action act;
	unsigned rv = st->rv;

	if (!e->alive)
		return;
	if (st->exists)
		cache_lease_observe(&e->v, &st->rec, now);
	if (release) {
		if (!cache_lease_leading(&e->v, e->me, now, 10))
			return;
		cache_lease_release_record(&e->v, WALL0, &want);
		act = CACHE_LEASE_RENEW;
	} else {
		act = cache_lease_decide(&e->v, st->exists, e->me, now, WALL0, 15, &want);
	}
	if (act == CACHE_LEASE_WAIT || (act == CACHE_LEASE_CREATE && st->exists) ||
	    (act != CACHE_LEASE_CREATE && st->rv != rv))
		return;
	st->exists = true;
	st->rec = want;
	st->rv++;
	snprintf(st->rec.version, sizeof(st->rec.version), "%u", st->rv);
	cache_lease_wrote(&e->v, &want, now);
}

static int leaders(struct elector *es, int n, uint64_t now)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		k += es[i].alive && cache_lease_leading(&es[i].v, es[i].me, now, 10);
	return k;
}

/* Two electors trying every 2 s (B half a period behind A): A creates the
 * Lease and leads; B never leads while A renews; A crashes, B leads 15 to 17 s
 * after A's last renewal and never while A could still think it leads; B
 * releases on a clean stop, and A (restarted) takes over at its next attempt. */
static void test_lease_two_electors_one_leader(void **state)
{
	struct store st = { 0 };
	struct elector es[2] = { { "a", { 0 }, true }, { "b", { 0 }, true } };
	uint64_t t, a_last = 0, b_first = 0, crash = T0 + 60 * S, stop = T0 + 120 * S;
	uint64_t a_back = 0;

	(void)state;
	for (t = T0; t < T0 + 180 * S; t += S / 2) {
		bool a_turn = ((t - T0) / (S / 2)) % 4 == 0, b_turn = ((t - T0) / (S / 2)) % 4 == 1;

		if (t == crash)
			es[0].alive = false;
		if (t == stop) {
			step(&es[1], &st, t, true);
			es[1].alive = false;
			es[0] = (struct elector){ "a", { 0 }, true };   /* restarted, fresh */
		}
		if (a_turn) {
			step(&es[0], &st, t, false);
			if (es[0].alive && t < crash && cache_lease_leading(&es[0].v, "a", t, 10))
				a_last = t;
			if (t > stop && !a_back && cache_lease_leading(&es[0].v, "a", t, 10))
				a_back = t;
		}
		if (b_turn) {
			step(&es[1], &st, t, false);
			if (!b_first && cache_lease_leading(&es[1].v, "b", t, 10))
				b_first = t;
		}
		assert_true(leaders(es, 2, t) <= 1);
		/* A crashed replica may not know it died (stuck mid-request):
		 * until its renew deadline it could still post, so nobody leads
		 * before then. */
		if (es[1].alive && cache_lease_leading(&es[1].v, "b", t, 10))
			assert_true(t >= a_last + 10 * S);
	}
	assert_true(a_last > T0 && a_last < crash);
	assert_true(b_first >= a_last + 15 * S && b_first <= a_last + 17 * S);
	assert_true(a_back > stop && a_back <= stop + 2 * S);
	assert_int_equal(st.rec.transitions, 2);
	assert_string_equal(st.rec.holder, "a");
}

/* ---- The binder's gate ------------------------------------------------------------ */

struct bind_seen {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int result;
	char msg[256];
};

static void bind_done(void *arg, int result, const char *msg, unsigned retry_after_ms)
{
	struct bind_seen *b = arg;

	(void)retry_after_ms;
	pthread_mutex_lock(&b->lock);
	b->done = true;
	b->result = result;
	snprintf(b->msg, sizeof(b->msg), "%s", msg);
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

/* A port nothing listens on: bound, then closed. */
static unsigned closed_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* Submit one Binding to <b> and wait for its outcome into <seen>. */
static void bind_once(struct cache_binder *b, struct bind_seen *seen)
{
	struct cache_binding bd = { "ns", "pod-0", "uid-0", "node-0", NULL };

	seen->done = false;
	assert_int_equal(cache_binder_submit(b, &bd, bind_done, seen), 0);
	pthread_mutex_lock(&seen->lock);
	while (!seen->done)
		pthread_cond_wait(&seen->cond, &seen->lock);
	pthread_mutex_unlock(&seen->lock);
}

/* A binder gated by a Lease this replica does not hold posts nothing: the
 * Binding completes with -ECANCELED saying why. The same Binding through a
 * binder with no gate is posted, and fails to connect (-EIO): so the refusal
 * is the gate's doing, seen only through what the binder does. */
static void test_lease_gate_stops_bindings(void **state)
{
	struct bind_seen seen = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0,
				  "" };
	struct cache_binder *open, *gated;
	struct cache_lease_opts o;
	struct cache_lease *l;
	struct cache_api *api;
	char url[64], err[256];

	(void)state;
	cache_api_global_init();
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", closed_port());
	api = cache_api_from_url(url, NULL, err, sizeof(err));
	assert_non_null(api);
	cache_lease_opts_defaults(&o);
	o.identity = "test_1";
	l = cache_lease_start(api, &o, NULL, NULL, err, sizeof(err));
	assert_non_null(l);
	assert_false(cache_lease_is_leader(l));

	open = cache_binder_start(api, 2000, err, sizeof(err));
	assert_non_null(open);
	bind_once(open, &seen);
	assert_int_equal(seen.result, -EIO);
	assert_non_null(strstr(seen.msg, "unreachable"));
	cache_binder_free(open);

	gated = cache_binder_start(api, 2000, err, sizeof(err));
	assert_non_null(gated);
	cache_binder_set_gate(gated, l);
	bind_once(gated, &seen);
	assert_int_equal(seen.result, -ECANCELED);
	assert_non_null(strstr(seen.msg, "not the leader"));
	cache_binder_free(gated);

	cache_lease_stop(l);
	assert_false(cache_lease_is_leader(l));
	cache_lease_free(l);
	cache_api_free(api);
	cache_api_global_cleanup();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lease_missing_is_created_holding_it),
		cmocka_unit_test(test_lease_taken_only_after_duration_on_my_clock),
		cmocka_unit_test(test_lease_renewal_seen_restarts_the_clock),
		cmocka_unit_test(test_lease_new_version_restarts_the_clock),
		cmocka_unit_test(test_lease_record_duration_and_release),
		cmocka_unit_test(test_lease_renew_keeps_acquire_and_transitions),
		cmocka_unit_test(test_lease_leading_ends_at_the_renew_deadline),
		cmocka_unit_test(test_lease_cut_holder_is_never_me),
		cmocka_unit_test(test_lease_release_record),
		cmocka_unit_test(test_lease_time_text),
		cmocka_unit_test(test_lease_parse_and_spec),
		cmocka_unit_test(test_lease_opts_rules),
		cmocka_unit_test(test_lease_two_electors_one_leader),
		cmocka_unit_test(test_lease_gate_stops_bindings),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
