/* explain's human answer: the JSON of GET /debug/explain (explain.h) printed
 * for a person, the same whether it came from a server or was computed here
 * from a snapshot (explain_cli.c). It reads only the JSON, so what a person
 * reads is what a script would get with -o json.
 *
 * A key an older or newer server leaves out is skipped, never an error.
 */
#include "extender/explain_internal.h"

#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/util.h"

static const char *str_or(const cJSON *o, const char *key, const char *def)
{
	const char *s = json_str(o, key);

	return s ? s : def;
}

static double num(const cJSON *o, const char *key)
{
	const cJSON *n = json_get(o, key);

	return cJSON_IsNumber(n) ? n->valuedouble : 0.0;
}

static bool has_num(const cJSON *o, const char *key)
{
	return cJSON_IsNumber(json_get(o, key));
}

static void print_request(FILE *out, const cJSON *j)
{
	const cJSON *pod = json_obj(j, "pod"), *req = json_obj(j, "request");
	const char *node = json_str(pod, "node"), *group = json_str(pod, "podGroup");

	fprintf(out, "Pod %s/%s: %s%s%s", str_or(pod, "namespace", "?"), str_or(pod, "name", "?"),
		str_or(pod, "state", "?"), node ? " on " : "", node ? node : "");
	fprintf(out, " (queue %s, priority %.0f%s%s)\n", str_or(pod, "queue", "-"),
		num(pod, "priority"), group ? ", gang " : "", group ? group : "");
	if (req)
		fprintf(out, "  asks %.0f %s, topology %s\n", num(req, "gpus"),
			str_or(req, "resource", "(no managed GPU)"), str_or(req, "topology", "?"));
	if (json_str(j, "summary"))
		fprintf(out, "  %s\n", json_str(j, "summary"));
}

static void print_nodes(FILE *out, const cJSON *nodes)
{
	const cJSON *g;

	fprintf(out, "\nNodes: %.0f of %.0f can take it now\n", num(nodes, "feasible"),
		num(nodes, "total"));
	cJSON_ArrayForEach(g, json_get(nodes, "groups")) {
		const cJSON *e, *ex = json_get(g, "examples");
		bool fits = strcmp(str_or(g, "reason", ""), "fits") == 0;
		int shown = cJSON_GetArraySize(ex);

		fprintf(out, "  %s: %.0f%s\n", str_or(g, "text", str_or(g, "reason", "?")),
			num(g, "count"),
			cJSON_IsFalse(json_get(g, "resolvable")) ? " (not without a change to the node)"
								  : "");
		cJSON_ArrayForEach(e, ex) {
			if (fits || !json_str(e, "message"))
				fprintf(out, "    %s\n", str_or(e, "node", "?"));
			else
				fprintf(out, "    %s: %s\n", str_or(e, "node", "?"),
					json_str(e, "message"));
		}
		if (num(g, "count") > shown && shown > 0)
			fprintf(out, "    ... and %.0f more\n", num(g, "count") - shown);
	}
}

static void print_best(FILE *out, const cJSON *j)
{
	const cJSON *sc = json_obj(j, "scoring"), *w = json_obj(sc, "weights"), *b;

	if (cJSON_GetArraySize(json_get(j, "best")) == 0)
		return;
	fprintf(out, "\nBest nodes (scoring %s; weights fit %g, packing %g, topology %g, "
		"fragmentation %g):\n", str_or(sc, "policy", "?"), num(w, "fit"), num(w, "packing"),
		num(w, "topology"), num(w, "fragmentation"));
	cJSON_ArrayForEach(b, json_get(j, "best")) {
		const cJSON *t = json_obj(b, "terms");

		fprintf(out, "  %-20s score %2.0f (fine %3.0f)  devices %-16s worst link %-5s",
			str_or(b, "node", "?"), num(b, "score"), num(b, "fineScore"),
			str_or(b, "devices", "-"), str_or(b, "worstLink", "-"));
		if (t)
			fprintf(out, "  fit %.2f packing %.2f topology %.2f fragmentation %.2f",
				num(t, "fit"), num(t, "packing"), num(t, "topology"),
				num(t, "fragmentation"));
		fprintf(out, "\n");
	}
}

/* <first>: the answer's first lines (a pod group's), so no blank line before. */
static void print_gang(FILE *out, const cJSON *g, bool first)
{
	const cJSON *plan = json_obj(g, "planNow"), *cd = json_obj(g, "closestDomain");
	const cJSON *m, *s, *view = json_obj(g, "manager");

	fprintf(out, "%sGang %s/%s: %.0f members of quorum %.0f (from %s), %.0f bound", first ? "" : "\n",
		str_or(g, "namespace", "?"), str_or(g, "name", "?"), num(g, "members"), num(g, "quorum"),
		str_or(g, "quorumFrom", "?"), num(g, "bound"));
	if (num(g, "timeoutSeconds") > 0)
		fprintf(out, "; timeout %.0fs", num(g, "timeoutSeconds"));
	if (cJSON_IsFalse(json_get(g, "podGroupKnown")))
		fprintf(out, " (no PodGroup object)");
	else if (json_str(g, "podGroupApi"))
		fprintf(out, " (PodGroup %s%s%s)", json_str(g, "podGroupApi"),
			json_str(g, "podGroupQueue") ? ", queue " : "",
			json_str(g, "podGroupQueue") ? json_str(g, "podGroupQueue") : "");
	fprintf(out, "\n");
	if (!view && cJSON_IsTrue(json_get(g, "managed")))
		fprintf(out, "  the gang manager keeps no state for it (no member filtered yet, "
			"or forgotten while idle)\n");
	if (view) {
		fprintf(out, "  state %s", str_or(view, "state", "?"));
		if (has_num(view, "waitingSeconds") && num(view, "waitingSeconds") > 0)
			fprintf(out, ", waiting %.0fs", num(view, "waitingSeconds"));
		if (has_num(view, "fairPosition") && num(view, "fairPosition") > 0)
			fprintf(out, ", position %.0f in the fair order", num(view, "fairPosition"));
		if (num(view, "holds") > 0)
			fprintf(out, ", %.0f node(s) held for it", num(view, "holds"));
		fprintf(out, "\n");
		if (json_str(view, "reason") && *json_str(view, "reason"))
			fprintf(out, "  last attempt: %s\n", json_str(view, "reason"));
		if (cJSON_GetArraySize(json_get(view, "plan")) > 0) {
			fprintf(out, "  its plan:\n");
			cJSON_ArrayForEach(s, json_get(view, "plan"))
				fprintf(out, "    %-20s devices %-16s %s\n", str_or(s, "node", "?"),
					str_or(s, "devices", "-"),
					*str_or(s, "member", "") ? str_or(s, "member", "") : "(open)");
		}
	}
	cJSON_ArrayForEach(m, json_get(g, "membersList"))
		fprintf(out, "    member %-28s %-8s %s\n", str_or(m, "name", "?"),
			str_or(m, "state", "?"), str_or(m, "node", ""));
	if (plan && cJSON_IsTrue(json_get(plan, "possible"))) {
		const char *key = json_str(plan, "levelKey");

		fprintf(out, "  a plan now for %.0f members: %.0f nodes", num(plan, "members"),
			num(plan, "nodesUsed"));
		if (key)
			fprintf(out, " in %s=%s", key, str_or(plan, "domain", "?"));
		else
			fprintf(out, " (no common network domain)");
		fprintf(out, "\n");
		cJSON_ArrayForEach(s, json_get(plan, "slots"))
			fprintf(out, "    %-20s devices %s\n", str_or(s, "node", "?"),
				str_or(s, "devices", "-"));
	} else if (plan) {
		fprintf(out, "  no plan now for %.0f members: %s\n", num(plan, "members"),
			str_or(plan, "why", "?"));
	}
	if (plan && json_str(plan, "requiredKey"))
		fprintf(out, "  its pods require one %s domain (troupe.io/gang-topology)\n",
			json_str(plan, "requiredKey"));
	if (cd)
		fprintf(out, "  closest %s domain: %s, holds %.0f of %.0f members (lacks %.0f)\n",
			str_or(cd, "levelKey", "?"), str_or(cd, "domain", "?"), num(cd, "holds"),
			num(cd, "needs"), num(cd, "lacks"));
}

static void print_queue(FILE *out, const cJSON *q)
{
	const cJSON *g;

	fprintf(out, "\nQueue %s: weighted dominant share %.3f", str_or(q, "name", "?"),
		num(q, "share"));
	if (has_num(q, "weight"))
		fprintf(out, ", weight %g (%s)", num(q, "weight"), str_or(q, "weightFrom", "?"));
	if (has_num(q, "waitingGangs"))
		fprintf(out, ", %.0f gangs waiting, %.0f planned", num(q, "waitingGangs"),
			num(q, "plannedGangs"));
	fprintf(out, "\n");
	cJSON_ArrayForEach(g, json_get(q, "starvingGangs"))
		fprintf(out, "  gang %s (priority %.0f, queue %s) holds %.0f set(s) on %.0f node(s)%s\n",
			str_or(g, "gang", "?"), num(g, "priority"), str_or(g, "queue", "?"),
			num(g, "holds"), num(g, "heldNodes"),
			cJSON_IsTrue(json_get(g, "refusesThisPod")) ? ": they are refused to this pod"
								    : "");
}

int ext__explain_print(FILE *out, const char *json, size_t len)
{
	cJSON *j = cJSON_ParseWithLength(json, len);
	const cJSON *v;

	if (!j || !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return -1;
	}
	if (strcmp(str_or(j, "kind", ""), "pod") == 0) {
		print_request(out, j);
		if ((v = json_obj(j, "nodes")))
			print_nodes(out, v);
		print_best(out, j);
	}
	if ((v = json_obj(j, "gang")))
		print_gang(out, v, strcmp(str_or(j, "kind", ""), "pod") != 0);
	if ((v = json_obj(j, "queue")))
		print_queue(out, v);
	cJSON_Delete(j);
	return 0;
}
