/* NVLink islands: the size of the largest set of devices, among a mask, that
 * are all pairwise NVLinked. The topology score's fragmentation term compares
 * a node's largest free island before and after a pod lands, so that a pod
 * fits into a small island and leaves the big ones for big jobs.
 *
 * Found exactly, as the largest clique of the NVLink graph (Bron-Kerbosch with
 * pivoting: microseconds for real boards). Boards of up to 8 devices keep
 * every mask's answer in the class (topology.h: island[]).
 *
 * Thread: any; the per-class answers are single bytes read and written with
 * relaxed atomics (a lost race only recomputes).
 */
#include "placement/topology.h"

#include <stdint.h>

/* Bron-Kerbosch with pivoting: the size of the largest clique that extends a
 * clique of <size> devices with some of <cand>, given the devices <excl> already
 * tried. <best> prunes branches that cannot beat it. */
static unsigned largest_clique(const uint64_t *adj, unsigned size, uint64_t cand, uint64_t excl,
			       unsigned best)
{
	uint64_t pivot_nbrs = 0, rest;
	unsigned most = 0;

	if (!cand && !excl)
		return size > best ? size : best;
	if (size + (unsigned)__builtin_popcountll(cand) <= best)
		return best;
	/* Pivot on the vertex with the most neighbours among the candidates. */
	for (uint64_t m = cand | excl; m; m &= m - 1) {
		unsigned u = (unsigned)__builtin_ctzll(m);
		unsigned d = (unsigned)__builtin_popcountll(cand & adj[u]);

		if (d >= most) {
			most = d;
			pivot_nbrs = adj[u];
		}
	}
	for (rest = cand & ~pivot_nbrs; rest; rest &= rest - 1) {
		uint64_t v = rest & -rest;
		unsigned i = (unsigned)__builtin_ctzll(v);

		best = largest_clique(adj, size + 1, cand & adj[i], excl & adj[i], best);
		cand &= ~v;
		excl |= v;
	}
	return best;
}

unsigned placement_largest_island(const struct placement_topo *t, uint64_t mask)
{
	uint64_t adj[PLACEMENT_TOPO_MAX] = { 0 };
	/* Small boards: every mask's answer is kept (the memo is the class's
	 * own cache, not part of its value, hence the cast). */
	uint8_t *memo = t->n <= 8 && mask < 256 ? &((struct placement_topo *)t)->island[mask] : NULL;
	unsigned v;

	if (!mask)
		return 0;
	if (memo && (v = __atomic_load_n(memo, __ATOMIC_RELAXED)) != 0)
		return v - 1;
	for (uint64_t a = mask; a; a &= a - 1) {
		unsigned i = (unsigned)__builtin_ctzll(a);

		for (uint64_t b = mask; b; b &= b - 1) {
			unsigned j = (unsigned)__builtin_ctzll(b);

			if (i != j && placement_link_is_nvlink(t->link[i][j]))
				adj[i] |= 1ULL << j;
		}
	}
	v = largest_clique(adj, 0, mask, 0, 1);
	if (memo)
		__atomic_store_n(memo, (uint8_t)(v + 1), __ATOMIC_RELAXED);
	return v;
}
