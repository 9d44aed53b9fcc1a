/* Unit tests for placement/registry.c: a node's topology class, derived once
 * per node record (annotation, else the built-in profile for its labels, else
 * unknown), interned by content so that nodes alike share one class and one
 * memo, and released with the last node that uses it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "fixture.h"

/* GPU Feature Discovery's labels, sorted by key as the cache keeps them. */
static const struct cache_kv a100_labels[] = {
	{ "nvidia.com/gpu.count", "8" },
	{ "nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB" },
};
static const struct cache_kv h100_product_only[] = {
	{ "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3" },
};

static struct cache_node gpu_node(uint32_t capacity, const char *annotation,
				  const struct cache_kv *labels, uint16_t n_labels)
{
	struct cache_node n = make_node(NV, capacity, capacity, true, false);

	n.topology_text = annotation;
	n.labels = labels;
	n.n_labels = n_labels;
	return n;
}

static void assert_stats(const struct placement_registry *r, uint64_t classes,
			 uint64_t parse_errors)
{
	uint64_t c, e;

	placement_registry_stats(r, &c, &e);
	assert_int_equal(c, classes);
	assert_int_equal(e, parse_errors);
}

/* Nodes with the same matrix share one class, counted once, until the last of
 * them is released; another matrix is another class. */
static void test_placement_registry_interns_by_content(void **state)
{
	struct placement_registry *r = placement_registry_new();
	struct cache_node a = gpu_node(8, fixture_text(FX_DGX_H100), NULL, 0);
	struct cache_node b = gpu_node(8, fixture_text(FX_DGX_H100), NULL, 0);
	struct cache_node c = gpu_node(8, fixture_text(FX_PCIE_2S), NULL, 0);
	struct placement_topo *ta, *tb, *tc;

	(void)state;
	assert_non_null(r);
	ta = placement_topo_derive(&a, r);
	tb = placement_topo_derive(&b, r);
	tc = placement_topo_derive(&c, r);
	assert_non_null(ta);
	assert_ptr_equal(ta, tb);
	assert_non_null(tc);
	assert_ptr_not_equal(ta, tc);
	assert_int_equal(ta->refs, 2);
	assert_int_equal(tc->refs, 1);
	assert_string_equal(ta->source, "annotation");
	assert_memory_equal(ta->link, fixture_topo(FX_DGX_H100)->link, sizeof(ta->link));
	assert_stats(r, 2, 0);
	a.derived = ta;
	assert_ptr_equal(placement_node_topo(&a), ta);
	placement_topo_release(ta, r);
	assert_stats(r, 2, 0);
	placement_topo_release(tb, r);
	assert_stats(r, 1, 0);
	placement_topo_release(tc, r);
	assert_stats(r, 0, 0);
	/* Released with nothing: no class, nothing to do. */
	placement_topo_release(NULL, r);
	placement_registry_free(r);
	placement_registry_free(NULL);
}

/* Where a node's topology comes from: the annotation first, then the profile
 * for its labels (the count label, else the node's capacity), then its DRA
 * slices' attributes, else none. */
static void test_placement_registry_annotation_then_profile_then_unknown(void **state)
{
	struct placement_registry *r = placement_registry_new();
	struct cache_node both = gpu_node(8, fixture_text(FX_PCIE_2S), a100_labels, 2);
	struct cache_node labels = gpu_node(8, NULL, a100_labels, 2);
	struct cache_node product = gpu_node(8, NULL, h100_product_only, 1);
	struct cache_node bare = gpu_node(8, NULL, NULL, 0);
	struct cache_node short_count = gpu_node(4, NULL, a100_labels, 2);
	struct cache_node no_gpus = gpu_node(0, fixture_text(FX_PCIE_2S), a100_labels, 2);
	struct placement_topo *t;

	(void)state;
	assert_non_null(r);
	t = placement_topo_derive(&both, r);
	assert_non_null(t);
	assert_string_equal(t->source, "annotation");
	placement_topo_release(t, r);
	t = placement_topo_derive(&labels, r);
	assert_non_null(t);
	assert_string_equal(t->source, "profile hgx-a100-8");
	placement_topo_release(t, r);
	t = placement_topo_derive(&product, r);
	assert_non_null(t);
	assert_string_equal(t->source, "profile hgx-h100-8");
	placement_topo_release(t, r);
	/* The labels say 8 GPUs, the node has 4: no profile is trusted. */
	assert_null(placement_topo_derive(&short_count, r));
	assert_null(placement_topo_derive(&bare, r));
	assert_null(placement_topo_derive(&no_gpus, r));
	assert_stats(r, 0, 0);
	/* Last, the DRA slices' attributes (as dra.c writes them): after a
	 * profile, before unknown; a count other than the node's is not used. */
	{
		static const char dra[] =
			"\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
			"GPU0\t X \tPHB\tSYS\tSYS\tN/A\t0\n"
			"GPU1\tPHB\t X \tSYS\tSYS\tN/A\t0\n"
			"GPU2\tSYS\tSYS\t X \tNODE\tN/A\t1\n"
			"GPU3\tSYS\tSYS\tNODE\t X \tN/A\t1\n";
		struct cache_node four = gpu_node(4, NULL, NULL, 0);

		four.dra_topology_text = dra;
		t = placement_topo_derive(&four, r);
		assert_non_null(t);
		assert_string_equal(t->source, "dra");
		assert_int_equal(t->link[0][1], PLACEMENT_LINK_PHB);
		assert_int_equal(t->link[2][3], PLACEMENT_LINK_NODE);
		assert_int_equal(t->link[1][2], PLACEMENT_LINK_SYS);
		assert_int_equal(t->numa[3], 1);
		placement_topo_release(t, r);
		labels.dra_topology_text = dra;
		t = placement_topo_derive(&labels, r);
		assert_string_equal(t->source, "profile hgx-a100-8");
		placement_topo_release(t, r);
		bare.dra_topology_text = dra;
		assert_null(placement_topo_derive(&bare, r));
	}
	assert_stats(r, 0, 0);
	placement_registry_free(r);
}

/* An annotation that is not topo -m text, or shows another number of GPUs
 * than the node has, leaves the node unknown and is counted. */
static void test_placement_registry_bad_annotation_is_counted_and_unknown(void **state)
{
	struct placement_registry *r = placement_registry_new();
	struct cache_node garbage = gpu_node(8, "GPU0 GPU1 nonsense", a100_labels, 2);
	struct cache_node wrong_count = gpu_node(4, fixture_text(FX_DGX_H100), NULL, 0);

	(void)state;
	assert_non_null(r);
	/* Not the profile either: a node that says something wrong is unknown. */
	assert_null(placement_topo_derive(&garbage, r));
	assert_stats(r, 0, 1);
	assert_null(placement_topo_derive(&wrong_count, r));
	assert_stats(r, 0, 2);
	placement_registry_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_registry_interns_by_content),
		cmocka_unit_test(test_placement_registry_annotation_then_profile_then_unknown),
		cmocka_unit_test(test_placement_registry_bad_annotation_is_counted_and_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
