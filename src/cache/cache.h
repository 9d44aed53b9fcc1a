/* cache: what troupe knows of the cluster — nodes, pods, pod groups — and what
 * each node has free.
 *
 * Threads and rules
 *  - One writer adds, replaces and removes nodes, pods and pod groups: the
 *    functions marked "writer". The writer is the thread that called
 *    cache_new() (which loads a snapshot, for one), until another thread takes
 *    over with cache_writer_claim() (the informer's thread does when it
 *    starts; cache_informer_stop() hands the cache back to the thread that
 *    stops it). The hand-over itself must be ordered after the old writer's
 *    last write (a thread's creation or join does it). Every writer function
 *    asserts, in debug builds, that the calling thread is the writer.
 *  - Any number of readers (the HTTP pool) look nodes up inside a read section,
 *    without taking a lock; a node record is immutable once published and is
 *    reclaimed through an epoch only when no reader can still hold it.
 *  - GPU usage per node is a device mask plus a count of GPUs occupied by pods
 *    whose devices troupe does not know, changed together by one double-word
 *    compare-and-swap, so an assume (bind) and a watch update can never hand out
 *    the same device twice. Functions marked "any" may run on any thread.
 *
 * Errors follow the project convention: 0 or -errno.
 */
#ifndef TROUPE_CACHE_CACHE_H
#define TROUPE_CACHE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/limits.h"

enum {
	CACHE_MAX_GPUS = 64,            /* devices per node the mask can name */
	CACHE_MAX_GPU_RESOURCES = 8,    /* managed resource names (nvidia.com/gpu, ...) */
	CACHE_MAX_DRA_DRIVERS = 4,      /* DRA drivers whose GPUs troupe counts */
	CACHE_ERR_LEN = 256,
	/* Annotation troupe.io/topology's value, as cache_pod_info keeps it: a
	 * policy name ("nvlink", "same-socket", ...), not a Kubernetes name. */
	CACHE_TOPOLOGY_BUF = 64,
};

struct cache;

/* Settings fixed when the cache is created. */
struct cache_node;

/* How a node shares the physical GPUs behind a managed resource (from NVIDIA's
 * GPU Feature Discovery labels, or troupe.yaml's sharing overrides). A shared
 * node's devices, as troupe counts them, are replica slots: slot s is replica
 * s % gpu_replicas of physical GPU s / gpu_replicas. */
enum cache_sharing {
	CACHE_SHARING_NONE = 0,         /* one device is one whole GPU */
	CACHE_SHARING_TIME_SLICING,     /* nvidia.com/gpu.sharing-strategy=time-slicing */
	CACHE_SHARING_MPS,              /* nvidia.com/gpu.sharing-strategy=mps */
	CACHE_SHARING_MIG_SINGLE,       /* nvidia.com/mig.strategy=single: devices are slices */
	/* nvidia.com/mig.strategy=mixed: devices are MIG devices of several
	 * profiles (resources nvidia.com/mig-<profile>) and whole GPUs, laid
	 * out gpu_replicas to a GPU (cache_node.res_mask says whose is which). */
	CACHE_SHARING_MIG_MIXED,
	CACHE_SHARING_COUNT,
};
/* Where a pod's replicas go on a shared node (NVIDIA's device plugin's names). */
enum cache_packing {
	CACHE_PACKING_DISTRIBUTED = 0,  /* each replica on the least-used GPU */
	CACHE_PACKING_PACKED,           /* fill one GPU's replicas before the next */
};
/* troupe.yaml's sharing entry for one managed resource. */
struct cache_sharing_opts {
	/* -1: from the node's labels (auto); else the cache_sharing it is. */
	int strategy;
	/* Replicas per GPU; 0: from the label nvidia.com/gpu.replicas. */
	unsigned replicas;
	enum cache_packing packing;
	/* The device plugin's failRequestsGreaterThanOne, which no label shows:
	 * the kubelet refuses a request above 1 of a shared resource. */
	bool fail_requests_greater_than_one;
};

struct cache_opts {
	/* Managed GPU resource names, e.g. "nvidia.com/gpu". A node offers the
	 * first one it advertises; a pod may ask for one of them. */
	const char *gpu_resources[CACHE_MAX_GPU_RESOURCES];
	unsigned n_gpu_resources;
	/* Sharing, by the same index: zeroed (strategy 0) means never shared;
	 * ext_config_defaults sets every entry to auto. */
	struct cache_sharing_opts sharing[CACHE_MAX_GPU_RESOURCES];
	/* Optional: data an upper layer derives from a node record (placement's
	 * GPU topology), computed once on the writer thread before the record is
	 * published, stored in cache_node.derived, and released on the writer
	 * thread once no reader can see the record any more. */
	void *(*node_derive)(const struct cache_node *node, void *ctx);
	void (*node_release)(void *derived, void *ctx);
	void *hook_ctx;
	/* Pods remembered from filter calls alone (not from the watch or a
	 * snapshot) kept at most; at the cap the oldest that occupy nothing are
	 * dropped first (cache_pod_remember). 0: CACHE_FILTER_ONLY_PODS_DEFAULT. */
	size_t max_filter_only_pods;
	/* DRA drivers (e.g. "gpu.nvidia.com") whose ResourceSlices publish GPUs
	 * troupe also manages: a device of theirs allocated to a ResourceClaim is
	 * counted as used on its node (dra.c). None: DRA is not watched. */
	const char *dra_drivers[CACHE_MAX_DRA_DRIVERS];
	unsigned n_dra_drivers;
};

/* Pods remembered from filter calls, by default. Whoever can reach troupe's
 * port can send filter calls naming made-up pods; each remembered pod is a few
 * hundred bytes, and a pod the watch shows is not counted. */
enum { CACHE_FILTER_ONLY_PODS_DEFAULT = 50000 };

/* ---- Objects ---------------------------------------------------------- */

struct cache_kv {
	const char *key;
	const char *value;
};

struct cache_taint {
	const char *key;
	const char *value;
	const char *effect;
};

/* A node as troupe keeps it: one allocation, immutable once published. */
struct cache_node {
	/* What filter and prioritize read of every node share the first cache
	 * line (records are 64-byte aligned). */
	int gpu_resource;               /* index in cache_opts, -1: advertises none */
	uint32_t gpu_capacity;          /* devices 0..capacity-1 exist (capped at 64) */
	uint32_t gpu_allocatable;       /* healthy devices the kubelet offers */
	bool ready;                     /* condition Ready is True */
	bool unschedulable;             /* spec.unschedulable (cordoned) */
	uint16_t n_labels;
	uint64_t unhealthy;             /* devices named by annotation troupe.io/gpu-unhealthy */
	const void *derived;            /* cache_opts.node_derive's result, or NULL */
	const char *name;
	int64_t cpu_milli;              /* allocatable */
	int64_t mem_bytes;              /* allocatable */
	uint16_t n_taints;
	/* Sharing (enum cache_sharing): devices 0..gpu_capacity-1 are replica
	 * slots, gpu_replicas per physical GPU (1 when not shared), of
	 * gpu_physical GPUs. */
	uint8_t gpu_sharing;
	uint8_t gpu_replicas;
	uint8_t gpu_physical;
	uint8_t gpu_packing;            /* enum cache_packing */
	bool gpu_fail_gt1;              /* requests above 1 are refused (see opts) */
	/* Replicas per GPU the node advertises; more than gpu_replicas when the
	 * slots would pass CACHE_MAX_GPUS (troupe offers gpu_replicas of them). */
	uint16_t gpu_replicas_advertised;
	/* MIG mixed only (else NULL): by managed resource index, the devices that
	 * are that resource's, and how many of it the kubelet offers. */
	const uint64_t *res_mask;
	const uint32_t *res_alloc;
	uint32_t alloc_size;            /* bytes of the record's one allocation */
	bool topology_annotated;        /* it had troupe.io/gpu-topology */
	const char *topology_text;      /* annotation troupe.io/gpu-topology, or NULL */
	/* The topology the node's DRA slices' standard attributes give
	 * (resource.kubernetes.io/pcieRoot, numaNode), as `nvidia-smi topo -m`
	 * text, or NULL: cache_node_upsert puts it here from what dra.c made of
	 * the slices, for node_derive; like topology_text it is dropped once
	 * derived. */
	const char *dra_topology_text;
	const char *gpu_uuids;          /* annotation troupe.io/gpu-uuids ("GPU-a,GPU-b,..."
					 * by device index), or NULL */
	const struct cache_kv *labels;  /* sorted by key */
	const struct cache_taint *taints;
};

enum cache_pod_phase {
	CACHE_POD_PENDING = 0,
	CACHE_POD_RUNNING,
	CACHE_POD_SUCCEEDED,
	CACHE_POD_FAILED,
	CACHE_POD_UNKNOWN,
};

/* What a pod asks for, computed as Kubernetes does: for each resource the larger
 * of the largest init container (plus the sidecars started before it) and the
 * sum of app containers and sidecars, plus pod overhead. */
struct cache_demand {
	int gpu_resource;               /* index in cache_opts, -1 when none */
	uint32_t gpus;
	int64_t cpu_milli;
	int64_t mem_bytes;
};

/* A pod as parsed from its JSON: one allocation owning every string. */
struct cache_pod {
	const char *uid;
	const char *ns;
	const char *name;
	const char *node;               /* spec.nodeName, NULL when unbound */
	enum cache_pod_phase phase;
	bool deleting;                  /* metadata.deletionTimestamp is set */
	/* spec.schedulingGates is not empty: kube-scheduler does not schedule it
	 * yet (Kueue's admission and topology gates), so it is no gang member that
	 * can be placed now. */
	bool gated;
	bool has_devices;               /* devices are known: from one of the two below */
	uint64_t devices;               /* the devices the pod holds */
	/* troupe.io/gpu-ids-actual, what the node agent read back from the kubelet
	 * (the devices the containers really got), wins over troupe.io/gpu-ids,
	 * troupe's choice: devices_actual says which one <devices> is. <planned>
	 * is troupe's choice when both are valid (0 otherwise), so a difference
	 * can be told. */
	bool devices_actual;
	uint64_t planned;
	struct cache_demand demand;
	const char *demand_error;       /* non-NULL: the GPU request is invalid (why) */
	const char *topology;           /* annotation troupe.io/topology, or NULL */
	const char *group;              /* pod group name (same namespace), or NULL */
	uint32_t min_member;            /* quorum the pod itself names, 0 when none */
	int32_t priority;               /* spec.priority */
	const char *gang_topology;      /* annotation troupe.io/gang-topology, or NULL */
	/* troupe.io/gpu-ids naming replica slots ("GPU:replica" pairs), or NULL:
	 * resolved into <devices> against the node's record when the pod is
	 * applied (the slots' layout is the node's). */
	const char *slot_ids;
	/* Annotation troupe.io/gang-plan of a bound member, or NULL: allocated
	 * apart from the pod (one copy per group is kept, not one per member), and
	 * taken by cache_pod_apply into its group's record. */
	char *gang_plan;
	const char *queue;              /* queue name; the namespace when none is named */
	/* spec.nodeSelector's kubernetes.io/hostname, or NULL: the one node the
	 * pod may go to (Kueue's topology-aware scheduling pins each pod of a
	 * workload so); a gang's plan puts it there. */
	const char *pinned;
};

/* Parse a Node object. Returns NULL with a message in <err> when the object is
 * not a usable node (no name). The caller owns the result (cache_node_free). */
struct cache_node *cache_node_parse(const cJSON *obj, const struct cache_opts *opts,
				    char *err, size_t errlen);
void cache_node_free(struct cache_node *node);
/* Whether a node's devices are shares of GPUs (replicas or MIG slices). */
static inline bool cache_node_shared(const struct cache_node *node)
{
	return node->gpu_sharing != CACHE_SHARING_NONE;
}
/* Whether a node offers managed resource <r> at all (one of its devices is
 * <r>'s). */
static inline bool cache_node_offers(const struct cache_node *node, int r)
{
	if (r < 0 || r >= CACHE_MAX_GPU_RESOURCES)
		return false;
	if (node->res_mask)
		return node->res_mask[r] != 0;
	return node->gpu_resource == r && node->gpu_capacity > 0;
}
/* The devices of a node that are resource <r>'s. */
static inline uint64_t cache_node_res_devices(const struct cache_node *node, int r)
{
	if (r < 0 || r >= CACHE_MAX_GPU_RESOURCES)
		return 0;
	if (node->res_mask)
		return node->res_mask[r];
	if (node->gpu_resource != r)
		return 0;
	return node->gpu_capacity >= 64 ? ~0ULL : (1ULL << node->gpu_capacity) - 1;
}
/* How many of resource <r> the kubelet offers on a node (allocatable). */
static inline uint32_t cache_node_res_allocatable(const struct cache_node *node, int r)
{
	if (r < 0 || r >= CACHE_MAX_GPU_RESOURCES)
		return 0;
	if (node->res_mask)
		return node->res_alloc[r];
	return node->gpu_resource == r ? node->gpu_allocatable : 0;
}
/* The slots of physical GPU <gpu> on a shared node. */
static inline uint64_t cache_node_gpu_slots(const struct cache_node *node, unsigned gpu)
{
	unsigned r = node->gpu_replicas ? node->gpu_replicas : 1;

	if (gpu * r >= 64)
		return 0;
	return (r >= 64 ? ~0ULL : (1ULL << r) - 1) << (gpu * r);
}
/* "time-slicing", "mps", "mig-single" or "none". */
const char *cache_sharing_name(enum cache_sharing s);
/* Parse a sharing name ("none", "time-slicing", "mps"), -1 when unknown. */
int cache_sharing_parse(const char *s);
/* The devices of <mask> as troupe.io/gpu-ids names them on <node>: "0,3" for
 * whole GPUs; "GPU:replica" pairs ("0:1,0:2,3:0") on a shared node. <node>
 * NULL: whole GPUs. */
void cache_node_devices_format(const struct cache_node *node, uint64_t mask, char *buf,
			       size_t len);
/* Parse "GPU:replica" pairs into <node>'s slot mask. Returns 0, or -EINVAL
 * when a pair is malformed, repeated or not on the node. */
int cache_node_slots_parse(const struct cache_node *node, const char *s, uint64_t *mask);
/* The value of label <key>, or NULL. */
const char *cache_node_label(const struct cache_node *node, const char *key);
/* The devices a node has, healthy or not: bits 0..gpu_capacity-1. */
static inline uint64_t cache_node_capacity_mask(const struct cache_node *node)
{
	return node->gpu_capacity >= 64 ? ~0ULL : (1ULL << node->gpu_capacity) - 1;
}

/* The pod group a Pod object names, or NULL. First found:
 * spec.schedulingGroup.podGroupName (upstream), the labels
 * scheduling.x-k8s.io/pod-group, scheduling.sigs.k8s.io/pod-group,
 * pod-group.scheduling.sigs.k8s.io, pod-group.scheduling.sigs.k8s.io/name, the
 * annotations scheduling.k8s.io/group-name and scheduling.volcano.sh/group-name
 * (Volcano), pod-group-name (KAI), the label kueue.x-k8s.io/pod-group-name.
 * The pointer is into <pod>. */
const char *cache_pod_group_name(const cJSON *pod);
/* The queue a Pod object names, or NULL (callers use the namespace). First
 * found: the labels troupe.io/queue, kueue.x-k8s.io/queue-name,
 * kai.scheduler/queue, scheduling.volcano.sh/queue-name, the annotation
 * scheduling.volcano.sh/queue-name. */
const char *cache_pod_queue_name(const cJSON *pod);

/* Parse a Pod object. Malformed GPU requests are not a parse failure: they set
 * demand_error, which filter reports to the user. Returns NULL with <err> set
 * when the pod has no namespace/name. The caller owns the result. */
struct cache_pod *cache_pod_parse(const cJSON *obj, const struct cache_opts *opts, char *err,
				  size_t errlen);
void cache_pod_free(struct cache_pod *pod);

/* Compute a pod's effective demand from its spec. Returns 0, or -EINVAL with a
 * message a user can act on in <err>. */
int cache_demand_compute(const cJSON *spec, const struct cache_opts *opts,
			 struct cache_demand *out, char *err, size_t errlen);

/* Write the UUIDs of the devices in <mask>, comma-separated, from the node's
 * troupe.io/gpu-uuids list into <buf>. Returns false (and writes "") when the
 * node has no such list or it does not name every device of <mask>. */
bool cache_node_uuids(const struct cache_node *node, uint64_t mask, char *buf, size_t len);

/* Parse "0,3,5" into a device mask. Returns 0 or -EINVAL. */
int cache_devices_parse(const char *s, uint64_t *mask);
/* Write a mask as "0,3,5" into buf. CACHE_DEVICES_BUF holds any mask ("0,1,...,63")
 * and any slot list (cache_node_devices_format: "0:0,0:1,...,7:7"). */
enum { CACHE_DEVICES_BUF = 448 };
void cache_devices_format(uint64_t mask, char *buf, size_t len);

/* ---- The store -------------------------------------------------------- */

/* Create an empty cache; the calling thread is its writer. Returns NULL and
 * sets errno. */
struct cache *cache_new(const struct cache_opts *opts);
/* Thread: any, once no other thread uses the cache (it takes the writer). */
void cache_free(struct cache *c);
const struct cache_opts *cache_get_opts(const struct cache *c);

/* Make the calling thread the cache's writer (see the rules above). Thread:
 * the new writer, once the old one has stopped writing. */
void cache_writer_claim(struct cache *c);
/* Whether the calling thread is the cache's writer. Thread: any. */
bool cache_writer_is_current(const struct cache *c);

/* Mark the cache synced (every initial list applied) or not. Thread: any. */
void cache_set_synced(struct cache *c, bool synced);
/* An informer feeds <c> from now on: a pod known only from a filter call (a
 * request's body, which any caller of the verbs can write) is then never
 * counted as a member of its pod group, so no caller can invent gang members;
 * the watch brings the real ones. Any thread. */
void cache_set_live(struct cache *c);
/* Whether an informer feeds <c> (cache_set_live was called). Any thread. */
bool cache_is_live(const struct cache *c);
bool cache_is_synced(const struct cache *c);

/* A node and its usage as a reader sees it. <node> is valid until the end of
 * the read section; used/unattributed are a snapshot (bind re-checks). */
struct cache_node_view {
	const struct cache_node *node;
	uint64_t used;                  /* devices occupied by known pods */
	uint32_t unattributed;          /* GPUs occupied by pods with unknown devices */
};

/* Free GPUs in a view: allocatable less what is occupied, never more than the
 * healthy devices not occupied, never negative. */
uint32_t cache_view_free_gpus(const struct cache_node_view *v);
/* Free devices in a view, as a mask within capacity. */
uint64_t cache_view_free_mask(const struct cache_node_view *v);
/* cache_view_free_gpus and cache_view_free_mask for resource <r>: on a MIG
 * mixed node only <r>'s devices, bounded by its allocatable (GPUs of unknown
 * devices are taken from every resource's count: they could be any). */
uint32_t cache_view_free_for(const struct cache_node_view *v, int r);
uint64_t cache_view_free_mask_for(const struct cache_node_view *v, int r);

/* Changes to any node's record or usage, counted as they begin. When
 * cache_changes_settled() says none is under way and gives <count>, then as long
 * as cache_changes() still returns <count>, no node has changed since: what was
 * read in between is still the cache's state. Thread: any. */
bool cache_changes_settled(struct cache *c, uint64_t *count);
uint64_t cache_changes(struct cache *c);
/* Read sections bracket every node lookup. Thread: any; not reentrant. */
void cache_read_begin(struct cache *c);
void cache_read_end(struct cache *c);
/* Look a node up by name inside a read section. Returns false when unknown. */
bool cache_node_lookup(struct cache *c, const char *name, size_t len,
		       struct cache_node_view *out);
/* A name in a request: bytes and length, not NUL-terminated. */
struct cache_name {
	const char *s;
	size_t len;
};
enum { CACHE_LOOKUP_BATCH = 16 };
/* Look up <n> (at most CACHE_LOOKUP_BATCH) names at once inside a read
 * section: found[i] says whether out[i] was filled, as cache_node_lookup
 * would. Faster per name than one at a time: the batch's memory fetches
 * overlap. */
void cache_node_lookup_many(struct cache *c, const struct cache_name *names, size_t n,
			    struct cache_node_view *out, bool *found);
/* Usage of a node by name (for nodes given in full by a request). Returns
 * false when troupe has no usage for it. Inside a read section. */
bool cache_usage_lookup(struct cache *c, const char *name, size_t len, uint64_t *used,
			uint32_t *unattributed);
/* Visit every node inside a read section; stop when <fn> returns false. */
void cache_node_foreach(struct cache *c, bool (*fn)(const struct cache_node_view *, void *),
			void *arg);

/* Writer: publish <node>, replacing any node of the same name. Takes ownership
 * (also on error). */
int cache_node_upsert(struct cache *c, struct cache_node *node);
/* Writer: remove a node. Returns -ENOENT when unknown. */
int cache_node_delete(struct cache *c, const char *name);
/* Writer: reclaim records retired by earlier writes once readers are done. */
void cache_writer_reclaim(struct cache *c);

/* ---- Pods and accounting ------------------------------------------------ */

enum cache_pod_state {
	CACHE_POD_STATE_NONE = 0,       /* not known */
	CACHE_POD_STATE_UNACCOUNTED,        /* known, occupies nothing */
	CACHE_POD_STATE_ASSUMED,        /* troupe bound it; occupies devices */
	CACHE_POD_STATE_BOUND,          /* the API says it is on a node; occupies GPUs */
};

/* A copy of what the cache holds for a pod. */
struct cache_pod_info {
	enum cache_pod_state state;
	bool from_api;                  /* learnt from the cluster, not only from a filter */
	bool posted;                    /* troupe's Binding for it was accepted */
	bool uncertain;                 /* troupe's Binding's outcome is unknown */
	bool reservation;               /* a gang's reservation, not a pod */
	char ns[K8S_NAMESPACE_BUF];
	char name[K8S_NAME_BUF];
	char node[K8S_NAME_BUF];
	char topology[CACHE_TOPOLOGY_BUF];      /* annotation troupe.io/topology, "" when absent */
	char group[K8S_NAME_BUF];               /* pod group name, "" when none */
	char gang_topology[K8S_NAME_BUF];       /* troupe.io/gang-topology, "" when none */
	char queue[K8S_NAME_BUF];               /* its queue (its namespace when none named) */
	char pinned[K8S_NAME_BUF];              /* cache_pod.pinned, "" when none */
	int32_t priority;               /* spec.priority */
	enum cache_pod_phase phase;     /* status.phase (podgroup_status.c counts by it) */
	bool active;                    /* neither finished nor being deleted */
	bool gated;                     /* scheduling gates hold it back (cache_pod.gated) */
	uint32_t min_member;            /* quorum named on the pod, 0 when none */
	struct cache_demand demand;
	bool demand_valid;
	uint64_t devices;               /* occupied devices (attributed) */
	uint32_t unattributed;          /* occupied GPUs of unknown devices */
	uint64_t known_ns;              /* when troupe first learnt of it (util_now_ns) */
};

/* Whether a pod counts as a member of its gang now: neither finished nor being
 * deleted, and not held back by scheduling gates (Kueue's admission or
 * topology gate) unless already bound; kube-scheduler cannot place a gated
 * pod, so the gang waits for it as for a member not created. The one rule
 * cache_group_count and the gang manager's census and settle wait follow. */
static inline bool cache_pod_is_member_now(const struct cache_pod_info *p)
{
	return p->active && !(p->gated && !p->node[0]);
}

/* Writer: apply a pod's current state (from a snapshot or the watch): update
 * what it occupies. Takes ownership of <pod> (also on error). */
int cache_pod_apply(struct cache *c, struct cache_pod *pod);
/* Writer: the pod is gone; release what it occupied. -ENOENT when unknown. */
int cache_pod_delete(struct cache *c, const char *uid);

/* Any: remember a pod seen in a request (filter) so that a later bind knows its
 * demand even before the watch shows it. Does nothing when the pod is already
 * known. At the cap (cache_opts.max_filter_only_pods) the oldest pods
 * remembered this way that occupy nothing are dropped first; -ENOSPC when
 * filters add them faster than that (another is dropping and the slack of a
 * batch is used up). Takes ownership of <pod> (also on error). */
int cache_pod_remember(struct cache *c, struct cache_pod *pod);

/* What the cap on pods remembered from filter calls did (cache_opts.
 * max_filter_only_pods), for /metrics and tests. */
struct cache_filter_only_stats {
	size_t pods;                    /* remembered from filter only, occupying nothing */
	size_t cap;                     /* the cap in force */
	uint64_t dropped;               /* dropped, oldest first, to make room */
	uint64_t refused;               /* not remembered: nothing could be dropped */
};
/* Any. */
void cache_filter_only_get(struct cache *c, struct cache_filter_only_stats *out);

/* Any: whether the cache has an entry for pod <uid> (cheap: no copy). */
bool cache_pod_known(struct cache *c, const char *uid);
/* Any: copy what the cache knows of pod <uid>. Returns -ENOENT when unknown. */
int cache_pod_get(struct cache *c, const char *uid, struct cache_pod_info *out);

/* Any: assume pod <uid> on <node>, taking exactly <devices> (which must be free
 * there, and at most the node's free count). Returns 0; -EALREADY when the pod
 * already occupies exactly this (idempotent bind: <devices> is replaced by what
 * it occupies); -EEXIST when it occupies something elsewhere; -EAGAIN when the
 * devices are no longer free (usage changed: choose again); -ENOSPC when the
 * node has too few free GPUs; -ENOENT when the pod or node is unknown. */
int cache_pod_assume(struct cache *c, const char *uid, const char *node, uint64_t *devices);
/* Any: undo an assume (the binding failed). -ENOENT when not assumed. */
int cache_pod_forget(struct cache *c, const char *uid);

/* ---- Gangs: member counts and reservations ------------------------------------- */

/* Any: count the pods of pod group <ns>/<group> troupe knows: <exist> those not
 * finished or being deleted, <bound> those of them on a node (bound or
 * assumed). Costs the group's members (a member index kept per group). */
void cache_group_count(struct cache *c, const char *ns, const char *group, unsigned *exist,
		       unsigned *bound);
/* Any: call <fn> for every pod of pod group <ns>/<group> troupe knows (finished
 * ones too: see cache_pod_info.active), each copied under its own stripe's
 * lock, no lock held during <fn>. Costs the group's members, or every pod if
 * the index ever ran out of memory. */
void cache_group_foreach(struct cache *c, const char *ns, const char *group,
			 void (*fn)(const struct cache_pod_info *, const char *uid, void *arg),
			 void *arg);
/* Any: call <fn> for every pod group that has members troupe knows (from the
 * member index; namespaces hold no '/'), no lock held during <fn>. */
void cache_groups_foreach(struct cache *c, void (*fn)(const char *ns, const char *group, void *arg),
			  void *arg);

/* The annotation each gang member's Binding carries: the gang's plan, so that
 * whoever leads next can finish a gang left partly bound (gang/record.c writes
 * and reads it; the cache keeps it per group, as text). A longer one than
 * CACHE_GANG_PLAN_MAX is not kept (troupe writes at most GANG_RECORD_MAX). */
#define CACHE_GANG_PLAN_ANNOTATION "troupe.io/gang-plan"
#define CACHE_GANG_PLAN_MAX 32768

/* Any: call <fn> for every pod group whose bound members showed a gang plan not
 * yet finished with (cache_group_plan_done): the plan's text as the last member
 * carrying it showed it. No lock is held during <fn>. */
void cache_group_plans_foreach(struct cache *c,
			       void (*fn)(const char *ns, const char *group, const char *plan,
					  void *arg),
			       void *arg);
/* Any: done with <plan> of <ns>/<group> (its gang is complete, or was rolled
 * back): forget it, and do not keep it again when a member shows it again. */
void cache_group_plan_done(struct cache *c, const char *ns, const char *group, const char *plan);

/* Any: keep <devices> on <node> for a future pod, under the name <key> (a
 * reservation: counted as used by everyone, never swept by a relist). Returns
 * cache_pod_assume's codes; -EEXIST when <key> is taken. */
int cache_reserve(struct cache *c, const char *key, const char *node, uint64_t devices);
/* The same, charging the reservation to <queue> in cache_pod_info.queue. */
int cache_reserve_for(struct cache *c, const char *key, const char *node, uint64_t devices,
		      const char *queue);
/* Any: drop a reservation and free its devices. -ENOENT when unknown. */
int cache_reservation_release(struct cache *c, const char *key);
/* Any: hand reservation <key>'s devices to pod <uid> (which must be known,
 * occupy nothing, and ask exactly that many GPUs): the pod is then assumed on
 * that node with those devices, with no moment where they are free. Returns 0,
 * -ENOENT (no such reservation or pod), -EEXIST (the pod occupies something),
 * -EINVAL (GPU count differs). */
int cache_reservation_claim(struct cache *c, const char *key, const char *uid);

/* Any: record what became of troupe's Binding for an assumed pod: accepted
 * (<posted>), or outcome unknown (the devices stay occupied until the watch shows
 * the pod, or cache_pod_expire gives up). -ENOENT when it occupies nothing. */
int cache_pod_mark_bind(struct cache *c, const char *uid, bool posted);
/* Any: housekeeping. Release pods whose Binding's outcome stayed unknown for
 * <uncertain_ns>, and forget pods only ever seen in filter calls more than
 * <remembered_ns> ago. */
void cache_pod_expire(struct cache *c, uint64_t uncertain_ns, uint64_t remembered_ns);

/* Counters for logs, /debug and tests. */
struct cache_stats {
	size_t nodes;
	size_t pods;
	size_t pods_holding;            /* pods occupying GPUs (the name is kept) */
	size_t podgroups;
	uint64_t gpus_allocatable;
	uint64_t gpus_held;
	/* Allocatable of the nodes that can take pods (Ready, not cordoned): the
	 * totals dominant shares are measured against. */
	uint64_t ready_gpus;
	int64_t ready_cpu_milli;
	int64_t ready_mem_bytes;
	/* Pods whose devices the node agent read back (troupe.io/gpu-ids-actual),
	 * and of those, the ones that did not get troupe's choice. */
	size_t pods_read_back;
	size_t pods_read_back_differ;
};
void cache_get_stats(struct cache *c, struct cache_stats *out);

/* Any: call <fn> with the UID of every pod occupying GPUs on <node> (the
 * by-node index), under that node's pod-list lock: <fn> must not call back into
 * the cache. Returns -ENOENT when troupe knows nothing of the node. */
int cache_node_pods(struct cache *c, const char *node, void (*fn)(const char *uid, void *arg),
		    void *arg);

/* Visit every pod the cache knows, under each stripe's lock in turn: <fn> must
 * not call back into the cache. Thread: any. */
void cache_pod_foreach(struct cache *c, void (*fn)(const struct cache_pod_info *, const char *uid,
						  void *arg), void *arg);

/* ---- Pod groups: the PodGroup of each gang API troupe reads -------------------- */

/* The PodGroup APIs troupe watches, each where the cluster serves it. A pod
 * names its group by name only (cache_pod_group_name), so when groups of one
 * namespace and name exist in several APIs, the first of cache_pg_precedence
 * gives the gang its terms. */
enum cache_pg_api {
	CACHE_PG_XK8S,          /* scheduler-plugins, scheduling.x-k8s.io/v1alpha1 */
	CACHE_PG_UPSTREAM,      /* Kubernetes, scheduling.k8s.io/v1beta1 (GenericWorkload) */
	CACHE_PG_VOLCANO,       /* Volcano, scheduling.volcano.sh/v1beta1 */
	CACHE_PG_KAI,           /* KAI Scheduler, scheduling.run.ai/v2alpha2 */
	CACHE_PG_API_COUNT
};

struct cache_pg_api_info {
	const char *api_version;        /* "scheduling.x-k8s.io/v1alpha1" */
	const char *path;               /* the list and watch path, every namespace */
	const char *who;                /* whose API, for logs: "scheduler-plugins" */
};
extern const struct cache_pg_api_info cache_pg_apis[CACHE_PG_API_COUNT];
/* The order in which a group's terms are looked up across the APIs. */
extern const enum cache_pg_api cache_pg_precedence[CACHE_PG_API_COUNT];

/* A PodGroup's status as read, for troupe's status writer (podgroup_status.h):
 * fixed-size, so a copy of the record carries it. */
enum { CACHE_PG_PHASE_BUF = 32, CACHE_PG_VERSION_BUF = 64 };
struct cache_podgroup_status {
	char phase[CACHE_PG_PHASE_BUF]; /* status.phase; "" when unset (or too long) */
	int32_t scheduled;              /* status.scheduled (older API; kept by the CRD) */
	int32_t running, succeeded, failed;
	int64_t start_us;               /* status.scheduleStartTime, µs since the epoch; 0 unset */
};

struct cache_podgroup {
	enum cache_pg_api api;          /* the API it came from */
	const char *ns;
	const char *name;
	const char *uid;                /* metadata.uid ("" when absent): Events regard it */
	/* The quorum: spec.minMember (scheduler-plugins, Volcano, KAI; Volcano's
	 * minTaskMember adds up to at least it), spec.schedulingPolicy.gang.minCount
	 * (upstream; a basic policy is 1: not a gang); 0 when absent. */
	int32_t min_member;
	int32_t timeout_s;              /* spec.scheduleTimeoutSeconds; 0 when absent */
	const char *queue;              /* spec.queue (Volcano, KAI), or "" */
	uint32_t min_gpus;              /* spec.minResources of the managed GPU kinds */
	int64_t min_cpu_milli;
	int64_t min_mem_bytes;
	char version[CACHE_PG_VERSION_BUF];     /* metadata.resourceVersion, "" when absent */
	int64_t created_us;             /* metadata.creationTimestamp; 0 when absent */
	struct cache_podgroup_status status;
};

/* ---- DRA: GPUs allocated through ResourceClaims ---------------------------------- */

/* The devices of the configured DRA drivers, from their ResourceSlices
 * (resource.k8s.io/v1), and the claims allocated on them. Each allocated claim
 * holds its devices on their node as a pod would: an entry of the pod table
 * under uid "dra:<claim uid>", in the claim's namespace and name, so a GPU
 * given through DRA is never offered again by troupe. A device is named to
 * troupe's index by its "uuid" attribute (the node's troupe.io/gpu-uuids),
 * else its "index" attribute; a claim with a device named by neither holds
 * that many GPUs of its node unattributed. Writer thread; every call may change
 * the claims' entries. */
enum { CACHE_DRA_UID_PREFIX_LEN = 4 };  /* "dra:" */
/* Writer: a ResourceSlice (added or changed); <deleted>: it is gone. Returns 0,
 * or -EINVAL with <err> when it is not a usable slice (no name). */
int cache_dra_slice(struct cache *c, const cJSON *slice, bool deleted, char *err, size_t errlen);
/* Writer: a ResourceClaim (added or changed); <deleted>: it is gone. Returns 0,
 * or -EINVAL with <err> (no uid or name). */
int cache_dra_claim(struct cache *c, const cJSON *claim, bool deleted, char *err, size_t errlen);
/* Writer: forget what a relist of <claims> (else slices) did not contain
 * (<keep> answers for a claim's uid, a slice's name). */
void cache_dra_sweep(struct cache *c, bool claims, bool (*keep)(const char *key, void *arg),
		     void *arg);
/* Any thread: how many devices of the managed drivers' ResourceSlices are
 * published on <node> (filter says so when such a node has no managed
 * resource: its GPUs are served through DRA). */
unsigned cache_dra_node_devices(struct cache *c, const char *node);
/* Whether <uid> is a claim's entry of the pod table. */
static inline bool cache_dra_uid(const char *uid)
{
	return uid[0] == 'd' && uid[1] == 'r' && uid[2] == 'a' && uid[3] == ':';
}

/* ---- Queues of other schedulers: their weights for fair sharing ------------------ */

/* The Queue APIs troupe reads a weight from, each where the cluster serves it.
 * A weight in troupe's own config (queues:) comes first; then the first of
 * these that has a Queue of that name. */
enum cache_queue_api {
	CACHE_Q_VOLCANO,        /* Volcano, scheduling.volcano.sh/v1beta1: spec.weight */
	CACHE_Q_KAI,            /* KAI Scheduler, scheduling.run.ai/v2:
				 * spec.resources.gpu.overQuotaWeight */
	CACHE_Q_API_COUNT
};
extern const struct cache_pg_api_info cache_queue_apis[CACHE_Q_API_COUNT];

/* A Queue object: its name (cluster-scoped) and weight (> 0). */
struct cache_queue {
	char name[K8S_NAME_BUF];
	double weight;
};
/* Parse a Queue of <api>. Returns 0, or -EINVAL with <err> set when it has no
 * usable name. A weight that is absent, not a number, or not above 0 is 1 (as
 * Volcano's admission webhook sets it); a weight above 1e6 is 1e6. */
int cache_queue_parse(const cJSON *obj, enum cache_queue_api api, struct cache_queue *out,
		      char *err, size_t errlen);
/* Writer: add or replace <q> of <api>. */
int cache_queue_apply(struct cache *c, enum cache_queue_api api, const struct cache_queue *q);
/* Writer: remove <api>'s Queue <name>. -ENOENT when unknown. */
int cache_queue_delete(struct cache *c, enum cache_queue_api api, const char *name);
/* Any: the weight the first Queue API that has <name> gives it, and which API
 * (<api>, may be NULL). Returns false when none has it. */
bool cache_queue_weight(struct cache *c, const char *name, double *weight,
			enum cache_queue_api *api);
/* Any: visit every Queue of <api> (under the lock: <fn> must not call back). */
void cache_queue_foreach(struct cache *c, enum cache_queue_api api,
			 void (*fn)(const struct cache_queue *, void *), void *arg);

/* Parse a PodGroup of <api>. Returns NULL with <err> set when it has no name. */
struct cache_podgroup *cache_podgroup_parse_api(const cJSON *obj, enum cache_pg_api api,
						const struct cache_opts *opts, char *err,
						size_t errlen);
/* Parse a PodGroup of the API its apiVersion names (a snapshot's objects);
 * scheduling.x-k8s.io's when it names none. NULL with <err> set when it has
 * no name or names an API troupe does not read. */
struct cache_podgroup *cache_podgroup_parse(const cJSON *obj, const struct cache_opts *opts,
					    char *err, size_t errlen);
void cache_podgroup_free(struct cache_podgroup *pg);
/* Writer: add or replace (takes ownership, also on error). */
int cache_podgroup_apply(struct cache *c, struct cache_podgroup *pg);
/* Writer: remove <api>'s group ns/name. -ENOENT when unknown. */
int cache_podgroup_delete(struct cache *c, enum cache_pg_api api, const char *ns,
			  const char *name);
/* Any: copy pod group ns/name into <out>, from the first API of
 * cache_pg_precedence that has it (strings point into <buf>; a <buf> of
 * K8S_KEY_BUF + K8S_UID_BUF + K8S_NAME_BUF holds them all, a shorter one
 * leaves uid and queue ""). */
int cache_podgroup_get(struct cache *c, const char *ns, const char *name,
		       struct cache_podgroup *out, char *buf, size_t buflen);
/* Any: visit every pod group of every API (under the pod-group lock: <fn>
 * must not call back into the cache). */
void cache_podgroup_foreach(struct cache *c, void (*fn)(const struct cache_podgroup *, void *),
			    void *arg);
/* Any: visit each pod group's PodGroup once: of the first API of
 * cache_pg_precedence that has it, the one cache_podgroup_get gives (same
 * lock and rule for <fn>). */
void cache_podgroup_foreach_winning(struct cache *c,
				    void (*fn)(const struct cache_podgroup *, void *), void *arg);

/* ---- Snapshot files ----------------------------------------------------- */

/* Writer: load a cluster snapshot (a v1 List of Node, Pod and PodGroup items, as
 * `kubectl get nodes,pods,podgroups -A -o json|yaml` prints it, or several such
 * documents). Items that cannot be used are skipped with a log line; a file
 * that cannot be read or parsed is an error with a message in <err>. */
int cache_snapshot_load(struct cache *c, const char *path, char *err, size_t errlen);

#endif
