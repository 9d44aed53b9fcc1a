/* Node feasibility for one pod: known, Ready, not cordoned, advertises the GPU
 * kind the pod asks for, and has enough free devices. The order of the checks
 * is the order of the reasons a person would want to read: a node that can
 * never fit says so before it says it is busy. */
#include "placement/placement.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static enum placement_verdict refuse(struct placement_fit *out, enum placement_verdict v,
				     const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static enum placement_verdict refuse(struct placement_fit *out, enum placement_verdict v,
				     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
	va_end(ap);
	out->verdict = v;
	return v;
}

void placement_unknown_node(struct placement_fit *out)
{
	out->free_gpus = 0;
	/* Resolvable: the watch may simply not have shown the node yet. */
	refuse(out, PLACEMENT_UNSCHEDULABLE, "troupe: node unknown to troupe (not in its cache)");
}

enum placement_verdict placement_check(const struct cache_node_view *view,
				       const struct cache_demand *demand,
				       const char *const *resource_names,
				       struct placement_fit *out)
{
	const struct cache_node *n = view->node;
	const char *rname;
	uint32_t want = demand->gpus;

	out->reason[0] = '\0';
	out->verdict = PLACEMENT_FITS;
	out->free_gpus = n->gpu_resource == demand->gpu_resource ? cache_view_free_gpus(view) : 0;
	if (want == 0)
		return PLACEMENT_FITS;
	rname = resource_names[demand->gpu_resource];
	if (n->gpu_resource != demand->gpu_resource || n->gpu_capacity == 0)
		return refuse(out, PLACEMENT_UNRESOLVABLE, "troupe: node has no %s", rname);
	if (n->gpu_capacity < want)
		return refuse(out, PLACEMENT_UNRESOLVABLE,
			      "troupe: node has %u %s, pod needs %u", n->gpu_capacity, rname, want);
	if (!n->ready)
		return refuse(out, PLACEMENT_UNSCHEDULABLE, "troupe: node is not Ready");
	if (n->unschedulable)
		return refuse(out, PLACEMENT_UNSCHEDULABLE,
			      "troupe: node is cordoned (spec.unschedulable)");
	if (n->gpu_allocatable < want)
		return refuse(out, PLACEMENT_UNSCHEDULABLE,
			      "troupe: only %u of %u %s healthy (allocatable), pod needs %u",
			      n->gpu_allocatable, n->gpu_capacity, rname, want);
	if (out->free_gpus < want)
		return refuse(out, PLACEMENT_UNSCHEDULABLE, "troupe: %u of %u %s free, pod needs %u",
			      out->free_gpus, n->gpu_allocatable, rname, want);
	return PLACEMENT_FITS;
}
