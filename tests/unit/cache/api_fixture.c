/* Fixtures of the API client's tests (test_api.c, test_kubeconfig.c): a
 * throwaway certificate and key, a fresh folder and environment per test, files
 * and kubeconfigs written into it, and one request run through a cache_api
 * against a loopback listener, to see what troupe would send.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_fixture.h"

static const char *const API_ENV[API_ENV_COUNT] = {
	"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "TROUPE_SERVICEACCOUNT_DIR",
};

/* A throwaway self-signed certificate and its key. Nothing trusts them: they only let
 * libcurl load a client certificate, a key and a CA bundle without complaint. */
const char TEST_CERT_PEM[] =
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBhDCCASmgAwIBAgIUBpt3N2+E4jIrbHVlpGh/LV8SZ6UwCgYIKoZIzj0EAwIw\n"
	"FjEUMBIGA1UEAwwLdHJvdXBlLXRlc3QwIBcNMjYxMTI5MTMwOTQzWhgPMjEyNjEx\n"
	"MDUxMzA5NDNaMBYxFDASBgNVBAMMC3Ryb3VwZS10ZXN0MFkwEwYHKoZIzj0CAQYI\n"
	"KoZIzj0DAQcDQgAEVKzpz0BRR2BVpdJHIMq8BJJwLl+fuckYR2cOHlhBYrr6aX1M\n"
	"5EHaA0/ukU0tUyorzxlQyXiBrTOUv2QcmTVZ+qNTMFEwHQYDVR0OBBYEFErgRsPV\n"
	"jv1zBYO0Nzw7HT2gWWs1MB8GA1UdIwQYMBaAFErgRsPVjv1zBYO0Nzw7HT2gWWs1\n"
	"MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAOmHPRzW1ite5jIx\n"
	"eBHS5kUE7m3cxcrLnEASaOih8JCZAiEAjIhDOKqQVTHtTn/ZFfAWHjZo49BdN+lA\n"
	"28QtRtZNRFo=\n"
	"-----END CERTIFICATE-----\n";
const char TEST_KEY_PEM[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgdfJMJV4uEnAEcp+q\n"
	"74irIdsr53TZ4EtLyknDIiCER9ehRANCAARUrOnPQFFHYFWl0kcgyrwEknAuX5+5\n"
	"yRhHZw4eWEFiuvppfUzkQdoDT+6RTS1TKivPGVDJeIGtM5S/ZByZNVn6\n"
	"-----END PRIVATE KEY-----\n";

char *b64_encode(const char *in, size_t n)
{
	static const char alpha[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

	assert_non_null(out);
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)(unsigned char)in[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)(unsigned char)in[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)in[i + 2];
		*o++ = alpha[(v >> 18) & 63];
		*o++ = alpha[(v >> 12) & 63];
		*o++ = i + 1 < n ? alpha[(v >> 6) & 63] : '=';
		*o++ = i + 2 < n ? alpha[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

int api_setup(void **state)
{
	struct api_fix *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/troupe-test-api-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	for (size_t i = 0; i < ARRAY_SIZE(API_ENV); i++) {
		const char *v = getenv(API_ENV[i]);

		f->env[i] = v ? strdup(v) : NULL;
	}
	f->cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	*state = f;
	return 0;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

int api_teardown(void **state)
{
	struct api_fix *f = *state;
	int ret = 0;

	for (size_t i = 0; i < ARRAY_SIZE(API_ENV); i++) {
		if (f->env[i])
			setenv(API_ENV[i], f->env[i], 1);
		else
			unsetenv(API_ENV[i]);
		free(f->env[i]);
	}
	if (f->cwd >= 0) {
		if (fchdir(f->cwd) != 0)
			ret = -1;
		close(f->cwd);
	}
	if (nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
		ret = -1;
	free(f);
	return ret;
}

static void write_all(int fd, const char *text)
{
	size_t len = strlen(text);

	while (len > 0) {
		ssize_t w = write(fd, text, len);

		assert_true(w > 0);
		text += w;
		len -= (size_t)w;
	}
}

/* Make every folder of <path> up to its last '/', from offset <from> on. */
static void mkdirs(char *path, size_t from)
{
	for (char *p = path + from; (p = strchr(p, '/')); p++) {
		*p = '\0';
		assert_true(mkdir(path, 0700) == 0 || errno == EEXIST);
		*p = '/';
	}
}

/* Write <text> to <rel> inside the test's folder, making the folders on the way.
 * Returns the full path; the caller frees it. */
char *fix_write(struct api_fix *f, const char *rel, const char *text)
{
	char *path = NULL;
	int fd;

	assert_true(asprintf(&path, "%s/%s", f->dir, rel) > 0);
	mkdirs(path, strlen(f->dir) + 1);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	write_all(fd, text);
	close(fd);
	return path;
}

/* A kubeconfig file with <yaml>, made by mkstemp in the test's folder (or in its
 * sub-folder <sub> when not NULL). The caller frees the path. */
char *fix_kubeconfig_in(struct api_fix *f, const char *sub, const char *yaml)
{
	char *path = NULL;
	int fd;

	if (sub) {
		char *dir = NULL;

		assert_true(asprintf(&dir, "%s/%s/", f->dir, sub) > 0);
		mkdirs(dir, strlen(f->dir) + 1);
		free(dir);
	}
	assert_true(asprintf(&path, "%s/%s%skubeconfig-XXXXXX", f->dir, sub ? sub : "",
			     sub ? "/" : "") > 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	write_all(fd, yaml);
	close(fd);
	return path;
}

char *fix_kubeconfig(struct api_fix *f, const char *yaml)
{
	return fix_kubeconfig_in(f, NULL, yaml);
}

/* A kubeconfig (in sub-folder <sub> when not NULL) with one context "test" whose
 * cluster and user maps hold the YAML flow entries <cluster> and <user>. */
char *fix_kubeconfig_with(struct api_fix *f, const char *sub, const char *cluster,
				 const char *user)
{
	char text[8192];

	snprintf(text, sizeof(text),
		 "apiVersion: v1\n"
		 "kind: Config\n"
		 "current-context: test\n"
		 "clusters:\n"
		 "- name: c\n"
		 "  cluster: {server: 'https://127.0.0.1:6443'%s%s}\n"
		 "contexts:\n"
		 "- name: test\n"
		 "  context: {cluster: c, user: u}\n"
		 "users:\n"
		 "- name: u\n"
		 "  user: {%s}\n",
		 cluster[0] ? ", " : "", cluster, user);
	return fix_kubeconfig_in(f, sub, text);
}

/* A listening socket on a free loopback port, non-blocking. Returns the port. */
static int loopback_listener(int *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

/* Prepare a request through <api> as the informer and binder do, and note what it
 * would send. With <send>, also run it, whatever host the URL names, against a
 * loopback listener that answers anything with a reply that is not TLS: libcurl
 * loads the TLS credentials once connected (failing with CURLE_SSL_CACERT_BADFILE or
 * CURLE_SSL_CERTPROBLEM, naming the file, when one is unusable), then fails on the
 * reply with CURLE_SSL_CONNECT_ERROR. Nothing leaves the host; the loop waits on
 * the sockets, with a deadline. */
struct api_req api_request(struct cache_api *api, bool send)
{
	static const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
	struct api_req r = { .code = CURLE_OK };
	struct curl_slist *headers = NULL, *redirect = NULL;
	char *url = NULL, connect_to[64];
	int lfd, sfd = -1, port, running = 1, left;
	uint64_t deadline = util_now_ns() + UINT64_C(10000000000);
	CURL *e = curl_easy_init();
	CURLM *m;
	CURLMsg *done;

	assert_non_null(e);
	assert_int_equal(cache__api_prepare(api, e, "/api/v1/nodes", &headers), 0);
	for (const struct curl_slist *l = headers; l; l = l->next)
		if (strncmp(l->data, "Authorization: ", 15) == 0)
			snprintf(r.auth, sizeof(r.auth), "%s", l->data + 15);
	if (!send)
		goto out;
	lfd = loopback_listener(&port);
	snprintf(connect_to, sizeof(connect_to), "::127.0.0.1:%d", port);
	redirect = curl_slist_append(NULL, connect_to);
	assert_non_null(redirect);
	curl_easy_setopt(e, CURLOPT_CONNECT_TO, redirect);
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r.msg);
	m = curl_multi_init();
	assert_non_null(m);
	assert_int_equal(curl_multi_add_handle(m, e), CURLM_OK);
	while (running && util_now_ns() < deadline) {
		struct curl_waitfd w = { .fd = lfd, .events = CURL_WAIT_POLLIN };

		assert_int_equal(curl_multi_perform(m, &running), CURLM_OK);
		if (sfd < 0 && (sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
			assert_int_equal(write(sfd, reply, sizeof(reply) - 1),
					 (ssize_t)sizeof(reply) - 1);
		if (running)
			curl_multi_poll(m, &w, sfd < 0 ? 1 : 0, 100, NULL);
	}
	done = curl_multi_info_read(m, &left);
	if (!done || done->msg != CURLMSG_DONE)
		fail_msg("the request did not end before its deadline");
	r.code = done->data.result;
	if (curl_easy_getinfo(e, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK && url)
		snprintf(r.url, sizeof(r.url), "%s", url);
	curl_multi_remove_handle(m, e);
	curl_multi_cleanup(m);
	curl_slist_free_all(redirect);
	if (sfd >= 0)
		close(sfd);
	close(lfd);
out:
	curl_easy_cleanup(e);
	curl_slist_free_all(headers);
	return r;
}

static bool path_char(char ch)
{
	return isalnum((unsigned char)ch) || ch == '/' || ch == '.' || ch == '-' || ch == '_';
}

/* Whether <msg> names exactly <path>, not a longer path that contains it. */
bool names_file(const char *msg, const char *path)
{
	size_t n = strlen(path);

	for (const char *p = msg; (p = strstr(p, path)); p++)
		if ((p == msg || !path_char(p[-1])) && !path_char(p[n]))
			return true;
	return false;
}
