/* The gang fixture (gang_fixture.h): the test cluster with a gang manager, a
 * fake binder standing in for src/cache/binder.c, and the waits a test needs
 * for binds that complete on another thread.
 */
#include "gang_fixture.h"

#include <errno.h>
#include <time.h>

/* The fake binder the service points at; tests reach it through gfx. */
static struct fake_binder *fake_of(struct cache_binder *b)
{
	return (struct fake_binder *)(void *)b;
}

static int fake_record(struct cache_binder *cb, const struct cache_binding *bind,
		       bool after, unsigned delay_ms, cache_bind_done_fn done, void *arg)
{
	struct fake_binder *b = fake_of(cb);
	struct fake_post *p;
	int ret = 0;

	pthread_mutex_lock(&b->lock);
	if (b->refuse) {
		ret = b->refuse;
		goto out;
	}
	if (b->n == FAKE_MAX_POSTS) {
		ret = -ENOMEM;
		goto out;
	}
	p = &b->posts[b->n++];
	memset(p, 0, sizeof(*p));
	snprintf(p->ns, sizeof(p->ns), "%s", bind->ns);
	snprintf(p->name, sizeof(p->name), "%s", bind->name);
	snprintf(p->uid, sizeof(p->uid), "%s", bind->uid);
	snprintf(p->node, sizeof(p->node), "%s", bind->node);
	p->had_annotations = bind->annotations != NULL;
	snprintf(p->annotations, sizeof(p->annotations), "%s",
		 bind->annotations ? bind->annotations : "");
	p->after = after;
	p->delay_ms = delay_ms;
	p->done = done;
	p->arg = arg;
	pthread_cond_broadcast(&b->cond);
out:
	pthread_mutex_unlock(&b->lock);
	return ret;
}

int cache_binder_submit(struct cache_binder *b, const struct cache_binding *bind,
			cache_bind_done_fn done, void *arg)
{
	return fake_record(b, bind, false, 0, done, arg);
}

int cache_binder_submit_after(struct cache_binder *b, const struct cache_binding *bind,
			      unsigned delay_ms, cache_bind_done_fn done, void *arg)
{
	return fake_record(b, bind, true, delay_ms, done, arg);
}

static void deadline_in(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

bool fake_wait_posts(struct fake_binder *b, unsigned n, unsigned ms)
{
	struct timespec ts;
	bool ok;

	deadline_in(&ts, ms);
	pthread_mutex_lock(&b->lock);
	while (b->n < n && pthread_cond_timedwait(&b->cond, &b->lock, &ts) == 0)
		;
	ok = b->n >= n;
	pthread_mutex_unlock(&b->lock);
	return ok;
}

unsigned fake_posts(struct fake_binder *b)
{
	unsigned n;

	pthread_mutex_lock(&b->lock);
	n = b->n;
	pthread_mutex_unlock(&b->lock);
	return n;
}

struct fake_post fake_post_get(struct fake_binder *b, unsigned i)
{
	struct fake_post p;

	pthread_mutex_lock(&b->lock);
	assert_true(i < b->n);
	p = b->posts[i];
	pthread_mutex_unlock(&b->lock);
	return p;
}

void fake_answer(struct fake_binder *b, unsigned i, int result, const char *msg,
		 unsigned retry_after_ms)
{
	struct fake_post p;

	pthread_mutex_lock(&b->lock);
	assert_true(i < b->n);
	assert_false(b->posts[i].answered);
	b->posts[i].answered = true;
	p = b->posts[i];
	pthread_mutex_unlock(&b->lock);
	/* Outside the lock: the answer may submit the Binding again. */
	p.done(p.arg, result, msg, retry_after_ms);
}

/* ---- The fixture ------------------------------------------------------------------ */

int gfx_setup(void **state)
{
	struct gfx *g = calloc(1, sizeof(*g));

	if (!g || fx_init(&g->fx) < 0) {
		free(g);
		return -1;
	}
	/* Starvation holds would refuse single pods on nodes a waiting gang
	 * wants; these tests look at one gang at a time. */
	g->fx.cfg.gang.starvation_s = 3600;
	g->gangs = gang_manager_new(g->fx.cache, &g->fx.cfg.gang);
	if (!g->gangs) {
		fx_fini(&g->fx);
		free(g);
		return -1;
	}
	pthread_mutex_init(&g->binder.lock, NULL);
	pthread_cond_init(&g->binder.cond, NULL);
	g->fx.svc.gangs = g->gangs;
	g->fx.svc.binder = (struct cache_binder *)(void *)&g->binder;
	*state = g;
	return 0;
}

int gfx_teardown(void **state)
{
	struct gfx *g = *state;

	/* Parked binds are released with an error; their replies are the
	 * test's, already finished or abandoned with it. */
	gang_manager_shutdown(g->gangs);
	gang_manager_free(g->gangs);
	fx_fini(&g->fx);
	pthread_cond_destroy(&g->binder.cond);
	pthread_mutex_destroy(&g->binder.lock);
	free(g);
	return 0;
}

cJSON *gang_pod(const char *name, const char *group, unsigned quorum, unsigned gpus,
		const char *extra_annotations)
{
	char buf[2048];
	cJSON *p;

	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"uid-%s\","
		 "\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"%s\"},"
		 "\"annotations\":{\"troupe.io/min-member\":\"%u\"%s}},"
		 "\"spec\":{\"priority\":100,\"schedulerName\":\"default-scheduler\","
		 "\"containers\":[{\"name\":"
		 "\"worker\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"%u\"}}}]},"
		 "\"status\":{\"phase\":\"Pending\"}}",
		 name, name, group, quorum, extra_annotations, gpus);
	p = cJSON_Parse(buf);
	if (!p)
		fail_msg("test pod does not parse: %s", buf);
	return p;
}

void gang_create(struct gfx *g, const char *prefix, const char *group, unsigned quorum,
		 unsigned gpus, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		char name[K8S_NAME_BUF], err[CACHE_ERR_LEN];
		cJSON *o;
		struct cache_pod *pod;

		snprintf(name, sizeof(name), "%s-%u", prefix, i);
		o = gang_pod(name, group, quorum, gpus, "");
		pod = cache_pod_parse(o, cache_get_opts(g->fx.cache), err, sizeof(err));
		cJSON_Delete(o);
		if (!pod)
			fail_msg("gang pod %s: %s", name, err);
		assert_int_equal(cache_pod_remember(g->fx.cache, pod), 0);
	}
}

const char *const gpu_nodes[] = {
	"gpu-a100-0", "gpu-a100-1", "gpu-h100-0", "gpu-h100-1", NULL,
};

void pair_planned(struct gfx *g)
{
	cJSON *j;

	gang_create(g, "w", "pair", 2, 8, 2);
	j = filter_member(g, "w-0", "pair", 2, 8, gpu_nodes);
	assert_string_equal(error_of(j), "");
	cJSON_Delete(j);
}

cJSON *filter_member(struct gfx *g, const char *name, const char *group, unsigned quorum,
		     unsigned gpus, const char *const *nodes)
{
	char *body = names_args(gang_pod(name, group, quorum, gpus, ""), nodes);
	unsigned status = 0;
	cJSON *j = call(ext_filter, &g->fx, body, &status);

	free(body);
	assert_int_equal(status, 200);
	return j;
}

static void flag_set(void *ctx)
{
	struct done_flag *d = ctx;

	pthread_mutex_lock(&d->lock);
	d->done = true;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

void bind_start(struct gfx *g, struct pending_bind *pb, const char *name, const char *node)
{
	struct ext_async async = { flag_set, &pb->flag, NULL };
	char uid[K8S_UID_BUF];
	char *body;

	memset(pb, 0, sizeof(*pb));
	pthread_mutex_init(&pb->flag.lock, NULL);
	pthread_cond_init(&pb->flag.cond, NULL);
	ext_reply_init(&pb->r);
	snprintf(uid, sizeof(uid), "uid-%s", name);
	body = bind_args("ml", name, uid, node);
	pb->complete_now = ext_bind(&g->fx.svc, body, strlen(body), &pb->r, &async);
	free(body);
	if (pb->complete_now)
		flag_set(&pb->flag);
}

bool bind_wait(struct pending_bind *pb, unsigned ms)
{
	struct timespec ts;
	bool ok;

	deadline_in(&ts, ms);
	pthread_mutex_lock(&pb->flag.lock);
	while (!pb->flag.done && pthread_cond_timedwait(&pb->flag.cond, &pb->flag.lock, &ts) == 0)
		;
	ok = pb->flag.done;
	pthread_mutex_unlock(&pb->flag.lock);
	return ok;
}

const char *bind_error(struct pending_bind *pb, cJSON **reply)
{
	assert_true(bind_wait(pb, 0));
	assert_int_equal(pb->r.status, 200);
	*reply = cJSON_ParseWithLength(pb->r.body.buf, pb->r.body.len);
	if (!*reply)
		fail_msg("bind reply is not JSON: %.300s", pb->r.body.buf ? pb->r.body.buf : "");
	return error_of(*reply);
}

void bind_fini(struct pending_bind *pb)
{
	ext_reply_fini(&pb->r);
	pthread_cond_destroy(&pb->flag.cond);
	pthread_mutex_destroy(&pb->flag.lock);
}
