/* Node entries: the lock-free lookups filter and prioritize make of every
 * node (one at a time, in prefetching batches, or all of them), what a view
 * has free, and the writer's side — publishing, replacing and deleting node
 * records, creating and dropping node entries, and the sweep of nodes a relist
 * no longer shows. internal.h says how an entry lives and dies.
 *
 * The lookups are bench_verbs' hot path: they stay together here, and what
 * they share with the pod table (node_entry_get, usage_load) is static inline
 * in internal.h.
 */
#include "cache/api_internal.h"
#include "cache/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

/* ---- Readers --------------------------------------------------------- */

bool cache_node_lookup(struct cache *c, const char *name, size_t len,
		       struct cache_node_view *out)
{
	struct node_entry *e = node_entry_get(c, name, len);
	struct cache_node *rec;

	if (!e)
		return false;
	/* Acquire: pairs with the release store in cache_node_upsert, so the
	 * record's contents are visible once its pointer is. */
	rec = __atomic_load_n(&e->rec, __ATOMIC_ACQUIRE);
	if (!rec)
		return false;
	out->node = rec;
	usage_load(e, &out->used, &out->unattributed);
	return true;
}

void cache_node_lookup_many(struct cache *c, const struct cache_name *names, size_t n,
			    struct cache_node_view *out, bool *found)
{
	const struct nameidx_table *t = nameidx_table(&c->nodes);
	uint64_t h[CACHE_LOOKUP_BATCH];
	struct node_entry *e[CACHE_LOOKUP_BATCH];

	assert(n <= CACHE_LOOKUP_BATCH);

	/* In stages, each prefetching what the next reads, so the batch's
	 * cache misses overlap: hash and fetch the buckets; take each bucket's
	 * first candidate and fetch the node entry; check the name and fetch the
	 * record. */
	for (size_t i = 0; i < n; i++) {
		h[i] = nameidx_hash(&c->nodes, names[i].s, names[i].len);
		__builtin_prefetch(nameidx_bucket(t, h[i]));
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t pos = h[i] & t->mask;

		e[i] = nameidx_next_match(t, h[i], &pos);
		if (e[i])
			__builtin_prefetch(e[i]->usage);
	}
	for (size_t i = 0; i < n; i++) {
		const char *nm = names[i].s;
		size_t len = names[i].len;
		struct cache_node *rec;

		found[i] = false;
		if (len == 0 || len > UINT16_MAX)
			continue;
		if (!e[i] || e[i]->name_len != len || memcmp(e[i]->name, nm, len) != 0)
			/* Rare: a collision. */
			e[i] = node_entry_find(t, h[i], h[i] & t->mask, nm, len);
		if (!e[i])
			continue;
		/* Acquire: pairs with the release store in cache_node_upsert. */
		rec = __atomic_load_n(&e[i]->rec, __ATOMIC_ACQUIRE);
		if (!rec)
			continue;
		__builtin_prefetch(rec);        /* the fit check reads its first line */
		out[i].node = rec;
		usage_load(e[i], &out[i].used, &out[i].unattributed);
		found[i] = true;
	}
}

bool cache_usage_lookup(struct cache *c, const char *name, size_t len, uint64_t *used,
			uint32_t *unattributed)
{
	struct node_entry *e = node_entry_get(c, name, len);

	if (!e)
		return false;
	usage_load(e, used, unattributed);
	return true;
}

void cache_node_foreach(struct cache *c, bool (*fn)(const struct cache_node_view *, void *),
			void *arg)
{
	const struct nameidx_table *t = nameidx_table(&c->nodes);
	uint64_t pos = 0;
	struct node_entry *e;

	while ((e = nameidx_iter(t, &pos))) {
		struct cache_node_view v;

		/* Acquire: pairs with the release store in cache_node_upsert. */
		v.node = __atomic_load_n(&e->rec, __ATOMIC_ACQUIRE);
		if (!v.node)
			continue;
		usage_load(e, &v.used, &v.unattributed);
		if (!fn(&v, arg))
			break;
	}
}

uint32_t cache_view_free_gpus(const struct cache_node_view *v)
{
	int64_t free_n = usage_free_bound(v->node, v->used, v->unattributed);

	return free_n > 0 ? (uint32_t)free_n : 0;
}

uint64_t cache_view_free_mask(const struct cache_node_view *v)
{
	return cache_view_free_gpus(v) ? usage_free_devices(v->node, v->used) : 0;
}

uint32_t cache_view_free_for(const struct cache_node_view *v, int r)
{
	const struct cache_node *n = v->node;
	uint64_t mine;
	int64_t by_alloc, by_devices;

	if (!n->res_mask)
		return n->gpu_resource == r ? cache_view_free_gpus(v) : 0;
	mine = cache_node_res_devices(n, r);
	by_alloc = (int64_t)cache_node_res_allocatable(n, r) - __builtin_popcountll(v->used & mine) -
		   (int64_t)v->unattributed;
	by_devices = __builtin_popcountll(usage_free_devices(n, v->used) & mine) -
		     (int64_t)v->unattributed;
	if (by_devices < by_alloc)
		by_alloc = by_devices;
	return by_alloc > 0 ? (uint32_t)by_alloc : 0;
}

uint64_t cache_view_free_mask_for(const struct cache_node_view *v, int r)
{
	if (!v->node->res_mask)
		return v->node->gpu_resource == r ? cache_view_free_mask(v) : 0;
	return cache_view_free_for(v, r) ? usage_free_devices(v->node, v->used) &
						   cache_node_res_devices(v->node, r)
					 : 0;
}

/* ---- Writer: node entries -------------------------------------------------- */

struct node_entry *cache__node_entry_create(struct cache *c, const char *name, size_t len)
{
	struct node_entry *e;
	struct nameidx_table *old;

	cache__writer_check(c);
	if (len == 0 || len > UINT16_MAX)
		return NULL;
	e = aligned_alloc(64, (sizeof(*e) + len + 1 + 63) & ~(size_t)63);
	if (!e)
		return NULL;
	memset(e, 0, sizeof(*e));
	pthread_mutex_init(&e->pods_lock, NULL);
	memcpy(e->name, name, len);
	e->name[len] = '\0';
	e->name_len = (uint16_t)len;
	if (nameidx_put(&c->nodes, nameidx_hash(&c->nodes, e->name, len), e, &old) < 0) {
		pthread_mutex_destroy(&e->pods_lock);
		free(e);
		return NULL;
	}
	if (old)        /* readers may still probe the old table */
		cache__retire_table(c, old);
	c->n_tombstones++;
	return e;
}

void cache__node_entry_maybe_remove(struct cache *c, struct node_entry *e)
{
	/* seq_cst load of the record and of refs: with the seq_cst store of NULL
	 * in cache_node_delete, they pair with the increment-then-load in
	 * cache_pod_assume (Dekker), so one side always sees the other. */
	cache__writer_check(c);
	if (__atomic_load_n(&e->rec, __ATOMIC_SEQ_CST))
		return;
	if (__atomic_load_n(&e->refs, __ATOMIC_SEQ_CST) != 0)
		return;
	if (!nameidx_remove(&c->nodes, nameidx_hash(&c->nodes, e->name, e->name_len), e))
		return;
	c->n_tombstones--;
	cache__retire_node_entry(c, e);
}

/* ---- Writer: node records --------------------------------------------------- */

int cache_node_upsert(struct cache *c, struct cache_node *node)
{
	size_t len = strlen(node->name);
	struct node_entry *e;
	struct cache_node *old;

	cache__writer_check(c);
	e = node_entry_get(c, node->name, len);
	if (!e)
		e = cache__node_entry_create(c, node->name, len);
	if (!e) {
		cache_node_free(node);
		return -ENOMEM;
	}
	/* What the node's DRA slices say of its topology, for a node without the
	 * annotation (node_derive ranks it after a built-in profile). */
	if (!node->topology_text && !node->dra_topology_text) {
		const char *t = cache__dra_topology(c, node->name);

		node->dra_topology_text = t ? strdup(t) : NULL;
	}
	/* Derived data is computed here, on the writer, never on the read path;
	 * the topology texts are needed only for that, so they go before
	 * publishing. */
	if (c->opts.node_derive)
		node->derived = c->opts.node_derive(node, c->opts.hook_ctx);
	free((char *)node->topology_text);
	node->topology_text = NULL;
	free((char *)node->dra_topology_text);
	node->dra_topology_text = NULL;
	old = e->rec;
	/* Release (seq_cst includes it): the record's contents are visible
	 * before its pointer. Pairs with the acquire loads in cache_node_lookup
	 * and cache_node_foreach. */
	change_begin(c);
	__atomic_store_n(&e->rec, node, __ATOMIC_SEQ_CST);
	change_end(c);
	if (old)
		cache__retire_node(c, old);
	else {
		c->n_tombstones--;
		__atomic_add_fetch(&c->n_nodes, 1, __ATOMIC_RELAXED);
	}
	return 0;
}

int cache_node_delete(struct cache *c, const char *name)
{
	struct node_entry *e;
	struct cache_node *old;

	cache__writer_check(c);
	e = node_entry_get(c, name, strlen(name));
	if (!e || !e->rec)
		return -ENOENT;
	old = e->rec;
	/* seq_cst store: pairs with the record load after refs++ in assume. */
	change_begin(c);
	__atomic_store_n(&e->rec, NULL, __ATOMIC_SEQ_CST);
	change_end(c);
	c->n_tombstones++;
	__atomic_sub_fetch(&c->n_nodes, 1, __ATOMIC_RELAXED);
	cache__retire_node(c, old);
	cache__node_entry_maybe_remove(c, e);
	return 0;
}

void cache_writer_reclaim(struct cache *c)
{
	cache__writer_check(c);
	if (c->n_tombstones > 0) {
		/* At most this many per call: the rest wait for the next. */
		struct node_entry *dead[256], *e;
		uint64_t pos = 0;
		size_t n = 0;

		while (n < sizeof(dead) / sizeof(dead[0]) && (e = nameidx_iter(c->nodes.t, &pos))) {
			if (!e->rec && __atomic_load_n(&e->refs, __ATOMIC_SEQ_CST) == 0)
				dead[n++] = e;
		}
		for (size_t i = 0; i < n; i++)
			cache__node_entry_maybe_remove(c, dead[i]);
	}
	ck_epoch_poll(c->writer);
}

void cache__node_sweep(struct cache *c, bool (*keep)(const char *name, void *arg), void *arg)
{
	char **gone = NULL;
	size_t n = 0, cap = 0;
	uint64_t pos = 0;
	struct node_entry *e;

	cache__writer_check(c);
	/* Collect first, then delete. */
	while ((e = nameidx_iter(c->nodes.t, &pos))) {
		if (!e->rec || keep(e->name, arg))
			continue;
		if (n == cap) {
			char **g = realloc(gone, (cap = cap ? cap * 2 : 64) * sizeof(*g));

			if (!g)
				break;
			gone = g;
		}
		gone[n] = strdup(e->name);
		if (gone[n])
			n++;
	}
	for (size_t i = 0; i < n; i++) {
		log_info("cache", "node %s is gone from the API server; removed", gone[i]);
		cache_node_delete(c, gone[i]);
		free(gone[i]);
	}
	free(gone);
}

void cache__nodes_fini(struct cache *c)
{
	uint64_t at = 0;
	struct node_entry *e;

	while ((e = nameidx_iter(c->nodes.t, &at))) {
		pthread_mutex_destroy(&e->pods_lock);
		cache__node_free(c, e->rec);
		free(e);
	}
	nameidx_free(&c->nodes);
}
