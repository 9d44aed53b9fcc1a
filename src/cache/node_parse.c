/* Parsing a Kubernetes Node into troupe's compact, immutable record (one
 * allocation laid out as parse.h says): GPU capacity and allocatable of the
 * first managed resource it advertises, CPU and memory, readiness, cordon,
 * sorted labels, taints, and troupe's annotations (topology text, unhealthy
 * devices, device UUIDs). Also device masks as text, both ways, and the UUIDs
 * of a set of devices.
 */
#include "cache/cache.h"
#include "cache/parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/quantity.h"
#include "common/util.h"

#define TROUPE_TOPOLOGY_ANNOTATION "troupe.io/gpu-topology"
#define TROUPE_UNHEALTHY_ANNOTATION "troupe.io/gpu-unhealthy"
enum {
	MAX_TOPOLOGY_TEXT = 64 * 1024,
	/* troupe.io/gpu-uuids longer than this cannot be a list of one UUID per
	 * device (a UUID is 40 characters) and is ignored. */
	MAX_UUIDS_TEXT = CACHE_MAX_GPUS * 64,
};

/* By key, then in the order the labels came (their keys are copied into the
 * record in that order, so the later one has the higher address): a key given
 * twice sorts its occurrences last-given last. */
static int kv_cmp(const void *a, const void *b)
{
	const struct cache_kv *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	return c ? c : (x->key > y->key) - (x->key < y->key);
}

/* Drop from sorted <kv> each label a later one of the same key overrides, as
 * Go's encoding/json reads a duplicate key. Returns how many remain. */
static size_t kv_keep_last(struct cache_kv *kv, size_t n)
{
	size_t out = 0;

	for (size_t i = 0; i < n; i++) {
		if (i + 1 < n && strcmp(kv[i].key, kv[i + 1].key) == 0)
			continue;
		kv[out++] = kv[i];
	}
	return out;
}

/* ---- Nodes -------------------------------------------------------------- */

/* Labels NVIDIA's GPU Feature Discovery publishes per resource,
 * "<resource>.<suffix>" (nvidia.com/gpu.replicas, nvidia.com/mig-1g.10gb.
 * replicas), and the node's MIG strategy (docs/reference.md#sharing). */
#define LABEL_MIG_STRATEGY "nvidia.com/mig.strategy"
/* The device plugin's renameByDefault advertises <resource>.shared; its
 * labels keep the resource's own name. */
#define SHARED_SUFFIX ".shared"

static const char *const sharing_names[CACHE_SHARING_COUNT] = {
	[CACHE_SHARING_NONE] = "none",
	[CACHE_SHARING_TIME_SLICING] = "time-slicing",
	[CACHE_SHARING_MPS] = "mps",
	[CACHE_SHARING_MIG_SINGLE] = "mig-single",
	[CACHE_SHARING_MIG_MIXED] = "mig-mixed",
};

const char *cache_sharing_name(enum cache_sharing s)
{
	return (unsigned)s < CACHE_SHARING_COUNT ? sharing_names[s] : "none";
}

int cache_sharing_parse(const char *s)
{
	/* mig-single comes from the node's MIG labels, never from a setting. */
	for (int i = 0; i < CACHE_SHARING_MIG_SINGLE; i++)
		if (s && strcmp(s, sharing_names[i]) == 0)
			return i;
	return -1;
}

/* The label "<resource>.<suffix>" of resource <res> (".shared" dropped). */
static const char *res_label(const struct cache_node *n, const char *res, const char *suffix)
{
	char key[192];
	size_t rl = strlen(res), sl = strlen(SHARED_SUFFIX);

	if (rl > sl && strcmp(res + rl - sl, SHARED_SUFFIX) == 0)
		rl -= sl;
	if (snprintf(key, sizeof(key), "%.*s.%s", (int)rl, res, suffix) >= (int)sizeof(key))
		return NULL;
	return cache_node_label(n, key);
}

/* A label's whole number, or 0 when absent or not one. */
static unsigned uint_of(const char *v)
{
	char *end;
	unsigned long x;

	if (!v || !*v)
		return 0;
	x = strtoul(v, &end, 10);
	return *end || x > 1000000 ? 0 : (unsigned)x;
}

/* The first "<n>GB" part of a product name ("A100-SXM4-40GB", "H100-80GB-HBM3"),
 * before <end>; 0 when none. */
static unsigned product_gb(const char *p, const char *end)
{
	while (p < end) {
		char *e;
		unsigned long v = strtoul(p, &e, 10);

		if (e > p && e + 2 <= end && (e[0] == 'G' || e[0] == 'g') &&
		    (e[1] == 'B' || e[1] == 'b') && (e + 2 == end || e[2] == '-'))
			return (unsigned)v;
		p = memchr(p, '-', (size_t)(end - p));
		if (!p)
			break;
		p++;
	}
	return 0;
}

/* Slices of one GPU a MIG profile cuts it into: the compute slices ("<n>g":
 * 1g 7, 2g 3, 3g 2, 4g and 7g 1) or the memory ("<m>gb" of the product's
 * "<total>GB") if fewer fit, so 1g.10gb is 4 on an A100-40GB and 7 on an
 * H100-80GB, as mig-parted's profile tables list them; a media-extension
 * profile ("+me") is 1. <product> is "<model>-MIG-<profile>", <cut> its
 * "-MIG-". 0 when the profile is not "<n>g.<m>gb". */
static unsigned mig_slices_per_gpu(const char *product, const char *cut)
{
	const char *profile = cut + 5;
	char *end;
	unsigned long g = strtoul(profile, &end, 10), mem, total;
	unsigned by_compute;

	if (end == profile || *end != 'g' || end[1] != '.')
		return 0;
	switch (g) {
	case 1: by_compute = 7; break;
	case 2: by_compute = 3; break;
	case 3: by_compute = 2; break;
	case 4: case 7: by_compute = 1; break;
	default: return 0;
	}
	if (strstr(profile, "+me") || strstr(profile, ".me"))
		return 1;
	mem = strtoul(end + 2, &end, 10);
	total = product_gb(product, cut);
	if (mem && total && total / mem < by_compute)
		return (unsigned)(total / mem);
	return by_compute;
}

/* How node <n> shares resource <i> (of <c> devices advertised, <a>
 * allocatable): fills the node's sharing fields and returns the devices troupe
 * counts (slots), changing <*a> to match. */
static int64_t node_sharing(struct cache_node *n, const struct cache_opts *opts, unsigned i,
			    int64_t c, int64_t *a, uint64_t *absent)
{
	const struct cache_sharing_opts *so = &opts->sharing[i];
	const char *res = opts->gpu_resources[i];
	const char *product = res_label(n, res, "product");
	const char *mig = cache_node_label(n, LABEL_MIG_STRATEGY);
	const char *cut = product ? strstr(product, "-MIG-") : NULL;
	unsigned labelled = uint_of(res_label(n, res, "replicas"));
	unsigned r = 0, g, rt;
	int strategy = so->strategy;

	n->gpu_replicas = 1;
	n->gpu_physical = (uint8_t)(c < CACHE_MAX_GPUS ? c : CACHE_MAX_GPUS);
	n->gpu_replicas_advertised = 1;
	if (strategy == CACHE_SHARING_NONE || c <= 0)
		return c;
	/* MIG single: every device is a slice. Time-sliced slices are counted
	 * as time-slicing over the slices. */
	if (strategy < 0 && mig && strcmp(mig, "single") == 0 && cut && labelled <= 1) {
		strategy = CACHE_SHARING_MIG_SINGLE;
		r = so->replicas ? so->replicas : mig_slices_per_gpu(product, cut);
		if (!r) {
			log_warn("cache", "node %s: troupe does not know how many slices of a GPU "
				 "the MIG profile in %s makes; its %s devices are counted as whole GPUs",
				 n->name, product, res);
			return c;
		}
	} else if (strategy < 0) {
		const char *ss = res_label(n, res, "sharing-strategy");
		size_t pl = product ? strlen(product) : 0;

		strategy = cache_sharing_parse(ss);
		/* Before GFD published the strategy: the replicas label, or the
		 * product's -SHARED suffix, mean time-slicing. */
		if (strategy < 0)
			strategy = labelled > 1 || (pl > 7 && strcmp(product + pl - 7, "-SHARED") == 0)
					   ? CACHE_SHARING_TIME_SLICING : CACHE_SHARING_NONE;
	}
	if (strategy == CACHE_SHARING_NONE)
		return c;
	if (!r)
		r = so->replicas ? so->replicas : labelled;
	if (r <= 1 || r > 255) {
		log_warn("cache", "node %s: %s sharing of %s, but %u replicas per GPU; its devices "
			 "are counted as whole GPUs", n->name,
			 cache_sharing_name((enum cache_sharing)strategy), res, r);
		return c;
	}
	g = (unsigned)((c + r - 1) / r);
	if (g > CACHE_MAX_GPUS)
		g = CACHE_MAX_GPUS;
	rt = r;
	if ((uint64_t)g * rt > CACHE_MAX_GPUS) {
		rt = CACHE_MAX_GPUS / g;
		log_warn("cache", "node %s: %u GPUs x %u replicas of %s is more than the %d devices "
			 "troupe tracks per node; troupe offers %u replicas of each GPU", n->name, g,
			 r, res, CACHE_MAX_GPUS, rt);
		if (rt == 0)
			return CACHE_MAX_GPUS;
		*a = *a * rt / r;
	}
	n->gpu_sharing = (uint8_t)strategy;
	n->gpu_replicas = (uint8_t)rt;
	n->gpu_replicas_advertised = (uint16_t)r;
	n->gpu_physical = (uint8_t)g;
	/* Slices of one GPU are always packed: whole GPUs stay free. */
	n->gpu_packing = strategy == CACHE_SHARING_MIG_SINGLE ? CACHE_PACKING_PACKED
							      : (uint8_t)so->packing;
	/* NVIDIA's plugin refuses MPS requests above 1 whatever the setting. */
	n->gpu_fail_gt1 = strategy == CACHE_SHARING_MPS ||
			  (strategy == CACHE_SHARING_TIME_SLICING && so->fail_requests_greater_than_one);
	/* A last GPU with fewer devices than the others (56 slices cut 7 a GPU
	 * from 52 advertised): the slots no device fills are never free. */
	if (rt == r && (uint64_t)g * rt > (uint64_t)c)
		for (unsigned s = (unsigned)c; s < g * rt && s < 64; s++)
			*absent |= 1ULL << s;
	c = (int64_t)g * rt;
	if (*a > c)
		*a = c;
	return c;
}

/* ---- MIG mixed ---- */

#define MIG_RESOURCE_PREFIX "nvidia.com/mig-"

static bool is_mig_resource(const char *name)
{
	return strncmp(name, MIG_RESOURCE_PREFIX, strlen(MIG_RESOURCE_PREFIX)) == 0;
}

/* Whether node <status> advertises a managed MIG profile resource. */
static bool advertises_mig(const struct cache_opts *opts, const cJSON *cap)
{
	for (unsigned i = 0; i < opts->n_gpu_resources; i++)
		if (is_mig_resource(opts->gpu_resources[i]) &&
		    resource_count(cap, opts->gpu_resources[i]) > 0)
			return true;
	return false;
}

static unsigned gcd(unsigned a, unsigned b)
{
	while (b) {
		unsigned t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* Lay a MIG mixed node out: <g> MIG GPUs, each with count/g devices of every
 * managed profile, in the order of resources.gpu, then the whole GPUs (a
 * managed resource not named nvidia.com/mig-*), each its GPU's first slot.
 * Every GPU takes <d> slots, d the MIG devices of one GPU; the slots no device
 * fills, and a resource's devices beyond what the kubelet offers of it
 * (allocatable), go into <*absent>, never free. The GPUs: nvidia.com/gpu.count
 * less the whole ones when that divides every profile's count (GFD counts
 * MIG-enabled GPUs there), else the greatest common divisor of the counts.
 * Returns false (a warning said why) when there is no such layout within
 * CACHE_MAX_GPUS slots; the node then offers its first resource only. */
static bool mig_mixed_layout(struct cache_node *n, const struct cache_opts *opts,
			     const cJSON *cap, const cJSON *alloc, uint64_t *mask,
			     uint32_t *allocs, uint64_t *absent)
{
	int64_t count[CACHE_MAX_GPU_RESOURCES] = { 0 }, av[CACHE_MAX_GPU_RESOURCES] = { 0 };
	unsigned g = 0, d = 0, whole = 0, labelled, slot;
	int whole_res = -1;

	for (unsigned i = 0; i < opts->n_gpu_resources; i++) {
		count[i] = resource_count(cap, opts->gpu_resources[i]);
		av[i] = resource_count(alloc, opts->gpu_resources[i]);
		if (av[i] < 0)
			av[i] = count[i];
		if (count[i] < av[i])
			count[i] = av[i];
		if (count[i] <= 0)
			continue;
		if (count[i] > CACHE_MAX_GPUS)
			goto too_many;
		if (!is_mig_resource(opts->gpu_resources[i])) {
			if (whole_res < 0) {
				whole_res = (int)i;
				whole = (unsigned)count[i];
			}
			continue;
		}
		g = gcd(g, (unsigned)count[i]);
	}
	labelled = uint_of(cache_node_label(n, "nvidia.com/gpu.count"));
	if (labelled > whole) {
		unsigned m = labelled - whole;
		bool divides = true;

		for (unsigned i = 0; i < opts->n_gpu_resources; i++)
			if (count[i] > 0 && is_mig_resource(opts->gpu_resources[i]))
				divides = divides && count[i] % m == 0;
		if (divides)
			g = m;
	}
	for (unsigned i = 0; i < opts->n_gpu_resources; i++)
		if (count[i] > 0 && is_mig_resource(opts->gpu_resources[i]))
			d += (unsigned)count[i] / g;
	if (!g || !d || (uint64_t)(g + whole) * d > CACHE_MAX_GPUS)
		goto too_many;
	*absent = 0;
	slot = 0;
	for (unsigned i = 0; i < opts->n_gpu_resources; i++) {
		unsigned per;

		if (count[i] <= 0 || !is_mig_resource(opts->gpu_resources[i]))
			continue;
		per = (unsigned)count[i] / g;
		for (unsigned gpu = 0; gpu < g; gpu++)
			mask[i] |= (per >= 64 ? ~0ULL : (1ULL << per) - 1) << (gpu * d + slot);
		slot += per;
	}
	for (unsigned w = 0; w < whole; w++) {
		mask[whole_res] |= 1ULL << ((g + w) * d);
		if (d > 1)
			*absent |= ((1ULL << (d - 1)) - 1) << ((g + w) * d + 1);
	}
	/* Devices the kubelet does not offer: the last of each resource. */
	n->gpu_allocatable = 0;
	for (unsigned i = 0; i < opts->n_gpu_resources; i++) {
		uint64_t m = mask[i];
		int64_t drop = (int64_t)__builtin_popcountll(m) - (av[i] > 0 ? av[i] : 0);

		for (int b = 63; b >= 0 && drop > 0; b--)
			if (m & (1ULL << b)) {
				*absent |= 1ULL << b;
				drop--;
			}
		allocs[i] = (uint32_t)__builtin_popcountll(m & ~*absent);
		n->gpu_allocatable += allocs[i];
		if (n->gpu_resource < 0 && m)
			n->gpu_resource = (int)i;
	}
	n->gpu_sharing = CACHE_SHARING_MIG_MIXED;
	n->gpu_replicas = (uint8_t)d;
	n->gpu_replicas_advertised = (uint16_t)d;
	n->gpu_physical = (uint8_t)(g + whole);
	n->gpu_packing = CACHE_PACKING_PACKED;
	n->gpu_capacity = (g + whole) * d;
	n->res_mask = mask;
	n->res_alloc = allocs;
	return true;
too_many:
	log_warn("cache", "node %s: its MIG devices do not lay out over at most %d devices "
		 "(%u GPUs of %u); troupe offers only its first managed resource", n->name,
		 CACHE_MAX_GPUS, g + whole, d);
	return false;
}

/* A shared node's unhealthy physical GPUs as the slots they hold. */
static uint64_t unhealthy_slots(const struct cache_node *n, uint64_t gpus)
{
	uint64_t slots = 0;

	for (unsigned g = 0; g < n->gpu_physical && g < 64; g++)
		if (gpus & (1ULL << g))
			slots |= cache_node_gpu_slots(n, g);
	return slots;
}

static bool node_is_ready(const cJSON *status)
{
	const cJSON *conds = json_get(status, "conditions");
	const cJSON *c;

	cJSON_ArrayForEach(c, conds) {
		const char *type = json_str(c, "type");
		const char *st = json_str(c, "status");

		if (type && strcmp(type, "Ready") == 0)
			return st && strcmp(st, "True") == 0;
	}
	return false;
}


struct cache_node *cache_node_parse(const cJSON *obj, const struct cache_opts *opts,
				    char *err, size_t errlen)
{
	const cJSON *meta = json_obj(obj, "metadata");
	const cJSON *spec = json_obj(obj, "spec");
	const cJSON *status = json_obj(obj, "status");
	const cJSON *labels = json_obj(meta, "labels");
	const cJSON *taints = json_get(spec, "taints");
	const cJSON *alloc = json_obj(status, "allocatable");
	const cJSON *cap = json_obj(status, "capacity");
	const char *name = json_str(meta, "name");
	const char *uuids = json_str(json_obj(meta, "annotations"), "troupe.io/gpu-uuids");
	const cJSON *it;
	uint64_t absent = 0;
	bool mig;
	struct cache_node *n = NULL;
	struct cache_kv *kv;
	struct cache_taint *tt;
	size_t size, nl = 0, nt = 0;
	struct blk b;

	if (!name || !name[0] || strlen(name) > K8S_NAME_MAX) {
		snprintf(err, errlen, "node has no valid metadata.name");
		return NULL;
	}
	if (uuids && strlen(uuids) > MAX_UUIDS_TEXT)
		uuids = NULL;
	mig = advertises_mig(opts, cap);
	size = sizeof(*n) + str_size(name) + str_size(uuids) + 16 +
	       (mig ? CACHE_MAX_GPU_RESOURCES * (sizeof(uint64_t) + sizeof(uint32_t)) + 8 : 0);
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
	n->alloc_size = (uint32_t)size;
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
	nl = kv_keep_last(kv, nl);
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
	if (mig) {
		uint64_t *masks = blk_take(&b, CACHE_MAX_GPU_RESOURCES * sizeof(uint64_t),
					   _Alignof(uint64_t));
		uint32_t *allocs = blk_take(&b, CACHE_MAX_GPU_RESOURCES * sizeof(uint32_t),
					    _Alignof(uint32_t));

		mig = mig_mixed_layout(n, opts, cap, alloc, masks, allocs, &absent);
		if (!mig)
			n->gpu_resource = -1;
	}
	for (unsigned i = 0; i < opts->n_gpu_resources && !mig; i++) {
		int64_t c = resource_count(cap, opts->gpu_resources[i]);
		int64_t a = resource_count(alloc, opts->gpu_resources[i]);

		if (c <= 0 && a <= 0)
			continue;
		if (a < 0)
			a = c;  /* no allocatable reported: all devices usable */
		if (c < a)
			c = a;
		c = node_sharing(n, opts, i, c, &a, &absent);
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
	n->mem_bytes = milli_to_units_ceil(resource_milli(alloc, "memory"));
	n->ready = node_is_ready(status);
	n->unschedulable = cJSON_IsTrue(json_get(spec, "unschedulable"));
	{
		const cJSON *ann = json_obj(meta, "annotations");
		const char *topo = json_str(ann, TROUPE_TOPOLOGY_ANNOTATION);
		const char *bad = json_str(ann, TROUPE_UNHEALTHY_ANNOTATION);

		/* Kept outside the record's block: the cache drops it once the
		 * topology is derived, so it costs no memory per node. */
		if (topo && strlen(topo) <= MAX_TOPOLOGY_TEXT) {
			n->topology_text = strdup(topo);
			n->topology_annotated = true;
		}
		else if (topo)
			log_warn("cache", "node %s: annotation %s is larger than %d bytes; ignored",
				 name, TROUPE_TOPOLOGY_ANNOTATION, MAX_TOPOLOGY_TEXT);
		if (bad && *bad && cache_devices_parse(bad, &n->unhealthy) < 0) {
			log_warn("cache", "node %s: annotation %s=\"%s\" is not a list of device "
				 "indices; ignored", name, TROUPE_UNHEALTHY_ANNOTATION, bad);
			n->unhealthy = 0;
		}
		/* troupe-node names physical GPUs. */
		if (cache_node_shared(n))
			n->unhealthy = unhealthy_slots(n, n->unhealthy);
		n->unhealthy |= absent;
	}
	return n;
}

void cache_node_free(struct cache_node *node)
{
	if (node) {
		free((char *)node->topology_text);
		free((char *)node->dra_topology_text);
	}
	free(node);
}

struct cache_node *cache__node_copy(const struct cache_node *n)
{
	struct cache_node *m;
	ptrdiff_t d;

	if (!n->alloc_size)
		return NULL;    /* not a parsed record (a test's struct) */
	m = aligned_alloc(64, n->alloc_size);
	if (!m)
		return NULL;
	memcpy(m, n, n->alloc_size);
	d = (char *)m - (char *)n;
	/* Every pointer into the block moves with it. */
#define RELOC(p) ((p) = (p) ? (void *)((char *)(p) + d) : (p))
	RELOC(m->name);
	RELOC(m->gpu_uuids);
	RELOC(m->labels);
	RELOC(m->taints);
	RELOC(m->res_mask);
	RELOC(m->res_alloc);
	for (uint16_t i = 0; i < m->n_labels; i++) {
		struct cache_kv *kv = (struct cache_kv *)&m->labels[i];

		RELOC(kv->key);
		RELOC(kv->value);
	}
	for (uint16_t i = 0; i < m->n_taints; i++) {
		struct cache_taint *t = (struct cache_taint *)&m->taints[i];

		RELOC(t->key);
		RELOC(t->value);
		RELOC(t->effect);
	}
#undef RELOC
	m->derived = NULL;
	m->topology_text = NULL;
	m->dra_topology_text = NULL;
	return m;
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


/* ---- Devices ---------------------------------------------------------- */

/* The device plugin's name of each replica slot in <mask>: the UUID of its
 * GPU, "::" and the replica ("GPU-a::0,GPU-a::1"), as NVIDIA's plugin names
 * the devices it advertises for a shared GPU. */
static bool slot_uuids(const struct cache_node *node, uint64_t mask, char *buf, size_t len)
{
	size_t at = 0;

	for (unsigned s = 0; s < 64 && mask; s++) {
		char one[128];
		unsigned g = s / node->gpu_replicas;
		int w;

		if (!(mask & (1ULL << s)))
			continue;
		mask &= ~(1ULL << s);
		if (!cache_node_uuids(&(struct cache_node){ .gpu_uuids = node->gpu_uuids },
				      1ULL << g, one, sizeof(one)))
			goto fail;
		w = snprintf(buf + at, len - at, "%s%s::%u", at ? "," : "", one,
			     s % node->gpu_replicas);
		if (w < 0 || (size_t)w >= len - at)
			goto fail;
		at += (size_t)w;
	}
	return true;
fail:
	buf[0] = '\0';
	return false;
}

bool cache_node_uuids(const struct cache_node *node, uint64_t mask, char *buf, size_t len)
{
	const char *p = node->gpu_uuids;
	size_t at = 0;
	unsigned idx = 0;

	if (len)
		buf[0] = '\0';
	if (!p || !*p || !mask || !len)
		return false;
	/* A MIG device has a UUID of its own, which no annotation lists. */
	if (node->gpu_sharing == CACHE_SHARING_MIG_SINGLE ||
	    node->gpu_sharing == CACHE_SHARING_MIG_MIXED)
		return false;
	if (cache_node_shared(node))
		return slot_uuids(node, mask, buf, len);
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

void cache_node_devices_format(const struct cache_node *node, uint64_t mask, char *buf,
			       size_t len)
{
	size_t at = 0;

	if (!node || !cache_node_shared(node)) {
		cache_devices_format(mask, buf, len);
		return;
	}
	if (len)
		buf[0] = '\0';
	for (unsigned s = 0; s < 64 && mask; s++) {
		int n;

		if (!(mask & (1ULL << s)))
			continue;
		mask &= ~(1ULL << s);
		n = snprintf(buf + at, len > at ? len - at : 0, "%s%u:%u", at ? "," : "",
			     s / node->gpu_replicas, s % node->gpu_replicas);
		if (n < 0 || (size_t)n >= len - at)
			return;
		at += (size_t)n;
	}
}

int cache_node_slots_parse(const struct cache_node *node, const char *s, uint64_t *mask)
{
	uint64_t m = 0;
	const char *p = s;

	if (!s || !*s || !cache_node_shared(node))
		return -EINVAL;
	for (;;) {
		unsigned v[2] = { 0, 0 };

		for (int part = 0; part < 2; part++) {
			int digits = 0;

			while (*p == ' ')
				p++;
			for (; *p >= '0' && *p <= '9'; p++, digits++) {
				v[part] = v[part] * 10 + (unsigned)(*p - '0');
				if (v[part] >= CACHE_MAX_GPUS)
					return -EINVAL;
			}
			while (*p == ' ')
				p++;
			if (!digits || (part == 0 && *p++ != ':'))
				return -EINVAL;
		}
		if (v[0] >= node->gpu_physical || v[1] >= node->gpu_replicas)
			return -EINVAL;
		v[0] = v[0] * node->gpu_replicas + v[1];
		if (v[0] >= 64 || (m & (1ULL << v[0])))
			return -EINVAL;
		m |= 1ULL << v[0];
		if (*p == '\0')
			break;
		if (*p++ != ',')
			return -EINVAL;
	}
	*mask = m;
	return 0;
}
