/* Reading a verb's request and shaping its answer: the reply's lifetime and
 * error form, the request's pod (its demand and topology policy), and a
 * full-mode node object paired with the cache's usage. Walking the request's
 * nodes is in internal.h (inline: the hot path).
 */
#include "extender/internal.h"

#include <stdarg.h>
#include <stdio.h>

#include "common/log.h"

void ext_reply_init(struct ext_reply *r)
{
	r->status = 200;
	r->error = false;
	strbuf_init(&r->body);
}

void ext_reply_fini(struct ext_reply *r)
{
	strbuf_fini(&r->body);
}

void ext__reply_verror(struct ext_reply *r, unsigned status,
		       void (*encode)(struct strbuf *body, const char *msg, unsigned status),
		       const char *fmt, va_list ap)
{
	char msg[EXT_REPLY_ERROR_BUF];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	r->status = status;
	r->error = true;
	strbuf_fini(&r->body);
	encode(&r->body, msg, status);
}

/* The verbs' error form: {"Error":"<message>"}, the status apart. */
static void encode_verb_error(struct strbuf *body, const char *msg, unsigned status)
{
	(void)status;
	ext_encode_error(body, msg);
}

void ext__reply_error(struct ext_reply *r, unsigned status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ext__reply_verror(r, status, encode_verb_error, fmt, ap);
	va_end(ap);
}

struct cache_node *ext__request_node_view(const struct ext_service *svc, const cJSON *it,
					  struct cache_node_view *v)
{
	char err[CACHE_ERR_LEN];
	struct cache_node *node = cache_node_parse(it, cache_get_opts(svc->cache), err,
						   sizeof(err));
	struct cache_node_view known;
	size_t len;

	if (!node)
		return NULL;
	len = strlen(node->name);
	v->node = node;
	if (cache_node_lookup(svc->cache, node->name, len, &known)) {
		node->derived = known.node->derived;
		v->used = known.used;
		v->unattributed = known.unattributed;
	} else {
		/* Not a node troupe knows, but pods it knows may occupy GPUs there. */
		cache_usage_lookup(svc->cache, node->name, len, &v->used, &v->unattributed);
	}
	return node;
}

/* The pod's own spec is wrong: an error in <r>, or the reason in <fault>. */
static void pod_fault(struct ext_reply *r, char *fault, const struct cache_pod *pod,
		      const char *why)
{
	if (fault)
		snprintf(fault, EXT_REPLY_ERROR_BUF, "troupe: pod %s/%s: %s", pod->ns, pod->name,
			 why);
	else
		ext__reply_error(r, 200, "troupe: pod %s/%s: %s", pod->ns, pod->name, why);
}

struct cache_pod *ext__request_pod(const struct ext_service *svc, const struct ext_args *a,
				   const char *verb, struct ext_reply *r,
				   struct placement_request *req, char *fault)
{
	char err[CACHE_ERR_LEN];
	struct cache_pod *pod = cache_pod_parse(a->pod, cache_get_opts(svc->cache), err,
						sizeof(err));

	if (!pod) {
		log_warn("extender", "%s: rejected request: %s", verb, err);
		ext__reply_error(r, 200, "troupe: %s", err);
		return NULL;
	}
	if (pod->demand_error) {
		log_info("extender", "%s: pod %s/%s has an invalid GPU request: %s", verb, pod->ns,
			 pod->name, pod->demand_error);
		pod_fault(r, fault, pod, pod->demand_error);
		cache_pod_free(pod);
		return NULL;
	}
	req->demand = pod->demand;
	if (placement_policy_parse(pod->topology, &req->policy, err, sizeof(err)) < 0) {
		log_info("extender", "%s: pod %s/%s: %s", verb, pod->ns, pod->name, err);
		pod_fault(r, fault, pod, err);
		cache_pod_free(pod);
		return NULL;
	}
	return pod;
}
