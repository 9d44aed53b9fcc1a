/* Gang reservations: devices kept on a node for a gang's future member, under
 * a key rather than a pod's UID. A reservation is a synthetic pod entry that
 * asks exactly those devices and is assumed like a pod, so everyone counts
 * them as used and no relist sweeps them; claiming one hands its devices to
 * the member pod without a moment where they are free.
 */
#include "cache/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
	e = cache__pod_entry_new(st, key);
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
		cache__pod_entry_free(e);
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
		cache__pod_entry_release(c, e);
	} else {
		e = NULL;
	}
	pthread_mutex_unlock(&st->lock);
	cache_read_end(c);
	cache__pod_entry_free(e);
	return e ? 0 : -ENOENT;
}

/* Move a by-node index link from <from> to <to> (same node entry). Stripe locks held. */
static void entry_relink(struct pod_entry *from, struct pod_entry *to, struct node_entry *ne)
{
	pthread_mutex_lock(&ne->pods_lock);
	node_entry_list_remove(ne, from);
	node_entry_list_push(ne, to);
	pthread_mutex_unlock(&ne->pods_lock);
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
	if (!r || !r->reservation || !r->node_entry || !p || !p->pod || p->reservation) {
		ret = -ENOENT;
		goto out;
	}
	if (p->node_entry) {
		ret = -EEXIST;
		goto out;
	}
	if ((uint32_t)__builtin_popcountll(r->occupied_devices) != p->pod->demand.gpus) {
		ret = -EINVAL;
		goto out;
	}
	/* The devices change owner without ever being free: usage is untouched
	 * and the node entry's reference passes from the reservation to the pod. */
	entry_relink(r, p, r->node_entry);
	p->node_entry = r->node_entry;
	p->occupied_devices = r->occupied_devices;
	p->occupied_unattr = 0;
	p->state = CACHE_POD_STATE_ASSUMED;
	r->node_entry = NULL;
	r->occupied_devices = 0;
	strmap_del(&a->map, key, klen);
out:
	if (second != first)
		pthread_mutex_unlock(&second->lock);
	pthread_mutex_unlock(&first->lock);
	if (ret == 0)
		cache__pod_entry_free(r);
	return ret;
}

