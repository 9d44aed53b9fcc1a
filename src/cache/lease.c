/* Leader election on a coordination.k8s.io/v1 Lease (lease.h says what and
 * why). The decision functions are pure; the elector's thread reads the Lease,
 * decides, and writes it with the resourceVersion it read, one attempt every
 * retry period:
 *
 *   GET  /apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME
 *        404: POST the new Lease (409: another replica created it first)
 *        else decide; WAIT, or PUT the object read with the new spec
 *        (409: another write came first - this attempt failed)
 *
 * as client-go's tryAcquireOrRenew does (without its optimistic fast path: one
 * GET more per renewal, every 2 s, buys one code path). The leader's state is
 * time-based: cache_lease_is_leader turns false once the renew deadline has
 * passed since the last successful write was sent, whatever the thread is
 * doing, so a replica stuck on a slow API server stops leading on time.
 */
#include "cache/lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/api_internal.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/util.h"

#define NS_PER_S 1000000000ULL

/* Why an attempt failed: a method, the Lease's path (K8S_KEY_BUF + 64) and
 * the API server's message (TROUPE_MESSAGE_BUF), with room to spare. */
enum { LEASE_WHY_BUF = 1024 };

/* ---- The decision ------------------------------------------------------------ */

static bool record_equal(const struct cache_lease_record *a, const struct cache_lease_record *b)
{
	return strcmp(a->holder, b->holder) == 0 && a->holder_cut == b->holder_cut &&
	       a->duration_s == b->duration_s && a->acquire_us == b->acquire_us &&
	       a->renew_us == b->renew_us && a->transitions == b->transitions &&
	       strcmp(a->version, b->version) == 0;
}

static bool is_me(const struct cache_lease_record *r, const char *me)
{
	return !r->holder_cut && r->holder[0] && strcmp(r->holder, me) == 0;
}

void cache_lease_observe(struct cache_lease_view *v, const struct cache_lease_record *got,
			 uint64_t now_ns)
{
	if (v->observed && record_equal(&v->rec, got))
		return;
	v->rec = *got;
	v->observed = true;
	v->seen_ns = now_ns;
}

enum cache_lease_action cache_lease_decide(const struct cache_lease_view *v, bool found,
					   const char *me, uint64_t now_ns, int64_t wall_us,
					   unsigned duration_s, struct cache_lease_record *out)
{
	const struct cache_lease_record *r = &v->rec;

	memset(out, 0, sizeof(*out));
	snprintf(out->holder, sizeof(out->holder), "%s", me);
	out->duration_s = (int32_t)duration_s;
	out->acquire_us = out->renew_us = wall_us;
	if (!found)
		return CACHE_LEASE_CREATE;
	if (is_me(r, me)) {
		out->acquire_us = r->acquire_us;
		out->transitions = r->transitions;
		return CACHE_LEASE_RENEW;
	}
	/* Valid while the record has not changed for its own duration on my
	 * clock; a negative duration is no duration. */
	if (r->holder[0] &&
	    util_elapsed_ns(now_ns, v->seen_ns) <
	    (uint64_t)(r->duration_s > 0 ? r->duration_s : 0) * NS_PER_S)
		return CACHE_LEASE_WAIT;
	out->transitions = r->transitions + 1;
	return CACHE_LEASE_ACQUIRE;
}

void cache_lease_wrote(struct cache_lease_view *v, const struct cache_lease_record *rec,
		       uint64_t sent_ns)
{
	v->rec = *rec;
	v->observed = true;
	v->seen_ns = sent_ns;
	v->renewed_ns = rec->holder[0] ? sent_ns : 0;
}

bool cache_lease_leading(const struct cache_lease_view *v, const char *me, uint64_t now_ns,
			 unsigned renew_deadline_s)
{
	return v->observed && v->renewed_ns && is_me(&v->rec, me) &&
	       util_elapsed_ns(now_ns, v->renewed_ns) < (uint64_t)renew_deadline_s * NS_PER_S;
}

void cache_lease_release_record(const struct cache_lease_view *v, int64_t wall_us,
				struct cache_lease_record *out)
{
	memset(out, 0, sizeof(*out));
	out->duration_s = 1;
	out->acquire_us = out->renew_us = wall_us;
	out->transitions = v->rec.transitions;
}

/* ---- The wire form ------------------------------------------------------------ */

void cache_lease_format_time(int64_t us, char *out, size_t len)
{
	time_t secs = (time_t)(us / 1000000);
	long frac = (long)(us % 1000000);
	struct tm tm;

	if (frac < 0) {
		frac += 1000000;
		secs--;
	}
	gmtime_r(&secs, &tm);
	snprintf(out, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

int cache_lease_parse_time(const char *s, int64_t *us)
{
	struct tm tm = { 0 };
	int64_t frac = 0, scale = 1000000, off = 0;
	const char *p;
	time_t secs;

	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -EINVAL;
	if (*p == '.') {
		int digits = 0;

		for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
			if (digits < 6) {
				frac = frac * 10 + (*p - '0');
				scale /= 10;
			}
		}
		if (!digits || digits > 9)
			return -EINVAL;
		frac *= scale;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if ((*p == '+' || *p == '-') && p[1] && p[2] && p[3] == ':' && p[4] && p[5]) {
		int h = (p[1] - '0') * 10 + (p[2] - '0'), m = (p[4] - '0') * 10 + (p[5] - '0');

		if (h < 0 || h > 23 || m < 0 || m > 59)
			return -EINVAL;
		off = (int64_t)(h * 3600 + m * 60) * (*p == '+' ? 1 : -1);
		p += 6;
	} else {
		return -EINVAL;
	}
	if (*p)
		return -EINVAL;
	secs = timegm(&tm);
	*us = ((int64_t)secs - off) * 1000000 + frac;
	return 0;
}

static int32_t json_int32(const cJSON *obj, const char *key)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!cJSON_IsNumber(it) || it->valuedouble < -2147483648.0 ||
	    it->valuedouble > 2147483647.0)
		return 0;
	return (int32_t)it->valuedouble;
}

int cache_lease_parse(const char *body, size_t len, struct cache_lease_record *out)
{
	cJSON *root = cJSON_ParseWithLength(body, len);
	const cJSON *spec;
	const char *kind, *s;

	memset(out, 0, sizeof(*out));
	kind = json_str(root, "kind");
	if (!root || !cJSON_IsObject(root) || (kind && strcmp(kind, "Lease") != 0)) {
		cJSON_Delete(root);
		return -EINVAL;
	}
	if ((s = json_str(json_obj(root, "metadata"), "resourceVersion")) != NULL)
		snprintf(out->version, sizeof(out->version), "%s", s);
	spec = json_obj(root, "spec");
	if ((s = json_str(spec, "holderIdentity")) != NULL) {
		size_t n = strlen(s);

		out->holder_cut = n >= sizeof(out->holder);
		snprintf(out->holder, sizeof(out->holder), "%s", s);
	}
	out->duration_s = json_int32(spec, "leaseDurationSeconds");
	out->transitions = json_int32(spec, "leaseTransitions");
	if ((s = json_str(spec, "acquireTime")) && cache_lease_parse_time(s, &out->acquire_us) < 0)
		out->acquire_us = 0;
	if ((s = json_str(spec, "renewTime")) && cache_lease_parse_time(s, &out->renew_us) < 0)
		out->renew_us = 0;
	cJSON_Delete(root);
	return 0;
}

char *cache_lease_spec_json(const struct cache_lease_record *rec)
{
	struct strbuf sb = STRBUF_INIT;
	char acq[CACHE_LEASE_TIME_BUF], ren[CACHE_LEASE_TIME_BUF];

	cache_lease_format_time(rec->acquire_us, acq, sizeof(acq));
	cache_lease_format_time(rec->renew_us, ren, sizeof(ren));
	strbuf_puts(&sb, "{\"holderIdentity\":");
	strbuf_put_json_str(&sb, rec->holder, strlen(rec->holder));
	strbuf_printf(&sb, ",\"leaseDurationSeconds\":%d,\"acquireTime\":\"%s\","
		      "\"renewTime\":\"%s\",\"leaseTransitions\":%d}", rec->duration_s, acq, ren,
		      rec->transitions);
	return strbuf_take(&sb, NULL);
}

/* ---- Options ------------------------------------------------------------------ */

void cache_lease_opts_defaults(struct cache_lease_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->name = "troupe";
	o->ns = "kube-system";
	o->lease_duration_s = 15;
	o->renew_deadline_s = 10;
	o->retry_period_s = 2;
}

int cache_lease_opts_check(const struct cache_lease_opts *o, char *err, size_t errlen)
{
	if (!o->ns || !o->ns[0] || strlen(o->ns) > K8S_NAMESPACE_MAX || !o->name || !o->name[0] ||
	    strlen(o->name) > K8S_NAME_MAX) {
		snprintf(err, errlen, "the Lease needs a namespace (at most %d characters) and a "
			 "name (at most %d)", K8S_NAMESPACE_MAX, K8S_NAME_MAX);
		return -EINVAL;
	}
	if (!o->identity || !o->identity[0] || strlen(o->identity) >= CACHE_LEASE_HOLDER_BUF) {
		snprintf(err, errlen, "the identity must be 1 to %d characters",
			 CACHE_LEASE_HOLDER_BUF - 1);
		return -EINVAL;
	}
	/* client-go's rules: a leader must give up before anyone may take over,
	 * and have time for a retry or more before it must give up. */
	if (!o->retry_period_s || o->renew_deadline_s * 10 <= o->retry_period_s * 12 ||
	    o->lease_duration_s <= o->renew_deadline_s) {
		snprintf(err, errlen, "lease_duration_seconds (%u) must exceed "
			 "renew_deadline_seconds (%u), which must exceed 1.2 x retry_period_seconds "
			 "(%u)", o->lease_duration_s, o->renew_deadline_s, o->retry_period_s);
		return -EINVAL;
	}
	return 0;
}

/* ---- The elector ---------------------------------------------------------------- */

struct cache_lease {
	struct cache_api *api;
	char ns[K8S_NAMESPACE_BUF];
	char name[K8S_NAME_BUF];
	char me[CACHE_LEASE_HOLDER_BUF];
	char path[K8S_KEY_BUF + 64];    /* the Lease's URL path */
	unsigned duration_s, deadline_s, retry_s;
	cache_lease_change_fn on_change;
	void *arg;
	CURL *easy;                     /* elector thread only (then cache_lease_stop) */
	struct cache_lease_view view;   /* elector thread only; published below */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;                      /* guarded by lock */
	bool stopped;                   /* cache_lease_stop's caller only */
	/* What other threads read, guarded by lock: */
	bool leading;                   /* the thread's last word */
	uint64_t renewed_ns;            /* cache_lease_is_leader's deadline base */
	char holder[CACHE_LEASE_HOLDER_BUF];
};

static int64_t wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static size_t on_data(char *ptr, size_t size, size_t n, void *arg)
{
	struct strbuf *sb = arg;

	if (sb->len < 1 << 20)
		strbuf_append(sb, ptr, size * n);
	return size * n;
}

/* One request, waiting for its answer: <status> 0 when it got none. <resp>
 * receives the body. */
static void request(struct cache_lease *l, const char *method, const char *path,
		    const char *body, long *status, struct strbuf *resp, char *err, size_t errlen)
{
	struct curl_slist *headers = NULL, *n;
	char curl_err[CURL_ERROR_SIZE] = "";
	CURLcode rc;

	*status = 0;
	curl_easy_reset(l->easy);
	if (cache__api_prepare(l->api, l->easy, path, &headers) < 0) {
		snprintf(err, errlen, "out of memory");
		return;
	}
	if (body) {
		n = curl_slist_append(headers, "Content-Type: application/json");
		if (!n) {
			curl_slist_free_all(headers);
			snprintf(err, errlen, "out of memory");
			return;
		}
		headers = n;
		curl_easy_setopt(l->easy, CURLOPT_HTTPHEADER, headers);
		curl_easy_setopt(l->easy, CURLOPT_POSTFIELDS, body);
	}
	curl_easy_setopt(l->easy, CURLOPT_CUSTOMREQUEST, method);
	/* Half the renew deadline: a GET and a PUT fit in one deadline. */
	curl_easy_setopt(l->easy, CURLOPT_TIMEOUT_MS, (long)l->deadline_s * 500L);
	curl_easy_setopt(l->easy, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(l->easy, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(l->easy, CURLOPT_ERRORBUFFER, curl_err);
	rc = curl_easy_perform(l->easy);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "API server unreachable: %s",
			 curl_err[0] ? curl_err : curl_easy_strerror(rc));
	} else {
		char msg[TROUPE_MESSAGE_BUF];

		curl_easy_getinfo(l->easy, CURLINFO_RESPONSE_CODE, status);
		if (*status == 401)
			cache__api_refresh_token(l->api, true);
		cache__status_message(resp->buf ? resp->buf : "", resp->len, msg, sizeof(msg));
		snprintf(err, errlen, "%s %s: HTTP %ld%s%s", method, path, *status,
			 msg[0] ? ": " : "", msg);
	}
	curl_easy_setopt(l->easy, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(headers);
}

/* The Lease object <obj> (the GET's answer) with <rec> as its spec, as text. */
static char *with_spec(const char *obj, size_t len, const struct cache_lease_record *rec)
{
	cJSON *root = cJSON_ParseWithLength(obj, len), *spec;
	char *spec_text = cache_lease_spec_json(rec), *out = NULL;

	spec = spec_text ? cJSON_Parse(spec_text) : NULL;
	if (root && spec) {
		cJSON_DeleteItemFromObjectCaseSensitive(root, "spec");
		cJSON_AddItemToObject(root, "spec", spec);
		spec = NULL;
		out = cJSON_PrintUnformatted(root);
	}
	cJSON_Delete(spec);
	cJSON_Delete(root);
	free(spec_text);
	return out;
}

/* A new Lease object holding <rec>, as text. */
static char *new_lease(const struct cache_lease *l, const struct cache_lease_record *rec)
{
	struct strbuf sb = STRBUF_INIT;
	char *spec = cache_lease_spec_json(rec);

	if (!spec)
		return NULL;
	strbuf_puts(&sb, "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
		    "\"metadata\":{\"name\":");
	strbuf_put_json_str(&sb, l->name, strlen(l->name));
	strbuf_puts(&sb, ",\"namespace\":");
	strbuf_put_json_str(&sb, l->ns, strlen(l->ns));
	strbuf_puts(&sb, "},\"spec\":");
	strbuf_puts(&sb, spec);
	strbuf_putc(&sb, '}');
	free(spec);
	return strbuf_take(&sb, NULL);
}

/* One attempt, as client-go's tryAcquireOrRenew. <release>: write the release
 * record instead (only when leading). Returns true when this replica holds
 * the Lease afterwards (or, releasing, when the release was written). */
static bool attempt(struct cache_lease *l, bool release, char *why, size_t whylen)
{
	struct strbuf resp = STRBUF_INIT, wresp = STRBUF_INIT;
	struct cache_lease_record got, want;
	enum cache_lease_action act;
	uint64_t sent;
	char *body = NULL;
	bool ok = false, found;
	long status;

	sent = util_now_ns();
	request(l, "GET", l->path, NULL, &status, &resp, why, whylen);
	found = status != 404;
	if (status != 200 && status != 404)
		goto out;
	if (found) {
		if (cache_lease_parse(resp.buf ? resp.buf : "", resp.len, &got) < 0) {
			snprintf(why, whylen, "GET %s: the answer is not a Lease", l->path);
			goto out;
		}
		cache_lease_observe(&l->view, &got, util_now_ns());
	}
	if (release) {
		if (!found || !cache_lease_leading(&l->view, l->me, util_now_ns(), l->deadline_s))
			goto out;
		cache_lease_release_record(&l->view, wall_us(), &want);
		act = CACHE_LEASE_RENEW;
	} else {
		act = cache_lease_decide(&l->view, found, l->me, util_now_ns(), wall_us(),
					 l->duration_s, &want);
	}
	if (act == CACHE_LEASE_WAIT) {
		snprintf(why, whylen, "held by %s", l->view.rec.holder);
		goto out;
	}
	if (act == CACHE_LEASE_CREATE) {
		char create[K8S_KEY_BUF + 64];

		snprintf(create, sizeof(create), "/apis/coordination.k8s.io/v1/namespaces/%s/leases",
			 l->ns);
		body = new_lease(l, &want);
		if (body)
			request(l, "POST", create, body, &status, &wresp, why, whylen);
		ok = body && status == 201;
	} else {
		/* The object read keeps its resourceVersion: a write that came
		 * between makes this one fail with 409. */
		body = with_spec(resp.buf, resp.len, &want);
		if (body)
			request(l, "PUT", l->path, body, &status, &wresp, why, whylen);
		ok = body && status == 200;
	}
	if (!body)
		snprintf(why, whylen, "out of memory");
	if (ok)
		cache_lease_wrote(&l->view, &want, sent);
out:
	free(body);
	strbuf_fini(&resp);
	strbuf_fini(&wresp);
	return ok;
}

/* Publish the thread's view; log and call back when leading changed. */
static void publish(struct cache_lease *l, const char *why)
{
	bool leading = cache_lease_leading(&l->view, l->me, util_now_ns(), l->deadline_s);
	bool was, holder_changed;
	char holder[CACHE_LEASE_HOLDER_BUF];

	snprintf(holder, sizeof(holder), "%s", l->view.rec.holder);
	pthread_mutex_lock(&l->lock);
	was = l->leading;
	holder_changed = strcmp(l->holder, holder) != 0;
	l->leading = leading;
	l->renewed_ns = l->view.renewed_ns;
	snprintf(l->holder, sizeof(l->holder), "%s", holder);
	pthread_mutex_unlock(&l->lock);
	if (leading && !was) {
		log_info("lease", "leading: this replica (%s) holds Lease %s/%s (transitions %d); "
			 "serving verbs and posting Bindings", l->me, l->ns, l->name,
			 l->view.rec.transitions);
	} else if (!leading && was) {
		log_warn("lease", "no longer leading: Lease %s/%s not renewed within %u s (%s; "
			 "holder as last seen: %s); standing by: not ready, no more Bindings", l->ns,
			 l->name, l->deadline_s, why, holder[0] ? holder : "nobody");
	} else if (!leading && holder_changed) {
		log_info("lease", "standing by: Lease %s/%s is held by %s", l->ns, l->name,
			 holder[0] ? holder : "nobody (released)");
	}
	if (leading != was && l->on_change)
		l->on_change(l->arg, leading, holder);
}

/* Wait <ms> or until stopped. Returns true when stopped. */
static bool wait_ms(struct cache_lease *l, unsigned ms)
{
	struct timespec ts;
	bool stop;

	ts = util_deadline_after_ns(CLOCK_MONOTONIC, (uint64_t)ms * 1000000ULL);
	pthread_mutex_lock(&l->lock);
	while (!l->stop && pthread_cond_timedwait(&l->wake, &l->lock, &ts) != ETIMEDOUT)
		;
	stop = l->stop;
	pthread_mutex_unlock(&l->lock);
	return stop;
}

static void *lease_main(void *arg)
{
	struct cache_lease *l = arg;
	unsigned seed = (unsigned)util_now_ns() ^ (unsigned)getpid();
	char why[LEASE_WHY_BUF], last[LEASE_WHY_BUF] = "";
	unsigned delay;

	do {
		bool leading;

		why[0] = '\0';
		/* A failure is a warning the first time it reads so (a missing
		 * permission on Leases would otherwise leave a replica standing by
		 * in silence), then debug while it repeats. */
		if (!attempt(l, false, why, sizeof(why)) && !strstr(why, "held by")) {
			if (strcmp(why, last) != 0)
				log_warn("lease", "Lease %s/%s: attempt failed: %s (logged again "
					 "only when the reason changes)", l->ns, l->name, why);
			else
				log_debug("lease", "Lease %s/%s: attempt failed: %s", l->ns, l->name,
					  why);
			snprintf(last, sizeof(last), "%s", why);
		} else {
			last[0] = '\0';
		}
		publish(l, why);
		leading = cache_lease_leading(&l->view, l->me, util_now_ns(), l->deadline_s);
		/* A leader renews every retry period; candidates add up to 1.2
		 * periods of jitter (client-go's JitterFactor) so they do not
		 * all try at once. */
		delay = l->retry_s * 1000;
		if (!leading)
			delay += (unsigned)(rand_r(&seed) % (l->retry_s * 1200 + 1));
	} while (!wait_ms(l, delay));
	return NULL;
}

struct cache_lease *cache_lease_start(struct cache_api *api, const struct cache_lease_opts *o,
				      cache_lease_change_fn on_change, void *arg, char *err,
				      size_t errlen)
{
	struct cache_lease *l;
	pthread_condattr_t ca;
	char *ns = NULL, *name = NULL;

	if (cache_lease_opts_check(o, err, errlen) < 0)
		return NULL;
	l = calloc(1, sizeof(*l));
	if (!l || !(l->easy = curl_easy_init())) {
		free(l);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	l->api = api;
	snprintf(l->ns, sizeof(l->ns), "%s", o->ns);
	snprintf(l->name, sizeof(l->name), "%s", o->name);
	snprintf(l->me, sizeof(l->me), "%s", o->identity);
	ns = curl_easy_escape(NULL, o->ns, 0);
	name = curl_easy_escape(NULL, o->name, 0);
	snprintf(l->path, sizeof(l->path), "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s",
		 ns ? ns : "", name ? name : "");
	curl_free(ns);
	curl_free(name);
	l->duration_s = o->lease_duration_s;
	l->deadline_s = o->renew_deadline_s;
	l->retry_s = o->retry_period_s;
	l->on_change = on_change;
	l->arg = arg;
	pthread_mutex_init(&l->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&l->thread, NULL, lease_main, l) != 0) {
		snprintf(err, errlen, "cannot start the leader-election thread");
		curl_easy_cleanup(l->easy);
		pthread_cond_destroy(&l->wake);
		pthread_mutex_destroy(&l->lock);
		free(l);
		return NULL;
	}
	log_info("lease", "leader election on Lease %s/%s as %s (lease %u s, renew deadline %u s, "
		 "retry %u s); standing by until it holds the Lease", l->ns, l->name, l->me,
		 l->duration_s, l->deadline_s, l->retry_s);
	return l;
}

bool cache_lease_is_leader(const struct cache_lease *l)
{
	struct cache_lease *m = (struct cache_lease *)l;
	bool leading;

	pthread_mutex_lock(&m->lock);
	leading = m->leading && m->renewed_ns &&
		  util_elapsed_ns(util_now_ns(), m->renewed_ns) < (uint64_t)m->deadline_s * NS_PER_S;
	pthread_mutex_unlock(&m->lock);
	return leading;
}

void cache_lease_holder(const struct cache_lease *l, char *out, size_t len)
{
	struct cache_lease *m = (struct cache_lease *)l;

	pthread_mutex_lock(&m->lock);
	snprintf(out, len, "%s", m->holder);
	pthread_mutex_unlock(&m->lock);
}

void cache_lease_stop(struct cache_lease *l)
{
	char why[LEASE_WHY_BUF] = "";
	bool leading;

	if (!l || l->stopped)
		return;
	l->stopped = true;
	pthread_mutex_lock(&l->lock);
	l->stop = true;
	/* Stop leading now: nothing may be posted while the release is written. */
	leading = l->leading;
	l->leading = false;
	pthread_cond_signal(&l->wake);
	pthread_mutex_unlock(&l->lock);
	pthread_join(l->thread, NULL);
	if (leading) {
		if (attempt(l, true, why, sizeof(why)))
			log_info("lease", "released Lease %s/%s: a standby may take over at once",
				 l->ns, l->name);
		else
			log_warn("lease", "could not release Lease %s/%s (%s); a standby takes over "
				 "once it expires", l->ns, l->name, why[0] ? why : "no longer held");
	}
}

void cache_lease_free(struct cache_lease *l)
{
	if (!l)
		return;
	cache_lease_stop(l);
	curl_easy_cleanup(l->easy);
	pthread_cond_destroy(&l->wake);
	pthread_mutex_destroy(&l->lock);
	free(l);
}
