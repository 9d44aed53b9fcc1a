/* The kubelet's device plugin API as troupe-node's allocator uses it,
 * whatever the version on the wire.
 *
 * The API has one version today, v1beta1 (dp_v1beta1.c, the one file that
 * names its protobuf-c code, generated at build time from the pinned
 * release's api.proto). Everything else in the allocator (plugin.c) speaks
 * the plain structs below and a struct node__dp_api; a second version is one
 * more file filling one more struct node__dp_api, added to node__dp_apis[].
 * Registration tries the versions in that list's order and keeps the first
 * the kubelet accepts.
 */
#ifndef TROUPE_NODE_DP_API_H
#define TROUPE_NODE_DP_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A list of device ids (the plugin's: GPU UUIDs). */
struct dp_ids {
	char **id;
	size_t n;
};

/* One device as ListAndWatch reports it. */
struct dp_device {
	const char *id;
	bool healthy;
	int numa;                       /* -1: not reported */
};

/* GetPreferredAllocation's question for one container. */
struct dp_prefer_one {
	struct dp_ids available;
	struct dp_ids must;
	int size;
};

struct dp_prefer_req {
	struct dp_prefer_one *c;
	size_t n;
};

/* Allocate's question: each container's devices. */
struct dp_alloc_req {
	struct dp_ids *c;
	size_t n;
};

/* Allocate's answer for one container: NVIDIA_VISIBLE_DEVICES and the
 * fully-qualified CDI device names. */
struct dp_alloc_answer {
	const char *visible;
	char **cdi;
	size_t n_cdi;
};

/* Every encode_* gives a malloc()ed buffer in <*out> (the caller frees it):
 * 0 or -ENOMEM. Every decode_* fills <out> (freed with its free_*): 0, or
 * -EPROTO when the bytes are not that message. */
struct node__dp_api {
	const char *version;            /* RegisterRequest.version: "v1beta1" */
	const char *register_method;    /* "/v1beta1.Registration/Register" */
	/* The DevicePlugin service's methods, full paths. */
	const char *m_options, *m_list_and_watch, *m_prefer, *m_allocate, *m_prestart;
	int (*encode_register)(const char *endpoint, const char *resource, bool preferred,
			       uint8_t **out, size_t *len);
	int (*encode_options)(bool preferred, uint8_t **out, size_t *len);
	int (*encode_devices)(const struct dp_device *d, size_t n, uint8_t **out, size_t *len);
	int (*decode_prefer)(const uint8_t *in, size_t len, struct dp_prefer_req *out);
	int (*encode_prefer)(const struct dp_ids *answers, size_t n, uint8_t **out, size_t *len);
	int (*decode_allocate)(const uint8_t *in, size_t len, struct dp_alloc_req *out);
	int (*encode_allocate)(const struct dp_alloc_answer *a, size_t n, uint8_t **out,
			       size_t *len);
	int (*encode_empty)(uint8_t **out, size_t *len);
};

extern const struct node__dp_api node__dp_v1beta1;
/* The versions troupe-node speaks, newest first, NULL-terminated. */
extern const struct node__dp_api *const node__dp_apis[];

void node__dp_ids_free(struct dp_ids *ids);
void node__dp_prefer_free(struct dp_prefer_req *r);
void node__dp_alloc_free(struct dp_alloc_req *r);

#endif
