/* A fake NVML for troupe-node's tests: a shared library exporting the NVML
 * calls troupe-node looks up (src/node/nvml_abi.h), answering from one of the
 * project's real topology captures (tests/data/topo, `nvidia-smi topo -m` of
 * real machines), so the same code path that runs on real GPUs is driven by
 * real shapes.
 *
 * Environment:
 *   FAKE_NVML_TOPO   the capture to answer from (required; nvmlInit_v2 fails
 *                    with NVML_ERROR_DRIVER_NOT_LOADED without it)
 *   FAKE_NVML_FAIL   the name of one call that then fails (NVML_ERROR_UNKNOWN)
 *   FAKE_NVML_XIDS   a file of injected XID events, one "GPU XID" per line
 *                    ("2 79"): nvmlEventSetWait_v2 delivers each line once, in
 *                    order, to an event set with that GPU registered, as the
 *                    file grows (a test appends to it while troupe-node runs)
 *
 * How the capture becomes NVML's answers:
 *   - GPU i: UUID "GPU-fake-0000-<i>", bus id "00000000:<0x10+i>:00.0",
 *     its NUMA node from the capture (nvmlDeviceGetNumaNodeId; not supported
 *     when the capture has none), CPUs 16k..16k+15 for NUMA node k.
 *   - A PCIe pair: nvmlDeviceGetTopologyCommonAncestor gives the capture's
 *     level (PIX SINGLE, PXB MULTIPLE, PHB HOSTBRIDGE, NODE, SYS SYSTEM).
 *   - NVLinks: when the NVLinked GPUs are all joined to each other with the
 *     same count c and that needs more than the 18 links a GPU has (DGX
 *     A100/H100), each has c links to an NVSwitch; otherwise (DGX-1) c links
 *     straight to each peer, one link slot per link.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node/nvml_abi.h"
#include "placement/topology.h"

#define EXPORT __attribute__((visibility("default")))

struct fake_gpu {
	unsigned index;
	unsigned nlinks;
	int peer[NVML_NVLINK_MAX_LINKS];        /* -1: an NVSwitch */
};

static struct placement_topo topo;
static struct fake_gpu gpus[PLACEMENT_TOPO_MAX];
static bool ready;

static bool failing(const char *call)
{
	const char *f = getenv("FAKE_NVML_FAIL");

	return f && strcmp(f, call) == 0;
}

static struct fake_gpu *dev_of(nvmlDevice_t d)
{
	struct fake_gpu *g = (struct fake_gpu *)d;

	return ready && g >= gpus && g < gpus + topo.n ? g : NULL;
}

static void bus_id(unsigned i, char *buf, size_t len)
{
	snprintf(buf, len, "00000000:%02X:00.0", 0x10 + i);
}

/* Lay out the NVLinks (see the top of the file). False when the capture
 * needs more links than a GPU has. */
static bool lay_links(void)
{
	unsigned c = 0, linked = 0;
	bool all_same = true;

	for (unsigned i = 0; i < topo.n; i++) {
		bool any = false;

		for (unsigned j = 0; j < topo.n; j++) {
			uint8_t l = topo.link[i][j];

			if (i == j || !placement_link_is_nvlink(l))
				continue;
			any = true;
			if (!c)
				c = l - PLACEMENT_LINK_NV0;
			all_same &= l - PLACEMENT_LINK_NV0 == (int)c;
		}
		linked += any;
	}
	for (unsigned i = 0; i < topo.n && all_same; i++)
		for (unsigned j = 0; j < topo.n; j++) {
			bool li = false, lj = false;

			for (unsigned k = 0; k < topo.n; k++) {
				li |= k != i && placement_link_is_nvlink(topo.link[i][k]);
				lj |= k != j && placement_link_is_nvlink(topo.link[j][k]);
			}
			if (i != j && li && lj && !placement_link_is_nvlink(topo.link[i][j]))
				all_same = false;
		}
	for (unsigned i = 0; i < topo.n; i++) {
		gpus[i].index = i;
		gpus[i].nlinks = 0;
	}
	if (linked > 2 && all_same && c * (linked - 1) > NVML_NVLINK_MAX_LINKS) {
		for (unsigned i = 0; i < topo.n; i++) {
			bool any = false;

			for (unsigned j = 0; j < topo.n; j++)
				any |= i != j && placement_link_is_nvlink(topo.link[i][j]);
			for (unsigned l = 0; any && l < c; l++)
				gpus[i].peer[gpus[i].nlinks++] = -1;
		}
		return true;
	}
	for (unsigned i = 0; i < topo.n; i++)
		for (unsigned j = 0; j < topo.n; j++) {
			uint8_t l = topo.link[i][j];

			if (i == j || !placement_link_is_nvlink(l))
				continue;
			for (int k = 0; k < l - PLACEMENT_LINK_NV0; k++) {
				if (gpus[i].nlinks == NVML_NVLINK_MAX_LINKS)
					return false;
				gpus[i].peer[gpus[i].nlinks++] = (int)j;
			}
		}
	return true;
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
	const char *path = getenv("FAKE_NVML_TOPO");
	char err[256], *text = NULL;
	long len;
	FILE *f;

	if (failing("nvmlInit_v2") || !path || !(f = fopen(path, "rb")))
		return NVML_ERROR_DRIVER_NOT_LOADED;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	text = len >= 0 ? malloc((size_t)len + 1) : NULL;
	if (!text || fread(text, 1, (size_t)len, f) != (size_t)len) {
		fclose(f);
		free(text);
		return NVML_ERROR_UNKNOWN;
	}
	fclose(f);
	text[len] = '\0';
	memset(&topo, 0, sizeof(topo));
	if (placement_topo_parse(text, (size_t)len, &topo, err, sizeof(err)) < 0 || !lay_links()) {
		fprintf(stderr, "fake_nvml: %s: %s\n", path, err);
		free(text);
		return NVML_ERROR_UNKNOWN;
	}
	free(text);
	ready = true;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
	ready = false;
	return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	default: return "Unknown Error";
	}
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!ready)
		return NVML_ERROR_UNINITIALIZED;
	if (failing("nvmlDeviceGetCount_v2"))
		return NVML_ERROR_UNKNOWN;
	*count = topo.n;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
	if (!ready)
		return NVML_ERROR_UNINITIALIZED;
	if (i >= topo.n)
		return NVML_ERROR_INVALID_ARGUMENT;
	*d = (nvmlDevice_t)&gpus[i];
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
	struct fake_gpu *g = dev_of(d);

	if (!g)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (failing("nvmlDeviceGetUUID"))
		return NVML_ERROR_UNKNOWN;
	snprintf(uuid, len, "GPU-fake-0000-%04u", g->index);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
	struct fake_gpu *g = dev_of(d);

	if (!g)
		return NVML_ERROR_INVALID_ARGUMENT;
	memset(pci, 0, sizeof(*pci));
	pci->bus = 0x10 + g->index;
	bus_id(g->index, pci->busId, sizeof(pci->busId));
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "0000:%02X:00.0", 0x10 + g->index);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
							nvmlGpuTopologyLevel_t *level)
{
	struct fake_gpu *x = dev_of(a), *y = dev_of(b);

	if (!x || !y)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (failing("nvmlDeviceGetTopologyCommonAncestor"))
		return NVML_ERROR_UNKNOWN;
	switch (topo.link[x->index][y->index]) {
	case PLACEMENT_LINK_PIX: *level = NVML_TOPOLOGY_SINGLE; break;
	case PLACEMENT_LINK_PXB: *level = NVML_TOPOLOGY_MULTIPLE; break;
	case PLACEMENT_LINK_PHB: *level = NVML_TOPOLOGY_HOSTBRIDGE; break;
	case PLACEMENT_LINK_NODE: *level = NVML_TOPOLOGY_NODE; break;
	case PLACEMENT_LINK_NONE: *level = NVML_TOPOLOGY_INTERNAL; break;
	default: *level = NVML_TOPOLOGY_SYSTEM; break;
	}
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link,
					     nvmlEnableState_t *on)
{
	struct fake_gpu *g = dev_of(d);

	if (!g || link >= NVML_NVLINK_MAX_LINKS)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (failing("nvmlDeviceGetNvLinkState"))
		return NVML_ERROR_UNKNOWN;
	/* A GPU without NVLink at all answers as real PCIe-only boards do. */
	if (g->nlinks == 0)
		return NVML_ERROR_NOT_SUPPORTED;
	*on = link < g->nlinks ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link,
							nvmlPciInfo_t *pci)
{
	struct fake_gpu *g = dev_of(d);

	if (!g || link >= g->nlinks)
		return NVML_ERROR_INVALID_ARGUMENT;
	memset(pci, 0, sizeof(*pci));
	if (g->peer[link] < 0)
		snprintf(pci->busId, sizeof(pci->busId), "00000000:F0:00.0");     /* the switch */
	else
		bus_id((unsigned)g->peer[link], pci->busId, sizeof(pci->busId));
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned int link,
							nvmlIntNvLinkDeviceType_t *type)
{
	struct fake_gpu *g = dev_of(d);

	if (!g || link >= g->nlinks)
		return NVML_ERROR_INVALID_ARGUMENT;
	*type = g->peer[link] < 0 ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t d, unsigned int words,
					     unsigned long *set)
{
	struct fake_gpu *g = dev_of(d);
	int numa;

	if (!g)
		return NVML_ERROR_INVALID_ARGUMENT;
	numa = topo.numa[g->index];
	if (numa < 0)
		return NVML_ERROR_NOT_SUPPORTED;
	memset(set, 0, words * sizeof(*set));
	for (unsigned c = 16u * (unsigned)numa; c < 16u * (unsigned)numa + 16; c++)
		if (c / (8 * sizeof(*set)) < words)
			set[c / (8 * sizeof(*set))] |= 1UL << (c % (8 * sizeof(*set)));
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t d, unsigned int *node)
{
	struct fake_gpu *g = dev_of(d);

	if (!g)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (topo.numa[g->index] < 0)
		return NVML_ERROR_NOT_SUPPORTED;
	*node = (unsigned)topo.numa[g->index];
	return NVML_SUCCESS;
}

/* ---- Events: injected XIDs ------------------------------------------------ */

struct nvmlEventSet_st {
	uint64_t registered;            /* GPUs whose XIDs this set gets */
};

/* Lines of FAKE_NVML_XIDS already delivered, kept in FAKE_NVML_XIDS.seen: the
 * library is loaded and unloaded around every wait, and an event, as on
 * real GPUs, comes once. */
static long delivered(const char *path, long set_to)
{
	char seen[512];
	long n = 0;
	FILE *f;

	snprintf(seen, sizeof(seen), "%s.seen", path);
	if (set_to >= 0) {
		if ((f = fopen(seen, "w"))) {
			fprintf(f, "%ld\n", set_to);
			fclose(f);
		}
		return set_to;
	}
	if ((f = fopen(seen, "r"))) {
		if (fscanf(f, "%ld", &n) != 1)
			n = 0;
		fclose(f);
	}
	return n;
}

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
	if (!ready)
		return NVML_ERROR_UNINITIALIZED;
	*set = calloc(1, sizeof(**set));
	return *set ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types,
					     nvmlEventSet_t set)
{
	struct fake_gpu *g = dev_of(d);

	if (!g || !set)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (failing("nvmlDeviceRegisterEvents"))
		return NVML_ERROR_NOT_SUPPORTED;
	if (types & nvmlEventTypeXidCriticalError)
		set->registered |= 1ULL << g->index;
	return NVML_SUCCESS;
}

/* The next undelivered line of the XID file for a registered GPU. */
static bool next_xid(nvmlEventSet_t set, unsigned *gpu, unsigned long long *xid)
{
	const char *path = getenv("FAKE_NVML_XIDS");
	char line[128];
	long at = 0, done;
	bool found = false;
	FILE *f;

	if (!path || !(f = fopen(path, "r")))
		return false;
	done = delivered(path, -1);
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned g;
		unsigned long long x;

		if (at++ < done)
			continue;
		delivered(path, at);
		if (sscanf(line, "%u %llu", &g, &x) == 2 && g < topo.n &&
		    (set->registered & (1ULL << g))) {
			*gpu = g;
			*xid = x;
			found = true;
		}
	}
	fclose(f);
	return found;
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
					unsigned int timeout_ms)
{
	struct timespec ts = { 0, 50 * 1000000L };
	unsigned gpu;
	unsigned long long xid;

	if (!set || !data)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (unsigned waited = 0;; waited += 50) {
		if (next_xid(set, &gpu, &xid)) {
			memset(data, 0, sizeof(*data));
			data->device = (nvmlDevice_t)&gpus[gpu];
			data->eventType = nvmlEventTypeXidCriticalError;
			data->eventData = xid;
			return NVML_SUCCESS;
		}
		if (waited >= timeout_ms)
			return NVML_ERROR_TIMEOUT;
		nanosleep(&ts, NULL);
	}
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
	free(set);
	return NVML_SUCCESS;
}
