/* Fixtures of the API client's tests (api_fixture.c). Include after cmocka.h. */
#ifndef TROUPE_TEST_CACHE_API_FIXTURE_H
#define TROUPE_TEST_CACHE_API_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include "cache/api.h"
#include "cache/api_internal.h"
#include "fixture.h"

/* The environment an API test may change and teardown restores:
 * KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT, TROUPE_SERVICEACCOUNT_DIR. */
enum { API_ENV_COUNT = 3 };

/* Each API test gets a fresh folder under /tmp; teardown puts the environment and
 * the working folder back as they were and removes the folder, also after a
 * failed assertion. */
struct api_fix {
	char dir[64];
	char *env[API_ENV_COUNT];
	int cwd;
};

/* What one request through <api> sends, and how it ends. */
struct api_req {
	char auth[512];                 /* the Authorization header's value, "" without */
	char url[512];                  /* the URL requested ("" unless sent) */
	CURLcode code;                  /* how the request ended (CURLE_OK unless sent) */
	char msg[CURL_ERROR_SIZE];
};

#define API_TEST(f) cmocka_unit_test_setup_teardown(f, api_setup, api_teardown)

extern const char TEST_CERT_PEM[];
extern const char TEST_KEY_PEM[];

/* <n> bytes of <in> in base64, as kubeconfig's *-data fields hold them; the
 * caller frees it. */
char *b64_encode(const char *in, size_t n);

/* A fresh folder and the environment saved (*state: a struct api_fix), and
 * everything put back. */
int api_setup(void **state);
int api_teardown(void **state);

/* Write <text> to <rel> inside the test's folder, making the folders on the way.
 * Returns the full path; the caller frees it. */
char *fix_write(struct api_fix *f, const char *rel, const char *text);

/* A kubeconfig file with <yaml>, made by mkstemp in the test's folder (or in its
 * sub-folder <sub> when not NULL). The caller frees the path. */
char *fix_kubeconfig_in(struct api_fix *f, const char *sub, const char *yaml);

/* The same in the test's folder itself. */
char *fix_kubeconfig(struct api_fix *f, const char *yaml);

/* A kubeconfig (in sub-folder <sub> when not NULL) with one context "test" whose
 * cluster and user maps hold the YAML flow entries <cluster> and <user>. */
char *fix_kubeconfig_with(struct api_fix *f, const char *sub, const char *cluster,
			  const char *user);

/* Prepare a request through <api> as the informer and binder do, and note what it
 * would send. With <send>, also run it, whatever host the URL names, against a
 * loopback listener that answers anything with a reply that is not TLS: libcurl
 * loads the TLS credentials once connected (failing with CURLE_SSL_CACERT_BADFILE or
 * CURLE_SSL_CERTPROBLEM, naming the file, when one is unusable), then fails on the
 * reply with CURLE_SSL_CONNECT_ERROR. Nothing leaves the host; the loop waits on
 * the sockets, with a deadline. */
struct api_req api_request(struct cache_api *api, bool send);

/* Whether <msg> names exactly <path>, not a longer path that contains it. */
bool names_file(const char *msg, const char *path);

#endif
