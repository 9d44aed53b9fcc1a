/* Whether a pod may go to a node as kube-scheduler's NodeAffinity and
 * TaintToleration plugins judge it from the pod's spec and the node's labels
 * and taints: spec.nodeSelector, the required node affinity's
 * nodeSelectorTerms (matchExpressions on labels, matchFields on
 * metadata.name), and every NoSchedule or NoExecute taint tolerated. Preempt's
 * gang plan asks it of nodes kube-scheduler did not offer (its candidates are
 * offered), so that the plan does not count a free node the gang's members
 * could never use. Pod affinity and topology spread are not judged here.
 */
#include "extender/node_match.h"

#include "extender/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool in_values(const cJSON *values, const char *v)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, json_list(values))
		if (cJSON_IsString(it) && v && strcmp(it->valuestring, v) == 0)
			return true;
	return false;
}

/* A whole number, as Gt and Lt compare label values. */
static bool whole(const char *s, long long *out)
{
	char *end;

	if (!s || !*s)
		return false;
	errno = 0;
	*out = strtoll(s, &end, 10);
	return !*end && !errno;
}

/* One requirement of a term; <v> is the node's value (NULL: the label is not
 * there). An operator kube-scheduler would refuse matches nothing. */
static bool requirement(const cJSON *req, const char *v)
{
	const char *op = json_str(req, "operator");
	const cJSON *values = json_get(req, "values");
	long long a, b;

	if (!op)
		return false;
	if (strcmp(op, "In") == 0)
		return v && in_values(values, v);
	if (strcmp(op, "NotIn") == 0)
		return !v || !in_values(values, v);
	if (strcmp(op, "Exists") == 0)
		return v != NULL;
	if (strcmp(op, "DoesNotExist") == 0)
		return v == NULL;
	if ((strcmp(op, "Gt") == 0 || strcmp(op, "Lt") == 0) && cJSON_GetArraySize(values) == 1 &&
	    cJSON_IsString(cJSON_GetArrayItem(values, 0)) && whole(v, &a) &&
	    whole(cJSON_GetArrayItem(values, 0)->valuestring, &b))
		return op[0] == 'G' ? a > b : a < b;
	return false;
}

/* A nodeSelectorTerm: every requirement holds (an empty term matches nothing). */
static bool term(const cJSON *t, const struct cache_node *node)
{
	const cJSON *exprs = json_get(t, "matchExpressions"), *fields = json_get(t, "matchFields");
	const cJSON *r;
	bool any = false;

	cJSON_ArrayForEach(r, json_list(exprs)) {
		const char *key = json_str(r, "key");

		any = true;
		if (!key || !requirement(r, cache_node_label(node, key)))
			return false;
	}
	cJSON_ArrayForEach(r, json_list(fields)) {
		const char *key = json_str(r, "key");

		any = true;
		if (!key || strcmp(key, "metadata.name") != 0 || !requirement(r, node->name))
			return false;
	}
	return any;
}

static bool tolerated(const cJSON *tolerations, const struct cache_taint *t)
{
	const cJSON *tol;

	cJSON_ArrayForEach(tol, json_list(tolerations)) {
		const char *key = json_str(tol, "key"), *op = json_str(tol, "operator");
		const char *value = json_str(tol, "value"), *effect = json_str(tol, "effect");
		bool exists = op && strcmp(op, "Exists") == 0;

		if (effect && effect[0] && (!t->effect || strcmp(effect, t->effect) != 0))
			continue;
		if (!key || !key[0]) {
			if (exists)
				return true;    /* an empty key with Exists tolerates every taint */
			continue;
		}
		if (!t->key || strcmp(key, t->key) != 0)
			continue;
		if (exists || strcmp(value ? value : "", t->value ? t->value : "") == 0)
			return true;
	}
	return false;
}

bool ext_pod_may_use_node(const cJSON *pod, const struct cache_node *node)
{
	const cJSON *spec = json_obj(pod, "spec"), *sel = json_obj(spec, "nodeSelector"), *it;
	const cJSON *required = json_obj(json_obj(json_obj(spec, "affinity"), "nodeAffinity"),
					 "requiredDuringSchedulingIgnoredDuringExecution");
	const cJSON *terms = json_get(required, "nodeSelectorTerms");

	cJSON_ArrayForEach(it, sel) {
		const char *v = cache_node_label(node, it->string);

		if (!cJSON_IsString(it) || !v || strcmp(v, it->valuestring) != 0)
			return false;
	}
	if (required) {
		bool any = false;

		cJSON_ArrayForEach(it, json_list(terms))
			if ((any = term(it, node)))
				break;
		if (!any)
			return false;
	}
	for (uint16_t i = 0; i < node->n_taints; i++) {
		const struct cache_taint *t = &node->taints[i];

		if (t->effect && strcmp(t->effect, "PreferNoSchedule") == 0)
			continue;
		if (!tolerated(json_get(spec, "tolerations"), t))
			return false;
	}
	return true;
}
