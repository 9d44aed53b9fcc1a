/* PodGroup status (podgroup_status.h), the writer: a thread of its own that,
 * every gang.status_interval_seconds and only while this replica leads (with
 * leader election), copies the cache's PodGroup records, counts each group's
 * members as the cache knows them, applies the controller's rules
 * (podgroup_status.c) and merge-PATCHes .../podgroups/NAME/status where the
 * answer differs from what the group shows. Each PATCH carries the
 * resourceVersion read, so a write that came in between (scheduler-plugins'
 * controller, a user) fails with 409 instead of being overwritten; the group
 * is then read again (GET .../status) and the rules applied to what it shows,
 * at most CACHE_PGS_CONFLICT_RETRIES times a pass. What troupe wrote is
 * remembered until the watch shows it, so a pass that runs before then neither
 * writes it again nor takes the stale copy for the group's status.
 *
 * The permissions it needs (get and patch on podgroups/status) are
 * checked once per leadership with SelfSubjectAccessReviews and only warned
 * about: readiness never depends on them. A 403 pauses the writes for a
 * minute.
 */
#include "cache/podgroup_status.h"
#include "cache/api_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/strbuf.h"
#include "common/strmap.h"
#include "common/util.h"

/* ---- The writer --------------------------------------------------------------------- */

void cache_pgs_opts_defaults(struct cache_pgs_opts *o)
{
	o->enabled = true;
	o->interval_s = 2;
}

/* After a 403, writes pause this long (the permission is checked by trying). */
#define PGS_FORBIDDEN_PAUSE_NS (60ULL * 1000000000ULL)
/* One request's time limit. */
#define PGS_REQUEST_TIMEOUT_MS 10000u
/* The most of an answer kept: a PodGroup, or a review. */
#define PGS_ANSWER_MAX ((size_t)1 << 20)
/* A failure other than 403 is logged at most this often. */
#define PGS_WARN_EVERY_NS (60ULL * 1000000000ULL)

/* What troupe last wrote to a group, so that a pass that runs before the watch
 * shows the write neither writes it again nor takes the stale status read as
 * the group's. */
struct sent {
	char key[K8S_KEY_BUF];                  /* "ns/name", the map's key */
	char before[CACHE_PG_VERSION_BUF];      /* the version the write was based on */
	char after[CACHE_PG_VERSION_BUF];       /* the version the write made */
	struct cache_podgroup_status st;
	uint64_t pass;                          /* the last pass that saw the group */
};

struct cache_pgs {
	struct cache *cache;
	struct cache_api *api;
	const struct cache_lease *lease;
	struct cache_pgs_opts opts;
	CURL *easy;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;           /* guards stop */
	pthread_cond_t wake;
	bool stop;
	/* The thread's own: */
	struct strmap sent;             /* "ns/name" -> struct sent */
	uint64_t pass_no;
	bool reviewed;                  /* permissions checked since leading */
	bool leading;
	uint64_t paused_until_ns;       /* after a 403 */
	bool forbidden_said;
	/* The CRD's schema prunes status.scheduled (scheduler-plugins' own CRD,
	 * whose API dropped the field, does): it is then left as the group shows
	 * it, or every pass would write it again. */
	bool scheduled_pruned;
	uint64_t warned_ns;
	struct cache_pgs_stats stats;   /* relaxed atomics */
};

static void stat_add(uint64_t *v)
{
	__atomic_fetch_add(v, 1, __ATOMIC_RELAXED);
}

/* One request on the writer's own handle (kept, so its connection is
 * reused), ended at once by a stop, so that stopping never waits out an API
 * server that does not answer: <status> 0 when no answer came; <err> says what
 * happened, as "METHOD PATH: HTTP status: message" once the server answered. */
static void request(struct cache_pgs *w, const char *method, const char *path, const char *body,
		    const char *content_type, long *status, struct strbuf *resp, char *err,
		    size_t errlen)
{
	struct cache__api_call call = {
		.method = method, .path = path, .content_type = body ? content_type : NULL,
		.body = body, .timeout_ms = PGS_REQUEST_TIMEOUT_MS, .max_answer = PGS_ANSWER_MAX,
		.abort = &w->stop, .easy = w->easy,
	};
	char text[TROUPE_MESSAGE_BUF + 32];

	if (cache__api_request(w->api, &call, resp, err, errlen) == 0) {
		cache__api_status_text(call.status, resp->buf, resp->len, text, sizeof(text));
		snprintf(err, errlen, "%s %s: %s", method, path, text);
	}
	*status = call.status;
}

/* Ask the API server, once per leadership, whether troupe may read and write
 * podgroups/status, so that a missing grant shows in the log before the first
 * write is refused. A denial only warns: readiness does not depend on it. */
static void review_permissions(struct cache_pgs *w)
{
	for (int i = CACHE_OPT_PERM_GET_PODGROUP_STATUS; i <= CACHE_OPT_PERM_PATCH_PODGROUP_STATUS;
	     i++) {
		const struct cache_permission *perm =
			cache_optional_permission_get((enum cache_optional_perm)i);
		char why[TROUPE_MESSAGE_BUF + 64], reason[TROUPE_MESSAGE_BUF];

		/* An error only means no early warning: the writes say the rest. */
		if (cache__api_may(w->api, perm, PGS_REQUEST_TIMEOUT_MS, &w->stop, reason,
				   sizeof(reason), why, sizeof(why)) == 0)
			log_warn("pgstatus", "missing permission: %s (group \"%s\"): grant "
				 "it (config/deploy/rbac.yaml, ClusterRole troupe-podgroup-status) "
				 "for troupe to keep PodGroup status; scheduling and readiness do "
				 "not depend on it%s%s", perm->name, perm->group,
				 reason[0] ? "; the API server says: " : "", reason);
	}
}

/* The rules' answer, less what this cluster's CRD does not keep. */
static void desired_for(const struct cache_pgs *w, const struct cache_podgroup_status *base,
			int32_t min_member, int64_t created_us, const struct cache_pgs_members *m,
			struct cache_podgroup_status *out)
{
	cache_pgs_desired(base, min_member, created_us, m, (int64_t)time(NULL) * 1000000, out);
	if (w->scheduled_pruned)
		out->scheduled = base->scheduled;
}

/* The server's answer to a write: did it keep status.scheduled? */
static void note_pruned(struct cache_pgs *w, const struct cache_podgroup_status *sent,
			const struct cache_podgroup_status *kept)
{
	if (w->scheduled_pruned || kept->scheduled == sent->scheduled)
		return;
	w->scheduled_pruned = true;
	log_info("pgstatus", "the PodGroup CRD does not keep status.scheduled (its schema prunes "
		 "it; config/crds/podgroups.scheduling.x-k8s.io.yaml keeps it): troupe writes the "
		 "other fields only");
}

static void status_text(const struct cache_podgroup_status *st, char *out, size_t len)
{
	snprintf(out, len, "%s (scheduled %d, running %d, succeeded %d, failed %d)",
		 st->phase[0] ? st->phase : "\"\"", st->scheduled, st->running, st->succeeded,
		 st->failed);
}

static void warn_failure(struct cache_pgs *w, const char *key, const char *why)
{
	uint64_t now = util_now_ns();

	stat_add(&w->stats.failed);
	if (w->warned_ns && util_elapsed_ns(now, w->warned_ns) < PGS_WARN_EVERY_NS)
		return;
	w->warned_ns = now;
	log_warn("pgstatus", "pod group %s: cannot write its status (tried again next pass; "
		 "said at most once a minute): %s", key, why);
}

static void remember(struct cache_pgs *w, const char *key, const char *before, const char *after,
		     const struct cache_podgroup_status *st)
{
	struct sent *s = strmap_get(&w->sent, key, strlen(key));

	if (!s) {
		/* Without memory the next pass may write the same again: harmless. */
		if (!(s = calloc(1, sizeof(*s))))
			return;
		snprintf(s->key, sizeof(s->key), "%s", key);
		if (strmap_put(&w->sent, s->key, strlen(s->key), s, NULL) < 0) {
			free(s);
			return;
		}
	}
	snprintf(s->before, sizeof(s->before), "%s", before);
	snprintf(s->after, sizeof(s->after), "%s", after);
	s->st = *st;
	s->pass = w->pass_no;
}

static void forget(struct cache_pgs *w, const char *key)
{
	free(strmap_del(&w->sent, key, strlen(key)));
}

/* Write <want> to group <pg> (whose status is <base>, read at <version>): a
 * PATCH, and after each 409 a fresh read and the rules again on it. */
static void write_group(struct cache_pgs *w, const struct cache_podgroup *pg, const char *key,
			struct cache_podgroup_status base, const char *version,
			const struct cache_pgs_members *m, struct cache_podgroup_status want)
{
	char path[K8S_KEY_BUF + 96], why[TROUPE_MESSAGE_BUF + K8S_KEY_BUF + 96];
	char ver[CACHE_PG_VERSION_BUF];
	int32_t min_member = pg->min_member;
	int64_t created = pg->created_us;

	snprintf(path, sizeof(path),
		 "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/%s/podgroups/%s/status", pg->ns,
		 pg->name);
	snprintf(ver, sizeof(ver), "%s", version);
	for (int attempt = 0; attempt <= CACHE_PGS_CONFLICT_RETRIES; attempt++) {
		struct strbuf resp = STRBUF_INIT;
		char *body;
		long status;

		if (__atomic_load_n(&w->stop, __ATOMIC_RELAXED))
			return;
		body = cache_pgs_patch_json(&want, ver);
		if (!body) {
			warn_failure(w, key, "out of memory");
			return;
		}
		request(w, "PATCH", path, body, "application/merge-patch+json", &status, &resp, why,
			sizeof(why));
		free(body);
		if (status == 200) {
			cJSON *obj = cJSON_ParseWithLength(resp.buf ? resp.buf : "", resp.len);
			struct cache_podgroup got = { 0 };
			char was[128], now[128];

			cache_podgroup_status_read(obj, &got);
			cJSON_Delete(obj);
			if (got.version[0])
				note_pruned(w, &want, &got.status);
			/* What the server stored, when it said. */
			remember(w, key, ver, got.version, got.version[0] ? &got.status : &want);
			stat_add(&w->stats.written);
			status_text(&base, was, sizeof(was));
			status_text(&want, now, sizeof(now));
			log_info("pgstatus", "pod group %s: status %s -> %s, minMember %d", key,
				 was, now, min_member);
			w->forbidden_said = false;
			strbuf_fini(&resp);
			return;
		}
		strbuf_fini(&resp);
		if (status == 404) {
			forget(w, key);         /* gone: the watch will say so too */
			return;
		}
		if (status == 403) {
			stat_add(&w->stats.forbidden);
			w->paused_until_ns = util_now_ns() + PGS_FORBIDDEN_PAUSE_NS;
			if (!w->forbidden_said)
				log_warn("pgstatus", "cannot write PodGroup status: %s; "
					 "troupe needs \"patch\" on podgroups/status (group "
					 "scheduling.x-k8s.io; config/deploy/rbac.yaml, "
					 "ClusterRole troupe-podgroup-status); trying again in "
					 "60 s, scheduling is not affected", why);
			w->forbidden_said = true;
			return;
		}
		if (status != 409) {
			warn_failure(w, key, why);
			return;
		}
		/* Someone wrote the group since it was read: read it again and
		 * apply the rules to what it shows now. */
		stat_add(&w->stats.conflicts);
		{
			struct strbuf g = STRBUF_INIT;
			struct cache_podgroup fresh = { 0 };
			cJSON *obj;

			request(w, "GET", path, NULL, NULL, &status, &g, why, sizeof(why));
			if (status != 200) {
				strbuf_fini(&g);
				if (status == 404)
					forget(w, key);
				else
					warn_failure(w, key, why);
				return;
			}
			obj = cJSON_ParseWithLength(g.buf ? g.buf : "", g.len);
			strbuf_fini(&g);
			cache_podgroup_status_read(obj, &fresh);
			{
				const cJSON *mmj = json_get(json_obj(obj, "spec"), "minMember");
				int64_t mm = 0;

				if (json_int_in_range(mmj, 0, INT32_MAX, &mm) == 0)
					min_member = (int32_t)mm;
			}
			cJSON_Delete(obj);
			if (!fresh.version[0]) {
				/* Without a version the next write would not be
				 * conditional: never send one. */
				warn_failure(w, key, "a fresh read of it shows no resourceVersion");
				return;
			}
			if (fresh.created_us)
				created = fresh.created_us;
			base = fresh.status;
			snprintf(ver, sizeof(ver), "%s", fresh.version);
			desired_for(w, &base, min_member, created, m, &want);
			if (cache_pgs_status_equal(&base, &want)) {
				stat_add(&w->stats.unchanged);
				return;
			}
		}
	}
	stat_add(&w->stats.gave_up);
	log_warn("pgstatus", "pod group %s: status changed under every one of %d attempts to "
		 "write it; trying again next pass", key, CACHE_PGS_CONFLICT_RETRIES + 1);
}

static void count_member(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct cache_pgs_members *m = arg;

	(void)uid;
	m->total++;
	if (p->node[0])
		m->bound++;
	if (p->phase == CACHE_POD_RUNNING)
		m->running++;
	else if (p->phase == CACHE_POD_SUCCEEDED)
		m->succeeded++;
	else if (p->phase == CACHE_POD_FAILED)
		m->failed++;
}

/* A copy of every PodGroup record, taken under the cache's lock: its strings
 * copied too (the record's may be freed once the lock is let go). */
struct group_copy {
	struct cache_podgroup pg;       /* ns and name point below once collected */
	char ns[K8S_NAMESPACE_BUF];
	char name[K8S_NAME_BUF];
	char key[K8S_KEY_BUF];
};

struct group_list {
	struct group_copy *g;
	size_t n, cap;
};

static void collect(const struct cache_podgroup *pg, void *arg)
{
	struct group_list *l = arg;
	struct group_copy *g;

	/* Only scheduler-plugins' PodGroups: upstream's, Volcano's and KAI's
	 * status belongs to their own controllers. */
	if (pg->api != CACHE_PG_XK8S)
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 32;

		/* Without memory the groups not copied wait for the next pass. */
		if (!(g = realloc(l->g, cap * sizeof(*g))))
			return;
		l->g = g;
		l->cap = cap;
	}
	g = &l->g[l->n++];
	g->pg = *pg;
	snprintf(g->ns, sizeof(g->ns), "%s", pg->ns);
	snprintf(g->name, sizeof(g->name), "%s", pg->name);
	snprintf(g->key, sizeof(g->key), "%s/%s", pg->ns, pg->name);
}

static void one_group(struct cache_pgs *w, struct group_copy *g)
{
	struct cache_podgroup *pg = &g->pg;
	const char *key = g->key;
	struct cache_pgs_members m = { 0 };
	struct cache_podgroup_status base = pg->status, want;
	const char *version = pg->version;
	struct sent *s = strmap_get(&w->sent, key, strlen(key));

	pg->ns = g->ns;
	pg->name = g->name;
	cache_group_foreach(w->cache, pg->ns, pg->name, count_member, &m);
	if (s) {
		s->pass = w->pass_no;
		if (strcmp(pg->version, s->before) == 0) {
			/* The watch has not shown troupe's write yet. */
			base = s->st;
			version = s->after;
		} else if (strcmp(pg->version, s->after) != 0) {
			forget(w, key);         /* changed since: the cache's is newer */
			s = NULL;
		}
	}
	desired_for(w, &base, pg->min_member, pg->created_us, &m, &want);
	if (cache_pgs_status_equal(&base, &want) || !version[0]) {
		stat_add(&w->stats.unchanged);
		return;
	}
	write_group(w, pg, key, base, version, &m, want);
}

static void pass(struct cache_pgs *w)
{
	struct group_list l = { 0 };
	const char *k;
	size_t pos = 0;
	void *v;

	if (w->lease && !cache_lease_is_leader(w->lease)) {
		w->leading = false;
		return;
	}
	if (!w->leading) {
		w->leading = true;
		w->reviewed = false;
	}
	if (!cache_is_synced(w->cache) || util_now_ns() < w->paused_until_ns)
		return;
	if (!w->reviewed) {
		review_permissions(w);
		w->reviewed = true;
	}
	stat_add(&w->stats.passes);
	w->pass_no++;
	cache_podgroup_foreach(w->cache, collect, &l);
	for (size_t i = 0; i < l.n && !__atomic_load_n(&w->stop, __ATOMIC_RELAXED); i++) {
		if (w->lease && !cache_lease_is_leader(w->lease))
			break;
		if (util_now_ns() < w->paused_until_ns)
			break;
		one_group(w, &l.g[i]);
	}
	/* Groups no longer seen: forget what was written to them. */
	while (strmap_next(&w->sent, &pos, &k, &v))
		if (((struct sent *)v)->pass + 1 < w->pass_no) {
			free(strmap_del(&w->sent, k, strlen(k)));
			pos = 0;        /* deleting moves entries: start over */
		}
	free(l.g);
}

static void *pgs_thread(void *arg)
{
	struct cache_pgs *w = arg;
	/* One pass a gang.status_interval_seconds, whether it leads or not: a
	 * standby's pass returns at once, and a new leader writes within one
	 * interval of taking the Lease. */
	uint64_t step = (uint64_t)w->opts.interval_s * 1000000000ULL;

	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		struct timespec ts = util_deadline_after_ns(CLOCK_MONOTONIC, step);

		pthread_cond_timedwait(&w->wake, &w->lock, &ts);
		if (w->stop)
			break;
		pthread_mutex_unlock(&w->lock);
		pass(w);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

struct cache_pgs *cache_pgs_start(struct cache *c, struct cache_api *api,
				  const struct cache_lease *lease, const struct cache_pgs_opts *o,
				  char *err, size_t errlen)
{
	struct cache_pgs *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;
	int ret;

	if (!w || !(w->easy = curl_easy_init())) {
		free(w);
		snprintf(err, errlen, "PodGroup status writer: out of memory");
		return NULL;
	}
	w->cache = c;
	w->api = api;
	w->lease = lease;
	w->opts = *o;
	if (!w->opts.interval_s)
		w->opts.interval_s = 1;
	strmap_init(&w->sent);
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	ret = pthread_create(&w->thread, NULL, pgs_thread, w);
	if (ret) {
		snprintf(err, errlen, "PodGroup status writer: cannot start its thread: %s",
			 strerror(ret));
		cache_pgs_stop(w);
		return NULL;
	}
	w->thread_started = true;
	log_info("pgstatus", "writing scheduling.x-k8s.io PodGroup status every %u s%s",
		 w->opts.interval_s, lease ? " while leading" : "");
	return w;
}

void cache_pgs_stop(struct cache_pgs *w)
{
	const char *k;
	size_t pos = 0;
	void *v;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	__atomic_store_n(&w->stop, true, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&w->wake);
	pthread_mutex_unlock(&w->lock);
	if (w->thread_started)
		pthread_join(w->thread, NULL);
	while (strmap_next(&w->sent, &pos, &k, &v))
		free(v);
	strmap_fini(&w->sent);
	curl_easy_cleanup(w->easy);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

void cache_pgs_get_stats(const struct cache_pgs *w, struct cache_pgs_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!w)
		return;
	out->passes = __atomic_load_n(&w->stats.passes, __ATOMIC_RELAXED);
	out->written = __atomic_load_n(&w->stats.written, __ATOMIC_RELAXED);
	out->conflicts = __atomic_load_n(&w->stats.conflicts, __ATOMIC_RELAXED);
	out->gave_up = __atomic_load_n(&w->stats.gave_up, __ATOMIC_RELAXED);
	out->forbidden = __atomic_load_n(&w->stats.forbidden, __ATOMIC_RELAXED);
	out->failed = __atomic_load_n(&w->stats.failed, __ATOMIC_RELAXED);
	out->unchanged = __atomic_load_n(&w->stats.unchanged, __ATOMIC_RELAXED);
}
