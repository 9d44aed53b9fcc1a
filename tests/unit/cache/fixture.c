/* Fixtures shared by the cache's unit tests: the cache options they use,
 * nodes and pods written as JSON with single quotes (json_sq turns them into
 * double quotes, so each case reads like the object it stands for), what a
 * reader sees of a node, a cache per test (cache_setup/cache_teardown), a
 * temporary file, and a keep callback for the relist sweeps.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

const struct cache_opts OPTS = {
	.gpu_resources = { "nvidia.com/gpu" },
	.n_gpu_resources = 1,
};

const struct cache_opts OPTS2 = {
	.gpu_resources = { "nvidia.com/gpu", "amd.com/gpu" },
	.n_gpu_resources = 2,
};

/* Copy JSON written with single quotes into <out>, quotes made double. */
void sq_text(char *out, size_t len, const char *text)
{
	snprintf(out, len, "%s", text);
	for (char *p = out; *p; p++)
		if (*p == '\'')
			*p = '"';
}

/* Parse JSON written with single quotes. */
cJSON *json_sq(const char *text)
{
	size_t len = strlen(text) + 1;
	char *s = malloc(len);
	cJSON *j;

	assert_non_null(s);
	sq_text(s, len, text);
	j = cJSON_Parse(s);
	if (!j)
		fail_msg("test JSON does not parse: %s", s);
	free(s);
	return j;
}

/* A Node with <cap>/<alloc> GPUs (-1 leaves the field out), Ready. */
cJSON *node_json(const char *name, int cap, int alloc)
{
	char capf[64] = "", allocf[64] = "", text[1024];

	if (cap >= 0)
		snprintf(capf, sizeof(capf), ",'nvidia.com/gpu':'%d'", cap);
	if (alloc >= 0)
		snprintf(allocf, sizeof(allocf), ",'nvidia.com/gpu':'%d'", alloc);
	snprintf(text, sizeof(text),
		 "{'kind':'Node','metadata':{'name':'%s'},"
		 "'status':{'capacity':{'cpu':'16'%s},'allocatable':{'cpu':'16'%s},"
		 "'conditions':[{'type':'Ready','status':'True'}]}}",
		 name, capf, allocf);
	return json_sq(text);
}

struct cache_node *node_new(const char *name, int cap, int alloc)
{
	cJSON *j = node_json(name, cap, alloc);
	char err[CACHE_ERR_LEN] = "";
	struct cache_node *n = cache_node_parse(j, &OPTS, err, sizeof(err));

	if (!n)
		fail_msg("cache_node_parse(%s): %s", name, err);
	cJSON_Delete(j);
	return n;
}

void add_node(struct cache *c, const char *name, int cap, int alloc)
{
	assert_int_equal(cache_node_upsert(c, node_new(name, cap, alloc)), 0);
}

struct cache_pod *pod_make(struct podspec s)
{
	char ann[256] = "", del[80] = "", node[300] = "", text[2048];
	char err[CACHE_ERR_LEN] = "";
	struct cache_pod *p;
	cJSON *j;

	if (s.ids || s.actual)
		snprintf(ann, sizeof(ann), ",'annotations':{'troupe.io/gpu-ids':'%s'%s%s%s}",
			 s.ids ? s.ids : "", s.actual ? ",'troupe.io/gpu-ids-actual':'" : "",
			 s.actual ? s.actual : "", s.actual ? "'" : "");
	if (s.deleting)
		snprintf(del, sizeof(del), ",'deletionTimestamp':'2024-01-01T00:00:00Z'");
	if (s.node)
		snprintf(node, sizeof(node), "'nodeName':'%s',", s.node);
	if (!s.phase)
		s.phase = s.node ? "Running" : "Pending";
	snprintf(text, sizeof(text),
		 "{'kind':'Pod','metadata':{'name':'%s','namespace':'ml','uid':'%s'%s%s},"
		 "'spec':{%s'containers':[{'name':'main','resources':"
		 "{'limits':{'nvidia.com/gpu':'%u'},'requests':{'cpu':'1'}}}]},"
		 "'status':{'phase':'%s'}}",
		 s.uid, s.uid, ann, del, node, s.gpus, s.phase);
	j = json_sq(text);
	p = cache_pod_parse(j, &OPTS, err, sizeof(err));
	if (!p)
		fail_msg("cache_pod_parse(%s): %s", s.uid, err);
	cJSON_Delete(j);
	return p;
}

struct seen look(struct cache *c, const char *name)
{
	struct seen s = { 0 };
	struct cache_node_view v;

	cache_read_begin(c);
	if (cache_node_lookup(c, name, strlen(name), &v)) {
		s.found = true;
		s.used = v.used;
		s.unattributed = v.unattributed;
		s.free_gpus = cache_view_free_gpus(&v);
		s.free_mask = cache_view_free_mask(&v);
		s.capacity = v.node->gpu_capacity;
		s.allocatable = v.node->gpu_allocatable;
	}
	cache_read_end(c);
	return s;
}

void assert_usage(struct cache *c, const char *node, uint64_t used, uint32_t unattr)
{
	struct seen s = look(c, node);

	if (!s.found)
		fail_msg("node %s is not in the cache", node);
	if (s.used != used || s.unattributed != unattr)
		fail_msg("node %s: used %#" PRIx64 " unattributed %u; want used %#" PRIx64
			 " unattributed %u",
			 node, s.used, s.unattributed, used, unattr);
}

struct cache_pod_info pod_info(struct cache *c, const char *uid)
{
	struct cache_pod_info pi;

	if (cache_pod_get(c, uid, &pi) != 0)
		fail_msg("pod %s is not in the cache", uid);
	return pi;
}

int cache_setup(void **state)
{
	struct cache *c = cache_new(&OPTS);

	if (!c)
		return -1;
	*state = c;
	return 0;
}

int cache_teardown(void **state)
{
	cache_free(*state);
	return 0;
}

char *temp_file_with(const char *text)
{
	return test_temp_file(text, strlen(text));
}

bool keep_listed(const char *key, void *arg)
{
	struct keep_set *k = arg;

	for (const char *const *p = k->names; *p; p++)
		if (strcmp(*p, key) == 0)
			return true;
	return false;
}

/* qsort's comparison of fixed-size string rows. */
int str_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

struct uid_seen {
	char uids[64][32];
	size_t n;
};

static void collect_uid(const char *uid, void *arg)
{
	struct uid_seen *us = arg;

	if (us->n < ARRAY_SIZE(us->uids))
		snprintf(us->uids[us->n], sizeof(us->uids[0]), "%s", uid);
	us->n++;
}

/* What cache_node_pods lists for <node>: its return value, and the UIDs sorted and
 * comma-joined in <out> (a UID listed twice shows twice). */
int node_pods_str(struct cache *c, const char *node, char *out, size_t len)
{
	struct uid_seen us = { .n = 0 };
	size_t at = 0;
	int ret = cache_node_pods(c, node, collect_uid, &us);

	assert_true(us.n <= ARRAY_SIZE(us.uids));
	qsort(us.uids, us.n, sizeof(us.uids[0]), str_cmp);
	out[0] = '\0';
	for (size_t i = 0; i < us.n; i++)
		at += (size_t)snprintf(out + at, len - at, "%s%s", i ? "," : "", us.uids[i]);
	return ret;
}

struct cache_podgroup *podgroup_parse_sq(const char *text, const struct cache_opts *opts,
					  char *err, size_t errlen)
{
	cJSON *j = json_sq(text);
	struct cache_podgroup *pg = cache_podgroup_parse(j, opts, err, errlen);

	cJSON_Delete(j);
	return pg;
}
