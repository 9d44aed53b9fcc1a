/* simulate_trace.c: the trace format of `troupe simulate` read from parsed
 * documents: durations, defaults, repeated jobs, arrival order, warm-up,
 * refusals naming the field, and the generator drawing bench/sim_placement's
 * trace from the same seed (its first arrivals, written down from
 * bench/sim_trace.c's output).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "extender/simulate.h"

static int load(struct sim_trace *t, const char *json, unsigned gpus, char *err, size_t len)
{
	cJSON *doc = cJSON_Parse(json);
	int rc;

	assert_non_null(doc);
	rc = sim_trace_from_json(t, doc, gpus, err, len);
	cJSON_Delete(doc);
	return rc;
}

static void test_sim_duration_parse_units(void **state)
{
	double v;

	(void)state;
	assert_int_equal(sim_duration_parse("90", &v), 0);
	assert_true(v == 90);
	assert_int_equal(sim_duration_parse("90s", &v), 0);
	assert_true(v == 90);
	assert_int_equal(sim_duration_parse("1.5m", &v), 0);
	assert_true(v == 90);
	assert_int_equal(sim_duration_parse("2h", &v), 0);
	assert_true(v == 7200);
	assert_int_equal(sim_duration_parse("1d", &v), 0);
	assert_true(v == 86400);
	assert_int_equal(sim_duration_parse("", &v), -EINVAL);
	assert_int_equal(sim_duration_parse("5x", &v), -EINVAL);
	assert_int_equal(sim_duration_parse("-1", &v), -EINVAL);
	assert_int_equal(sim_duration_parse("1e400", &v), -EINVAL);
	assert_int_equal(sim_duration_parse("1e11", &v), -EINVAL);
}

static void test_sim_trace_jobs_defaults_count_and_order(void **state)
{
	struct sim_trace t;
	char err[SIM_ERR_LEN] = "";

	(void)state;
	assert_int_equal(load(&t, "{\"warmup\": 0.25, \"jobs\": ["
				  "{\"name\": \"late\", \"arrival\": \"1h\", \"duration\": 60},"
				  "{\"name\": \"r\", \"duration\": \"2m\", \"pods\": 3,"
				  " \"gpus\": 2,"
				  " \"gang\": true, \"queue\": \"q\", \"topology\": \"required\","
				  " \"priority\": -7,"
				  " \"count\": 3, \"every\": \"10m\"}]}", 8, err, sizeof(err)), 0);
	assert_int_equal(t.n, 4);
	/* Arrival order: r-0 at 0, r-1 at 600, r-2 at 1200, late at 3600. */
	assert_string_equal(t.jobs[0].name, "r-0");
	assert_string_equal(t.jobs[2].name, "r-2");
	assert_true(t.jobs[2].arrival == 1200);
	assert_string_equal(t.jobs[3].name, "late");
	assert_int_equal(t.jobs[0].pods, 3);
	assert_int_equal(t.jobs[0].gang, 3);
	assert_int_equal(t.jobs[0].gpus, 2);
	assert_true(t.jobs[0].duration == 120);
	assert_int_equal(t.jobs[0].policy.kind, PLACEMENT_POLICY_REQUIRED);
	assert_string_equal(t.queues[t.jobs[0].queue], "q");
	assert_string_equal(t.queues[t.jobs[3].queue], "default");
	assert_int_equal(t.jobs[3].policy.kind, PLACEMENT_POLICY_PREFERRED);
	assert_int_equal(t.jobs[3].gang, 0);
	assert_int_equal(t.jobs[0].priority, -7);
	assert_int_equal(t.jobs[2].priority, -7);
	assert_int_equal(t.jobs[3].priority, 0);
	/* A quarter of four: the first one is warm-up. */
	assert_false(t.jobs[0].measured);
	assert_true(t.jobs[1].measured);
	sim_trace_fini(&t);
}

static void test_sim_trace_refuses_bad_fields_by_name(void **state)
{
	static const struct {
		const char *json, *says;
	} cases[] = {
		{ "{\"jobs\": [{\"name\": \"a\"}]}", "job \"a\": duration is required" },
		{ "{\"jobs\": [{\"duration\": 5, \"pods\": 0}]}", "pods must be" },
		{ "{\"jobs\": [{\"duration\": 5, \"gpus\": 65}]}", "gpus (per pod)" },
		{ "{\"jobs\": [{\"duration\": 5, \"pods\": 2, \"gang\": 3}]}", "gang must be" },
		{ "{\"jobs\": [{\"duration\": 5, \"topology\": \"x\"}]}", "topology:" },
		{ "{\"jobs\": [{\"duration\": 5, \"queue\": 7}]}", "queue must be a string" },
		{ "{\"jobs\": [{\"duration\": 5, \"arrival\": \"soon\"}]}", "arrival must be" },
		{ "{\"jobs\": [{\"duration\": 5, \"priority\": 2147483648}]}", "priority must be" },
		{ "{\"jobs\": [{\"duration\": 5, \"priority\": 1.5}]}", "priority must be" },
		{ "{\"jobs\": [{\"duration\": 5, \"priority\": \"high\"}]}", "priority must be" },
		{ "{\"jobs\": []}", "no jobs" },
		{ "{}", "needs jobs, generate or both" },
		{ "{\"warmup\": 1, \"jobs\": [{\"duration\": 5}]}", "warmup must be" },
		{ "{\"seed\": -1, \"jobs\": [{\"duration\": 5}]}", "seed must be" },
		{ "{\"generate\": {\"jobs\": 5, \"duration\": 60}}", "generate.duration must" },
		{ "{\"generate\": {\"jobs\": 5, \"mix\": [{\"share\": 1}]}}",
		  "generate.mix[0] has no duration" },
		{ "{\"generate\": {\"jobs\": 5, \"duration\": {\"mean\": 60}}}", "generate.mix" },
		{ "{\"generate\": {\"jobs\": 5, \"duration\": {\"mean\": 60}, \"mix\": "
		  "[{\"share\": 0}]}}", "share in (0, 1e6]" },
		{ "{\"generate\": {\"jobs\": 5, \"load\": 0, \"duration\": {\"mean\": 60}, "
		  "\"mix\": [{\"share\": 1}]}}", "generate.load" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sim_trace t;
		char err[SIM_ERR_LEN] = "";

		assert_int_equal(load(&t, cases[i].json, 8, err, sizeof(err)), -EINVAL);
		if (!strstr(err, cases[i].says))
			fail_msg("case %zu: \"%s\" does not say \"%s\"", i, err, cases[i].says);
		assert_null(t.jobs);
	}
}

/* bench/sim_trace.c for 448 GPUs, load 0.9, seed 1 (minutes): pod 0 arrives
 * at 0.280846 asking 2 GPUs for 19.763806, pod 1 at 0.601682 (2 GPUs,
 * 0.306236), pod 2 at 0.720647 (4 GPUs, 39.580773), pod 3 at 0.894521 (1 GPU,
 * 80.800993). */
static void test_sim_trace_generator_is_sim_placements_trace(void **state)
{
	static const double arrive[] = { 0.280846, 0.601682, 0.720647, 0.894521 };
	static const double life[] = { 19.763806, 0.306236, 39.580773, 80.800993 };
	static const unsigned gpus[] = { 2, 2, 4, 1 };
	struct sim_trace t;
	char err[SIM_ERR_LEN] = "";

	(void)state;
	assert_int_equal(load(&t, "{\"generate\": {\"jobs\": 100, \"seed\": 1, \"load\": 0.9,"
				  " \"duration\": {\"mean\": \"1h\"}, \"mix\": ["
				  "{\"share\": 0.40, \"gpus\": 1}, {\"share\": 0.25, \"gpus\": 2},"
				  "{\"share\": 0.20, \"gpus\": 4},"
				  " {\"share\": 0.15, \"gpus\": 8}]}}",
			      448, err, sizeof(err)), 0);
	assert_int_equal(t.n, 100);
	assert_int_equal(t.n_generated, 100);
	for (unsigned i = 0; i < 4; i++) {
		assert_true(fabs(t.jobs[i].arrival / 60 - arrive[i]) < 1e-5);
		assert_true(fabs(t.jobs[i].duration / 60 - life[i]) < 1e-5);
		assert_int_equal(t.jobs[i].gpus, gpus[i]);
	}
	sim_trace_fini(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sim_duration_parse_units),
		cmocka_unit_test(test_sim_trace_jobs_defaults_count_and_order),
		cmocka_unit_test(test_sim_trace_refuses_bad_fields_by_name),
		cmocka_unit_test(test_sim_trace_generator_is_sim_placements_trace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
