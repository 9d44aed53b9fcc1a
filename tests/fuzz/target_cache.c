/* Fuzz targets for what the API server sends the informer:
 *   objects  one Node, Pod or PodGroup object: cache_node_parse,
 *            cache_pod_parse and cache_podgroup_parse on cJSON of the input
 *            (each parser gets every input);
 *   watch    a watch stream: the input's bytes fed to the informer's write
 *            callback (cache__inf_on_watch_data) of a node, a pod and a
 *            pod-group stream in turn, over the test cluster, once whole and
 *            once cut into chunks (where, is drawn from the input itself, so
 *            it replays), which must come to the same;
 *   list     a list page: its items applied as list_page_done does
 *            (cache__inf_apply_object with the key kept for the sweep, then
 *            cache__inf_sweep), for each kind. The page's envelope parsing in
 *            informer_stream.c is static, so this target reads the envelope
 *            the same way itself; the objects, keys and sweep are the
 *            informer's own.
 * Invariants: a parser that refuses says why; what it returns is whole (every
 * string readable, sizes within their caps, labels sorted); after a stream or
 * a page the cache counts what it holds, and after a page's sweep it holds
 * only what the page listed.
 */
#include "fuzz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"
#include "cache/informer.h"
#include "common/util.h"
#include "gang/gang.h"
#include "placement/placement.h"
#include "placement/topology.h"

#define CLUSTER TROUPE_SOURCE_ROOT "/tests/data/cluster.json"

static const char *const gpu_names[] = { "nvidia.com/gpu", "amd.com/gpu",
					 "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb" };
static struct cache_opts opts;
static struct placement_registry *registry;

static struct cache *cluster_new(void)
{
	char err[CACHE_ERR_LEN] = "";
	struct cache *c = cache_new(&opts);

	if (!c || cache_snapshot_load(c, CLUSTER, err, sizeof(err)) < 0)
		fuzz_fail("cannot load %s: %s", CLUSTER, err);
	cache_set_synced(c, true);
	return c;
}

/* As the daemon's cache is: two GPU kinds, and each node's topology derived
 * by placement's hooks (the annotation troupe.io/gpu-topology parsed) as the
 * informer applies it. */
static int opts_init(void)
{
	memset(&opts, 0, sizeof(opts));
	/* Two whole-GPU kinds and two MIG profiles, each shared as its node's
	 * labels say (the daemon's default). */
	for (unsigned i = 0; i < 4; i++) {
		opts.gpu_resources[i] = gpu_names[i];
		opts.sharing[i].strategy = -1;
	}
	opts.n_gpu_resources = 4;
	/* DRA's streams apply what they read (dra.c) for this driver. */
	opts.dra_drivers[0] = "gpu.nvidia.com";
	opts.n_dra_drivers = 1;
	registry = placement_registry_new();
	if (!registry)
		return -1;
	opts.node_derive = placement_topo_derive;
	opts.node_release = placement_topo_release;
	opts.hook_ctx = registry;
	return 0;
}

static void opts_fini(void)
{
	placement_registry_free(registry);
	registry = NULL;
}

/* ---- objects ---------------------------------------------------------------------- */

/* Read every byte of <s> (a string a parser returned), so the sanitizer sees
 * one that runs past its block; volatile, so no optimiser drops the read. */
static volatile size_t touched;

static void touch(const char *s)
{
	if (s)
		touched += strlen(s);
}

static void check_node(const struct cache_node *n)
{
	FUZZ_CHECK(n->name && n->name[0], "node: parsed without a name");
	FUZZ_CHECK(strlen(n->name) < K8S_NAME_BUF, "node: a name of %zu bytes", strlen(n->name));
	FUZZ_CHECK(n->gpu_capacity <= CACHE_MAX_GPUS, "node: capacity %u", n->gpu_capacity);
	FUZZ_CHECK(n->gpu_resource < (int)opts.n_gpu_resources, "node: resource index %d",
		   n->gpu_resource);
	for (size_t i = 0; i < n->n_labels; i++) {
		FUZZ_CHECK(n->labels[i].key && n->labels[i].value, "node: a NULL label");
		FUZZ_CHECK(i == 0 || strcmp(n->labels[i - 1].key, n->labels[i].key) <= 0,
			   "node: labels not sorted");
		FUZZ_CHECK(cache_node_label(n, n->labels[i].key), "node: label %s not found",
			   n->labels[i].key);
	}
	for (size_t i = 0; i < n->n_taints; i++) {
		/* Each part may be absent (NULL); what is there must be readable. */
		touch(n->taints[i].key);
		touch(n->taints[i].value);
		touch(n->taints[i].effect);
	}
	touch(n->topology_text);
	touch(n->gpu_uuids);
	touch(n->dra_topology_text);
	FUZZ_CHECK(n->gpu_allocatable <= n->gpu_capacity, "node: %u allocatable of %u",
		   n->gpu_allocatable, n->gpu_capacity);
	if (cache_node_shared(n)) {
		FUZZ_CHECK(n->gpu_replicas >= 1 && n->gpu_physical >= 1 &&
			   (unsigned)n->gpu_replicas * n->gpu_physical <= CACHE_MAX_GPUS &&
			   n->gpu_capacity <= (unsigned)n->gpu_replicas * n->gpu_physical,
			   "node: %u GPUs x %u slots for %u devices", n->gpu_physical,
			   n->gpu_replicas, n->gpu_capacity);
		FUZZ_CHECK(n->gpu_sharing < CACHE_SHARING_COUNT, "node: sharing %u",
			   n->gpu_sharing);
	}
	for (int r = 0; n->res_mask && r < CACHE_MAX_GPU_RESOURCES; r++) {
		FUZZ_CHECK(!(n->res_mask[r] & ~cache_node_capacity_mask(n)),
			   "node: resource %d's devices past its capacity", r);
		for (int q = 0; q < r; q++)
			FUZZ_CHECK(!(n->res_mask[r] & n->res_mask[q]),
				   "node: a device of resources %d and %d", q, r);
		FUZZ_CHECK(n->res_alloc[r] <= (uint32_t)__builtin_popcountll(n->res_mask[r]),
			   "node: resource %d offers %u of %d", r, n->res_alloc[r],
			   __builtin_popcountll(n->res_mask[r]));
	}
}

static void check_pod(const struct cache_pod *p)
{
	FUZZ_CHECK(p->ns && p->ns[0] && p->name && p->name[0] && p->uid,
		   "pod: parsed without namespace/name/uid");
	FUZZ_CHECK(p->queue && p->queue[0], "pod: no queue");
	FUZZ_CHECK(p->demand.gpu_resource < (int)opts.n_gpu_resources,
		   "pod: resource index %d", p->demand.gpu_resource);
	FUZZ_CHECK(p->demand.gpus == 0 || p->demand.gpu_resource >= 0 || p->demand_error,
		   "pod: %u GPUs of no resource", p->demand.gpus);
	FUZZ_CHECK(!p->demand_error || strlen(p->demand_error) < 1u << 20, "pod: error");
	FUZZ_CHECK(p->demand.cpu_milli >= 0 && p->demand.mem_bytes >= 0,
		   "pod: negative demand (%lld m CPU, %lld B)", (long long)p->demand.cpu_milli,
		   (long long)p->demand.mem_bytes);
	touch(p->node);
	touch(p->topology);
	touch(p->group);
	touch(p->gang_topology);
	touch(p->slot_ids);
}

static bool run_objects(const uint8_t *data, size_t len)
{
	cJSON *obj = len ? cJSON_ParseWithLength((const char *)data, len) : NULL;
	char err[CACHE_ERR_LEN];
	struct cache_node *n;
	struct cache_pod *p;
	struct cache_podgroup *pg;

	if (!obj)
		return false;
	err[0] = '\0';
	n = cache_node_parse(obj, &opts, err, sizeof(err));
	FUZZ_CHECK(n || err[0], "node: refused without a reason");
	if (n)
		check_node(n);
	cache_node_free(n);
	err[0] = '\0';
	p = cache_pod_parse(obj, &opts, err, sizeof(err));
	FUZZ_CHECK(p || err[0], "pod: refused without a reason");
	if (p)
		check_pod(p);
	cache_pod_free(p);
	/* As a snapshot reads it (by apiVersion), then as each API's stream does. */
	for (int a = -1; a < CACHE_PG_API_COUNT; a++) {
		err[0] = '\0';
		pg = a < 0 ? cache_podgroup_parse(obj, &opts, err, sizeof(err))
			   : cache_podgroup_parse_api(obj, (enum cache_pg_api)a, &opts, err,
						      sizeof(err));
		FUZZ_CHECK(pg || err[0], "pod group: refused without a reason");
		if (pg)
			FUZZ_CHECK(pg->ns && pg->name && pg->name[0] && pg->min_member >= 0 &&
				   pg->timeout_s >= 0 && pg->min_cpu_milli >= 0 &&
				   pg->min_mem_bytes >= 0 && pg->queue &&
				   (unsigned)pg->api < CACHE_PG_API_COUNT,
				   "pod group: %s/%s min %d timeout %d", pg->ns ? pg->ns : "?",
				   pg->name ? pg->name : "?", pg->min_member, pg->timeout_s);
		cache_podgroup_free(pg);
	}
	for (int a = 0; a < CACHE_Q_API_COUNT; a++) {
		struct cache_queue q;

		err[0] = '\0';
		if (cache_queue_parse(obj, (enum cache_queue_api)a, &q, err, sizeof(err)) == 0)
			FUZZ_CHECK(q.name[0] && q.weight > 0 && q.weight <= 1e6,
				   "queue %s: weight %g", q.name, q.weight);
		else
			FUZZ_CHECK(err[0], "queue: refused without a reason");
	}
	cJSON_Delete(obj);
	return true;
}

/* ---- The cache after a stream or a page ------------------------------------------------ */

/* What the informer applied must leave the cache readable and consistent.
 * Not "never over-committed": the API server may well report a node whose
 * allocatable shrank under the pods running there, and troupe must keep
 * both as reported. */
static bool visit_node(const struct cache_node_view *v, void *arg)
{
	size_t *n = arg;

	touch(v->node->name);
	(*n)++;
	return true;
}

static void check_cache(struct cache *c, const char *what)
{
	struct cache_stats st;
	size_t n = 0;

	cache_read_begin(c);
	cache_node_foreach(c, visit_node, &n);
	cache_read_end(c);
	cache_get_stats(c, &st);
	FUZZ_CHECK(n == st.nodes, "%s: %zu nodes visited, %zu counted", what, n, st.nodes);
	FUZZ_CHECK(st.pods_holding <= st.pods, "%s: %zu pods holding GPUs of %zu", what,
		   st.pods_holding, st.pods);
}

/* A stream of <kind> of an informer that only applies (no API server, no
 * thread): what the informer's callbacks need of it. */
static void stream_init(struct cache_informer *inf, struct stream *s, struct cache *c,
			enum kind kind)
{
	memset(inf, 0, sizeof(*inf));
	inf->cache = c;
	memset(s, 0, sizeof(*s));
	s->inf = inf;
	s->kind = kind;
	s->phase = P_WATCHING;
	s->answered = true;     /* the server answered 200: the body is events */
	strbuf_init(&s->body);
	strbuf_init(&s->line);
	strmap_init(&s->seen);
}

static void stream_fini(struct stream *s)
{
	cache__inf_seen_clear(s);
	strbuf_fini(&s->body);
	strbuf_fini(&s->line);
}

/* ---- watch -------------------------------------------------------------------------------- */

static uint64_t hash(const uint8_t *d, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ d[i]) * 0x100000001b3ULL;
	return h;
}

/* What a stream left: to compare one delivery of it with another. */
struct stream_result {
	char rv[RV_LEN];
	uint64_t events;
	bool relist, broken;
	size_t pending;                 /* bytes of a line not yet complete */
	struct cache_stats stats;
};

/* Feed <data> to a fresh stream of <kind> over the test cluster, in chunks
 * drawn from <rng> (or whole when <rng> is NULL), as curl would: until the
 * callback takes less than it was given, which ends the transfer. */
static void feed(const char *what, enum kind kind, const uint8_t *data, size_t len,
		 uint64_t *rng, struct stream_result *out)
{
	static const size_t sizes[] = { 1, 2, 7, 64, 512, 4096 };
	struct cache *c = cluster_new();
	struct cache_informer inf;
	struct stream s;
	size_t off = 0;
	char *copy = malloc(len ? len : 1);

	if (!copy)
		abort();
	memcpy(copy, data, len);
	stream_init(&inf, &s, c, kind);
	while (off < len) {
		size_t n = rng ? 1 + fuzz_below(rng, sizes[fuzz_below(rng, 6)]) : len;
		size_t took;

		if (n > len - off)
			n = len - off;
		took = cache__inf_on_watch_data(copy + off, 1, n, &s);
		if (took != n) {
			FUZZ_CHECK(took == 0 && (s.relist || s.broken),
				   "%s: took %zu of %zu bytes without a reason", what, took, n);
			break;  /* curl ends the transfer here */
		}
		FUZZ_CHECK(!s.relist && !s.broken, "%s: a stream to abort was not aborted", what);
		off += n;
	}
	FUZZ_CHECK(memchr(s.rv, '\0', sizeof(s.rv)), "%s: resourceVersion not terminated", what);
	check_cache(c, what);
	memcpy(out->rv, s.rv, sizeof(out->rv));
	out->events = inf.stats.events;
	out->relist = s.relist;
	out->broken = s.broken;
	out->pending = s.line.len;
	cache_get_stats(c, &out->stats);
	stream_fini(&s);
	free(copy);
	cache_free(c);
}

/* The stream in chunks of 1 byte to 4 KiB, as a TCP stream may deliver it,
 * must have the very effect of the stream in one piece: where the reads fall
 * cannot change which events are applied. */
static bool run_watch(const uint8_t *data, size_t len)
{
	bool deep = false;

	for (int k = 0; k < K_COUNT; k++) {
		struct stream_result whole, cut;
		uint64_t rng = hash(data, len) + (uint64_t)k;

		feed(kinds[k].name, (enum kind)k, data, len, NULL, &whole);
		feed(kinds[k].name, (enum kind)k, data, len, &rng, &cut);
		FUZZ_CHECK(strcmp(whole.rv, cut.rv) == 0 && whole.events == cut.events &&
			   whole.relist == cut.relist && whole.broken == cut.broken &&
			   (whole.relist || whole.broken || whole.pending == cut.pending) &&
			   whole.stats.nodes == cut.stats.nodes && whole.stats.pods == cut.stats.pods &&
			   whole.stats.podgroups == cut.stats.podgroups &&
			   whole.stats.gpus_held == cut.stats.gpus_held,
			   "%s: cut into chunks it did not do what it did whole (events %llu / %llu, "
			   "resourceVersion %s / %s, pods %zu / %zu)", kinds[k].name,
			   (unsigned long long)whole.events, (unsigned long long)cut.events, whole.rv,
			   cut.rv, whole.stats.pods, cut.stats.pods);
		deep |= whole.events > 0;
	}
	return deep;
}

/* ---- list ---------------------------------------------------------------------------------- */

static bool still_listed(const char *key, struct stream *s)
{
	return strmap_get(&s->seen, key, strlen(key)) != NULL;
}

struct seen_check {
	struct stream *s;
	unsigned stray;
	char key[K8S_KEY_BUF];
};

/* A Queue of the stream's API that the page did not list. */
static void check_queue_listed(const struct cache_queue *q, void *arg)
{
	struct seen_check *sc = arg;

	if (!still_listed(q->name, sc->s)) {
		sc->stray++;
		snprintf(sc->key, sizeof(sc->key), "%s", q->name);
	}
}

static bool check_node_listed(const struct cache_node_view *v, void *arg)
{
	struct seen_check *sc = arg;

	if (!still_listed(v->node->name, sc->s)) {
		sc->stray++;
		snprintf(sc->key, sizeof(sc->key), "%s", v->node->name);
	}
	return true;
}

static void check_pod_listed(const struct cache_pod_info *info, const char *uid, void *arg)
{
	struct seen_check *sc = arg;

	/* Only what the API showed is swept: a pod remembered from a request
	 * or a reservation is not the list's to delete, nor a ResourceClaim's
	 * entry (the claims' relist's). */
	if (info->from_api && !info->reservation && info->state != CACHE_POD_STATE_ASSUMED &&
	    !cache_dra_uid(uid) && !still_listed(uid, sc->s)) {
		sc->stray++;
		snprintf(sc->key, sizeof(sc->key), "%s", uid);
	}
}

static void check_group_listed(const struct cache_podgroup *pg, void *arg)
{
	struct seen_check *sc = arg;
	char key[K8S_KEY_BUF];

	/* Each API's list sweeps its own groups only. */
	if ((int)pg->api != kinds[sc->s->kind].pg_api)
		return;
	snprintf(key, sizeof(key), "%s/%s", pg->ns, pg->name);
	if (!still_listed(key, sc->s)) {
		sc->stray++;
		snprintf(sc->key, sizeof(sc->key), "%s", key);
	}
}

static bool run_list(const uint8_t *data, size_t len)
{
	cJSON *root = len ? cJSON_ParseWithLength((const char *)data, len) : NULL;
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items"), *it, *meta;

	/* What list_page_done refuses before applying anything. */
	if (!root || (items && !cJSON_IsArray(items) && !cJSON_IsNull(items))) {
		cJSON_Delete(root);
		return false;
	}
	meta = json_obj(root, "metadata");
	for (int k = 0; k < K_COUNT; k++) {
		struct cache *c = cluster_new();
		struct cache_informer inf;
		struct stream s;
		struct seen_check sc;
		char key[K8S_KEY_BUF];

		stream_init(&inf, &s, c, (enum kind)k);
		s.phase = P_LISTING;
		cJSON_ArrayForEach(it, json_list(items)) {
			cache__inf_apply_object(&s, it, false, key, sizeof(key));
			FUZZ_CHECK(memchr(key, '\0', sizeof(key)), "%s list: key not terminated",
				   kinds[k].name);
			if (key[0])
				cache__inf_seen_add(&s, key);
		}
		cache__inf_remember_rv(&s, json_str(meta, "resourceVersion"));
		cache__inf_sweep(&s);
		sc = (struct seen_check){ &s, 0, "" };
		if (k == K_NODES) {
			cache_read_begin(c);
			cache_node_foreach(c, check_node_listed, &sc);
			cache_read_end(c);
		} else if (k == K_PODS) {
			cache_pod_foreach(c, check_pod_listed, &sc);
		} else if (kinds[k].q_api >= 0) {
			cache_queue_foreach(c, (enum cache_queue_api)kinds[k].q_api,
					    check_queue_listed, &sc);
		} else {
			cache_podgroup_foreach(c, check_group_listed, &sc);
		}
		FUZZ_CHECK(!sc.stray, "%s list: %u objects the page did not list survived its "
			   "sweep, e.g. %s", kinds[k].name, sc.stray, sc.key);
		check_cache(c, kinds[k].name);
		stream_fini(&s);
		cache_free(c);
	}
	cJSON_Delete(root);
	return true;
}

/* ---- topo ---------------------------------------------------------------------------------- */

/* The text of `nvidia-smi topo -m` a node carries in its annotation
 * troupe.io/gpu-topology (placement_topo_parse): a refusal says why and
 * leaves the result untouched; a topology is symmetric, its diagonal 0, its
 * size within PLACEMENT_TOPO_MAX. */
static bool run_topo(const uint8_t *data, size_t len)
{
	static struct placement_topo t, before;
	char err[CACHE_ERR_LEN] = "";
	int rc;

	memset(&t, 0x5a, sizeof(t));
	before = t;
	rc = placement_topo_parse((const char *)data, len, &t, err, sizeof(err));
	if (rc < 0) {
		FUZZ_CHECK(err[0], "topo: refused without a reason");
		FUZZ_CHECK(memcmp(&t, &before, sizeof(t)) == 0, "topo: a refusal changed the result");
		return false;
	}
	FUZZ_CHECK(rc == 0 && t.known && t.n <= PLACEMENT_TOPO_MAX, "topo: %d devices", t.n);
	for (unsigned i = 0; i < t.n; i++) {
		FUZZ_CHECK(t.link[i][i] == 0, "topo: device %u linked to itself", i);
		for (unsigned j = 0; j < t.n; j++)
			FUZZ_CHECK(t.link[i][j] == t.link[j][i], "topo: link %u-%u not symmetric",
				   i, j);
	}
	return true;
}

/* A gang plan record, troupe.io/gang-plan on a pod from the API server
 * (gang_record_decode, which the recovery follows to bind pods): a refusal
 * says why and leaves no members; what is read has a count in range, every
 * member named with a node and devices, no pod twice; and it encodes to a text
 * that reads back the same. */
static bool run_plan(const uint8_t *data, size_t len)
{
	struct gang_record r, back;
	char err[256] = "", *text = malloc(len + 1), *again;
	int rc;

	FUZZ_CHECK(text, "plan: out of memory");
	memcpy(text, data, len);
	text[len] = '\0';      /* an annotation's value is a string: no NUL inside */
	rc = gang_record_decode(text, &r, err, sizeof(err));
	free(text);
	if (rc < 0) {
		FUZZ_CHECK(err[0], "plan: refused (%d) without a reason", rc);
		FUZZ_CHECK(!r.members, "plan: a refusal kept members");
		gang_record_fini(&r);
		return rc == -EPROTONOSUPPORT;
	}
	FUZZ_CHECK(r.version == GANG_RECORD_VERSION, "plan: version %u read", r.version);
	FUZZ_CHECK(r.n >= 1 && r.n <= GANG_RECORD_MEMBERS_MAX && r.quorum >= 1,
		   "plan: n %u quorum %u", r.n, r.quorum);
	FUZZ_CHECK(r.id[0], "plan: no id");
	for (unsigned i = 0; r.members && i < r.n; i++) {
		const struct gang_record_member *m = &r.members[i];

		FUZZ_CHECK(m->uid[0] && m->name[0] && m->node[0], "plan: member %u unnamed", i);
		for (unsigned j = 0; j < i; j++)
			FUZZ_CHECK(strcmp(r.members[j].uid, m->uid) != 0, "plan: uid %s twice",
				   m->uid);
	}
	again = gang_record_encode(&r);
	FUZZ_CHECK(again, "plan: out of memory encoding");
	FUZZ_CHECK(gang_record_decode(again, &back, err, sizeof(err)) == 0,
		   "plan: its own encoding does not read back: %s", err);
	FUZZ_CHECK(back.n == r.n && back.quorum == r.quorum && strcmp(back.id, r.id) == 0 &&
		   (!back.members) == (!r.members || strlen(again) + 1 > GANG_RECORD_MAX ||
				       !strstr(again, "members")),
		   "plan: read back differs");
	for (unsigned i = 0; back.members && r.members && i < r.n; i++)
		FUZZ_CHECK(strcmp(back.members[i].uid, r.members[i].uid) == 0 &&
			   strcmp(back.members[i].node, r.members[i].node) == 0 &&
			   back.members[i].devices == r.members[i].devices,
			   "plan: member %u read back differs", i);
	free(again);
	gang_record_fini(&back);
	gang_record_fini(&r);
	return true;
}

/* ---- The targets ------------------------------------------------------------------------ */

static const char *const object_dict[] = {
	"metadata", "name", "namespace", "uid", "labels", "annotations", "resourceVersion",
	"deletionTimestamp", "spec", "status", "capacity", "allocatable", "conditions", "type",
	"Ready", "True", "False", "Unknown", "unschedulable", "taints", "key", "value", "effect",
	"NoSchedule", "nvidia.com/gpu", "amd.com/gpu", "cpu", "memory", "containers",
	"initContainers", "restartPolicy", "Always", "resources", "limits", "requests",
	"overhead", "nodeName", "phase", "Running", "Pending", "Succeeded", "Failed",
	"priority", "schedulingGroup", "podGroupName", "troupe.io/gpu-ids",
	"troupe.io/gpu-unhealthy", "troupe.io/gpu-uuids", "troupe.io/gpu-topology",
	"troupe.io/topology", "troupe.io/gang-topology", "troupe.io/queue",
	"scheduling.x-k8s.io/pod-group", "scheduling.x-k8s.io/min-member", "minMember",
	"scheduleTimeoutSeconds", "minResources", "kubernetes.io/hostname", "gpu-a100-0",
	"cpu-0", "ml", "items", "object", "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR",
	"code", "message", "continue", "Status", NULL,
};

const struct fuzz_target fuzz_target_objects = {
	"objects", object_dict, opts_init, run_objects, opts_fini,
};
const struct fuzz_target fuzz_target_watch = {
	"watch", object_dict, opts_init, run_watch, opts_fini,
};
const struct fuzz_target fuzz_target_list = {
	"list", object_dict, opts_init, run_list, opts_fini,
};

/* The words of nvidia-smi's matrix. */
static const char *const topo_dict[] = {
	"GPU0", "GPU1", "GPU7", "GPU63", "GPU64", "NIC0", "mlx5_0", "X", "NV1", "NV12", "NV18",
	"NV255", "NV256", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "CPU Affinity",
	"NUMA Affinity", "GPU NUMA ID", "0-23", "N/A", "Legend:", "\t", "\r\n", NULL,
};

const struct fuzz_target fuzz_target_topo = {
	"topo", topo_dict, NULL, run_topo, NULL,
};

static const char *const plan_dict[] = {
	"\"v\"", "\"id\"", "\"quorum\"", "\"n\"", "\"members\"", "\"uid\"", "\"pod\"",
	"\"node\"", "\"gpus\"", "1", "2", "0", "-1", "1e30", "100001", "\"0,1,2,3\"", "\"63\"",
	"\"64\"", "null", "[]", "{}", "\"\\u0000\"", NULL,
};

const struct fuzz_target fuzz_target_plan = {
	"plan", plan_dict, NULL, run_plan, NULL,
};
