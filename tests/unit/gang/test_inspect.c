/* Unit tests of what the manager shows people (inspect.c): a gang's view
 * carries its state, plan and place in the fair order as the manager holds
 * them, and the queue list every queue with its share and its gangs.
 */
#include "fixture.h"

#include "gang/internal.h"

static const uint64_t S = 1000000000ULL;

/* A gang entry in <gm>'s table, waiting since <since> (lock taken here). */
static void put_waiting(struct gang_manager *gm, const char *name, int32_t priority,
			const char *queue, uint64_t since)
{
	struct gang *g;

	pthread_mutex_lock(&gm->lock);
	g = gang__get(gm, "ml", name, true);
	assert_non_null(g);
	g->priority = priority;
	g->quorum = 2;
	snprintf(g->queue, sizeof(g->queue), "%s", queue);
	snprintf(g->reason, sizeof(g->reason), "gang ml/%s: no room", name);
	gang__enter(g, GANG_WAITING, since);
	pthread_mutex_unlock(&gm->lock);
}

/* The fake clock, counting its reads: the manager's expiry thread runs its
 * first fairness pass at once (its clock then stands still, so no other), and
 * that pass would find the gangs put here member-less and make them idle. A
 * second read by that thread is the top of its loop after the pass. */
struct counting_clock {
	struct fake_clock clk;
	unsigned long reads;            /* atomic */
};

static uint64_t counting_now(void *ctx)
{
	struct counting_clock *cc = ctx;

	__atomic_add_fetch(&cc->reads, 1, __ATOMIC_RELAXED);
	return fake_clock_now(&cc->clk);
}

static void wait_first_pass(struct counting_clock *cc)
{
	while (__atomic_load_n(&cc->reads, __ATOMIC_RELAXED) < 2)
		usleep(1000);
}

static const struct gang_view *find(const struct gang_view *v, unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	fail_msg("gang %s not listed", name);
	return NULL;
}

static const struct gang_queue_view *find_queue(const struct gang_queue_view *q, unsigned n,
						const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(q[i].name, name) == 0)
			return &q[i];
	fail_msg("queue %s not listed", name);
	return NULL;
}

/* The fair order's positions as gang__precedes ranks them (priority, then
 * share, then age, then key), the same through the list and one gang's view;
 * the list is sorted by name; the queues carry weight, share, GPUs and counts. */
static void test_gang_views_show_the_fair_order_and_the_queues(void **state)
{
	static const struct {
		const char *name;
		int32_t priority;
		const char *queue;
		uint64_t age_s;
		unsigned position;
	} gangs[] = {
		{ "busy", 0, "busy", 100, 5 },          /* share 0.5: last */
		{ "hi", 10, "busy", 0, 1 },             /* priority first */
		{ "idle-new", 0, "idle", 10, 3 },
		{ "idle-old", 0, "idle", 50, 2 },       /* share 0, longest wait */
		{ "idle-twin", 0, "idle", 10, 4 },      /* as idle-new: by key */
	};
	struct counting_clock cc = { .reads = 0 };
	struct gang_config cfg;
	struct cache *c = cache_new(&gpu_opts);
	struct gang_manager *gm;
	struct gang_view *views, one;
	struct gang_queue_view *queues;
	const struct gang_queue_view *q;
	unsigned n, nq;
	uint64_t t;

	(void)state;
	fake_config(&cfg, &cc.clk);
	cfg.now_ns = counting_now;
	cfg.clock_ctx = &cc;
	cfg.n_queues = 2;
	snprintf(cfg.queue_names[0], sizeof(cfg.queue_names[0]), "heavy");
	cfg.queue_weights[0] = 2.0;
	snprintf(cfg.queue_names[1], sizeof(cfg.queue_names[1]), "unused");
	cfg.queue_weights[1] = 3.0;
	assert_non_null(c);
	cache_nodes(c, 2);                                      /* 16 GPUs */
	assert_int_equal(cache_reserve_for(c, "u-busy", "n0", 0xff, "busy"), 0);
	assert_int_equal(cache_reserve_for(c, "u-heavy", "n1", 0x0f, "heavy"), 0);
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	t = fake_clock_now(&cc.clk);
	wait_first_pass(&cc);
	for (unsigned i = 0; i < ARRAY_SIZE(gangs); i++)
		put_waiting(gm, gangs[i].name, gangs[i].priority, gangs[i].queue,
			    t - gangs[i].age_s * S);
	assert_int_equal(gang_view_list(gm, &views, &n), 0);
	assert_int_equal(n, ARRAY_SIZE(gangs));
	for (unsigned i = 0; i < n; i++) {
		const struct gang_view *v = find(views, n, gangs[i].name);

		/* Sorted by name, as the table above is. */
		assert_string_equal(views[i].name, gangs[i].name);
		assert_string_equal(gang_view_state_name(v->state), "waiting");
		if (v->fair_position != gangs[i].position)
			fail_msg("%s: position %u, want %u", v->name, v->fair_position,
				 gangs[i].position);
		assert_int_equal(v->quorum, 2);
		assert_null(v->slots);
		assert_true(fabs(v->waiting_s - (double)gangs[i].age_s) < 1e-6);
		assert_non_null(strstr(v->reason, "no room"));
		assert_int_equal(gang_view_get(gm, "ml", gangs[i].name, &one), 0);
		assert_int_equal(one.fair_position, gangs[i].position);
		assert_true(fabs(one.share - v->share) < 1e-12);
		gang_view_fini(&one);
	}
	assert_true(fabs(find(views, n, "busy")->share - 0.5) < 1e-9);
	gang_view_list_free(views, n);
	assert_int_equal(gang_view_get(gm, "ml", "nobody", &one), -ENOENT);
	gang_view_fini(&one);

	assert_int_equal(gang_queue_list(gm, &queues, &nq), 0);
	assert_int_equal(nq, 4);                /* busy heavy idle unused, by name */
	assert_string_equal(queues[0].name, "busy");
	assert_string_equal(queues[3].name, "unused");
	q = find_queue(queues, nq, "busy");
	assert_int_equal(q->gpus, 8);
	assert_int_equal(q->waiting, 2);
	assert_true(fabs(q->share - 0.5) < 1e-9);
	q = find_queue(queues, nq, "heavy");
	assert_int_equal(q->gpus, 4);
	assert_true(fabs(q->weight - 2.0) < 1e-12);
	assert_true(fabs(q->share - 0.125) < 1e-9);     /* 4 of 16 at weight 2 */
	assert_int_equal(q->waiting, 0);
	q = find_queue(queues, nq, "idle");
	assert_int_equal(q->waiting, 3);
	assert_int_equal(q->planned + q->binding, 0);
	assert_int_equal(q->gpus, 0);
	q = find_queue(queues, nq, "unused");
	assert_true(fabs(q->weight - 3.0) < 1e-12);
	free(queues);
	gang_manager_free(gm);
	cache_free(c);
}

/* A parked bind's answer: nothing to post here. */
static void no_release(void *ctx, bool ok, const char *why, const char *plan)
{
	(void)ctx;
	(void)ok;
	(void)why;
	(void)plan;
}

/* A planned gang's view lists its plan: a slot per member on the node the
 * plan chose, open until claimed, and the time left to its deadline; a bind
 * parked makes it "binding", the slot claimed by that member. */
static void test_gang_view_shows_the_plan_and_its_claims(void **state)
{
	struct fake_clock clk;
	struct gang_config cfg;
	struct cache *c = cache_new(&gpu_opts);
	struct gang_manager *gm;
	struct cache_node_view views[2];
	struct gang_view v;
	bool allowed[2];
	char reason[640];
	uint64_t dev = 0;
	struct gang_member mb = { .uid = "g-0", .ns = "ml", .name = "g-0", .group = "g",
				  .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	unsigned on_n0 = 0;

	(void)state;
	fake_config(&cfg, &clk);
	assert_non_null(c);
	cache_nodes(c, 2);
	idle_group(c, "g", 2, 2);
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	read_two_nodes(c, views);
	assert_int_equal(gang_filter(gm, &mb, views, 2, allowed, reason, sizeof(reason)),
			 GANG_ALLOWED);
	cache_read_end(c);
	assert_int_equal(gang_view_get(gm, "ml", "g", &v), 0);
	assert_string_equal(gang_view_state_name(v.state), "planned");
	assert_int_equal(v.quorum, 2);
	assert_int_equal(v.n_slots, 2);
	assert_int_equal(v.fair_position, 0);
	assert_true(v.deadline_s > 0 && v.deadline_s <= v.timeout_s);
	for (unsigned i = 0; i < 2; i++) {
		assert_int_equal(v.slots[i].gpus, 8);
		assert_int_equal(v.slots[i].devices, 0xff);
		assert_string_equal(v.slots[i].member, "");
		on_n0 += strcmp(v.slots[i].node, "n0") == 0;
	}
	assert_int_equal(on_n0, 1);             /* one on each node */
	gang_view_fini(&v);
	assert_int_equal(gang_bind(gm, &mb, "n0", no_release, NULL, &dev, reason, sizeof(reason)),
			 GANG_BIND_HELD);
	assert_int_equal(gang_view_get(gm, "ml", "g", &v), 0);
	assert_string_equal(gang_view_state_name(v.state), "binding");
	assert_int_equal(v.n_parked, 1);
	{
		struct gang_queue_view *q;
		unsigned nq;

		assert_int_equal(gang_queue_list(gm, &q, &nq), 0);
		assert_int_equal(nq, 1);        /* the namespace's queue */
		assert_int_equal(q[0].planned, 1);
		assert_int_equal(q[0].binding, 1);
		assert_int_equal(q[0].waiting, 0);
		free(q);
	}
	for (unsigned i = 0; i < 2; i++)
		assert_string_equal(v.slots[i].member,
				    strcmp(v.slots[i].node, "n0") == 0 ? "g-0" : "");
	gang_view_fini(&v);
	gang_manager_shutdown(gm);
	gang_manager_free(gm);
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_views_show_the_fair_order_and_the_queues),
		cmocka_unit_test(test_gang_view_shows_the_plan_and_its_claims),
	};

	log_set_level(LOG_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
