/* preempt: keep only the candidate nodes where evicting kube-scheduler's
 * proposed victims would really let the pod run, and never propose evicting
 * part of a bound gang (unless gang.allow_partial_preemption). For a member of
 * a gang still short of its quorum, the whole gang must then fit: its members
 * still to place are planned on every node as it would be with every
 * candidate's victims gone, and only the candidates that plan uses are kept
 * (none when it does not fit). The answer names the victims by UID
 * (NodeNameToMetaVictims), the form kube-scheduler expects back from an
 * extender.
 *
 * A candidate whose victims troupe knows to run on another node is dropped:
 * evicting them frees nothing there. Any number of victims is read (the body's
 * size bounds them); NumPDBViolations must be a whole, non-negative number, or
 * the request is refused.
 */
#include "extender/internal.h"
#include "extender/node_match.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"

/* Why a candidate is dropped: a victim's "namespace/name" and node, and the
 * words around them. */
enum { PREEMPT_WHY_BUF = K8S_KEY_BUF + K8S_NAME_BUF + 64 };

/* A victim that belongs to a pod group, for the bound-gang check. */
struct gang_victim {
	const char *uid;
	char ns[K8S_NAMESPACE_BUF];
	char group[K8S_NAME_BUF];
};

static int gang_victim_cmp(const void *a, const void *b)
{
	const struct gang_victim *x = a, *y = b;
	int c = strcmp(x->ns, y->ns);

	if (!c)
		c = strcmp(x->group, y->group);
	return c ? c : strcmp(x->uid, y->uid);
}

/* Whether evicting <v> (sorted) evicts part of a bound gang: for each gang,
 * fewer distinct victims than it has members bound. */
static bool splits_a_gang(const struct ext_service *svc, const struct gang_victim *v, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned exist, bound, here = 0;
		size_t j = i;

		for (; j < n && strcmp(v[j].ns, v[i].ns) == 0 && strcmp(v[j].group, v[i].group) == 0;
		     j++)
			here += j == i || strcmp(v[j].uid, v[j - 1].uid) != 0;
		cache_group_count(svc->cache, v[i].ns, v[i].group, &exist, &bound);
		if (bound > here)
			return true;
		i = j;
	}
	return false;
}

/* Why a candidate node is dropped (static text, or <buf>), or NULL to keep it.
 * Always: no victim troupe knows may run on another node. With <judge> (the
 * preemptor asks for GPUs): evicting the victims must free a device set the
 * preemptor's policy accepts, and must not evict part of a bound gang (unless
 * gang.allow_partial_preemption). */
static const char *preempt_judge(const struct ext_service *svc, const struct placement_request *req,
				 bool judge, const char *node, const char *const *uids, size_t n_uids,
				 uint64_t *freed_out, uint32_t *unattr_out, char *buf, size_t buflen)
{
	struct cache_node_view v;
	struct placement_fit fit;
	struct gang_victim *gv = NULL;
	size_t n_gv = 0;
	uint64_t freed = 0;
	uint32_t unattr = 0;
	const char *why = NULL;

	for (size_t i = 0; i < n_uids; i++) {
		struct cache_pod_info pi;

		if (cache_pod_get(svc->cache, uids[i], &pi) < 0)
			continue;       /* unknown to troupe: it occupies nothing troupe counts */
		if (pi.node[0] && strcmp(pi.node, node) != 0) {
			/* Evicting it frees nothing here: kube-scheduler's view is
			 * wrong, or the request is not kube-scheduler's. */
			snprintf(buf, buflen, "victim %s/%s runs on node %s, not on this one",
				 pi.ns, pi.name, pi.node);
			why = buf;
			goto out;
		}
		if (!judge)
			continue;
		freed |= pi.devices;
		unattr = unattr > UINT32_MAX - pi.unattributed ? UINT32_MAX
							       : unattr + pi.unattributed;
		if (pi.group[0] && !svc->cfg->gang.allow_partial_preemption) {
			if (!gv && !(gv = malloc(n_uids * sizeof(*gv)))) {
				why = "out of memory judging the victims";
				goto out;
			}
			gv[n_gv].uid = uids[i];
			memcpy(gv[n_gv].ns, pi.ns, sizeof(pi.ns));
			memcpy(gv[n_gv].group, pi.group, sizeof(pi.group));
			n_gv++;
		}
	}
	if (!judge)
		goto out;
	if (n_gv)
		qsort(gv, n_gv, sizeof(*gv), gang_victim_cmp);
	if (splits_a_gang(svc, gv, n_gv)) {
		why = "would evict part of a bound gang";
		goto out;
	}
	cache_read_begin(svc->cache);
	if (!cache_node_lookup(svc->cache, node, strlen(node), &v)) {
		why = "node unknown to troupe";
	} else {
		v.used &= ~freed;
		v.unattributed = v.unattributed > unattr ? v.unattributed - unattr : 0;
		if (placement_check_request(&v, req, cache_get_opts(svc->cache)->gpu_resources,
					    &fit) != PLACEMENT_FITS)
			why = "evicting these victims would not free a GPU set the pod can use";
	}
	cache_read_end(svc->cache);
out:
	free(gv);
	*freed_out = freed;
	*unattr_out = unattr;
	return why;
}

/* A candidate node kept by preempt_judge: its victims (uids[first..first+n))
 * and what evicting them frees. */
struct candidate {
	const char *node;
	size_t first, n;
	int64_t pdb;
	uint64_t freed;
	uint32_t unattr;
	bool keep;
};

/* Preempting for a gang member helps only if the whole gang then fits: plan the
 * members still to place (<need>, each asking what the preemptor asks) on every
 * node as it would be once every candidate's victims are gone, and keep only
 * the candidates in that plan. kube-scheduler evicts one candidate's victims
 * per preemption, and each member that still does not fit preempts again, so
 * the plan may take several candidates. The plan is made on the candidates and
 * on every other node the preemptor <pod> may use by its node selector, node
 * affinity and tolerations (ext_pod_may_use_node; the members of a gang share
 * their spec), as filter's planner would take them. Returns why none is kept,
 * or NULL; -ENOMEM in <oom> when it could not plan. */
static const char *gang_plan_after_eviction(const struct ext_service *svc,
					    const cJSON *pod, const struct cache_pod *cp,
					    const struct placement_request *req, unsigned need,
					    struct candidate *cs, size_t n_cs, bool *oom, char *buf,
					    size_t buflen)
{
	struct gang_levels required;
	const char *key = NULL;
	const struct gang_levels *lv = ext__gang_levels(svc, cp->gang_topology, &required, &key);
	const char *why = NULL;
	struct ext_views vs;
	struct gang_plan plan;
	unsigned *slot_node = NULL;
	size_t kept = 0;
	char err[EXT_GANG_REASON_BUF];

	*oom = false;
	cache_read_begin(svc->cache);
	if (ext__views_collect(svc, &vs) < 0) {
		cache_read_end(svc->cache);
		*oom = true;
		return "out of memory planning the gang";
	}
	slot_node = calloc(n_cs ? n_cs : 1, sizeof(*slot_node));
	if (!slot_node) {
		*oom = true;
		why = "out of memory planning the gang";
		goto out;
	}
	/* Only the nodes the members may use: the candidates, and the others the
	 * preemptor's spec allows. */
	for (size_t j = 0; j < vs.n; j++) {
		bool keep = ext_pod_may_use_node(pod, vs.v[j].node);

		for (size_t i = 0; i < n_cs && !keep; i++)
			keep = strcmp(vs.v[j].node->name, cs[i].node) == 0;
		if (keep)
			vs.v[kept++] = vs.v[j];
	}
	vs.n = kept;
	/* Each candidate's node as it would be without its victims. */
	for (size_t i = 0; i < n_cs; i++) {
		slot_node[i] = UINT32_MAX;
		for (size_t j = 0; j < vs.n; j++) {
			struct cache_node_view *v = &vs.v[j];

			if (strcmp(v->node->name, cs[i].node) != 0)
				continue;
			v->used &= ~cs[i].freed;
			v->unattributed = v->unattributed > cs[i].unattr
						  ? v->unattributed - cs[i].unattr : 0;
			slot_node[i] = (unsigned)j;
			break;
		}
	}
	if (gang_plan_make(vs.v, (unsigned)vs.n, need, req, lv, &plan, err, sizeof(err)) < 0) {
		snprintf(buf, buflen, "its gang's %u members still to place would not fit even "
			 "with every candidate's victims evicted: %.400s", need, err);
		why = buf;
		goto out;
	}
	/* A candidate the plan uses, on devices its victims free (or, for victims
	 * whose devices troupe does not know, on its node at all): evicting the
	 * victims of any other is for nothing. */
	for (size_t i = 0; i < n_cs; i++)
		for (unsigned k = 0; k < plan.n_slots && slot_node[i] != UINT32_MAX; k++)
			if (plan.slots[k].node == slot_node[i] &&
			    ((plan.slots[k].devices & cs[i].freed) || cs[i].unattr)) {
				cs[i].keep = true;
				break;
			}
	gang_plan_fini(&plan);
out:
	cache_read_end(svc->cache);
	ext__views_fini(&vs);
	free(slot_node);
	return why;
}

/* A candidate's NumPDBViolations: absent or null is 0. Returns 0 or -EINVAL. */
static int pdb_violations(const cJSON *victims, int64_t *out)
{
	const cJSON *pdb = json_get(victims, "NumPDBViolations");

	*out = 0;
	if (!pdb || cJSON_IsNull(pdb))
		return 0;
	return json_int_in_range(pdb, 0, INT64_MAX, out) < 0 ? -EINVAL : 0;
}

/* Keep only the candidates where preemption would really help this pod, in the
 * meta (UID) form kube-scheduler expects back. */
void ext_preempt(const struct ext_service *svc, const char *body, size_t len,
		 struct ext_reply *r)
{
	const cJSON *pod, *meta, *full, *node;
	struct placement_request req = { 0 };
	struct cache_pod *cp = NULL;
	cJSON *root = NULL;
	char err[EXT_REQUEST_ERR_BUF], why_buf[PREEMPT_WHY_BUF];
	const char **uids = NULL;
	struct candidate *cs = NULL;
	size_t n = 0, dropped = 0, cap = 0, n_uids = 0, n_cs = 0, cs_cap = 0;
	unsigned need = 0, quorum = 0;

	if (ext_preempt_decode(body, len, &root, &pod, &meta, &full, err, sizeof(err)) < 0) {
		log_warn("extender", "preempt: bad request (%zu bytes): %s", len, err);
		ext__reply_error(r, 400, "troupe: bad preempt request: %s", err);
		goto out;
	}
	/* A preemptor troupe cannot read is judged by kube-scheduler alone. */
	if (cJSON_IsObject(pod)) {
		cp = cache_pod_parse(pod, cache_get_opts(svc->cache), err, sizeof(err));
		if (cp && !cp->demand_error) {
			req.demand = cp->demand;
			if (placement_policy_parse(cp->topology, &req.policy, err, sizeof(err)) < 0)
				req.policy.kind = PLACEMENT_POLICY_PREFERRED;
		}
	}
	/* A gang member: the members still to place, the preemptor among them. */
	if (cp && cp->group && svc->gangs && req.demand.gpus > 0) {
		struct gang_member mb = ext__member_of(cp, &req);

		need = gang_members_needed(svc->gangs, &mb, &quorum);
		if (quorum <= 1)
			need = 0;
	}
	/* The candidates that evicting their victims would really help. */
	cJSON_ArrayForEach(node, (meta ? meta : full)) {
		const cJSON *pods = json_get(node, "Pods");
		struct candidate c = { 0 };
		const char *why;
		const cJSON *p;

		if (!node->string)
			continue;
		if (pdb_violations(node, &c.pdb) < 0) {
			log_warn("extender", "preempt: bad request: node %s: NumPDBViolations is not "
				 "a whole number from 0 to 2^53", node->string);
			ext__reply_error(r, 400, "troupe: bad preempt request: node %.253s: "
					 "NumPDBViolations must be a whole number from 0 to 2^53",
					 node->string);
			goto out;
		}
		c.node = node->string;
		c.first = n_uids;
		cJSON_ArrayForEach(p, json_list(pods)) {
			const char *uid = meta ? json_str(p, "UID")
					       : json_str(json_obj(p, "metadata"), "uid");

			if (!uid)
				continue;
			if (n_uids == cap) {
				const char **g = realloc(uids, (cap = cap ? cap * 2 : 64) * sizeof(*g));

				if (!g)
					goto oom;
				uids = g;
			}
			uids[n_uids++] = uid;
		}
		c.n = n_uids - c.first;
		if (!c.n)
			continue;       /* the scheduler refuses an empty victim list */
		why = preempt_judge(svc, &req, req.demand.gpus > 0, c.node, uids + c.first, c.n,
				    &c.freed, &c.unattr, why_buf, sizeof(why_buf));
		if (why) {
			log_debug("extender", "preempt: pod %s/%s: dropping node %s: %s",
				  cp ? cp->ns : "?", cp ? cp->name : "?", c.node, why);
			dropped++;
			continue;
		}
		c.keep = true;
		if (n_cs == cs_cap) {
			struct candidate *g = realloc(cs, (cs_cap = cs_cap ? cs_cap * 2 : 16) *
							      sizeof(*g));

			if (!g)
				goto oom;
			cs = g;
		}
		cs[n_cs++] = c;
	}
	if (need > 1 && n_cs) {
		const char *why;
		bool oom;

		for (size_t i = 0; i < n_cs; i++)
			cs[i].keep = false;
		why = gang_plan_after_eviction(svc, pod, cp, &req, need, cs, n_cs, &oom, why_buf,
					       sizeof(why_buf));
		if (oom) {
			ext__reply_error(r, 500, "troupe: out of memory planning gang %s/%s",
					 cp->ns, cp->group);
			goto out;
		}
		for (size_t i = 0; i < n_cs; i++) {
			if (cs[i].keep)
				continue;
			dropped++;
			log_info("extender", "preempt: pod %s/%s (gang %s/%s, %u of quorum %u to "
				 "place): dropping node %s: %s", cp->ns, cp->name, cp->ns, cp->group,
				 need, quorum, cs[i].node, why ? why : "not in the gang's plan with "
				 "the candidates' victims evicted");
		}
	}
	strbuf_puts(&r->body, "{\"NodeNameToMetaVictims\":{");
	for (size_t c = 0; c < n_cs; c++) {
		if (!cs[c].keep)
			continue;
		if (n++)
			strbuf_putc(&r->body, ',');
		strbuf_put_json_str(&r->body, cs[c].node, strlen(cs[c].node));
		strbuf_puts(&r->body, ":{\"Pods\":[");
		for (size_t i = 0; i < cs[c].n; i++) {
			const char *uid = uids[cs[c].first + i];

			if (i)
				strbuf_putc(&r->body, ',');
			strbuf_puts(&r->body, "{\"UID\":");
			strbuf_put_json_str(&r->body, uid, strlen(uid));
			strbuf_putc(&r->body, '}');
		}
		strbuf_puts(&r->body, "],\"NumPDBViolations\":");
		strbuf_put_i64(&r->body, cs[c].pdb);
		strbuf_putc(&r->body, '}');
	}
	strbuf_puts(&r->body, "}}");
	log_debug("extender", "preempt: kept %zu candidate nodes, dropped %zu", n, dropped);
	goto out;
oom:
	ext__reply_error(r, 500, "troupe: out of memory reading the victims");
out:
	free(uids);
	free(cs);
	cache_pod_free(cp);
	cJSON_Delete(root);
}
