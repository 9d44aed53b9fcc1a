/* Fuzz targets for the four verb bodies kube-scheduler POSTs: /filter,
 * /prioritize, /bind and /preempt, through the functions the HTTP server calls
 * (ext_filter, ext_prioritize, ext_bind, ext_preempt in src/extender/), over
 * an ext_service whose cache holds the test cluster (tests/data/cluster.json,
 * set up as the extender unit tests' fixture does).
 *
 * Besides "no crash, no sanitizer report", every answer must be one JSON
 * document of the verb's result type, and:
 *   - filter and prioritize name only nodes the request named, and prioritize
 *     scores within 0..MaxExtenderPriority (10);
 *   - preempt names only candidate nodes and victims the request named;
 *   - filter, prioritize and preempt never change the cache, and a refused
 *     bind neither;
 *   - no node is ever over-committed, and a bind that succeeds put the pod it
 *     named on the node it named.
 * A bind that succeeded changed the cluster; the cache is then built again, so
 * every input starts from the same state (and a saved input replays alone).
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cache/cache.h"
#include "common/util.h"
#include "extender/config.h"
#include "extender/verbs.h"
#include "placement/placement.h"

#define CLUSTER TROUPE_SOURCE_ROOT "/tests/data/cluster.json"

enum { MAX_EXTENDER_PRIORITY = 10 };

/* ---- The service ---------------------------------------------------------------- */

static struct ext_config cfg;
static struct cache *cache;
static struct placement_registry *registry;
static struct ext_service svc;

static void service_fini(void);

/* As main.c builds it: each node's GPU topology derived (from its annotation
 * troupe.io/gpu-topology, else a profile) on the cache's writer. */
static int service_init(void)
{
	char err[CACHE_ERR_LEN] = "";

	memset(&svc, 0, sizeof(svc));
	ext_config_defaults(&cfg);
	registry = placement_registry_new();
	if (!registry)
		return -1;
	cfg.cache.node_derive = placement_topo_derive;
	cfg.cache.node_release = placement_topo_release;
	cfg.cache.hook_ctx = registry;
	cache = cache_new(&cfg.cache);
	if (!cache || cache_snapshot_load(cache, CLUSTER, err, sizeof(err)) < 0) {
		fprintf(stderr, "fuzz: cannot load %s: %s\n", CLUSTER, err);
		service_fini();
		return -1;
	}
	cache_set_synced(cache, true);
	svc.cache = cache;
	svc.registry = registry;
	svc.cfg = &cfg;
	svc.score = placement_score_find("binpack");
	svc.source = "fuzz";
	return 0;
}

static void service_fini(void)
{
	cache_free(cache);
	cache = NULL;
	placement_registry_free(registry);
	registry = NULL;
}

static void service_reset(void)
{
	service_fini();
	if (service_init() < 0)
		fuzz_fail("cannot rebuild the test cluster");
}

/* ---- What the cluster looks like, to compare before and after ------------------- */

struct usage_sum {
	uint64_t used_bits;     /* a checksum of every node's usage */
	uint64_t unattributed;
	unsigned over;
	char over_node[64];
};

static bool add_usage(const struct cache_node_view *v, void *arg)
{
	struct usage_sum *u = arg;
	uint64_t cap = cache_node_capacity_mask(v->node);

	u->used_bits = u->used_bits * 31 + v->used;
	u->unattributed += v->unattributed;
	if ((uint32_t)__builtin_popcountll(v->used) + v->unattributed > v->node->gpu_allocatable ||
	    (v->used & ~cap)) {
		u->over++;
		snprintf(u->over_node, sizeof(u->over_node), "%s", v->node->name);
	}
	return true;
}

struct state {
	struct cache_stats stats;
	struct usage_sum usage;
};

static void state_take(struct state *s)
{
	memset(s, 0, sizeof(*s));
	cache_get_stats(cache, &s->stats);
	cache_read_begin(cache);
	cache_node_foreach(cache, add_usage, &s->usage);
	cache_read_end(cache);
	FUZZ_CHECK(!s->usage.over, "%u nodes over-committed, e.g. %s", s->usage.over,
		   s->usage.over_node);
}

/* <a> and <b> are the same cluster. <pods>: the number of pods known too
 * (filter and prioritize may remember the pod a request names, occupying
 * nothing, for a later bind). */
static void state_same(const struct state *a, const struct state *b, bool pods,
		       const char *what)
{
	FUZZ_CHECK(a->stats.nodes == b->stats.nodes && (!pods || a->stats.pods == b->stats.pods) &&
		   a->stats.pods_holding == b->stats.pods_holding &&
		   a->stats.podgroups == b->stats.podgroups &&
		   a->stats.gpus_held == b->stats.gpus_held &&
		   a->usage.used_bits == b->usage.used_bits &&
		   a->usage.unattributed == b->usage.unattributed,
		   "%s changed the cache (pods %zu -> %zu, holding %zu -> %zu, GPUs held %llu -> "
		   "%llu)", what, a->stats.pods, b->stats.pods, a->stats.pods_holding,
		   b->stats.pods_holding, (unsigned long long)a->stats.gpus_held,
		   (unsigned long long)b->stats.gpus_held);
}

/* ---- What the request named -------------------------------------------------------- */

/* Every string a JSON tree holds, keys included, sorted: what an answer may
 * name. */
struct names {
	char **v;
	size_t n, cap;
};

/* <str> as troupe's answers carry it: strbuf_put_json_str writes invalid
 * UTF-8 as U+FFFD (kube-scheduler, in Go, does the same), so a name is
 * compared in that form. NULL when it cannot be made. */
static char *as_answered(const char *str)
{
	struct strbuf sb;
	cJSON *j;
	char *out = NULL;

	strbuf_init(&sb);
	strbuf_put_json_str(&sb, str, strlen(str));
	j = strbuf_failed(&sb) ? NULL : cJSON_ParseWithLength(sb.buf, sb.len);
	if (cJSON_IsString(j))
		out = strdup(j->valuestring);
	cJSON_Delete(j);
	strbuf_fini(&sb);
	return out;
}

static void names_push(struct names *s, char *str)
{
	if (!str)
		return;
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			abort();
	}
	s->v[s->n++] = str;
}

/* <raw> both as it is (full mode echoes a passing item's bytes as sent) and
 * as an answer writes it. */
static void names_add(struct names *s, const char *raw)
{
	if (!raw)
		return;
	names_push(s, strdup(raw));
	names_push(s, as_answered(raw));
}

static void names_walk(struct names *s, const cJSON *j)
{
	for (; j; j = j->next) {
		names_add(s, j->string);
		if (cJSON_IsString(j))
			names_add(s, j->valuestring);
		names_walk(s, j->child);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void names_of(struct names *s, const cJSON *tree)
{
	memset(s, 0, sizeof(*s));
	if (tree)
		names_walk(s, tree);
	if (s->n)
		qsort(s->v, s->n, sizeof(*s->v), cmp_str);
}

static bool names_has(const struct names *s, const char *str)
{
	return s->n && bsearch(&str, s->v, s->n, sizeof(*s->v), cmp_str) != NULL;
}

static void names_fini(struct names *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
}

/* ---- Calling a verb ---------------------------------------------------------------- */

/* The answer must be one JSON document; returns it (the caller deletes it). */
static cJSON *answer(const char *verb, const struct ext_reply *r)
{
	const char *end = NULL;
	cJSON *j;

	FUZZ_CHECK(!strbuf_failed(&r->body) && r->body.buf, "%s: no answer body", verb);
	if (fuzz_verbose)
		fprintf(stderr, "fuzz: %s answered %u %s\n", verb, r->status, r->body.buf);
	FUZZ_CHECK(r->status == 200 || r->status == 400, "%s: status %u", verb, r->status);
	j = cJSON_ParseWithLengthOpts(r->body.buf, r->body.len + 1, &end, 1);
	FUZZ_CHECK(j, "%s: the answer is not JSON: %.300s", verb, r->body.buf);
	FUZZ_CHECK(cJSON_IsObject(j) || cJSON_IsArray(j), "%s: the answer is not an object or list",
		   verb);
	return j;
}

static const char *error_of(const cJSON *a)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(a, "Error");

	return cJSON_IsString(e) ? e->valuestring : NULL;
}

static bool refused(const struct ext_reply *r, const cJSON *a)
{
	const char *e = cJSON_IsObject(a) ? error_of(a) : NULL;

	return r->status != 200 || r->error || (e && *e);
}

/* The request as cJSON reads it (NULL when it does not), for what it named. */
/* The request as troupe reads it: parsed, and with duplicate keys resolved
 * as Go resolves them (the last wins; json_dedupe, as the verbs do). */
static cJSON *request_tree(const uint8_t *data, size_t len)
{
	cJSON *tree = len ? cJSON_ParseWithLength((const char *)data, len) : NULL;

	if (tree)
		(void)json_dedupe(tree);
	return tree;
}

/* ---- filter --------------------------------------------------------------------------- */

static void check_named(const char *verb, const struct names *req, const char *name)
{
	FUZZ_CHECK(name, "%s: the answer names a node that is not a string", verb);
	/* A node item with no name is answered under "" (full-mode filter fails
	 * it as "node object has no name", prioritize scores it 0): allowed. */
	FUZZ_CHECK(!*name || names_has(req, name), "%s: the answer names node \"%.100s\", which the "
		   "request did not", verb, name);
}

/* The request's NodeNames as cJSON reads them, when there is no doubt what
 * they are: one top-level NodeNames, an array of strings. NULL otherwise
 * (duplicate keys are another matter: what a body with two means is for the
 * codec to refuse). */
static const cJSON *plain_node_names(const cJSON *tree)
{
	const cJSON *it, *names = NULL;

	cJSON_ArrayForEach(it, tree) {
		if (!it->string || strcmp(it->string, "NodeNames") != 0)
			continue;
		if (names)
			return NULL;
		names = it;
	}
	if (!cJSON_IsArray(names))
		return NULL;
	cJSON_ArrayForEach(it, names)
		if (!cJSON_IsString(it))
			return NULL;
	return names;
}

/* Every name the request asked about is answered: passed, failed or
 * unresolvable. What the fast NodeNames reader (codec.c: cut_names) took
 * must be what cJSON reads. */
static void check_complete(const char *verb, const cJSON *tree, const struct names *answered)
{
	const cJSON *names = plain_node_names(tree), *it;

	cJSON_ArrayForEach(it, names) {
		char *want = as_answered(it->valuestring);

		FUZZ_CHECK(!want || names_has(answered, want),
			   "%s: node \"%.100s\" of the request is not in the answer", verb,
			   it->valuestring);
		free(want);
	}
}

/* Full mode echoes each passing node item as the request carried it, found in
 * the body by codec.c's own scanner (item_texts): every item of the answer must
 * be one of the request's items, all of them read by cJSON. Compared as
 * printed (cJSON_Compare takes time exponential in the depth); only for
 * requests of up to 64 items. */
static void check_echo(const cJSON *tree, const cJSON *answer_items)
{
	const cJSON *req_items = NULL, *it;
	char *printed[64];
	size_t n = 0;

	cJSON_ArrayForEach(it, tree)
		if (it->string && strcmp(it->string, "Nodes") == 0 && !req_items)
			req_items = cJSON_GetObjectItemCaseSensitive(it, "items");
	if (!cJSON_IsArray(req_items) || cJSON_GetArraySize(req_items) > 64)
		return;
	cJSON_ArrayForEach(it, req_items)
		printed[n++] = cJSON_PrintUnformatted(it);
	cJSON_ArrayForEach(it, answer_items) {
		char *text = cJSON_PrintUnformatted(it);
		bool found = false;

		for (size_t i = 0; i < n && text && !found; i++)
			found = printed[i] && strcmp(printed[i], text) == 0;
		FUZZ_CHECK(found || !text, "filter: the answer passes a node item the request "
			   "did not hold: %.300s", text);
		free(text);
	}
	for (size_t i = 0; i < n; i++)
		free(printed[i]);
}

static bool run_filter(const uint8_t *data, size_t len)
{
	struct ext_reply r;
	struct state before, after;
	struct names req;
	cJSON *a, *tree = request_tree(data, len);
	bool deep;
	const cJSON *it;

	names_of(&req, tree);
	state_take(&before);
	ext_reply_init(&r);
	ext_filter(&svc, (const char *)data, len, &r);
	a = answer("filter", &r);
	deep = r.status == 200;
	FUZZ_CHECK(cJSON_IsObject(a), "filter: the answer is not an object");
	FUZZ_CHECK(cJSON_GetObjectItemCaseSensitive(a, "Error"), "filter: the answer has no Error");
	if (!refused(&r, a)) {
		FUZZ_CHECK(tree, "filter: accepted a body cJSON does not read");
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(a, "NodeNames"))
			check_named("filter", &req, cJSON_IsString(it) ? it->valuestring : NULL);
		/* Full mode echoes the items it passes as sent: one whose name is
		 * no string passes when the pod asks for no GPU (pass_all). */
		check_echo(tree, cJSON_GetObjectItemCaseSensitive(
				   cJSON_GetObjectItemCaseSensitive(a, "Nodes"), "items"));
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(
				       cJSON_GetObjectItemCaseSensitive(a, "Nodes"), "items")) {
			const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
				cJSON_GetObjectItemCaseSensitive(it, "metadata"), "name"));

			if (name)
				check_named("filter", &req, name);
		}
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(a, "FailedNodes"))
			check_named("filter", &req, it->string);
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(a,
				   "FailedAndUnresolvableNodes"))
			check_named("filter", &req, it->string);
		if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(a, "NodeNames"))) {
			struct names ans;

			names_of(&ans, a);
			check_complete("filter", tree, &ans);
			names_fini(&ans);
		}
	}
	state_take(&after);
	state_same(&before, &after, false, "filter");
	if (after.stats.pods != before.stats.pods)
		service_reset();        /* the next input starts from the same cluster */
	cJSON_Delete(a);
	ext_reply_fini(&r);
	names_fini(&req);
	cJSON_Delete(tree);
	return deep;
}

/* ---- prioritize -------------------------------------------------------------------- */

static bool run_prioritize(const uint8_t *data, size_t len)
{
	struct ext_reply r;
	struct state before, after;
	struct names req;
	cJSON *a, *tree = request_tree(data, len);
	bool deep;
	const cJSON *it;

	names_of(&req, tree);
	state_take(&before);
	ext_reply_init(&r);
	ext_prioritize(&svc, (const char *)data, len, &r);
	a = answer("prioritize", &r);
	deep = r.status == 200;
	if (cJSON_IsArray(a)) {
		/* A pod troupe cannot read is answered [] (kube-scheduler ignores
		 * prioritize errors), counted as an error. */
		FUZZ_CHECK(r.status == 200 && (!r.error || cJSON_GetArraySize(a) == 0),
			   "prioritize: a list answered as an error");
		cJSON_ArrayForEach(it, a) {
			const cJSON *score = cJSON_GetObjectItemCaseSensitive(it, "Score");

			check_named("prioritize", &req, cJSON_GetStringValue(
				cJSON_GetObjectItemCaseSensitive(it, "Host")));
			FUZZ_CHECK(cJSON_IsNumber(score) && score->valuedouble >= 0 &&
				   score->valuedouble <= MAX_EXTENDER_PRIORITY &&
				   score->valuedouble == (double)(int)score->valuedouble,
				   "prioritize: a Score out of 0..%d", MAX_EXTENDER_PRIORITY);
		}
		if (cJSON_GetArraySize(a) > 0) {
			struct names ans;

			names_of(&ans, a);
			check_complete("prioritize", tree, &ans);
			names_fini(&ans);
		}
	} else {
		FUZZ_CHECK(refused(&r, a), "prioritize: an object that is not an error");
	}
	state_take(&after);
	state_same(&before, &after, false, "prioritize");
	if (after.stats.pods != before.stats.pods)
		service_reset();        /* the next input starts from the same cluster */
	cJSON_Delete(a);
	ext_reply_fini(&r);
	names_fini(&req);
	cJSON_Delete(tree);
	return deep;
}

/* ---- bind ---------------------------------------------------------------------------- */

/* Whether some member <key> of <obj> (duplicates included) is the string <s>. */
static bool some_member_is(const cJSON *obj, const char *key, const char *s)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, obj)
		if (it->string && strcmp(it->string, key) == 0 && cJSON_IsString(it) &&
		    strcmp(it->valuestring, s) == 0)
			return true;
	return false;
}

static bool run_bind(const uint8_t *data, size_t len)
{
	struct ext_reply r;
	struct state before, after;
	cJSON *a, *tree = request_tree(data, len);
	bool deep;
	const cJSON *uid;

	state_take(&before);
	ext_reply_init(&r);
	FUZZ_CHECK(ext_bind(&svc, (const char *)data, len, &r, NULL),
		   "bind: not answered at once without an API server");
	a = answer("bind", &r);
	deep = r.status == 200;
	FUZZ_CHECK(cJSON_IsObject(a) && error_of(a), "bind: the answer has no string Error");
	state_take(&after);
	if (refused(&r, a)) {
		state_same(&before, &after, true, "a refused bind");
	} else {
		/* It bound: the pod the request named is on the node it named. */
		bool found = false;

		FUZZ_CHECK(tree, "bind: accepted a body cJSON does not read");
		cJSON_ArrayForEach(uid, tree) {
			struct cache_pod_info info;

			if (!uid->string || strcmp(uid->string, "PodUID") != 0 ||
			    !cJSON_IsString(uid) ||
			    cache_pod_get(cache, uid->valuestring, &info) < 0)
				continue;
			found |= some_member_is(tree, "Node", info.node);
		}
		FUZZ_CHECK(found, "bind: succeeded, but no pod the request named is on the node "
			   "it named");
		service_reset();
	}
	cJSON_Delete(a);
	ext_reply_fini(&r);
	cJSON_Delete(tree);
	return deep;
}

/* ---- preempt ------------------------------------------------------------------------- */

static bool run_preempt(const uint8_t *data, size_t len)
{
	struct ext_reply r;
	struct state before, after;
	struct names req;
	cJSON *a, *tree = request_tree(data, len);
	bool deep;
	const cJSON *node, *p;

	names_of(&req, tree);
	state_take(&before);
	ext_reply_init(&r);
	ext_preempt(&svc, (const char *)data, len, &r);
	a = answer("preempt", &r);
	deep = r.status == 200;
	FUZZ_CHECK(cJSON_IsObject(a), "preempt: the answer is not an object");
	if (!refused(&r, a)) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(a, "NodeNameToMetaVictims");

		FUZZ_CHECK(tree, "preempt: accepted a body cJSON does not read");
		FUZZ_CHECK(cJSON_IsObject(m), "preempt: no NodeNameToMetaVictims object");
		cJSON_ArrayForEach(node, m) {
			const cJSON *pods = cJSON_GetObjectItemCaseSensitive(node, "Pods");

			check_named("preempt", &req, node->string);
			FUZZ_CHECK(cJSON_IsArray(pods) && cJSON_GetArraySize(pods) > 0,
				   "preempt: node %.100s with no victims", node->string);
			cJSON_ArrayForEach(p, pods) {
				const char *uid = cJSON_GetStringValue(
					cJSON_GetObjectItemCaseSensitive(p, "UID"));

				FUZZ_CHECK(uid && names_has(&req, uid),
					   "preempt: victim %.100s, which the request did not name",
					   uid ? uid : "(not a string)");
			}
		}
	}
	state_take(&after);
	state_same(&before, &after, true, "preempt");
	cJSON_Delete(a);
	ext_reply_fini(&r);
	names_fini(&req);
	cJSON_Delete(tree);
	return deep;
}

/* ---- The targets -------------------------------------------------------------------- */

/* Key names and values of the extender wire types and the objects they carry. */
static const char *const verb_dict[] = {
	"Pod", "Nodes", "NodeNames", "items", "metadata", "name", "namespace", "uid", "spec",
	"containers", "initContainers", "resources", "limits", "requests", "nvidia.com/gpu",
	"status", "allocatable", "capacity", "conditions", "type", "Ready", "True", "phase",
	"PodName", "PodNamespace", "PodUID", "Node", "NodeNameToVictims",
	"NodeNameToMetaVictims", "Pods", "NumPDBViolations", "UID", "priority", "annotations",
	"labels", "troupe.io/topology", "troupe.io/gpu-ids", "scheduling.x-k8s.io/pod-group",
	"gpu-a100-0", "gpu-a100-1", "gpu-h100-0", "gpu-h100-1", "gpu-v100-0", "gpu-l4-0",
	"gpu-t4-0", "cpu-0", "ml", "llm-worker-0", "uid-llm-worker-0", "resnet-0", "nvlink",
	"same-socket", "restartPolicy", "Always", "overhead", "unschedulable", "taints",
	"deletionTimestamp", "nodeName", "schedulerName", NULL,
};

static void fini(void)
{
	service_fini();
}

const struct fuzz_target fuzz_target_filter = {
	"filter", verb_dict, service_init, run_filter, fini,
};
const struct fuzz_target fuzz_target_prioritize = {
	"prioritize", verb_dict, service_init, run_prioritize, fini,
};
const struct fuzz_target fuzz_target_bind = {
	"bind", verb_dict, service_init, run_bind, fini,
};
const struct fuzz_target fuzz_target_preempt = {
	"preempt", verb_dict, service_init, run_preempt, fini,
};
