/* The store: nodes by name in nameidx, an open-addressing index (one writer,
 * many lock-free readers, batched prefetching lookups), node records published whole and reclaimed through
 * ck_epoch, per-node GPU usage changed by double-word compare-and-swap, and the
 * pod table that says which pod holds what.
 *
 * Slots. The table maps a node name to a slot that lives as long as anything
 * refers to the name. A slot carries the current immutable node record (NULL
 * while the node is unknown or deleted) and the node's usage:
 *
 *     usage[0]  mask of devices held by pods whose devices are known
 *     usage[1]  GPUs held by pods whose devices troupe does not know
 *
 * Both words change only together, by ck_pr_cas_64_2, so "these devices are
 * free and the node has room" is checked and claimed in one step. Readers load
 * the two words separately: a torn view can only make filter's answer stale by
 * one event, and bind re-checks with the CAS.
 *
 * Slot lifetime. slot->refs counts pod holdings and in-flight assumes. The
 * writer removes a slot only when its record is NULL and refs is 0; an assume
 * increments refs before it loads the record. Both sides use sequentially
 * consistent operations (the Dekker pattern), so either the assume sees the
 * record gone, or the writer sees the reference and keeps the slot.
 *
 * Pods. The pod table is striped: 64 mutex-guarded maps keyed by UID. Only pod
 * writes take a stripe lock (watch events, remember, assume, forget); node
 * lookups in filter and prioritize never do. No stripe lock is held across I/O
 * or a call into another module.
 */
#include "cache/cache.h"
#include "cache/api_internal.h"
#include "cache/nameidx.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ck_epoch.h>
#include <ck_pr.h>

#include "common/log.h"
#include "common/strmap.h"
#include "common/util.h"

enum { POD_STRIPES = 64 };

struct slot {
	/* Cold: the first cache line, touched by pod writes only. */
	pthread_mutex_t pods_lock;      /* guards pods (taken after a stripe lock) */
	struct pod_entry *pods;         /* entries holding GPUs here; guarded by pods_lock */
	ck_epoch_entry_t epoch_entry;   /* for retiring the slot */
	/* Hot: from the second line on, what a lookup reads, in one line for names
	 * up to 34 bytes (cache_node_lookup_many prefetches it). */
	/* [0] device mask, [1] unattributed count: changed only by ck_pr_cas_64_2. */
	uint64_t usage[2] __attribute__((aligned(64)));
	/* Published by the writer with a release store; readers load it inside a
	 * read section. NULL: the node is unknown (usage kept for its pods). */
	struct cache_node *rec;
	unsigned int refs;              /* holdings + in-flight assumes (seq_cst) */
	uint16_t name_len;
	char name[];
};

/* A retired node record, freed after the grace period. */
struct retired {
	ck_epoch_entry_t entry;
	struct cache *c;
	struct cache_node *node;
};

struct pod_entry {
	char *uid;                      /* key; owned */
	enum cache_pod_state state;
	bool from_api;                  /* seen in the cluster state, not only in a filter */
	bool reservation;               /* devices held for a gang's future member */
	bool posted;                    /* troupe's Binding was accepted (201/409 same node) */
	uint64_t uncertain_ns;          /* a Binding's outcome is unknown since; 0: not */
	uint64_t seen_ns;               /* when a filter remembered it (not from the API) */
	uint64_t known_ns;              /* when troupe first learnt of it */
	struct cache_pod *pod;          /* latest parsed object; owned */
	struct slot *slot;              /* holding on this node (a ref), or NULL */
	struct pod_entry *node_prev;    /* in slot->pods; guarded by slot->pods_lock */
	struct pod_entry *node_next;
	uint64_t hold_devices;
	uint32_t hold_unattr;
};

struct stripe {
	pthread_mutex_t lock;
	struct strmap map;              /* uid -> pod_entry; guarded by lock */
} __attribute__((aligned(64)));

struct reader_rec {
	ck_epoch_record_t rec;
	struct reader_rec *next;
};

struct cache {
	struct cache_opts opts;
	uint64_t gen;                   /* tells thread-local reader records apart */
	ck_epoch_t epoch;
	ck_epoch_record_t *writer;      /* used only by the single writer */
	struct nameidx nodes;           /* name -> struct slot; writer mutates */
	unsigned int n_nodes;           /* writer writes, anyone reads (relaxed) */
	unsigned int n_tombstones;      /* slots with no record; writer only */
	unsigned long n_retired;        /* records retired so far; writer only */
	bool synced;                    /* relaxed atomic */
	pthread_mutex_t readers_lock;
	struct reader_rec *readers;     /* guarded by readers_lock */
	struct stripe pods[POD_STRIPES];
	pthread_mutex_t groups_lock;
	struct strmap groups;           /* "ns/name" -> struct podgroup; guarded by groups_lock */
	/* Pod-group members by group, so a gang's counts cost its members, not
	 * every pod. Lock order: a stripe's lock, then members_lock. */
	pthread_mutex_t members_lock;
	struct strmap members;          /* "ns/group" -> struct members; guarded by members_lock */
	bool members_lost;              /* an update failed (no memory): scan every pod */
	/* Changes to node records and usage, begun and done (seq_cst), on a line
	 * of their own: binds bump them, every lookup reads the lines above. */
	struct {
		uint64_t begun, done;
	} changes __attribute__((aligned(64)));
};

struct members {
	char key[320];                  /* "ns/group" */
	char **uids;                    /* owned */
	unsigned n, cap;
};

struct podgroup {
	char key[320];                  /* "ns/name" */
	struct cache_podgroup *pg;
};

static uint64_t cache_generation;

/* The cache this thread is the writer of, while it writes (slots are removed
 * only by the writer). */
static __thread struct cache *tl_writer;

static __thread struct {
	uint64_t gen;
	ck_epoch_record_t *rec;
} tl_reader;


/* Free a node record and what the upper layer derived from it. Writer. */
static void node_free(struct cache *c, struct cache_node *n)
{
	if (!n)
		return;
	if (n->derived && c->opts.node_release)
		c->opts.node_release((void *)n->derived, c->opts.hook_ctx);
	cache_node_free(n);
}

static void retired_free(ck_epoch_entry_t *e)
{
	struct retired *r = (struct retired *)e;

	node_free(r->c, r->node);
	free(r);
}

static void slot_free_cb(ck_epoch_entry_t *e)
{
	struct slot *s = (struct slot *)((char *)e - offsetof(struct slot, epoch_entry));

	/* Only record-less slots are removed, so there is no record to free. */
	pthread_mutex_destroy(&s->pods_lock);
	free(s);
}

static void table_free_cb(ck_epoch_entry_t *e)
{
	free((struct nameidx_table *)e);        /* the entry is its first member */
}

/* Writer: free the node record <n> once no reader can hold it. */
static void retire(struct cache *c, struct cache_node *n)
{
	struct retired *r = malloc(sizeof(*r));

	if (!r) {
		/* Cannot defer without memory: wait for readers instead. */
		ck_epoch_synchronize(c->writer);
		node_free(c, n);
		return;
	}
	r->c = c;
	r->node = n;
	ck_epoch_call(c->writer, &r->entry, retired_free);
	/* Reclaim as we go so a long run of updates does not pile up garbage. */
	if (++c->n_retired % 64 == 0)
		ck_epoch_poll(c->writer);
}

/* ---- Creation -------------------------------------------------------- */

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
	strmap_init(&c->groups);
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

/* Add <e> to the list of entries a sweep removes. False when out of memory
 * (the list and its capacity are then unchanged). */
static bool gone_push(struct pod_entry ***gone, size_t *n, size_t *cap, struct pod_entry *e)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct pod_entry **g = realloc(*gone, c * sizeof(*g));

		if (!g)
			return false;
		*gone = g;
		*cap = c;
	}
	(*gone)[(*n)++] = e;
	return true;
}

static void pod_entry_free(struct pod_entry *e)
{
	if (!e)
		return;
	cache_pod_free(e->pod);
	free(e->uid);
	free(e);
}

/* ---- Pod-group members ------------------------------------------------------ */

static int members_key(const struct cache_pod *p, char *key, size_t len)
{
	if (!p || !p->group)
		return 0;
	return snprintf(key, len, "%s/%s", p->ns ? p->ns : "", p->group);
}

/* Pod <uid> was <old> (NULL: new) and is now <now> (NULL: gone): move it
 * between the member lists of their groups. The caller holds the pod's stripe
 * lock. On failure the index is marked lost and member walks scan every pod. */
static void members_move(struct cache *c, const char *uid, const struct cache_pod *old,
			 const struct cache_pod *now)
{
	char ko[320], kn[320];
	int lo = members_key(old, ko, sizeof(ko)), ln = members_key(now, kn, sizeof(kn));
	struct members *m;

	if (lo == ln && (lo == 0 || strcmp(ko, kn) == 0))
		return;
	pthread_mutex_lock(&c->members_lock);
	if (lo > 0 && (m = strmap_get(&c->members, ko, (size_t)lo))) {
		for (unsigned i = 0; i < m->n; i++)
			if (strcmp(m->uids[i], uid) == 0) {
				free(m->uids[i]);
				m->uids[i] = m->uids[--m->n];
				break;
			}
		if (!m->n) {
			strmap_del(&c->members, ko, (size_t)lo);
			free(m->uids);
			free(m);
		}
	}
	if (ln > 0) {
		char *u = strdup(uid);

		m = strmap_get(&c->members, kn, (size_t)ln);
		if (!m && (m = calloc(1, sizeof(*m)))) {
			snprintf(m->key, sizeof(m->key), "%s", kn);
			if (strmap_put(&c->members, m->key, strlen(m->key), m, NULL) < 0) {
				free(m);
				m = NULL;
			}
		}
		if (m && m->n == m->cap) {
			unsigned cap = m->cap ? m->cap * 2 : 8;
			char **g = realloc(m->uids, cap * sizeof(*g));

			if (g) {
				m->uids = g;
				m->cap = cap;
			}
		}
		for (unsigned i = 0; m && u && i < m->n; i++)
			if (strcmp(m->uids[i], uid) == 0) {
				free(u);        /* listed already: never twice */
				u = NULL;
				goto done;
			}
		if (m && u && m->n < m->cap) {
			m->uids[m->n++] = u;
		} else {
			free(u);
			if (!c->members_lost)
				log_error("cache", "out of memory indexing pod-group members; counting "
					  "gang members by scanning every pod from now on");
			c->members_lost = true;
		}
	}
done:
	pthread_mutex_unlock(&c->members_lock);
}

void cache_free(struct cache *c)
{
	struct reader_rec *r, *next;
	uint64_t at = 0;
	struct slot *s;

	if (!c)
		return;
	tl_writer = c;
	/* Run every deferred free: no reader may be active when cache_free runs. */
	ck_epoch_barrier(c->writer);
	for (int i = 0; i < POD_STRIPES; i++) {
		size_t pos = 0;
		void *v;

		while (strmap_next(&c->pods[i].map, &pos, NULL, &v))
			pod_entry_free(v);
		strmap_fini(&c->pods[i].map);
		pthread_mutex_destroy(&c->pods[i].lock);
	}
	while ((s = nameidx_iter(c->nodes.t, &at))) {
		pthread_mutex_destroy(&s->pods_lock);
		node_free(c, s->rec);
		free(s);
	}
	{
		size_t pos = 0;
		void *v;

		while (strmap_next(&c->groups, &pos, NULL, &v)) {
			cache_podgroup_free(((struct podgroup *)v)->pg);
			free(v);
		}
		strmap_fini(&c->groups);
		pthread_mutex_destroy(&c->groups_lock);
		pos = 0;
		while (strmap_next(&c->members, &pos, NULL, &v)) {
			struct members *m = v;

			for (unsigned i = 0; i < m->n; i++)
				free(m->uids[i]);
			free(m->uids);
			free(m);
		}
		strmap_fini(&c->members);
		pthread_mutex_destroy(&c->members_lock);
	}
	nameidx_free(&c->nodes);
	ck_epoch_barrier(c->writer);
	tl_writer = NULL;
	for (r = c->readers; r; r = next) {
		next = r->next;
		free(r);
	}
	pthread_mutex_destroy(&c->readers_lock);
	free(c->writer);
	free(c);
}

const struct cache_opts *cache_get_opts(const struct cache *c)
{
	return &c->opts;
}

void cache_set_synced(struct cache *c, bool synced)
{
	__atomic_store_n(&c->synced, synced, __ATOMIC_RELEASE);
}

bool cache_is_synced(const struct cache *c)
{
	return __atomic_load_n(&c->synced, __ATOMIC_ACQUIRE);
}

/* ---- Readers --------------------------------------------------------- */

static ck_epoch_record_t *reader_record(struct cache *c)
{
	struct reader_rec *r;

	if (tl_reader.gen == c->gen)
		return tl_reader.rec;
	r = calloc(1, sizeof(*r));
	if (!r) {
		/* No memory for a record: fall back to the writer's, serialised by
		 * the readers lock below. Practically unreachable. */
		abort();
	}
	ck_epoch_register(&c->epoch, &r->rec, NULL);
	pthread_mutex_lock(&c->readers_lock);
	r->next = c->readers;
	c->readers = r;
	pthread_mutex_unlock(&c->readers_lock);
	tl_reader.gen = c->gen;
	tl_reader.rec = &r->rec;
	return &r->rec;
}

void cache_read_begin(struct cache *c)
{
	ck_epoch_begin(reader_record(c), NULL);
}

void cache_read_end(struct cache *c)
{
	ck_epoch_end(reader_record(c), NULL);
}

/* The slot named <name> among the values under <hash> in <t>, probing from
 * <pos>, or NULL. */
static struct slot *slot_find(const struct nameidx_table *t, uint64_t hash, uint64_t pos,
			      const char *name, size_t len)
{
	struct slot *s;

	while ((s = nameidx_next_match(t, hash, &pos)))
		if (s->name_len == len && memcmp(s->name, name, len) == 0)
			return s;
	return NULL;
}

static struct slot *slot_get(struct cache *c, const char *name, size_t len)
{
	uint64_t h;

	if (len == 0 || len > UINT16_MAX)
		return NULL;
	h = nameidx_hash(&c->nodes, name, len);
	return slot_find(nameidx_table(&c->nodes), h, h, name, len);
}

static void usage_load(const struct slot *s, uint64_t *used, uint32_t *unattr)
{
	/* Relaxed: a snapshot for filter; bind re-checks with the CAS. */
	*used = __atomic_load_n(&s->usage[0], __ATOMIC_RELAXED);
	*unattr = (uint32_t)__atomic_load_n(&s->usage[1], __ATOMIC_RELAXED);
}

bool cache_node_lookup(struct cache *c, const char *name, size_t len,
		       struct cache_node_view *out)
{
	struct slot *s = slot_get(c, name, len);
	struct cache_node *rec;

	if (!s)
		return false;
	/* Acquire: pairs with the release store in cache_node_upsert, so the
	 * record's contents are visible once its pointer is. */
	rec = __atomic_load_n(&s->rec, __ATOMIC_ACQUIRE);
	if (!rec)
		return false;
	out->node = rec;
	usage_load(s, &out->used, &out->unattributed);
	return true;
}

void cache_node_lookup_many(struct cache *c, const struct cache_name *names, size_t n,
			    struct cache_node_view *out, bool *found)
{
	const struct nameidx_table *t = nameidx_table(&c->nodes);
	uint64_t h[CACHE_LOOKUP_BATCH];
	struct slot *s[CACHE_LOOKUP_BATCH];

	assert(n <= CACHE_LOOKUP_BATCH);

	/* In stages, each prefetching what the next reads, so the batch's
	 * cache misses overlap: hash and fetch the buckets; take each bucket's
	 * first candidate and fetch the slot; check the name and fetch the
	 * record. */
	for (size_t i = 0; i < n; i++) {
		h[i] = nameidx_hash(&c->nodes, names[i].s, names[i].len);
		__builtin_prefetch(nameidx_bucket(t, h[i]));
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t pos = h[i] & t->mask;

		s[i] = nameidx_next_match(t, h[i], &pos);
		if (s[i])
			__builtin_prefetch(s[i]->usage);
	}
	for (size_t i = 0; i < n; i++) {
		const char *nm = names[i].s;
		size_t len = names[i].len;
		struct cache_node *rec;

		found[i] = false;
		if (len == 0 || len > UINT16_MAX)
			continue;
		if (!s[i] || s[i]->name_len != len || memcmp(s[i]->name, nm, len) != 0)
			s[i] = slot_find(t, h[i], h[i] & t->mask, nm, len);  /* rare: a collision */
		if (!s[i])
			continue;
		/* Acquire: pairs with the release store in cache_node_upsert. */
		rec = __atomic_load_n(&s[i]->rec, __ATOMIC_ACQUIRE);
		if (!rec)
			continue;
		__builtin_prefetch(rec);        /* the fit check reads its first line */
		out[i].node = rec;
		usage_load(s[i], &out[i].used, &out[i].unattributed);
		found[i] = true;
	}
}

bool cache_usage_lookup(struct cache *c, const char *name, size_t len, uint64_t *used,
			uint32_t *unattributed)
{
	struct slot *s = slot_get(c, name, len);

	if (!s)
		return false;
	usage_load(s, used, unattributed);
	return true;
}

void cache_node_foreach(struct cache *c, bool (*fn)(const struct cache_node_view *, void *),
			void *arg)
{
	const struct nameidx_table *t = nameidx_table(&c->nodes);
	uint64_t pos = 0;
	struct slot *s;

	while ((s = nameidx_iter(t, &pos))) {
		struct cache_node_view v;

		/* Acquire: pairs with the release store in cache_node_upsert. */
		v.node = __atomic_load_n(&s->rec, __ATOMIC_ACQUIRE);
		if (!v.node)
			continue;
		usage_load(s, &v.used, &v.unattributed);
		if (!fn(&v, arg))
			break;
	}
}

static uint64_t capacity_mask(const struct cache_node *n)
{
	return n->gpu_capacity >= 64 ? ~0ULL : (1ULL << n->gpu_capacity) - 1;
}

uint32_t cache_view_free_gpus(const struct cache_node_view *v)
{
	int64_t held = __builtin_popcountll(v->used) + (int64_t)v->unattributed;
	int64_t free_n = (int64_t)v->node->gpu_allocatable - held;
	/* Devices the annotation calls unhealthy are never free, whatever the
	 * kubelet's allocatable says. */
	int64_t healthy = __builtin_popcountll(capacity_mask(v->node) & ~v->used &
					       ~v->node->unhealthy) - (int64_t)v->unattributed;

	if (healthy < free_n)
		free_n = healthy;
	return free_n > 0 ? (uint32_t)free_n : 0;
}

uint64_t cache_view_free_mask(const struct cache_node_view *v)
{
	return cache_view_free_gpus(v) ? capacity_mask(v->node) & ~v->used & ~v->node->unhealthy
				       : 0;
}

/* ---- Usage updates ------------------------------------------------------ */

/* Bracket every change to a node record or usage (even one that fails). */
static void change_begin(struct cache *c)
{
	__atomic_add_fetch(&c->changes.begun, 1, __ATOMIC_SEQ_CST);
}

static void change_end(struct cache *c)
{
	__atomic_add_fetch(&c->changes.done, 1, __ATOMIC_SEQ_CST);
}

uint64_t cache_changes(struct cache *c)
{
	return __atomic_load_n(&c->changes.begun, __ATOMIC_SEQ_CST);
}

bool cache_changes_settled(struct cache *c, uint64_t *count)
{
	/* Begun first: when as many are done, every change it counts is over. */
	*count = __atomic_load_n(&c->changes.begun, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&c->changes.done, __ATOMIC_SEQ_CST) == *count;
}

/* Add (sign 1) or remove (sign -1) a holding. Adding devices already taken is
 * refused with -EBUSY unless <force>; watch facts are applied with force and
 * the overlap counted as unattributed instead. */
static int usage_change(struct cache *c, struct slot *s, uint64_t devices, uint32_t unattr,
			int sign)
{
	uint64_t cur[2], next[2];
	bool ok;

	for (;;) {
		/* A torn pair only makes the CAS below fail and retry. */
		cur[0] = __atomic_load_n(&s->usage[0], __ATOMIC_RELAXED);
		cur[1] = __atomic_load_n(&s->usage[1], __ATOMIC_RELAXED);
		if (sign > 0) {
			if (cur[0] & devices)
				return -EBUSY;
			next[0] = cur[0] | devices;
			next[1] = cur[1] + unattr;
		} else {
			next[0] = cur[0] & ~devices;
			next[1] = cur[1] >= unattr ? cur[1] - unattr : 0;
		}
		/* Claims both words at once; pairs with every other CAS on usage. */
		change_begin(c);
		ok = ck_pr_cas_64_2(s->usage, cur, next);
		change_end(c);
		if (ok)
			return 0;
	}
}

/* ---- Writer: nodes -------------------------------------------------------- */

static struct slot *slot_create(struct cache *c, const char *name, size_t len)
{
	struct slot *s;
	struct nameidx_table *old;

	if (len == 0 || len > UINT16_MAX)
		return NULL;
	s = aligned_alloc(64, (sizeof(*s) + len + 1 + 63) & ~(size_t)63);
	if (!s)
		return NULL;
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->pods_lock, NULL);
	memcpy(s->name, name, len);
	s->name[len] = '\0';
	s->name_len = (uint16_t)len;
	if (nameidx_put(&c->nodes, nameidx_hash(&c->nodes, s->name, len), s, &old) < 0) {
		pthread_mutex_destroy(&s->pods_lock);
		free(s);
		return NULL;
	}
	if (old)        /* readers may still probe the old table */
		ck_epoch_call(c->writer, &old->entry, table_free_cb);
	c->n_tombstones++;
	return s;
}

/* Writer: drop a slot that has neither a record nor references. */
static void slot_maybe_remove(struct cache *c, struct slot *s)
{
	/* seq_cst load of the record and of refs: with the seq_cst store of NULL
	 * in cache_node_delete, they pair with the increment-then-load in
	 * cache_pod_assume (Dekker), so one side always sees the other. */
	if (__atomic_load_n(&s->rec, __ATOMIC_SEQ_CST))
		return;
	if (__atomic_load_n(&s->refs, __ATOMIC_SEQ_CST) != 0)
		return;
	if (!nameidx_remove(&c->nodes, nameidx_hash(&c->nodes, s->name, s->name_len), s))
		return;
	c->n_tombstones--;
	ck_epoch_call(c->writer, &s->epoch_entry, slot_free_cb);
}

int cache_node_upsert(struct cache *c, struct cache_node *node)
{
	size_t len = strlen(node->name);
	struct slot *s;
	struct cache_node *old;

	tl_writer = c;
	s = slot_get(c, node->name, len);
	if (!s)
		s = slot_create(c, node->name, len);
	if (!s) {
		cache_node_free(node);
		return -ENOMEM;
	}
	/* Derived data is computed here, on the writer, never on the read path;
	 * the topology text is needed only for that, so it goes before publishing. */
	if (c->opts.node_derive)
		node->derived = c->opts.node_derive(node, c->opts.hook_ctx);
	free((char *)node->topology_text);
	node->topology_text = NULL;
	old = s->rec;
	/* Release (seq_cst includes it): the record's contents are visible
	 * before its pointer. Pairs with the acquire loads in cache_node_lookup
	 * and cache_node_foreach. */
	change_begin(c);
	__atomic_store_n(&s->rec, node, __ATOMIC_SEQ_CST);
	change_end(c);
	if (old)
		retire(c, old);
	else {
		c->n_tombstones--;
		__atomic_add_fetch(&c->n_nodes, 1, __ATOMIC_RELAXED);
	}
	return 0;
}

int cache_node_delete(struct cache *c, const char *name)
{
	struct slot *s;
	struct cache_node *old;

	tl_writer = c;
	s = slot_get(c, name, strlen(name));
	if (!s || !s->rec)
		return -ENOENT;
	old = s->rec;
	/* seq_cst store: pairs with the record load after refs++ in assume. */
	change_begin(c);
	__atomic_store_n(&s->rec, NULL, __ATOMIC_SEQ_CST);
	change_end(c);
	c->n_tombstones++;
	__atomic_sub_fetch(&c->n_nodes, 1, __ATOMIC_RELAXED);
	retire(c, old);
	slot_maybe_remove(c, s);
	return 0;
}

void cache_writer_reclaim(struct cache *c)
{
	tl_writer = c;
	if (c->n_tombstones > 0) {
		struct slot *dead[256], *s;
		uint64_t pos = 0;
		size_t n = 0;

		while (n < sizeof(dead) / sizeof(dead[0]) && (s = nameidx_iter(c->nodes.t, &pos))) {
			if (!s->rec && __atomic_load_n(&s->refs, __ATOMIC_SEQ_CST) == 0)
				dead[n++] = s;
		}
		for (size_t i = 0; i < n; i++)
			slot_maybe_remove(c, dead[i]);
	}
	ck_epoch_poll(c->writer);
}

/* ---- Pods ----------------------------------------------------------------- */

static struct stripe *stripe_of(struct cache *c, const char *uid, size_t len)
{
	/* The high bits: the low ones pick the bucket inside the stripe's map. */
	return &c->pods[strmap_hash(uid, len) >> 58];
}

static void slot_ref(struct slot *s)
{
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_SEQ_CST);
}

static void slot_unref(struct slot *s)
{
	__atomic_sub_fetch(&s->refs, 1, __ATOMIC_SEQ_CST);
}

/* Record that <e> now holds GPUs on <s> (the by-node index). Stripe lock held. */
static void entry_link(struct pod_entry *e, struct slot *s)
{
	e->slot = s;
	pthread_mutex_lock(&s->pods_lock);
	e->node_prev = NULL;
	e->node_next = s->pods;
	if (s->pods)
		s->pods->node_prev = e;
	s->pods = e;
	pthread_mutex_unlock(&s->pods_lock);
}

/* Release whatever <e> holds. Stripe lock held. */
static void entry_release(struct cache *c, struct pod_entry *e)
{
	struct slot *s = e->slot;

	if (!s)
		return;
	usage_change(c, s, e->hold_devices, e->hold_unattr, -1);
	pthread_mutex_lock(&s->pods_lock);
	if (e->node_prev)
		e->node_prev->node_next = e->node_next;
	else
		s->pods = e->node_next;
	if (e->node_next)
		e->node_next->node_prev = e->node_prev;
	e->node_prev = e->node_next = NULL;
	pthread_mutex_unlock(&s->pods_lock);
	e->slot = NULL;
	e->hold_devices = 0;
	e->hold_unattr = 0;
	e->posted = false;
	e->uncertain_ns = 0;
	slot_unref(s);
	if (tl_writer == c)
		slot_maybe_remove(c, s);
}

/* Whether a pod in this state holds resources on its node (issue: pods that
 * finished or are being deleted hold nothing). */
static bool pod_holds(const struct cache_pod *p)
{
	return p->node && !p->deleting && p->phase != CACHE_POD_SUCCEEDED &&
	       p->phase != CACHE_POD_FAILED && p->demand.gpus > 0;
}

/* Writer: make <e> hold what the watch says <p> holds on p->node. */
static int entry_hold_fact(struct cache *c, struct pod_entry *e, const struct cache_pod *p)
{
	size_t len = strlen(p->node);
	struct slot *s = slot_get(c, p->node, len);
	uint64_t devices = 0;
	uint32_t unattr = p->demand.gpus;

	if (p->has_devices) {
		devices = p->devices;
		unattr = 0;
	} else if (e->slot && e->slot == s &&
		   (uint32_t)__builtin_popcountll(e->hold_devices) + e->hold_unattr == p->demand.gpus) {
		/* No annotation, same node, same count: keep what the pod holds. This
		 * is troupe's own bind being confirmed (its devices stay known), or a
		 * later event of a pod already counted. */
		e->state = CACHE_POD_STATE_BOUND;
		return 0;
	}
	if (e->slot == s && s && e->hold_devices == devices && e->hold_unattr == unattr) {
		e->state = CACHE_POD_STATE_BOUND;
		return 0;
	}
	entry_release(c, e);
	/* The release may have removed the slot (a node troupe does not know,
	 * held only by this pod): look it up again. */
	s = slot_get(c, p->node, len);
	if (!s)
		s = slot_create(c, p->node, len);
	if (!s)
		return -ENOMEM;
	if (devices && usage_change(c, s, devices, 0, 1) == -EBUSY) {
		log_warn("cache", "pod %s/%s: devices in %s are held by another pod on %s; "
			 "counting its %u GPUs as unattributed", p->ns, p->name,
			 "troupe.io/gpu-ids", p->node, p->demand.gpus);
		devices = 0;
		unattr = p->demand.gpus;
	}
	if (!devices)
		usage_change(c, s, 0, unattr, 1);
	slot_ref(s);
	entry_link(e, s);
	e->hold_devices = devices;
	e->hold_unattr = unattr;
	e->state = CACHE_POD_STATE_BOUND;
	return 0;
}

static struct pod_entry *entry_new(struct stripe *st, const char *uid)
{
	struct pod_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->uid = strdup(uid);
	if (!e->uid || strmap_put(&st->map, e->uid, strlen(e->uid), e, NULL) < 0) {
		free(e->uid);
		free(e);
		return NULL;
	}
	e->state = CACHE_POD_STATE_PENDING;
	e->known_ns = util_now_ns();
	return e;
}

int cache_pod_apply(struct cache *c, struct cache_pod *pod)
{
	size_t len = strlen(pod->uid);
	struct stripe *st = stripe_of(c, pod->uid, len);
	struct pod_entry *e;
	int ret = 0;

	tl_writer = c;
	pthread_mutex_lock(&st->lock);
	e = strmap_get(&st->map, pod->uid, len);
	if (!e && !(e = entry_new(st, pod->uid))) {
		ret = -ENOMEM;
		cache_pod_free(pod);
		goto out;
	}
	e->from_api = true;
	if (pod_holds(pod)) {
		ret = entry_hold_fact(c, e, pod);
		if (e->state == CACHE_POD_STATE_BOUND)
			e->uncertain_ns = 0;    /* the cluster says where it is */
	} else if (e->state == CACHE_POD_STATE_ASSUMED && !pod->node && !pod->deleting &&
		   pod->phase != CACHE_POD_SUCCEEDED && pod->phase != CACHE_POD_FAILED) {
		/* An event from before troupe's binding landed: keep the assumption
		 * until the watch shows the pod bound, gone or finished. */
	} else {
		entry_release(c, e);
		e->state = CACHE_POD_STATE_PENDING;
	}
	members_move(c, e->uid, e->pod, pod);
	cache_pod_free(e->pod);
	e->pod = pod;
out:
	pthread_mutex_unlock(&st->lock);
	return ret;
}

int cache_pod_delete(struct cache *c, const char *uid)
{
	size_t len = strlen(uid);
	struct stripe *st = stripe_of(c, uid, len);
	struct pod_entry *e;

	tl_writer = c;
	pthread_mutex_lock(&st->lock);
	e = strmap_del(&st->map, uid, len);
	if (e) {
		entry_release(c, e);
		members_move(c, e->uid, e->pod, NULL);
	}
	pthread_mutex_unlock(&st->lock);
	pod_entry_free(e);
	return e ? 0 : -ENOENT;
}

int cache_pod_remember(struct cache *c, struct cache_pod *pod)
{
	size_t len = strlen(pod->uid);
	struct stripe *st = stripe_of(c, pod->uid, len);
	struct pod_entry *e;
	int ret = 0;

	pthread_mutex_lock(&st->lock);
	e = strmap_get(&st->map, pod->uid, len);
	if (e) {
		/* Already known from the watch or an earlier call: that is newer. */
		goto out;
	}
	e = entry_new(st, pod->uid);
	if (!e) {
		ret = -ENOMEM;
		goto out;
	}
	e->pod = pod;
	e->seen_ns = util_now_ns();
	members_move(c, e->uid, NULL, pod);
	pod = NULL;
out:
	pthread_mutex_unlock(&st->lock);
	cache_pod_free(pod);
	return ret;
}

static void copy_str(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

bool cache_pod_known(struct cache *c, const char *uid)
{
	size_t len = strlen(uid);
	struct stripe *st = stripe_of(c, uid, len);
	bool known;

	pthread_mutex_lock(&st->lock);
	known = strmap_get(&st->map, uid, len) != NULL;
	pthread_mutex_unlock(&st->lock);
	return known;
}

/* What the cache holds for <e>, copied out. The pod's stripe lock held. */
static void entry_info(const struct pod_entry *e, struct cache_pod_info *out)
{
	memset(out, 0, sizeof(*out));
	out->state = e->state;
	out->from_api = e->from_api;
	out->posted = e->posted;
	out->uncertain = e->uncertain_ns != 0;
	out->reservation = e->reservation;
	copy_str(out->ns, sizeof(out->ns), e->pod->ns);
	copy_str(out->name, sizeof(out->name), e->pod->name);
	copy_str(out->node, sizeof(out->node), e->slot ? e->slot->name : e->pod->node);
	copy_str(out->topology, sizeof(out->topology), e->pod->topology);
	copy_str(out->group, sizeof(out->group), e->pod->group);
	copy_str(out->gang_topology, sizeof(out->gang_topology), e->pod->gang_topology);
	copy_str(out->queue, sizeof(out->queue), e->pod->queue);
	out->priority = e->pod->priority;
	out->active = !e->pod->deleting && e->pod->phase != CACHE_POD_SUCCEEDED &&
		      e->pod->phase != CACHE_POD_FAILED;
	out->min_member = e->pod->min_member;
	out->demand = e->pod->demand;
	out->demand_valid = e->pod->demand_error == NULL;
	out->devices = e->hold_devices;
	out->unattributed = e->hold_unattr;
	out->known_ns = e->known_ns;
}

int cache_pod_get(struct cache *c, const char *uid, struct cache_pod_info *out)
{
	size_t len = strlen(uid);
	struct stripe *st = stripe_of(c, uid, len);
	struct pod_entry *e;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&st->lock);
	e = strmap_get(&st->map, uid, len);
	if (!e || !e->pod)
		ret = -ENOENT;
	else
		entry_info(e, out);
	pthread_mutex_unlock(&st->lock);
	return ret;
}

int cache_pod_assume(struct cache *c, const char *uid, const char *node, uint64_t *devices)
{
	size_t len = strlen(uid);
	struct stripe *st = stripe_of(c, uid, len);
	struct pod_entry *e;
	struct slot *s = NULL;
	struct cache_node *rec;
	uint64_t want = *devices, cur[2], next[2];
	bool ok;
	int ret = 0;

	cache_read_begin(c);
	pthread_mutex_lock(&st->lock);
	e = strmap_get(&st->map, uid, len);
	if (!e || !e->pod) {
		ret = -ENOENT;
		goto out;
	}
	if (e->slot) {
		if (strcmp(e->slot->name, node) == 0) {
			*devices = e->hold_devices;
			ret = -EALREADY;
		} else {
			ret = -EEXIST;
		}
		goto out;
	}
	s = slot_get(c, node, strlen(node));
	if (!s) {
		ret = -ENOENT;
		goto out;
	}
	/* seq_cst increment, then load the record: pairs with the writer's
	 * seq_cst store of NULL and its refs check in slot_maybe_remove. */
	slot_ref(s);
	rec = __atomic_load_n(&s->rec, __ATOMIC_SEQ_CST);
	if (!rec) {
		ret = -ENOENT;
		goto out_unref;
	}
	if ((uint32_t)__builtin_popcountll(want) != e->pod->demand.gpus ||
	    (want & ~capacity_mask(rec)) || (want & rec->unhealthy)) {
		ret = -EINVAL;
		goto out_unref;
	}
	for (;;) {
		int64_t free_n;

		/* A torn pair only makes the CAS below fail and retry. */
		cur[0] = __atomic_load_n(&s->usage[0], __ATOMIC_RELAXED);
		cur[1] = __atomic_load_n(&s->usage[1], __ATOMIC_RELAXED);
		if (cur[0] & want) {
			ret = -EAGAIN;
			goto out_unref;
		}
		free_n = (int64_t)rec->gpu_allocatable - __builtin_popcountll(cur[0]) -
			 (int64_t)cur[1];
		/* The same bound as cache_view_free_gpus: healthy devices too. */
		if ((int64_t)__builtin_popcountll(capacity_mask(rec) & ~rec->unhealthy & ~cur[0]) -
			    (int64_t)cur[1] < free_n)
			free_n = (int64_t)__builtin_popcountll(capacity_mask(rec) & ~rec->unhealthy &
							       ~cur[0]) - (int64_t)cur[1];
		if (free_n < __builtin_popcountll(want)) {
			ret = -ENOSPC;
			goto out_unref;
		}
		next[0] = cur[0] | want;
		next[1] = cur[1];
		/* Check-and-claim in one step; pairs with every other usage CAS. */
		change_begin(c);
		ok = ck_pr_cas_64_2(s->usage, cur, next);
		change_end(c);
		if (ok)
			break;
	}
	entry_link(e, s);       /* the reference taken above now belongs to e */
	e->hold_devices = want;
	e->hold_unattr = 0;
	e->state = CACHE_POD_STATE_ASSUMED;
	goto out;
out_unref:
	slot_unref(s);
out:
	pthread_mutex_unlock(&st->lock);
	cache_read_end(c);
	return ret;
}

int cache_pod_forget(struct cache *c, const char *uid)
{
	size_t len = strlen(uid);
	struct stripe *st = stripe_of(c, uid, len);
	struct pod_entry *e;
	int ret = -ENOENT;

	cache_read_begin(c);
	pthread_mutex_lock(&st->lock);
	e = strmap_get(&st->map, uid, len);
	if (e && e->state == CACHE_POD_STATE_ASSUMED) {
		entry_release(c, e);
		e->state = CACHE_POD_STATE_PENDING;
		ret = 0;
	}
	pthread_mutex_unlock(&st->lock);
	cache_read_end(c);
	return ret;
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
			if (e->slot)
				out->pods_holding++;
		}
		pthread_mutex_unlock(&c->pods[i].lock);
	}
	pthread_mutex_lock(&c->groups_lock);
	out->podgroups = strmap_count(&c->groups);
	pthread_mutex_unlock(&c->groups_lock);
}

void cache_pod_foreach(struct cache *c, void (*fn)(const struct cache_pod_info *, const char *uid,
						  void *arg), void *arg)
{
	for (int i = 0; i < POD_STRIPES; i++) {
		size_t pos = 0;
		void *v;

		pthread_mutex_lock(&c->pods[i].lock);
		while (strmap_next(&c->pods[i].map, &pos, NULL, &v)) {
			struct pod_entry *e = v;
			struct cache_pod_info info;

			if (!e->pod)
				continue;
			entry_info(e, &info);
			fn(&info, e->uid, arg);
		}
		pthread_mutex_unlock(&c->pods[i].lock);
	}
}

/* ---- Sweeps after a relist (writer) --------------------------------------- */

void cache__node_sweep(struct cache *c, bool (*keep)(const char *name, void *arg), void *arg)
{
	char **gone = NULL;
	size_t n = 0, cap = 0;
	uint64_t pos = 0;
	struct slot *s;

	tl_writer = c;
	/* Collect first, then delete. */
	while ((s = nameidx_iter(c->nodes.t, &pos))) {
		if (!s->rec || keep(s->name, arg))
			continue;
		if (n == cap) {
			char **g = realloc(gone, (cap = cap ? cap * 2 : 64) * sizeof(*g));

			if (!g)
				break;
			gone = g;
		}
		gone[n] = strdup(s->name);
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

void cache__pod_sweep(struct cache *c, bool (*keep)(const char *uid, void *arg), void *arg)
{
	size_t swept = 0;

	tl_writer = c;
	for (int i = 0; i < POD_STRIPES; i++) {
		struct stripe *st = &c->pods[i];
		struct pod_entry **gone = NULL;
		size_t n = 0, cap = 0, pos = 0;
		void *v;

		pthread_mutex_lock(&st->lock);
		while (strmap_next(&st->map, &pos, NULL, &v)) {
			struct pod_entry *e = v;

			/* Assumed pods are never swept: a pod created after the list's
			 * resourceVersion and bound meanwhile is not in the list, and
			 * its fate is the binder's answer or the watch's replay. */
			if (e->reservation || !e->from_api || e->state == CACHE_POD_STATE_ASSUMED ||
			    keep(e->uid, arg))
				continue;
			if (!gone_push(&gone, &n, &cap, e))
				break;
		}
		for (size_t k = 0; k < n; k++) {
			strmap_del(&st->map, gone[k]->uid, strlen(gone[k]->uid));
			entry_release(c, gone[k]);
			members_move(c, gone[k]->uid, gone[k]->pod, NULL);
		}
		pthread_mutex_unlock(&st->lock);
		for (size_t k = 0; k < n; k++)
			pod_entry_free(gone[k]);
		free(gone);
		swept += n;
	}
	if (swept)
		log_info("cache", "%zu pods are gone from the API server; their GPUs are released",
			 swept);
}

/* ---- Pod groups ------------------------------------------------------------ */

static void group_key(char *out, size_t len, const char *ns, const char *name)
{
	snprintf(out, len, "%s/%s", ns, name);
}

int cache_podgroup_apply(struct cache *c, struct cache_podgroup *pg)
{
	struct podgroup *g = calloc(1, sizeof(*g));
	void *old = NULL;
	int ret;

	if (!g) {
		cache_podgroup_free(pg);
		return -ENOMEM;
	}
	group_key(g->key, sizeof(g->key), pg->ns, pg->name);
	g->pg = pg;
	pthread_mutex_lock(&c->groups_lock);
	ret = strmap_put(&c->groups, g->key, strlen(g->key), g, &old);
	pthread_mutex_unlock(&c->groups_lock);
	if (ret < 0) {
		cache_podgroup_free(pg);
		free(g);
		return ret;
	}
	if (old) {
		cache_podgroup_free(((struct podgroup *)old)->pg);
		free(old);
	}
	return 0;
}

int cache_podgroup_delete(struct cache *c, const char *ns, const char *name)
{
	char key[320];
	struct podgroup *g;

	group_key(key, sizeof(key), ns, name);
	pthread_mutex_lock(&c->groups_lock);
	g = strmap_del(&c->groups, key, strlen(key));
	pthread_mutex_unlock(&c->groups_lock);
	if (!g)
		return -ENOENT;
	cache_podgroup_free(g->pg);
	free(g);
	return 0;
}

int cache_podgroup_get(struct cache *c, const char *ns, const char *name,
		       struct cache_podgroup *out, char *buf, size_t buflen)
{
	char key[320];
	struct podgroup *g;
	int ret = -ENOENT;

	group_key(key, sizeof(key), ns, name);
	pthread_mutex_lock(&c->groups_lock);
	g = strmap_get(&c->groups, key, strlen(key));
	if (g) {
		*out = *g->pg;
		snprintf(buf, buflen, "%s", g->key);
		out->ns = buf;
		out->name = strchr(buf, '/') ? strchr(buf, '/') + 1 : buf;
		if (strchr(buf, '/'))
			*strchr(buf, '/') = '\0';
		ret = 0;
	}
	pthread_mutex_unlock(&c->groups_lock);
	return ret;
}

void cache_podgroup_foreach(struct cache *c, void (*fn)(const struct cache_podgroup *, void *),
			    void *arg)
{
	size_t pos = 0;
	void *v;

	pthread_mutex_lock(&c->groups_lock);
	while (strmap_next(&c->groups, &pos, NULL, &v))
		fn(((struct podgroup *)v)->pg, arg);
	pthread_mutex_unlock(&c->groups_lock);
}

int cache_node_pods(struct cache *c, const char *node, void (*fn)(const char *uid, void *arg),
		    void *arg)
{
	struct slot *s;
	int ret = -ENOENT;

	cache_read_begin(c);
	s = slot_get(c, node, strlen(node));
	if (s) {
		ret = 0;
		pthread_mutex_lock(&s->pods_lock);
		for (struct pod_entry *e = s->pods; e; e = e->node_next)
			fn(e->uid, arg);
		pthread_mutex_unlock(&s->pods_lock);
	}
	cache_read_end(c);
	return ret;
}

/* ---- Gangs ------------------------------------------------------------------ */

/* Every pod, for a walk of one group when the member index was lost. */
struct group_scan {
	const char *ns, *group;
	void (*fn)(const struct cache_pod_info *, const char *uid, void *arg);
	void *arg;
};

static void group_scan_one(const struct cache_pod_info *p, const char *uid, void *arg)
{
	const struct group_scan *gs = arg;

	if (!p->reservation && strcmp(p->group, gs->group) == 0 && strcmp(p->ns, gs->ns) == 0)
		gs->fn(p, uid, gs->arg);
}

void cache_group_foreach(struct cache *c, const char *ns, const char *group,
			 void (*fn)(const struct cache_pod_info *, const char *uid, void *arg),
			 void *arg)
{
	char key[320], **uids = NULL;
	unsigned n = 0;
	struct members *m;
	bool lost;
	int len = snprintf(key, sizeof(key), "%s/%s", ns, group);

	pthread_mutex_lock(&c->members_lock);
	lost = c->members_lost;
	m = lost || len <= 0 ? NULL : strmap_get(&c->members, key, (size_t)len);
	if (m && (uids = calloc(m->n, sizeof(*uids)))) {
		for (unsigned i = 0; i < m->n; i++)
			if ((uids[n] = strdup(m->uids[i])))
				n++;
		lost = n < m->n;
	} else if (m) {
		lost = true;
	}
	pthread_mutex_unlock(&c->members_lock);
	if (lost) {
		struct group_scan gs = { ns, group, fn, arg };

		for (unsigned i = 0; i < n; i++)
			free(uids[i]);
		free(uids);
		cache_pod_foreach(c, group_scan_one, &gs);
		return;
	}
	/* Each member under its own stripe's lock; one that changed group or went
	 * meanwhile is skipped. */
	for (unsigned i = 0; i < n; i++) {
		size_t ulen = strlen(uids[i]);
		struct stripe *st = stripe_of(c, uids[i], ulen);
		struct cache_pod_info info;
		struct pod_entry *e;
		bool member;

		pthread_mutex_lock(&st->lock);
		e = strmap_get(&st->map, uids[i], ulen);
		member = e && e->pod && !e->reservation && e->pod->group && e->pod->ns &&
			 strcmp(e->pod->group, group) == 0 && strcmp(e->pod->ns, ns) == 0;
		if (member)
			entry_info(e, &info);
		pthread_mutex_unlock(&st->lock);
		if (member)
			fn(&info, uids[i], arg);
		free(uids[i]);
	}
	free(uids);
}

/* The group keys of every pod, for cache_groups_foreach once the index is lost. */
static void scan_group_key(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct strmap *seen = arg;
	char key[320];
	int len;

	(void)uid;
	if (p->reservation || !p->group[0])
		return;
	len = snprintf(key, sizeof(key), "%s/%s", p->ns, p->group);
	if (len > 0 && (size_t)len < sizeof(key) && !strmap_get(seen, key, (size_t)len)) {
		char *k = strdup(key);

		if (k && strmap_put(seen, k, (size_t)len, k, NULL) < 0)
			free(k);
	}
}

void cache_groups_foreach(struct cache *c, void (*fn)(const char *ns, const char *group, void *arg),
			  void *arg)
{
	char **keys = NULL;
	unsigned n = 0, cap = 0;
	struct strmap seen;
	size_t pos = 0;
	void *v;
	bool lost;

	pthread_mutex_lock(&c->members_lock);
	lost = c->members_lost;
	pthread_mutex_unlock(&c->members_lock);
	strmap_init(&seen);
	if (lost)
		cache_pod_foreach(c, scan_group_key, &seen);
	pthread_mutex_lock(&c->members_lock);
	while (strmap_next(lost ? &seen : &c->members, &pos, NULL, &v)) {
		if (n == cap) {
			char **k = realloc(keys, (cap = cap ? cap * 2 : 16) * sizeof(*k));

			if (!k)
				break;
			keys = k;
		}
		if ((keys[n] = strdup(lost ? (const char *)v : ((struct members *)v)->key)))
			n++;
	}
	pthread_mutex_unlock(&c->members_lock);
	pos = 0;
	while (strmap_next(&seen, &pos, NULL, &v))
		free(v);
	strmap_fini(&seen);
	for (unsigned i = 0; i < n; i++) {
		char *slash = strchr(keys[i], '/');

		if (slash) {
			*slash = '\0';
			fn(keys[i], slash + 1, arg);
		}
		free(keys[i]);
	}
	free(keys);
}

struct group_counts {
	unsigned exist, bound;
};

static void count_member(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct group_counts *gc = arg;

	(void)uid;
	if (!p->active)
		return;
	gc->exist++;
	if (p->node[0])
		gc->bound++;
}

void cache_group_count(struct cache *c, const char *ns, const char *group, unsigned *exist,
		       unsigned *bound)
{
	struct group_counts gc = { 0 };

	cache_group_foreach(c, ns, group, count_member, &gc);
	*exist = gc.exist;
	*bound = gc.bound;
}

int cache_reserve(struct cache *c, const char *key, const char *node, uint64_t devices)
{
	return cache_reserve_for(c, key, node, devices, NULL);
}

int cache_reserve_for(struct cache *c, const char *key, const char *node, uint64_t devices,
		      const char *queue)
{
	size_t len = strlen(key), qlen = queue ? strlen(queue) : 0;
	size_t size = sizeof(struct cache_pod) + len + 1 + qlen + 1 + 20;
	struct stripe *st = stripe_of(c, key, len);
	struct cache_pod *p = calloc(1, size);
	struct pod_entry *e;
	uint64_t want = devices;
	int ret;

	if (!p)
		return -ENOMEM;
	/* A synthetic pod asking exactly these devices, so that assume applies. */
	p->uid = (char *)(p + 1);
	memcpy((char *)p->uid, key, len + 1);
	p->ns = "troupe-reservation";
	p->name = p->uid;
	if (queue) {
		p->queue = p->uid + len + 1;
		memcpy((char *)p->queue, queue, qlen + 1);
	}
	p->demand.gpu_resource = 0;
	p->demand.gpus = (uint32_t)__builtin_popcountll(devices);
	pthread_mutex_lock(&st->lock);
	e = strmap_get(&st->map, key, len);
	if (e) {
		pthread_mutex_unlock(&st->lock);
		cache_pod_free(p);
		return -EEXIST;
	}
	e = entry_new(st, key);
	if (!e) {
		pthread_mutex_unlock(&st->lock);
		cache_pod_free(p);
		return -ENOMEM;
	}
	e->pod = p;
	e->reservation = true;
	pthread_mutex_unlock(&st->lock);
	ret = cache_pod_assume(c, key, node, &want);
	if (ret != 0) {
		pthread_mutex_lock(&st->lock);
		e = strmap_del(&st->map, key, len);
		pthread_mutex_unlock(&st->lock);
		pod_entry_free(e);
	}
	return ret;
}

int cache_reservation_release(struct cache *c, const char *key)
{
	size_t len = strlen(key);
	struct stripe *st = stripe_of(c, key, len);
	struct pod_entry *e;

	cache_read_begin(c);
	pthread_mutex_lock(&st->lock);
	e = strmap_get(&st->map, key, len);
	if (e && e->reservation) {
		strmap_del(&st->map, key, len);
		entry_release(c, e);
	} else {
		e = NULL;
	}
	pthread_mutex_unlock(&st->lock);
	cache_read_end(c);
	pod_entry_free(e);
	return e ? 0 : -ENOENT;
}

/* Move a by-node index link from <from> to <to> (same slot). Stripe locks held. */
static void entry_relink(struct pod_entry *from, struct pod_entry *to, struct slot *s)
{
	pthread_mutex_lock(&s->pods_lock);
	if (from->node_prev)
		from->node_prev->node_next = from->node_next;
	else
		s->pods = from->node_next;
	if (from->node_next)
		from->node_next->node_prev = from->node_prev;
	from->node_prev = from->node_next = NULL;
	to->node_prev = NULL;
	to->node_next = s->pods;
	if (s->pods)
		s->pods->node_prev = to;
	s->pods = to;
	pthread_mutex_unlock(&s->pods_lock);
}

int cache_reservation_claim(struct cache *c, const char *key, const char *uid)
{
	size_t klen = strlen(key), ulen = strlen(uid);
	struct stripe *a = stripe_of(c, key, klen), *b = stripe_of(c, uid, ulen);
	struct stripe *first = a < b ? a : b, *second = a < b ? b : a;
	struct pod_entry *r, *p;
	int ret = 0;

	/* Two stripes: always in address order, so claims never deadlock. */
	pthread_mutex_lock(&first->lock);
	if (second != first)
		pthread_mutex_lock(&second->lock);
	r = strmap_get(&a->map, key, klen);
	p = strmap_get(&b->map, uid, ulen);
	if (!r || !r->reservation || !r->slot || !p || !p->pod || p->reservation) {
		ret = -ENOENT;
		goto out;
	}
	if (p->slot) {
		ret = -EEXIST;
		goto out;
	}
	if ((uint32_t)__builtin_popcountll(r->hold_devices) != p->pod->demand.gpus) {
		ret = -EINVAL;
		goto out;
	}
	/* The devices change owner without ever being free: usage is untouched
	 * and the slot reference passes from the reservation to the pod. */
	entry_relink(r, p, r->slot);
	p->slot = r->slot;
	p->hold_devices = r->hold_devices;
	p->hold_unattr = 0;
	p->state = CACHE_POD_STATE_ASSUMED;
	r->slot = NULL;
	r->hold_devices = 0;
	strmap_del(&a->map, key, klen);
out:
	if (second != first)
		pthread_mutex_unlock(&second->lock);
	pthread_mutex_unlock(&first->lock);
	if (ret == 0)
		pod_entry_free(r);
	return ret;
}

/* ---- Binding outcomes and housekeeping ------------------------------------------ */

int cache_pod_mark_bind(struct cache *c, const char *uid, bool posted)
{
	size_t len = strlen(uid);
	struct stripe *st = stripe_of(c, uid, len);
	struct pod_entry *e;
	int ret = -ENOENT;

	pthread_mutex_lock(&st->lock);
	e = strmap_get(&st->map, uid, len);
	if (e && e->slot) {
		e->posted = posted;
		e->uncertain_ns = posted ? 0 : util_now_ns();
		ret = 0;
	}
	pthread_mutex_unlock(&st->lock);
	return ret;
}

void cache_pod_expire(struct cache *c, uint64_t uncertain_ns, uint64_t remembered_ns)
{
	uint64_t now = util_now_ns();
	size_t released = 0, dropped = 0;

	cache_read_begin(c);
	for (int i = 0; i < POD_STRIPES; i++) {
		struct stripe *st = &c->pods[i];
		struct pod_entry **gone = NULL;
		size_t n = 0, cap = 0, pos = 0;
		void *v;

		pthread_mutex_lock(&st->lock);
		while (strmap_next(&st->map, &pos, NULL, &v)) {
			struct pod_entry *e = v;

			if (e->state == CACHE_POD_STATE_ASSUMED && e->uncertain_ns &&
			    now - e->uncertain_ns > uncertain_ns) {
				/* The cluster never showed the pod bound: it was not. */
				entry_release(c, e);
				e->state = CACHE_POD_STATE_PENDING;
				e->uncertain_ns = 0;
				released++;
			} else if (!e->from_api && !e->reservation && !e->slot &&
				   e->state == CACHE_POD_STATE_PENDING &&
				   now - e->seen_ns > remembered_ns) {
				(void)gone_push(&gone, &n, &cap, e);   /* no memory: next pass */
			}
		}
		for (size_t k = 0; k < n; k++) {
			strmap_del(&st->map, gone[k]->uid, strlen(gone[k]->uid));
			members_move(c, gone[k]->uid, gone[k]->pod, NULL);
		}
		pthread_mutex_unlock(&st->lock);
		for (size_t k = 0; k < n; k++)
			pod_entry_free(gone[k]);
		free(gone);
		dropped += n;
	}
	cache_read_end(c);
	if (released)
		log_info("cache", "%zu pods whose bindings were never confirmed: GPUs released",
			 released);
	if (dropped)
		log_debug("cache", "forgot %zu pods seen only in filter calls long ago", dropped);
}
