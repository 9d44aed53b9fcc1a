/* Unit tests of where the API server is and how troupe authenticates to it
 * (api.c): a plain URL, token files, in-cluster service accounts.
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
#include "common/log.h"
#include "common/util.h"
#include "api_fixture.h"
#include "fixture.h"

static void test_cache_api_free_null(void **state)
{
	(void)state;
	cache_api_free(NULL);
}

static void test_cache_api_from_url_schemes(void **state)
{
	static const struct {
		const char *url;
		const char *base;       /* NULL: refused */
	} cases[] = {
		{ "http://127.0.0.1:8001", "http://127.0.0.1:8001" },
		{ "https://k8s.example.com:6443", "https://k8s.example.com:6443" },
		{ "https://k8s.example.com:6443/", "https://k8s.example.com:6443" },
		{ "http://127.0.0.1:8001///", "http://127.0.0.1:8001" },
		{ "ftp://k8s.example.com", NULL },
		{ "unix:///run/kube.sock", NULL },
		{ "127.0.0.1:6443", NULL },
		{ "k8s.example.com", NULL },
		{ "http:/127.0.0.1", NULL },
		{ "", NULL },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "";
		struct cache_api *a = cache_api_from_url(cases[i].url, NULL, err, sizeof(err));

		if (cases[i].base) {
			if (!a || strcmp(cache_api_describe(a), cases[i].base) != 0 ||
			    api_request(a, false).auth[0] != '\0') {
				print_message("%s: %s [%s]\n", cases[i].url,
					      a ? "described as" : "refused:",
					      a ? cache_api_describe(a) : err);
				bad++;
			}
		} else if (a || !strstr(err, "http://") || !strstr(err, "https://") ||
			   !strstr(err, cases[i].url)) {
			print_message("%s: %s, message [%s]\n", cases[i].url,
				      a ? "accepted" : "refused", err);
			bad++;
		}
		cache_api_free(a);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_api_from_url_token_file(void **state)
{
	struct api_fix *f = *state;
	char *token = fix_write(f, "token", "  s3cret-token\n\n");
	char *missing = NULL, want[512], err[CACHE_ERR_LEN] = "";
	struct cache_api *a;

	a = cache_api_from_url("http://127.0.0.1:8001/", token, err, sizeof(err));
	if (!a)
		fail_msg("%s", err);
	snprintf(want, sizeof(want), "http://127.0.0.1:8001, token from %s", token);
	assert_string_equal(cache_api_describe(a), want);
	/* Surrounding blanks and newlines are not part of the token. */
	assert_string_equal(api_request(a, false).auth, "Bearer s3cret-token");
	cache_api_free(a);

	assert_true(asprintf(&missing, "%s/no-such-token", f->dir) > 0);
	err[0] = '\0';
	a = cache_api_from_url("https://127.0.0.1:6443", missing, err, sizeof(err));
	assert_null(a);
	assert_non_null(strstr(err, "cannot read token file"));
	assert_true(names_file(err, missing));
	free(missing);
	free(token);
}

/* A rotated token file is read again when asked (after a 401), and a file that
 * has gone keeps the token troupe has. */
static void test_cache_api_refresh_token_rereads_the_file(void **state)
{
	struct api_fix *f = *state;
	char *token = fix_write(f, "token", "first\n");
	char err[CACHE_ERR_LEN] = "";
	struct cache_api *a = cache_api_from_url("http://127.0.0.1:8001", token, err, sizeof(err));

	if (!a)
		fail_msg("%s", err);
	assert_string_equal(api_request(a, false).auth, "Bearer first");
	free(fix_write(f, "token", "second\n"));
	cache__api_refresh_token(a, true);
	assert_string_equal(api_request(a, false).auth, "Bearer second");
	assert_int_equal(unlink(token), 0);
	cache__api_refresh_token(a, true);
	assert_string_equal(api_request(a, false).auth, "Bearer second");
	cache_api_free(a);
	free(token);
}

/* ---- in-cluster ---- */

static void test_cache_api_in_cluster_requires_service_variables(void **state)
{
	static const struct {
		const char *host, *port;        /* NULL: unset */
	} cases[] = {
		{ NULL, NULL },
		{ "10.96.0.1", NULL },
		{ NULL, "443" },
		{ "", "443" },
		{ "10.96.0.1", "" },
	};
	struct api_fix *f = *state;
	char *sa = NULL;
	int bad = 0;

	/* Even with a usable service account folder. */
	free(fix_write(f, "sa/token", "t\n"));
	free(fix_write(f, "sa/ca.crt", TEST_CERT_PEM));
	assert_true(asprintf(&sa, "%s/sa", f->dir) > 0);
	setenv("TROUPE_SERVICEACCOUNT_DIR", sa, 1);
	free(sa);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "";
		struct cache_api *a;

		if (cases[i].host)
			setenv("KUBERNETES_SERVICE_HOST", cases[i].host, 1);
		else
			unsetenv("KUBERNETES_SERVICE_HOST");
		if (cases[i].port)
			setenv("KUBERNETES_SERVICE_PORT", cases[i].port, 1);
		else
			unsetenv("KUBERNETES_SERVICE_PORT");
		a = cache_api_in_cluster(err, sizeof(err));
		if (a || cache_api_in_cluster_available() ||
		    !strstr(err, "KUBERNETES_SERVICE_HOST") ||
		    !strstr(err, "KUBERNETES_SERVICE_PORT")) {
			print_message("host %s port %s: %s, available %d, message [%s]\n",
				      cases[i].host ? cases[i].host : "(unset)",
				      cases[i].port ? cases[i].port : "(unset)",
				      a ? "accepted" : "refused", cache_api_in_cluster_available(),
				      err);
			bad++;
		}
		cache_api_free(a);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_api_in_cluster_reads_service_account(void **state)
{
	static const struct {
		const char *host, *port;
		const char *base;
	} cases[] = {
		{ "10.96.0.1", "443", "https://10.96.0.1:443" },
		{ "kubernetes.default.svc", "6443", "https://kubernetes.default.svc:6443" },
		{ "fd00:10:96::1", "443", "https://[fd00:10:96::1]:443" },
	};
	struct api_fix *f = *state;
	char *sa = NULL;
	int bad = 0;

	free(fix_write(f, "sa/token", "sa-token\n"));
	free(fix_write(f, "sa/ca.crt", TEST_CERT_PEM));
	assert_true(asprintf(&sa, "%s/sa", f->dir) > 0);
	setenv("TROUPE_SERVICEACCOUNT_DIR", sa, 1);
	free(sa);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "", want[256];
		struct cache_api *a;

		setenv("KUBERNETES_SERVICE_HOST", cases[i].host, 1);
		setenv("KUBERNETES_SERVICE_PORT", cases[i].port, 1);
		assert_true(cache_api_in_cluster_available());
		a = cache_api_in_cluster(err, sizeof(err));
		snprintf(want, sizeof(want), "%s (in-cluster service account)", cases[i].base);
		if (!a || strcmp(cache_api_describe(a), want) != 0 ||
		    strcmp(api_request(a, false).auth, "Bearer sa-token") != 0) {
			print_message("%s:%s: %s [%s]\n", cases[i].host, cases[i].port,
				      a ? "described as" : "refused:",
				      a ? cache_api_describe(a) : err);
			bad++;
		}
		cache_api_free(a);
	}
	assert_int_equal(bad, 0);
}

/* The service account's ca.crt is the CA requests trust. */
static void test_cache_api_in_cluster_trusts_service_account_ca(void **state)
{
	struct api_fix *f = *state;
	char *ca = fix_write(f, "sa/ca.crt", "not a certificate\n");
	char *sa = NULL, err[CACHE_ERR_LEN] = "";
	struct cache_api *a;
	struct api_req r;

	free(fix_write(f, "sa/token", "sa-token\n"));
	assert_true(asprintf(&sa, "%s/sa", f->dir) > 0);
	setenv("TROUPE_SERVICEACCOUNT_DIR", sa, 1);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	a = cache_api_in_cluster(err, sizeof(err));
	if (!a)
		fail_msg("%s", err);
	r = api_request(a, true);
	assert_string_equal(r.url, "https://10.96.0.1:443/api/v1/nodes");
	if (r.code != CURLE_SSL_CACERT_BADFILE || !names_file(r.msg, ca))
		fail_msg("want the CA %s refused; got curl %d [%s]", ca, r.code, r.msg);
	cache_api_free(a);
	/* A good ca.crt is accepted: the request gets as far as the reply. */
	free(fix_write(f, "sa/ca.crt", TEST_CERT_PEM));
	a = cache_api_in_cluster(err, sizeof(err));
	if (!a)
		fail_msg("%s", err);
	r = api_request(a, true);
	if (r.code != CURLE_SSL_CONNECT_ERROR)
		fail_msg("want a failure on the reply; got curl %d [%s]", r.code, r.msg);
	cache_api_free(a);
	free(ca);
	free(sa);
}

/* Either service account file missing is an error at start-up (api.h: "the files
 * cannot be read"), naming the file. */
static void test_cache_api_in_cluster_missing_file_is_error(void **state)
{
	static const char *const files[] = { "token", "ca.crt" };
	struct api_fix *f = *state;
	int bad = 0;

	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char sub[16], rel[64], *sa = NULL, *missing = NULL, err[CACHE_ERR_LEN] = "";
		struct cache_api *a;

		/* A folder holding every file but files[i]. */
		snprintf(sub, sizeof(sub), "sa%zu", i);
		for (size_t k = 0; k < ARRAY_SIZE(files); k++) {
			if (k == i)
				continue;
			snprintf(rel, sizeof(rel), "%s/%s", sub, files[k]);
			free(fix_write(f, rel, strcmp(files[k], "token") == 0 ? "t\n" :
					       TEST_CERT_PEM));
		}
		assert_true(asprintf(&sa, "%s/%s", f->dir, sub) > 0);
		assert_true(asprintf(&missing, "%s/%s", sa, files[i]) > 0);
		setenv("TROUPE_SERVICEACCOUNT_DIR", sa, 1);
		a = cache_api_in_cluster(err, sizeof(err));
		if (a || !names_file(err, missing)) {
			print_message("without %s: %s, message [%s]\n", files[i],
				      a ? "accepted" : "refused", err);
			bad++;
		}
		cache_api_free(a);
		free(sa);
		free(missing);
	}
	assert_int_equal(bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_api_free_null),
		cmocka_unit_test(test_cache_api_from_url_schemes),
		API_TEST(test_cache_api_from_url_token_file),
		API_TEST(test_cache_api_refresh_token_rereads_the_file),
		API_TEST(test_cache_api_in_cluster_requires_service_variables),
		API_TEST(test_cache_api_in_cluster_reads_service_account),
		API_TEST(test_cache_api_in_cluster_trusts_service_account_ca),
		API_TEST(test_cache_api_in_cluster_missing_file_is_error),
	};
	int ret;

	/* Skipped items and odd pods log warnings by design; keep output to failures. */
	log_set_level(LOG_ERROR);
	cache_api_global_init();
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	cache_api_global_cleanup();
	return ret;
}
