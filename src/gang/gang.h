/* gang: pod groups. The whole-gang planner (plan.c, a pure function placing
 * every member at once across network domains), and the manager: its table,
 * lifecycle and expiry (manager.c), admission at filter with reservations
 * (admit.c), the bind barrier where members' binds are parked until the quorum
 * (barrier.c), and the fair order between gangs with capacity held for a
 * starving one (fair.c, held_nodes.c). Which pod group a pod belongs to is the
 * cache's rule (cache_pod_group_name).
 *
 * Thread: any, as each function says.
 */
#ifndef TROUPE_GANG_GANG_H
#define TROUPE_GANG_GANG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "placement/placement.h"

/* ---- Planning a whole gang ---------------------------------------------------- */

enum { GANG_MAX_LEVELS = 8, GANG_MAX_KEYS = 4 };

/* A network-domain label key or value as troupe keeps it: its own limit (the
 * config refuses longer keys), not an API one. */
enum { GANG_LABEL_BUF = 128 };

/* Network-domain levels, coarse to fine; each level is named by the first of
 * its label keys a node carries. */
struct gang_levels {
	unsigned n;
	const char *keys[GANG_MAX_LEVELS][GANG_MAX_KEYS];       /* NULL-terminated rows */
	bool strict;                    /* a level-0 domain is required: no cluster-wide
					 * fallback (gang_levels_required) */
};

/* The levels of a gang whose pods ask troupe.io/gang-topology required:<key>:
 * <key> as level 0, required (strict), then the levels of <lv> finer than the
 * one <key> names, so the plan still takes the tightest rack or clique inside
 * the required spine; just <key> when <lv> has no level with that key. <out>
 * points into <lv> and <key>. */
void gang_levels_required(const struct gang_levels *lv, const char *key,
			  struct gang_levels *out);

/* Node <n>'s domain at <level> of <lv>: the value of the level's first key
 * the node has a non-empty label for, NULL when none. The planner's rule; the
 * dashboard and explain group nodes by it too. */
const char *gang_domain_of(const struct cache_node *n, const struct gang_levels *lv,
			   unsigned level);

/* troupe's default levels: zone; datacenter/tier-3; spine/tier-2; block/tier-1;
 * NVLink domain (topograph's accelerator labels, GFD's nvidia.com/gpu.clique). */
extern const struct gang_levels gang_default_levels;

/* Members asking the same: <count> of them, each asking <req>; pinned to one
 * node or not. */
enum { GANG_MAX_NEEDS = 8 };
struct gang_need {
	struct placement_request req;
	unsigned count;
	/* Members each pinned to one node by their spec.nodeSelector (Kueue's
	 * topology-aware scheduling pins every pod so): NULL when not pinned
	 * (they may go to any offered candidate), else how many of them each
	 * candidate must take, by candidate index (count in all). */
	const uint16_t *pins;
};

/* One member's place: a node (index into the candidates), its devices, and
 * which need it is for (index into the needs). */
struct gang_slot {
	unsigned node;
	uint64_t devices;
	unsigned need;
};

struct gang_plan {
	unsigned n_slots;
	struct gang_slot *slots;        /* n_slots entries; owned */
	int level;                      /* the domain level used; -1: no common domain */
	char domain[GANG_LABEL_BUF];               /* the domain's label value ("" at level -1) */
	unsigned nodes_used;
};

/* Plan a gang whose members ask <needs> (n_needs ≤ GANG_MAX_NEEDS kinds of
 * request, each with a count) over the candidate nodes <views> (n of them: the
 * nodes kube-scheduler offered): the finest domain level that can hold the
 * whole gang, within it the domain needing the fewest nodes, the nodes taking
 * the most GPUs first, and on each node the best device sets from
 * placement_node_choose, largest need first. Returns 0 with <out> filled (free
 * with gang_plan_fini), or -ENOSPC with a reason a person can act on in <why>,
 * or -ENOMEM. Pure: reads its arguments only. Thread: any, inside the caller's
 * cache read section. */
int gang_plan_mixed(const struct cache_node_view *views, unsigned n,
		    const struct gang_need *needs, unsigned n_needs,
		    const struct gang_levels *levels, struct gang_plan *out, char *why,
		    size_t whylen);
/* gang_plan_mixed over <n> candidates of which only the first <n_offered> are
 * offered to the needs not pinned; the others are there for pinned needs
 * (gang_need.pins) alone, and a pinned need goes only where its pins say. */
int gang_plan_pinned(const struct cache_node_view *views, unsigned n, unsigned n_offered,
		     const struct gang_need *needs, unsigned n_needs,
		     const struct gang_levels *levels, struct gang_plan *out, char *why,
		     size_t whylen);
/* gang_plan_mixed for <members> members all asking <req>. */
int gang_plan_make(const struct cache_node_view *views, unsigned n, unsigned members,
		   const struct placement_request *req, const struct gang_levels *levels,
		   struct gang_plan *out, char *why, size_t whylen);
void gang_plan_fini(struct gang_plan *p);

/* ---- The gang manager: admission, reservations, the bind barrier, expiry ---- */

struct gang_manager;

/* Configured queues: how many, and a queue name's room in the config (troupe's
 * own limit; the config refuses longer names). */
enum { GANG_MAX_QUEUES = 64, GANG_QUEUE_NAME_BUF = 64 };

/* What the manager tells of a gang's progress, for Kubernetes Events (the
 * extender turns each into one on the PodGroup, and on the member when one is
 * named). */
enum gang_note_kind {
	GANG_NOTE_PLANNED,              /* a plan reserved: its domain and nodes */
	GANG_NOTE_WAITING,              /* waiting for members: how many of the quorum exist */
	GANG_NOTE_TIMED_OUT,            /* reserved, and the plan expired before the quorum */
	GANG_NOTE_BOUND,                /* quorum reached: its parked binds are posted */
	GANG_NOTE_HOLD,                 /* starving: capacity held for it as it frees */
};

struct gang_note {
	enum gang_note_kind kind;
	const char *ns, *name;          /* the pod group */
	const char *member_uid;         /* the member whose filter or bind it was, or NULL */
	const char *member_name;
	const char *text;               /* what happened, in words */
};

/* Called with the manager's lock held, on the thread of the decision: it must
 * only copy and queue (cache_events_emit), never block or call the manager. */
typedef void (*gang_notify_fn)(void *ctx, const struct gang_note *note);

/* The manager's settings. Start from gang_config_defaults(); the figures in
 * brackets are its defaults. gang_manager_new takes them as they are. */
struct gang_config {
	unsigned default_timeout_s;     /* when the PodGroup names none (60); > 0 */
	unsigned http_timeout_s;        /* kube-scheduler's extender httpTimeout (30); > 0 */
	unsigned margin_s;              /* answer parked binds this long before it (3);
					 * below http_timeout_s */
	/* With starvation_holds, a waiting gang first in the fair order that has
	 * waited this long gets capacity held for it as it frees (30; 0: at
	 * once). Holds are off by default (false): in troupe simulate's gang
	 * studies they cost every other job more waiting than they saved the
	 * held-for gang (docs/placement-quality.md). */
	bool starvation_holds;
	unsigned starvation_s;
	/* A gang naming no quorum counts the members that exist once none has
	 * arrived for this long (troupe's config default 2; 0: at once). */
	unsigned settle_s;
	bool allow_partial_preemption;  /* may preempt propose evicting part of a bound gang */
	/* A gang's entry is forgotten once it has no plan, holds and waits for
	 * nothing, and no member was filtered for this long (600; 0: at the next
	 * pass, once a second). */
	unsigned idle_forget_s;
	/* Pod groups the manager keeps state for, at most (GANG_MAX_ENTRIES_DEFAULT;
	 * 0: the same). At the cap the entry idle longest, with no plan, holds or
	 * wait, is forgotten to make room; a waiting, planned or binding gang
	 * never is. A filter naming a made-up group makes an entry. */
	unsigned max_entries;
	/* Network-domain levels, coarse to fine; n == 0: gang_default_levels. The
	 * keys point into level_keys. */
	struct gang_levels levels;
	char level_keys[GANG_MAX_LEVELS][GANG_MAX_KEYS][GANG_LABEL_BUF];
	unsigned n_queues;              /* queue weights (default weight 1) */
	char queue_names[GANG_MAX_QUEUES][GANG_QUEUE_NAME_BUF];
	double queue_weights[GANG_MAX_QUEUES];
	/* The manager's clock, in nanoseconds of a monotonic clock: plan deadlines,
	 * waiting ages, settling, idleness (NULL: util_now_ns). Tests inject a fake
	 * one; the expiry thread still wakes every 100 ms of real time to read it. */
	uint64_t (*now_ns)(void *ctx);
	void *clock_ctx;
	/* Told of each gang decision (gang_notify_fn); NULL: nobody. */
	gang_notify_fn notify;
	void *notify_ctx;
};

enum { GANG_MAX_ENTRIES_DEFAULT = 10000 };

/* Fill <cfg> with every gang default (the figures in struct gang_config). */
void gang_config_defaults(struct gang_config *cfg);

/* How long a parked bind may keep retrying its Binding: kube-scheduler's
 * httpTimeout less the margin, at least 1 s; the defaults' when <cfg> is NULL. */
unsigned gang_bind_budget_s(const struct gang_config *cfg);

/* Create the manager and its expiry thread. NULL on failure with errno set:
 * EINVAL when <cfg> cannot be used (a timeout of 0, or margin_s not below
 * http_timeout_s), else the allocation's or thread's error. */
struct gang_manager *gang_manager_new(struct cache *c, const struct gang_config *cfg);
/* Stop: every parked bind is released with an error, every reservation freed;
 * later calls refuse ("troupe is stopping"). The struct stays valid for threads
 * still holding it until gang_manager_free. */
void gang_manager_shutdown(struct gang_manager *m);
void gang_manager_free(struct gang_manager *m);

/* A gang member as the verbs see it. */
struct gang_member {
	const char *uid;
	const char *ns;
	const char *name;
	const char *group;              /* the pod group's name (same namespace) */
	uint32_t pod_min_member;        /* quorum named on the pod, 0 when none */
	struct placement_request req;
	const char *required_key;       /* troupe.io/gang-topology required:<key>, or NULL */
	int32_t priority;               /* spec.priority */
	const char *queue;              /* the pod's queue */
	/* The node its spec.nodeSelector's kubernetes.io/hostname pins it to
	 * (cache_pod.pinned), or NULL: a slot planned for members pinned to a
	 * node is open to them alone. */
	const char *pinned;
};

/* Parse troupe.io/gang-topology ("required:<label-key>"); NULL or "" is none.
 * Returns 0 with <key> pointing into <s>, or -EINVAL with a message. */
int gang_topology_parse(const char *s, const char **key, char *err, size_t errlen);

enum gang_verdict {
	GANG_NOT_A_GANG = 0,            /* place it as a single pod */
	GANG_ALLOWED,                   /* only the candidates marked allowed */
	GANG_REFUSED,                   /* no candidate; <reason> says why */
	GANG_RETRY,                     /* not yet: answer with an error (<reason>), so
					 * kube-scheduler retries after its backoff */
};

/* Filter for a gang member over the candidate nodes <views> (inside the
 * caller's read section). Plans and reserves the whole gang when it has no plan
 * yet. Sets allowed[i] for the candidates with an open slot for this member. */
enum gang_verdict gang_filter(struct gang_manager *m, const struct gang_member *mb,
			      const struct cache_node_view *views, unsigned n, bool *allowed,
			      char *reason, size_t reasonlen);

/* The members of <mb>'s gang still to place for its quorum: the quorum (its
 * PodGroup's, else the largest a member names, else every member that exists)
 * less the members bound, in <quorum> the quorum. Thread: any. */
unsigned gang_members_needed(struct gang_manager *m, const struct gang_member *mb,
			     unsigned *quorum);

/* Whether <node> has an open slot for this member (prioritize). */
enum gang_verdict gang_has_slot(struct gang_manager *m, const struct gang_member *mb,
				const char *node, bool *has);

/* How a parked bind is finished: <ok> true means "post the binding now", false
 * "give up" (<why> says why; the member's devices are already released). Called
 * once, from a thread of the manager's choosing, never under its lock. */
/* <plan>: with ok, the gang's plan as its Binding is to record it (annotation
 * CACHE_GANG_PLAN_ANNOTATION, record.c), valid during the call; NULL when it
 * could not be written (no memory), or with !ok. */
typedef void (*gang_release_fn)(void *ctx, bool ok, const char *why, const char *plan);

enum gang_bind_result {
	GANG_BIND_NOT_A_GANG = 0,       /* bind it as a single pod */
	/* Devices claimed and the bind parked; <release> will be called. (The
	 * name keeps the old word: the extender uses it.) */
	GANG_BIND_HELD,
	GANG_BIND_REFUSED,              /* not bound; <reason> says why */
};

/* Bind a gang member to <node>: claim its reserved slot there (or move an open
 * slot there when the node has room), then park the bind until the gang's
 * quorum is parked or bound; then every parked bind is released with ok = true.
 * On expiry they are released with ok = false. <devices> receives the claimed
 * devices. */
enum gang_bind_result gang_bind(struct gang_manager *m, const struct gang_member *mb,
				const char *node, gang_release_fn release, void *ctx,
				uint64_t *devices, char *reason, size_t reasonlen);

/* Whether gang <ns>/<name> has a plan in flight here (slots reserved, binds
 * parked or being posted): a replica's own plan, which nothing else should act
 * on. Thread: any. */
bool gang_in_flight(struct gang_manager *m, const char *ns, const char *name);

/* ---- The plan written to the API (record.c) ---------------------------------- */

enum {
	GANG_RECORD_VERSION = 1,        /* the version this release writes (and the newest it reads) */
	GANG_RECORD_MAX = 16384,        /* longest text written; past it the members are not listed */
	GANG_RECORD_ID_BUF = 40,
	GANG_RECORD_IDS_BUF = 256,      /* a device list, "0,3" */
	GANG_RECORD_MEMBERS_MAX = 100000,
};

struct gang_record_member {
	char uid[K8S_UID_BUF];
	char name[K8S_NAME_BUF];        /* the pod's name (in the gang's namespace) */
	char node[K8S_NAME_BUF];
	uint64_t devices;
};

/* A gang's plan as written with its Bindings: the members it binds, where. */
struct gang_record {
	unsigned version;
	char id[GANG_RECORD_ID_BUF];    /* tells plans of one gang apart */
	unsigned quorum;
	unsigned n;                     /* members the plan binds */
	struct gang_record_member *members;     /* n of them; NULL: too many to list */
};

/* The annotation's text for <r> (the caller frees it), or NULL without memory.
 * A list longer than GANG_RECORD_MAX is left out (members NULL on reading). */
char *gang_record_encode(const struct gang_record *r);
/* Read a plan's text. Returns 0; -EPROTONOSUPPORT for a newer version than
 * GANG_RECORD_VERSION; -EINVAL for text that is not a plan; -ENOMEM. <err>
 * says why. <out> is for gang_record_fini (also after an error). */
int gang_record_decode(const char *s, struct gang_record *out, char *err, size_t errlen);
void gang_record_fini(struct gang_record *r);

/* If <node>'s GPUs are being held for a starving gang that goes before a pod of
 * <priority>, write the reason naming it into <buf> and return true: the node
 * is refused to that pod, so freed GPUs cannot be taken back. Thread: any;
 * takes no lock (it reads a published set of held nodes). */
bool gang_hold_note(struct gang_manager *m, const char *node, int32_t priority, char *buf,
		    size_t len);

/* The fair order's rule on its own terms, so that the daemon and
 * `troupe simulate` order waiting work by one function: higher priority
 * first, then the lower weighted dominant share of the work's queue, then the
 * longer wait (the earlier waiting_since_ns), then the key ("ns/name"). > 0
 * when <a> goes before <b>, < 0 otherwise (also when equal in every term). */
struct gang_fair_key {
	int32_t priority;
	double share;                   /* its queue's weighted dominant share */
	uint64_t waiting_since_ns;      /* when it began to wait, any one clock */
	const char *key;
};
int gang_fair_precedes(const struct gang_fair_key *a, const struct gang_fair_key *b);

/* <queue>'s weight in <cfg> (its queues: entry; 1 when it has none or a
 * weight <= 0). A share is divided by it. */
double gang_config_queue_weight(const struct gang_config *cfg, const char *queue);

/* The weighted dominant share of <queue> now (the GPU, CPU and memory its pods occupy, as
 * a share of the ready nodes' totals, the largest of the three, divided by the
 * queue's weight). For logs and tests. */
double gang_queue_share(struct gang_manager *m, const char *queue);

/* Take the queues and their weights of <from> (a reloaded troupe.yaml) in
 * place of <m>'s: the fair order uses them from the next decision on. The
 * rest of <from> is not read. Thread: any. */
void gang_manager_set_queues(struct gang_manager *m, const struct gang_config *from);

/* Counters for /metrics. */
struct gang_stats {
	uint64_t planned, refused, expired, released, deferred;
	unsigned active;                /* gangs with a plan */
	unsigned waiting;               /* gangs refused for capacity, still wanted */
	unsigned held_sets;             /* member-sized sets held for a starving gang */
	unsigned entries;               /* pod groups the manager keeps state for */
	/* The entry cap (gang_config.max_entries): idle entries forgotten to make
	 * room, and entries not made because none could be. */
	uint64_t entries_dropped, entries_refused;
};
void gang_get_stats(struct gang_manager *m, struct gang_stats *out);

/* ---- What the manager holds, for people (inspect.c) --------------------------- */

/* A gang as /debug/explain, the dashboard and /metrics show it: a copy taken
 * under the manager's lock, so it may be read at leisure. */
enum gang_view_state {
	GANG_VIEW_IDLE = 0,             /* no plan; members missing, or its last plan ended */
	GANG_VIEW_WAITING,              /* refused for capacity or deferred, still wanted */
	GANG_VIEW_PLANNED,              /* slots reserved, no bind parked yet */
	GANG_VIEW_BINDING,              /* slots reserved, binds parked at the barrier */
};

/* "idle", "waiting", "planned", "binding". */
const char *gang_view_state_name(enum gang_view_state s);

/* One place of a gang's plan. */
struct gang_view_slot {
	char node[K8S_NAME_BUF];
	uint64_t devices;
	unsigned gpus;                  /* what the member it was planned for asks */
	char member[K8S_UID_BUF];       /* the pod that claimed it, "" while open */
};

enum { GANG_VIEW_REASON_BUF = 640 };

struct gang_view {
	char ns[K8S_NAMESPACE_BUF];
	char name[K8S_NAME_BUF];
	enum gang_view_state state;
	unsigned quorum, timeout_s;
	unsigned need;                  /* members it last asked places for */
	uint64_t need_gpus;             /* GPUs they ask in all */
	int32_t priority;
	char queue[K8S_NAME_BUF];
	struct gang_view_slot *slots;   /* the plan (n_slots), owned; NULL without one */
	unsigned n_slots;
	unsigned n_parked;              /* binds parked at the barrier */
	double waiting_s;               /* how long it has waited; 0 unless waiting */
	double deadline_s;              /* time left to its plan's deadline; 0 without a plan */
	bool deadline_is_http;          /* that deadline is the parked binds' HTTP limit */
	unsigned n_holds;               /* member-sized sets held for it while it starves */
	unsigned n_targets;             /* nodes whose freed GPUs are kept for it */
	/* Its place in the fair order among the waiting gangs, 1 first; 0 when it
	 * does not wait. */
	unsigned fair_position;
	double share;                   /* its queue's weighted dominant share */
	char reason[GANG_VIEW_REASON_BUF];      /* why its last attempt failed, "" if none */
};

/* Gang <ns>/<name> as the manager holds it: 0, or -ENOENT when it keeps no
 * state for it, -ENOMEM. Free with gang_view_fini (after any return). Thread:
 * any; walks every pod once (the shares), so not for a hot path. */
int gang_view_get(struct gang_manager *m, const char *ns, const char *name,
		  struct gang_view *out);
void gang_view_fini(struct gang_view *v);
/* Every gang the manager keeps, sorted by namespace and name: 0 or -ENOMEM.
 * Free with gang_view_list_free. */
int gang_view_list(struct gang_manager *m, struct gang_view **out, unsigned *n);
void gang_view_list_free(struct gang_view *v, unsigned n);

/* A queue: those configured, those with pods running, those gangs wait in. */
struct gang_queue_view {
	char name[K8S_NAME_BUF];
	double weight;
	const char *weight_from;        /* "config", "Volcano", "KAI Scheduler", "default" */
	double share;                   /* weighted dominant share now */
	unsigned waiting, planned;      /* its gangs waiting; with a plan */
	unsigned binding;               /* of those planned, with binds parked */
	uint64_t gpus;                  /* GPUs its pods hold */
};

/* Every queue, sorted by name: 0 or -ENOMEM. Free <*out> with free(). */
int gang_queue_list(struct gang_manager *m, struct gang_queue_view **out, unsigned *n);

#endif
