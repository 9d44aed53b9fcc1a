/* Parsing Kubernetes Node and Pod JSON into troupe's compact records.
 *
 * Each record is a single allocation: the struct, then its arrays, then its
 * strings. Sizes are summed in a first pass and filled in a second, so a node
 * costs one malloc and one cache-friendly block (the per-node memory budget is
 * a few hundred bytes plus its labels).
 */
#include "cache/cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/quantity.h"
#include "common/util.h"

#define TROUPE_GPU_IDS_ANNOTATION "troupe.io/gpu-ids"
#define TROUPE_TOPOLOGY_ANNOTATION "troupe.io/gpu-topology"
#define TROUPE_UNHEALTHY_ANNOTATION "troupe.io/gpu-unhealthy"
#define TROUPE_POLICY_ANNOTATION "troupe.io/topology"
enum { MAX_TOPOLOGY_TEXT = 64 * 1024 };

/* Bump allocator over the block being filled. */
struct blk {
	char *p;
	char *end;
};

static void *blk_take(struct blk *b, size_t n, size_t align)
{
	uintptr_t at = ((uintptr_t)b->p + align - 1) & ~(uintptr_t)(align - 1);
	char *r = (char *)at;

	b->p = r + n;
	return r;
}

static const char *blk_str(struct blk *b, const char *s)
{
	size_t n;
	char *d;

	if (!s)
		return NULL;
	n = strlen(s) + 1;
	d = blk_take(b, n, 1);
	memcpy(d, s, n);
	return d;
}

static size_t str_size(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

static int kv_cmp(const void *a, const void *b)
{
	return strcmp(((const struct cache_kv *)a)->key, ((const struct cache_kv *)b)->key);
}

/* ---- Nodes -------------------------------------------------------------- */

static bool node_is_ready(const cJSON *status)
{
	const cJSON *conds = cJSON_GetObjectItemCaseSensitive(status, "conditions");
	const cJSON *c;

	cJSON_ArrayForEach(c, conds) {
		const char *type = json_str(c, "type");
		const char *st = json_str(c, "status");

		if (type && strcmp(type, "Ready") == 0)
			return st && strcmp(st, "True") == 0;
	}
	return false;
}

/* A whole count from a ResourceList entry; -1 when absent or malformed. */
static int64_t resource_count(const cJSON *list, const char *name)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(list, name);
	int64_t milli;

	if (!it || json_quantity_milli(it, &milli) < 0 || milli < 0)
		return -1;
	return milli / 1000;
}

static int64_t resource_milli(const cJSON *list, const char *name)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(list, name);
	int64_t milli;

	if (!it || json_quantity_milli(it, &milli) < 0 || milli < 0)
		return 0;
	return milli;
}

struct cache_node *cache_node_parse(const cJSON *obj, const struct cache_opts *opts,
				    char *err, size_t errlen)
{
	const cJSON *meta = json_obj(obj, "metadata");
	const cJSON *spec = json_obj(obj, "spec");
	const cJSON *status = json_obj(obj, "status");
	const cJSON *labels = json_obj(meta, "labels");
	const cJSON *taints = cJSON_GetObjectItemCaseSensitive(spec, "taints");
	const cJSON *alloc = json_obj(status, "allocatable");
	const cJSON *cap = json_obj(status, "capacity");
	const char *name = json_str(meta, "name");
	const char *uuids = json_str(json_obj(meta, "annotations"), "troupe.io/gpu-uuids");
	const cJSON *it;
	struct cache_node *n = NULL;
	struct cache_kv *kv;
	struct cache_taint *tt;
	size_t size, nl = 0, nt = 0;
	struct blk b;

	if (!name || !name[0] || strlen(name) > 253) {
		snprintf(err, errlen, "node has no valid metadata.name");
		return NULL;
	}
	if (uuids && strlen(uuids) > 64 * 64)
		uuids = NULL;
	size = sizeof(*n) + str_size(name) + str_size(uuids) + 16;
	cJSON_ArrayForEach(it, labels) {
		if (!cJSON_IsString(it) || !it->string)
			continue;
		size += sizeof(struct cache_kv) + str_size(it->string) + str_size(it->valuestring);
		nl++;
	}
	cJSON_ArrayForEach(it, json_list(taints)) {
		size += sizeof(struct cache_taint) + str_size(json_str(it, "key")) +
			str_size(json_str(it, "value")) + str_size(json_str(it, "effect"));
		nt++;
	}
	if (nl > UINT16_MAX || nt > UINT16_MAX) {
		snprintf(err, errlen, "node %s has too many labels or taints", name);
		return NULL;
	}
	/* 64-byte aligned: the fields a fit check reads share one cache line. */
	size = (size + 63) & ~(size_t)63;
	n = aligned_alloc(64, size);
	if (!n) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memset(n, 0, size);
	b.p = (char *)(n + 1);
	b.end = (char *)n + size;
	kv = blk_take(&b, nl * sizeof(*kv), _Alignof(struct cache_kv));
	tt = blk_take(&b, nt * sizeof(*tt), _Alignof(struct cache_taint));
	n->name = blk_str(&b, name);
	n->gpu_uuids = blk_str(&b, uuids);
	nl = 0;
	cJSON_ArrayForEach(it, labels) {
		if (!cJSON_IsString(it) || !it->string)
			continue;
		kv[nl].key = blk_str(&b, it->string);
		kv[nl].value = blk_str(&b, it->valuestring);
		nl++;
	}
	qsort(kv, nl, sizeof(*kv), kv_cmp);
	nt = 0;
	cJSON_ArrayForEach(it, json_list(taints)) {
		tt[nt].key = blk_str(&b, json_str(it, "key"));
		tt[nt].value = blk_str(&b, json_str(it, "value"));
		tt[nt].effect = blk_str(&b, json_str(it, "effect"));
		nt++;
	}
	n->labels = kv;
	n->n_labels = (uint16_t)nl;
	n->taints = tt;
	n->n_taints = (uint16_t)nt;

	n->gpu_resource = -1;
	for (unsigned i = 0; i < opts->n_gpu_resources; i++) {
		int64_t c = resource_count(cap, opts->gpu_resources[i]);
		int64_t a = resource_count(alloc, opts->gpu_resources[i]);

		if (c <= 0 && a <= 0)
			continue;
		if (a < 0)
			a = c;  /* no allocatable reported: all devices usable */
		if (c < a)
			c = a;
		if (c > CACHE_MAX_GPUS) {
			log_warn("cache", "node %s reports %lld %s; troupe tracks the first %d",
				 name, (long long)c, opts->gpu_resources[i], CACHE_MAX_GPUS);
			c = CACHE_MAX_GPUS;
		}
		if (a > c)
			a = c;
		n->gpu_resource = (int)i;
		n->gpu_capacity = (uint32_t)c;
		n->gpu_allocatable = (uint32_t)a;
		break;
	}
	n->cpu_milli = resource_milli(alloc, "cpu");
	n->mem_bytes = (resource_milli(alloc, "memory") + 999) / 1000;
	n->ready = node_is_ready(status);
	n->unschedulable = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(spec, "unschedulable"));
	{
		const cJSON *ann = json_obj(meta, "annotations");
		const char *topo = json_str(ann, TROUPE_TOPOLOGY_ANNOTATION);
		const char *bad = json_str(ann, TROUPE_UNHEALTHY_ANNOTATION);

		/* Kept outside the record's block: the cache drops it once the
		 * topology is derived, so it costs no memory per node. */
		if (topo && strlen(topo) <= MAX_TOPOLOGY_TEXT)
			n->topology_text = strdup(topo);
		else if (topo)
			log_warn("cache", "node %s: annotation %s is larger than %d bytes; ignored",
				 name, TROUPE_TOPOLOGY_ANNOTATION, MAX_TOPOLOGY_TEXT);
		if (bad && *bad && cache_devices_parse(bad, &n->unhealthy) < 0) {
			log_warn("cache", "node %s: annotation %s=\"%s\" is not a list of device "
				 "indices; ignored", name, TROUPE_UNHEALTHY_ANNOTATION, bad);
			n->unhealthy = 0;
		}
	}
	return n;
}

void cache_node_free(struct cache_node *node)
{
	if (node)
		free((char *)node->topology_text);
	free(node);
}

const char *cache_node_label(const struct cache_node *node, const char *key)
{
	size_t lo = 0, hi = node->n_labels;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(node->labels[mid].key, key);

		if (c == 0)
			return node->labels[mid].value;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ---- Demand --------------------------------------------------------------- */

/* Resources tracked per container: the managed GPU names, then cpu, memory. */
enum { R_MAX = CACHE_MAX_GPU_RESOURCES + 2 };

struct rvec {
	int64_t v[R_MAX];
};

static void rvec_add(struct rvec *a, const struct rvec *b, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		a->v[i] = a->v[i] > INT64_MAX - b->v[i] ? INT64_MAX : a->v[i] + b->v[i];
}

static void rvec_max(struct rvec *a, const struct rvec *b, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (b->v[i] > a->v[i])
			a->v[i] = b->v[i];
}

/* Read one container's requests. GPU rules (validation.go): whole numbers,
 * a request needs a limit, and both must be equal. */
static int container_demand(const cJSON *ctr, const struct cache_opts *opts, struct rvec *out,
			    char *err, size_t errlen)
{
	const cJSON *res = json_obj(ctr, "resources");
	const cJSON *lim = json_obj(res, "limits");
	const cJSON *req = json_obj(res, "requests");
	const char *cname = json_str(ctr, "name");
	unsigned ng = opts->n_gpu_resources;

	if (!cname)
		cname = "?";
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < ng; i++) {
		const char *rn = opts->gpu_resources[i];
		const cJSON *l = cJSON_GetObjectItemCaseSensitive(lim, rn);
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(req, rn);
		int64_t lm = 0, rm = 0;

		if (!l && !r)
			continue;
		if (r && !l) {
			snprintf(err, errlen,
				 "container %s requests %s without a limit; GPUs cannot be "
				 "overcommitted, set resources.limits[%s]",
				 cname, rn, rn);
			return -EINVAL;
		}
		if (json_quantity_milli(l, &lm) < 0 || lm < 0 || lm % 1000 != 0 ||
		    (r && (json_quantity_milli(r, &rm) < 0 || rm < 0 || rm % 1000 != 0))) {
			snprintf(err, errlen, "container %s: %s must be a whole, non-negative number",
				 cname, rn);
			return -EINVAL;
		}
		if (r && rm != lm) {
			snprintf(err, errlen,
				 "container %s: %s request (%lld) must equal its limit (%lld)",
				 cname, rn, (long long)(rm / 1000), (long long)(lm / 1000));
			return -EINVAL;
		}
		out->v[i] = lm / 1000;
	}
	/* cpu and memory: the request, or the limit when only that is set. */
	for (unsigned k = 0; k < 2; k++) {
		const char *rn = k == 0 ? "cpu" : "memory";
		const cJSON *q = cJSON_GetObjectItemCaseSensitive(req, rn);
		int64_t m = 0;

		if (!q)
			q = cJSON_GetObjectItemCaseSensitive(lim, rn);
		if (q && (json_quantity_milli(q, &m) < 0 || m < 0)) {
			snprintf(err, errlen, "container %s: invalid %s quantity", cname, rn);
			return -EINVAL;
		}
		out->v[ng + k] = k == 0 ? m : (m + 999) / 1000;
	}
	return 0;
}

int cache_demand_compute(const cJSON *spec, const struct cache_opts *opts,
			 struct cache_demand *out, char *err, size_t errlen)
{
	const cJSON *ctrs = cJSON_GetObjectItemCaseSensitive(spec, "containers");
	const cJSON *inits = cJSON_GetObjectItemCaseSensitive(spec, "initContainers");
	const cJSON *overhead = json_obj(spec, "overhead");
	unsigned ng = opts->n_gpu_resources, nr = ng + 2;
	struct rvec sum = { { 0 } }, init_max = { { 0 } }, sidecars = { { 0 } }, one;
	const cJSON *c;
	int found = -1;

	memset(out, 0, sizeof(*out));
	out->gpu_resource = -1;
	if (ctrs && !cJSON_IsArray(ctrs)) {
		snprintf(err, errlen, "spec.containers is not a list");
		return -EINVAL;
	}
	if (inits && !cJSON_IsArray(inits)) {
		snprintf(err, errlen, "spec.initContainers is not a list");
		return -EINVAL;
	}
	cJSON_ArrayForEach(c, ctrs) {
		if (container_demand(c, opts, &one, err, errlen) < 0)
			return -EINVAL;
		rvec_add(&sum, &one, nr);
	}
	/* Init containers run one at a time, each beside the sidecars (init
	 * containers with restartPolicy Always) started before it; sidecars keep
	 * running beside the app containers (component-helpers PodRequests). */
	cJSON_ArrayForEach(c, inits) {
		const char *rp = json_str(c, "restartPolicy");

		if (container_demand(c, opts, &one, err, errlen) < 0)
			return -EINVAL;
		if (rp && strcmp(rp, "Always") == 0) {
			rvec_add(&sum, &one, nr);
			rvec_add(&sidecars, &one, nr);
			one = sidecars;
		} else {
			rvec_add(&one, &sidecars, nr);
		}
		rvec_max(&init_max, &one, nr);
	}
	rvec_max(&sum, &init_max, nr);
	if (overhead) {
		for (unsigned i = 0; i < nr; i++) {
			const char *rn = i < ng ? opts->gpu_resources[i] : i == ng ? "cpu" : "memory";
			const cJSON *q = cJSON_GetObjectItemCaseSensitive(overhead, rn);
			int64_t m;

			if (!q)
				continue;
			if (json_quantity_milli(q, &m) < 0 || m < 0) {
				snprintf(err, errlen, "spec.overhead: invalid %s quantity", rn);
				return -EINVAL;
			}
			one.v[0] = i < ng ? m / 1000 : i == ng ? m : (m + 999) / 1000;
			sum.v[i] = sum.v[i] > INT64_MAX - one.v[0] ? INT64_MAX : sum.v[i] + one.v[0];
		}
	}
	for (unsigned i = 0; i < ng; i++) {
		if (sum.v[i] == 0)
			continue;
		if (found >= 0) {
			snprintf(err, errlen, "pod asks for both %s and %s; troupe places one GPU kind "
				 "per pod", opts->gpu_resources[found], opts->gpu_resources[i]);
			return -EINVAL;
		}
		if (sum.v[i] > CACHE_MAX_GPUS) {
			snprintf(err, errlen, "pod asks for %lld %s; no node offers more than %d",
				 (long long)sum.v[i], opts->gpu_resources[i], CACHE_MAX_GPUS);
			return -EINVAL;
		}
		found = (int)i;
	}
	if (found >= 0) {
		out->gpu_resource = found;
		out->gpus = (uint32_t)sum.v[found];
	}
	out->cpu_milli = sum.v[ng];
	out->mem_bytes = sum.v[ng + 1];
	return 0;
}

/* ---- Devices ---------------------------------------------------------- */

bool cache_node_uuids(const struct cache_node *node, uint64_t mask, char *buf, size_t len)
{
	const char *p = node->gpu_uuids;
	size_t at = 0;
	unsigned idx = 0;

	if (len)
		buf[0] = '\0';
	if (!p || !*p || !mask)
		return false;
	while (*p && mask) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (idx < 64 && (mask & (1ULL << idx))) {
			if (n == 0 || at + n + 2 > len)
				goto fail;
			if (at)
				buf[at++] = ',';
			memcpy(buf + at, p, n);
			at += n;
			buf[at] = '\0';
			mask &= ~(1ULL << idx);
		}
		idx++;
		if (!end)
			break;
		p = end + 1;
	}
	if (!mask)
		return true;
fail:
	if (len)
		buf[0] = '\0';
	return false;
}

int cache_devices_parse(const char *s, uint64_t *mask)
{
	uint64_t m = 0;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	for (;;) {
		unsigned v = 0;
		int digits = 0;

		while (*p == ' ')
			p++;
		for (; *p >= '0' && *p <= '9'; p++, digits++) {
			v = v * 10 + (unsigned)(*p - '0');
			if (v >= CACHE_MAX_GPUS)
				return -EINVAL;
		}
		while (*p == ' ')
			p++;
		if (!digits || (m & (1ULL << v)))
			return -EINVAL;
		m |= 1ULL << v;
		if (*p == '\0')
			break;
		if (*p++ != ',')
			return -EINVAL;
	}
	*mask = m;
	return 0;
}

void cache_devices_format(uint64_t mask, char *buf, size_t len)
{
	size_t at = 0;

	if (len)
		buf[0] = '\0';
	for (unsigned i = 0; i < CACHE_MAX_GPUS && mask; i++) {
		int n;

		if (!(mask & (1ULL << i)))
			continue;
		mask &= ~(1ULL << i);
		n = snprintf(buf + at, len > at ? len - at : 0, "%s%u", at ? "," : "", i);
		if (n < 0 || (size_t)n >= len - at)
			return;
		at += (size_t)n;
	}
}

/* Check a namespaced object's name and namespace ("default" when absent).
 * Returns false with <err> set when they are unusable. */
static bool name_ns_ok(const char *what, const char *name, const char **ns, char *err,
		       size_t errlen)
{
	if (!name || !name[0] || strlen(name) > 253) {
		snprintf(err, errlen, "%s has no valid metadata.name", what);
		return false;
	}
	if (!*ns || !(*ns)[0])
		*ns = "default";
	if (strlen(*ns) > 63) {
		snprintf(err, errlen, "%s %s has an invalid namespace", what, name);
		return false;
	}
	return true;
}

/* ---- Pods ------------------------------------------------------------- */

static const struct {
	const char *field;      /* "labels" or "annotations" */
	const char *key;
} group_keys[] = {
	{ "labels", "scheduling.x-k8s.io/pod-group" },
	{ "labels", "scheduling.sigs.k8s.io/pod-group" },
	{ "labels", "pod-group.scheduling.sigs.k8s.io" },
	{ "labels", "pod-group.scheduling.sigs.k8s.io/name" },
	{ "annotations", "scheduling.k8s.io/group-name" },
	{ "labels", "kueue.x-k8s.io/pod-group-name" },
}, queue_keys[] = {
	{ "labels", "troupe.io/queue" },
	{ "labels", "kueue.x-k8s.io/queue-name" },
	{ "labels", "kai.scheduler/queue" },
	{ "labels", "scheduling.volcano.sh/queue-name" },
};

static const char *first_key(const cJSON *pod, const __typeof__(group_keys[0]) *keys, size_t n)
{
	const cJSON *meta = json_obj(pod, "metadata");

	for (size_t i = 0; i < n; i++) {
		const char *v = json_str(json_obj(meta, keys[i].field), keys[i].key);

		if (v && v[0])
			return v;
	}
	return NULL;
}

const char *cache_pod_group_name(const cJSON *pod)
{
	const char *v = json_str(json_obj(json_obj(pod, "spec"), "schedulingGroup"),
				 "podGroupName");

	if (v && v[0])
		return v;
	return first_key(pod, group_keys, sizeof(group_keys) / sizeof(group_keys[0]));
}

const char *cache_pod_queue_name(const cJSON *pod)
{
	return first_key(pod, queue_keys, sizeof(queue_keys) / sizeof(queue_keys[0]));
}

static enum cache_pod_phase phase_parse(const char *s)
{
	if (!s || strcmp(s, "Pending") == 0)
		return CACHE_POD_PENDING;
	if (strcmp(s, "Running") == 0)
		return CACHE_POD_RUNNING;
	if (strcmp(s, "Succeeded") == 0)
		return CACHE_POD_SUCCEEDED;
	if (strcmp(s, "Failed") == 0)
		return CACHE_POD_FAILED;
	return CACHE_POD_UNKNOWN;
}

struct cache_pod *cache_pod_parse(const cJSON *obj, const struct cache_opts *opts, char *err,
				  size_t errlen)
{
	const cJSON *meta = json_obj(obj, "metadata");
	const cJSON *spec = json_obj(obj, "spec");
	const cJSON *status = json_obj(obj, "status");
	const cJSON *ann = json_obj(meta, "annotations");
	const char *name = json_str(meta, "name");
	const char *ns = json_str(meta, "namespace");
	const char *uid = json_str(meta, "uid");
	const char *node = json_str(spec, "nodeName");
	const char *ids = json_str(ann, TROUPE_GPU_IDS_ANNOTATION);
	const char *topo = json_str(ann, TROUPE_POLICY_ANNOTATION);
	const char *gtopo = json_str(ann, "troupe.io/gang-topology");
	const char *group = cache_pod_group_name(obj);
	const char *queue = cache_pod_queue_name(obj);
	char derr[CACHE_ERR_LEN] = "";
	char synth_uid[320];
	struct cache_demand d;
	struct cache_pod *p;
	bool bad_demand;
	size_t size;
	struct blk b;

	if (!name_ns_ok("pod", name, &ns, err, errlen))
		return NULL;
	if (!uid || !uid[0]) {
		/* Hand-written snapshots may omit UIDs; the name is unique within the
		 * snapshot, so use it. */
		snprintf(synth_uid, sizeof(synth_uid), "%s/%s", ns, name);
		uid = synth_uid;
	}
	if (strlen(uid) > 128) {
		snprintf(err, errlen, "pod %s/%s has an invalid uid", ns, name);
		return NULL;
	}
	if (node && !node[0])
		node = NULL;
	if (node && strlen(node) > 253) {
		snprintf(err, errlen, "pod %s/%s has an invalid spec.nodeName", ns, name);
		return NULL;
	}
	bad_demand = !spec || cache_demand_compute(spec, opts, &d, derr, sizeof(derr)) < 0;
	if (!spec)
		snprintf(derr, sizeof(derr), "pod has no spec");
	if (group && strlen(group) > 253)
		group = NULL;
	if (topo && strlen(topo) > 63)
		topo = "invalid: too long";     /* placement rejects it with a message */
	if (gtopo && strlen(gtopo) > 253)
		gtopo = "invalid: too long";
	if (queue && strlen(queue) > 253)
		queue = NULL;
	size = sizeof(*p) + str_size(uid) + str_size(ns) + str_size(name) + str_size(node) +
	       (bad_demand ? str_size(derr) : 0) + str_size(group) + str_size(queue ? queue : ns) +
	       str_size(topo) + str_size(gtopo);
	p = calloc(1, size);
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	b.p = (char *)(p + 1);
	b.end = (char *)p + size;
	p->uid = blk_str(&b, uid);
	p->ns = blk_str(&b, ns);
	p->name = blk_str(&b, name);
	p->node = blk_str(&b, node);
	p->group = blk_str(&b, group);
	{
		/* The quorum a pod may carry, first found (the PodGroup's minMember,
		 * when one exists, wins over all of these). */
		static const struct {
			const char *field, *key;
		} quorum_keys[] = {
			{ "labels", "pod-group.scheduling.sigs.k8s.io/min-available" },
			{ "annotations", "pod-group.scheduling.sigs.k8s.io/min-available" },
			{ "annotations", "kueue.x-k8s.io/pod-group-total-count" },
			{ "annotations", "troupe.io/min-member" },
		};
		const cJSON *prio = cJSON_GetObjectItemCaseSensitive(spec, "priority");

		for (size_t i = 0; i < sizeof(quorum_keys) / sizeof(quorum_keys[0]); i++) {
			const char *v = json_str(json_obj(meta, quorum_keys[i].field),
						 quorum_keys[i].key);
			char *end;
			unsigned long n;

			if (!v)
				continue;
			n = strtoul(v, &end, 10);
			if (*v && !*end && n > 0 && n <= 100000) {
				p->min_member = (uint32_t)n;
				break;
			}
		}
		if (cJSON_IsNumber(prio) && prio->valuedouble >= INT32_MIN &&
		    prio->valuedouble <= INT32_MAX)
			p->priority = (int32_t)prio->valuedouble;
	}
	p->topology = blk_str(&b, topo);
	p->gang_topology = blk_str(&b, gtopo);
	p->queue = blk_str(&b, queue ? queue : ns);
	p->phase = phase_parse(json_str(status, "phase"));
	p->deleting = cJSON_GetObjectItemCaseSensitive(meta, "deletionTimestamp") != NULL &&
		      !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(meta, "deletionTimestamp"));
	if (bad_demand) {
		memset(&p->demand, 0, sizeof(p->demand));
		p->demand.gpu_resource = -1;
		p->demand_error = blk_str(&b, derr);
	} else {
		p->demand = d;
	}
	if (ids && cache_devices_parse(ids, &p->devices) == 0 &&
	    (uint32_t)__builtin_popcountll(p->devices) == p->demand.gpus)
		p->has_devices = true;
	else
		p->devices = 0;
	return p;
}

void cache_pod_free(struct cache_pod *pod)
{
	free(pod);
}

/* ---- Pod groups ------------------------------------------------------- */

struct cache_podgroup *cache_podgroup_parse(const cJSON *obj, const struct cache_opts *opts,
					    char *err, size_t errlen)
{
	const cJSON *meta = json_obj(obj, "metadata");
	const cJSON *spec = json_obj(obj, "spec");
	const cJSON *minres = json_obj(spec, "minResources");
	const cJSON *mm = cJSON_GetObjectItemCaseSensitive(spec, "minMember");
	const cJSON *to = cJSON_GetObjectItemCaseSensitive(spec, "scheduleTimeoutSeconds");
	const char *name = json_str(meta, "name");
	const char *ns = json_str(meta, "namespace");
	struct cache_podgroup *pg;
	size_t size;
	struct blk b;

	if (!name_ns_ok("pod group", name, &ns, err, errlen))
		return NULL;
	size = sizeof(*pg) + str_size(ns) + str_size(name);
	pg = calloc(1, size);
	if (!pg) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	b.p = (char *)(pg + 1);
	b.end = (char *)pg + size;
	pg->ns = blk_str(&b, ns);
	pg->name = blk_str(&b, name);
	if (cJSON_IsNumber(mm) && mm->valuedouble >= 0 && mm->valuedouble <= INT32_MAX)
		pg->min_member = (int32_t)mm->valuedouble;
	if (cJSON_IsNumber(to) && to->valuedouble >= 0 && to->valuedouble <= INT32_MAX)
		pg->timeout_s = (int32_t)to->valuedouble;
	for (unsigned i = 0; i < opts->n_gpu_resources; i++) {
		int64_t n = resource_count(minres, opts->gpu_resources[i]);

		if (n > 0 && n <= UINT32_MAX)
			pg->min_gpus += (uint32_t)n;
	}
	pg->min_cpu_milli = resource_milli(minres, "cpu");
	pg->min_mem_bytes = (resource_milli(minres, "memory") + 999) / 1000;
	return pg;
}

void cache_podgroup_free(struct cache_podgroup *pg)
{
	free(pg);
}
