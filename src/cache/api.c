/* Where the API server is and how troupe proves who it is: kubeconfig files,
 * in-cluster service accounts and plain URLs, turned into libcurl options.
 *
 * The bearer token may come from a file that rotates (projected service
 * account tokens are replaced about every hour): like client-go, troupe re-reads
 * it once a minute when the file changed, and at once after a 401.
 */
#include "cache/api_internal.h"

#include <errno.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/util.h"
#include "common/yamljson.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define TOKEN_RECHECK_NS (60ULL * 1000 * 1000 * 1000)
enum { MAX_CRED_BYTES = 1 << 20 };

struct blob {
	char *data;
	size_t len;
};

struct cache_api {
	char *base;                     /* "https://host:port", no trailing slash */
	char describe[512];
	bool insecure;
	char *ca_file;
	struct blob ca;
	char *cert_file, *key_file;
	struct blob cert, key;
	char *token_file;
	pthread_mutex_t lock;
	char *token;                    /* guarded by lock */
	struct timespec token_mtime;    /* guarded by lock */
	uint64_t token_checked_ns;      /* guarded by lock */
};

static struct cache_api *api_new(const char *base)
{
	struct cache_api *a = calloc(1, sizeof(*a));
	size_t n;

	if (!a)
		return NULL;
	a->base = strdup(base);
	if (!a->base) {
		free(a);
		return NULL;
	}
	n = strlen(a->base);
	while (n > 0 && a->base[n - 1] == '/')
		a->base[--n] = '\0';
	pthread_mutex_init(&a->lock, NULL);
	return a;
}

void cache_api_free(struct cache_api *a)
{
	if (!a)
		return;
	free(a->base);
	free(a->ca_file);
	free(a->ca.data);
	free(a->cert_file);
	free(a->key_file);
	free(a->cert.data);
	free(a->key.data);
	free(a->token_file);
	free(a->token);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

const char *cache_api_describe(const struct cache_api *a)
{
	return a->describe;
}

/* ---- Tokens -------------------------------------------------------------- */

static char *trim_dup(const char *s, size_t len)
{
	while (len && (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' '))
		len--;
	while (len && (*s == ' ' || *s == '\n')) {
		s++;
		len--;
	}
	return strndup(s, len);
}

/* Read the token file into a->token. Lock held. */
static int token_load(struct cache_api *a)
{
	char *buf = NULL, *tok;
	size_t len;
	struct stat st;
	int ret;

	if (stat(a->token_file, &st) < 0)
		return -errno;
	ret = util_read_file(a->token_file, MAX_CRED_BYTES, &buf, &len);
	if (ret < 0)
		return ret;
	tok = trim_dup(buf, len);
	free(buf);
	if (!tok)
		return -ENOMEM;
	if (!a->token || strcmp(a->token, tok) != 0) {
		if (a->token)
			log_info("api", "bearer token reloaded from %s", a->token_file);
		free(a->token);
		a->token = tok;
	} else {
		free(tok);
	}
	a->token_mtime = st.st_mtim;
	return 0;
}

void cache__api_refresh_token(struct cache_api *a, bool force)
{
	struct stat st;
	uint64_t now = util_now_ns();

	if (!a->token_file)
		return;
	pthread_mutex_lock(&a->lock);
	if (!force && now - a->token_checked_ns < TOKEN_RECHECK_NS)
		goto out;
	a->token_checked_ns = now;
	if (!force && stat(a->token_file, &st) == 0 &&
	    st.st_mtim.tv_sec == a->token_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == a->token_mtime.tv_nsec)
		goto out;
	if (token_load(a) < 0)
		log_warn("api", "cannot re-read token file %s; keeping the previous token",
			 a->token_file);
out:
	pthread_mutex_unlock(&a->lock);
}

/* ---- curl setup ------------------------------------------------------------ */

int cache__api_prepare(struct cache_api *a, CURL *easy, const char *path,
		       struct curl_slist **headers)
{
	char url[4096];
	struct curl_slist *h = NULL, *n;

	snprintf(url, sizeof(url), "%s%s", a->base, path);
	curl_easy_setopt(easy, CURLOPT_URL, url);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(easy, CURLOPT_USERAGENT, "troupe/0 (scheduler extender)");
	if (a->insecure) {
		curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (a->ca_file)
		curl_easy_setopt(easy, CURLOPT_CAINFO, a->ca_file);
	if (a->ca.data) {
		struct curl_blob b = { a->ca.data, a->ca.len, CURL_BLOB_NOCOPY };

		curl_easy_setopt(easy, CURLOPT_CAINFO_BLOB, &b);
	}
	if (a->cert_file)
		curl_easy_setopt(easy, CURLOPT_SSLCERT, a->cert_file);
	if (a->key_file)
		curl_easy_setopt(easy, CURLOPT_SSLKEY, a->key_file);
	if (a->cert.data) {
		struct curl_blob b = { a->cert.data, a->cert.len, CURL_BLOB_NOCOPY };

		curl_easy_setopt(easy, CURLOPT_SSLCERT_BLOB, &b);
		curl_easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
	}
	if (a->key.data) {
		struct curl_blob b = { a->key.data, a->key.len, CURL_BLOB_NOCOPY };

		curl_easy_setopt(easy, CURLOPT_SSLKEY_BLOB, &b);
		curl_easy_setopt(easy, CURLOPT_SSLKEYTYPE, "PEM");
	}
	n = curl_slist_append(h, "Accept: application/json");
	if (!n)
		goto nomem;
	h = n;
	cache__api_refresh_token(a, false);
	pthread_mutex_lock(&a->lock);
	if (a->token) {
		char *auth = malloc(strlen(a->token) + 32);

		if (auth) {
			sprintf(auth, "Authorization: Bearer %s", a->token);
			n = curl_slist_append(h, auth);
			free(auth);
		}
		if (!auth || !n) {
			pthread_mutex_unlock(&a->lock);
			goto nomem;
		}
		h = n;
	}
	pthread_mutex_unlock(&a->lock);
	*headers = h;
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, h);
	return 0;
nomem:
	curl_slist_free_all(h);
	return -ENOMEM;
}

/* ---- One blocking request ----------------------------------------------------
 *
 * For the rare requests that need no multi handle (the event recorder's
 * writes, the reviews, the pod delete, the PodGroup status writer's): one easy
 * handle, the answer's body kept up to call->max_answer bytes (more is
 * dropped, call->cut set), and an optional flag that aborts it.
 */
struct api_answer {
	struct strbuf *body;
	struct cache__api_call *call;
};

static size_t api_answer_data(char *ptr, size_t size, size_t n, void *arg)
{
	struct api_answer *a = arg;

	if (a->body->len + size * n > a->call->max_answer)
		a->call->cut = true;
	else
		strbuf_append(a->body, ptr, size * n);
	return size * n;
}

/* libcurl's progress callback, with call->abort: a set flag ends the request. */
static int api_abort_check(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
			   curl_off_t ulnow)
{
	const bool *abort = arg;

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return __atomic_load_n(abort, __ATOMIC_RELAXED) ? 1 : 0;
}

int cache__api_request(struct cache_api *a, struct cache__api_call *call,
		       struct strbuf *answer, char *err, size_t errlen)
{
	char curl_err[CURL_ERROR_SIZE] = "", ctype[128];
	struct curl_slist *headers = NULL, *n;
	struct api_answer ans = { answer, call };
	CURL *easy = call->easy ? call->easy : curl_easy_init();
	CURLcode rc;
	int ret = -ENOMEM;

	call->status = 0;
	call->cut = false;
	snprintf(err, errlen, "out of memory");
	if (!easy)
		goto out;
	if (call->easy)
		curl_easy_reset(easy);
	if (cache__api_prepare(a, easy, call->path, &headers) < 0)
		goto out;
	if (call->content_type) {
		snprintf(ctype, sizeof(ctype), "Content-Type: %s", call->content_type);
		n = curl_slist_append(headers, ctype);
		if (!n)
			goto out;
		headers = n;
		curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
	}
	curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, call->method);
	if (call->body)
		curl_easy_setopt(easy, CURLOPT_POSTFIELDS, call->body);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)call->timeout_ms);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, api_answer_data);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, &ans);
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, curl_err);
	if (call->abort) {
		curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, api_abort_check);
		curl_easy_setopt(easy, CURLOPT_XFERINFODATA, call->abort);
	}
	rc = curl_easy_perform(easy);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "API server unreachable: %s",
			 curl_err[0] ? curl_err : curl_easy_strerror(rc));
		ret = rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
		goto out;
	}
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &call->status);
	/* troupe's own token was refused: the next request re-reads the file
	 * (a rotated projected token), as the informer and binder do. */
	if (call->status == 401)
		cache__api_refresh_token(a, true);
	err[0] = '\0';
	ret = 0;
out:
	curl_slist_free_all(headers);
	/* A kept handle must not point at this call's buffers and headers. */
	if (call->easy && easy)
		curl_easy_reset(easy);
	else if (easy)
		curl_easy_cleanup(easy);
	return ret;
}

void cache__api_status_text(long status, const char *body, size_t len, char *out,
			    size_t outlen)
{
	char msg[TROUPE_MESSAGE_BUF];

	cache__status_message(body ? body : "", len, msg, sizeof(msg));
	snprintf(out, outlen, "HTTP %ld%s%s", status, msg[0] ? ": " : "", msg);
}

/* ---- Sources ------------------------------------------------------------ */

struct cache_api *cache_api_from_url(const char *url, const char *token_file, char *err,
				     size_t errlen)
{
	struct cache_api *a;

	if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
		snprintf(err, errlen, "API server URL \"%s\" must start with http:// or https://",
			 url);
		return NULL;
	}
	a = api_new(url);
	if (!a) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (token_file) {
		a->token_file = strdup(token_file);
		if (!a->token_file || token_load(a) < 0) {
			snprintf(err, errlen, "cannot read token file %s", token_file);
			cache_api_free(a);
			return NULL;
		}
	}
	snprintf(a->describe, sizeof(a->describe), "%s%s%s", a->base,
		 token_file ? ", token from " : "", token_file ? token_file : "");
	return a;
}

void cache_api_global_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

void cache_api_global_cleanup(void)
{
	curl_global_cleanup();
}

bool cache_api_in_cluster_available(void)
{
	const char *h = getenv("KUBERNETES_SERVICE_HOST"), *p = getenv("KUBERNETES_SERVICE_PORT");

	return h && *h && p && *p;
}

struct cache_api *cache_api_in_cluster(char *err, size_t errlen)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	const char *dir = getenv("TROUPE_SERVICEACCOUNT_DIR");     /* tests only */
	char url[512], path[1024];
	struct cache_api *a;

	if (!cache_api_in_cluster_available()) {
		snprintf(err, errlen, "not running in a cluster: KUBERNETES_SERVICE_HOST and "
			 "KUBERNETES_SERVICE_PORT must both be set");
		return NULL;
	}
	if (!dir)
		dir = SA_DIR;
	/* IPv6 service addresses go in brackets. */
	snprintf(url, sizeof(url), strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
		 port);
	a = api_new(url);
	if (!a) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(path, sizeof(path), "%s/token", dir);
	a->token_file = strdup(path);
	snprintf(path, sizeof(path), "%s/ca.crt", dir);
	a->ca_file = strdup(path);
	if (!a->token_file || !a->ca_file || token_load(a) < 0) {
		snprintf(err, errlen, "in-cluster: cannot read the service account token %s/token",
			 dir);
		cache_api_free(a);
		return NULL;
	}
	if (access(a->ca_file, R_OK) < 0) {
		/* Without it nothing could be verified: say so now, not at every list. */
		snprintf(err, errlen, "in-cluster: cannot read the service account CA %s", a->ca_file);
		cache_api_free(a);
		return NULL;
	}
	snprintf(a->describe, sizeof(a->describe), "%s (in-cluster service account)", a->base);
	return a;
}

/* ---- kubeconfig ------------------------------------------------------------ */

static int b64_decode(const char *in, struct blob *out)
{
	static signed char table[256];
	static bool ready;
	size_t n = strlen(in), o = 0;
	unsigned v = 0;
	int bits = 0;
	char *buf;

	/* Built on first use; kubeconfigs are read once, at start-up. */
	if (!ready) {
		const char *alpha =
			"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

		memset(table, -1, sizeof(table));
		for (int i = 0; alpha[i]; i++)
			table[(unsigned char)alpha[i]] = (signed char)i;
		ready = true;
	}
	buf = malloc(n * 3 / 4 + 4);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c == '=' || c == '\n' || c == '\r' || c == ' ')
			continue;
		if (table[c] < 0) {
			free(buf);
			return -EINVAL;
		}
		v = (v << 6) | (unsigned)table[c];
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[o++] = (char)((v >> bits) & 0xFF);
		}
	}
	buf[o] = '\0';
	out->data = buf;
	out->len = o;
	return 0;
}

/* A kubeconfig string. YAML gives plain scalars such as 12345 or 2024 as
 * numbers; kubectl reads them as strings, and so does troupe (yamljson keeps
 * a number's source text in valuestring). */
static const char *kc_str(const cJSON *obj, const char *key)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (cJSON_IsString(it) || (cJSON_IsNumber(it) && it->valuestring))
		return it->valuestring;
	return NULL;
}

/* The entry called <name> in the kubeconfig list <list>, its <field> object. */
static const cJSON *named(const cJSON *list, const char *name, const char *field)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, json_list(list)) {
		const char *n = kc_str(it, "name");

		if (n && strcmp(n, name) == 0)
			return json_obj(it, field);
	}
	return NULL;
}

/* A path from the kubeconfig, made absolute against its folder. */
static char *kc_path(const char *dir, const char *p)
{
	char *out;

	if (!p || !*p)
		return NULL;
	if (p[0] == '/')
		return strdup(p);
	out = malloc(strlen(dir) + strlen(p) + 2);
	if (out)
		sprintf(out, "%s/%s", dir, p);
	return out;
}

struct cache_api *cache_api_from_kubeconfig(const char *path, const char *context, char *err,
					    size_t errlen)
{
	char *buf = NULL, *dircopy = NULL, yerr[192];
	const char *dir, *server, *ctx_name, *cluster_name, *user_name, *s;
	const cJSON *root, *ctx, *cluster, *user;
	struct cache_api *a = NULL;
	cJSON *docs = NULL;
	size_t len;
	int ret;

	ret = util_read_file(path, MAX_CRED_BYTES, &buf, &len);
	if (ret < 0) {
		snprintf(err, errlen, "kubeconfig %s: %s", path, strerror(-ret));
		goto out;
	}
	docs = yamljson_parse(buf, len, yerr, sizeof(yerr));
	if (!docs) {
		snprintf(err, errlen, "kubeconfig %s: %s", path, yerr);
		goto out;
	}
	root = cJSON_GetArrayItem(docs, 0);
	ctx_name = context ? context : kc_str(root, "current-context");
	if (!ctx_name || !*ctx_name) {
		snprintf(err, errlen, "kubeconfig %s has no current-context", path);
		goto out;
	}
	ctx = named(cJSON_GetObjectItemCaseSensitive(root, "contexts"), ctx_name, "context");
	if (!ctx) {
		snprintf(err, errlen, "kubeconfig %s: context \"%s\" not found", path, ctx_name);
		goto out;
	}
	cluster_name = kc_str(ctx, "cluster");
	user_name = kc_str(ctx, "user");
	cluster = cluster_name ? named(cJSON_GetObjectItemCaseSensitive(root, "clusters"),
				       cluster_name, "cluster") : NULL;
	user = user_name ? named(cJSON_GetObjectItemCaseSensitive(root, "users"), user_name, "user")
			 : NULL;
	server = kc_str(cluster, "server");
	if (!server) {
		snprintf(err, errlen, "kubeconfig %s: context \"%s\" names no cluster with a server",
			 path, ctx_name);
		goto out;
	}
	if (user && (cJSON_GetObjectItemCaseSensitive(user, "exec") ||
		     cJSON_GetObjectItemCaseSensitive(user, "auth-provider"))) {
		snprintf(err, errlen, "kubeconfig %s: user \"%s\" authenticates through an exec or "
			 "auth-provider plugin, which troupe does not run; give it a token, "
			 "tokenFile or client certificate", path, user_name);
		goto out;
	}
	dircopy = strdup(path);
	if (!dircopy)
		goto nomem;
	dir = dirname(dircopy);
	a = cache_api_from_url(server, NULL, err, errlen);
	if (!a)
		goto out;
	a->insecure = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cluster,
								    "insecure-skip-tls-verify"));
	a->ca_file = kc_path(dir, kc_str(cluster, "certificate-authority"));
	if ((s = kc_str(cluster, "certificate-authority-data")) && b64_decode(s, &a->ca) < 0)
		goto bad64;
	a->cert_file = kc_path(dir, kc_str(user, "client-certificate"));
	a->key_file = kc_path(dir, kc_str(user, "client-key"));
	if ((s = kc_str(user, "client-certificate-data")) && b64_decode(s, &a->cert) < 0)
		goto bad64;
	if ((s = kc_str(user, "client-key-data")) && b64_decode(s, &a->key) < 0)
		goto bad64;
	if ((s = kc_str(user, "token")) && *s) {
		a->token = strdup(s);
	} else if ((s = kc_str(user, "tokenFile")) && *s) {
		a->token_file = kc_path(dir, s);
		if (!a->token_file || token_load(a) < 0) {
			snprintf(err, errlen, "kubeconfig %s: cannot read tokenFile %s", path, s);
			cache_api_free(a);
			a = NULL;
			goto out;
		}
	}
	snprintf(a->describe, sizeof(a->describe), "%s (kubeconfig %s, context %s%s)", a->base,
		 path, ctx_name, a->insecure ? ", TLS not verified" : "");
	goto out;
bad64:
	snprintf(err, errlen, "kubeconfig %s: a *-data field is not valid base64", path);
	cache_api_free(a);
	a = NULL;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	free(dircopy);
	cJSON_Delete(docs);
	free(buf);
	return a;
}

int cache_api_call(struct cache_api *api, const char *method, const char *path,
		   const char *content_type, const char *body, unsigned timeout_ms,
		   struct strbuf *answer, long *status, char *err, size_t errlen)
{
	struct cache__api_call call = {
		.method = method, .path = path, .content_type = body ? content_type : NULL,
		.body = body, .timeout_ms = timeout_ms, .max_answer = 4u << 20,
	};
	int ret = cache__api_request(api, &call, answer, err, errlen);

	*status = call.status;
	return ret;
}

void cache_api_status_text(long status, const char *body, size_t len, char *out, size_t outlen)
{
	cache__api_status_text(status, body, len, out, outlen);
}
