/* bind: claim the pod's devices on the chosen node and post the Binding.
 *
 * A single pod's devices are chosen, then claimed with the store's
 * check-and-claim (cache_pod_assume), retrying when another bind took a device
 * in between. A gang member's bind goes to the gang manager (bind_gang), which
 * claims its planned slot and parks the bind at the all-or-nothing barrier
 * until the gang's quorum; then every parked bind is released and posted.
 *
 * Before any of that, every bind is checked against troupe's own view
 * (bind_check_pod, ext__bind_check_node): troupe posts Bindings with its own
 * cluster-wide permission, so a request it did not expect from kube-scheduler
 * must not make it bind anything. The pod must be in the cache (from the watch
 * when troupe watches a cluster), be the pod the request names, be neither
 * finished, being deleted nor bound elsewhere; the node must be known, Ready
 * and not cordoned, for a pod asking no GPU as for one asking some. A refusal
 * changes nothing, posts nothing, and is logged with its reason.
 *
 * With a live API server the Binding is posted on the binder thread and the
 * reply completes later (bind_posted); post_again decides when the same
 * Binding is worth posting again. The Binding carries annotations naming the
 * devices (bind_record, binding_annotations), so after a restart the watch tells
 * troupe exactly which devices each pod occupies.
 */
#include "extender/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "extender/top_choice.h"

enum { BIND_ATTEMPTS = 16 };

/* ---- What the Binding records ------------------------------------------------ */

/* The values of the Binding's troupe.io/gpu-* annotations. */
struct bind_record {
	char ids[EXT_DEVICE_IDS_BUF];   /* troupe.io/gpu-ids: "0,3"; "" for no device */
	char link[EXT_LINK_NAME_BUF];   /* troupe.io/gpu-link: worst link; "" when unknown */
	char uuids[EXT_DEVICE_UUIDS_BUF];       /* troupe.io/gpu-uuids; "" when unknown */
};

/* <devices> on the node of <v> as the Binding records them, for a single pod
 * and a gang member alike: the ids (replica slots as "GPU:replica" on a shared
 * node); the worst link, worth recording only where the node's topology is
 * known and the set has two devices or more; the UUIDs where the node lists
 * them. Inside a cache read section, on the record the devices were chosen on:
 * a node replaced since may lay its slots out otherwise. */
static void bind_record_devices(const struct cache_node_view *v, uint64_t devices,
				struct bind_record *rec)
{
	const struct placement_topo *t = placement_node_topo(v->node);

	rec->link[0] = '\0';
	cache_node_devices_format(v->node, devices, rec->ids, sizeof(rec->ids));
	if (t && __builtin_popcountll(devices) >= 2) {
		struct placement_choice c;

		placement_measure(t, devices, devices, &c);
		placement_link_name(c.worst, rec->link, sizeof(rec->link));
	}
	cache_node_uuids(v->node, devices, rec->uuids, sizeof(rec->uuids));
}

/* The Binding's annotations as JSON (the caller frees it), or NULL without
 * memory. The API server copies them onto the pod. <plan>: a gang member's
 * plan record (gang/record.c), or NULL. */
static char *binding_annotations(const struct bind_record *rec, const char *plan)
{
	struct strbuf ann = STRBUF_INIT;

	strbuf_puts(&ann, "{\"troupe.io/gpu-ids\":");
	strbuf_put_json_str(&ann, rec->ids, strlen(rec->ids));
	if (rec->link[0]) {
		strbuf_puts(&ann, ",\"troupe.io/gpu-link\":");
		strbuf_put_json_str(&ann, rec->link, strlen(rec->link));
	}
	if (rec->uuids[0]) {
		strbuf_puts(&ann, ",\"troupe.io/gpu-uuids\":");
		strbuf_put_json_str(&ann, rec->uuids, strlen(rec->uuids));
	}
	if (plan) {
		strbuf_puts(&ann, ",\"" CACHE_GANG_PLAN_ANNOTATION "\":");
		strbuf_put_json_str(&ann, plan, strlen(plan));
	}
	strbuf_putc(&ann, '}');
	if (strbuf_failed(&ann)) {
		strbuf_fini(&ann);
		return NULL;
	}
	return strbuf_take(&ann, NULL);
}

/* bind_record_devices for <devices> on <node> as the cache has it now; the
 * ids alone when troupe does not know the node. */
static void bind_name_devices(const struct ext_service *svc, const char *node, uint64_t devices,
			      struct bind_record *rec)
{
	struct cache_node_view v;

	cache_read_begin(svc->cache);
	if (cache_node_lookup(svc->cache, node, strlen(node), &v)) {
		bind_record_devices(&v, devices, rec);
	} else {
		cache_devices_format(devices, rec->ids, sizeof(rec->ids));
		rec->link[0] = rec->uuids[0] = '\0';
	}
	cache_read_end(svc->cache);
}

char *ext__binding_annotations(const struct ext_service *svc, const char *node,
			       uint64_t devices, const char *plan, char *ids, size_t idslen)
{
	struct bind_record rec = { .ids = "" };

	bind_name_devices(svc, node, devices, &rec);
	snprintf(ids, idslen, "%s", rec.ids);
	return binding_annotations(&rec, plan);
}

/* An Event on the pod (cache/events.h): a choice or a refusal, in the words
 * the log line has. Only queued; nothing when events are off. */
static void pod_event(const struct ext_service *svc, const char *ns, const char *name,
		      const char *uid, bool refused, const char *note)
{
	const struct cache_event_ref ref = { "Pod", "v1", ns, name, uid };

	/* A refusal's note is its reason: another reason, another Event. */
	cache_events_emit(svc->events,
			  refused ? CACHE_EVENT_WARNING | CACHE_EVENT_BY_NOTE : CACHE_EVENT_NORMAL, &ref,
			  refused ? "BindRefused" : "DevicesChosen", "Binding", "%s", note);
}

/* ---- Posting the Binding, and posting it again -------------------------------- */

/* A binding posted to the API server, waiting for its answer. */
struct bind_pending {
	const struct ext_service *svc;
	struct ext_reply *r;
	struct ext_async async;
	char uid[K8S_UID_BUF];
	char ns[K8S_NAMESPACE_BUF];
	char name[K8S_NAME_BUF];
	char node[K8S_NAME_BUF];
	char ids[EXT_DEVICE_IDS_BUF];
	char link[EXT_LINK_NAME_BUF];   /* the devices' worst link, "" when unknown */
	char *ann;                      /* the Binding's annotations, JSON; owned */
	int attempt;                    /* posts so far, minus one */
	uint64_t retry_until_ns;        /* gang member: refusals retried until then; 0: not */
};

static void bind_posted(void *arg, int result, const char *msg, unsigned retry_after_ms);

static void pending_free(struct bind_pending *p)
{
	if (p)
		free(p->ann);
	free(p);
}

/* The Binding <p> posts, each time the same. A pod given no device carries no
 * annotations. */
static struct cache_binding binding_of(const struct bind_pending *p)
{
	return (struct cache_binding){ p->ns, p->name, p->uid, p->node, p->ids[0] ? p->ann : NULL };
}

enum { BIND_POST_ATTEMPTS = 3, BIND_RETRY_FIRST_MS = 200, BIND_RETRY_MAX_MS = 2000 };

int ext__bind_retry_delay_ms(int result, unsigned attempt, unsigned retry_after_ms,
			     uint64_t until_ns)
{
	uint64_t now = util_now_ns(), left_ms = until_ns > now ? (until_ns - now) / 1000000u : 0;
	unsigned delay;

	if (result == 0 || result == -ENOENT || result == -EEXIST || result == -ECANCELED ||
	    result == -ENOMEM)
		return -1;      /* bound, gone, bound elsewhere, stopping: posting cannot help */
	delay = BIND_RETRY_FIRST_MS << (attempt < 4 ? attempt : 4);
	if (delay > BIND_RETRY_MAX_MS)
		delay = BIND_RETRY_MAX_MS;
	if (retry_after_ms > delay)
		delay = retry_after_ms;         /* the server said when */
	/* Never past the deadline: one last post just before it rather than
	 * giving up early. */
	if (left_ms <= BIND_RETRY_FIRST_MS)
		return -1;
	if (delay > left_ms - BIND_RETRY_FIRST_MS)
		delay = (unsigned)(left_ms - BIND_RETRY_FIRST_MS);
	return (int)delay;
}

/* Post the same Binding again (binder thread) when that can still help:
 * - a single pod whose outcome is unknown (timeout, connection error, 5xx): at
 *   once, up to BIND_POST_ATTEMPTS posts in all;
 * - a gang member after quorum, refused or unconfirmed (a webhook's 403, a 429,
 *   a 5xx): after a backoff (200 ms doubling to 2 s) while the parked request
 *   still has time (gang_bind_budget_s: until its parked request must be answered). Its devices stay assumed meanwhile,
 *   so a transient refusal never leaves the gang partly bound. A pod that is
 *   gone or bound elsewhere is not retried. */
static bool post_again(struct bind_pending *p, int result, unsigned retry_after_ms)
{
	struct cache_binding b = binding_of(p);
	bool ambiguous = result == -ETIMEDOUT || result == -EIO;
	unsigned delay = 0;

	if (p->retry_until_ns) {
		int d = ext__bind_retry_delay_ms(result, (unsigned)p->attempt, retry_after_ms,
						 p->retry_until_ns);

		if (d < 0)
			return false;
		delay = (unsigned)d;
	} else if (!ambiguous || p->attempt + 1 >= BIND_POST_ATTEMPTS) {
		return false;
	}
	p->attempt++;
	log_info("extender", "bind: %s %s/%s -> node %s: posting again in %u ms%s (attempt %d)",
		 p->retry_until_ns ? "gang member" : "pod", p->ns, p->name, p->node, delay,
		 retry_after_ms && delay == retry_after_ms ? " as its Retry-After says" : "",
		 p->attempt + 1);
	return cache_binder_submit_after(p->svc->binder, &b, delay, bind_posted, p) == 0;
}

/* The API server answered (binder thread): keep or roll back the assumption,
 * then complete the reply. A timeout, a connection error or a 5xx does not say
 * whether the binding was committed: the same Binding is posted again (the UID
 * precondition makes that safe, and a commit shows as 409 "already assigned to
 * this node"); if the outcome stays unknown the pod keeps occupying its devices
 * until the watch shows the pod or cache_pod_expire gives up - never free while
 * the pod may be running on them. */
static void bind_posted(void *arg, int result, const char *msg, unsigned retry_after_ms)
{
	struct bind_pending *p = arg;
	bool ambiguous = result == -ETIMEDOUT || result == -EIO;

	if (post_again(p, result, retry_after_ms))
		return;
	if (result == 0) {
		cache_pod_mark_bind(p->svc->cache, p->uid, true);
		log_info("extender", "bind: pod %s/%s -> node %s, GPU devices [%s] (%s)", p->ns,
			 p->name, p->node, p->ids, msg);
		if (p->svc->events) {
			char note[CACHE_EVENT_NOTE_BUF];

			snprintf(note, sizeof(note), "bound to node %s, GPU devices [%s]%s%s",
				 p->node, p->ids, p->link[0] ? ", worst link " : "", p->link);
			pod_event(p->svc, p->ns, p->name, p->uid, false, note);
		}
		strbuf_puts(&p->r->body, "{\"Error\":\"\"}");
	} else if (ambiguous) {
		cache_pod_mark_bind(p->svc->cache, p->uid, false);
		log_warn("extender", "bind: pod %s/%s -> node %s: outcome unknown after %d attempts "
			 "(%s); its GPUs stay held until the cluster shows the pod", p->ns, p->name,
			 p->node, p->attempt + 1, msg);
		ext__reply_error(p->r, 200, "troupe: the API server did not confirm binding pod "
				 "%s/%s to node %s (%s); its GPUs stay held until the cluster shows "
				 "where it is", p->ns, p->name, p->node, msg);
	} else {
		/* The devices go back at once: the pod was not bound. */
		cache_pod_forget(p->svc->cache, p->uid);
		log_warn("extender", "bind: pod %s/%s -> node %s failed, GPUs released: %s", p->ns,
			 p->name, p->node, msg);
		ext__reply_error(p->r, 200, "troupe: binding pod %s/%s to node %s failed: %s",
				 p->ns, p->name, p->node, msg);
		if (p->svc->events) {
			char note[CACHE_EVENT_NOTE_BUF];

			snprintf(note, sizeof(note), "the Binding to node %s failed, GPUs released: "
				 "%s", p->node, msg);
			pod_event(p->svc, p->ns, p->name, p->uid, true, note);
		}
	}
	p->async.done(p->async.ctx);
	pending_free(p);
}

/* Post the binding for a pod whose devices are already assumed. Returns true
 * when the reply is complete now (the post could not even be queued). */
static bool bind_post(const struct ext_service *svc, const struct cache_pod_info *info,
		      const char *uid, const char *node, const struct bind_record *rec,
		      const char *plan, uint64_t retry_until_ns, struct ext_reply *r,
		      const struct ext_async *async)
{
	struct bind_pending *p = calloc(1, sizeof(*p));
	struct cache_binding b;
	int ret;

	if (!p) {
		cache_pod_forget(svc->cache, uid);
		ext__reply_error(r, 200, "troupe: out of memory binding pod %s/%s", info->ns,
				 info->name);
		return true;
	}
	p->svc = svc;
	p->r = r;
	p->async = *async;
	p->retry_until_ns = retry_until_ns;
	snprintf(p->uid, sizeof(p->uid), "%s", uid);
	snprintf(p->ns, sizeof(p->ns), "%s", info->ns);
	snprintf(p->name, sizeof(p->name), "%s", info->name);
	snprintf(p->node, sizeof(p->node), "%s", node);
	snprintf(p->ids, sizeof(p->ids), "%s", rec->ids);
	snprintf(p->link, sizeof(p->link), "%s", rec->link);
	p->ann = binding_annotations(rec, plan);
	if (!p->ann) {
		cache_pod_forget(svc->cache, uid);
		ext__reply_error(r, 200, "troupe: out of memory binding pod %s/%s", info->ns,
				 info->name);
		free(p);
		return true;
	}
	b = binding_of(p);
	ret = cache_binder_submit(svc->binder, &b, bind_posted, p);
	if (ret < 0) {
		cache_pod_forget(svc->cache, uid);
		ext__reply_error(r, 200, "troupe: cannot post the binding for pod %s/%s: %s",
				 info->ns, info->name, strerror(-ret));
		pending_free(p);
		return true;
	}
	return false;
}

/* ---- A gang member's bind ------------------------------------------------------ */

/* A gang member's bind, parked by the gang manager until the gang's quorum. */
struct parked {
	const struct ext_service *svc;
	struct ext_reply *r;
	struct ext_async async;
	struct cache_pod_info info;
	char uid[K8S_UID_BUF];
	char node[K8S_NAME_BUF];
	uint64_t devices;
	struct bind_record rec;
	uint64_t retry_until_ns;        /* when the parked request must be answered */
};

/* The gang manager let the bind go (quorum) or gave up on it (expiry). */
static void gang_released(void *ctx, bool ok, const char *why, const char *plan)
{
	struct parked *pk = ctx;
	bool complete = true;

	/* What the Binding records, from the devices the member claimed. */
	bind_name_devices(pk->svc, pk->node, pk->devices, &pk->rec);
	if (!ok) {
		/* The manager has already released the member's devices. */
		log_info("extender", "bind: pod %s/%s: %s", pk->info.ns, pk->info.name, why);
		ext__reply_error(pk->r, 200, "%s", why);
		pod_event(pk->svc, pk->info.ns, pk->info.name, pk->uid, true, why);
	} else if (pk->svc->binder) {
		complete = bind_post(pk->svc, &pk->info, pk->uid, pk->node, &pk->rec, plan,
				     pk->retry_until_ns, pk->r, &pk->async);
	} else {
		log_info("extender", "bind: pod %s/%s -> node %s, GPU devices [%s] (gang complete)",
			 pk->info.ns, pk->info.name, pk->node, pk->rec.ids);
		strbuf_puts(&pk->r->body, "{\"Error\":\"\"}");
	}
	if (complete)
		pk->async.done(pk->async.ctx);
	free(pk);
}

/* Hand a gang member's bind to the gang manager. GANG_BIND_HELD: parked, the
 * reply completes through <async>; GANG_BIND_REFUSED: <r> says why;
 * GANG_BIND_NOT_A_GANG: bind it as a single pod. */
static enum gang_bind_result bind_gang(const struct ext_service *svc,
				       const struct cache_pod_info *info,
				       const struct placement_request *req, const char *uid,
				       const char *node, struct ext_reply *r,
				       const struct ext_async *async)
{
	struct gang_member mb = ext__gang_member(uid, info->ns, info->name, info->group,
						 info->min_member, req, info->priority,
						 info->queue, info->pinned);
	struct parked *pk = calloc(1, sizeof(*pk));
	enum gang_bind_result gr;
	char reason[EXT_REPLY_ERROR_BUF], err[EXT_REQUEST_ERR_BUF];

	if (!pk) {
		ext__reply_error(r, 200, "troupe: out of memory binding pod %s/%s", info->ns,
				 info->name);
		return GANG_BIND_REFUSED;
	}
	/* filter reported a bad value already; here it only means no key. */
	gang_topology_parse(info->gang_topology, &mb.required_key, err, sizeof(err));
	pk->svc = svc;
	pk->r = r;
	pk->async = *async;
	pk->info = *info;
	pk->retry_until_ns = util_now_ns() +
			     (uint64_t)gang_bind_budget_s(svc->cfg ? &svc->cfg->gang : NULL) *
			     1000000000u;
	snprintf(pk->uid, sizeof(pk->uid), "%s", uid);
	snprintf(pk->node, sizeof(pk->node), "%s", node);
	gr = gang_bind(svc->gangs, &mb, node, gang_released, pk, &pk->devices, reason,
		       sizeof(reason));
	if (gr == GANG_BIND_HELD)
		return gr;      /* <pk> belongs to the manager now (it may be gone already) */
	free(pk);
	if (gr == GANG_BIND_REFUSED) {
		log_info("extender", "bind: pod %s/%s: %s", info->ns, info->name, reason);
		ext__reply_error(r, 200, "%s", reason);
		pod_event(svc, info->ns, info->name, uid, true, reason);
	}
	return gr;
}

/* ---- What a bind must pass first ------------------------------------------------- */

/* Who sent the request, for a refusal's log line. The verb is not told: the
 * HTTP server knows the peer's address (and, with TLS, its certificate) but
 * does not pass it on (docs: bind.md). */
static const char *bind_caller(const struct ext_async *async)
{
	return async && async->peer ? async->peer : "a client the server does not name";
}

/* Refuse the bind: log who asked and why, and answer with the reason in the
 * ExtenderBindingResult's Error. Nothing has been claimed or posted. */
static void bind_refuse(const struct ext_service *svc, struct ext_reply *r,
			const struct ext_async *async, const struct ext_bind_args *b,
			const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void bind_refuse(const struct ext_service *svc, struct ext_reply *r,
			const struct ext_async *async, const struct ext_bind_args *b,
			const char *fmt, ...)
{
	char why[EXT_REPLY_ERROR_BUF];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warn("extender", "bind: refused pod %s/%s (uid %s) -> node %s, asked by %s: %s",
		 b->pod_namespace, b->pod_name, b->pod_uid, b->node, bind_caller(async), why);
	ext__reply_error(r, 200, "%s", why);
	pod_event(svc, b->pod_namespace, b->pod_name, b->pod_uid, true, why);
}

/* Write a refusal's reason into <why> (at most <len> bytes: names at their
 * longest are cut, as the reply's Error would cut them). */
static void say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

/* Whether pod <info> (the cache's copy for the request's uid) may be bound as
 * <b> asks. Returns 0 for a new bind; -EALREADY when the pod is already on
 * <b>'s node (a retry after a lost reply: answered as done, nothing posted);
 * -EEXIST when it is bound elsewhere; -EPERM when refused, with <why>.
 *
 * kube-scheduler binds only pods it filtered, unbound ones. A pod troupe knows
 * neither from its watch nor from a filter call is refused. One known only
 * from a filter call is bound: kube-scheduler often binds before troupe's
 * watch delivers a new pod (tens of milliseconds on the real control plane),
 * and refusing would cost every such pod a retry. That filter's caller chose
 * the pod's body, which is why the verbs port takes only the scheduler's
 * identity in production (TLS with allowed subjects, docs/security.md); the
 * API server still refuses a Binding whose UID is not the pod's. */
static int bind_check_pod(const struct ext_bind_args *b, const struct cache_pod_info *info,
			  char *why, size_t len)
{
	if (info->reservation) {
		say(why, len, "troupe: uid %s is not a pod (it names GPUs troupe keeps for a "
		    "gang)", b->pod_uid);
		return -EPERM;
	}
	if (strcmp(info->name, b->pod_name) != 0 || strcmp(info->ns, b->pod_namespace) != 0) {
		say(why, len, "troupe: uid %s belongs to pod %s/%s, not %s/%s", b->pod_uid,
		    info->ns, info->name, b->pod_namespace, b->pod_name);
		return -EPERM;
	}
	if (info->state == CACHE_POD_STATE_ASSUMED || info->state == CACHE_POD_STATE_BOUND ||
	    info->node[0])
		/* On a node already: troupe's bind, the watch's spec.nodeName (a pod
		 * asking no GPU occupies nothing but still names its node). */
		return strcmp(info->node, b->node) == 0 ? -EALREADY : -EEXIST;
	if (!info->active) {
		say(why, len, "troupe: pod %s/%s has finished or is being deleted", info->ns,
		    info->name);
		return -EPERM;
	}
	return 0;
}

/* Whether <node> can take pod <info> as far as the node itself says: troupe
 * knows it, it is Ready and not cordoned, and for a pod asking GPUs it offers
 * that kind (placement_node_usable, the rule filter and the gang planner
 * use). A pod asking no GPU has no kind to match, so only the node's state is
 * asked. Returns 0, or -EPERM with <why>. */
int ext__bind_check_node(const struct ext_service *svc, const struct cache_pod_info *info,
			 const char *node, char *why, size_t len)
{
	const struct cache_opts *opts = cache_get_opts(svc->cache);
	struct cache_node_view v;
	enum placement_usable u = PLACEMENT_USABLE;
	int ret = -EPERM;

	cache_read_begin(svc->cache);
	if (!cache_node_lookup(svc->cache, node, strlen(node), &v)) {
		say(why, len, "troupe: node %s is unknown to troupe", node);
		goto out;
	}
	if (info->demand.gpus > 0)
		u = placement_node_usable(v.node, info->demand.gpu_resource);
	else if (!v.node->ready)
		u = PLACEMENT_NOT_READY;
	else if (v.node->unschedulable)
		u = PLACEMENT_CORDONED;
	switch (u) {
	case PLACEMENT_USABLE:
		ret = 0;
		break;
	case PLACEMENT_NO_GPU_KIND:
		say(why, len, "troupe: node has no %s; not binding pod %s/%s to node %s",
		    (unsigned)info->demand.gpu_resource < opts->n_gpu_resources
			    ? opts->gpu_resources[info->demand.gpu_resource]
			    : "GPU of the kind asked",
		    info->ns, info->name, node);
		break;
	case PLACEMENT_NOT_READY:
		say(why, len, "troupe: node is not Ready; not binding pod %s/%s to node %s",
		    info->ns, info->name, node);
		break;
	case PLACEMENT_CORDONED:
		say(why, len, "troupe: node is cordoned (spec.unschedulable); not binding pod "
		    "%s/%s to node %s", info->ns, info->name, node);
		break;
	}
out:
	cache_read_end(svc->cache);
	return ret;
}

/* ---- The verb ------------------------------------------------------------------- */

bool ext_bind(const struct ext_service *svc, const char *body, size_t len, struct ext_reply *r,
	      const struct ext_async *async)
{
	struct ext_bind_args b;
	struct cache_pod_info info;
	struct cache_node_view v;
	struct bind_record rec = { .link = "", .uuids = "" };
	char err[EXT_REQUEST_ERR_BUF] = "", why[EXT_REPLY_ERROR_BUF];
	struct placement_request req = { 0 };
	uint64_t devices = 0;
	int ret = -EAGAIN;
	bool node_seen = false, complete = true;

	if (ext_bind_args_decode(body, len, &b, err, sizeof(err)) < 0) {
		log_warn("extender", "bind: bad request (%zu bytes): %s", len, err);
		ext__reply_error(r, 400, "troupe: bad bind request: %s", err);
		goto out;
	}
	if (!b.pod_uid[0] || !b.node[0] || !b.pod_name[0]) {
		log_warn("extender", "bind: request lacks PodUID, PodName or Node");
		ext__reply_error(r, 200, "troupe: bind request must name PodName, PodUID and Node");
		goto out;
	}
	if (cache_pod_get(svc->cache, b.pod_uid, &info) < 0) {
		/* Perhaps a pod created a moment ago that troupe's watch has not
		 * delivered yet: kube-scheduler retries, and by then it has. */
		bind_refuse(svc, r, async, &b, "troupe: pod %s/%s (uid %s) is unknown to troupe; it is "
			    "neither in the cluster state it watches nor seen by filter",
			    b.pod_namespace, b.pod_name, b.pod_uid);
		goto out;
	}
	ret = bind_check_pod(&b, &info, why, sizeof(why));
	if (ret == -EPERM) {
		bind_refuse(svc, r, async, &b, "%s", why);
		goto out;
	}
	if (ret == 0) {
		req.demand = info.demand;
		if (!info.demand_valid ||
		    placement_policy_parse(info.topology, &req.policy, err, sizeof(err)) < 0) {
			bind_refuse(svc, r, async, &b, "troupe: pod %s/%s has an invalid GPU request%s%s",
				    info.ns, info.name, err[0] ? ": " : "", err);
			goto out;
		}
		if (ext__bind_check_node(svc, &info, b.node, why, sizeof(why)) < 0) {
			bind_refuse(svc, r, async, &b, "%s", why);
			goto out;
		}
		ret = -EAGAIN;  /* claim below */
	}
	if (ret == -EAGAIN && svc->gangs && info.group[0] && async && info.demand.gpus > 0) {
		enum gang_bind_result gr = bind_gang(svc, &info, &req, b.pod_uid, b.node, r,
							     async);

		if (gr == GANG_BIND_HELD) {
			ext_top_choice_judge(svc->top_choice, info.ns, info.name, b.pod_uid, b.node);
			complete = false;
			goto out;
		}
		if (gr == GANG_BIND_REFUSED)
			goto out;
	}
	if (ret == -EALREADY || ret == -EEXIST) {
		/* A repeated bind (kube-scheduler retrying after a lost reply). With an
		 * API server it is done only once the cluster accepted the Binding. */
		devices = info.devices;
		if (ret == -EALREADY && svc->binder && info.state == CACHE_POD_STATE_ASSUMED &&
		    !info.posted) {
			ext__reply_error(r, 200, "troupe: the binding of pod %s/%s to node %s is still "
					 "in progress%s; retry", info.ns, info.name, b.node,
					 info.uncertain ? " (the API server has not confirmed it)"
							: "");
			goto out;
		}
	}
	for (int attempt = 0; attempt < BIND_ATTEMPTS && ret == -EAGAIN; attempt++) {
		struct placement_fit fit;
		struct placement_choice choice;

		cache_read_begin(svc->cache);
		if (!cache_node_lookup(svc->cache, b.node, strlen(b.node), &v)) {
			cache_read_end(svc->cache);
			ret = -ENOENT;
			break;
		}
		node_seen = true;
		if (info.demand.gpus > 0 &&
		    placement_check_request(&v, &req, cache_get_opts(svc->cache)->gpu_resources,
					    &fit) != PLACEMENT_FITS) {
			cache_read_end(svc->cache);
			snprintf(err, sizeof(err), "%s", fit.reason);
			ret = -ENOSPC;
			break;
		}
		devices = 0;
		ret = info.demand.gpus == 0 ? 0 : placement_node_choose(&v, info.demand.gpu_resource,
									 cache_view_free_mask(&v),
									 info.demand.gpus,
									 &req.policy, &choice);
		if (ret == 0 && info.demand.gpus > 0) {
			devices = choice.set;
			bind_record_devices(&v, devices, &rec);
		}
		cache_read_end(svc->cache);
		if (ret == 0)
			ret = cache_pod_assume(svc->cache, b.pod_uid, b.node, &devices);
		else
			ret = -EAGAIN;  /* the free mask moved under us: read again */
	}
	/* Named above when chosen here; a repeated bind's devices, or none, now. */
	if (ret != 0 || info.demand.gpus == 0)
		bind_name_devices(svc, b.node, devices, &rec);
	switch (ret) {
	case 0:
		if (info.demand.gpus > 0)       /* was it troupe's first choice? */
			ext_top_choice_judge(svc->top_choice, info.ns, info.name, b.pod_uid, b.node);
		if (svc->binder && async) {
			complete = bind_post(svc, &info, b.pod_uid, b.node, &rec, NULL, 0, r, async);
			break;
		}
		log_info("extender", "bind: pod %s/%s -> node %s, GPU devices [%s]%s%s", info.ns,
			 info.name, b.node, rec.ids, rec.link[0] ? ", worst link " : "", rec.link);
		strbuf_puts(&r->body, "{\"Error\":\"\"}");
		break;
	case -EALREADY:
		log_info("extender", "bind: pod %s/%s already on node %s [%s]; nothing to do",
			 info.ns, info.name, b.node, rec.ids);
		strbuf_puts(&r->body, "{\"Error\":\"\"}");
		break;
	case -EEXIST:
		bind_refuse(svc, r, async, &b, "troupe: pod %s/%s is already bound to node %s", info.ns,
			    info.name, info.node);
		break;
	case -ENOENT:
		if (!node_seen) {
			log_warn("extender", "bind: node %s is unknown", b.node);
			ext__reply_error(r, 200, "troupe: node %s is unknown to troupe", b.node);
		} else {
			log_warn("extender", "bind: pod %s/%s or node %s was removed while binding",
				 info.ns, info.name, b.node);
			ext__reply_error(r, 200, "troupe: pod %s/%s or node %s was removed while "
					 "binding", info.ns, info.name, b.node);
		}
		break;
	case -ENOSPC:
		if (!err[0])
			snprintf(err, sizeof(err), "troupe: node %s no longer has %u free GPUs",
				 b.node, info.demand.gpus);
		log_info("extender", "bind: pod %s/%s no longer fits node %s: %s", info.ns,
			 info.name, b.node, err);
		pod_event(svc, info.ns, info.name, b.pod_uid, true, err);
		ext__reply_error(r, 200, "%s (pod %s/%s on node %s; it will be retried)", err,
				 info.ns, info.name, b.node);
		break;
	default:
		log_warn("extender", "bind: pod %s/%s on node %s: could not claim devices after %d "
			 "attempts (%s)", info.ns, info.name, b.node, BIND_ATTEMPTS, strerror(-ret));
		ext__reply_error(r, 200, "troupe: could not claim GPUs on node %s for pod %s/%s "
				 "(%s)", b.node, info.ns, info.name, strerror(-ret));
		break;
	}
out:
	ext_bind_args_fini(&b);
	return complete;
}
