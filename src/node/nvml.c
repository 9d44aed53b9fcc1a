/* Reading a node's GPUs from NVML, loaded at run time.
 *
 * libnvidia-ml.so.1 comes with the driver, not with troupe, so it is opened
 * with dlopen and each call looked up with dlsym: troupe-node starts (and says
 * why it publishes nothing) on a node without the driver, and the tests load a
 * fake library from a path instead. Calls a driver may lack (NUMA node id, the
 * far end's device type) are optional; the rest are required and a missing
 * one is an error naming it.
 *
 * Links. The PCIe level of a pair is nvmlDeviceGetTopologyCommonAncestor's.
 * NVLinks are read per link of each GPU: an active link whose far end is
 * another GPU of the node counts for that pair (DGX-1's hybrid cube mesh: NV1
 * and NV2); one whose far end is an NVSwitch (or no GPU of this node) counts
 * as a switch link, and two GPUs that both have switch links are joined
 * through the fabric at the fewer of their counts, which is what nvidia-smi
 * prints (NV12 between every pair of a DGX A100, NV18 on an H100 board). A
 * pair with NVLinks is given its NV level; one without, its PCIe level.
 */
#include "node/node.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "node/nvml_abi.h"

struct nvml {
	void *lib;
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	const char *(*error_string)(nvmlReturn_t);
	nvmlReturn_t (*count)(unsigned int *);
	nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
	nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *);
	nvmlReturn_t (*ancestor)(nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t *);
	nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned int, nvmlEnableState_t *);
	nvmlReturn_t (*link_pci)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *);
	/* Optional (NULL when the driver has not got it): */
	nvmlReturn_t (*link_type)(nvmlDevice_t, unsigned int, nvmlIntNvLinkDeviceType_t *);
	nvmlReturn_t (*cpu_affinity)(nvmlDevice_t, unsigned int, unsigned long *);
	nvmlReturn_t (*numa)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*set_create)(nvmlEventSet_t *);
	nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
	nvmlReturn_t (*set_wait)(nvmlEventSet_t, nvmlEventData_t *, unsigned int);
	nvmlReturn_t (*set_free)(nvmlEventSet_t);
};

/* One symbol to look up: its name, where it goes, whether it must exist. */
struct sym {
	const char *name;
	size_t offset;
	bool required;
};

#define SYM(field, name, req) { name, offsetof(struct nvml, field), req }
static const struct sym syms[] = {
	SYM(init, "nvmlInit_v2", true),
	SYM(shutdown, "nvmlShutdown", true),
	SYM(error_string, "nvmlErrorString", true),
	SYM(count, "nvmlDeviceGetCount_v2", true),
	SYM(handle, "nvmlDeviceGetHandleByIndex_v2", true),
	SYM(uuid, "nvmlDeviceGetUUID", true),
	SYM(pci, "nvmlDeviceGetPciInfo_v3", true),
	SYM(ancestor, "nvmlDeviceGetTopologyCommonAncestor", true),
	SYM(link_state, "nvmlDeviceGetNvLinkState", true),
	SYM(link_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2", true),
	SYM(link_type, "nvmlDeviceGetNvLinkRemoteDeviceType", false),
	SYM(cpu_affinity, "nvmlDeviceGetCpuAffinity", false),
	SYM(numa, "nvmlDeviceGetNumaNodeId", false),
	SYM(set_create, "nvmlEventSetCreate", false),
	SYM(register_events, "nvmlDeviceRegisterEvents", false),
	SYM(set_wait, "nvmlEventSetWait_v2", false),
	SYM(set_free, "nvmlEventSetFree", false),
};
#undef SYM

static int load(struct nvml *nv, const char *library, char *err, size_t errlen)
{
	memset(nv, 0, sizeof(*nv));
	nv->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
	if (!nv->lib) {
		snprintf(err, errlen, "cannot load the NVML library %s: %s", library, dlerror());
		return -ENOENT;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(nv->lib, syms[i].name);

		if (!f && syms[i].required) {
			snprintf(err, errlen, "the NVML library %s has no %s (a driver older than "
				 "troupe-node supports?)", library, syms[i].name);
			dlclose(nv->lib);
			nv->lib = NULL;
			return -ENOENT;
		}
		/* POSIX: a function pointer and void * convert both ways (dlsym). */
		memcpy((char *)nv + syms[i].offset, &f, sizeof(f));
	}
	return 0;
}

/* "nvmlDeviceGetUUID(GPU 3): Not Supported". */
static int fail(const struct nvml *nv, nvmlReturn_t rc, const char *call, int gpu, char *err,
		size_t errlen)
{
	const char *msg = nv->error_string ? nv->error_string(rc) : NULL;

	if (gpu >= 0)
		snprintf(err, errlen, "NVML %s(GPU %d) failed: %s (%d)", call, gpu,
			 msg ? msg : "unknown error", (int)rc);
	else
		snprintf(err, errlen, "NVML %s failed: %s (%d)", call, msg ? msg : "unknown error",
			 (int)rc);
	return -EIO;
}

static uint8_t pcie_level(nvmlGpuTopologyLevel_t l)
{
	switch (l) {
	case NVML_TOPOLOGY_INTERNAL:
	case NVML_TOPOLOGY_SINGLE: return PLACEMENT_LINK_PIX;
	case NVML_TOPOLOGY_MULTIPLE: return PLACEMENT_LINK_PXB;
	case NVML_TOPOLOGY_HOSTBRIDGE: return PLACEMENT_LINK_PHB;
	case NVML_TOPOLOGY_NODE: return PLACEMENT_LINK_NODE;
	default: return PLACEMENT_LINK_SYS;
	}
}

/* <mask> (cpu_set_size words) as "0-71,144-215"; cut with "..." when long. */
static void cpu_list(const unsigned long *mask, unsigned words, char *buf, size_t len)
{
	const unsigned bits = (unsigned)(8 * sizeof(unsigned long));
	size_t at = 0;

	buf[0] = '\0';
	for (unsigned c = 0; c < words * bits; c++) {
		unsigned end = c;
		int w;

		if (!(mask[c / bits] >> (c % bits) & 1UL))
			continue;
		while (end + 1 < words * bits && (mask[(end + 1) / bits] >> ((end + 1) % bits) & 1UL))
			end++;
		w = end > c ? snprintf(buf + at, len - at, "%s%u-%u", at ? "," : "", c, end)
			    : snprintf(buf + at, len - at, "%s%u", at ? "," : "", c);
		if (w < 0 || (size_t)w >= len - at) {
			snprintf(buf + (len > 4 ? len - 4 : 0), len > 4 ? 4 : len, "...");
			return;
		}
		at += (size_t)w;
		c = end;
	}
}

/* The GPU of <g> at PCI bus id <bus>, or -1. */
static int gpu_at(const struct node_gpus *g, const char *bus)
{
	for (unsigned i = 0; i < g->n; i++)
		if (strcasecmp(g->gpu[i].bus_id, bus) == 0)
			return (int)i;
	return -1;
}

static int read_all(const struct nvml *nv, struct node_gpus *out, char *err, size_t errlen)
{
	enum { AFFINITY_WORDS = 16 };   /* 1,024 CPUs */
	nvmlDevice_t dev[PLACEMENT_TOPO_MAX];
	unsigned direct[PLACEMENT_TOPO_MAX][PLACEMENT_TOPO_MAX], to_switch[PLACEMENT_TOPO_MAX];
	unsigned count = 0;
	nvmlReturn_t rc;

	memset(direct, 0, sizeof(direct));
	memset(to_switch, 0, sizeof(to_switch));
	if ((rc = nv->count(&count)) != NVML_SUCCESS)
		return fail(nv, rc, "nvmlDeviceGetCount_v2", -1, err, errlen);
	if (count > PLACEMENT_TOPO_MAX) {
		snprintf(err, errlen, "NVML reports %u GPUs; troupe handles at most %d per node",
			 count, PLACEMENT_TOPO_MAX);
		return -E2BIG;
	}
	out->n = count;
	for (unsigned i = 0; i < count; i++) {
		struct node_gpu *gp = &out->gpu[i];
		nvmlPciInfo_t pci;
		unsigned long mask[AFFINITY_WORDS];
		unsigned numa;

		if ((rc = nv->handle(i, &dev[i])) != NVML_SUCCESS)
			return fail(nv, rc, "nvmlDeviceGetHandleByIndex_v2", (int)i, err, errlen);
		if ((rc = nv->uuid(dev[i], gp->uuid, sizeof(gp->uuid))) != NVML_SUCCESS)
			return fail(nv, rc, "nvmlDeviceGetUUID", (int)i, err, errlen);
		gp->uuid[sizeof(gp->uuid) - 1] = '\0';
		memset(&pci, 0, sizeof(pci));
		if ((rc = nv->pci(dev[i], &pci)) != NVML_SUCCESS)
			return fail(nv, rc, "nvmlDeviceGetPciInfo_v3", (int)i, err, errlen);
		pci.busId[sizeof(pci.busId) - 1] = '\0';
		snprintf(gp->bus_id, sizeof(gp->bus_id), "%s", pci.busId);
		gp->numa = -1;
		if (nv->numa && nv->numa(dev[i], &numa) == NVML_SUCCESS && numa < 1024)
			gp->numa = (int)numa;
		gp->cpus[0] = '\0';
		memset(mask, 0, sizeof(mask));
		if (nv->cpu_affinity && nv->cpu_affinity(dev[i], AFFINITY_WORDS, mask) == NVML_SUCCESS)
			cpu_list(mask, AFFINITY_WORDS, gp->cpus, sizeof(gp->cpus));
	}
	for (unsigned i = 0; i < count; i++) {
		for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
			nvmlEnableState_t on = NVML_FEATURE_DISABLED;
			nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_GPU;
			nvmlPciInfo_t far;
			int peer;

			rc = nv->link_state(dev[i], l, &on);
			/* A link the GPU has not got (fewer than 18): not supported. */
			if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT)
				break;
			if (rc != NVML_SUCCESS)
				return fail(nv, rc, "nvmlDeviceGetNvLinkState", (int)i, err, errlen);
			if (on != NVML_FEATURE_ENABLED)
				continue;
			if (nv->link_type && nv->link_type(dev[i], l, &type) != NVML_SUCCESS)
				type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
			memset(&far, 0, sizeof(far));
			if ((rc = nv->link_pci(dev[i], l, &far)) != NVML_SUCCESS)
				return fail(nv, rc, "nvmlDeviceGetNvLinkRemotePciInfo_v2", (int)i, err,
					    errlen);
			far.busId[sizeof(far.busId) - 1] = '\0';
			peer = type == NVML_NVLINK_DEVICE_TYPE_SWITCH ? -1 : gpu_at(out, far.busId);
			if (peer >= 0 && peer != (int)i)
				direct[i][peer]++;
			else if (peer < 0)
				to_switch[i]++;
		}
	}
	for (unsigned i = 0; i < count; i++) {
		out->link[i][i] = PLACEMENT_LINK_NONE;
		for (unsigned j = i + 1; j < count; j++) {
			nvmlGpuTopologyLevel_t lvl;
			/* Each end counts the links it sees; take the fewer. */
			unsigned links = direct[i][j] < direct[j][i] ? direct[i][j] : direct[j][i];
			unsigned sw = to_switch[i] < to_switch[j] ? to_switch[i] : to_switch[j];

			links += sw;
			if (links > PLACEMENT_LINK_MAX_NV - PLACEMENT_LINK_NV0)
				links = PLACEMENT_LINK_MAX_NV - PLACEMENT_LINK_NV0;
			if (links) {
				out->link[i][j] = (uint8_t)(PLACEMENT_LINK_NV0 + links);
			} else {
				rc = nv->ancestor(dev[i], dev[j], &lvl);
				if (rc != NVML_SUCCESS)
					return fail(nv, rc, "nvmlDeviceGetTopologyCommonAncestor",
						    (int)i, err, errlen);
				out->link[i][j] = pcie_level(lvl);
			}
			out->link[j][i] = out->link[i][j];
		}
	}
	return 0;
}

int node_nvml_read(const char *library, struct node_gpus *out, char *err, size_t errlen)
{
	struct nvml nv;
	nvmlReturn_t rc;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = load(&nv, library, err, errlen);
	if (ret < 0)
		return ret;
	rc = nv.init();
	if (rc != NVML_SUCCESS) {
		ret = fail(&nv, rc, "nvmlInit_v2", -1, err, errlen);
		goto out;
	}
	ret = read_all(&nv, out, err, errlen);
	nv.shutdown();
	snprintf(out->source, sizeof(out->source), "nvml");
out:
	if (ret < 0)
		memset(out, 0, sizeof(*out));
	dlclose(nv.lib);
	return ret;
}

/* XIDs an application causes, not the device (NVIDIA's k8s-device-plugin
 * skips the same): 13 graphics engine exception, 31 GPU memory page fault,
 * 43 GPU stopped processing, 45 preemptive cleanup, 68 video processor
 * exception, 109 context switch timeout. */
static bool application_xid(unsigned long long xid)
{
	static const unsigned long long app[] = { 13, 31, 43, 45, 68, 109 };

	for (size_t i = 0; i < sizeof(app) / sizeof(app[0]); i++)
		if (xid == app[i])
			return true;
	return false;
}

int node_nvml_watch(const char *library, unsigned timeout_ms, const volatile sig_atomic_t *stop,
		    struct node_xid *seen, unsigned *n_seen, char *err, size_t errlen)
{
	enum { SLICE_MS = 500 };
	nvmlDevice_t dev[PLACEMENT_TOPO_MAX];
	nvmlEventSet_t set = NULL;
	unsigned count = 0, registered = 0, waited = 0, cap = *n_seen;
	struct nvml nv;
	nvmlReturn_t rc;
	int ret;

	*n_seen = 0;
	ret = load(&nv, library, err, errlen);
	if (ret < 0)
		return ret;
	if (!nv.set_create || !nv.register_events || !nv.set_wait || !nv.set_free) {
		snprintf(err, errlen, "the NVML library %s has no event calls", library);
		dlclose(nv.lib);
		return -ENOSYS;
	}
	if ((rc = nv.init()) != NVML_SUCCESS) {
		ret = fail(&nv, rc, "nvmlInit_v2", -1, err, errlen);
		dlclose(nv.lib);
		return ret;
	}
	ret = -EIO;
	if ((rc = nv.count(&count)) != NVML_SUCCESS) {
		ret = fail(&nv, rc, "nvmlDeviceGetCount_v2", -1, err, errlen);
		goto out;
	}
	if ((rc = nv.set_create(&set)) != NVML_SUCCESS) {
		ret = fail(&nv, rc, "nvmlEventSetCreate", -1, err, errlen);
		goto out;
	}
	for (unsigned i = 0; i < count && i < PLACEMENT_TOPO_MAX; i++) {
		if (nv.handle(i, &dev[i]) != NVML_SUCCESS)
			continue;
		/* A GPU that cannot report XIDs (older boards) is simply not
		 * watched; the others still are. */
		if (nv.register_events(dev[i], nvmlEventTypeXidCriticalError, set) == NVML_SUCCESS)
			registered++;
	}
	if (!registered) {
		snprintf(err, errlen, "no GPU of this node reports XID events");
		ret = -ENOSYS;
		goto out;
	}
	/* Wait in slices, so a stop is seen within half a second; return as
	 * soon as a device fault came (and whatever came with it). */
	while (waited < timeout_ms && !(stop && *stop) && *n_seen == 0) {
		unsigned slice = timeout_ms - waited < SLICE_MS ? timeout_ms - waited : SLICE_MS;
		nvmlEventData_t ev;

		for (;;) {
			memset(&ev, 0, sizeof(ev));
			rc = nv.set_wait(set, &ev, slice);
			if (rc != NVML_SUCCESS)
				break;
			slice = 0;      /* take what else is there, then stop waiting */
			if (!(ev.eventType & nvmlEventTypeXidCriticalError) ||
			    application_xid(ev.eventData))
				continue;
			for (unsigned i = 0; i < count && i < PLACEMENT_TOPO_MAX; i++)
				if (dev[i] == ev.device && *n_seen < cap) {
					seen[*n_seen].gpu = i;
					seen[*n_seen].xid = ev.eventData;
					(*n_seen)++;
				}
		}
		if (rc != NVML_ERROR_TIMEOUT && rc != NVML_SUCCESS) {
			ret = fail(&nv, rc, "nvmlEventSetWait_v2", -1, err, errlen);
			goto out;
		}
		waited += slice ? slice : SLICE_MS;
	}
	ret = 0;
out:
	if (set)
		nv.set_free(set);
	nv.shutdown();
	dlclose(nv.lib);
	return ret;
}
