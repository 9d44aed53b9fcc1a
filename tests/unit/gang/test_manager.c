/* Unit tests of the gang table and lifecycle (manager.c): the defaults in one
 * place, the bind retry budget, a config the manager cannot use refused,
 * idle entries forgotten on the manager's clock, and the cap on entries: the
 * idle ones unseen longest forgotten first, a gang in flight never.
 */
#include "fixture.h"

#include "gang/internal.h"

/* Every default, as docs/configuration.md lists them. */
static void test_gang_config_defaults_are_the_documented_ones(void **state)
{
	struct gang_config cfg;

	(void)state;
	memset(&cfg, 0xa5, sizeof(cfg));
	gang_config_defaults(&cfg);
	assert_int_equal(cfg.default_timeout_s, 60);
	assert_int_equal(cfg.http_timeout_s, 30);
	assert_int_equal(cfg.margin_s, 3);
	assert_int_equal(cfg.starvation_s, 30);
	assert_int_equal(cfg.settle_s, 2);
	assert_int_equal(cfg.idle_forget_s, 600);
	assert_int_equal(cfg.max_entries, GANG_MAX_ENTRIES_DEFAULT);
	assert_false(cfg.allow_partial_preemption);
	assert_int_equal(cfg.levels.n, 0);      /* gang_default_levels */
	assert_int_equal(cfg.n_queues, 0);
	assert_null(cfg.now_ns);                /* the monotonic clock */
}

/* httpTimeout less the margin, at least 1 s; the defaults' with no config. */
static void test_gang_bind_budget_is_the_http_timeout_less_the_margin(void **state)
{
	struct gang_config cfg;

	(void)state;
	assert_int_equal(gang_bind_budget_s(NULL), 27);
	gang_config_defaults(&cfg);
	assert_int_equal(gang_bind_budget_s(&cfg), 27);
	cfg.http_timeout_s = 10;
	cfg.margin_s = 4;
	assert_int_equal(gang_bind_budget_s(&cfg), 6);
	cfg.margin_s = 10;
	assert_int_equal(gang_bind_budget_s(&cfg), 1);
}

/* A config the manager cannot use is refused (EINVAL), never rewritten; a
 * starvation of 0 is a setting (at once), not a missing value. */
static void test_gang_manager_refuses_a_config_it_cannot_use(void **state)
{
	static const struct {
		unsigned default_timeout_s, http_timeout_s, margin_s;
		bool ok;
	} cases[] = {
		{ 60, 30, 3, true },
		{ 60, 30, 29, true },
		{ 60, 30, 30, false },  /* no time left to answer parked binds */
		{ 60, 30, 31, false },
		{ 0, 30, 3, false },
		{ 60, 0, 0, false },
	};
	struct cache *c = cache_new(&gpu_opts);

	(void)state;
	assert_non_null(c);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gang_config cfg;
		struct gang_manager *gm;

		gang_config_defaults(&cfg);
		cfg.default_timeout_s = cases[i].default_timeout_s;
		cfg.http_timeout_s = cases[i].http_timeout_s;
		cfg.margin_s = cases[i].margin_s;
		cfg.starvation_s = 0;
		errno = 0;
		gm = gang_manager_new(c, &cfg);
		if (cases[i].ok) {
			assert_non_null(gm);
			assert_int_equal(gm->cfg.margin_s, cases[i].margin_s);
			assert_int_equal(gm->cfg.starvation_s, 0);
		} else {
			assert_null(gm);
			assert_int_equal(errno, EINVAL);
		}
		gang_manager_free(gm);
	}
	cache_free(c);
}

/* The manager forgets a gang that has nothing in flight once nobody asked
 * about it for idle_forget_s, and never one with a plan. */
static void test_gang_idle_entries_are_forgotten_planned_ones_kept(void **state)
{
	struct fake_clock clk;
	struct gang_config cfg;
	struct cache *c = cache_new(&gpu_opts);
	struct cache_node_view views[2];
	struct gang_manager *gm;
	struct gang_member mb = { .ns = "ml", .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	struct gang_stats st;
	char reason[640];
	bool allowed[2];

	(void)state;
	fake_config(&cfg, &clk);
	cfg.idle_forget_s = 1;
	assert_non_null(c);
	cache_nodes(c, 2);
	idle_group(c, "whole", 2, 2);           /* both members: it is planned */
	idle_group(c, "short", 3, 1);           /* 1 of 3 members: it waits for them */
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	read_two_nodes(c, views);
	mb.uid = mb.name = "whole-0";
	mb.group = "whole";
	assert_int_equal(gang_filter(gm, &mb, views, 2, allowed, reason, sizeof(reason)),
			 GANG_ALLOWED);
	mb.uid = mb.name = "short-0";
	mb.group = "short";
	assert_int_equal(gang_filter(gm, &mb, views, 2, allowed, reason, sizeof(reason)),
			 GANG_REFUSED);
	cache_read_end(c);
	gang_get_stats(gm, &st);
	assert_int_equal(st.entries, 2);
	/* Not yet idle for a whole second: kept. */
	fake_clock_advance(&clk, 1000000000ULL);
	gang__fairness_pass(gm, fake_clock_now(&clk));
	gang_get_stats(gm, &st);
	assert_int_equal(st.entries, 2);
	/* Past it: the expiry thread's own pass forgets "short" (waited for on
	 * the real clock, with a deadline). A whole second on, whenever its last
	 * pass was, the thread is due another. */
	fake_clock_advance(&clk, 1000000000ULL);
	for (int i = 0; i < 1000; i++) {
		gang_get_stats(gm, &st);
		if (st.entries < 2)
			break;
		usleep(10 * 1000);
	}
	assert_int_equal(st.entries, 1);        /* "short" forgotten ... */
	assert_int_equal(st.active, 1);         /* ... "whole" still planned */
	fake_clock_advance(&clk, 1500000000ULL);
	gang__fairness_pass(gm, fake_clock_now(&clk));
	gang_get_stats(gm, &st);
	assert_int_equal(st.entries, 1);
	gang_manager_free(gm);
	cache_free(c);
}
/* Filter a member of group <group> (made with idle_group: members missing, so
 * the gang is refused and its entry stays idle). */
static enum gang_verdict filter_group(struct gang_manager *gm, struct cache *c,
				      const char *group, char *reason, size_t len)
{
	struct cache_node_view views[2];
	struct gang_member mb = { .ns = "ml", .group = group,
				  .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	char uid[64];
	bool allowed[2];
	enum gang_verdict v;

	snprintf(uid, sizeof(uid), "%s-0", group);
	mb.uid = mb.name = uid;
	read_two_nodes(c, views);
	v = gang_filter(gm, &mb, views, 2, allowed, reason, len);
	cache_read_end(c);
	return v;
}

static bool has_entry(struct gang_manager *gm, const char *group)
{
	bool has;

	pthread_mutex_lock(&gm->lock);
	has = gang__get(gm, "ml", group, false) != NULL;
	pthread_mutex_unlock(&gm->lock);
	return has;
}

/* At the cap, each new group forgets the idle one unseen longest (a cap of 4
 * forgets one at a time). */
static void test_gang_entry_cap_forgets_the_idle_unseen_longest(void **state)
{
	static const char *const groups[] = { "g0", "g1", "g2", "g3", "g4", "g5" };
	struct fake_clock clk;
	struct gang_config cfg;
	struct cache *c = cache_new(&gpu_opts);
	struct gang_manager *gm;
	struct gang_stats st;
	char reason[640];

	(void)state;
	fake_config(&cfg, &clk);
	cfg.max_entries = 4;
	assert_non_null(c);
	cache_nodes(c, 2);
	for (int i = 0; i < 6; i++)
		idle_group(c, groups[i], 3, 1);
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(filter_group(gm, c, groups[i], reason, sizeof(reason)),
				 GANG_REFUSED);
		fake_clock_advance(&clk, 1000000000ULL);
	}
	gang_get_stats(gm, &st);
	assert_int_equal(st.entries, 4);
	/* Full: g4 takes the place of g0, the one unseen longest, then g5 that
	 * of g1. */
	filter_group(gm, c, "g4", reason, sizeof(reason));
	assert_false(has_entry(gm, "g0"));
	assert_true(has_entry(gm, "g1"));
	assert_true(has_entry(gm, "g4"));
	fake_clock_advance(&clk, 1000000000ULL);
	filter_group(gm, c, "g5", reason, sizeof(reason));
	assert_false(has_entry(gm, "g1"));
	for (int i = 2; i < 6; i++)
		assert_true(has_entry(gm, groups[i]));
	gang_get_stats(gm, &st);
	assert_int_equal(st.entries, 4);
	assert_int_equal(st.entries_dropped, 2);
	assert_int_equal(st.entries_refused, 0);
	gang_manager_free(gm);
	cache_free(c);
}

/* A planned gang is never forgotten for room; when every entry is in flight, a
 * new group is refused (and counted) rather than the table grown. */
static void test_gang_entry_cap_never_forgets_a_gang_in_flight(void **state)
{
	struct fake_clock clk;
	struct gang_config cfg;
	struct cache *c = cache_new(&gpu_opts);
	struct gang_manager *gm;
	struct gang_stats st;
	char reason[640];

	(void)state;
	fake_config(&cfg, &clk);
	cfg.max_entries = 2;
	assert_non_null(c);
	cache_nodes(c, 2);
	idle_group(c, "whole", 2, 2);           /* both members: it is planned */
	idle_group(c, "x", 3, 1);
	idle_group(c, "y", 3, 1);
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	assert_int_equal(filter_group(gm, c, "whole", reason, sizeof(reason)), GANG_ALLOWED);
	fake_clock_advance(&clk, 1000000000ULL);
	filter_group(gm, c, "x", reason, sizeof(reason));
	fake_clock_advance(&clk, 1000000000ULL);
	/* Full: "whole" is older but planned; "x" goes. */
	filter_group(gm, c, "y", reason, sizeof(reason));
	assert_true(has_entry(gm, "whole"));
	assert_false(has_entry(gm, "x"));
	assert_true(has_entry(gm, "y"));
	gang_get_stats(gm, &st);
	assert_int_equal(st.active, 1);
	gang_manager_free(gm);

	/* A cap of one, taken by the planned gang: nothing can go. */
	cfg.max_entries = 1;
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	assert_int_equal(filter_group(gm, c, "whole", reason, sizeof(reason)), GANG_ALLOWED);
	assert_int_equal(filter_group(gm, c, "x", reason, sizeof(reason)), GANG_REFUSED);
	assert_false(has_entry(gm, "x"));
	gang_get_stats(gm, &st);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.entries_refused, 1);
	assert_int_equal(st.entries_dropped, 0);
	gang_manager_free(gm);
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_config_defaults_are_the_documented_ones),
		cmocka_unit_test(test_gang_bind_budget_is_the_http_timeout_less_the_margin),
		cmocka_unit_test(test_gang_manager_refuses_a_config_it_cannot_use),
		cmocka_unit_test(test_gang_idle_entries_are_forgotten_planned_ones_kept),
		cmocka_unit_test(test_gang_entry_cap_forgets_the_idle_unseen_longest),
		cmocka_unit_test(test_gang_entry_cap_never_forgets_a_gang_in_flight),
	};

	log_set_level(LOG_ERROR);       /* the manager logs every plan and release */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
