/* Choosing the best-connected set of free GPUs on a node under the pod's
 * topology policy (parsed in policy_parse.c).
 *
 * The order between two candidate sets, most important first:
 *   1. the worst link between any two devices of the set (higher is better):
 *      an all-reduce runs at the speed of its slowest hop;
 *   2. the sum of the bandwidth weights of every pair in the set;
 *   3. the fewest NUMA nodes spanned (host memory and CPU affinity);
 *   4. the connectivity left among the devices that stay free (the summed
 *      weights of their pairs): taking the poorly connected devices first keeps
 *      whole NVLink islands for the jobs that need them;
 *   5. the lowest indices, so the answer is deterministic.
 *
 * Up to 16 devices the search is exact (every k-subset; C(16,8) = 12,870 sets at
 * most) and its answer is memoised per topology class, keyed by the free mask,
 * k and the policy. Beyond 16 devices a greedy heuristic grows the set from the
 * best pair, adding the device with the best worst-link to the set so far.
 *
 * On a node (placement_node_choose: what bind, the gang planner, filter's
 * required policies and the topology score ask), the set is chosen on the
 * node's topology class; a node whose topology is unknown gives the lowest
 * free indices, and promises no link to a policy that needs one.
 */
#include "placement/placement.h"

#include <errno.h>
#include <string.h>

enum { EXACT_MAX = 16 };

/* ---- Measuring a set -------------------------------------------------------- */

uint32_t placement_link_weight(uint8_t level)
{
	static const uint8_t pcie[] = { 0, 1, 2, 3, 4, 6 };    /* NONE..PIX */

	if (level <= PLACEMENT_LINK_PIX)
		return pcie[level];
	if (level <= PLACEMENT_LINK_NV0)
		return 6;
	/* Each bonded NVLink adds bandwidth; one link already beats PCIe. */
	return 10u + 5u * (uint32_t)(level - PLACEMENT_LINK_NV0);
}

static uint32_t pairs_weight(const struct placement_topo *t, uint64_t mask)
{
	uint32_t sum = 0;

	for (uint64_t a = mask; a; a &= a - 1) {
		unsigned i = (unsigned)__builtin_ctzll(a);

		for (uint64_t b = a & (a - 1); b; b &= b - 1)
			sum += placement_link_weight(t->link[i][__builtin_ctzll(b)]);
	}
	return sum;
}

void placement_measure(const struct placement_topo *t, uint64_t set, uint64_t free_mask,
		       struct placement_choice *out)
{
	uint8_t worst = 0xff;
	uint64_t numa_seen = 0;
	bool numa_unknown = false;

	memset(out, 0, sizeof(*out));
	out->set = set;
	for (uint64_t a = set; a; a &= a - 1) {
		unsigned i = (unsigned)__builtin_ctzll(a);

		if (t->numa[i] < 0)
			numa_unknown = true;
		else
			numa_seen |= 1ULL << (t->numa[i] & 63);
		for (uint64_t b = a & (a - 1); b; b &= b - 1) {
			uint8_t l = t->link[i][__builtin_ctzll(b)];

			out->bandwidth += placement_link_weight(l);
			if (l < worst)
				worst = l;
		}
	}
	out->worst = worst == 0xff ? PLACEMENT_LINK_NONE : worst;
	out->numa_nodes = (uint8_t)(__builtin_popcountll(numa_seen) + numa_unknown);
	out->leftover = pairs_weight(t, free_mask & ~set);
}

/* Does the set satisfy the policy? (Sets of one device always do.) */
static bool policy_ok(const struct placement_policy *p, const struct placement_choice *c)
{
	if (__builtin_popcountll(c->set) < 2)
		return true;
	switch (p->kind) {
	case PLACEMENT_POLICY_REQUIRED:
		return placement_link_is_nvlink(c->worst);
	case PLACEMENT_POLICY_REQUIRED_LEVEL:
		return c->worst >= p->min_level;
	default:
		return true;
	}
}

/* > 0 when a is the better choice, < 0 when b is; 0 only for the same set. */
static int compare(const struct placement_choice *a, const struct placement_choice *b)
{
	uint64_t diff;

	if (a->worst != b->worst)
		return a->worst > b->worst ? 1 : -1;
	if (a->bandwidth != b->bandwidth)
		return a->bandwidth > b->bandwidth ? 1 : -1;
	if (a->numa_nodes != b->numa_nodes)
		return a->numa_nodes < b->numa_nodes ? 1 : -1;
	if (a->leftover != b->leftover)
		return a->leftover > b->leftover ? 1 : -1;
	diff = a->set ^ b->set;
	if (!diff)
		return 0;
	/* The lowest index where they differ belongs to the better set. */
	return (a->set & diff & -diff) ? 1 : -1;
}

/* The lowest <k> indices of <mask>. */
static uint64_t lowest(uint64_t mask, unsigned k)
{
	uint64_t set = 0;

	for (unsigned i = 0; i < k && mask; i++) {
		set |= mask & -mask;
		mask &= mask - 1;
	}
	return set;
}

/* ---- Exact search ------------------------------------------------------------ */

int placement_choose_exact(const struct placement_topo *t, uint64_t free_mask, unsigned k,
			   const struct placement_policy *policy, struct placement_choice *out)
{
	unsigned idx[PLACEMENT_TOPO_MAX], n = 0, pos[PLACEMENT_TOPO_MAX];
	struct placement_choice best, cand;
	bool found = false;

	if (k == 0 || (unsigned)__builtin_popcountll(free_mask) < k)
		return -ENOSPC;
	if (policy->kind == PLACEMENT_POLICY_NONE) {
		placement_measure(t, lowest(free_mask, k), free_mask, out);
		return 0;
	}
	for (uint64_t m = free_mask; m; m &= m - 1)
		idx[n++] = (unsigned)__builtin_ctzll(m);
	/* Walk every k-subset of the free devices in lexicographic order. */
	for (unsigned i = 0; i < k; i++)
		pos[i] = i;
	for (;;) {
		uint64_t set = 0;
		int j;

		for (unsigned i = 0; i < k; i++)
			set |= 1ULL << idx[pos[i]];
		placement_measure(t, set, free_mask, &cand);
		if (policy_ok(policy, &cand) && (!found || compare(&cand, &best) > 0)) {
			best = cand;
			found = true;
		}
		for (j = (int)k - 1; j >= 0 && pos[j] == n - k + (unsigned)j; j--)
			;
		if (j < 0)
			break;
		pos[j]++;
		for (unsigned i = (unsigned)j + 1; i < k; i++)
			pos[i] = pos[i - 1] + 1;
	}
	if (!found)
		return -ENOSPC;
	*out = best;
	return 0;
}

/* ---- Greedy, beyond 16 devices ------------------------------------------------ */

static int choose_greedy(const struct placement_topo *t, uint64_t free_mask, unsigned k,
			 const struct placement_policy *policy, struct placement_choice *out)
{
	uint64_t set = 0;

	if ((unsigned)__builtin_popcountll(free_mask) < k)
		return -ENOSPC;
	if (policy->kind == PLACEMENT_POLICY_NONE || k == 1 || !t->known) {
		set = lowest(free_mask, k);
	} else {
		/* Seed with the best pair, then add the device whose worst link to
		 * the set is best (ties: more bandwidth to the set, lower index). */
		uint8_t best_l = 0;

		for (uint64_t a = free_mask; a; a &= a - 1)
			for (uint64_t b = a & (a - 1); b; b &= b - 1) {
				unsigned i = (unsigned)__builtin_ctzll(a), j = (unsigned)__builtin_ctzll(b);

				if (!set || t->link[i][j] > best_l) {
					best_l = t->link[i][j];
					set = (1ULL << i) | (1ULL << j);
				}
			}
		while ((unsigned)__builtin_popcountll(set) < k) {
			uint64_t pick = 0;
			uint8_t pick_worst = 0;
			uint32_t pick_bw = 0;

			for (uint64_t c = free_mask & ~set; c; c &= c - 1) {
				unsigned d = (unsigned)__builtin_ctzll(c);
				uint8_t w = 0xff;
				uint32_t bw = 0;

				for (uint64_t s = set; s; s &= s - 1) {
					uint8_t l = t->link[d][__builtin_ctzll(s)];

					w = l < w ? l : w;
					bw += placement_link_weight(l);
				}
				if (!pick || w > pick_worst || (w == pick_worst && bw > pick_bw)) {
					pick = 1ULL << d;
					pick_worst = w;
					pick_bw = bw;
				}
			}
			set |= pick;
		}
	}
	placement_measure(t, set, free_mask, out);
	return policy_ok(policy, out) ? 0 : -ENOSPC;
}

/* ---- Memoised entry point ---------------------------------------------------- */

static uint32_t memo_key(uint64_t free_mask, unsigned k, const struct placement_policy *p)
{
	return (uint32_t)(free_mask & 0xffff) | (uint32_t)(k & 31) << 16 |
	       (uint32_t)(p->kind & 3) << 21 | (uint32_t)(p->min_level & 63) << 23;
}

int placement_choose(struct placement_topo *t, uint64_t free_mask, unsigned k,
		     const struct placement_policy *policy, struct placement_choice *out)
{
	uint32_t key, bucket;
	uint64_t entry;
	int ret;

	free_mask &= t->n >= 64 ? ~0ULL : (1ULL << t->n) - 1;
	if (k == 0 || (unsigned)__builtin_popcountll(free_mask) < k)
		return -ENOSPC;
	if (t->n > EXACT_MAX)
		return choose_greedy(t, free_mask, k, policy, out);
	key = memo_key(free_mask, k, policy);
	bucket = (key * 2654435761u) >> 20 & (PLACEMENT_MEMO_BUCKETS - 1);
	/* Relaxed: an entry is one word, complete or absent; a race only means
	 * both threads compute the same answer. */
	entry = __atomic_load_n(&t->memo[bucket], __ATOMIC_RELAXED);
	if ((entry & 1) && (uint32_t)(entry >> 32) == key) {
		uint64_t set = (entry >> 8) & 0xffff;

		if (!set)
			return -ENOSPC;
		placement_measure(t, set, free_mask, out);
		return 0;
	}
	ret = placement_choose_exact(t, free_mask, k, policy, out);
	entry = (uint64_t)key << 32 | (ret == 0 ? (out->set & 0xffff) << 8 : 0) | 1;
	__atomic_store_n(&t->memo[bucket], entry, __ATOMIC_RELAXED);
	return ret;
}

/* ---- Shared GPUs: replica slots ------------------------------------------------ */

/* The GPU of node <n> with at least <atleast> of <avail>'s devices, ranked by
 * <rank>'s devices on it: the most (<most>) or the fewest; the lowest index on
 * ties. -1 when none has that many. */
static int slot_gpu(const struct cache_node *n, uint64_t avail, uint64_t rank, bool most,
		    unsigned atleast)
{
	int best = -1;
	unsigned bf = 0;

	for (unsigned g = 0; g < n->gpu_physical; g++) {
		uint64_t slots = cache_node_gpu_slots(n, g);
		unsigned a = (unsigned)__builtin_popcountll(avail & slots);
		unsigned f = (unsigned)__builtin_popcountll(rank & slots);

		if (a == 0 || a < atleast)
			continue;
		if (best < 0 || (most ? f > bf : f < bf)) {
			best = (int)g;
			bf = f;
		}
	}
	return best;
}

/* Choose <k> of <avail>'s slots on a shared node (<free_all>: every free
 * device, of any resource). Packed: the GPU that holds all <k> with the fewest
 * free devices (best fit), else the GPUs with the most first, so whole GPUs
 * stay free and as few as can be are touched. Distributed: each slot on the
 * GPU with the most free slots (the least used), as NVIDIA's device plugin
 * spreads replicas. Topology is a property of whole GPUs, so a policy that
 * requires links is never met here. */
static int choose_slots(const struct cache_node *n, uint64_t avail, uint64_t free_all, unsigned k,
			const struct placement_policy *policy, struct placement_choice *out)
{
	uint64_t set = 0;
	int g;

	if (k == 0 || (unsigned)__builtin_popcountll(avail) < k)
		return -ENOSPC;
	if (k >= 2 && (policy->kind == PLACEMENT_POLICY_REQUIRED ||
		       policy->kind == PLACEMENT_POLICY_REQUIRED_LEVEL))
		return -ENOSPC;
	if (n->gpu_packing == CACHE_PACKING_PACKED &&
	    (g = slot_gpu(n, avail, free_all, false, k)) >= 0) {
		set = lowest(avail & cache_node_gpu_slots(n, (unsigned)g), k);
	} else {
		bool packed = n->gpu_packing == CACHE_PACKING_PACKED;

		while ((unsigned)__builtin_popcountll(set) < k &&
		       (g = slot_gpu(n, avail & ~set, packed ? avail & ~set : free_all & ~set, true,
				     1)) >= 0) {
			unsigned take = packed ? k - (unsigned)__builtin_popcountll(set) : 1;

			set |= lowest(avail & ~set & cache_node_gpu_slots(n, (unsigned)g), take);
		}
		if ((unsigned)__builtin_popcountll(set) < k)
			return -ENOSPC;         /* free slots beyond the physical GPUs' */
	}
	memset(out, 0, sizeof(*out));
	out->set = set;
	out->numa_nodes = 1;
	return 0;
}

/* ---- On a node ------------------------------------------------------------------ */

int placement_node_choose(const struct cache_node_view *v, int resource, uint64_t free_mask,
			  unsigned k, const struct placement_policy *policy,
			  struct placement_choice *out)
{
	struct placement_topo *t = placement_node_topo(v->node);

	/* A MIG mixed node's devices are of several resources: only <resource>'s. */
	if (cache_node_shared(v->node))
		return choose_slots(v->node, free_mask & cache_node_res_devices(v->node, resource),
				    free_mask, k, policy, out);
	if (t)
		return placement_choose(t, free_mask, k, policy, out);
	/* Unknown topology: every pair equal, so the lowest free indices; a policy
	 * that needs known links cannot be met by two or more devices. */
	if ((unsigned)__builtin_popcountll(free_mask) < k || k == 0)
		return -ENOSPC;
	if (k >= 2 && (policy->kind == PLACEMENT_POLICY_REQUIRED ||
		       policy->kind == PLACEMENT_POLICY_REQUIRED_LEVEL))
		return -ENOSPC;
	memset(out, 0, sizeof(*out));
	out->set = lowest(free_mask, k);
	out->numa_nodes = 1;
	return 0;
}
