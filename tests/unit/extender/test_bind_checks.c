/* Unit tests of what bind checks before it claims anything or posts a Binding
 * (bind.c: bind_check_pod, bind_check_node): a request troupe did not expect
 * from kube-scheduler - a pod it does not know from the watch, a node that is
 * unknown, not Ready or cordoned, a pod bound elsewhere, a uid that names
 * another pod - is refused, changes nothing and posts nothing, for pods asking
 * no GPU as for pods asking some; a normal bind still posts. Then a
 * property-style run: random interleavings of watch events, node changes,
 * filters and binds, valid and hostile, never bind a pod troupe's view says is
 * not bindable, and never promise a device twice.
 *
 * "Live" here is troupe watching a cluster (svc.informer set: bind asks only
 * whether it is), with gang_fixture.c's fake binder recording every Binding
 * submitted, or with no binder where the test wants binds answered at once.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gang_fixture.h"

/* bind never calls into the informer; it asks only whether there is one. */
static char fake_informer;

static void go_live(struct fx *f)
{
	f->svc.informer = (struct cache_informer *)(void *)&fake_informer;
}

/* Pod ml/<name> (uid "uid-<name>") as the watch shows it: <gpus> GPUs (0: a
 * CPU pod), on <node> (NULL: pending), in <phase>. */
static void watch_pod(struct fx *f, const char *name, unsigned gpus, const char *node,
		      const char *phase)
{
	char buf[1024], res[128], err[CACHE_ERR_LEN], on[300] = "";
	struct cache_pod *pod;
	cJSON *o;

	if (gpus)
		snprintf(res, sizeof(res), "{\"limits\":{\"nvidia.com/gpu\":\"%u\"}}", gpus);
	else
		snprintf(res, sizeof(res), "{\"requests\":{\"cpu\":\"1\"}}");
	if (node)
		snprintf(on, sizeof(on), "\"nodeName\":\"%s\",", node);
	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"uid-%s\"},"
		 "\"spec\":{%s\"schedulerName\":\"default-scheduler\",\"containers\":[{\"name\":"
		 "\"worker\",\"resources\":%s}]},\"status\":{\"phase\":\"%s\"}}",
		 name, name, on, res, phase);
	o = cJSON_Parse(buf);
	assert_non_null(o);
	pod = cache_pod_parse(o, cache_get_opts(f->cache), err, sizeof(err));
	cJSON_Delete(o);
	if (!pod)
		fail_msg("watch pod %s: %s", name, err);
	assert_int_equal(cache_pod_apply(f->cache, pod), 0);
}

/* Node <name> as the watch shows it: <gpus> GPUs, Ready or not, cordoned or not. */
static void watch_node(struct fx *f, const char *name, unsigned gpus, bool ready, bool cordoned)
{
	char n[16], err[CACHE_ERR_LEN];
	cJSON *o;
	struct cache_node *node;

	snprintf(n, sizeof(n), "%u", gpus);
	o = node_obj(name, n, n, ready, cordoned);
	node = cache_node_parse(o, cache_get_opts(f->cache), err, sizeof(err));
	cJSON_Delete(o);
	if (!node)
		fail_msg("watch node %s: %s", name, err);
	assert_int_equal(cache_node_upsert(f->cache, node), 0);
}

/* Filter pod ml/<name> asking <gpus> over every node (it is remembered). */
static void filter_pod(struct fx *f, const char *name, unsigned gpus)
{
	char *body = names_args(gpu_pod(name, gpus), request_nodes);
	unsigned status = 0;
	cJSON *j = call(ext_filter, f, body, &status);

	free(body);
	assert_int_equal(status, 200);
	cJSON_Delete(j);
}

/* ---- Hostile binds, one by one ---------------------------------------------------- */

struct hostile {
	const char *ns, *name, *uid, *node;
	const char *message;            /* part of the Error */
};

static const struct hostile hostile[] = {
	/* Never seen anywhere. */
	{ "ml", "ghost", "uid-ghost", "gpu-a100-1", "is unknown to troupe" },
	/* Seen in a filter call, but bound under another name. */
	{ "ml", "not-filtered", "uid-filtered", "gpu-a100-1", "belongs to pod ml/filtered" },
	/* A CPU pod to a cordoned node, a NotReady one, one troupe does not know. */
	{ "ml", "cpu-pending", "uid-cpu-pending", "gpu-l4-0", "node is cordoned" },
	{ "ml", "cpu-pending", "uid-cpu-pending", "gpu-t4-0", "node is not Ready" },
	{ "ml", "cpu-pending", "uid-cpu-pending", "ghost-0", "node ghost-0 is unknown" },
	/* The same for a GPU pod. */
	{ "ml", "gpu-pending", "uid-gpu-pending", "gpu-l4-0", "node is cordoned" },
	{ "ml", "gpu-pending", "uid-gpu-pending", "gpu-t4-0", "node is not Ready" },
	{ "ml", "gpu-pending", "uid-gpu-pending", "ghost-0", "node ghost-0 is unknown" },
	/* Bound elsewhere: a GPU pod, and a CPU pod (it occupies nothing). */
	{ "ml", "gpu-elsewhere", "uid-gpu-elsewhere", "gpu-a100-1",
	  "already bound to node gpu-h100-1" },
	{ "ml", "cpu-elsewhere", "uid-cpu-elsewhere", "cpu-0", "already bound to node gpu-h100-1" },
	/* The uid names another pod, or the namespace differs or is missing. */
	{ "ml", "gpu-pending", "uid-cpu-pending", "cpu-0", "belongs to pod ml/cpu-pending" },
	{ "other", "gpu-pending", "uid-gpu-pending", "gpu-a100-1", "belongs to pod ml/gpu-pending" },
	{ "", "gpu-pending", "uid-gpu-pending", "gpu-a100-1", "belongs to pod ml/gpu-pending" },
	/* Finished, or being deleted. */
	{ "ml", "done", "uid-done", "gpu-a100-1", "has finished or is being deleted" },
	/* A gang reservation's key is not a pod. */
	{ "troupe-reservation", "res-x", "res-x", "gpu-h100-1", "is not a pod" },
};

static void hostile_setup(struct gfx *g)
{
	struct fx *f = &g->fx;

	go_live(f);
	watch_pod(f, "cpu-pending", 0, NULL, "Pending");
	watch_pod(f, "gpu-pending", 2, NULL, "Pending");
	watch_pod(f, "gpu-elsewhere", 2, "gpu-h100-1", "Running");
	watch_pod(f, "cpu-elsewhere", 0, "gpu-h100-1", "Running");
	watch_pod(f, "done", 1, NULL, "Succeeded");
	filter_pod(f, "filtered", 1);
	assert_int_equal(cache_reserve(f->cache, "res-x", "gpu-h100-1", 0x80), 0);
}

static void test_bind_checks_hostile_binds_post_nothing(void **state)
{
	struct gfx *g = *state;
	struct fx *f = &g->fx;

	hostile_setup(g);
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		const struct hostile *c = &hostile[i];
		struct cluster_state before, after;
		struct ext_reply r;
		char *body = bind_args(c->ns, c->name, c->uid, c->node);
		cJSON *j;
		bool now;

		state_take(f, &before);
		ext_reply_init(&r);
		now = ext_bind(&f->svc, body, strlen(body), &r, &(struct ext_async){ NULL, NULL, "192.0.2.1:4242" });
		free(body);
		if (!now)
			fail_msg("bind %s/%s to %s was posted; want refused (\"%s\")", c->ns,
				 c->name, c->node, c->message);
		j = cJSON_ParseWithLength(r.body.buf, r.body.len);
		assert_non_null(j);
		if (r.status != 200 || !strstr(error_of(j), c->message))
			fail_msg("bind %s/%s to %s: status %u, Error \"%s\"; want \"%s\"", c->ns,
				 c->name, c->node, r.status, error_of(j), c->message);
		cJSON_Delete(j);
		ext_reply_fini(&r);
		state_take(f, &after);
		assert_state_same(&before, &after, true, c->message);
		assert_int_equal(fake_posts(&g->binder), 0);
	}
	expect_pod(f, "uid-cpu-pending", CACHE_POD_STATE_UNACCOUNTED, "", 0);
	expect_pod(f, "uid-gpu-pending", CACHE_POD_STATE_UNACCOUNTED, "", 0);
}

/* After all that, the pods the watch shows pending still bind as usual, and
 * a retry of a CPU pod's bind to the node it is on is answered as done. */
static void test_bind_checks_normal_binds_still_post(void **state)
{
	struct gfx *g = *state;
	struct fx *f = &g->fx;
	struct pending_bind pb;
	struct fake_post p;
	cJSON *j;

	hostile_setup(g);
	bind_start(g, &pb, "cpu-pending", "cpu-0");
	assert_false(pb.complete_now);
	assert_true(fake_wait_posts(&g->binder, 1, 5000));
	p = fake_post_get(&g->binder, 0);
	assert_string_equal(p.uid, "uid-cpu-pending");
	assert_string_equal(p.node, "cpu-0");
	fake_answer(&g->binder, 0, 0, "201 Created", 0);
	assert_true(bind_wait(&pb, 5000));
	assert_string_equal(bind_error(&pb, &j), "");
	cJSON_Delete(j);
	bind_fini(&pb);

	bind_start(g, &pb, "gpu-pending", "gpu-a100-1");
	assert_true(fake_wait_posts(&g->binder, 2, 5000));
	p = fake_post_get(&g->binder, 1);
	assert_string_equal(p.uid, "uid-gpu-pending");
	assert_string_equal(p.node, "gpu-a100-1");
	assert_true(p.had_annotations);
	fake_answer(&g->binder, 1, 0, "201 Created", 0);
	assert_true(bind_wait(&pb, 5000));
	assert_string_equal(bind_error(&pb, &j), "");
	cJSON_Delete(j);
	bind_fini(&pb);
	expect_pod(f, "uid-gpu-pending", CACHE_POD_STATE_ASSUMED, "gpu-a100-1", 0x03);

	/* The watch shows the CPU pod bound; kube-scheduler's retry (a lost
	 * reply) is done already, and posts nothing. */
	watch_pod(f, "cpu-pending", 0, "cpu-0", "Pending");
	bind_start(g, &pb, "cpu-pending", "cpu-0");
	assert_true(pb.complete_now);
	assert_string_equal(bind_error(&pb, &j), "");
	cJSON_Delete(j);
	bind_fini(&pb);
	assert_int_equal(fake_posts(&g->binder), 2);
}

/* A node cordoned after filter: the bind that follows is refused. */
static void test_bind_checks_node_cordoned_after_filter(void **state)
{
	struct gfx *g = *state;
	struct fx *f = &g->fx;
	struct pending_bind pb;
	cJSON *j;

	go_live(f);
	watch_node(f, "late-0", 4, true, false);
	watch_pod(f, "late", 0, NULL, "Pending");
	watch_node(f, "late-0", 4, true, true);
	bind_start(g, &pb, "late", "late-0");
	assert_true(pb.complete_now);
	assert_contains(bind_error(&pb, &j), "cordoned");
	cJSON_Delete(j);
	bind_fini(&pb);
	watch_node(f, "late-0", 4, true, false);
	bind_start(g, &pb, "late", "late-0");
	assert_false(pb.complete_now);
	assert_true(fake_wait_posts(&g->binder, 1, 5000));
	fake_answer(&g->binder, 0, 0, "201 Created", 0);
	assert_true(bind_wait(&pb, 5000));
	assert_string_equal(bind_error(&pb, &j), "");
	cJSON_Delete(j);
	bind_fini(&pb);
}

/* Without a watch (a snapshot), a pod remembered from filter is all troupe can
 * know of it: it binds (nothing is posted without an API server). */
static void test_bind_checks_snapshot_binds_filtered_pods(void **state)
{
	struct fx *f = *state;

	place(f, "snap", 2, "gpu-a100-1");
	expect_pod(f, "uid-snap", CACHE_POD_STATE_ASSUMED, "gpu-a100-1", 0x03);
}

/* ---- Random interleavings --------------------------------------------------------- */

enum { PROP_PODS = 24, PROP_STEPS = 4000, PROP_SEEDS = 6, PROP_MAX_NODES = 16 };

static const unsigned prop_gpus[] = { 0, 1, 2, 4, 8 };
/* Nodes binds are asked for: the test cluster's, the test's own (which change
 * state), one nobody knows, and where "another scheduler" puts pods. */
static const char *const prop_nodes[] = {
	"gpu-a100-0", "gpu-a100-1", "gpu-h100-0", "gpu-h100-1", "gpu-v100-0", "gpu-l4-0",
	"gpu-t4-0", "cpu-0", "t-0", "t-1", "t-2", "ghost-0", "elsewhere-0",
};
#define PROP_N_NODES (sizeof(prop_nodes) / sizeof(prop_nodes[0]))

static uint64_t prop_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* What troupe's view says of binding <uid> as <ns>/<name> to <node>, asked
 * before the bind: whether it may succeed at all. The oracle reads only the
 * cache's copies, not bind's code. */
static bool prop_may_bind(struct fx *f, const char *ns, const char *name, const char *uid,
			  const char *node)
{
	struct cache_pod_info info;
	struct cache_node_view v;
	bool ok;

	if (cache_pod_get(f->cache, uid, &info) < 0 || info.reservation ||
	    strcmp(info.ns, ns) != 0 || strcmp(info.name, name) != 0)
		return false;
	if (info.node[0])
		return strcmp(info.node, node) == 0;    /* already there: done */
	if (!info.active)
		return false;
	cache_read_begin(f->cache);
	ok = cache_node_lookup(f->cache, node, strlen(node), &v) && v.node->ready &&
	     !v.node->unschedulable &&
	     (info.demand.gpus == 0 || (v.node->gpu_resource == info.demand.gpu_resource &&
					cache_view_free_gpus(&v) >= info.demand.gpus));
	cache_read_end(f->cache);
	return ok;
}

struct prop_masks {
	char node[PROP_MAX_NODES][K8S_NAME_BUF];
	uint64_t mask[PROP_MAX_NODES];
	unsigned n;
	char twice[K8S_UID_BUF + K8S_NAME_BUF + 8];     /* "" or the first device promised twice */
};

static void prop_collect(const struct cache_pod_info *info, const char *uid, void *arg)
{
	struct prop_masks *m = arg;
	unsigned i;

	if (!info->devices)
		return;
	for (i = 0; i < m->n && strcmp(m->node[i], info->node) != 0; i++)
		;
	if (i == m->n) {
		if (m->n == PROP_MAX_NODES)
			return;
		snprintf(m->node[m->n++], sizeof(m->node[0]), "%s", info->node);
	}
	if ((m->mask[i] & info->devices) && !m->twice[0])
		snprintf(m->twice, sizeof(m->twice), "%s on %s", uid, info->node);
	m->mask[i] |= info->devices;
}

/* No device is occupied by two pods (or a pod and a reservation), and no node
 * troupe knows is over-committed. */
static void prop_assert_exclusive(struct fx *f, const char *when)
{
	struct prop_masks m;

	memset(&m, 0, sizeof(m));
	cache_pod_foreach(f->cache, prop_collect, &m);
	if (m.twice[0])
		fail_msg("%s: a device is promised twice (%s)", when, m.twice);
	assert_never_overcommitted(f, when);
}

/* One bind, valid or hostile, checked against the oracle. */
static void prop_bind(struct fx *f, uint64_t *rs, unsigned *ok_binds)
{
	char name[32], uid[40], other[40];
	const char *ns = "ml", *node = prop_nodes[prop_rand(rs) % PROP_N_NODES];
	unsigned status = 0;
	bool may, bound;
	char *body;
	cJSON *j;

	snprintf(name, sizeof(name), "p-%u", (unsigned)(prop_rand(rs) % PROP_PODS));
	snprintf(uid, sizeof(uid), "uid-%s", name);
	switch (prop_rand(rs) % 8) {
	case 0:         /* another pod's uid */
		snprintf(other, sizeof(other), "uid-p-%u", (unsigned)(prop_rand(rs) % PROP_PODS));
		snprintf(uid, sizeof(uid), "%s", other);
		break;
	case 1:         /* another namespace */
		ns = "prod";
		break;
	case 2:         /* a uid nobody has */
		snprintf(uid, sizeof(uid), "uid-x-%u", (unsigned)(prop_rand(rs) % 1000));
		break;
	default:
		break;
	}
	may = prop_may_bind(f, ns, name, uid, node);
	body = bind_args(ns, name, uid, node);
	j = call(bind_sync, f, body, &status);
	free(body);
	bound = status == 200 && error_of(j)[0] == '\0';
	if (bound && !may)
		fail_msg("bind %s/%s (uid %s) to %s succeeded; troupe's view says it is not "
			 "bindable", ns, name, uid, node);
	if (bound) {
		struct cache_pod_info info;

		assert_int_equal(cache_pod_get(f->cache, uid, &info), 0);
		assert_string_equal(info.node, node);
		(*ok_binds)++;
	}
	cJSON_Delete(j);
}

static void prop_run(uint64_t seed, unsigned *ok_binds, unsigned *ops)
{
	void *state = NULL;
	struct fx *f;
	uint64_t rs = seed;
	unsigned gpus[PROP_PODS];

	assert_int_equal(fx_setup(&state), 0);
	f = state;
	go_live(f);
	for (unsigned i = 0; i < PROP_PODS; i++)
		gpus[i] = prop_gpus[prop_rand(&rs) % (sizeof(prop_gpus) / sizeof(prop_gpus[0]))];
	for (unsigned t = 0; t < 3; t++) {
		char n[8];

		snprintf(n, sizeof(n), "t-%u", t);
		watch_node(f, n, 4, true, false);
	}
	for (unsigned step = 0; step < PROP_STEPS; step++) {
		unsigned i = (unsigned)(prop_rand(&rs) % PROP_PODS);
		char name[32], uid[40], n[8];

		snprintf(name, sizeof(name), "p-%u", i);
		snprintf(uid, sizeof(uid), "uid-%s", name);
		switch (prop_rand(&rs) % 10) {
		case 0:         /* the watch shows the pod, pending */
			watch_pod(f, name, gpus[i], NULL, "Pending");
			break;
		case 1:         /* another scheduler placed it somewhere troupe cannot see */
			watch_pod(f, name, gpus[i], "elsewhere-0", "Running");
			break;
		case 2:         /* gone, or finished */
			if (prop_rand(&rs) % 2)
				(void)cache_pod_delete(f->cache, uid);
			else
				watch_pod(f, name, gpus[i], NULL, "Failed");
			break;
		case 3:         /* a test node changes state */
			snprintf(n, sizeof(n), "t-%u", (unsigned)(prop_rand(&rs) % 3));
			watch_node(f, n, 4, prop_rand(&rs) % 3 != 0, prop_rand(&rs) % 3 == 0);
			break;
		case 4:         /* filter (remembers pods asking GPUs) */
			if (gpus[i])
				filter_pod(f, name, gpus[i]);
			break;
		default:
			prop_bind(f, &rs, ok_binds);
			break;
		}
		(*ops)++;
		if (step % 64 == 0)
			prop_assert_exclusive(f, "during the run");
	}
	prop_assert_exclusive(f, "at the end");
	fx_teardown(&state);
}

static void test_bind_checks_random_interleavings_never_bind_the_unbindable(void **state)
{
	unsigned ok_binds = 0, ops = 0;

	(void)state;
	for (uint64_t seed = 1; seed <= PROP_SEEDS; seed++)
		prop_run(seed * 0x9E3779B97F4A7C15ULL, &ok_binds, &ops);
	/* The run must have bound something, or it proved nothing. */
	if (ok_binds < 50)
		fail_msg("only %u of %u steps bound a pod", ok_binds, ops);
}

int main(void)
{
#define GFX(t) cmocka_unit_test_setup_teardown(t, gfx_setup, gfx_teardown)
#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		GFX(test_bind_checks_hostile_binds_post_nothing),
		GFX(test_bind_checks_normal_binds_still_post),
		GFX(test_bind_checks_node_cordoned_after_filter),
		FX(test_bind_checks_snapshot_binds_filtered_pods),
		cmocka_unit_test(test_bind_checks_random_interleavings_never_bind_the_unbindable),
	};
#undef FX
#undef GFX

	/* Refusals are logged as warnings; keep the test output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
