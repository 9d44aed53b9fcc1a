/* Unit tests of bind on the test cluster without gangs and without an API
 * server: the claim, repeated binds, refusals that change nothing, and no over-
 * commit under sequences and concurrent binds.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

static void test_ext_bind_after_filter_assumes_gpus(void **state)
{
	struct fx *f = *state;
	static const char *const h100[] = { "gpu-h100-0", NULL };
	struct cache_stats before, after;
	cJSON *j, *b;

	cache_get_stats(f->cache, &before);
	place(f, "first", 4, "gpu-h100-0");
	/* Lowest free devices; the 2 unattributed GPUs count but name no device. */
	expect_pod(f, "uid-first", CACHE_POD_STATE_ASSUMED, "gpu-h100-0", 0x0F);
	assert_int_equal(free_on(f, "gpu-h100-0"), 2);
	cache_get_stats(f->cache, &after);
	assert_int_equal(after.gpus_held, before.gpus_held + 4);
	assert_int_equal(after.pods_holding, before.pods_holding + 1);

	/* The next filter sees what the bind took. */
	j = filter_names(f, "second", 4, h100);
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	assert_string_equal(item(item(j, "FailedNodes"), "gpu-h100-0")->valuestring,
			    "troupe: 2 of 8 nvidia.com/gpu free, pod needs 4");
	cJSON_Delete(j);

	/* A pod that still fits takes the next devices up. */
	place(f, "third", 2, "gpu-h100-0");
	expect_pod(f, "uid-third", CACHE_POD_STATE_ASSUMED, "gpu-h100-0", 0x30);
	assert_int_equal(free_on(f, "gpu-h100-0"), 0);

	/* Around devices held by a known pod (resnet-0 holds 0-3 on gpu-a100-0). */
	place(f, "fourth", 2, "gpu-a100-0");
	expect_pod(f, "uid-fourth", CACHE_POD_STATE_ASSUMED, "gpu-a100-0", 0x30);
	assert_string_equal(bind_pod(f, "fourth", "gpu-a100-0", &b), "");
	cJSON_Delete(b);
	assert_never_overcommitted(f, "after binds");
}

static void test_ext_bind_is_idempotent_for_same_node(void **state)
{
	struct fx *f = *state;
	struct cluster_state before, after;
	cJSON *b;

	place(f, "again", 2, "gpu-h100-1");
	state_take(f, &before);
	for (int i = 0; i < 3; i++) {
		/* kube-scheduler retrying after a lost reply: success, nothing more taken. */
		assert_string_equal(bind_pod(f, "again", "gpu-h100-1", &b), "");
		assert_keys_exactly(b, (const char *const[]){ "Error", NULL });
		cJSON_Delete(b);
	}
	state_take(f, &after);
	assert_state_same(&before, &after, true, "after repeated binds");
	expect_pod(f, "uid-again", CACHE_POD_STATE_ASSUMED, "gpu-h100-1", 0x03);
}

static void test_ext_bind_to_another_node_after_success_is_an_error(void **state)
{
	struct fx *f = *state;
	struct cluster_state before, after;
	cJSON *b;

	place(f, "moved", 2, "gpu-h100-1");
	state_take(f, &before);
	assert_contains(bind_pod(f, "moved", "gpu-a100-1", &b),
			"troupe: pod ml/moved is already bound to node gpu-h100-1");
	cJSON_Delete(b);
	state_take(f, &after);
	assert_state_same(&before, &after, true, "after bind elsewhere");
	expect_pod(f, "uid-moved", CACHE_POD_STATE_ASSUMED, "gpu-h100-1", 0x03);
}

/* Pods the cluster source shows bound already. */
static void test_ext_bind_of_a_bound_pod(void **state)
{
	struct fx *f = *state;
	static const char uid[] = "6f1c2a3e-0000-4000-8000-000000000001";
	struct cluster_state before, after;
	unsigned status = 0;
	char *body;
	cJSON *j;

	state_take(f, &before);
	body = bind_args("ml", "resnet-0", uid, "gpu-a100-0");
	j = call(bind_sync, f, body, &status);
	free(body);
	assert_string_equal(error_of(j), "");
	cJSON_Delete(j);
	body = bind_args("ml", "resnet-0", uid, "gpu-a100-1");
	j = call(bind_sync, f, body, &status);
	free(body);
	assert_contains(error_of(j), "already bound to node gpu-a100-0");
	cJSON_Delete(j);
	state_take(f, &after);
	assert_state_same(&before, &after, true, "after binding a bound pod");
}

/* A pending pod the cluster source knows needs no filter first. */
static void test_ext_bind_of_a_known_pending_pod(void **state)
{
	struct fx *f = *state;
	static const char uid[] = "6f1c2a3e-0000-4000-8000-000000000010";
	unsigned status = 0;
	char *body = bind_args("ml", "llm-worker-0", uid, "gpu-a100-1");
	cJSON *j = call(bind_sync, f, body, &status);

	free(body);
	assert_int_equal(status, 200);
	assert_string_equal(error_of(j), "");
	cJSON_Delete(j);
	expect_pod(f, uid, CACHE_POD_STATE_ASSUMED, "gpu-a100-1", 0xFF);
	assert_int_equal(free_on(f, "gpu-a100-1"), 0);
}

struct refused_bind {
	const char *ns, *name, *uid, *node;
	const char *message;
};

static const struct refused_bind refused_binds[] = {
	/* No room, or a node the pod can never use: the pod stays as it was. */
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-a100-0",
	  "troupe: 4 of 8 nvidia.com/gpu free, pod needs 8 (pod ml/llm-worker-0 on node "
	  "gpu-a100-0; it will be retried)" },
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-v100-0",
	  "troupe: only 6 of 8 nvidia.com/gpu healthy (allocatable), pod needs 8" },
	/* The node's own state is asked first (bind_check_node): gpu-l4-0 is
	 * cordoned, and too small besides; gpu-t4-0 is not Ready. */
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-l4-0",
	  "troupe: node is cordoned (spec.unschedulable)" },
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-t4-0",
	  "troupe: node is not Ready" },
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "cpu-0",
	  "troupe: node has no nvidia.com/gpu" },
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "ghost-0",
	  "troupe: node ghost-0 is unknown to troupe" },
	/* Unknown pod. */
	{ "ml", "stranger", "uid-never-seen", "gpu-a100-1", "uid-never-seen" },
	/* The uid belongs to another pod. */
	{ "ml", "impostor", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-a100-1",
	  "belongs to pod ml/llm-worker-0" },
	{ "research", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-a100-1",
	  "belongs to pod ml/llm-worker-0" },
	{ "", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-a100-1",
	  "belongs to pod ml/llm-worker-0" },
	/* Missing fields. */
	{ "ml", "llm-worker-0", "", "gpu-a100-1", "must name PodName, PodUID and Node" },
	{ "ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010", "",
	  "must name PodName, PodUID and Node" },
	{ "ml", "", "6f1c2a3e-0000-4000-8000-000000000010", "gpu-a100-1",
	  "must name PodName, PodUID and Node" },
};

static void test_ext_bind_refusals_change_nothing(void **state)
{
	struct fx *f = *state;

	for (size_t i = 0; i < sizeof(refused_binds) / sizeof(refused_binds[0]); i++) {
		const struct refused_bind *c = &refused_binds[i];
		struct cluster_state before, after;
		unsigned status = 0;
		char *body = bind_args(c->ns, c->name, c->uid, c->node);
		cJSON *j;

		state_take(f, &before);
		j = call(bind_sync, f, body, &status);
		free(body);
		if (status != 200 || !strstr(error_of(j), c->message))
			fail_msg("bind %s/%s to %s: status %u, Error \"%s\"; want \"%s\"", c->ns,
				 c->name, c->node, status, error_of(j), c->message);
		cJSON_Delete(j);
		state_take(f, &after);
		assert_state_same(&before, &after, true, c->message);
	}
	expect_pod(f, "6f1c2a3e-0000-4000-8000-000000000010", CACHE_POD_STATE_UNACCOUNTED, "", 0);
}

/* A pod whose bind was refused for room can still be bound where it fits. */
static void test_ext_bind_after_a_refusal_still_works(void **state)
{
	struct fx *f = *state;
	cJSON *b;

	place(f, "fill-a100-0", 4, "gpu-a100-0");
	assert_contains(bind_pod(f, "fill-a100-0", "gpu-h100-1", &b), "already bound");
	cJSON_Delete(b);
	{
		const char *const one[] = { "gpu-a100-0", NULL };
		cJSON *j = filter_names(f, "late", 1, one);

		assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
		cJSON_Delete(j);
	}
	assert_contains(bind_pod(f, "late", "gpu-a100-0", &b),
			"troupe: 0 of 8 nvidia.com/gpu free, pod needs 1");
	cJSON_Delete(b);
	assert_string_equal(bind_pod(f, "late", "gpu-a100-1", &b), "");
	cJSON_Delete(b);
	expect_pod(f, "uid-late", CACHE_POD_STATE_ASSUMED, "gpu-a100-1", 0x01);
}

static void test_ext_bind_malformed_is_400(void **state)
{
	struct fx *f = *state;
	static const char *const bodies[] = {
		"{\"PodName\":", "[]",
		"{\"PodName\":\"p\",\"PodNamespace\":\"ml\",\"PodUID\":7,\"Node\":\"gpu-a100-1\"}",
	};

	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		unsigned status = 0;
		cJSON *j = call(bind_sync, f, bodies[i], &status);

		assert_int_equal(status, 400);
		assert_contains(error_of(j), "bad bind request");
		cJSON_Delete(j);
	}
}

/* Many pods of 1, 2, 4 and 8 GPUs, each filtered then bound to a node filter
 * offered: every bind succeeds, no node is ever over-committed, a bind to a
 * node filter refused fails, and at the end every free GPU of every usable
 * node is taken (4 + 8 + 6 + 8 + 5 = 31). */
static void test_ext_filter_bind_sequence_never_overcommits(void **state)
{
	struct fx *f = *state;
	static const unsigned sizes[] = { 1, 2, 4, 8 };
	static const char *const usable[] = { "gpu-a100-0", "gpu-a100-1", "gpu-h100-0",
					      "gpu-h100-1", "gpu-v100-0", NULL };
	unsigned bound_gpus = 0, refused = 0, x = 12345;
	char (*bound)[64] = calloc(400, sizeof(*bound));
	struct cluster_state initial;
	size_t n_bound = 0;
	char name[32];
	int i;

	assert_non_null(bound);
	state_take(f, &initial);
	for (i = 0; i < 400; i++) {
		unsigned gpus = sizes[(x = x * 1103515245u + 12345u) >> 16 & 3];
		const cJSON *names, *failed;
		cJSON *j, *b;
		int n;

		if (i >= 200)
			gpus = 1;       /* then top up every last GPU */
		snprintf(name, sizeof(name), "seq-%d", i);
		j = filter_names(f, name, gpus, cluster_nodes);
		names = item(j, "NodeNames");
		failed = item(j, "FailedNodes");
		n = cJSON_GetArraySize(names);
		/* Binding where filter said no must fail and change nothing. */
		if (failed->child) {
			struct cluster_state before, after;

			state_take(f, &before);
			if (!bind_pod(f, name, failed->child->string, &b)[0])
				fail_msg("pod %s (%u GPUs) bound to %s, which filter "
					 "refused: %s", name, gpus, failed->child->string,
					 failed->child->valuestring);
			cJSON_Delete(b);
			state_take(f, &after);
			assert_state_same(&before, &after, false, name);
		}
		if (n == 0) {
			refused++;
			cJSON_Delete(j);
			if (i >= 200)
				break;
			continue;
		}
		{
			int pick = (int)(x % (unsigned)n);
			const char *node = cJSON_GetArrayItem(names, pick)->valuestring;
			const char *e = bind_pod(f, name, node, &b);

			if (e[0])
				fail_msg("pod %s (%u GPUs) on %s, offered by filter: %s", name,
					 gpus, node, e);
			cJSON_Delete(b);
		}
		snprintf(bound[n_bound++], sizeof(bound[0]), "uid-%s", name);
		bound_gpus += gpus;
		cJSON_Delete(j);
		assert_never_overcommitted(f, name);
	}
	assert_true(i < 400);
	assert_true(refused > 0);
	assert_int_equal(bound_gpus, 31);
	for (const char *const *u = usable; *u; u++)
		assert_int_equal(free_on(f, *u), 0);
	assert_devices_exclusive(f, &initial, (const char (*)[64])bound, n_bound);
	free(bound);
}

/* Verbs may run on any thread. Racers released together filter and bind
 * concurrently, all choosing the first node offered; losing a race is a
 * refusal ("free, pod needs"), never an over-commit or a device held twice,
 * and together they take exactly the 31 free GPUs. Repeated on fresh caches.
 * Workers only record; the main thread asserts. */
enum { RACERS = 4, RACE_ROUNDS = 30 };

struct racer {
	struct fx *f;
	pthread_barrier_t *start;
	int id;
	unsigned bound_gpus;
	unsigned lost;
	unsigned unexpected;
	size_t n_bound;
	char bound[40][64];             /* uids; 31 GPUs make at most 31 pods */
	char last_unexpected[200];
};

static void *racer_run(void *arg)
{
	struct racer *r = arg;
	unsigned seq = 0, gpus = r->id % 2 ? 2 : 1;

	pthread_barrier_wait(r->start);
	while (seq < 2000) {
		char name[48], uid[64], *body;
		const cJSON *first;
		struct ext_reply rep;
		cJSON *j, *b;

		/* A fresh pod per attempt, so its remembered demand is this one. */
		snprintf(name, sizeof(name), "race-%d-%u", r->id, seq++);
		snprintf(uid, sizeof(uid), "uid-%s", name);
		body = names_args(gpu_pod(name, gpus), cluster_nodes);
		ext_reply_init(&rep);
		ext_filter(&r->f->svc, body, strlen(body), &rep);
		free(body);
		j = cJSON_Parse(rep.body.buf);
		ext_reply_fini(&rep);
		first = cJSON_GetArrayItem(item(j, "NodeNames"), 0);
		if (!cJSON_IsString(first)) {
			cJSON_Delete(j);
			if (gpus == 1)
				break;  /* the cluster is full */
			gpus = 1;
			continue;
		}
		body = bind_args("ml", name, uid, first->valuestring);
		cJSON_Delete(j);
		ext_reply_init(&rep);
		ext_bind(&r->f->svc, body, strlen(body), &rep, NULL);
		free(body);
		b = cJSON_Parse(rep.body.buf);
		ext_reply_fini(&rep);
		if (cJSON_IsString(item(b, "Error")) && !item(b, "Error")->valuestring[0]) {
			r->bound_gpus += gpus;
			if (r->n_bound < sizeof(r->bound) / sizeof(r->bound[0]))
				snprintf(r->bound[r->n_bound++], sizeof(r->bound[0]), "%s", uid);
		} else if (cJSON_IsString(item(b, "Error")) &&
			   strstr(item(b, "Error")->valuestring, "free, pod needs")) {
			r->lost++;
		} else {
			r->unexpected++;
			snprintf(r->last_unexpected, sizeof(r->last_unexpected), "%s",
				 cJSON_IsString(item(b, "Error")) ? item(b, "Error")->valuestring
								   : "(no Error)");
		}
		cJSON_Delete(b);
	}
	return NULL;
}

static void race_round(struct fx *f)
{
	static const char *const usable[] = { "gpu-a100-0", "gpu-a100-1", "gpu-h100-0",
					      "gpu-h100-1", "gpu-v100-0", NULL };
	static struct racer racers[RACERS];
	static char uids[RACERS * 40][64];
	struct cluster_state initial;
	pthread_barrier_t start;
	pthread_t th[RACERS];
	unsigned total = 0;
	size_t n = 0;

	state_take(f, &initial);
	assert_int_equal(pthread_barrier_init(&start, NULL, RACERS), 0);
	for (int i = 0; i < RACERS; i++) {
		memset(&racers[i], 0, sizeof(racers[i]));
		racers[i].f = f;
		racers[i].start = &start;
		racers[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, racer_run, &racers[i]), 0);
	}
	for (int i = 0; i < RACERS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < RACERS; i++) {
		if (racers[i].unexpected)
			fail_msg("racer %d: %u unexpected bind replies, e.g. \"%s\"", i,
				 racers[i].unexpected, racers[i].last_unexpected);
		total += racers[i].bound_gpus;
		for (size_t k = 0; k < racers[i].n_bound; k++)
			memcpy(uids[n++], racers[i].bound[k], sizeof(uids[0]));
	}
	assert_never_overcommitted(f, "after concurrent binds");
	assert_int_equal(total, 31);
	for (const char *const *u = usable; *u; u++)
		assert_int_equal(free_on(f, *u), 0);
	assert_devices_exclusive(f, &initial, (const char (*)[64])uids, n);
}

static void test_ext_bind_concurrent_binds_never_overcommit(void **state)
{
	(void)state;
	for (int round = 0; round < RACE_ROUNDS; round++) {
		void *fx = NULL;

		assert_int_equal(fx_setup(&fx), 0);
		race_round(fx);
		fx_teardown(&fx);
	}
}

int main(void)
{
#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		FX(test_ext_bind_after_filter_assumes_gpus),
		FX(test_ext_bind_is_idempotent_for_same_node),
		FX(test_ext_bind_to_another_node_after_success_is_an_error),
		FX(test_ext_bind_of_a_bound_pod),
		FX(test_ext_bind_of_a_known_pending_pod),
		FX(test_ext_bind_refusals_change_nothing),
		FX(test_ext_bind_after_a_refusal_still_works),
		FX(test_ext_bind_malformed_is_400),
		FX(test_ext_filter_bind_sequence_never_overcommits),
		cmocka_unit_test(test_ext_bind_concurrent_binds_never_overcommit),
	};
#undef FX

	/* Refusals are logged as warnings; keep the test output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
