/* gang: pod groups. This release only recognises membership, so that the
 * extender can say when a pod belongs to a gang; all-or-nothing admission, the
 * bind barrier and queues arrive with [4/5] and live here.
 *
 * Thread: any; the functions only read their arguments.
 */
#ifndef TROUPE_GANG_GANG_H
#define TROUPE_GANG_GANG_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "placement/placement.h"

/* If the pod object names a pod group, write "namespace/name" into <out> and
 * return true. The keys recognised, and their order, are cache_pod_group_name's. */
bool gang_pod_group(const cJSON *pod, char *out, size_t len);

#endif
