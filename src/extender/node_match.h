/* node_match: whether a pod may go to a node as kube-scheduler's NodeAffinity
 * and TaintToleration plugins judge it (node_match.c says what is judged).
 */
#ifndef TROUPE_EXTENDER_NODE_MATCH_H
#define TROUPE_EXTENDER_NODE_MATCH_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"

/* Whether pod <pod> (its JSON) may go to <node> as far as its nodeSelector,
 * required node affinity and tolerations of the node's taints say. */
bool ext_pod_may_use_node(const cJSON *pod, const struct cache_node *node);

#endif
