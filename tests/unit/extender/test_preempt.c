/* Unit tests of preempt: victims passed through in the meta form, full victims
 * returned as UIDs, and only the candidates where eviction really frees a
 * usable GPU set, never part of a bound gang.
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

#include "common/strbuf.h"

#include "fixture.h"

static void test_ext_preempt_passes_meta_victims_through(void **state)
{
	struct fx *f = *state;
	static const char *const keys[] = { "NodeNameToMetaVictims", NULL };
	unsigned status = 0;
	cJSON *in = cJSON_Parse(doc_preempt_meta);
	cJSON *j = call(ext_preempt, f, doc_preempt_meta, &status);

	assert_int_equal(status, 200);
	assert_keys_exactly(j, keys);
	assert_true(cJSON_Compare(item(j, "NodeNameToMetaVictims"),
				  item(in, "NodeNameToMetaVictims"), true));
	cJSON_Delete(j);
	cJSON_Delete(in);
}

static void test_ext_preempt_full_victims_come_back_as_uids(void **state)
{
	struct fx *f = *state;
	static const char body[] =
		"{\"Pod\":{\"metadata\":{\"name\":\"train-0\",\"namespace\":\"ml\",\"uid\":\"p\"}},"
		"\"NodeNameToMetaVictims\":null,\"NodeNameToVictims\":{"
		"\"gpu-a100-0\":{\"Pods\":[{\"metadata\":{\"name\":\"resnet-0\","
		"\"namespace\":\"ml\","
		"\"uid\":\"6f1c2a3e-0000-4000-8000-000000000001\"},\"spec\":{\"nodeName\":"
		"\"gpu-a100-0\"}}],\"NumPDBViolations\":2},"
		"\"gpu-h100-0\":{\"Pods\":[{\"metadata\":{\"name\":\"a\",\"uid\":\"u-a\"}},"
		"{\"metadata\":{\"name\":\"b\",\"uid\":\"u-b\"}}],\"NumPDBViolations\":0}}}";
	static const char want[] =
		"{\"gpu-a100-0\":{\"Pods\":[{\"UID\":\"6f1c2a3e-0000-4000-8000-000000000001\"}],"
		"\"NumPDBViolations\":2},"
		"\"gpu-h100-0\":{\"Pods\":[{\"UID\":\"u-a\"},{\"UID\":\"u-b\"}],"
		"\"NumPDBViolations\":0}}";
	static const char *const keys[] = { "NodeNameToMetaVictims", NULL };
	unsigned status = 0;
	cJSON *w = cJSON_Parse(want);
	cJSON *j = call(ext_preempt, f, body, &status);

	assert_int_equal(status, 200);
	assert_keys_exactly(j, keys);
	assert_true(cJSON_Compare(item(j, "NodeNameToMetaVictims"), w, true));
	cJSON_Delete(j);
	cJSON_Delete(w);
}

static void test_ext_preempt_without_victims_is_empty_map(void **state)
{
	struct fx *f = *state;
	unsigned status = 0;
	cJSON *j = call(ext_preempt, f, "{\"Pod\":{},\"NodeNameToVictims\":null,"
			"\"NodeNameToMetaVictims\":null}", &status);

	assert_int_equal(status, 200);
	assert_true(cJSON_IsObject(item(j, "NodeNameToMetaVictims")));
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNameToMetaVictims")), 0);
	cJSON_Delete(j);

	j = call(ext_preempt, f, "{\"NodeNameToMetaVictims\":[", &status);
	assert_int_equal(status, 400);
	assert_contains(error_of(j), "bad preempt request");
	cJSON_Delete(j);
}

/* ---- preempt: keep only candidates where eviction really helps --------------- */

static cJSON *preempt_call(struct fx *f, unsigned gpus, const char *victims_json)
{
	char body[2048];

	snprintf(body, sizeof(body),
		 "{\"Pod\":{\"metadata\":{\"name\":\"big\",\"namespace\":\"ml\",\"uid\":\"u-big\"},"
		 "\"spec\":{\"priority\":1000,\"containers\":[{\"name\":\"w\",\"resources\":{\"limits\":"
		 "{\"nvidia.com/gpu\":\"%u\"}}}]}},\"NodeNameToVictims\":null,"
		 "\"NodeNameToMetaVictims\":%s}", gpus, victims_json);
	return call(ext_preempt, f, body, NULL);
}

static void test_ext_preempt_keeps_only_nodes_where_eviction_frees_enough(void **state)
{
	struct fx *f = *state;
	cJSON *out;
	const cJSON *m;

	/* gpu-a100-0: resnet-0 holds devices 0-3. Evicting it frees 8 for an 8-GPU
	 * pod: kept. gpu-h100-0: bert-finetune holds 2 GPUs; evicting a pod troupe
	 * does not know frees nothing, and 6 free are not 8: dropped. */
	out = preempt_call(f, 8, "{\"gpu-a100-0\":{\"Pods\":[{\"UID\":"
			      "\"6f1c2a3e-0000-4000-8000-000000000001\"}],\"NumPDBViolations\":1},"
			      "\"gpu-h100-0\":{\"Pods\":[{\"UID\":\"not-known\"}],\"NumPDBViolations\":0}}");
	m = item(out, "NodeNameToMetaVictims");
	assert_non_null(item(m, "gpu-a100-0"));
	assert_int_equal(item(item(m, "gpu-a100-0"), "NumPDBViolations")->valuedouble, 1);
	assert_null(item(m, "gpu-h100-0"));
	cJSON_Delete(out);
	/* Evicting bert-finetune on gpu-h100-0 frees its 2: 8 free, kept. */
	out = preempt_call(f, 8, "{\"gpu-h100-0\":{\"Pods\":[{\"UID\":"
			      "\"6f1c2a3e-0000-4000-8000-000000000002\"}],\"NumPDBViolations\":0}}");
	assert_non_null(item(item(out, "NodeNameToMetaVictims"), "gpu-h100-0"));
	cJSON_Delete(out);
	/* An empty victim list is never proposed; unknown nodes are dropped. */
	out = preempt_call(f, 1, "{\"gpu-a100-1\":{\"Pods\":[],\"NumPDBViolations\":0},"
			      "\"nowhere\":{\"Pods\":[{\"UID\":\"x\"}],\"NumPDBViolations\":0}}");
	assert_null(item(item(out, "NodeNameToMetaVictims"), "gpu-a100-1"));
	assert_null(item(item(out, "NodeNameToMetaVictims"), "nowhere"));
	cJSON_Delete(out);
}

static void test_ext_preempt_never_splits_a_bound_gang(void **state)
{
	struct fx *f = *state;
	char err[CACHE_ERR_LEN];
	cJSON *out, *o;

	/* Two members of gang ml/team bound on two nodes. Evicting one of them
	 * would leave the gang half running: that candidate is dropped. */
	for (int i = 0; i < 2; i++) {
		char json[1024];

		snprintf(json, sizeof(json),
			 "{\"metadata\":{\"name\":\"team-%d\",\"namespace\":\"ml\",\"uid\":\"team-%d\","
			 "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"team\"}},"
			 "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"w\",\"resources\":"
			 "{\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]},\"status\":{\"phase\":\"Running\"}}",
			 i, i, i ? "gpu-h100-1" : "gpu-a100-1");
		o = cJSON_Parse(json);
		assert_int_equal(cache_pod_apply(f->cache, cache_pod_parse(o, &f->cfg.cache, err,
									   sizeof(err))), 0);
		cJSON_Delete(o);
	}
	out = preempt_call(f, 8, "{\"gpu-a100-1\":{\"Pods\":[{\"UID\":\"team-0\"}],"
			      "\"NumPDBViolations\":0}}");
	assert_null(item(item(out, "NodeNameToMetaVictims"), "gpu-a100-1"));
	cJSON_Delete(out);
	/* With partial preemption allowed, the same candidate is kept. */
	f->cfg.gang.allow_partial_preemption = true;
	out = preempt_call(f, 8, "{\"gpu-a100-1\":{\"Pods\":[{\"UID\":\"team-0\"}],"
			      "\"NumPDBViolations\":0}}");
	assert_non_null(item(item(out, "NodeNameToMetaVictims"), "gpu-a100-1"));
	cJSON_Delete(out);
}

/* A preempt body for an 8-GPU pod with <victims> as its meta victim map, any
 * size. Caller frees. */
static char *preempt_body(const char *victims)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_printf(&sb, "{\"Pod\":{\"metadata\":{\"name\":\"big\",\"namespace\":\"ml\","
		      "\"uid\":\"u-big\"},\"spec\":{\"containers\":[{\"name\":\"w\",\"resources\":"
		      "{\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]}},\"NodeNameToVictims\":null,"
		      "\"NodeNameToMetaVictims\":%s}", victims);
	assert_false(sb.failed);
	return sb.buf;
}

/* NumPDBViolations is an int64 in Go: a value no int64 holds exactly (2^63 was
 * cast to int64, undefined behaviour), a fraction, a negative count or a
 * string is refused with 400; null or absent is 0. */
static void test_ext_preempt_refuses_bad_pdb_counts(void **state)
{
	struct fx *f = *state;
	static const char *const bad[] = { "9223372036854775808", "1e999", "-1e999", "1.5", "-1",
					   "\"2\"", "true", "{}" };
	static const char *const good[][2] = { { "null", "0" }, { "", "0" }, { "3", "3" },
					       { "123456789012", "123456789012" } };
	char victims[256];
	unsigned status = 0;
	char *body;
	cJSON *j;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(victims, sizeof(victims), "{\"gpu-h100-0\":{\"Pods\":[{\"UID\":"
			 "\"6f1c2a3e-0000-4000-8000-000000000002\"}],\"NumPDBViolations\":%s}}", bad[i]);
		body = preempt_body(victims);
		j = call(ext_preempt, f, body, &status);
		if (status != 400 || !strstr(error_of(j), "NumPDBViolations"))
			fail_msg("NumPDBViolations %s: status %u", bad[i], status);
		cJSON_Delete(j);
		free(body);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char *out;

		snprintf(victims, sizeof(victims), "{\"gpu-h100-0\":{\"Pods\":[{\"UID\":"
			 "\"6f1c2a3e-0000-4000-8000-000000000002\"}]%s%s}}",
			 good[i][0][0] ? ",\"NumPDBViolations\":" : "", good[i][0]);
		body = preempt_body(victims);
		j = call(ext_preempt, f, body, &status);
		assert_int_equal(status, 200);
		out = cJSON_PrintUnformatted(item(item(item(j, "NodeNameToMetaVictims"),
						       "gpu-h100-0"), "NumPDBViolations"));
		assert_non_null(out);
		assert_string_equal(out, good[i][1]);
		cJSON_free(out);
		cJSON_Delete(j);
		free(body);
	}
}

/* A victim troupe knows to run on another node frees nothing on this one:
 * the candidate is dropped (resnet-0 runs on gpu-a100-0; listed under
 * gpu-h100-0, its devices were subtracted from gpu-h100-0's, which then
 * looked empty). Whatever the preemptor asks for. */
static void test_ext_preempt_drops_a_victim_listed_under_another_node(void **state)
{
	struct fx *f = *state;
	static const char victims[] =
		"{\"gpu-h100-0\":{\"Pods\":[{\"UID\":\"6f1c2a3e-0000-4000-8000-000000000001\"},"
		"{\"UID\":\"6f1c2a3e-0000-4000-8000-000000000002\"}],\"NumPDBViolations\":0},"
		"\"gpu-a100-0\":{\"Pods\":[{\"UID\":\"6f1c2a3e-0000-4000-8000-000000000001\"}],"
		"\"NumPDBViolations\":0}}";
	char *body = preempt_body(victims);
	unsigned status = 0;
	cJSON *j = call(ext_preempt, f, body, &status);

	assert_int_equal(status, 200);
	assert_null(item(item(j, "NodeNameToMetaVictims"), "gpu-h100-0"));
	assert_non_null(item(item(j, "NodeNameToMetaVictims"), "gpu-a100-0"));
	cJSON_Delete(j);
	free(body);

	/* A preemptor asking for no GPU: not judged, but still not on a wrong node. */
	j = call(ext_preempt, f, "{\"Pod\":{\"metadata\":{\"name\":\"c\",\"namespace\":\"ml\"}},"
		 "\"NodeNameToMetaVictims\":{\"gpu-h100-0\":{\"Pods\":[{\"UID\":"
		 "\"6f1c2a3e-0000-4000-8000-000000000001\"}]},\"gpu-a100-0\":{\"Pods\":[{\"UID\":"
		 "\"6f1c2a3e-0000-4000-8000-000000000001\"}]}}}", &status);
	assert_int_equal(status, 200);
	assert_null(item(item(j, "NodeNameToMetaVictims"), "gpu-h100-0"));
	assert_non_null(item(item(j, "NodeNameToMetaVictims"), "gpu-a100-0"));
	cJSON_Delete(j);
}

/* Every victim is read and answered: the first 256 were, and the rest were
 * dropped silently (here bert-finetune, the one whose eviction makes room, so
 * the candidate was refused). */
static void test_ext_preempt_reads_every_victim(void **state)
{
	struct fx *f = *state;
	struct strbuf sb = STRBUF_INIT;
	unsigned status = 0;
	const cJSON *pods;
	char *body;
	cJSON *j;

	strbuf_puts(&sb, "{\"gpu-h100-0\":{\"Pods\":[");
	for (int i = 0; i < 999; i++)
		strbuf_printf(&sb, "{\"UID\":\"not-known-%d\"},", i);
	strbuf_puts(&sb, "{\"UID\":\"6f1c2a3e-0000-4000-8000-000000000002\"}],"
			 "\"NumPDBViolations\":0}}");
	body = preempt_body(sb.buf);
	j = call(ext_preempt, f, body, &status);
	assert_int_equal(status, 200);
	pods = item(item(item(j, "NodeNameToMetaVictims"), "gpu-h100-0"), "Pods");
	assert_int_equal(cJSON_GetArraySize(pods), 1000);
	assert_string_equal(item(cJSON_GetArrayItem(pods, 999), "UID")->valuestring,
			    "6f1c2a3e-0000-4000-8000-000000000002");
	cJSON_Delete(j);
	free(body);
	strbuf_fini(&sb);
}

int main(void)
{
#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		FX(test_ext_preempt_keeps_only_nodes_where_eviction_frees_enough),
		FX(test_ext_preempt_never_splits_a_bound_gang),
		FX(test_ext_preempt_passes_meta_victims_through),
		FX(test_ext_preempt_full_victims_come_back_as_uids),
		FX(test_ext_preempt_without_victims_is_empty_map),
		FX(test_ext_preempt_refuses_bad_pdb_counts),
		FX(test_ext_preempt_drops_a_victim_listed_under_another_node),
		FX(test_ext_preempt_reads_every_victim),
	};
#undef FX

	/* Refusals are logged as warnings; keep the test output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
