/* simulate_choosers: the device choosers `troupe simulate` can put in place of
 * troupe's own, so that a comparison can say what troupe's chooser is worth.
 * A policy named "binpack+lowest" ranks nodes with the "binpack" score and
 * then takes devices with the "lowest" chooser; a policy with no "+CHOOSER"
 * uses placement_node_choose, the daemon's bind. The baselines are the obvious
 * ways to do without troupe's chooser (bench/sim_quality.py runs them),
 * and the one NVIDIA's device plugin ships:
 *   lowest      the lowest free indices (what a device plugin's default does);
 *   random      a uniformly random free subset;
 *   sum-pairs   the subset with the largest sum of placement_link_weight over
 *               its pairs: best effort, no worst-pair and no fragmentation
 *               term (ties to the lowest indices);
 *   besteffort  NVIDIA go-gpuallocator's best-effort policy, the one
 *               k8s-device-plugin's GetPreferredAllocation runs: a port of its
 *               partition search, checked against the Go code itself by
 *               tests/peers/test_besteffort_peer.py (see choose_besteffort);
 *   distributed what k8s-device-plugin runs for replicas and MIG devices
 *               instead (internal/rm/allocate.go's distributedAlloc): each
 *               device from the GPU with the fewest devices in use, ties to
 *               the lowest; the lowest indices on a node of whole GPUs.
 * They ignore the pod's troupe.io/topology when choosing (the filter still
 * applies it to nodes), as a scheduler without troupe's chooser would.
 * Each returns a set of exactly <k> devices of <free_mask>, or 0.
 */
#include <errno.h>
#include <string.h>

#include "extender/simulate.h"

static uint64_t choose_lowest(const struct cache_node_view *v, uint64_t free_mask, unsigned k,
			      uint64_t *rng)
{
	uint64_t set = 0;

	(void)v;
	(void)rng;
	for (unsigned i = 0; i < k && free_mask; i++) {
		set |= free_mask & -free_mask;
		free_mask &= free_mask - 1;
	}
	return set;
}

static uint64_t choose_random(const struct cache_node_view *v, uint64_t free_mask, unsigned k,
			      uint64_t *rng)
{
	unsigned idx[CACHE_MAX_GPUS], n = 0;
	uint64_t set = 0;

	(void)v;
	for (; free_mask; free_mask &= free_mask - 1)
		idx[n++] = (unsigned)__builtin_ctzll(free_mask);
	/* A partial Fisher-Yates shuffle: the first k are a uniform k-subset. */
	for (unsigned i = 0; i < k && i < n; i++) {
		unsigned j = i + (unsigned)(((sim_rng_next(rng) >> 11) * 0x1.0p-53) * (n - i));
		unsigned tmp = idx[i];

		idx[i] = idx[j];
		idx[j] = tmp;
		set |= 1ULL << idx[i];
	}
	return set;
}

static uint64_t choose_sum_pairs(const struct cache_node_view *v, uint64_t free_mask,
				 unsigned k, uint64_t *rng)
{
	const struct placement_topo *t = placement_node_topo(v->node);
	uint64_t best = 0;
	uint32_t best_w = 0;

	/* Every subset is too many past 16 devices, and with no links known
	 * there is nothing to sum: the lowest indices then. */
	if (!t || !t->known || __builtin_popcountll(free_mask) > 16)
		return choose_lowest(v, free_mask, k, rng);
	for (uint64_t s = free_mask;; s = (s - 1) & free_mask) {
		if ((unsigned)__builtin_popcountll(s) == k) {
			uint32_t w = 0;
			uint64_t diff = s ^ best;

			for (uint64_t a = s; a; a &= a - 1)
				for (uint64_t b = a & (a - 1); b; b &= b - 1)
					w += placement_link_weight(
						t->link[__builtin_ctzll(a)][__builtin_ctzll(b)]);
			/* Ties: the set holding the lowest index where they differ. */
			if (!best || w > best_w || (w == best_w && (s & diff & -diff)))
				best = s, best_w = w;
		}
		if (!s)
			break;
	}
	return best;
}

/* ---- besteffort: go-gpuallocator's best-effort policy ---------------------------
 *
 * A port of github.com/NVIDIA/go-gpuallocator v0.6.0, gpuallocator/
 * besteffort_policy.go: bestEffortPolicy.Allocate with required = none, its
 * iterateGPUPartitions, iterateGPUSets, gpuSetCopyAndAddPadding,
 * calculateGPUPartitionScore, calculateGPUSetScore and calculateGPUPairScore.
 * The policy splits every available device into sets of k (padding the list
 * with nil devices to a multiple of k), scores a partition as the sum of its
 * sets' scores and a set as the sum of its pairs' scores, keeps the first
 * partition with the highest score in its enumeration order, and returns the
 * first highest-scoring set of that partition. The enumeration order is the
 * Go code's, so ties break as there: a partition's first set holds the first
 * remaining device plus each (k-1)-combination of the rest in lexicographic
 * order, then recursion on what is left; a set with padding must hold all of
 * it; the padding comes after the real devices, which come in index order
 * (the Allocator passes DeviceSet.SortedSlice). With k = 1 the Go code
 * returns the first device; with fewer than k available, nothing.
 *
 * Pair scores are calculateGPUPairScore's, over the link types of
 * internal/links/device.go (P2PLinkType) that gpuallocator.NewDevices puts on
 * each pair: one PCIe link from GetP2PLink (nvmlDeviceGetTopologyCommonAncestor)
 * and, when NVLinked, one more from GetNVLink. troupe's levels, as parsed
 * from `nvidia-smi topo -m`, map to them as NVML's levels do:
 *   SYS  TOPOLOGY_SYSTEM     P2PLinkCrossCPU      10
 *   NODE TOPOLOGY_NODE       P2PLinkSameCPU       20
 *   PHB  TOPOLOGY_HOSTBRIDGE P2PLinkHostBridge    30
 *   PXB  TOPOLOGY_MULTIPLE   P2PLinkMultiSwitch   40
 *   PIX  TOPOLOGY_SINGLE     P2PLinkSingleSwitch  50
 *   (P2PLinkSameBoard, 60, is TOPOLOGY_INTERNAL: no troupe level is one)
 *   NV<n> <n>NVLINKLink(s), 100 x n, n capped at 18 as GetNVLink's count is,
 *        plus the PCIe link topo -m hides under an NV cell: CrossCPU when
 *        the devices' NUMA nodes differ, SameCPU when they are the same,
 *        none when either is unknown (the weakest PCIe level the NUMA
 *        affinity allows: an assumption, the same in the peer check's Go).
 * Two things of the Go code this port does not model. On NVSwitch boards
 * GetNVLink finds no peer (the remote PCI device is the switch: its "TODO
 * Handle NVSwitch semantics"), so the real plugin sees PCIe links only; we
 * score the NV cells the matrix shows. And its partition accumulator slices
 * alias past six sets (append into a shared backing array overwrites the
 * later sets of a stored best partition: with 13 or 14 free and k = 2 the
 * real policy's answer differed from this port's in 3 of 60 random boards,
 * and a copy of the Go code that copies the slices agreed on all 60); at
 * most BE_MAX_FREE devices with k >= 2 make at most six sets, so it never
 * arises here.
 *
 * The Go policy can return padding: when the padded set of the best
 * partition scores highest (say 5 free, k = 3: a pair joined by NVLink beats
 * a poor triple), it returns nil devices in the set, which
 * k8s-device-plugin's GetPreferredAllocation then dereferences. The
 * simulator needs k devices, so such an answer keeps its real devices and is
 * completed with the lowest other free ones, a deterministic stand-in for the
 * kubelet's filling a short preferred allocation from the available devices.
 *
 * The search is exponential in the free count: at BE_MAX_FREE free devices
 * it walks 10,395 partitions for k = 2 and at most 15,400 (k = 3), under a
 * millisecond; above it the chooser is "sum-pairs" instead.
 */
enum {
	BE_MAX_FREE = 12,               /* the partition search's bound */
	BE_MAX_SLOTS = 2 * BE_MAX_FREE, /* free devices plus up to k - 1 padding */
	BE_MAX_NVLINKS = 18,            /* EighteenNVLINKLinks, GetNVLink's top */
};

static int besteffort_pair_score(const struct placement_topo *t, unsigned a, unsigned b)
{
	static const int pcie[] = { 0, 10, 20, 30, 40, 50 };   /* NONE..PIX */
	uint8_t l = t->link[a][b];
	int n, s = 0;

	if (l <= PLACEMENT_LINK_PIX)
		return pcie[l];
	if (!placement_link_is_nvlink(l))
		return 0;
	n = l - PLACEMENT_LINK_NV0;
	if (n > BE_MAX_NVLINKS)
		n = BE_MAX_NVLINKS;
	if (t->numa[a] >= 0 && t->numa[b] >= 0)
		s = t->numa[a] == t->numa[b] ? 20 : 10;
	return s + 100 * n;
}

/* The search's state. Devices are slots 0..n_real-1 (the free devices in
 * index order, dev[] naming them) and padding slots n_real..n_slots-1. */
struct be_search {
	unsigned k, n_real, n_slots, padding;
	unsigned dev[BE_MAX_FREE];
	int pair[BE_MAX_SLOTS][BE_MAX_SLOTS];   /* 0 where either is padding */
	unsigned cur[BE_MAX_SLOTS][BE_MAX_SLOTS];       /* the partition being built */
	unsigned best[BE_MAX_SLOTS][BE_MAX_SLOTS];
	unsigned n_best;
	long best_score;
};

static long besteffort_set_score(const struct be_search *s, const unsigned *set)
{
	long score = 0;

	for (unsigned i = 0; i < s->k; i++)
		for (unsigned j = i + 1; j < s->k; j++)
			score += s->pair[set[i]][set[j]];
	return score;
}

static void besteffort_partition(struct be_search *s, unsigned n_sets)
{
	long score = 0;

	for (unsigned i = 0; i < n_sets; i++)
		score += besteffort_set_score(s, s->cur[i]);
	/* Go: score > bestScore || bestPartition == nil, so the first best stays. */
	if (s->n_best && score <= s->best_score)
		return;
	memcpy(s->best, s->cur, sizeof(s->cur[0]) * n_sets);
	s->n_best = n_sets;
	s->best_score = score;
}

/* iterateGPUPartitions' inner iterate: <devs> (n of them) left to split, the
 * sets before them in cur[0..depth-1]. */
static void besteffort_iterate(struct be_search *s, const unsigned *devs, unsigned n,
			       unsigned depth)
{
	unsigned c[BE_MAX_SLOTS], rem[BE_MAX_SLOTS];
	unsigned m = s->k - 1;

	if (n == s->k) {
		memcpy(s->cur[depth], devs, sizeof(devs[0]) * n);
		besteffort_partition(s, depth + 1);
		return;
	}
	/* devs[0] with each (k-1)-combination of devs[1..n-1], lexicographic as
	 * iterateGPUSets' unrolled loops go (c[] holds indices into devs). */
	for (unsigned i = 0; i < m; i++)
		c[i] = i + 1;
	for (;;) {
		unsigned *set = s->cur[depth], pad = 0, r = 0, j = 0;
		int i;

		set[0] = devs[0];
		for (unsigned x = 0; x < m; x++)
			set[x + 1] = devs[c[x]];
		for (unsigned x = 0; x < s->k; x++)
			pad += set[x] >= s->n_real;
		/* All the padding or none of it (Go: p != 0 && p != padding). */
		if (pad == 0 || pad == s->padding) {
			for (unsigned x = 1; x < n; x++) {
				if (j < m && c[j] == x)
					j++;
				else
					rem[r++] = devs[x];
			}
			besteffort_iterate(s, rem, r, depth + 1);
		}
		/* The next combination: bump the rightmost index that can move. */
		i = (int)m - 1;
		while (i >= 0 && c[i] == n - m + (unsigned)i)
			i--;
		if (i < 0)
			break;
		c[i]++;
		for (unsigned x = (unsigned)i + 1; x < m; x++)
			c[x] = c[x - 1] + 1;
	}
}

static uint64_t choose_besteffort(const struct cache_node_view *v, uint64_t free_mask,
				  unsigned k, uint64_t *rng)
{
	const struct placement_topo *t = placement_node_topo(v->node);
	unsigned n = (unsigned)__builtin_popcountll(free_mask), slots[BE_MAX_SLOTS];
	struct be_search search, *s = &search;
	const unsigned *set;
	uint64_t out = 0;
	long best;

	if (k == 0 || n < k)
		return 0;
	/* With no links every pair scores 0 and the first partition's first set
	 * is the lowest k; k = 1 is the Go code's first device. */
	if (!t || !t->known || k == 1)
		return choose_lowest(v, free_mask, k, rng);
	if (n > BE_MAX_FREE)
		return choose_sum_pairs(v, free_mask, k, rng);
	memset(s, 0, sizeof(*s));
	s->k = k;
	s->n_real = n;
	s->n_slots = (n + k - 1) / k * k;
	s->padding = s->n_slots - n;
	for (unsigned i = 0; free_mask; free_mask &= free_mask - 1)
		s->dev[i++] = (unsigned)__builtin_ctzll(free_mask);
	for (unsigned a = 0; a < n; a++)
		for (unsigned b = 0; b < n; b++)
			if (a != b)
				s->pair[a][b] = besteffort_pair_score(t, s->dev[a], s->dev[b]);
	for (unsigned i = 0; i < s->n_slots; i++)
		slots[i] = i;
	besteffort_iterate(s, slots, s->n_slots, 0);
	/* The first highest-scoring set of the best partition. */
	set = s->best[0];
	best = besteffort_set_score(s, set);
	for (unsigned i = 1; i < s->n_best; i++) {
		long score = besteffort_set_score(s, s->best[i]);

		if (score > best)
			set = s->best[i], best = score;
	}
	for (unsigned i = 0; i < k; i++)
		if (set[i] < n)
			out |= 1ULL << s->dev[set[i]];
	/* A padded answer: completed with the lowest other free devices. */
	for (unsigned i = 0; i < n && (unsigned)__builtin_popcountll(out) < k; i++)
		out |= 1ULL << s->dev[i];
	return out;
}

static uint64_t choose_distributed(const struct cache_node_view *v, uint64_t free_mask,
				   unsigned k, uint64_t *rng)
{
	const struct cache_node *n = v->node;
	uint64_t set = 0, used = v->used;

	if (!cache_node_shared(n))
		return choose_lowest(v, free_mask, k, rng);
	for (unsigned i = 0; i < k; i++) {
		int best = -1;
		unsigned best_used = 0;

		for (unsigned g = 0; g < n->gpu_physical; g++) {
			uint64_t slots = cache_node_gpu_slots(n, g);
			unsigned u = (unsigned)__builtin_popcountll(used & slots);

			if (!(free_mask & ~set & slots))
				continue;
			if (best < 0 || u < best_used) {
				best = (int)g;
				best_used = u;
			}
		}
		if (best < 0)
			return 0;
		{
			uint64_t pick = free_mask & ~set & cache_node_gpu_slots(n, (unsigned)best);

			pick &= -pick;
			set |= pick;
			used |= pick;
		}
	}
	return set;
}

static const struct {
	const char *name;
	sim_choose_fn fn;
} choosers[] = {
	{ "distributed", choose_distributed },
	{ "lowest", choose_lowest },
	{ "random", choose_random },
	{ "sum-pairs", choose_sum_pairs },
	{ "besteffort", choose_besteffort },
};

sim_choose_fn sim_chooser_find(const char *name)
{
	for (size_t i = 0; i < sizeof(choosers) / sizeof(choosers[0]); i++)
		if (strcmp(choosers[i].name, name) == 0)
			return choosers[i].fn;
	return NULL;
}
