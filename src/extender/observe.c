/* What troupe shows about itself, beside the verbs: GET /debug/state (nodes and
 * their GPU usage, the cache's and the informer's counters), GET /debug/cache
 * (every node, pod and pod group troupe knows, to compare with the API
 * server) and GET /readyz. GET /metrics is metrics.c's.
 */
#include "extender/http_reply.h"
#include "extender/internal.h"

#include <string.h>

#include "extender/standby.h"

/* ---- debug ------------------------------------------------------------- */

struct debug_ctx {
	struct strbuf *out;
	size_t n;
};

static bool debug_node(const struct cache_node_view *v, void *arg)
{
	struct debug_ctx *dc = arg;
	char ids[EXT_DEVICE_IDS_BUF];

	cache_devices_format(v->used, ids, sizeof(ids));
	if (dc->n++)
		strbuf_putc(dc->out, ',');
	strbuf_puts(dc->out, "{\"name\":");
	strbuf_put_json_str(dc->out, v->node->name, strlen(v->node->name));
	strbuf_printf(dc->out, ",\"ready\":%s,\"unschedulable\":%s,\"gpuCapacity\":%u,"
		      "\"gpuAllocatable\":%u,\"gpuFree\":%u,\"gpuUnattributed\":%u,"
		      "\"devicesHeld\":\"%s\"}",
		      v->node->ready ? "true" : "false", v->node->unschedulable ? "true" : "false",
		      v->node->gpu_capacity, v->node->gpu_allocatable, cache_view_free_gpus(v),
		      v->unattributed, ids);
	return true;
}

void ext_debug_state(const struct ext_service *svc, struct ext_reply *r)
{
	struct debug_ctx dc = { &r->body, 0 };
	struct cache_stats st;

	cache_get_stats(svc->cache, &st);
	strbuf_printf(&r->body, "{\"synced\":%s,\"source\":",
		      cache_is_synced(svc->cache) ? "true" : "false");
	strbuf_put_json_str(&r->body, svc->source, strlen(svc->source));
	strbuf_printf(&r->body, ",\"stats\":{\"nodes\":%zu,\"pods\":%zu,\"podsHoldingGPUs\":%zu,"
		      "\"podGroups\":%zu,\"gpusAllocatable\":%llu,\"gpusHeld\":%llu}",
		      st.nodes, st.pods, st.pods_holding, st.podgroups,
		      (unsigned long long)st.gpus_allocatable, (unsigned long long)st.gpus_held);
	if (svc->informer) {
		struct cache_informer_stats is;

		cache_informer_get_stats(svc->informer, &is);
		strbuf_printf(&r->body, ",\"informer\":{\"events\":%llu,\"lists\":%llu,"
			      "\"relists\":%llu,\"watchRestarts\":%llu,\"errors\":%llu,"
			      "\"partialLines\":%llu,\"permissionDenials\":%llu}",
			      (unsigned long long)is.events, (unsigned long long)is.lists,
			      (unsigned long long)is.relists, (unsigned long long)is.watch_restarts,
			      (unsigned long long)is.errors, (unsigned long long)is.partial_lines,
			      (unsigned long long)is.permission_denials);
	}
	strbuf_puts(&r->body, ",\"nodes\":[");
	cache_read_begin(svc->cache);
	cache_node_foreach(svc->cache, debug_node, &dc);
	cache_read_end(svc->cache);
	strbuf_puts(&r->body, "]}");
}

/* The pod states as /debug/cache names them (enum cache_pod_state).
 * CACHE_POD_STATE_UNACCOUNTED means "known, occupying nothing": a pod waiting to be
 * placed, but just as well a Running pod asking for no GPU or a finished one,
 * so it is shown as what it means, not as the pod's phase. */
static const char *const state_names[] = { "none", "not-accounted", "assumed", "bound" };

static bool debug_node_name(const struct cache_node_view *v, void *arg)
{
	struct debug_ctx *dc = arg;

	if (dc->n++)
		strbuf_putc(dc->out, ',');
	strbuf_put_json_str(dc->out, v->node->name, strlen(v->node->name));
	return true;
}

static void debug_pod(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct debug_ctx *dc = arg;
	char ids[EXT_DEVICE_IDS_BUF];

	cache_devices_format(p->devices, ids, sizeof(ids));
	if (dc->n++)
		strbuf_putc(dc->out, ',');
	strbuf_puts(dc->out, "{\"uid\":");
	strbuf_put_json_str(dc->out, uid, strlen(uid));
	strbuf_puts(dc->out, ",\"namespace\":");
	strbuf_put_json_str(dc->out, p->ns, strlen(p->ns));
	strbuf_puts(dc->out, ",\"name\":");
	strbuf_put_json_str(dc->out, p->name, strlen(p->name));
	strbuf_puts(dc->out, ",\"node\":");
	strbuf_put_json_str(dc->out, p->node, strlen(p->node));
	strbuf_printf(dc->out, ",\"state\":\"%s\",\"fromAPI\":%s,\"gpus\":%u,\"devices\":\"%s\","
		      "\"unattributed\":%u}", state_names[p->state], p->from_api ? "true" : "false",
		      p->demand.gpus, ids, p->unattributed);
}

static void debug_group(const struct cache_podgroup *pg, void *arg)
{
	struct debug_ctx *dc = arg;

	if (dc->n++)
		strbuf_putc(dc->out, ',');
	strbuf_puts(dc->out, "{\"namespace\":");
	strbuf_put_json_str(dc->out, pg->ns, strlen(pg->ns));
	strbuf_puts(dc->out, ",\"name\":");
	strbuf_put_json_str(dc->out, pg->name, strlen(pg->name));
	strbuf_puts(dc->out, ",\"apiVersion\":");
	strbuf_put_json_str(dc->out, cache_pg_apis[pg->api].api_version,
			    strlen(cache_pg_apis[pg->api].api_version));
	strbuf_printf(dc->out, ",\"minMember\":%d,\"queue\":", pg->min_member);
	strbuf_put_json_str(dc->out, pg->queue, strlen(pg->queue));
	strbuf_putc(dc->out, '}');
}

void ext_debug_cache(const struct ext_service *svc, struct ext_reply *r)
{
	struct debug_ctx dc = { &r->body, 0 };

	strbuf_printf(&r->body, "{\"synced\":%s,\"nodes\":[",
		      cache_is_synced(svc->cache) ? "true" : "false");
	cache_read_begin(svc->cache);
	cache_node_foreach(svc->cache, debug_node_name, &dc);
	cache_read_end(svc->cache);
	strbuf_puts(&r->body, "],\"pods\":[");
	dc.n = 0;
	cache_pod_foreach(svc->cache, debug_pod, &dc);
	strbuf_puts(&r->body, "],\"podGroups\":[");
	dc.n = 0;
	cache_podgroup_foreach(svc->cache, debug_group, &dc);
	strbuf_puts(&r->body, "]}");
}

/* ---- readiness ----------------------------------------------------------------- */

/* With an API server the informer knows (lists, streams, permissions); a
 * snapshot is ready once loaded. */
void ext__readiness_get(const struct ext_service *svc, struct cache_readiness *out)
{
	if (svc->informer) {
		cache_informer_readiness(svc->informer, out);
		return;
	}
	memset(out, 0, sizeof(*out));
	out->state = cache_is_synced(svc->cache) ? CACHE_READY : CACHE_SYNCING;
}

void ext_readyz(const struct ext_service *svc, struct ext_reply *r)
{
	char holder[CACHE_LEASE_HOLDER_BUF];
	struct cache_readiness rd;
	const char *sep = "";

	/* Leader election: a standby is not ready, so the Service sends it
	 * nothing; its informer keeps its cache warm for a takeover. */
	if (ext_service_is_standby(svc, holder, sizeof(holder))) {
		r->status = 503;
		strbuf_puts(&r->body, "{\"status\":\"standby\",\"leader\":");
		strbuf_put_json_str(&r->body, holder, strlen(holder));
		strbuf_putc(&r->body, '}');
		return;
	}
	ext__readiness_get(svc, &rd);
	if (rd.state == CACHE_READY && !ext_recover_ready(svc->recover)) {
		/* Just took the Lease: gangs the old leader left partly bound are
		 * looked at first (recover.c), within a fraction of a second. */
		r->status = 503;
		strbuf_puts(&r->body, "{\"status\":\"recovering\"}");
		return;
	}
	if (rd.state != CACHE_READY)
		r->status = 503;
	switch (rd.state) {
	case CACHE_READY:
		strbuf_puts(&r->body, "{\"status\":\"ready\"}");
		break;
	case CACHE_SYNCING:
		strbuf_puts(&r->body, "{\"status\":\"syncing\"}");
		break;
	case CACHE_API_UNREACHABLE:
		strbuf_puts(&r->body, "{\"status\":\"api-unreachable\",\"detail\":");
		strbuf_put_json_str(&r->body, rd.detail, strlen(rd.detail));
		strbuf_putc(&r->body, '}');
		break;
	case CACHE_FORBIDDEN:
		strbuf_puts(&r->body, "{\"status\":\"forbidden\",\"missing\":[");
		for (int p = 0; p < CACHE_PERM_COUNT; p++) {
			const char *name = cache_permission_get((enum cache_perm)p)->name;

			if (!(rd.missing & (1u << p)))
				continue;
			strbuf_puts(&r->body, sep);
			strbuf_put_json_str(&r->body, name, strlen(name));
			sep = ",";
		}
		strbuf_puts(&r->body, "]}");
		break;
	}
}

