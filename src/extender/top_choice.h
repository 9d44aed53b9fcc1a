/* top_choice: did kube-scheduler bind a pod where troupe ranked it first?
 *
 * troupe's prioritize answer is one term of kube-scheduler's sum (rank x the
 * extender weight x 10, beside NodeResourcesFit, BalancedAllocation,
 * TaintToleration and the rest), so the node kube-scheduler binds is not
 * always the node troupe ranked best. That is what the extender weight in
 * config/scheduler-config.yaml is tuned against, and it can only be seen at
 * bind: prioritize keeps, per pod, the nodes its last answer ranked highest
 * (by a 64-bit hash of the name, the best EXT_TOP_CHOICE_NODES of them, and
 * the first node ranked 10 by name, for the log), and bind takes them and
 * counts troupe_bind_top_choice_total{outcome}:
 *
 *   top       the bound node is one troupe answered 10
 *   other     troupe ranked another node above it (logged at info: which
 *             node troupe ranked first, and the bound node's rank)
 *   unscored  no prioritize answer is kept for the pod: a gang member (its
 *             plan decides, not a ranking), a pod whose prioritize kube-
 *             scheduler skipped, one evicted from the store by newer pods,
 *             or more nodes tied at 10 than were kept
 *
 * Bounded like cycle.c: EXT_TOP_CHOICE_PODS entries in one array allocated by
 * ext_top_choice_new; the oldest goes when all are taken (a pod whose bind
 * never came). prioritize builds its entry on its own stack, so neither verb
 * allocates.
 *
 * Thread: any; one mutex guards the entries and the counts.
 */
#ifndef TROUPE_EXTENDER_TOP_CHOICE_H
#define TROUPE_EXTENDER_TOP_CHOICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

enum {
	EXT_TOP_CHOICE_PODS = 64,       /* pods whose bind may still come */
	EXT_TOP_CHOICE_NODES = 64,      /* best-ranked nodes kept per pod */
};

/* One prioritize answer's best nodes: built by ext_top_choice_begin/_add. */
struct ext_top_choice_entry {
	char uid[K8S_UID_BUF];
	char first[K8S_NAME_BUF];       /* the first node answered 10; "" when none */
	uint64_t hash[EXT_TOP_CHOICE_NODES];
	uint8_t answer[EXT_TOP_CHOICE_NODES];   /* 0..10, the prioritize answer */
	size_t n, min_at;               /* kept; index of the lowest kept answer */
	unsigned tops;                  /* nodes answered 10, kept or not */
	int dropped;                    /* best answer not kept; -1: every node kept */
};

enum ext_top_choice_outcome {
	EXT_TOP_CHOICE_TOP = 0,
	EXT_TOP_CHOICE_OTHER,
	EXT_TOP_CHOICE_UNSCORED,
	EXT_TOP_CHOICE_OUTCOMES,
};

/* The outcomes' label values, in enum order. */
extern const char *const ext_top_choice_outcome_names[EXT_TOP_CHOICE_OUTCOMES];

/* What bind learnt (for its log line and the tests). */
struct ext_top_choice_result {
	enum ext_top_choice_outcome outcome;
	char first[K8S_NAME_BUF];       /* troupe's first choice; "" when unknown */
	unsigned tops;                  /* how many nodes troupe answered 10 */
	int answer;                     /* troupe's answer for the bound node; -1: not kept */
	int kept_floor;                 /* lowest answer kept (not kept ones are at most this) */
};

struct ext_top_choice;

struct ext_top_choice *ext_top_choice_new(void);
void ext_top_choice_free(struct ext_top_choice *t);

/* Prioritize: start <e> for pod <uid> (a UID too long leaves it unusable:
 * ext_top_choice_put ignores it). */
void ext_top_choice_begin(struct ext_top_choice_entry *e, const char *uid);
/* Prioritize: node <name> (<len> bytes) was answered <answer> (0..10). */
void ext_top_choice_add(struct ext_top_choice_entry *e, const char *name, size_t len,
			unsigned answer);
/* Prioritize: keep <e> for the pod's bind, replacing an older entry of the
 * same pod (its last prioritize counts), else the oldest when all are taken. */
void ext_top_choice_put(struct ext_top_choice *t, const struct ext_top_choice_entry *e);

/* Bind: pod <uid> was bound to <node>: take its entry, count the outcome and
 * describe it in <res> (may be NULL). <t> NULL: nothing counted, unscored. */
enum ext_top_choice_outcome ext_top_choice_bound(struct ext_top_choice *t, const char *uid,
						 const char *node,
						 struct ext_top_choice_result *res);

/* Bind: ext_top_choice_bound for pod <ns>/<name>, and on "other" a log line
 * at info saying which node troupe ranked first and the bound node's rank. */
void ext_top_choice_judge(struct ext_top_choice *t, const char *ns, const char *name,
			  const char *uid, const char *node);

/* The counts by outcome, for /metrics. */
void ext_top_choice_get_stats(struct ext_top_choice *t, uint64_t out[EXT_TOP_CHOICE_OUTCOMES]);

#endif
