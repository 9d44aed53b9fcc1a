/* Pod groups: the PodGroup objects troupe watches (ns/name -> spec), and the
 * member index that lists, per "ns/group", the pods troupe knows of in it, so
 * that a gang's counts and walks cost its members rather than every pod. When
 * the index cannot be kept (no memory) it is marked lost for good and every
 * walk scans the whole pod table instead, with the same answers. The index
 * also keeps, per group, the gang plan its bound members carry (one copy), for
 * the recovery of gangs left partly bound (extender/recover.c); with the index
 * lost, no plan is kept.
 */
#include "cache/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

struct members {
	char key[K8S_KEY_BUF];          /* "ns/group" */
	char **uids;                    /* owned */
	unsigned n, cap;
	char *plan;                     /* a bound member's gang plan (text), owned; or NULL */
	uint64_t plan_done;             /* hash of the plan last finished with; 0: none */
};

static void members_free(struct members *m)
{
	for (unsigned i = 0; i < m->n; i++)
		free(m->uids[i]);
	free(m->uids);
	free(m->plan);
	free(m);
}

/* FNV-1a, never 0: tells a finished plan's text from a new one. */
static uint64_t plan_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h ? h : 1;
}

struct podgroup {
	char key[K8S_KEY_BUF];          /* "ns/name" */
	struct cache_podgroup *pg;
};

/* "ns/name": the key of a pod group in both maps. */
static int group_key(char *out, size_t len, const char *ns, const char *name)
{
	return snprintf(out, len, "%s/%s", ns, name);
}

/* ---- The member index ------------------------------------------------------- */

static int members_key(const struct cache_pod *p, char *key, size_t len)
{
	if (!p || !p->group)
		return 0;
	return group_key(key, len, p->ns ? p->ns : "", p->group);
}

void cache__members_move(struct cache *c, const char *uid, const struct cache_pod *old,
			 const struct cache_pod *now)
{
	char ko[K8S_KEY_BUF], kn[K8S_KEY_BUF];
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
			members_free(m);
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

void cache__groups_fini(struct cache *c)
{
	size_t pos = 0;
	void *v;

	for (int a = 0; a < CACHE_PG_API_COUNT; a++) {
		pos = 0;
		while (strmap_next(&c->groups[a], &pos, NULL, &v)) {
			cache_podgroup_free(((struct podgroup *)v)->pg);
			free(v);
		}
		strmap_fini(&c->groups[a]);
	}
	for (int a = 0; a < CACHE_Q_API_COUNT; a++) {
		pos = 0;
		while (strmap_next(&c->queues[a], &pos, NULL, &v))
			free(v);
		strmap_fini(&c->queues[a]);
	}
	pthread_mutex_destroy(&c->groups_lock);
	pos = 0;
	while (strmap_next(&c->members, &pos, NULL, &v))
		members_free(v);
	strmap_fini(&c->members);
	pthread_mutex_destroy(&c->members_lock);
}

/* ---- Gang plans ------------------------------------------------------------------
 *
 * Each member's Binding carries its gang's whole plan, so every bound member
 * shows the same text: one copy per group is kept, not one per member. A plan
 * finished with is remembered by its hash, so members showing it again (every
 * status change of a running pod) cost a comparison, not a copy. */

void cache__members_plan(struct cache *c, struct cache_pod *pod)
{
	char key[K8S_KEY_BUF];
	char *plan = pod->gang_plan;
	struct members *m;
	int len;

	if (!plan)
		return;
	pod->gang_plan = NULL;
	len = members_key(pod, key, sizeof(key));
	if (len > 0 && (size_t)len < sizeof(key)) {
		pthread_mutex_lock(&c->members_lock);
		m = strmap_get(&c->members, key, (size_t)len);
		if (m && !(m->plan && strcmp(m->plan, plan) == 0) && plan_hash(plan) != m->plan_done) {
			free(m->plan);
			m->plan = plan;
			plan = NULL;
		}
		pthread_mutex_unlock(&c->members_lock);
	}
	free(plan);
}

struct plan_copy {
	char *key;                      /* "ns/group", cut at the '/' before the call */
	char *plan;
};

void cache_group_plans_foreach(struct cache *c,
			       void (*fn)(const char *ns, const char *group, const char *plan,
					  void *arg),
			       void *arg)
{
	struct plan_copy *list = NULL;
	unsigned n = 0, cap = 0;
	size_t pos = 0;
	void *v;

	pthread_mutex_lock(&c->members_lock);
	while (strmap_next(&c->members, &pos, NULL, &v)) {
		struct members *m = v;

		if (!m->plan)
			continue;
		if (n == cap) {
			struct plan_copy *l = realloc(list, (cap = cap ? cap * 2 : 8) * sizeof(*l));

			if (!l)
				break;
			list = l;
		}
		list[n].key = strdup(m->key);
		list[n].plan = strdup(m->plan);
		if (list[n].key && list[n].plan) {
			n++;
		} else {
			free(list[n].key);
			free(list[n].plan);
		}
	}
	pthread_mutex_unlock(&c->members_lock);
	for (unsigned i = 0; i < n; i++) {
		char *slash = strchr(list[i].key, '/');

		if (slash) {
			*slash = '\0';
			fn(list[i].key, slash + 1, list[i].plan, arg);
		}
		free(list[i].key);
		free(list[i].plan);
	}
	free(list);
}

void cache_group_plan_done(struct cache *c, const char *ns, const char *group, const char *plan)
{
	char key[K8S_KEY_BUF];
	int len = group_key(key, sizeof(key), ns, group);
	struct members *m;

	if (len <= 0 || (size_t)len >= sizeof(key))
		return;
	pthread_mutex_lock(&c->members_lock);
	m = strmap_get(&c->members, key, (size_t)len);
	if (m && m->plan && strcmp(m->plan, plan) == 0) {
		m->plan_done = plan_hash(plan);
		free(m->plan);
		m->plan = NULL;
	}
	pthread_mutex_unlock(&c->members_lock);
}

/* ---- PodGroup objects -------------------------------------------------------- */

int cache_podgroup_apply(struct cache *c, struct cache_podgroup *pg)
{
	struct podgroup *g = calloc(1, sizeof(*g));
	struct strmap *map;
	void *old = NULL;
	int ret;

	cache__writer_check(c);
	if (!g || (unsigned)pg->api >= CACHE_PG_API_COUNT) {
		ret = g ? -EINVAL : -ENOMEM;
		cache_podgroup_free(pg);
		free(g);
		return ret;
	}
	group_key(g->key, sizeof(g->key), pg->ns, pg->name);
	g->pg = pg;
	map = &c->groups[pg->api];
	pthread_mutex_lock(&c->groups_lock);
	ret = strmap_put(map, g->key, strlen(g->key), g, &old);
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

int cache_podgroup_delete(struct cache *c, enum cache_pg_api api, const char *ns,
			  const char *name)
{
	char key[K8S_KEY_BUF];
	struct podgroup *g;

	cache__writer_check(c);
	if ((unsigned)api >= CACHE_PG_API_COUNT)
		return -EINVAL;
	group_key(key, sizeof(key), ns, name);
	pthread_mutex_lock(&c->groups_lock);
	g = strmap_del(&c->groups[api], key, strlen(key));
	pthread_mutex_unlock(&c->groups_lock);
	if (!g)
		return -ENOENT;
	cache_podgroup_free(g->pg);
	free(g);
	return 0;
}

/* Copy <s> into <buf> at *<at> when it fits; "" otherwise. */
static const char *copy_after(char *buf, size_t buflen, size_t *at, const char *s)
{
	size_t n = strlen(s) + 1;

	if (*at + n > buflen)
		return "";
	memcpy(buf + *at, s, n);
	*at += n;
	return buf + *at - n;
}

int cache_podgroup_get(struct cache *c, const char *ns, const char *name,
		       struct cache_podgroup *out, char *buf, size_t buflen)
{
	char key[K8S_KEY_BUF];
	struct podgroup *g = NULL;
	size_t at;

	group_key(key, sizeof(key), ns, name);
	pthread_mutex_lock(&c->groups_lock);
	for (int i = 0; i < CACHE_PG_API_COUNT && !g; i++)
		g = strmap_get(&c->groups[cache_pg_precedence[i]], key, strlen(key));
	if (g) {
		*out = *g->pg;
		snprintf(buf, buflen, "%s", g->key);
		out->ns = buf;
		out->name = strchr(buf, '/') ? strchr(buf, '/') + 1 : buf;
		if (strchr(buf, '/'))
			*strchr(buf, '/') = '\0';
		/* The uid and the queue after the key, when <buf> has room. */
		at = strlen(g->key) + 1;
		out->uid = copy_after(buf, buflen, &at, g->pg->uid);
		out->queue = copy_after(buf, buflen, &at, g->pg->queue);
	}
	pthread_mutex_unlock(&c->groups_lock);
	return g ? 0 : -ENOENT;
}

void cache_podgroup_foreach(struct cache *c, void (*fn)(const struct cache_podgroup *, void *),
			    void *arg)
{
	void *v;

	pthread_mutex_lock(&c->groups_lock);
	for (int a = 0; a < CACHE_PG_API_COUNT; a++) {
		size_t pos = 0;

		while (strmap_next(&c->groups[a], &pos, NULL, &v))
			fn(((struct podgroup *)v)->pg, arg);
	}
	pthread_mutex_unlock(&c->groups_lock);
}

void cache_podgroup_foreach_winning(struct cache *c,
				    void (*fn)(const struct cache_podgroup *, void *), void *arg)
{
	void *v;

	pthread_mutex_lock(&c->groups_lock);
	for (int i = 0; i < CACHE_PG_API_COUNT; i++) {
		size_t pos = 0;

		while (strmap_next(&c->groups[cache_pg_precedence[i]], &pos, NULL, &v)) {
			const char *key = ((struct podgroup *)v)->key;
			bool earlier = false;

			/* The group's PodGroup is an API before this one's, if any has it. */
			for (int j = 0; j < i && !earlier; j++)
				earlier = strmap_get(&c->groups[cache_pg_precedence[j]], key,
						     strlen(key)) != NULL;
			if (!earlier)
				fn(((struct podgroup *)v)->pg, arg);
		}
	}
	pthread_mutex_unlock(&c->groups_lock);
}

/* ---- Walks and counts of a gang's members ----------------------------------------- */

/* Every pod, for a walk of one group when the member index was lost. */
struct group_scan {
	const char *ns, *group;
	void (*fn)(const struct cache_pod_info *, const char *uid, void *arg);
	void *arg;
	bool live;                      /* skip pods known only from filter calls */
};

static void group_scan_one(const struct cache_pod_info *p, const char *uid, void *arg)
{
	const struct group_scan *gs = arg;

	if (!p->reservation && strcmp(p->group, gs->group) == 0 && strcmp(p->ns, gs->ns) == 0 &&
	    (p->from_api || !gs->live))
		gs->fn(p, uid, gs->arg);
}

void cache_group_foreach(struct cache *c, const char *ns, const char *group,
			 void (*fn)(const struct cache_pod_info *, const char *uid, void *arg),
			 void *arg)
{
	char key[K8S_KEY_BUF], **uids = NULL;
	unsigned n = 0;
	struct members *m;
	bool lost, live = __atomic_load_n(&c->live, __ATOMIC_ACQUIRE);
	int len = group_key(key, sizeof(key), ns, group);

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
		struct group_scan gs = { ns, group, fn, arg, live };

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
			cache__pod_entry_info(e, &info);
		pthread_mutex_unlock(&st->lock);
		if (member && (info.from_api || !live))
			fn(&info, uids[i], arg);
		free(uids[i]);
	}
	free(uids);
}

/* The group keys of every pod, for cache_groups_foreach once the index is lost. */
static void scan_group_key(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct strmap *seen = arg;
	char key[K8S_KEY_BUF];
	int len;

	(void)uid;
	if (p->reservation || !p->group[0])
		return;
	len = group_key(key, sizeof(key), p->ns, p->group);
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
	if (!cache_pod_is_member_now(p))
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
