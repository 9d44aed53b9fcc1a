/* Unit tests of shared GPUs in the cache (node_parse.c, pod_parse.c, pods.c):
 * a node's sharing read from NVIDIA's GPU Feature Discovery labels and
 * troupe.yaml's overrides, its devices counted as replica slots of physical
 * GPUs, and a pod's troupe.io/gpu-ids naming "GPU:replica" read against the
 * node it is on.
 *
 *   test_node_sharing_table        every way a node says (or does not say) it
 *                                  shares: time-slicing, MPS, the renamed
 *                                  resource, the -SHARED product, MIG single
 *                                  with each profile's slices, more slots
 *                                  than troupe tracks, the overrides
 *   test_unhealthy_gpu_is_its_slots troupe-node names physical GPUs
 *   test_slot_names_round_trip     format and parse of "GPU:replica", and
 *                                  every malformed list refused
 *   test_slot_uuids                the device plugin's "<uuid>::<replica>"
 *   test_pod_slots_on_its_node     a bound pod's slots occupy those slots on
 *                                  the node; slots the node lacks or a count
 *                                  that disagrees are counted unattributed
 *   test_mig_mixed_layout          a MIG mixed node's devices laid out GPU by
 *                                  GPU from its resources and gpu.count (or
 *                                  the counts' divisor), whole GPUs beside
 *                                  MIG ones, devices the kubelet does not
 *                                  offer never free, too many for 64 slots
 *   test_mig_mixed_pods            a pod's GPU:slot ids hold that MIG device;
 *                                  each resource's free count apart
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "fixture.h"

/* nvidia.com/gpu and nvidia.com/gpu.shared, both read from the labels. */
static struct cache_opts shared_opts(void)
{
	struct cache_opts o = OPTS;

	o.gpu_resources[1] = "nvidia.com/gpu.shared";
	o.n_gpu_resources = 2;
	for (unsigned i = 0; i < CACHE_MAX_GPU_RESOURCES; i++)
		o.sharing[i] = (struct cache_sharing_opts){ .strategy = -1 };
	return o;
}

/* Node <name> with capacity <cap> and allocatable <alloc> (single-quoted JSON
 * members of a ResourceList), labels <labels> and annotations <ann> (members,
 * "" for none), Ready; the test fails when it does not parse. */
static struct cache_node *node_from(const struct cache_opts *o, const char *name,
				    const char *cap, const char *alloc, const char *labels,
				    const char *ann)
{
	char text[2048], err[CACHE_ERR_LEN] = "";
	struct cache_node *n;
	cJSON *j;

	snprintf(text, sizeof(text),
		 "{'metadata':{'name':'%s','labels':{%s},'annotations':{%s}},"
		 "'status':{'capacity':{%s},'allocatable':{%s},"
		 "'conditions':[{'type':'Ready','status':'True'}]}}",
		 name, labels, ann, cap, alloc);
	j = json_sq(text);
	n = cache_node_parse(j, o, err, sizeof(err));
	cJSON_Delete(j);
	if (!n)
		fail_msg("cache_node_parse: %s", err);
	return n;
}

/* Node s0 advertising <cap> of <res> (as capacity and allocatable, or <alloc>
 * allocatable when >= 0) with labels <labels> and annotations <ann>. */
static struct cache_node *shared_node(const struct cache_opts *o, const char *res, int cap,
				      int alloc, const char *labels, const char *ann)
{
	char c[160], a[160];

	snprintf(c, sizeof(c), "'%s':'%d'", res, cap);
	snprintf(a, sizeof(a), "'%s':'%d'", res, alloc >= 0 ? alloc : cap);
	return node_from(o, "s0", c, a, labels, ann);
}

struct sharing_row {
	const char *what;
	const char *res;
	int cap, alloc;
	const char *labels;
	int strategy;                   /* override: -1 auto */
	unsigned replicas;              /* override */
	bool fail_gt1;                  /* override */
	/* want */
	enum cache_sharing sharing;
	unsigned replicas_got, physical, capacity, allocatable, advertised;
	enum cache_packing packing;
	bool fail_gt1_got;
};

#define TS_LABELS(r) "'nvidia.com/gpu.sharing-strategy':'time-slicing','nvidia.com/gpu.replicas':'" r "'"

static void test_node_sharing_table(void **state)
{
	static const struct sharing_row rows[] = {
		{ "whole GPUs", "nvidia.com/gpu", 8, -1, "", -1, 0, false,
		  CACHE_SHARING_NONE, 1, 8, 8, 8, 1, 0, false },
		{ "strategy none, replicas 1", "nvidia.com/gpu", 8, -1,
		  "'nvidia.com/gpu.sharing-strategy':'none','nvidia.com/gpu.replicas':'1'", -1, 0,
		  false, CACHE_SHARING_NONE, 1, 8, 8, 8, 1, 0, false },
		{ "8 H100 time-sliced 4 ways", "nvidia.com/gpu", 32, -1, TS_LABELS("4"), -1, 0, false,
		  CACHE_SHARING_TIME_SLICING, 4, 8, 32, 32, 4, CACHE_PACKING_DISTRIBUTED, false },
		{ "one GPU unhealthy: 4 fewer allocatable", "nvidia.com/gpu", 32, 28, TS_LABELS("4"),
		  -1, 0, false, CACHE_SHARING_TIME_SLICING, 4, 8, 32, 28, 4, 0, false },
		{ "failRequestsGreaterThanOne from troupe.yaml", "nvidia.com/gpu", 32, -1,
		  TS_LABELS("4"), -1, 0, true, CACHE_SHARING_TIME_SLICING, 4, 8, 32, 32, 4, 0, true },
		{ "8 x 10 is more than 64 slots: 8 each offered", "nvidia.com/gpu", 80, -1,
		  TS_LABELS("10"), -1, 0, false, CACHE_SHARING_TIME_SLICING, 8, 8, 64, 64, 10, 0,
		  false },
		{ "renameByDefault: nvidia.com/gpu.shared, labels of nvidia.com/gpu",
		  "nvidia.com/gpu.shared", 16, -1, TS_LABELS("2"), -1, 0, false,
		  CACHE_SHARING_TIME_SLICING, 2, 8, 16, 16, 2, 0, false },
		{ "older GFD: replicas and -SHARED, no strategy", "nvidia.com/gpu", 16, -1,
		  "'nvidia.com/gpu.replicas':'2','nvidia.com/gpu.product':'Tesla-T4-SHARED'", -1, 0,
		  false, CACHE_SHARING_TIME_SLICING, 2, 8, 16, 16, 2, 0, false },
		{ "MPS always refuses requests above 1", "nvidia.com/gpu", 16, -1,
		  "'nvidia.com/gpu.sharing-strategy':'mps','nvidia.com/gpu.replicas':'2'", -1, 0,
		  false, CACHE_SHARING_MPS, 2, 8, 16, 16, 2, 0, true },
		{ "sharing without replicas: whole GPUs", "nvidia.com/gpu", 8, -1,
		  "'nvidia.com/gpu.sharing-strategy':'time-slicing'", -1, 0, false,
		  CACHE_SHARING_NONE, 1, 8, 8, 8, 1, 0, false },
		{ "MIG single 1g.5gb on A100-40GB: 7 a GPU", "nvidia.com/gpu", 56, -1,
		  "'nvidia.com/mig.strategy':'single','nvidia.com/gpu.product':"
		  "'A100-SXM4-40GB-MIG-1g.5gb'", -1, 0, false,
		  CACHE_SHARING_MIG_SINGLE, 7, 8, 56, 56, 7, CACHE_PACKING_PACKED, false },
		{ "MIG single 1g.10gb on A100-40GB: 4 a GPU (memory)", "nvidia.com/gpu", 32, -1,
		  "'nvidia.com/mig.strategy':'single','nvidia.com/gpu.product':"
		  "'A100-SXM4-40GB-MIG-1g.10gb'", -1, 0, false,
		  CACHE_SHARING_MIG_SINGLE, 4, 8, 32, 32, 4, CACHE_PACKING_PACKED, false },
		{ "MIG single 1g.10gb on H100-80GB: 7 a GPU", "nvidia.com/gpu", 56, -1,
		  "'nvidia.com/mig.strategy':'single','nvidia.com/gpu.product':"
		  "'NVIDIA-H100-80GB-HBM3-MIG-1g.10gb'", -1, 0, false,
		  CACHE_SHARING_MIG_SINGLE, 7, 8, 56, 56, 7, CACHE_PACKING_PACKED, false },
		{ "MIG single 3g.40gb on H100-80GB: 2 a GPU", "nvidia.com/gpu", 16, -1,
		  "'nvidia.com/mig.strategy':'single','nvidia.com/gpu.product':"
		  "'NVIDIA-H100-80GB-HBM3-MIG-3g.40gb'", -1, 0, false,
		  CACHE_SHARING_MIG_SINGLE, 2, 8, 16, 16, 2, CACHE_PACKING_PACKED, false },
		{ "MIG single, unknown profile: whole devices", "nvidia.com/gpu", 8, -1,
		  "'nvidia.com/mig.strategy':'single','nvidia.com/gpu.product':'X-MIG-INVALID'", -1,
		  0, false, CACHE_SHARING_NONE, 1, 8, 8, 8, 1, 0, false },
		{ "MIG single slices time-sliced: time-slicing over slices", "nvidia.com/gpu", 56,
		  -1, "'nvidia.com/mig.strategy':'single','nvidia.com/gpu.replicas':'2',"
		  "'nvidia.com/gpu.sharing-strategy':'time-slicing','nvidia.com/gpu.product':"
		  "'A100-SXM4-40GB-MIG-1g.5gb-SHARED'", -1, 0, false,
		  CACHE_SHARING_TIME_SLICING, 2, 28, 56, 56, 2, 0, false },
		{ "56 slices x 2 replicas: one replica of each offered", "nvidia.com/gpu", 112, -1,
		  TS_LABELS("2"), -1, 0, false, CACHE_SHARING_TIME_SLICING, 1, 56, 56, 56, 2, 0,
		  false },
		{ "override none: labels ignored", "nvidia.com/gpu", 32, -1, TS_LABELS("4"),
		  CACHE_SHARING_NONE, 0, false, CACHE_SHARING_NONE, 1, 32, 32, 32, 1, 0, false },
		{ "override time-slicing, replicas 4: no labels needed", "nvidia.com/gpu", 16, -1, "",
		  CACHE_SHARING_TIME_SLICING, 4, false, CACHE_SHARING_TIME_SLICING, 4, 4, 16, 16, 4,
		  0, false },
		{ "override replicas beats the label", "nvidia.com/gpu", 32, -1, TS_LABELS("4"), -1, 2,
		  false, CACHE_SHARING_TIME_SLICING, 2, 16, 32, 32, 2, 0, false },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct sharing_row *w = &rows[i];
		struct cache_opts o = shared_opts();
		struct cache_node *n;
		int ri = strcmp(w->res, "nvidia.com/gpu") == 0 ? 0 : 1;

		o.sharing[ri].strategy = w->strategy;
		o.sharing[ri].replicas = w->replicas;
		o.sharing[ri].fail_requests_greater_than_one = w->fail_gt1;
		n = shared_node(&o, w->res, w->cap, w->alloc, w->labels, "");
		if (n->gpu_resource != ri || n->gpu_sharing != w->sharing ||
		    n->gpu_replicas != w->replicas_got || n->gpu_physical != w->physical ||
		    n->gpu_capacity != w->capacity || n->gpu_allocatable != w->allocatable ||
		    n->gpu_replicas_advertised != w->advertised ||
		    (w->sharing != CACHE_SHARING_NONE && n->gpu_packing != w->packing) ||
		    n->gpu_fail_gt1 != w->fail_gt1_got) {
			print_message("%s: got resource %d %s, %u x %u (advertised %u), capacity %u, "
				      "allocatable %u, packing %u, fail>1 %d\n", w->what,
				      n->gpu_resource, cache_sharing_name(n->gpu_sharing),
				      n->gpu_physical, n->gpu_replicas, n->gpu_replicas_advertised,
				      n->gpu_capacity, n->gpu_allocatable, n->gpu_packing,
				      n->gpu_fail_gt1);
			bad++;
		}
		cache_node_free(n);
	}
	/* OPTS (zeroed sharing, as every caller that never asked for it): the
	 * labels change nothing. */
	{
		struct cache_node *n = shared_node(&OPTS, "nvidia.com/gpu", 32, -1, TS_LABELS("4"),
						   "");

		if (cache_node_shared(n) || n->gpu_capacity != 32) {
			print_message("zeroed options: a node was read as shared\n");
			bad++;
		}
		cache_node_free(n);
	}
	assert_int_equal(bad, 0);
}

static void test_unhealthy_gpu_is_its_slots(void **state)
{
	struct cache_opts o = shared_opts();
	struct cache_node *n = shared_node(&o, "nvidia.com/gpu", 32, 28, TS_LABELS("4"),
					   "'troupe.io/gpu-unhealthy':'1,7'");

	(void)state;
	assert_int_equal(n->gpu_replicas, 4);
	assert_true(n->unhealthy == (0xfULL << 4 | 0xfULL << 28));
	assert_true(cache_node_gpu_slots(n, 2) == 0xfULL << 8);
	cache_node_free(n);
	/* 52 slices cut 7 a GPU: the last GPU's four slots past 52 exist not. */
	n = shared_node(&o, "nvidia.com/gpu", 52, -1, "'nvidia.com/mig.strategy':'single',"
			"'nvidia.com/gpu.product':'A100-SXM4-40GB-MIG-1g.5gb'", "");
	assert_int_equal(n->gpu_physical, 8);
	assert_int_equal(n->gpu_capacity, 56);
	assert_int_equal(n->gpu_allocatable, 52);
	assert_true(n->unhealthy == 0xfULL << 52);
	cache_node_free(n);
}

static void test_slot_names_round_trip(void **state)
{
	static const char *const bad[] = {
		"", "0", "0:", ":1", "0:4", "8:0", "0:1,0:1", "0:1;1:0", "0:1,", "a:b", "0:1:2",
		"99999999999:0",
	};
	struct cache_opts o = shared_opts();
	struct cache_node *n = shared_node(&o, "nvidia.com/gpu", 32, -1, TS_LABELS("4"), "");
	struct cache_node *whole = shared_node(&o, "nvidia.com/gpu", 8, -1, "", "");
	char buf[CACHE_DEVICES_BUF];
	uint64_t m = 0, all = cache_node_capacity_mask(n);

	(void)state;
	cache_node_devices_format(n, 1ULL << 1 | 1ULL << 2 | 1ULL << 12, buf, sizeof(buf));
	assert_string_equal(buf, "0:1,0:2,3:0");
	assert_int_equal(cache_node_slots_parse(n, "0:1, 0:2 ,3:0", &m), 0);
	assert_true(m == (1ULL << 1 | 1ULL << 2 | 1ULL << 12));
	/* Every slot, both ways. */
	cache_node_devices_format(n, all, buf, sizeof(buf));
	assert_int_equal(cache_node_slots_parse(n, buf, &m), 0);
	assert_true(m == all);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m = 42;
		if (cache_node_slots_parse(n, bad[i], &m) != -EINVAL || m != 42)
			fail_msg("\"%s\" was accepted", bad[i]);
	}
	/* Whole GPUs keep their plain names and take no slots. */
	cache_node_devices_format(whole, 0x9, buf, sizeof(buf));
	assert_string_equal(buf, "0,3");
	assert_int_equal(cache_node_slots_parse(whole, "0:0", &m), -EINVAL);
	cache_node_devices_format(NULL, 0x9, buf, sizeof(buf));
	assert_string_equal(buf, "0,3");
	cache_node_free(n);
	cache_node_free(whole);
}

static void test_slot_uuids(void **state)
{
	struct cache_opts o = shared_opts();
	struct cache_node *n = shared_node(&o, "nvidia.com/gpu", 4, -1, TS_LABELS("2"),
					   "'troupe.io/gpu-uuids':'GPU-a,GPU-b'");
	char buf[256];

	(void)state;
	assert_true(cache_node_uuids(n, 1ULL << 1 | 1ULL << 2, buf, sizeof(buf)));
	assert_string_equal(buf, "GPU-a::1,GPU-b::0");
	/* Too small a buffer gives nothing rather than a cut list. */
	assert_false(cache_node_uuids(n, 0xf, buf, 20));
	assert_string_equal(buf, "");
	cache_node_free(n);
}

/* A pod <uid> bound to s0 asking <gpus> with troupe.io/gpu-ids <ids>. */
static struct cache_pod *slot_pod(const char *uid, unsigned gpus, const char *ids)
{
	return pod_make((struct podspec){ .uid = uid, .node = "s0", .gpus = gpus, .ids = ids });
}

static void test_pod_slots_on_its_node(void **state)
{
	struct cache_opts o = shared_opts();
	struct cache *c = cache_new(&o);
	struct cache_pod_info info;

	(void)state;
	assert_non_null(c);
	assert_int_equal(cache_node_upsert(c, shared_node(&o, "nvidia.com/gpu", 32, -1,
							  TS_LABELS("4"), "")), 0);
	assert_int_equal(cache_pod_apply(c, slot_pod("p1", 2, "0:1,3:0")), 0);
	assert_usage(c, "s0", 1ULL << 1 | 1ULL << 12, 0);
	info = pod_info(c, "p1");
	assert_true(info.devices == (1ULL << 1 | 1ULL << 12));
	/* Slots the node lacks, or fewer than asked: counted, not named. */
	assert_int_equal(cache_pod_apply(c, slot_pod("p2", 1, "9:0")), 0);
	assert_int_equal(cache_pod_apply(c, slot_pod("p3", 2, "1:0")), 0);
	assert_usage(c, "s0", 1ULL << 1 | 1ULL << 12, 3);
	/* Gone: its slots are free again. */
	assert_int_equal(cache_pod_delete(c, "p1"), 0);
	assert_usage(c, "s0", 0, 3);
	assert_int_equal(look(c, "s0").free_gpus, 29);
	cache_free(c);
}

/* nvidia.com/gpu and three MIG profiles. */
static struct cache_opts mig_opts(void)
{
	struct cache_opts o = shared_opts();

	o.gpu_resources[1] = "nvidia.com/mig-1g.10gb";
	o.gpu_resources[2] = "nvidia.com/mig-2g.20gb";
	o.gpu_resources[3] = "nvidia.com/mig-3g.40gb";
	o.n_gpu_resources = 4;
	return o;
}

/* MIG mixed node m0: <resources> its capacity, <alloc> its allocatable (""
 * for the same), <labels> besides nvidia.com/mig.strategy=mixed. */
static struct cache_node *mig_node(const struct cache_opts *o, const char *resources,
				   const char *alloc, const char *labels)
{
	char l[512];

	snprintf(l, sizeof(l), "'nvidia.com/mig.strategy':'mixed'%s%s", *labels ? "," : "",
		 labels);
	return node_from(o, "m0", resources, *alloc ? alloc : resources, l, "");
}

#define BALANCED "'nvidia.com/mig-1g.10gb':'16','nvidia.com/mig-2g.20gb':'8'," \
		 "'nvidia.com/mig-3g.40gb':'8'"

static void test_mig_mixed_layout(void **state)
{
	struct cache_opts o = mig_opts();
	struct cache_node *n;
	uint64_t g0;

	(void)state;
	/* all-balanced on 8 GPUs: each GPU 2 x 1g, 1 x 2g, 1 x 3g, in the order
	 * of resources.gpu. */
	n = mig_node(&o, BALANCED, "", "'nvidia.com/gpu.count':'8'");
	assert_int_equal(n->gpu_sharing, CACHE_SHARING_MIG_MIXED);
	assert_int_equal(n->gpu_physical, 8);
	assert_int_equal(n->gpu_replicas, 4);
	assert_int_equal(n->gpu_capacity, 32);
	assert_int_equal(n->gpu_allocatable, 32);
	assert_int_equal(n->gpu_packing, CACHE_PACKING_PACKED);
	g0 = cache_node_gpu_slots(n, 0);
	assert_true((cache_node_res_devices(n, 1) & g0) == 0x3);
	assert_true((cache_node_res_devices(n, 2) & g0) == 0x4);
	assert_true((cache_node_res_devices(n, 3) & g0) == 0x8);
	assert_int_equal(__builtin_popcountll(cache_node_res_devices(n, 1)), 16);
	assert_int_equal(cache_node_res_allocatable(n, 3), 8);
	assert_false(cache_node_offers(n, 0));
	assert_true(cache_node_offers(n, 2));
	assert_true(n->unhealthy == 0);
	cache_node_free(n);
	/* No gpu.count: the counts' common divisor (8); two 3g.40gb not
	 * allocatable: the last two of them never free. */
	n = mig_node(&o, BALANCED, "'nvidia.com/mig-1g.10gb':'16','nvidia.com/mig-2g.20gb':'8',"
		     "'nvidia.com/mig-3g.40gb':'6'", "");
	assert_int_equal(n->gpu_physical, 8);
	assert_int_equal(cache_node_res_allocatable(n, 3), 6);
	assert_true(n->unhealthy == (1ULL << 27 | 1ULL << 31));
	cache_node_free(n);
	/* Four whole GPUs beside four MIG ones: GFD's gpu.count counts all 8;
	 * a whole GPU is its GPU's first slot, the others never exist. */
	n = mig_node(&o, "'nvidia.com/gpu':'4','nvidia.com/mig-1g.10gb':'28'", "",
		     "'nvidia.com/gpu.count':'8'");
	assert_int_equal(n->gpu_physical, 8);
	assert_int_equal(n->gpu_replicas, 7);
	assert_true(cache_node_res_devices(n, 0) ==
		    (1ULL << 28 | 1ULL << 35 | 1ULL << 42 | 1ULL << 49));
	assert_int_equal(__builtin_popcountll(n->unhealthy), 4 * 6);
	assert_true((n->unhealthy & cache_node_res_devices(n, 0)) == 0);
	assert_int_equal(cache_node_res_allocatable(n, 0), 4);
	cache_node_free(n);
	/* More than 64 slots: no layout, the first managed resource only. */
	n = mig_node(&o, "'nvidia.com/gpu':'8','nvidia.com/mig-1g.10gb':'56'", "",
		     "'nvidia.com/gpu.count':'16'");
	assert_null(n->res_mask);
	assert_int_equal(n->gpu_sharing, CACHE_SHARING_NONE);
	assert_int_equal(n->gpu_resource, 0);
	cache_node_free(n);
}

/* A pod on a MIG mixed node holds the slots its GPU:slot ids name, and a view
 * counts each resource apart. */
static void test_mig_mixed_pods(void **state)
{
	struct cache_opts o = mig_opts();
	struct cache *c = cache_new(&o);
	struct cache_node_view v;
	struct cache_pod *p;
	char text[1024], err[CACHE_ERR_LEN] = "";
	cJSON *j;

	(void)state;
	assert_non_null(c);
	assert_int_equal(cache_node_upsert(c, mig_node(&o, BALANCED, "",
						       "'nvidia.com/gpu.count':'8'")), 0);
	sq_text(text, sizeof(text),
		"{'metadata':{'name':'p','namespace':'ml','uid':'p','annotations':"
		"{'troupe.io/gpu-ids':'3:2'}},'spec':{'nodeName':'m0','containers':[{'name':'c',"
		"'resources':{'limits':{'nvidia.com/mig-2g.20gb':'1'}}}]},"
		"'status':{'phase':'Running'}}");
	j = cJSON_Parse(text);
	p = cache_pod_parse(j, &o, err, sizeof(err));
	cJSON_Delete(j);
	assert_non_null(p);
	assert_int_equal(p->demand.gpu_resource, 2);
	assert_int_equal(cache_pod_apply(c, p), 0);
	assert_usage(c, "m0", 1ULL << 14, 0);
	cache_read_begin(c);
	assert_true(cache_node_lookup(c, "m0", 2, &v));
	assert_int_equal(cache_view_free_for(&v, 1), 16);
	assert_int_equal(cache_view_free_for(&v, 2), 7);
	assert_int_equal(cache_view_free_for(&v, 0), 0);
	assert_true((cache_view_free_mask_for(&v, 2) & (1ULL << 14)) == 0);
	assert_int_equal(__builtin_popcountll(cache_view_free_mask_for(&v, 2)), 7);
	cache_read_end(c);
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_node_sharing_table),
		cmocka_unit_test(test_unhealthy_gpu_is_its_slots),
		cmocka_unit_test(test_slot_names_round_trip),
		cmocka_unit_test(test_slot_uuids),
		cmocka_unit_test(test_pod_slots_on_its_node),
		cmocka_unit_test(test_mig_mixed_layout),
		cmocka_unit_test(test_mig_mixed_pods),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
