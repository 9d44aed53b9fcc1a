/* Unit tests of the permissions troupe checks (access.c): its
 * SelfSubjectAccessReviews, how their answers are read, that they match the
 * shipped ClusterRole, and the message of a v1 Status.
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
/* cache's own test: the relist sweeps and the reviews are internal to cache/. */
#include "cache/api_internal.h"
#include "common/log.h"
#include "common/util.h"
#include "fixture.h"
#include "rbac_check.h"

/* ---- Permissions ------------------------------------------------------------ */

/* Each permission's review names exactly its verb, group, resource and
 * subresource, the last two only when there are any. */
static void test_cache_access_review_new_names_the_permission(void **state)
{
	static const struct {
		enum cache_perm p;
		const char *name;
		const char *want;
	} cases[] = {
		{ CACHE_PERM_LIST_NODES, "list nodes",
		  "{'apiVersion':'authorization.k8s.io/v1','kind':'SelfSubjectAccessReview',"
		  "'spec':{'resourceAttributes':{'verb':'list','resource':'nodes'}}}" },
		{ CACHE_PERM_WATCH_PODS, "watch pods",
		  "{'apiVersion':'authorization.k8s.io/v1','kind':'SelfSubjectAccessReview',"
		  "'spec':{'resourceAttributes':{'verb':'watch','resource':'pods'}}}" },
		{ CACHE_PERM_BIND_PODS, "create pods/binding",
		  "{'apiVersion':'authorization.k8s.io/v1','kind':'SelfSubjectAccessReview',"
		  "'spec':{'resourceAttributes':{'verb':'create','resource':'pods',"
		  "'subresource':'binding'}}}" },
		{ CACHE_PERM_LIST_PODGROUPS, "list podgroups",
		  "{'apiVersion':'authorization.k8s.io/v1','kind':'SelfSubjectAccessReview',"
		  "'spec':{'resourceAttributes':{'verb':'list','group':'scheduling.x-k8s.io',"
		  "'resource':'podgroups'}}}" },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *got = cache__access_review_new(cases[i].p), want[512];

		sq_text(want, sizeof(want), cases[i].want);
		if (!got || strcmp(got, want) != 0 ||
		    strcmp(cache_permission_get(cases[i].p)->name, cases[i].name) != 0) {
			print_message("%s: got %s\n", cases[i].name, got ? got : "NULL");
			bad++;
		}
		free(got);
	}
	assert_int_equal(bad, 0);
	/* Every permission has a review and a name; none past the end. */
	for (int p = 0; p < CACHE_PERM_COUNT; p++) {
		char *got = cache__access_review_new((enum cache_perm)p);

		assert_non_null(got);
		assert_non_null(strstr(got, cache_permission_get((enum cache_perm)p)->verb));
		free(got);
	}
	assert_null(cache_permission_get(CACHE_PERM_COUNT));
	errno = 0;
	assert_null(cache__access_review_new(CACHE_PERM_COUNT));
	assert_int_equal(errno, EINVAL);
}

static void test_cache_access_review_parse_answers(void **state)
{
	static const struct {
		const char *body;       /* single quotes for double */
		int ret;
		bool allowed;
		const char *reason;
	} cases[] = {
		{ "{'kind':'SelfSubjectAccessReview','apiVersion':'authorization.k8s.io/v1',"
		  "'status':{'allowed':true,'reason':'RBAC: allowed by ClusterRoleBinding'}}",
		  0, true, "RBAC: allowed by ClusterRoleBinding" },
		{ "{'kind':'SelfSubjectAccessReview','status':{'allowed':false}}", 0, false, "" },
		{ "{'status':{'allowed':false,'denied':true,'reason':'webhook says no'}}",
		  0, false, "webhook says no" },
		{ "{'status':{'allowed':false,'evaluationError':'clusterrole troupe not found'}}",
		  0, false, "clusterrole troupe not found" },
		{ "{'status':{'allowed':true,'reason':7}}", 0, true, "" },
		/* Not answers: */
		{ "{'kind':'SelfSubjectAccessReview','status':{}}", -EINVAL, false, "" },
		{ "{'kind':'SelfSubjectAccessReview'}", -EINVAL, false, "" },
		{ "{'status':{'allowed':'true'}}", -EINVAL, false, "" },
		{ "{'status':{'allowed':1}}", -EINVAL, false, "" },
		{ "{'status':[true]}", -EINVAL, false, "" },
		{ "{'kind':'Status','apiVersion':'v1','status':{'allowed':true},'code':403}",
		  -EINVAL, false, "" },
		{ "[{'status':{'allowed':true}}]", -EINVAL, false, "" },
		{ "{'status':{'allowed':true}", -EINVAL, false, "" },
		{ "<html>502 Bad Gateway</html>", -EINVAL, false, "" },
		{ "", -EINVAL, false, "" },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char body[512], reason[64] = "x";
		bool allowed = !cases[i].allowed;
		int ret;

		sq_text(body, sizeof(body), cases[i].body);
		ret = cache__access_review_parse(body, strlen(body), &allowed, reason,
						 sizeof(reason));
		if (ret != cases[i].ret || (ret == 0 && allowed != cases[i].allowed) ||
		    strcmp(reason, cases[i].reason) != 0) {
			print_message("%s: ret %d allowed %d reason [%s]\n", body, ret, allowed,
				      reason);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	/* A NULL body (no answer at all) and a reason cut to its buffer. */
	{
		const char *long_reason = "{\"status\":{\"allowed\":true,\"reason\":\"0123456789\"}}";
		char reason[5];
		bool allowed = false;

		assert_int_equal(cache__access_review_parse(NULL, 0, &allowed, reason,
							    sizeof(reason)), -EINVAL);
		assert_int_equal(cache__access_review_parse(long_reason, strlen(long_reason),
							    &allowed, reason, sizeof(reason)), 0);
		assert_true(allowed);
		assert_string_equal(reason, "0123");
	}
}

/* config/deploy/rbac.yaml grants exactly what troupe checks it needs: each
 * (group, resource[/subresource], verb) of its ClusterRole troupe is one
 * permission of the table, and each permission is granted, so a rule troupe
 * does not use cannot creep in and one it does cannot be forgotten. The file's
 * other roles (delegated auth for the ops listener, leases, events, PodGroup
 * status) are granted apart, and checked by the tests of what uses them. */
static void test_cache_permissions_are_the_shipped_cluster_role(void **state)
{
	const struct cache_permission *perms[CACHE_PERM_COUNT];

	(void)state;
	for (int p = 0; p < CACHE_PERM_COUNT; p++)
		perms[p] = cache_permission_get((enum cache_perm)p);
	rbac_check_role_grants_exactly("troupe", perms, CACHE_PERM_COUNT, false, "troupe");
}

/* config/deploy/rbac.yaml's ClusterRole troupe-other-schedulers grants exactly
 * list and watch of the PodGroups of every API troupe reads besides
 * scheduler-plugins' (whose are in the ClusterRole troupe), and of the Queues
 * of every Queue API; each of those permissions names the group and resource
 * of the API's list path. */
static void test_cache_other_schedulers_are_their_own_cluster_role(void **state)
{
	/* Each API's list and watch permissions, and its path, in the same order. */
	static const struct {
		enum cache_optional_perm list, watch;
	} apis[] = {
		{ CACHE_OPT_PERM_LIST_PG_UPSTREAM, CACHE_OPT_PERM_WATCH_PG_UPSTREAM },
		{ CACHE_OPT_PERM_LIST_PG_VOLCANO, CACHE_OPT_PERM_WATCH_PG_VOLCANO },
		{ CACHE_OPT_PERM_LIST_PG_KAI, CACHE_OPT_PERM_WATCH_PG_KAI },
		{ CACHE_OPT_PERM_LIST_Q_VOLCANO, CACHE_OPT_PERM_WATCH_Q_VOLCANO },
		{ CACHE_OPT_PERM_LIST_Q_KAI, CACHE_OPT_PERM_WATCH_Q_KAI },
		{ CACHE_OPT_PERM_LIST_DRA_SLICES, CACHE_OPT_PERM_WATCH_DRA_SLICES },
		{ CACHE_OPT_PERM_LIST_DRA_CLAIMS, CACHE_OPT_PERM_WATCH_DRA_CLAIMS },
	};
	const char *paths[] = {
		cache_pg_apis[CACHE_PG_UPSTREAM].path, cache_pg_apis[CACHE_PG_VOLCANO].path,
		cache_pg_apis[CACHE_PG_KAI].path, cache_queue_apis[CACHE_Q_VOLCANO].path,
		cache_queue_apis[CACHE_Q_KAI].path, "/apis/resource.k8s.io/v1/resourceslices",
		"/apis/resource.k8s.io/v1/resourceclaims",
	};
	const struct cache_permission *perms[2 * ARRAY_SIZE(apis)];

	(void)state;
	assert_int_equal(ARRAY_SIZE(apis), CACHE_PG_API_COUNT - 1 + CACHE_Q_API_COUNT + 2);
	for (size_t i = 0; i < ARRAY_SIZE(apis); i++) {
		const char *path = paths[i];
		char want[160];

		perms[2 * i] = cache_optional_permission_get(apis[i].list);
		perms[2 * i + 1] = cache_optional_permission_get(apis[i].watch);
		/* "/apis/<group>/<version>/<resource>" */
		assert_true(strncmp(path, "/apis/", 6) == 0);
		snprintf(want, sizeof(want), "/apis/%s/", perms[2 * i]->group);
		assert_true(strncmp(path, want, strlen(want)) == 0);
		assert_string_equal(strrchr(path, '/') + 1, perms[2 * i]->resource);
		assert_string_equal(perms[2 * i]->group, perms[2 * i + 1]->group);
		assert_string_equal(perms[2 * i]->resource, perms[2 * i + 1]->resource);
		assert_string_equal(perms[2 * i]->verb, "list");
		assert_string_equal(perms[2 * i + 1]->verb, "watch");
	}
	rbac_check_role_grants_exactly("troupe-other-schedulers", perms, ARRAY_SIZE(perms), true,
				       "troupe's reading of other schedulers' PodGroups and Queues "
				       "and of DRA's slices and claims");
}

static void test_cache_status_message_reads_a_status(void **state)
{
	static const struct {
		const char *body;
		bool found;
		const char *want;
	} cases[] = {
		{ "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":"
		  "\"pods is forbidden: User \\\"u\\\" cannot list resource \\\"pods\\\"\","
		  "\"reason\":\"Forbidden\",\"code\":403}\n",
		  true, "pods is forbidden: User \"u\" cannot list resource \"pods\"" },
		{ "{\"kind\":\"Status\",\"message\":\"\"}", false, "" },
		{ "{\"message\":42}", false, "" },
		{ "Forbidden", false, "" },
		{ "", false, "" },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char out[128] = "x";
		bool found = cache__status_message(cases[i].body, strlen(cases[i].body), out,
						   sizeof(out));

		if (found != cases[i].found || strcmp(out, cases[i].want) != 0) {
			print_message("%s: %d [%s]\n", cases[i].body, found, out);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_access_review_new_names_the_permission),
		cmocka_unit_test(test_cache_access_review_parse_answers),
		cmocka_unit_test(test_cache_permissions_are_the_shipped_cluster_role),
		cmocka_unit_test(test_cache_other_schedulers_are_their_own_cluster_role),
		cmocka_unit_test(test_cache_status_message_reads_a_status),
	};

	/* Skipped items and odd pods log warnings by design; keep output to failures. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
