/* What the informer applies: listed objects and watch events, each a Node,
 * Pod or PodGroup put into (or deleted from) the store by the informer, its
 * writer; the keys a list saw, for the sweep after a relist that deletes what
 * the list no longer shows. Watch bytes are buffered until a line is
 * complete; a partial line left when a stream ends is never applied.
 */
#include "cache/informer.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

/* ---- Applying objects ------------------------------------------------------ */

void cache__inf_seen_clear(struct stream *s)
{
	size_t pos = 0;
	const char *k;

	while (strmap_next(&s->seen, &pos, &k, NULL))
		free((char *)k);
	strmap_fini(&s->seen);
}

void cache__inf_seen_add(struct stream *s, const char *key)
{
	char *k;

	if (strmap_get(&s->seen, key, strlen(key)))
		return;
	k = strdup(key);
	if (k && strmap_put(&s->seen, k, strlen(k), k, NULL) < 0)
		free(k);
}

static const char *obj_rv(const cJSON *obj)
{
	return json_str(json_obj(obj, "metadata"), "resourceVersion");
}

void cache__inf_remember_rv(struct stream *s, const char *rv)
{
	if (rv && *rv && strlen(rv) < sizeof(s->rv))
		snprintf(s->rv, sizeof(s->rv), "%s", rv);
}

/* Apply one Queue of the stream's kind (its weight for fair sharing). */
static void apply_queue(struct stream *s, const cJSON *obj, bool deleted, char *key,
			size_t keylen)
{
	enum cache_queue_api api = (enum cache_queue_api)kinds[s->kind].q_api;
	struct cache_queue q;
	char err[CACHE_ERR_LEN];

	if (cache_queue_parse(obj, api, &q, err, sizeof(err)) < 0) {
		log_warn("informer", "ignoring a queue: %s", err);
		return;
	}
	if (key)
		snprintf(key, keylen, "%s", q.name);
	if (deleted)
		cache_queue_delete(s->inf->cache, api, q.name);
	else
		cache_queue_apply(s->inf->cache, api, &q);
}

/* Apply one DRA ResourceSlice or ResourceClaim (dra.c). Its key for the relist
 * sweep: a slice's name, a claim's uid. */
static void apply_dra(struct stream *s, const cJSON *obj, bool deleted, char *key,
		      size_t keylen)
{
	const cJSON *meta = json_obj(obj, "metadata");
	const char *id = json_str(meta, kinds[s->kind].dra == 1 ? "name" : "uid");
	char err[CACHE_ERR_LEN];
	int ret = kinds[s->kind].dra == 1
			  ? cache_dra_slice(s->inf->cache, obj, deleted, err, sizeof(err))
			  : cache_dra_claim(s->inf->cache, obj, deleted, err, sizeof(err));

	if (ret < 0) {
		log_warn("informer", "ignoring a %s: %s", kinds[s->kind].name, err);
		return;
	}
	if (key && id)
		snprintf(key, keylen, "%s", id);
}

/* Apply one object of the stream's kind. <deleted>: it is gone. When <key> is
 * given, the object's identity is written there (for relist bookkeeping). */
void cache__inf_apply_object(struct stream *s, const cJSON *obj, bool deleted, char *key,
			     size_t keylen)
{
	struct cache *c = s->inf->cache;
	const struct cache_opts *opts = cache_get_opts(c);
	char err[CACHE_ERR_LEN];

	if (key)
		key[0] = '\0';
	if (kinds[s->kind].q_api >= 0) {
		apply_queue(s, obj, deleted, key, keylen);
		return;
	}
	if (kinds[s->kind].dra) {
		apply_dra(s, obj, deleted, key, keylen);
		return;
	}
	switch (s->kind) {
	case K_NODES: {
		struct cache_node *n = cache_node_parse(obj, opts, err, sizeof(err));

		if (!n) {
			log_warn("informer", "ignoring a node: %s", err);
			return;
		}
		if (key)
			snprintf(key, keylen, "%s", n->name);
		if (deleted) {
			cache_node_delete(c, n->name);
			cache_node_free(n);
		} else {
			cache_node_upsert(c, n);
		}
		return;
	}
	case K_PODS: {
		struct cache_pod *p = cache_pod_parse(obj, opts, err, sizeof(err));

		if (!p) {
			log_warn("informer", "ignoring a pod: %s", err);
			return;
		}
		if (key)
			snprintf(key, keylen, "%s", p->uid);
		if (deleted) {
			cache_pod_delete(c, p->uid);
			cache_pod_free(p);
		} else {
			cache_pod_apply(c, p);
		}
		return;
	}
	default: {
		/* A PodGroup kind: list items of a built-in API name no apiVersion,
		 * so the stream says which API it is. */
		enum cache_pg_api api = (enum cache_pg_api)kinds[s->kind].pg_api;
		struct cache_podgroup *pg;

		if (kinds[s->kind].pg_api < 0)
			return;
		pg = cache_podgroup_parse_api(obj, api, opts, err, sizeof(err));
		if (!pg) {
			log_warn("informer", "ignoring a %s pod group: %s", cache_pg_apis[api].who,
				 err);
			return;
		}
		if (key)
			snprintf(key, keylen, "%s/%s", pg->ns, pg->name);
		if (deleted) {
			cache_podgroup_delete(c, api, pg->ns, pg->name);
			cache_podgroup_free(pg);
		} else {
			cache_podgroup_apply(c, pg);
		}
		return;
	}
	}
}

static bool keep_seen(const char *key, void *arg)
{
	struct stream *s = arg;

	return strmap_get(&s->seen, key, strlen(key)) != NULL;
}

/* The keys a sweep deletes: gathered while the store is walked under its
 * lock, deleted after. */
struct gone {
	struct stream *s;
	char (*key)[K8S_KEY_BUF];
	size_t n, cap;
};

/* Add <key> unless the list kept it. Without memory, fewer are deleted this
 * sweep; the next relist finds them again. */
static void gone_add(struct gone *g, const char *key)
{
	if (keep_seen(key, g->s))
		return;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 64;
		char (*k)[K8S_KEY_BUF] = realloc(g->key, cap * sizeof(*k));

		if (!k)
			return;
		g->key = k;
		g->cap = cap;
	}
	snprintf(g->key[g->n++], sizeof(g->key[0]), "%s", key);
}

static void collect_gone_queue(const struct cache_queue *q, void *arg)
{
	gone_add(arg, q->name);
}

static void collect_gone_group(const struct cache_podgroup *pg, void *arg)
{
	struct gone *g = arg;
	char key[K8S_KEY_BUF];

	if ((int)pg->api != kinds[g->s->kind].pg_api)
		return;         /* each API's list sweeps its own groups */
	snprintf(key, sizeof(key), "%s/%s", pg->ns, pg->name);
	gone_add(g, key);
}

/* After a complete list: delete what the list did not contain. */
void cache__inf_sweep(struct stream *s)
{
	const struct kind_info *k = &kinds[s->kind];
	struct cache *c = s->inf->cache;
	struct gone g = { s, NULL, 0, 0 };

	if (s->kind == K_NODES) {
		cache__node_sweep(c, keep_seen, s);
	} else if (s->kind == K_PODS) {
		cache__pod_sweep(c, keep_seen, s);
	} else if (k->dra) {
		cache_dra_sweep(c, k->dra == 2, keep_seen, s);
	} else if (k->q_api >= 0) {
		cache_queue_foreach(c, (enum cache_queue_api)k->q_api, collect_gone_queue, &g);
		for (size_t i = 0; i < g.n; i++)
			cache_queue_delete(c, (enum cache_queue_api)k->q_api, g.key[i]);
	} else if (k->pg_api >= 0) {
		cache_podgroup_foreach(c, collect_gone_group, &g);
		for (size_t i = 0; i < g.n; i++) {
			char *slash = strchr(g.key[i], '/');

			*slash = '\0';
			cache_podgroup_delete(c, (enum cache_pg_api)k->pg_api, g.key[i], slash + 1);
		}
	}
	free(g.key);
}


/* ---- Watch events ------------------------------------------------------------ */

static void handle_event(struct stream *s, const char *text, size_t len);

/* Split the stream into lines and apply each complete one. */
size_t cache__inf_on_watch_data(char *ptr, size_t size, size_t n, void *arg)
{
	struct stream *s = arg;
	size_t total = size * n, start = 0;

	if (__atomic_load_n(&s->inf->stop, __ATOMIC_RELAXED))
		return 0;
	/* A refused watch (403, 410, 429, 5xx) carries a Status, not events: kept
	 * for the log line. Whether it was refused is known since its headers
	 * ended (on_header set <answered> on a 200), before any of its body: the
	 * status is not asked of curl again for every chunk, and the split into
	 * events can be driven without a transfer (tests/fuzz/). */
	if (!s->answered) {
		if (s->body.len < MAX_STATUS)
			strbuf_append(&s->body, ptr, total);
		return total;
	}
	strbuf_append(&s->line, ptr, total);
	if (strbuf_failed(&s->line) || s->line.len > MAX_LINE) {
		log_warn("informer", "%s watch: an event larger than %d bytes; restarting",
			 kinds[s->kind].name, MAX_LINE);
		s->broken = true;
		return 0;
	}
	for (;;) {
		char *nl = memchr(s->line.buf + start, '\n', s->line.len - start);

		if (!nl)
			break;
		handle_event(s, s->line.buf + start, (size_t)(nl - (s->line.buf + start)));
		start = (size_t)(nl - s->line.buf) + 1;
		if (s->relist || s->broken)
			return 0;       /* abort the transfer; on_done decides what next */
	}
	if (start) {
		memmove(s->line.buf, s->line.buf + start, s->line.len - start);
		s->line.len -= start;
		s->line.buf[s->line.len] = '\0';
	}
	return total;
}

/* The HTTP status an ERROR event's Status carries in "code": a whole number
 * 100..599, else 0. The value is a JSON number the server chose: converting
 * one outside int's range (1e10, 1e309) is undefined behaviour, and a
 * fraction (410.5) is no status. */
static int status_code(const cJSON *code)
{
	if (!cJSON_IsNumber(code) || !(code->valuedouble >= 100 && code->valuedouble < 600) ||
	    code->valuedouble != (double)(int)code->valuedouble)
		return 0;
	return (int)code->valuedouble;
}

static void handle_event(struct stream *s, const char *text, size_t len)
{
	cJSON *ev;
	const cJSON *obj;
	const char *type;

	while (len && (text[len - 1] == '\r' || text[len - 1] == ' '))
		len--;
	if (!len)
		return;
	ev = cJSON_ParseWithLength(text, len);
	type = json_str(ev, "type");
	obj = json_obj(ev, "object");
	if (!ev || !type || !obj) {
		log_warn("informer", "%s watch: unreadable event (%zu bytes); restarting the watch",
			 kinds[s->kind].name, len);
		s->broken = true;
		goto out;
	}
	if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
		cache__inf_apply_object(s, obj, false, NULL, 0);
		cache__inf_remember_rv(s, obj_rv(obj));
	} else if (strcmp(type, "DELETED") == 0) {
		cache__inf_apply_object(s, obj, true, NULL, 0);
		cache__inf_remember_rv(s, obj_rv(obj));
	} else if (strcmp(type, "BOOKMARK") == 0) {
		cache__inf_remember_rv(s, obj_rv(obj));
	} else if (strcmp(type, "ERROR") == 0) {
		int code = status_code(cJSON_GetObjectItemCaseSensitive(obj, "code"));
		const char *msg = json_str(obj, "message");

		if (code == 410) {
			log_info("informer", "%s watch: resourceVersion %s expired (%s); relisting",
				 kinds[s->kind].name, s->rv, msg ? msg : "410");
			s->relist = true;
		} else {
			log_warn("informer", "%s watch: error event %d: %s", kinds[s->kind].name,
				 code, msg ? msg : "?");
			s->broken = true;
		}
		goto out;
	} else {
		log_warn("informer", "%s watch: unknown event type %s", kinds[s->kind].name, type);
		goto out;
	}
	s->events_this_watch++;
	stat_add(&s->inf->stats.events, 1);
out:
	cJSON_Delete(ev);
}

