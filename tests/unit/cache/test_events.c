/* Unit tests of the event recorder (events.c), with no worker thread, a fake
 * clock and a fake sender standing in for the API server: occurrences of one
 * key make one series (a POST, then PATCHes of its count), the per-object
 * token bucket drops new Events past its burst and lets series updates wait,
 * a full queue drops and counts, a PATCH of an expired Event creates it again,
 * failed writes are counted and given up, and PodGroup uids come from the
 * cache.
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

#include <cjson/cJSON.h>

#include "cache/api.h"
#include "cache/cache.h"
#include "cache/events.h"
#include "common/util.h"
#include "fixture.h"
#include "rbac_check.h"

#define S 1000000000ULL

enum { MAX_REQS = 256 };

struct req {
	char method[8];
	char path[512];
	cJSON *body;
};

/* The fake API server: records every request, answers with <status> (or
 * fails to connect with <fail_ret>); PATCHes get <patch_status>. */
struct fake {
	uint64_t now;
	struct req reqs[MAX_REQS];
	unsigned n;
	long status, patch_status;
	int fail_ret;
};

static uint64_t fake_now(void *ctx)
{
	return ((struct fake *)ctx)->now;
}

static int fake_send(void *ctx, const char *method, const char *path, const char *ctype,
		     const char *body, long *status, char *err, size_t errlen)
{
	struct fake *f = ctx;
	struct req *q;

	assert_true(f->n < MAX_REQS);
	q = &f->reqs[f->n++];
	snprintf(q->method, sizeof(q->method), "%s", method);
	snprintf(q->path, sizeof(q->path), "%s", path);
	q->body = cJSON_Parse(body);
	assert_non_null(q->body);       /* every body is JSON */
	assert_string_equal(ctype, strcmp(method, "PATCH") == 0 ?
			    "application/strategic-merge-patch+json" : "application/json");
	if (f->fail_ret) {
		snprintf(err, errlen, "connection refused");
		return f->fail_ret;
	}
	*status = strcmp(method, "PATCH") == 0 ? f->patch_status : f->status;
	return 0;
}

struct fixture {
	struct fake f;
	struct cache_events_opts o;
	struct cache_events *r;
	struct cache *c;
};

static int setup(void **state)
{
	struct fixture *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	x->f.now = 1000 * S;
	x->f.status = 201;
	x->f.patch_status = 200;
	cache_events_opts_defaults(&x->o);
	x->o.no_thread = true;
	x->o.now_ns = fake_now;
	x->o.clock_ctx = &x->f;
	x->o.send = fake_send;
	x->o.send_ctx = &x->f;
	x->o.instance = "troupe-0";
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *x = *state;

	cache_events_free(x->r);
	if (x->c)
		cache_free(x->c);
	for (unsigned i = 0; i < x->f.n; i++)
		cJSON_Delete(x->f.reqs[i].body);
	free(x);
	return 0;
}

static void start(struct fixture *x)
{
	x->r = cache_events_new(x->c, NULL, &x->o);
	assert_non_null(x->r);
}

static const struct cache_event_ref POD_A = { "Pod", "v1", "ml", "train-0", "uid-a" };

static int emit_refused(struct fixture *x, const struct cache_event_ref *ref, unsigned i)
{
	return cache_events_emit(x->r, CACHE_EVENT_WARNING, ref, "BindRefused", "Binding",
				 "troupe: node n%u is cordoned", i);
}

static int series_count(const struct req *q)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(q->body, "series");
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(s, "count");

	return cJSON_IsNumber(c) ? c->valueint : 1;
}

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);

	if (b)
		v = cJSON_GetObjectItemCaseSensitive(v, b);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_events_series_one_post_then_patches(void **state)
{
	struct fixture *x = *state;
	struct cache_events_stats st;
	const char *name;

	start(x);
	/* 1,000 refusals, each with its own note: the note is not in the key. */
	for (unsigned i = 0; i < 1000; i++) {
		assert_int_equal(emit_refused(x, &POD_A, i), 0);
		if (i % 100 == 99)
			cache_events_pump(x->r);
	}
	cache_events_pump(x->r);
	/* The first a POST, its first repeat a PATCH at once; the rest wait for
	 * the flush interval. */
	assert_int_equal(x->f.n, 2);
	assert_string_equal(x->f.reqs[0].method, "POST");
	assert_string_equal(x->f.reqs[0].path, "/apis/events.k8s.io/v1/namespaces/ml/events");
	assert_int_equal(series_count(&x->f.reqs[0]), 1);
	name = str_at(x->f.reqs[0].body, "metadata", "name");
	assert_non_null(name);
	assert_true(strncmp(name, "train-0.", 8) == 0);
	assert_string_equal(x->f.reqs[1].method, "PATCH");
	assert_true(strstr(x->f.reqs[1].path, name) != NULL);
	assert_true(series_count(&x->f.reqs[1]) >= 2);
	cache_events_pump(x->r);
	assert_int_equal(x->f.n, 2);
	x->f.now += (uint64_t)x->o.series_flush_s * S;
	cache_events_pump(x->r);
	assert_int_equal(x->f.n, 3);
	assert_string_equal(x->f.reqs[2].method, "PATCH");
	assert_int_equal(series_count(&x->f.reqs[2]), 1000);
	/* Only the patch's series: the rest of the Event does not change. */
	assert_null(cJSON_GetObjectItemCaseSensitive(x->f.reqs[2].body, "note"));
	cache_events_get_stats(x->r, &st);
	assert_int_equal(st.emitted, 1000);
	assert_int_equal(st.posted, 1);
	assert_int_equal(st.series_updates, 2);
	assert_int_equal(st.series, 1);
	/* Nothing new: nothing written. */
	x->f.now += 60 * S;
	cache_events_pump(x->r);
	assert_int_equal(x->f.n, 3);
}

static void test_events_post_body(void **state)
{
	struct fixture *x = *state;
	const cJSON *b;

	start(x);
	assert_int_equal(cache_events_emit(x->r, CACHE_EVENT_NORMAL, &POD_A, "DevicesChosen",
					   "Binding", "GPU devices [0,1] on node n1 (worst link %s)",
					   "NV12"), 0);
	cache_events_pump(x->r);
	assert_int_equal(x->f.n, 1);
	b = x->f.reqs[0].body;
	assert_string_equal(str_at(b, "apiVersion", NULL), "events.k8s.io/v1");
	assert_string_equal(str_at(b, "kind", NULL), "Event");
	assert_string_equal(str_at(b, "metadata", "namespace"), "ml");
	assert_string_equal(str_at(b, "reportingController", NULL), "troupe");
	assert_string_equal(str_at(b, "reportingInstance", NULL), "troupe-0");
	assert_string_equal(str_at(b, "type", NULL), "Normal");
	assert_string_equal(str_at(b, "reason", NULL), "DevicesChosen");
	assert_string_equal(str_at(b, "action", NULL), "Binding");
	assert_string_equal(str_at(b, "note", NULL), "GPU devices [0,1] on node n1 (worst link NV12)");
	assert_string_equal(str_at(b, "regarding", "kind"), "Pod");
	assert_string_equal(str_at(b, "regarding", "apiVersion"), "v1");
	assert_string_equal(str_at(b, "regarding", "name"), "train-0");
	assert_string_equal(str_at(b, "regarding", "uid"), "uid-a");
	/* MicroTime: seconds, six digits of microseconds, UTC. */
	assert_int_equal(strlen(str_at(b, "eventTime", NULL)), strlen("2026-12-01T23:10:00.123456Z"));
	assert_null(cJSON_GetObjectItemCaseSensitive(b, "series"));
}

static void test_events_keys_apart(void **state)
{
	struct fixture *x = *state;
	const struct cache_event_ref pod_b = { "Pod", "v1", "ml", "train-1", "uid-b" };

	start(x);
	/* Another reason, another type, another object: three more Events. */
	assert_int_equal(emit_refused(x, &POD_A, 0), 0);
	assert_int_equal(cache_events_emit(x->r, CACHE_EVENT_WARNING, &POD_A, "GangTimedOut",
					   "Binding", "x"), 0);
	assert_int_equal(cache_events_emit(x->r, CACHE_EVENT_NORMAL, &POD_A, "BindRefused",
					   "Binding", "x"), 0);
	assert_int_equal(emit_refused(x, &pod_b, 0), 0);
	cache_events_pump(x->r);
	assert_int_equal(x->f.n, 4);
	for (unsigned i = 0; i < 4; i++)
		assert_string_equal(x->f.reqs[i].method, "POST");
}

static void test_events_by_note_splits_series(void **state)
{
	struct fixture *x = *state;
	const unsigned by_note = CACHE_EVENT_NORMAL | CACHE_EVENT_BY_NOTE;
	const char *names[3] = { NULL };
	unsigned posts = 0;

	start(x);
	/* The counts a waiting gang reports: each state its own Event, each
	 * repeated state one series. */
	for (unsigned present = 1; present <= 3; present++)
		for (unsigned i = 0; i < 5; i++)
			assert_int_equal(cache_events_emit(x->r, by_note, &POD_A,
							   "GangWaitingForMembers", "Scheduling",
							   "waiting for its members: %u of 4 exist",
							   present), 0);
	cache_events_pump(x->r);
	x->f.now += (uint64_t)x->o.series_flush_s * S;
	cache_events_pump(x->r);
	for (unsigned i = 0; i < x->f.n; i++) {
		char want[64];

		if (strcmp(x->f.reqs[i].method, "POST") != 0)
			continue;
		assert_true(posts < 3);
		snprintf(want, sizeof(want), "waiting for its members: %u of 4 exist", posts + 1);
		assert_string_equal(str_at(x->f.reqs[i].body, "note", NULL), want);
		assert_string_equal(str_at(x->f.reqs[i].body, "type", NULL), "Normal");
		names[posts++] = str_at(x->f.reqs[i].body, "metadata", "name");
	}
	assert_int_equal(posts, 3);
	/* Each series' last write says 5. */
	for (unsigned k = 0; k < 3; k++) {
		int count = 0;

		for (unsigned i = 0; i < x->f.n; i++)
			if (strcmp(x->f.reqs[i].method, "PATCH") == 0 &&
			    strstr(x->f.reqs[i].path, names[k]))
				count = series_count(&x->f.reqs[i]);
		assert_int_equal(count, 5);
	}
}

static void test_events_rate_limit_per_object(void **state)
{
	struct fixture *x = *state;
	const struct cache_event_ref pod_b = { "Pod", "v1", "ml", "train-1", "uid-b" };
	struct cache_events_stats st;
	char reason[32];

	start(x);
	/* 30 different reasons on one pod: a burst of 25, then dropped. */
	for (unsigned i = 0; i < 30; i++) {
		snprintf(reason, sizeof(reason), "Reason%u", i);
		assert_int_equal(cache_events_emit(x->r, CACHE_EVENT_NORMAL, &POD_A, reason, "Binding",
						   "n"), 0);
	}
	/* Another object has its own bucket. */
	assert_int_equal(emit_refused(x, &pod_b, 0), 0);
	cache_events_pump(x->r);
	cache_events_get_stats(x->r, &st);
	assert_int_equal(st.posted, 26);
	assert_int_equal(st.dropped[CACHE_EVENTS_DROP_RATE_LIMITED], 5);
	/* One token back every 1/qps seconds (300). */
	x->f.now += 299 * S;
	assert_int_equal(cache_events_emit(x->r, CACHE_EVENT_NORMAL, &POD_A, "Late", "Binding", "n"),
			 0);
	cache_events_pump(x->r);
	cache_events_get_stats(x->r, &st);
	assert_int_equal(st.dropped[CACHE_EVENTS_DROP_RATE_LIMITED], 6);
	x->f.now += 2 * S;
	assert_int_equal(cache_events_emit(x->r, CACHE_EVENT_NORMAL, &POD_A, "Late", "Binding", "n"),
			 0);
	cache_events_pump(x->r);
	cache_events_get_stats(x->r, &st);
	assert_int_equal(st.posted, 27);
	assert_int_equal(st.dropped[CACHE_EVENTS_DROP_RATE_LIMITED], 6);
}

static void test_events_series_update_waits_for_token(void **state)
{
	struct fixture *x = *state;
	struct cache_events_stats st;
	unsigned before;

	x->o.burst = 2;
	start(x);
	/* Token 1: the POST; token 2: the first repeat's PATCH. */
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(emit_refused(x, &POD_A, i), 0);
	cache_events_pump(x->r);
	assert_int_equal(x->f.n, 2);
	/* More repeats, flush due, but no token: the update waits, nothing is
	 * dropped, and the count keeps growing. */
	for (unsigned i = 0; i < 10; i++)
		assert_int_equal(emit_refused(x, &POD_A, i), 0);
	x->f.now += (uint64_t)x->o.series_flush_s * S;
	cache_events_pump(x->r);
	before = x->f.n;
	assert_int_equal(before, 2);
	cache_events_get_stats(x->r, &st);
	assert_int_equal(st.dropped[CACHE_EVENTS_DROP_RATE_LIMITED], 0);
	x->f.now += 300 * S;
	cache_events_pump(x->r);
	assert_int_equal(x->f.n, 3);
	assert_int_equal(series_count(&x->f.reqs[2]), 13);
}

static void test_events_queue_full_drops(void **state)
{
	struct fixture *x = *state;
	struct cache_events_stats st;

	x->o.queue_size = 4;
	start(x);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(emit_refused(x, &POD_A, i), 0);
	assert_int_equal(emit_refused(x, &POD_A, 4), -ENOSPC);
	assert_int_equal(emit_refused(x, &POD_A, 5), -ENOSPC);
	cache_events_get_stats(x->r, &st);
	assert_int_equal(st.queued, 4);
	assert_int_equal(st.emitted, 4);
	assert_int_equal(st.dropped[CACHE_EVENTS_DROP_QUEUE_FULL], 2);
	cache_events_pump(x->r);
	cache_events_get_stats(x->r, &st);
	assert_int_equal(st.queued, 0);
	/* Room again. */
	assert_int_equal(emit_refused(x, &POD_A, 6), 0);
}

static void test_events_bad_ref_refused(void **state)
{
	struct fixture *x = *state;
	const struct cache_event_ref no_ns = { "Pod", "v1", "", "p", "u" };

	start(x);
	assert_int_equal(cache_events_emit(x->r, CACHE_EVENT_NORMAL, &no_ns, "R", "A", "n"),
			 -EINVAL);
	assert_int_equal(cache_events_emit(x->r, CACHE_EVENT_NORMAL, NULL, "R", "A", "n"), -EINVAL);
	assert_int_equal(cache_events_emit(NULL, CACHE_EVENT_NORMAL, &POD_A, "R", "A", "n"), 0);
	cache_events_pump(x->r);
	assert_int_equal(x->f.n, 0);
}

static void test_events_patch_of_expired_creates_again(void **state)
{
	struct fixture *x = *state;

	start(x);
	assert_int_equal(emit_refused(x, &POD_A, 0), 0);
	cache_events_pump(x->r);
	x->f.patch_status = 404;
	assert_int_equal(emit_refused(x, &POD_A, 1), 0);
	cache_events_pump(x->r);
	assert_int_equal(x->f.n, 3);
	assert_string_equal(x->f.reqs[1].method, "PATCH");
	assert_string_equal(x->f.reqs[2].method, "POST");
	assert_int_equal(series_count(&x->f.reqs[2]), 2);
	assert_string_equal(str_at(x->f.reqs[2].body, "metadata", "name"),
			    str_at(x->f.reqs[0].body, "metadata", "name"));
}

static void test_events_failed_writes_counted_and_given_up(void **state)
{
	struct fixture *x = *state;
	struct cache_events_stats st;

	start(x);
	x->f.fail_ret = -EIO;
	assert_int_equal(emit_refused(x, &POD_A, 0), 0);
	cache_events_pump(x->r);
	cache_events_get_stats(x->r, &st);
	assert_int_equal(st.failed, 1);
	assert_int_equal(st.series, 1);         /* kept, to be tried again */
	/* Not before the flush interval; then twice more, then given up. */
	cache_events_pump(x->r);
	assert_int_equal(x->f.n, 1);
	for (unsigned i = 0; i < 2; i++) {
		x->f.now += (uint64_t)x->o.series_flush_s * S;
		cache_events_pump(x->r);
	}
	cache_events_get_stats(x->r, &st);
	assert_int_equal(st.failed, 3);
	assert_int_equal(st.posted, 0);
	assert_int_equal(st.dropped[CACHE_EVENTS_DROP_GAVE_UP], 1);
	assert_int_equal(st.series, 0);
	/* A refusal as such (403) is given up at once. */
	x->f.fail_ret = 0;
	x->f.status = 403;
	assert_int_equal(cache_events_emit(x->r, CACHE_EVENT_NORMAL, &POD_A, "Other", "Binding",
					   "n"), 0);
	cache_events_pump(x->r);
	cache_events_get_stats(x->r, &st);
	assert_int_equal(st.failed, 4);
	assert_int_equal(st.dropped[CACHE_EVENTS_DROP_GAVE_UP], 2);
}

static void test_events_series_closes(void **state)
{
	struct fixture *x = *state;
	struct cache_events_stats st;

	start(x);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(emit_refused(x, &POD_A, i), 0);
	cache_events_pump(x->r);
	/* Unobserved for series_finish_s: its last count written, then closed;
	 * the next occurrence starts a new Event. */
	x->f.now += (uint64_t)x->o.series_finish_s * S;
	cache_events_pump(x->r);
	cache_events_get_stats(x->r, &st);
	assert_int_equal(st.series, 0);
	assert_int_equal(series_count(&x->f.reqs[x->f.n - 1]), 3);
	assert_int_equal(emit_refused(x, &POD_A, 9), 0);
	cache_events_pump(x->r);
	assert_string_equal(x->f.reqs[x->f.n - 1].method, "POST");
	assert_int_equal(series_count(&x->f.reqs[x->f.n - 1]), 1);
}

static void test_events_podgroup_uid_from_cache(void **state)
{
	struct fixture *x = *state;
	const struct cache_event_ref pg = { CACHE_EVENT_PODGROUP_KIND,
					    CACHE_EVENT_PODGROUP_API_VERSION, "ml", "job", NULL };
	const struct cache_event_ref other = { CACHE_EVENT_PODGROUP_KIND,
					       CACHE_EVENT_PODGROUP_API_VERSION, "ml", "gone",
					       NULL };
	char err[CACHE_ERR_LEN] = "";
	struct cache_events_stats st;
	struct cache_podgroup *p;

	x->c = cache_new(&OPTS);
	assert_non_null(x->c);
	p = podgroup_parse_sq("{'kind':'PodGroup','metadata':{'name':'job','namespace':'ml',"
			      "'uid':'pg-uid-1'},'spec':{'minMember':4}}", &OPTS, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(cache_podgroup_apply(x->c, p), 0);
	start(x);
	assert_int_equal(cache_events_emit(x->r, CACHE_EVENT_WARNING, &pg, "GangTimedOut",
					   "Scheduling", "only 2 of 4"), 0);
	assert_int_equal(cache_events_emit(x->r, CACHE_EVENT_WARNING, &other, "GangTimedOut",
					   "Scheduling", "only 2 of 4"), 0);
	cache_events_pump(x->r);
	assert_int_equal(x->f.n, 1);
	assert_string_equal(str_at(x->f.reqs[0].body, "regarding", "uid"), "pg-uid-1");
	assert_string_equal(str_at(x->f.reqs[0].body, "regarding", "apiVersion"),
			    "scheduling.x-k8s.io/v1alpha1");
	cache_events_get_stats(x->r, &st);
	assert_int_equal(st.dropped[CACHE_EVENTS_DROP_NO_OBJECT], 1);
}

static void test_events_opts_checked(void **state)
{
	struct fixture *x = *state;

	x->o.queue_size = 0;
	errno = 0;
	assert_null(cache_events_new(NULL, NULL, &x->o));
	assert_int_equal(errno, EINVAL);
	x->o.queue_size = 8;
	x->o.send = NULL;       /* neither an API nor a sender */
	assert_null(cache_events_new(NULL, NULL, &x->o));
	assert_string_equal(cache_events_drop_name(CACHE_EVENTS_DROP_QUEUE_FULL), "queue_full");
	assert_string_equal(cache_events_drop_name(CACHE_EVENTS_DROP_RATE_LIMITED), "rate_limited");
}

/* config/deploy/rbac.yaml's ClusterRole troupe-events grants exactly the
 * optional permissions the recorder checks, and nothing else. */
static void test_events_rbac_is_the_optional_permissions(void **state)
{
	const struct cache_permission *perms[] = {
		cache_optional_permission_get(CACHE_OPT_PERM_CREATE_EVENTS),
		cache_optional_permission_get(CACHE_OPT_PERM_PATCH_EVENTS),
	};

	(void)state;
	rbac_check_role_grants_exactly("troupe-events", perms, ARRAY_SIZE(perms), false,
				       "the recorder");
	assert_null(cache_optional_permission_get(CACHE_OPT_PERM_COUNT));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_events_series_one_post_then_patches),
		T(test_events_post_body),
		T(test_events_keys_apart),
		T(test_events_by_note_splits_series),
		T(test_events_rate_limit_per_object),
		T(test_events_series_update_waits_for_token),
		T(test_events_queue_full_drops),
		T(test_events_bad_ref_refused),
		T(test_events_patch_of_expired_creates_again),
		T(test_events_failed_writes_counted_and_given_up),
		T(test_events_series_closes),
		T(test_events_podgroup_uid_from_cache),
		T(test_events_opts_checked),
		cmocka_unit_test(test_events_rbac_is_the_optional_permissions),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
