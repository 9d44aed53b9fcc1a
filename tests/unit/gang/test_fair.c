/* Unit tests of the fair order and starvation holds (fair.c, held_nodes.c):
 * gang__precedes and the rule it calls, gang_fair_precedes (priority, then
 * the queue's weighted share, then waiting age, then the key), holds grown for the starving head on the emptiest nodes and kept as
 * GPUs free, starvation_s counted on a fake clock (0: at once), and
 * gang_hold_note reading the held nodes while they change (run it under TSan).
 */
#include "fixture.h"

#include <limits.h>

#include "gang/internal.h"

static const uint64_t S = 1000000000ULL;

/* A gang whose pods are deleted stops waiting at once, not at the next
 * fairness pass: the next gang is not refused "waits behind" it. (Found end to
 * end: kube-scheduler does not retry a refused pod until a cluster event comes,
 * so one stale refusal could stall a gang for minutes.) */
static void test_gang_deleted_gang_is_nobody_to_wait_behind(void **state)
{
	struct gang_config cfg;
	struct cache *c = cache_new(&gpu_opts);
	struct cache_node_view views[2];
	struct gang_manager *gm;
	struct gang_member mb = { .ns = "ml", .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	struct gang_stats st;
	char reason[640];
	bool allowed[2];

	(void)state;
	gang_config_defaults(&cfg);
	assert_non_null(c);
	cache_nodes(c, 2);
	idle_group(c, "old", 2, 2);
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	read_two_nodes(c, views);
	/* Offered one node, "old" (2 x 8 GPUs) cannot be planned: it waits. */
	mb.uid = mb.name = "old-0";
	mb.group = "old";
	assert_int_equal(gang_filter(gm, &mb, views, 1, allowed, reason, sizeof(reason)),
			 GANG_REFUSED);
	/* "new", the same shape, waits too, behind "old" (it came later). */
	idle_group(c, "new", 2, 2);
	mb.uid = mb.name = "new-0";
	mb.group = "new";
	assert_int_equal(gang_filter(gm, &mb, views, 1, allowed, reason, sizeof(reason)),
			 GANG_REFUSED);
	cache_read_end(c);
	gang_get_stats(gm, &st);
	assert_int_equal(st.waiting, 2);
	/* "old"'s pods go; offered both nodes, "new" is planned at once. */
	assert_int_equal(cache_pod_delete(c, "old-0"), 0);
	assert_int_equal(cache_pod_delete(c, "old-1"), 0);
	read_two_nodes(c, views);
	reason[0] = '\0';
	if (gang_filter(gm, &mb, views, 2, allowed, reason, sizeof(reason)) != GANG_ALLOWED)
		fail_msg("gang new refused: %s", reason);
	cache_read_end(c);
	gang_get_stats(gm, &st);
	assert_int_equal(st.waiting, 0);
	gang_manager_free(gm);
	cache_free(c);
}

/* A gang entry in <gm>'s table, set as a test wants it (lock taken here). */
static struct gang *put_gang(struct gang_manager *gm, const char *name, int32_t priority,
			     const char *queue, uint64_t waiting_since)
{
	struct gang *g;

	pthread_mutex_lock(&gm->lock);
	g = gang__get(gm, "ml", name, true);
	assert_non_null(g);
	g->priority = priority;
	snprintf(g->queue, sizeof(g->queue), "%s", queue);
	gang__enter(g, GANG_WAITING, waiting_since);
	pthread_mutex_unlock(&gm->lock);
	return g;
}

/* Reserve <devices> on <node> for <queue>: usage the shares count. */
static void use(struct cache *c, const char *key, const char *node, uint64_t devices,
		const char *queue)
{
	assert_int_equal(cache_reserve_for(c, key, node, devices, queue), 0);
}

/* Priority first; then the lower weighted dominant share; then the longer
 * wait; then the key, so the order is total. */
static void test_gang_fair_order_is_priority_then_share_then_age(void **state)
{
	struct fake_clock clk;
	struct gang_config cfg;
	struct cache *c = cache_new(&gpu_opts);
	struct gang_manager *gm;
	struct gang *hi, *busy, *idle_old, *idle_new, *idle_twin;
	struct shares sh;
	uint64_t t;

	(void)state;
	fake_config(&cfg, &clk);
	cfg.n_queues = 1;
	snprintf(cfg.queue_names[0], sizeof(cfg.queue_names[0]), "heavy");
	cfg.queue_weights[0] = 2.0;
	assert_non_null(c);
	cache_nodes(c, 2);                      /* 16 GPUs */
	use(c, "u-busy", "n0", 0xff, "busy");   /* 8 of 16: share 0.5 */
	use(c, "u-heavy", "n1", 0xff, "heavy"); /* 8 of 16 at weight 2: 0.25 */
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	t = fake_clock_now(&clk);
	hi = put_gang(gm, "hi", 10, "busy", t);
	busy = put_gang(gm, "busy", 0, "busy", t - 100 * S);
	idle_old = put_gang(gm, "idle-old", 0, "idle", t - 50 * S);
	idle_new = put_gang(gm, "idle-new", 0, "idle", t - 10 * S);
	idle_twin = put_gang(gm, "idle-twin", 0, "idle", t - 10 * S);
	gang__shares_load(gm, &sh);
	assert_true(fabs(gang__share_of(gm, &sh, "busy") - 0.5) < 1e-9);
	assert_true(fabs(gang__share_of(gm, &sh, "heavy") - 0.25) < 1e-9);
	assert_true(fabs(gang__share_of(gm, &sh, "idle")) < 1e-9);
	pthread_mutex_lock(&gm->lock);
	/* Priority beats share and age. */
	assert_true(gang__precedes(gm, &sh, hi, idle_old) > 0);
	assert_true(gang__precedes(gm, &sh, idle_old, hi) < 0);
	/* Same priority: the lower share first, however long the other waited. */
	assert_true(gang__precedes(gm, &sh, idle_new, busy) > 0);
	assert_true(gang__precedes(gm, &sh, busy, idle_new) < 0);
	/* Same share: the longer wait first. */
	assert_true(gang__precedes(gm, &sh, idle_old, idle_new) > 0);
	assert_true(gang__precedes(gm, &sh, idle_new, idle_old) < 0);
	/* All the same: by key. */
	assert_true(gang__precedes(gm, &sh, idle_new, idle_twin) > 0);
	assert_true(gang__precedes(gm, &sh, idle_twin, idle_new) < 0);
	pthread_mutex_unlock(&gm->lock);
	/* The weight counts: "heavy" at 0.25 goes before "busy" at 0.5. */
	{
		struct gang *h = put_gang(gm, "heavy", 0, "heavy", t);

		pthread_mutex_lock(&gm->lock);
		assert_true(gang__precedes(gm, &sh, h, busy) > 0);
		assert_true(gang__precedes(gm, &sh, idle_new, h) > 0);
		pthread_mutex_unlock(&gm->lock);
	}
	gang__shares_fini(&sh);
	gang_manager_free(gm);
	cache_free(c);
}

/* Nodes n0 (8 free), n1 (4 free) and n2 (2 free), and a waiting gang "x" of two
 * 8-GPU members (real pods, so the expiry thread's passes keep it waiting). */
struct holds_case {
	struct fake_clock clk;
	struct cache *c;
	struct gang_manager *gm;
	struct gang *g;
};

static void holds_case_init(struct holds_case *hc, unsigned starvation_s)
{
	struct gang_config cfg;

	fake_config(&cfg, &hc->clk);
	cfg.starvation_s = starvation_s;
	cfg.starvation_holds = true;
	hc->c = cache_new(&gpu_opts);
	assert_non_null(hc->c);
	cache_nodes(hc->c, 3);
	idle_group(hc->c, "x", 2, 2);
	use(hc->c, "small-1", "n1", 0x0f, "small");
	use(hc->c, "small-2", "n2", 0x3f, "small");
	hc->gm = gang_manager_new(hc->c, &cfg);
	assert_non_null(hc->gm);
	hc->g = put_gang(hc->gm, "x", 0, "ml", fake_clock_now(&hc->clk));
	pthread_mutex_lock(&hc->gm->lock);
	hc->g->quorum = 2;
	hc->g->need = 2;
	hc->g->need_gpus = 16;
	hc->g->req.demand.gpus = 8;
	hc->g->req.demand.gpu_resource = 0;
	pthread_mutex_unlock(&hc->gm->lock);
}

static void holds_case_fini(struct holds_case *hc)
{
	gang_manager_free(hc->gm);
	cache_free(hc->c);
}

static void grow(struct holds_case *hc)
{
	pthread_mutex_lock(&hc->gm->lock);
	gang__holds_grow(hc->gm, hc->g);
	gang__unlock(hc->gm);
}

/* The targets are the emptiest nodes until their allocatable takes every
 * member; everything free on them is held; a later pass holds what freed
 * since, on the same targets; filter refuses the targets to lower pods. */
static void test_gang_holds_grow_on_the_emptiest_nodes_as_gpus_free(void **state)
{
	struct holds_case hc;
	struct cache_stats st;
	char note[400];

	(void)state;
	holds_case_init(&hc, 30);
	grow(&hc);
	pthread_mutex_lock(&hc.gm->lock);
	assert_int_equal(hc.g->n_targets, 2);           /* n0 and n1 take both members */
	assert_string_equal(hc.g->targets[0], "n0");
	assert_string_equal(hc.g->targets[1], "n1");
	assert_int_equal(hc.g->n_holds, 2);
	assert_int_equal(hc.g->holds[0].devices, 0xff);
	assert_int_equal(hc.g->holds[1].devices, 0xf0);
	pthread_mutex_unlock(&hc.gm->lock);
	cache_get_stats(hc.c, &st);
	assert_int_equal(st.gpus_held, 4 + 6 + 8 + 4);    /* small pods, then holds */
	/* Filter: refused to lower pods on the targets only. */
	assert_true(gang_hold_note(hc.gm, "n1", -1, note, sizeof(note)));
	assert_non_null(strstr(note, "held for gang ml/x (priority 0, queue ml"));
	assert_true(gang_hold_note(hc.gm, "n0", 0, note, sizeof(note)));
	assert_false(gang_hold_note(hc.gm, "n0", 1, note, sizeof(note)));
	assert_false(gang_hold_note(hc.gm, "n2", 0, note, sizeof(note)));
	/* n2 empties: it has the most free now, but the targets already holding
	 * come first (n1, with 4 freed, before n0 with none); what n1 freed is
	 * held. */
	assert_int_equal(cache_reservation_release(hc.c, "small-2"), 0);
	assert_int_equal(cache_reservation_release(hc.c, "small-1"), 0);
	grow(&hc);
	pthread_mutex_lock(&hc.gm->lock);
	assert_int_equal(hc.g->n_targets, 2);
	assert_string_equal(hc.g->targets[0], "n1");
	assert_string_equal(hc.g->targets[1], "n0");
	assert_int_equal(hc.g->n_holds, 3);
	assert_int_equal(hc.g->holds[2].devices, 0x0f);
	pthread_mutex_unlock(&hc.gm->lock);
	assert_false(gang_hold_note(hc.gm, "n2", 0, note, sizeof(note)));
	/* Released: nothing held, nothing refused. */
	pthread_mutex_lock(&hc.gm->lock);
	gang__holds_release(hc.gm, hc.g);
	gang__unlock(hc.gm);
	assert_false(gang_hold_note(hc.gm, "n0", 0, note, sizeof(note)));
	cache_get_stats(hc.c, &st);
	assert_int_equal(st.gpus_held, 0);
	holds_case_fini(&hc);
}

/* A gang of 2 x 8 GPUs offered one node, refused for capacity and waiting, on
 * a fake clock advanced by <advance_ns> after the manager started (shared by
 * the tests of how the starvation clock counts). STARVE_DEFAULT keeps
 * gang.starvation_seconds' default. */
#define STARVE_DEFAULT UINT_MAX

struct starving {
	struct fake_clock clk;
	struct gang_config cfg;
	struct cache *c;
	struct gang_manager *gm;
	struct gang_member mb;
	uint64_t started_ns;            /* the clock when the manager started */
};

static void starving_setup(struct starving *s, unsigned starvation_s, uint64_t advance_ns)
{
	struct cache_node_view views[2];
	char reason[640];
	bool allowed[2];

	memset(s, 0, sizeof(*s));
	s->mb = (struct gang_member){ .uid = "big-0", .ns = "ml", .name = "big-0", .group = "big",
				      .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	fake_config(&s->cfg, &s->clk);
	s->cfg.starvation_holds = true;         /* off by default; these test them */
	if (starvation_s != STARVE_DEFAULT)
		s->cfg.starvation_s = starvation_s;
	s->c = cache_new(&gpu_opts);
	assert_non_null(s->c);
	cache_nodes(s->c, 2);
	idle_group(s->c, "big", 2, 2);
	s->gm = gang_manager_new(s->c, &s->cfg);
	assert_non_null(s->gm);
	s->started_ns = fake_clock_now(&s->clk);
	fake_clock_advance(&s->clk, advance_ns);
	read_two_nodes(s->c, views);
	assert_int_equal(gang_filter(s->gm, &s->mb, views, 1, allowed, reason, sizeof(reason)),
			 GANG_REFUSED);
	cache_read_end(s->c);
}

static void starving_fini(struct starving *s)
{
	gang_manager_free(s->gm);
	cache_free(s->c);
}

/* The fairness pass holds for the head once it has waited starvation_s on the
 * manager's clock, and gang.starvation_seconds 0 means at once: after <wait_s>
 * waiting and a pass, capacity is <held> for it. */
static void starve(unsigned starvation_s, uint64_t wait_s, bool held)
{
	struct starving s;
	struct gang_stats st;
	char note[400];

	starving_setup(&s, starvation_s, 0);
	fake_clock_advance(&s.clk, wait_s * S);
	gang__fairness_pass(s.gm, fake_clock_now(&s.clk));
	gang_get_stats(s.gm, &st);
	assert_int_equal(st.waiting, 1);
	if (held) {
		assert_int_equal(st.held_sets, 2);
		assert_true(gang_hold_note(s.gm, "n0", 0, note, sizeof(note)));
	} else {
		assert_int_equal(st.held_sets, 0);
		assert_false(gang_hold_note(s.gm, "n0", 0, note, sizeof(note)));
	}
	starving_fini(&s);
}

static void test_gang_starvation_counts_on_the_managers_clock(void **state)
{
	(void)state;
	starve(30, 29, false);
	starve(30, 30, true);
	starve(0, 0, true);
}

/* The fairness pass reads the clock once, then works with the lock dropped
 * and taken again; a gang refused in between has a later stamp than the pass's
 * reading. That gang neither starved (30s) nor went unseen (300s): the pass
 * holds nothing and keeps it waiting. (Found in CI: the plain difference
 * wrapped, the pass held both nodes for the first gang, and the next gang,
 * offered views read before the holds were let go, was refused.) */
static void test_gang_pass_with_an_earlier_clock_reading_changes_nothing(void **state)
{
	struct cache_node_view views[2];
	struct starving s;
	struct gang_stats st;
	char reason[640], note[400];
	bool allowed[2];

	(void)state;
	/* The pass's clock reading is from before the gang started waiting. */
	starving_setup(&s, STARVE_DEFAULT, S / 1000);
	gang__fairness_pass(s.gm, s.started_ns);
	gang_get_stats(s.gm, &st);
	assert_int_equal(st.waiting, 1);
	assert_int_equal(st.held_sets, 0);
	assert_false(gang_hold_note(s.gm, "n0", 0, note, sizeof(note)));
	/* Offered both nodes, it is planned on views read after the pass. */
	read_two_nodes(s.c, views);
	assert_int_equal(gang_filter(s.gm, &s.mb, views, 2, allowed, reason, sizeof(reason)),
			 GANG_ALLOWED);
	cache_read_end(s.c);
	starving_fini(&s);
}

/* A manager over two nodes and the never-filtered gang "pictured" (2 x 8
 * GPUs), fed by a watch (<live>) or a snapshot, after one fairness pass. */
static struct gang_manager *pictured_pass(struct cache **c, struct gang_config *cfg,
					  struct fake_clock *clk, bool live, struct gang_stats *st)
{
	struct gang_manager *gm;

	*c = cache_new(&gpu_opts);
	assert_non_null(*c);
	if (live)
		cache_set_live(*c);
	cache_nodes(*c, 2);
	idle_group(*c, "pictured", 2, 2);
	gm = gang_manager_new(*c, cfg);
	assert_non_null(gm);
	gang__fairness_pass(gm, fake_clock_now(clk));
	gang_get_stats(gm, st);
	return gm;
}

/* A gang no filter call showed (kube-scheduler's own fit check can keep it
 * from ever calling troupe) is found by the pass from the watch, and held for
 * once starving. A snapshot file's pending gang is only a picture: without a
 * watch (the cache not live) the pass finds nothing, holds nothing, and the
 * next gang does not wait behind it. (Found in snapshot mode: a starvation
 * hold took whole nodes for a gang nobody had filtered.) */
static void test_gang_only_a_watch_shows_gangs_nobody_filtered(void **state)
{
	struct fake_clock clk;
	struct gang_config cfg;
	struct cache *c;
	struct cache_node_view views[2];
	struct gang_manager *gm;
	struct gang_member mb = { .uid = "new-0", .ns = "ml", .name = "new-0", .group = "new",
				  .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	struct gang_stats st;
	char reason[640];
	bool allowed[2];

	(void)state;
	fake_config(&cfg, &clk);
	cfg.starvation_holds = true;
	cfg.starvation_s = 0;
	gm = pictured_pass(&c, &cfg, &clk, false, &st);
	assert_int_equal(st.waiting, 0);
	assert_int_equal(st.held_sets, 0);
	/* A gang a filter call shows is planned on both nodes, not deferred. */
	idle_group(c, "new", 2, 2);
	read_two_nodes(c, views);
	if (gang_filter(gm, &mb, views, 2, allowed, reason, sizeof(reason)) != GANG_ALLOWED)
		fail_msg("gang new refused: %s", reason);
	cache_read_end(c);
	gang_manager_free(gm);
	cache_free(c);
	/* The same cluster fed by a watch: the pass finds the gang and holds
	 * both nodes for it. */
	gm = pictured_pass(&c, &cfg, &clk, true, &st);
	assert_int_equal(st.waiting, 1);
	assert_int_equal(st.held_sets, 2);
	gang_manager_free(gm);
	cache_free(c);
}

struct note_reader {
	struct gang_manager *gm;
	bool stop;                      /* atomic */
	unsigned seen, bad;
};

static void *read_notes(void *arg)
{
	struct note_reader *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		char note[400];

		if (gang_hold_note(r->gm, "n1", 0, note, sizeof(note))) {
			r->seen++;
			if (!strstr(note, "held for gang ml/x (priority 0, queue ml"))
				r->bad++;
		}
	}
	return NULL;
}

/* gang_hold_note takes no lock: readers see a whole set or none while the
 * holds are grown and released over and over (a TSan build checks the
 * reclamation). */
static void test_gang_hold_note_reads_held_nodes_while_they_change(void **state)
{
	struct holds_case hc;
	struct note_reader r[2];
	pthread_t t[2];

	(void)state;
	holds_case_init(&hc, 30);
	for (int i = 0; i < 2; i++) {
		r[i] = (struct note_reader){ .gm = hc.gm };
		assert_int_equal(pthread_create(&t[i], NULL, read_notes, &r[i]), 0);
	}
	for (int round = 0; round < 300; round++) {
		grow(&hc);
		pthread_mutex_lock(&hc.gm->lock);
		gang__holds_release(hc.gm, hc.g);
		gang__unlock(hc.gm);
	}
	grow(&hc);
	for (int i = 0; i < 2; i++) {
		char note[400];

		/* Both see the last set. */
		while (!gang_hold_note(hc.gm, "n1", 0, note, sizeof(note)))
			;
		__atomic_store_n(&r[i].stop, true, __ATOMIC_RELEASE);
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].bad, 0);
	}
	holds_case_fini(&hc);
}

/* The rule on its own terms (gang_fair_precedes, which gang__precedes and
 * troupe simulate both call): each term decides against every later one. */
static void test_gang_fair_rule_is_priority_then_share_then_age_then_key(void **state)
{
	/* a wins on the term named, and loses on every later term. */
	const struct gang_fair_key prio_a = { 1, 0.9, 100, "z" }, prio_b = { 0, 0.1, 1, "a" };
	const struct gang_fair_key share_a = { 0, 0.1, 100, "z" }, share_b = { 0, 0.9, 1, "a" };
	const struct gang_fair_key age_a = { 0, 0.5, 1, "z" }, age_b = { 0, 0.5, 100, "a" };
	const struct gang_fair_key key_a = { 0, 0.5, 1, "ml/a" }, key_b = { 0, 0.5, 1, "ml/b" };
	const struct gang_fair_key neg = { -5, 0.0, 1, "a" };

	(void)state;
	assert_true(gang_fair_precedes(&prio_a, &prio_b) > 0);
	assert_true(gang_fair_precedes(&prio_b, &prio_a) < 0);
	assert_true(gang_fair_precedes(&share_a, &share_b) > 0);
	assert_true(gang_fair_precedes(&share_b, &share_a) < 0);
	assert_true(gang_fair_precedes(&age_a, &age_b) > 0);
	assert_true(gang_fair_precedes(&age_b, &age_a) < 0);
	assert_true(gang_fair_precedes(&key_a, &key_b) > 0);
	assert_true(gang_fair_precedes(&key_b, &key_a) < 0);
	/* A negative priority is lower, whatever its share and age. */
	assert_true(gang_fair_precedes(&neg, &prio_b) < 0);
	/* Equal in every term: neither goes first. */
	assert_true(gang_fair_precedes(&key_a, &key_a) < 0);
}

/* The reference the random cases are checked against: the four terms
 * compared in order, written as a tuple comparison. */
static int fair_reference(const struct gang_fair_key *a, const struct gang_fair_key *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority ? 1 : -1;
	if (a->share != b->share)
		return a->share < b->share ? 1 : -1;
	if (a->waiting_since_ns != b->waiting_since_ns)
		return a->waiting_since_ns < b->waiting_since_ns ? 1 : -1;
	return strcmp(a->key, b->key) < 0 ? 1 : -1;
}

/* Many random pairs drawn from few values per term (so ties reach every
 * later term): the rule agrees with the reference, and is antisymmetric
 * where the keys differ. */
static void test_gang_fair_rule_random_pairs_agree_with_the_tuple_order(void **state)
{
	static const char *const keys[] = { "ml/a", "ml/b", "ml/c" };
	uint64_t x = 0x243f6a8885a308d3ULL;

	(void)state;
	for (unsigned i = 0; i < 20000; i++) {
		struct gang_fair_key k[2];

		for (unsigned j = 0; j < 2; j++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			k[j] = (struct gang_fair_key){ (int32_t)(x % 3) - 1, (double)((x >> 8) % 3) / 4,
						      (x >> 16) % 3, keys[(x >> 24) % 3] };
		}
		assert_int_equal(gang_fair_precedes(&k[0], &k[1]), fair_reference(&k[0], &k[1]));
		if (strcmp(k[0].key, k[1].key) != 0)
			assert_int_equal(gang_fair_precedes(&k[0], &k[1]),
					 -gang_fair_precedes(&k[1], &k[0]));
	}
}

/* A queue's weight: its queues: entry, else 1; a weight <= 0 counts as 1. */
static void test_gang_config_queue_weight_defaults_to_one(void **state)
{
	struct gang_config cfg;

	(void)state;
	gang_config_defaults(&cfg);
	cfg.n_queues = 2;
	snprintf(cfg.queue_names[0], sizeof(cfg.queue_names[0]), "research");
	cfg.queue_weights[0] = 2.0;
	snprintf(cfg.queue_names[1], sizeof(cfg.queue_names[1]), "broken");
	cfg.queue_weights[1] = 0.0;
	assert_true(gang_config_queue_weight(&cfg, "research") == 2.0);
	assert_true(gang_config_queue_weight(&cfg, "broken") == 1.0);
	assert_true(gang_config_queue_weight(&cfg, "other") == 1.0);
}

/* A queue troupe's config does not name takes its weight from another
 * scheduler's Queue (Volcano's first, then KAI's); the config's entry wins over
 * both; with neither, 1. The weighted share, and the queue's view, follow. */
static void test_gang_queue_weight_from_other_schedulers_queues(void **state)
{
	struct fake_clock clk;
	struct gang_config cfg;
	struct cache *c = cache_new(&gpu_opts);
	struct cache_queue vq = { "research", 4 }, kq = { "research", 2 }, kq2 = { "infer", 8 };
	struct gang_queue_view *qs = NULL;
	struct gang_manager *gm;
	struct shares sh;
	const char *from = NULL;
	unsigned n = 0;

	(void)state;
	fake_config(&cfg, &clk);
	cfg.n_queues = 1;
	snprintf(cfg.queue_names[0], sizeof(cfg.queue_names[0]), "infer");
	cfg.queue_weights[0] = 2.0;
	assert_non_null(c);
	cache_nodes(c, 2);                              /* 16 GPUs */
	use(c, "u-research", "n0", 0xff, "research");   /* 8 of 16 */
	use(c, "u-infer", "n1", 0xff, "infer");         /* 8 of 16 */
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	assert_true(gang__queue_weight(gm, "research", &from) == 1.0);
	assert_string_equal(from, "default");
	assert_int_equal(cache_queue_apply(c, CACHE_Q_KAI, &kq), 0);
	assert_int_equal(cache_queue_apply(c, CACHE_Q_KAI, &kq2), 0);
	assert_true(gang__queue_weight(gm, "research", &from) == 2.0);
	assert_string_equal(from, "KAI Scheduler");
	assert_int_equal(cache_queue_apply(c, CACHE_Q_VOLCANO, &vq), 0);
	assert_true(gang__queue_weight(gm, "research", &from) == 4.0);
	assert_string_equal(from, "Volcano");
	/* troupe's config wins over KAI's weight of 8. */
	assert_true(gang__queue_weight(gm, "infer", &from) == 2.0);
	assert_string_equal(from, "config");
	gang__shares_load(gm, &sh);
	assert_true(fabs(gang__share_of(gm, &sh, "research") - 0.125) < 1e-9);
	assert_true(fabs(gang__share_of(gm, &sh, "infer") - 0.25) < 1e-9);
	gang__shares_fini(&sh);
	assert_int_equal(gang_queue_list(gm, &qs, &n), 0);
	for (unsigned i = 0; i < n; i++)
		if (strcmp(qs[i].name, "research") == 0) {
			assert_true(qs[i].weight == 4.0);
			assert_string_equal(qs[i].weight_from, "Volcano");
			from = NULL;
		}
	assert_null(from);                              /* "research" was listed */
	free(qs);
	gang_manager_free(gm);
	cache_free(c);
}

/* A gang member's usage counts toward its PodGroup's queue when that names
 * one, whatever the pod's own label (the queue the gang is ordered in); a
 * member of a group whose PodGroup names none, toward its own. */
static void test_gang_member_usage_counts_in_its_podgroups_queue(void **state)
{
	struct fake_clock clk;
	struct gang_config cfg;
	struct cache *c = cache_new(&gpu_opts);
	struct gang_manager *gm;
	struct shares sh;
	char err[CACHE_ERR_LEN];

	(void)state;
	fake_config(&cfg, &clk);
	assert_non_null(c);
	cache_nodes(c, 2);                              /* 16 GPUs */
	for (int i = 0; i < 2; i++) {
		char json[768];
		cJSON *o;

		/* vc-0 on n0 (group vc), other-0 on n1 (group other): 8 GPUs each,
		 * both labelled for queue "own". */
		snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"%s-0\",\"namespace\":\"ml\","
			 "\"uid\":\"u-%d\",\"labels\":{\"troupe.io/queue\":\"own\"},\"annotations\":"
			 "{\"scheduling.k8s.io/group-name\":\"%s\",\"troupe.io/gpu-ids\":"
			 "\"0,1,2,3,4,5,6,7\"}},\"spec\":{\"nodeName\":\"n%d\",\"containers\":"
			 "[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]},"
			 "\"status\":{\"phase\":\"Running\"}}", i ? "other" : "vc", i,
			 i ? "other" : "vc", i);
		o = cJSON_Parse(json);
		assert_int_equal(cache_pod_apply(c, cache_pod_parse(o, &gpu_opts, err, sizeof(err))), 0);
		cJSON_Delete(o);
	}
	for (int i = 0; i < 2; i++) {
		cJSON *o = cJSON_Parse(i ? "{\"apiVersion\":\"scheduling.volcano.sh/v1beta1\","
					   "\"metadata\":{\"name\":\"other\",\"namespace\":\"ml\"},"
					   "\"spec\":{\"minMember\":1}}"
					 : "{\"apiVersion\":\"scheduling.volcano.sh/v1beta1\","
					   "\"metadata\":{\"name\":\"vc\",\"namespace\":\"ml\"},"
					   "\"spec\":{\"minMember\":1,\"queue\":\"research\"}}");

		assert_int_equal(cache_podgroup_apply(c, cache_podgroup_parse(o, &gpu_opts, err,
									      sizeof(err))), 0);
		cJSON_Delete(o);
	}
	gm = gang_manager_new(c, &cfg);
	assert_non_null(gm);
	gang__shares_load(gm, &sh);
	assert_int_equal(gang__queue_gpus(&sh, "research"), 8);
	assert_int_equal(gang__queue_gpus(&sh, "own"), 8);
	pthread_mutex_lock(&gm->lock);
	assert_true(fabs(gang__share_of(gm, &sh, "research") - 0.5) < 1e-9);
	pthread_mutex_unlock(&gm->lock);
	gang__shares_fini(&sh);
	gang_manager_free(gm);
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_deleted_gang_is_nobody_to_wait_behind),
		cmocka_unit_test(test_gang_fair_order_is_priority_then_share_then_age),
		cmocka_unit_test(test_gang_fair_rule_is_priority_then_share_then_age_then_key),
		cmocka_unit_test(test_gang_fair_rule_random_pairs_agree_with_the_tuple_order),
		cmocka_unit_test(test_gang_config_queue_weight_defaults_to_one),
		cmocka_unit_test(test_gang_queue_weight_from_other_schedulers_queues),
		cmocka_unit_test(test_gang_member_usage_counts_in_its_podgroups_queue),
		cmocka_unit_test(test_gang_holds_grow_on_the_emptiest_nodes_as_gpus_free),
		cmocka_unit_test(test_gang_starvation_counts_on_the_managers_clock),
		cmocka_unit_test(test_gang_only_a_watch_shows_gangs_nobody_filtered),
		cmocka_unit_test(test_gang_pass_with_an_earlier_clock_reading_changes_nothing),
		cmocka_unit_test(test_gang_hold_note_reads_held_nodes_while_they_change),
	};

	log_set_level(LOG_ERROR);       /* the manager logs every plan and release */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
