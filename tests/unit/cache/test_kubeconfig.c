/* Unit tests of reading a kubeconfig (api.c): contexts, what is refused,
 * tokens and token files, relative paths, inline data, skipping TLS checks.
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

/* ---- kubeconfig ---- */

static const char KUBECONFIG_TWO_CONTEXTS[] =
	"apiVersion: v1\n"
	"kind: Config\n"
	"preferences: {}\n"
	"current-context: b\n"
	"clusters:\n"
	"- name: ca\n"
	"  cluster:\n"
	"    server: https://127.0.0.1:6443\n"
	"- name: cb\n"
	"  cluster:\n"
	"    server: https://127.0.0.2:7443/\n"
	"    insecure-skip-tls-verify: true\n"
	"contexts:\n"
	"- name: a\n"
	"  context: {cluster: ca, user: ua, namespace: ml}\n"
	"- name: b\n"
	"  context: {cluster: cb, user: ub}\n"
	"users:\n"
	"- name: ua\n"
	"  user: {token: token-a}\n"
	"- name: ub\n"
	"  user: {token: token-b}\n";

static void test_cache_api_from_kubeconfig_picks_context(void **state)
{
	static const struct {
		const char *context;    /* the argument; NULL: current-context */
		const char *name;       /* the context used */
		const char *base;
		const char *auth;
		bool insecure;
	} cases[] = {
		{ NULL, "b", "https://127.0.0.2:7443", "Bearer token-b", true },
		{ "a", "a", "https://127.0.0.1:6443", "Bearer token-a", false },
		{ "b", "b", "https://127.0.0.2:7443", "Bearer token-b", true },
	};
	struct api_fix *f = *state;
	char *path = fix_kubeconfig(f, KUBECONFIG_TWO_CONTEXTS);
	int bad = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[CACHE_ERR_LEN] = "", want_ctx[64], want_url[128];
		struct cache_api *a = cache_api_from_kubeconfig(path, cases[i].context, err,
								sizeof(err));
		const char *d;
		struct api_req r;

		if (!a) {
			print_message("context %s: refused: %s\n",
				      cases[i].context ? cases[i].context : "(current)", err);
			bad++;
			continue;
		}
		d = cache_api_describe(a);
		r = api_request(a, true);
		snprintf(want_ctx, sizeof(want_ctx), "context %s", cases[i].name);
		snprintf(want_url, sizeof(want_url), "%s/api/v1/nodes", cases[i].base);
		if (strncmp(d, cases[i].base, strlen(cases[i].base)) != 0 ||
		    d[strlen(cases[i].base)] != ' ' || !strstr(d, want_ctx) || !strstr(d, path) ||
		    (strstr(d, "TLS not verified") != NULL) != cases[i].insecure ||
		    strcmp(r.auth, cases[i].auth) != 0 || strcmp(r.url, want_url) != 0) {
			print_message("context %s: described as [%s], sent [%s] to [%s]\n",
				      cases[i].context ? cases[i].context : "(current)", d, r.auth,
				      r.url);
			bad++;
		}
		cache_api_free(a);
	}
	free(path);
	assert_int_equal(bad, 0);
}

static void test_cache_api_from_kubeconfig_refuses(void **state)
{
	static const struct {
		const char *what;
		const char *yaml;
		const char *context;
		const char *want;       /* in the message */
		bool names_path;        /* the message names the kubeconfig */
	} cases[] = {
		{ "no current-context",
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "no current-context", true },
		{ "empty current-context",
		  "current-context: ''\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "no current-context", true },
		{ "empty file", "", NULL, "no current-context", true },
		{ "unknown current-context",
		  "current-context: y\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "context \"y\" not found", true },
		{ "unknown context argument",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  "nope", "context \"nope\" not found", true },
		{ "no contexts at all", "current-context: x\n", NULL, "context \"x\" not found",
		  true },
		{ "context naming a missing cluster",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: other}}]\n",
		  NULL, "context \"x\" names no cluster with a server", true },
		{ "context without a cluster",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {user: u}}]\n",
		  NULL, "context \"x\" names no cluster with a server", true },
		{ "cluster without a server",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {insecure-skip-tls-verify: true}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "context \"x\" names no cluster with a server", true },
		{ "exec plugin",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
		  "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1,"
		  " command: aws, args: [eks, get-token]}}}]\n",
		  NULL, "exec", true },
		{ "auth-provider plugin",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
		  "users: [{name: u, user: {auth-provider: {name: gcp}}}]\n",
		  NULL, "exec", true },
		{ "server without a scheme",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: '127.0.0.1:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "http://", false },
		{ "server with another scheme",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'unix:///run/kube.sock'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "https://", false },
		{ "invalid certificate-authority-data",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443',"
		  " certificate-authority-data: 'not*base64'}}]\n"
		  "contexts: [{name: x, context: {cluster: c}}]\n",
		  NULL, "base64", true },
		{ "invalid client-certificate-data",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
		  "users: [{name: u, user: {client-certificate-data: 'bad-base64_'}}]\n",
		  NULL, "base64", true },
		{ "invalid client-key-data",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
		  "users: [{name: u, user: {client-certificate-data: 'aGVsbG8=',"
		  " client-key-data: 'aGVs!bG8='}}]\n",
		  NULL, "base64", true },
		{ "missing tokenFile",
		  "current-context: x\n"
		  "clusters: [{name: c, cluster: {server: 'https://h:6443'}}]\n"
		  "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
		  "users: [{name: u, user: {tokenFile: no-such-token}}]\n",
		  NULL, "cannot read tokenFile no-such-token", true },
		{ "malformed YAML", "current-context: x\nclusters: [\n", NULL, "", true },
	};
	struct api_fix *f = *state;
	int bad = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *path = fix_kubeconfig(f, cases[i].yaml);
		char err[CACHE_ERR_LEN] = "";
		struct cache_api *a = cache_api_from_kubeconfig(path, cases[i].context, err,
								sizeof(err));

		if (a || !err[0] || !strstr(err, cases[i].want) ||
		    (cases[i].names_path && !names_file(err, path))) {
			print_message("%s: %s, message [%s]\n", cases[i].what,
				      a ? "accepted" : "refused", err);
			bad++;
		}
		cache_api_free(a);
		free(path);
	}
	assert_int_equal(bad, 0);
}

static void test_cache_api_from_kubeconfig_missing_file(void **state)
{
	struct api_fix *f = *state;
	char *path = NULL, err[CACHE_ERR_LEN] = "";

	assert_true(asprintf(&path, "%s/no-such-kubeconfig", f->dir) > 0);
	assert_null(cache_api_from_kubeconfig(path, NULL, err, sizeof(err)));
	assert_true(names_file(err, path));
	assert_non_null(strstr(err, strerror(ENOENT)));
	free(path);
}

/* A token given inline, or in a tokenFile relative to the kubeconfig's folder (not
 * to the working folder). */
static void test_cache_api_from_kubeconfig_token_and_token_file(void **state)
{
	static const struct {
		const char *what;
		const char *user;
		const char *auth;       /* NULL: refused */
	} cases[] = {
		{ "inline token", "token: 'inline-token'", "Bearer inline-token" },
		{ "tokenFile beside the kubeconfig", "tokenFile: token", "Bearer beside" },
		{ "tokenFile in a sub-folder", "tokenFile: secrets/token", "Bearer in-secrets" },
		{ "tokenFile up a folder", "tokenFile: ../up-token", "Bearer up" },
		{ "absolute tokenFile", "tokenFile: ABS", "Bearer beside" },
		/* Present only relative to the working folder, which does not count. */
		{ "tokenFile relative to the working folder", "tokenFile: cwd-token", NULL },
		{ "no credentials", "username: nobody", "" },
	};
	struct api_fix *f = *state;
	char *beside = fix_write(f, "kc/token", "beside\n");
	int bad = 0;

	free(fix_write(f, "kc/secrets/token", "in-secrets"));
	free(fix_write(f, "up-token", "up\n"));
	free(fix_write(f, "cwd-token", "cwd\n"));
	assert_int_equal(chdir(f->dir), 0);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char user[512], text[1024], err[CACHE_ERR_LEN] = "";
		struct cache_api *a;
		char *path;

		if (strcmp(cases[i].user, "tokenFile: ABS") == 0)
			snprintf(user, sizeof(user), "tokenFile: '%s'", beside);
		else
			snprintf(user, sizeof(user), "%s", cases[i].user);
		snprintf(text, sizeof(text),
			 "current-context: x\n"
			 "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
			 "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
			 "users: [{name: u, user: {%s}}]\n",
			 user);
		path = fix_kubeconfig_in(f, "kc", text);
		a = cache_api_from_kubeconfig(path, NULL, err, sizeof(err));
		if (cases[i].auth ? !a || strcmp(api_request(a, false).auth, cases[i].auth) != 0
				  : a != NULL || !strstr(err, "cannot read tokenFile")) {
			print_message("%s: %s, sends [%s]\n", cases[i].what,
				      a ? "accepted" : err, a ? api_request(a, false).auth : "");
			bad++;
		}
		cache_api_free(a);
		free(path);
	}
	free(beside);
	assert_int_equal(bad, 0);
}

/* A kubeconfig named by a relative path: its files are relative to its folder,
 * itself relative to the working folder. */
static void test_cache_api_from_kubeconfig_relative_path(void **state)
{
	struct api_fix *f = *state;
	char *path = fix_kubeconfig_with(f, "kc", "", "tokenFile: secrets/token");
	char err[CACHE_ERR_LEN] = "";
	struct cache_api *a;

	free(fix_write(f, "kc/secrets/token", "relative\n"));
	assert_int_equal(chdir(f->dir), 0);
	a = cache_api_from_kubeconfig(path + strlen(f->dir) + 1, NULL, err, sizeof(err));
	if (!a)
		fail_msg("%s", err);
	assert_string_equal(api_request(a, false).auth, "Bearer relative");
	cache_api_free(a);
	free(path);
}

/* Certificate and key files relative to the kubeconfig's folder: libcurl is handed
 * the resolved path, which it names when the file is unusable. */
static void test_cache_api_from_kubeconfig_relative_tls_files(void **state)
{
	static const struct {
		const char *what;
		const char *cluster, *user;
		const char *files[3];           /* created with the test certificate or key */
		CURLcode want;                  /* how the request ends */
		const char *named;              /* the file the failure names */
	} cases[] = {
		{ "certificate-authority", "certificate-authority: pki/ca.crt", "", { NULL },
		  CURLE_SSL_CACERT_BADFILE, "kc/pki/ca.crt" },
		{ "client-certificate", "", "client-certificate: pki/client.crt", { NULL },
		  CURLE_SSL_CERTPROBLEM, "kc/pki/client.crt" },
		{ "client-key", "", "client-certificate: pki/client.crt, client-key: client.key",
		  { "kc/pki/client.crt" }, CURLE_SSL_CERTPROBLEM, "kc/client.key" },
		{ "every file usable", "certificate-authority: ../ca.crt",
		  "client-certificate: pki/client.crt, client-key: pki/client.key",
		  { "ca.crt", "kc/pki/client.crt", "kc/pki/client.key" }, CURLE_SSL_CONNECT_ERROR,
		  NULL },
	};
	struct api_fix *f = *state;
	int bad = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char sub[16], kc[32], err[CACHE_ERR_LEN] = "", *named = NULL;
		struct cache_api *a;
		struct api_req r;
		char *path;

		/* Each case in a folder of its own, so files do not carry over. */
		snprintf(sub, sizeof(sub), "case%zu", i);
		for (size_t k = 0; k < ARRAY_SIZE(cases[i].files) && cases[i].files[k]; k++) {
			char rel[128];

			snprintf(rel, sizeof(rel), "%s/%s", sub, cases[i].files[k]);
			free(fix_write(f, rel, strstr(rel, ".key") ? TEST_KEY_PEM : TEST_CERT_PEM));
		}
		snprintf(kc, sizeof(kc), "%s/kc", sub);
		path = fix_kubeconfig_with(f, kc, cases[i].cluster, cases[i].user);
		a = cache_api_from_kubeconfig(path, NULL, err, sizeof(err));
		if (!a) {
			print_message("%s: refused: %s\n", cases[i].what, err);
			bad++;
			free(path);
			continue;
		}
		r = api_request(a, true);
		if (cases[i].named)
			assert_true(asprintf(&named, "%s/%s/%s", f->dir, sub, cases[i].named) > 0);
		if (r.code != cases[i].want || (named && !names_file(r.msg, named))) {
			print_message("%s: curl %d [%s]; want %d naming %s\n", cases[i].what,
				      r.code, r.msg, cases[i].want, named ? named : "nothing");
			bad++;
		}
		free(named);
		cache_api_free(a);
		free(path);
	}
	assert_int_equal(bad, 0);
}

/* *-data fields are base64 of the PEM text: decoded, they load as the files would. */
static void test_cache_api_from_kubeconfig_inline_data(void **state)
{
	struct api_fix *f = *state;
	char *cert = b64_encode(TEST_CERT_PEM, strlen(TEST_CERT_PEM));
	char *key = b64_encode(TEST_KEY_PEM, strlen(TEST_KEY_PEM));
	const char *junk_text = "not a certificate";
	char *junk = b64_encode(junk_text, strlen(junk_text));
	char *missing_key = NULL;
	const struct {
		const char *what;
		const char *ca, *cert, *key;    /* base64; NULL: left out */
		const char *key_file;
		CURLcode want;                  /* how the request ends */
		const char *named;
	} cases[] = {
		{ "every field usable", cert, cert, key, NULL, CURLE_SSL_CONNECT_ERROR, NULL },
		{ "client certificate from data, key from a file", NULL, cert, NULL, "missing.key",
		  CURLE_SSL_CERTPROBLEM, "missing.key" },
		{ "a CA that is not a certificate", junk, NULL, NULL, NULL,
		  CURLE_SSL_CACERT_BADFILE, NULL },
		{ "a client certificate that is not one", NULL, junk, NULL, NULL,
		  CURLE_SSL_CERTPROBLEM, NULL },
	};
	int bad = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char cluster[2048] = "", user[4096] = "", err[CACHE_ERR_LEN] = "";
		struct cache_api *a;
		struct api_req r;
		char *path;

		if (cases[i].ca)
			snprintf(cluster, sizeof(cluster), "certificate-authority-data: '%s'",
				 cases[i].ca);
		snprintf(user, sizeof(user), "%s%s%s%s%s%s%s%s%s",
			 cases[i].cert ? "client-certificate-data: '" : "",
			 cases[i].cert ? cases[i].cert : "", cases[i].cert ? "', " : "",
			 cases[i].key ? "client-key-data: '" : "", cases[i].key ? cases[i].key : "",
			 cases[i].key ? "', " : "", cases[i].key_file ? "client-key: '" : "",
			 cases[i].key_file ? cases[i].key_file : "",
			 cases[i].key_file ? "', " : "");
		path = fix_kubeconfig_with(f, NULL, cluster, user);
		a = cache_api_from_kubeconfig(path, NULL, err, sizeof(err));
		free(path);
		if (!a) {
			print_message("%s: refused: %s\n", cases[i].what, err);
			bad++;
			continue;
		}
		r = api_request(a, true);
		if (cases[i].named)
			assert_true(asprintf(&missing_key, "%s/%s", f->dir, cases[i].named) > 0);
		if (r.code != cases[i].want || (missing_key && !names_file(r.msg, missing_key))) {
			print_message("%s: curl %d [%s]; want %d\n", cases[i].what, r.code, r.msg,
				      cases[i].want);
			bad++;
		}
		free(missing_key);
		missing_key = NULL;
		cache_api_free(a);
	}
	free(cert);
	free(key);
	free(junk);
	assert_int_equal(bad, 0);
}

static void test_cache_api_from_kubeconfig_insecure_skip_tls_verify(void **state)
{
	static const struct {
		const char *cluster;
		bool insecure;
	} cases[] = {
		{ "insecure-skip-tls-verify: true", true },
		{ "insecure-skip-tls-verify: false", false },
		{ "", false },
	};
	struct api_fix *f = *state;
	int bad = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *path = fix_kubeconfig_with(f, NULL, cases[i].cluster, "token: t");
		char err[CACHE_ERR_LEN] = "";
		struct cache_api *a = cache_api_from_kubeconfig(path, NULL, err, sizeof(err));

		if (!a || (strstr(cache_api_describe(a), "TLS not verified") != NULL) !=
				  cases[i].insecure) {
			print_message("[%s]: %s\n", cases[i].cluster,
				      a ? cache_api_describe(a) : err);
			bad++;
		}
		cache_api_free(a);
		free(path);
	}
	assert_int_equal(bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		API_TEST(test_cache_api_from_kubeconfig_picks_context),
		API_TEST(test_cache_api_from_kubeconfig_refuses),
		API_TEST(test_cache_api_from_kubeconfig_missing_file),
		API_TEST(test_cache_api_from_kubeconfig_token_and_token_file),
		API_TEST(test_cache_api_from_kubeconfig_relative_path),
		API_TEST(test_cache_api_from_kubeconfig_relative_tls_files),
		API_TEST(test_cache_api_from_kubeconfig_inline_data),
		API_TEST(test_cache_api_from_kubeconfig_insecure_skip_tls_verify),
	};
	int ret;

	/* Skipped items and odd pods log warnings by design; keep output to failures. */
	log_set_level(LOG_ERROR);
	cache_api_global_init();
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	cache_api_global_cleanup();
	return ret;
}
