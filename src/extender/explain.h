/* explain: why a pod or a gang is where it is, or pending - the answer of
 * GET /debug/explain?pod=NS/NAME (or ?podgroup=NS/NAME) on the ops listener and
 * of `troupe explain` (explain_cli.c).
 *
 * The answer is built from the decisions themselves, not from a second reading
 * of the cluster: every node's verdict is filter's (ext__judge_node, the
 * function filter calls), grouped by placement's own reason code
 * (placement_fit.why); the best nodes' device sets and score terms are
 * placement's (placement_node_choose, placement_score_terms, the configured
 * score policy); a gang's plan is the planner's (gang_plan_make) over every node
 * troupe knows. A unit test holds explain's per-node verdicts to filter's
 * answers over random clusters (tests/unit/extender/test_explain.c).
 *
 * The JSON (camelCase, like /debug/state), documented in docs/reference.md:
 *   {"kind":"pod", "pod":{...}, "request":{...}, "decidedBy":..., "summary":...,
 *    "nodes":{"total":N,"feasible":F,"groups":[{"reason","text","resolvable",
 *    "count","examples":[{"node","message"}]}]}, "scoring":{...}, "best":[...],
 *    "gang":{...}|null, "queue":{...}|null}
 *
 * Thread: any; it reads the cache inside read sections and changes nothing.
 */
#ifndef TROUPE_EXTENDER_EXPLAIN_H
#define TROUPE_EXTENDER_EXPLAIN_H

#include "extender/verbs.h"

enum {
	EXPLAIN_EXAMPLES_DEFAULT = 3,   /* example nodes per reason */
	EXPLAIN_BEST_DEFAULT = 3,       /* best nodes shown with their device set */
	EXPLAIN_BEST_MAX = 100,
	/* examples=N: at most this many per reason (a test asks for every node). */
	EXPLAIN_EXAMPLES_MAX = TROUPE_MAX_NODE_NAMES,
};

/* What to explain and how much of it: the query arguments as given (NULL:
 * absent). Exactly one of pod and podgroup, "NAMESPACE/NAME"; examples and
 * best are decimal counts. */
struct ext_explain_query {
	const char *pod;
	const char *podgroup;
	const char *examples;
	const char *best;
};

/* Answer <q> into <r>: 200 with the explanation; 400 {"error":...,"code":400}
 * for a missing or ill-formed argument (or both pod and podgroup); 404
 * {"error":...,"code":404} when troupe knows no such pod or pod group; 503
 * while the cache is still syncing. */
void ext_explain(const struct ext_service *svc, const struct ext_explain_query *q,
		 struct ext_reply *r);

/* `troupe explain ...` (explain_cli.c): argv from the word "explain" on.
 * Returns the exit status: 0 answered, 1 could not answer (server down, 404),
 * 2 bad usage. */
int ext_explain_main(int argc, char **argv);

#endif
