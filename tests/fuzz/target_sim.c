/* Fuzz target for the what-if simulator's workload trace (`troupe simulate
 * --workload`, src/extender/simulate_trace.c), a file a person writes or a
 * script generates:
 *   trace  sim_trace_from_json on cJSON of the input, for a 64-GPU cluster.
 * Invariants: a refusal says why and holds no jobs; a trace read is whole:
 * within SIM_MAX_JOBS, sorted by arrival, every job with at least one pod of
 * at least one GPU, a gang of none or of 2 to all of its pods, a queue that
 * exists, and finite, non-negative times.
 */
#include "fuzz.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "extender/simulate.h"

enum { FUZZ_SIM_GPUS = 64 };

static bool run_trace(const uint8_t *data, size_t len)
{
	struct sim_trace t;
	char err[256] = "";
	cJSON *doc = cJSON_ParseWithLength((const char *)data, len);
	int rc;

	if (!doc)
		return false;   /* not JSON: the syntax is cJSON's, not the trace's */
	memset(&t, 0, sizeof(t));
	rc = sim_trace_from_json(&t, doc, FUZZ_SIM_GPUS, err, sizeof(err));
	cJSON_Delete(doc);
	if (rc < 0) {
		FUZZ_CHECK(err[0], "trace: refused (%d) without a reason", rc);
		FUZZ_CHECK(!t.n, "trace: a refusal kept %zu jobs", t.n);
		sim_trace_fini(&t);
		return true;
	}
	FUZZ_CHECK(t.n <= SIM_MAX_JOBS && t.n_generated <= t.n, "trace: %zu jobs (%zu generated)",
		   t.n, t.n_generated);
	FUZZ_CHECK(t.n_queues >= 1 || !t.n, "trace: jobs without a queue");
	for (size_t i = 0; i < t.n; i++) {
		const struct sim_job *j = &t.jobs[i];

		FUZZ_CHECK(j->pods >= 1 && j->pods <= SIM_MAX_PODS_PER_JOB && j->gpus >= 1,
			   "trace: job %zu asks %u pods of %u GPUs", i, j->pods, j->gpus);
		FUZZ_CHECK(j->gang == 0 || (j->gang >= 2 && j->gang <= j->pods),
			   "trace: job %zu gang %u of %u pods", i, j->gang, j->pods);
		FUZZ_CHECK(j->queue < t.n_queues, "trace: job %zu queue %u of %u", i, j->queue,
			   t.n_queues);
		FUZZ_CHECK(isfinite(j->arrival) && j->arrival >= 0 && isfinite(j->duration) &&
			   j->duration >= 0, "trace: job %zu times %g %g", i, j->arrival,
			   j->duration);
		FUZZ_CHECK(i == 0 || t.jobs[i - 1].arrival <= j->arrival,
			   "trace: job %zu arrives before job %zu", i, i - 1);
		FUZZ_CHECK(memchr(j->name, '\0', sizeof(j->name)) != NULL, "trace: job %zu name", i);
	}
	sim_trace_fini(&t);
	return true;
}

static const char *const trace_dict[] = {
	"\"jobs\"", "\"generate\"", "\"name\"", "\"arrival\"", "\"duration\"", "\"pods\"",
	"\"gpus\"", "\"gang\"", "\"queue\"", "\"priority\"", "\"topology\"", "\"count\"",
	"\"every\"", "\"seed\"", "\"warmup\"", "\"load\"", "\"mix\"", "\"share\"", "\"median\"",
	"\"sigma\"", "\"mean\"", "\"required\"", "\"preferred\"", "\"1h\"", "\"90s\"", "\"1.5m\"",
	"\"2d\"", "true", "false", "null", "0", "1", "-1", "8", "4096", "4097", "1e308", "0.5",
	NULL,
};

const struct fuzz_target fuzz_target_trace = {
	"trace", trace_dict, NULL, run_trace, NULL,
};
