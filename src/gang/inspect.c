/* What the gang manager holds, copied out for people: /debug/explain, the
 * dashboard and the gauges of /metrics read gangs and queues through here.
 *
 * Every answer is a copy taken under the manager's lock, so a reader holds
 * the lock only as long as copying takes and can then format at leisure. The
 * queues' shares need a walk of every pod, done before the lock is taken
 * (as the fairness pass does), so none of this belongs on a verb's path.
 */
#include "gang/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

const char *gang_view_state_name(enum gang_view_state s)
{
	switch (s) {
	case GANG_VIEW_IDLE:
		return "idle";
	case GANG_VIEW_WAITING:
		return "waiting";
	case GANG_VIEW_PLANNED:
		return "planned";
	case GANG_VIEW_BINDING:
		return "binding";
	}
	return "unknown";
}

static enum gang_view_state view_state(enum gang_state s)
{
	switch (s) {
	case GANG_WAITING:
		return GANG_VIEW_WAITING;
	case GANG_PLANNED:
		return GANG_VIEW_PLANNED;
	case GANG_BINDING:
		return GANG_VIEW_BINDING;
	case GANG_IDLE:
		break;
	}
	return GANG_VIEW_IDLE;
}

static double seconds(uint64_t ns)
{
	return (double)ns / 1e9;
}

/* The waiting gangs in the fair order, first first. Lock held. */
struct order {
	const struct gang_manager *m;
	const struct shares *s;
};

static int by_fair_order(const void *a, const void *b, void *arg)
{
	const struct order *o = arg;

	return -gang__precedes(o->m, o->s, *(struct gang *const *)a, *(struct gang *const *)b);
}

/* <g>'s place among the waiting gangs, 1 first (0 when it does not wait).
 * Lock held. */
static unsigned fair_position(const struct gang_manager *m, const struct shares *s,
			      const struct gang *g)
{
	unsigned ahead = 0;
	size_t pos = 0;
	void *v;

	if (!gang__waiting(g))
		return 0;
	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		const struct gang *o = v;

		if (o != g && gang__waiting(o) && gang__precedes(m, s, o, g) > 0)
			ahead++;
	}
	return ahead + 1;
}

/* Copy <g> into <out>. Lock held. 0 or -ENOMEM. */
static int copy_gang(const struct gang_manager *m, const struct shares *s, const struct gang *g,
		     uint64_t now, unsigned position, struct gang_view *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->ns, sizeof(out->ns), "%s", g->ns);
	snprintf(out->name, sizeof(out->name), "%s", g->name);
	out->state = view_state(g->state);
	out->quorum = g->quorum;
	out->timeout_s = g->timeout_s;
	out->need = g->need;
	out->need_gpus = g->need_gpus;
	out->priority = g->priority;
	snprintf(out->queue, sizeof(out->queue), "%s", g->queue);
	out->n_parked = g->n_parked;
	if (gang__waiting(g))
		out->waiting_s = seconds(util_elapsed_ns(now, g->waiting_since_ns));
	if (gang__planned(g)) {
		out->deadline_s = g->deadline_ns > now ? seconds(g->deadline_ns - now) : 0.0;
		out->deadline_is_http = g->deadline_is_http;
	}
	out->n_holds = g->n_holds;
	out->n_targets = g->n_targets;
	out->fair_position = position;
	out->share = gang__share_of(m, s, g->queue);
	snprintf(out->reason, sizeof(out->reason), "%s", g->reason);
	if (g->slots && g->n_slots) {
		out->slots = calloc(g->n_slots, sizeof(*out->slots));
		if (!out->slots)
			return -ENOMEM;
		for (unsigned i = 0; i < g->n_slots; i++) {
			const struct reserved_slot *r = &g->slots[i];
			struct gang_view_slot *v = &out->slots[i];

			snprintf(v->node, sizeof(v->node), "%s", r->node);
			v->devices = r->devices;
			v->gpus = r->req.demand.gpus;
			snprintf(v->member, sizeof(v->member), "%s", r->member);
		}
		out->n_slots = g->n_slots;
	}
	return 0;
}

void gang_view_fini(struct gang_view *v)
{
	if (!v)
		return;
	free(v->slots);
	v->slots = NULL;
	v->n_slots = 0;
}

int gang_view_get(struct gang_manager *m, const char *ns, const char *name,
		  struct gang_view *out)
{
	struct shares s;
	struct gang *g;
	int rc = -ENOENT;

	memset(out, 0, sizeof(*out));
	gang__shares_load(m, &s);
	pthread_mutex_lock(&m->lock);
	g = gang__get(m, ns, name, false);
	if (g)
		rc = copy_gang(m, &s, g, gang__now(m), fair_position(m, &s, g), out);
	pthread_mutex_unlock(&m->lock);
	gang__shares_fini(&s);
	return rc;
}

void gang_view_list_free(struct gang_view *v, unsigned n)
{
	if (!v)
		return;
	for (unsigned i = 0; i < n; i++)
		gang_view_fini(&v[i]);
	free(v);
}

static int by_key(const void *a, const void *b)
{
	const struct gang_view *x = a, *y = b;
	int c = strcmp(x->ns, y->ns);

	return c ? c : strcmp(x->name, y->name);
}

int gang_view_list(struct gang_manager *m, struct gang_view **out, unsigned *n)
{
	struct gang_view *views = NULL;
	struct gang **waiting = NULL;
	struct shares s;
	unsigned count = 0, n_waiting = 0;
	size_t pos = 0;
	uint64_t now;
	void *v;
	int rc = 0;

	*out = NULL;
	*n = 0;
	gang__shares_load(m, &s);
	pthread_mutex_lock(&m->lock);
	now = gang__now(m);
	count = (unsigned)strmap_count(&m->gangs);
	if (count) {
		views = calloc(count, sizeof(*views));
		waiting = calloc(count, sizeof(*waiting));
		if (!views || !waiting) {
			rc = -ENOMEM;
			goto out;
		}
	}
	/* The fair order once for all (each gang's position by a sort, not a
	 * count per gang: thousands of gangs may wait). */
	while (strmap_next(&m->gangs, &pos, NULL, &v))
		if (gang__waiting((struct gang *)v))
			waiting[n_waiting++] = v;
	if (n_waiting > 1)      /* qsort_r's array may not be NULL, even empty */
		qsort_r(waiting, n_waiting, sizeof(*waiting), by_fair_order,
			&(struct order){ m, &s });
	for (unsigned i = 0; i < n_waiting && rc == 0; i++)
		rc = copy_gang(m, &s, waiting[i], now, i + 1, &views[i]);
	*n = n_waiting;
	pos = 0;
	while (rc == 0 && strmap_next(&m->gangs, &pos, NULL, &v)) {
		struct gang *g = v;

		if (gang__waiting(g))
			continue;
		rc = copy_gang(m, &s, g, now, 0, &views[*n]);
		(*n)++;
	}
out:
	pthread_mutex_unlock(&m->lock);
	gang__shares_fini(&s);
	free(waiting);
	if (rc) {
		gang_view_list_free(views, *n);
		*n = 0;
		return rc;
	}
	if (*n > 1)
		qsort(views, *n, sizeof(*views), by_key);
	*out = views;
	return 0;
}

/* The queue <name> in <map>, made when new. NULL without memory. */
static struct gang_queue_view *queue_of(struct strmap *map, const struct gang_manager *m,
					const struct shares *s, const char *name)
{
	struct gang_queue_view *q = strmap_get(map, name, strlen(name));

	if (q)
		return q;
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->weight = gang__queue_weight(m, name, &q->weight_from);
	q->share = gang__share_of(m, s, name);
	if (strmap_put(map, q->name, strlen(q->name), q, NULL) < 0) {
		free(q);
		return NULL;
	}
	return q;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct gang_queue_view *)a)->name,
		      ((const struct gang_queue_view *)b)->name);
}

int gang_queue_list(struct gang_manager *m, struct gang_queue_view **out, unsigned *n)
{
	struct strmap map;
	struct shares s;
	size_t pos = 0;
	void *v;
	const char *key;
	unsigned i = 0;
	bool oom = false;

	*out = NULL;
	*n = 0;
	strmap_init(&map);
	gang__shares_load(m, &s);
	pthread_mutex_lock(&m->lock);
	for (unsigned k = 0; k < m->cfg.n_queues && !oom; k++)
		oom = !queue_of(&map, m, &s, m->cfg.queue_names[k]);
	while (!oom && strmap_next(&s.by_queue, &pos, &key, &v)) {
		struct gang_queue_view *q = queue_of(&map, m, &s, key);

		if (q)
			q->gpus = gang__queue_gpus(&s, key);
		oom = !q;
	}
	pos = 0;
	while (!oom && strmap_next(&m->gangs, &pos, NULL, &v)) {
		const struct gang *g = v;
		struct gang_queue_view *q;

		if (!gang__waiting(g) && !gang__planned(g))
			continue;
		q = queue_of(&map, m, &s, g->queue);
		if (q) {
			q->waiting += gang__waiting(g);
			q->planned += gang__planned(g);
			q->binding += g->state == GANG_BINDING;
		}
		oom = !q;
	}
	pthread_mutex_unlock(&m->lock);
	gang__shares_fini(&s);
	if (!oom && strmap_count(&map)) {
		*out = calloc(strmap_count(&map), sizeof(**out));
		oom = !*out;
	}
	pos = 0;
	while (strmap_next(&map, &pos, NULL, &v)) {
		if (!oom)
			(*out)[i++] = *(struct gang_queue_view *)v;
		free(v);
	}
	strmap_fini(&map);
	if (oom) {
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	*n = i;
	if (i > 1)
		qsort(*out, i, sizeof(**out), by_name);
	return 0;
}
