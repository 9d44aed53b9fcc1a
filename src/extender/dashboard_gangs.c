/* The dashboard JSON's second half (dashboard.c writes the nodes): gangs
 * waiting, planned, binding and bound; the queues' shares; filter and bind
 * latency.
 *
 * Gangs come from the gang manager's view (gang_view_list), and from the
 * cache's pod groups for the gangs the manager keeps no state for: a gang
 * bound long ago (its entry forgotten once idle), or one no member of which
 * has been filtered yet (a snapshot's pending gang). Those are "bound" when
 * every member that exists is bound, else "pending".
 *
 * Latency is sent as troupe_request_duration_seconds' raw bucket counts
 * (ext_counters, as /metrics reads them): the page differences two polls
 * and reads quantiles off the difference, so it shows the last seconds, not
 * the average since troupe started.
 */
#include "extender/dashboard.h"
#include "extender/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	/* A gang's plan places listed at most (the page draws its nodes). */
	DASH_GANG_SLOTS = 64,
	/* A gang's entry without its places, and one place, escaped, at most:
	 * its key, queue and reason six bytes a byte, and the numbers; a node's
	 * name and a device list. */
	GANG_HEAD_MAX = 6 * (K8S_KEY_BUF + K8S_NAME_BUF + GANG_VIEW_REASON_BUF) + 512,
	GANG_SLOT_MAX = 6 * K8S_NAME_BUF + EXT_DEVICE_IDS_BUF + 32,
	/* A queue's entry, escaped, at most. */
	QUEUE_MAX = 6 * K8S_NAME_BUF + 160,
};

/* Where gangs stop, and queues (dashboard.h's budget). */
#define GANGS_END (DASH_JSON_MAX - DASH_QUEUES_ROOM - DASH_END_ROOM)
#define QUEUES_END (DASH_JSON_MAX - DASH_END_ROOM)

/* The order gangs are listed in: those that need a person's eye first. */
static int state_rank(const char *st)
{
	static const char *const order[] = { "waiting", "binding", "planned", "pending", "bound",
					     "idle" };

	for (size_t i = 0; i < ARRAY_SIZE(order); i++)
		if (strcmp(st, order[i]) == 0)
			return (int)i;
	return (int)ARRAY_SIZE(order);
}

struct gang_row {
	const struct gang_view *v;      /* NULL: known from the cache only */
	char ns[K8S_NAMESPACE_BUF];
	char name[K8S_NAME_BUF];
	const char *state;
	unsigned quorum, exist, bound;
};

struct rows {
	struct gang_row *r;
	size_t n, cap;
	const struct gang_view *views;
	unsigned n_views;
	struct cache *cache;
	bool failed;
};

static struct gang_row *row_add(struct rows *rs)
{
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 64;
		struct gang_row *nr = realloc(rs->r, cap * sizeof(*nr));

		if (!nr) {
			rs->failed = true;
			return NULL;
		}
		rs->r = nr;
		rs->cap = cap;
	}
	memset(&rs->r[rs->n], 0, sizeof(rs->r[0]));
	return &rs->r[rs->n++];
}

static int view_cmp(const void *key, const void *elem)
{
	const char *const *k = key;
	const struct gang_view *v = elem;
	int r = strcmp(k[0], v->ns);

	return r ? r : strcmp(k[1], v->name);
}

/* cache_groups_foreach: a pod group with members, unless the manager has it. */
static void cache_group(const char *ns, const char *group, void *arg)
{
	struct rows *rs = arg;
	const char *key[2] = { ns, group };
	struct cache_podgroup pg;
	char buf[K8S_KEY_BUF + 8];
	struct gang_row *row;
	unsigned exist, bound;

	if (rs->views && bsearch(key, rs->views, rs->n_views, sizeof(*rs->views), view_cmp))
		return;
	/* A gang whose members all finished (or are being deleted) is done:
	 * not listed, or finished jobs would crowd out the live ones. */
	cache_group_count(rs->cache, ns, group, &exist, &bound);
	if (!exist)
		return;
	row = row_add(rs);
	if (!row)
		return;
	snprintf(row->ns, sizeof(row->ns), "%s", ns);
	snprintf(row->name, sizeof(row->name), "%s", group);
	row->exist = exist;
	row->bound = bound;
	if (cache_podgroup_get(rs->cache, ns, group, &pg, buf, sizeof(buf)) == 0 &&
	    pg.min_member > 0)
		row->quorum = (unsigned)pg.min_member;
	row->state = row->bound && row->bound == row->exist ? "bound" : "pending";
}

static int row_cmp(const void *pa, const void *pb)
{
	const struct gang_row *a = pa, *b = pb;
	int r = state_rank(a->state) - state_rank(b->state);
	unsigned fa = a->v ? a->v->fair_position : 0, fb = b->v ? b->v->fair_position : 0;

	if (r)
		return r;
	if (fa != fb)
		return fa < fb ? -1 : 1;
	r = strcmp(a->ns, b->ns);
	return r ? r : strcmp(a->name, b->name);
}

/* cache_group_foreach: the GPUs a gang's members hold. */
static void add_held(const struct cache_pod_info *p, const char *uid, void *arg)
{
	unsigned long long *gpus = arg;

	(void)uid;
	if (p->active && p->node[0])
		*gpus += (unsigned)__builtin_popcountll(p->devices) + p->unattributed;
}

static void put_gang(struct strbuf *sb, struct cache *cache, const struct gang_row *g)
{
	const struct gang_view *v = g->v;
	char key[K8S_KEY_BUF];
	unsigned listed = 0;

	snprintf(key, sizeof(key), "%s/%s", g->ns, g->name);
	/* Escaped: a group's name may come from an annotation, which any text
	 * can be, or from a filter call's made-up pod. */
	strbuf_puts(sb, "{\"n\":");
	strbuf_put_json_str(sb, key, strlen(key));
	strbuf_printf(sb, ",\"st\":\"%s\",\"quorum\":%u,\"exist\":%u,\"bound\":%u", g->state,
		      g->quorum, g->exist, g->bound);
	if (!v) {
		/* Known from the cache only: what its members hold (a listed
		 * gang's members, DASH_MAX_GANGS gangs at most). */
		unsigned long long held = 0;

		cache_group_foreach(cache, g->ns, g->name, add_held, &held);
		strbuf_printf(sb, ",\"held\":%llu}", held);
		return;
	}
	strbuf_puts(sb, ",\"q\":");
	strbuf_put_json_str(sb, v->queue, strlen(v->queue));
	strbuf_printf(sb, ",\"need\":%u,\"gpus\":%llu,\"prio\":%d,\"parked\":%u,\"wait\":%.1f,"
		      "\"left\":%.1f,\"pos\":%u,\"share\":%.4f,\"holds\":%u,\"reason\":", v->need,
		      (unsigned long long)v->need_gpus, v->priority, v->n_parked, v->waiting_s,
		      v->deadline_s, v->fair_position, v->share, v->n_holds);
	strbuf_put_json_str(sb, v->reason, strlen(v->reason));
	strbuf_puts(sb, ",\"slots\":[");
	for (unsigned s = 0; s < v->n_slots && s < DASH_GANG_SLOTS &&
			     sb->len + GANG_SLOT_MAX + 64 <= GANGS_END; s++) {
		char ids[EXT_DEVICE_IDS_BUF];

		cache_devices_format(v->slots[s].devices, ids, sizeof(ids));
		strbuf_puts(sb, s ? ",[" : "[");
		strbuf_put_json_str(sb, v->slots[s].node, strlen(v->slots[s].node));
		strbuf_printf(sb, ",\"%s\",%u,%s]", ids, v->slots[s].gpus,
			      v->slots[s].member[0] ? "true" : "false");
		listed++;
	}
	strbuf_printf(sb, "],\"slotsMore\":%u}", v->n_slots - listed);
}

static void put_gangs(const struct ext_service *svc, struct strbuf *sb, bool *truncated)
{
	struct gang_view *views = NULL;
	unsigned n_views = 0, counts[7] = { 0 };
	struct rows rs = { .cache = svc->cache };
	static const char *const names[] = { "waiting", "binding", "planned", "pending", "bound",
					     "idle" };
	struct gang_stats gs = { 0 };

	/* Asked only when the manager holds some gang: gang_view_list of none
	 * passes qsort_r a NULL array (undefined behaviour UBSan reports). */
	if (svc->gangs)
		gang_get_stats(svc->gangs, &gs);
	if (gs.entries && gang_view_list(svc->gangs, &views, &n_views) < 0) {
		views = NULL;
		n_views = 0;
		rs.failed = true;
	}
	rs.views = views;
	rs.n_views = n_views;
	for (unsigned i = 0; i < n_views; i++) {
		struct gang_row *row = row_add(&rs);

		if (!row)
			break;
		row->v = &views[i];
		snprintf(row->ns, sizeof(row->ns), "%s", views[i].ns);
		snprintf(row->name, sizeof(row->name), "%s", views[i].name);
		row->quorum = views[i].quorum;
		cache_group_count(svc->cache, views[i].ns, views[i].name, &row->exist,
				  &row->bound);
		row->state = gang_view_state_name(views[i].state);
		if (views[i].state == GANG_VIEW_IDLE && row->bound && row->bound == row->exist)
			row->state = "bound";
	}
	cache_groups_foreach(svc->cache, cache_group, &rs);
	if (rs.n)
		qsort(rs.r, rs.n, sizeof(*rs.r), row_cmp);
	strbuf_puts(sb, ",\"gangs\":[");
	for (size_t i = 0; i < rs.n; i++) {
		counts[state_rank(rs.r[i].state)]++;
		if (i >= DASH_MAX_GANGS)
			continue;
		if (sb->len + GANG_HEAD_MAX + 64 > GANGS_END) {
			*truncated = true;
			continue;
		}
		if (i)
			strbuf_putc(sb, ',');
		put_gang(sb, svc->cache, &rs.r[i]);
	}
	strbuf_puts(sb, "],\"gangCounts\":{");
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		strbuf_printf(sb, "%s\"%s\":%u", i ? "," : "", names[i], counts[i]);
	strbuf_printf(sb, ",\"all\":%zu}", rs.n);
	free(rs.r);
	if (views)
		gang_view_list_free(views, n_views);
}

static void put_queues(const struct ext_service *svc, struct strbuf *sb, bool *truncated)
{
	struct gang_queue_view *qs = NULL;
	unsigned n = 0;

	strbuf_puts(sb, ",\"queues\":[");
	if (svc->gangs && gang_queue_list(svc->gangs, &qs, &n) == 0) {
		for (unsigned i = 0; i < n; i++) {
			if (sb->len + QUEUE_MAX > QUEUES_END) {
				*truncated = true;
				break;
			}
			strbuf_puts(sb, i ? ",{\"n\":" : "{\"n\":");
			strbuf_put_json_str(sb, qs[i].name, strlen(qs[i].name));
			strbuf_printf(sb, ",\"w\":%g,\"share\":%.4f,\"waiting\":%u,\"planned\":%u,"
				      "\"gpus\":%llu}", qs[i].weight, qs[i].share, qs[i].waiting,
				      qs[i].planned, (unsigned long long)qs[i].gpus);
		}
	}
	free(qs);
	strbuf_putc(sb, ']');
}

static void put_latency(const struct ext_service *svc, struct strbuf *sb)
{
	static const struct {
		const char *name;
		enum ext_counter_verb verb;
	} verbs[] = { { "filter", EXT_C_FILTER }, { "bind", EXT_C_BIND } };

	strbuf_puts(sb, ",\"latency\":{\"bounds\":[");
	for (unsigned b = 0; b < EXT_LATENCY_BOUNDS; b++)
		strbuf_printf(sb, "%s%g", b ? "," : "", ext_latency_bounds_s[b]);
	strbuf_putc(sb, ']');
	for (size_t i = 0; i < ARRAY_SIZE(verbs) && svc->counters; i++) {
		const struct ext_counters *c = svc->counters;
		enum ext_counter_verb v = verbs[i].verb;

		strbuf_printf(sb, ",\"%s\":{\"b\":[", verbs[i].name);
		for (unsigned b = 0; b <= EXT_LATENCY_BOUNDS; b++)
			strbuf_printf(sb, "%s%llu", b ? "," : "",
				      (unsigned long long)__atomic_load_n(&c->latency[v][b],
									  __ATOMIC_RELAXED));
		strbuf_printf(sb, "],\"sum\":%.6f}",
			      __atomic_load_n(&c->latency_ns_sum[v], __ATOMIC_RELAXED) / 1e9);
	}
	strbuf_putc(sb, '}');
}

void ext_dashboard__gangs(const struct ext_service *svc, struct strbuf *sb, bool *truncated)
{
	put_gangs(svc, sb, truncated);
	put_queues(svc, sb, truncated);
	put_latency(svc, sb);
}
