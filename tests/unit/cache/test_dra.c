/* Unit tests of DRA accounting (dra.c): a ResourceClaim allocated devices of
 * a managed DRA driver holds them on their node, so troupe never offers them
 * again; named exactly by uuid or index, else counted; released when the
 * claim is deallocated, deleted or swept, or its slice is gone.
 *
 *   test_claim_holds_its_devices       by "index", by "uuid" through the node's
 *                                      troupe.io/gpu-uuids, unattributed when
 *                                      neither names a device; released on
 *                                      deallocation and deletion
 *   test_claim_before_its_slice        a claim seen before the slice that names
 *                                      its devices holds them once it comes, and
 *                                      nothing once the slice goes; the devices
 *                                      a node's slices publish, counted
 *   test_other_drivers_and_bad_input   another driver's devices, an unallocated
 *                                      claim, a claim or slice without a name
 *   test_slices_give_a_topology        a node without the annotation gets the
 *                                      topology its slices' pcieRoot and
 *                                      numaNode give, published again as they
 *                                      change, and none once they are gone
 *   test_relists_sweep_their_own       the claims' and slices' relists forget
 *                                      what they did not list; a pod relist
 *                                      keeps the claims' entries
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
#include "cache/api_internal.h"
#include "fixture.h"

static struct cache *dra_cache(void)
{
	struct cache_opts o = OPTS;
	struct cache *c;

	o.dra_drivers[0] = "gpu.nvidia.com";
	o.n_dra_drivers = 1;
	c = cache_new(&o);
	assert_non_null(c);
	add_node(c, "n0", 8, 8);
	add_node(c, "n1", 8, 8);
	return c;
}

/* A slice <name> of gpu.nvidia.com (or <driver>) on <node> with devices gpu-0 ..
 * gpu-<n-1>; <attrs> says which attributes they carry: "index", "uuid", "". */
static void slice(struct cache *c, const char *name, const char *driver, const char *node,
		  unsigned n, const char *attrs, bool deleted)
{
	char text[4096], err[CACHE_ERR_LEN] = "";
	size_t at;
	cJSON *j;

	at = (size_t)snprintf(text, sizeof(text), "{'metadata':{'name':'%s'},'spec':{'driver':'%s',"
			      "'nodeName':'%s','pool':{'name':'%s','generation':1,"
			      "'resourceSliceCount':1},'devices':[", name, driver, node, node);
	for (unsigned i = 0; i < n; i++) {
		char attr[128] = "";

		if (strcmp(attrs, "index") == 0)
			snprintf(attr, sizeof(attr), "'index':{'int':%u}", i);
		else if (strcmp(attrs, "uuid") == 0)
			snprintf(attr, sizeof(attr), "'uuid':{'string':'GPU-%u'}", 7 - i);
		at += (size_t)snprintf(text + at, sizeof(text) - at, "%s{'name':'gpu-%u',"
				       "'attributes':{%s}}", i ? "," : "", i, attr);
	}
	snprintf(text + at, sizeof(text) - at, "]}}");
	j = json_sq(text);
	assert_int_equal(cache_dra_slice(c, j, deleted, err, sizeof(err)), 0);
	cJSON_Delete(j);
}

/* Claim ml/<name> (uid "u-<name>") allocated devices <devs> ("gpu-1,gpu-2";
 * "" for not allocated) of <driver> in pool <pool>. */
static void claim(struct cache *c, const char *name, const char *driver, const char *pool,
		  const char *devs, bool deleted)
{
	char text[4096], list[2048] = "", err[CACHE_ERR_LEN] = "";
	size_t at = 0;
	char copy[256];
	cJSON *j;

	snprintf(copy, sizeof(copy), "%s", devs);
	for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ","))
		at += (size_t)snprintf(list + at, sizeof(list) - at, "%s{'request':'gpu',"
				       "'driver':'%s','pool':'%s','device':'%s'}", at ? "," : "",
				       driver, pool, tok);
	if (devs[0])
		snprintf(text, sizeof(text), "{'metadata':{'name':'%s','namespace':'ml','uid':'u-%s'},"
			 "'spec':{},'status':{'allocation':{'devices':{'results':[%s]}}}}", name,
			 name, list);
	else
		snprintf(text, sizeof(text), "{'metadata':{'name':'%s','namespace':'ml','uid':'u-%s'},"
			 "'spec':{},'status':{}}", name, name);
	j = json_sq(text);
	assert_non_null(j);
	assert_int_equal(cache_dra_claim(c, j, deleted, err, sizeof(err)), 0);
	cJSON_Delete(j);
}

static void test_claim_holds_its_devices(void **state)
{
	struct cache *c = dra_cache();
	char err[CACHE_ERR_LEN];
	struct cache_node *n;
	cJSON *j;

	(void)state;
	/* By index: gpu-1 and gpu-2 are devices 1 and 2. */
	slice(c, "s0", "gpu.nvidia.com", "n0", 8, "index", false);
	claim(c, "a", "gpu.nvidia.com", "n0", "gpu-1,gpu-2", false);
	assert_usage(c, "n0", 0x6, 0);
	/* Deallocated: free again. */
	claim(c, "a", "gpu.nvidia.com", "n0", "", false);
	assert_usage(c, "n0", 0, 0);
	/* By uuid, through troupe.io/gpu-uuids: gpu-0 carries GPU-7, which the
	 * node lists at index 6. */
	j = json_sq("{'metadata':{'name':'n1','annotations':{'troupe.io/gpu-uuids':"
		    "'GPU-0,GPU-1,GPU-2,GPU-3,GPU-4,GPU-5,GPU-7,GPU-6'}},"
		    "'status':{'capacity':{'nvidia.com/gpu':'8'},'allocatable':{'nvidia.com/gpu':'8'},"
		    "'conditions':[{'type':'Ready','status':'True'}]}}");
	n = cache_node_parse(j, &OPTS, err, sizeof(err));
	assert_non_null(n);
	cache_node_upsert(c, n);
	cJSON_Delete(j);
	slice(c, "s1", "gpu.nvidia.com", "n1", 8, "uuid", false);
	claim(c, "b", "gpu.nvidia.com", "n1", "gpu-0", false);
	assert_usage(c, "n1", 1ULL << 6, 0);
	/* Named by neither: counted, unattributed. */
	slice(c, "s0", "gpu.nvidia.com", "n0", 8, "", false);
	claim(c, "a", "gpu.nvidia.com", "n0", "gpu-3,gpu-4,gpu-5", false);
	assert_usage(c, "n0", 0, 3);
	/* Deleted: free again. */
	claim(c, "a", "gpu.nvidia.com", "n0", "gpu-3,gpu-4,gpu-5", true);
	assert_usage(c, "n0", 0, 0);
	cache_free(c);
}

static void test_claim_before_its_slice(void **state)
{
	struct cache *c = dra_cache();

	(void)state;
	claim(c, "a", "gpu.nvidia.com", "n1", "gpu-0,gpu-7", false);
	assert_usage(c, "n1", 0, 0);
	assert_int_equal(cache_dra_node_devices(c, "n1"), 0);
	slice(c, "s1", "gpu.nvidia.com", "n1", 8, "index", false);
	assert_usage(c, "n1", 0x81, 0);
	/* The devices a node's slices publish, for filter's reason. */
	assert_int_equal(cache_dra_node_devices(c, "n1"), 8);
	slice(c, "s1", "gpu.nvidia.com", "n1", 4, "index", false);
	assert_int_equal(cache_dra_node_devices(c, "n1"), 4);
	slice(c, "s1", "gpu.nvidia.com", "n1", 8, "index", true);
	assert_usage(c, "n1", 0, 0);
	assert_int_equal(cache_dra_node_devices(c, "n1"), 0);
	/* A pool's generation rolling over: two slices publish the same
	 * devices a while; each device counts once, and the older slice's
	 * deletion leaves the newer one's. */
	slice(c, "s1", "gpu.nvidia.com", "n1", 8, "index", false);
	slice(c, "s1-next", "gpu.nvidia.com", "n1", 8, "index", false);
	assert_int_equal(cache_dra_node_devices(c, "n1"), 8);
	slice(c, "s1", "gpu.nvidia.com", "n1", 8, "index", true);
	assert_int_equal(cache_dra_node_devices(c, "n1"), 8);
	assert_usage(c, "n1", 0x81, 0);
	slice(c, "s1-next", "gpu.nvidia.com", "n1", 8, "index", true);
	assert_int_equal(cache_dra_node_devices(c, "n1"), 0);
	cache_free(c);
}

static void test_other_drivers_and_bad_input(void **state)
{
	struct cache *c = dra_cache();
	char err[CACHE_ERR_LEN] = "";
	cJSON *j;

	(void)state;
	slice(c, "x", "gpu.example.com", "n0", 8, "index", false);
	claim(c, "x", "gpu.example.com", "n0", "gpu-0,gpu-1", false);
	assert_usage(c, "n0", 0, 0);
	assert_int_equal(cache_dra_node_devices(c, "n0"), 0);   /* not a managed driver */
	slice(c, "s0", "gpu.nvidia.com", "n0", 8, "index", false);
	/* A claim not allocated, one naming devices no slice has. */
	claim(c, "y", "gpu.nvidia.com", "n0", "", false);
	claim(c, "z", "gpu.nvidia.com", "n0", "gpu-9", false);
	assert_usage(c, "n0", 0, 0);
	j = json_sq("{'metadata':{'namespace':'ml'},'status':{}}");
	assert_int_equal(cache_dra_claim(c, j, false, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "ResourceClaim"));
	cJSON_Delete(j);
	j = json_sq("{'spec':{'driver':'gpu.nvidia.com'}}");
	assert_int_equal(cache_dra_slice(c, j, false, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "ResourceSlice"));
	cJSON_Delete(j);
	/* A slice whose devices are not a list, a claim whose results are not. */
	j = json_sq("{'metadata':{'name':'s2'},'spec':{'driver':'gpu.nvidia.com','nodeName':'n1',"
		    "'pool':{'name':'n1'},'devices':{'a':1}}}");
	assert_int_equal(cache_dra_slice(c, j, false, err, sizeof(err)), 0);
	cJSON_Delete(j);
	j = json_sq("{'metadata':{'name':'w','uid':'u-w'},'status':{'allocation':{'devices':"
		    "{'results':'gpu-0'}}}}");
	assert_int_equal(cache_dra_claim(c, j, false, err, sizeof(err)), 0);
	cJSON_Delete(j);
	assert_usage(c, "n1", 0, 0);
	cache_free(c);
}

static bool keep_none(const char *key, void *arg)
{
	(void)key;
	(void)arg;
	return false;
}

static void test_relists_sweep_their_own(void **state)
{
	struct cache *c = dra_cache();

	(void)state;
	slice(c, "s0", "gpu.nvidia.com", "n0", 8, "index", false);
	claim(c, "a", "gpu.nvidia.com", "n0", "gpu-0", false);
	assert_usage(c, "n0", 0x1, 0);
	/* A pod relist that lists no pod keeps the claim's entry. */
	cache__pod_sweep(c, keep_none, NULL);
	assert_usage(c, "n0", 0x1, 0);
	/* The slices' relist without s0: the claim holds nothing it can name. */
	cache_dra_sweep(c, false, keep_none, NULL);
	assert_usage(c, "n0", 0, 0);
	assert_int_equal(cache_dra_node_devices(c, "n0"), 0);
	slice(c, "s0", "gpu.nvidia.com", "n0", 8, "index", false);
	assert_usage(c, "n0", 0x1, 0);
	/* The claims' relist without it: released. */
	cache_dra_sweep(c, true, keep_none, NULL);
	assert_usage(c, "n0", 0, 0);
	cache_free(c);
}

/* What node_derive saw last: the node's name and its DRA topology text. */
static char derived_node[64], derived_text[2048];
static int derive_calls;

static void *record_derive(const struct cache_node *node, void *ctx)
{
	(void)ctx;
	derive_calls++;
	snprintf(derived_node, sizeof(derived_node), "%s", node->name);
	snprintf(derived_text, sizeof(derived_text), "%s",
		 node->dra_topology_text ? node->dra_topology_text : "(none)");
	return NULL;
}

/* Slice "t0" on n0 (<deleted>: gone): 8 devices with index, a PCIe root for
 * each <per_root> of them and a NUMA node for each four. */
static void topo_slice(struct cache *c, unsigned per_root, bool deleted)
{
	char text[4096], err[CACHE_ERR_LEN] = "";
	size_t at;
	cJSON *j;

	at = (size_t)snprintf(text, sizeof(text), "{'metadata':{'name':'t0'},'spec':{'driver':"
			      "'gpu.nvidia.com','nodeName':'n0','pool':{'name':'n0'},'devices':[");
	for (unsigned i = 0; i < 8; i++)
		at += (size_t)snprintf(text + at, sizeof(text) - at, "%s{'name':'gpu-%u',"
				       "'attributes':{'index':{'int':%u},"
				       "'resource.kubernetes.io/pcieRoot':{'string':'pci00%u'},"
				       "'numaNode':{'int':%u}}}", i ? "," : "", i, i,
				       i / per_root, i / 4);
	snprintf(text + at, sizeof(text) - at, "]}}");
	j = json_sq(text);
	assert_int_equal(cache_dra_slice(c, j, deleted, err, sizeof(err)), 0);
	cJSON_Delete(j);
}

/* A node without troupe.io/gpu-topology gets the topology its slices' standard
 * attributes give: published again when they change, and without it once the
 * slice is gone. */
static void test_slices_give_a_topology(void **state)
{
	struct cache_opts o = OPTS;
	struct cache *c;
	char want[2048];

	(void)state;
	o.dra_drivers[0] = "gpu.nvidia.com";
	o.n_dra_drivers = 1;
	o.node_derive = record_derive;
	c = cache_new(&o);
	assert_non_null(c);
	add_node(c, "n0", 8, 8);
	assert_string_equal(derived_text, "(none)");
	derive_calls = 0;
	topo_slice(c, 2, false);
	assert_int_equal(derive_calls, 1);
	assert_string_equal(derived_node, "n0");
	/* GPU0 shares a root with GPU1 (PHB), a NUMA node with GPU2-3 (NODE). */
	assert_non_null(strstr(derived_text, "GPU0\t X \tPHB\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS"
			       "\tN/A\t0\n"));
	assert_non_null(strstr(derived_text, "GPU7\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tPHB\t X "
			       "\tN/A\t1\n"));
	snprintf(want, sizeof(want), "%s", derived_text);
	/* The same slice again: nothing to publish. */
	topo_slice(c, 2, false);
	assert_int_equal(derive_calls, 1);
	/* A watch update of the node keeps the slices' topology. */
	add_node(c, "n0", 8, 8);
	assert_int_equal(derive_calls, 2);
	assert_string_equal(derived_text, want);
	/* Four to a root now: published again. */
	topo_slice(c, 4, false);
	assert_int_equal(derive_calls, 3);
	assert_non_null(strstr(derived_text, "GPU0\t X \tPHB\tPHB\tPHB\tSYS"));
	/* The slice gone: the node again, with none. */
	topo_slice(c, 4, true);
	assert_int_equal(derive_calls, 4);
	assert_string_equal(derived_text, "(none)");
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_claim_holds_its_devices),
		cmocka_unit_test(test_claim_before_its_slice),
		cmocka_unit_test(test_other_drivers_and_bad_input),
		cmocka_unit_test(test_relists_sweep_their_own),
		cmocka_unit_test(test_slices_give_a_topology),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
