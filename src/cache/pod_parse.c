/* Parsing a Kubernetes Pod into troupe's record (one allocation laid out as
 * parse.h says): identity, node, phase, deletion, the devices troupe bound it
 * to (troupe.io/gpu-ids), its pod group, queue and quorum as the gang
 * schedulers name them, and its demand computed as Kubernetes computes it;
 * and a scheduling.x-k8s.io PodGroup into its spec.
 */
#include "cache/cache.h"
#include "cache/parse.h"
#include "cache/podgroup_status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/quantity.h"
#include "common/util.h"

#define TROUPE_GPU_IDS_ANNOTATION "troupe.io/gpu-ids"
/* Written by troupe-node from the kubelet's PodResources: the devices the
 * containers really got. */
#define TROUPE_GPU_IDS_ACTUAL_ANNOTATION "troupe.io/gpu-ids-actual"
#define TROUPE_POLICY_ANNOTATION "troupe.io/topology"

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
		const cJSON *l = json_get(lim, rn);
		const cJSON *r = json_get(req, rn);
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
		const cJSON *q = json_get(req, rn);
		int64_t m = 0;

		if (!q)
			q = json_get(lim, rn);
		if (q && (json_quantity_milli(q, &m) < 0 || m < 0)) {
			snprintf(err, errlen, "container %s: invalid %s quantity", cname, rn);
			return -EINVAL;
		}
		out->v[ng + k] = k == 0 ? m : milli_to_units_ceil(m);
	}
	return 0;
}

int cache_demand_compute(const cJSON *spec, const struct cache_opts *opts,
			 struct cache_demand *out, char *err, size_t errlen)
{
	const cJSON *ctrs = json_get(spec, "containers");
	const cJSON *inits = json_get(spec, "initContainers");
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
			const cJSON *q = json_get(overhead, rn);
			int64_t m;

			if (!q)
				continue;
			if (json_quantity_milli(q, &m) < 0 || m < 0) {
				snprintf(err, errlen, "spec.overhead: invalid %s quantity", rn);
				return -EINVAL;
			}
			one.v[0] = i < ng ? m / 1000 : i == ng ? m : milli_to_units_ceil(m);
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



/* An optional integer field: absent or null leaves <out> as it is; else it must
 * be a whole number in [min, max] (json_int_in_range). */
static bool json_whole_or_absent(const cJSON *it, int64_t min, int64_t max, int64_t *out)
{
	return !it || cJSON_IsNull(it) || json_int_in_range(it, min, max, out) == 0;
}

/* Check a namespaced object's name and namespace ("default" when absent).
 * Returns false with <err> set when they are unusable. */
static bool name_ns_ok(const char *what, const char *name, const char **ns, char *err,
		       size_t errlen)
{
	if (!name || !name[0] || strlen(name) > K8S_NAME_MAX) {
		snprintf(err, errlen, "%s has no valid metadata.name", what);
		return false;
	}
	if (!*ns || !(*ns)[0])
		*ns = "default";
	if (strlen(*ns) > K8S_NAMESPACE_MAX) {
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
	{ "annotations", "scheduling.volcano.sh/group-name" },
	{ "annotations", "pod-group-name" },
	{ "labels", "kueue.x-k8s.io/pod-group-name" },
}, queue_keys[] = {
	{ "labels", "troupe.io/queue" },
	{ "labels", "kueue.x-k8s.io/queue-name" },
	{ "labels", "kai.scheduler/queue" },
	{ "labels", "scheduling.volcano.sh/queue-name" },
	{ "annotations", "scheduling.volcano.sh/queue-name" },
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
	const char *actual = json_str(ann, TROUPE_GPU_IDS_ACTUAL_ANNOTATION);
	uint64_t mask = 0;
	const char *topo = json_str(ann, TROUPE_POLICY_ANNOTATION);
	const char *gtopo = json_str(ann, "troupe.io/gang-topology");
	const char *pinned = json_str(json_obj(spec, "nodeSelector"), "kubernetes.io/hostname");
	const char *group = cache_pod_group_name(obj);
	const char *queue = cache_pod_queue_name(obj);
	const char *slots;
	char derr[CACHE_ERR_LEN] = "";
	char synth_uid[K8S_KEY_BUF];          /* "ns/name" */
	struct cache_demand d;
	struct cache_pod *p;
	int64_t priority = 0;
	bool bad_demand;
	size_t size;
	struct blk b;

	if (!name_ns_ok("pod", name, &ns, err, errlen))
		return NULL;
	if (!json_whole_or_absent(json_get(spec, "priority"), INT32_MIN, INT32_MAX, &priority)) {
		snprintf(err, errlen, "pod %s/%s: spec.priority must be a whole number from %d to %d",
			 ns, name, INT32_MIN, INT32_MAX);
		return NULL;
	}
	if (!uid || !uid[0]) {
		/* Hand-written snapshots may omit UIDs; the name is unique within the
		 * snapshot, so use it. */
		snprintf(synth_uid, sizeof(synth_uid), "%s/%s", ns, name);
		uid = synth_uid;
	}
	if (strlen(uid) > K8S_UID_MAX) {
		snprintf(err, errlen, "pod %s/%s has an invalid uid", ns, name);
		return NULL;
	}
	if (node && !node[0])
		node = NULL;
	if (node && strlen(node) > K8S_NAME_MAX) {
		snprintf(err, errlen, "pod %s/%s has an invalid spec.nodeName", ns, name);
		return NULL;
	}
	bad_demand = !spec || cache_demand_compute(spec, opts, &d, derr, sizeof(derr)) < 0;
	if (!spec)
		snprintf(derr, sizeof(derr), "pod has no spec");
	if (group && strlen(group) > K8S_NAME_MAX)
		group = NULL;
	if (topo && strlen(topo) > CACHE_TOPOLOGY_BUF - 1)
		topo = "invalid: too long";     /* placement rejects it with a message */
	if (gtopo && strlen(gtopo) > K8S_NAME_MAX)
		gtopo = "invalid: too long";
	if (queue && strlen(queue) > K8S_NAME_MAX)
		queue = NULL;
	if (pinned && (!*pinned || strlen(pinned) > K8S_NAME_MAX))
		pinned = NULL;
	/* Replica slots ("GPU:replica") are read against the node's record when
	 * the pod is applied; a longer list than any node's slots is no list. */
	slots = ids && strchr(ids, ':') && strlen(ids) < CACHE_DEVICES_BUF ? ids : NULL;
	size = sizeof(*p) + str_size(slots) + str_size(pinned) + str_size(uid) + str_size(ns) + str_size(name) + str_size(node) +
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
		p->priority = (int32_t)priority;
	}
	p->topology = blk_str(&b, topo);
	p->gang_topology = blk_str(&b, gtopo);
	p->pinned = blk_str(&b, pinned);
	{
		/* Only a bound member's plan matters (a Binding wrote it); out of
		 * memory, the pod simply shows none. */
		const char *plan = json_str(ann, CACHE_GANG_PLAN_ANNOTATION);

		if (plan && node && group && strlen(plan) <= CACHE_GANG_PLAN_MAX)
			p->gang_plan = strdup(plan);
	}
	p->queue = blk_str(&b, queue ? queue : ns);
	p->phase = phase_parse(json_str(status, "phase"));
	p->deleting = json_get(meta, "deletionTimestamp") != NULL &&
		      !cJSON_IsNull(json_get(meta, "deletionTimestamp"));
	p->gated = cJSON_IsArray(json_get(spec, "schedulingGates")) &&
		   cJSON_GetArraySize(json_get(spec, "schedulingGates")) > 0;
	if (bad_demand) {
		memset(&p->demand, 0, sizeof(p->demand));
		p->demand.gpu_resource = -1;
		p->demand_error = blk_str(&b, derr);
	} else {
		p->demand = d;
	}
	p->slot_ids = node && p->demand.gpus ? blk_str(&b, slots) : NULL;
	if (ids && cache_devices_parse(ids, &p->devices) == 0 &&
	    (uint32_t)__builtin_popcountll(p->devices) == p->demand.gpus)
		p->has_devices = true;
	else
		p->devices = 0;
	/* The read-back, as valid as troupe.io/gpu-ids must be, wins: the kubelet
	 * gave the containers these, whatever troupe chose. */
	if (actual && cache_devices_parse(actual, &mask) == 0 &&
	    (uint32_t)__builtin_popcountll(mask) == p->demand.gpus && mask) {
		p->planned = p->has_devices ? p->devices : 0;
		p->devices = mask;
		p->has_devices = true;
		p->devices_actual = true;
	}
	return p;
}

void cache_pod_free(struct cache_pod *pod)
{
	if (pod)
		free(pod->gang_plan);
	free(pod);
}

/* ---- Pod groups ------------------------------------------------------- */

const struct cache_pg_api_info cache_pg_apis[CACHE_PG_API_COUNT] = {
	[CACHE_PG_XK8S] = { "scheduling.x-k8s.io/v1alpha1",
			    "/apis/scheduling.x-k8s.io/v1alpha1/podgroups", "scheduler-plugins" },
	[CACHE_PG_UPSTREAM] = { "scheduling.k8s.io/v1beta1",
				"/apis/scheduling.k8s.io/v1beta1/podgroups", "Kubernetes" },
	[CACHE_PG_VOLCANO] = { "scheduling.volcano.sh/v1beta1",
			       "/apis/scheduling.volcano.sh/v1beta1/podgroups", "Volcano" },
	[CACHE_PG_KAI] = { "scheduling.run.ai/v2alpha2",
			   "/apis/scheduling.run.ai/v2alpha2/podgroups", "KAI Scheduler" },
};

/* Upstream's first: kube-scheduler's own GangScheduling plugin gates pods by
 * it, so troupe holds the same quorum; then the scheduler-plugins API troupe
 * has always read (and writes the status of); then Volcano's and KAI's. */
const enum cache_pg_api cache_pg_precedence[CACHE_PG_API_COUNT] = {
	CACHE_PG_UPSTREAM, CACHE_PG_XK8S, CACHE_PG_VOLCANO, CACHE_PG_KAI,
};

/* A count field of a PodGroup: a whole number from 0 to INT32_MAX, else
 * taken as absent (the gang then takes its quorum from its pods) with a
 * warning: dropping the whole PodGroup would lose its other fields too. */
static int64_t pg_count(const cJSON *it, const char *ns, const char *name, const char *field)
{
	int64_t v = 0;

	if (!json_whole_or_absent(it, 0, INT32_MAX, &v)) {
		log_warn("cache", "pod group %s/%s: %s is not a whole number from 0 to %d; taken "
			 "as absent", ns, name, field, INT32_MAX);
		return 0;
	}
	return v;
}

/* The quorum a PodGroup of <api> names (0: none). */
static int64_t pg_quorum(const cJSON *spec, enum cache_pg_api api, const char *ns,
			 const char *name)
{
	const cJSON *policy, *tasks, *it;
	int64_t min, sum = 0;

	switch (api) {
	case CACHE_PG_UPSTREAM:
		/* Exactly one of basic and gang: basic schedules each pod alone. */
		policy = json_obj(spec, "schedulingPolicy");
		if (json_obj(policy, "gang"))
			return pg_count(json_get(json_obj(policy, "gang"), "minCount"), ns, name,
					"spec.schedulingPolicy.gang.minCount");
		return json_obj(policy, "basic") ? 1 : 0;
	case CACHE_PG_VOLCANO:
		/* minTaskMember asks a least count per task (the pods' annotation
		 * volcano.sh/task-spec): troupe holds the gang for their sum when
		 * that is more than minMember, not for each task's own count. */
		min = pg_count(json_get(spec, "minMember"), ns, name, "spec.minMember");
		tasks = json_obj(spec, "minTaskMember");
		cJSON_ArrayForEach(it, tasks) {
			sum += pg_count(it, ns, name, "a spec.minTaskMember count");
			if (sum > INT32_MAX)
				sum = INT32_MAX;
		}
		return sum > min ? sum : min;
	case CACHE_PG_XK8S:
	case CACHE_PG_KAI:
	default:
		/* KAI's subGroups (each with its own minMember) are not held
		 * apart: the group's minMember is the quorum of the whole. */
		return pg_count(json_get(spec, "minMember"), ns, name, "spec.minMember");
	}
}

struct cache_podgroup *cache_podgroup_parse_api(const cJSON *obj, enum cache_pg_api api,
						const struct cache_opts *opts, char *err,
						size_t errlen)
{
	const cJSON *meta = json_obj(obj, "metadata");
	const cJSON *spec = json_obj(obj, "spec");
	const cJSON *minres = json_obj(spec, "minResources");
	const char *name = json_str(meta, "name");
	const char *ns = json_str(meta, "namespace");
	const char *queue = NULL;
	const char *uid;
	struct cache_podgroup *pg;
	int64_t min_member, timeout_s = 0;
	size_t size;
	struct blk b;

	if ((unsigned)api >= CACHE_PG_API_COUNT) {
		snprintf(err, errlen, "not a PodGroup API troupe reads");
		return NULL;
	}
	if (!name_ns_ok("pod group", name, &ns, err, errlen))
		return NULL;
	min_member = pg_quorum(spec, api, ns, name);
	if (api == CACHE_PG_XK8S)
		timeout_s = pg_count(json_get(spec, "scheduleTimeoutSeconds"), ns, name,
				     "spec.scheduleTimeoutSeconds");
	if (api == CACHE_PG_VOLCANO || api == CACHE_PG_KAI)
		queue = json_str(spec, "queue");
	if (queue && (!queue[0] || strlen(queue) > K8S_NAME_MAX))
		queue = NULL;
	uid = json_str(meta, "uid");
	if (!uid)
		uid = "";
	size = sizeof(*pg) + str_size(ns) + str_size(name) + str_size(uid) +
	       str_size(queue ? queue : "");
	pg = calloc(1, size);
	if (!pg) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	b.p = (char *)(pg + 1);
	b.end = (char *)pg + size;
	pg->api = api;
	pg->ns = blk_str(&b, ns);
	pg->name = blk_str(&b, name);
	pg->uid = blk_str(&b, uid);
	pg->queue = blk_str(&b, queue ? queue : "");
	pg->min_member = (int32_t)min_member;
	pg->timeout_s = (int32_t)timeout_s;
	/* minResources: scheduler-plugins' and Volcano's (the same ResourceList). */
	for (unsigned i = 0; i < opts->n_gpu_resources; i++) {
		int64_t n = resource_count(minres, opts->gpu_resources[i]);

		if (n > 0)
			pg->min_gpus = n >= (int64_t)(UINT32_MAX - pg->min_gpus) ? UINT32_MAX
						: pg->min_gpus + (uint32_t)n;
	}
	pg->min_cpu_milli = resource_milli(minres, "cpu");
	pg->min_mem_bytes = milli_to_units_ceil(resource_milli(minres, "memory"));
	cache_podgroup_status_read(obj, pg);    /* for the status writer */
	return pg;
}

struct cache_podgroup *cache_podgroup_parse(const cJSON *obj, const struct cache_opts *opts,
					    char *err, size_t errlen)
{
	const char *av = json_str(obj, "apiVersion");
	size_t glen;

	if (!av || !av[0])
		return cache_podgroup_parse_api(obj, CACHE_PG_XK8S, opts, err, errlen);
	/* The group decides; any version of it is read with the fields above. */
	glen = strchr(av, '/') ? (size_t)(strchr(av, '/') - av) : 0;
	for (int a = 0; a < CACHE_PG_API_COUNT; a++)
		if (glen && strncmp(av, cache_pg_apis[a].api_version, glen) == 0 &&
		    cache_pg_apis[a].api_version[glen] == '/')
			return cache_podgroup_parse_api(obj, (enum cache_pg_api)a, opts, err, errlen);
	/* scheduler-plugins' older group, the same PodGroup. */
	if (glen == strlen("scheduling.sigs.k8s.io") &&
	    strncmp(av, "scheduling.sigs.k8s.io", glen) == 0)
		return cache_podgroup_parse_api(obj, CACHE_PG_XK8S, opts, err, errlen);
	snprintf(err, errlen, "PodGroup of apiVersion %.64s is not one troupe reads", av);
	return NULL;
}

void cache_podgroup_free(struct cache_podgroup *pg)
{
	free(pg);
}
