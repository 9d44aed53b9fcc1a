/* explain: see explain.h. This file holds the query, the pod's part (its
 * request, every node's verdict grouped by reason, the best nodes with their
 * device sets and score terms) and the answer's frame; the gang's and the
 * queue's parts are explain_gang.c.
 *
 * Every node is judged by ext__judge_node (filter.c) with the pod's request as
 * filter would read it, inside one cache read section, and grouped by the code
 * placement gives its refusal (placement_fit.why); a node's message is the very
 * text filter would put in FailedNodes.
 */
#include "extender/explain.h"
#include "extender/explain_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"

/* The groups a node can fall in, in the order a person reads them: those that
 * fit, then the reasons in placement's order (placement_why), then the hold. */
static const struct {
	const char *key;                /* the JSON "reason" */
	const char *text;               /* what the human answer prints */
} groups[EXPLAIN_GROUPS] = {
	[PLACEMENT_WHY_FITS] = { "fits", "can take it now" },
	[PLACEMENT_WHY_UNKNOWN_NODE] = { "unknownNode", "unknown to troupe" },
	[PLACEMENT_WHY_NO_GPU_KIND] = { "kindMismatch", "none of the GPU kind asked" },
	[PLACEMENT_WHY_CAPACITY] = { "notEnoughCapacity", "fewer GPUs in all than asked" },
	[PLACEMENT_WHY_NOT_READY] = { "notReady", "not Ready" },
	[PLACEMENT_WHY_CORDONED] = { "cordoned", "cordoned (spec.unschedulable)" },
	[PLACEMENT_WHY_UNHEALTHY] = { "unhealthyDevices", "too few healthy GPUs (allocatable)" },
	[PLACEMENT_WHY_FREE] = { "notEnoughFree", "too few free GPUs now" },
	[PLACEMENT_WHY_TOPOLOGY_UNKNOWN] = { "topologyUnknown",
					     "GPU links unknown; the required policy needs them" },
	[PLACEMENT_WHY_TOPOLOGY_NEVER] = { "topologyNoSet",
					   "no GPU set meets the required policy" },
	[PLACEMENT_WHY_TOPOLOGY_FREE] = { "topologyNoFreeSet",
					  "no free GPU set meets the required policy now" },
	[EXPLAIN_GROUP_HELD] = { "heldForGang", "freed GPUs held for a starving gang" },
};

int ext__explain_group(const struct ext_node_verdict *v)
{
	if (v->held)
		return EXPLAIN_GROUP_HELD;
	return v->fit.why < PLACEMENT_WHY_COUNT ? (int)v->fit.why : PLACEMENT_WHY_UNKNOWN_NODE;
}

const char *ext__explain_group_key(int g)
{
	return g >= 0 && g < EXPLAIN_GROUPS ? groups[g].key : "?";
}

/* {"error":"<message>","code":<status>}. */
static void encode_explain_error(struct strbuf *body, const char *msg, unsigned status)
{
	strbuf_puts(body, "{\"error\":");
	ext__explain_put_str(body, msg);
	strbuf_printf(body, ",\"code\":%u}", status);
}

void ext__explain_error(struct ext_reply *r, unsigned status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ext__reply_verror(r, status, encode_explain_error, fmt, ap);
	va_end(ap);
}

/* ---- The query ---------------------------------------------------------------- */

static bool dns_chars(const char *s, size_t len, bool dots)
{
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
		      (dots && c == '.')))
			return false;
	}
	return len > 0;
}

int ext__explain_parse_key(const char *what, const char *s, char *ns, char *name, char *err,
			   size_t errlen)
{
	const char *slash = strchr(s, '/');
	size_t nl, ml;

	if (!slash || strchr(slash + 1, '/')) {
		snprintf(err, errlen, "troupe: %s=\"%.100s\" is not NAMESPACE/NAME", what, s);
		return -EINVAL;
	}
	nl = (size_t)(slash - s);
	ml = strlen(slash + 1);
	if (nl > K8S_NAMESPACE_MAX || !dns_chars(s, nl, false)) {
		snprintf(err, errlen, "troupe: %s=\"%.100s\": the namespace is not a DNS-1123 label "
			 "(lower-case letters, digits and '-', at most %d)", what, s,
			 K8S_NAMESPACE_MAX);
		return -EINVAL;
	}
	if (ml > K8S_NAME_MAX || !dns_chars(slash + 1, ml, true)) {
		snprintf(err, errlen, "troupe: %s=\"%.100s\": the name is not a DNS-1123 subdomain "
			 "(lower-case letters, digits, '-' and '.', at most %d)", what, s,
			 K8S_NAME_MAX);
		return -EINVAL;
	}
	memcpy(ns, s, nl);
	ns[nl] = '\0';
	memcpy(name, slash + 1, ml + 1);
	return 0;
}

/* A count argument: absent gives <def>; else decimal 0..<max>. */
static int parse_count(const char *what, const char *s, unsigned def, unsigned max,
		       unsigned *out, char *err, size_t errlen)
{
	char *end;
	unsigned long v;

	if (!s) {
		*out = def;
		return 0;
	}
	errno = 0;
	v = strtoul(s, &end, 10);
	if (!*s || *end || errno || s[0] == '-' || v > max) {
		snprintf(err, errlen, "troupe: %s=\"%.40s\" is not a count from 0 to %u", what, s,
			 max);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

/* ---- Finding the pod ------------------------------------------------------------ */

struct find_pod {
	const char *ns, *name;
	struct cache_pod_info info;
	char uid[K8S_UID_BUF];
	bool found;
};

static void find_pod_fn(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct find_pod *fp = arg;

	if (p->reservation || strcmp(p->ns, fp->ns) != 0 || strcmp(p->name, fp->name) != 0)
		return;
	/* Two pods of one name (one deleted, its successor made): the live one. */
	if (fp->found && fp->info.active && !p->active)
		return;
	fp->info = *p;
	snprintf(fp->uid, sizeof(fp->uid), "%s", uid);
	fp->found = true;
}

int ext__explain_find_pod(const struct ext_service *svc, const char *ns, const char *name,
			  struct cache_pod_info *out, char *uid, size_t uidlen)
{
	struct find_pod fp = { .ns = ns, .name = name };

	cache_pod_foreach(svc->cache, find_pod_fn, &fp);
	if (!fp.found)
		return -ENOENT;
	*out = fp.info;
	snprintf(uid, uidlen, "%s", fp.uid);
	return 0;
}

/* ---- Small writers ---------------------------------------------------------------- */

void ext__explain_put_str(struct strbuf *sb, const char *s)
{
	if (s)
		strbuf_put_json_str(sb, s, strlen(s));
	else
		strbuf_puts(sb, "null");
}

void ext__explain_policy_name(const struct placement_policy *p, char *buf, size_t len)
{
	char lvl[PLACEMENT_LINK_NAME_BUF];

	switch (p->kind) {
	case PLACEMENT_POLICY_REQUIRED:
		snprintf(buf, len, "required");
		break;
	case PLACEMENT_POLICY_REQUIRED_LEVEL:
		snprintf(buf, len, "required:%s", placement_link_name(p->min_level, lvl, sizeof(lvl)));
		break;
	case PLACEMENT_POLICY_NONE:
		snprintf(buf, len, "none");
		break;
	default:
		snprintf(buf, len, "preferred");
		break;
	}
}

/* The pod's state for a person: where it is, not troupe's accounting. */
static const char *state_name(const struct cache_pod_info *p)
{
	if (!p->active)
		return "finished";
	if (p->state == CACHE_POD_STATE_ASSUMED)
		return "assumed";
	return p->node[0] ? "bound" : "pending";
}

/* ---- Every node's verdict -------------------------------------------------------- */

struct node_entry {
	struct cache_node_view view;    /* valid in the read section */
	int group;
	bool resolvable;
	unsigned score;                 /* fitting nodes: the policy's score */
};

struct walk {
	const struct ext_service *svc;
	const struct placement_request *req;
	int32_t priority;
	struct placement_score_memo memo;
	bool scoring;
	struct placement_rank rank;     /* the fitting nodes' fine scores */
	struct node_entry *e;
	size_t n, cap;
	bool oom;
};

static bool walk_node(const struct cache_node_view *v, void *arg)
{
	struct walk *w = arg;
	struct ext_node_verdict verdict;
	struct node_entry *e;

	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 256;
		struct node_entry *p = realloc(w->e, cap * sizeof(*p));

		if (!p) {
			w->oom = true;
			return false;
		}
		w->e = p;
		w->cap = cap;
	}
	ext__judge_node(w->svc, v->node->name, v, NULL, w->priority, w->req, &verdict);
	e = &w->e[w->n++];
	e->view = *v;
	e->group = ext__explain_group(&verdict);
	e->resolvable = verdict.fit.verdict != PLACEMENT_UNRESOLVABLE;
	e->score = 0;
	if (e->group == PLACEMENT_WHY_FITS && w->scoring) {
		e->score = placement_score_memoized(&w->memo, v);
		placement_rank_add(&w->rank, e->score);
	}
	return true;
}

static int by_name(const void *a, const void *b)
{
	const struct node_entry *x = a, *y = b;

	return strcmp(x->view.node->name, y->view.node->name);
}

static int by_score(const void *a, const void *b)
{
	const struct node_entry *x = *(struct node_entry *const *)a;
	const struct node_entry *y = *(struct node_entry *const *)b;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return strcmp(x->view.node->name, y->view.node->name);
}

/* "groups": the groups with a node, each with its count and examples, the
 * messages being filter's own. */
static void put_groups(struct walk *w, unsigned examples, struct strbuf *sb)
{
	size_t count[EXPLAIN_GROUPS] = { 0 };
	bool resolvable[EXPLAIN_GROUPS];
	bool first = true;

	for (size_t i = 0; i < w->n; i++) {
		count[w->e[i].group]++;
		resolvable[w->e[i].group] = w->e[i].resolvable;
	}
	strbuf_puts(sb, "[");
	for (int g = 0; g < EXPLAIN_GROUPS; g++) {
		unsigned shown = 0;

		if (!count[g])
			continue;
		strbuf_printf(sb, "%s{\"reason\":\"%s\",\"text\":\"%s\",\"resolvable\":%s,"
			      "\"count\":%zu,\"examples\":[", first ? "" : ",", groups[g].key,
			      groups[g].text, resolvable[g] ? "true" : "false", count[g]);
		first = false;
		for (size_t i = 0; i < w->n && shown < examples; i++) {
			struct ext_node_verdict v;
			const char *name = w->e[i].view.node->name;

			if (w->e[i].group != g)
				continue;
			/* Judged again for its words: the same read section, the
			 * same answer. */
			ext__judge_node(w->svc, name, &w->e[i].view, NULL, w->priority, w->req, &v);
			strbuf_puts(sb, shown ? ",{\"node\":" : "{\"node\":");
			ext__explain_put_str(sb, name);
			strbuf_puts(sb, ",\"message\":");
			ext__explain_put_str(sb, v.held ? v.note : g == PLACEMENT_WHY_FITS ? NULL
								       : v.fit.reason);
			strbuf_puts(sb, "}");
			shown++;
		}
		strbuf_puts(sb, "]}");
	}
	strbuf_puts(sb, "]");
}

/* "best": the fitting nodes that score best (ties: by name), each with the
 * devices the pod would get there and the terms of the score. */
static void put_best(struct walk *w, unsigned best, struct strbuf *sb)
{
	struct node_entry **fit = NULL;
	size_t n = 0;

	strbuf_puts(sb, "[");
	if (best && w->n)
		fit = malloc(w->n * sizeof(*fit));
	for (size_t i = 0; fit && i < w->n; i++)
		if (w->e[i].group == PLACEMENT_WHY_FITS)
			fit[n++] = &w->e[i];
	if (n)
		qsort(fit, n, sizeof(*fit), by_score);
	placement_rank_finish(&w->rank);
	for (size_t i = 0; i < n && i < best; i++) {
		const struct cache_node_view *v = &fit[i]->view;
		struct placement_score_terms t;
		char ids[EXT_DEVICE_IDS_BUF], link[PLACEMENT_LINK_NAME_BUF];

		strbuf_puts(sb, i ? ",{\"node\":" : "{\"node\":");
		ext__explain_put_str(sb, v->node->name);
		/* score: prioritize's answer when kube-scheduler sends every
		 * fitting node (the rank among them); fineScore: the policy's. */
		strbuf_printf(sb, ",\"score\":%u,\"fineScore\":%u,\"freeGPUs\":%u",
			      placement_rank_score(&w->rank, fit[i]->score), fit[i]->score,
			      cache_view_free_gpus(v));
		/* A shared node's devices are replica slots of its physical GPUs. */
		if (cache_node_shared(v->node))
			strbuf_printf(sb, ",\"sharing\":{\"strategy\":\"%s\",\"gpus\":%u,"
				      "\"replicasPerGpu\":%u,\"replicasAdvertised\":%u,"
				      "\"packing\":\"%s\"}",
				      cache_sharing_name((enum cache_sharing)v->node->gpu_sharing),
				      v->node->gpu_physical, v->node->gpu_replicas,
				      v->node->gpu_replicas_advertised,
				      v->node->gpu_packing == CACHE_PACKING_PACKED ? "packed"
										   : "distributed");
		if (placement_score_terms(v, w->req, &t) == 0) {
			cache_node_devices_format(v->node, t.choice.set, ids, sizeof(ids));
			strbuf_printf(sb, ",\"devices\":\"%s\",\"worstLink\":", ids);
			if (t.known && __builtin_popcountll(t.choice.set) >= 2)
				ext__explain_put_str(sb, placement_link_name(t.choice.worst, link,
									     sizeof(link)));
			else
				strbuf_puts(sb, "null");
			strbuf_printf(sb, ",\"numaNodes\":%u,\"topologyKnown\":%s,\"terms\":"
				      "{\"fit\":%.3f,\"packing\":%.3f,\"topology\":%.3f,"
				      "\"fragmentation\":%.3f}",
				      t.choice.numa_nodes, t.known ? "true" : "false", t.fit,
				      t.packing, t.topology, t.fragmentation);
		}
		strbuf_puts(sb, "}");
	}
	strbuf_puts(sb, "]");
	free(fit);
}

/* The pod's part: "request" through "best". Inside no read section (it takes
 * its own). Returns the number of fitting nodes, or -ENOMEM. */
static long put_pod_nodes(const struct ext_service *svc, const struct cache_pod_info *p,
			  const struct placement_request *req, unsigned examples, unsigned best,
			  struct strbuf *sb)
{
	struct walk w = { .svc = svc, .req = req, .priority = p->priority };
	size_t feasible = 0;

	w.scoring = svc->score != NULL;
	cache_read_begin(svc->cache);
	if (w.scoring)
		placement_score_memo_init(&w.memo, svc->score, &svc->cfg->weights, req);
	cache_node_foreach(svc->cache, walk_node, &w);
	if (w.oom) {
		cache_read_end(svc->cache);
		free(w.e);
		return -ENOMEM;
	}
	if (w.n)
		qsort(w.e, w.n, sizeof(*w.e), by_name);
	for (size_t i = 0; i < w.n; i++)
		feasible += w.e[i].group == PLACEMENT_WHY_FITS;
	strbuf_printf(sb, ",\"nodes\":{\"total\":%zu,\"feasible\":%zu,\"groups\":", w.n, feasible);
	put_groups(&w, examples, sb);
	strbuf_puts(sb, "},\"scoring\":{\"policy\":");
	ext__explain_put_str(sb, svc->score ? svc->score->name : NULL);
	strbuf_printf(sb, ",\"weights\":{\"fit\":%g,\"packing\":%g,\"topology\":%g,"
		      "\"fragmentation\":%g}},\"best\":", svc->cfg->weights.fit,
		      svc->cfg->weights.packing, svc->cfg->weights.topology,
		      svc->cfg->weights.fragmentation);
	put_best(&w, best, sb);
	cache_read_end(svc->cache);
	free(w.e);
	return (long)feasible;
}

static void explain_pod(const struct ext_service *svc, const char *ns, const char *name,
			unsigned examples, unsigned best, struct ext_reply *r)
{
	const struct cache_opts *opts = cache_get_opts(svc->cache);
	struct cache_pod_info p;
	struct placement_request req = { 0 };
	struct strbuf *sb = &r->body;
	char uid[K8S_UID_BUF], err[TROUPE_MESSAGE_BUF], pol[32];
	const char *decided;
	bool gang, policy_ok;
	long feasible = 0;

	if (ext__explain_find_pod(svc, ns, name, &p, uid, sizeof(uid)) < 0) {
		ext__explain_error(r, 404, "troupe: no pod %s/%s in troupe's cache (neither its "
				 "watch nor a filter has shown it, or it is gone)", ns, name);
		return;
	}
	req.demand = p.demand;
	policy_ok = placement_policy_parse(p.topology[0] ? p.topology : NULL, &req.policy, err,
					   sizeof(err)) == 0;
	gang = p.group[0] && svc->gangs;
	if (!p.demand_valid)
		decided = "invalidRequest";
	else if (!policy_ok)
		decided = "invalidTopology";
	else if (p.demand.gpus == 0)
		decided = "noGPUs";
	else if (gang)
		decided = "gang";
	else
		decided = "nodes";
	strbuf_puts(sb, "{\"kind\":\"pod\",\"pod\":{\"namespace\":");
	ext__explain_put_str(sb, p.ns);
	strbuf_puts(sb, ",\"name\":");
	ext__explain_put_str(sb, p.name);
	strbuf_puts(sb, ",\"uid\":");
	ext__explain_put_str(sb, uid);
	strbuf_printf(sb, ",\"state\":\"%s\",\"node\":", state_name(&p));
	ext__explain_put_str(sb, p.node[0] ? p.node : NULL);
	strbuf_printf(sb, ",\"priority\":%d,\"queue\":", (int)p.priority);
	ext__explain_put_str(sb, p.queue);
	strbuf_puts(sb, ",\"podGroup\":");
	ext__explain_put_str(sb, p.group[0] ? p.group : NULL);
	strbuf_printf(sb, "},\"request\":{\"gpus\":%u,\"resource\":", p.demand.gpus);
	ext__explain_put_str(sb, p.demand.gpu_resource >= 0 &&
				 (unsigned)p.demand.gpu_resource < opts->n_gpu_resources
				 ? opts->gpu_resources[p.demand.gpu_resource] : NULL);
	ext__explain_policy_name(&req.policy, pol, sizeof(pol));
	strbuf_printf(sb, ",\"cpuMilli\":%lld,\"memoryBytes\":%lld,\"topology\":\"%s\","
		      "\"topologyAnnotation\":", (long long)p.demand.cpu_milli,
		      (long long)p.demand.mem_bytes, policy_ok ? pol : "invalid");
	ext__explain_put_str(sb, p.topology[0] ? p.topology : NULL);
	strbuf_printf(sb, "},\"decidedBy\":\"%s\"", decided);
	if (!p.demand_valid || !policy_ok || p.demand.gpus == 0) {
		strbuf_puts(sb, ",\"summary\":");
		if (!p.demand_valid)
			ext__explain_put_str(sb, "the pod's GPU request is invalid: filter refuses "
					     "it on every node (the reason is on the pod's "
					     "FailedScheduling event)");
		else if (!policy_ok)
			ext__explain_put_str(sb, err);
		else
			ext__explain_put_str(sb, "the pod asks for no GPU troupe manages: filter "
					     "passes every node");
		strbuf_puts(sb, ",\"nodes\":null,\"best\":[]");
	} else {
		/* The nodes first (the summary counts them), written after it. */
		struct strbuf nodes = STRBUF_INIT;
		size_t at;

		feasible = put_pod_nodes(svc, &p, &req, examples, gang ? 0 : best, &nodes);
		if (feasible < 0 || strbuf_failed(&nodes)) {
			strbuf_fini(&nodes);
			ext__explain_error(r, 500, "troupe: out of memory explaining %s/%s", ns, name);
			return;
		}
		at = 0;
		if (p.node[0])
			at = (size_t)snprintf(err, sizeof(err), "it is %s on %s; judged as if it asked "
					      "again now, ", state_name(&p), p.node);
		if (at >= sizeof(err))
			at = sizeof(err) - 1;   /* cut: the rest is cut too */
		if (gang)
			snprintf(err + at, sizeof(err) - at, "a gang member: the gang's plan decides; "
				 "%ld nodes could take this member alone now", feasible);
		else if (feasible)
			snprintf(err + at, sizeof(err) - at, "%ld nodes can take it now", feasible);
		else
			snprintf(err + at, sizeof(err) - at, "no node can take it now");
		strbuf_puts(sb, ",\"summary\":");
		ext__explain_put_str(sb, err);
		strbuf_append(sb, nodes.buf, nodes.len);
		strbuf_fini(&nodes);
	}
	strbuf_puts(sb, ",\"gang\":");
	if (p.group[0])
		ext__explain_put_gang(svc, p.ns, p.group, &req, sb);
	else
		strbuf_puts(sb, "null");
	strbuf_puts(sb, ",\"queue\":");
	ext__explain_put_queue(svc, p.queue, p.group[0] ? p.ns : NULL, p.group, p.priority, sb);
	strbuf_puts(sb, "}");
	log_debug("extender", "explain: pod %s/%s: %s, %ld nodes fit", ns, name, decided, feasible);
}

void ext_explain(const struct ext_service *svc, const struct ext_explain_query *q,
		 struct ext_reply *r)
{
	char ns[K8S_NAMESPACE_BUF], name[K8S_NAME_BUF], err[TROUPE_MESSAGE_BUF];
	unsigned examples, best;

	if (!!q->pod == !!q->podgroup) {
		ext__explain_error(r, 400, "troupe: give exactly one of ?pod=NAMESPACE/NAME and "
				 "?podgroup=NAMESPACE/NAME");
		return;
	}
	if (ext__explain_parse_key(q->pod ? "pod" : "podgroup", q->pod ? q->pod : q->podgroup, ns,
				   name, err, sizeof(err)) < 0 ||
	    parse_count("examples", q->examples, EXPLAIN_EXAMPLES_DEFAULT, EXPLAIN_EXAMPLES_MAX,
			&examples, err, sizeof(err)) < 0 ||
	    parse_count("best", q->best, EXPLAIN_BEST_DEFAULT, EXPLAIN_BEST_MAX, &best, err,
			sizeof(err)) < 0) {
		ext__explain_error(r, 400, "%s", err);
		return;
	}
	if (!cache_is_synced(svc->cache)) {
		ext__explain_error(r, 503, "troupe: still syncing cluster state from %s; try again "
				 "shortly", svc->source);
		return;
	}
	if (q->pod)
		explain_pod(svc, ns, name, examples, best, r);
	else
		ext__explain_podgroup(svc, ns, name, r);
}
