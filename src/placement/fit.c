/* Node feasibility for one pod: known, Ready, not cordoned, advertises the GPU
 * kind the pod asks for, and has enough free devices. The order of the checks
 * is the order of the reasons a person would want to read: a node that can
 * never fit says so before it says it is busy. */
#include "placement/placement.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static enum placement_verdict refuse(struct placement_fit *out, enum placement_verdict v,
				     enum placement_why why, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static enum placement_verdict refuse(struct placement_fit *out, enum placement_verdict v,
				     enum placement_why why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
	va_end(ap);
	out->verdict = v;
	out->why = why;
	return v;
}

/* Append <s> at <*at> in <buf> (of <len>), truncating. */
static void put_str(char *buf, size_t len, size_t *at, const char *s)
{
	while (*s && *at + 1 < len)
		buf[(*at)++] = *s++;
}

static void put_uint(char *buf, size_t len, size_t *at, unsigned v)
{
	char digits[12];
	unsigned n = 0;

	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n && *at + 1 < len)
		buf[(*at)++] = digits[--n];
}

/* "troupe: F of A <resource> free, pod needs W": the reason most refused nodes
 * get in a busy cluster, built without printf (it was a tenth of a filter's
 * time over 5,000 nodes). Same text as refuse() would write. */
static enum placement_verdict refuse_busy(struct placement_fit *out, unsigned free_gpus,
					  unsigned allocatable, const char *rname, unsigned want)
{
	char *b = out->reason;
	size_t len = sizeof(out->reason), at = 0;

	put_str(b, len, &at, "troupe: ");
	put_uint(b, len, &at, free_gpus);
	put_str(b, len, &at, " of ");
	put_uint(b, len, &at, allocatable);
	put_str(b, len, &at, " ");
	put_str(b, len, &at, rname);
	put_str(b, len, &at, " free, pod needs ");
	put_uint(b, len, &at, want);
	b[at] = '\0';
	out->verdict = PLACEMENT_UNSCHEDULABLE;
	out->why = PLACEMENT_WHY_FREE;
	return PLACEMENT_UNSCHEDULABLE;
}

/* A MIG mixed node without the profile asked for: say which it has, free of
 * all, so a person sees the profiles at a glance. */
static enum placement_verdict refuse_mig_profile(struct placement_fit *out,
						 const struct cache_node *n,
						 const char *const *resource_names,
						 const char *rname)
{
	char has[PLACEMENT_REASON_LEN] = "";
	size_t at = 0;

	for (int r = 0; r < CACHE_MAX_GPU_RESOURCES && resource_names[r]; r++) {
		int w;

		if (!n->res_mask[r])
			continue;
		w = snprintf(has + at, sizeof(has) - at, "%s%s x%u", at ? ", " : "",
			     resource_names[r], n->res_alloc[r]);
		if (w < 0 || (size_t)w >= sizeof(has) - at)
			break;
		at += (size_t)w;
	}
	return refuse(out, PLACEMENT_UNRESOLVABLE, PLACEMENT_WHY_NO_GPU_KIND,
		      "troupe: node has no %s (MIG mixed: %s)", rname, has);
}

void placement_unknown_node(struct placement_fit *out)
{
	out->free_gpus = 0;
	/* Resolvable: the watch may simply not have shown the node yet. */
	refuse(out, PLACEMENT_UNSCHEDULABLE, PLACEMENT_WHY_UNKNOWN_NODE,
	       "troupe: node unknown to troupe (not in its cache)");
}

enum placement_verdict placement_check(const struct cache_node_view *view,
				       const struct cache_demand *demand,
				       const char *const *resource_names,
				       struct placement_fit *out)
{
	const struct cache_node *n = view->node;
	const char *rname;
	uint32_t want = demand->gpus, capacity, allocatable;
	enum placement_usable usable;

	out->reason[0] = '\0';
	out->verdict = PLACEMENT_FITS;
	out->why = PLACEMENT_WHY_FITS;
	out->free_gpus = cache_view_free_for(view, demand->gpu_resource);
	if (want == 0)
		return PLACEMENT_FITS;
	rname = resource_names[demand->gpu_resource];
	usable = placement_node_usable(n, demand->gpu_resource);
	if (usable == PLACEMENT_NO_GPU_KIND) {
		if (n->res_mask)
			return refuse_mig_profile(out, n, resource_names, rname);
		return refuse(out, PLACEMENT_UNRESOLVABLE, PLACEMENT_WHY_NO_GPU_KIND,
			      "troupe: node has no %s", rname);
	}
	capacity = n->res_mask ? (uint32_t)__builtin_popcountll(n->res_mask[demand->gpu_resource])
			       : n->gpu_capacity;
	allocatable = cache_node_res_allocatable(n, demand->gpu_resource);
	/* Too few GPUs is for good, so it is said before a state that passes. */
	if (capacity < want)
		return refuse(out, PLACEMENT_UNRESOLVABLE, PLACEMENT_WHY_CAPACITY,
			      "troupe: node has %u %s, pod needs %u", capacity, rname, want);
	/* The device plugin's failRequestsGreaterThanOne: the kubelet would
	 * refuse the pod at admission, every time. */
	if (n->gpu_fail_gt1 && want > 1)
		return refuse(out, PLACEMENT_UNRESOLVABLE, PLACEMENT_WHY_CAPACITY,
			      "troupe: node shares its GPUs (%s) and refuses requests above 1 %s "
			      "(failRequestsGreaterThanOne); pod needs %u",
			      cache_sharing_name((enum cache_sharing)n->gpu_sharing), rname, want);
	if (usable == PLACEMENT_NOT_READY)
		return refuse(out, PLACEMENT_UNSCHEDULABLE, PLACEMENT_WHY_NOT_READY,
			      "troupe: node is not Ready");
	if (usable == PLACEMENT_CORDONED)
		return refuse(out, PLACEMENT_UNSCHEDULABLE, PLACEMENT_WHY_CORDONED,
			      "troupe: node is cordoned (spec.unschedulable)");
	if (allocatable < want)
		return refuse(out, PLACEMENT_UNSCHEDULABLE, PLACEMENT_WHY_UNHEALTHY,
			      "troupe: only %u of %u %s healthy (allocatable), pod needs %u",
			      allocatable, capacity, rname, want);
	if (out->free_gpus < want)
		return refuse_busy(out, out->free_gpus, allocatable, rname, want);
	return PLACEMENT_FITS;
}

enum placement_verdict placement_check_request(const struct cache_node_view *view,
					       const struct placement_request *req,
					       const char *const *resource_names,
					       struct placement_fit *out)
{
	const struct placement_topo *t;
	const char *rname;
	struct placement_choice c;
	uint64_t healthy;
	unsigned k = req->demand.gpus;
	char lvl[16], name[PLACEMENT_LINK_NAME_BUF];

	if (placement_check(view, &req->demand, resource_names, out) != PLACEMENT_FITS)
		return out->verdict;
	if (k < 2 || (req->policy.kind != PLACEMENT_POLICY_REQUIRED &&
		      req->policy.kind != PLACEMENT_POLICY_REQUIRED_LEVEL))
		return PLACEMENT_FITS;
	if (placement_node_choose(view, req->demand.gpu_resource, cache_view_free_mask(view), k,
				  &req->policy, &c) == 0)
		return PLACEMENT_FITS;
	t = placement_node_topo(view->node);
	rname = resource_names[req->demand.gpu_resource];
	if (req->policy.kind == PLACEMENT_POLICY_REQUIRED)
		snprintf(lvl, sizeof(lvl), "NVLinked");
	else
		snprintf(lvl, sizeof(lvl), "%s or better",
			 placement_link_name(req->policy.min_level, name, sizeof(name)));
	/* Could an empty node meet it? If not, no eviction ever will. */
	healthy = cache_node_res_devices(view->node, req->demand.gpu_resource) &
		  ~view->node->unhealthy;
	if (cache_node_shared(view->node))
		return refuse(out, PLACEMENT_UNRESOLVABLE, PLACEMENT_WHY_TOPOLOGY_NEVER,
			      "troupe: node shares its GPUs (%s, %u per GPU); %u %s %s needs whole "
			      "GPUs", cache_sharing_name((enum cache_sharing)view->node->gpu_sharing),
			      view->node->gpu_replicas, k, rname, lvl);
	if (!t)
		return refuse(out, PLACEMENT_UNRESOLVABLE, PLACEMENT_WHY_TOPOLOGY_UNKNOWN,
			      "troupe: node's GPU topology is unknown; cannot promise %u %s %s",
			      k, rname, lvl);
	if (placement_node_choose(view, req->demand.gpu_resource, healthy, k, &req->policy, &c) < 0)
		return refuse(out, PLACEMENT_UNRESOLVABLE, PLACEMENT_WHY_TOPOLOGY_NEVER,
			      "troupe: no %u %s on this node are all %s (topology: %s)", k, rname,
			      lvl, t->source);
	return refuse(out, PLACEMENT_UNSCHEDULABLE, PLACEMENT_WHY_TOPOLOGY_FREE,
		      "troupe: no %u free %s all %s among the %u free", k, rname, lvl,
		      out->free_gpus);
}
