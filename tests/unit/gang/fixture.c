/* The shared fixture of the gang unit tests (fixture.h). */
#include "fixture.h"

#include "common/util.h"

const struct cache_opts gpu_opts = { .gpu_resources = { "nvidia.com/gpu" },
				     .n_gpu_resources = 1 };

uint64_t fake_clock_now(void *ctx)
{
	struct fake_clock *clk = ctx;

	/* Pairs with fake_clock_set's store: the manager's threads read it. */
	return __atomic_load_n(&clk->now_ns, __ATOMIC_SEQ_CST);
}

void fake_clock_set(struct fake_clock *clk, uint64_t ns)
{
	__atomic_store_n(&clk->now_ns, ns, __ATOMIC_SEQ_CST);
}

void fake_clock_advance(struct fake_clock *clk, uint64_t ns)
{
	__atomic_fetch_add(&clk->now_ns, ns, __ATOMIC_SEQ_CST);
}

void fake_config(struct gang_config *cfg, struct fake_clock *clk)
{
	gang_config_defaults(cfg);
	fake_clock_set(clk, util_now_ns());
	cfg->now_ns = fake_clock_now;
	cfg->clock_ctx = clk;
}

void cache_nodes(struct cache *c, int n)
{
	char err[CACHE_ERR_LEN];

	for (int i = 0; i < n; i++) {
		char json[512];
		cJSON *o;

		snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"n%d\"},\"status\":{\"allocatable\":"
			 "{\"nvidia.com/gpu\":\"8\"},\"capacity\":{\"nvidia.com/gpu\":\"8\"},"
			 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}", i);
		o = cJSON_Parse(json);
		assert_int_equal(cache_node_upsert(c, cache_node_parse(o, &gpu_opts, err, sizeof(err))), 0);
		cJSON_Delete(o);
	}
}

void idle_group(struct cache *c, const char *name, int min, unsigned n)
{
	char json[512], err[CACHE_ERR_LEN];
	cJSON *o;

	snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\"},"
		 "\"spec\":{\"minMember\":%d}}", name, min);
	o = cJSON_Parse(json);
	assert_int_equal(cache_podgroup_apply(c, cache_podgroup_parse(o, &gpu_opts, err,
								       sizeof(err))), 0);
	cJSON_Delete(o);
	for (unsigned i = 0; i < n; i++) {
		snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"%s-%u\",\"namespace\":\"ml\","
			 "\"uid\":\"%s-%u\",\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"%s\"}},"
			 "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
			 "{\"nvidia.com/gpu\":\"8\"}}}]}}", name, i, name, i, name);
		o = cJSON_Parse(json);
		assert_int_equal(cache_pod_apply(c, cache_pod_parse(o, &gpu_opts, err, sizeof(err))),
				 0);
		cJSON_Delete(o);
	}
}

/* Begin a read section and look up nodes n0 and n1 into <views>. */
void read_two_nodes(struct cache *c, struct cache_node_view *views)
{
	cache_read_begin(c);
	assert_true(cache_node_lookup(c, "n0", 2, &views[0]));
	assert_true(cache_node_lookup(c, "n1", 2, &views[1]));
}
