/* What the placement unit tests share: nodes built as plain structs, the way
 * the cache hands them to placement, so that each case states exactly the node
 * it judges; the `nvidia-smi topo -m` captures in tests/data/topo/ with what
 * each must parse to; and random topologies for the property tests.
 *
 * fixture.c is linked into every test binary of tests/unit/placement/.
 */
#ifndef TROUPE_TESTS_UNIT_PLACEMENT_FIXTURE_H
#define TROUPE_TESTS_UNIT_PLACEMENT_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "placement/placement.h"

/* ---- Nodes and demands ------------------------------------------------------ */

/* The managed resource names, as cache_opts.gpu_resources holds them. */
extern const char *const gpu_names[];

enum { NV = 0, AMD = 1, NONE = -1 };

struct cache_node make_node(int resource, uint32_t capacity, uint32_t allocatable, bool ready,
			    bool cordoned);
struct cache_demand gpus(int resource, uint32_t n);
/* The mask of devices 0..n-1. */
uint64_t low_bits(unsigned n);

/* ---- Topologies --------------------------------------------------------------- */

/* Short names for the levels in the tables. */
#define L_X PLACEMENT_LINK_NONE
#define L_SYS PLACEMENT_LINK_SYS
#define L_NODE PLACEMENT_LINK_NODE
#define L_PHB PLACEMENT_LINK_PHB
#define L_PXB PLACEMENT_LINK_PXB
#define L_PIX PLACEMENT_LINK_PIX
#define L_NV(n) (PLACEMENT_LINK_NV0 + (n))

/* Every capture in tests/data/topo/, with what it must parse to (fixture.c
 * says where each comes from). */
enum fx {
	FX_DGX1_V100,
	FX_DGX_A100,
	FX_DGX_H100,
	FX_PCIE_2S,
	FX_BRIDGED,
	FX_LONE,
	FX_CPU_AFFINITY_ONLY,
	FX_OLD_DRIVER,
	FX_NUMA_NA,
	FX_NO_AFFINITY,
	FX_EMPTY_CPU_ALIGNED,
	FX_EMPTY_CPU_TABS,
	FX_CRLF_PROMPT_SOC,
	FX_COUNT
};

struct link_check {
	uint8_t i, j, level;
};

struct fixture {
	const char *name;
	const char *file;               /* in tests/data/topo/ */
	unsigned n;
	int8_t numa[8];
	struct link_check links[8];     /* ends at the first { 0, 0, 0 } */
};

extern const struct fixture fixtures[FX_COUNT];

/* The capture's text, read once (the test fails when it cannot be read). */
const char *fixture_text(enum fx f);
/* The capture parsed once; placement_choose keeps its memo in here. */
struct placement_topo *fixture_topo(enum fx f);

/* Big enough for a 64-device topology with its memo: never on the stack. */
extern struct placement_topo topo_got, topo_want;

/* The rules every accepted topology keeps, whatever its source. */
void assert_well_formed(const struct placement_topo *t);

/* A random topology of n devices: symmetric levels from SYS up to NV4, two
 * NUMA nodes. Deterministic for a seed. */
void random_topo(struct placement_topo *t, unsigned n, unsigned *seed);

#endif
