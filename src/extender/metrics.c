/* GET /metrics: the request counts the server bumps (ext_count) and their
 * latency histograms, every module's counters, gangs by state and the
 * fair-sharing queues, in Prometheus' text format (version 0.0.4); the process
 * metrics are process_metrics.c's. One function per group of families, listed
 * in ext_metrics at the end, so that a module's metrics are one function and
 * one line there. promtool check metrics lints the whole answer
 * (tests/integration/test_promtool.py).
 */
#include "extender/http_reply.h"
#include "extender/internal.h"
#include "extender/process_metrics.h"
#include "extender/recover.h"

#include <stdlib.h>
#include <string.h>

#include "cache/lease.h"
#include "extender/server.h"
#include "extender/standby.h"
#include "extender/cycle.h"
#include "extender/top_choice.h"
#include "troupe_version.h"

/* ---- metrics --------------------------------------------------------------- */

const double ext_latency_bounds_s[EXT_LATENCY_BOUNDS] = {
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
	0.5, 1, 2.5, 5, 10,
};

void ext_count(struct ext_counters *c, enum ext_counter_verb verb, bool error,
	       uint64_t elapsed_ns)
{
	unsigned b = 0;

	if (!c)
		return;
	__atomic_add_fetch(&c->requests[verb], 1, __ATOMIC_RELAXED);
	if (error)
		__atomic_add_fetch(&c->errors[verb], 1, __ATOMIC_RELAXED);
	while (b < EXT_LATENCY_BOUNDS && (double)elapsed_ns > ext_latency_bounds_s[b] * 1e9)
		b++;
	__atomic_add_fetch(&c->latency[verb][b], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->latency_ns_sum[verb], elapsed_ns, __ATOMIC_RELAXED);
}

/* troupe_request_duration_seconds: one histogram per verb, cumulative buckets
 * as Prometheus reads them. */
static void latency_histograms(struct strbuf *sb, const struct ext_counters *c,
			       const char *const *verbs)
{
	strbuf_puts(sb, "# HELP troupe_request_duration_seconds Time from a request's headers to "
		    "its answer, by verb (a gang member's bind includes its wait at the barrier)\n"
		    "# TYPE troupe_request_duration_seconds histogram\n");
	for (int v = 0; v < EXT_C_VERBS; v++) {
		unsigned long long cum = 0;

		for (unsigned b = 0; b <= EXT_LATENCY_BOUNDS; b++) {
			cum += __atomic_load_n(&c->latency[v][b], __ATOMIC_RELAXED);
			if (b < EXT_LATENCY_BOUNDS)
				strbuf_printf(sb, "troupe_request_duration_seconds_bucket{verb=\"%s\","
					      "le=\"%g\"} %llu\n", verbs[v], ext_latency_bounds_s[b],
					      cum);
			else
				strbuf_printf(sb, "troupe_request_duration_seconds_bucket{verb=\"%s\","
					      "le=\"+Inf\"} %llu\n", verbs[v], cum);
		}
		strbuf_printf(sb, "troupe_request_duration_seconds_sum{verb=\"%s\"} %.9f\n"
			      "troupe_request_duration_seconds_count{verb=\"%s\"} %llu\n", verbs[v],
			      __atomic_load_n(&c->latency_ns_sum[v], __ATOMIC_RELAXED) / 1e9, verbs[v],
			      cum);
	}
}

/* troupe_http_responses_total by status code, and troupe_build_info. */
static void responses_and_build(struct strbuf *sb)
{
	strbuf_puts(sb, "# HELP troupe_http_responses_total Answers sent on both listeners, by "
		    "status code (\"other\": a code not listed)\n"
		    "# TYPE troupe_http_responses_total counter\n");
	for (unsigned i = 0; i < EXT_HTTP_CODES; i++) {
		if (ext_http_codes[i])
			strbuf_printf(sb, "troupe_http_responses_total{code=\"%u\"} %llu\n",
				      ext_http_codes[i], ext__http_responses(i));
		else
			strbuf_printf(sb, "troupe_http_responses_total{code=\"other\"} %llu\n",
				      ext__http_responses(i));
	}
	strbuf_puts(sb, "# HELP troupe_build_info The running troupe's version (always 1)\n"
		    "# TYPE troupe_build_info gauge\n"
		    "troupe_build_info{version=\"" TROUPE_VERSION "\"} 1\n");
}

/* ---- Gangs in the cache ------------------------------------------------------------ */

/* A pod group's members as the cache knows them: those not finished, those on
 * a node (bound or assumed), and the largest quorum a member names. */
struct group_tally {
	unsigned exist, bound, pod_quorum;
};

static void tally_member(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct group_tally *t = arg;

	(void)uid;
	if (!p->active)
		return;
	t->exist++;
	if (p->node[0])
		t->bound++;
	if (p->min_member > t->pod_quorum)
		t->pod_quorum = p->min_member;
}

struct bound_count {
	struct cache *cache;
	unsigned long long n;
};

/* A gang is bound once its quorum of members is on nodes: the quorum its
 * PodGroup's minMember names, else the one its pods name, else every member
 * that exists, as the gang manager reckons it (gang/admit.c, gang__terms). */
static void count_if_bound(const char *ns, const char *group, void *arg)
{
	struct bound_count *bc = arg;
	struct group_tally t = { 0 };
	struct cache_podgroup pg;
	char buf[K8S_KEY_BUF];
	unsigned quorum;

	cache_group_foreach(bc->cache, ns, group, tally_member, &t);
	quorum = t.pod_quorum ? t.pod_quorum : t.exist;
	if (cache_podgroup_get(bc->cache, ns, group, &pg, buf, sizeof(buf)) == 0 &&
	    pg.min_member > 0)
		quorum = (unsigned)pg.min_member;
	if (quorum > 0 && t.bound >= quorum)
		bc->n++;
}

/* The pod groups whose quorum is bound. Costs the members of every group
 * (the cache's member index), not every pod. */
static unsigned long long gangs_bound(struct cache *c)
{
	struct bound_count bc = { c, 0 };

	cache_groups_foreach(c, count_if_bound, &bc);
	return bc.n;
}

/* ---- metrics --------------------------------------------------------------- */

static void metric(struct strbuf *sb, const char *name, const char *type, const char *help,
		   unsigned long long v)
{
	strbuf_printf(sb, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name, v);
}

/* A counter per verb, one line each. */
static void metric_by_verb(struct strbuf *sb, const char *name, const char *help,
			   const char *const *verbs, const uint64_t *counts)
{
	strbuf_printf(sb, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	for (int i = 0; i < EXT_C_VERBS; i++)
		strbuf_printf(sb, "%s{verb=\"%s\"} %llu\n", name, verbs[i],
			      (unsigned long long)__atomic_load_n(&counts[i], __ATOMIC_RELAXED));
}

/* Each group of metrics below is one function and one line in ext_metrics, in
 * the order /metrics shows them; a new group is added the same way. Every
 * family is declared once, with # HELP and # TYPE, and named as Prometheus
 * wants: base units (seconds, bytes), counters ending in _total
 * (tests/integration/test_promtool.py runs promtool over it). */

static void cache_metrics(struct strbuf *sb, const struct ext_service *svc,
			  const struct cache_readiness *rd)
{
	struct cache_stats st;

	cache_get_stats(svc->cache, &st);
	metric(sb, "troupe_synced", "gauge", "1 once every initial list is applied",
	       cache_is_synced(svc->cache));
	metric(sb, "troupe_ready", "gauge",
	       "1 while /readyz answers 200: synced, the API server reachable, no permission "
	       "missing, and the leader when leader election is on",
	       rd->state == CACHE_READY && !ext_service_is_standby(svc, NULL, 0) &&
		       ext_recover_ready(svc->recover));
	if (svc->lease)
		metric(sb, "troupe_leader", "gauge", "1 while this replica holds the Lease",
		       cache_lease_is_leader(svc->lease));
	metric(sb, "troupe_nodes", "gauge", "Nodes in the cache", st.nodes);
	metric(sb, "troupe_pods", "gauge", "Pods in the cache", st.pods);
	metric(sb, "troupe_pods_holding_gpus", "gauge", "Pods holding GPUs", st.pods_holding);
	metric(sb, "troupe_pod_groups", "gauge", "PodGroups in the cache", st.podgroups);
	metric(sb, "troupe_gpus_allocatable", "gauge", "Allocatable GPUs of known nodes",
	       st.gpus_allocatable);
	metric(sb, "troupe_gpus_held", "gauge", "GPUs held by bound or assumed pods",
	       st.gpus_held);
	metric(sb, "troupe_pods_devices_read_back", "gauge",
	       "Pods whose devices the node agent read back from the kubelet "
	       "(troupe.io/gpu-ids-actual), which troupe counts over its own choice",
	       st.pods_read_back);
	metric(sb, "troupe_pods_devices_read_back_differ", "gauge",
	       "Of those, pods whose containers did not get the devices troupe chose",
	       st.pods_read_back_differ);
}

static void verb_metrics(struct strbuf *sb, const struct ext_service *svc)
{
	static const char *const verbs[EXT_C_VERBS] = { "filter", "prioritize", "bind", "preempt",
							"other" };
	struct ext_counters *c = svc->counters;

	if (!c)
		return;
	metric_by_verb(sb, "troupe_requests_total", "Requests answered, by verb", verbs,
		       c->requests);
	metric_by_verb(sb, "troupe_request_errors_total", "Requests answered with an error", verbs,
		       c->errors);
	strbuf_printf(sb, "# HELP troupe_filter_seconds_total Server-side time in filter "
		      "(divided by the filter count: the mean)\n"
		      "# TYPE troupe_filter_seconds_total counter\n"
		      "troupe_filter_seconds_total %.6f\n",
		      __atomic_load_n(&c->filter_ns_total, __ATOMIC_RELAXED) / 1e9);
	latency_histograms(sb, c, verbs);
}

static void cycle_metrics(struct strbuf *sb, const struct ext_service *svc)
{
	uint64_t used, stale, names;

	if (!svc->cycle)
		return;
	ext_cycle_get_stats(svc->cycle, &used, &stale, &names);
	metric(sb, "troupe_prioritize_from_filter_total", "counter",
	       "Prioritize requests answered from the scores their filter left", used);
	metric(sb, "troupe_prioritize_filter_stale_total", "counter",
	       "Filter scores not used: the cache or the pod's request changed since", stale);
	metric(sb, "troupe_prioritize_names_from_filter_total", "counter",
	       "Node scores prioritize took from its filter instead of computing them", names);
}

static void top_choice_metrics(struct strbuf *sb, const struct ext_service *svc)
{
	uint64_t n[EXT_TOP_CHOICE_OUTCOMES];

	if (!svc->top_choice)
		return;
	ext_top_choice_get_stats(svc->top_choice, n);
	strbuf_puts(sb, "# HELP troupe_bind_top_choice_total GPU pods bound, by whether kube-scheduler "
		    "chose a node troupe's last prioritize ranked first (top), another (other), or "
		    "troupe kept no ranking for the pod (unscored: gang members, skipped prioritize)\n"
		    "# TYPE troupe_bind_top_choice_total counter\n");
	for (int i = 0; i < EXT_TOP_CHOICE_OUTCOMES; i++)
		strbuf_printf(sb, "troupe_bind_top_choice_total{outcome=\"%s\"} %llu\n",
			      ext_top_choice_outcome_names[i], (unsigned long long)n[i]);
}

static void informer_metrics(struct strbuf *sb, const struct ext_service *svc,
			     const struct cache_readiness *rd)
{
	struct cache_informer_stats is;

	if (!svc->informer)
		return;
	cache_informer_get_stats(svc->informer, &is);
	metric(sb, "troupe_watch_events_total", "counter", "Watch events applied", is.events);
	metric(sb, "troupe_lists_total", "counter", "Full lists completed", is.lists);
	metric(sb, "troupe_relists_total", "counter",
	       "Lists caused by an expired resourceVersion (410)", is.relists);
	metric(sb, "troupe_watch_restarts_total", "counter", "Watches re-opened",
	       is.watch_restarts);
	metric(sb, "troupe_api_errors_total", "counter",
	       "Failed API requests (connection, 429, 5xx, ...)", is.errors);
	metric(sb, "troupe_partial_events_total", "counter", "Cut watch events discarded",
	       is.partial_lines);
	metric(sb, "troupe_permission_denials_total", "counter",
	       "Access reviews answering not allowed, and lists or watches refused (403)",
	       is.permission_denials);
	metric(sb, "troupe_permissions_missing", "gauge",
	       "Permissions troupe needs and lacks now (named by /readyz)",
	       (unsigned long long)__builtin_popcount(rd->missing));
}

static void gang_metrics(struct strbuf *sb, const struct ext_service *svc)
{
	struct gang_stats gs;

	if (!svc->gangs)
		return;
	gang_get_stats(svc->gangs, &gs);
	metric(sb, "troupe_gangs_planned_total", "counter", "Gang plans made and reserved",
	       gs.planned);
	metric(sb, "troupe_gangs_refused_total", "counter",
	       "Gang plans refused for lack of capacity", gs.refused);
	metric(sb, "troupe_gangs_deferred_total", "counter",
	       "Gangs told to wait behind a gang earlier in the fair order", gs.deferred);
	metric(sb, "troupe_gangs_expired_total", "counter",
	       "Gang plans rolled back at their deadline", gs.expired);
	metric(sb, "troupe_gangs_released_total", "counter",
	       "Gangs whose held binds were released at quorum", gs.released);
	metric(sb, "troupe_gangs_planned", "gauge", "Gangs with a plan now", gs.active);
	metric(sb, "troupe_gangs_waiting", "gauge", "Gangs waiting for capacity", gs.waiting);
	metric(sb, "troupe_gang_held_sets", "gauge",
	       "Member-sized GPU sets held for a starving gang", gs.held_sets);
	metric(sb, "troupe_gang_entries", "gauge", "Pod groups the gang manager keeps state for",
	       gs.entries);
	metric(sb, "troupe_gang_entries_dropped_total", "counter",
	       "Idle pod-group entries forgotten early to stay under gang.max_entries",
	       gs.entries_dropped);
	metric(sb, "troupe_gang_entries_refused_total", "counter",
	       "Attempts to admit a pod group refused (a member's filter, or the gang "
	       "manager's pass discovering waiting gangs, about once a second): "
	       "gang.max_entries reached with every entry in flight",
	       gs.entries_refused);
}

/* A label's value as the text format wants it: backslash, double quote and
 * line feed escaped (a queue is named by a label of the user's). */
static void put_label_value(struct strbuf *sb, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			strbuf_putc(sb, '\\');
		if (*s == '\n')
			strbuf_puts(sb, "\\n");
		else
			strbuf_putc(sb, *s);
	}
}

/* troupe_gangs{state}: waiting, planned and binding as the gang manager holds
 * its gangs (summed over the queues of gang_queue_list), bound from the
 * cache, so that one is shown without a gang manager too. A gang is in one of
 * them at most, but for the moment its last member's Binding lands (bound,
 * and its plan not yet finished). The manager's idle gangs (members missing,
 * or done) are not shown: troupe_gang_entries counts every gang it keeps.
 * <listed>: the queues <q> could be listed (a gang manager, and memory). */
static void gang_state_metrics(struct strbuf *sb, const struct ext_service *svc, bool listed,
			       const struct gang_queue_view *q, unsigned n)
{
	unsigned long long waiting = 0, planned = 0, binding = 0;

	for (unsigned i = 0; i < n; i++) {
		waiting += q[i].waiting;
		planned += q[i].planned - q[i].binding;
		binding += q[i].binding;
	}
	strbuf_puts(sb, "# HELP troupe_gangs Gangs by state: waiting for capacity, planned (GPUs "
		    "reserved, members arriving), binding (binds parked at the barrier), bound "
		    "(the pod group's quorum is on nodes)\n# TYPE troupe_gangs gauge\n");
	if (listed)
		strbuf_printf(sb, "troupe_gangs{state=\"waiting\"} %llu\n"
			      "troupe_gangs{state=\"planned\"} %llu\n"
			      "troupe_gangs{state=\"binding\"} %llu\n", waiting, planned, binding);
	strbuf_printf(sb, "troupe_gangs{state=\"bound\"} %llu\n", gangs_bound(svc->cache));
}

/* The per-queue gauges, one family each. */
enum queue_field { Q_SHARE, Q_WEIGHT, Q_WAITING, Q_PLANNED, Q_GPUS };

static const struct {
	const char *name, *help;
	enum queue_field field;
} queue_families[] = {
	{ "troupe_queue_dominant_share", "The queue's weighted dominant share: the largest "
	  "share of the ready nodes' GPUs, CPU and memory its pods occupy, divided by its "
	  "weight (the lowest goes first)", Q_SHARE },
	{ "troupe_queue_weight", "The queue's weight (queues: in the config, else its Volcano or "
	  "KAI Queue object's, else 1)", Q_WEIGHT },
	{ "troupe_queue_gangs_waiting", "The queue's gangs waiting for capacity", Q_WAITING },
	{ "troupe_queue_gangs_planned", "The queue's gangs with a plan", Q_PLANNED },
	{ "troupe_queue_gpus", "GPUs the queue's pods hold", Q_GPUS },
};

static double queue_value(const struct gang_queue_view *q, enum queue_field f)
{
	switch (f) {
	case Q_SHARE:
		return q->share;
	case Q_WEIGHT:
		return q->weight;
	case Q_WAITING:
		return q->waiting;
	case Q_PLANNED:
		return q->planned;
	case Q_GPUS:
		return (double)q->gpus;
	}
	return 0;
}

/* The fair-sharing queues (gang_queue_list: those configured, those with
 * pods running, those gangs wait in), one series each; a queue that has none
 * of these any more drops out. */
static void queue_metrics(struct strbuf *sb, const struct gang_queue_view *q, unsigned n)
{
	for (size_t f = 0; f < ARRAY_SIZE(queue_families); f++) {
		const char *name = queue_families[f].name;
		enum queue_field field = queue_families[f].field;

		strbuf_printf(sb, "# HELP %s %s\n# TYPE %s gauge\n", name, queue_families[f].help,
			      name);
		for (unsigned i = 0; i < n; i++) {
			strbuf_printf(sb, "%s{queue=\"", name);
			put_label_value(sb, q[i].name);
			strbuf_printf(sb, "\"} %.9g\n", queue_value(&q[i], field));
		}
	}
}

static void recover_metrics(struct strbuf *sb, const struct ext_service *svc)
{
	struct ext_recover_stats rs;

	if (!svc->recover)
		return;
	ext_recover_get_stats(svc->recover, &rs);
	metric(sb, "troupe_gang_recovery_passes_total", "counter",
	       "Passes looking for gangs left partly bound", rs.passes);
	metric(sb, "troupe_gang_recovered_total", "counter",
	       "Gangs found partly bound that are complete again", rs.completed);
	metric(sb, "troupe_gang_recovery_bindings_total", "counter",
	       "Bindings posted from a partly bound gang's plan and accepted", rs.bindings);
	metric(sb, "troupe_gang_recovery_refused_total", "counter",
	       "Bindings posted from a partly bound gang's plan and refused", rs.refused);
	metric(sb, "troupe_gang_rolled_back_total", "counter",
	       "Partly bound gangs rolled back (gang.partial_rollback_seconds)", rs.rolled_back);
	metric(sb, "troupe_gang_rollback_pods_deleted_total", "counter",
	       "Bound members deleted to roll a gang back", rs.pods_deleted);
}

/* The event recorder's (cache/events.h): absent when Events are off. */
static void events_metrics(struct strbuf *sb, const struct ext_service *svc)
{
	struct cache_events_stats es;

	if (!svc->events)
		return;
	cache_events_get_stats(svc->events, &es);
	metric(sb, "troupe_events_emitted_total", "counter",
	       "Occurrences queued to become Kubernetes Events", es.emitted);
	metric(sb, "troupe_events_posted_total", "counter", "Kubernetes Events created",
	       es.posted);
	metric(sb, "troupe_events_series_updates_total", "counter",
	       "Event series counts written", es.series_updates);
	metric(sb, "troupe_events_failed_total", "counter", "Event writes that failed (logged)",
	       es.failed);
	strbuf_puts(sb, "# HELP troupe_events_dropped_total Occurrences never written, by why\n"
		    "# TYPE troupe_events_dropped_total counter\n");
	for (int d = 0; d < CACHE_EVENTS_DROP_COUNT; d++)
		strbuf_printf(sb, "troupe_events_dropped_total{reason=\"%s\"} %llu\n",
			      cache_events_drop_name((enum cache_events_drop)d),
			      (unsigned long long)es.dropped[d]);
	metric(sb, "troupe_events_queued", "gauge", "Occurrences waiting for the event worker",
	       es.queued);
	metric(sb, "troupe_events_series", "gauge", "Event series the recorder remembers",
	       es.series);
}

/* The PodGroup status writer's (cache/podgroup_status.h): absent when off. */
static void podgroup_status_metrics(struct strbuf *sb, const struct ext_service *svc)
{
	struct cache_pgs_stats ps;

	if (!svc->pgstatus)
		return;
	cache_pgs_get_stats(svc->pgstatus, &ps);
	metric(sb, "troupe_podgroup_status_passes_total", "counter",
	       "Passes of the PodGroup status writer over the pod groups", ps.passes);
	metric(sb, "troupe_podgroup_status_unchanged_total", "counter",
	       "Pod groups looked at whose status had nothing to change", ps.unchanged);
	strbuf_printf(sb, "# HELP troupe_podgroup_status_writes_total PodGroup status writes, by "
		      "outcome (a conflict is read again and retried)\n"
		      "# TYPE troupe_podgroup_status_writes_total counter\n"
		      "troupe_podgroup_status_writes_total{result=\"written\"} %llu\n"
		      "troupe_podgroup_status_writes_total{result=\"conflict\"} %llu\n"
		      "troupe_podgroup_status_writes_total{result=\"gave_up\"} %llu\n"
		      "troupe_podgroup_status_writes_total{result=\"forbidden\"} %llu\n"
		      "troupe_podgroup_status_writes_total{result=\"failed\"} %llu\n",
		      (unsigned long long)ps.written, (unsigned long long)ps.conflicts,
		      (unsigned long long)ps.gave_up, (unsigned long long)ps.forbidden,
		      (unsigned long long)ps.failed);
}

static void connection_metrics(struct strbuf *sb, const struct ext_service *svc)
{
	struct conn_guard_stats cg;

	if (!svc->server)
		return;
	ext_server_guard_stats(svc->server, &cg);
	metric(sb, "troupe_http_connections", "gauge", "Connections the verbs listener keeps open",
	       cg.open);
	metric(sb, "troupe_http_connections_displaced_total", "counter",
	       "Idle connections closed to make room for a new one (slots or a client's "
	       "share full)", cg.displaced);
	metric(sb, "troupe_http_connections_idle_expired_total", "counter",
	       "Connections closed after http.connection_timeout_seconds with no request "
	       "in progress", cg.idle_expired);
	metric(sb, "troupe_http_connections_request_expired_total", "counter",
	       "Connections closed: a request body not in within "
	       "http.request_deadline_seconds", cg.request_expired);
	metric(sb, "troupe_http_connections_refused_total", "counter",
	       "New connections closed at once: every slot was mid-request", cg.refused);
}

static void filter_only_metrics(struct strbuf *sb, const struct ext_service *svc)
{
	struct cache_filter_only_stats fo;

	cache_filter_only_get(svc->cache, &fo);
	metric(sb, "troupe_filter_only_pods", "gauge",
	       "Pods known only from filter calls, occupying nothing", fo.pods);
	metric(sb, "troupe_filter_only_pods_dropped_total", "counter",
	       "Pods known only from filter calls dropped, oldest first, at "
	       "cache.max_filter_only_pods", fo.dropped);
	metric(sb, "troupe_filter_only_pods_refused_total", "counter",
	       "Pods from filter calls not remembered: the cap was reached and none could go",
	       fo.refused);
}

static void topology_metrics(struct strbuf *sb, const struct ext_service *svc)
{
	uint64_t classes, bad;

	if (!svc->registry)
		return;
	placement_registry_stats(svc->registry, &classes, &bad);
	metric(sb, "troupe_topology_classes", "gauge", "Distinct GPU topologies in use", classes);
	metric(sb, "troupe_topology_parse_errors_total", "counter",
	       "Node troupe.io/gpu-topology annotations that could not be read", bad);
}

void ext_metrics(const struct ext_service *svc, struct ext_reply *r)
{
	struct strbuf *sb = &r->body;
	struct gang_queue_view *queues = NULL;
	struct cache_readiness rd;
	unsigned n_queues = 0;
	bool listed;

	ext__readiness_get(svc, &rd);
	cache_metrics(sb, svc, &rd);
	verb_metrics(sb, svc);
	responses_and_build(sb);
	ext_process_metrics(sb);
	cycle_metrics(sb, svc);
	top_choice_metrics(sb, svc);
	informer_metrics(sb, svc, &rd);
	gang_metrics(sb, svc);
	/* One walk of every pod (the queues' shares) and one copy of the gang
	 * table per scrape serve both: on a snapshot of 5,000 nodes, 30,000
	 * pods and 2,500 pod groups about 35 ms of CPU, against 4 ms for the
	 * rest of /metrics (18 ms more for the bound count). */
	listed = svc->gangs && gang_queue_list(svc->gangs, &queues, &n_queues) == 0;
	if (svc->gangs && !listed)
		log_warn("metrics", "no memory for the gangs' and queues' gauges: left out of "
			 "this scrape");
	gang_state_metrics(sb, svc, listed, queues, n_queues);
	queue_metrics(sb, queues, n_queues);
	free(queues);
	recover_metrics(sb, svc);
	events_metrics(sb, svc);
	podgroup_status_metrics(sb, svc);
	connection_metrics(sb, svc);
	filter_only_metrics(sb, svc);
	topology_metrics(sb, svc);
}
