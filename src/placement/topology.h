/* GPU interconnect topology: the model, where it comes from, and choosing the
 * best-connected set of free devices on a node.
 *
 * Link levels are the ones `nvidia-smi topo -m` prints, ordered worst to best:
 *   SYS < NODE < PHB < PXB < PIX < NV1 < NV2 < ... (NV<n>: n bonded NVLinks)
 * stored as small integers so "better" is ">" (see PLACEMENT_LINK_*).
 *
 * A topology is shared by every node of the same class (same matrix): the
 * writer interns them, nodes point at them, and the best set for a given
 * (free devices, count, policy) is memoised per class, so after warm-up filter
 * and prioritize pay a table lookup per node.
 *
 * Thread: parsing and interning on the cache writer thread; choosing and the
 * memo from any thread (the memo is a table of single atomic words).
 */
#ifndef TROUPE_PLACEMENT_TOPOLOGY_H
#define TROUPE_PLACEMENT_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	PLACEMENT_LINK_NONE = 0,        /* the diagonal, or no information */
	PLACEMENT_LINK_SYS = 1,         /* across the SMP interconnect between NUMA nodes */
	PLACEMENT_LINK_NODE = 2,        /* within a NUMA node, across PCIe host bridges */
	PLACEMENT_LINK_PHB = 3,         /* through a PCIe host bridge */
	PLACEMENT_LINK_PXB = 4,         /* through several PCIe bridges */
	PLACEMENT_LINK_PIX = 5,         /* through at most one PCIe bridge */
	PLACEMENT_LINK_NV0 = 10,        /* NV<n> is PLACEMENT_LINK_NV0 + n, n >= 1 */
	PLACEMENT_LINK_MAX_NV = 48,
	PLACEMENT_TOPO_MAX = 64,        /* devices per node */
	PLACEMENT_MEMO_BUCKETS = 4096,  /* choice memo buckets per class (n <= 16 only) */
};

static inline bool placement_link_is_nvlink(uint8_t level)
{
	return level > PLACEMENT_LINK_NV0;
}

/* Room for any level's name placement_link_name writes: "NV38", "NODE",
 * "?255" and the NUL fit with some to spare. */
enum { PLACEMENT_LINK_NAME_BUF = 8 };

/* Parse a level as nvidia-smi prints it ("NV12", "PIX", "SYS", ... also the
 * older "SOC" for SYS). "X" (self) parses as PLACEMENT_LINK_NONE. Returns 0 or
 * -EINVAL. */
int placement_link_parse(const char *s, size_t len, uint8_t *level);
/* Write a level's name ("NV12", "PIX", ...) into buf (at least
 * PLACEMENT_LINK_NAME_BUF bytes). */
const char *placement_link_name(uint8_t level, char *buf, size_t len);

struct placement_topo {
	uint8_t n;                      /* devices 0..n-1 */
	bool known;                     /* false: no information, every pair equal */
	char source[48];                /* "annotation", "profile dgx-a100", "unknown" */
	int8_t numa[PLACEMENT_TOPO_MAX];        /* NUMA node of each device, -1 unknown */
	uint8_t link[PLACEMENT_TOPO_MAX][PLACEMENT_TOPO_MAX];  /* symmetric, diagonal 0 */
	uint32_t refs;                  /* nodes pointing here; writer thread only */
	uint64_t hash;                  /* of n, known, numa and link: interning */
	/* (free, count, policy) -> device set; single-word entries written and
	 * read with relaxed atomics (a lost race only recomputes). */
	uint64_t memo[PLACEMENT_MEMO_BUCKETS];
	/* free mask -> largest NVLink island + 1 (0: not known yet), for n <= 8;
	 * relaxed atomics, as memo. */
	uint8_t island[256];
	/* free mask -> score, for n <= 8 (placement_score_memoized): one word
	 * each, the score tagged with what else it depends on; relaxed atomics. */
	uint64_t score[256];
};

/* Parse the text `nvidia-smi topo -m` prints (the GPU rows and columns; NIC
 * rows, affinity columns and the legend are understood and skipped). Fills
 * n, known = true, numa (from "NUMA Affinity", else -1) and link. Malformed
 * text is -EINVAL with a message, and leaves <out> untouched. */
int placement_topo_parse(const char *text, size_t len, struct placement_topo *out, char *err,
			 size_t errlen);

/* A built-in profile for a GPU Feature Discovery product label
 * (nvidia.com/gpu.product) and count (nvidia.com/gpu.count). Returns 0 and
 * fills <out>, or -ENOENT when no profile matches. */
int placement_topo_profile(const char *product, unsigned count, struct placement_topo *out);

/* An unknown topology of n devices: every pair equal, nothing NVLinked. */
void placement_topo_unknown(unsigned n, struct placement_topo *out);

/* ---- Policies ---------------------------------------------------------- */

enum placement_policy_kind {
	PLACEMENT_POLICY_PREFERRED = 0, /* best set available (default) */
	PLACEMENT_POLICY_REQUIRED,      /* every pair NVLinked, or no set */
	PLACEMENT_POLICY_REQUIRED_LEVEL,        /* every pair at min_level or better */
	PLACEMENT_POLICY_NONE,          /* ignore topology: lowest free indices */
};

struct placement_policy {
	enum placement_policy_kind kind;
	uint8_t min_level;              /* for REQUIRED_LEVEL */
};

/* Parse the pod annotation troupe.io/topology: "preferred", "required",
 * "required:<LEVEL>" (e.g. required:PIX), "none"; NULL means preferred.
 * Returns 0 or -EINVAL with a message a user can act on. */
int placement_policy_parse(const char *s, struct placement_policy *out, char *err,
			   size_t errlen);

/* ---- Choosing devices ---------------------------------------------------- */

struct placement_choice {
	uint64_t set;                   /* the devices */
	uint8_t worst;                  /* worst link in the set (NONE for one device) */
	uint32_t bandwidth;             /* sum over pairs of the level's weight */
	uint8_t numa_nodes;             /* distinct NUMA nodes the set spans */
	uint32_t leftover;              /* connectivity left among the free devices after */
};

/* Choose <k> devices from <free_mask> on topology <t> under <policy>:
 * maximise the worst pair, then the summed pair bandwidth, then fewest NUMA
 * nodes, then the connectivity left for later pods (fragmentation), then the
 * lowest indices. Exact for up to 16 devices (memoised per class), a greedy
 * heuristic beyond. Returns 0, or -ENOSPC when no set satisfies the policy. */
int placement_choose(struct placement_topo *t, uint64_t free_mask, unsigned k,
		     const struct placement_policy *policy, struct placement_choice *out);

/* The same choice by brute force without the memo: tests compare the two. */
int placement_choose_exact(const struct placement_topo *t, uint64_t free_mask, unsigned k,
			   const struct placement_policy *policy, struct placement_choice *out);

/* Fill a choice's measures for a given set (worst, bandwidth, numa_nodes,
 * leftover against <free_mask>). */
void placement_measure(const struct placement_topo *t, uint64_t set, uint64_t free_mask,
		       struct placement_choice *out);

/* The size of the largest subset of <mask> whose devices are all pairwise
 * NVLinked (1 for a lone device, 0 for an empty mask). Exact (Bron-Kerbosch
 * with pivoting over the NVLink graph; microseconds for real boards). */
unsigned placement_largest_island(const struct placement_topo *t, uint64_t mask);

/* The bandwidth weight of a level, for scores: 0 for NONE, growing with level. */
uint32_t placement_link_weight(uint8_t level);

#endif
