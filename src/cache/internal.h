/* Shared only inside cache/: the store's types and the rules its files share.
 *
 * The store is split by decision: the cache as a whole, its writer token and
 * its counters (store.c), epoch records and what they reclaim (epoch.c), node
 * entries and the lock-free lookups (nodes.c), usage compare-and-swap and the
 * change counts (usage.c), the pod table (pods.c), pod groups and the member
 * index (groups.c), gang reservations (reserve.c). What more than one of them
 * needs on a hot path is here as static inline, so the split costs no call.
 *
 * Node entries. The name index maps a node name to a node entry that lives as
 * long as anything refers to the name. An entry carries the current immutable
 * node record (NULL while the node is unknown or deleted) and the node's usage:
 *
 *     usage[0]  mask of devices occupied by pods whose devices are known
 *     usage[1]  GPUs occupied by pods whose devices troupe does not know
 *
 * Both words change only together, by ck_pr_cas_64_2, so "these devices are
 * free and the node has room" is checked and claimed in one step. Readers load
 * the two words separately: a torn view can only make filter's answer stale by
 * one event, and bind re-checks with the CAS.
 *
 * Node entry lifetime. refs counts the pods occupying the node and in-flight
 * assumes. The writer removes an entry only when its record is NULL and refs
 * is 0; an assume increments refs before it loads the record. Both sides use
 * sequentially consistent operations (the Dekker pattern), so either the
 * assume sees the record gone, or the writer sees the reference and keeps the
 * entry.
 *
 * Pods. The pod table is striped: 64 mutex-guarded maps keyed by UID. Only pod
 * writes take a stripe lock (watch events, remember, assume, forget); node
 * lookups in filter and prioritize never do. No stripe lock is held across I/O
 * or a call into another module. Lock order: a stripe's lock, then a node
 * entry's pods_lock or members_lock.
 *
 * The writer. One thread at a time may call the writer functions (cache.h):
 * the one that created the cache until another claims it. writer_thread names
 * it; every writer function asserts it (debug builds), and only the writer
 * removes node entries from the name index.
 */
#ifndef TROUPE_CACHE_INTERNAL_H
#define TROUPE_CACHE_INTERNAL_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <ck_epoch.h>

#include "cache/cache.h"
#include "cache/nameidx.h"
#include "common/limits.h"
#include "common/strmap.h"

enum { POD_STRIPES = 64 };

struct node_entry {
	/* Cold: the first cache line, touched by pod writes only. */
	pthread_mutex_t pods_lock;      /* guards pods (taken after a stripe lock) */
	struct pod_entry *pods;         /* entries occupying GPUs here; guarded by pods_lock */
	ck_epoch_entry_t epoch_entry;   /* for retiring the entry */
	/* Hot: from the second line on, what a lookup reads, in one line for names
	 * up to 34 bytes (cache_node_lookup_many prefetches it). */
	/* [0] device mask, [1] unattributed count: changed only by ck_pr_cas_64_2. */
	uint64_t usage[2] __attribute__((aligned(64)));
	/* Published by the writer with a release store; readers load it inside a
	 * read section. NULL: the node is unknown (usage kept for its pods). */
	struct cache_node *rec;
	unsigned int refs;              /* occupying pods + in-flight assumes (seq_cst) */
	uint16_t name_len;
	char name[];
};

struct pod_entry {
	char *uid;                      /* key; owned */
	enum cache_pod_state state;
	bool from_api;                  /* seen in the cluster state, not only in a filter */
	bool reservation;               /* devices kept for a gang's future member */
	bool posted;                    /* troupe's Binding was accepted (201/409 same node) */
	/* Counted in cache.filter_only.n: known only from a filter call and
	 * occupying nothing (pods.c, filter_only_count). */
	bool filter_only;
	uint64_t uncertain_ns;          /* a Binding's outcome is unknown since; 0: not */
	uint64_t seen_ns;               /* when a filter remembered it (not from the API) */
	uint64_t known_ns;              /* when troupe first learnt of it */
	struct cache_pod *pod;          /* latest parsed object; owned */
	struct node_entry *node_entry;  /* occupying GPUs on this node (a ref), or NULL */
	struct pod_entry *node_prev;    /* in node_entry->pods; guarded by its pods_lock */
	struct pod_entry *node_next;
	uint64_t occupied_devices;
	uint32_t occupied_unattr;
};

struct stripe {
	pthread_mutex_t lock;
	struct strmap map;              /* uid -> pod_entry; guarded by lock */
} __attribute__((aligned(64)));

struct reader_rec;

struct cache {
	struct cache_opts opts;
	uint64_t gen;                   /* tells thread-local reader records apart */
	ck_epoch_t epoch;
	ck_epoch_record_t *writer;      /* used only by the single writer */
	pthread_t writer_thread;        /* who the writer is (relaxed atomic) */
	struct nameidx nodes;           /* name -> struct node_entry; writer mutates */
	unsigned int n_nodes;           /* writer writes, anyone reads (relaxed) */
	unsigned int n_tombstones;      /* entries with no record; writer only */
	unsigned long n_retired;        /* records retired so far; writer only */
	bool synced;                    /* relaxed atomic */
	/* An informer feeds this cache (relaxed atomic): pods known only from
	 * filter calls then never count as pod-group members. */
	bool live;
	pthread_mutex_t readers_lock;
	struct reader_rec *readers;     /* guarded by readers_lock */
	struct stripe pods[POD_STRIPES];
	pthread_mutex_t groups_lock;
	/* Per PodGroup API: "ns/name" -> struct podgroup; guarded by groups_lock. */
	struct strmap groups[CACHE_PG_API_COUNT];
	/* Per Queue API: name -> struct cache_queue; guarded by groups_lock too. */
	struct strmap queues[CACHE_Q_API_COUNT];
	/* DRA (dra.c), the writer's alone: "driver/pool/device" -> struct
	 * dra_device; slice name -> struct dra_keys; claim uid -> struct
	 * dra_claim. */
	struct strmap dra_devices, dra_slices, dra_claims;
	/* Node name -> struct dra_node_count: devices the managed drivers'
	 * slices publish there, for any thread (filter's reason) under
	 * dra_nodes_lock. */
	struct strmap dra_nodes;
	pthread_mutex_t dra_nodes_lock;
	/* Node name -> the `nvidia-smi topo -m` text its slices' standard
	 * attributes give (dra.c), the writer's alone. */
	struct strmap dra_topo;
	size_t dra_nodes_n;             /* its entries (atomic): 0 spares readers the lock */
	/* Pod-group members by group, so a gang's counts cost its members, not
	 * every pod. Lock order: a stripe's lock, then members_lock. */
	pthread_mutex_t members_lock;
	struct strmap members;          /* "ns/group" -> struct members; guarded by members_lock */
	bool members_lost;              /* an update failed (no memory): scan every pod */
	/* Pods known only from filter calls (pods.c): how many, against
	 * opts.max_filter_only_pods; what the cap dropped and refused; when it
	 * last logged each (apart: drops come first under a flood, and would
	 * otherwise silence every refusal); whether a thread is dropping now.
	 * Relaxed atomics: n is changed under the pod's stripe lock, read
	 * without one. */
	struct {
		size_t n;
		uint64_t dropped, refused;
		uint64_t logged_ns, refused_logged_ns;
		bool dropping;
	} filter_only;
	/* Changes to node records and usage, begun and done (seq_cst), on a line
	 * of their own: binds bump them, every lookup reads the lines above. */
	struct {
		uint64_t begun, done;
	} changes __attribute__((aligned(64)));
};

/* ---- The writer (store.c) ---------------------------------------------------- */

static inline bool cache__is_writer(const struct cache *c)
{
	/* Relaxed: a claim is ordered after the previous writer's last write by
	 * whatever handed the cache over (thread creation, a join). */
	return pthread_equal(__atomic_load_n(&c->writer_thread, __ATOMIC_RELAXED), pthread_self());
}

/* Every writer function starts here: only the writer may write (cache.h). */
static inline void cache__writer_check(const struct cache *c)
{
	assert(cache__is_writer(c) && "a cache writer function called from another thread");
	(void)c;
}

/* ---- Epochs (epoch.c) ------------------------------------------------------ */

/* Free a node record and what the upper layer derived from it. Writer. */
void cache__node_free(struct cache *c, struct cache_node *n);
/* Writer: free the node record <n>, the record-less node entry <e>, the
 * superseded name-index table <t>, each once no reader can still hold it. */
void cache__retire_node(struct cache *c, struct cache_node *n);
void cache__retire_node_entry(struct cache *c, struct node_entry *e);
void cache__retire_table(struct cache *c, struct nameidx_table *t);
/* Free every reader record: cache_free, once no reader is left. */
void cache__readers_free(struct cache *c);

/* ---- Node entries (nodes.c) ------------------------------------------------- */

/* The node entry named <name> among the values under <hash> in <t>, probing
 * from <pos>, or NULL. */
static inline struct node_entry *node_entry_find(const struct nameidx_table *t, uint64_t hash,
						 uint64_t pos, const char *name, size_t len)
{
	struct node_entry *e;

	while ((e = nameidx_next_match(t, hash, &pos)))
		if (e->name_len == len && memcmp(e->name, name, len) == 0)
			return e;
	return NULL;
}

static inline struct node_entry *node_entry_get(struct cache *c, const char *name, size_t len)
{
	uint64_t h;

	if (len == 0 || len > UINT16_MAX)
		return NULL;
	h = nameidx_hash(&c->nodes, name, len);
	return node_entry_find(nameidx_table(&c->nodes), h, h, name, len);
}

static inline void node_entry_ref(struct node_entry *e)
{
	__atomic_add_fetch(&e->refs, 1, __ATOMIC_SEQ_CST);
}

static inline void node_entry_unref(struct node_entry *e)
{
	__atomic_sub_fetch(&e->refs, 1, __ATOMIC_SEQ_CST);
}

/* The by-node index: put <p> first in, or take it out of, the list of pods
 * occupying GPUs on <e>. e->pods_lock held. */
static inline void node_entry_list_push(struct node_entry *e, struct pod_entry *p)
{
	p->node_prev = NULL;
	p->node_next = e->pods;
	if (e->pods)
		e->pods->node_prev = p;
	e->pods = p;
}

static inline void node_entry_list_remove(struct node_entry *e, struct pod_entry *p)
{
	if (p->node_prev)
		p->node_prev->node_next = p->node_next;
	else
		e->pods = p->node_next;
	if (p->node_next)
		p->node_next->node_prev = p->node_prev;
	p->node_prev = p->node_next = NULL;
}

/* Writer: a node entry for <name>, new and record-less (a tombstone), or NULL
 * when out of memory or the name is empty or too long. */
struct node_entry *cache__node_entry_create(struct cache *c, const char *name, size_t len);
/* dra.c: the topology text the node's slices give, or NULL (writer). */
const char *cache__dra_topology(struct cache *c, const char *node);
/* Writer: drop a node entry that has neither a record nor references. */
void cache__node_entry_maybe_remove(struct cache *c, struct node_entry *e);
/* cache_free: every node entry and its record, and the name index. */
void cache__nodes_fini(struct cache *c);

/* ---- Usage (usage.c) -------------------------------------------------------- */

static inline void usage_load(const struct node_entry *e, uint64_t *used, uint32_t *unattr)
{
	/* Relaxed: a snapshot for filter; bind re-checks with the CAS. */
	*used = __atomic_load_n(&e->usage[0], __ATOMIC_RELAXED);
	*unattr = (uint32_t)__atomic_load_n(&e->usage[1], __ATOMIC_RELAXED);
}

/* The devices of node <n> neither taken (<used>) nor unhealthy. */
static inline uint64_t usage_free_devices(const struct cache_node *n, uint64_t used)
{
	return cache_node_capacity_mask(n) & ~used & ~n->unhealthy;
}

/* The GPUs a node can still give pods when <used> devices and <unattr> GPUs of
 * unknown devices are taken: what the kubelet's allocatable leaves, and never
 * more than its healthy devices not taken (devices the annotation calls
 * unhealthy are never free, whatever allocatable says). Negative when more is
 * taken than there is. The one bound filter's view and bind's claim share. */
static inline int64_t usage_free_bound(const struct cache_node *n, uint64_t used,
				       uint32_t unattr)
{
	int64_t free_n = (int64_t)n->gpu_allocatable - __builtin_popcountll(used) -
			 (int64_t)unattr;
	int64_t healthy = __builtin_popcountll(usage_free_devices(n, used)) - (int64_t)unattr;

	return healthy < free_n ? healthy : free_n;
}

/* Bracket every change to a node record or usage (even one that fails). */
static inline void change_begin(struct cache *c)
{
	__atomic_add_fetch(&c->changes.begun, 1, __ATOMIC_SEQ_CST);
}

static inline void change_end(struct cache *c)
{
	__atomic_add_fetch(&c->changes.done, 1, __ATOMIC_SEQ_CST);
}

/* Add (sign 1) or remove (sign -1) what a pod occupies. Adding devices already
 * taken is refused with -EBUSY; watch facts fall back to counting them as
 * unattributed instead. */
int cache__usage_change(struct cache *c, struct node_entry *e, uint64_t devices, uint32_t unattr,
			int sign);
/* Take <want> on node entry <e> (record <rec>) in one step, if every device of
 * it is free and the node has room for them. Returns 0, -EAGAIN (a device is
 * taken) or -ENOSPC (too few free GPUs). */
int cache__usage_claim(struct cache *c, struct node_entry *e, const struct cache_node *rec,
		       uint64_t want);

/* ---- Pods (pods.c) ---------------------------------------------------------- */

/* Whether a pod may still run: neither finished nor being deleted. */
static inline bool pod_is_active(const struct cache_pod *p)
{
	return !p->deleting && p->phase != CACHE_POD_SUCCEEDED && p->phase != CACHE_POD_FAILED;
}

static inline struct stripe *stripe_of(struct cache *c, const char *uid, size_t len)
{
	/* The high bits: the low ones pick the bucket inside the stripe's map. */
	return &c->pods[strmap_hash(uid, len) >> 58];
}

/* ---- Pods known only from filter calls (pods.c) ------------------------------- */

/* Bring <e>'s place in the count up to date: counted while it is known only
 * from a filter call and occupies nothing. Every change to from_api,
 * node_entry or the entry's presence ends here. The stripe lock held. */
static inline void filter_only_count(struct cache *c, struct pod_entry *e)
{
	bool counted = e->pod && !e->from_api && !e->reservation && !e->node_entry;

	if (counted == e->filter_only)
		return;
	e->filter_only = counted;
	if (counted)
		__atomic_add_fetch(&c->filter_only.n, 1, __ATOMIC_RELAXED);
	else
		__atomic_sub_fetch(&c->filter_only.n, 1, __ATOMIC_RELAXED);
}

/* <e> leaves the table. The stripe lock held. */
static inline void filter_only_uncount(struct cache *c, struct pod_entry *e)
{
	if (e->filter_only)
		__atomic_sub_fetch(&c->filter_only.n, 1, __ATOMIC_RELAXED);
	e->filter_only = false;
}

/* Whether the cap may drop <e>: known only from a filter call, occupying
 * nothing, and not in a bind. */
static inline bool filter_only_droppable(const struct pod_entry *e)
{
	return e->filter_only && !e->node_entry && e->state == CACHE_POD_STATE_UNACCOUNTED;
}

/* A new pod entry for <uid> in <st>, pending and occupying nothing, or NULL
 * when out of memory. The stripe lock held. */
struct pod_entry *cache__pod_entry_new(struct stripe *st, const char *uid);
void cache__pod_entry_free(struct pod_entry *e);
/* What the cache holds for <e>, copied out. The pod's stripe lock held. */
void cache__pod_entry_info(const struct pod_entry *e, struct cache_pod_info *out);
/* Release whatever <e> occupies. The stripe lock held. */
void cache__pod_entry_release(struct cache *c, struct pod_entry *e);
/* cache_free: every pod entry and its stripe. */
void cache__pods_fini(struct cache *c);

/* ---- Pod groups (groups.c) -------------------------------------------------- */

/* Pod <uid> was <old> (NULL: new) and is now <now> (NULL: gone): move it
 * between the member lists of their groups. The caller holds the pod's stripe
 * lock. On failure the index is marked lost and member walks scan every pod. */
void cache__members_move(struct cache *c, const char *uid, const struct cache_pod *old,
			 const struct cache_pod *now);
/* Pod <pod> (from the cluster, in the index already) carries a gang plan:
 * keep it as its group's, unless it is the one kept or one finished with.
 * Takes pod->gang_plan (leaves NULL). The caller holds the pod's stripe lock. */
void cache__members_plan(struct cache *c, struct cache_pod *pod);
/* cache_free: the pod-group map and the member index. */
void cache__groups_fini(struct cache *c);
/* cache_free: DRA's slices and claims (dra.c). */
void cache__dra_fini(struct cache *c);

#endif
