/* The model's state, what it records and what it checks: the releases the
 * manager made (m_drain) and the invariants after every step (m_check).
 */
#include "model.h"

const char *const m_nodes[MN] = { "n0", "n1", "n2", "n3", "n4" };

double m_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

unsigned m_rand(struct model *m, unsigned n)
{
	return n ? (unsigned)rand_r(&m->rng) % n : 0;
}

/* Every bind let go must carry a plan that lists its pod (the record its
 * Binding writes, so another replica could finish the gang). */
static bool plan_lists(const char *plan, const char *uid)
{
	struct gang_record r;
	char err[256];
	bool found = false;

	if (!plan || gang_record_decode(plan, &r, err, sizeof(err)) < 0)
		return false;
	for (unsigned i = 0; r.members && i < r.n; i++)
		found |= strcmp(r.members[i].uid, uid) == 0 && r.members[i].devices != 0;
	gang_record_fini(&r);
	return found;
}

void m_release(void *ctx, bool ok, const char *why, const char *plan)
{
	struct { struct model *m; int pod; } *h = ctx;
	struct model *m = h->m;
	bool plan_ok = !ok || plan_lists(plan, m->pods[h->pod].uid);

	pthread_mutex_lock(&m->lock);
	if (!plan_ok)
		m->bad_plan = true;
	if (m->n_rel < MAXREL) {
		m->rel[m->n_rel].pod = h->pod;
		m->rel[m->n_rel].ok = ok;
		snprintf(m->rel[m->n_rel].why, sizeof(m->rel[0].why), "%s", why ? why : "");
		m->n_rel++;
	} else {
		m->rel_overflow = true;
	}
	pthread_mutex_unlock(&m->lock);
	free(h);
}

void *m_hold_ctx(struct model *m, int pod)
{
	struct { struct model *m; int pod; } *h = malloc(sizeof(*h));

	assert_non_null(h);
	h->m = m;
	h->pod = pod;
	return h;
}

cJSON *m_parse(const char *json)
{
	cJSON *o = cJSON_Parse(json);

	assert_non_null(o);
	return o;
}

/* The pod as the watch shows it: on <node> with <devices> (node -1: unbound). */
void m_apply(struct model *m, const struct mpod *p, int node, uint64_t devices)
{
	char json[1400], labels[128] = "", ann[320] = "", spec_node[64] = "", ids[256];
	char err[CACHE_ERR_LEN];
	struct cache_pod *pod;
	cJSON *o;
	int rc;

	if (p->gang >= 0)
		snprintf(labels, sizeof(labels), "\"labels\":{\"scheduling.x-k8s.io/pod-group\":"
			 "\"%s\"},", m->gangs[p->gang].name);
	if (node >= 0) {
		snprintf(spec_node, sizeof(spec_node), "\"nodeName\":\"%s\",", m_nodes[node]);
		cache_devices_format(devices, ids, sizeof(ids));
		snprintf(ann, sizeof(ann), "\"annotations\":{\"troupe.io/gpu-ids\":\"%s\"},", ids);
	}
	snprintf(json, sizeof(json),
		 "{\"metadata\":{%s%s\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"%s\"},"
		 "\"spec\":{%s\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
		 "{\"nvidia.com/gpu\":\"%u\"}}}]},\"status\":{\"phase\":\"%s\"}}",
		 labels, ann, p->name, p->uid, spec_node, p->gpus, node >= 0 ? "Running" : "Pending");
	o = m_parse(json);
	pod = cache_pod_parse(o, cache_get_opts(m->c), err, sizeof(err));
	cJSON_Delete(o);
	if (!pod)
		MFAIL(m, "pod %s does not parse: %s", p->name, err);
	rc = cache_pod_apply(m->c, pod);
	if (rc != 0)
		MFAIL(m, "cache_pod_apply(%s): %d", p->name, rc);
}

static void m_collect(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct model *m = arg;
	struct ment *e;

	if (!p->devices && !p->unattributed && !p->reservation)
		return;
	if (m->n_ent == MAXENT) {
		m->ent_overflow = true;
		return;
	}
	e = &m->ent[m->n_ent++];
	snprintf(e->node, sizeof(e->node), "%s", p->node);
	snprintf(e->name, sizeof(e->name), "%s", p->reservation ? uid : p->name);
	e->devices = p->devices;
	e->unattr = p->unattributed;
	e->reservation = p->reservation;
}

static void m_entries(struct model *m)
{
	m->n_ent = 0;
	m->ent_overflow = false;
	cache_pod_foreach(m->c, m_collect, m);
	if (m->ent_overflow)
		MFAIL(m, "more than %d entries hold GPUs", MAXENT);
}

/* Whether <e> is a reservation of gang <g> (gang-reservation/ml/<g>/...). */
static bool m_res_of(const struct ment *e, const char *g)
{
	char prefix[96];

	snprintf(prefix, sizeof(prefix), "gang-reservation/ml/%s/", g);
	return e->reservation && strncmp(e->name, prefix, strlen(prefix)) == 0;
}

unsigned m_read_views(struct model *m, struct cache_node_view *views)
{
	unsigned n = 0;

	cache_read_begin(m->c);
	for (int i = 0; i < MN; i++)
		if (cache_node_lookup(m->c, m_nodes[i], strlen(m_nodes[i]), &views[n]))
			n++;
	return n;
}

unsigned m_reservations(struct model *m, int gi, int node)
{
	unsigned n = 0;

	m_entries(m);
	for (unsigned i = 0; i < m->n_ent; i++)
		if (m_res_of(&m->ent[i], m->gangs[gi].name) &&
		    (node < 0 || strcmp(m->ent[i].node, m_nodes[node]) == 0))
			n++;
	return n;
}

void m_group_count(struct model *m, int gi, unsigned *exist, unsigned *bound)
{
	cache_group_count(m->c, "ml", m->gangs[gi].name, exist, bound);
}

static int m_node_index(const char *name)
{
	for (int i = 0; i < MN; i++)
		if (strcmp(m_nodes[i], name) == 0)
			return i;
	return -1;
}

/* Take the releases the manager has made; a round's releases are checked only
 * once all of them are in (the expiry thread runs them one after another). */
void m_drain(struct model *m)
{
	unsigned n = 0;
	double deadline = m_now() + 2.0;

	for (;;) {
		bool complete = true;

		pthread_mutex_lock(&m->lock);
		if (m->rel_overflow) {
			pthread_mutex_unlock(&m->lock);
			MFAIL(m, "more than %d releases pending", MAXREL);
		}
		if (m->bad_plan) {
			pthread_mutex_unlock(&m->lock);
			MFAIL(m, "a bind was let go without a plan record listing its pod");
		}
		for (unsigned i = 0; i < m->n_rel && n < MAXREL; i++)
			m->got[n++] = m->rel[i];
		m->n_rel = 0;
		pthread_mutex_unlock(&m->lock);
		for (unsigned i = 0; i < n && complete; i++) {
			const struct mpod *p = &m->pods[m->got[i].pod];

			for (unsigned q = 0; q < m->n_pods && complete; q++) {
				const struct mpod *o = &m->pods[q];
				bool in = false;

				if (!o->held || o->gang != p->gang || o->round != p->round)
					continue;
				for (unsigned j = 0; j < n && !in; j++)
					in = m->got[j].pod == (int)q;
				complete = in;
			}
		}
		if (complete)
			break;
		if (m_now() > deadline)
			MFAIL(m, "gang %s: some held binds of a round were released and others "
			      "were still held 2 s later", m->gangs[m->pods[m->got[0].pod].gang].name);
		usleep(2000);
	}
	/* All alike within a round; each bind released once. */
	for (unsigned i = 0; i < n; i++) {
		const struct mrel *r = &m->got[i];
		const struct mpod *p = &m->pods[r->pod];

		if (!p->held)
			MFAIL(m, "pod %s: a release for a bind that is not held (or released twice): "
			      "ok=%d why=%s", p->name, r->ok, r->why);
		for (unsigned j = 0; j < i; j++) {
			const struct mpod *o = &m->pods[m->got[j].pod];

			if (m->got[j].pod == r->pod)
				MFAIL(m, "pod %s released twice", p->name);
			if (o->gang == p->gang && o->round == p->round && m->got[j].ok != r->ok)
				MFAIL(m, "gang %s round %u: %s released ok=%d (%s) but %s ok=%d (%s)",
				      m->gangs[p->gang].name, p->round, o->name, m->got[j].ok,
				      m->got[j].why, p->name, r->ok, r->why);
		}
	}
	for (unsigned i = 0; i < n; i++) {
		const struct mrel *r = &m->got[i];
		struct mpod *p = &m->pods[r->pod];
		struct mgang *g = &m->gangs[p->gang];
		struct cache_pod_info info;
		bool first = true;

		for (unsigned j = 0; j < i; j++)
			if (m->pods[m->got[j].pod].gang == p->gang &&
			    m->pods[m->got[j].pod].round == p->round)
				first = false;
		if (first) {
			if (r->ok) {
				unsigned exist, bound;

				m->quorum_rounds++;
				m_group_count(m, p->gang, &exist, &bound);
				if (bound < g->quorum)
					MFAIL(m, "gang %s: held binds released to post with only %u of %u "
					      "members held or bound", g->name, bound, g->quorum);
			} else {
				m->expired_rounds++;
			}
			if (p->round == g->round) {
				g->planned = false;
				if (m_reservations(m, p->gang, -1))
					MFAIL(m, "gang %s: %u reservations remain after its round ended "
					      "(ok=%d: %s)", g->name, m_reservations(m, p->gang, -1), r->ok,
					      r->why);
			}
		}
		p->held = false;
		if (!p->exists)
			continue;               /* deleted while held: nothing to post */
		if (cache_pod_get(m->c, p->uid, &info) < 0)
			MFAIL(m, "pod %s exists but the cache does not know it", p->name);
		if (r->ok) {
			if (info.state != CACHE_POD_STATE_ASSUMED ||
			    (unsigned)__builtin_popcountll(info.devices) != p->gpus)
				MFAIL(m, "pod %s released to bind but holds %u devices (state %d)",
				      p->name, (unsigned)__builtin_popcountll(info.devices), info.state);
			p->posting = true;
			p->node = m_node_index(info.node);
			p->devices = info.devices;
		} else if (info.state != CACHE_POD_STATE_UNACCOUNTED || info.devices || info.unattributed) {
			MFAIL(m, "pod %s: its held bind was answered with an error (%s) but it still "
			      "holds devices %#llx on %s (state %d)", p->name, r->why,
			      (unsigned long long)info.devices, info.node, info.state);
		}
	}
}

/* The invariants; <quiet>: no plan can be changing (every one has expired). */
void m_check(struct model *m, bool quiet)
{
	uint64_t used[MN] = { 0 }, uni[MN] = { 0 };
	unsigned unattr[MN] = { 0 }, eunattr[MN] = { 0 }, alloc[MN] = { 0 };

	m_drain(m);
	/* Usage first: what entries hold afterwards can only be less (only this
	 * thread claims devices; the expiry thread only frees them). */
	cache_read_begin(m->c);
	for (int i = 0; i < MN; i++) {
		struct cache_node_view v;

		if (!cache_node_lookup(m->c, m_nodes[i], strlen(m_nodes[i]), &v)) {
			cache_read_end(m->c);
			MFAIL(m, "node %s vanished", m_nodes[i]);
		}
		used[i] = v.used;
		unattr[i] = v.unattributed;
		alloc[i] = v.node->gpu_allocatable;
	}
	cache_read_end(m->c);
	m_entries(m);
	for (unsigned k = 0; k < m->n_ent; k++) {
		const struct ment *e = &m->ent[k];
		int i = m_node_index(e->node);

		if (i < 0)
			MFAIL(m, "%s holds GPUs on unknown node %s", e->name, e->node);
		if (uni[i] & e->devices) {
			for (unsigned j = 0; j < k; j++)
				if (strcmp(m->ent[j].node, e->node) == 0 && (m->ent[j].devices & e->devices))
					MFAIL(m, "node %s: devices %#llx held by both %s and %s", e->node,
					      (unsigned long long)(m->ent[j].devices & e->devices),
					      m->ent[j].name, e->name);
		}
		uni[i] |= e->devices;
		eunattr[i] += e->unattr;
		for (int g = 0; g < MGANGS; g++)
			if (m_res_of(e, m->gangs[g].name) && !m->gangs[g].planned)
				MFAIL(m, "reservation %s on %s, but gang %s has no plan the model saw",
				      e->name, e->node, m->gangs[g].name);
	}
	for (int i = 0; i < MN; i++) {
		if ((unsigned)__builtin_popcountll(used[i]) + unattr[i] > alloc[i])
			MFAIL(m, "node %s: %u devices + %u unattributed held, %u allocatable",
			      m_nodes[i], (unsigned)__builtin_popcountll(used[i]), unattr[i], alloc[i]);
		if ((unsigned)__builtin_popcountll(uni[i]) + eunattr[i] > alloc[i])
			MFAIL(m, "node %s: entries hold %u devices + %u unattributed of %u",
			      m_nodes[i], (unsigned)__builtin_popcountll(uni[i]), eunattr[i], alloc[i]);
		if (uni[i] & ~used[i])
			MFAIL(m, "node %s: entries hold %#llx outside the usage mask %#llx", m_nodes[i],
			      (unsigned long long)uni[i], (unsigned long long)used[i]);
		if (quiet && (uni[i] != used[i] || eunattr[i] != unattr[i]))
			MFAIL(m, "node %s at rest: usage %#llx+%u, entries hold %#llx+%u", m_nodes[i],
			      (unsigned long long)used[i], unattr[i], (unsigned long long)uni[i],
			      eunattr[i]);
	}
	for (unsigned q = 0; q < m->n_pods; q++) {
		struct mpod *p = &m->pods[q];
		struct cache_pod_info info;

		if (!p->exists)
			continue;
		if (cache_pod_get(m->c, p->uid, &info) < 0)
			MFAIL(m, "pod %s exists but the cache does not know it", p->name);
		if (p->held) {
			double until = m_now() + 1.0;

			/* A rollback in flight: devices freed, the answer not drained yet. */
			while (p->held && info.state != CACHE_POD_STATE_ASSUMED && m_now() < until) {
				usleep(2000);
				m_drain(m);
				cache_pod_get(m->c, p->uid, &info);
			}
			if (p->held && (info.state != CACHE_POD_STATE_ASSUMED ||
					(unsigned)__builtin_popcountll(info.devices) != p->gpus))
				MFAIL(m, "held member %s holds %#llx (state %d), its bind unanswered",
				      p->name, (unsigned long long)info.devices, info.state);
			if (p->held)
				continue;
		}
		if (p->posting || p->bound) {
			if (info.state != (p->bound ? CACHE_POD_STATE_BOUND : CACHE_POD_STATE_ASSUMED) ||
			    info.devices != p->devices || m_node_index(info.node) != p->node)
				MFAIL(m, "pod %s should hold %#llx on %s (%s) but holds %#llx on %s "
				      "(state %d)", p->name, (unsigned long long)p->devices,
				      m_nodes[p->node], p->bound ? "bound" : "assumed",
				      (unsigned long long)info.devices, info.node, info.state);
		} else if (info.state != CACHE_POD_STATE_UNACCOUNTED || info.devices || info.unattributed) {
			MFAIL(m, "pod %s should hold nothing but holds %#llx+%u on %s (state %d)",
			      p->name, (unsigned long long)info.devices, info.unattributed, info.node,
			      info.state);
		}
	}
}

