/* DRA: GPUs a DRA driver troupe is told about (cache_opts.dra_drivers) gave
 * to a ResourceClaim are held on their node as a pod's would be, so troupe
 * never offers them again (cache.h says how a device is named to troupe's
 * index).
 *
 * Three maps, the writer thread's alone: every device of the managed drivers'
 * ResourceSlices by "driver/pool/device" (with its node, uuid and index); each
 * slice's device keys, to replace them when the slice changes; each allocated
 * claim's device keys. An allocated claim is an entry of the pod table under
 * "dra:<claim uid>", rebuilt from the maps whenever the claim or any slice
 * changes (a claim may be seen before the slices that name its devices), and
 * removed when the claim is deallocated or deleted. The pod relist's sweep
 * leaves these entries alone (informer_events.c); the claims' own relist
 * sweeps them.
 */
#include "cache/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/parse.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/util.h"

/* "driver/pool/device": a driver and a device are DNS labels or subdomains
 * (63 and 253 at most), a pool name up to 253. */
enum { DRA_KEY_BUF = 253 + 1 + 253 + 1 + 253 + 1, DRA_UUID_BUF = 128 };

struct dra_device {
	char key[DRA_KEY_BUF];
	char slice[K8S_NAME_BUF];       /* the slice that published it (the last one) */
	char node[K8S_NAME_BUF];        /* spec.nodeName of its slice, "" when none */
	char uuid[DRA_UUID_BUF];        /* attribute "uuid", "" when none */
	int index;                      /* attribute "index", -1 when none */
	/* The standard attributes: resource.kubernetes.io/pcieRoot ("" when
	 * none) and the NUMA node (numaNode or resource.kubernetes.io/numaNode,
	 * -1 when none). */
	char pcie_root[DRA_UUID_BUF];
	int numa;
};

/* The device keys of one slice, or one claim (then with its name). */
struct dra_keys {
	char id[K8S_UID_BUF > K8S_NAME_BUF ? K8S_UID_BUF : K8S_NAME_BUF];
	char ns[K8S_NAMESPACE_BUF];     /* a claim's */
	char name[K8S_NAME_BUF];        /* a claim's */
	size_t n;
	char (*keys)[DRA_KEY_BUF];
};

static bool managed_driver(const struct cache *c, const char *driver)
{
	const struct cache_opts *o = &c->opts;

	for (unsigned i = 0; driver && i < o->n_dra_drivers; i++)
		if (strcmp(o->dra_drivers[i], driver) == 0)
			return true;
	return false;
}

static void keys_free(struct dra_keys *k)
{
	if (k)
		free(k->keys);
	free(k);
}

static bool keys_add(struct dra_keys *k, const char *driver, const char *pool, const char *dev)
{
	char (*g)[DRA_KEY_BUF] = realloc(k->keys, (k->n + 1) * sizeof(*g));

	if (!g)
		return false;
	k->keys = g;
	snprintf(k->keys[k->n++], DRA_KEY_BUF, "%s/%s/%s", driver, pool, dev);
	return true;
}

/* A device attribute of a v1 device (attributes at the device) or a v1beta1
 * one (under "basic"). */
static const cJSON *attribute(const cJSON *dev, const char *name)
{
	const cJSON *a = json_obj(dev, "attributes");

	if (!a)
		a = json_obj(json_obj(dev, "basic"), "attributes");
	return json_obj(a, name);
}

/* ---- A claim's entry in the pod table ---------------------------------------------- */

/* <uuid>'s place in the node's troupe.io/gpu-uuids list, or -1. */
static int uuid_index(const char *list, const char *uuid)
{
	size_t len = strlen(uuid);
	int i = 0;

	for (const char *p = list; p && *p; i++) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n == len && strncmp(p, uuid, n) == 0)
			return i;
		p = end ? end + 1 : NULL;
	}
	return -1;
}

/* Rebuild claim <k>'s entry: its devices on their node, as a running pod. */
static void claim_sync(struct cache *c, const struct dra_keys *k)
{
	char uid[sizeof(k->id) + CACHE_DRA_UID_PREFIX_LEN], ids[CACHE_DEVICES_BUF] = "";
	char node[K8S_NAME_BUF] = "", err[CACHE_ERR_LEN];
	const char *resource = NULL;
	struct cache_node_view v = { 0 };
	uint64_t mask = 0;
	unsigned count = 0;
	bool exact = true;
	struct strbuf sb = STRBUF_INIT;
	cJSON *obj;

	snprintf(uid, sizeof(uid), "dra:%s", k->id);
	cache_read_begin(c);
	for (size_t i = 0; i < k->n; i++) {
		const struct dra_device *d = strmap_get(&c->dra_devices, k->keys[i],
							strlen(k->keys[i]));
		int idx = -1;

		if (!d || !d->node[0])
			continue;       /* not published (yet), or not node-local */
		if (!node[0]) {
			snprintf(node, sizeof(node), "%s", d->node);
			if (!cache_node_lookup(c, node, strlen(node), &v) ||
			    v.node->gpu_resource < 0) {
				node[0] = '\0';
				break;  /* no GPUs of troupe's there to hold */
			}
			resource = c->opts.gpu_resources[v.node->gpu_resource];
		} else if (strcmp(node, d->node) != 0) {
			continue;       /* a node-local claim names one node */
		}
		if (d->uuid[0] && v.node->gpu_uuids)
			idx = uuid_index(v.node->gpu_uuids, d->uuid);
		if (idx < 0)
			idx = d->index;
		if (idx >= 0 && idx < (int)v.node->gpu_capacity && !(mask & (1ULL << idx)))
			mask |= 1ULL << idx;
		else
			exact = false;
		count++;
	}
	cache_read_end(c);
	if (!node[0] || !count) {
		(void)cache_pod_delete(c, uid);
		return;
	}
	/* Devices troupe can name are held exactly; a claim with one it cannot
	 * holds its count unattributed. */
	if (exact)
		cache_devices_format(mask, ids, sizeof(ids));
	strbuf_puts(&sb, "{\"metadata\":{\"uid\":");
	strbuf_put_json_str(&sb, uid, strlen(uid));
	strbuf_puts(&sb, ",\"namespace\":");
	strbuf_put_json_str(&sb, k->ns, strlen(k->ns));
	strbuf_puts(&sb, ",\"name\":");
	strbuf_put_json_str(&sb, k->name, strlen(k->name));
	if (exact) {
		strbuf_puts(&sb, ",\"annotations\":{\"troupe.io/gpu-ids\":");
		strbuf_put_json_str(&sb, ids, strlen(ids));
		strbuf_putc(&sb, '}');
	}
	strbuf_puts(&sb, "},\"spec\":{\"nodeName\":");
	strbuf_put_json_str(&sb, node, strlen(node));
	strbuf_puts(&sb, ",\"containers\":[{\"name\":\"resourceclaim\",\"resources\":{\"limits\":{");
	strbuf_put_json_str(&sb, resource, strlen(resource));
	strbuf_printf(&sb, ":\"%u\"}}}]},\"status\":{\"phase\":\"Running\"}}", count);
	obj = sb.failed ? NULL : cJSON_Parse(sb.buf);
	strbuf_fini(&sb);
	if (obj) {
		struct cache_pod *p = cache_pod_parse(obj, &c->opts, err, sizeof(err));

		if (p && cache_pod_apply(c, p) == 0)
			log_debug("cache", "ResourceClaim %s/%s holds %u GPUs on node %s (%s)",
				  k->ns, k->name, count, node, exact ? ids : "unattributed");
		else if (!p)
			log_warn("cache", "ResourceClaim %s/%s: %s", k->ns, k->name, err);
		cJSON_Delete(obj);
	}
}

static void claims_sync_all(struct cache *c)
{
	size_t pos = 0;
	void *v;

	while (strmap_next(&c->dra_claims, &pos, NULL, &v))
		claim_sync(c, v);
}

/* ---- Slices ------------------------------------------------------------------------ */

/* ---- Topology from the standard attributes --------------------------------------- */

#define ATTR_PCIE_ROOT "resource.kubernetes.io/pcieRoot"
#define ATTR_NUMA_NODE "resource.kubernetes.io/numaNode"

/* The `nvidia-smi topo -m` text <node>'s managed-driver devices' standard
 * attributes give, into <out> (freed by the caller), or NULL: every device
 * needs an index, the indices must be 0..n-1 once each, and each must have a
 * PCIe root or a NUMA node. Two devices under one PCIe root are PHB (DRA says
 * nothing finer: no PCIe switch, no NVLink), on one NUMA node NODE, else SYS. */
static char *topology_text(struct cache *c, const char *node)
{
	const struct dra_device *dev[CACHE_MAX_GPUS] = { 0 };
	struct strbuf sb = STRBUF_INIT;
	size_t pos = 0;
	unsigned n = 0;
	void *v;

	while (strmap_next(&c->dra_devices, &pos, NULL, &v)) {
		const struct dra_device *d = v;

		if (strcmp(d->node, node) != 0)
			continue;
		if (d->index < 0 || dev[d->index] || (!d->pcie_root[0] && d->numa < 0))
			return NULL;
		dev[d->index] = d;
		n++;
	}
	for (unsigned i = 0; i < n; i++)
		if (!dev[i])
			return NULL;
	if (!n)
		return NULL;
	for (unsigned i = 0; i < n; i++)
		strbuf_printf(&sb, "\tGPU%u", i);
	strbuf_puts(&sb, "\tCPU Affinity\tNUMA Affinity\n");
	for (unsigned i = 0; i < n; i++) {
		strbuf_printf(&sb, "GPU%u", i);
		for (unsigned j = 0; j < n; j++) {
			const struct dra_device *a = dev[i], *b = dev[j];
			const char *lvl = "SYS";

			if (i == j)
				lvl = " X ";
			else if (a->pcie_root[0] && strcmp(a->pcie_root, b->pcie_root) == 0)
				lvl = "PHB";
			else if (a->numa >= 0 && a->numa == b->numa)
				lvl = "NODE";
			strbuf_printf(&sb, "\t%s", lvl);
		}
		if (dev[i]->numa >= 0)
			strbuf_printf(&sb, "\tN/A\t%d\n", dev[i]->numa);
		else
			strbuf_puts(&sb, "\tN/A\tN/A\n");
	}
	if (strbuf_failed(&sb)) {
		strbuf_fini(&sb);
		return NULL;
	}
	return strbuf_take(&sb, NULL);
}

/* An entry of c->dra_topo is one allocation: the node's name, its NUL, the
 * text; the map's key is the name, its value the entry. */
const char *cache__dra_topology(struct cache *c, const char *node)
{
	const char *e = strmap_get(&c->dra_topo, node, strlen(node));

	return e ? e + strlen(e) + 1 : NULL;
}

/* Writer: <node>'s slices changed: keep the text they give now, and when it
 * changed, publish the node's record again so its topology is derived anew (a
 * node whose annotation gives its topology needs none of it). */
static void topology_refresh(struct cache *c, const char *node)
{
	char *text = topology_text(c, node);
	const char *old = cache__dra_topology(c, node);
	struct cache_node_view v;
	struct cache_node *copy = NULL;

	if ((!text && !old) || (text && old && strcmp(text, old) == 0)) {
		free(text);
		return;
	}
	free(strmap_del(&c->dra_topo, node, strlen(node)));
	if (text) {
		size_t nl = strlen(node), tl = strlen(text);
		char *entry = malloc(nl + 1 + tl + 1);

		if (entry) {
			memcpy(entry, node, nl + 1);
			memcpy(entry + nl + 1, text, tl + 1);
			if (strmap_put(&c->dra_topo, entry, nl, entry, NULL) < 0)
				free(entry);
		}
		free(text);
	}
	cache_read_begin(c);
	if (cache_node_lookup(c, node, strlen(node), &v) && !v.node->topology_annotated)
		copy = cache__node_copy(v.node);
	cache_read_end(c);
	if (copy) {
		log_info("cache", "node %s: its DRA slices %s its GPU topology", node,
			 cache__dra_topology(c, node) ? "give" : "no longer give");
		cache_node_upsert(c, copy);
	}
}

/* ---- Devices per node, for any thread ------------------------------------------ */

struct dra_node_count {
	char node[K8S_NAME_BUF];
	unsigned n;
};

/* Writer: <delta> devices of a managed driver published on <node>. */
static void node_count_add(struct cache *c, const char *node, int delta)
{
	struct dra_node_count *nc;
	size_t len = strlen(node);

	if (!len)
		return;
	pthread_mutex_lock(&c->dra_nodes_lock);
	nc = strmap_get(&c->dra_nodes, node, len);
	if (!nc && delta > 0) {
		nc = calloc(1, sizeof(*nc));
		if (nc) {
			snprintf(nc->node, sizeof(nc->node), "%s", node);
			if (strmap_put(&c->dra_nodes, nc->node, len, nc, NULL) < 0) {
				free(nc);
				nc = NULL;
			}
		}
	}
	if (nc) {
		nc->n = delta < 0 && (unsigned)-delta >= nc->n ? 0 : (unsigned)((int)nc->n + delta);
		if (!nc->n)
			free(strmap_del(&c->dra_nodes, node, len));
	}
	__atomic_store_n(&c->dra_nodes_n, strmap_count(&c->dra_nodes), __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->dra_nodes_lock);
}

unsigned cache_dra_node_devices(struct cache *c, const char *node)
{
	const struct dra_node_count *nc;
	unsigned n;

	/* No slice of a managed driver anywhere (most clusters): no lock. */
	if (!__atomic_load_n(&c->dra_nodes_n, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&c->dra_nodes_lock);
	nc = strmap_get(&c->dra_nodes, node, strlen(node));
	n = nc ? nc->n : 0;
	pthread_mutex_unlock(&c->dra_nodes_lock);
	return n;
}

/* Fill <d> (its key set) from device <dev> of slice <slice> on <node> (NULL
 * when the slice names none): what troupe reads of a device's attributes. */
static void device_read(struct dra_device *d, const cJSON *dev, const char *slice,
			const char *node)
{
	const char *uuid = json_str(attribute(dev, "uuid"), "string");
	const cJSON *index = json_get(attribute(dev, "index"), "int");
	const char *root = json_str(attribute(dev, ATTR_PCIE_ROOT), "string");
	const cJSON *numa = json_get(attribute(dev, "numaNode"), "int");

	if (!numa)
		numa = json_get(attribute(dev, ATTR_NUMA_NODE), "int");
	snprintf(d->slice, sizeof(d->slice), "%s", slice);
	snprintf(d->node, sizeof(d->node), "%s", node && strlen(node) <= K8S_NAME_MAX ? node : "");
	snprintf(d->uuid, sizeof(d->uuid), "%s", uuid && strlen(uuid) < sizeof(d->uuid) ? uuid : "");
	d->index = cJSON_IsNumber(index) && index->valuedouble >= 0 &&
			   index->valuedouble < CACHE_MAX_GPUS ? (int)index->valuedouble : -1;
	snprintf(d->pcie_root, sizeof(d->pcie_root), "%s",
		 root && strlen(root) < sizeof(d->pcie_root) ? root : "");
	d->numa = cJSON_IsNumber(numa) && numa->valuedouble >= 0 && numa->valuedouble < 128
			  ? (int)numa->valuedouble : -1;
}

/* Forget slice <name>'s devices; the node they were on into <node> ("" when
 * none). */
static void slice_forget(struct cache *c, const char *name, char node[K8S_NAME_BUF])
{
	struct dra_keys *k = strmap_del(&c->dra_slices, name, strlen(name));

	node[0] = '\0';
	for (size_t i = 0; k && i < k->n; i++) {
		struct dra_device *d = strmap_get(&c->dra_devices, k->keys[i], strlen(k->keys[i]));

		/* A device a newer slice of the pool publishes now is that one's. */
		if (!d || strcmp(d->slice, name) != 0)
			continue;
		strmap_del(&c->dra_devices, k->keys[i], strlen(k->keys[i]));
		node_count_add(c, d->node, -1);
		if (d->node[0])
			memcpy(node, d->node, K8S_NAME_BUF);
		free(d);
	}
	keys_free(k);
}

int cache_dra_slice(struct cache *c, const cJSON *slice, bool deleted, char *err, size_t errlen)
{
	const cJSON *spec = json_obj(slice, "spec"), *dev;
	const char *name = json_str(json_obj(slice, "metadata"), "name");
	const char *driver = json_str(spec, "driver");
	const char *pool = json_str(json_obj(spec, "pool"), "name");
	const char *node = json_str(spec, "nodeName");
	char was_on[K8S_NAME_BUF];
	struct dra_keys *k;

	cache__writer_check(c);
	if (!name || !name[0] || strlen(name) > K8S_NAME_MAX) {
		snprintf(err, errlen, "ResourceSlice has no valid metadata.name");
		return -EINVAL;
	}
	if (node && strlen(node) > K8S_NAME_MAX)
		node = NULL;
	slice_forget(c, name, was_on);
	if (deleted || !managed_driver(c, driver) || !pool || !pool[0] ||
	    strlen(driver) > 253 || strlen(pool) > 253) {
		if (was_on[0])
			topology_refresh(c, was_on);
		claims_sync_all(c);
		return 0;
	}
	k = calloc(1, sizeof(*k));
	if (!k)
		goto nomem;
	snprintf(k->id, sizeof(k->id), "%s", name);
	cJSON_ArrayForEach(dev, json_list(json_get(spec, "devices"))) {
		const char *dn = json_str(dev, "name");
		struct dra_device *d;
		void *old = NULL;

		if (!dn || !dn[0] || strlen(dn) > 253)
			continue;
		d = calloc(1, sizeof(*d));
		if (!d || !keys_add(k, driver, pool, dn)) {
			free(d);
			break;
		}
		memcpy(d->key, k->keys[k->n - 1], sizeof(d->key));
		device_read(d, dev, name, node);
		if (strmap_put(&c->dra_devices, d->key, strlen(d->key), d, &old) < 0) {
			free(d);
			k->n--;
			break;
		}
		/* The same device in two slices of a pool (its generation rolling
		 * over): the newer one's, counted once. */
		if (old) {
			node_count_add(c, ((struct dra_device *)old)->node, -1);
			free(old);
		}
		node_count_add(c, d->node, 1);
	}
	if (strmap_put(&c->dra_slices, k->id, strlen(k->id), k, NULL) < 0) {
		for (size_t i = 0; i < k->n; i++) {
			struct dra_device *d = strmap_del(&c->dra_devices, k->keys[i],
							  strlen(k->keys[i]));

			if (d)
				node_count_add(c, d->node, -1);
			free(d);
		}
		keys_free(k);
		goto nomem;
	}
	if (was_on[0] && (!node || strcmp(was_on, node) != 0))
		topology_refresh(c, was_on);
	if (node && node[0])
		topology_refresh(c, node);
	claims_sync_all(c);
	return 0;
nomem:
	log_warn("cache", "ResourceSlice %s: out of memory; its devices are not known", name);
	if (was_on[0])
		topology_refresh(c, was_on);
	claims_sync_all(c);
	return 0;
}

/* ---- Claims ------------------------------------------------------------------------ */

static void claim_forget(struct cache *c, const char *uid)
{
	char pod_uid[K8S_UID_BUF + CACHE_DRA_UID_PREFIX_LEN];

	keys_free(strmap_del(&c->dra_claims, uid, strlen(uid)));
	snprintf(pod_uid, sizeof(pod_uid), "dra:%s", uid);
	(void)cache_pod_delete(c, pod_uid);
}

int cache_dra_claim(struct cache *c, const cJSON *claim, bool deleted, char *err, size_t errlen)
{
	const cJSON *meta = json_obj(claim, "metadata"), *r;
	const cJSON *results = json_get(json_obj(json_obj(json_obj(claim, "status"), "allocation"),
						 "devices"), "results");
	const char *uid = json_str(meta, "uid"), *name = json_str(meta, "name");
	const char *ns = json_str(meta, "namespace");
	struct dra_keys *k;

	cache__writer_check(c);
	if (!uid || !uid[0] || strlen(uid) > K8S_UID_MAX || !name || !name[0] ||
	    strlen(name) > K8S_NAME_MAX || (ns && strlen(ns) > K8S_NAMESPACE_MAX)) {
		snprintf(err, errlen, "ResourceClaim has no valid metadata.uid or name");
		return -EINVAL;
	}
	claim_forget(c, uid);
	if (deleted)
		return 0;
	k = calloc(1, sizeof(*k));
	if (!k)
		goto nomem;
	snprintf(k->id, sizeof(k->id), "%s", uid);
	snprintf(k->ns, sizeof(k->ns), "%s", ns && ns[0] ? ns : "default");
	snprintf(k->name, sizeof(k->name), "%s", name);
	cJSON_ArrayForEach(r, json_list(results)) {
		const char *driver = json_str(r, "driver"), *pool = json_str(r, "pool");
		const char *dev = json_str(r, "device");

		if (!managed_driver(c, driver) || !pool || !dev || strlen(pool) > 253 ||
		    strlen(dev) > 253)
			continue;
		if (!keys_add(k, driver, pool, dev)) {
			keys_free(k);
			goto nomem;
		}
	}
	if (!k->n) {
		keys_free(k);   /* not allocated, or none of troupe's drivers */
		return 0;
	}
	if (strmap_put(&c->dra_claims, k->id, strlen(k->id), k, NULL) < 0) {
		keys_free(k);
		goto nomem;
	}
	claim_sync(c, k);
	return 0;
nomem:
	log_warn("cache", "ResourceClaim %s/%s: out of memory; its devices are not held",
		 ns ? ns : "default", name);
	return 0;
}

void cache_dra_sweep(struct cache *c, bool claims, bool (*keep)(const char *key, void *arg),
		     void *arg)
{
	struct strmap *map = claims ? &c->dra_claims : &c->dra_slices;
	size_t pos = 0;
	void *v;

	cache__writer_check(c);
	while (strmap_next(map, &pos, NULL, &v)) {
		const struct dra_keys *k = v;
		char id[sizeof(k->id)];

		if (keep(k->id, arg))
			continue;
		memcpy(id, k->id, sizeof(id));
		if (claims) {
			claim_forget(c, id);
		} else {
			char was_on[K8S_NAME_BUF];

			slice_forget(c, id, was_on);
			if (was_on[0])
				topology_refresh(c, was_on);
		}
		pos = 0;        /* the map changed: walk it again */
	}
	if (!claims)
		claims_sync_all(c);
}

void cache__dra_fini(struct cache *c)
{
	size_t pos = 0;
	void *v;

	while (strmap_next(&c->dra_devices, &pos, NULL, &v))
		free(v);
	strmap_fini(&c->dra_devices);
	pos = 0;
	while (strmap_next(&c->dra_slices, &pos, NULL, &v))
		keys_free(v);
	strmap_fini(&c->dra_slices);
	pos = 0;
	while (strmap_next(&c->dra_claims, &pos, NULL, &v))
		keys_free(v);
	strmap_fini(&c->dra_claims);
	pos = 0;
	while (strmap_next(&c->dra_nodes, &pos, NULL, &v))
		free(v);
	strmap_fini(&c->dra_nodes);
	pos = 0;
	while (strmap_next(&c->dra_topo, &pos, NULL, &v))
		free(v);
	strmap_fini(&c->dra_topo);
	pthread_mutex_destroy(&c->dra_nodes_lock);
}
