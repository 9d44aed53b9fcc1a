/* Unit tests of the cap on pods remembered from filter calls (pods.c,
 * cache_opts.max_filter_only_pods): at the cap the oldest pods known only from
 * filter that occupy nothing are dropped first; pods the watch shows, pods
 * being bound and reservations are never dropped nor counted; the count
 * follows every way a pod enters or leaves that state; concurrent remembers
 * stay within the cap and a batch.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "common/log.h"
#include "fixture.h"

static struct cache *capped(size_t cap)
{
	struct cache_opts o = OPTS;
	struct cache *c;

	o.max_filter_only_pods = cap;
	c = cache_new(&o);
	assert_non_null(c);
	return c;
}

static struct cache_filter_only_stats fo(struct cache *c)
{
	struct cache_filter_only_stats s;

	cache_filter_only_get(c, &s);
	return s;
}

static void remember(struct cache *c, const char *uid, unsigned gpus)
{
	assert_int_equal(cache_pod_remember(c, POD(.uid = uid, .gpus = gpus)), 0);
}

static void test_cache_remember_cap_default(void **state)
{
	struct cache *c = *state;

	assert_int_equal(fo(c).cap, CACHE_FILTER_ONLY_PODS_DEFAULT);
	assert_int_equal(fo(c).pods, 0);
}

/* Full: each new pod drops the oldest one (a cap of 4 drops one at a time). */
static void test_cache_remember_cap_drops_oldest_first(void **state)
{
	struct cache *c = capped(4);
	static const char *const uids[] = { "p0", "p1", "p2", "p3", "p4", "p5" };

	(void)state;
	for (int i = 0; i < 4; i++)
		remember(c, uids[i], 1);
	assert_int_equal(fo(c).pods, 4);
	assert_int_equal(fo(c).dropped, 0);
	remember(c, "p4", 1);
	assert_false(cache_pod_known(c, "p0"));
	for (int i = 1; i <= 4; i++)
		assert_true(cache_pod_known(c, uids[i]));
	remember(c, "p5", 1);
	assert_false(cache_pod_known(c, "p1"));
	assert_true(cache_pod_known(c, "p2"));
	assert_int_equal(fo(c).pods, 4);
	assert_int_equal(fo(c).dropped, 2);
	assert_int_equal(fo(c).refused, 0);
	/* Remembering a pod known already neither counts nor drops. */
	remember(c, "p5", 1);
	assert_true(cache_pod_known(c, "p2"));
	assert_int_equal(fo(c).dropped, 2);
	cache_free(c);
}

/* A larger cap drops a batch at a time (a 64th of it): the batch's oldest. */
static void test_cache_remember_cap_drops_a_batch_of_the_oldest(void **state)
{
	struct cache *c = capped(640);
	char uid[32];

	(void)state;
	for (int i = 0; i < 640; i++) {
		snprintf(uid, sizeof(uid), "p%d", i);
		remember(c, uid, 1);
	}
	remember(c, "last", 1);
	assert_int_equal(fo(c).dropped, 10);
	assert_int_equal(fo(c).pods, 631);
	for (int i = 0; i < 12; i++) {
		snprintf(uid, sizeof(uid), "p%d", i);
		assert_int_equal(cache_pod_known(c, uid), i >= 10);
	}
	assert_true(cache_pod_known(c, "last"));
	cache_free(c);
}

/* A pod the watch shows, one being bound and a reservation are not the cap's:
 * not counted, never dropped. The oldest droppable one goes instead. */
static void test_cache_remember_cap_spares_watched_bound_and_reserved(void **state)
{
	struct cache *c = capped(3);
	uint64_t dev = 0x1;

	(void)state;
	add_node(c, "n", 8, 8);
	remember(c, "watched", 1);
	remember(c, "bound", 1);
	remember(c, "old", 1);
	assert_int_equal(fo(c).pods, 3);
	/* The watch shows "watched": it is the cluster's now, not the cap's. */
	assert_int_equal(cache_pod_apply(c, POD(.uid = "watched", .gpus = 1)), 0);
	assert_int_equal(fo(c).pods, 2);
	/* troupe binds "bound": it occupies a device. */
	assert_int_equal(cache_pod_assume(c, "bound", "n", &dev), 0);
	assert_int_equal(fo(c).pods, 1);
	assert_int_equal(cache_reserve(c, "res", "n", 0x2), 0);
	assert_int_equal(fo(c).pods, 1);
	remember(c, "young-0", 1);
	remember(c, "young-1", 1);
	assert_int_equal(fo(c).pods, 3);
	remember(c, "young-2", 1);
	assert_false(cache_pod_known(c, "old"));
	assert_true(cache_pod_known(c, "watched"));
	assert_true(cache_pod_known(c, "bound"));
	assert_true(cache_pod_known(c, "res"));
	assert_true(cache_pod_known(c, "young-0"));
	assert_int_equal(pod_info(c, "bound").devices, 0x1);
	/* The bind failed: "bound" occupies nothing again, and counts again (one
	 * past the cap, until the next remember drops). It is the oldest now. */
	assert_int_equal(cache_pod_forget(c, "bound"), 0);
	assert_int_equal(fo(c).pods, 4);
	remember(c, "young-3", 1);
	assert_false(cache_pod_known(c, "bound"));
	assert_true(cache_pod_known(c, "young-0"));
	cache_free(c);
}

/* Deletes and the age-based expiry take pods out of the count too. */
static void test_cache_remember_cap_count_follows_delete_and_expire(void **state)
{
	struct cache *c = capped(10);

	(void)state;
	remember(c, "a", 1);
	remember(c, "b", 1);
	assert_int_equal(fo(c).pods, 2);
	assert_int_equal(cache_pod_delete(c, "a"), 0);
	assert_int_equal(fo(c).pods, 1);
	cache_pod_expire(c, UINT64_MAX, 0);
	assert_false(cache_pod_known(c, "b"));
	assert_int_equal(fo(c).pods, 0);
	assert_int_equal(fo(c).dropped, 0);     /* expiry is not the cap's doing */
	cache_free(c);
}

/* Filters remembering pods at once: the count stays within the cap, one batch
 * and the filters running at once, and what is counted is what the table
 * holds. */
enum { RACERS = 4, RACE_PODS = 3000, RACE_CAP = 640 };

struct racer {
	struct cache *c;
	int id;
	pthread_barrier_t *start;
	unsigned over;                  /* remember failed, or the count went past the bound */
};

static void *racer_run(void *arg)
{
	struct racer *r = arg;

	pthread_barrier_wait(r->start);
	for (int i = 0; i < RACE_PODS; i++) {
		char uid[32];
		struct cache_filter_only_stats s;
		int ret;

		snprintf(uid, sizeof(uid), "r%d-%d", r->id, i);
		ret = cache_pod_remember(r->c, POD(.uid = uid, .gpus = 1));
		if (ret != 0 && ret != -ENOSPC)
			r->over++;
		cache_filter_only_get(r->c, &s);
		if (s.pods > RACE_CAP + RACE_CAP / 64 + RACERS)
			r->over++;
	}
	return NULL;
}

static void count_pod(const struct cache_pod_info *info, const char *uid, void *arg)
{
	(void)info;
	(void)uid;
	(*(size_t *)arg)++;
}

static void test_cache_remember_cap_concurrent(void **state)
{
	struct cache *c = capped(RACE_CAP);
	struct racer r[RACERS];
	pthread_t th[RACERS];
	pthread_barrier_t start;
	size_t held = 0;

	(void)state;
	pthread_barrier_init(&start, NULL, RACERS);
	for (int i = 0; i < RACERS; i++) {
		r[i] = (struct racer){ c, i, &start, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, racer_run, &r[i]), 0);
	}
	for (int i = 0; i < RACERS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(r[i].over, 0);
	}
	pthread_barrier_destroy(&start);
	cache_pod_foreach(c, count_pod, &held);
	assert_int_equal(held, fo(c).pods);
	assert_true(fo(c).pods <= RACE_CAP + RACE_CAP / 64 + RACERS);
	assert_int_equal(fo(c).dropped + fo(c).pods, (uint64_t)RACERS * RACE_PODS - fo(c).refused);
	cache_free(c);
}

/* A pod of group "g" in namespace ml, as the watch or a filter body gives it. */
static struct cache_pod *member(const char *uid)
{
	char json[512], err[CACHE_ERR_LEN];
	struct cache_pod *p;
	cJSON *o;

	snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\","
		 "\"uid\":\"%s\",\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"g\"}},"
		 "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
		 "{\"nvidia.com/gpu\":\"1\"}}}]}}", uid, uid);
	o = cJSON_Parse(json);
	assert_non_null(o);
	p = cache_pod_parse(o, &OPTS, err, sizeof(err));
	cJSON_Delete(o);
	assert_non_null(p);
	return p;
}

/* Fed by an informer, a cache counts only watched pods as group members: a
 * filter call's body cannot invent gang members. On a snapshot (no watch)
 * the pods remembered from filter are all there is, and they count. */
static void test_cache_live_groups_count_only_watched_pods(void **state)
{
	struct cache *c = cache_new(&OPTS);
	unsigned exist, bound;

	(void)state;
	assert_non_null(c);
	assert_int_equal(cache_pod_remember(c, member("from-filter")), 0);
	cache_group_count(c, "ml", "g", &exist, &bound);
	assert_int_equal(exist, 1);
	cache_set_live(c);
	cache_group_count(c, "ml", "g", &exist, &bound);
	assert_int_equal(exist, 0);
	assert_int_equal(cache_pod_apply(c, member("from-watch")), 0);
	cache_group_count(c, "ml", "g", &exist, &bound);
	assert_int_equal(exist, 1);
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CACHE_TEST(test_cache_remember_cap_default),
		cmocka_unit_test(test_cache_remember_cap_drops_oldest_first),
		cmocka_unit_test(test_cache_remember_cap_drops_a_batch_of_the_oldest),
		cmocka_unit_test(test_cache_remember_cap_spares_watched_bound_and_reserved),
		cmocka_unit_test(test_cache_remember_cap_count_follows_delete_and_expire),
		cmocka_unit_test(test_cache_remember_cap_concurrent),
		cmocka_unit_test(test_cache_live_groups_count_only_watched_pods),
	};

	/* The cap's drops are logged as warnings; keep the output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
