/* explain, the gang's and the queue's parts (see explain.h): a pod group's
 * members as the cache counts them and its quorum; the plan the planner would
 * make now over every node troupe knows (gang_plan_make, the planner filter
 * uses), or why there is none; the closest network domain and how many members
 * it lacks; and the queue's dominant share.
 *
 * The planner is asked as a pure function: nothing is reserved and the gang
 * manager's state is not touched.
 */
#include "extender/explain.h"
#include "extender/explain_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/strmap.h"

enum {
	EXPLAIN_MEMBERS_MAX = 50,       /* members listed by name */
};

/* ---- Members ----------------------------------------------------------------- */

struct members {
	struct strbuf *sb;              /* NULL: only look for a request */
	char queue[K8S_NAME_BUF];       /* member_queue_fn: the first member's */
	int32_t priority;
	unsigned listed;
	bool have_req;                  /* req is a pending member's */
	struct placement_request req;
	uint32_t pod_min_member;
	char gang_topology[K8S_NAME_BUF];       /* the first member's troupe.io/gang-topology */
};

static void member_fn(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct members *m = arg;
	struct placement_request req = { 0 };
	char err[TROUPE_MESSAGE_BUF];

	(void)uid;
	if (p->reservation || !p->active)
		return;
	if (p->min_member > m->pod_min_member)
		m->pod_min_member = p->min_member;
	if (!m->gang_topology[0] && p->gang_topology[0])
		snprintf(m->gang_topology, sizeof(m->gang_topology), "%s", p->gang_topology);
	if (!m->have_req && p->demand_valid && p->demand.gpus > 0 &&
	    placement_policy_parse(p->topology[0] ? p->topology : NULL, &req.policy, err,
				   sizeof(err)) == 0) {
		req.demand = p->demand;
		m->req = req;
		m->have_req = p->state == CACHE_POD_STATE_UNACCOUNTED;
	}
	if (!m->sb || m->listed >= EXPLAIN_MEMBERS_MAX)
		return;
	strbuf_puts(m->sb, m->listed++ ? ",{\"name\":" : "{\"name\":");
	ext__explain_put_str(m->sb, p->name);
	strbuf_printf(m->sb, ",\"state\":\"%s\",\"node\":",
		      p->state == CACHE_POD_STATE_BOUND ? "bound"
		      : p->state == CACHE_POD_STATE_ASSUMED ? "assumed" : "pending");
	ext__explain_put_str(m->sb, p->node[0] ? p->node : NULL);
	strbuf_printf(m->sb, ",\"gpus\":%u}", p->demand.gpus);
}

/* The queue and priority of a pod group's first active member. */
static void member_queue_fn(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct members *m = arg;

	(void)uid;
	if (p->reservation || !p->active || m->queue[0])
		return;
	snprintf(m->queue, sizeof(m->queue), "%s", p->queue);
	m->priority = p->priority;
}

/* ---- The plan troupe would make now -------------------------------------------- */

/* How many members asking <req> node <v> takes alone: its free devices taken
 * set after set, as the planner's first step does. */
static unsigned members_on(const struct ext_service *svc, const struct cache_node_view *v,
			   const struct placement_request *req)
{
	struct placement_fit fit;
	struct placement_choice c;
	uint64_t free_mask = cache_view_free_mask(v);
	unsigned n = 0;

	if (placement_check_request(v, req, cache_get_opts(svc->cache)->gpu_resources, &fit) !=
	    PLACEMENT_FITS)
		return 0;
	while (n < 64 && placement_node_choose(v, req->demand.gpu_resource, free_mask, req->demand.gpus, &req->policy,
					       &c) == 0) {
		free_mask &= ~c.set;
		n++;
	}
	return n;
}

/* "closestDomain": at the finest level where some node has a label, the
 * domain whose nodes take the most members alone (ties: by name), and how many
 * it lacks. */
static void put_closest(const struct ext_service *svc, const struct ext_views *vs,
			const struct gang_levels *lv, const struct placement_request *req,
			unsigned need, struct strbuf *sb)
{
	size_t cap = vs->n ? vs->n : 1;
	const char **name = calloc(cap, sizeof(*name));
	unsigned *holds = calloc(cap, sizeof(*holds)), *per = calloc(cap, sizeof(*per));
	struct strmap index;
	bool done = false;

	strmap_init(&index);
	if (!per || !name || !holds)
		goto out;
	for (size_t i = 0; i < vs->n; i++)
		per[i] = members_on(svc, &vs->v[i], req);
	for (int level = (int)lv->n - 1; level >= 0 && !done; level--) {
		unsigned nd = 0, best = 0;

		strmap_fini(&index);
		strmap_init(&index);
		for (size_t i = 0; i < vs->n; i++) {
			const char *d = gang_domain_of(vs->v[i].node, lv, (unsigned)level);
			uintptr_t j;

			if (!d)
				continue;
			/* Domain numbers are stored + 1: NULL means absent. */
			j = (uintptr_t)strmap_get(&index, d, strlen(d));
			if (!j) {
				if (strmap_put(&index, d, strlen(d), (void *)(uintptr_t)(nd + 1),
					       NULL) < 0)
					goto out;
				name[nd] = d;
				holds[nd] = 0;
				j = ++nd;
			}
			holds[j - 1] += per[i];
		}
		if (!nd)
			continue;
		for (unsigned j = 1; j < nd; j++)
			if (holds[j] > holds[best] ||
			    (holds[j] == holds[best] && strcmp(name[j], name[best]) < 0))
				best = j;
		strbuf_puts(sb, "{\"levelKey\":");
		ext__explain_put_str(sb, lv->keys[level][0]);
		strbuf_puts(sb, ",\"domain\":");
		ext__explain_put_str(sb, name[best]);
		strbuf_printf(sb, ",\"domains\":%u,\"holds\":%u,\"needs\":%u,\"lacks\":%u}", nd,
			      holds[best], need, holds[best] >= need ? 0 : need - holds[best]);
		done = true;
	}
out:
	if (!done)
		strbuf_puts(sb, "null");        /* no node carries a domain label, or no memory */
	strmap_fini(&index);
	free(per);
	free(name);
	free(holds);
}

/* "planNow": what gang_plan_make says over every node troupe knows for the
 * <need> members still to place, then "closestDomain". With a member's
 * troupe.io/gang-topology <topology> ("" none), over the levels the gang
 * manager plans such a gang on (gang_levels_required), as filter does. */
static void put_plan_now(const struct ext_service *svc, const struct placement_request *req,
			 unsigned need, const char *topology, struct strbuf *sb)
{
	struct gang_levels required;
	const char *key = NULL;
	const struct gang_levels *lv = ext__gang_levels(svc, topology, &required, &key);
	struct ext_views vs;
	struct gang_plan plan;
	char why[EXT_GANG_REASON_BUF], ids[EXT_DEVICE_IDS_BUF];
	int rc;

	cache_read_begin(svc->cache);
	if (ext__views_collect(svc, &vs) < 0) {
		cache_read_end(svc->cache);
		strbuf_puts(sb, ",\"planNow\":null,\"closestDomain\":null");
		return;
	}
	rc = gang_plan_make(vs.v, (unsigned)vs.n, need, req, lv, &plan, why, sizeof(why));
	strbuf_printf(sb, ",\"planNow\":{\"members\":%u,\"possible\":%s,\"requiredKey\":",
		      need, rc == 0 ? "true" : "false");
	ext__explain_put_str(sb, key);
	if (rc == 0) {
		strbuf_puts(sb, ",\"levelKey\":");
		ext__explain_put_str(sb, plan.level >= 0 ? lv->keys[plan.level][0] : NULL);
		strbuf_puts(sb, ",\"domain\":");
		ext__explain_put_str(sb, plan.level >= 0 ? plan.domain : NULL);
		strbuf_printf(sb, ",\"nodesUsed\":%u,\"slots\":[", plan.nodes_used);
		for (unsigned i = 0; i < plan.n_slots; i++) {
			cache_devices_format(plan.slots[i].devices, ids, sizeof(ids));
			strbuf_puts(sb, i ? ",{\"node\":" : "{\"node\":");
			ext__explain_put_str(sb, vs.v[plan.slots[i].node].node->name);
			strbuf_printf(sb, ",\"devices\":\"%s\"}", ids);
		}
		strbuf_puts(sb, "]}");
		gang_plan_fini(&plan);
	} else {
		strbuf_puts(sb, ",\"why\":");
		ext__explain_put_str(sb, why);
		strbuf_puts(sb, "}");
	}
	strbuf_puts(sb, ",\"closestDomain\":");
	put_closest(svc, &vs, lv, req, need, sb);
	cache_read_end(svc->cache);
	ext__views_fini(&vs);
}

/* ---- The gang manager's view ---------------------------------------------------------- */

/* A plan slot's member: the pod's name when the cache knows its UID. */
static void put_member(const struct ext_service *svc, const char *uid, struct strbuf *sb)
{
	struct cache_pod_info info;

	if (!uid[0])
		strbuf_puts(sb, "null");
	else if (cache_pod_get(svc->cache, uid, &info) == 0 && !info.reservation)
		ext__explain_put_str(sb, info.name);
	else
		ext__explain_put_str(sb, uid);
}

/* "manager": what the gang manager holds for the gang (gang_view_get), or
 * null when it keeps no state for it (no member filtered yet, or forgotten
 * when idle). */
static void put_manager(const struct ext_service *svc, const char *ns, const char *group,
			struct strbuf *sb)
{
	struct gang_view v;
	char ids[EXT_DEVICE_IDS_BUF];

	if (!svc->gangs || gang_view_get(svc->gangs, ns, group, &v) < 0) {
		if (svc->gangs)
			gang_view_fini(&v);
		strbuf_puts(sb, "null");
		return;
	}
	strbuf_printf(sb, "{\"state\":\"%s\",\"quorum\":%u,\"timeoutSeconds\":%u,\"need\":%u,"
		      "\"needGPUs\":%llu,\"priority\":%d,\"queue\":",
		      gang_view_state_name(v.state), v.quorum, v.timeout_s, v.need,
		      (unsigned long long)v.need_gpus, (int)v.priority);
	ext__explain_put_str(sb, v.queue);
	strbuf_puts(sb, ",\"plan\":[");
	for (unsigned i = 0; i < v.n_slots; i++) {
		cache_devices_format(v.slots[i].devices, ids, sizeof(ids));
		strbuf_puts(sb, i ? ",{\"node\":" : "{\"node\":");
		ext__explain_put_str(sb, v.slots[i].node);
		strbuf_printf(sb, ",\"devices\":\"%s\",\"gpus\":%u,\"member\":", ids,
			      v.slots[i].gpus);
		put_member(svc, v.slots[i].member, sb);
		strbuf_puts(sb, "}");
	}
	strbuf_printf(sb, "],\"parked\":%u,\"waitingSeconds\":%.1f,\"deadlineSeconds\":%.1f,"
		      "\"holds\":%u,\"heldNodes\":%u,\"fairPosition\":%u,\"share\":%.4f,"
		      "\"reason\":", v.n_parked, v.waiting_s, v.deadline_s, v.n_holds, v.n_targets,
		      v.fair_position, v.share);
	ext__explain_put_str(sb, v.reason[0] ? v.reason : NULL);
	strbuf_puts(sb, "}");
	gang_view_fini(&v);
}

/* ---- The gang ---------------------------------------------------------------------- */

void ext__explain_put_gang(const struct ext_service *svc, const char *ns, const char *group,
			   const struct placement_request *req, struct strbuf *sb)
{
	struct cache_podgroup pg;
	char pgbuf[K8S_KEY_BUF + K8S_UID_BUF + K8S_NAME_BUF];
	struct members m = { .sb = sb };
	unsigned exist = 0, bound = 0, quorum, need;
	bool have_pg = cache_podgroup_get(svc->cache, ns, group, &pg, pgbuf, sizeof(pgbuf)) == 0;
	const char *from;

	cache_group_count(svc->cache, ns, group, &exist, &bound);
	strbuf_puts(sb, "{\"namespace\":");
	ext__explain_put_str(sb, ns);
	strbuf_puts(sb, ",\"name\":");
	ext__explain_put_str(sb, group);
	strbuf_printf(sb, ",\"podGroupKnown\":%s,\"podGroupApi\":",
		      have_pg ? "true" : "false");
	ext__explain_put_str(sb, have_pg ? cache_pg_apis[pg.api].api_version : NULL);
	strbuf_puts(sb, ",\"podGroupQueue\":");
	ext__explain_put_str(sb, have_pg && pg.queue[0] ? pg.queue : NULL);
	strbuf_printf(sb, ",\"managed\":%s,\"membersList\":[", svc->gangs ? "true" : "false");
	cache_group_foreach(svc->cache, ns, group, member_fn, &m);
	strbuf_puts(sb, "]");
	/* The quorum as the manager counts it: the PodGroup's minMember, else
	 * the largest a member names, else every member that exists. */
	if (have_pg && pg.min_member > 0) {
		quorum = (unsigned)pg.min_member;
		from = "podGroup";
	} else if (m.pod_min_member) {
		quorum = m.pod_min_member;
		from = "pod";
	} else {
		quorum = exist;
		from = "members";
	}
	need = quorum > bound ? quorum - bound : 0;
	strbuf_printf(sb, ",\"members\":%u,\"bound\":%u,\"quorum\":%u,\"quorumFrom\":\"%s\","
		      "\"timeoutSeconds\":%d", exist, bound, quorum, from,
		      have_pg ? (int)pg.timeout_s : 0);
	strbuf_puts(sb, ",\"manager\":");
	put_manager(svc, ns, group, sb);
	if (!req && (m.have_req || m.req.demand.gpus))
		req = &m.req;
	if (need && req && req->demand.gpus) {
		put_plan_now(svc, req, need, m.gang_topology, sb);
	} else {
		strbuf_puts(sb, ",\"planNow\":null,\"closestDomain\":null");
	}
	strbuf_puts(sb, "}");
}

void ext__explain_put_queue(const struct ext_service *svc, const char *queue, const char *ns,
			    const char *group, int32_t priority, struct strbuf *sb)
{
	struct gang_queue_view *qs = NULL;
	struct gang_view *gv = NULL;
	unsigned nq = 0, ng = 0, shown = 0;
	bool found = false;

	if (!svc->gangs || !queue || !*queue) {
		strbuf_puts(sb, "null");
		return;
	}
	strbuf_puts(sb, "{\"name\":");
	ext__explain_put_str(sb, queue);
	if (gang_queue_list(svc->gangs, &qs, &nq) == 0) {
		for (unsigned i = 0; i < nq && !found; i++) {
			if (strcmp(qs[i].name, queue) != 0)
				continue;
			found = true;
			strbuf_printf(sb, ",\"weight\":%g,\"weightFrom\":\"%s\",\"share\":%.4f,"
				      "\"waitingGangs\":%u,\"plannedGangs\":%u,\"gpus\":%llu",
				      qs[i].weight, qs[i].weight_from, qs[i].share, qs[i].waiting,
				      qs[i].planned, (unsigned long long)qs[i].gpus);
		}
	}
	free(qs);
	if (!found)
		strbuf_printf(sb, ",\"share\":%.4f", gang_queue_share(svc->gangs, queue));
	/* The gangs holding capacity now, and whether their holds refuse a pod
	 * of this priority (held_nodes.c: a gang of at least its priority). */
	strbuf_puts(sb, ",\"starvingGangs\":[");
	if (gang_view_list(svc->gangs, &gv, &ng) == 0) {
		for (unsigned i = 0; i < ng; i++) {
			bool self = ns && strcmp(gv[i].ns, ns) == 0 && strcmp(gv[i].name, group) == 0;

			if (!gv[i].n_holds && !gv[i].n_targets)
				continue;
			strbuf_puts(sb, shown++ ? ",{\"gang\":" : "{\"gang\":");
			strbuf_printf(sb, "\"%s/%s\",\"priority\":%d,\"queue\":", gv[i].ns,
				      gv[i].name, (int)gv[i].priority);
			ext__explain_put_str(sb, gv[i].queue);
			strbuf_printf(sb, ",\"holds\":%u,\"heldNodes\":%u,\"waitingSeconds\":%.1f,"
				      "\"fairPosition\":%u,\"refusesThisPod\":%s}", gv[i].n_holds,
				      gv[i].n_targets, gv[i].waiting_s, gv[i].fair_position,
				      !self && gv[i].priority >= priority ? "true" : "false");
		}
		gang_view_list_free(gv, ng);
	}
	strbuf_puts(sb, "]}");
}

void ext__explain_podgroup(const struct ext_service *svc, const char *ns, const char *name,
			   struct ext_reply *r)
{
	struct cache_podgroup pg;
	char pgbuf[K8S_KEY_BUF + K8S_UID_BUF + K8S_NAME_BUF];
	unsigned exist = 0, bound = 0;
	struct strbuf *sb = &r->body;

	cache_group_count(svc->cache, ns, name, &exist, &bound);
	if (cache_podgroup_get(svc->cache, ns, name, &pg, pgbuf, sizeof(pgbuf)) < 0 && !exist) {
		ext__explain_error(r, 404, "troupe: no pod group %s/%s in troupe's cache (no PodGroup "
				 "object and no member pod names it)", ns, name);
		return;
	}
	strbuf_puts(sb, "{\"kind\":\"podgroup\",\"gang\":");
	ext__explain_put_gang(svc, ns, name, NULL, sb);
	strbuf_puts(sb, ",\"queue\":");
	{
		struct members m = { 0 };
		struct gang_view v;
		char queue[K8S_NAME_BUF] = "";
		int32_t prio = 0;

		if (svc->gangs && gang_view_get(svc->gangs, ns, name, &v) == 0) {
			snprintf(queue, sizeof(queue), "%s", v.queue);
			prio = v.priority;
		}
		if (svc->gangs)
			gang_view_fini(&v);
		if (!queue[0]) {
			cache_group_foreach(svc->cache, ns, name, member_queue_fn, &m);
			snprintf(queue, sizeof(queue), "%s", m.queue);
			prio = m.priority;
			/* Ordered in its PodGroup's queue when that names one. */
			if (cache_podgroup_get(svc->cache, ns, name, &pg, pgbuf,
					       sizeof(pgbuf)) == 0 && pg.queue[0])
				snprintf(queue, sizeof(queue), "%s", pg.queue);
		}
		ext__explain_put_queue(svc, queue, ns, name, prio, sb);
	}
	strbuf_puts(sb, "}");
	log_debug("extender", "explain: pod group %s/%s: %u members, %u bound", ns, name, exist,
		  bound);
}
