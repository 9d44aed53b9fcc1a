/* Unit tests of parsing Pod and PodGroup objects (pod_parse.c): a pod's
 * demand as Kubernetes computes it, its identity, quorum keys, phases,
 * deletion, troupe.io/gpu-ids and refused GPU requests; a PodGroup's fields.
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

/* ---- cache_demand_compute ----------------------------------------------------- */

struct demand_case {
	const char *what;
	const struct cache_opts *opts;
	const char *spec;
	int ret;
	int resource;
	uint32_t gpus;
	int64_t cpu_milli;
	int64_t mem_bytes;
	const char *err_has;    /* substring of the message when ret < 0 */
};


static const struct demand_case demand_cases[] = {
	{ "one container, GPU limit only", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'2'}}}]}",
	  0, 0, 2, 0, 0, NULL },
	{ "GPU limit as a JSON number", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':2}}}]}",
	  0, 0, 2, 0, 0, NULL },
	{ "app containers are summed", &OPTS,
	  "{'containers':["
	  "{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1','cpu':'2'},"
	  "'requests':{'cpu':'500m','memory':'1Gi'}}},"
	  "{'name':'b','resources':{'limits':{'nvidia.com/gpu':'2'},"
	  "'requests':{'cpu':'1','memory':'512Mi'}}}]}",
	  0, 0, 3, 1500, GI + 512 * MI, NULL },
	{ "largest init container wins over a smaller sum", &OPTS,
	  "{'initContainers':["
	  "{'name':'i1','resources':{'limits':{'nvidia.com/gpu':'4'},'requests':{'cpu':'500m'}}},"
	  "{'name':'i2','resources':{'limits':{'nvidia.com/gpu':'2'},'requests':{'cpu':'3'}}}],"
	  "'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'},"
	  "'requests':{'cpu':'1'}}}]}",
	  0, 0, 4, 3000, 0, NULL },
	{ "sum wins over smaller init containers", &OPTS,
	  "{'initContainers':[{'name':'i','resources':{'limits':{'nvidia.com/gpu':'3'}}}],"
	  "'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'2'}}},"
	  "{'name':'b','resources':{'limits':{'nvidia.com/gpu':'2'}}}]}",
	  0, 0, 4, 0, 0, NULL },
	{ "sidecar adds to the app containers", &OPTS,
	  "{'initContainers':[{'name':'s','restartPolicy':'Always','resources':"
	  "{'limits':{'nvidia.com/gpu':'1'},'requests':{'cpu':'1'}}}],"
	  "'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'2'},"
	  "'requests':{'cpu':'2'}}}]}",
	  0, 0, 3, 3000, 0, NULL },
	{ "sidecar runs beside a later init container", &OPTS,
	  "{'initContainers':["
	  "{'name':'s','restartPolicy':'Always','resources':{'requests':{'cpu':'1'}}},"
	  "{'name':'i','resources':{'requests':{'cpu':'4'}}}],"
	  "'containers':[{'name':'a','resources':{'requests':{'cpu':'2'}}}]}",
	  0, -1, 0, 5000, 0, NULL },
	{ "sidecar started after an init container does not run beside it", &OPTS,
	  "{'initContainers':["
	  "{'name':'i','resources':{'requests':{'cpu':'4'}}},"
	  "{'name':'s','restartPolicy':'Always','resources':{'requests':{'cpu':'1'}}}],"
	  "'containers':[{'name':'a','resources':{'requests':{'cpu':'2'}}}]}",
	  0, -1, 0, 4000, 0, NULL },
	{ "sidecar GPUs count beside a later init container", &OPTS,
	  "{'initContainers':["
	  "{'name':'s','restartPolicy':'Always','resources':{'limits':{'nvidia.com/gpu':'1'}}},"
	  "{'name':'i','resources':{'limits':{'nvidia.com/gpu':'2'}}}],"
	  "'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}",
	  0, 0, 3, 0, 0, NULL },
	{ "two sidecars accumulate", &OPTS,
	  "{'initContainers':["
	  "{'name':'s1','restartPolicy':'Always','resources':{'requests':{'memory':'1Gi'}}},"
	  "{'name':'i','resources':{'requests':{'memory':'2Gi'}}},"
	  "{'name':'s2','restartPolicy':'Always','resources':{'requests':{'memory':'1Gi'}}},"
	  "{'name':'j','resources':{'requests':{'memory':'3Gi'}}}],"
	  "'containers':[{'name':'a','resources':{'requests':{'memory':'1Gi'}}}]}",
	  0, -1, 0, 0, 5 * GI, NULL },
	{ "init container with restartPolicy Never is not a sidecar", &OPTS,
	  "{'initContainers':[{'name':'i','restartPolicy':'Never','resources':"
	  "{'requests':{'cpu':'1'}}}],"
	  "'containers':[{'name':'a','resources':{'requests':{'cpu':'2'}}}]}",
	  0, -1, 0, 2000, 0, NULL },
	{ "pod overhead is added", &OPTS,
	  "{'containers':[{'name':'a','resources':{'requests':{'cpu':'1','memory':'1Gi'}}}],"
	  "'overhead':{'cpu':'250m','memory':'64Mi'}}",
	  0, -1, 0, 1250, GI + 64 * MI, NULL },
	{ "overhead is added after the init maximum", &OPTS,
	  "{'initContainers':[{'name':'i','resources':{'requests':{'cpu':'4'}}}],"
	  "'containers':[{'name':'a','resources':{'requests':{'cpu':'1'}}}],"
	  "'overhead':{'cpu':'100m'}}",
	  0, -1, 0, 4100, 0, NULL },
	{ "GPU requests equal to limits", &OPTS,
	  "{'containers':[{'name':'a','resources':{'requests':{'nvidia.com/gpu':'2'},"
	  "'limits':{'nvidia.com/gpu':'2'}}}]}",
	  0, 0, 2, 0, 0, NULL },
	{ "2000m GPUs is two", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'2000m'}}}]}",
	  0, 0, 2, 0, 0, NULL },
	{ "GPU request differs from limit", &OPTS,
	  "{'containers':[{'name':'a','resources':{'requests':{'nvidia.com/gpu':'1'},"
	  "'limits':{'nvidia.com/gpu':'2'}}}]}",
	  -EINVAL, -1, 0, 0, 0, "must equal" },
	{ "GPU request without a limit", &OPTS,
	  "{'containers':[{'name':'a','resources':{'requests':{'nvidia.com/gpu':'1'}}}]}",
	  -EINVAL, -1, 0, 0, 0, "limit" },
	{ "init container GPU request without a limit", &OPTS,
	  "{'initContainers':[{'name':'i','resources':{'requests':{'nvidia.com/gpu':'1'}}}],"
	  "'containers':[]}",
	  -EINVAL, -1, 0, 0, 0, "limit" },
	{ "fractional GPU", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1.5'}}}]}",
	  -EINVAL, -1, 0, 0, 0, "whole" },
	{ "milli GPU", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'500m'}}}]}",
	  -EINVAL, -1, 0, 0, 0, "whole" },
	{ "negative GPU", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'-1'}}}]}",
	  -EINVAL, -1, 0, 0, 0, NULL },
	{ "GPU limit that is no quantity", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'two'}}}]}",
	  -EINVAL, -1, 0, 0, 0, NULL },
	{ "more GPUs than any node has", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'65'}}}]}",
	  -EINVAL, -1, 0, 0, 0, NULL },
	{ "two managed GPU kinds in one pod", &OPTS2,
	  "{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'}}},"
	  "{'name':'b','resources':{'limits':{'amd.com/gpu':'1'}}}]}",
	  -EINVAL, -1, 0, 0, 0, "both" },
	{ "the second managed kind alone", &OPTS2,
	  "{'containers':[{'name':'a','resources':{'limits':{'amd.com/gpu':'2'}}}]}",
	  0, 1, 2, 0, 0, NULL },
	{ "unmanaged extended resources are ignored", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'example.com/fpga':'3'}}}]}",
	  0, -1, 0, 0, 0, NULL },
	{ "cpu and memory default to their limits", &OPTS,
	  "{'containers':[{'name':'a','resources':{'limits':{'cpu':'2','memory':'1Gi'}}}]}",
	  0, -1, 0, 2000, GI, NULL },
	{ "a request is used over its limit", &OPTS,
	  "{'containers':[{'name':'a','resources':{'requests':{'cpu':'1'},"
	  "'limits':{'cpu':'2','memory':'2Gi'}}}]}",
	  0, -1, 0, 1000, 2 * GI, NULL },
	{ "bad cpu quantity", &OPTS,
	  "{'containers':[{'name':'a','resources':{'requests':{'cpu':'lots'}}}]}",
	  -EINVAL, -1, 0, 0, 0, "cpu" },
	{ "no containers", &OPTS, "{}", 0, -1, 0, 0, 0, NULL },
	{ "containers is not a list", &OPTS, "{'containers':{}}", -EINVAL, -1, 0, 0, 0, NULL },
	{ "initContainers is not a list", &OPTS, "{'initContainers':'x'}", -EINVAL, -1, 0, 0, 0,
	  NULL },
};

static void test_cache_demand_compute_as_kubernetes_does(void **state)
{
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(demand_cases); i++) {
		const struct demand_case *dc = &demand_cases[i];
		cJSON *spec = json_sq(dc->spec);
		struct cache_demand d;
		char err[CACHE_ERR_LEN] = "";
		int ret = cache_demand_compute(spec, dc->opts, &d, err, sizeof(err));
		bool ok = ret == dc->ret;

		if (ok && ret == 0)
			ok = d.gpu_resource == dc->resource && d.gpus == dc->gpus &&
			     d.cpu_milli == dc->cpu_milli && d.mem_bytes == dc->mem_bytes;
		if (ok && ret < 0)
			ok = err[0] && (!dc->err_has || strstr(err, dc->err_has));
		if (!ok) {
			print_message("%s: ret %d resource %d gpus %u cpu %" PRId64 " mem %" PRId64
				      " err [%s]\n",
				      dc->what, ret, d.gpu_resource, d.gpus, d.cpu_milli, d.mem_bytes,
				      err);
			bad++;
		}
		cJSON_Delete(spec);
	}
	assert_int_equal(bad, 0);
}

/* ---- cache_pod_parse ------------------------------------------------------------ */

static struct cache_pod *pod_parse_sq(const char *text, char *err, size_t errlen)
{
	cJSON *j = json_sq(text);
	struct cache_pod *p = cache_pod_parse(j, &OPTS, err, errlen);

	cJSON_Delete(j);
	return p;
}

static void test_cache_pod_parse_identity(void **state)
{
	char err[CACHE_ERR_LEN];
	struct cache_pod *p;

	(void)state;
	p = pod_parse_sq("{'metadata':{'name':'w','namespace':'ml','uid':'u-1'},"
			 "'spec':{'nodeName':'gpu-0','containers':[]}}",
			 err, sizeof(err));
	assert_non_null(p);
	assert_string_equal(p->uid, "u-1");
	assert_string_equal(p->ns, "ml");
	assert_string_equal(p->name, "w");
	assert_string_equal(p->node, "gpu-0");
	assert_null(p->demand_error);
	assert_int_equal(p->demand.gpu_resource, -1);
	cache_pod_free(p);

	/* No uid: synthesised as namespace/name. */
	p = pod_parse_sq("{'metadata':{'name':'w','namespace':'ml'},'spec':{}}", err, sizeof(err));
	assert_non_null(p);
	assert_string_equal(p->uid, "ml/w");
	assert_null(p->node);
	cache_pod_free(p);

	/* No namespace: "default". */
	p = pod_parse_sq("{'metadata':{'name':'w','uid':''},'spec':{'nodeName':''}}", err,
			 sizeof(err));
	assert_non_null(p);
	assert_string_equal(p->ns, "default");
	assert_string_equal(p->uid, "default/w");
	assert_null(p->node);
	cache_pod_free(p);
}

/* The quorum a pod names itself, from each key kube-interfaces.md lists, in
 * its order; a value that is not a whole number from 1 to 100,000 is skipped
 * for the next key. */
static void test_cache_pod_parse_quorum_keys(void **state)
{
	static const struct {
		const char *what, *meta;
		uint32_t want;
	} cases[] = {
		{ "coscheduling label", "'labels':{'pod-group.scheduling.sigs.k8s.io/min-available':'4'}", 4 },
		{ "coscheduling annotation",
		  "'annotations':{'pod-group.scheduling.sigs.k8s.io/min-available':'5'}", 5 },
		{ "Kueue total count", "'annotations':{'kueue.x-k8s.io/pod-group-total-count':'6'}", 6 },
		{ "troupe annotation", "'annotations':{'troupe.io/min-member':'7'}", 7 },
		{ "the label beats the annotations",
		  "'labels':{'pod-group.scheduling.sigs.k8s.io/min-available':'4'},"
		  "'annotations':{'troupe.io/min-member':'7'}", 4 },
		{ "Kueue beats troupe's annotation",
		  "'annotations':{'kueue.x-k8s.io/pod-group-total-count':'6','troupe.io/min-member':'7'}",
		  6 },
		{ "zero is skipped", "'annotations':{'kueue.x-k8s.io/pod-group-total-count':'0',"
		  "'troupe.io/min-member':'7'}", 7 },
		{ "not a number is skipped", "'annotations':{'troupe.io/min-member':'four'}", 0 },
		{ "a sign is not a number", "'annotations':{'troupe.io/min-member':'-3'}", 0 },
		{ "trailing text is not a number", "'annotations':{'troupe.io/min-member':'3x'}", 0 },
		{ "over 100,000 is skipped", "'annotations':{'troupe.io/min-member':'100001'}", 0 },
		{ "100,000 is kept", "'annotations':{'troupe.io/min-member':'100000'}", 100000 },
		{ "none", "'labels':{'app':'x'}", 0 },
	};
	char text[512], err[CACHE_ERR_LEN];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache_pod *p;

		snprintf(text, sizeof(text), "{'metadata':{'name':'w','namespace':'ml','uid':'u',%s},"
			 "'spec':{}}", cases[i].meta);
		p = pod_parse_sq(text, err, sizeof(err));
		assert_non_null(p);
		if (p->min_member != cases[i].want)
			fail_msg("%s: quorum %u, want %u", cases[i].what, p->min_member, cases[i].want);
		cache_pod_free(p);
	}
}

static void test_cache_pod_parse_requires_name(void **state)
{
	static const char *const cases[] = {
		"{'spec':{}}",
		"{'metadata':{'namespace':'ml'},'spec':{}}",
		"{'metadata':{'name':''},'spec':{}}",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "";

		assert_null(pod_parse_sq(cases[i], err, sizeof(err)));
		assert_true(err[0] != '\0');
	}
}

static void test_cache_pod_parse_phases(void **state)
{
	static const struct {
		const char *status;
		enum cache_pod_phase phase;
	} cases[] = {
		{ "{'phase':'Pending'}", CACHE_POD_PENDING },
		{ "{'phase':'Running'}", CACHE_POD_RUNNING },
		{ "{'phase':'Succeeded'}", CACHE_POD_SUCCEEDED },
		{ "{'phase':'Failed'}", CACHE_POD_FAILED },
		{ "{'phase':'Unknown'}", CACHE_POD_UNKNOWN },
		{ "{'phase':'Sideways'}", CACHE_POD_UNKNOWN },
		{ "{}", CACHE_POD_PENDING },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[256], err[CACHE_ERR_LEN];
		struct cache_pod *p;

		snprintf(text, sizeof(text), "{'metadata':{'name':'p'},'spec':{},'status':%s}",
			 cases[i].status);
		p = pod_parse_sq(text, err, sizeof(err));
		assert_non_null(p);
		assert_int_equal(p->phase, cases[i].phase);
		cache_pod_free(p);
	}
}

static void test_cache_pod_parse_deletion_timestamp(void **state)
{
	static const struct {
		const char *meta_extra;
		bool deleting;
	} cases[] = {
		{ ",'deletionTimestamp':'2024-05-01T10:00:00Z'", true },
		{ ",'deletionTimestamp':null", false },
		{ "", false },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[256], err[CACHE_ERR_LEN];
		struct cache_pod *p;

		snprintf(text, sizeof(text), "{'metadata':{'name':'p'%s},'spec':{}}",
			 cases[i].meta_extra);
		p = pod_parse_sq(text, err, sizeof(err));
		assert_non_null(p);
		assert_int_equal(p->deleting, cases[i].deleting);
		cache_pod_free(p);
	}
}

/* The annotation counts only when it parses and names as many devices as the
 * pod asks for. */
static void test_cache_pod_parse_gpu_ids_annotation(void **state)
{
	static const struct {
		unsigned gpus;
		const char *ids;
		bool has;
		uint64_t devices;
	} cases[] = {
		{ 2, "0,1", true, 0x3 },
		{ 2, "6,7", true, 0xc0 },
		{ 2, "7,6", true, 0xc0 },
		{ 1, "63", true, 1ULL << 63 },
		{ 2, "0", false, 0 },
		{ 2, "0,1,2", false, 0 },
		{ 2, "a,b", false, 0 },
		{ 2, "", false, 0 },
		{ 2, "1,1", false, 0 },
		{ 2, "1,64", false, 0 },
		{ 2, NULL, false, 0 },
		{ 0, "0", false, 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache_pod *p = POD(.uid = "p", .node = "n", .gpus = cases[i].gpus,
					  .ids = cases[i].ids);

		if (p->has_devices != cases[i].has || p->devices != cases[i].devices) {
			print_message("gpus %u ids [%s]: has %d devices %#" PRIx64 "\n",
				      cases[i].gpus, cases[i].ids ? cases[i].ids : "(none)",
				      p->has_devices, p->devices);
			bad++;
		}
		cache_pod_free(p);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_pod_parse_bad_gpu_request_sets_demand_error(void **state)
{
	char err[CACHE_ERR_LEN] = "";
	struct cache_pod *p;

	(void)state;
	p = pod_parse_sq("{'metadata':{'name':'p','namespace':'ml',"
			 "'annotations':{'troupe.io/gpu-ids':'0'}},"
			 "'spec':{'nodeName':'n','containers':[{'name':'c','resources':"
			 "{'requests':{'nvidia.com/gpu':'1'}}}]}}",
			 err, sizeof(err));
	/* Not a parse failure: the pod exists, its request is what is wrong. */
	assert_non_null(p);
	assert_non_null(p->demand_error);
	assert_non_null(strstr(p->demand_error, "limit"));
	assert_int_equal(p->demand.gpus, 0);
	assert_int_equal(p->demand.gpu_resource, -1);
	assert_false(p->has_devices);
	cache_pod_free(p);

	p = pod_parse_sq("{'metadata':{'name':'p'}}", err, sizeof(err));
	assert_non_null(p);
	assert_non_null(p->demand_error);
	cache_pod_free(p);

	p = POD(.uid = "ok", .gpus = 4);
	assert_null(p->demand_error);
	assert_int_equal(p->demand.gpus, 4);
	assert_int_equal(p->demand.gpu_resource, 0);
	assert_int_equal(p->demand.cpu_milli, 1000);
	cache_pod_free(p);
}

/* ---- Pod groups ------------------------------------------------------------------ */

static void test_cache_podgroup_parse_fields(void **state)
{
	/* Parsed with OPTS2: both nvidia.com/gpu and amd.com/gpu are managed. */
	static const struct {
		const char *what;
		const char *json;
		const char *ns, *name;
		int32_t min_member, timeout_s;
		uint32_t min_gpus;
		int64_t cpu_milli, mem_bytes;
	} cases[] = {
		{ "everything",
		  "{'metadata':{'name':'train','namespace':'ml'},'spec':{'minMember':4,"
		  "'scheduleTimeoutSeconds':120,'minResources':{'nvidia.com/gpu':'16','cpu':'64',"
		  "'memory':'256Gi'}}}",
		  "ml", "train", 4, 120, 16, 64000, 256 * GI },
		{ "no spec, no namespace", "{'metadata':{'name':'g'}}",
		  "default", "g", 0, 0, 0, 0, 0 },
		{ "empty namespace",
		  "{'metadata':{'name':'g','namespace':''},'spec':{'minMember':2}}",
		  "default", "g", 2, 0, 0, 0, 0 },
		{ "fractional cpu, decimal memory",
		  "{'metadata':{'name':'g','namespace':'a'},'spec':{'minResources':"
		  "{'cpu':'1500m','memory':'1G'}}}",
		  "a", "g", 0, 0, 0, 1500, INT64_C(1000000000) },
		{ "numbers as YAML gives them",
		  "{'metadata':{'name':'g','namespace':'a'},'spec':{'minMember':3,"
		  "'minResources':{'nvidia.com/gpu':8,'cpu':2}}}",
		  "a", "g", 3, 0, 8, 2000, 0 },
		{ "GPUs of every managed kind",
		  "{'metadata':{'name':'g','namespace':'a'},'spec':{'minResources':"
		  "{'amd.com/gpu':'2','nvidia.com/gpu':'1'}}}",
		  "a", "g", 0, 0, 3, 0, 0 },
		{ "unmanaged resources are not GPUs",
		  "{'metadata':{'name':'g','namespace':'a'},'spec':{'minResources':"
		  "{'example.com/fpga':'4'}}}",
		  "a", "g", 0, 0, 0, 0, 0 },
		{ "negative and non-numeric counts are absent",
		  "{'metadata':{'name':'g','namespace':'a'},'spec':{'minMember':-1,"
		  "'scheduleTimeoutSeconds':'60','minResources':{'nvidia.com/gpu':'-2'}}}",
		  "a", "g", 0, 0, 0, 0, 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "";
		struct cache_podgroup *pg = podgroup_parse_sq(cases[i].json, &OPTS2, err,
							      sizeof(err));

		if (!pg) {
			print_message("%s: not parsed: %s\n", cases[i].what, err);
			bad++;
			continue;
		}
		if (strcmp(pg->ns, cases[i].ns) != 0 || strcmp(pg->name, cases[i].name) != 0 ||
		    pg->min_member != cases[i].min_member || pg->timeout_s != cases[i].timeout_s ||
		    pg->min_gpus != cases[i].min_gpus || pg->min_cpu_milli != cases[i].cpu_milli ||
		    pg->min_mem_bytes != cases[i].mem_bytes) {
			print_message("%s: got %s/%s minMember %d timeout %d gpus %u cpu %" PRId64
				      "m mem %" PRId64 "; want %s/%s %d %d %u %" PRId64 "m %" PRId64
				      "\n",
				      cases[i].what, pg->ns, pg->name, pg->min_member,
				      pg->timeout_s, pg->min_gpus, pg->min_cpu_milli,
				      pg->min_mem_bytes, cases[i].ns, cases[i].name,
				      cases[i].min_member, cases[i].timeout_s, cases[i].min_gpus,
				      cases[i].cpu_milli, cases[i].mem_bytes);
			bad++;
		}
		cache_podgroup_free(pg);
	}
	assert_int_equal(bad, 0);
}

/* Each API's quorum, timeout, queue and minResources, as the stream that
 * lists it says (parse_api) and as its apiVersion says (a snapshot's). */
static void test_cache_podgroup_parse_each_api(void **state)
{
	static const struct {
		const char *what;
		enum cache_pg_api api;
		const char *spec;
		int32_t min_member, timeout_s;
		const char *queue;
		uint32_t min_gpus;
	} cases[] = {
		{ "scheduler-plugins", CACHE_PG_XK8S,
		  "{'minMember':4,'scheduleTimeoutSeconds':90,'queue':'not-a-field-here',"
		  "'minResources':{'nvidia.com/gpu':'8'}}", 4, 90, "", 8 },
		{ "upstream gang", CACHE_PG_UPSTREAM,
		  "{'schedulingPolicy':{'gang':{'minCount':6}},'minMember':99,"
		  "'scheduleTimeoutSeconds':90}", 6, 0, "", 0 },
		{ "upstream basic: each pod alone", CACHE_PG_UPSTREAM,
		  "{'schedulingPolicy':{'basic':{}}}", 1, 0, "", 0 },
		{ "upstream without a policy", CACHE_PG_UPSTREAM, "{}", 0, 0, "", 0 },
		{ "upstream minCount not a count", CACHE_PG_UPSTREAM,
		  "{'schedulingPolicy':{'gang':{'minCount':-3}}}", 0, 0, "", 0 },
		{ "Volcano", CACHE_PG_VOLCANO,
		  "{'minMember':3,'queue':'research','minResources':{'nvidia.com/gpu':'12'}}",
		  3, 0, "research", 12 },
		{ "Volcano, tasks adding up to more than minMember", CACHE_PG_VOLCANO,
		  "{'minMember':2,'minTaskMember':{'ps':1,'worker':4}}", 5, 0, "", 0 },
		{ "Volcano, tasks adding up to less", CACHE_PG_VOLCANO,
		  "{'minMember':6,'minTaskMember':{'worker':4},'queue':''}", 6, 0, "", 0 },
		{ "Volcano, a task count not a count", CACHE_PG_VOLCANO,
		  "{'minMember':2,'minTaskMember':{'a':'x','b':3}}", 3, 0, "", 0 },
		{ "KAI with subgroups", CACHE_PG_KAI,
		  "{'minMember':8,'queue':'team-a','subGroups':[{'name':'a','minMember':4},"
		  "{'name':'b','minMember':4}]}", 8, 0, "team-a", 0 },
		{ "KAI, a queue name too long", CACHE_PG_KAI,
		  "{'minMember':2,'queue':'qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq"
		  "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq"
		  "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq"
		  "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq'}", 2, 0, "", 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		for (int by_version = 0; by_version < 2; by_version++) {
			char text[1024], err[CACHE_ERR_LEN] = "";
			struct cache_podgroup *pg;
			cJSON *j;

			snprintf(text, sizeof(text), "{'apiVersion':'%s','kind':'PodGroup','metadata':"
				 "{'name':'g','namespace':'ml'},'spec':%s}",
				 cache_pg_apis[cases[i].api].api_version, cases[i].spec);
			j = json_sq(text);
			pg = by_version ? cache_podgroup_parse(j, &OPTS, err, sizeof(err))
					: cache_podgroup_parse_api(j, cases[i].api, &OPTS, err,
								   sizeof(err));
			cJSON_Delete(j);
			if (!pg) {
				print_message("%s: not parsed: %s\n", cases[i].what, err);
				bad++;
				continue;
			}
			if (pg->api != cases[i].api || pg->min_member != cases[i].min_member ||
			    pg->timeout_s != cases[i].timeout_s ||
			    strcmp(pg->queue, cases[i].queue) != 0 ||
			    pg->min_gpus != cases[i].min_gpus) {
				print_message("%s (%s): got api %d quorum %d timeout %d queue '%s' "
					      "gpus %u; want %d %d %d '%s' %u\n", cases[i].what,
					      by_version ? "by apiVersion" : "by stream", pg->api,
					      pg->min_member, pg->timeout_s, pg->queue, pg->min_gpus,
					      cases[i].api, cases[i].min_member, cases[i].timeout_s,
					      cases[i].queue, cases[i].min_gpus);
				bad++;
			}
			cache_podgroup_free(pg);
		}
	}
	assert_int_equal(bad, 0);
}

/* A snapshot's PodGroup: its apiVersion's group picks the API, whatever the
 * version; one troupe does not read is refused with a message. */
static void test_cache_podgroup_parse_api_version(void **state)
{
	static const struct {
		const char *api_version;
		int api;                /* -1: refused */
	} cases[] = {
		{ "scheduling.x-k8s.io/v1alpha1", CACHE_PG_XK8S },
		{ "scheduling.sigs.k8s.io/v1alpha1", CACHE_PG_XK8S },
		{ "scheduling.k8s.io/v1alpha2", CACHE_PG_UPSTREAM },
		{ "scheduling.k8s.io/v1beta1", CACHE_PG_UPSTREAM },
		{ "scheduling.volcano.sh/v1beta1", CACHE_PG_VOLCANO },
		{ "scheduling.run.ai/v2alpha2", CACHE_PG_KAI },
		{ "scheduling.k8s.io", -1 },
		{ "scheduling.k8s.io.evil/v1", -1 },
		{ "scheduling/v1", -1 },
		{ "example.com/v1", -1 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[512], err[CACHE_ERR_LEN] = "";
		struct cache_podgroup *pg;
		cJSON *j;

		snprintf(text, sizeof(text), "{'apiVersion':'%s','metadata':{'name':'g'}}",
			 cases[i].api_version);
		j = json_sq(text);
		pg = cache_podgroup_parse(j, &OPTS, err, sizeof(err));
		cJSON_Delete(j);
		if ((pg ? (int)pg->api : -1) != cases[i].api ||
		    (!pg && !strstr(err, "not one troupe reads"))) {
			print_message("%s: got %d (%s), want %d\n", cases[i].api_version,
				      pg ? (int)pg->api : -1, err, cases[i].api);
			bad++;
		}
		cache_podgroup_free(pg);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_podgroup_parse_requires_name(void **state)
{
	static const struct {
		const char *json;
		const char *want;       /* in the message */
	} cases[] = {
		{ "{}", "name" },
		{ "{'metadata':{'namespace':'ml'}}", "name" },
		{ "{'metadata':{'name':''}}", "name" },
		{ "{'metadata':{'name':7}}", "name" },
		{ "{'metadata':{'name':'x','namespace':"
		  "'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn'}}",
		  "namespace" },        /* 64 characters */
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "";
		struct cache_podgroup *pg = podgroup_parse_sq(cases[i].json, &OPTS, err,
							      sizeof(err));

		if (pg || !strstr(err, cases[i].want)) {
			print_message("%s: got %s, message [%s]\n", cases[i].json,
				      pg ? "a pod group" : "NULL", err);
			bad++;
		}
		cache_podgroup_free(pg);
	}
	assert_int_equal(bad, 0);
	cache_podgroup_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_demand_compute_as_kubernetes_does),
		cmocka_unit_test(test_cache_pod_parse_identity),
		cmocka_unit_test(test_cache_pod_parse_quorum_keys),
		cmocka_unit_test(test_cache_pod_parse_requires_name),
		cmocka_unit_test(test_cache_pod_parse_phases),
		cmocka_unit_test(test_cache_pod_parse_deletion_timestamp),
		cmocka_unit_test(test_cache_pod_parse_gpu_ids_annotation),
		cmocka_unit_test(test_cache_pod_parse_bad_gpu_request_sets_demand_error),
		cmocka_unit_test(test_cache_podgroup_parse_fields),
		cmocka_unit_test(test_cache_podgroup_parse_each_api),
		cmocka_unit_test(test_cache_podgroup_parse_api_version),
		cmocka_unit_test(test_cache_podgroup_parse_requires_name),
	};

	/* Skipped items and odd pods log warnings by design; keep output to failures. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
