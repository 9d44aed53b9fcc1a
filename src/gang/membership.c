/* Which pod group a pod belongs to, from the labels and annotations the common
 * gang schedulers use (see kube-interfaces.md section 9). */
#include "gang/gang.h"

#include <stdio.h>

#include "cache/cache.h"
#include "common/util.h"

bool gang_pod_group(const cJSON *pod, char *out, size_t len)
{
	const char *ns = json_str(json_obj(pod, "metadata"), "namespace");
	const char *name = cache_pod_group_name(pod);

	if (!name)
		return false;
	snprintf(out, len, "%s/%s", ns && ns[0] ? ns : "default", name);
	return true;
}
