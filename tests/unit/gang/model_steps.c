/* The model's steps: pods created, filtered, bound (by troupe, as single pods
 * or by another scheduler), confirmed, refused and deleted, and waits for a
 * plan's end; and the model's setup (m_new, m_free).
 */
#include "model.h"

int m_new_pod(struct model *m, int gang, int slot, unsigned gpus)
{
	struct mpod *p;
	int pi;

	if (m->n_pods == MAXPODS)
		return -1;
	pi = (int)m->n_pods++;
	p = &m->pods[pi];
	memset(p, 0, sizeof(*p));
	p->gang = gang;
	p->slot = slot;
	p->gpus = gpus;
	p->node = -1;
	if (gang >= 0) {
		struct mgang *g = &m->gangs[gang];

		snprintf(p->name, sizeof(p->name), "%s-%d", g->name, slot);
		snprintf(p->uid, sizeof(p->uid), "uid-%s-%d-v%u", g->name, slot, ++g->incarnations);
		g->member[slot] = pi;
	} else {
		snprintf(p->name, sizeof(p->name), "single-%d", pi);
		snprintf(p->uid, sizeof(p->uid), "uid-single-%d", pi);
	}
	m_apply(m, p, -1, 0);
	p->exists = true;
	return pi;
}

/* Bind as a single pod would be: the best (lowest) free devices, one CAS. */
static bool m_single_bind(struct model *m, int pi, int node)
{
	struct mpod *p = &m->pods[pi];
	struct cache_node_view v;
	uint64_t free_mask = 0, want = 0;
	unsigned free_n = 0;
	int rc;

	cache_read_begin(m->c);
	if (cache_node_lookup(m->c, m_nodes[node], strlen(m_nodes[node]), &v)) {
		free_mask = cache_view_free_mask(&v);
		free_n = cache_view_free_gpus(&v);
	}
	cache_read_end(m->c);
	if (free_n < p->gpus || (unsigned)__builtin_popcountll(free_mask) < p->gpus)
		return false;
	for (unsigned k = 0; k < p->gpus; k++) {
		uint64_t low = free_mask & -free_mask;

		want |= low;
		free_mask &= ~low;
	}
	rc = cache_pod_assume(m->c, p->uid, m_nodes[node], &want);
	if (rc == -EAGAIN || rc == -ENOSPC)
		return false;
	if (rc != 0)
		MFAIL(m, "assume %s on %s: %d", p->name, m_nodes[node], rc);
	p->posting = true;
	p->node = node;
	p->devices = want;
	return true;
}

static void m_schedule(struct model *m, int pi)
{
	struct mpod *p = &m->pods[pi];
	struct mgang *g = &m->gangs[p->gang];
	struct gang_member mb = { .uid = p->uid, .ns = "ml", .name = p->name, .group = g->name,
				  .req = { .demand = { .gpu_resource = 0, .gpus = p->gpus } } };
	struct cache_node_view views[MN];
	int idx[MN];
	bool allowed[MN], sample = m_rand(m, 5) == 0;
	char reason[640], key[64];
	struct gang_stats s0, s1;
	enum gang_verdict verdict;
	enum gang_bind_result gr;
	unsigned n = 0, exist, bound, n_allowed = 0;
	uint64_t dev = 0;
	void *ctx;
	int node;

	gang_get_stats(m->gm, &s0);
	cache_read_begin(m->c);
	for (int i = 0; i < MN; i++) {
		if (sample && m_rand(m, 2))
			continue;       /* kube-scheduler sampled the nodes */
		if (cache_node_lookup(m->c, m_nodes[i], strlen(m_nodes[i]), &views[n]))
			idx[n++] = i;
	}
	verdict = gang_filter(m->gm, &mb, views, n, allowed, reason, sizeof(reason));
	cache_read_end(m->c);
	gang_get_stats(m->gm, &s1);
	if (s1.planned != s0.planned) {
		g->planned = true;
		g->plan_t = m_now();
		g->round++;
		m->plans++;
	}
	snprintf(key, sizeof(key), "gang ml/%s", g->name);
	m_group_count(m, p->gang, &exist, &bound);
	switch (verdict) {
	case GANG_NOT_A_GANG:
		if (bound < g->quorum)
			MFAIL(m, "filter: member %s of gang %s (bound %u of %u) is to be placed as a "
			      "single pod", p->name, g->name, bound, g->quorum);
		m->extra_singles++;
		if (m_rand(m, 10) < 8)
			m_single_bind(m, pi, (int)m_rand(m, MN));
		return;
	case GANG_REFUSED:
		if (!strstr(reason, key))
			MFAIL(m, "filter refused %s without naming its gang: \"%s\"", p->name, reason);
		m->refused++;
		return;
	case GANG_ALLOWED:
		break;
	default:
		MFAIL(m, "filter: verdict %d", verdict);
	}
	for (unsigned i = 0; i < n; i++) {
		if (!allowed[i])
			continue;
		n_allowed++;
		if (!m_reservations(m, p->gang, idx[i]))
			MFAIL(m, "filter allowed %s on %s, where gang %s holds no reservation", p->name,
			      m_nodes[idx[i]], g->name);
	}
	if (!n_allowed)
		MFAIL(m, "filter ALLOWED %s on no node", p->name);
	if (!g->planned || m_now() - g->plan_t > 0.6 || m_rand(m, 10) == 0)
		return;         /* no binding cycle (or not one soon enough) */
	if (m_rand(m, 100) < 85) {
		unsigned pick = m_rand(m, n_allowed);

		node = -1;
		for (unsigned i = 0; i < n && node < 0; i++)
			if (allowed[i] && pick-- == 0)
				node = idx[i];
	} else {
		node = (int)m_rand(m, MN);
		m->moved_or_refused_binds++;
	}
	m_group_count(m, p->gang, &exist, &bound);
	ctx = m_hold_ctx(m, pi);
	gr = gang_bind(m->gm, &mb, m_nodes[node], m_release, ctx, &dev, reason, sizeof(reason));
	if (gr != GANG_BIND_HELD)
		free(ctx);      /* the manager keeps the context only for a held bind */
	switch (gr) {
	case GANG_BIND_HELD:
		p->held = true;
		p->round = g->round;
		m->holds++;
		if ((unsigned)__builtin_popcountll(dev) != p->gpus)
			MFAIL(m, "bind of %s held with %u devices", p->name,
			      (unsigned)__builtin_popcountll(dev));
		m_drain(m);     /* the quorum's releases come in this very call */
		if (p->held) {
			m_group_count(m, p->gang, &exist, &bound);
			if (bound >= g->quorum)
				MFAIL(m, "gang %s: %u of %u members held or bound, binds still held",
				      g->name, bound, g->quorum);
		}
		break;
	case GANG_BIND_REFUSED:
		if (!strstr(reason, key))
			MFAIL(m, "bind refused %s without naming its gang: \"%s\"", p->name, reason);
		break;
	case GANG_BIND_NOT_A_GANG:
		if (bound < g->quorum)
			MFAIL(m, "bind: member %s of gang %s (bound %u of %u) is bound as a single pod",
			      p->name, g->name, bound, g->quorum);
		m->extra_singles++;
		m_single_bind(m, pi, node);     /* what ext_bind does next */
		break;
	}
}

/* Wait for gang <gi>'s plan to end (its deadline, or quorum): no reservation
 * left, no held bind. */
void m_wait_plan_end(struct model *m, int gi)
{
	struct mgang *g = &m->gangs[gi];
	double deadline = g->plan_t + 1.0 + 1.5;

	for (;;) {
		bool held = false;

		m_drain(m);
		for (unsigned q = 0; q < m->n_pods; q++)
			held |= m->pods[q].held && m->pods[q].gang == gi;
		if (!held && !m_reservations(m, gi, -1))
			break;
		if (m_now() > deadline)
			MFAIL(m, "gang %s: plan made %.2f s ago still holds %u reservations%s",
			      g->name, m_now() - g->plan_t, m_reservations(m, gi, -1),
			      held ? " and held binds" : "");
		usleep(10000);
	}
	g->planned = false;
}

static int m_pick(struct model *m, bool (*want)(const struct mpod *))
{
	unsigned n = 0;
	int pick = -1;

	for (unsigned q = 0; q < m->n_pods; q++)
		if (want(&m->pods[q]) && m_rand(m, ++n) == 0)
			pick = (int)q;
	return pick;
}

static bool w_posting(const struct mpod *p)
{
	return p->exists && p->posting;
}

static bool w_unbound(const struct mpod *p)
{
	return p->exists && !p->held && !p->posting && !p->bound;
}

/* The watch shows a pending pod bound with free devices: another scheduler
 * bound it, or a Binding whose answer was lost (and was counted as failed)
 * landed after all. */
static void m_external_bind(struct model *m, int pi)
{
	struct mpod *p = &m->pods[pi];
	unsigned first = m_rand(m, MN);

	for (unsigned k = 0; k < MN; k++) {
		int node = (int)((first + k) % MN);
		struct cache_node_view v;
		uint64_t free_mask = 0, want = 0;
		unsigned free_n = 0;

		cache_read_begin(m->c);
		if (cache_node_lookup(m->c, m_nodes[node], strlen(m_nodes[node]), &v)) {
			free_mask = cache_view_free_mask(&v);
			free_n = cache_view_free_gpus(&v);
		}
		cache_read_end(m->c);
		if (free_n < p->gpus || (unsigned)__builtin_popcountll(free_mask) < p->gpus)
			continue;
		for (unsigned i = 0; i < p->gpus; i++) {
			uint64_t high = 1ULL << (63 - __builtin_clzll(free_mask));

			want |= high;
			free_mask &= ~high;
		}
		m_apply(m, p, node, want);
		p->bound = true;
		p->node = node;
		p->devices = want;
		m->external_binds++;
		return;
	}
}

static bool w_assumed(const struct mpod *p)
{
	return p->exists && (p->posting || p->held) && !p->bound;
}

static bool w_gang_pod(const struct mpod *p)
{
	return p->exists && p->gang >= 0;
}

static bool w_single(const struct mpod *p)
{
	return p->exists && p->gang < 0;
}

void m_step(struct model *m, unsigned r)
{
	int pi;

	if (r < 45) {                                   /* a scheduling cycle */
		int gi = (int)m_rand(m, MGANGS), cand[MSLOTS], nc = 0;
		struct mgang *g = &m->gangs[gi];

		for (unsigned s = 0; s < g->size; s++) {
			const struct mpod *p = g->member[s] >= 0 ? &m->pods[g->member[s]] : NULL;

			if (p && p->exists && !p->held && !p->posting && !p->bound)
				cand[nc++] = g->member[s];
		}
		if (nc)
			m_schedule(m, cand[m_rand(m, (unsigned)nc)]);
	} else if (r < 56) {                            /* the watch: bound, or 500 */
		pi = m_pick(m, w_posting);
		if (pi >= 0) {
			struct mpod *p = &m->pods[pi];

			if (m_rand(m, 100) < 85) {
				m_apply(m, p, p->node, p->devices);
				p->bound = true;
				p->posting = false;
				m->confirms++;
			} else if (!p->bound) {
				if (cache_pod_forget(m->c, p->uid) != 0)
					MFAIL(m, "forget %s failed", p->name);
				p->posting = false;
				m->bind_failures++;
			}
		}
	} else if (r < 60) {                            /* bound by someone else */
		pi = -1;
		/* Mostly a member of a gang with a plan: its quorum then counts a
		 * member that never took a slot. */
		for (unsigned q = 0, n = 0; q < m->n_pods && m_rand(m, 10) < 7; q++)
			if (w_unbound(&m->pods[q]) && m->pods[q].gang >= 0 &&
			    m->gangs[m->pods[q].gang].planned && m_rand(m, ++n) == 0)
				pi = (int)q;
		if (pi < 0)
			pi = m_pick(m, w_unbound);
		if (pi >= 0)
			m_external_bind(m, pi);
	} else if (r < 62) {                            /* a stale event: still unbound */
		pi = m_pick(m, w_assumed);
		if (pi >= 0) {
			m_apply(m, &m->pods[pi], -1, 0);
			m->stale_events++;
		}
	} else if (r < 70) {                            /* a pod deleted */
		pi = m_pick(m, m_rand(m, 10) < 6 ? w_gang_pod : w_single);
		if (pi >= 0) {
			struct mpod *p = &m->pods[pi];

			if (cache_pod_delete(m->c, p->uid) != 0)
				MFAIL(m, "delete %s failed", p->name);
			p->exists = p->posting = p->bound = false;
			if (p->held)
				m->deletes_held++;
			if (p->gang >= 0)
				m->gangs[p->gang].member[p->slot] = -1;
		}
	} else if (r < 80) {                            /* a member (re)created */
		int gi = (int)m_rand(m, MGANGS);

		for (unsigned s = 0; s < m->gangs[gi].size; s++)
			if (m->gangs[gi].member[s] < 0) {
				m_new_pod(m, gi, (int)s,
					  s ? m->gangs[gi].gpus : m->gangs[gi].lead_gpus);
				break;
			}
	} else if (r < 92) {                            /* a single pod arrives */
		static const unsigned sizes[] = { 1, 2, 4 };

		pi = m_new_pod(m, -1, 0, sizes[m_rand(m, 3)]);
		if (pi >= 0) {
			unsigned first = m_rand(m, MN);

			for (unsigned k = 0; k < MN; k++)
				if (m_single_bind(m, pi, (int)((first + k) % MN))) {
					m->singles++;
					break;
				}
		}
	} else if (r < 99) {                            /* a single pod finishes */
		pi = m_pick(m, w_single);
		if (pi >= 0) {
			if (cache_pod_delete(m->c, m->pods[pi].uid) != 0)
				MFAIL(m, "delete %s failed", m->pods[pi].name);
			m->pods[pi].exists = m->pods[pi].posting = m->pods[pi].bound = false;
		}
	} else if (m->waits < 2) {                      /* wait for a plan to expire */
		int best = -1;

		for (int gi = 0; gi < MGANGS; gi++) {
			bool held = false;

			for (unsigned q = 0; q < m->n_pods; q++)
				held |= m->pods[q].held && m->pods[q].gang == gi;
			if (m->gangs[gi].planned && (best < 0 || held))
				best = gi;
		}
		if (best >= 0) {
			m->waits++;
			m_wait_plan_end(m, best);
		}
	}
}

static void m_add_node(struct model *m, const char *name)
{
	char json[512], err[CACHE_ERR_LEN];
	struct cache_node *node;
	cJSON *o;

	snprintf(json, sizeof(json),
		 "{\"metadata\":{\"name\":\"%s\"},\"status\":{\"allocatable\":"
		 "{\"nvidia.com/gpu\":\"8\"},\"capacity\":{\"nvidia.com/gpu\":\"8\"},"
		 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}", name);
	o = m_parse(json);
	node = cache_node_parse(o, cache_get_opts(m->c), err, sizeof(err));
	cJSON_Delete(o);
	assert_non_null(node);
	assert_int_equal(cache_node_upsert(m->c, node), 0);
}

static void m_add_group(struct model *m, const char *name, unsigned min_member)
{
	char json[256], err[CACHE_ERR_LEN];
	struct cache_podgroup *pg;
	cJSON *o;

	snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\"},"
		 "\"spec\":{\"minMember\":%u}}", name, min_member);
	o = m_parse(json);
	pg = cache_podgroup_parse(o, cache_get_opts(m->c), err, sizeof(err));
	cJSON_Delete(o);
	assert_non_null(pg);
	assert_int_equal(cache_podgroup_apply(m->c, pg), 0);
}

/* A model whose gangs in <with_pods> (a bit per gang) have their members
 * created; the others have a PodGroup only. */
struct model *m_new(unsigned seed, unsigned with_pods)
{
	static const struct {
		const char *name;
		unsigned quorum, size, gpus, lead_gpus;
	} gangs[MGANGS] = {
		{ "g1", 3, 4, 4, 4 },   /* one member more than the quorum */
		{ "g2", 2, 2, 8, 8 },   /* whole nodes */
		{ "g3", 4, 4, 2, 4 },   /* mixed: a 4-GPU member and three of 2 */
	};
	struct model *m = calloc(1, sizeof(*m));
	struct gang_config cfg;

	gang_config_defaults(&cfg);
	cfg.default_timeout_s = 1;      /* plans expire after 1 s (the real thread) */
	cfg.starvation_s = 3600;        /* starvation protection stays out of this test */
	assert_non_null(m);
	m->seed = seed;
	m->rng = seed;
	pthread_mutex_init(&m->lock, NULL);
	m->c = cache_new(&gpu_opts);
	assert_non_null(m->c);
	for (int i = 0; i < MN; i++)
		m_add_node(m, m_nodes[i]);
	cache_set_synced(m->c, true);
	m->gm = gang_manager_new(m->c, &cfg);
	assert_non_null(m->gm);
	for (int gi = 0; gi < MGANGS; gi++) {
		struct mgang *g = &m->gangs[gi];

		g->name = gangs[gi].name;
		g->quorum = gangs[gi].quorum;
		g->size = gangs[gi].size;
		g->gpus = gangs[gi].gpus;
		g->lead_gpus = gangs[gi].lead_gpus;
		for (int s = 0; s < MSLOTS; s++)
			g->member[s] = -1;
		m_add_group(m, g->name, g->quorum);
		for (unsigned s = 0; s < g->size && (with_pods & (1u << gi)); s++)
			m_new_pod(m, gi, (int)s, s ? g->gpus : g->lead_gpus);
	}
	return m;
}

void m_free(struct model *m)
{
	gang_manager_free(m->gm);
	m_drain(m);
	cache_free(m->c);
	pthread_mutex_destroy(&m->lock);
	free(m);
}
