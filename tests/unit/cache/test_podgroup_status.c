/* Unit tests of the PodGroup status rules (podgroup_status.c), which must be
 * scheduler-plugins' PodGroup controller's: hand-picked cases of each rule,
 * then properties over many random member sets and random lifetimes (a fresh
 * group's phase is the controller's function of its members; what troupe
 * writes is a fixed point, so it is never written twice for the same members;
 * Finished and Failed never change; scheduleStartTime is set once; counts never
 * exceed the members), the wire (the merge patch, reading a status), and the
 * shipped RBAC: the role config/deploy/rbac.yaml grants for it is exactly the
 * permissions the writer checks.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/api_internal.h"
#include "cache/podgroup_status.h"
#include "common/util.h"
#include "rbac_check.h"

#define NOW 1796000000000000LL          /* an arbitrary wall clock, µs */
#define CREATED (NOW - 3600LL * 1000000)        /* an hour before */
#define HOUR (3600LL * 1000000)

static struct cache_pgs_members members(uint32_t total, uint32_t bound, uint32_t running,
					uint32_t succeeded, uint32_t failed)
{
	struct cache_pgs_members m = { total, bound, running, succeeded, failed };

	return m;
}

static struct cache_podgroup_status status(const char *phase)
{
	struct cache_podgroup_status st;

	memset(&st, 0, sizeof(st));
	snprintf(st.phase, sizeof(st.phase), "%s", phase);
	return st;
}

static struct cache_podgroup_status desired(struct cache_podgroup_status cur, int32_t min,
					    struct cache_pgs_members m)
{
	struct cache_podgroup_status out;

	cache_pgs_desired(&cur, min, CREATED, &m, NOW, &out);
	return out;
}

/* ---- Each rule ---------------------------------------------------------------- */

static void test_rules_one_step_at_a_time(void **state)
{
	struct cache_pgs_members m = members(3, 0, 0, 0, 0);
	struct cache_podgroup_status st = status("");

	(void)state;
	/* Rule 3, then 4, then 5, as three reconciles of the controller would. */
	assert_true(cache_pgs_step(&st, 3, CREATED, &m, NOW));
	assert_string_equal(st.phase, "Pending");
	assert_true(cache_pgs_step(&st, 3, CREATED, &m, NOW));
	assert_string_equal(st.phase, "Scheduling");
	assert_false(cache_pgs_step(&st, 3, CREATED, &m, NOW));
	assert_string_equal(st.phase, "Scheduling");
	/* Too few pods: Pending, and rule 4 keeps it. */
	m = members(2, 0, 0, 0, 0);
	assert_true(cache_pgs_step(&st, 3, CREATED, &m, NOW));
	assert_string_equal(st.phase, "Pending");
	assert_false(cache_pgs_step(&st, 3, CREATED, &m, NOW));
}

static void test_rules_rule_five(void **state)
{
	(void)state;
	/* Bound, not running: Scheduling, scheduled counted, start set. */
	struct cache_podgroup_status d = desired(status(""), 3, members(3, 3, 0, 0, 0));

	assert_string_equal(d.phase, "Scheduling");
	assert_int_equal(d.scheduled, 3);
	assert_int_equal(d.start_us, NOW);
	d = desired(status("Scheduling"), 3, members(4, 4, 2, 1, 0));
	assert_string_equal(d.phase, "Running");
	assert_int_equal(d.running, 2);
	assert_int_equal(d.succeeded, 1);
	/* Failed wins over Running once failed + running + succeeded >= min ... */
	d = desired(status("Running"), 3, members(4, 4, 2, 0, 1));
	assert_string_equal(d.phase, "Failed");
	/* ... not before. */
	d = desired(status("Running"), 3, members(4, 4, 1, 0, 1));
	assert_string_equal(d.phase, "Scheduling");
	/* Finished wins over everything. */
	d = desired(status("Running"), 2, members(4, 4, 0, 2, 2));
	assert_string_equal(d.phase, "Finished");
	/* A phase the controller does not name (an older controller's) is rule 5's. */
	d = desired(status("PreScheduling"), 2, members(2, 2, 2, 0, 0));
	assert_string_equal(d.phase, "Running");
}

static void test_rules_final_and_guard(void **state)
{
	struct cache_podgroup_status st = status("Finished"), d;

	(void)state;
	st.running = 7;
	d = desired(st, 3, members(0, 0, 0, 0, 0));
	assert_true(cache_pgs_status_equal(&st, &d));
	st = status("Failed");
	d = desired(st, 3, members(5, 5, 5, 0, 0));
	assert_true(cache_pgs_status_equal(&st, &d));
	/* Rule 2: scheduling started 49 h after creation, nothing running. */
	st = status("Scheduling");
	st.start_us = CREATED + 49 * HOUR;
	d = desired(st, 3, members(3, 3, 3, 0, 0));
	assert_true(cache_pgs_status_equal(&st, &d));
	/* 47 h: not guarded. */
	st.start_us = CREATED + 47 * HOUR;
	d = desired(st, 3, members(3, 3, 3, 0, 0));
	assert_string_equal(d.phase, "Running");
	/* Guarded only while nothing runs (status.running as read). */
	st.start_us = CREATED + 49 * HOUR;
	st.running = 1;
	d = desired(st, 3, members(3, 3, 3, 0, 0));
	assert_string_equal(d.phase, "Running");
	/* scheduleStartTime once set stays. */
	st = status("Scheduling");
	st.start_us = CREATED + HOUR;
	d = desired(st, 1, members(1, 1, 0, 0, 0));
	assert_int_equal(d.start_us, CREATED + HOUR);
}

/* ---- Properties over random cases ------------------------------------------------ */

enum { CASES = 50000, LIFETIMES = 3000 };

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return n ? (uint32_t)(rng % n) : 0;
}

static const char *const phases[] = { "", "Pending", "Scheduling", "Running", "Finished",
				      "Failed", "Unknown", "PreScheduling", "Scheduled" };

/* The controller's answer for a group first seen (phase "") with members <m>,
 * written out independently of the step function. */
static const char *oracle_fresh(int32_t min, const struct cache_pgs_members *m)
{
	int64_t r = m->running, s = m->succeeded, f = m->failed;

	if ((int64_t)m->total < min)
		return "Pending";
	if (s >= min)
		return "Finished";
	if (f > 0 && f + r + s >= min)
		return "Failed";
	return s + r >= min ? "Running" : "Scheduling";
}

static struct cache_pgs_members random_members(void)
{
	struct cache_pgs_members m = { 0 };
	uint32_t n = rnd(13);

	for (uint32_t i = 0; i < n; i++) {
		uint32_t ph = rnd(5);   /* Pending Running Succeeded Failed Unknown */

		m.total++;
		/* A pod that ran was bound; a pending one may be bound or not. */
		if (ph != 0 || rnd(2))
			m.bound++;
		m.running += ph == 1;
		m.succeeded += ph == 2;
		m.failed += ph == 3;
	}
	return m;
}

static void test_property_random_member_sets(void **state)
{
	(void)state;
	for (int c = 0; c < CASES; c++) {
		int32_t min = (int32_t)rnd(9);
		struct cache_pgs_members m = random_members();
		struct cache_podgroup_status cur = status(phases[rnd(9)]), d, again;
		bool guarded;

		/* Counts as read: some earlier member set's (never more pods). */
		cur.running = (int32_t)rnd(m.total + 1);
		cur.succeeded = (int32_t)rnd(m.total + 1 - (uint32_t)cur.running);
		cur.start_us = rnd(2) ? CREATED + (int64_t)rnd(100) * HOUR : 0;
		guarded = (!strcmp(cur.phase, "Pending") || !strcmp(cur.phase, "Scheduling")) &&
			  cur.running == 0 && cur.start_us && cur.start_us - CREATED > 48 * HOUR;
		d = desired(cur, min, m);
		cache_pgs_desired(&d, min, CREATED, &m, NOW + HOUR, &again);
		/* What troupe writes, it would not write again. */
		if (!cache_pgs_status_equal(&d, &again))
			fail_msg("case %d: not a fixed point: %s -> %s -> %s", c, cur.phase,
				 d.phase, again.phase);
		/* Counts never exceed the members. */
		assert_true((int64_t)d.running + d.succeeded + d.failed <= (int64_t)m.total);
		assert_true(d.scheduled <= (int32_t)m.total);
		/* Final phases and the guard change nothing. */
		if (cache_pgs_phase_final(cur.phase) || guarded)
			assert_true(cache_pgs_status_equal(&cur, &d));
		/* scheduleStartTime once set stays. */
		if (cur.start_us)
			assert_int_equal(d.start_us, cur.start_us);
		/* A fresh group: the controller's function of its members (unless
		 * the guard stops it on the way, at Pending). */
		if (!cur.phase[0] && !(cur.start_us && cur.start_us - CREATED > 48 * HOUR)) {
			if (strcmp(d.phase, oracle_fresh(min, &m)))
				fail_msg("case %d: min %d, %u pods (%u running, %u succeeded, %u "
					 "failed): %s, the controller says %s", c, min, m.total,
					 m.running, m.succeeded, m.failed, d.phase,
					 oracle_fresh(min, &m));
		}
		/* Outside Pending the counts are the members'. */
		if (!guarded && !cache_pgs_phase_final(cur.phase) && strcmp(d.phase, "Pending")) {
			assert_int_equal(d.running, m.running);
			assert_int_equal(d.succeeded, m.succeeded);
			assert_int_equal(d.failed, m.failed);
		}
		/* In any phase but a final or guarded one, scheduled is the bound members. */
		if (!guarded && !cache_pgs_phase_final(cur.phase))
			assert_int_equal(d.scheduled, m.bound);
	}
}

/* Lifetimes: pods created, bound, run and end one at a time (each only moves
 * forward); the status troupe writes after every change. Once Finished or
 * Failed it stays; scheduleStartTime is set at the first bound member and
 * never moves; the phase is only ever one the controller sets. */
static void test_property_random_lifetimes(void **state)
{
	(void)state;
	for (int c = 0; c < LIFETIMES; c++) {
		enum { P_NONE, P_CREATED, P_BOUND, P_RUNNING, P_SUCCEEDED, P_FAILED };
		int pods[12] = { 0 };
		int n = 1 + (int)rnd(12);
		int32_t min = 1 + (int32_t)rnd((uint32_t)n);
		struct cache_podgroup_status st = status("");
		int64_t start = 0, now = NOW;
		bool final = false;

		for (int step = 0; step < 60; step++) {
			struct cache_pgs_members m = { 0 };
			struct cache_podgroup_status d;
			int i = (int)rnd((uint32_t)n);

			if (pods[i] == P_RUNNING)
				pods[i] = rnd(4) ? P_SUCCEEDED : P_FAILED;
			else if (pods[i] < P_RUNNING)
				pods[i]++;
			for (int k = 0; k < n; k++) {
				if (pods[k] == P_NONE)
					continue;
				m.total++;
				m.bound += pods[k] >= P_BOUND;
				m.running += pods[k] == P_RUNNING;
				m.succeeded += pods[k] == P_SUCCEEDED;
				m.failed += pods[k] == P_FAILED;
			}
			now += 1000000;
			cache_pgs_desired(&st, min, CREATED, &m, now, &d);
			if (final)
				assert_true(cache_pgs_status_equal(&st, &d));
			if (start)
				assert_int_equal(d.start_us, start);
			else if (d.start_us)
				start = d.start_us;
			if (m.bound && !final)
				assert_true(d.start_us != 0);
			assert_true(!strcmp(d.phase, "Pending") || !strcmp(d.phase, "Scheduling") ||
				    !strcmp(d.phase, "Running") || cache_pgs_phase_final(d.phase));
			final = cache_pgs_phase_final(d.phase);
			st = d;
		}
	}
}

/* ---- The wire ------------------------------------------------------------------ */

static void test_patch_json(void **state)
{
	struct cache_podgroup_status st = status("Running");
	char *text;
	cJSON *j;

	(void)state;
	st.scheduled = 3;
	st.running = 3;
	st.start_us = 1796000000123456LL;
	text = cache_pgs_patch_json(&st, "4711");
	assert_non_null(text);
	j = cJSON_Parse(text);
	assert_non_null(j);
	assert_string_equal(json_str(json_obj(j, "metadata"), "resourceVersion"), "4711");
	assert_string_equal(json_str(json_obj(j, "status"), "phase"), "Running");
	assert_int_equal(json_get(json_obj(j, "status"), "scheduled")->valueint, 3);
	assert_int_equal(json_get(json_obj(j, "status"), "failed")->valueint, 0);
	assert_string_equal(json_str(json_obj(j, "status"), "scheduleStartTime"),
			    "2026-11-30T00:53:20Z");
	cJSON_Delete(j);
	free(text);
	/* No start: the field is left out (a merge patch then keeps what is there). */
	st.start_us = 0;
	text = cache_pgs_patch_json(&st, "1");
	assert_null(strstr(text, "scheduleStartTime"));
	free(text);
}

static void test_status_read(void **state)
{
	cJSON *obj = cJSON_Parse("{\"metadata\":{\"name\":\"g\",\"resourceVersion\":\"12\","
				 "\"creationTimestamp\":\"2026-12-01T10:00:00Z\"},\"status\":{"
				 "\"phase\":\"Running\",\"scheduled\":4,\"running\":3,"
				 "\"succeeded\":1,\"failed\":\"x\",\"scheduleStartTime\":"
				 "\"2026-12-01T10:00:05Z\"}}");
	struct cache_podgroup pg;

	(void)state;
	memset(&pg, 0xff, sizeof(pg));
	cache_podgroup_status_read(obj, &pg);
	assert_string_equal(pg.version, "12");
	assert_string_equal(pg.status.phase, "Running");
	assert_int_equal(pg.status.scheduled, 4);
	assert_int_equal(pg.status.running, 3);
	assert_int_equal(pg.status.succeeded, 1);
	assert_int_equal(pg.status.failed, 0);          /* not a number: unset */
	assert_int_equal(pg.status.start_us - pg.created_us, 5000000);
	cJSON_Delete(obj);
	/* No status, a phase too long to be one: unset, never cut. */
	obj = cJSON_Parse("{\"metadata\":{},\"status\":{\"phase\":"
			  "\"ThisIsNotAPhaseAnyControllerWrites\",\"running\":-1}}");
	cache_podgroup_status_read(obj, &pg);
	assert_string_equal(pg.version, "");
	assert_int_equal(pg.created_us, 0);
	assert_string_equal(pg.status.phase, "");
	assert_int_equal(pg.status.running, 0);
	cJSON_Delete(obj);
}

/* ---- RBAC ------------------------------------------------------------------------ */

/* config/deploy/rbac.yaml's ClusterRole troupe-podgroup-status grants exactly
 * the writer's permissions (access.c's optional ones for podgroups/status); no
 * other ClusterRole grants any of them (troupe's own is checked by
 * test_access.c). */
static void test_rbac_grants_exactly_the_status_permissions(void **state)
{
	const struct cache_permission *perms[] = {
		cache_optional_permission_get(CACHE_OPT_PERM_GET_PODGROUP_STATUS),
		cache_optional_permission_get(CACHE_OPT_PERM_PATCH_PODGROUP_STATUS),
	};

	(void)state;
	rbac_check_role_grants_exactly("troupe-podgroup-status", perms, ARRAY_SIZE(perms), true,
				       "the status writer");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rules_one_step_at_a_time),
		cmocka_unit_test(test_rules_rule_five),
		cmocka_unit_test(test_rules_final_and_guard),
		cmocka_unit_test(test_property_random_member_sets),
		cmocka_unit_test(test_property_random_lifetimes),
		cmocka_unit_test(test_patch_json),
		cmocka_unit_test(test_status_read),
		cmocka_unit_test(test_rbac_grants_exactly_the_status_permissions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
