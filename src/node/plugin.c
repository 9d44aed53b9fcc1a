/* Allocator mode: troupe-node as the kubelet's device plugin for whole GPUs
 * (nvidia.com/gpu), in place of NVIDIA's, so the devices a container gets are
 * the ones troupe chose.
 *
 * A thread of its own runs the plugin (the publisher's loop waits on NVML
 * for minutes at a time):
 *   - it serves the DevicePlugin service on <dir>/<endpoint> first, then
 *     registers with the kubelet at <dir>/kubelet.sock, trying the API
 *     versions troupe-node speaks (dp_api.h) in order; a failed registration
 *     is tried again every second, said once per reason;
 *   - ListAndWatch sends the GPUs with their health, and again whenever the
 *     publisher hands over a change (node_plugin_set_gpus: a GPU that raised
 *     a device-fault XID turns Unhealthy, which lowers the node's allocatable
 *     and not its capacity);
 *   - GetPreferredAllocation answers troupe's choice for the pod being
 *     admitted by prefer.c's rule, from this node's pods (one GET) and what
 *     the kubelet has given already (PodResources List); whatever fails, it
 *     still answers (the best-connected set) so no pod is held up by it;
 *   - Allocate answers NVIDIA_VISIBLE_DEVICES and the CDI device names
 *     ("nvidia.com/gpu=GPU-<uuid>") the NVIDIA container toolkit resolves;
 *   - when its socket vanishes (the kubelet deletes every socket in the
 *     directory when it restarts), it serves anew and registers again.
 *
 * The device ids are the GPUs' UUIDs (as NVIDIA's plugin names them), or
 * their indices where nvidia-smi gave no UUIDs.
 */
#include "node/node_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/api.h"
#include "cache/cache.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "node/dp_api.h"

enum {
	PLUGIN_POLL_MS = 100,
	PLUGIN_REGISTER_TIMEOUT_MS = 10000,
	PLUGIN_API_TIMEOUT_MS = 5000,
	PLUGIN_RETRY_S = 1,
	PLUGIN_LIMITED_WAIT_MS = 15,    /* rate-limited: wait, then ask again */
	PLUGIN_LIMITED_TRIES = 40,
};

struct node_plugin {
	struct node_plugin_opts o;
	char socket[NODE_PATH_BUF], kubelet[NODE_PATH_BUF];
	char endpoint[NODE_PATH_BUF];   /* o.endpoint points here */
	pthread_t thread;
	atomic_bool stop;
	/* What node_plugin_set_gpus hands over, under <mu>. */
	pthread_mutex_t mu;
	struct node_gpus gpus;
	uint64_t gen;                   /* 0: no GPUs yet */
	/* The plugin thread's own. */
	struct node__rpc *rpc;
	ino_t ino;
	const struct node__dp_api *api;
	unsigned api_at;                /* which of node__dp_apis registration tries */
	bool registered, registering;
	time_t next_try;
	char last_err[NODE_ERR_BUF];
	struct node_gpus snap;          /* this thread's copy */
	uint64_t snap_gen;
};

static void device_id(const struct node_gpus *g, unsigned i, char *buf, size_t len)
{
	if (g->gpu[i].uuid[0])
		snprintf(buf, len, "%s", g->gpu[i].uuid);
	else
		snprintf(buf, len, "%u", i);
}

/* Take the newest GPUs into this thread's copy. */
static void refresh(struct node_plugin *p)
{
	pthread_mutex_lock(&p->mu);
	if (p->gen != p->snap_gen) {
		p->snap = p->gpus;
		p->snap_gen = p->gen;
	}
	pthread_mutex_unlock(&p->mu);
}

/* Device ids to a mask of this node's GPUs; ids it does not know are left
 * out (another plugin's, which the kubelet would not offer). */
static uint64_t ids_mask(const struct node_gpus *g, const struct dp_ids *ids)
{
	uint64_t m = 0;

	for (size_t k = 0; k < ids->n; k++) {
		char one[NODE_UUID_BUF];

		for (unsigned i = 0; i < g->n; i++) {
			device_id(g, i, one, sizeof(one));
			if (strcmp(one, ids->id[k]) == 0)
				m |= 1ULL << i;
		}
	}
	return m;
}

static int mask_ids(const struct node_gpus *g, uint64_t m, struct dp_ids *out)
{
	out->n = 0;
	out->id = calloc(64, sizeof(*out->id));
	if (!out->id)
		return -ENOMEM;
	for (unsigned i = 0; i < g->n; i++) {
		char one[NODE_UUID_BUF];

		if (!(m & (1ULL << i)))
			continue;
		device_id(g, i, one, sizeof(one));
		if (!(out->id[out->n] = strdup(one)))
			return -ENOMEM;
		out->n++;
	}
	return 0;
}

/* This node's claims, with what each holds already. 0, or -1 with <err>. */
static int load_claims(struct node_plugin *p, const struct node_gpus *g,
		       struct node_claim **claims, size_t *n, char *err, size_t errlen)
{
	struct strbuf path, answer;
	struct node_pod_devices *held = NULL;
	size_t n_held = 0;
	long status = 0;
	int rc;

	*claims = NULL;
	*n = 0;
	strbuf_init(&path);
	strbuf_init(&answer);
	strbuf_printf(&path, "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", p->o.node);
	rc = strbuf_failed(&path) ? -ENOMEM
		: cache_api_call(p->o.api, "GET", path.buf, NULL, NULL, PLUGIN_API_TIMEOUT_MS,
				 &answer, &status, err, errlen);
	if (rc == 0 && status != 200) {
		char text[NODE_ERR_BUF];

		cache_api_status_text(status, answer.buf ? answer.buf : "", answer.len, text,
				      sizeof(text));
		snprintf(err, errlen, "listing the pods of node %.100s: %.200s%s", p->o.node, text,
			 status == 403 ? " (allocator mode needs list on pods)" : "");
		rc = -EIO;
	}
	if (rc == 0)
		rc = node_claims_parse(answer.buf, answer.len, p->o.node, p->o.resource, claims, n,
				       err, errlen);
	strbuf_fini(&path);
	strbuf_fini(&answer);
	if (rc < 0)
		return -1;
	/* The kubelet's PodResources server allows 100 calls a second in bursts of
	 * 10 and refuses the rest: a burst of admissions waits for a token (one
	 * every 10 ms) rather than answer without knowing who holds what. */
	for (unsigned tries = 0;; tries++) {
		struct timespec ts = { 0, PLUGIN_LIMITED_WAIT_MS * 1000000L };

		rc = node_podresources_list(p->o.pod_resources, p->o.resource, &held, &n_held, err,
					    errlen);
		if (rc != -EAGAIN || tries >= PLUGIN_LIMITED_TRIES)
			break;
		nanosleep(&ts, NULL);
	}
	if (rc < 0) {
		/* Without it every claim looks unallocated: say so, answer anyway. */
		log_warn("node", "device plugin: PodResources unreadable (%s): every pod with "
			 "troupe's choice counts as waiting", err);
		return 0;
	}
	for (size_t i = 0; i < n_held; i++) {
		uint64_t m;
		char why[NODE_ERR_BUF];

		if (node_ids_to_mask(g, held[i].ids, held[i].n_ids, &m, why, sizeof(why)) < 0)
			continue;
		for (size_t k = 0; k < *n; k++)
			if (!strcmp((*claims)[k].ns, held[i].ns) &&
			    !strcmp((*claims)[k].name, held[i].name))
				(*claims)[k].held = m;
	}
	node_pod_devices_free(held, n_held);
	return 0;
}

static int on_prefer(struct node_plugin *p, const uint8_t *req, size_t len, uint8_t **resp,
		     size_t *resplen, char *err, size_t errlen)
{
	const struct node_gpus *g = &p->snap;
	struct dp_prefer_req r;
	struct dp_ids *answers = NULL;
	struct node_claim *claims = NULL;
	size_t n_claims = 0;
	char why[NODE_ERR_BUF] = "";
	int status = NODE_RPC_OK;
	bool have_claims;

	if (p->api->decode_prefer(req, len, &r) < 0) {
		snprintf(err, errlen, "not a PreferredAllocationRequest");
		log_warn("node", "device plugin: GetPreferredAllocation: %s", err);
		return NODE_RPC_INVALID_ARGUMENT;
	}
	have_claims = load_claims(p, g, &claims, &n_claims, why, sizeof(why)) == 0;
	if (!have_claims)
		log_warn("node", "device plugin: cannot see this node's pods (%s): answering the "
			 "best-connected devices", why);
	answers = calloc(r.n ? r.n : 1, sizeof(*answers));
	if (!answers) {
		snprintf(err, errlen, "out of memory");
		status = NODE_RPC_RESOURCE_EXHAUSTED;
		goto out;
	}
	for (size_t i = 0; i < r.n; i++) {
		const struct dp_prefer_one *c = &r.c[i];
		uint64_t avail = ids_mask(g, &c->available), must = ids_mask(g, &c->must);
		struct node_prefer ans;
		char set[CACHE_DEVICES_BUF];

		if (c->size <= 0 || node_prefer(g, claims, n_claims, avail, must,
						(unsigned)c->size, &ans) < 0) {
			snprintf(err, errlen, "cannot prefer %d of the %zu devices offered (%u of "
				 "them this node's GPUs, %zu must be included)", c->size,
				 c->available.n, __builtin_popcountll(avail), c->must.n);
			log_warn("node", "device plugin: GetPreferredAllocation: %s", err);
			status = NODE_RPC_INVALID_ARGUMENT;
			goto out;
		}
		cache_devices_format(ans.set, set, sizeof(set));
		if (ans.claim >= 0 && !ans.ambiguous)
			log_info("node", "device plugin: %d GPUs for pod %s/%s: its choice %s "
				 "(troupe.io/gpu-ids)", c->size, claims[ans.claim].ns,
				 claims[ans.claim].name, set);
		else if (ans.claim >= 0)
			log_warn("node", "device plugin: %d GPUs: ambiguous, %u pods on this node "
				 "await %d GPUs with different choices available; answered the oldest, "
				 "pod %s/%s, with %s: if the kubelet is admitting another, its devices "
				 "differ and are read back (troupe.io/gpu-ids-actual)", c->size,
				 ans.matches, c->size, claims[ans.claim].ns, claims[ans.claim].name,
				 set);
		else
			log_info("node", "device plugin: %d GPUs: no pod on this node awaits %d with "
				 "troupe's choice available; answered the best-connected %s",
				 c->size, c->size, set);
		if (mask_ids(g, ans.set, &answers[i]) < 0) {
			snprintf(err, errlen, "out of memory");
			status = NODE_RPC_RESOURCE_EXHAUSTED;
			goto out;
		}
	}
	if (p->api->encode_prefer(answers, r.n, resp, resplen) < 0) {
		snprintf(err, errlen, "out of memory");
		status = NODE_RPC_RESOURCE_EXHAUSTED;
	}
out:
	for (size_t i = 0; answers && i < r.n; i++)
		node__dp_ids_free(&answers[i]);
	free(answers);
	node_claims_free(claims);
	node__dp_prefer_free(&r);
	return status;
}

static int on_allocate(struct node_plugin *p, const uint8_t *req, size_t len, uint8_t **resp,
		       size_t *resplen, char *err, size_t errlen)
{
	const struct node_gpus *g = &p->snap;
	struct dp_alloc_req r;
	struct dp_alloc_answer *a = NULL;
	struct strbuf *visible = NULL;
	int status = NODE_RPC_OK;

	if (p->api->decode_allocate(req, len, &r) < 0) {
		snprintf(err, errlen, "not an AllocateRequest");
		log_warn("node", "device plugin: Allocate: %s", err);
		return NODE_RPC_INVALID_ARGUMENT;
	}
	a = calloc(r.n ? r.n : 1, sizeof(*a));
	visible = calloc(r.n ? r.n : 1, sizeof(*visible));
	if (!a || !visible) {
		snprintf(err, errlen, "out of memory");
		status = NODE_RPC_RESOURCE_EXHAUSTED;
		goto out;
	}
	for (size_t i = 0; i < r.n; i++)
		strbuf_init(&visible[i]);
	for (size_t i = 0; i < r.n; i++) {
		const struct dp_ids *ids = &r.c[i];
		char set[CACHE_DEVICES_BUF];
		uint64_t mask;

		/* Every id one of this node's GPUs, none twice (the read-back's own
		 * mapping: a UUID NVML reported, or an index). */
		if (node_ids_to_mask(g, ids->id, ids->n, &mask, err, errlen) < 0) {
			log_warn("node", "device plugin: Allocate refused: %s", err);
			status = NODE_RPC_INVALID_ARGUMENT;
			goto out;
		}
		a[i].cdi = calloc(ids->n ? ids->n : 1, sizeof(*a[i].cdi));
		if (!a[i].cdi)
			goto nomem;
		for (size_t k = 0; k < ids->n; k++) {
			size_t need = strlen(p->o.cdi_kind) + strlen(ids->id[k]) + 2;

			if (!(a[i].cdi[k] = malloc(need)))
				goto nomem;
			snprintf(a[i].cdi[k], need, "%s=%s", p->o.cdi_kind, ids->id[k]);
			a[i].n_cdi++;
			strbuf_printf(&visible[i], "%s%s", k ? "," : "", ids->id[k]);
		}
		if (strbuf_failed(&visible[i]))
			goto nomem;
		a[i].visible = visible[i].buf ? visible[i].buf : "";
		cache_devices_format(mask, set, sizeof(set));
		log_info("node", "device plugin: allocated GPUs %s (%s)", set, a[i].visible);
	}
	if (p->api->encode_allocate(a, r.n, resp, resplen) < 0)
		goto nomem;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
	status = NODE_RPC_RESOURCE_EXHAUSTED;
out:
	for (size_t i = 0; a && i < r.n; i++) {
		for (size_t k = 0; k < a[i].n_cdi; k++)
			free(a[i].cdi[k]);
		free(a[i].cdi);
		strbuf_fini(&visible[i]);
	}
	free(a);
	free(visible);
	node__dp_alloc_free(&r);
	return status;
}

static int on_unary(void *ctx, const char *method, const uint8_t *req, size_t len,
		    uint8_t **resp, size_t *resplen, char *err, size_t errlen)
{
	struct node_plugin *p = ctx;

	refresh(p);
	if (!strcmp(method, p->api->m_options))
		return p->api->encode_options(true, resp, resplen) < 0
			       ? NODE_RPC_RESOURCE_EXHAUSTED : NODE_RPC_OK;
	if (!strcmp(method, p->api->m_prefer))
		return on_prefer(p, req, len, resp, resplen, err, errlen);
	if (!strcmp(method, p->api->m_allocate))
		return on_allocate(p, req, len, resp, resplen, err, errlen);
	if (!strcmp(method, p->api->m_prestart))
		return p->api->encode_empty(resp, resplen) < 0 ? NODE_RPC_RESOURCE_EXHAUSTED
							       : NODE_RPC_OK;
	snprintf(err, errlen, "troupe-node does not serve %s", method);
	log_warn("node", "device plugin: %s", err);
	return NODE_RPC_UNIMPLEMENTED;
}

static int on_stream(void *ctx, uint64_t *gen, uint8_t **msg, size_t *len)
{
	struct node_plugin *p = ctx;
	struct dp_device d[PLACEMENT_TOPO_MAX];
	char ids[PLACEMENT_TOPO_MAX][NODE_UUID_BUF];
	unsigned sick = 0;

	refresh(p);
	if (*gen == p->snap_gen)
		return 0;
	for (unsigned i = 0; i < p->snap.n; i++) {
		device_id(&p->snap, i, ids[i], sizeof(ids[i]));
		d[i].id = ids[i];
		d[i].healthy = !(p->snap.unhealthy & (1ULL << i));
		d[i].numa = p->snap.gpu[i].numa;
		sick += !d[i].healthy;
	}
	if (p->api->encode_devices(d, p->snap.n, msg, len) < 0)
		return 0;
	*gen = p->snap_gen;
	log_info("node", "device plugin: ListAndWatch: %u GPUs, %u unhealthy", p->snap.n, sick);
	return 1;
}

static void say(struct node_plugin *p, const char *what)
{
	if (strcmp(what, p->last_err) != 0)
		log_warn("node", "device plugin: %s", what);
	snprintf(p->last_err, sizeof(p->last_err), "%.*s", (int)sizeof(p->last_err) - 1, what);
}

static bool serve(struct node_plugin *p)
{
	struct node__rpc_methods m = {
		.stream_method = p->api->m_list_and_watch,
		.stream = on_stream,
		.unary = on_unary,
		.ctx = p,
	};
	char err[NODE_ERR_BUF], msg[NODE_ERR_BUF + 64];
	struct stat st;

	unlink(p->socket);
	p->rpc = node__rpc_start(p->socket, &m, err, sizeof(err));
	if (!p->rpc || stat(p->socket, &st) < 0) {
		snprintf(msg, sizeof(msg), "cannot serve: %s", p->rpc ? "the socket is gone" : err);
		say(p, msg);
		node__rpc_stop(p->rpc);
		p->rpc = NULL;
		return false;
	}
	p->ino = st.st_ino;
	p->registered = false;
	p->registering = false;
	p->api_at = 0;
	p->next_try = 0;
	log_info("node", "device plugin: serving %s on %s", p->o.resource, p->socket);
	return true;
}

static void try_register(struct node_plugin *p)
{
	uint8_t *req = NULL;
	size_t len = 0;
	char err[NODE_ERR_BUF];
	int rc;

	if (p->registering) {
		rc = node__rpc_call_result(p->rpc, err, sizeof(err));
		if (rc == 0)
			return;
		p->registering = false;
		if (rc > 0) {
			p->registered = true;
			p->last_err[0] = '\0';
			log_info("node", "device plugin: registered %s with the kubelet (%s, device "
				 "plugin API %s)", p->o.resource, p->kubelet, p->api->version);
			return;
		}
		/* The kubelet refuses a version it does not know: try the next. */
		if (strstr(err, "version") && node__dp_apis[p->api_at + 1]) {
			p->api_at++;
			return;
		}
		p->api_at = 0;
		p->next_try = time(NULL) + PLUGIN_RETRY_S;
		{
			char msg[NODE_ERR_BUF + 64];

			snprintf(msg, sizeof(msg), "cannot register with the kubelet (trying again "
				 "every %ds): %s", PLUGIN_RETRY_S, err);
			say(p, msg);
		}
		return;
	}
	if (p->registered || time(NULL) < p->next_try)
		return;
	p->api = node__dp_apis[p->api_at];
	if (p->api->encode_register(p->o.endpoint, p->o.resource, true, &req, &len) < 0)
		return;
	if (node__rpc_call_start(p->rpc, p->kubelet, p->api->register_method, req, len,
				 PLUGIN_REGISTER_TIMEOUT_MS) == 0)
		p->registering = true;
	else
		p->next_try = time(NULL) + PLUGIN_RETRY_S;
	free(req);
}

/* Has our socket been removed or replaced? */
static bool socket_gone(struct node_plugin *p)
{
	struct stat st;

	return stat(p->socket, &st) < 0 || st.st_ino != p->ino;
}

static void *run(void *arg)
{
	struct node_plugin *p = arg;

	while (!atomic_load(&p->stop)) {
		struct timespec ts = { 0, PLUGIN_POLL_MS * 1000000L };

		refresh(p);
		if (!p->snap_gen) {
			nanosleep(&ts, NULL);
			continue;
		}
		if (!p->rpc && !serve(p)) {
			struct timespec again = { PLUGIN_RETRY_S, 0 };

			nanosleep(&again, NULL);
			continue;
		}
		try_register(p);
		node__rpc_poll(p->rpc, PLUGIN_POLL_MS);
		if (socket_gone(p)) {
			log_info("node", "device plugin: %s was removed (the kubelet restarted): "
				 "serving again and registering anew", p->socket);
			node__rpc_stop(p->rpc);
			p->rpc = NULL;
		}
	}
	if (p->rpc) {
		node__rpc_stop(p->rpc);
		p->rpc = NULL;
		if (!socket_gone(p))
			unlink(p->socket);
	}
	return NULL;
}

struct node_plugin *node_plugin_start(const struct node_plugin_opts *o, char *err,
				      size_t errlen)
{
	struct node_plugin *p = calloc(1, sizeof(*p));

	if (!p) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->o = *o;
	p->api = node__dp_apis[0];
	/* The caller's string may not outlive this call. */
	snprintf(p->endpoint, sizeof(p->endpoint), "%s", o->endpoint);
	p->o.endpoint = p->endpoint;
	if ((size_t)snprintf(p->socket, sizeof(p->socket), "%s/%s", o->dir, o->endpoint) >=
		    sizeof(p->socket) ||
	    (size_t)snprintf(p->kubelet, sizeof(p->kubelet), "%s/kubelet.sock", o->dir) >=
		    sizeof(p->kubelet)) {
		snprintf(err, errlen, "the device plugin directory's path is too long");
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	atomic_init(&p->stop, false);
	if (pthread_create(&p->thread, NULL, run, p) != 0) {
		snprintf(err, errlen, "cannot start the device plugin's thread");
		pthread_mutex_destroy(&p->mu);
		free(p);
		return NULL;
	}
	return p;
}

void node_plugin_set_gpus(struct node_plugin *p, const struct node_gpus *g)
{
	pthread_mutex_lock(&p->mu);
	if (!p->gen || memcmp(&p->gpus, g, sizeof(*g)) != 0) {
		p->gpus = *g;
		p->gen++;
	}
	pthread_mutex_unlock(&p->mu);
}

void node_plugin_stop(struct node_plugin *p)
{
	if (!p)
		return;
	atomic_store(&p->stop, true);
	pthread_join(p->thread, NULL);
	pthread_mutex_destroy(&p->mu);
	free(p);
}
