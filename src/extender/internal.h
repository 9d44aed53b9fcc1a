/* What the verb files share with each other and with nothing else: the reply's
 * error form, reading the request's pod, walking the request's nodes, and the
 * pod as a gang member. verbs.h is the public contract; this header is private
 * to src/extender (tests/check_includes.py holds it there).
 *
 * walk_nodes and next_item are static inline on purpose: they are the filter
 * and prioritize hot path (bench/bench_verbs), and kept inline they let the
 * compiler call each verb's per-node callback directly, as it did when the
 * verbs shared one file.
 */
#ifndef TROUPE_EXTENDER_INTERNAL_H
#define TROUPE_EXTENDER_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"
#include "common/limits.h"
#include "common/util.h"
#include "extender/codec.h"
#include "extender/verbs.h"
#include "gang/gang.h"
#include "placement/placement.h"

enum {
	/* An error reply's message: a refusal or failure line with a pod's and a
	 * node's names in it, so longer than one TROUPE_MESSAGE_BUF line. Longer
	 * text is cut. */
	EXT_REPLY_ERROR_BUF = 512,
	/* Why a request could not be read: the codec's and the cache's parse
	 * errors (CACHE_ERR_LEN). */
	EXT_REQUEST_ERR_BUF = CACHE_ERR_LEN,
	/* A gang manager's filter answer (the gang, its plan's domain and counts),
	 * which becomes the reply's Error as it is. */
	EXT_GANG_REASON_BUF = 640,
	/* A device list as cache_node_devices_format writes it: 64 devices
	 * ("0,1,...,63") take 182 bytes, 64 replica slots at most about 320
	 * ("0:0,...,63:0"). */
	EXT_DEVICE_IDS_BUF = CACHE_DEVICES_BUF,
	/* A link level's name as placement_link_name writes it ("NV12", "SYS";
	 * it needs at least 8). */
	EXT_LINK_NAME_BUF = 16,
	/* The devices' UUIDs as cache_node_uuids writes them, comma-separated
	 * ("GPU-" and 36 characters each, and "::<replica>" for a slot): room for
	 * 64 slots. */
	EXT_DEVICE_UUIDS_BUF = 3072,
};

/* Make <r> an error answer: <status> and {"Error":"<message>"}. */
void ext__reply_error(struct ext_reply *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The same, the message formatted from <fmt> and <ap> and written into the
 * body by <encode> with <status>: what ext__reply_error and the explain API's
 * own error form (ext__explain_error) share. */
void ext__reply_verror(struct ext_reply *r, unsigned status,
		       void (*encode)(struct strbuf *body, const char *msg, unsigned status),
		       const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

/* Parse the request's pod, its demand and its topology policy into <req>. On
 * failure fill <r> (an error naming <verb>) and return NULL. The caller frees
 * the pod. With <fault> (room for EXT_REPLY_ERROR_BUF), a pod that parses but
 * whose own spec is wrong (an invalid GPU request, an unknown topology
 * policy) leaves <r> alone and says why in <fault> instead: filter answers
 * that as every node unresolvable, since no node can ever take the pod as it
 * is, and kube-scheduler would otherwise retry it as its own error. */
struct cache_pod *ext__request_pod(const struct ext_service *svc, const struct ext_args *a,
				   const char *verb, struct ext_reply *r,
				   struct placement_request *req, char *fault);

/* A node object from a full-Nodes request, as a view: the request's object
 * decides capacity and state; the topology class is the watched node's (derived
 * on the writer, valid for this read section); usage is the cache's. Returns
 * the parsed node (the caller frees it), or NULL when it does not parse.
 * Inside a cache read section. */
struct cache_node *ext__request_node_view(const struct ext_service *svc, const cJSON *it,
					  struct cache_node_view *v);

/* ---- One node's verdict for a single pod ------------------------------------ */

struct ext_node_verdict {
	struct placement_fit fit;       /* placement's verdict, or the hold's */
	bool held;                      /* refused: its freed GPUs are held for a starving gang */
	char note[TROUPE_MESSAGE_BUF];  /* with held: why, naming the gang */
};

/* filter.c: the verdict filter gives a single pod (not a gang member) of
 * <priority> asking <req> on node <name>: <view>, or NULL when troupe cannot
 * judge it (<unusable> says why, NULL: it does not know the node). Inside a
 * cache read section. Filter and explain.c both ask it, so that explain's
 * answer is filter's. */
void ext__judge_node(const struct ext_service *svc, const char *name,
		     const struct cache_node_view *view, const char *unusable, int32_t priority,
		     const struct placement_request *req, struct ext_node_verdict *out);

/* ---- Walking the request's nodes ------------------------------------------ */

/* One node of a request, as the per-node callback sees it. */
struct node_ref {
	const char *name;
	size_t len;
	size_t index;                           /* in the request */
	const cJSON *object;                    /* full mode: the request's node */
	const struct cache_node_view *view;     /* NULL: troupe cannot judge it */
	const char *unusable;                   /* why view is NULL (full mode) */
};

typedef void (*node_fn)(const struct node_ref *ref, void *arg);

/* Call <fn> for every node of the request, in request order, inside one cache
 * read section: names are looked up in the store (nodeCacheCapable: true), or
 * node objects are parsed from the request and paired with the store's usage
 * for that name (nodeCacheCapable: false, where the request's objects are
 * authoritative for that call). No lock is taken on the node path. */
static inline void ext__walk_nodes(const struct ext_service *svc, const struct ext_args *a,
				   node_fn fn, void *arg)
{
	const cJSON *it;

	cache_read_begin(svc->cache);
	if (!a->full_nodes) {
		/* In batches: look a batch's nodes up together (their memory
		 * fetches overlap; 5,000 nodes do not fit in cache), then
		 * evaluate them. */
		for (size_t x = 0; x < a->n_nodes; x += CACHE_LOOKUP_BATCH) {
			struct cache_node_view v[CACHE_LOOKUP_BATCH];
			bool found[CACHE_LOOKUP_BATCH];
			size_t m = a->n_nodes - x < CACHE_LOOKUP_BATCH ? a->n_nodes - x
								      : CACHE_LOOKUP_BATCH;

			cache_node_lookup_many(svc->cache, &a->names[x], m, v, found);
			for (size_t j = 0; j < m; j++) {
				struct node_ref ref = { a->names[x + j].s, a->names[x + j].len,
							x + j, NULL, found[j] ? &v[j] : NULL, NULL };

				fn(&ref, arg);
			}
		}
	} else {
		size_t x = 0;

		cJSON_ArrayForEach(it, a->node_items) {
			struct cache_node_view v = { 0 };
			struct cache_node *node = ext__request_node_view(svc, it, &v);
			struct node_ref ref = { "", 0, x, it, NULL,
						"troupe: node object has no name" };

			if (node) {
				ref.name = node->name;
				ref.len = strlen(node->name);
				ref.view = &v;
			}
			fn(&ref, arg);
			cache_node_free(node);
			x++;
		}
	}
	cache_read_end(svc->cache);
}

/* The request's nodes one by one: the object (full mode) after <it>, or NULL. */
static inline const cJSON *ext__next_item(const struct ext_args *a, const cJSON *it)
{
	if (!a->full_nodes)
		return NULL;
	return it ? it->next : (a->node_items ? a->node_items->child : NULL);
}

/* The name of the request's node <x>: <it>'s metadata.name in full mode (NULL
 * when it has none), else the name sent. */
static inline const char *ext__item_name(const struct ext_args *a, size_t x, const cJSON *it)
{
	return it ? json_str(json_obj(it, "metadata"), "name") : a->names[x].s;
}

/* ---- The pod as a gang member ------------------------------------------------ */

/* The one construction of a struct gang_member, from a parsed pod (filter,
 * prioritize) or from what the cache holds for it (bind). required_key stays
 * NULL: the caller that needs it parses troupe.io/gang-topology (filter
 * reports a bad value; prioritize's slot lookup does not use it). */
static inline struct gang_member ext__gang_member(const char *uid, const char *ns,
						  const char *name, const char *group,
						  uint32_t pod_min_member,
						  const struct placement_request *req,
						  int32_t priority, const char *queue,
						  const char *pinned)
{
	return (struct gang_member){ uid, ns, name, group, pod_min_member, *req, NULL, priority,
				     queue, pinned && pinned[0] ? pinned : NULL };
}

/* bind.c: the Binding's annotations (JSON, the caller frees it; NULL without
 * memory) for <devices> on <node>, with a gang's <plan> record or NULL; the
 * device list as written into <ids>. */
char *ext__binding_annotations(const struct ext_service *svc, const char *node,
			       uint64_t devices, const char *plan, char *ids, size_t idslen);
/* bind.c: how long to wait before posting a refused Binding again, the one
 * retry policy of a gang member's bind and of recovery: 200 ms doubling to
 * 2 s (<attempt>: posts so far, minus one), or the server's Retry-After when
 * longer, and never past <until_ns> (util_now_ns' clock; one last post just
 * before it). -1: do not post again (<result> says the pod is bound, gone or
 * bound elsewhere, troupe is stopping, or no time is left). */
int ext__bind_retry_delay_ms(int result, unsigned attempt, unsigned retry_after_ms,
			     uint64_t until_ns);
/* bind.c: whether <node> can take pod <info> (known, Ready, not cordoned, has
 * its GPU kind). Returns 0, or -EPERM with <why>. */
int ext__bind_check_node(const struct ext_service *svc, const struct cache_pod_info *info,
			 const char *node, char *why, size_t len);

/* views.c: every node's view, in one read section the caller holds (its
 * cache_read_begin/end). Returns 0, or -ENOMEM (and no views). */
struct ext_views {
	struct cache_node_view *v;
	size_t n, cap;
	bool oom;
};
int ext__views_collect(const struct ext_service *svc, struct ext_views *vs);
void ext__views_fini(struct ext_views *vs);
/* views.c: the levels a gang plans over: gang.levels (or the default), held
 * inside the domain a member's troupe.io/gang-topology requires (<required>
 * is the storage; <key> receives the required label key or NULL; a value
 * that does not parse is no requirement). */
const struct gang_levels *ext__gang_levels(const struct ext_service *svc, const char *topology,
					   struct gang_levels *required, const char **key);

/* observe.c: the informer's readiness, or a snapshot's (ready once loaded). */
void ext__readiness_get(const struct ext_service *svc, struct cache_readiness *out);

static inline struct gang_member ext__member_of(const struct cache_pod *pod,
						const struct placement_request *req)
{
	return ext__gang_member(pod->uid, pod->ns, pod->name, pod->group, pod->min_member, req,
				pod->priority, pod->queue, pod->pinned);
}

#endif
