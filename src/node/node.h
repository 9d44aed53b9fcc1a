/* troupe-node: the program troupe runs on every GPU node (a DaemonSet). This
 * round it is the topology publisher: it reads the node's GPUs from NVML
 * (nvml.c, loaded at run time), or from `nvidia-smi topo -m` where NVML is
 * missing (smi.c), renders what it found as the `nvidia-smi topo -m` matrix
 * troupe's cache already reads (render.c), and writes it with the GPUs' UUIDs
 * onto its own Node's annotations when they change (publish.c).
 *
 * The module sits beside gang, above placement: it sees common, cache (the
 * API client) and placement (the matrix parser, so what it publishes is
 * checked with the very code troupe reads it with), never gang or extender.
 *
 * Errors: 0 or a negative errno, with a message naming what failed in <err>.
 * Thread: one; troupe-node is single-threaded.
 */
#ifndef TROUPE_NODE_NODE_H
#define TROUPE_NODE_NODE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "placement/topology.h"

struct strbuf;

/* The node annotations troupe-node owns. */
#define NODE_ANN_TOPOLOGY "troupe.io/gpu-topology"
#define NODE_ANN_UUIDS "troupe.io/gpu-uuids"
#define NODE_ANN_SOURCE "troupe.io/gpu-topology-source"
#define NODE_ANN_UNHEALTHY "troupe.io/gpu-unhealthy"

enum {
	NODE_UUID_BUF = 96,             /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
	NODE_BUS_ID_BUF = 32,           /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
	NODE_CPUS_BUF = 256,            /* "0-71,144-215", cut with "..." past that */
	NODE_ERR_BUF = 400,
};

struct node_gpu {
	char uuid[NODE_UUID_BUF];       /* "GPU-6f1c..." ("" when unknown) */
	char bus_id[NODE_BUS_ID_BUF];   /* "00000000:07:00.0" ("" when unknown) */
	char cpus[NODE_CPUS_BUF];       /* the CPUs close to it, as a list; "" unknown */
	int numa;                       /* its NUMA node, -1 unknown */
};

/* What a node's GPUs are and how they connect. link[i][j] is a
 * PLACEMENT_LINK_* level (topology.h), symmetric, 0 on the diagonal. */
struct node_gpus {
	unsigned n;
	struct node_gpu gpu[PLACEMENT_TOPO_MAX];
	uint8_t link[PLACEMENT_TOPO_MAX][PLACEMENT_TOPO_MAX];
	char source[32];                /* "nvml" or "nvidia-smi" */
	/* Devices that raised a device-fault XID since troupe-node started
	 * (node_nvml_watch; the caller keeps them): published as
	 * NODE_ANN_UNHEALTHY, which troupe never offers. */
	uint64_t unhealthy;
};

/* Read the GPUs through the NVML library at <library> (dlopen: a path, or a
 * name the loader searches, "libnvidia-ml.so.1"): UUIDs, PCI bus ids, NUMA
 * node and CPU affinity, the PCIe common ancestor of every pair, and the
 * active NVLinks, counted per peer GPU (direct links) or through NVSwitches
 * (a pair both linked to the switch fabric has the fewer of their switch
 * links, as nvidia-smi prints NV12 on a DGX A100). -ENOENT when the library
 * cannot be loaded; -EIO when an NVML call fails (the call and NVML's message
 * in <err>); -E2BIG over PLACEMENT_TOPO_MAX GPUs. */
int node_nvml_read(const char *library, struct node_gpus *out, char *err, size_t errlen);

/* A device fault NVML reported: GPU <gpu> (index) raised XID <xid>. */
struct node_xid {
	unsigned gpu;
	unsigned long long xid;
};

/* Wait up to <timeout_ms> (ending early when *<stop> is set, checked every
 * half second) for critical XID events of the node's GPUs through NVML at
 * <library>, and put those that are device faults (not the XIDs an
 * application causes: 13, 31, 43, 45, 68, 109) into <seen> (room for
 * *<n_seen>; on return, how many came). Returns as soon as a fault came, else
 * at the timeout, 0 either way. -ENOENT without the library, -ENOSYS when no
 * GPU reports XIDs (the caller then just sleeps), -EIO when a call fails. */
int node_nvml_watch(const char *library, unsigned timeout_ms, const volatile sig_atomic_t *stop,
		    struct node_xid *seen, unsigned *n_seen, char *err, size_t errlen);

/* The same from the text `nvidia-smi topo -m` printed (where NVML is
 * missing): parsed with troupe's own parser; no UUIDs or bus ids. -EINVAL
 * with the parser's message. */
int node_smi_parse(const char *text, size_t len, struct node_gpus *out, char *err,
		   size_t errlen);
/* Run <nvidia_smi> topo -m and parse it: -ENOENT when it cannot be run or
 * fails, else as node_smi_parse. */
int node_smi_read(const char *nvidia_smi, struct node_gpus *out, char *err, size_t errlen);

/* Append <g> as the matrix `nvidia-smi topo -m` prints: a header row, then
 * one row per GPU with its links ("X" on the diagonal), its CPU affinity and
 * NUMA node ("N/A" when unknown; the columns left out when no GPU has one),
 * tab-separated. placement_topo_parse reads it back to the same links and
 * NUMA nodes (tests/unit/node/test_render.c holds it to that). */
void node_topo_render(const struct node_gpus *g, struct strbuf *out);
/* The UUIDs in index order, comma-separated ("" when any is unknown). */
void node_uuids_render(const struct node_gpus *g, struct strbuf *out);

/* ---- Read-back: what the kubelet really gave each pod --------------------- */

#define NODE_ANN_ACTUAL "troupe.io/gpu-ids-actual"

/* One pod's devices of one resource, as the kubelet's PodResources API lists
 * them (the device plugin's ids: UUIDs for NVIDIA's plugin), over all its
 * containers. */
struct node_pod_devices {
	char ns[64];                    /* K8S_NAMESPACE_BUF */
	char name[254];                 /* K8S_NAME_BUF */
	char **ids;
	size_t n_ids;
};

/* List the pods holding devices of <resource> ("nvidia.com/gpu") through the
 * PodResources socket <socket> (the kubelet's pod-resources/kubelet.sock).
 * 0 with <*out> (<*n> pods; node_pod_devices_free) ; -ETIMEDOUT / -ENOSYS /
 * -EAGAIN (rate-limited) / -EIO / -EPROTO / -ENOMEM with <err> saying why. */
int node_podresources_list(const char *socket, const char *resource,
			   struct node_pod_devices **out, size_t *n, char *err, size_t errlen);
void node_pod_devices_free(struct node_pod_devices *p, size_t n);

/* The device indices <ids> name on the node <g> describes, as a mask: a
 * UUID of <g>, or a plain index below g->n. -ENOENT (with the id in <err>)
 * when one is neither (a MIG device, another plugin's naming); -EINVAL on a
 * repeated device. */
int node_ids_to_mask(const struct node_gpus *g, char *const *ids, size_t n, uint64_t *mask,
		     char *err, size_t errlen);

/* Write each listed pod's devices as NODE_ANN_ACTUAL ("0,3") on the pod,
 * where it differs, and only on pods whose spec.nodeName is <node>: one GET
 * and at most one merge patch per pod. <written> counts the pods patched,
 * <skipped> those not written (not this node's, ids that name no GPU, gone).
 * 0, or the first API failure as node_publish's. */
struct cache_api;
int node_readback(struct cache_api *api, const char *node, const struct node_gpus *g,
		  const struct node_pod_devices *pods, size_t n, unsigned *written,
		  unsigned *skipped, char *err, size_t errlen);

/* Write <g> onto Node <node> through <api>: NODE_ANN_TOPOLOGY (the matrix),
 * NODE_ANN_UUIDS and NODE_ANN_SOURCE (where it came from), by one merge patch,
 * only when one of them differs from what the Node has (<changed> says
 * whether it wrote). -EIO with the HTTP status in <err> when the server
 * refuses (404: no such node; 403: not allowed), -EPROTO on an answer that is
 * not a Node, else as cache_api_call. */
struct cache_api;
int node_publish(struct cache_api *api, const char *node, const struct node_gpus *g,
		 bool *changed, char *err, size_t errlen);

/* ---- Allocator mode: troupe-node as the device plugin --------------------- */

enum { NODE_CLAIM_CONTAINERS = 16 };

/* A pod of this node that may be the one the kubelet is admitting: bound
 * here, carrying troupe's choice, not finished or being deleted. */
struct node_claim {
	char ns[64];                    /* K8S_NAMESPACE_BUF */
	char name[254];                 /* K8S_NAME_BUF */
	char created[40];               /* metadata.creationTimestamp, RFC 3339 */
	uint64_t chosen;                /* troupe.io/gpu-ids */
	uint64_t held;                  /* what PodResources shows it holding */
	unsigned counts[NODE_CLAIM_CONTAINERS];  /* its GPU containers' counts */
	unsigned n_counts;
};

/* The answer to one container's GetPreferredAllocation (prefer.c states the
 * rule and "ambiguous"). */
struct node_prefer {
	uint64_t set;                   /* the devices to prefer */
	int claim;                      /* whose choice it is; -1: none matched */
	unsigned matches;               /* claims that matched */
	bool ambiguous;                 /* matches with different answers */
};

/* Answer a request of <size> devices from <available> including <must>,
 * with <claims> as this node's pods. -EINVAL when the request cannot be met
 * (fewer available than <size>, must-include not available or too many). */
int node_prefer(const struct node_gpus *g, const struct node_claim *claims, size_t n,
		uint64_t available, uint64_t must, unsigned size, struct node_prefer *out);

/* The claims in a PodList (the API's answer, JSON): pods on <node> asking
 * <resource> in their containers' limits with a valid troupe.io/gpu-ids.
 * <held> is left 0 for the caller. -EPROTO when it is not a PodList. */
int node_claims_parse(const char *json, size_t len, const char *node, const char *resource,
		      struct node_claim **out, size_t *n, char *err, size_t errlen);
void node_claims_free(struct node_claim *c);

struct node_plugin_opts {
	const char *dir;                /* the kubelet's device-plugins directory */
	const char *endpoint;           /* our socket's name in it (copied) */
	const char *resource;           /* "nvidia.com/gpu" */
	const char *cdi_kind;           /* CDI device kind: "nvidia.com/gpu" */
	const char *pod_resources;      /* the PodResources socket */
	const char *node;
	struct cache_api *api;          /* the plugin thread's own connection */
	/* The other strings must outlive the plugin (main()'s arguments). */
};

struct node_plugin;

/* Start the device plugin on a thread of its own: it serves once it has
 * GPUs (node_plugin_set_gpus), registers with the kubelet, and serves and
 * registers again when the kubelet deletes its socket (a kubelet restart).
 * NULL with <err> when the thread cannot start. */
struct node_plugin *node_plugin_start(const struct node_plugin_opts *o, char *err,
				      size_t errlen);
/* The GPUs to offer, with their health (g->unhealthy): ListAndWatch sends
 * the list again when it changed. Any thread. */
void node_plugin_set_gpus(struct node_plugin *p, const struct node_gpus *g);
/* Stop serving (the socket is removed) and free <p>. */
void node_plugin_stop(struct node_plugin *p);

#endif
