/* simulate_gangs: the gang planners of troupe's peers, as baselines for
 * `troupe simulate` (a policy's "@GANG" part). Each places a whole gang of
 * <members> pods, each asking <req>, at once over the nodes in <views>, the
 * way that peer's documented algorithm does, so that a comparison can say
 * what troupe's own planner (gang_plan_make) is worth against them:
 *
 *   kueue-bestfit    Kueue's Topology Aware Scheduling, BestFit (KEP-2724;
 *                    sigs.k8s.io/kueue v0.17.0
 *                    pkg/cache/scheduler/tas_flavor_snapshot.go);
 *   kueue-leastfree  the same with the LeastFreeCapacity algorithm (the
 *                    TASProfileLeastFreeCapacity profile, removed in v0.17;
 *                    still the algorithm of v0.17's unconstrained requests);
 *   kai              NVIDIA KAI-Scheduler's topology plugin
 *                    (pkg/scheduler/plugins/topology/);
 *   kube-tas         kube-scheduler's topology-aware workload scheduling
 *                    (KEP-5732: one placement per value of one label key,
 *                    the feasible ones scored by MostAllocated; the key
 *                    the finest level, or kube-tas:LEVEL).
 *
 * Each planner refuses the nodes placement_check_request refuses (the
 * filter's rule: not Ready, cordoned, too few free GPUs, no set meeting a
 * required policy), takes devices with <chooser> (simulate_choosers.c) when
 * it is set, else placement_node_choose under req->policy, never hands out a
 * device twice, and reads the network domains with gang_domain_of under
 * <levels>. What each models, and what it leaves out, is said in
 * simulate_gangs.c above it.
 *
 * Thread: any; each call reads its arguments only (and advances <rng>).
 */
#ifndef TROUPE_EXTENDER_SIMULATE_GANGS_H
#define TROUPE_EXTENDER_SIMULATE_GANGS_H

#include <stdint.h>

#include "extender/simulate.h"
#include "gang/gang.h"

/* A sim_gang_fn (simulate.h, where a policy names one) fills <out> with
 * <members> slots (node: an index into <views>; devices: exactly
 * req->demand.gpus free devices) and returns 0; or returns -ENOSPC when the
 * gang cannot be placed now, -EINVAL for a request that asks nothing,
 * -ENOMEM; <out> is then empty. Free <out> with gang_plan_fini
 * (after any return). The views are never changed. */

/* The planner called <name> ("kueue-bestfit", "kueue-leastfree", "kai",
 * "kube-tas", or "kube-tas:LEVEL", LEVEL one of zone, datacenter, spine,
 * block, clique: the key at that index of <levels>, gang_default_levels'
 * order; plain kube-tas keys on the finest level the nodes carry), or NULL
 * when unknown. */
sim_gang_fn sim_gang_planner_find(const char *name);

/* Every planner's name, NULL-terminated, for --help and errors. */
extern const char *const sim_gang_planner_names[];

#endif
