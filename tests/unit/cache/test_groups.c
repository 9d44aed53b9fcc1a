/* Unit tests of pod groups (groups.c): PodGroup apply/get/replace/delete, and
 * the member index against a full scan of every pod.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"
/* cache's own test: the relist sweeps are internal to cache/. */
#include "cache/api_internal.h"
#include "common/log.h"
#include "common/util.h"
#include "fixture.h"

static struct cache_podgroup *podgroup_new(const char *ns, const char *name, int min_member,
					   unsigned gpus)
{
	char text[512], err[CACHE_ERR_LEN] = "";
	struct cache_podgroup *pg;

	snprintf(text, sizeof(text),
		 "{'kind':'PodGroup','metadata':{'name':'%s','namespace':'%s'},"
		 "'spec':{'minMember':%d,'minResources':{'nvidia.com/gpu':'%u'}}}",
		 name, ns, min_member, gpus);
	pg = podgroup_parse_sq(text, &OPTS, err, sizeof(err));
	if (!pg)
		fail_msg("cache_podgroup_parse(%s/%s): %s", ns, name, err);
	return pg;
}

struct group_seen {
	char keys[16][96];
	size_t n;
};

static void collect_group(const struct cache_podgroup *pg, void *arg)
{
	struct group_seen *gs = arg;

	if (gs->n < ARRAY_SIZE(gs->keys))
		snprintf(gs->keys[gs->n], sizeof(gs->keys[0]), "%s/%s=%d", pg->ns, pg->name,
			 pg->min_member);
	gs->n++;
}

/* Every pod group in the cache as "ns/name=minMember", sorted and comma-joined. */
static void groups_str(struct cache *c, char *out, size_t len)
{
	struct group_seen gs = { .n = 0 };
	size_t at = 0;

	cache_podgroup_foreach(c, collect_group, &gs);
	assert_true(gs.n <= ARRAY_SIZE(gs.keys));
	qsort(gs.keys, gs.n, sizeof(gs.keys[0]), str_cmp);
	out[0] = '\0';
	for (size_t i = 0; i < gs.n; i++)
		at += (size_t)snprintf(out + at, len - at, "%s%s", i ? "," : "", gs.keys[i]);
}

static size_t podgroup_count(struct cache *c)
{
	struct cache_stats st;

	cache_get_stats(c, &st);
	return st.podgroups;
}

static void test_cache_podgroup_apply_get_replace_delete(void **state)
{
	struct cache *c = *state;
	struct cache_podgroup pg;
	char buf[320], all[512];

	assert_int_equal(podgroup_count(c), 0);
	assert_int_equal(cache_podgroup_get(c, "ml", "train", &pg, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(cache_podgroup_apply(c, podgroup_new("ml", "train", 4, 16)), 0);
	assert_int_equal(cache_podgroup_apply(c, podgroup_new("ml", "eval", 2, 2)), 0);
	assert_int_equal(cache_podgroup_apply(c, podgroup_new("other", "train", 8, 0)), 0);
	assert_int_equal(podgroup_count(c), 3);

	memset(&pg, 0, sizeof(pg));
	assert_int_equal(cache_podgroup_get(c, "ml", "train", &pg, buf, sizeof(buf)), 0);
	assert_string_equal(pg.ns, "ml");
	assert_string_equal(pg.name, "train");
	assert_int_equal(pg.min_member, 4);
	assert_int_equal(pg.min_gpus, 16);
	/* The copy's strings live in the caller's buffer, not in the cache. */
	assert_true(pg.ns >= buf && pg.ns < buf + sizeof(buf));
	assert_true(pg.name >= buf && pg.name < buf + sizeof(buf));
	assert_int_equal(cache_podgroup_get(c, "other", "train", &pg, buf, sizeof(buf)), 0);
	assert_string_equal(pg.ns, "other");
	assert_int_equal(pg.min_member, 8);
	assert_int_equal(cache_podgroup_get(c, "ml", "none", &pg, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(cache_podgroup_get(c, "none", "train", &pg, buf, sizeof(buf)), -ENOENT);

	/* Applying the same ns/name again replaces it. */
	assert_int_equal(cache_podgroup_apply(c, podgroup_new("ml", "train", 6, 24)), 0);
	assert_int_equal(podgroup_count(c), 3);
	assert_int_equal(cache_podgroup_get(c, "ml", "train", &pg, buf, sizeof(buf)), 0);
	assert_int_equal(pg.min_member, 6);
	assert_int_equal(pg.min_gpus, 24);
	groups_str(c, all, sizeof(all));
	assert_string_equal(all, "ml/eval=2,ml/train=6,other/train=8");

	assert_int_equal(cache_podgroup_delete(c, CACHE_PG_XK8S, "ml", "train"), 0);
	assert_int_equal(cache_podgroup_get(c, "ml", "train", &pg, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(cache_podgroup_delete(c, CACHE_PG_XK8S, "ml", "train"), -ENOENT);
	assert_int_equal(cache_podgroup_delete(c, CACHE_PG_XK8S, "other", "none"), -ENOENT);
	assert_int_equal(podgroup_count(c), 2);
	groups_str(c, all, sizeof(all));
	assert_string_equal(all, "ml/eval=2,other/train=8");
	/* Pod groups are not pods: pod counts are untouched. */
	{
		struct cache_stats st;

		cache_get_stats(c, &st);
		assert_int_equal(st.pods, 0);
		assert_int_equal(st.nodes, 0);
	}
}

/* A PodGroup of <api_version> ("" for none) from its spec's JSON (in single quotes). */
static struct cache_podgroup *podgroup_of(const char *api_version, const char *ns,
					  const char *name, const char *spec)
{
	char text[1024], err[CACHE_ERR_LEN] = "";
	struct cache_podgroup *pg;

	snprintf(text, sizeof(text), "{%s%s%s'kind':'PodGroup','metadata':{'name':'%s',"
		 "'namespace':'%s','uid':'u-%s'},'spec':%s}", api_version[0] ? "'apiVersion':'" : "",
		 api_version, api_version[0] ? "'," : "", name, ns, api_version, spec);
	pg = podgroup_parse_sq(text, &OPTS, err, sizeof(err));
	if (!pg)
		fail_msg("cache_podgroup_parse(%s %s/%s): %s", api_version, ns, name, err);
	return pg;
}

/* Groups of one namespace and name in several APIs: each API keeps its own,
 * a delete or relist of one leaves the others, and the terms come from the
 * first of cache_pg_precedence (upstream, scheduler-plugins, Volcano, KAI),
 * for cache_podgroup_get and cache_podgroup_foreach_winning alike. */
static void test_cache_podgroup_apis_kept_apart_and_looked_up_in_precedence(void **state)
{
	struct cache *c = *state;
	struct cache_podgroup pg;
	char buf[K8S_KEY_BUF + K8S_UID_BUF + K8S_NAME_BUF], small[sizeof("ml/g")];

	assert_int_equal(cache_podgroup_apply(c, podgroup_of("scheduling.run.ai/v2alpha2", "ml",
							     "g", "{'minMember':4,'queue':'kai-q'}")), 0);
	assert_int_equal(cache_podgroup_get(c, "ml", "g", &pg, buf, sizeof(buf)), 0);
	assert_int_equal(pg.api, CACHE_PG_KAI);
	assert_int_equal(pg.min_member, 4);
	assert_string_equal(pg.queue, "kai-q");
	assert_string_equal(pg.uid, "u-scheduling.run.ai/v2alpha2");
	assert_int_equal(cache_podgroup_apply(c, podgroup_of("scheduling.volcano.sh/v1beta1",
							     "ml", "g", "{'minMember':3,'queue':'research'}")), 0);
	assert_int_equal(cache_podgroup_get(c, "ml", "g", &pg, buf, sizeof(buf)), 0);
	assert_int_equal(pg.api, CACHE_PG_VOLCANO);
	assert_string_equal(pg.queue, "research");
	assert_int_equal(cache_podgroup_apply(c, podgroup_of("", "ml", "g", "{'minMember':2}")), 0);
	assert_int_equal(cache_podgroup_get(c, "ml", "g", &pg, buf, sizeof(buf)), 0);
	assert_int_equal(pg.api, CACHE_PG_XK8S);
	assert_int_equal(pg.min_member, 2);
	assert_string_equal(pg.queue, "");
	assert_int_equal(cache_podgroup_apply(c, podgroup_of("scheduling.k8s.io/v1beta1", "ml", "g",
							     "{'schedulingPolicy':{'gang':{'minCount':5}}}")),
			 0);
	assert_int_equal(cache_podgroup_get(c, "ml", "g", &pg, buf, sizeof(buf)), 0);
	assert_int_equal(pg.api, CACHE_PG_UPSTREAM);
	assert_int_equal(pg.min_member, 5);
	assert_int_equal(podgroup_count(c), 4);
	/* The winning walk visits the group once, as cache_podgroup_get sees
	 * it, and a group of one API alone once too. */
	assert_int_equal(cache_podgroup_apply(c, podgroup_of("scheduling.run.ai/v2alpha2", "ml",
							     "solo", "{'minMember':6}")), 0);
	{
		char all[512];
		struct group_seen gs = { .n = 0 };

		cache_podgroup_foreach_winning(c, collect_group, &gs);
		assert_int_equal(gs.n, 2);
		qsort(gs.keys, gs.n, sizeof(gs.keys[0]), str_cmp);
		assert_string_equal(gs.keys[0], "ml/g=5");
		assert_string_equal(gs.keys[1], "ml/solo=6");
		groups_str(c, all, sizeof(all));
		assert_string_equal(all, "ml/g=2,ml/g=3,ml/g=4,ml/g=5,ml/solo=6");
	}
	assert_int_equal(cache_podgroup_delete(c, CACHE_PG_KAI, "ml", "solo"), 0);
	/* A buffer with room for the key alone: uid and queue are "". */
	assert_int_equal(cache_podgroup_get(c, "ml", "g", &pg, small, sizeof(small)), 0);
	assert_string_equal(pg.name, "g");
	assert_string_equal(pg.uid, "");
	assert_string_equal(pg.queue, "");

	/* Deleting from one API uncovers the next. */
	assert_int_equal(cache_podgroup_delete(c, CACHE_PG_UPSTREAM, "ml", "g"), 0);
	assert_int_equal(cache_podgroup_get(c, "ml", "g", &pg, buf, sizeof(buf)), 0);
	assert_int_equal(pg.api, CACHE_PG_XK8S);
	assert_int_equal(cache_podgroup_delete(c, CACHE_PG_UPSTREAM, "ml", "g"), -ENOENT);
	assert_int_equal(cache_podgroup_delete(c, CACHE_PG_XK8S, "ml", "g"), 0);
	assert_int_equal(cache_podgroup_get(c, "ml", "g", &pg, buf, sizeof(buf)), 0);
	assert_int_equal(pg.api, CACHE_PG_VOLCANO);
	assert_int_equal(pg.min_member, 3);
	assert_int_equal(cache_podgroup_delete(c, CACHE_PG_VOLCANO, "ml", "g"), 0);
	assert_int_equal(cache_podgroup_get(c, "ml", "g", &pg, buf, sizeof(buf)), 0);
	assert_int_equal(pg.api, CACHE_PG_KAI);
	assert_int_equal(cache_podgroup_delete(c, CACHE_PG_KAI, "ml", "g"), 0);
	assert_int_equal(cache_podgroup_get(c, "ml", "g", &pg, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(podgroup_count(c), 0);
	assert_int_equal(cache_podgroup_delete(c, CACHE_PG_API_COUNT, "ml", "g"), -EINVAL);
}

/* ---- Other schedulers' Queues ------------------------------------------------- */

/* A Queue's weight as each API gives it, and 1 where it gives none usable. */
static void test_cache_queue_parse_weights(void **state)
{
	static const struct {
		enum cache_queue_api api;
		const char *json;
		int ok;
		double weight;
	} cases[] = {
		{ CACHE_Q_VOLCANO, "{'metadata':{'name':'q'},'spec':{'weight':4}}", 1, 4 },
		{ CACHE_Q_VOLCANO, "{'metadata':{'name':'q'},'spec':{'weight':0}}", 1, 1 },
		{ CACHE_Q_VOLCANO, "{'metadata':{'name':'q'},'spec':{'weight':-2}}", 1, 1 },
		{ CACHE_Q_VOLCANO, "{'metadata':{'name':'q'},'spec':{'weight':'4'}}", 1, 1 },
		{ CACHE_Q_VOLCANO, "{'metadata':{'name':'q'},'spec':{'weight':1e300}}", 1, 1e6 },
		{ CACHE_Q_VOLCANO, "{'metadata':{'name':'q'}}", 1, 1 },
		{ CACHE_Q_VOLCANO, "{'metadata':{'name':'q'},'spec':{'resources':{'gpu':"
				   "{'overQuotaWeight':3}}}}", 1, 1 },
		{ CACHE_Q_KAI, "{'metadata':{'name':'q'},'spec':{'resources':{'gpu':"
			       "{'quota':8,'overQuotaWeight':2.5,'limit':-1}}}}", 1, 2.5 },
		{ CACHE_Q_KAI, "{'metadata':{'name':'q'},'spec':{'weight':4}}", 1, 1 },
		{ CACHE_Q_KAI, "{'metadata':{},'spec':{}}", 0, 0 },
		{ CACHE_Q_KAI, "{'metadata':{'name':''}}", 0, 0 },
		{ CACHE_Q_API_COUNT, "{'metadata':{'name':'q'}}", 0, 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cache_queue q = { .weight = -1 };
		char err[CACHE_ERR_LEN] = "";
		cJSON *j = json_sq(cases[i].json);
		int ret = cache_queue_parse(j, cases[i].api, &q, err, sizeof(err));

		cJSON_Delete(j);
		if ((ret == 0) != cases[i].ok || (ret == 0 && (q.weight != cases[i].weight ||
							       strcmp(q.name, "q") != 0)) ||
		    (ret < 0 && !err[0])) {
			print_message("%s (api %d): ret %d weight %g name '%s' err '%s'\n",
				      cases[i].json, cases[i].api, ret, q.weight, q.name, err);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

/* Queues of both APIs kept apart; a weight comes from Volcano's first, then
 * KAI's; deleting one uncovers the other. */
static void test_cache_queue_weights_by_api(void **state)
{
	struct cache *c = *state;
	struct cache_queue v = { "research", 4 }, k = { "research", 2.5 }, only = { "infer", 3 };
	enum cache_queue_api api;
	double w = 0;

	assert_false(cache_queue_weight(c, "research", &w, &api));
	assert_int_equal(cache_queue_apply(c, CACHE_Q_KAI, &k), 0);
	assert_int_equal(cache_queue_apply(c, CACHE_Q_KAI, &only), 0);
	assert_true(cache_queue_weight(c, "research", &w, &api));
	assert_true(w == 2.5 && api == CACHE_Q_KAI);
	assert_int_equal(cache_queue_apply(c, CACHE_Q_VOLCANO, &v), 0);
	assert_true(cache_queue_weight(c, "research", &w, &api));
	assert_true(w == 4 && api == CACHE_Q_VOLCANO);
	assert_true(cache_queue_weight(c, "infer", &w, NULL));
	assert_true(w == 3);
	/* Replaced whole. */
	v.weight = 6;
	assert_int_equal(cache_queue_apply(c, CACHE_Q_VOLCANO, &v), 0);
	assert_true(cache_queue_weight(c, "research", &w, &api) && w == 6);
	assert_int_equal(cache_queue_delete(c, CACHE_Q_VOLCANO, "research"), 0);
	assert_int_equal(cache_queue_delete(c, CACHE_Q_VOLCANO, "research"), -ENOENT);
	assert_true(cache_queue_weight(c, "research", &w, &api));
	assert_true(w == 2.5 && api == CACHE_Q_KAI);
	assert_int_equal(cache_queue_delete(c, CACHE_Q_KAI, "research"), 0);
	assert_false(cache_queue_weight(c, "research", &w, &api));
	assert_int_equal(cache_queue_apply(c, CACHE_Q_API_COUNT, &v), -EINVAL);
	assert_int_equal(cache_queue_delete(c, CACHE_Q_API_COUNT, "infer"), -EINVAL);
}

/* ---- Pod-group member index -------------------------------------------------- */

struct brute_count {
	const char *group;
	bool any;                       /* count finished pods too */
	unsigned exist, bound;
};

/* cache_groups_foreach's callback: a bit per group a, b, c. */
static void list_group(const char *ns, const char *group, void *arg)
{
	unsigned *bits = arg;

	assert_string_equal(ns, "ml");
	assert_int_equal(strlen(group), 1);
	assert_true(group[0] >= 'a' && group[0] <= 'c');
	assert_false(*bits & (1u << (group[0] - 'a')));      /* once each */
	*bits |= 1u << (group[0] - 'a');
}

static void brute_one(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct brute_count *b = arg;

	(void)uid;
	if (p->reservation || strcmp(p->ns, "ml") || strcmp(p->group, b->group) ||
	    (!p->active && !b->any))
		return;
	b->exist++;
	b->bound += p->node[0] != '\0';
}

static struct cache_pod *group_pod(const char *uid, const char *group, const char *node,
				   const char *phase, bool deleting)
{
	char text[1024], labels[128] = "", err[CACHE_ERR_LEN] = "";
	struct cache_pod *p;
	cJSON *j;

	if (group)
		snprintf(labels, sizeof(labels), ",'labels':{'scheduling.x-k8s.io/pod-group':'%s'}",
			 group);
	snprintf(text, sizeof(text),
		 "{'kind':'Pod','metadata':{'name':'%s','namespace':'ml','uid':'%s'%s%s},"
		 "'spec':{%s%s%s'containers':[{'name':'main','resources':"
		 "{'limits':{'nvidia.com/gpu':'1'}}}]},'status':{'phase':'%s'}}",
		 uid, uid, labels, deleting ? ",'deletionTimestamp':'2024-01-01T00:00:00Z'" : "",
		 node ? "'nodeName':'" : "", node ? node : "", node ? "'," : "", phase);
	j = json_sq(text);
	p = cache_pod_parse(j, &OPTS, err, sizeof(err));
	if (!p)
		fail_msg("cache_pod_parse(%s): %s", uid, err);
	cJSON_Delete(j);
	return p;
}

/* Random pods joining, leaving and changing groups (apply, remember, delete,
 * assume/forget, a relist sweep, the remembered-pod expiry): after every step
 * the indexed counts and walks agree with a scan of every pod. */
static void test_cache_group_index_matches_a_full_scan(void **state)
{
	static const char *const groups[] = { "a", "b", "c" };
	struct cache *c = cache_new(&OPTS);
	unsigned seed = 11, checks = 0;

	(void)state;
	assert_non_null(c);
	add_node(c, "n0", 8, 8);
	add_node(c, "n1", 8, 8);
	for (unsigned step = 0; step < 3000; step++) {
		char uid[16];
		const char *group = rand_r(&seed) % 4 ? groups[rand_r(&seed) % 3] : NULL;
		unsigned op = (unsigned)rand_r(&seed) % 10;

		snprintf(uid, sizeof(uid), "p%u", (unsigned)rand_r(&seed) % 40);
		if (op < 4) {
			static const char *const phases[] = { "Pending", "Running", "Succeeded" };
			const char *node = rand_r(&seed) % 2 ? "n0" : NULL;

			cache_pod_apply(c, group_pod(uid, group, node,
						     phases[node ? 1 + rand_r(&seed) % 2 : 0],
						     rand_r(&seed) % 8 == 0));
		} else if (op < 6) {
			cache_pod_remember(c, group_pod(uid, group, NULL, "Pending", false));
		} else if (op < 7) {
			uint64_t dev = 1ULL << (rand_r(&seed) % 8);

			if (cache_pod_assume(c, uid, "n1", &dev) == 0 && rand_r(&seed) % 2)
				cache_pod_forget(c, uid);
		} else if (op < 9) {
			cache_pod_delete(c, uid);
		} else if (rand_r(&seed) % 2) {
			const char *const keep[] = { "p1", "p2", "p3", "p4", "p5", NULL };
			struct keep_set ks = { keep };

			cache__pod_sweep(c, keep_listed, &ks);
		} else {
			cache_pod_expire(c, UINT64_MAX, 0);     /* forgets remembered pods */
		}
		{
			struct cache_pod_info pi;

			/* cache_pod_known agrees with a full copy. */
			assert_int_equal(cache_pod_known(c, uid), cache_pod_get(c, uid, &pi) == 0);
		}
		for (unsigned g = 0; g < 3; g++) {
			struct brute_count b = { .group = groups[g] };
			unsigned exist, bound;

			cache_pod_foreach(c, brute_one, &b);
			cache_group_count(c, "ml", groups[g], &exist, &bound);
			if (exist != b.exist || bound != b.bound)
				fail_msg("step %u group %s: index %u/%u, scan %u/%u", step, groups[g],
					 exist, bound, b.exist, b.bound);
			checks += b.exist > 0;
		}
		{
			/* The groups listed are exactly those with a member known. */
			unsigned listed = 0, want = 0;

			cache_groups_foreach(c, list_group, &listed);
			for (unsigned g = 0; g < 3; g++) {
				struct brute_count b = { .group = groups[g], .any = true };

				cache_pod_foreach(c, brute_one, &b);
				want |= (b.exist > 0) << g;
			}
			if (listed != want)
				fail_msg("step %u: groups listed %#x, known %#x", step, listed, want);
		}
	}
	assert_true(checks > 1000);
	cache_free(c);
}

/* A pod of group "g" carrying gang plan <plan> (the annotation), bound to <node>
 * or not. Single quotes in <plan> stay as they are (json_sq turns the
 * template's quotes into double ones first). */
static struct cache_pod *plan_pod(const char *uid, const char *node, const char *plan)
{
	char text[1024], err[CACHE_ERR_LEN] = "";
	struct cache_pod *p;
	cJSON *j, *ann;

	snprintf(text, sizeof(text),
		 "{'kind':'Pod','metadata':{'name':'%s','namespace':'ml','uid':'%s',"
		 "'labels':{'scheduling.x-k8s.io/pod-group':'g'},'annotations':{}},"
		 "'spec':{%s%s%s'containers':[{'name':'main','resources':"
		 "{'limits':{'nvidia.com/gpu':'1'}}}]},'status':{'phase':'Running'}}",
		 uid, uid, node ? "'nodeName':'" : "", node ? node : "", node ? "'," : "");
	j = json_sq(text);
	ann = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "annotations");
	cJSON_AddStringToObject(ann, CACHE_GANG_PLAN_ANNOTATION, plan);
	p = cache_pod_parse(j, &OPTS, err, sizeof(err));
	if (!p)
		fail_msg("cache_pod_parse(%s): %s", uid, err);
	cJSON_Delete(j);
	return p;
}

struct plans_seen {
	unsigned n;
	char last[256];
};

static void collect_plan(const char *ns, const char *group, const char *plan, void *arg)
{
	struct plans_seen *ps = arg;

	ps->n++;
	snprintf(ps->last, sizeof(ps->last), "%s/%s=%s", ns, group, plan);
}

static struct plans_seen plans(struct cache *c)
{
	struct plans_seen ps = { 0 };

	cache_group_plans_foreach(c, collect_plan, &ps);
	return ps;
}

/* One plan per group, from bound members seen from the cluster only; done with,
 * the same text never comes back, a new one does; gone with the group. */
static void test_cache_group_keeps_one_plan_per_group(void **state)
{
	struct cache *c = *state;
	struct plans_seen ps;

	add_node(c, "n0", 8, 8);
	/* An unbound pod's plan, and a filter call's, are not kept. */
	cache_pod_apply(c, plan_pod("a", NULL, "P1"));
	cache_pod_remember(c, plan_pod("r", "n0", "P1"));
	assert_int_equal(plans(c).n, 0);
	cache_pod_apply(c, plan_pod("a", "n0", "P1"));
	cache_pod_apply(c, plan_pod("b", "n0", "P1"));
	ps = plans(c);
	assert_int_equal(ps.n, 1);
	assert_string_equal(ps.last, "ml/g=P1");
	/* Done with: a member showing it again (a status update) does not bring it back. */
	cache_group_plan_done(c, "ml", "g", "P1");
	cache_pod_apply(c, plan_pod("b", "n0", "P1"));
	assert_int_equal(plans(c).n, 0);
	/* Another text for the group is a new plan; done with an old text leaves it. */
	cache_pod_apply(c, plan_pod("a", "n0", "P2"));
	cache_group_plan_done(c, "ml", "g", "P1");
	ps = plans(c);
	assert_int_equal(ps.n, 1);
	assert_string_equal(ps.last, "ml/g=P2");
	/* The group's last member gone: the plan goes with it. */
	cache_pod_delete(c, "a");
	cache_pod_delete(c, "b");
	cache_pod_delete(c, "r");
	assert_int_equal(plans(c).n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		CACHE_TEST(test_cache_podgroup_apply_get_replace_delete),
		CACHE_TEST(test_cache_podgroup_apis_kept_apart_and_looked_up_in_precedence),
		cmocka_unit_test(test_cache_queue_parse_weights),
		CACHE_TEST(test_cache_queue_weights_by_api),
		CACHE_TEST(test_cache_group_keeps_one_plan_per_group),
		cmocka_unit_test(test_cache_group_index_matches_a_full_scan),
	};

	/* Skipped items and odd pods log warnings by design; keep output to failures. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
