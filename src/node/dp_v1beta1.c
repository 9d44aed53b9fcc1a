/* The device plugin API v1beta1 on the wire: troupe-node's plain structs
 * (dp_api.h) to and from protobuf-c's code, generated at build time from
 * k8s.io/kubelet's pkg/apis/deviceplugin/v1beta1/api.proto of the pinned
 * release (src/node/deviceplugin/v1beta1/, copied as it is; the
 * protos-pinned test holds it to the module's). The only file that names
 * that generated code.
 */
#include "node/dp_api.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin_v1beta1.pb-c.h"

#define DP_SERVICE "/v1beta1.DevicePlugin/"

/* Pack <m> into a fresh buffer. */
static int pack(const ProtobufCMessage *m, uint8_t **out, size_t *len)
{
	size_t n = protobuf_c_message_get_packed_size(m);

	*out = malloc(n ? n : 1);
	if (!*out)
		return -ENOMEM;
	*len = protobuf_c_message_pack(m, *out);
	return 0;
}

static int encode_register(const char *endpoint, const char *resource, bool preferred,
			   uint8_t **out, size_t *len)
{
	V1beta1__RegisterRequest r = V1BETA1__REGISTER_REQUEST__INIT;
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;

	o.get_preferred_allocation_available = preferred;
	r.version = (char *)"v1beta1";
	r.endpoint = (char *)endpoint;
	r.resource_name = (char *)resource;
	r.options = &o;
	return pack(&r.base, out, len);
}

static int encode_options(bool preferred, uint8_t **out, size_t *len)
{
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;

	o.get_preferred_allocation_available = preferred;
	return pack(&o.base, out, len);
}

static int encode_devices(const struct dp_device *d, size_t n, uint8_t **out, size_t *len)
{
	V1beta1__ListAndWatchResponse r = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
	V1beta1__Device *dev = calloc(n ? n : 1, sizeof(*dev));
	V1beta1__Device **ptr = calloc(n ? n : 1, sizeof(*ptr));
	V1beta1__TopologyInfo *topo = calloc(n ? n : 1, sizeof(*topo));
	V1beta1__NUMANode *numa = calloc(n ? n : 1, sizeof(*numa));
	V1beta1__NUMANode **numa_ptr = calloc(n ? n : 1, sizeof(*numa_ptr));
	int ret = -ENOMEM;

	if (!dev || !ptr || !topo || !numa || !numa_ptr)
		goto out;
	for (size_t i = 0; i < n; i++) {
		v1beta1__device__init(&dev[i]);
		dev[i].id = (char *)d[i].id;
		dev[i].health = (char *)(d[i].healthy ? "Healthy" : "Unhealthy");
		if (d[i].numa >= 0) {
			v1beta1__topology_info__init(&topo[i]);
			v1beta1__numanode__init(&numa[i]);
			numa[i].id = d[i].numa;
			numa_ptr[i] = &numa[i];
			topo[i].nodes = &numa_ptr[i];
			topo[i].n_nodes = 1;
			dev[i].topology = &topo[i];
		}
		ptr[i] = &dev[i];
	}
	r.devices = ptr;
	r.n_devices = n;
	ret = pack(&r.base, out, len);
out:
	free(dev);
	free(ptr);
	free(topo);
	free(numa);
	free(numa_ptr);
	return ret;
}

/* Copy <n> strings into <out>. */
static int copy_ids(char *const *src, size_t n, struct dp_ids *out)
{
	out->id = calloc(n ? n : 1, sizeof(*out->id));
	out->n = 0;
	if (!out->id)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (!(out->id[i] = strdup(src[i] ? src[i] : "")))
			return -ENOMEM;
		out->n++;
	}
	return 0;
}

static int decode_prefer(const uint8_t *in, size_t len, struct dp_prefer_req *out)
{
	V1beta1__PreferredAllocationRequest *r =
		v1beta1__preferred_allocation_request__unpack(NULL, len, in);
	int ret = 0;

	memset(out, 0, sizeof(*out));
	if (!r)
		return -EPROTO;
	out->c = calloc(r->n_container_requests ? r->n_container_requests : 1, sizeof(*out->c));
	if (!out->c) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < r->n_container_requests && ret == 0; i++) {
		const V1beta1__ContainerPreferredAllocationRequest *c = r->container_requests[i];

		out->n++;
		out->c[i].size = c->allocation_size;
		ret = copy_ids(c->available_deviceids, c->n_available_deviceids,
			       &out->c[i].available);
		if (ret == 0)
			ret = copy_ids(c->must_include_deviceids, c->n_must_include_deviceids,
				       &out->c[i].must);
	}
out:
	v1beta1__preferred_allocation_request__free_unpacked(r, NULL);
	if (ret < 0)
		node__dp_prefer_free(out);
	return ret;
}

static int encode_prefer(const struct dp_ids *answers, size_t n, uint8_t **out, size_t *len)
{
	V1beta1__PreferredAllocationResponse r = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
	V1beta1__ContainerPreferredAllocationResponse *c = calloc(n ? n : 1, sizeof(*c));
	V1beta1__ContainerPreferredAllocationResponse **ptr = calloc(n ? n : 1, sizeof(*ptr));
	int ret = -ENOMEM;

	if (!c || !ptr)
		goto out;
	for (size_t i = 0; i < n; i++) {
		v1beta1__container_preferred_allocation_response__init(&c[i]);
		c[i].deviceids = answers[i].id;
		c[i].n_deviceids = answers[i].n;
		ptr[i] = &c[i];
	}
	r.container_responses = ptr;
	r.n_container_responses = n;
	ret = pack(&r.base, out, len);
out:
	free(c);
	free(ptr);
	return ret;
}

static int decode_allocate(const uint8_t *in, size_t len, struct dp_alloc_req *out)
{
	V1beta1__AllocateRequest *r = v1beta1__allocate_request__unpack(NULL, len, in);
	int ret = 0;

	memset(out, 0, sizeof(*out));
	if (!r)
		return -EPROTO;
	out->c = calloc(r->n_container_requests ? r->n_container_requests : 1, sizeof(*out->c));
	if (!out->c) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < r->n_container_requests && ret == 0; i++) {
		out->n++;
		ret = copy_ids(r->container_requests[i]->devices_ids,
			       r->container_requests[i]->n_devices_ids, &out->c[i]);
	}
out:
	v1beta1__allocate_request__free_unpacked(r, NULL);
	if (ret < 0)
		node__dp_alloc_free(out);
	return ret;
}

static int encode_allocate(const struct dp_alloc_answer *a, size_t n, uint8_t **out,
			   size_t *len)
{
	V1beta1__AllocateResponse r = V1BETA1__ALLOCATE_RESPONSE__INIT;
	V1beta1__ContainerAllocateResponse *c = calloc(n ? n : 1, sizeof(*c));
	V1beta1__ContainerAllocateResponse **ptr = calloc(n ? n : 1, sizeof(*ptr));
	V1beta1__ContainerAllocateResponse__EnvsEntry *env = calloc(n ? n : 1, sizeof(*env));
	V1beta1__ContainerAllocateResponse__EnvsEntry **env_ptr =
		calloc(n ? n : 1, sizeof(*env_ptr));
	V1beta1__CDIDevice **cdi = calloc(n ? n : 1, sizeof(*cdi));
	V1beta1__CDIDevice ***cdi_ptr = calloc(n ? n : 1, sizeof(*cdi_ptr));
	int ret = -ENOMEM;

	if (!c || !ptr || !env || !env_ptr || !cdi || !cdi_ptr)
		goto out;
	for (size_t i = 0; i < n; i++) {
		v1beta1__container_allocate_response__init(&c[i]);
		v1beta1__container_allocate_response__envs_entry__init(&env[i]);
		env[i].key = (char *)"NVIDIA_VISIBLE_DEVICES";
		env[i].value = (char *)a[i].visible;
		env_ptr[i] = &env[i];
		c[i].envs = &env_ptr[i];
		c[i].n_envs = 1;
		cdi[i] = calloc(a[i].n_cdi ? a[i].n_cdi : 1, sizeof(**cdi));
		cdi_ptr[i] = calloc(a[i].n_cdi ? a[i].n_cdi : 1, sizeof(**cdi_ptr));
		if (!cdi[i] || !cdi_ptr[i])
			goto out;
		for (size_t k = 0; k < a[i].n_cdi; k++) {
			v1beta1__cdidevice__init(&cdi[i][k]);
			cdi[i][k].name = a[i].cdi[k];
			cdi_ptr[i][k] = &cdi[i][k];
		}
		c[i].cdi_devices = cdi_ptr[i];
		c[i].n_cdi_devices = a[i].n_cdi;
		ptr[i] = &c[i];
	}
	r.container_responses = ptr;
	r.n_container_responses = n;
	ret = pack(&r.base, out, len);
out:
	for (size_t i = 0; i < n && cdi && cdi_ptr; i++) {
		free(cdi[i]);
		free(cdi_ptr[i]);
	}
	free(c);
	free(ptr);
	free(env);
	free(env_ptr);
	free(cdi);
	free(cdi_ptr);
	return ret;
}

static int encode_empty(uint8_t **out, size_t *len)
{
	V1beta1__Empty e = V1BETA1__EMPTY__INIT;

	return pack(&e.base, out, len);
}

const struct node__dp_api node__dp_v1beta1 = {
	.version = "v1beta1",
	.register_method = "/v1beta1.Registration/Register",
	.m_options = DP_SERVICE "GetDevicePluginOptions",
	.m_list_and_watch = DP_SERVICE "ListAndWatch",
	.m_prefer = DP_SERVICE "GetPreferredAllocation",
	.m_allocate = DP_SERVICE "Allocate",
	.m_prestart = DP_SERVICE "PreStartContainer",
	.encode_register = encode_register,
	.encode_options = encode_options,
	.encode_devices = encode_devices,
	.decode_prefer = decode_prefer,
	.encode_prefer = encode_prefer,
	.decode_allocate = decode_allocate,
	.encode_allocate = encode_allocate,
	.encode_empty = encode_empty,
};

const struct node__dp_api *const node__dp_apis[] = { &node__dp_v1beta1, NULL };

void node__dp_ids_free(struct dp_ids *ids)
{
	for (size_t i = 0; i < ids->n; i++)
		free(ids->id[i]);
	free(ids->id);
	ids->id = NULL;
	ids->n = 0;
}

void node__dp_prefer_free(struct dp_prefer_req *r)
{
	for (size_t i = 0; i < r->n; i++) {
		node__dp_ids_free(&r->c[i].available);
		node__dp_ids_free(&r->c[i].must);
	}
	free(r->c);
	r->c = NULL;
	r->n = 0;
}

void node__dp_alloc_free(struct dp_alloc_req *r)
{
	for (size_t i = 0; i < r->n; i++)
		node__dp_ids_free(&r->c[i]);
	free(r->c);
	r->c = NULL;
	r->n = 0;
}
