/* What explain.c and explain_gang.c share, and nothing else includes: the
 * node groups, the query's name check and the small JSON writers.
 */
#ifndef TROUPE_EXTENDER_EXPLAIN_INTERNAL_H
#define TROUPE_EXTENDER_EXPLAIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cache/cache.h"
#include "common/strbuf.h"
#include "extender/internal.h"

/* A node's group: placement's reason code (placement_why, PLACEMENT_WHY_FITS
 * for the nodes that fit), or held for a starving gang. */
enum { EXPLAIN_GROUP_HELD = PLACEMENT_WHY_COUNT, EXPLAIN_GROUPS };

int ext__explain_group(const struct ext_node_verdict *v);
/* The group's JSON name ("notEnoughFree"). */
const char *ext__explain_group_key(int g);

/* Split "NAMESPACE/NAME" (the query argument <what>) into <ns>
 * (K8S_NAMESPACE_BUF) and <name> (K8S_NAME_BUF). Returns 0, or -EINVAL with
 * <err> saying what is wrong. */
int ext__explain_parse_key(const char *what, const char *s, char *ns, char *name, char *err,
			   size_t errlen);
/* The pod <ns>/<name> as the cache holds it (the live one of two). Returns 0
 * or -ENOENT. */
int ext__explain_find_pod(const struct ext_service *svc, const char *ns, const char *name,
			  struct cache_pod_info *out, char *uid, size_t uidlen);

/* Make <r> an error answer: <status> and {"error":"<message>","code":<status>}
 * (not the verbs' ExtenderFilterResult form: a person or a script reads it). */
void ext__explain_error(struct ext_reply *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* <s> as a JSON string, or null. */
void ext__explain_put_str(struct strbuf *sb, const char *s);
/* A topology policy as the annotation writes it ("required:NV4"). */
void ext__explain_policy_name(const struct placement_policy *p, char *buf, size_t len);

/* explain_gang.c: the value of "gang" for pod group <ns>/<group>, whose members
 * ask <req> (NULL: find it from a member). */
void ext__explain_put_gang(const struct ext_service *svc, const char *ns, const char *group,
			   const struct placement_request *req, struct strbuf *sb);
/* explain_gang.c: the value of "queue" for <queue> (a pod of <priority>, of
 * gang <ns>/<group> when <ns> is set). */
void ext__explain_put_queue(const struct ext_service *svc, const char *queue, const char *ns,
			    const char *group, int32_t priority, struct strbuf *sb);
/* explain_gang.c: the answer for ?podgroup=<ns>/<name>. */
void ext__explain_podgroup(const struct ext_service *svc, const char *ns, const char *name,
			   struct ext_reply *r);

/* explain_print.c: the human answer for the JSON <json> into <out>. Returns 0,
 * or -1 when <json> is not an explanation. */
int ext__explain_print(FILE *out, const char *json, size_t len);

#endif
