/* Unit tests of parsing Node objects (node_parse.c): GPU capacity and
 * allocatable, the resource a node offers, CPU and memory, readiness, cordon,
 * labels, taints, the name; device lists as text, both ways; device UUIDs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"
#include "common/log.h"
#include "common/util.h"
#include "fixture.h"

/* ---- cache_node_parse ------------------------------------------------------- */

static void test_cache_node_parse_gpu_capacity_and_allocatable(void **state)
{
	static const struct {
		int cap, alloc;                 /* -1: field absent */
		int resource;
		uint32_t want_cap, want_alloc;
	} cases[] = {
		{ 8, 8, 0, 8, 8 },
		{ 8, 6, 0, 8, 6 },              /* unhealthy devices are not allocatable */
		{ 8, 0, 0, 8, 0 },
		{ -1, 4, 0, 4, 4 },
		{ 8, -1, 0, 8, 8 },             /* no allocatable: all devices usable */
		{ 4, 8, 0, 8, 8 },
		{ 64, 64, 0, 64, 64 },
		{ 100, 100, 0, 64, 64 },        /* the mask names 64 devices */
		{ 100, 50, 0, 64, 50 },
		{ 0, 0, -1, 0, 0 },
		{ -1, -1, -1, 0, 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache_node *n = node_new("n", cases[i].cap, cases[i].alloc);

		if (n->gpu_resource != cases[i].resource || n->gpu_capacity != cases[i].want_cap ||
		    n->gpu_allocatable != cases[i].want_alloc) {
			print_message("capacity %d allocatable %d: got resource %d %u/%u, want %d "
				      "%u/%u\n",
				      cases[i].cap, cases[i].alloc, n->gpu_resource, n->gpu_capacity,
				      n->gpu_allocatable, cases[i].resource, cases[i].want_cap,
				      cases[i].want_alloc);
			bad++;
		}
		cache_node_free(n);
	}
	assert_int_equal(bad, 0);
}

/* A node offers the first managed resource it advertises. */
static void test_cache_node_parse_picks_first_advertised_resource(void **state)
{
	static const struct {
		const char *status;
		int resource;
		uint32_t cap;
	} cases[] = {
		{ "{'allocatable':{'amd.com/gpu':'4'}}", 1, 4 },
		{ "{'allocatable':{'amd.com/gpu':'4','nvidia.com/gpu':'2'}}", 0, 2 },
		{ "{'allocatable':{'nvidia.com/gpu':'0','amd.com/gpu':'4'}}", 1, 4 },
		{ "{'allocatable':{'example.com/fpga':'4'}}", -1, 0 },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[256], err[CACHE_ERR_LEN];
		cJSON *j;
		struct cache_node *n;

		snprintf(text, sizeof(text), "{'metadata':{'name':'n'},'status':%s}",
			 cases[i].status);
		j = json_sq(text);
		n = cache_node_parse(j, &OPTS2, err, sizeof(err));
		assert_non_null(n);
		assert_int_equal(n->gpu_resource, cases[i].resource);
		assert_int_equal(n->gpu_capacity, cases[i].cap);
		cache_node_free(n);
		cJSON_Delete(j);
	}
}

static void test_cache_node_parse_cpu_and_memory_are_allocatable(void **state)
{
	cJSON *j = json_sq("{'metadata':{'name':'n'},'status':{"
			   "'capacity':{'cpu':'96','memory':'2Gi'},"
			   "'allocatable':{'cpu':'95500m','memory':'1Gi'}}}");
	char err[CACHE_ERR_LEN];
	struct cache_node *n = cache_node_parse(j, &OPTS, err, sizeof(err));

	(void)state;
	assert_non_null(n);
	assert_string_equal(n->name, "n");
	assert_int_equal(n->cpu_milli, 95500);
	assert_int_equal(n->mem_bytes, INT64_C(1073741824));
	cache_node_free(n);
	cJSON_Delete(j);
}

static void test_cache_node_parse_ready_condition(void **state)
{
	static const struct {
		const char *status;
		bool ready;
	} cases[] = {
		{ "{'conditions':[{'type':'Ready','status':'True'}]}", true },
		{ "{'conditions':[{'type':'Ready','status':'False'}]}", false },
		{ "{'conditions':[{'type':'Ready','status':'Unknown'}]}", false },
		{ "{'conditions':[{'type':'Ready'}]}", false },
		{ "{'conditions':[{'type':'MemoryPressure','status':'True'}]}", false },
		{ "{'conditions':[{'type':'MemoryPressure','status':'False'},"
		  "{'type':'Ready','status':'True'}]}",
		  true },
		{ "{'conditions':[]}", false },
		{ "{}", false },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[512], err[CACHE_ERR_LEN];
		cJSON *j;
		struct cache_node *n;

		snprintf(text, sizeof(text), "{'metadata':{'name':'n'},'status':%s}",
			 cases[i].status);
		j = json_sq(text);
		n = cache_node_parse(j, &OPTS, err, sizeof(err));
		assert_non_null(n);
		if (n->ready != cases[i].ready) {
			print_message("%s: ready %d, want %d\n", cases[i].status, n->ready,
				      cases[i].ready);
			bad++;
		}
		cache_node_free(n);
		cJSON_Delete(j);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_node_parse_unschedulable(void **state)
{
	static const struct {
		const char *spec;
		bool unschedulable;
	} cases[] = {
		{ "{'unschedulable':true}", true },
		{ "{'unschedulable':false}", false },
		{ "{}", false },
		{ "{'unschedulable':'true'}", false },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[256], err[CACHE_ERR_LEN];
		cJSON *j;
		struct cache_node *n;

		snprintf(text, sizeof(text), "{'metadata':{'name':'n'},'spec':%s}", cases[i].spec);
		j = json_sq(text);
		n = cache_node_parse(j, &OPTS, err, sizeof(err));
		assert_non_null(n);
		assert_int_equal(n->unschedulable, cases[i].unschedulable);
		cache_node_free(n);
		cJSON_Delete(j);
	}
}

static void test_cache_node_parse_labels_sorted_and_looked_up(void **state)
{
	cJSON *j = json_sq("{'metadata':{'name':'n','labels':{"
			   "'zone':'a','kubernetes.io/hostname':'n','b':'2','a':'1',"
			   "'nvidia.com/gpu.product':'A100','empty':''}}}");
	char err[CACHE_ERR_LEN];
	struct cache_node *n = cache_node_parse(j, &OPTS, err, sizeof(err));

	(void)state;
	cJSON_Delete(j);
	assert_non_null(n);
	assert_int_equal(n->n_labels, 6);
	for (unsigned i = 1; i < n->n_labels; i++)
		assert_true(strcmp(n->labels[i - 1].key, n->labels[i].key) < 0);
	assert_string_equal(cache_node_label(n, "zone"), "a");
	assert_string_equal(cache_node_label(n, "a"), "1");
	assert_string_equal(cache_node_label(n, "b"), "2");
	assert_string_equal(cache_node_label(n, "kubernetes.io/hostname"), "n");
	assert_string_equal(cache_node_label(n, "nvidia.com/gpu.product"), "A100");
	assert_string_equal(cache_node_label(n, "empty"), "");
	assert_null(cache_node_label(n, "missing"));
	assert_null(cache_node_label(n, "zon"));
	assert_null(cache_node_label(n, ""));
	cache_node_free(n);

	/* A node without labels. */
	n = node_new("bare", 8, 8);
	assert_int_equal(n->n_labels, 0);
	assert_null(cache_node_label(n, "zone"));
	cache_node_free(n);
}

static void test_cache_node_parse_taints(void **state)
{
	cJSON *j = json_sq("{'metadata':{'name':'n'},'spec':{'taints':["
			   "{'key':'node.kubernetes.io/unschedulable','effect':'NoSchedule'},"
			   "{'key':'gpu','value':'reserved','effect':'NoExecute'}]}}");
	char err[CACHE_ERR_LEN];
	struct cache_node *n = cache_node_parse(j, &OPTS, err, sizeof(err));

	(void)state;
	cJSON_Delete(j);
	assert_non_null(n);
	assert_int_equal(n->n_taints, 2);
	assert_string_equal(n->taints[0].key, "node.kubernetes.io/unschedulable");
	assert_null(n->taints[0].value);
	assert_string_equal(n->taints[0].effect, "NoSchedule");
	assert_string_equal(n->taints[1].key, "gpu");
	assert_string_equal(n->taints[1].value, "reserved");
	assert_string_equal(n->taints[1].effect, "NoExecute");
	cache_node_free(n);
}

static void test_cache_node_parse_requires_name(void **state)
{
	static const char *const cases[] = {
		"{}",
		"{'metadata':{}}",
		"{'metadata':{'name':''}}",
		"{'metadata':{'name':7}}",
		"{'metadata':'n'}",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		cJSON *j = json_sq(cases[i]);
		char err[CACHE_ERR_LEN] = "";

		assert_null(cache_node_parse(j, &OPTS, err, sizeof(err)));
		assert_true(err[0] != '\0');
		cJSON_Delete(j);
	}
}

/* ---- Devices -------------------------------------------------------------------- */

static void test_cache_devices_format_parse_round_trip(void **state)
{
	static const struct {
		uint64_t mask;
		const char *text;
	} cases[] = {
		{ 0x1, "0" },
		{ 0x9, "0,3" },
		{ 0x29, "0,3,5" },
		{ 0xf0, "4,5,6,7" },
		{ 1ULL << 63, "63" },
		{ (1ULL << 63) | 1, "0,63" },
	};
	char buf[256];
	uint64_t seed = 7;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		uint64_t back = 0;

		cache_devices_format(cases[i].mask, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].text);
		assert_int_equal(cache_devices_parse(cases[i].text, &back), 0);
		assert_int_equal(back, cases[i].mask);
	}
	cache_devices_format(0, buf, sizeof(buf));
	assert_string_equal(buf, "");
	for (int i = 0; i < 2000; i++) {
		uint64_t m = rng_next(&seed) & rng_next(&seed), back = 0;

		if (i == 0)
			m = ~0ULL;
		if (!m)
			continue;
		cache_devices_format(m, buf, sizeof(buf));
		assert_int_equal(cache_devices_parse(buf, &back), 0);
		assert_int_equal(back, m);
	}
}

static void test_cache_devices_parse_rejects(void **state)
{
	static const char *const cases[] = {
		"", "1,,2", "64", "100", "1,1", "a", "1,", ",1", "-1", "1 2", "1;2", "0x1",
		"99999999999999999999",
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		uint64_t m = 0xabcdef;

		if (cache_devices_parse(cases[i], &m) != -EINVAL || m != 0xabcdef) {
			print_message("[%s] accepted or mask written (%#" PRIx64 ")\n", cases[i], m);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	assert_int_equal(cache_devices_parse(NULL, &(uint64_t){ 0 }), -EINVAL);
}

/* A short buffer is never overrun and stays terminated. */
static void test_cache_devices_format_short_buffer(void **state)
{
	char buf[16];

	(void)state;
	for (size_t len = 1; len < 8; len++) {
		memset(buf, 'X', sizeof(buf));
		cache_devices_format(0xffff, buf, len);
		assert_true(memchr(buf, '\0', len) != NULL);
		for (size_t k = len; k < sizeof(buf); k++)
			assert_int_equal(buf[k], 'X');
	}
}

static void test_cache_node_uuids_by_index(void **state)
{
	static const struct {
		const char *list;
		uint64_t mask;
		bool ok;
		const char *want;
	} cases[] = {
		{ "GPU-a,GPU-b,GPU-c,GPU-d", 0x5, true, "GPU-a,GPU-c" },
		{ "GPU-a,GPU-b,GPU-c,GPU-d", 0x8, true, "GPU-d" },
		{ "GPU-a,GPU-b", 0x4, false, "" },              /* index 2 not listed */
		{ "GPU-a,,GPU-c", 0x2, false, "" },             /* empty entry */
		{ NULL, 0x1, false, "" },
		{ "GPU-a", 0, false, "" },
	};
	struct cache_opts opts = { .gpu_resources = { "nvidia.com/gpu" }, .n_gpu_resources = 1 };

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char json[512], err[CACHE_ERR_LEN], buf[256];
		struct cache_node *n;
		cJSON *o;
		bool ok;

		if (cases[i].list)
			snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"n\",\"annotations\":"
				 "{\"troupe.io/gpu-uuids\":\"%s\"}}}", cases[i].list);
		else
			snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"n\"}}");
		o = cJSON_Parse(json);
		n = cache_node_parse(o, &opts, err, sizeof(err));
		assert_non_null(n);
		ok = cache_node_uuids(n, cases[i].mask, buf, sizeof(buf));
		if (ok != cases[i].ok || strcmp(buf, cases[i].want) != 0)
			fail_msg("case %zu: ok=%d buf=\"%s\"", i, ok, buf);
		cache_node_free(n);
		cJSON_Delete(o);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_node_parse_gpu_capacity_and_allocatable),
		cmocka_unit_test(test_cache_node_parse_picks_first_advertised_resource),
		cmocka_unit_test(test_cache_node_parse_cpu_and_memory_are_allocatable),
		cmocka_unit_test(test_cache_node_parse_ready_condition),
		cmocka_unit_test(test_cache_node_parse_unschedulable),
		cmocka_unit_test(test_cache_node_parse_labels_sorted_and_looked_up),
		cmocka_unit_test(test_cache_node_parse_taints),
		cmocka_unit_test(test_cache_node_parse_requires_name),
		cmocka_unit_test(test_cache_devices_format_parse_round_trip),
		cmocka_unit_test(test_cache_devices_parse_rejects),
		cmocka_unit_test(test_cache_devices_format_short_buffer),
		cmocka_unit_test(test_cache_node_uuids_by_index),
	};

	/* Skipped items and odd pods log warnings by design; keep output to failures. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
