/* What troupe shows about itself: /debug/state, /debug/cache, /readyz and
 * /metrics on a snapshot, and the parsers of the process metrics.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcntl.h>
#include <time.h>

#include "extender/process_metrics.h"
#include "fixture.h"

static void test_ext_debug_state_lists_nodes(void **state)
{
	struct fx *f = *state;
	struct ext_reply r;
	const cJSON *nodes, *it;
	cJSON *j;
	size_t n = 0;

	ext_reply_init(&r);
	ext_debug_state(&f->svc, &r);
	j = cJSON_ParseWithLengthOpts(r.body.buf, r.body.len + 1, NULL, 1);
	ext_reply_fini(&r);
	assert_non_null(j);
	assert_true(cJSON_IsTrue(item(j, "synced")));
	assert_string_equal(item(j, "source")->valuestring, "test");
	assert_int_equal(item(item(j, "stats"), "nodes")->valueint, 8);
	nodes = item(j, "nodes");
	assert_true(cJSON_IsArray(nodes));
	cJSON_ArrayForEach(it, nodes) {
		const char *name = item(it, "name")->valuestring;
		bool known = false;

		for (const char *const *c = cluster_nodes; *c; c++)
			known |= strcmp(*c, name) == 0;
		assert_true(known);
		if (strcmp(name, "gpu-a100-0") == 0) {
			assert_int_equal(item(it, "gpuFree")->valueint, 4);
			assert_string_equal(item(it, "devicesHeld")->valuestring, "0,1,2,3");
		}
		if (strcmp(name, "gpu-h100-0") == 0)
			assert_int_equal(item(it, "gpuUnattributed")->valueint, 2);
		if (strcmp(name, "gpu-l4-0") == 0)
			assert_true(cJSON_IsTrue(item(it, "unschedulable")));
		if (strcmp(name, "gpu-t4-0") == 0)
			assert_true(cJSON_IsFalse(item(it, "ready")));
		n++;
	}
	assert_int_equal(n, 8);
	cJSON_Delete(j);
}

/* Without an API server (a snapshot), /readyz follows the cache being loaded. */
static void test_ext_readyz_on_a_snapshot(void **state)
{
	static const struct {
		bool synced;
		unsigned status;
		const char *body;
	} cases[] = {
		{ false, 503, "{\"status\":\"syncing\"}" },
		{ true, 200, "{\"status\":\"ready\"}" },
	};
	struct fx *f = *state;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct ext_reply r;

		cache_set_synced(f->cache, cases[i].synced);
		ext_reply_init(&r);
		ext_readyz(&f->svc, &r);
		assert_int_equal(r.status, cases[i].status);
		assert_string_equal(r.body.buf, cases[i].body);
		ext_reply_fini(&r);
	}
}

/* The pod in /debug/cache's reply whose name is <name>. */
static const cJSON *cache_pod_named(const cJSON *reply, const char *name)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, item(reply, "pods"))
		if (strcmp(item(it, "name")->valuestring, name) == 0)
			return it;
	fail_msg("/debug/cache lists no pod %s", name);
	return NULL;
}

/* /debug/cache names each pod's accounting state: a Running pod that asks for
 * no GPU, a finished one and a pending one occupy nothing ("not-accounted",
 * not the pod's phase); a running GPU pod is "bound"; troupe's own bind makes
 * it "assumed". */
static void test_ext_debug_cache_pod_states(void **state)
{
	static const struct {
		const char *pod, *state, *node;
	} cases[] = {
		{ "coredns-5d78c9869d-abcde", "not-accounted", "cpu-0" },
		{ "old-eval", "not-accounted", "gpu-a100-1" },
		{ "llm-worker-0", "not-accounted", "" },
		{ "resnet-0", "bound", "gpu-a100-0" },
		{ "first", "assumed", "gpu-h100-1" },
	};
	struct fx *f = *state;
	struct ext_reply r;
	cJSON *j;

	place(f, "first", 4, "gpu-h100-1");
	ext_reply_init(&r);
	ext_debug_cache(&f->svc, &r);
	assert_int_equal(r.status, 200);
	j = cJSON_ParseWithLength(r.body.buf, r.body.len);
	assert_non_null(j);
	assert_true(cJSON_IsTrue(item(j, "synced")));
	assert_int_equal(cJSON_GetArraySize(item(j, "nodes")), 8);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const cJSON *p = cache_pod_named(j, cases[i].pod);

		assert_string_equal(item(p, "state")->valuestring, cases[i].state);
		assert_string_equal(item(p, "node")->valuestring, cases[i].node);
	}
	assert_string_equal(item(cache_pod_named(j, "first"), "devices")->valuestring,
			    "0,1,2,3");
	cJSON_Delete(j);
	ext_reply_fini(&r);
}

/* ---- /metrics ------------------------------------------------------------------------ */

/* The value of the sample line "<name> <value>" in <text>; fails when absent. */
static double sample_value(const char *text, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, name, len) == 0 && p[len] == ' ')
			return strtod(p + len + 1, NULL);
	fail_msg("/metrics has no sample %s", name);
	return -1;
}

static double metrics_sample(struct fx *f, const char *name)
{
	struct ext_reply r;
	double v;

	ext_reply_init(&r);
	ext_metrics(&f->svc, &r);
	assert_int_equal(r.status, 200);
	v = sample_value(r.body.buf, name);
	ext_reply_fini(&r);
	return v;
}

/* /proc/<pid>/stat lines: the command name may hold spaces and parentheses
 * (the fields count from its last ')'); anything else is refused and leaves
 * the output as it was. */
static void test_ext_process_stat_parse(void **state)
{
	/* pid (comm) state ppid ... utime(14) stime(15) ... threads(20) ...
	 * starttime(22) vsize(23) rss(24) ... */
	static const char tail[] = " 1 100 100 0 -1 4194560 5000 0 3 0 250 150 0 0 20 0 7 0 "
				   "123456 97759232 3339 18446744073709551615 1 1 0 0 0 0 0\n";
	static const struct {
		const char *head, *tail;
		int ret;
	} cases[] = {
		{ "4242 (troupe) S", tail, 0 },
		{ "4242 (tr ) (oupe) S", tail, 0 },
		{ "4242 ()) S", tail, 0 },
		{ "4242 (troupe) S", " 1 100", -EINVAL },                  /* cut short */
		{ "4242 troupe S", tail, -EINVAL },                        /* no ')' */
		{ "4242 (troupe) SS", tail, -EINVAL },                     /* not one letter */
		{ "4242 (troupe) S", " 1 100 100 0 -1 4194560 5000 0 3 0 -250 150 0 0 20 0 7 0 "
				     "123456 97759232 3339\n", -EINVAL },  /* negative utime */
		{ "4242 (troupe) S", " 1 100 100 0 -1 4194560 5000 0 3 0 25x 150 0 0 20 0 7 0 "
				     "123456 97759232 3339\n", -EINVAL },  /* not a number */
		{ "", "", -EINVAL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct ext_process_stat st = { .threads = 99 };
		char line[EXT_PROC_STAT_BUF];

		snprintf(line, sizeof(line), "%s%s", cases[i].head, cases[i].tail);
		assert_int_equal(ext__process_stat_parse(line, 100, &st), cases[i].ret);
		if (cases[i].ret) {
			assert_int_equal(st.threads, 99);
			continue;
		}
		assert_true(fabs(st.cpu_seconds - 4.0) < 1e-9);         /* (250 + 150) / 100 */
		assert_true(fabs(st.start_ticks - 123456) < 1e-9);
		assert_int_equal(st.virtual_bytes, 97759232);
		assert_int_equal(st.resident_pages, 3339);
		assert_int_equal(st.threads, 7);
	}
	/* No clock rate: no seconds. */
	assert_int_equal(ext__process_stat_parse("4242 (troupe) S 1", 0,
						 &(struct ext_process_stat){ 0 }), -EINVAL);
}

static void test_ext_proc_boot_time_parse(void **state)
{
	static const struct {
		const char *text;
		int ret;
		double want;
	} cases[] = {
		{ "cpu  1 2 3\nintr 5 0 0\nbtime 1796160000\nprocesses 12\n", 0, 1796160000 },
		{ "cpu  1 2 3\nbtime 1700000000", 0, 1700000000 },
		{ "cpu  1 2 3\nbtimex 5\n", -EINVAL, 0 },
		{ "cpu  1 2 3\nbtime \n", -EINVAL, 0 },
		{ "btime 17x\n", -EINVAL, 0 },
		{ "", -EINVAL, 0 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		double v = -1;

		assert_int_equal(ext__proc_boot_time_parse(cases[i].text, &v), cases[i].ret);
		if (!cases[i].ret)
			assert_true(v == cases[i].want);
	}
}

/* The process metrics read this very process: a descriptor opened shows in
 * process_open_fds, and the start time is not after now. */
static void test_ext_metrics_process(void **state)
{
	struct fx *f = *state;
	double fds = metrics_sample(f, "process_open_fds");
	int fd = open("/dev/null", O_RDONLY);

	assert_true(fd >= 0);
	assert_true(metrics_sample(f, "process_open_fds") == fds + 1);
	close(fd);
	assert_true(metrics_sample(f, "process_open_fds") == fds);
	assert_true(fds <= metrics_sample(f, "process_max_fds"));
	assert_true(metrics_sample(f, "process_resident_memory_bytes") > 0);
	assert_true(metrics_sample(f, "process_virtual_memory_bytes") >=
		    metrics_sample(f, "process_resident_memory_bytes"));
	assert_true(metrics_sample(f, "troupe_threads") >= 1);
	assert_true(metrics_sample(f, "process_cpu_seconds_total") >= 0);
	assert_true(metrics_sample(f, "process_start_time_seconds") <= (double)time(NULL) + 1);
	assert_true(metrics_sample(f, "process_start_time_seconds") > 1.5e9);
}

/* troupe_gangs{state="bound"}: ml/llm (minMember 2) counts once both of its
 * members are on nodes, not at the first. */
static void test_ext_metrics_bound_gangs(void **state)
{
	static const char *const members[][2] = {
		{ "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010" },
		{ "llm-worker-1", "6f1c2a3e-0000-4000-8000-000000000011" },
	};
	static const char *const nodes[] = { "gpu-h100-1", "gpu-a100-1" };
	struct fx *f = *state;

	assert_true(metrics_sample(f, "troupe_gangs{state=\"bound\"}") == 0);
	for (size_t i = 0; i < ARRAY_SIZE(members); i++) {
		char *body = bind_args("ml", members[i][0], members[i][1], nodes[i]);
		unsigned status = 0;
		cJSON *j = call(bind_sync, f, body, &status);

		free(body);
		assert_int_equal(status, 200);
		assert_string_equal(error_of(j), "");
		cJSON_Delete(j);
		assert_true(metrics_sample(f, "troupe_gangs{state=\"bound\"}") == (double)i);
	}
}

/* A member of gang ml/<group> (quorum 2, 8 GPUs, priority 100: before the
 * test cluster's own gang ml/llm), known to the cache as filter calls make
 * pods known. */
static cJSON *remember_member(struct fx *f, const char *name, const char *group)
{
	char buf[1024], err[CACHE_ERR_LEN];
	struct cache_pod *pod;
	cJSON *o;

	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"uid-%s\","
		 "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"%s\"},"
		 "\"annotations\":{\"troupe.io/min-member\":\"2\"}},"
		 "\"spec\":{\"priority\":100,\"schedulerName\":\"default-scheduler\","
		 "\"containers\":[{\"name\":\"worker\",\"resources\":{\"limits\":"
		 "{\"nvidia.com/gpu\":\"8\"}}}]},\"status\":{\"phase\":\"Pending\"}}",
		 name, name, group);
	o = cJSON_Parse(buf);
	assert_non_null(o);
	pod = cache_pod_parse(o, cache_get_opts(f->cache), err, sizeof(err));
	if (!pod)
		fail_msg("gang pod %s: %s", name, err);
	assert_int_equal(cache_pod_remember(f->cache, pod), 0);
	return o;
}

/* troupe_gangs{state} and the per-queue gauges follow the gang manager: a
 * gang planned at its first member's filter, the test cluster's ml/llm
 * waiting once its member's filter finds no room (two whole nodes' worth,
 * none left), and queue ml's share the one the fair order uses. (A snapshot
 * shows no gang as waiting by itself: only a watch does.) */
static void test_ext_metrics_gang_states_and_queues(void **state)
{
	struct fx *f = *state;
	cJSON *w0, *llm, *j;
	char *body;
	unsigned status = 0;
	double share;

	f->cfg.gang.starvation_s = 3600;        /* no holds: one decision at a time */
	f->svc.gangs = gang_manager_new(f->cache, &f->cfg.gang);
	assert_non_null(f->svc.gangs);
	assert_true(metrics_sample(f, "troupe_gangs{state=\"planned\"}") == 0);
	assert_true(metrics_sample(f, "troupe_gangs{state=\"waiting\"}") == 0);

	w0 = remember_member(f, "w-0", "pair");
	cJSON_Delete(remember_member(f, "w-1", "pair"));
	body = names_args(w0, cluster_nodes);
	j = call(ext_filter, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 2);
	cJSON_Delete(j);
	llm = cJSON_Parse("{\"metadata\":{\"name\":\"llm-worker-0\",\"namespace\":\"ml\","
			  "\"uid\":\"6f1c2a3e-0000-4000-8000-000000000010\",\"labels\":"
			  "{\"scheduling.x-k8s.io/pod-group\":\"llm\"}},\"spec\":{\"containers\":"
			  "[{\"name\":\"main\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\"},"
			  "\"requests\":{\"cpu\":\"8\",\"memory\":\"64Gi\"}}}]},"
			  "\"status\":{\"phase\":\"Pending\"}}");
	assert_non_null(llm);
	body = names_args(llm, cluster_nodes);  /* takes llm */
	j = call(ext_filter, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	cJSON_Delete(j);

	assert_true(metrics_sample(f, "troupe_gangs{state=\"planned\"}") == 1);
	assert_true(metrics_sample(f, "troupe_gangs{state=\"waiting\"}") == 1);
	assert_true(metrics_sample(f, "troupe_gangs{state=\"binding\"}") == 0);
	assert_true(metrics_sample(f, "troupe_gangs{state=\"bound\"}") == 0);
	assert_true(metrics_sample(f, "troupe_queue_gangs_planned{queue=\"ml\"}") == 1);
	assert_true(metrics_sample(f, "troupe_queue_gangs_waiting{queue=\"ml\"}") == 1);
	assert_true(metrics_sample(f, "troupe_queue_gangs_waiting{queue=\"research\"}") == 0);
	assert_true(metrics_sample(f, "troupe_queue_weight{queue=\"ml\"}") == 1);
	share = gang_queue_share(f->svc.gangs, "ml");
	assert_true(share > 0);
	assert_true(fabs(metrics_sample(f, "troupe_queue_dominant_share{queue=\"ml\"}") - share) <
		    1e-8 * share);
	gang_manager_free(f->svc.gangs);
	f->svc.gangs = NULL;
}

int main(void)
{
#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		FX(test_ext_readyz_on_a_snapshot),
		FX(test_ext_debug_state_lists_nodes),
		FX(test_ext_debug_cache_pod_states),
		cmocka_unit_test(test_ext_process_stat_parse),
		cmocka_unit_test(test_ext_proc_boot_time_parse),
		FX(test_ext_metrics_process),
		FX(test_ext_metrics_bound_gangs),
		FX(test_ext_metrics_gang_states_and_queues),
	};
#undef FX

	/* Refusals are logged as warnings; keep the test output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
