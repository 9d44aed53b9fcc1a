/* simulate_choosers.c: the "besteffort" chooser (the port of go-gpuallocator's
 * best-effort policy) on boards whose answers were worked out by hand from the
 * policy's rules (pair scores 10..50 for SYS..PIX, 100 per NVLink plus 20 on
 * one NUMA node or 10 across; the best partition into sets of k, then its
 * best set; ties to the first in the Go code's enumeration order), and its
 * edges: padding, k = 1, unknown links, the fall-back past 12 free devices.
 * tests/peers/test_besteffort_peer.py checks it against the Go code itself.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extender/simulate.h"

static struct placement_topo topo;

/* A topology from rows of space-separated `nvidia-smi topo -m` cells. */
static void topo_rows(const char *const *rows, unsigned n, const int8_t *numa)
{
	memset(&topo, 0, sizeof(topo));
	topo.n = (uint8_t)n;
	topo.known = true;
	for (unsigned i = 0; i < n; i++) {
		const char *p = rows[i];

		topo.numa[i] = numa[i];
		for (unsigned j = 0; j < n; j++) {
			size_t len;

			p += strspn(p, " ");
			len = strcspn(p, " ");
			assert_int_equal(placement_link_parse(p, len, &topo.link[i][j]), 0);
			p += len;
		}
	}
}

static void topo_dgx1(void)
{
	char path[512], err[256] = "", *text;
	FILE *f;
	long len;

	snprintf(path, sizeof(path), "%s/tests/data/topo/dgx1-v100.txt", TROUPE_SOURCE_ROOT);
	f = fopen(path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	text = malloc((size_t)len + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	memset(&topo, 0, sizeof(topo));
	assert_int_equal(placement_topo_parse(text, (size_t)len, &topo, err, sizeof(err)), 0);
	free(text);
	assert_int_equal(topo.n, 8);
}

static uint64_t choose(const char *name, uint64_t free_mask, unsigned k)
{
	struct cache_node node = { .gpu_capacity = topo.n, .gpu_allocatable = topo.n,
				   .derived = &topo, .name = "n" };
	struct cache_node_view v = { .node = &node };
	sim_choose_fn fn = sim_chooser_find(name);
	uint64_t rng = 1;

	assert_non_null(fn);
	return fn(&v, free_mask, k, &rng);
}

static void test_besteffort_registered(void **state)
{
	(void)state;
	assert_non_null(sim_chooser_find("besteffort"));
	assert_non_null(sim_chooser_find("sum-pairs"));
	assert_null(sim_chooser_find("best-effort"));
}

/* All free, k = 2: the only partition of four pairs all NV2 within a quad
 * (220 each) is {0,3} {1,2} {4,7} {5,6}; its first set is {0,3}. */
static void test_besteffort_dgx1_pair_is_nv2(void **state)
{
	(void)state;
	topo_dgx1();
	assert_int_equal(choose("besteffort", 0xff, 2), 0x09);
	assert_int_equal(topo.link[0][3], PLACEMENT_LINK_NV0 + 2);
}

/* k = 4: the two quads (1020 each) beat any split across them; the first
 * is {0,1,2,3}. Without device 0 the best partition is {1,2,3,pad} and
 * {4,5,6,7}, whose best set is the full quad. */
static void test_besteffort_dgx1_quad(void **state)
{
	(void)state;
	topo_dgx1();
	assert_int_equal(choose("besteffort", 0xff, 4), 0x0f);
	assert_int_equal(choose("besteffort", 0xfe, 4), 0xf0);
}

/* Free {0,1,2,5,6,7}, k = 4: {0,1,2,5}+{6,7} and {0,2}+{1,5,6,7} both sum
 * to 910; the first is enumerated first (its first set's indices are
 * lower), and its best set is {0,1,2,5} (690 against 220). */
static void test_besteffort_dgx1_tie_to_first_partition(void **state)
{
	(void)state;
	topo_dgx1();
	assert_int_equal(choose("besteffort", 0xe7, 4), 0x27);
}

/* The 4-GPU bridge box: NV4 bridges on 0-2 and 1-3, PHB otherwise. */
static void test_besteffort_bridge_pair(void **state)
{
	static const char *const rows[] = { "X PHB NV4 PHB", "PHB X PHB NV4", "NV4 PHB X PHB",
					    "PHB NV4 PHB X" };
	static const int8_t numa[] = { 0, 0, 0, 0 };

	(void)state;
	topo_rows(rows, 4, numa);
	assert_int_equal(choose("besteffort", 0x0f, 2), 0x05);
	assert_int_equal(choose("besteffort", 0x0e, 2), 0x0a);
}

/* Five free, k = 3: padded to six, the best partition is {0,2,pad} and
 * {1,3,4}, and the padded set wins (NV12 on one NUMA node, 1220, against
 * 860): go-gpuallocator returns [0 2 nil]. The port keeps 0 and 2 and adds
 * the lowest other free device. */
static void test_besteffort_padded_answer_completed(void **state)
{
	static const char *const rows[] = { "X NODE NV12 NODE PHB", "NODE X PXB PXB NV4",
					    "NV12 PXB X PIX PXB", "NODE PXB PIX X NV4",
					    "PHB NV4 PXB NV4 X" };
	static const int8_t numa[] = { 0, 1, 0, 1, 0 };

	(void)state;
	topo_rows(rows, 5, numa);
	assert_int_equal(choose("besteffort", 0x1f, 3), 0x07);
}

static void test_besteffort_edges(void **state)
{
	(void)state;
	topo_dgx1();
	/* k = 1: the Go code's first available device. */
	assert_int_equal(choose("besteffort", 0xf4, 1), 0x04);
	/* Fewer free than asked: nothing. */
	assert_int_equal(choose("besteffort", 0x03, 3), 0);
	assert_int_equal(choose("besteffort", 0x03, 0), 0);
	/* All of them. */
	assert_int_equal(choose("besteffort", 0x38, 3), 0x38);
	/* No links known: every pair scores 0, the lowest k. */
	topo.known = false;
	assert_int_equal(choose("besteffort", 0xf6, 3), 0x16);
}

/* Past 12 free devices the partition search is too big: sum-pairs' answer. */
static void test_besteffort_many_free_is_sum_pairs(void **state)
{
	char rows[14][14 * 5];
	const char *p[14];
	int8_t numa[14];

	(void)state;
	for (unsigned i = 0; i < 14; i++) {
		char *r = rows[i];

		for (unsigned j = 0; j < 14; j++)
			r += sprintf(r, "%s ", i == j ? "X" : i / 2 == j / 2 ? "NV2" :
						i / 7 == j / 7 ? "PXB" : "SYS");
		p[i] = rows[i];
		numa[i] = (int8_t)(i / 7);
	}
	topo_rows(p, 14, numa);
	assert_int_equal(choose("besteffort", 0x3fff, 4), choose("sum-pairs", 0x3fff, 4));
	/* At 12 the search runs: on this board the same answer ({0,1,2,3}). */
	assert_int_equal(choose("besteffort", 0x0fff, 4), 0x0f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_besteffort_registered),
		cmocka_unit_test(test_besteffort_dgx1_pair_is_nv2),
		cmocka_unit_test(test_besteffort_dgx1_quad),
		cmocka_unit_test(test_besteffort_dgx1_tie_to_first_partition),
		cmocka_unit_test(test_besteffort_bridge_pair),
		cmocka_unit_test(test_besteffort_padded_answer_completed),
		cmocka_unit_test(test_besteffort_edges),
		cmocka_unit_test(test_besteffort_many_free_is_sum_pairs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
