/* Bad input to every verb: truncations, deep nesting, huge strings, wrong types
 * and NUL bytes get an error reply, never a crash, and change nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/strbuf.h"

#include "fixture.h"

/* filter's refusal of a pod whose own spec is wrong: no node passes, none
 * merely failed, and at least one is unresolvable with a reason. */
static bool unresolvable_everywhere(unsigned status, const cJSON *j)
{
	const cJSON *unres = cJSON_IsObject(j) ? item(j, "FailedAndUnresolvableNodes") : NULL;
	const cJSON *it;

	if (status != 200 || cJSON_GetArraySize(item(j, "NodeNames")) > 0 ||
	    cJSON_GetArraySize(item(item(j, "Nodes"), "items")) > 0 ||
	    cJSON_GetArraySize(item(j, "FailedNodes")) > 0 || cJSON_GetArraySize(unres) == 0)
		return false;
	cJSON_ArrayForEach(it, unres)
		if (!cJSON_IsString(it) || !strstr(it->valuestring, "troupe: pod "))
			return false;
	return true;
}

/* Call every verb with <len> bytes of <body> in an exact-size buffer; each must
 * answer with an error (filter: or every node unresolvable, for a pod whose
 * own spec is wrong) and leave the cache as it was. */
static void expect_rejected_everywhere(struct fx *f, const char *body, size_t len,
				       const char *what)
{
	struct cluster_state before, after;
	char *copy = malloc(len ? len : 1);

	assert_non_null(copy);
	memcpy(copy, body, len);
	state_take(f, &before);
	for (size_t v = 0; v < sizeof(all_verbs) / sizeof(all_verbs[0]); v++) {
		unsigned status = 0;
		cJSON *j = call_len(all_verbs[v], f, copy, len, &status);

		/* prioritize answers an invalid pod with [], which is also a refusal. */
		if (!is_error_reply(status, j) &&
		    !(all_verbs[v] == ext_prioritize && status == 200 && cJSON_IsArray(j) &&
		      cJSON_GetArraySize(j) == 0) &&
		    !(all_verbs[v] == ext_filter && unresolvable_everywhere(status, j)))
			fail_msg("%s: %s accepted it (status %u)", what, verb_names[v], status);
		cJSON_Delete(j);
	}
	state_take(f, &after);
	assert_state_same(&before, &after, true, what);
	free(copy);
}

static void test_ext_verbs_reject_every_truncation(void **state)
{
	struct fx *f = *state;
	char *bodies[3];

	bodies[0] = names_args(gpu_pod("trunc", 4), cluster_nodes);
	bodies[1] = bind_args("ml", "llm-worker-0", "6f1c2a3e-0000-4000-8000-000000000010",
			      "gpu-a100-1");
	bodies[2] = strdup(doc_preempt_meta);
	for (size_t b = 0; b < 3; b++) {
		size_t len = strlen(bodies[b]);

		for (size_t cut = 0; cut < len; cut++) {
			char what[64];

			snprintf(what, sizeof(what), "body %zu cut at %zu of %zu", b, cut, len);
			expect_rejected_everywhere(f, bodies[b], cut, what);
		}
		free(bodies[b]);
	}
}

/* <prefix>, <depth> nested arrays, <suffix>; the caller frees. */
static char *nested_arrays(const char *prefix, size_t depth, const char *suffix)
{
	size_t pl = strlen(prefix), sl = strlen(suffix);
	char *s = malloc(pl + depth * 2 + sl + 1);

	assert_non_null(s);
	memcpy(s, prefix, pl);
	memset(s + pl, '[', depth);
	memset(s + pl + depth, ']', depth);
	memcpy(s + pl + 2 * depth, suffix, sl + 1);
	return s;
}

static void test_ext_verbs_reject_deep_nesting(void **state)
{
	struct fx *f = *state;
	char *s;

	s = nested_arrays("", 100000, "");
	expect_rejected_everywhere(f, s, strlen(s), "100000 nested arrays");
	free(s);
	s = nested_arrays("{\"Pod\":", 100000, ",\"NodeNames\":[\"gpu-a100-1\"],"
		   "\"PodName\":\"p\",\"PodUID\":\"u\",\"Node\":\"gpu-a100-1\","
		   "\"NodeNameToMetaVictims\":{}}");
	expect_rejected_everywhere(f, s, strlen(s), "100000 nested arrays under Pod");
	free(s);
	/* Objects nested as deep, each with a key. */
	{
		size_t depth = 100000, at = 0;
		char *o = malloc(depth * 6 + 2);

		assert_non_null(o);
		for (size_t i = 0; i < depth; i++) {
			memcpy(o + at, "{\"a\":", 5);
			at += 5;
		}
		o[at++] = '1';
		memset(o + at, '}', depth);
		at += depth;
		expect_rejected_everywhere(f, o, at, "100000 nested objects");
		free(o);
	}
}

static char *huge_string(size_t n, char c)
{
	char *s = malloc(n + 1);

	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* Each body is before + HUGE + between + HUGE + after: one huge string where
 * filter and prioritize look, one where bind looks. preempt refuses the
 * victim map's type. */
struct huge_case {
	const char *before, *between, *after;
};

#define HUGE_POD_SPEC "\"spec\":{\"containers\":[{\"resources\":{\"limits\":" \
	"{\"nvidia.com/gpu\":\"1\"}}}]}},\"NodeNames\":[\"gpu-a100-1\"],"
#define LLM_UID "6f1c2a3e-0000-4000-8000-000000000010"

static const struct huge_case huge_cases[] = {
	/* pod name; bind's PodName */
	{ "{\"Pod\":{\"metadata\":{\"name\":\"",
	  "\",\"namespace\":\"ml\"}," HUGE_POD_SPEC "\"PodName\":\"",
	  "\",\"PodUID\":\"u\",\"Node\":\"gpu-a100-1\",\"NodeNameToMetaVictims\":7}" },
	/* pod namespace; bind's PodUID */
	{ "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"",
	  "\"}," HUGE_POD_SPEC "\"PodName\":\"p\",\"PodUID\":\"",
	  "\",\"Node\":\"gpu-a100-1\",\"NodeNameToMetaVictims\":7}" },
	/* pod uid; bind's Node, for a pod troupe knows */
	{ "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"uid\":\"",
	  "\"}," HUGE_POD_SPEC "\"PodName\":\"llm-worker-0\",\"PodUID\":\"" LLM_UID
	  "\",\"Node\":\"",
	  "\",\"NodeNameToMetaVictims\":7}" },
	/* GPU quantity; bind's PodNamespace, for a pod troupe knows */
	{ "{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":"
	  "{\"limits\":{\"nvidia.com/gpu\":\"",
	  "\"}}}]}},\"NodeNames\":[\"gpu-a100-1\"],\"PodName\":\"llm-worker-0\","
	  "\"PodUID\":\"" LLM_UID "\",\"Node\":\"gpu-a100-1\",\"PodNamespace\":\"",
	  "\",\"NodeNameToMetaVictims\":7}" },
};

static void test_ext_verbs_reject_huge_strings(void **state)
{
	struct fx *f = *state;
	size_t big = (size_t)1 << 20;

	for (size_t i = 0; i < sizeof(huge_cases) / sizeof(huge_cases[0]); i++) {
		const struct huge_case *c = &huge_cases[i];
		size_t lb = strlen(c->before), lm = strlen(c->between), la = strlen(c->after);
		char *body = malloc(lb + lm + la + 2 * big);
		char what[32];
		char *p = body;

		assert_non_null(body);
		memcpy(p, c->before, lb);
		memset(p += lb, 'a', big);
		memcpy(p += big, c->between, lm);
		memset(p += lm, 'b', big);
		memcpy(p += big, c->after, la);
		snprintf(what, sizeof(what), "huge strings, case %zu", i);
		expect_rejected_everywhere(f, body, lb + lm + la + 2 * big, what);
		free(body);
	}
}

/* A node name far beyond any valid name is not an error, only unknown. */
static void test_ext_filter_huge_node_name_is_unknown(void **state)
{
	struct fx *f = *state;
	char *big = huge_string(70000, 'n');
	const char *const names[] = { big, "gpu-a100-1", NULL };
	struct cluster_state before, after;
	cJSON *j;

	state_take(f, &before);
	j = filter_names(f, "big-name", 1, names);
	assert_false(names_has(j, big));
	assert_true(names_has(j, "gpu-a100-1"));
	assert_string_equal(item(item(j, "FailedNodes"), big)->valuestring,
			    "troupe: node unknown to troupe (not in its cache)");
	cJSON_Delete(j);
	state_take(f, &after);
	assert_state_same(&before, &after, false, "huge node name");
	free(big);
}

static const char *const wrong_typed[] = {
	"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":\"worker\"}},"
	"\"NodeNames\":[\"gpu-a100-1\"],\"PodName\":1,\"NodeNameToMetaVictims\":[]}",
	"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"initContainers\":{}}},"
	"\"NodeNames\":[\"gpu-a100-1\"],\"PodUID\":[],\"NodeNameToVictims\":\"x\"}",
	"{\"Pod\":{\"metadata\":[\"name\",\"p\"]},\"NodeNames\":[\"gpu-a100-1\"],"
	"\"Node\":{},\"NodeNameToMetaVictims\":1}",
	"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":"
	"{\"limits\":{\"nvidia.com/gpu\":[4]}}}]}},\"NodeNames\":[\"gpu-a100-1\"],"
	"\"PodNamespace\":false,\"NodeNameToMetaVictims\":true}",
	"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":"
	"{\"limits\":{\"nvidia.com/gpu\":\"4\"}}}],\"overhead\":{\"nvidia.com/gpu\":{}}}},"
	"\"NodeNames\":[\"gpu-a100-1\"],\"PodName\":null,\"PodUID\":2,"
	"\"NodeNameToMetaVictims\":\"\"}",
	"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":"
	"{\"limits\":{\"nvidia.com/gpu\":\"4\"}}}]}},\"NodeNames\":[4],\"PodUID\":4.5,"
	"\"NodeNameToVictims\":[]}",
};

static void test_ext_verbs_reject_wrong_types(void **state)
{
	struct fx *f = *state;

	for (size_t i = 0; i < sizeof(wrong_typed) / sizeof(wrong_typed[0]); i++)
		expect_rejected_everywhere(f, wrong_typed[i], strlen(wrong_typed[i]),
					   wrong_typed[i]);
}

/* <body> with <ins> (<ins_len> bytes, NULs allowed) inserted after the first
 * <marker>. The caller frees. */
static char *splice(const char *body, const char *marker, const char *ins, size_t ins_len,
		    size_t *len)
{
	const char *at = strstr(body, marker);
	size_t blen = strlen(body), head;
	char *s;

	assert_non_null(at);
	head = (size_t)(at - body) + strlen(marker);
	s = malloc(blen + ins_len);
	assert_non_null(s);
	memcpy(s, body, head);
	memcpy(s + head, ins, ins_len);
	memcpy(s + head + ins_len, body + head, blen - head);
	*len = blen + ins_len;
	return s;
}

struct nul_case {
	verb_fn verb;
	const char *what;
	const char *marker;             /* the NUL goes right after this */
	const char *ins;
	size_t ins_len;
};

/* One valid request per verb: filter and prioritize a 1-GPU pod on gpu-a100-1,
 * bind the pending ml/llm-worker-0 there, preempt from kube-interfaces.md. */
static char *valid_body(verb_fn verb)
{
	static const char *const one[] = { "gpu-a100-1", NULL };

	if (verb == bind_sync)
		return bind_args("ml", "llm-worker-0", LLM_UID, "gpu-a100-1");
	if (verb == ext_preempt)
		return strdup(doc_preempt_meta);
	return names_args(gpu_pod("p", 1), one);
}

/* Each verb refuses its valid request once the NUL is in, leaving the cache
 * as it was, and accepts it without the NUL. */
static void expect_nul_rejected(struct fx *f, const struct nul_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct nul_case *c = &cases[i];
		struct cluster_state before, after;
		char *body = valid_body(c->verb);
		size_t len;
		char *bad = splice(body, c->marker, c->ins, c->ins_len, &len);
		unsigned status = 0;
		bool refused;
		cJSON *j;

		state_take(f, &before);
		j = call_len(c->verb, f, bad, len, &status);
		refused = is_error_reply(status, j) ||
			  (c->verb == ext_prioritize && cJSON_IsArray(j) && !cJSON_GetArraySize(j));
		cJSON_Delete(j);
		free(bad);
		if (!refused) {
			free(body);
			fail_msg("%s: accepted (status %u)", c->what, status);
		}
		state_take(f, &after);
		assert_state_same(&before, &after, true, c->what);
		/* Control: without the NUL the same request is fine. */
		j = call(c->verb, f, body, &status);
		assert_int_equal(status, 200);
		assert_false(is_error_reply(status, j));
		cJSON_Delete(j);
		free(body);
	}
}

/* JSON whitespace is space, tab, CR and LF only; a NUL between tokens makes a
 * body malformed. */
static void test_ext_verbs_reject_nul_between_tokens(void **state)
{
	static const struct nul_case cases[] = {
		{ ext_filter, "filter, NUL after \"Pod\":", "\"Pod\":", "\0", 1 },
		{ ext_prioritize, "prioritize, NUL after \"Pod\":", "\"Pod\":", "\0", 1 },
		{ bind_sync, "bind, NUL after \"PodUID\":", "\"PodUID\":", "\0", 1 },
		{ ext_preempt, "preempt, NUL after \"Pod\":", "\"Pod\":", "\0", 1 },
		{ ext_filter, "filter, NUL before the body", "", "\0", 1 },
	};

	expect_nul_rejected(*state, cases, sizeof(cases) / sizeof(cases[0]));
}

/* A raw NUL inside a string is malformed JSON too (RFC 8259 section 7: control
 * characters in strings must be escaped). Read as a C string it would cut
 * "gpu-a100-1<NUL>evil" to "gpu-a100-1", a name the scheduler never sent, and
 * bind "<uid><NUL>x" to the pod <uid>. */
static void test_ext_verbs_reject_nul_inside_strings(void **state)
{
	static const struct nul_case cases[] = {
		{ ext_filter, "filter, NUL in a node name", "[\"gpu-a100-1", "\0evil", 5 },
		{ ext_prioritize, "prioritize, NUL in a node name", "[\"gpu-a100-1", "\0evil", 5 },
		{ bind_sync, "bind, NUL in PodUID", "\"PodUID\":\"" LLM_UID, "\0x", 2 },
		{ bind_sync, "bind, NUL in Node", "\"Node\":\"gpu-a100-1", "\0x", 2 },
		{ ext_preempt, "preempt, NUL in a victim UID",
		  "\"UID\": \"0c7d9e2f-6a41-4b8e-a3b5-7f1e2d3c4b5a", "\0x", 2 },
	};

	expect_nul_rejected(*state, cases, sizeof(cases) / sizeof(cases[0]));
}

/* "\u0000" is valid JSON, but a name or UID holding U+0000 is not the name
 * or UID before it: it must not alias a real node or pod. */
static void test_ext_verbs_escaped_nul_does_not_alias(void **state)
{
	struct fx *f = *state;
	static const char filter_body[] =
		"{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"uid-esc\"},"
		"\"spec\":{\"containers\":[{\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"1\"}}}]}},\"NodeNames\":[\"gpu-a100-1\\u0000evil\"]}";
	static const char bind_body[] =
		"{\"PodName\":\"llm-worker-0\",\"PodNamespace\":\"ml\",\"PodUID\":\"" LLM_UID
		"\\u0000x\",\"Node\":\"gpu-a100-1\"}";
	struct cluster_state before, after;
	unsigned status = 0;
	bool aliased;
	cJSON *j;


	j = call(ext_filter, f, filter_body, &status);
	aliased = names_has(j, "gpu-a100-1");
	cJSON_Delete(j);
	if (aliased)
		fail_msg("filter answered \"gpu-a100-1\" for \"gpu-a100-1\\u0000evil\"");

	state_take(f, &before);
	j = call(bind_sync, f, bind_body, &status);
	aliased = !is_error_reply(status, j);
	cJSON_Delete(j);
	if (aliased)
		fail_msg("bind of uid \"%s\\u0000x\" succeeded", LLM_UID);
	state_take(f, &after);
	assert_state_same(&before, &after, true, "bind with an escaped NUL in PodUID");
	expect_pod(f, LLM_UID, CACHE_POD_STATE_UNACCOUNTED, "", 0);
}

/* A filter body for a one-GPU pod, with <tail> after the pod (the node part
 * of the request, with its leading comma). Caller frees. */
static char *filter_with(const char *tail)
{
	static const char pod[] =
		"{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"uid-strict\"},"
		"\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"1\"}}}]}}";
	char *b = malloc(strlen(pod) + strlen(tail) + 2);

	assert_non_null(b);
	sprintf(b, "%s%s}", pod, tail);
	return b;
}

/* Every node a filter reply names (passed, failed, unresolvable, full-mode
 * items), for "it answered about no node it was not asked about". */
static bool reply_names(const cJSON *j, const char *name)
{
	static const char *const maps[] = { "FailedNodes", "FailedAndUnresolvableNodes" };
	const cJSON *it;

	if (names_has(j, name))
		return true;
	for (size_t m = 0; m < 2; m++)
		if (cJSON_GetObjectItemCaseSensitive(item(j, maps[m]), name))
			return true;
	cJSON_ArrayForEach(it, item(item(j, "Nodes"), "items")) {
		const cJSON *n = item(item(it, "metadata"), "name");

		if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
			return true;
	}
	return false;
}

/* An escape JSON does not allow, or one cJSON would decode to something else
 * than was sent, refuses the body with 400 and says what and where: cJSON read
 * "gpu-a100-1\u00zz" as "gpu-a100-1" (bad hex is 0, and NUL ends the name), so
 * filter answered about a node it was not asked about. */
static void test_ext_verbs_reject_invalid_escapes(void **state)
{
	struct fx *f = *state;
	static const struct {
		const char *esc, *why;
	} escs[] = {
		{ "\\u00zz", "four hex digits" },
		{ "\\u00", "four hex digits" },
		{ "\\q", "unknown escape" },
		{ "\\uDC00", "low surrogate" },
		{ "\\uD800", "high surrogate" },
		{ "\\uD800\\u0041", "high surrogate" },
	};
	struct cluster_state before, after;

	state_take(f, &before);
	for (size_t i = 0; i < sizeof(escs) / sizeof(escs[0]); i++) {
		char tail[128], bind[512], preempt[512];
		char *body;
		unsigned status = 0;
		cJSON *j;

		snprintf(tail, sizeof(tail), ",\"NodeNames\":[\"gpu-a100-1%s\"]", escs[i].esc);
		body = filter_with(tail);
		for (int v = 0; v < 2; v++) {
			j = call(v ? ext_prioritize : ext_filter, f, body, &status);
			if (status != 400 || !strstr(error_of(j), escs[i].why) ||
			    !strstr(error_of(j), "byte"))
				fail_msg("%s with %s: status %u, %s", v ? "prioritize" : "filter",
					 escs[i].esc, status, cJSON_PrintUnformatted(j));
			cJSON_Delete(j);
		}
		free(body);
		snprintf(bind, sizeof(bind), "{\"PodName\":\"llm-worker-0\",\"PodNamespace\":\"ml\","
			 "\"PodUID\":\"" LLM_UID "\",\"Node\":\"gpu-a100-1%s\"}", escs[i].esc);
		j = call(bind_sync, f, bind, &status);
		assert_int_equal(status, 400);
		assert_contains(error_of(j), escs[i].why);
		cJSON_Delete(j);
		snprintf(preempt, sizeof(preempt), "{\"Pod\":{},\"NodeNameToMetaVictims\":{"
			 "\"gpu-a100-1%s\":{\"Pods\":[{\"UID\":\"x\"}],\"NumPDBViolations\":0}}}",
			 escs[i].esc);
		j = call(ext_preempt, f, preempt, &status);
		assert_int_equal(status, 400);
		assert_contains(error_of(j), escs[i].why);
		cJSON_Delete(j);
	}
	state_take(f, &after);
	assert_state_same(&before, &after, true, "invalid escapes");
}

/* A key given twice means its last value, as kube-scheduler (Go) reads it:
 * cJSON's lookups, the NodeNames fast path and the full-mode echo all took the
 * first. */
static void test_ext_filter_duplicate_keys_take_the_last(void **state)
{
	struct fx *f = *state;
	static const char node_fmt[] =
		"{\"metadata\":{\"name\":\"%s\"},\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"},"
		"\"allocatable\":{\"nvidia.com/gpu\":\"8\"},\"conditions\":[{\"type\":\"Ready\","
		"\"status\":\"True\"}]}}";
	static const char *const tails[] = {
		/* the fast path: plain names */
		",\"NodeNames\":[\"gpu-a100-1\"],\"NodeNames\":[\"gpu-h100-1\"]",
		/* the second spelt with an escape: the same key once decoded */
		",\"NodeNames\":[\"gpu-a100-1\"],\"Node\\u004eames\":[\"gpu-h100-1\"]",
		/* the general path (an escaped name) */
		",\"NodeNames\":[\"gpu-\\u0061100-1\"],\"Nodes\":null,\"NodeNames\":[\"gpu-h100-1\"]",
		/* null, then the list, and the list, then null (no node) */
		",\"NodeNames\":null,\"NodeNames\":[\"gpu-h100-1\"]",
	};
	char full[1024], a[300], b[300];
	unsigned status = 0;
	char *body;
	cJSON *j;

	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		body = filter_with(tails[i]);
		j = call(ext_filter, f, body, &status);
		assert_int_equal(status, 200);
		if (!reply_names(j, "gpu-h100-1") || reply_names(j, "gpu-a100-1"))
			fail_msg("case %zu: answered %s", i, cJSON_PrintUnformatted(j));
		cJSON_Delete(j);
		free(body);
	}
	body = filter_with(",\"NodeNames\":[\"gpu-h100-1\"],\"NodeNames\":null");
	j = call(ext_filter, f, body, &status);
	assert_int_equal(status, 200);
	assert_false(reply_names(j, "gpu-h100-1"));
	cJSON_Delete(j);
	free(body);

	/* Full mode: the second Nodes is the one answered, and echoed as sent. */
	snprintf(a, sizeof(a), node_fmt, "first-node");
	snprintf(b, sizeof(b), node_fmt, "second-node");
	snprintf(full, sizeof(full), ",\"Nodes\":{\"items\":[%s]},\"Nodes\":{\"metadata\":{},"
		 "\"items\":[%s]},\"NodeNames\":null", a, b);
	body = filter_with(full);
	j = call(ext_filter, f, body, &status);
	assert_int_equal(status, 200);
	if (!reply_names(j, "second-node") || reply_names(j, "first-node"))
		fail_msg("full mode: answered %s", cJSON_PrintUnformatted(j));
	cJSON_Delete(j);
	free(body);

	/* The pod: the second one asks for one GPU, the first for 100. */
	j = call(ext_filter, f, "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\"},"
		 "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
		 "{\"nvidia.com/gpu\":\"100\"}}}]}},\"Pod\":{\"metadata\":{\"name\":\"p\","
		 "\"namespace\":\"ml\",\"uid\":\"uid-dup\"},\"spec\":{\"containers\":[{\"name\":\"c\","
		 "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}},"
		 "\"NodeNames\":[\"gpu-h100-1\"]}", &status);
	assert_int_equal(status, 200);
	assert_false(is_error_reply(status, j));
	cJSON_Delete(j);
}

/* A body of <n> names, the first of them escaped when <escaped> (which takes
 * the general path). Caller frees. */
static char *many_names(size_t n, bool escaped)
{
	struct strbuf sb = STRBUF_INIT;
	char *body;

	strbuf_puts(&sb, ",\"NodeNames\":[");
	for (size_t i = 0; i < n; i++)
		strbuf_printf(&sb, "%s\"%sn-%zu\"", i ? "," : "", !i && escaped ? "\\u0041" : "",
			      i);
	strbuf_putc(&sb, ']');
	assert_false(sb.failed);
	body = filter_with(sb.buf);
	strbuf_fini(&sb);
	return body;
}

/* More than TROUPE_MAX_NODE_NAMES nodes in one request are refused with 400,
 * naming the limit, in either path and either mode; that many are answered. */
static void test_ext_verbs_refuse_too_many_node_names(void **state)
{
	struct fx *f = *state;
	char limit[32];
	unsigned status = 0;
	struct strbuf sb = STRBUF_INIT;
	char *body;
	cJSON *j;

	snprintf(limit, sizeof(limit), "at most %d", TROUPE_MAX_NODE_NAMES);
	for (int escaped = 0; escaped < 2; escaped++) {
		body = many_names(TROUPE_MAX_NODE_NAMES + 1, escaped);
		for (int v = 0; v < 2; v++) {
			j = call(v ? ext_prioritize : ext_filter, f, body, &status);
			assert_int_equal(status, 400);
			assert_contains(error_of(j), limit);
			cJSON_Delete(j);
		}
		free(body);
	}
	body = many_names(TROUPE_MAX_NODE_NAMES, false);
	j = call(ext_filter, f, body, &status);
	assert_int_equal(status, 200);
	assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")), TROUPE_MAX_NODE_NAMES);
	cJSON_Delete(j);
	free(body);

	/* Full mode, and preempt's candidate nodes. */
	strbuf_puts(&sb, ",\"Nodes\":{\"items\":[");
	for (size_t i = 0; i <= TROUPE_MAX_NODE_NAMES; i++)
		strbuf_printf(&sb, "%s{\"metadata\":{\"name\":\"n-%zu\"}}", i ? "," : "", i);
	strbuf_puts(&sb, "]}");
	body = filter_with(sb.buf);
	j = call(ext_filter, f, body, &status);
	assert_int_equal(status, 400);
	assert_contains(error_of(j), limit);
	cJSON_Delete(j);
	free(body);
	strbuf_fini(&sb);
	strbuf_puts(&sb, "{\"Pod\":{},\"NodeNameToMetaVictims\":{");
	for (size_t i = 0; i <= TROUPE_MAX_NODE_NAMES; i++)
		strbuf_printf(&sb, "%s\"n-%zu\":{\"Pods\":[{\"UID\":\"x\"}]}", i ? "," : "", i);
	strbuf_puts(&sb, "}}");
	j = call(ext_preempt, f, sb.buf, &status);
	assert_int_equal(status, 400);
	assert_contains(error_of(j), limit);
	cJSON_Delete(j);
	strbuf_fini(&sb);
}

/* spec.priority is an int32: a value outside it, or a fraction, refuses the pod
 * with a reason (it was ignored out of range, and truncated when fractional). */
static void test_ext_filter_refuses_a_pod_priority_no_int32_holds(void **state)
{
	struct fx *f = *state;
	static const char *const bad[] = { "2147483648", "-2147483649", "1.5", "1e999", "\"7\"" };
	char body[512];
	unsigned status = 0;
	cJSON *j;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body), "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":"
			 "\"ml\",\"uid\":\"uid-prio\"},\"spec\":{\"priority\":%s,\"containers\":[{"
			 "\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}},"
			 "\"NodeNames\":[\"gpu-h100-1\"]}", bad[i]);
		j = call(ext_filter, f, body, &status);
		if (!is_error_reply(status, j) || !strstr(error_of(j), "spec.priority"))
			fail_msg("priority %s: status %u, %s", bad[i], status, cJSON_PrintUnformatted(j));
		cJSON_Delete(j);
	}
	snprintf(body, sizeof(body), "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\","
		 "\"uid\":\"uid-prio\"},\"spec\":{\"priority\":-2147483648,\"containers\":[{"
		 "\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}},"
		 "\"NodeNames\":[\"gpu-h100-1\"]}");
	j = call(ext_filter, f, body, &status);
	assert_false(is_error_reply(status, j));
	cJSON_Delete(j);
}

int main(void)
{
#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		FX(test_ext_filter_huge_node_name_is_unknown),
		FX(test_ext_verbs_reject_every_truncation),
		FX(test_ext_verbs_reject_deep_nesting),
		FX(test_ext_verbs_reject_huge_strings),
		FX(test_ext_verbs_reject_wrong_types),
		FX(test_ext_verbs_reject_nul_between_tokens),
		FX(test_ext_verbs_reject_nul_inside_strings),
		FX(test_ext_verbs_escaped_nul_does_not_alias),
		FX(test_ext_verbs_reject_invalid_escapes),
		FX(test_ext_filter_duplicate_keys_take_the_last),
		FX(test_ext_verbs_refuse_too_many_node_names),
		FX(test_ext_filter_refuses_a_pod_priority_no_int32_holds),
	};
#undef FX

	/* Refusals are logged as warnings; keep the test output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
