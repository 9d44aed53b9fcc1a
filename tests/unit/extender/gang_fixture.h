/* The second extender test fixture (gang_fixture.c): the test cluster behind an
 * ext_service with a gang manager and a fake binder, for filter_gang, bind_gang
 * and the Binding's re-post policy.
 *
 * The fake binder stands in for src/cache/binder.c by defining
 * cache_binder_submit and cache_binder_submit_after itself: a test binary
 * links the cache module as a static library, so binder.c's object (and
 * libcurl with it) is never pulled in while nothing else of it is used. Each
 * submitted Binding is recorded; the test answers it (fake_answer) as the API
 * server would, on its own thread, and sees what troupe posts next.
 */
#ifndef TROUPE_TEST_EXTENDER_GANG_FIXTURE_H
#define TROUPE_TEST_EXTENDER_GANG_FIXTURE_H

#include <pthread.h>

#include "fixture.h"

#include "cache/api.h"
#include "common/limits.h"
#include "gang/gang.h"

enum { FAKE_MAX_POSTS = 64 };

/* One Binding troupe submitted. */
struct fake_post {
	char ns[K8S_NAMESPACE_BUF];
	char name[K8S_NAME_BUF];
	char uid[K8S_UID_BUF];
	char node[K8S_NAME_BUF];
	char annotations[1024];         /* "" when the Binding had none */
	bool had_annotations;
	bool after;                     /* through cache_binder_submit_after */
	unsigned delay_ms;
	cache_bind_done_fn done;
	void *arg;
	bool answered;
};

struct fake_binder {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fake_post posts[FAKE_MAX_POSTS];   /* guarded by lock */
	unsigned n;                     /* guarded by lock */
	int refuse;                     /* submit's result: 0, or -ENOMEM / -ESHUTDOWN */
};

/* A verb's asynchronous completion, to wait for. */
struct done_flag {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;                      /* guarded by lock */
};

struct gfx {
	struct fx fx;                   /* cfg, cache, svc: as fixture.h's */
	struct gang_manager *gangs;
	struct fake_binder binder;
};

/* cmocka setup and teardown: fx_setup's cluster with a gang manager
 * (starvation holds out of the way, quorum named by the pods) and the fake
 * binder as svc.binder. */
int gfx_setup(void **state);
int gfx_teardown(void **state);

/* Gang member ml/<name> (uid "uid-<name>") of pod group <group> with quorum
 * <quorum>, asking <gpus> GPUs; <extra_annotations> ("" or ",\"k\":\"v\"") go
 * on the pod. Its priority (100) puts its gang before the test cluster's own
 * pending gang ml/llm in the fair order. */
cJSON *gang_pod(const char *name, const char *group, unsigned quorum, unsigned gpus,
		const char *extra_annotations);

/* Make members <prefix>-0 .. <prefix>-<n-1> of <group> known to the cache, as
 * the watch would: a gang is planned once its members exist. */
void gang_create(struct gfx *g, const char *prefix, const char *group, unsigned quorum,
		 unsigned gpus, unsigned n);

/* The four GPU nodes of the test cluster with something free: gpu-a100-0 (4
 * free), gpu-a100-1 (8), gpu-h100-0 (6), gpu-h100-1 (8). */
extern const char *const gpu_nodes[];

/* Gang "pair": members w-0 and w-1, 8 GPUs each, quorum 2, made known and
 * planned by filtering w-0 over gpu_nodes (its plan: gpu-a100-1, gpu-h100-1). */
void pair_planned(struct gfx *g);

/* Filter gang member <name> over <nodes>; returns the parsed reply. */
cJSON *filter_member(struct gfx *g, const char *name, const char *group, unsigned quorum,
		     unsigned gpus, const char *const *nodes);

/* A bind in flight: the request, its reply and its completion. */
struct pending_bind {
	struct ext_reply r;
	struct done_flag flag;
	bool complete_now;              /* ext_bind returned true */
};

/* ext_bind pod ml/<name> to <node> with an async completion. */
void bind_start(struct gfx *g, struct pending_bind *pb, const char *name, const char *node);
/* Wait up to <ms> for the bind to complete; true when it did. */
bool bind_wait(struct pending_bind *pb, unsigned ms);
/* The completed bind's Error (the reply must be complete). */
const char *bind_error(struct pending_bind *pb, cJSON **reply);
void bind_fini(struct pending_bind *pb);

/* Wait up to <ms> for the fake binder to hold at least <n> posts. */
bool fake_wait_posts(struct fake_binder *b, unsigned n, unsigned ms);
/* Answer post <i> as the API server would: <result> as cache_bind_done_fn's. */
void fake_answer(struct fake_binder *b, unsigned i, int result, const char *msg,
		 unsigned retry_after_ms);
unsigned fake_posts(struct fake_binder *b);
/* A copy of post <i>. */
struct fake_post fake_post_get(struct fake_binder *b, unsigned i);

#endif
