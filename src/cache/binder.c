/* The binder: posts pod bindings to the API server from one thread that
 * drives every request concurrently through a curl multi handle, so a slow
 * API server delays each bind by its own latency, never by a queue behind a
 * lock. Connections are reused across bindings by the multi handle. With
 * leader election (lease.h) a gate is checked as each post starts: a replica
 * that is not the leader posts nothing.
 *
 * What the API server's answers mean (pkg/registry/core/pod/storage):
 *   201                  bound.
 *   409 "... is already assigned to node \"N\""
 *                        bound already: success when N is our node (a bind
 *                        retried after a lost reply), else the pod is elsewhere.
 *   409 otherwise        the UID precondition failed (a re-created pod of the
 *                        same name) or the pod is being deleted.
 *   404                  the pod is gone.
 */
#include "cache/api_internal.h"
#include "cache/lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/util.h"

struct job {
	struct job *next;
	struct job *prev_inflight, *next_inflight;      /* binder thread only */
	char path[600];
	char node[K8S_NAME_BUF];
	char *body;
	CURL *easy;
	struct curl_slist *headers;
	struct strbuf resp;
	cache_bind_done_fn done;
	void *arg;
	char curl_err[CURL_ERROR_SIZE]; /* libcurl's detailed reason */
	uint64_t not_before_ns;         /* monotonic; 0: start at once */
};

struct cache_binder {
	struct cache_api *api;
	CURLM *multi;
	pthread_t thread;
	unsigned timeout_ms;
	pthread_mutex_t lock;
	struct job *head, *tail;        /* queued, not yet started; guarded by lock */
	struct job *inflight;           /* started; binder thread only */
	struct job *deferred;           /* waiting for not_before_ns; binder thread only */
	bool stop;                      /* guarded by lock */
	/* Leader election: posts only while this replica leads; NULL: always.
	 * Set once, before anything is submitted. */
	const struct cache_lease *gate;
};

static size_t on_data(char *ptr, size_t size, size_t n, void *arg)
{
	struct job *j = arg;

	if (j->resp.len < 65536)
		strbuf_append(&j->resp, ptr, size * n);
	return size * n;
}

static void job_free(struct job *j)
{
	if (j->easy)
		curl_easy_cleanup(j->easy);
	curl_slist_free_all(j->headers);
	strbuf_fini(&j->resp);
	free(j->body);
	free(j);
}

int cache_binder_submit(struct cache_binder *b, const struct cache_binding *bind,
			cache_bind_done_fn done, void *arg)
{
	return cache_binder_submit_after(b, bind, 0, done, arg);
}

int cache_binder_submit_after(struct cache_binder *b, const struct cache_binding *bind,
			      unsigned delay_ms, cache_bind_done_fn done, void *arg)
{
	struct strbuf sb = STRBUF_INIT;
	struct job *j = calloc(1, sizeof(*j));
	char *ns = NULL, *name = NULL;
	int ret = 0;

	if (!j)
		return -ENOMEM;
	ns = curl_easy_escape(NULL, bind->ns, 0);
	name = curl_easy_escape(NULL, bind->name, 0);
	if (!ns || !name) {
		ret = -ENOMEM;
		goto out;
	}
	snprintf(j->path, sizeof(j->path), "/api/v1/namespaces/%s/pods/%s/binding", ns, name);
	snprintf(j->node, sizeof(j->node), "%s", bind->node);
	strbuf_puts(&sb, "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":");
	strbuf_put_json_str(&sb, bind->name, strlen(bind->name));
	strbuf_puts(&sb, ",\"namespace\":");
	strbuf_put_json_str(&sb, bind->ns, strlen(bind->ns));
	if (bind->uid && *bind->uid) {
		/* A precondition: never bind a re-created pod of the same name. */
		strbuf_puts(&sb, ",\"uid\":");
		strbuf_put_json_str(&sb, bind->uid, strlen(bind->uid));
	}
	if (bind->annotations) {
		strbuf_puts(&sb, ",\"annotations\":");
		strbuf_puts(&sb, bind->annotations);
	}
	strbuf_puts(&sb, "},\"target\":{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":");
	strbuf_put_json_str(&sb, bind->node, strlen(bind->node));
	strbuf_puts(&sb, "}}");
	j->body = strbuf_take(&sb, NULL);
	if (!j->body) {
		ret = -ENOMEM;
		goto out;
	}
	j->done = done;
	j->arg = arg;
	if (delay_ms)
		j->not_before_ns = util_now_ns() + (uint64_t)delay_ms * 1000000u;
	pthread_mutex_lock(&b->lock);
	if (b->stop) {
		ret = -ESHUTDOWN;
	} else {
		if (b->tail)
			b->tail->next = j;
		else
			b->head = j;
		b->tail = j;
		j = NULL;
	}
	pthread_mutex_unlock(&b->lock);
	if (!ret)
		curl_multi_wakeup(b->multi);
out:
	curl_free(ns);
	curl_free(name);
	if (j)
		job_free(j);
	strbuf_fini(&sb);
	return ret;
}

static int job_start(struct cache_binder *b, struct job *j)
{
	struct curl_slist *n;

	j->easy = curl_easy_init();
	if (!j->easy || cache__api_prepare(b->api, j->easy, j->path, &j->headers) < 0)
		return -ENOMEM;
	n = curl_slist_append(j->headers, "Content-Type: application/json");
	if (!n)
		return -ENOMEM;
	j->headers = n;
	curl_easy_setopt(j->easy, CURLOPT_HTTPHEADER, j->headers);
	curl_easy_setopt(j->easy, CURLOPT_POSTFIELDS, j->body);
	curl_easy_setopt(j->easy, CURLOPT_TIMEOUT_MS, (long)b->timeout_ms);
	curl_easy_setopt(j->easy, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(j->easy, CURLOPT_WRITEDATA, j);
	curl_easy_setopt(j->easy, CURLOPT_PRIVATE, j);
	curl_easy_setopt(j->easy, CURLOPT_ERRORBUFFER, j->curl_err);
	if (curl_multi_add_handle(b->multi, j->easy) != CURLM_OK)
		return -EIO;
	j->next_inflight = b->inflight;
	if (b->inflight)
		b->inflight->prev_inflight = j;
	b->inflight = j;
	return 0;
}

/* Classify a finished request; write what the server said into <msg>. */
static int classify(struct job *j, CURLcode rc, long status, char *msg, size_t len)
{
	cJSON *st = NULL;
	const char *m = NULL;
	char want[300];
	int ret;

	if (rc != CURLE_OK) {
		snprintf(msg, len, "API server unreachable: %s",
			 j->curl_err[0] ? j->curl_err : curl_easy_strerror(rc));
		return rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
	}
	if (j->resp.buf)
		st = cJSON_ParseWithLength(j->resp.buf, j->resp.len);
	m = json_str(st, "message");
	snprintf(msg, len, "HTTP %ld%s%s", status, m ? ": " : "", m ? m : "");
	snprintf(want, sizeof(want), "is already assigned to node \"%s\"", j->node);
	if (status == 201 || status == 200)
		ret = 0;
	else if (status == 409 && m && strstr(m, want))
		ret = 0;
	else if (status == 409)
		ret = -EEXIST;
	else if (status == 404)
		ret = -ENOENT;
	else if (status == 401 || status == 403)
		ret = -EACCES;
	else if (status >= 400 && status < 500)
		ret = -EINVAL;  /* refused as asked (429, 400, 422...): not committed */
	else
		ret = -EIO;
	cJSON_Delete(st);
	return ret;
}

static void inflight_remove(struct cache_binder *b, struct job *j)
{
	curl_multi_remove_handle(b->multi, j->easy);
	if (j->prev_inflight)
		j->prev_inflight->next_inflight = j->next_inflight;
	else
		b->inflight = j->next_inflight;
	if (j->next_inflight)
		j->next_inflight->prev_inflight = j->prev_inflight;
	j->prev_inflight = j->next_inflight = NULL;
}

static void *binder_main(void *arg)
{
	struct cache_binder *b = arg;
	bool stopping = false;

	for (;;) {
		struct job *q, *j;
		CURLMsg *m;
		int running = 0, left, wait_ms;
		uint64_t now;

		pthread_mutex_lock(&b->lock);
		q = b->head;
		b->head = b->tail = NULL;
		stopping = b->stop;
		pthread_mutex_unlock(&b->lock);
		/* Retries whose time has come join the queue; the rest wait on. */
		now = util_now_ns();
		wait_ms = 1000;
		for (struct job **pp = &b->deferred; *pp;) {
			j = *pp;
			if (stopping || j->not_before_ns <= now) {
				*pp = j->next;
				j->next = q;
				q = j;
				continue;
			}
			if ((j->not_before_ns - now) / 1000000u + 1 < (uint64_t)wait_ms)
				wait_ms = (int)((j->not_before_ns - now) / 1000000u + 1);
			pp = &j->next;
		}
		for (; q; q = j) {
			j = q->next;
			q->next = NULL;
			if (!stopping && q->not_before_ns > now) {
				q->next = b->deferred;
				b->deferred = q;
				if ((q->not_before_ns - now) / 1000000u + 1 < (uint64_t)wait_ms)
					wait_ms = (int)((q->not_before_ns - now) / 1000000u + 1);
				continue;
			}
			if (!stopping && b->gate && !cache_lease_is_leader(b->gate)) {
				/* A standby, or a replica that lost its Lease,
				 * posts nothing, retries included: the leader
				 * decides. */
				log_warn("binder", "not posting %s -> node %s: this replica "
					 "does not hold the Lease (a standby, or its lease ran "
					 "out)", q->path, q->node);
				q->done(q->arg, -ECANCELED, "troupe is not the leader: this "
					"replica does not hold the Lease (a standby, or its "
					"lease ran out), so the Binding was not posted", 0);
				job_free(q);
				continue;
			}
			if (stopping || job_start(b, q) < 0) {
				q->done(q->arg, stopping ? -ECANCELED : -ENOMEM,
					stopping ? "troupe is stopping" : "out of memory", 0);
				job_free(q);
			}
		}
		curl_multi_perform(b->multi, &running);
		while ((m = curl_multi_info_read(b->multi, &left))) {
			char msg[512];
			long status = 0;
			curl_off_t retry_after = 0;
			int ret;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&j);
			curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &status);
			ret = classify(j, m->data.result, status, msg, sizeof(msg));
			/* Retry-After in seconds (libcurl parses it; an HTTP date too). */
			if (curl_easy_getinfo(m->easy_handle, CURLINFO_RETRY_AFTER, &retry_after) !=
			    CURLE_OK || retry_after < 0)
				retry_after = 0;
			if (retry_after > 600)
				retry_after = 600;
			if (ret == -EACCES && status == 401)
				cache__api_refresh_token(b->api, true);
			inflight_remove(b, j);
			j->done(j->arg, ret, msg, (unsigned)retry_after * 1000u);
			job_free(j);
		}
		if (stopping)
			break;
		curl_multi_poll(b->multi, NULL, 0, wait_ms, NULL);
	}
	/* Anything still in flight is answered, never dropped. */
	while (b->inflight) {
		struct job *j = b->inflight;

		inflight_remove(b, j);
		j->done(j->arg, -ECANCELED, "troupe is stopping", 0);
		job_free(j);
	}
	return NULL;
}

struct cache_binder *cache_binder_start(struct cache_api *api, unsigned timeout_ms, char *err,
					size_t errlen)
{
	struct cache_binder *b = calloc(1, sizeof(*b));

	if (!b) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	b->api = api;
	b->timeout_ms = timeout_ms ? timeout_ms : 10000;
	pthread_mutex_init(&b->lock, NULL);
	b->multi = curl_multi_init();
	if (!b->multi || pthread_create(&b->thread, NULL, binder_main, b) != 0) {
		snprintf(err, errlen, "cannot start the binder");
		if (b->multi)
			curl_multi_cleanup(b->multi);
		free(b);
		return NULL;
	}
	return b;
}

void cache_binder_set_gate(struct cache_binder *b, const struct cache_lease *lease)
{
	b->gate = lease;
}

void cache_binder_shutdown(struct cache_binder *b)
{
	bool joined;

	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	joined = b->stop;
	b->stop = true;
	pthread_mutex_unlock(&b->lock);
	if (joined)
		return;
	curl_multi_wakeup(b->multi);
	pthread_join(b->thread, NULL);
	/* Anything queued after the thread's last look is answered here. */
	for (;;) {
		struct job *q;

		pthread_mutex_lock(&b->lock);
		q = b->head;
		b->head = b->tail = NULL;
		pthread_mutex_unlock(&b->lock);
		if (!q)
			break;
		while (q) {
			struct job *next = q->next;

			q->done(q->arg, -ECANCELED, "troupe is stopping", 0);
			job_free(q);
			q = next;
		}
	}
}

void cache_binder_free(struct cache_binder *b)
{
	if (!b)
		return;
	cache_binder_shutdown(b);
	curl_multi_cleanup(b->multi);
	pthread_mutex_destroy(&b->lock);
	free(b);
}
