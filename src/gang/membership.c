/* Which pod group a pod belongs to, from the labels and annotations the common
 * gang schedulers use (see kube-interfaces.md section 9). */
#include "gang/gang.h"

#include <stdio.h>

#include "common/util.h"

static const struct {
	const char *field;      /* "labels" or "annotations" */
	const char *key;
} membership_keys[] = {
	{ "labels", "scheduling.x-k8s.io/pod-group" },
	{ "labels", "scheduling.sigs.k8s.io/pod-group" },
	{ "labels", "pod-group.scheduling.sigs.k8s.io" },
	{ "labels", "pod-group.scheduling.sigs.k8s.io/name" },
	{ "annotations", "scheduling.k8s.io/group-name" },
};

bool gang_pod_group(const cJSON *pod, char *out, size_t len)
{
	const cJSON *meta = json_obj(pod, "metadata");
	const char *ns = json_str(meta, "namespace");

	for (size_t i = 0; i < ARRAY_SIZE(membership_keys); i++) {
		const char *v = json_str(json_obj(meta, membership_keys[i].field),
					 membership_keys[i].key);

		if (v && v[0]) {
			snprintf(out, len, "%s/%s", ns && ns[0] ? ns : "default", v);
			return true;
		}
	}
	return false;
}
