/* Unit tests of prioritize on the test cluster: a score for every input node,
 * full mode, bad requests, and prioritize answered from the scores its filter
 * left (extender/cycle.h) equal to fresh ones.
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

/* Host -> Score from a prioritize reply, checking its shape on the way. */
static int score_of(const cJSON *reply, const char *host)
{
	const cJSON *it;
	int found = -1, n = 0;

	cJSON_ArrayForEach(it, reply) {
		static const char *const keys[] = { "Host", "Score", NULL };
		const cJSON *h = item(it, "Host"), *s = item(it, "Score");

		assert_keys_exactly(it, keys);
		assert_true(cJSON_IsString(h));
		assert_true(cJSON_IsNumber(s));
		if (strcmp(h->valuestring, host) == 0) {
			found = s->valueint;
			n++;
		}
	}
	if (n != 1)
		fail_msg("host %s appears %d times", host, n);
	return found;
}

static void test_ext_prioritize_scores_every_input_node(void **state)
{
	struct fx *f = *state;
	struct cluster_state before, after;
	unsigned status = 0;
	char *body = names_args(gpu_pod("prio-4", 4), request_nodes);
	cJSON *j;

	state_take(f, &before);
	j = call(ext_prioritize, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_true(cJSON_IsArray(j));
	assert_int_equal(cJSON_GetArraySize(j), 9);
	for (const char *const *n = request_nodes; *n; n++)
		assert_in_range(score_of(j, *n), 0, PLACEMENT_MAX_SCORE);
	/* Nodes the pod cannot use score nothing. */
	assert_int_equal(score_of(j, "gpu-l4-0"), 0);
	assert_int_equal(score_of(j, "gpu-t4-0"), 0);
	assert_int_equal(score_of(j, "cpu-0"), 0);
	assert_int_equal(score_of(j, "ghost-0"), 0);
	/* Fuller homes first: 4 on 4 free fills gpu-a100-0 exactly. */
	assert_int_equal(score_of(j, "gpu-a100-0"), PLACEMENT_MAX_SCORE);
	assert_true(score_of(j, "gpu-a100-0") > score_of(j, "gpu-h100-0"));
	assert_true(score_of(j, "gpu-h100-0") > score_of(j, "gpu-h100-1"));
	assert_true(score_of(j, "gpu-v100-0") > score_of(j, "gpu-a100-1"));
	assert_int_equal(score_of(j, "gpu-a100-1"), score_of(j, "gpu-h100-1"));
	assert_true(score_of(j, "gpu-h100-1") > 0);
	cJSON_Delete(j);

	/* A node the pod does not fit any more scores nothing either. */
	body = names_args(gpu_pod("prio-6", 6), request_nodes);
	j = call(ext_prioritize, f, body, &status);
	free(body);
	assert_int_equal(score_of(j, "gpu-a100-0"), 0);
	assert_int_equal(score_of(j, "gpu-v100-0"), 0);
	assert_true(score_of(j, "gpu-h100-0") > score_of(j, "gpu-h100-1"));
	cJSON_Delete(j);

	/* A pod asking no GPU: every node named once, each scored 0, in both modes. */
	body = names_args(gpu_pod("prio-0", 0), request_nodes);
	j = call(ext_prioritize, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_int_equal(cJSON_GetArraySize(j), 9);
	for (const char *const *n = request_nodes; *n; n++)
		assert_int_equal(score_of(j, *n), 0);
	cJSON_Delete(j);
	{
		cJSON *items = cJSON_CreateArray();

		cJSON_AddItemToArray(items, node_obj("gpu-a100-0", "8", "8", true, false));
		cJSON_AddItemToArray(items, node_obj("gpu-new-0", "8", "8", true, false));
		body = full_args(gpu_pod("prio-0-full", 0), items);
		j = call(ext_prioritize, f, body, &status);
		free(body);
		assert_int_equal(cJSON_GetArraySize(j), 2);
		assert_int_equal(score_of(j, "gpu-new-0"), 0);
		assert_int_equal(score_of(j, "gpu-a100-0"), 0);
		cJSON_Delete(j);
	}

	state_take(f, &after);
	assert_state_same(&before, &after, true, "after prioritize");
}

static void test_ext_prioritize_full_mode_uses_request_objects(void **state)
{
	struct fx *f = *state;
	cJSON *items = cJSON_CreateArray();
	unsigned status = 0;
	char *body;
	cJSON *j;

	cJSON_AddItemToArray(items, node_obj("gpu-a100-0", "8", "8", true, false));
	cJSON_AddItemToArray(items, node_obj("gpu-new-0", "8", "8", true, false));
	cJSON_AddItemToArray(items, node_obj("gpu-h100-1", "8", "8", true, true));
	cJSON_AddItemToArray(items, node_obj("gpu-a100-1", "4", "4", true, false));
	body = full_args(gpu_pod("prio-full", 4), items);
	j = call(ext_prioritize, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_int_equal(cJSON_GetArraySize(j), 4);
	assert_int_equal(score_of(j, "gpu-a100-0"), PLACEMENT_MAX_SCORE);
	/* The object says 4 GPUs: this pod fills it. */
	assert_int_equal(score_of(j, "gpu-a100-1"), PLACEMENT_MAX_SCORE);
	assert_true(score_of(j, "gpu-new-0") > 0);
	assert_true(score_of(j, "gpu-new-0") < PLACEMENT_MAX_SCORE);
	assert_int_equal(score_of(j, "gpu-h100-1"), 0);
	cJSON_Delete(j);
}

static void test_ext_prioritize_bad_requests(void **state)
{
	struct fx *f = *state;
	unsigned status = 0;
	char *body;
	cJSON *j;

	/* An invalid pod gets an empty list: kube-scheduler ignores errors anyway. */
	body = names_args(pod_with("bad", "{\"requests\":{\"nvidia.com/gpu\":\"2\"}}"),
			  request_nodes);
	j = call(ext_prioritize, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
	assert_true(cJSON_IsArray(j));
	assert_int_equal(cJSON_GetArraySize(j), 0);
	cJSON_Delete(j);

	j = call(ext_prioritize, f, "{\"Pod\":{", &status);
	assert_int_equal(status, 400);
	assert_contains(error_of(j), "bad prioritize request");
	cJSON_Delete(j);
}

/* ============================================================================
 * prioritize from the scores filter left (extender/cycle.h)
 * ========================================================================== */

static uint64_t cy_rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A cluster of <n> nodes of three known boards (by GFD labels) and one
 * unknown, some not Ready or cordoned or short of allocatable, with random
 * devices held; topology classes derived as troupe does. */
static struct cache *cy_cluster(struct ext_config *cfg, struct placement_registry *reg, int n,
				uint64_t *rng)
{
	static const char *const product[4] = { "NVIDIA-A100-SXM4-80GB", "Tesla-V100-SXM2-16GB",
						"NVIDIA-H100-80GB-HBM3", "Acme-X1" };
	static const unsigned count[4] = { 8, 8, 4, 8 };
	char err[CACHE_ERR_LEN], text[1024];
	struct cache *c;

	ext_config_defaults(cfg);
	cfg->cache.node_derive = placement_topo_derive;
	cfg->cache.node_release = placement_topo_release;
	cfg->cache.hook_ctx = reg;
	c = cache_new(&cfg->cache);
	assert_non_null(c);
	for (int i = 0; i < n; i++) {
		int b = (int)(cy_rng(rng) % 4);
		unsigned cap = count[b], alloc = cap - (cy_rng(rng) % 5 == 0 ? 1 : 0);
		uint64_t held = cy_rng(rng) & ((1u << cap) - 1) & cy_rng(rng);
		struct cache_node *node;
		cJSON *j;

		snprintf(text, sizeof(text),
			 "{\"metadata\":{\"name\":\"cy-%d\",\"labels\":{\"nvidia.com/gpu.product\":"
			 "\"%s\",\"nvidia.com/gpu.count\":\"%u\"}},\"spec\":{\"unschedulable\":%s},"
			 "\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"%u\"},\"allocatable\":"
			 "{\"nvidia.com/gpu\":\"%u\",\"cpu\":\"64\",\"memory\":\"512Gi\"},"
			 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
			 i, product[b], cap, cy_rng(rng) % 30 == 0 ? "true" : "false", cap, alloc,
			 cy_rng(rng) % 30 == 0 ? "False" : "True");
		j = cJSON_Parse(text);
		node = cache_node_parse(j, &cfg->cache, err, sizeof(err));
		cJSON_Delete(j);
		assert_non_null(node);
		assert_int_equal(cache_node_upsert(c, node), 0);
		for (unsigned d = 0; d < cap; d++) {
			struct cache_pod *pod;

			if (!(held & (1u << d)))
				continue;
			snprintf(text, sizeof(text),
				 "{\"metadata\":{\"name\":\"h-%d-%u\",\"namespace\":\"ml\",\"uid\":"
				 "\"h-%d-%u\",\"annotations\":{\"troupe.io/gpu-ids\":\"%u\"}},"
				 "\"spec\":{\"nodeName\":\"cy-%d\",\"containers\":[{\"name\":\"w\","
				 "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
				 "\"status\":{\"phase\":\"Running\"}}", i, d, i, d, d, i);
			j = cJSON_Parse(text);
			pod = cache_pod_parse(j, &cfg->cache, err, sizeof(err));
			cJSON_Delete(j);
			assert_non_null(pod);
			assert_int_equal(cache_pod_apply(c, pod), 0);
		}
	}
	cache_set_synced(c, true);
	return c;
}

/* The whole reply of <verb> for <body>, as text (caller frees). */
static char *cy_call(verb_fn verb, const struct ext_service *svc, const char *body)
{
	struct ext_reply r;
	char *out;

	ext_reply_init(&r);
	verb(svc, body, strlen(body), &r);
	assert_int_equal(r.status, 200);
	out = strdup(r.body.buf ? r.body.buf : "");
	ext_reply_fini(&r);
	return out;
}

/* Property: prioritize answers exactly what it answers with no filter scores
 * to reuse, over random clusters, pods (1 to 8 GPUs, topology policies) and
 * name lists: the names filter passed; a subsequence of them with a failing
 * node and an unknown one mixed in (other plugins drop, kube-scheduler never
 * adds, but troupe must not care); the passed names reversed; and after the
 * cache changed between filter and prioritize. The reuse must really happen
 * in the first two kinds, and never after a change. */
static void test_ext_prioritize_from_filter_equals_fresh(void **state)
{
	static const char *const policies[] = { NULL, "preferred", "none", "required" };
	struct placement_registry *reg = placement_registry_new();
	struct ext_config cfg;
	uint64_t rng = 0xc7c1e, used0 = 0, stale0 = 0, names0 = 0, used, stale, reused;
	struct ext_service svc = { 0 };
	struct cache *c;
	enum { N = 300 };

	(void)state;
	assert_non_null(reg);
	c = cy_cluster(&cfg, reg, N, &rng);
	svc.cache = c;
	svc.cfg = &cfg;
	svc.score = placement_score_find("topology");
	svc.source = "test";
	svc.cycle = ext_cycle_new();
	assert_non_null(svc.cycle);
	for (int round = 0; round < 80; round++) {
		int kind = round % 4;
		unsigned k = 1u << (cy_rng(&rng) % 4);
		const char *pol = policies[cy_rng(&rng) % 4];
		char podname[32], res[300], *fbody, *pbody, *fans, *with, *fresh;
		const char *names[N + 2];
		size_t nn = 0;
		cJSON *ans, *pass, *pod, *it;
		struct ext_cycle *cycle = svc.cycle;

		snprintf(podname, sizeof(podname), "cy-pod-%d", round);
		snprintf(res, sizeof(res), "{\"limits\":{\"nvidia.com/gpu\":\"%u\"}}", k);
		pod = pod_with(podname, res);
		if (pol)
			cJSON_AddItemToObject(cJSON_AddObjectToObject(cJSON_GetObjectItem(pod,
											   "metadata"),
								      "annotations"),
					      "troupe.io/topology", cJSON_CreateString(pol));
		/* Filter over a random two thirds of the nodes, in random order. */
		{
			static char nm[N][16];

			for (int i = 0; i < N; i++) {
				snprintf(nm[i], sizeof(nm[i]), "cy-%d", i);
				if (cy_rng(&rng) % 3)
					names[nn++] = nm[i];
			}
		}
		for (size_t i = nn - 1; i > 0; i--) {
			size_t j = cy_rng(&rng) % (i + 1);
			const char *t = names[i];

			names[i] = names[j];
			names[j] = t;
		}
		names[nn] = NULL;
		fbody = names_args(cJSON_Duplicate(pod, true), names);
		fans = cy_call(ext_filter, &svc, fbody);
		ans = cJSON_Parse(fans);
		pass = cJSON_GetObjectItemCaseSensitive(ans, "NodeNames");
		assert_true(cJSON_IsArray(pass));
		/* The prioritize list. */
		nn = 0;
		cJSON_ArrayForEach(it, pass) {
			if (kind == 1 && cy_rng(&rng) % 3 == 0)
				continue;       /* dropped by another plugin */
			names[nn++] = it->valuestring;
			if (kind == 1 && nn == 3)
				names[nn++] = "ghost-0";
		}
		if (kind == 1)
			names[nn++] = "cy-0";   /* may or may not have passed */
		if (kind == 2)
			for (size_t i = 0; i < nn / 2; i++) {
				const char *t = names[i];

				names[i] = names[nn - 1 - i];
				names[nn - 1 - i] = t;
			}
		names[nn] = NULL;
		pbody = names_args(cJSON_Duplicate(pod, true), names);
		if (kind == 3 && nn > 0) {
			/* A bind in between: the first passed node loses devices. */
			char err[CACHE_ERR_LEN], text[600];
			struct cache_pod *p;
			char uid[32];
			int r = -EAGAIN;
			cJSON *j;

			snprintf(text, sizeof(text),
				 "{\"metadata\":{\"name\":\"b-%d\",\"namespace\":\"ml\",\"uid\":\"b-%d\"},"
				 "\"spec\":{\"containers\":[{\"name\":\"w\",\"resources\":{\"limits\":"
				 "{\"nvidia.com/gpu\":\"1\"}}}]}}", round, round);
			j = cJSON_Parse(text);
			p = cache_pod_parse(j, &cfg.cache, err, sizeof(err));
			cJSON_Delete(j);
			assert_non_null(p);
			assert_int_equal(cache_pod_remember(c, p), 0);
			snprintf(uid, sizeof(uid), "b-%d", round);
			for (unsigned d = 0; d < 8 && r != 0; d++)
				r = cache_pod_assume(c, uid, names[0], &(uint64_t){ 1ULL << d });
			if (r != 0)
				nn = 0;         /* the node had nothing free: nothing changed */
		}
		with = cy_call(ext_prioritize, &svc, pbody);
		svc.cycle = NULL;
		fresh = cy_call(ext_prioritize, &svc, pbody);
		svc.cycle = cycle;
		if (strcmp(with, fresh) != 0)
			fail_msg("round %d (kind %d, %u GPUs, policy %s): prioritize from filter "
				 "answered\n%.400s\nbut afresh\n%.400s", round, kind, k,
				 pol ? pol : "(none)", with, fresh);
		ext_cycle_get_stats(svc.cycle, &used, &stale, &reused);
		if (kind <= 1 && nn > 0)
			assert_int_equal(used, used0 + 1);
		/* Every name filter passed was answered from its score: all of
		 * them in order, all but the two added in the subsequence. */
		if (kind == 0)
			assert_int_equal(reused - names0, nn);
		if (kind == 1)
			assert_true(reused - names0 + 2 >= nn && reused - names0 <= nn - 1);
		if (kind == 3 && nn > 0) {
			/* (nn == 0 here when no device could be taken: no change) */
			assert_int_equal(used, used0);
			assert_int_equal(stale, stale0 + 1);
		}
		used0 = used;
		stale0 = stale;
		names0 = reused;
		free(with);
		free(fresh);
		free(pbody);
		cJSON_Delete(ans);
		free(fans);
		free(fbody);
		cJSON_Delete(pod);
	}
	ext_cycle_free(svc.cycle);
	cache_free(c);
	placement_registry_free(reg);
}

/* The few entries kept: the oldest goes when a fifth pod is filtered; a pod
 * filtered again replaces its entry; an entry serves one prioritize; a pod whose
 * request changed since its filter is scored afresh. Every answer equals a
 * fresh one. */
static void test_ext_prioritize_from_filter_entries(void **state)
{
	struct placement_registry *reg = placement_registry_new();
	struct ext_service svc = { 0 };
	struct ext_config cfg;
	uint64_t rng = 0x5eed, used, stale, names;
	const char *list[41];
	char nm[40][16], *fb[6], *pb[6];
	struct cache *c;

	(void)state;
	assert_non_null(reg);
	c = cy_cluster(&cfg, reg, 40, &rng);
	svc.cache = c;
	svc.cfg = &cfg;
	svc.score = placement_score_find("topology");
	svc.source = "test";
	svc.cycle = ext_cycle_new();
	for (int i = 0; i < 40; i++) {
		snprintf(nm[i], sizeof(nm[i]), "cy-%d", i);
		list[i] = nm[i];
	}
	list[40] = NULL;
	/* Pods 0..4 ask 1 GPU; 5 is pod 0 again (same UID) asking 2. */
	for (int p = 0; p < 6; p++) {
		char name[16];

		snprintf(name, sizeof(name), "e-%d", p % 5);
		fb[p] = names_args(gpu_pod(name, p == 5 ? 2 : 1), list);
		pb[p] = names_args(gpu_pod(name, p == 5 ? 2 : 1), list);
	}
#define EXPECT(body, n_used, n_stale)                                                    \
	do {                                                                             \
		char *with = cy_call(ext_prioritize, &svc, body), *fresh;                \
		struct ext_cycle *keep = svc.cycle;                                      \
                                                                                         \
		svc.cycle = NULL;                                                        \
		fresh = cy_call(ext_prioritize, &svc, body);                             \
		svc.cycle = keep;                                                        \
		assert_string_equal(with, fresh);                                        \
		ext_cycle_get_stats(svc.cycle, &used, &stale, &names);                   \
		assert_int_equal(used, n_used);                                          \
		assert_int_equal(stale, n_stale);                                        \
		free(with);                                                              \
		free(fresh);                                                             \
	} while (0)
	for (int p = 0; p < 5; p++)
		free(cy_call(ext_filter, &svc, fb[p]));
	EXPECT(pb[0], 0, 0);    /* the oldest of five went */
	EXPECT(pb[4], 1, 0);
	EXPECT(pb[4], 1, 0);    /* taken: a second prioritize scores afresh */
	free(cy_call(ext_filter, &svc, fb[1]));
	free(cy_call(ext_filter, &svc, fb[1]));  /* filtered again: replaces its entry */
	EXPECT(pb[1], 2, 0);
	EXPECT(pb[2], 3, 0);
	/* Pod e-0 filtered asking 2 GPUs, then prioritized asking 1. */
	free(cy_call(ext_filter, &svc, fb[5]));
	EXPECT(pb[0], 3, 1);
#undef EXPECT
	assert_true(names > 0);
	for (int p = 0; p < 6; p++) {
		free(fb[p]);
		free(pb[p]);
	}
	ext_cycle_free(svc.cycle);
	cache_free(c);
	placement_registry_free(reg);
}

int main(void)
{
#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		FX(test_ext_prioritize_scores_every_input_node),
		FX(test_ext_prioritize_full_mode_uses_request_objects),
		FX(test_ext_prioritize_bad_requests),
		cmocka_unit_test(test_ext_prioritize_from_filter_equals_fresh),
		cmocka_unit_test(test_ext_prioritize_from_filter_entries),
	};
#undef FX

	/* Refusals are logged as warnings; keep the test output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
