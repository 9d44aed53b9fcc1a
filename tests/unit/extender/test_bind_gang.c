/* Unit tests of bind with an API server's binder (a fake, gang_fixture.h): the
 * gang barrier (bind_gang: members' binds parked until the quorum, then all
 * posted), the Binding's annotations, and the re-post policy (post_again): a
 * single pod's unknown outcome posted again up to three times, a gang member's
 * refusal posted again with a backoff within its budget and given up after it,
 * and what is never retried.
 */
#include "gang_fixture.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

static const char ids_all8[] = "\"troupe.io/gpu-ids\":\"0,1,2,3,4,5,6,7\"";

/* Filter both members of gang "pair" (two 8-GPU members), then bind w-0 to
 * gpu-a100-1 and w-1 to gpu-h100-1. */
static void pair_bound(struct gfx *g, struct pending_bind *b0, struct pending_bind *b1)
{
	cJSON *j;

	pair_planned(g);
	j = filter_member(g, "w-1", "pair", 2, 8, gpu_nodes);
	cJSON_Delete(j);
	bind_start(g, b0, "w-0", "gpu-a100-1");
	assert_false(b0->complete_now);
	bind_start(g, b1, "w-1", "gpu-h100-1");
}

/* The post made for pod <uid>, the latest one. */
static unsigned last_post_of(struct gfx *g, const char *uid)
{
	for (unsigned i = fake_posts(&g->binder); i-- > 0;)
		if (strcmp(fake_post_get(&g->binder, i).uid, uid) == 0)
			return i;
	fail_msg("no post for %s", uid);
	return 0;
}

static void expect_bind_error(struct pending_bind *pb, const char *part)
{
	cJSON *reply;

	assert_true(bind_wait(pb, 2000));
	if (part)
		assert_contains(bind_error(pb, &reply), part);
	else
		assert_string_equal(bind_error(pb, &reply), "");
	cJSON_Delete(reply);
}

/* pair_bound through the quorum: both Bindings posted, w-1's accepted. Returns
 * the index of w-0's post, still unanswered. */
static unsigned pair_quorum(struct gfx *g, struct pending_bind *b0, struct pending_bind *b1)
{
	pair_bound(g, b0, b1);
	assert_true(fake_wait_posts(&g->binder, 2, 2000));
	fake_answer(&g->binder, last_post_of(g, "uid-w-1"), 0, "201 Created", 0);
	expect_bind_error(b1, NULL);
	return last_post_of(g, "uid-w-0");
}

/* A member's bind is parked: nothing is posted until the quorum binds; then
 * every member's Binding is posted with the devices it claimed, and each reply
 * completes when the API server accepts it. */
static void test_ext_bind_gang_parks_members_until_quorum(void **state)
{
	struct gfx *g = *state;
	struct pending_bind b0, b1;
	struct cache_pod_info info;
	cJSON *j;

	pair_planned(g);
	j = filter_member(g, "w-1", "pair", 2, 8, gpu_nodes);
	cJSON_Delete(j);
	bind_start(g, &b0, "w-0", "gpu-a100-1");
	assert_false(b0.complete_now);
	assert_false(bind_wait(&b0, 50));
	assert_int_equal(fake_posts(&g->binder), 0);
	/* The slot is claimed: the member occupies its devices already. */
	expect_pod(&g->fx, "uid-w-0", CACHE_POD_STATE_ASSUMED, "gpu-a100-1", 0xFF);
	bind_start(g, &b1, "w-1", "gpu-h100-1");
	assert_false(b1.complete_now);
	assert_true(fake_wait_posts(&g->binder, 2, 2000));
	for (unsigned i = 0; i < 2; i++) {
		struct fake_post p = fake_post_get(&g->binder, i);

		assert_false(p.after);
		assert_true(p.had_annotations);
		assert_contains(p.annotations, ids_all8);
		assert_string_equal(p.node, strcmp(p.uid, "uid-w-0") == 0 ? "gpu-a100-1"
									  : "gpu-h100-1");
	}
	assert_false(bind_wait(&b0, 0));
	fake_answer(&g->binder, 0, 0, "201 Created", 0);
	fake_answer(&g->binder, 1, 0, "201 Created", 0);
	expect_bind_error(&b0, NULL);
	expect_bind_error(&b1, NULL);
	assert_int_equal(cache_pod_get(g->fx.cache, "uid-w-0", &info), 0);
	assert_true(info.posted);
	bind_fini(&b0);
	bind_fini(&b1);
}

/* Without an API server (a snapshot) the parked binds are answered at quorum. */
static void test_ext_bind_gang_without_binder_answers_at_quorum(void **state)
{
	struct gfx *g = *state;
	struct pending_bind b0, b1;

	g->fx.svc.binder = NULL;
	pair_bound(g, &b0, &b1);
	expect_bind_error(&b0, NULL);
	expect_bind_error(&b1, NULL);
	assert_int_equal(fake_posts(&g->binder), 0);
	expect_pod(&g->fx, "uid-w-1", CACHE_POD_STATE_ASSUMED, "gpu-h100-1", 0xFF);
	bind_fini(&b0);
	bind_fini(&b1);
}

/* A bind to a node the plan has no slot on, with no room to move one there,
 * is refused at once and claims nothing. */
static void test_ext_bind_gang_refused_off_plan(void **state)
{
	struct gfx *g = *state;
	struct pending_bind b;
	cJSON *j;

	pair_planned(g);
	bind_start(g, &b, "w-0", "gpu-a100-0");
	assert_true(b.complete_now);
	assert_true(is_error_reply(b.r.status, (j = cJSON_Parse(b.r.body.buf))));
	cJSON_Delete(j);
	expect_pod(&g->fx, "uid-w-0", CACHE_POD_STATE_UNACCOUNTED, "", 0);
	assert_int_equal(fake_posts(&g->binder), 0);
	bind_fini(&b);
}

/* After quorum a member's refused or unconfirmed Binding is posted again, the
 * same, after a backoff (200 ms, doubling) or the server's Retry-After, and
 * the reply completes when one is accepted. */
static void test_ext_bind_gang_reposts_refusals_within_budget(void **state)
{
	struct gfx *g = *state;
	struct pending_bind b0, b1;
	struct fake_post first, again, third;
	unsigned i;

	i = pair_quorum(g, &b0, &b1);
	first = fake_post_get(&g->binder, i);
	fake_answer(&g->binder, i, -EIO, "HTTP 503", 0);
	assert_int_equal(fake_posts(&g->binder), 3);
	again = fake_post_get(&g->binder, 2);
	assert_true(again.after);
	assert_int_equal(again.delay_ms, 200);
	assert_string_equal(again.annotations, first.annotations);
	assert_string_equal(again.node, "gpu-a100-1");
	assert_false(bind_wait(&b0, 0));
	/* A 429 with Retry-After: the server's delay wins over the backoff's 400. */
	fake_answer(&g->binder, 2, -EINVAL, "HTTP 429", 1500);
	assert_int_equal(fake_posts(&g->binder), 4);
	third = fake_post_get(&g->binder, 3);
	assert_int_equal(third.delay_ms, 1500);
	fake_answer(&g->binder, 3, 0, "201 Created", 0);
	expect_bind_error(&b0, NULL);
	expect_pod(&g->fx, "uid-w-0", CACHE_POD_STATE_ASSUMED, "gpu-a100-1", 0xFF);
	bind_fini(&b0);
	bind_fini(&b1);
}

/* Past the budget (httpTimeout less the margin: 1 s here) a refused member is
 * given up: its reply says the binding failed and its devices go back. No
 * re-post is scheduled past the deadline. */
static void test_ext_bind_gang_gives_up_after_budget(void **state)
{
	struct gfx *g = *state;
	struct pending_bind b0, b1;
	unsigned posts = 0;

	g->fx.cfg.gang.http_timeout_s = 2;
	g->fx.cfg.gang.margin_s = 1;
	pair_quorum(g, &b0, &b1);
	/* Refuse every post of w-0, waiting out each delay as the binder would. */
	for (int rounds = 0; rounds < 20 && !bind_wait(&b0, 0); rounds++) {
		unsigned i = last_post_of(g, "uid-w-0");
		struct fake_post p = fake_post_get(&g->binder, i);

		assert_true(p.delay_ms < 1000);
		usleep(p.delay_ms * 1000u);
		fake_answer(&g->binder, i, -EINVAL, "HTTP 429", 0);
		posts++;
	}
	assert_true(posts >= 2);
	assert_true(posts < 20);
	expect_bind_error(&b0, "failed");
	expect_pod(&g->fx, "uid-w-0", CACHE_POD_STATE_UNACCOUNTED, "", 0);
	bind_fini(&b0);
	bind_fini(&b1);
}

/* A member bound elsewhere (409, UID precondition) or gone is not posted
 * again: the reply fails and the devices go back. */
static void test_ext_bind_gang_not_reposted_when_bound_elsewhere(void **state)
{
	struct gfx *g = *state;
	struct pending_bind b0, b1;

	pair_bound(g, &b0, &b1);
	assert_true(fake_wait_posts(&g->binder, 2, 2000));
	fake_answer(&g->binder, last_post_of(g, "uid-w-1"), -ENOENT, "HTTP 404", 0);
	fake_answer(&g->binder, last_post_of(g, "uid-w-0"), -EEXIST, "HTTP 409", 0);
	assert_int_equal(fake_posts(&g->binder), 2);
	expect_bind_error(&b0, "failed");
	expect_bind_error(&b1, "failed");
	expect_pod(&g->fx, "uid-w-0", CACHE_POD_STATE_UNACCOUNTED, "", 0);
	bind_fini(&b0);
	bind_fini(&b1);
}

/* ---- A single pod's Binding ------------------------------------------------------ */

/* Filter single pod ml/<name> (<gpus> GPUs) on <node>, then start its bind. */
static void single_bound(struct gfx *g, struct pending_bind *pb, const char *name,
			 unsigned gpus, const char *node)
{
	const char *const one[] = { node, NULL };
	cJSON *j = filter_names(&g->fx, name, gpus, one);

	cJSON_Delete(j);
	bind_start(g, pb, name, node);
}

/* Accepted: the reply completes, the pod is marked posted, and the Binding
 * named its devices; a repeat before acceptance is told to retry, after it is
 * a no-op. */
static void test_ext_bind_post_accepted(void **state)
{
	struct gfx *g = *state;
	struct pending_bind b, again;
	struct cache_pod_info info;
	struct fake_post p;

	single_bound(g, &b, "s", 4, "gpu-h100-1");
	assert_false(b.complete_now);
	assert_int_equal(fake_posts(&g->binder), 1);
	p = fake_post_get(&g->binder, 0);
	assert_string_equal(p.node, "gpu-h100-1");
	assert_string_equal(p.uid, "uid-s");
	assert_contains(p.annotations, "\"troupe.io/gpu-ids\":\"0,1,2,3\"");
	bind_start(g, &again, "s", "gpu-h100-1");
	assert_true(again.complete_now);
	expect_bind_error(&again, "still in progress");
	bind_fini(&again);
	fake_answer(&g->binder, 0, 0, "201 Created", 0);
	expect_bind_error(&b, NULL);
	assert_int_equal(cache_pod_get(g->fx.cache, "uid-s", &info), 0);
	assert_true(info.posted);
	bind_start(g, &again, "s", "gpu-h100-1");
	assert_true(again.complete_now);
	expect_bind_error(&again, NULL);
	assert_int_equal(fake_posts(&g->binder), 1);
	bind_fini(&again);
	bind_fini(&b);
}

/* An unknown outcome (timeout, 5xx) is posted again at once, three posts in
 * all; then the reply says so and the pod keeps its devices (it may be
 * running on them). */
static void test_ext_bind_post_unknown_outcome_three_posts(void **state)
{
	struct gfx *g = *state;
	struct pending_bind b;
	struct cache_pod_info info;

	single_bound(g, &b, "s", 4, "gpu-h100-1");
	fake_answer(&g->binder, 0, -ETIMEDOUT, "timed out", 0);
	assert_int_equal(fake_posts(&g->binder), 2);
	assert_true(fake_post_get(&g->binder, 1).after);
	assert_int_equal(fake_post_get(&g->binder, 1).delay_ms, 0);
	fake_answer(&g->binder, 1, -EIO, "HTTP 502", 0);
	assert_int_equal(fake_posts(&g->binder), 3);
	fake_answer(&g->binder, 2, -EIO, "HTTP 502", 0);
	assert_int_equal(fake_posts(&g->binder), 3);
	expect_bind_error(&b, "did not confirm");
	expect_pod(&g->fx, "uid-s", CACHE_POD_STATE_ASSUMED, "gpu-h100-1", 0x0F);
	assert_int_equal(cache_pod_get(g->fx.cache, "uid-s", &info), 0);
	assert_true(info.uncertain);
	bind_fini(&b);
}

/* A refusal (403, 429, 409) of a single pod is final: no re-post, the reply
 * fails and the devices go back at once. */
static void test_ext_bind_post_refusal_is_final(void **state)
{
	static const int results[] = { -EACCES, -EINVAL, -EEXIST, -ENOENT };
	struct gfx *g = *state;

	for (size_t k = 0; k < ARRAY_SIZE(results); k++) {
		struct pending_bind b;
		char name[32];
		unsigned before = fake_posts(&g->binder);

		snprintf(name, sizeof(name), "s-%zu", k);
		single_bound(g, &b, name, 4, "gpu-h100-1");
		assert_int_equal(fake_posts(&g->binder), before + 1);
		assert_int_equal(free_on(&g->fx, "gpu-h100-1"), 4);
		fake_answer(&g->binder, before, results[k], "refused", 0);
		assert_int_equal(fake_posts(&g->binder), before + 1);
		expect_bind_error(&b, "failed");
		assert_int_equal(free_on(&g->fx, "gpu-h100-1"), 8);
		bind_fini(&b);
	}
}

/* A Binding that cannot even be queued fails the reply at once and frees the
 * devices. */
static void test_ext_bind_post_not_queued(void **state)
{
	struct gfx *g = *state;
	struct pending_bind b;

	g->binder.refuse = -ESHUTDOWN;
	single_bound(g, &b, "s", 4, "gpu-h100-1");
	assert_true(b.complete_now);
	expect_bind_error(&b, "cannot post the binding");
	assert_int_equal(free_on(&g->fx, "gpu-h100-1"), 8);
	bind_fini(&b);
}

int main(void)
{
#define GFX(t) cmocka_unit_test_setup_teardown(t, gfx_setup, gfx_teardown)
	const struct CMUnitTest tests[] = {
		GFX(test_ext_bind_gang_parks_members_until_quorum),
		GFX(test_ext_bind_gang_without_binder_answers_at_quorum),
		GFX(test_ext_bind_gang_refused_off_plan),
		GFX(test_ext_bind_gang_reposts_refusals_within_budget),
		GFX(test_ext_bind_gang_gives_up_after_budget),
		GFX(test_ext_bind_gang_not_reposted_when_bound_elsewhere),
		GFX(test_ext_bind_post_accepted),
		GFX(test_ext_bind_post_unknown_outcome_three_posts),
		GFX(test_ext_bind_post_refusal_is_final),
		GFX(test_ext_bind_post_not_queued),
	};
#undef GFX

	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
