/* The kubelet's PodResources API (v1, List), as troupe-node reads it: which
 * devices of one resource each pod's containers were given.
 *
 * The messages are protobuf-c's code generated at build time from
 * k8s.io/kubelet's podresources/v1/api.proto of the pinned release
 * (src/node/podresources/v1/, copied as it is; proto_for_c.py drops the one
 * proto3 `optional` Debian's protoc-c refuses). List is GA since 1.28; Get,
 * behind its own gate, is not used.
 */
#include "node/node_internal.h"

#include "common/limits.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podresources_v1.pb-c.h"

enum { PODRESOURCES_TIMEOUT_MS = 10000 };

void node_pod_devices_free(struct node_pod_devices *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < p[i].n_ids; j++)
			free(p[i].ids[j]);
		free(p[i].ids);
	}
	free(p);
}

/* Append <id> to <pd>'s ids. 0 or -ENOMEM. */
static int add_id(struct node_pod_devices *pd, const char *id)
{
	char **ids = realloc(pd->ids, (pd->n_ids + 1) * sizeof(*ids));

	if (!ids)
		return -ENOMEM;
	pd->ids = ids;
	if (!(ids[pd->n_ids] = strdup(id)))
		return -ENOMEM;
	pd->n_ids++;
	return 0;
}

int node_podresources_list(const char *socket, const char *resource,
			   struct node_pod_devices **out, size_t *n, char *err, size_t errlen)
{
	V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
	V1__ListPodResourcesResponse *resp = NULL;
	struct node_pod_devices *pods = NULL;
	uint8_t reqbuf[16], *answer = NULL;
	size_t reqlen, answerlen = 0, np = 0;
	int ret;

	*out = NULL;
	*n = 0;
	reqlen = v1__list_pod_resources_request__pack(&req, reqbuf);
	node__grpc_init();
	ret = node__grpc_unary(socket, "/v1.PodResourcesLister/List", reqbuf, reqlen,
			       PODRESOURCES_TIMEOUT_MS, &answer, &answerlen, err, errlen);
	node__grpc_shutdown();
	if (ret < 0)
		goto out;
	resp = v1__list_pod_resources_response__unpack(NULL, answerlen, answer);
	if (!resp) {
		snprintf(err, errlen, "PodResources List on %s: the answer is not a "
			 "ListPodResourcesResponse", socket);
		ret = -EPROTO;
		goto out;
	}
	pods = calloc(resp->n_pod_resources ? resp->n_pod_resources : 1, sizeof(*pods));
	if (!pods)
		goto nomem;
	for (size_t i = 0; i < resp->n_pod_resources; i++) {
		const V1__PodResources *pr = resp->pod_resources[i];
		struct node_pod_devices *pd = &pods[np];

		if (!pr->name || !pr->namespace_ || strlen(pr->name) >= sizeof(pd->name) ||
		    strlen(pr->namespace_) >= sizeof(pd->ns))
			continue;
		snprintf(pd->ns, sizeof(pd->ns), "%s", pr->namespace_);
		snprintf(pd->name, sizeof(pd->name), "%s", pr->name);
		for (size_t c = 0; c < pr->n_containers; c++) {
			const V1__ContainerResources *cr = pr->containers[c];

			for (size_t d = 0; d < cr->n_devices; d++) {
				const V1__ContainerDevices *cd = cr->devices[d];

				if (!cd->resource_name || strcmp(cd->resource_name, resource) != 0)
					continue;
				for (size_t k = 0; k < cd->n_device_ids; k++)
					if (cd->device_ids[k] && add_id(pd, cd->device_ids[k]) < 0)
						goto nomem;
			}
		}
		if (pd->n_ids) {
			np++;
		} else {
			free(pd->ids);
			pd->ids = NULL;
		}
	}
	*out = pods;
	*n = np;
	pods = NULL;
	ret = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory reading PodResources");
	ret = -ENOMEM;
out:
	/* Every entry past the filled ones is zeroed or half-filled: free all. */
	if (pods)
		node_pod_devices_free(pods, resp && resp->n_pod_resources ? resp->n_pod_resources : 1);
	if (resp)
		v1__list_pod_resources_response__free_unpacked(resp, NULL);
	free(answer);
	return ret;
}
