/* Topology classes for nodes: derived once per node record on the cache
 * writer thread (cache_opts.node_derive), interned so that every node with the
 * same matrix shares one class and one memo, and released when the last node
 * record using it is reclaimed.
 *
 * Where a node's topology comes from, first match wins: the annotation
 * troupe.io/gpu-topology (nvidia-smi topo -m text), the built-in profile for
 * its GPU Feature Discovery labels (nvidia.com/gpu.product and .count), or
 * nothing (unknown: every pair equal, NVLink never promised).
 */
#include "placement/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/strmap.h"

struct placement_registry {
	struct strmap classes;          /* hex hash -> struct placement_topo; writer only */
	uint64_t parse_errors;          /* relaxed atomic: malformed annotations seen */
	uint64_t classes_live;          /* relaxed atomic */
};

/* A class's key in the table: its hash as 16 hex digits, NUL, rounded up. */
enum { CLASS_KEY_BUF = 24 };

struct interned {
	char key[CLASS_KEY_BUF];
	struct placement_topo topo;     /* must stay the last member's address target */
};

static uint64_t topo_hash(const struct placement_topo *t)
{
	uint64_t h = strmap_hash((const char *)t->numa, t->n);

	for (unsigned i = 0; i < t->n; i++)
		h ^= strmap_hash((const char *)t->link[i], t->n) + 0x9e3779b97f4a7c15ULL + (h << 6) +
		     (h >> 2);
	return h ^ ((uint64_t)t->n << 56) ^ (t->known ? 1 : 0);
}

static bool same_topo(const struct placement_topo *a, const struct placement_topo *b)
{
	if (a->n != b->n || a->known != b->known || memcmp(a->numa, b->numa, a->n))
		return false;
	for (unsigned i = 0; i < a->n; i++)
		if (memcmp(a->link[i], b->link[i], a->n))
			return false;
	return true;
}

struct placement_registry *placement_registry_new(void)
{
	struct placement_registry *r = calloc(1, sizeof(*r));

	if (r)
		strmap_init(&r->classes);
	return r;
}

void placement_registry_free(struct placement_registry *r)
{
	size_t pos = 0;
	void *v;

	if (!r)
		return;
	while (strmap_next(&r->classes, &pos, NULL, &v))
		free(v);
	strmap_fini(&r->classes);
	free(r);
}

void placement_registry_stats(const struct placement_registry *r, uint64_t *classes,
			      uint64_t *parse_errors)
{
	*classes = __atomic_load_n(&r->classes_live, __ATOMIC_RELAXED);
	*parse_errors = __atomic_load_n(&r->parse_errors, __ATOMIC_RELAXED);
}

static void class_key(uint64_t hash, char key[CLASS_KEY_BUF])
{
	snprintf(key, CLASS_KEY_BUF, "%016llx", (unsigned long long)hash);
}

/* Return the shared class equal to <t>, taking a reference. */
static struct placement_topo *intern(struct placement_registry *r, const struct placement_topo *t)
{
	uint64_t h = topo_hash(t);
	char key[CLASS_KEY_BUF];
	struct interned *in;

	class_key(h, key);
	in = strmap_get(&r->classes, key, strlen(key));
	if (in && same_topo(&in->topo, t)) {
		in->topo.refs++;
		return &in->topo;
	}
	if (in) {
		/* A hash collision between different matrices: keep them apart by
		 * not sharing (rare enough never to matter for memory). */
		log_warn("placement", "topology hash collision; not sharing a class");
	}
	in = aligned_alloc(64, (sizeof(*in) + 63) & ~(size_t)63);
	if (!in)
		return NULL;
	memset(in, 0, sizeof(*in));
	memcpy(in->key, key, sizeof(key));
	in->topo = *t;
	memset(in->topo.memo, 0, sizeof(in->topo.memo));
	memset(in->topo.island, 0, sizeof(in->topo.island));
	memset(in->topo.score, 0, sizeof(in->topo.score));
	in->topo.hash = h;
	in->topo.refs = 1;
	if (!strmap_get(&r->classes, key, strlen(key)) &&
	    strmap_put(&r->classes, in->key, strlen(in->key), in, NULL) < 0) {
		free(in);
		return NULL;
	}
	__atomic_add_fetch(&r->classes_live, 1, __ATOMIC_RELAXED);
	return &in->topo;
}

void *placement_topo_derive(const struct cache_node *node, void *ctx)
{
	struct placement_registry *r = ctx;
	struct placement_topo *t;
	const char *product, *count;
	char err[256];
	void *ret = NULL;

	/* A shared node's devices are replica slots: links join whole GPUs, and
	 * troupe never scores slots by them. */
	if (node->gpu_capacity == 0 || cache_node_shared(node))
		return NULL;
	t = malloc(sizeof(*t));
	if (!t)
		return NULL;
	if (node->topology_text) {
		if (placement_topo_parse(node->topology_text, strlen(node->topology_text), t, err,
					 sizeof(err)) < 0) {
			__atomic_add_fetch(&r->parse_errors, 1, __ATOMIC_RELAXED);
			log_warn("placement", "node %s: annotation troupe.io/gpu-topology is not "
				 "nvidia-smi topo -m output (%s); its topology is unknown", node->name,
				 err);
			goto out;
		}
		if (t->n != node->gpu_capacity) {
			__atomic_add_fetch(&r->parse_errors, 1, __ATOMIC_RELAXED);
			log_warn("placement", "node %s: troupe.io/gpu-topology shows %u GPUs but the "
				 "node has %u; its topology is unknown", node->name, t->n,
				 node->gpu_capacity);
			goto out;
		}
		ret = intern(r, t);
		goto out;
	}
	product = cache_node_label(node, "nvidia.com/gpu.product");
	count = cache_node_label(node, "nvidia.com/gpu.count");
	if (product && placement_topo_profile(product, count ? (unsigned)strtoul(count, NULL, 10)
								 : node->gpu_capacity, t) == 0 &&
	    t->n == node->gpu_capacity) {
		ret = intern(r, t);
		goto out;
	}
	/* Last, what the node's DRA slices' standard attributes say (PCIe
	 * roots and NUMA nodes: no NVLink). */
	if (node->dra_topology_text &&
	    placement_topo_parse(node->dra_topology_text, strlen(node->dra_topology_text), t, err,
				 sizeof(err)) == 0 && t->n == node->gpu_capacity) {
		snprintf(t->source, sizeof(t->source), "dra");
		ret = intern(r, t);
	}
out:
	free(t);
	return ret;
}

void placement_topo_release(void *derived, void *ctx)
{
	struct placement_registry *r = ctx;
	struct placement_topo *t = derived;
	struct interned *in;
	char key[CLASS_KEY_BUF];

	if (!t || --t->refs > 0)
		return;
	class_key(t->hash, key);
	in = (struct interned *)((char *)t - offsetof(struct interned, topo));
	if (strmap_get(&r->classes, key, strlen(key)) == in)
		strmap_del(&r->classes, key, strlen(key));
	__atomic_sub_fetch(&r->classes_live, 1, __ATOMIC_RELAXED);
	free(in);
}
