/* Other schedulers' Queue objects: the weight each gives a queue for troupe's
 * fair sharing (gang/fair.c), where troupe's own config names none. Volcano's
 * Queue (scheduling.volcano.sh/v1beta1) has spec.weight, an integer its
 * admission webhook sets to 1 when 0; KAI Scheduler's Queue
 * (scheduling.run.ai/v2) has spec.resources.gpu.overQuotaWeight, the share of
 * the GPUs beyond every queue's quota it gets, the nearest KAI has to a
 * weight. Both are cluster-scoped. Kept per API in maps under groups_lock,
 * written by the informer (the cache's writer), read by the gang manager.
 */
#include "cache/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

const struct cache_pg_api_info cache_queue_apis[CACHE_Q_API_COUNT] = {
	[CACHE_Q_VOLCANO] = { "scheduling.volcano.sh/v1beta1",
			      "/apis/scheduling.volcano.sh/v1beta1/queues", "Volcano" },
	[CACHE_Q_KAI] = { "scheduling.run.ai/v2", "/apis/scheduling.run.ai/v2/queues",
			  "KAI Scheduler" },
};

/* The most weight troupe takes from a Queue: enough for any ratio a cluster
 * means, and far from what would make a share round to 0. */
#define QUEUE_WEIGHT_MAX 1e6

int cache_queue_parse(const cJSON *obj, enum cache_queue_api api, struct cache_queue *out,
		      char *err, size_t errlen)
{
	const char *name = json_str(json_obj(obj, "metadata"), "name");
	const cJSON *spec = json_obj(obj, "spec");
	const cJSON *w = NULL;

	if ((unsigned)api >= CACHE_Q_API_COUNT) {
		snprintf(err, errlen, "not a Queue API troupe reads");
		return -EINVAL;
	}
	if (!name || !name[0] || strlen(name) > K8S_NAME_MAX) {
		snprintf(err, errlen, "%s Queue has no valid metadata.name",
			 cache_queue_apis[api].who);
		return -EINVAL;
	}
	snprintf(out->name, sizeof(out->name), "%s", name);
	if (api == CACHE_Q_VOLCANO)
		w = cJSON_GetObjectItemCaseSensitive(spec, "weight");
	else
		w = cJSON_GetObjectItemCaseSensitive(
			json_obj(json_obj(spec, "resources"), "gpu"), "overQuotaWeight");
	out->weight = 1.0;
	if (cJSON_IsNumber(w) && isfinite(w->valuedouble) && w->valuedouble > 0)
		out->weight = w->valuedouble > QUEUE_WEIGHT_MAX ? QUEUE_WEIGHT_MAX : w->valuedouble;
	return 0;
}

int cache_queue_apply(struct cache *c, enum cache_queue_api api, const struct cache_queue *q)
{
	struct cache_queue *e;
	void *old = NULL;
	int ret;

	cache__writer_check(c);
	if ((unsigned)api >= CACHE_Q_API_COUNT)
		return -EINVAL;
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	*e = *q;
	pthread_mutex_lock(&c->groups_lock);
	ret = strmap_put(&c->queues[api], e->name, strlen(e->name), e, &old);
	pthread_mutex_unlock(&c->groups_lock);
	if (ret < 0)
		free(e);
	free(old);
	return ret < 0 ? ret : 0;
}

int cache_queue_delete(struct cache *c, enum cache_queue_api api, const char *name)
{
	void *e;

	cache__writer_check(c);
	if ((unsigned)api >= CACHE_Q_API_COUNT)
		return -EINVAL;
	pthread_mutex_lock(&c->groups_lock);
	e = strmap_del(&c->queues[api], name, strlen(name));
	pthread_mutex_unlock(&c->groups_lock);
	free(e);
	return e ? 0 : -ENOENT;
}

bool cache_queue_weight(struct cache *c, const char *name, double *weight,
			enum cache_queue_api *api)
{
	const struct cache_queue *e = NULL;
	int a;

	pthread_mutex_lock(&c->groups_lock);
	for (a = 0; a < CACHE_Q_API_COUNT && !e; a++)
		e = strmap_get(&c->queues[a], name, strlen(name));
	if (e) {
		*weight = e->weight;
		if (api)
			*api = (enum cache_queue_api)(a - 1);
	}
	pthread_mutex_unlock(&c->groups_lock);
	return e != NULL;
}

void cache_queue_foreach(struct cache *c, enum cache_queue_api api,
			 void (*fn)(const struct cache_queue *, void *), void *arg)
{
	size_t pos = 0;
	void *v;

	if ((unsigned)api >= CACHE_Q_API_COUNT)
		return;
	pthread_mutex_lock(&c->groups_lock);
	while (strmap_next(&c->queues[api], &pos, NULL, &v))
		fn(v, arg);
	pthread_mutex_unlock(&c->groups_lock);
}
