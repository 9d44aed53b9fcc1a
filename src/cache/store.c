/* The store as a whole: creating and freeing it, its options, the synced
 * flag, the writer token, and the counters for logs and /debug.
 *
 * What the store holds and how is split by decision (internal.h lists the
 * files): node entries and lookups, usage, pods, pod groups, reservations and
 * the epochs that reclaim what readers may still see. Each file starts from
 * struct cache in internal.h.
 */
#include "cache/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t cache_generation;

struct cache *cache_new(const struct cache_opts *opts)
{
	struct cache *c;

	if (!opts || opts->n_gpu_resources == 0 || opts->n_gpu_resources > CACHE_MAX_GPU_RESOURCES) {
		errno = EINVAL;
		return NULL;
	}
	/* Aligned as its type asks (the stripes and the change counts are
	 * 64-byte aligned); calloc promises only 16. */
	c = aligned_alloc(64, (sizeof(*c) + 63) & ~(size_t)63);
	if (!c)
		return NULL;
	memset(c, 0, sizeof(*c));
	c->opts = *opts;
	c->gen = __atomic_add_fetch(&cache_generation, 1, __ATOMIC_RELAXED);
	/* The creating thread writes until another claims the cache. */
	c->writer_thread = pthread_self();
	ck_epoch_init(&c->epoch);
	c->writer = calloc(1, sizeof(*c->writer));
	if (!c->writer)
		goto fail;
	ck_epoch_register(&c->epoch, c->writer, NULL);
	/* A fixed seed: the same cluster walks in the same order every run. */
	if (nameidx_init(&c->nodes, 1024, 0x74726f75ULL) < 0)
		goto fail_ht;
	pthread_mutex_init(&c->readers_lock, NULL);
	pthread_mutex_init(&c->groups_lock, NULL);
	for (int a = 0; a < CACHE_PG_API_COUNT; a++)
		strmap_init(&c->groups[a]);
	for (int a = 0; a < CACHE_Q_API_COUNT; a++)
		strmap_init(&c->queues[a]);
	strmap_init(&c->dra_devices);
	strmap_init(&c->dra_slices);
	strmap_init(&c->dra_claims);
	strmap_init(&c->dra_nodes);
	strmap_init(&c->dra_topo);
	pthread_mutex_init(&c->dra_nodes_lock, NULL);
	pthread_mutex_init(&c->members_lock, NULL);
	strmap_init(&c->members);
	for (int i = 0; i < POD_STRIPES; i++) {
		pthread_mutex_init(&c->pods[i].lock, NULL);
		strmap_init(&c->pods[i].map);
	}
	return c;
fail_ht:
	free(c->writer);
fail:
	free(c);
	errno = ENOMEM;
	return NULL;
}

void cache_free(struct cache *c)
{
	if (!c)
		return;
	/* No other thread may use the cache now, so this one is its writer. */
	cache_writer_claim(c);
	/* Run every deferred free: no reader may be active when cache_free runs. */
	ck_epoch_barrier(c->writer);
	cache__pods_fini(c);
	cache__nodes_fini(c);
	cache__groups_fini(c);
	cache__dra_fini(c);
	ck_epoch_barrier(c->writer);
	cache__readers_free(c);
	pthread_mutex_destroy(&c->readers_lock);
	free(c->writer);
	free(c);
}

const struct cache_opts *cache_get_opts(const struct cache *c)
{
	return &c->opts;
}

void cache_writer_claim(struct cache *c)
{
	/* Relaxed: see cache__is_writer. */
	__atomic_store_n(&c->writer_thread, pthread_self(), __ATOMIC_RELAXED);
}

bool cache_writer_is_current(const struct cache *c)
{
	return cache__is_writer(c);
}

void cache_set_synced(struct cache *c, bool synced)
{
	__atomic_store_n(&c->synced, synced, __ATOMIC_RELEASE);
}

void cache_set_live(struct cache *c)
{
	__atomic_store_n(&c->live, true, __ATOMIC_RELEASE);
}

bool cache_is_live(const struct cache *c)
{
	return __atomic_load_n(&c->live, __ATOMIC_ACQUIRE);
}

bool cache_is_synced(const struct cache *c)
{
	return __atomic_load_n(&c->synced, __ATOMIC_ACQUIRE);
}

/* ---- Statistics ----------------------------------------------------------- */

static bool stats_node(const struct cache_node_view *v, void *arg)
{
	struct cache_stats *st = arg;

	st->nodes++;
	st->gpus_allocatable += v->node->gpu_allocatable;
	if (v->node->ready && !v->node->unschedulable) {
		st->ready_gpus += v->node->gpu_allocatable;
		st->ready_cpu_milli += v->node->cpu_milli;
		st->ready_mem_bytes += v->node->mem_bytes;
	}
	st->gpus_held += (uint64_t)__builtin_popcountll(v->used) + v->unattributed;
	return true;
}

void cache_get_stats(struct cache *c, struct cache_stats *out)
{
	memset(out, 0, sizeof(*out));
	cache_read_begin(c);
	cache_node_foreach(c, stats_node, out);
	cache_read_end(c);
	for (int i = 0; i < POD_STRIPES; i++) {
		size_t pos = 0;
		void *v;

		pthread_mutex_lock(&c->pods[i].lock);
		while (strmap_next(&c->pods[i].map, &pos, NULL, &v)) {
			struct pod_entry *e = v;

			out->pods++;
			if (e->node_entry)
				out->pods_holding++;
			if (e->pod && e->pod->devices_actual) {
				out->pods_read_back++;
				out->pods_read_back_differ += e->pod->planned != e->pod->devices;
			}
		}
		pthread_mutex_unlock(&c->pods[i].lock);
	}
	pthread_mutex_lock(&c->groups_lock);
	out->podgroups = 0;
	for (int a = 0; a < CACHE_PG_API_COUNT; a++)
		out->podgroups += strmap_count(&c->groups[a]);
	pthread_mutex_unlock(&c->groups_lock);
}
