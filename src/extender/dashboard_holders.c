/* Who holds each node's GPUs, for the dashboard (dashboard_holders.h): one
 * walk of the cache's pods, each pod or reservation holding GPUs filed under
 * its node with its holder, deduplicated by name: the pod itself; its pod
 * group for a gang's member (so a gang is one colour); the gang its key
 * names for a reservation (a planned slot) or a hold (capacity kept for a
 * starving gang).
 */
#include "extender/dashboard_holders.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

const char *const ext__dash_owner_kinds[] = { "pod", "gang", "planned", "held" };

/* A reservation's key names its gang: "gang-reservation/<ns>/<name>/..." or
 * "gang-hold/<ns>/<name>/..." (gang/admit.c, gang/fair.c). Writes "<ns>/<name>"
 * into <out>; false when <uid> is no such key. */
static bool reservation_gang(const char *uid, enum owner_kind *kind, char *out, size_t len)
{
	static const struct {
		const char *prefix;
		enum owner_kind kind;
	} forms[] = { { "gang-reservation/", OWN_PLAN }, { "gang-hold/", OWN_HOLD } };

	for (size_t i = 0; i < ARRAY_SIZE(forms); i++) {
		size_t plen = strlen(forms[i].prefix);
		const char *s = uid + plen, *slash, *end;

		if (strncmp(uid, forms[i].prefix, plen) != 0)
			continue;
		slash = strchr(s, '/');
		end = slash ? strchr(slash + 1, '/') : NULL;
		if (!end || (size_t)(end - s) >= len)
			return false;
		memcpy(out, s, (size_t)(end - s));
		out[end - s] = '\0';
		*kind = forms[i].kind;
		return true;
	}
	return false;
}

static struct owner *owner_get(struct holders *h, enum owner_kind kind, const char *ns_name,
			       const char *queue)
{
	char key[OWNER_KEY_BUF];
	size_t qlen = strlen(queue);
	struct owner *o;
	int n = snprintf(key, sizeof(key), "%c:%s", "pgrh"[kind], ns_name);

	if (n < 0 || (size_t)n >= sizeof(key))
		return NULL;
	o = strmap_get(&h->owners, key, (size_t)n);
	if (o)
		return o;
	o = malloc(sizeof(*o) + (size_t)n + 1 + qlen + 1);
	if (!o)
		return NULL;
	o->kind = kind;
	o->gpus = 0;
	o->out = -1;
	memcpy(o->key, key, (size_t)n + 1);
	o->ns_name = o->key + 2;
	memcpy(o->key + n + 1, queue, qlen + 1);
	o->queue = o->key + n + 1;
	o->json = NULL;
	o->json_len = 0;
	if (strmap_put(&h->owners, o->key, (size_t)n, o, NULL) < 0) {
		free(o);
		return NULL;
	}
	return o;
}

static struct node_holdings *node_holdings_get(struct holders *h, const char *node)
{
	size_t len = strlen(node);
	struct node_holdings *nh = strmap_get(&h->by_node, node, len);

	if (nh)
		return nh;
	nh = calloc(1, sizeof(*nh) + len + 1);
	if (!nh)
		return NULL;
	nh->node = (char *)(nh + 1);
	memcpy(nh->node, node, len + 1);
	if (strmap_put(&h->by_node, nh->node, len, nh, NULL) < 0) {
		free(nh);
		return NULL;
	}
	return nh;
}

/* cache_pod_foreach: a pod or reservation occupying GPUs, under its holder. */
static void collect_pod(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct holders *h = arg;
	char ns_name[K8S_KEY_BUF];
	enum owner_kind kind = OWN_POD;
	struct node_holdings *nh;
	struct holding *hd;
	struct owner *o;

	if (h->failed || !p->node[0] || (!p->devices && !p->unattributed))
		return;
	if (p->reservation) {
		if (!reservation_gang(uid, &kind, ns_name, sizeof(ns_name)))
			snprintf(ns_name, sizeof(ns_name), "%s", uid);
	} else if (p->group[0]) {
		kind = OWN_GANG;
		snprintf(ns_name, sizeof(ns_name), "%s/%s", p->ns, p->group);
	} else {
		snprintf(ns_name, sizeof(ns_name), "%s/%s", p->ns, p->name);
	}
	o = owner_get(h, kind, ns_name, p->queue);
	nh = o ? node_holdings_get(h, p->node) : NULL;
	hd = nh ? calloc(1, sizeof(*hd)) : NULL;
	if (!hd) {
		h->failed = true;
		return;
	}
	hd->owner = o;
	hd->devices = p->devices;
	hd->unattributed = p->unattributed;
	hd->next = nh->first;
	nh->first = hd;
	o->gpus += (unsigned)__builtin_popcountll(p->devices) + p->unattributed;
}

void ext__dash_holders_fini(struct holders *h)
{
	size_t pos = 0;
	const char *key;
	void *v;

	while (strmap_next(&h->by_node, &pos, &key, &v)) {
		struct node_holdings *nh = v;

		for (struct holding *hd = nh->first, *next; hd; hd = next) {
			next = hd->next;
			free(hd);
		}
		free(nh);
	}
	pos = 0;
	while (strmap_next(&h->owners, &pos, &key, &v)) {
		free(((struct owner *)v)->json);
		free(v);
	}
	strmap_fini(&h->by_node);
	strmap_fini(&h->owners);
}

void ext__dash_holders_collect(struct cache *c, struct holders *h)
{
	strmap_init(&h->owners);
	strmap_init(&h->by_node);
	cache_pod_foreach(c, collect_pod, h);
}
