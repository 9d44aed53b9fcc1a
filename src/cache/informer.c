/* The informer's thread: one loop driving every stream and access review
 * through one curl multi handle, the cache's single writer while it runs
 * (informer.h says what it does and why); starting and stopping it, and its
 * counters and readiness as other threads read them.
 */
#include "cache/informer.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

const struct kind_info kinds[K_COUNT] = {
	{ "nodes", "/api/v1/nodes", CACHE_PERM_LIST_NODES, CACHE_PERM_WATCH_NODES, -1, -1, 0,
	  "Nodes", NULL },
	{ "pods", "/api/v1/pods", CACHE_PERM_LIST_PODS, CACHE_PERM_WATCH_PODS, -1, -1, 0, "Pods",
	  NULL },
	{ "podgroups", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups", CACHE_PERM_LIST_PODGROUPS,
	  CACHE_PERM_WATCH_PODGROUPS, CACHE_PG_XK8S, -1, 0, "scheduler-plugins PodGroups",
	  "scheduling.x-k8s.io/v1alpha1" },
	{ "podgroups.scheduling.k8s.io", "/apis/scheduling.k8s.io/v1beta1/podgroups",
	  CACHE_PERM_COUNT, CACHE_PERM_COUNT, CACHE_PG_UPSTREAM, -1, 0, "Kubernetes PodGroups",
	  "scheduling.k8s.io/v1beta1" },
	{ "podgroups.scheduling.volcano.sh", "/apis/scheduling.volcano.sh/v1beta1/podgroups",
	  CACHE_PERM_COUNT, CACHE_PERM_COUNT, CACHE_PG_VOLCANO, -1, 0, "Volcano PodGroups",
	  "scheduling.volcano.sh/v1beta1" },
	{ "podgroups.scheduling.run.ai", "/apis/scheduling.run.ai/v2alpha2/podgroups",
	  CACHE_PERM_COUNT, CACHE_PERM_COUNT, CACHE_PG_KAI, -1, 0, "KAI Scheduler PodGroups",
	  "scheduling.run.ai/v2alpha2" },
	{ "queues.scheduling.volcano.sh", "/apis/scheduling.volcano.sh/v1beta1/queues",
	  CACHE_PERM_COUNT, CACHE_PERM_COUNT, -1, CACHE_Q_VOLCANO, 0, "Volcano Queues",
	  "scheduling.volcano.sh/v1beta1" },
	{ "queues.scheduling.run.ai", "/apis/scheduling.run.ai/v2/queues", CACHE_PERM_COUNT,
	  CACHE_PERM_COUNT, -1, CACHE_Q_KAI, 0, "KAI Scheduler Queues", "scheduling.run.ai/v2" },
	{ "resourceslices", "/apis/resource.k8s.io/v1/resourceslices", CACHE_PERM_COUNT,
	  CACHE_PERM_COUNT, -1, -1, 1, "DRA ResourceSlices", "resource.k8s.io/v1" },
	{ "resourceclaims", "/apis/resource.k8s.io/v1/resourceclaims", CACHE_PERM_COUNT,
	  CACHE_PERM_COUNT, -1, -1, 2, "DRA ResourceClaims", "resource.k8s.io/v1" },
};

void cache_informer_get_stats(const struct cache_informer *inf, struct cache_informer_stats *out)
{
	out->events = __atomic_load_n(&inf->stats.events, __ATOMIC_RELAXED);
	out->lists = __atomic_load_n(&inf->stats.lists, __ATOMIC_RELAXED);
	out->relists = __atomic_load_n(&inf->stats.relists, __ATOMIC_RELAXED);
	out->watch_restarts = __atomic_load_n(&inf->stats.watch_restarts, __ATOMIC_RELAXED);
	out->errors = __atomic_load_n(&inf->stats.errors, __ATOMIC_RELAXED);
	out->partial_lines = __atomic_load_n(&inf->stats.partial_lines, __ATOMIC_RELAXED);
	out->permission_denials = __atomic_load_n(&inf->stats.permission_denials,
						  __ATOMIC_RELAXED);
}

void cache_informer_readiness(struct cache_informer *inf, struct cache_readiness *out)
{
	pthread_mutex_lock(&inf->lock);
	*out = inf->readiness;
	pthread_mutex_unlock(&inf->lock);
}

void cache_informer_opts_defaults(struct cache_informer_opts *opts)
{
	*opts = (struct cache_informer_opts){
		.page_size = 500,
		.watch_timeout_min_s = 300,
		.watch_timeout_max_s = 600,
		.backoff_initial_ms = 800,
		.backoff_max_ms = 30000,
		.healthy_reset_s = 60,
		.watch_silence_s = 150,
		.podgroup_retry_s = 300,
		.access_check_s = 60,
	};
}

/* ---- The thread ------------------------------------------------------------- */

static void *informer_main(void *arg)
{
	struct cache_informer *inf = arg;
	uint64_t last_reclaim = 0;

	/* From here on this thread is the cache's single writer. */
	cache_writer_claim(inf->cache);
	sem_post(&inf->claimed);
	while (!__atomic_load_n(&inf->stop, __ATOMIC_ACQUIRE)) {
		uint64_t now = util_now_ns(), next = now + 1000000000ULL;
		int running, left;
		CURLMsg *msg;

		for (int k = 0; k < K_COUNT; k++) {
			struct stream *s = &inf->streams[k];

			if ((s->phase == P_START || s->phase == P_DISABLED) && s->due_ns <= now)
				cache__inf_start_list(s);
			else if (s->phase == P_WATCH_DUE && s->due_ns <= now)
				cache__inf_start_watch(s);
			if ((s->phase == P_START || s->phase == P_DISABLED ||
			     s->phase == P_WATCH_DUE) && s->due_ns < next)
				next = s->due_ns;
		}
		/* A round still running when the next is due delays it: its end wakes
		 * the poll below. */
		if (inf->reviews_due_ns && !inf->reviews_running) {
			uint64_t period = (uint64_t)inf->opts.access_check_s * 1000000000ULL;

			if (inf->reviews_due_ns <= now) {
				cache__inf_reviews_start(inf);
				inf->reviews_due_ns = period ? now + period : 0;
			}
			if (inf->reviews_due_ns && inf->reviews_due_ns < next)
				next = inf->reviews_due_ns;
		}
		curl_multi_perform(inf->multi, &running);
		while ((msg = curl_multi_info_read(inf->multi, &left))) {
			struct stream *s = NULL;
			struct review *rv;

			if (msg->msg != CURLMSG_DONE)
				continue;
			rv = cache__inf_review_of(inf, msg->easy_handle);
			if (rv) {
				cache__inf_review_done(inf, rv, msg->data.result);
				continue;
			}
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
			cache__inf_on_done(s, msg->data.result);
		}
		if (now - last_reclaim > 1000000000ULL) {
			cache_writer_reclaim(inf->cache);
			cache__inf_health_tick(inf, now);
			last_reclaim = now;
		}
		now = util_now_ns();
		curl_multi_poll(inf->multi, NULL, 0,
				next > now ? (int)((next - now) / 1000000ULL) + 1 : 0, NULL);
	}
	for (int k = 0; k < K_COUNT; k++)
		cache__inf_request_end(&inf->streams[k]);
	for (int p = 0; p < CACHE_PERM_COUNT; p++)
		cache__inf_review_end(inf, &inf->reviews[p]);
	cache_writer_reclaim(inf->cache);
	return NULL;
}

struct cache_informer *cache_informer_start(struct cache *c, struct cache_api *api,
					    const struct cache_informer_opts *opts, char *err,
					    size_t errlen)
{
	struct cache_informer *inf = calloc(1, sizeof(*inf));
	struct cache_informer_opts d;

	if (!inf) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	cache_informer_opts_defaults(&d);
	inf->cache = c;
	inf->api = api;
	inf->opts = opts ? *opts : d;
	if (!inf->opts.page_size)
		inf->opts.page_size = d.page_size;
	if (!inf->opts.watch_timeout_min_s)
		inf->opts.watch_timeout_min_s = d.watch_timeout_min_s;
	if (inf->opts.watch_timeout_max_s < inf->opts.watch_timeout_min_s)
		inf->opts.watch_timeout_max_s = inf->opts.watch_timeout_min_s +
						(d.watch_timeout_max_s - d.watch_timeout_min_s);
	if (!inf->opts.backoff_initial_ms)
		inf->opts.backoff_initial_ms = d.backoff_initial_ms;
	if (!inf->opts.backoff_max_ms)
		inf->opts.backoff_max_ms = d.backoff_max_ms;
	if (!inf->opts.healthy_reset_s)
		inf->opts.healthy_reset_s = d.healthy_reset_s;
	if (!inf->opts.watch_silence_s)
		inf->opts.watch_silence_s = d.watch_silence_s;
	if (!inf->opts.podgroup_retry_s)
		inf->opts.podgroup_retry_s = d.podgroup_retry_s;
	inf->rng = (unsigned)util_now_ns();
	/* The first round goes with the first lists. */
	inf->reviews_due_ns = util_now_ns();
	inf->shown = CACHE_SYNCING;
	inf->readiness.state = CACHE_SYNCING;
	inf->multi = curl_multi_init();
	if (!inf->multi) {
		snprintf(err, errlen, "cannot create a curl multi handle");
		free(inf);
		return NULL;
	}
	pthread_mutex_init(&inf->lock, NULL);
	for (int k = 0; k < K_COUNT; k++) {
		inf->streams[k].inf = inf;
		inf->streams[k].kind = (enum kind)k;
		inf->streams[k].phase = P_START;
		strmap_init(&inf->streams[k].seen);
		/* No DRA driver configured: DRA's objects are never asked for. */
		if (kinds[k].dra && !cache_get_opts(c)->n_dra_drivers) {
			inf->streams[k].phase = P_DISABLED;
			inf->streams[k].due_ns = UINT64_MAX;
			inf->streams[k].synced = true;
		}
	}
	cache_set_synced(c, false);
	cache_set_live(c);
	sem_init(&inf->claimed, 0, 0);
	if (pthread_create(&inf->thread, NULL, informer_main, inf) != 0) {
		snprintf(err, errlen, "cannot start the informer thread");
		sem_destroy(&inf->claimed);
		curl_multi_cleanup(inf->multi);
		pthread_mutex_destroy(&inf->lock);
		free(inf);
		return NULL;
	}
	/* The writer moves to the thread before the caller goes on: otherwise the
	 * caller, still the writer by the token, could remove a node entry while
	 * the new thread writes too. */
	while (sem_wait(&inf->claimed) != 0)
		;
	return inf;
}

void cache_informer_stop(struct cache_informer *inf)
{
	if (!inf)
		return;
	__atomic_store_n(&inf->stop, true, __ATOMIC_RELEASE);
	curl_multi_wakeup(inf->multi);
	pthread_join(inf->thread, NULL);
	/* The informer wrote last; the thread that stopped it writes next. */
	cache_writer_claim(inf->cache);
	for (int k = 0; k < K_COUNT; k++) {
		struct stream *s = &inf->streams[k];

		strbuf_fini(&s->body);
		strbuf_fini(&s->line);
		free(s->cont);
		cache__inf_seen_clear(s);
	}
	curl_multi_cleanup(inf->multi);
	pthread_mutex_destroy(&inf->lock);
	sem_destroy(&inf->claimed);
	free(inf);
}

