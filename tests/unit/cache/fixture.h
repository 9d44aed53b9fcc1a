/* Fixtures shared by the cache's unit tests (fixture.c). Include after
 * cmocka.h. Tables in the tests check every row and report each mismatch
 * before failing.
 */
#ifndef TROUPE_TEST_CACHE_FIXTURE_H
#define TROUPE_TEST_CACHE_FIXTURE_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"
#include "common/log.h"
#include "../common/fixture.h"         /* rng_next, test_temp_file */
#include "common/util.h"

/* The test fixture cluster, tests/data/cluster.json (the tests own it: the demo's
 * config/examples/cluster-small.json may change without breaking them). */
#define TEST_CLUSTER_JSON TROUPE_SOURCE_ROOT "/tests/data/cluster.json"

/* Binary quantity units, as Kubernetes writes Gi and Mi. */
#define GI INT64_C(1073741824)
#define MI INT64_C(1048576)

/* One managed resource, nvidia.com/gpu; OPTS2 adds amd.com/gpu. */
extern const struct cache_opts OPTS;
extern const struct cache_opts OPTS2;

/* A test with a fresh cache (of OPTS) in *state. */
#define CACHE_TEST(f) cmocka_unit_test_setup_teardown(f, cache_setup, cache_teardown)

struct podspec {
	const char *uid;        /* also the pod's name */
	const char *node;       /* spec.nodeName, or NULL */
	unsigned gpus;          /* limits[nvidia.com/gpu] */
	const char *phase;      /* NULL: Running when bound, else Pending */
	const char *ids;        /* troupe.io/gpu-ids, or NULL */
	bool deleting;
	const char *actual;     /* troupe.io/gpu-ids-actual (the read-back), or NULL */
};
#define POD(...) pod_make((struct podspec){ __VA_ARGS__ })

/* What a reader sees of a node, copied out of a read section. */
struct seen {
	bool found;
	uint64_t used;
	uint32_t unattributed;
	uint32_t free_gpus;
	uint64_t free_mask;
	uint32_t capacity, allocatable;
};

/* A keep callback: keeps exactly the names listed (NULL-terminated). */
struct keep_set {
	const char *const *names;
};

/* Copy JSON written with single quotes into <out>, quotes made double. */
void sq_text(char *out, size_t len, const char *text);

/* Parse JSON written with single quotes. */
cJSON *json_sq(const char *text);

/* A Node with <cap>/<alloc> GPUs (-1 leaves the field out), Ready. */
cJSON *node_json(const char *name, int cap, int alloc);

/* That node, parsed (failing the test when it does not parse). */
struct cache_node *node_new(const char *name, int cap, int alloc);

/* That node, published. */
void add_node(struct cache *c, const char *name, int cap, int alloc);

/* A pod in namespace ml as <s> says (use POD(...)), parsed. */
struct cache_pod *pod_make(struct podspec s);

/* What a reader sees of node <name>. */
struct seen look(struct cache *c, const char *name);

/* Fail unless node <node> is known and its usage is <used>/<unattr>. */
void assert_usage(struct cache *c, const char *node, uint64_t used, uint32_t unattr);

/* What the cache holds for pod <uid>, failing the test when it knows none. */
struct cache_pod_info pod_info(struct cache *c, const char *uid);

/* A fresh cache of OPTS in *state, and its end. */
int cache_setup(void **state);
int cache_teardown(void **state);

/* A new file under /tmp holding <text>; the caller removes it and frees the path. */
char *temp_file_with(const char *text);

/* The sweeps' keep callback: <arg> is a struct keep_set. */
bool keep_listed(const char *key, void *arg);

/* qsort's comparison of fixed-size string rows. */
int str_cmp(const void *a, const void *b);

/* What cache_node_pods lists for <node>: its return value, and the UIDs sorted and
 * comma-joined in <out> (a UID listed twice shows twice). */
int node_pods_str(struct cache *c, const char *node, char *out, size_t len);

/* Parse a PodGroup written with single quotes. */
struct cache_podgroup *podgroup_parse_sq(const char *text, const struct cache_opts *opts,
					  char *err, size_t errlen);

#endif
