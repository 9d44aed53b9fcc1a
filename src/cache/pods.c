/* The pod table: what each pod troupe knows of occupies. A pod's facts come
 * from the watch or a snapshot (apply, delete), from a filter call (remember:
 * its demand, for a later bind), and from troupe's own binds (assume, forget,
 * and what became of the Binding: mark_bind, expire). The by-node index lists
 * the pods occupying GPUs on each node, and the sweep after a relist removes
 * the pods the cluster no longer shows.
 *
 * What a pod occupies is charged to its node entry's usage (usage.c) and
 * holds a reference on the entry, so a node troupe does not know (yet) keeps
 * its usage while pods occupy it.
 *
 * Pods known only from filter calls are counted (filter_only_count) and
 * capped: anyone who can reach troupe's port can name made-up pods, so at the
 * cap remember drops the oldest of them that occupy nothing, a batch at a time
 * (filter_only_make_room), rather than grow without bound.
 */
#include "cache/api_internal.h"
#include "cache/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

struct pod_entry *cache__pod_entry_new(struct stripe *st, const char *uid)
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
	e->state = CACHE_POD_STATE_UNACCOUNTED;
	e->known_ns = util_now_ns();
	return e;
}

void cache__pod_entry_free(struct pod_entry *e)
{
	if (!e)
		return;
	cache_pod_free(e->pod);
	free(e->uid);
	free(e);
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

/* ---- Pods known only from filter calls ------------------------------------------ */

/* Drop at most this many a walk: the walk costs the whole pod table, so it is
 * paid once per batch of remembers, not per remember. */
enum { FILTER_ONLY_DROP_BATCH = 256 };
/* Log lines about the cap at most this often. */
#define FILTER_ONLY_LOG_NS (10ULL * 1000000000ULL)

static size_t filter_only_cap(const struct cache *c)
{
	return c->opts.max_filter_only_pods ? c->opts.max_filter_only_pods
					    : CACHE_FILTER_ONLY_PODS_DEFAULT;
}

/* Whether a log line of the kind stamped in <stamp> is due (one per
 * FILTER_ONLY_LOG_NS). */
static bool filter_only_log_due(uint64_t *stamp)
{
	uint64_t now = util_now_ns();
	uint64_t last = __atomic_load_n(stamp, __ATOMIC_RELAXED);

	if (last && util_elapsed_ns(now, last) < FILTER_ONLY_LOG_NS)
		return false;
	/* Relaxed: only which thread logs is decided here. */
	return __atomic_compare_exchange_n(stamp, &last, now, false, __ATOMIC_RELAXED,
					   __ATOMIC_RELAXED);
}

/* Keep in <old> (ascending, <*n> of at most <k>) the <k> smallest stamps
 * offered. The walk visits entries in hash order, not age order, so few
 * offers shift the array. */
static void oldest_offer(uint64_t *old, size_t *n, size_t k, uint64_t v)
{
	size_t i;

	if (*n == k && v >= old[k - 1])
		return;
	for (i = *n < k ? (*n)++ : k - 1; i && old[i - 1] > v; i--)
		old[i] = old[i - 1];
	old[i] = v;
}

/* Drop up to <batch> droppable entries, the oldest first: one walk finds the
 * stamp of the <batch>-th oldest, a second drops those no younger (each entry
 * checked again under its lock: the table moved between the walks). Returns
 * how many were dropped. No lock held on entry. */
static size_t filter_only_drop_oldest(struct cache *c, size_t batch)
{
	uint64_t old[FILTER_ONLY_DROP_BATCH], limit;
	size_t n = 0, dropped = 0;

	for (int i = 0; i < POD_STRIPES; i++) {
		size_t pos = 0;
		void *v;

		pthread_mutex_lock(&c->pods[i].lock);
		while (strmap_next(&c->pods[i].map, &pos, NULL, &v))
			if (filter_only_droppable(v))
				oldest_offer(old, &n, batch, ((struct pod_entry *)v)->seen_ns);
		pthread_mutex_unlock(&c->pods[i].lock);
	}
	if (!n)
		return 0;
	limit = n < batch ? UINT64_MAX : old[n - 1];
	for (int i = 0; i < POD_STRIPES && dropped < batch; i++) {
		struct stripe *st = &c->pods[i];
		struct pod_entry *gone[FILTER_ONLY_DROP_BATCH];
		size_t k = 0, pos = 0;
		void *v;

		pthread_mutex_lock(&st->lock);
		while (dropped + k < batch && strmap_next(&st->map, &pos, NULL, &v)) {
			struct pod_entry *e = v;

			if (filter_only_droppable(e) && e->seen_ns <= limit)
				gone[k++] = e;
		}
		for (size_t j = 0; j < k; j++) {
			strmap_del(&st->map, gone[j]->uid, strlen(gone[j]->uid));
			filter_only_uncount(c, gone[j]);
			cache__members_move(c, gone[j]->uid, gone[j]->pod, NULL);
		}
		pthread_mutex_unlock(&st->lock);
		for (size_t j = 0; j < k; j++)
			cache__pod_entry_free(gone[j]);
		dropped += k;
	}
	return dropped;
}

/* The count has reached <cap>: make room for one more, dropping the oldest a
 * batch at a time. One thread drops at a time; while it does, others go on
 * until a batch past the cap, so the count stays within the cap, a batch and
 * the filters running at once.
 * Returns 0, or -ENOSPC when the count stays a batch past the cap: another
 * filter is dropping now and the pods added meanwhile used up the slack (a
 * pod counts against the cap only while it occupies nothing, so one that can
 * be dropped is always there; what is missing is the time to drop it). No
 * lock held. */
static int filter_only_make_room(struct cache *c, size_t cap)
{
	size_t batch = cap / 64, dropped = 0, n;
	int ret = 0;

	if (batch < 1)
		batch = 1;
	if (batch > FILTER_ONLY_DROP_BATCH)
		batch = FILTER_ONLY_DROP_BATCH;
	/* Acquire: pairs with the release below, so the next dropper starts from
	 * the table this one left. */
	if (__atomic_exchange_n(&c->filter_only.dropping, true, __ATOMIC_ACQUIRE)) {
		if (__atomic_load_n(&c->filter_only.n, __ATOMIC_RELAXED) < cap + batch)
			goto out;
		ret = -ENOSPC;
		goto refused;
	}
	dropped = filter_only_drop_oldest(c, batch);
	__atomic_store_n(&c->filter_only.dropping, false, __ATOMIC_RELEASE);
	if (dropped) {
		uint64_t total = __atomic_add_fetch(&c->filter_only.dropped, dropped,
						    __ATOMIC_RELAXED);

		if (filter_only_log_due(&c->filter_only.logged_ns))
			log_warn("cache", "%zu pods are known only from filter calls, the cap "
				 "(cache.max_filter_only_pods): dropped the %zu oldest that occupy "
				 "nothing (%llu so far); a real pod comes back with the watch",
				 cap, dropped, (unsigned long long)total);
	}
	n = __atomic_load_n(&c->filter_only.n, __ATOMIC_RELAXED);
	if (n < cap || (dropped && n < cap + batch))
		goto out;       /* others may have added meanwhile, within the slack */
	ret = -ENOSPC;
refused:
	__atomic_add_fetch(&c->filter_only.refused, 1, __ATOMIC_RELAXED);
	if (filter_only_log_due(&c->filter_only.refused_logged_ns))
		log_warn("cache", "%zu pods are known only from filter calls, the cap "
			 "(cache.max_filter_only_pods), and filters are adding them faster than "
			 "the oldest are dropped: a filter's pod is not remembered (its bind then "
			 "waits for the watch to show it)", cap);
out:
	return ret;
}

void cache_filter_only_get(struct cache *c, struct cache_filter_only_stats *out)
{
	out->pods = __atomic_load_n(&c->filter_only.n, __ATOMIC_RELAXED);
	out->cap = filter_only_cap(c);
	out->dropped = __atomic_load_n(&c->filter_only.dropped, __ATOMIC_RELAXED);
	out->refused = __atomic_load_n(&c->filter_only.refused, __ATOMIC_RELAXED);
}

/* ---- What a pod occupies ------------------------------------------------------ */

/* Record that <e> now occupies GPUs on <ne> (the by-node index). Stripe lock held. */
static void entry_link(struct pod_entry *e, struct node_entry *ne)
{
	e->node_entry = ne;
	pthread_mutex_lock(&ne->pods_lock);
	node_entry_list_push(ne, e);
	pthread_mutex_unlock(&ne->pods_lock);
}

void cache__pod_entry_release(struct cache *c, struct pod_entry *e)
{
	struct node_entry *ne = e->node_entry;

	if (!ne)
		return;
	cache__usage_change(c, ne, e->occupied_devices, e->occupied_unattr, -1);
	pthread_mutex_lock(&ne->pods_lock);
	node_entry_list_remove(ne, e);
	pthread_mutex_unlock(&ne->pods_lock);
	e->node_entry = NULL;
	e->occupied_devices = 0;
	e->occupied_unattr = 0;
	e->posted = false;
	e->uncertain_ns = 0;
	node_entry_unref(ne);
	/* Only the writer changes the name index. */
	if (cache__is_writer(c))
		cache__node_entry_maybe_remove(c, ne);
}

/* Whether a pod in this state occupies resources on its node (issue: pods that
 * finished or are being deleted occupy nothing). */
static bool pod_occupies(const struct cache_pod *p)
{
	return p->node && pod_is_active(p) && p->demand.gpus > 0;
}

/* Writer: make <e> occupy what the watch says <p> occupies on p->node. */
static int entry_occupy_fact(struct cache *c, struct pod_entry *e, const struct cache_pod *p)
{
	size_t len = strlen(p->node);
	struct node_entry *ne = node_entry_get(c, p->node, len);
	uint64_t devices = 0, slots = 0;
	uint32_t unattr = p->demand.gpus;
	bool has_devices = p->has_devices;

	/* Replica slots are the node's: read them against its record. */
	if (!has_devices && p->slot_ids && ne && ne->rec &&
	    cache_node_slots_parse(ne->rec, p->slot_ids, &slots) == 0 &&
	    (uint32_t)__builtin_popcountll(slots) == p->demand.gpus)
		has_devices = true;
	if (has_devices) {
		devices = p->has_devices ? p->devices : slots;
		unattr = 0;
		/* The node says the containers got other devices than troupe
		 * holds for the pod (its choice, or an earlier read-back): the
		 * node is right, and troupe's choice is free again. */
		if (p->devices_actual && e->node_entry && e->occupied_devices &&
		    e->occupied_devices != devices) {
			char had[CACHE_DEVICES_BUF], got[CACHE_DEVICES_BUF];

			cache_devices_format(e->occupied_devices, had, sizeof(had));
			cache_devices_format(devices, got, sizeof(got));
			log_info("cache", "pod %s/%s on %s: the node reports devices %s "
				 "(troupe.io/gpu-ids-actual) where troupe held %s; counting the "
				 "node's", p->ns, p->name, p->node, got, had);
		}
	} else if (e->node_entry && e->node_entry == ne &&
		   (uint32_t)__builtin_popcountll(e->occupied_devices) + e->occupied_unattr ==
			   p->demand.gpus) {
		/* No annotation, same node, same count: keep what the pod occupies.
		 * This is troupe's own bind being confirmed (its devices stay known),
		 * or a later event of a pod already counted. */
		e->state = CACHE_POD_STATE_BOUND;
		return 0;
	}
	if (e->node_entry == ne && ne && e->occupied_devices == devices &&
	    e->occupied_unattr == unattr) {
		e->state = CACHE_POD_STATE_BOUND;
		return 0;
	}
	cache__pod_entry_release(c, e);
	/* The release may have removed the node entry (a node troupe does not
	 * know, occupied only by this pod): look it up again. */
	ne = node_entry_get(c, p->node, len);
	if (!ne)
		ne = cache__node_entry_create(c, p->node, len);
	if (!ne)
		return -ENOMEM;
	if (devices && cache__usage_change(c, ne, devices, 0, 1) == -EBUSY) {
		log_warn("cache", "pod %s/%s: devices in %s are held by another pod on %s; "
			 "counting its %u GPUs as unattributed", p->ns, p->name,
			 p->devices_actual ? "troupe.io/gpu-ids-actual" : "troupe.io/gpu-ids", p->node,
			 p->demand.gpus);
		devices = 0;
		unattr = p->demand.gpus;
	}
	if (!devices)
		cache__usage_change(c, ne, 0, unattr, 1);
	node_entry_ref(ne);
	entry_link(e, ne);
	e->occupied_devices = devices;
	e->occupied_unattr = unattr;
	e->state = CACHE_POD_STATE_BOUND;
	return 0;
}

/* ---- Facts from the cluster (writer) and from filter -------------------------- */

int cache_pod_apply(struct cache *c, struct cache_pod *pod)
{
	size_t len = strlen(pod->uid);
	struct stripe *st = stripe_of(c, pod->uid, len);
	struct pod_entry *e;
	int ret = 0;

	cache__writer_check(c);
	pthread_mutex_lock(&st->lock);
	e = strmap_get(&st->map, pod->uid, len);
	if (!e && !(e = cache__pod_entry_new(st, pod->uid))) {
		ret = -ENOMEM;
		cache_pod_free(pod);
		goto out;
	}
	e->from_api = true;
	filter_only_count(c, e);
	if (pod_occupies(pod)) {
		ret = entry_occupy_fact(c, e, pod);
		if (e->state == CACHE_POD_STATE_BOUND)
			e->uncertain_ns = 0;    /* the cluster says where it is */
	} else if (e->state == CACHE_POD_STATE_ASSUMED && !pod->node && pod_is_active(pod)) {
		/* An event from before troupe's binding landed: keep the assumption
		 * until the watch shows the pod bound, gone or finished. */
	} else {
		cache__pod_entry_release(c, e);
		e->state = CACHE_POD_STATE_UNACCOUNTED;
	}
	cache__members_move(c, e->uid, e->pod, pod);
	cache__members_plan(c, pod);
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

	cache__writer_check(c);
	pthread_mutex_lock(&st->lock);
	e = strmap_del(&st->map, uid, len);
	if (e) {
		cache__pod_entry_release(c, e);
		filter_only_uncount(c, e);
		cache__members_move(c, e->uid, e->pod, NULL);
	}
	pthread_mutex_unlock(&st->lock);
	cache__pod_entry_free(e);
	return e ? 0 : -ENOENT;
}

int cache_pod_remember(struct cache *c, struct cache_pod *pod)
{
	size_t len = strlen(pod->uid), cap = filter_only_cap(c);
	struct stripe *st = stripe_of(c, pod->uid, len);
	struct pod_entry *e;
	int ret = 0;

	pthread_mutex_lock(&st->lock);
	e = strmap_get(&st->map, pod->uid, len);
	if (e) {
		/* Already known from the watch or an earlier call: that is newer. */
		goto out;
	}
	if (__atomic_load_n(&c->filter_only.n, __ATOMIC_RELAXED) >= cap) {
		/* Room is made with no stripe lock held (it takes each in turn). */
		pthread_mutex_unlock(&st->lock);
		ret = filter_only_make_room(c, cap);
		pthread_mutex_lock(&st->lock);
		if (ret < 0 || strmap_get(&st->map, pod->uid, len))
			goto out;
	}
	e = cache__pod_entry_new(st, pod->uid);
	if (!e) {
		ret = -ENOMEM;
		goto out;
	}
	/* A plan counts only from the cluster: a filter call's body is not one. */
	free(pod->gang_plan);
	pod->gang_plan = NULL;
	e->pod = pod;
	e->seen_ns = util_now_ns();
	filter_only_count(c, e);
	cache__members_move(c, e->uid, NULL, pod);
	pod = NULL;
out:
	pthread_mutex_unlock(&st->lock);
	cache_pod_free(pod);
	return ret;
}

/* ---- Reading the table ---------------------------------------------------------- */

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

void cache__pod_entry_info(const struct pod_entry *e, struct cache_pod_info *out)
{
	memset(out, 0, sizeof(*out));
	out->state = e->state;
	out->from_api = e->from_api;
	out->posted = e->posted;
	out->uncertain = e->uncertain_ns != 0;
	out->reservation = e->reservation;
	copy_str(out->ns, sizeof(out->ns), e->pod->ns);
	copy_str(out->name, sizeof(out->name), e->pod->name);
	copy_str(out->node, sizeof(out->node), e->node_entry ? e->node_entry->name : e->pod->node);
	copy_str(out->topology, sizeof(out->topology), e->pod->topology);
	copy_str(out->group, sizeof(out->group), e->pod->group);
	copy_str(out->gang_topology, sizeof(out->gang_topology), e->pod->gang_topology);
	copy_str(out->queue, sizeof(out->queue), e->pod->queue);
	copy_str(out->pinned, sizeof(out->pinned), e->pod->pinned);
	out->priority = e->pod->priority;
	out->phase = e->pod->phase;
	out->active = pod_is_active(e->pod);
	out->gated = e->pod->gated;
	out->min_member = e->pod->min_member;
	out->demand = e->pod->demand;
	out->demand_valid = e->pod->demand_error == NULL;
	out->devices = e->occupied_devices;
	out->unattributed = e->occupied_unattr;
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
		cache__pod_entry_info(e, out);
	pthread_mutex_unlock(&st->lock);
	return ret;
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
			cache__pod_entry_info(e, &info);
			fn(&info, e->uid, arg);
		}
		pthread_mutex_unlock(&c->pods[i].lock);
	}
}

int cache_node_pods(struct cache *c, const char *node, void (*fn)(const char *uid, void *arg),
		    void *arg)
{
	struct node_entry *ne;
	int ret = -ENOENT;

	cache_read_begin(c);
	ne = node_entry_get(c, node, strlen(node));
	if (ne) {
		ret = 0;
		pthread_mutex_lock(&ne->pods_lock);
		for (struct pod_entry *e = ne->pods; e; e = e->node_next)
			fn(e->uid, arg);
		pthread_mutex_unlock(&ne->pods_lock);
	}
	cache_read_end(c);
	return ret;
}

/* ---- troupe's binds ------------------------------------------------------------- */

int cache_pod_assume(struct cache *c, const char *uid, const char *node, uint64_t *devices)
{
	size_t len = strlen(uid);
	struct stripe *st = stripe_of(c, uid, len);
	struct pod_entry *e;
	struct node_entry *ne = NULL;
	struct cache_node *rec;
	uint64_t want = *devices;
	int ret = 0;

	cache_read_begin(c);
	pthread_mutex_lock(&st->lock);
	e = strmap_get(&st->map, uid, len);
	if (!e || !e->pod) {
		ret = -ENOENT;
		goto out;
	}
	if (e->node_entry) {
		if (strcmp(e->node_entry->name, node) == 0) {
			*devices = e->occupied_devices;
			ret = -EALREADY;
		} else {
			ret = -EEXIST;
		}
		goto out;
	}
	ne = node_entry_get(c, node, strlen(node));
	if (!ne) {
		ret = -ENOENT;
		goto out;
	}
	/* seq_cst increment, then load the record: pairs with the writer's
	 * seq_cst store of NULL and its refs check in cache__node_entry_maybe_remove. */
	node_entry_ref(ne);
	rec = __atomic_load_n(&ne->rec, __ATOMIC_SEQ_CST);
	if (!rec) {
		ret = -ENOENT;
		goto out_unref;
	}
	if ((uint32_t)__builtin_popcountll(want) != e->pod->demand.gpus ||
	    (want & ~cache_node_capacity_mask(rec)) || (want & rec->unhealthy)) {
		ret = -EINVAL;
		goto out_unref;
	}
	ret = cache__usage_claim(c, ne, rec, want);
	if (ret < 0)
		goto out_unref;
	entry_link(e, ne);      /* the reference taken above now belongs to e */
	e->occupied_devices = want;
	e->occupied_unattr = 0;
	e->state = CACHE_POD_STATE_ASSUMED;
	filter_only_count(c, e);        /* it occupies a node now: not the cap's */
	goto out;
out_unref:
	node_entry_unref(ne);
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
		cache__pod_entry_release(c, e);
		e->state = CACHE_POD_STATE_UNACCOUNTED;
		filter_only_count(c, e);
		ret = 0;
	}
	pthread_mutex_unlock(&st->lock);
	cache_read_end(c);
	return ret;
}

int cache_pod_mark_bind(struct cache *c, const char *uid, bool posted)
{
	size_t len = strlen(uid);
	struct stripe *st = stripe_of(c, uid, len);
	struct pod_entry *e;
	int ret = -ENOENT;

	pthread_mutex_lock(&st->lock);
	e = strmap_get(&st->map, uid, len);
	if (e && e->node_entry) {
		e->posted = posted;
		e->uncertain_ns = posted ? 0 : util_now_ns();
		ret = 0;
	}
	pthread_mutex_unlock(&st->lock);
	return ret;
}

/* ---- Housekeeping ------------------------------------------------------------- */

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
			    util_elapsed_ns(now, e->uncertain_ns) > uncertain_ns) {
				/* The cluster never showed the pod bound: it was not. */
				cache__pod_entry_release(c, e);
				e->state = CACHE_POD_STATE_UNACCOUNTED;
				e->uncertain_ns = 0;
				filter_only_count(c, e);
				released++;
			} else if (!e->from_api && !e->reservation && !e->node_entry &&
				   e->state == CACHE_POD_STATE_UNACCOUNTED &&
				   util_elapsed_ns(now, e->seen_ns) > remembered_ns) {
				(void)gone_push(&gone, &n, &cap, e);   /* no memory: next pass */
			}
		}
		for (size_t k = 0; k < n; k++) {
			strmap_del(&st->map, gone[k]->uid, strlen(gone[k]->uid));
			filter_only_uncount(c, gone[k]);
			cache__members_move(c, gone[k]->uid, gone[k]->pod, NULL);
		}
		pthread_mutex_unlock(&st->lock);
		for (size_t k = 0; k < n; k++)
			cache__pod_entry_free(gone[k]);
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

void cache__pod_sweep(struct cache *c, bool (*keep)(const char *uid, void *arg), void *arg)
{
	size_t swept = 0;

	cache__writer_check(c);
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
			 * its fate is the binder's answer or the watch's replay. A
			 * ResourceClaim's entry is the claims' relist's (dra.c). */
			if (e->reservation || !e->from_api || e->state == CACHE_POD_STATE_ASSUMED ||
			    cache_dra_uid(e->uid) || keep(e->uid, arg))
				continue;
			if (!gone_push(&gone, &n, &cap, e))
				break;
		}
		for (size_t k = 0; k < n; k++) {
			strmap_del(&st->map, gone[k]->uid, strlen(gone[k]->uid));
			cache__pod_entry_release(c, gone[k]);
			cache__members_move(c, gone[k]->uid, gone[k]->pod, NULL);
		}
		pthread_mutex_unlock(&st->lock);
		for (size_t k = 0; k < n; k++)
			cache__pod_entry_free(gone[k]);
		free(gone);
		swept += n;
	}
	if (swept)
		log_info("cache", "%zu pods are gone from the API server; their GPUs are released",
			 swept);
}

void cache__pods_fini(struct cache *c)
{
	for (int i = 0; i < POD_STRIPES; i++) {
		size_t pos = 0;
		void *v;

		while (strmap_next(&c->pods[i].map, &pos, NULL, &v))
			cache__pod_entry_free(v);
		strmap_fini(&c->pods[i].map);
		pthread_mutex_destroy(&c->pods[i].lock);
	}
}
