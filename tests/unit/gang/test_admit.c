/* Unit tests of admission at filter (admit.c): every member of a mixed gang
 * gets a place of its own size, a PodGroup's minResources is checked before
 * anything is reserved, a Volcano PodGroup's minMember and queue are the gang's,
 * and a gang naming no quorum waits for its members to settle (on a fake
 * clock).
 */
#include "model.h"

#include "common/util.h"

/* A gang whose members ask different amounts (g3: one 4-GPU member, three of
 * 2): the first member's filter plans a place of each member's own size, so
 * every member, the larger one included, finds a place of its size, binds
 * there, and the last completes the quorum. */
static void test_gang_mixed_members_each_get_a_place_of_their_size(void **state)
{
	struct model *m = m_new(9, 1u << 2);
	static const unsigned order[] = { 1, 2, 0, 3 };         /* a 2-GPU member first */
	struct cache_stats before, after;
	unsigned ok = 0;

	(void)state;
	cache_get_stats(m->c, &before);
	for (unsigned o = 0; o < 4; o++) {
		int pi = m->gangs[2].member[order[o]];
		struct mpod *p = &m->pods[pi];
		struct gang_member mb = { .uid = p->uid, .ns = "ml", .name = p->name, .group = "g3",
					  .req = { .demand = { .gpu_resource = 0, .gpus = p->gpus } } };
		struct cache_node_view views[MN];
		bool allowed[MN];
		char reason[640];
		unsigned n = 0;
		int node = -1;
		uint64_t dev = 0;

		n = m_read_views(m, views);
		if (gang_filter(m->gm, &mb, views, n, allowed, reason, sizeof(reason)) !=
		    GANG_ALLOWED)
			fail_msg("member %u (%u GPUs) refused: %s", order[o], p->gpus, reason);
		cache_read_end(m->c);
		if (o == 0) {
			m->gangs[2].planned = true;
			m->gangs[2].plan_t = m_now();
			m->gangs[2].round = 1;
			assert_int_equal(m_reservations(m, 2, -1), 4);
			cache_get_stats(m->c, &after);
			/* 4 + 2 + 2 + 2 GPUs reserved, not four of the first one's size,
			 * and charged to the gang's queue (its namespace): 10 of 40. */
			assert_int_equal(after.gpus_held - before.gpus_held, 10);
			assert_true(fabs(gang_queue_share(m->gm, "ml") - 0.25) < 1e-9);
		}
		for (unsigned i = 0; i < n && node < 0; i++)
			if (allowed[i])
				node = (int)i;
		assert_true(node >= 0);
		if (gang_bind(m->gm, &mb, m_nodes[node], m_release, m_hold_ctx(m, pi), &dev, reason,
			      sizeof(reason)) != GANG_BIND_HELD)
			fail_msg("member %u (%u GPUs) not held on %s: %s", order[o], p->gpus,
				 m_nodes[node], reason);
		assert_int_equal(__builtin_popcountll(dev), p->gpus);
		p->held = true;
		p->round = 1;
		pthread_mutex_lock(&m->lock);
		/* Nothing released before the last member; then all four, ok. */
		assert_int_equal(m->n_rel, o < 3 ? 0 : 4);
		for (unsigned i = 0; i < m->n_rel; i++)
			ok += m->rel[i].ok;
		pthread_mutex_unlock(&m->lock);
		m_check(m, false);
	}
	assert_int_equal(ok, 4);
	assert_int_equal(m_reservations(m, 2, -1), 0);
	m_free(m);
}

/* Parse and apply a Pod, or a PodGroup, given as JSON. */
static void apply_json(struct cache *c, const char *json, bool podgroup)
{
	char err[CACHE_ERR_LEN] = "";
	cJSON *o = cJSON_Parse(json);

	assert_non_null(o);
	if (podgroup)
		assert_int_equal(cache_podgroup_apply(c, cache_podgroup_parse(o, &gpu_opts, err,
									      sizeof(err))), 0);
	else
		assert_int_equal(cache_pod_apply(c, cache_pod_parse(o, &gpu_opts, err, sizeof(err))),
				 0);
	cJSON_Delete(o);
}

/* Two 8-GPU pods of one group in namespace ml, w0 and w1, their group named by
 * <group_key> in <meta_field> ("labels" or "annotations"), with <extra> more
 * metadata ("" or ',"labels":{...}'). */
static void apply_two_members(struct cache *c, const char *meta_field, const char *group_key,
			      const char *group, const char *extra)
{
	for (int i = 0; i < 2; i++) {
		char json[640];

		snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"w%d\",\"namespace\":\"ml\","
			 "\"uid\":\"w%d\",\"%s\":{\"%s\":\"%s\"}%s},"
			 "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
			 "{\"nvidia.com/gpu\":\"8\"}}}]}}", i, i, meta_field, group_key, group, extra);
		apply_json(c, json, false);
	}
}

/* Member <mb>'s filter over nodes n0 and n1. */
static enum gang_verdict filter_two(struct cache *c, struct gang_manager *gm,
				    const struct gang_member *mb, bool allowed[2], char *reason,
				    size_t len)
{
	struct cache_node_view views[2];
	enum gang_verdict v;

	cache_read_begin(c);
	assert_true(cache_node_lookup(c, "n0", 2, &views[0]));
	assert_true(cache_node_lookup(c, "n1", 2, &views[1]));
	v = gang_filter(gm, mb, views, 2, allowed, reason, len);
	cache_read_end(c);
	return v;
}

/* A gang on two 8-GPU nodes, n0 and n1, seen through member w0 of <group>
 * asking 8 GPUs: the cache and config made by two_nodes_init, the manager by
 * two_nodes_start (after the test set its config and objects). */
struct two_nodes {
	struct gang_config cfg;
	struct cache *c;
	struct gang_manager *gm;
	struct gang_member mb;
	char reason[640];
	bool allowed[2];
};

static void two_nodes_init(struct two_nodes *t, const char *group)
{
	memset(t, 0, sizeof(*t));
	gang_config_defaults(&t->cfg);
	t->c = cache_new(&gpu_opts);
	assert_non_null(t->c);
	cache_nodes(t->c, 2);
	t->mb = (struct gang_member){ .uid = "w0", .ns = "ml", .name = "w0", .group = group };
	t->mb.req.demand.gpus = 8;
}

static void two_nodes_start(struct two_nodes *t)
{
	t->gm = gang_manager_new(t->c, &t->cfg);
	assert_non_null(t->gm);
}

/* w0's filter over n0 and n1; the reason in t->reason. */
static enum gang_verdict two_nodes_filter(struct two_nodes *t)
{
	return filter_two(t->c, t->gm, &t->mb, t->allowed, t->reason, sizeof(t->reason));
}

static void two_nodes_fini(struct two_nodes *t)
{
	gang_manager_free(t->gm);
	cache_free(t->c);
}

/* A PodGroup's minResources that the offered nodes cannot hold refuses the gang
 * before anything is planned or reserved. */
static void test_gang_filter_checks_the_podgroup_min_resources(void **state)
{
	struct two_nodes t;
	struct cache_node_view view;

	(void)state;
	two_nodes_init(&t, "big");
	t.cfg.default_timeout_s = 5;
	apply_two_members(t.c, "labels", "scheduling.x-k8s.io/pod-group", "big", "");
	apply_json(t.c, "{\"metadata\":{\"name\":\"big\",\"namespace\":\"ml\"},\"spec\":{\"minMember\":2,"
		   "\"minResources\":{\"nvidia.com/gpu\":\"32\"}}}", true);
	two_nodes_start(&t);
	assert_int_equal(two_nodes_filter(&t), GANG_REFUSED);
	assert_non_null(strstr(t.reason, "minResources needs 32 GPUs; the offered nodes have 16 free"));
	assert_false(t.allowed[0] || t.allowed[1]);
	/* Nothing was reserved. */
	cache_read_begin(t.c);
	assert_true(cache_node_lookup(t.c, "n0", 2, &view));
	assert_int_equal(view.used, 0);
	cache_read_end(t.c);
	/* minResources the offered nodes can hold: the gang is planned. */
	apply_json(t.c, "{\"metadata\":{\"name\":\"big\",\"namespace\":\"ml\"},\"spec\":{\"minMember\":2,"
		   "\"minResources\":{\"nvidia.com/gpu\":\"16\"}}}", true);
	assert_int_equal(two_nodes_filter(&t), GANG_ALLOWED);
	assert_true(t.allowed[0] || t.allowed[1]);
	two_nodes_fini(&t);
}

/* Another scheduler's PodGroup gives a gang its terms: a Volcano group's
 * minMember holds its members (named by Volcano's pod annotation) until that
 * many exist, and its spec.queue is the queue the gang is ordered in, over the
 * members' own queue label. */
static void test_gang_takes_quorum_and_queue_from_a_volcano_podgroup(void **state)
{
	struct two_nodes t;
	struct gang_view v;

	(void)state;
	two_nodes_init(&t, "vc");
	t.mb.queue = "own";
	apply_two_members(t.c, "annotations", "scheduling.k8s.io/group-name", "vc",
			  ",\"labels\":{\"troupe.io/queue\":\"own\"}");
	apply_json(t.c, "{\"apiVersion\":\"scheduling.volcano.sh/v1beta1\",\"kind\":\"PodGroup\","
		   "\"metadata\":{\"name\":\"vc\",\"namespace\":\"ml\"},"
		   "\"spec\":{\"minMember\":3,\"queue\":\"research\"}}", true);
	two_nodes_start(&t);
	assert_int_equal(two_nodes_filter(&t), GANG_REFUSED);
	assert_non_null(strstr(t.reason, "waiting for its members: 2 of 3 exist"));
	/* minMember 2: planned, in the PodGroup's queue. */
	apply_json(t.c, "{\"apiVersion\":\"scheduling.volcano.sh/v1beta1\",\"kind\":\"PodGroup\","
		   "\"metadata\":{\"name\":\"vc\",\"namespace\":\"ml\"},"
		   "\"spec\":{\"minMember\":2,\"queue\":\"research\"}}", true);
	assert_int_equal(two_nodes_filter(&t), GANG_ALLOWED);
	assert_int_equal(gang_view_get(t.gm, "ml", "vc", &v), 0);
	assert_int_equal(v.quorum, 2);
	assert_string_equal(v.queue, "research");
	gang_view_fini(&v);
	two_nodes_fini(&t);
}

/* A member held back by a scheduling gate (Kueue's admission gate) is not a
 * member kube-scheduler can place: a gang of two with one gated waits for its
 * members, and once the gate is gone it is planned. */
static void test_gang_gated_member_is_not_there_yet(void **state)
{
	struct two_nodes t;
	unsigned exist = 0, bound = 0;

	(void)state;
	two_nodes_init(&t, "kq");
	apply_two_members(t.c, "labels", "scheduling.x-k8s.io/pod-group", "kq", "");
	/* w1 again, gated. */
	apply_json(t.c, "{\"metadata\":{\"name\":\"w1\",\"namespace\":\"ml\",\"uid\":\"w1\","
		   "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"kq\"}},\"spec\":{"
		   "\"schedulingGates\":[{\"name\":\"kueue.x-k8s.io/admission\"}],"
		   "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
		   "{\"nvidia.com/gpu\":\"8\"}}}]}}", false);
	apply_json(t.c, "{\"metadata\":{\"name\":\"kq\",\"namespace\":\"ml\"},"
		   "\"spec\":{\"minMember\":2}}", true);
	cache_group_count(t.c, "ml", "kq", &exist, &bound);
	assert_int_equal(exist, 1);
	two_nodes_start(&t);
	assert_int_equal(two_nodes_filter(&t), GANG_REFUSED);
	assert_non_null(strstr(t.reason, "waiting for its members: 1 of 2 exist"));
	/* The gate removed: both there, planned. */
	apply_two_members(t.c, "labels", "scheduling.x-k8s.io/pod-group", "kq", "");
	assert_int_equal(two_nodes_filter(&t), GANG_ALLOWED);
	two_nodes_fini(&t);
}

/* Members each pinned to a node by their nodeSelector (Kueue's topology
 * assignment): kube-scheduler offers a member only its own node, and troupe
 * plans the others on theirs, so the gang is admitted; without the pins the
 * one offered node could not hold both. */
static void test_gang_members_pinned_each_to_a_node(void **state)
{
	struct two_nodes t;
	struct cache_node_view one;
	struct gang_view v;
	char pg[128];
	bool seen[12] = { false };

	(void)state;
	/* Twelve members on twelve nodes: more nodes than kinds of request a
	 * gang may have (GANG_MAX_NEEDS), which pins must not count against. */
	two_nodes_init(&t, "kq");
	cache_nodes(t.c, 12);
	for (int i = 0; i < 12; i++) {
		char json[640];

		snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"w%d\",\"namespace\":\"ml\","
			 "\"uid\":\"w%d\",\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"kq\"}},"
			 "\"spec\":{\"nodeSelector\":{\"kubernetes.io/hostname\":\"n%d\"},"
			 "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
			 "{\"nvidia.com/gpu\":\"8\"}}}]}}", i, i, i);
		apply_json(t.c, json, false);
	}
	snprintf(pg, sizeof(pg), "{\"metadata\":{\"name\":\"kq\",\"namespace\":\"ml\"},"
		 "\"spec\":{\"minMember\":%d}}", 12);
	apply_json(t.c, pg, true);
	{
		struct cache_pod_info pi;

		assert_int_equal(cache_pod_get(t.c, "w11", &pi), 0);
		assert_string_equal(pi.pinned, "n11");
	}
	two_nodes_start(&t);
	cache_read_begin(t.c);
	assert_true(cache_node_lookup(t.c, "n0", 2, &one));
	if (gang_filter(t.gm, &t.mb, &one, 1, t.allowed, t.reason, sizeof(t.reason)) !=
	    GANG_ALLOWED)
		fail_msg("refused: %s", t.reason);
	cache_read_end(t.c);
	assert_true(t.allowed[0]);
	assert_int_equal(gang_view_get(t.gm, "ml", "kq", &v), 0);
	assert_int_equal(v.n_slots, 12);
	/* One member on each node: the pins, and the asking member's n0. */
	for (unsigned i = 0; i < v.n_slots; i++) {
		int node = atoi(v.slots[i].node + 1);

		assert_true(node >= 0 && node < 12 && !seen[node]);
		seen[node] = true;
	}
	gang_view_fini(&v);
	two_nodes_fini(&t);
}

/* A member pinned to n0 by its nodeSelector beside one free to go elsewhere,
 * each asking 4 GPUs, with 6 GPUs free on n0. The pinned member's filter sees
 * n0 alone, which cannot hold both: it is answered GANG_RETRY (an error
 * kube-scheduler retries after its backoff), not refused, since a refusal
 * would wait for a cluster event the other member's plan is not. The free
 * member's filter, over n0 and n1, plans the pinned one on n0 and itself on n1
 * (the pinned need packed first), and each slot is open to its own member's
 * kind alone. */
static void test_gang_member_pinned_beside_one_free(void **state)
{
	struct two_nodes t;
	struct cache_node_view n0;
	struct gang_member free_mb;
	bool has;

	(void)state;
	two_nodes_init(&t, "mix");
	apply_json(t.c, "{\"metadata\":{\"name\":\"filler\",\"namespace\":\"ml\",\"uid\":\"f\","
		   "\"annotations\":{\"troupe.io/gpu-ids\":\"0,1\"}},\"spec\":{\"nodeName\":\"n0\","
		   "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
		   "{\"nvidia.com/gpu\":\"2\"}}}]},\"status\":{\"phase\":\"Running\"}}", false);
	for (int i = 0; i < 2; i++) {
		char json[512];

		snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"w%d\",\"namespace\":\"ml\","
			 "\"uid\":\"w%d\",\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"mix\"}},"
			 "\"spec\":{%s\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
			 "{\"nvidia.com/gpu\":\"4\"}}}]}}", i, i,
			 i ? "" : "\"nodeSelector\":{\"kubernetes.io/hostname\":\"n0\"},");
		apply_json(t.c, json, false);
	}
	apply_json(t.c, "{\"metadata\":{\"name\":\"mix\",\"namespace\":\"ml\"},"
		   "\"spec\":{\"minMember\":2}}", true);
	two_nodes_start(&t);
	t.mb.req.demand.gpus = 4;
	t.mb.pinned = "n0";
	cache_read_begin(t.c);
	assert_true(cache_node_lookup(t.c, "n0", 2, &n0));
	assert_int_equal(gang_filter(t.gm, &t.mb, &n0, 1, t.allowed, t.reason, sizeof(t.reason)),
			 GANG_RETRY);
	cache_read_end(t.c);
	assert_non_null(strstr(t.reason, "is pinned to node n0 and other members are not"));
	free_mb = t.mb;
	free_mb.uid = free_mb.name = "w1";
	free_mb.pinned = NULL;
	if (filter_two(t.c, t.gm, &free_mb, t.allowed, t.reason, sizeof(t.reason)) != GANG_ALLOWED)
		fail_msg("the free member refused: %s", t.reason);
	assert_false(t.allowed[0]);
	assert_true(t.allowed[1]);
	assert_int_equal(gang_has_slot(t.gm, &t.mb, "n0", &has), GANG_ALLOWED);
	assert_true(has);
	assert_int_equal(gang_has_slot(t.gm, &free_mb, "n0", &has), GANG_ALLOWED);
	assert_false(has);
	assert_int_equal(gang_has_slot(t.gm, &free_mb, "n1", &has), GANG_ALLOWED);
	assert_true(has);
	two_nodes_fini(&t);
}

/* Apply pod <uid> of group "team" (label only: no PodGroup, no quorum named)
 * asking 8 GPUs. */
static void settle_pod(struct cache *c, const char *uid)
{
	char json[512], err[CACHE_ERR_LEN];
	cJSON *o;

	snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\","
		 "\"uid\":\"%s\",\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"team\"}},"
		 "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
		 "{\"nvidia.com/gpu\":\"8\"}}}]}}", uid, uid);
	o = cJSON_Parse(json);
	assert_int_equal(cache_pod_apply(c, cache_pod_parse(o, &gpu_opts, err, sizeof(err))), 0);
	cJSON_Delete(o);
}

static enum gang_verdict settle_filter(struct gang_manager *gm, struct cache *c, const char *uid,
				       bool *allowed, char *reason, size_t len)
{
	struct gang_member mb = { .uid = uid, .ns = "ml", .name = uid, .group = "team",
				  .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	struct cache_node_view views[3];
	enum gang_verdict v;
	unsigned n = 0;

	cache_read_begin(c);
	for (int i = 0; i < 3; i++) {
		char name[8];

		snprintf(name, sizeof(name), "n%d", i);
		if (cache_node_lookup(c, name, strlen(name), &views[n]))
			n++;
	}
	assert_int_equal(n, 3);
	v = gang_filter(gm, &mb, views, n, allowed, reason, len);
	cache_read_end(c);
	return v;
}

/* A bind of <uid> to n0 before any plan (kube-scheduler does not bind a pod
 * its filter refused, but a request can come from anyone). */
static enum gang_bind_result settle_bind(struct gang_manager *gm, const char *uid, char *reason,
					 size_t len)
{
	struct gang_member mb = { .uid = uid, .ns = "ml", .name = uid, .group = "team",
				  .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	uint64_t devices = 0;

	return gang_bind(gm, &mb, "n0", NULL, NULL, &devices, reason, len);
}

/* When troupe first learnt of pod <uid> (the cache's clock, util_now_ns). */
static uint64_t known_ns(struct cache *c, const char *uid)
{
	struct cache_pod_info info;

	assert_int_equal(cache_pod_get(c, uid, &info), 0);
	return info.known_ns;
}

/* A gang naming no quorum (label only) is the members that exist; the first
 * member's filter must not plan (or place alone) a gang whose other members
 * are still being created: it is asked to retry until none has arrived for
 * gang.settle_seconds, then the whole gang is planned. The manager's clock is
 * a fake one set against the cache's arrival times, so the boundary is exact:
 * the wait counts from the newest member, not the first. */
static void test_gang_without_a_quorum_waits_for_its_members_to_settle(void **state)
{
	const uint64_t settle = 2000000000ULL;
	struct fake_clock clk;
	struct gang_config cfg;
	struct cache *c = cache_new(&gpu_opts);
	struct gang_manager *gm;
	uint64_t t0, t1;
	char reason[640];
	bool allowed[3];

	(void)state;
	fake_config(&cfg, &clk);
	cfg.default_timeout_s = 10;
	cfg.settle_s = 2;
	assert_non_null(c);
	cache_nodes(c, 3);
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	/* One member so far: not placed alone as a gang of one. */
	settle_pod(c, "t0");
	t0 = known_ns(c, "t0");
	fake_clock_set(&clk, t0);
	assert_int_equal(settle_filter(gm, c, "t0", allowed, reason, sizeof(reason)), GANG_RETRY);
	assert_non_null(strstr(reason, "names no quorum"));
	assert_non_null(strstr(reason, "1 so far"));
	/* Nor is it bound alone while the filter asks it to wait: the bind of
	 * a gang naming no quorum waits for its members as its filter does. */
	assert_int_equal(settle_bind(gm, "t0", reason, sizeof(reason)), GANG_BIND_REFUSED);
	assert_non_null(strstr(reason, "names no quorum"));
	/* A second arrives (strictly later on the cache's clock): just short of
	 * the settle time after it, and past it after the first, it still
	 * waits. */
	while (util_now_ns() <= t0)
		;
	settle_pod(c, "t1");
	t1 = known_ns(c, "t1");
	assert_true(t1 > t0);
	fake_clock_set(&clk, t1 + settle - 1);
	assert_int_equal(settle_filter(gm, c, "t0", allowed, reason, sizeof(reason)), GANG_RETRY);
	assert_non_null(strstr(reason, "2 so far"));
	assert_int_equal(settle_bind(gm, "t1", reason, sizeof(reason)), GANG_BIND_REFUSED);
	assert_non_null(strstr(reason, "2 so far"));
	/* Settled: planned for both, one node each (8 GPUs a member). */
	fake_clock_set(&clk, t1 + settle);
	assert_int_equal(settle_filter(gm, c, "t0", allowed, reason, sizeof(reason)),
			 GANG_ALLOWED);
	{
		struct cache_stats st;

		cache_get_stats(c, &st);
		assert_int_equal(st.gpus_held, 16);
	}
	/* Another member created after the plan does not stop the planned gang. */
	settle_pod(c, "t2");
	assert_int_equal(settle_filter(gm, c, "t1", allowed, reason, sizeof(reason)),
			 GANG_ALLOWED);
	gang_manager_free(gm);
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_mixed_members_each_get_a_place_of_their_size),
		cmocka_unit_test(test_gang_filter_checks_the_podgroup_min_resources),
		cmocka_unit_test(test_gang_takes_quorum_and_queue_from_a_volcano_podgroup),
		cmocka_unit_test(test_gang_gated_member_is_not_there_yet),
		cmocka_unit_test(test_gang_members_pinned_each_to_a_node),
		cmocka_unit_test(test_gang_member_pinned_beside_one_free),
		cmocka_unit_test(test_gang_without_a_quorum_waits_for_its_members_to_settle),
	};

	log_set_level(LOG_ERROR);       /* the manager logs every plan and release */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
