/* Unit tests for placement/profiles.c: the built-in topologies of common GPU
 * servers, chosen by GPU Feature Discovery labels and equal to what their
 * source machines print, and the unknown topology.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "fixture.h"

static void test_placement_topo_unknown_is_all_equal(void **state)
{
	(void)state;
	memset(&topo_got, 0x5A, sizeof(topo_got));
	placement_topo_unknown(8, &topo_got);
	assert_int_equal(topo_got.n, 8);
	assert_false(topo_got.known);
	assert_string_equal(topo_got.source, "unknown");
	for (unsigned i = 0; i < PLACEMENT_TOPO_MAX; i++) {
		assert_int_equal(topo_got.numa[i], -1);
		for (unsigned j = 0; j < PLACEMENT_TOPO_MAX; j++)
			assert_int_equal(topo_got.link[i][j], L_X);
	}
	assert_int_equal(topo_got.refs, 0);
	assert_int_equal(topo_got.hash, 0);
}

struct profile_case {
	const char *product;            /* nvidia.com/gpu.product */
	unsigned count;                 /* nvidia.com/gpu.count */
	const char *source;             /* NULL: no profile (-ENOENT) */
	struct link_check link;         /* one pair's level */
	int8_t numa0, numa_last;
};

static const struct profile_case profile_cases[] = {
	{ "NVIDIA-A100-SXM4-80GB", 8, "profile hgx-a100-8", { 0, 7, L_NV(12) }, 0, 1 },
	{ "A100-SXM4-40GB", 8, "profile hgx-a100-8", { 3, 4, L_NV(12) }, 0, 1 },
	{ "nvidia-a100-sxm4-80gb", 8, "profile hgx-a100-8", { 1, 2, L_NV(12) }, 0, 1 },
	{ "NVIDIA A100-SXM4-80GB", 8, "profile hgx-a100-8", { 1, 2, L_NV(12) }, 0, 1 },
	{ "NVIDIA-A100-SXM4-80GB", 4, "profile hgx-a100-4", { 0, 3, L_NV(4) }, -1, -1 },
	{ "NVIDIA-H100-80GB-HBM3", 8, "profile hgx-h100-8", { 0, 7, L_NV(18) }, 0, 1 },
	{ "NVIDIA-H100-SXM5-80GB", 8, "profile hgx-h100-8", { 2, 5, L_NV(18) }, 0, 1 },
	{ "NVIDIA-H200", 8, "profile hgx-h100-8", { 0, 1, L_NV(18) }, 0, 1 },
	{ "NVIDIA-H200-141GB-HBM3e", 8, "profile hgx-h100-8", { 0, 1, L_NV(18) }, 0, 1 },
	{ "NVIDIA-H100-80GB-HBM3", 4, "profile hgx-h100-4", { 1, 3, L_NV(6) }, -1, -1 },
	{ "Tesla-V100-SXM2-32GB", 8, "profile dgx1-v100", { 0, 3, L_NV(2) }, 0, 1 },
	{ "Tesla-V100-SXM2-16GB", 8, "profile dgx1-v100", { 0, 1, L_NV(1) }, 0, 1 },
	{ "Tesla-V100-SXM2-16GB", 8, "profile dgx1-v100", { 0, 5, L_SYS }, 0, 1 },
	{ "Tesla-V100-SXM2-16GB", 8, "profile dgx1-v100", { 2, 6, L_NV(1) }, 0, 1 },
	/* The count must be the profile's. */
	{ "NVIDIA-A100-SXM4-80GB", 2, NULL, { 0 }, 0, 0 },
	{ "NVIDIA-A100-SXM4-80GB", 16, NULL, { 0 }, 0, 0 },
	{ "NVIDIA-H100-80GB-HBM3", 0, NULL, { 0 }, 0, 0 },
	{ "Tesla-V100-SXM2-16GB", 4, NULL, { 0 }, 0, 0 },
	/* Cards whose links depend on where they sit and the bridges between them,
	 * and MIG slices. */
	{ "NVIDIA-A100-PCIE-40GB", 8, NULL, { 0 }, 0, 0 },
	{ "NVIDIA-H100-PCIe", 8, NULL, { 0 }, 0, 0 },
	{ "NVIDIA-H100-NVL", 8, NULL, { 0 }, 0, 0 },
	{ "NVIDIA-H200-NVL", 4, NULL, { 0 }, 0, 0 },
	{ "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", 8, NULL, { 0 }, 0, 0 },
	{ "Tesla-V100-PCIE-32GB", 8, NULL, { 0 }, 0, 0 },
	{ "Tesla-V100-SXM3-32GB", 16, NULL, { 0 }, 0, 0 },   /* DGX-2: not a profile */
	{ "NVIDIA-GH200-480GB", 8, NULL, { 0 }, 0, 0 },      /* "H200" inside a word */
	{ "NVIDIA-GeForce-RTX-3090", 4, NULL, { 0 }, 0, 0 },
	{ "", 8, NULL, { 0 }, 0, 0 },
	{ NULL, 8, NULL, { 0 }, 0, 0 },
};

static void test_placement_topo_profile_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(profile_cases) / sizeof(profile_cases[0]); i++) {
		const struct profile_case *c = &profile_cases[i];
		int ret;

		memset(&topo_got, 0x5A, sizeof(topo_got));
		memcpy(&topo_want, &topo_got, sizeof(topo_got));
		ret = placement_topo_profile(c->product, c->count, &topo_got);
		if (!c->source) {
			if (ret != -ENOENT || memcmp(&topo_got, &topo_want, sizeof(topo_got)))
				fail_msg("\"%s\" x%u: ret %d or <out> written; want -ENOENT",
					 c->product ? c->product : "(null)", c->count, ret);
			continue;
		}
		if (ret != 0 || strcmp(topo_got.source, c->source) != 0)
			fail_msg("\"%s\" x%u: ret %d source \"%s\"; want \"%s\"", c->product,
				 c->count, ret, ret == 0 ? topo_got.source : "", c->source);
		assert_int_equal(topo_got.n, c->count);
		assert_true(topo_got.known);
		assert_well_formed(&topo_got);
		assert_int_equal(topo_got.link[c->link.i][c->link.j], c->link.level);
		assert_int_equal(topo_got.numa[0], c->numa0);
		assert_int_equal(topo_got.numa[c->count - 1], c->numa_last);
	}
}

/* A profile is the matrix its source machines print: the DGX-1 profile cell for
 * cell with the Cori fixture, the H100 one with the DGX H100 fixture, the A100
 * one link for link with the DGX A100 fixture (whose NUMA ids are NPS4's). */
static void test_placement_topo_profile_matches_real_machines(void **state)
{
	static const struct {
		const char *product;
		enum fx fx;
		bool same_numa;
	} pairs[] = {
		{ "Tesla-V100-SXM2-32GB", FX_DGX1_V100, true },
		{ "NVIDIA-H100-80GB-HBM3", FX_DGX_H100, true },
		{ "NVIDIA-A100-SXM4-40GB", FX_DGX_A100, false },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		const struct placement_topo *real = fixture_topo(pairs[i].fx);

		assert_int_equal(placement_topo_profile(pairs[i].product, 8, &topo_got), 0);
		assert_int_equal(topo_got.n, real->n);
		assert_memory_equal(topo_got.link, real->link, sizeof(real->link));
		if (pairs[i].same_numa)
			assert_memory_equal(topo_got.numa, real->numa, sizeof(real->numa));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_topo_unknown_is_all_equal),
		cmocka_unit_test(test_placement_topo_profile_table),
		cmocka_unit_test(test_placement_topo_profile_matches_real_machines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
