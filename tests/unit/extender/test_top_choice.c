/* Unit tests of top_choice.c: the store prioritize leaves for bind, and
 * troupe_bind_top_choice_total's outcomes through the real verbs on the test
 * cluster (fixture.h).
 *
 *   test_top_other_unscored          the three outcomes and the bound node's
 *                                    answer; one bind per prioritize
 *   test_last_prioritize_counts      a second prioritize of the same pod
 *                                    replaces its first
 *   test_bounded_pods                the oldest pod goes when all are taken
 *   test_best_nodes_kept             over EXT_TOP_CHOICE_NODES nodes the best
 *                                    are kept whatever their order, over many
 *                                    random cases; a tie at 10 too big to keep
 *                                    is unscored, not guessed
 *   test_through_the_verbs           prioritize then bind on the test cluster:
 *                                    top, other (a node answered lower) and
 *                                    unscored (no prioritize); the metric text
 *   test_gang_members_unscored       a gang's members, held at the barrier and
 *                                    posted at quorum, count unscored: their
 *                                    plan decides, not a ranking
 */
#include "fixture.h"
#include "gang_fixture.h"

#include "extender/top_choice.h"

static void entry(struct ext_top_choice_entry *e, const char *uid, const char *const *names,
		  const unsigned *answers)
{
	ext_top_choice_begin(e, uid);
	for (size_t i = 0; names[i]; i++)
		ext_top_choice_add(e, names[i], strlen(names[i]), answers[i]);
}

static const char *const three[] = { "n-a", "n-b", "n-c", NULL };
static const unsigned three_answers[] = { 9, 10, 0 };

static void test_top_other_unscored(void **state)
{
	struct ext_top_choice *t = ext_top_choice_new();
	struct ext_top_choice_entry e;
	struct ext_top_choice_result res;
	uint64_t n[EXT_TOP_CHOICE_OUTCOMES];

	(void)state;
	assert_non_null(t);
	entry(&e, "u1", three, three_answers);
	ext_top_choice_put(t, &e);
	entry(&e, "u2", three, three_answers);
	ext_top_choice_put(t, &e);
	entry(&e, "u3", three, three_answers);
	ext_top_choice_put(t, &e);
	assert_int_equal(ext_top_choice_bound(t, "u1", "n-b", &res), EXT_TOP_CHOICE_TOP);
	assert_int_equal(res.answer, 10);
	assert_int_equal(ext_top_choice_bound(t, "u2", "n-a", &res), EXT_TOP_CHOICE_OTHER);
	assert_string_equal(res.first, "n-b");
	assert_int_equal(res.tops, 1);
	assert_int_equal(res.answer, 9);
	/* A node prioritize never answered: other, its answer unknown. */
	assert_int_equal(ext_top_choice_bound(t, "u3", "n-zzz", &res), EXT_TOP_CHOICE_OTHER);
	assert_int_equal(res.answer, -1);
	/* u1's entry was taken by its bind: a second bind saw no prioritize. */
	assert_int_equal(ext_top_choice_bound(t, "u1", "n-b", &res), EXT_TOP_CHOICE_UNSCORED);
	assert_int_equal(ext_top_choice_bound(t, "never", "n-b", NULL), EXT_TOP_CHOICE_UNSCORED);
	ext_top_choice_get_stats(t, n);
	assert_int_equal(n[EXT_TOP_CHOICE_TOP], 1);
	assert_int_equal(n[EXT_TOP_CHOICE_OTHER], 2);
	assert_int_equal(n[EXT_TOP_CHOICE_UNSCORED], 2);
	/* Off (no memory at start): nothing breaks, nothing is counted. */
	assert_int_equal(ext_top_choice_bound(NULL, "u1", "n-b", &res), EXT_TOP_CHOICE_UNSCORED);
	ext_top_choice_free(t);
}

static void test_last_prioritize_counts(void **state)
{
	static const unsigned again[] = { 10, 9, 0 };
	struct ext_top_choice *t = ext_top_choice_new();
	struct ext_top_choice_entry e;
	struct ext_top_choice_result res;

	(void)state;
	entry(&e, "u1", three, three_answers);
	ext_top_choice_put(t, &e);
	entry(&e, "u1", three, again);          /* the pod's next cycle: n-a best now */
	ext_top_choice_put(t, &e);
	assert_int_equal(ext_top_choice_bound(t, "u1", "n-a", &res), EXT_TOP_CHOICE_TOP);
	/* Replaced, not added: nothing of the first answer is left. */
	assert_int_equal(ext_top_choice_bound(t, "u1", "n-b", &res), EXT_TOP_CHOICE_UNSCORED);
	ext_top_choice_free(t);
}

static void test_bounded_pods(void **state)
{
	struct ext_top_choice *t = ext_top_choice_new();
	struct ext_top_choice_entry e;
	char uid[32];

	(void)state;
	for (int i = 0; i < EXT_TOP_CHOICE_PODS + 3; i++) {
		snprintf(uid, sizeof(uid), "u%d", i);
		entry(&e, uid, three, three_answers);
		ext_top_choice_put(t, &e);
	}
	/* The three oldest went; every later one is kept. */
	for (int i = 0; i < EXT_TOP_CHOICE_PODS + 3; i++) {
		snprintf(uid, sizeof(uid), "u%d", i);
		assert_int_equal(ext_top_choice_bound(t, uid, "n-b", NULL),
				 i < 3 ? EXT_TOP_CHOICE_UNSCORED : EXT_TOP_CHOICE_TOP);
	}
	ext_top_choice_free(t);
}

static void test_best_nodes_kept(void **state)
{
	enum { NODES = 300 };
	struct ext_top_choice *t = ext_top_choice_new();
	struct ext_top_choice_entry e;
	struct ext_top_choice_result res;
	unsigned answer[NODES], order[NODES];
	char name[32];

	(void)state;
	srand(15);
	for (int round = 0; round < 200; round++) {
		unsigned tops = (unsigned)rand() % 4;   /* nodes at 10, at least one */
		unsigned count[PLACEMENT_MAX_SCORE + 1] = { 0 }, kept = 0, floor = 0;

		for (unsigned i = 0; i < NODES; i++) {
			answer[i] = i <= tops ? 10 : (unsigned)rand() % 10;
			order[i] = i;
			count[answer[i]]++;
		}
		for (unsigned i = NODES - 1; i > 0; i--) {      /* any order */
			unsigned j = (unsigned)rand() % (i + 1), x = order[i];

			order[i] = order[j];
			order[j] = x;
		}
		ext_top_choice_begin(&e, "u");
		for (unsigned i = 0; i < NODES; i++) {
			snprintf(name, sizeof(name), "node-%u", order[i]);
			ext_top_choice_add(&e, name, strlen(name), answer[order[i]]);
		}
		/* The answers above the kept floor are all kept. */
		for (floor = PLACEMENT_MAX_SCORE; kept + count[floor] <= EXT_TOP_CHOICE_NODES; floor--)
			kept += count[floor];
		assert_int_equal(e.n, EXT_TOP_CHOICE_NODES);
		assert_int_equal(e.tops, tops + 1);
		ext_top_choice_put(t, &e);
		/* A node of the best answer, and one answered above the floor. */
		assert_int_equal(ext_top_choice_bound(t, "u", "node-0", &res), EXT_TOP_CHOICE_TOP);
		for (unsigned i = 0; i < NODES; i++) {
			if (answer[i] > floor && answer[i] < 10) {
				snprintf(name, sizeof(name), "node-%u", i);
				ext_top_choice_put(t, &e);
				assert_int_equal(ext_top_choice_bound(t, "u", name, &res),
						 EXT_TOP_CHOICE_OTHER);
				assert_int_equal(res.answer, (int)answer[i]);
				break;
			}
		}
	}
	/* More nodes tie at 10 than are kept: one not kept is not guessed. */
	ext_top_choice_begin(&e, "u");
	for (unsigned i = 0; i < EXT_TOP_CHOICE_NODES + 1; i++) {
		snprintf(name, sizeof(name), "node-%u", i);
		ext_top_choice_add(&e, name, strlen(name), 10);
	}
	ext_top_choice_put(t, &e);
	snprintf(name, sizeof(name), "node-%u", EXT_TOP_CHOICE_NODES);
	assert_int_equal(ext_top_choice_bound(t, "u", name, &res), EXT_TOP_CHOICE_UNSCORED);
	ext_top_choice_free(t);
}

static int score_of(const cJSON *j, const char *host)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, j)
		if (strcmp(item(it, "Host")->valuestring, host) == 0)
			return item(it, "Score")->valueint;
	return -1;
}

static void prioritize(struct fx *f, const char *name, unsigned gpus, cJSON **j)
{
	char *body = names_args(gpu_pod(name, gpus), request_nodes);
	unsigned status = 0;

	cJSON_Delete(filter_names(f, name, gpus, request_nodes));
	*j = call(ext_prioritize, f, body, &status);
	free(body);
	assert_int_equal(status, 200);
}

static void test_through_the_verbs(void **state)
{
	struct fx *f = *state;
	const char *top = NULL, *lower = NULL;
	uint64_t n[EXT_TOP_CHOICE_OUTCOMES];
	struct ext_reply r = { 0 };
	cJSON *j, *reply;

	f->svc.top_choice = ext_top_choice_new();
	prioritize(f, "tc-1", 1, &j);
	for (const char *const *node = cluster_nodes; *node; node++) {
		int s = score_of(j, *node);

		if (s == 10 && !top)
			top = *node;
		else if (s > 0 && s < 10 && !lower)
			lower = *node;
	}
	assert_non_null(top);
	assert_non_null(lower);
	assert_string_equal(bind_pod(f, "tc-1", top, &reply), "");
	cJSON_Delete(reply);
	cJSON_Delete(j);
	prioritize(f, "tc-2", 1, &j);
	cJSON_Delete(j);
	assert_string_equal(bind_pod(f, "tc-2", lower, &reply), "");
	cJSON_Delete(reply);
	cJSON_Delete(filter_names(f, "tc-3", 1, request_nodes));   /* no prioritize */
	assert_string_equal(bind_pod(f, "tc-3", lower, &reply), "");
	cJSON_Delete(reply);
	ext_top_choice_get_stats(f->svc.top_choice, n);
	assert_int_equal(n[EXT_TOP_CHOICE_TOP], 1);
	assert_int_equal(n[EXT_TOP_CHOICE_OTHER], 1);
	assert_int_equal(n[EXT_TOP_CHOICE_UNSCORED], 1);
	ext_metrics(&f->svc, &r);
	assert_contains(r.body.buf, "troupe_bind_top_choice_total{outcome=\"top\"} 1\n");
	assert_contains(r.body.buf, "troupe_bind_top_choice_total{outcome=\"other\"} 1\n");
	assert_contains(r.body.buf, "troupe_bind_top_choice_total{outcome=\"unscored\"} 1\n");
	strbuf_fini(&r.body);
	ext_top_choice_free(f->svc.top_choice);
	f->svc.top_choice = NULL;
}

static void test_gang_members_unscored(void **state)
{
	struct gfx *g = *state;
	struct pending_bind b0, b1;
	uint64_t n[EXT_TOP_CHOICE_OUTCOMES];
	unsigned status = 0;
	char *body;
	cJSON *j;

	g->fx.svc.top_choice = ext_top_choice_new();
	pair_planned(g);
	/* prioritize too: a member's answer (its plan's slots) is not kept. */
	body = names_args(gang_pod("w-0", "pair", 2, 8, ""), gpu_nodes);
	cJSON_Delete(call(ext_prioritize, &g->fx, body, &status));
	free(body);
	assert_int_equal(status, 200);
	j = filter_member(g, "w-1", "pair", 2, 8, gpu_nodes);
	cJSON_Delete(j);
	bind_start(g, &b0, "w-0", "gpu-a100-1");
	bind_start(g, &b1, "w-1", "gpu-h100-1");
	assert_true(fake_wait_posts(&g->binder, 2, 2000));
	fake_answer(&g->binder, 0, 0, "201 Created", 0);
	fake_answer(&g->binder, 1, 0, "201 Created", 0);
	assert_true(bind_wait(&b0, 2000));
	assert_true(bind_wait(&b1, 2000));
	bind_fini(&b0);
	bind_fini(&b1);
	ext_top_choice_get_stats(g->fx.svc.top_choice, n);
	assert_int_equal(n[EXT_TOP_CHOICE_TOP], 0);
	assert_int_equal(n[EXT_TOP_CHOICE_OTHER], 0);
	assert_int_equal(n[EXT_TOP_CHOICE_UNSCORED], 2);
	ext_top_choice_free(g->fx.svc.top_choice);
	g->fx.svc.top_choice = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_top_other_unscored),
		cmocka_unit_test(test_last_prioritize_counts),
		cmocka_unit_test(test_bounded_pods),
		cmocka_unit_test(test_best_nodes_kept),
		cmocka_unit_test_setup_teardown(test_through_the_verbs, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_gang_members_unscored, gfx_setup, gfx_teardown),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
