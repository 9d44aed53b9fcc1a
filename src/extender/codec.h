/* The extender wire codec: kube-scheduler's extender/v1 types in, troupe's
 * answers out. Key names are Go field names (the types have no json tags):
 * Pod, Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error, Host,
 * Score, PodName, PodNamespace, PodUID, Node, NodeNameToVictims,
 * NodeNameToMetaVictims, Pods, NumPDBViolations, UID. They are matched exactly.
 */
#ifndef TROUPE_EXTENDER_CODEC_H
#define TROUPE_EXTENDER_CODEC_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"
#include "common/strbuf.h"

/* Node names of a request are struct cache_name, here also NUL-terminated. */

/* ExtenderArgs (filter and prioritize). */
struct ext_args {
	cJSON *root;                    /* owns the cJSON below */
	const cJSON *pod;               /* the Pod object */
	const cJSON *node_items;        /* Nodes.items (full mode), or NULL */
	struct cache_name *names;         /* NodeNames (names mode): n_nodes entries (owned), or
					 * NULL */
	bool full_nodes;                /* nodeCacheCapable: false */
	size_t n_nodes;
	/* NodeNames read straight from the body: the names' bytes (owned). */
	char *name_bytes;
	/* Full mode, after ext_args_find_item_texts: each item's exact text in
	 * the body (valid while the body is), so a passing node is echoed as
	 * sent, not printed again; NULL when not looked for or not found (then
	 * cJSON prints them). */
	struct cache_name *item_text;
	/* Some key of the body was given twice (the last one was kept). */
	bool dup_keys;
};

/* Decode ExtenderArgs. Returns 0, or -EINVAL with a message in <err> naming what
 * is wrong. The caller calls ext_args_fini in either case. */
int ext_args_decode(const char *body, size_t len, struct ext_args *out, char *err,
		    size_t errlen);
/* Full mode: locate each node item's text in <body> (what was decoded), for
 * filter's echo. Only filter needs it, so decode does not pay for it. */
void ext_args_find_item_texts(struct ext_args *a, const char *body, size_t len);
void ext_args_fini(struct ext_args *a);

/* ExtenderBindingArgs. Strings point into root. */
struct ext_bind_args {
	cJSON *root;
	const char *pod_name;
	const char *pod_namespace;
	const char *pod_uid;
	const char *node;
};

int ext_bind_args_decode(const char *body, size_t len, struct ext_bind_args *out, char *err,
			 size_t errlen);
void ext_bind_args_fini(struct ext_bind_args *a);

/* ExtenderPreemptionArgs: the candidate victims, as node name -> pod UIDs. */
int ext_preempt_decode(const char *body, size_t len, cJSON **root, const cJSON **pod,
		       const cJSON **meta_victims, const cJSON **full_victims, char *err,
		       size_t errlen);

/* The parts of an ExtenderFilterResult being built: each buffer holds the
 * comma-separated members of one collection, without brackets. */
struct ext_filter_out {
	struct strbuf pass;             /* names ("a","b") or node objects */
	struct strbuf failed;           /* "name":"reason" pairs */
	struct strbuf unresolvable;     /* "name":"reason" pairs */
	size_t n_pass, n_failed, n_unresolvable;
};

void ext_filter_out_init(struct ext_filter_out *f);
void ext_filter_out_fini(struct ext_filter_out *f);
void ext_filter_out_pass_name(struct ext_filter_out *f, const char *name, size_t len);
/* Append a node object exactly as the request carried it. */
/* A passing node object: its request text <raw> as it is when given (NULL:
 * print <node>). */
void ext_filter_out_pass_object(struct ext_filter_out *f, const cJSON *node,
				const struct cache_name *raw);
void ext_filter_out_fail(struct ext_filter_out *f, bool unresolvable, const char *name,
			 size_t len, const char *reason);
/* Write the whole ExtenderFilterResult into <out>. */
void ext_filter_out_encode(const struct ext_filter_out *f, bool full_nodes, struct strbuf *out);

/* {"Error":"<msg>"} with the other filter/bind fields present and null, which
 * both ExtenderFilterResult and ExtenderBindingResult decode. */
void ext_encode_error(struct strbuf *out, const char *msg);

#endif
