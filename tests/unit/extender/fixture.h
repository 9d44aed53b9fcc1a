/* The extender unit tests' shared fixture (fixture.c): the test cluster behind
 * an ext_service, calling the verbs without HTTP, request builders, and checks
 * on the cluster state.
 *
 * The test cluster (tests/data/cluster.json, a copy of
 * config/examples/cluster-small.json kept for the tests):
 *   gpu-a100-0  8 GPUs, devices 0-3 occupied by ml/resnet-0      -> 4 free
 *   gpu-a100-1  8 GPUs, its only pod Succeeded                  -> 8 free
 *   gpu-h100-0  8 GPUs, 2 occupied by a pod with unknown devices -> 6 free
 *   gpu-h100-1  8 GPUs                                          -> 8 free
 *   gpu-v100-0  capacity 8, allocatable 6, 1 occupied (unattributed) -> 5 free
 *   gpu-l4-0    4 GPUs, cordoned
 *   gpu-t4-0    4 GPUs, Ready=Unknown
 *   cpu-0       no GPUs
 * plus two pending 8-GPU pods ml/llm-worker-0 and ml/llm-worker-1.
 */
#ifndef TROUPE_TEST_EXTENDER_FIXTURE_H
#define TROUPE_TEST_EXTENDER_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/util.h"
#include "common/yamljson.h"
#include "extender/codec.h"
#include "extender/config.h"
#include "extender/cycle.h"
#include "extender/verbs.h"
#include "placement/placement.h"

#define TEST_CLUSTER TROUPE_SOURCE_ROOT "/tests/data/cluster.json"

/* The request shapes of kube-interfaces.md sections 2, 4 and 5. */
extern const char doc_filter_full[];
extern const char doc_filter_names[];
extern const char doc_bind[];
extern const char doc_preempt_meta[];

/* The test cluster's nodes; the same and one troupe has never heard of. */
extern const char *const cluster_nodes[];
extern const char *const request_nodes[];

/* ---- The test cluster behind an ext_service ---------------------------------- */

struct fx {
	struct ext_config cfg;
	struct cache *cache;
	struct ext_service svc;
};

/* cmocka setup and teardown: the test cluster, synced, binpack scoring, no
 * gangs, no API server. */
int fx_setup(void **state);
int fx_teardown(void **state);
/* The same, in place, for a fixture that embeds a struct fx (it must not move:
 * the cache keeps pointers into its cfg). */
int fx_init(struct fx *f);
void fx_fini(struct fx *f);

typedef void (*verb_fn)(const struct ext_service *svc, const char *body, size_t len,
			struct ext_reply *r);

/* Call <verb> and parse its reply, which must be one whole JSON document. */
cJSON *call_len(verb_fn verb, struct fx *f, const char *body, size_t len, unsigned *status);
cJSON *call(verb_fn verb, struct fx *f, const char *body, unsigned *status);
const cJSON *item(const cJSON *obj, const char *key);
/* The reply's Error, which must be present and a string. */
const char *error_of(const cJSON *reply);
void assert_contains(const char *s, const char *part);
/* A reply that says "this request failed": 400, or 200 with a non-empty Error. */
bool is_error_reply(unsigned status, const cJSON *reply);
/* bind as kube-scheduler's snapshot-mode caller sees it: answered at once. */
void bind_sync(const struct ext_service *svc, const char *body, size_t len,
	       struct ext_reply *r);
/* The four verbs (bind as bind_sync), and their names for messages. */
extern const verb_fn all_verbs[4];
extern const char *const verb_names[4];

/* <obj> has exactly the keys <keys> (NULL-terminated), each once. */
void assert_keys_exactly(const cJSON *obj, const char *const *keys);
/* The keys of an ExtenderFilterResult. */
extern const char *const filter_result_keys[];

/* ---- Request builders ----------------------------------------------------------- */

/* Pod ml/<name> with uid "uid-<name>" and the given container resources. */
cJSON *pod_with(const char *name, const char *resources);
cJSON *gpu_pod(const char *name, unsigned gpus);
/* ExtenderArgs in names mode (nodeCacheCapable: true). Takes <pod>. */
char *names_args(cJSON *pod, const char *const *names);
/* ExtenderArgs in full mode (nodeCacheCapable: false). Takes <pod> and <items>. */
char *full_args(cJSON *pod, cJSON *items);
/* A Node object as the scheduler's informer has it. <capacity> and
 * <allocatable> are GPU counts as strings, or NULL to leave them out. */
cJSON *node_obj(const char *name, const char *capacity, const char *allocatable, bool ready,
		bool cordoned);
char *bind_args(const char *ns, const char *name, const char *uid, const char *node);
/* Filter pod ml/<name> (<gpus> GPUs) over <nodes>; the reply must not be an error. */
cJSON *filter_names(struct fx *f, const char *name, unsigned gpus, const char *const *nodes);
/* Bind pod ml/<name> (uid "uid-<name>") to <node>; return the reply's Error. The
 * caller frees *reply. */
const char *bind_pod(struct fx *f, const char *name, const char *node, cJSON **reply);
/* Filter then bind, expecting both to succeed. */
void place(struct fx *f, const char *name, unsigned gpus, const char *node);
bool names_has(const cJSON *reply, const char *name);

/* ---- Cluster state, for "nothing changed" and "never over-committed" ------------ */

struct node_usage {
	char name[64];
	uint64_t used;
	uint32_t unattributed;
	uint32_t allocatable;
};

struct cluster_state {
	struct cache_stats stats;
	size_t n;
	struct node_usage nodes[32];
};

/* Pod <uid> is in state <st> on <node> occupying <devices>. */
void expect_pod(struct fx *f, const char *uid, enum cache_pod_state st, const char *node,
		uint64_t devices);
void state_take(struct fx *f, struct cluster_state *s);
/* Usage and occupancy equal; with <pods>, the number of known pods too. */
void assert_state_same(const struct cluster_state *a, const struct cluster_state *b, bool pods,
		       const char *what);
void assert_never_overcommitted(struct fx *f, const char *when);
uint32_t free_on(struct fx *f, const char *node);
/* Pods <uids> were bound by the test since <initial>: on every node, no device
 * is occupied twice, each pod occupies exactly its demand, and the node's usage
 * mask is what it was plus those pods' devices. */
void assert_devices_exclusive(struct fx *f, const struct cluster_state *initial,
			      const char (*uids)[64], size_t n);

#endif
