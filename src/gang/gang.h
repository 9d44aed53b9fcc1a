/* gang: pod groups. Built so far: membership, and the whole-gang planner
 * (plan.c), a pure function that places every member of a gang at once across
 * network domains. Admission in filter, reservations, the bind barrier, expiry
 * and queues are the rest of [4/5] and will live here too.
 *
 * Thread: any; the functions only read their arguments.
 */
#ifndef TROUPE_GANG_GANG_H
#define TROUPE_GANG_GANG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "placement/placement.h"

/* If the pod object names a pod group, write "namespace/name" into <out> and
 * return true. The keys recognised, and their order, are cache_pod_group_name's. */
bool gang_pod_group(const cJSON *pod, char *out, size_t len);

/* ---- Planning a whole gang ---------------------------------------------------- */

enum { GANG_MAX_LEVELS = 8, GANG_MAX_KEYS = 4 };

/* Network-domain levels, coarse to fine; each level is named by the first of
 * its label keys a node carries. */
struct gang_levels {
	unsigned n;
	const char *keys[GANG_MAX_LEVELS][GANG_MAX_KEYS];       /* NULL-terminated rows */
};

/* troupe's default levels: zone; datacenter/tier-3; spine/tier-2; block/tier-1;
 * NVLink domain (topograph's accelerator labels, GFD's nvidia.com/gpu.clique). */
extern const struct gang_levels gang_default_levels;

/* One member's place: a node (index into the candidates) and its devices. */
struct gang_slot {
	unsigned node;
	uint64_t devices;
};

struct gang_plan {
	unsigned n_slots;
	struct gang_slot *slots;        /* n_slots entries; owned */
	int level;                      /* the domain level used; -1: no common domain */
	char domain[128];               /* the domain's label value ("" at level -1) */
	unsigned nodes_used;
};

/* Plan <members> members, each asking <req>, over the candidate nodes <views>
 * (n of them: the nodes kube-scheduler offered): the finest domain level that can
 * hold the whole gang, within it the domain needing the fewest nodes, the
 * fullest-fitting nodes first, and on each node the best device sets from
 * placement_node_choose. Returns 0 with <out> filled (free with gang_plan_fini),
 * or -ENOSPC with a reason a person can act on in <why>, or -ENOMEM. Pure: reads
 * its arguments only. Thread: any, inside the caller's cache read section. */
int gang_plan_make(const struct cache_node_view *views, unsigned n, unsigned members,
		   const struct placement_request *req, const struct gang_levels *levels,
		   struct gang_plan *out, char *why, size_t whylen);
void gang_plan_fini(struct gang_plan *p);

#endif
