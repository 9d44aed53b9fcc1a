/* Unit tests of the gang manager's notes (gang_config.notify), which the
 * extender turns into Kubernetes Events: a gang short of members is told as
 * waiting with its counts, a plan as planned with its nodes and the member
 * that asked, a quorum as bound, an expired plan as timed out; each once per
 * decision, from the decision's own call, and none without a listener.
 */
#include "fixture.h"

#include "common/util.h"
/* The gang's own test: holds are grown on a gang of the table (internal.h). */
#include "gang/internal.h"

enum { MAX_NOTES = 64 };

struct note_log {
	pthread_mutex_t lock;
	unsigned n;
	struct {
		enum gang_note_kind kind;
		char group[64], member[64], text[512];
	} notes[MAX_NOTES];
};

static void on_note(void *ctx, const struct gang_note *n)
{
	struct note_log *l = ctx;

	pthread_mutex_lock(&l->lock);
	if (l->n < MAX_NOTES) {
		l->notes[l->n].kind = n->kind;
		snprintf(l->notes[l->n].group, sizeof(l->notes[0].group), "%s/%s", n->ns, n->name);
		snprintf(l->notes[l->n].member, sizeof(l->notes[0].member), "%s",
			 n->member_name ? n->member_name : "");
		snprintf(l->notes[l->n].text, sizeof(l->notes[0].text), "%s", n->text);
		l->n++;
	}
	pthread_mutex_unlock(&l->lock);
}

/* How many notes of <kind> about <group>; the last one's index in <last>. */
static unsigned count_of(struct note_log *l, enum gang_note_kind kind, const char *group,
			 int *last)
{
	unsigned c = 0;

	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < l->n; i++)
		if (l->notes[i].kind == kind && strcmp(l->notes[i].group, group) == 0) {
			c++;
			if (last)
				*last = (int)i;
		}
	pthread_mutex_unlock(&l->lock);
	return c;
}

static void released(void *ctx, bool ok, const char *why, const char *plan)
{
	(void)why;
	(void)plan;
	__atomic_store_n((int *)ctx, ok ? 1 : -1, __ATOMIC_SEQ_CST);   /* read by the test */
}

struct world {
	struct fake_clock clk;
	struct gang_config cfg;
	struct cache *c;
	struct gang_manager *gm;
	struct note_log log;
};

static void world_start(struct world *w, bool listen)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->log.lock, NULL);
	fake_config(&w->cfg, &w->clk);
	w->cfg.default_timeout_s = 5;
	if (listen) {
		w->cfg.notify = on_note;
		w->cfg.notify_ctx = &w->log;
	}
	w->c = cache_new(&gpu_opts);
	assert_non_null(w->c);
	cache_nodes(w->c, 2);
	idle_group(w->c, "whole", 2, 2);
	idle_group(w->c, "short", 3, 2);
	w->gm = gang_manager_new(w->c, &w->cfg);
	assert_non_null(w->gm);
}

static void world_stop(struct world *w)
{
	gang_manager_shutdown(w->gm);
	gang_manager_free(w->gm);
	cache_free(w->c);
	pthread_mutex_destroy(&w->log.lock);
}

static enum gang_verdict filter(struct world *w, const char *group, const char *member,
				bool *allowed)
{
	struct gang_member mb = { .uid = member, .ns = "ml", .name = member, .group = group,
				  .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	struct cache_node_view views[2];
	char reason[640];
	enum gang_verdict v;

	read_two_nodes(w->c, views);
	v = gang_filter(w->gm, &mb, views, 2, allowed, reason, sizeof(reason));
	cache_read_end(w->c);
	return v;
}

static void test_gang_notes_waiting_planned_bound(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	int done[2] = { 0, 0 }, last = -1;
	bool allowed[2];
	uint64_t dev;
	char reason[640];

	(void)state;
	assert_non_null(w);
	world_start(w, true);
	/* Short of members: told each time it is asked, with the counts. */
	assert_int_equal(filter(w, "short", "short-0", allowed), GANG_REFUSED);
	assert_int_equal(filter(w, "short", "short-1", allowed), GANG_REFUSED);
	assert_int_equal(count_of(&w->log, GANG_NOTE_WAITING, "ml/short", &last), 2);
	assert_string_equal(w->log.notes[last].text, "waiting for its members: 2 of 3 exist");
	assert_string_equal(w->log.notes[last].member, "short-1");
	/* Planned: once, naming the nodes and the member whose filter made it. */
	assert_int_equal(filter(w, "whole", "whole-0", allowed), GANG_ALLOWED);
	assert_int_equal(filter(w, "whole", "whole-1", allowed), GANG_ALLOWED);
	assert_int_equal(count_of(&w->log, GANG_NOTE_PLANNED, "ml/whole", &last), 1);
	assert_string_equal(w->log.notes[last].member, "whole-0");
	assert_non_null(strstr(w->log.notes[last].text, "2 members (16 GPUs) planned on 2 nodes"));
	assert_non_null(strstr(w->log.notes[last].text, "n0"));
	assert_non_null(strstr(w->log.notes[last].text, "n1"));
	assert_non_null(strstr(w->log.notes[last].text, "reserved for 5s"));
	/* Bound: once, when the second bind completes the quorum. */
	for (int i = 0; i < 2; i++) {
		struct gang_member mb = { .uid = i ? "whole-1" : "whole-0", .ns = "ml",
					  .name = i ? "whole-1" : "whole-0", .group = "whole",
					  .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };

		assert_int_equal(gang_bind(w->gm, &mb, i ? "n1" : "n0", released, &done[i], &dev,
					   reason, sizeof(reason)), GANG_BIND_HELD);
		assert_int_equal(count_of(&w->log, GANG_NOTE_BOUND, "ml/whole", NULL),
				 (unsigned)i);
	}
	/* No one asked to be told of a timeout. */
	assert_int_equal(count_of(&w->log, GANG_NOTE_TIMED_OUT, "ml/whole", NULL), 0);
	world_stop(w);
	assert_int_equal(done[0], 1);
	assert_int_equal(done[1], 1);
	free(w);
}

static void test_gang_notes_timed_out(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	bool allowed[2];
	int last = -1;

	(void)state;
	assert_non_null(w);
	world_start(w, true);
	assert_int_equal(filter(w, "whole", "whole-0", allowed), GANG_ALLOWED);
	fake_clock_advance(&w->clk, 6 * 1000000000ULL);
	/* The expiry thread wakes every 100 ms of real time: wait for it, with a
	 * deadline. */
	for (int i = 0; i < 500 && !count_of(&w->log, GANG_NOTE_TIMED_OUT, "ml/whole", NULL); i++)
		usleep(10000);
	assert_int_equal(count_of(&w->log, GANG_NOTE_TIMED_OUT, "ml/whole", &last), 1);
	assert_non_null(strstr(w->log.notes[last].text, "gang ml/whole"));
	assert_non_null(strstr(w->log.notes[last].text, "expired"));
	assert_string_equal(w->log.notes[last].member, "");
	world_stop(w);
	free(w);
}

static void test_gang_notes_the_first_starvation_hold(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	struct gang *g;
	int last = -1;

	(void)state;
	assert_non_null(w);
	world_start(w, true);
	pthread_mutex_lock(&w->gm->lock);
	g = gang__get(w->gm, "ml", "whole", true);
	assert_non_null(g);
	g->quorum = 2;
	g->need = 2;
	g->need_gpus = 16;
	g->req.demand.gpus = 8;
	snprintf(g->queue, sizeof(g->queue), "team-a");
	gang__enter(g, GANG_WAITING, gang__now(w->gm));
	gang__holds_grow(w->gm, g);
	gang__holds_grow(w->gm, g);     /* a later pass holds more: no second note */
	gang__holds_release(w->gm, g);
	gang__unlock(w->gm);
	assert_int_equal(count_of(&w->log, GANG_NOTE_HOLD, "ml/whole", &last), 1);
	assert_non_null(strstr(w->log.notes[last].text, "first in the fair order (queue team-a"));
	assert_non_null(strstr(w->log.notes[last].text, "holding GPUs for it as they free"));
	world_stop(w);
	free(w);
}

static void test_gang_notes_none_without_a_listener(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	bool allowed[2];

	(void)state;
	assert_non_null(w);
	world_start(w, false);
	assert_int_equal(filter(w, "short", "short-0", allowed), GANG_REFUSED);
	assert_int_equal(filter(w, "whole", "whole-0", allowed), GANG_ALLOWED);
	assert_int_equal(w->log.n, 0);
	world_stop(w);
	free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_notes_waiting_planned_bound),
		cmocka_unit_test(test_gang_notes_timed_out),
		cmocka_unit_test(test_gang_notes_the_first_starvation_hold),
		cmocka_unit_test(test_gang_notes_none_without_a_listener),
	};

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
