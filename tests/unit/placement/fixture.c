/* The placement unit tests' shared fixtures (see fixture.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#include "fixture.h"

const char *const gpu_names[] = { "nvidia.com/gpu", "amd.com/gpu", NULL };

struct cache_node make_node(int resource, uint32_t capacity, uint32_t allocatable, bool ready,
			    bool cordoned)
{
	struct cache_node n = {
		.name = "n",
		.gpu_resource = resource,
		.gpu_capacity = capacity,
		.gpu_allocatable = allocatable,
		.ready = ready,
		.unschedulable = cordoned,
	};

	return n;
}

struct cache_demand gpus(int resource, uint32_t n)
{
	struct cache_demand d = { .gpu_resource = n ? resource : -1, .gpus = n };

	return d;
}

uint64_t low_bits(unsigned n)
{
	return n >= 64 ? ~0ULL : (1ULL << n) - 1;
}

/* ---- The captures ---------------------------------------------------------------- */

const struct fixture fixtures[FX_COUNT] = {
	/* DGX-1 class 8x V100-SXM2: the hybrid cube mesh (NV1/NV2 within each half,
	 * one link to the twin in the other half, SYS otherwise). Source: nvidia-smi topo
	 * -m of a NERSC Cori GPU node, kept in a public job script on GitHub: space
	 * separated as a terminal shows it, the older mlx4_0/mlx5_<n> NIC names, CPU and
	 * NUMA Affinity but no GPU NUMA ID, NIC rows and no legend. */
	[FX_DGX1_V100] = { "DGX-1 V100", "dgx1-v100.txt", 8, { 0, 0, 0, 0, 1, 1, 1, 1 },
			   { { 0, 1, L_NV(1) }, { 0, 3, L_NV(2) }, { 0, 4, L_NV(2) },
			     { 0, 5, L_SYS }, { 2, 6, L_NV(1) }, { 3, 7, L_NV(1) },
			     { 5, 6, L_NV(2) }, { 7, 6, L_NV(2) } } },
	/* DGX A100 (8x A100-SXM4-40GB, NVSwitch): NV12 everywhere, twelve NICs, each
	 * GPU pair on its own NUMA node (the AMD sockets in NPS4 mode: 3, 1 | 7, 5).
	 * Source: NVIDIA/nccl issue 1505, whose GPU0-GPU4 rows are as printed there;
	 * GPU5-GPU7 follow the same board's pattern. Space separated, all three
	 * affinity columns, legend and NIC legend; the twelve NIC rows are left out. */
	[FX_DGX_A100] = { "DGX A100", "dgx-a100.txt", 8, { 3, 3, 1, 1, 7, 7, 5, 5 },
			  { { 0, 1, L_NV(12) }, { 0, 7, L_NV(12) }, { 7, 0, L_NV(12) },
			    { 3, 4, L_NV(12) } } },
	/* DGX H100 (8x H100 80GB HBM3, NVSwitch): NV18 everywhere, GPUs 0-3 on NUMA 0
	 * and 4-7 on NUMA 1. Source: vllm-project/vllm issue 13855 (the GPU rows as
	 * printed there, where a paste had fused some NIC cells; the NIC rows follow).
	 * Written with the tabs nvidia-smi really prints: " X " on the diagonal, and
	 * "\t\t" before GPU NUMA ID. */
	[FX_DGX_H100] = { "DGX H100 (tabs)", "dgx-h100.txt", 8, { 0, 0, 0, 0, 1, 1, 1, 1 },
			  { { 0, 1, L_NV(18) }, { 0, 7, L_NV(18) }, { 6, 5, L_NV(18) } } },
	/* A two-socket 8-GPU PCIe server with PCIe switches (the common 4U shape): on
	 * socket 0 two switches under one root port (PIX within a switch, PXB across);
	 * on socket 1 two switches on separate root ports (PIX, then NODE); SYS across
	 * the sockets. Composed from the levels such machines print (e.g. the PIX/PHB/
	 * SYS server in kubernetes/kubernetes issue 53497), with affinity lists in the
	 * 0-23,48-71 form and one NIC. */
	[FX_PCIE_2S] = { "2-socket PCIe server", "pcie-2s.txt", 8, { 0, 0, 0, 0, 1, 1, 1, 1 },
			 { { 0, 1, L_PIX }, { 0, 2, L_PXB }, { 1, 3, L_PXB }, { 3, 4, L_SYS },
			   { 4, 5, L_PIX }, { 4, 6, L_NODE }, { 6, 7, L_PIX } } },
	/* Four consumer cards (RTX 3090 class) on one socket, NVLink-bridged in pairs
	 * whose indices are not adjacent: 0-2 and 1-3 (NV4: a 3090 bridge bonds four
	 * links); PHB or NODE otherwise. Composed; the tab layout with "0-31\t0\t\tN/A"
	 * is the one in the club-3090 rig reports on GitHub (e.g. issue 1229). */
	[FX_BRIDGED] = { "bridged consumer pairs", "bridged-4.txt", 4, { 0, 0, 0, 0 },
			 { { 0, 2, L_NV(4) }, { 1, 3, L_NV(4) }, { 0, 1, L_PHB },
			   { 2, 3, L_PHB }, { 0, 3, L_NODE }, { 1, 2, L_NODE } } },
	/* A workstation with two GPUs on socket 0 (NODE) and a lone GPU on socket 1
	 * (SYS to both). Composed after the two-socket workstation in club-3090 issue
	 * 178, written with spaces. */
	[FX_LONE] = { "lone GPU on socket 1", "lone-gpu.txt", 3, { 0, 0, 1 },
		      { { 0, 1, L_NODE }, { 0, 2, L_SYS }, { 1, 2, L_SYS } } },
	/* Four V100s with NV1/NV2 links, an older driver: one NIC column named mlx5_0,
	 * CPU Affinity only, and a NIC row that ends in a tab. Source: an nvidia-smi
	 * topo -m capture in a public repository, found by code search. */
	[FX_CPU_AFFINITY_ONLY] = { "CPU Affinity only", "cpu-affinity-only.txt", 4,
				   { -1, -1, -1, -1 },
				   { { 0, 1, L_NV(1) }, { 0, 3, L_NV(2) }, { 1, 2, L_NV(2) },
				     { 2, 3, L_NV(2) } } },
	/* A 2017 driver on an 8-GPU PCIe server: PIX within a switch, PHB across
	 * switches, SYS across sockets, one mlx4_0 column, CPU Affinity only, and the
	 * long runs of trailing spaces of the original. Source: kubernetes/kubernetes
	 * issue 53497 (GPU0-GPU4 rows as printed; GPU5-GPU7 and the NIC row follow). */
	[FX_OLD_DRIVER] = { "2017 driver, trailing spaces", "old-driver.txt", 8,
			    { -1, -1, -1, -1, -1, -1, -1, -1 },
			    { { 0, 1, L_PIX }, { 0, 2, L_PHB }, { 0, 4, L_SYS },
			      { 6, 7, L_PIX }, { 5, 7, L_PHB } } },
	/* Two GPUs on two sockets where the driver could not tell GPU0's NUMA node:
	 * "N/A" in the NUMA Affinity cell. Source: club-3090 issue 178 on GitHub, as
	 * printed (tabs, and the extra tab nvidia-smi writes before an N/A). */
	[FX_NUMA_NA] = { "NUMA Affinity N/A", "numa-na.txt", 2, { -1, 1 }, { { 0, 1, L_SYS } } },
	/* No affinity columns at all, as drivers print where they cannot see the host
	 * (some VMs): nothing but the matrix, and a trailing space after the last X. */
	[FX_NO_AFFINITY] = { "no affinity columns", "no-affinity.txt", 2, { -1, -1 },
			     { { 0, 1, L_NV(2) } } },
	/* An empty CPU Affinity cell in text aligned the way a terminal shows it: the
	 * NUMA node is read from the cell under the NUMA Affinity heading. */
	[FX_EMPTY_CPU_ALIGNED] = { "empty CPU cell, aligned", "empty-cpu-aligned.txt", 2, { 0, 1 },
				   { { 0, 1, L_PHB } } },
	/* The same empty cell as tabs, which do not line up under the headings: which
	 * cell is which cannot be told, so the NUMA node is unknown. */
	[FX_EMPTY_CPU_TABS] = { "empty CPU cell, tabs", "empty-cpu-tabs.txt", 2, { -1, -1 },
				{ { 0, 1, L_PHB } } },
	/* Pasted from a Windows terminal: a shell prompt above, CRLF line ends, trailing
	 * blanks, and SOC, which drivers before 384 printed for SYS. */
	[FX_CRLF_PROMPT_SOC] = { "CRLF, prompt, SOC", "crlf-prompt-soc.txt", 3, { -1, -1, -1 },
				 { { 0, 1, L_PIX }, { 0, 2, L_SYS }, { 1, 2, L_SYS } } },
};

struct placement_topo topo_got, topo_want;

static struct placement_topo fixture_topos[FX_COUNT];

const char *fixture_text(enum fx f)
{
	static char *texts[FX_COUNT];
	char path[512];
	size_t len;
	int ret;

	if (!texts[f]) {
		snprintf(path, sizeof(path), "%s/tests/data/topo/%s", TROUPE_SOURCE_ROOT,
			 fixtures[f].file);
		ret = util_read_file(path, 1 << 20, &texts[f], &len);
		if (ret < 0)
			fail_msg("fixture \"%s\": cannot read %s: %s", fixtures[f].name, path,
				 strerror(-ret));
		if (strlen(texts[f]) != len)
			fail_msg("fixture \"%s\": %s holds a NUL byte", fixtures[f].name, path);
	}
	return texts[f];
}

struct placement_topo *fixture_topo(enum fx f)
{
	static bool parsed[FX_COUNT];
	const char *text;
	char err[256];

	if (!parsed[f]) {
		text = fixture_text(f);
		if (placement_topo_parse(text, strlen(text), &fixture_topos[f], err, sizeof(err)) != 0)
			fail_msg("fixture \"%s\": %s", fixtures[f].name, err);
		parsed[f] = true;
	}
	return &fixture_topos[f];
}

void assert_well_formed(const struct placement_topo *t)
{
	for (unsigned i = 0; i < PLACEMENT_TOPO_MAX; i++) {
		for (unsigned j = 0; j < PLACEMENT_TOPO_MAX; j++) {
			if (i >= t->n || j >= t->n || i == j)
				assert_int_equal(t->link[i][j], L_X);
			else
				assert_int_not_equal(t->link[i][j], L_X);
			assert_int_equal(t->link[i][j], t->link[j][i]);
		}
		if (i >= t->n)
			assert_int_equal(t->numa[i], -1);
	}
	assert_int_equal(t->refs, 0);
	for (unsigned i = 0; i < PLACEMENT_MEMO_BUCKETS; i++)
		assert_int_equal(t->memo[i], 0);
}

void random_topo(struct placement_topo *t, unsigned n, unsigned *seed)
{
	static const uint8_t levels[] = {
		PLACEMENT_LINK_SYS, PLACEMENT_LINK_NODE, PLACEMENT_LINK_PHB, PLACEMENT_LINK_PXB,
		PLACEMENT_LINK_PIX, PLACEMENT_LINK_NV0 + 1, PLACEMENT_LINK_NV0 + 2,
		PLACEMENT_LINK_NV0 + 4,
	};

	memset(t, 0, sizeof(*t));
	t->n = (uint8_t)n;
	t->known = true;
	for (unsigned i = 0; i < n; i++)
		t->numa[i] = (int8_t)(rand_r(seed) % 2);
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = i + 1; j < n; j++)
			t->link[i][j] = t->link[j][i] = levels[rand_r(seed) % sizeof(levels)];
}
