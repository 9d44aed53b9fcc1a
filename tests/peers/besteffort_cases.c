/* besteffort_cases: troupe simulate's "besteffort" chooser (the C port of
 * go-gpuallocator's best-effort policy in src/extender/simulate_choosers.c)
 * on test cases given as JSON, for tests/peers/test_besteffort_peer.py, which
 * gives the same cases to go-gpuallocator itself (tests/peers/gpuallocator)
 * and compares the answers.
 *
 *   besteffort_cases < cases.json
 *
 * Input: a JSON array of cases, each
 *   {"links": [["X","NV2",...],...], "numa": [0,0,...], "free": [0,2,...], "k": 2}
 * (links in `nvidia-smi topo -m`'s names, read by placement_link_parse as the
 * simulator reads a node's annotation; numa -1 for unknown). Output: one line
 * per case, the chosen devices in index order, or "none". A malformed case is
 * an error naming it, exit status 2.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "extender/simulate.h"

enum { CASES_MAX_INPUT = 64 << 20 };    /* bytes of JSON read from stdin */

static char *read_all(FILE *f, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);

	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);

		n += got;
		if (got == 0)
			break;
		if (n == cap) {
			char *grown = cap >= CASES_MAX_INPUT ? NULL : realloc(buf, cap * 2 + 1);

			if (!grown) {
				free(buf);
				return NULL;
			}
			buf = grown;
			cap *= 2;
		}
	}
	if (buf)
		buf[n] = '\0';
	*len = n;
	return buf;
}

/* Fill <t> from a case's "links" and "numa". 0 or -EINVAL with <err> set. */
static int case_topo(const cJSON *c, struct placement_topo *t, char *err, size_t errlen)
{
	const cJSON *links = cJSON_GetObjectItemCaseSensitive(c, "links");
	const cJSON *numa = cJSON_GetObjectItemCaseSensitive(c, "numa");
	int n = cJSON_GetArraySize(links);

	memset(t, 0, sizeof(*t));
	if (!cJSON_IsArray(links) || n < 1 || n > PLACEMENT_TOPO_MAX) {
		snprintf(err, errlen, "\"links\" must be a square array of 1..%d rows",
			 PLACEMENT_TOPO_MAX);
		return -EINVAL;
	}
	if (!cJSON_IsArray(numa) || cJSON_GetArraySize(numa) != n) {
		snprintf(err, errlen, "\"numa\" must have one entry per device (%d)", n);
		return -EINVAL;
	}
	t->n = (uint8_t)n;
	t->known = true;
	snprintf(t->source, sizeof(t->source), "peer case");
	for (int i = 0; i < n; i++) {
		const cJSON *row = cJSON_GetArrayItem(links, i);
		const cJSON *nu = cJSON_GetArrayItem(numa, i);

		if (!cJSON_IsNumber(nu) || nu->valueint < -1 || nu->valueint > 127) {
			snprintf(err, errlen, "numa[%d] must be -1..127", i);
			return -EINVAL;
		}
		t->numa[i] = (int8_t)nu->valueint;
		if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != n) {
			snprintf(err, errlen, "links[%d] must have %d cells", i, n);
			return -EINVAL;
		}
		for (int j = 0; j < n; j++) {
			const cJSON *cell = cJSON_GetArrayItem(row, j);

			if (!cJSON_IsString(cell) ||
			    placement_link_parse(cell->valuestring, strlen(cell->valuestring),
						 &t->link[i][j]) != 0) {
				snprintf(err, errlen, "links[%d][%d] is not a link level", i, j);
				return -EINVAL;
			}
		}
	}
	return 0;
}

static int run_case(const cJSON *c, sim_choose_fn choose, char *err, size_t errlen)
{
	static struct placement_topo t;
	const cJSON *free_list = cJSON_GetObjectItemCaseSensitive(c, "free");
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(c, "k");
	struct cache_node node = { 0 };
	struct cache_node_view v = { .node = &node };
	uint64_t free_mask = 0, set, rng = 1;
	const cJSON *f;
	int rc = case_topo(c, &t, err, errlen);

	if (rc)
		return rc;
	if (!cJSON_IsArray(free_list) || !cJSON_IsNumber(k) || k->valueint < 0 ||
	    k->valueint > PLACEMENT_TOPO_MAX) {
		snprintf(err, errlen, "\"free\" must be an array and \"k\" a count");
		return -EINVAL;
	}
	cJSON_ArrayForEach(f, free_list) {
		if (!cJSON_IsNumber(f) || f->valueint < 0 || f->valueint >= t.n) {
			snprintf(err, errlen, "a free device is out of range 0..%d", t.n - 1);
			return -EINVAL;
		}
		free_mask |= 1ULL << f->valueint;
	}
	/* The simulator's node: its topology class is what it derived. */
	node.gpu_capacity = t.n;
	node.gpu_allocatable = t.n;
	node.derived = &t;
	node.name = "peer-case";
	set = choose(&v, free_mask, (unsigned)k->valueint, &rng);
	if (!set) {
		puts("none");
		return 0;
	}
	for (const char *sep = ""; set; set &= set - 1, sep = " ")
		printf("%s%d", sep, __builtin_ctzll(set));
	putchar('\n');
	return 0;
}

int main(int argc, char **argv)
{
	sim_choose_fn choose = sim_chooser_find("besteffort");
	char err[256] = "";
	const cJSON *c;
	cJSON *doc = NULL;
	size_t len = 0, i = 0;
	char *text;
	int status = 0;

	if (argc > 1) {
		fprintf(stderr, "usage: %s < cases.json (see the file's header)\n", argv[0]);
		return 2;
	}
	if (!choose) {
		fprintf(stderr, "besteffort_cases: no chooser named \"besteffort\"\n");
		return 2;
	}
	text = read_all(stdin, &len);
	if (!text || !(doc = cJSON_ParseWithLength(text, len)) || !cJSON_IsArray(doc)) {
		fprintf(stderr, "besteffort_cases: stdin is not a JSON array of cases\n");
		status = 2;
		goto out;
	}
	cJSON_ArrayForEach(c, doc) {
		if (run_case(c, choose, err, sizeof(err)) != 0) {
			fprintf(stderr, "besteffort_cases: case %zu: %s\n", i, err);
			status = 2;
			goto out;
		}
		i++;
	}
out:
	cJSON_Delete(doc);
	free(text);
	return status;
}
