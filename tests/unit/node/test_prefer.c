/* Unit tests of allocator mode's rule (prefer.c): which pod the kubelet is
 * admitting, from a GetPreferredAllocation that names none.
 *
 * Examples first (one waiting pod; a pod already served; two pods of one
 * size, the ambiguous case; must-include devices; nobody's choice fitting),
 * then a property over many random nodes of 8 GPUs (the DGX A100 capture):
 * whatever the pods, the answer has the size asked, lies within the
 * available devices and holds the must-include ones; when exactly one answer
 * matches it is that pod's choice; "ambiguous" is said exactly when two
 * matching pods' answers differ, and the answer is then the oldest's. Then
 * the PodList parser, including what it must leave out.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/node.h"

#define TOPO_DIR TROUPE_SOURCE_ROOT "/tests/data/topo"

/* The DGX A100 capture read as troupe-node would publish it. */
static void dgx(struct node_gpus *g)
{
	FILE *f = fopen(TOPO_DIR "/dgx-a100.txt", "rb");
	char buf[16384], err[256];
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	memset(g, 0, sizeof(*g));
	if (node_smi_parse(buf, n, g, err, sizeof(err)) < 0)
		fail_msg("dgx-a100: %s", err);
	assert_int_equal(g->n, 8);
}

static struct node_claim claim(const char *name, const char *created, uint64_t chosen,
			       unsigned count)
{
	struct node_claim c;

	memset(&c, 0, sizeof(c));
	snprintf(c.ns, sizeof(c.ns), "ml");
	snprintf(c.name, sizeof(c.name), "%s", name);
	snprintf(c.created, sizeof(c.created), "%s", created);
	c.chosen = chosen;
	c.counts[0] = count;
	c.n_counts = 1;
	return c;
}

static void one_waiting_pod_gets_its_choice(void **state)
{
	struct node_gpus g;
	struct node_claim c[2];
	struct node_prefer a;

	(void)state;
	dgx(&g);
	/* Not the lowest indices, not what the kubelet's order would give. */
	c[0] = claim("a", "2026-01-01T00:00:00Z", 0x0A, 2);
	/* A pod served already: its devices held. */
	c[1] = claim("b", "2026-01-01T00:00:01Z", 0x30, 2);
	c[1].held = 0x30;
	assert_int_equal(node_prefer(&g, c, 2, 0xCF, 0, 2, &a), 0);
	assert_int_equal(a.claim, 0);
	assert_int_equal(a.set, 0x0A);
	assert_false(a.ambiguous);
	assert_int_equal(a.matches, 1);
}

static void two_pods_of_one_size_are_ambiguous_and_the_oldest_wins(void **state)
{
	struct node_gpus g;
	struct node_claim c[2];
	struct node_prefer a;

	(void)state;
	dgx(&g);
	c[0] = claim("young", "2026-01-01T00:00:05Z", 0x03, 2);
	c[1] = claim("old", "2026-01-01T00:00:01Z", 0x0C, 2);
	assert_int_equal(node_prefer(&g, c, 2, 0xFF, 0, 2, &a), 0);
	assert_true(a.ambiguous);
	assert_int_equal(a.matches, 2);
	assert_int_equal(a.claim, 1);
	assert_int_equal(a.set, 0x0C);
	/* Of another size: not a match, so not ambiguous. */
	c[0] = claim("young", "2026-01-01T00:00:05Z", 0x07, 3);
	assert_int_equal(node_prefer(&g, c, 2, 0xFF, 0, 2, &a), 0);
	assert_false(a.ambiguous);
	assert_int_equal(a.set, 0x0C);
	/* One of them no longer fitting the available devices: not ambiguous. */
	c[0] = claim("young", "2026-01-01T00:00:05Z", 0x03, 2);
	assert_int_equal(node_prefer(&g, c, 2, 0xFE, 0, 2, &a), 0);
	assert_false(a.ambiguous);
	assert_int_equal(a.claim, 1);
}

static void must_include_and_no_match(void **state)
{
	struct node_gpus g;
	struct node_claim c[1];
	struct node_prefer a;

	(void)state;
	dgx(&g);
	c[0] = claim("a", "2026-01-01T00:00:00Z", 0x0A, 2);
	/* The must-include device is outside its choice: no match, and the
	 * answer still holds it and keeps off the waiting pod's devices. */
	assert_int_equal(node_prefer(&g, c, 1, 0xFF, 0x80, 2, &a), 0);
	assert_int_equal(a.claim, -1);
	assert_true(a.set & 0x80);
	assert_int_equal(__builtin_popcountll(a.set), 2);
	assert_int_equal(a.set & 0x0A, 0);
	/* Inside: a match. */
	assert_int_equal(node_prefer(&g, c, 1, 0xFF, 0x08, 2, &a), 0);
	assert_int_equal(a.claim, 0);
	assert_int_equal(a.set, 0x0A);
	/* Impossible requests. */
	assert_int_equal(node_prefer(&g, c, 1, 0x01, 0, 2, &a), -EINVAL);
	assert_int_equal(node_prefer(&g, c, 1, 0x0F, 0x10, 2, &a), -EINVAL);
	assert_int_equal(node_prefer(&g, c, 1, 0x0F, 0, 0, &a), -EINVAL);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* <k> random devices of <pool>; 0 when it has fewer. */
static uint64_t pick(uint64_t *s, uint64_t pool, unsigned k)
{
	uint64_t set = 0;

	if ((unsigned)__builtin_popcountll(pool) < k)
		return 0;
	while ((unsigned)__builtin_popcountll(set) < k) {
		unsigned i = (unsigned)(rnd(s) % 8);

		if (pool & (1ULL << i))
			set |= 1ULL << i;
	}
	return set;
}

static void property_over_random_nodes(void **state)
{
	struct node_gpus g;
	uint64_t seed = 0x9E3779B97F4A7C15ULL;
	unsigned single = 0, ambiguous = 0, fallback = 0;

	(void)state;
	dgx(&g);
	for (unsigned round = 0; round < 20000; round++) {
		struct node_claim c[6];
		size_t n = 1 + rnd(&seed) % 6;
		uint64_t held = pick(&seed, 0xFF, (unsigned)(rnd(&seed) % 4));
		uint64_t available = 0xFF & ~held, must = 0;
		unsigned size = 1 + (unsigned)(rnd(&seed) % 4), want = 0;
		uint64_t first = 0;
		int first_at = -1, oldest = -1;
		bool differ = false;
		struct node_prefer a;

		if ((unsigned)__builtin_popcountll(available) < size)
			continue;
		if (rnd(&seed) % 5 == 0)
			must = pick(&seed, available, 1);
		for (size_t i = 0; i < n; i++) {
			char name[32], created[40];
			unsigned k = 1 + (unsigned)(rnd(&seed) % 4);

			snprintf(name, sizeof(name), "p%zu", i);
			snprintf(created, sizeof(created), "2026-01-01T00:00:%02uZ",
				 (unsigned)(rnd(&seed) % 60));
			c[i] = claim(name, created, pick(&seed, 0xFF, k), k);
			if (rnd(&seed) % 4 == 0)
				c[i].held = c[i].chosen;
		}
		assert_int_equal(node_prefer(&g, c, n, available, must, size, &a), 0);
		assert_int_equal(__builtin_popcountll(a.set), size);
		assert_int_equal(a.set & ~available, 0);
		assert_int_equal(a.set & must, must);
		/* What the rule says, worked out here the slow way. */
		for (size_t i = 0; i < n; i++) {
			uint64_t r = c[i].chosen & available;

			if (c[i].held || c[i].counts[0] != size ||
			    (unsigned)__builtin_popcountll(r) < size || (must & ~r))
				continue;
			want++;
			if (first_at < 0) {
				first_at = (int)i;
				first = r;
			} else if (r != first) {
				differ = true;
			}
			if (oldest < 0 || strcmp(c[i].created, c[oldest].created) < 0 ||
			    (!strcmp(c[i].created, c[oldest].created) &&
			     strcmp(c[i].name, c[oldest].name) < 0))
				oldest = (int)i;
		}
		assert_int_equal(a.matches, want);
		assert_int_equal(a.ambiguous, differ);
		if (want == 0) {
			assert_int_equal(a.claim, -1);
			fallback++;
			continue;
		}
		assert_int_equal(a.claim, oldest);
		/* A one-container pod of <size>: its whole choice. */
		assert_int_equal(a.set, c[oldest].chosen);
		if (differ)
			ambiguous++;
		else
			single++;
	}
	/* Every branch was taken, many times. */
	assert_true(single > 500);
	assert_true(ambiguous > 100);
	assert_true(fallback > 500);
}

static void claims_from_a_pod_list(void **state)
{
	static const char list[] =
		"{\"kind\":\"PodList\",\"items\":["
		/* A claim: two GPU containers. */
		"{\"metadata\":{\"namespace\":\"ml\",\"name\":\"a\",\"creationTimestamp\":"
		"\"2026-01-01T00:00:00Z\",\"annotations\":{\"troupe.io/gpu-ids\":\"1,3,5\"}},"
		"\"spec\":{\"nodeName\":\"n1\",\"containers\":["
		"{\"name\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}},"
		"{\"name\":\"side\"},"
		"{\"name\":\"y\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
		"\"status\":{\"phase\":\"Pending\"}},"
		/* Another node's. */
		"{\"metadata\":{\"namespace\":\"ml\",\"name\":\"b\",\"annotations\":"
		"{\"troupe.io/gpu-ids\":\"0\"}},\"spec\":{\"nodeName\":\"n2\",\"containers\":"
		"[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}},"
		/* Finished. */
		"{\"metadata\":{\"namespace\":\"ml\",\"name\":\"c\",\"annotations\":"
		"{\"troupe.io/gpu-ids\":\"0\"}},\"spec\":{\"nodeName\":\"n1\",\"containers\":"
		"[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
		"\"status\":{\"phase\":\"Succeeded\"}},"
		/* Being deleted. */
		"{\"metadata\":{\"namespace\":\"ml\",\"name\":\"d\",\"deletionTimestamp\":\"x\","
		"\"annotations\":{\"troupe.io/gpu-ids\":\"0\"}},\"spec\":{\"nodeName\":\"n1\","
		"\"containers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}},"
		/* No choice, a bad choice, no GPUs asked. */
		"{\"metadata\":{\"namespace\":\"ml\",\"name\":\"e\"},\"spec\":{\"nodeName\":\"n1\","
		"\"containers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}},"
		"{\"metadata\":{\"namespace\":\"ml\",\"name\":\"f\",\"annotations\":"
		"{\"troupe.io/gpu-ids\":\"zero\"}},\"spec\":{\"nodeName\":\"n1\",\"containers\":"
		"[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}},"
		"{\"metadata\":{\"namespace\":\"ml\",\"name\":\"g\",\"annotations\":"
		"{\"troupe.io/gpu-ids\":\"0\"}},\"spec\":{\"nodeName\":\"n1\",\"containers\":"
		"[{\"resources\":{\"limits\":{\"cpu\":\"1\"}}}]}}]}";
	struct node_claim *c = NULL;
	size_t n = 0;
	char err[128];

	(void)state;
	assert_int_equal(node_claims_parse(list, strlen(list), "n1", "nvidia.com/gpu", &c, &n,
					   err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_string_equal(c[0].name, "a");
	assert_string_equal(c[0].created, "2026-01-01T00:00:00Z");
	assert_int_equal(c[0].chosen, 0x2A);
	assert_int_equal(c[0].n_counts, 2);
	assert_int_equal(c[0].counts[0], 2);
	assert_int_equal(c[0].counts[1], 1);
	node_claims_free(c);
	assert_int_equal(node_claims_parse("{\"items\":3}", 11, "n1", "nvidia.com/gpu", &c, &n,
					   err, sizeof(err)), -EPROTO);
	assert_int_equal(node_claims_parse("{", 1, "n1", "nvidia.com/gpu", &c, &n, err,
					   sizeof(err)), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_waiting_pod_gets_its_choice),
		cmocka_unit_test(two_pods_of_one_size_are_ambiguous_and_the_oldest_wins),
		cmocka_unit_test(must_include_and_no_match),
		cmocka_unit_test(property_over_random_nodes),
		cmocka_unit_test(claims_from_a_pod_list),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
