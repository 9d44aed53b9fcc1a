/* Unit tests of the cache's writer token (store.c): the thread that creates
 * a cache is its writer; cache_writer_claim moves the token to the calling
 * thread, whose writer calls then succeed, and the creator is no longer the
 * writer until it claims the cache back; cache_free may run on any thread
 * once no other uses the cache. The informer's thread holds the token from
 * before cache_informer_start returns until cache_informer_stop hands it back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "cache/api.h"
#include "cache/cache.h"
#include "common/log.h"
#include "fixture.h"

static void test_cache_writer_is_the_creating_thread(void **state)
{
	struct cache *c = *state;

	assert_true(cache_writer_is_current(c));
	add_node(c, "n", 4, 4);
	assert_true(look(c, "n").found);
}

/* What the claiming thread saw and did. */
struct claimer {
	struct cache *c;
	bool before, after;
	int upsert, apply, del;
};

static void *claimer_main(void *arg)
{
	struct claimer *w = arg;

	w->before = cache_writer_is_current(w->c);
	cache_writer_claim(w->c);
	w->after = cache_writer_is_current(w->c);
	/* Writer calls from here succeed (each asserts the token in debug builds). */
	w->upsert = cache_node_upsert(w->c, node_new("m", 8, 8));
	w->apply = cache_pod_apply(w->c, POD(.uid = "p", .node = "m", .gpus = 2, .ids = "0,1"));
	w->del = cache_node_delete(w->c, "n");
	cache_writer_reclaim(w->c);
	return NULL;
}

static void test_cache_writer_claim_moves_the_writer(void **state)
{
	struct cache *c = *state;
	struct claimer w = { .c = c };
	pthread_t th;

	add_node(c, "n", 4, 4);
	assert_int_equal(pthread_create(&th, NULL, claimer_main, &w), 0);
	pthread_join(th, NULL);
	assert_false(w.before);
	assert_true(w.after);
	assert_int_equal(w.upsert, 0);
	assert_int_equal(w.apply, 0);
	assert_int_equal(w.del, 0);
	/* The token moved: the creator is no longer the writer... */
	assert_false(cache_writer_is_current(c));
	assert_false(look(c, "n").found);
	assert_usage(c, "m", 0x3, 0);
	/* ...until it claims the cache back. */
	cache_writer_claim(c);
	assert_true(cache_writer_is_current(c));
	assert_int_equal(cache_pod_delete(c, "p"), 0);
	assert_usage(c, "m", 0, 0);
}

static void *free_main(void *arg)
{
	cache_free(arg);
	return NULL;
}

static void test_cache_writer_free_from_another_thread(void **state)
{
	struct cache *c = cache_new(&OPTS);
	pthread_t th;

	(void)state;
	assert_non_null(c);
	add_node(c, "n", 4, 4);
	assert_int_equal(pthread_create(&th, NULL, free_main, c), 0);
	pthread_join(th, NULL);
}

/* cache_informer_start returns only once its thread holds the token, so the
 * caller (main, whose housekeeping asks the token whether it may remove node
 * entries) never acts as the writer while the informer writes; stop hands the
 * token back. The API server is a closed loopback port: the thread only fails
 * to connect. */
static void test_cache_writer_moves_to_the_informer_before_start_returns(void **state)
{
	struct cache *c = *state;
	char err[256] = "";
	struct cache_api *api = cache_api_from_url("http://127.0.0.1:9", NULL, err, sizeof(err));
	struct cache_informer *inf;

	if (!api)
		fail_msg("%s", err);
	inf = cache_informer_start(c, api, NULL, err, sizeof(err));
	if (!inf)
		fail_msg("%s", err);
	assert_false(cache_writer_is_current(c));
	cache_informer_stop(inf);
	assert_true(cache_writer_is_current(c));
	cache_api_free(api);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CACHE_TEST(test_cache_writer_is_the_creating_thread),
		CACHE_TEST(test_cache_writer_claim_moves_the_writer),
		cmocka_unit_test(test_cache_writer_free_from_another_thread),
		CACHE_TEST(test_cache_writer_moves_to_the_informer_before_start_returns),
	};

	log_set_level(LOG_ERROR);
	cache_api_global_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
