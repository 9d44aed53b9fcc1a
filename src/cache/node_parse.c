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
	n->mem_bytes = milli_to_units_ceil(resource_milli(alloc, "memory"));
	n->ready = node_is_ready(status);
	n->unschedulable = cJSON_IsTrue(json_get(spec, "unschedulable"));
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
