/* Allocator mode's answer to the kubelet's GetPreferredAllocation: which
 * pod is being admitted, and so which of troupe's choices to give.
 *
 * The request names no pod: only the devices available, those the answer
 * must include, and how many. The pods that may be asking are this node's
 * claims (node_claims_parse): pods bound here, not finished or being
 * deleted, carrying troupe's choice (troupe.io/gpu-ids), whose GPU
 * containers the kubelet has not all given devices yet (PodResources). The
 * rule, which docs/reference.md states for users:
 *
 *   A claim matches a request of <size> devices when one of its GPU
 *   containers asks exactly <size>, and the devices of its choice still
 *   available (the choice less what others hold) number at least <size> and
 *   include every must-include device. Its answer is the must-include
 *   devices, then its choice's other available devices in index order, up
 *   to <size>; for a one-container pod, its whole choice.
 *
 *   One match, or several with the same answer: that answer, which is
 *   troupe's choice. Several matches with different answers: ambiguous. The
 *   oldest pod's answer is given (creationTimestamp, then namespace/name),
 *   as the kubelet admits a batch of pods oldest first; when it is in fact
 *   admitting another, the devices differ from troupe's choice and the
 *   read-back (troupe.io/gpu-ids-actual) corrects troupe's cache.
 *
 *   No match (a pod troupe did not place, or one whose choice was taken by
 *   an ambiguous answer before): the best-connected set of the available
 *   devices by troupe's own placement (placement_choose), keeping clear of
 *   devices other claims are waiting for while enough others are free.
 */
#include "node/node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"
#include "common/limits.h"

static unsigned popcount(uint64_t m)
{
	return (unsigned)__builtin_popcountll(m);
}

/* <must>, then the lowest others of <from> up to <size>. */
static uint64_t fill(uint64_t must, uint64_t from, unsigned size)
{
	uint64_t set = must;

	for (unsigned i = 0; i < 64 && popcount(set) < size; i++)
		if ((from & (1ULL << i)) && !(set & (1ULL << i)))
			set |= 1ULL << i;
	return set;
}

/* Is claim a older than claim b? */
static bool older(const struct node_claim *a, const struct node_claim *b)
{
	int c = strcmp(a->created, b->created);

	if (c)
		return c < 0;
	c = strcmp(a->ns, b->ns);
	return c ? c < 0 : strcmp(a->name, b->name) < 0;
}

static bool awaits(const struct node_claim *c)
{
	unsigned total = 0;

	for (unsigned k = 0; k < c->n_counts; k++)
		total += c->counts[k];
	return popcount(c->held) < total;
}

static bool asks(const struct node_claim *c, unsigned size)
{
	for (unsigned k = 0; k < c->n_counts; k++)
		if (c->counts[k] == size)
			return true;
	return false;
}

/* The best-connected <size> devices of <free> with <must> on <g>. */
static uint64_t best_set(const struct node_gpus *g, uint64_t pool, uint64_t must, unsigned size)
{
	struct placement_topo *t = calloc(1, sizeof(*t));
	struct placement_policy policy = { .kind = PLACEMENT_POLICY_PREFERRED };
	struct placement_choice ch;
	uint64_t set = 0;
	unsigned want = size - popcount(must);

	if (!t)
		return fill(must, pool, size);
	t->n = g->n;
	t->known = true;
	snprintf(t->source, sizeof(t->source), "%s", g->source);
	for (unsigned i = 0; i < g->n; i++) {
		t->numa[i] = (int8_t)(g->gpu[i].numa >= 0 && g->gpu[i].numa < 127 ? g->gpu[i].numa
										  : -1);
		for (unsigned j = 0; j < g->n; j++)
			t->link[i][j] = g->link[i][j];
	}
	if (want == 0)
		set = must;
	else if (placement_choose(t, pool & ~must, want, &policy, &ch) == 0)
		set = must | ch.set;
	else
		set = fill(must, pool, size);
	free(t);
	return set;
}

int node_prefer(const struct node_gpus *g, const struct node_claim *claims, size_t n,
		uint64_t available, uint64_t must, unsigned size, struct node_prefer *out)
{
	uint64_t waited = 0;

	memset(out, 0, sizeof(*out));
	out->claim = -1;
	if (size == 0 || popcount(available | must) < size || (must & ~available) ||
	    popcount(must) > size)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		const struct node_claim *c = &claims[i];
		uint64_t r = c->chosen & available, set;

		if (!awaits(c))
			continue;
		waited |= c->chosen & ~c->held;
		if (!asks(c, size) || popcount(r) < size || (must & ~r))
			continue;
		set = fill(must, r, size);
		out->matches++;
		if (out->claim < 0) {
			out->claim = (int)i;
			out->set = set;
			continue;
		}
		if (set != out->set)
			out->ambiguous = true;
		if (older(c, &claims[out->claim])) {
			out->claim = (int)i;
			out->set = set;
		}
	}
	if (out->claim >= 0)
		return 0;
	/* Nobody's choice fits: the best set, clear of what others await when
	 * enough else is free. */
	if (popcount((available & ~waited) | must) >= size)
		available = (available & ~waited) | must;
	out->set = best_set(g, available, must, size);
	return 0;
}

void node_claims_free(struct node_claim *c)
{
	free(c);
}

/* The count of <resource> a container's limits (else requests) ask; 0 none. */
static unsigned container_count(const cJSON *ctr, const char *resource)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(ctr, "resources");
	const char *keys[] = { "limits", "requests" };

	for (unsigned k = 0; k < 2; k++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(res, keys[k]), resource);
		char *end = NULL;
		long x;

		if (!cJSON_IsString(v))
			continue;
		x = strtol(v->valuestring, &end, 10);
		if (*v->valuestring && !*end && x > 0 && x <= 64)
			return (unsigned)x;
		return 0;
	}
	return 0;
}

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int node_claims_parse(const char *json, size_t len, const char *node, const char *resource,
		      struct node_claim **out, size_t *n, char *err, size_t errlen)
{
	cJSON *doc = cJSON_ParseWithLength(json ? json : "", len);
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(doc, "items"), *pod;
	struct node_claim *c = NULL;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (!cJSON_IsArray(items)) {
		snprintf(err, errlen, "the pod list is not a PodList");
		cJSON_Delete(doc);
		return -EPROTO;
	}
	c = calloc((size_t)cJSON_GetArraySize(items) + 1, sizeof(*c));
	if (!c) {
		cJSON_Delete(doc);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	cJSON_ArrayForEach(pod, items) {
		const char *ns = str_at(pod, "metadata", "namespace");
		const char *name = str_at(pod, "metadata", "name");
		const char *on = str_at(pod, "spec", "nodeName");
		const char *phase = str_at(pod, "status", "phase");
		const char *created = str_at(pod, "metadata", "creationTimestamp");
		const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "annotations");
		const cJSON *ids = cJSON_GetObjectItemCaseSensitive(ann, "troupe.io/gpu-ids");
		const cJSON *ctrs = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(pod, "spec"), "containers"), *ctr;
		struct node_claim *cl = &c[k];
		uint64_t mask;

		if (!ns || !name || !on || strcmp(on, node) != 0 || strlen(ns) >= sizeof(cl->ns) ||
		    strlen(name) >= sizeof(cl->name))
			continue;
		if (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")))
			continue;
		if (cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod,
						     "metadata"), "deletionTimestamp"))
			continue;
		if (!cJSON_IsString(ids) || cache_devices_parse(ids->valuestring, &mask) < 0 ||
		    !mask)
			continue;
		memset(cl, 0, sizeof(*cl));
		snprintf(cl->ns, sizeof(cl->ns), "%s", ns);
		snprintf(cl->name, sizeof(cl->name), "%s", name);
		snprintf(cl->created, sizeof(cl->created), "%s", created ? created : "");
		cl->chosen = mask;
		cJSON_ArrayForEach(ctr, ctrs) {
			unsigned x = container_count(ctr, resource);

			if (x && cl->n_counts < NODE_CLAIM_CONTAINERS)
				cl->counts[cl->n_counts++] = x;
		}
		if (cl->n_counts)
			k++;
	}
	cJSON_Delete(doc);
	*out = c;
	*n = k;
	return 0;
}
