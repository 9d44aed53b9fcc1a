/* Unit tests of the wire codec (extender/codec.h): ExtenderArgs in names and
 * full mode, ExtenderBindingArgs, preemption args, and the filter and error
 * encoders, checked against cJSON and against the documented request shapes.
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

#include "fixture.h"

static void test_ext_args_decode_names_mode_request(void **state)
{
	struct ext_args a;
	char err[256] = "";

	(void)state;
	assert_int_equal(ext_args_decode(doc_filter_names, strlen(doc_filter_names), &a, err,
					 sizeof(err)), 0);
	assert_false(a.full_nodes);
	assert_int_equal(a.n_nodes, 3);
	assert_null(a.node_items);
	assert_non_null(a.names);
	assert_string_equal(a.names[2].s, "gpu-c");
	assert_int_equal(a.names[2].len, 5);
	assert_true(cJSON_IsObject(a.pod));
	assert_string_equal(item(item(a.pod, "metadata"), "name")->valuestring, "train-0");
	ext_args_fini(&a);
}

/* NodeNames is read straight from the body when it is a plain list of names
 * at the top level (the fast path). Each body here is decoded twice: as is, and
 * with a space before the colon, which only the general (cJSON) path reads;
 * both must give the same verdict, names and pod. */
static void test_ext_args_decode_names_fast_path_matches_cjson(void **state)
{
	static const char *const bodies[] = {
		"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"Nodes\":null,\"NodeNames\":[\"a\",\"b-1\",\"c.d\"]}",
		"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNames\":[]}",
		"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNames\": [ \"a\" , \"b\" ] }",
		"{\"NodeNames\":[\"x\"],\"Pod\":{\"metadata\":{\"name\":\"p\"}}}",
		/* escaped, non-ASCII, empty and non-string entries: general path */
		"{\"Pod\":{},\"NodeNames\":[\"a\\u0062\",\"b\"]}",
		"{\"Pod\":{},\"NodeNames\":[\"\xc3\xa9t\xc3\xa9\"]}",
		"{\"Pod\":{},\"NodeNames\":[\"a\",\"\"]}",
		"{\"Pod\":{},\"NodeNames\":[\"a\",7]}",
		"{\"Pod\":{},\"NodeNames\":[\"a\",]}",
		"{\"Pod\":{},\"NodeNames\":[\"a\"}",
		/* the key inside a string or a nested object is not the top level */
		"{\"Pod\":{\"metadata\":{\"annotations\":{\"x\":\"\\\"NodeNames\\\":[\\\"evil\\\"]\"}}},"
		"\"NodeNames\":[\"real\"]}",
		"{\"Pod\":{\"spec\":{\"NodeNames\":[\"inner\"]}},\"NodeNames\":[\"outer\"]}",
		"{\"Pod\":{\"spec\":{\"NodeNames\":[\"inner\"]}},\"Nodes\":{\"items\":[]}}",
		/* malformed elsewhere, names fine */
		"{\"Pod\":{\"metadata\":},\"NodeNames\":[\"a\"]}",
		"{\"Pod\":{},\"NodeNames\":[\"a\"]} trailing",
		"{\"Pod\":{},\"NodeNames\":[\"a\"],\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"z\"}}]}}",
		"{\"Pod\":{},\"NodeNames\":[\"a\"],\"NodeNames\":[\"b\"]}",
		"{\"Pod\":\"nope\",\"NodeNames\":[\"a\"]}",
	};
	unsigned fast_ok = 0;

	(void)state;
	for (size_t b = 0; b < ARRAY_SIZE(bodies); b++) {
		char slow[1024], *k;
		struct ext_args fa, sa;
		char ferr[256] = "", serr[256] = "";
		int fr, sr;

		snprintf(slow, sizeof(slow), "%s", bodies[b]);
		/* "NodeNames": -> "NodeNames" : (the first top-level-looking one) */
		k = strstr(slow, "\"NodeNames\":");
		while (k) {
			memmove(k + 12, k + 11, strlen(k + 11) + 1);
			k[11] = ' ';
			k = strstr(k + 13, "\"NodeNames\":");
		}
		fr = ext_args_decode(bodies[b], strlen(bodies[b]), &fa, ferr, sizeof(ferr));
		sr = ext_args_decode(slow, strlen(slow), &sa, serr, sizeof(serr));
		if (fr != sr)
			fail_msg("body %zu: fast %d (%s), cJSON %d (%s)", b, fr, ferr, sr, serr);
		assert_null(sa.name_bytes);     /* the spaced body took the cJSON path */
		if (fr == 0) {
			assert_int_equal(fa.full_nodes, sa.full_nodes);
			assert_int_equal(fa.n_nodes, sa.n_nodes);
			assert_int_equal(fa.names == NULL, sa.names == NULL);
			for (size_t i = 0; fa.names && i < fa.n_nodes; i++) {
				assert_string_equal(fa.names[i].s, sa.names[i].s);
				assert_int_equal(fa.names[i].len, sa.names[i].len);
				assert_int_equal(strlen(fa.names[i].s), fa.names[i].len);
			}
			assert_int_equal(cJSON_IsObject(fa.pod), cJSON_IsObject(sa.pod));
			fast_ok += fa.name_bytes != NULL;
		} else {
			/* The same message; byte offsets differ by the added space. */
			for (char *e = ferr; *e; e++)
				if (*e >= '0' && *e <= '9')
					*e = '#';
			for (char *e = serr; *e; e++)
				if (*e >= '0' && *e <= '9')
					*e = '#';
			assert_string_equal(ferr, serr);
		}
		ext_args_fini(&fa);
		ext_args_fini(&sa);
	}
	assert_true(fast_ok >= 5);      /* the fast path did run */
}

/* NodeNames before a large Pod: the names and the pod decode as sent, and the
 * names keep only the list's bytes (a cycle entry may hold them long after). */
static void test_ext_args_decode_names_before_a_large_pod(void **state)
{
	char *body = malloc(20000), err[256] = "";
	struct ext_args a;
	const cJSON *ann;
	size_t at;

	(void)state;
	assert_non_null(body);
	at = (size_t)sprintf(body, "{\"NodeNames\":[\"n-1\",\"n-2\",\"n-3\"],\"Pod\":{\"metadata\":"
			      "{\"name\":\"p\",\"annotations\":{\"big\":\"");
	memset(body + at, 'x', 12000);
	at += 12000;
	sprintf(body + at, "\"}}}}");
	assert_int_equal(ext_args_decode(body, strlen(body), &a, err, sizeof(err)), 0);
	assert_non_null(a.name_bytes);  /* the fast path */
	assert_int_equal(a.n_nodes, 3);
	assert_string_equal(a.names[0].s, "n-1");
	assert_string_equal(a.names[2].s, "n-3");
	assert_int_equal(a.names[2].len, 3);
	ann = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a.pod, "metadata"),
						 "annotations"), "big");
	assert_true(cJSON_IsString(ann));
	assert_int_equal(strlen(ann->valuestring), 12000);
	/* The names live in a copy of the list only, not of the pod after it. */
	assert_true(malloc_usable_size(a.name_bytes) < 1024);
	ext_args_fini(&a);
	free(body);
}

/* Full mode: each item's text is found in the body exactly (so a passing node
 * is echoed as sent): it parses to the very object cJSON read, whatever the
 * spacing, escapes, nesting or numbers; when the body is odd the texts are left
 * out (NULL) and cJSON prints the node instead. */
static void test_ext_args_decode_finds_each_full_node_text(void **state)
{
	static const char *const bodies[] = {
		"{\"Pod\":{},\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]},\"NodeNames\":null}",
		"{ \"Pod\" : {\"x\":\"\\\"Nodes\\\":{\\\"items\\\":[1]}\"} ,\n \"Nodes\" : { \"metadata\":{}, \"items\" : [\n"
		"  {\"metadata\":{\"name\":\"q\\\"uote\",\"labels\":{\"k\":\"v]}\"}},\"status\":{\"n\":[1,2,[3]],\"x\":-1.5e3}} ,\n"
		"  {\"metadata\":{\"name\":\"z\"},\"spec\":{\"unschedulable\":true},\"v\":null} ] } }",
		"{\"Pod\":{},\"Nodes\":{\"items\":[]}}",
		"{\"Pod\":{},\"Nodes\":{\"it\\u0065ms\":[{\"metadata\":{\"name\":\"e\"}}]}}",
	};
	unsigned found = 0;

	(void)state;
	for (size_t b = 0; b < ARRAY_SIZE(bodies); b++) {
		struct ext_args a;
		char err[256] = "";
		const cJSON *it;
		size_t i = 0;

		assert_int_equal(ext_args_decode(bodies[b], strlen(bodies[b]), &a, err, sizeof(err)),
				 0);
		assert_true(a.full_nodes);
		assert_null(a.item_text);       /* decode alone does not look for them */
		ext_args_find_item_texts(&a, bodies[b], strlen(bodies[b]));
		if (!a.item_text) {
			ext_args_fini(&a);
			continue;
		}
		cJSON_ArrayForEach(it, a.node_items) {
			cJSON *t = cJSON_ParseWithLength(a.item_text[i].s, a.item_text[i].len);

			if (!t || !cJSON_Compare(t, it, true))
				fail_msg("body %zu item %zu: text %.*s", b, i, (int)a.item_text[i].len,
					 a.item_text[i].s);
			cJSON_Delete(t);
			i++;
			found++;
		}
		ext_args_fini(&a);
	}
	assert_int_equal(found, 4);
}

static void test_ext_args_decode_full_mode_request(void **state)
{
	struct ext_args a;
	char err[256] = "";

	(void)state;
	assert_int_equal(ext_args_decode(doc_filter_full, strlen(doc_filter_full), &a, err,
					 sizeof(err)), 0);
	assert_true(a.full_nodes);
	assert_int_equal(a.n_nodes, 2);
	assert_null(a.names);
	assert_true(cJSON_IsArray(a.node_items));
	assert_string_equal(item(item(cJSON_GetArrayItem(a.node_items, 1), "metadata"),
				 "name")->valuestring, "gpu-b");
	assert_string_equal(item(item(a.pod, "metadata"), "uid")->valuestring,
			    "5b0e6c1a-1f3d-4a5e-9c11-0d2f8a7e4b10");
	ext_args_fini(&a);
}

/* Requests that carry no nodes: zero nodes, whichever mode. */
static void test_ext_args_decode_no_nodes(void **state)
{
	static const char *const bodies[] = {
		"{\"Pod\":{},\"Nodes\":null,\"NodeNames\":null}",
		"{\"Pod\":{}}",
		"{\"Pod\":{},\"Nodes\":null,\"NodeNames\":[]}",
		"{\"Pod\":{},\"Nodes\":{\"metadata\":{},\"items\":[]},\"NodeNames\":null}",
		"{\"Pod\":{},\"Nodes\":{\"metadata\":{},\"items\":null},\"NodeNames\":null}",
		/* Keys are Go field names, matched exactly: these are not node lists. */
		"{\"Pod\":{},\"nodeNames\":[\"gpu-a\"],\"nodes\":{\"items\":[{}]}}",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		struct ext_args a;
		char err[256] = "";
		int ret = ext_args_decode(bodies[i], strlen(bodies[i]), &a, err, sizeof(err));

		if (ret != 0 || a.n_nodes != 0)
			fail_msg("%s: ret %d, %zu nodes (%s)", bodies[i], ret, a.n_nodes, err);
		ext_args_fini(&a);
	}
}

struct decode_error_case {
	const char *body;
	size_t len;                     /* 0: strlen(body) */
	const char *message;            /* part of the error message */
};

static const struct decode_error_case args_errors[] = {
	{ "", 0, "empty request body" },
	{ "[]", 0, "must be a JSON object" },
	{ "null", 0, "must be a JSON object" },
	{ "42", 0, "must be a JSON object" },
	{ "\"Pod\"", 0, "must be a JSON object" },
	{ "{", 0, "malformed JSON" },
	{ "   ", 0, "malformed JSON" },
	{ "{\"Pod\":{}", 0, "malformed JSON" },
	{ "{\"Pod\":{},\"NodeNames\":[\"gpu-a\"", 0, "malformed JSON" },
	{ "{\"Pod\":{},\"NodeNames\":[\"gpu-a\",]}", 0, "malformed JSON" },
	{ "{'Pod':{}}", 0, "malformed JSON" },
	/* Truncated by the length, not by the text. */
	{ "{\"Pod\":{}}", 8, "malformed JSON" },
	{ "{\"NodeNames\":[\"gpu-a\"]}", 0, "\"Pod\" must be a pod object" },
	{ "{\"Pod\":null,\"NodeNames\":[\"gpu-a\"]}", 0, "\"Pod\" must be a pod object" },
	{ "{\"Pod\":\"train-0\"}", 0, "\"Pod\" must be a pod object" },
	{ "{\"Pod\":[{}]}", 0, "\"Pod\" must be a pod object" },
	{ "{\"pod\":{}}", 0, "\"Pod\" must be a pod object" },
	{ "{\"Pod\":{},\"NodeNames\":\"gpu-a\"}", 0, "\"NodeNames\" must be a list" },
	{ "{\"Pod\":{},\"NodeNames\":{\"gpu-a\":true}}", 0, "\"NodeNames\" must be a list" },
	{ "{\"Pod\":{},\"NodeNames\":7}", 0, "\"NodeNames\" must be a list" },
	{ "{\"Pod\":{},\"NodeNames\":[\"gpu-a\",1]}", 0, "\"NodeNames\" entries" },
	{ "{\"Pod\":{},\"NodeNames\":[null]}", 0, "\"NodeNames\" entries" },
	{ "{\"Pod\":{},\"NodeNames\":[[\"gpu-a\"]]}", 0, "\"NodeNames\" entries" },
	{ "{\"Pod\":{},\"NodeNames\":[\"\"]}", 0, "\"NodeNames\" entries" },
	{ "{\"Pod\":{},\"Nodes\":[]}", 0, "\"Nodes\" must be a NodeList" },
	{ "{\"Pod\":{},\"Nodes\":\"gpu-a\"}", 0, "\"Nodes\" must be a NodeList" },
	{ "{\"Pod\":{},\"Nodes\":{\"items\":{}}}", 0, "\"Nodes\" must be a NodeList" },
	{ "{\"Pod\":{},\"Nodes\":{\"items\":\"gpu-a\"}}", 0, "\"Nodes\" must be a NodeList" },
	{ "{\"Pod\":{},\"Nodes\":{\"items\":[\"gpu-a\"]}}", 0, "\"Nodes.items\" entries" },
	{ "{\"Pod\":{},\"Nodes\":{\"items\":[{},1]}}", 0, "\"Nodes.items\" entries" },
	{ "{\"Pod\":{},\"Nodes\":{\"items\":[null]}}", 0, "\"Nodes.items\" entries" },
};

static void test_ext_args_decode_rejects_with_a_reason(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(args_errors) / sizeof(args_errors[0]); i++) {
		const struct decode_error_case *c = &args_errors[i];
		size_t len = c->len ? c->len : strlen(c->body);
		char *copy = malloc(len ? len : 1);
		struct ext_args a;
		char err[256] = "";
		int ret;

		/* An exact-size buffer, no terminator: the decoder must honour len. */
		memcpy(copy, c->body, len);
		ret = ext_args_decode(copy, len, &a, err, sizeof(err));
		if (ret != -EINVAL || !strstr(err, c->message))
			fail_msg("%.*s: ret %d, error \"%s\"; want -EINVAL and \"%s\"", (int)len,
				 c->body, ret, err, c->message);
		ext_args_fini(&a);
		free(copy);
	}
}

static void test_ext_bind_args_decode_reads_every_field(void **state)
{
	struct ext_bind_args b;
	char err[256] = "";

	(void)state;
	assert_int_equal(ext_bind_args_decode(doc_bind, strlen(doc_bind), &b, err, sizeof(err)),
			 0);
	assert_string_equal(b.pod_name, "train-0");
	assert_string_equal(b.pod_namespace, "ml");
	assert_string_equal(b.pod_uid, "5b0e6c1a-1f3d-4a5e-9c11-0d2f8a7e4b10");
	assert_string_equal(b.node, "gpu-a");
	ext_bind_args_fini(&b);
}

/* Absent or null fields read as empty strings (the verb then refuses them). */
static void test_ext_bind_args_decode_missing_fields_are_empty(void **state)
{
	static const char body[] = "{\"PodName\":\"train-0\",\"PodNamespace\":null}";
	struct ext_bind_args b;
	char err[256] = "";

	(void)state;
	assert_int_equal(ext_bind_args_decode(body, strlen(body), &b, err, sizeof(err)), 0);
	assert_string_equal(b.pod_name, "train-0");
	assert_string_equal(b.pod_namespace, "");
	assert_string_equal(b.pod_uid, "");
	assert_string_equal(b.node, "");
	ext_bind_args_fini(&b);
}

static const struct decode_error_case bind_errors[] = {
	{ "", 0, "empty request body" },
	{ "[]", 0, "must be a JSON object" },
	{ "{\"PodName\":\"train-0\"", 0, "malformed JSON" },
	{ "{\"PodName\":1,\"PodNamespace\":\"ml\",\"PodUID\":\"u\",\"Node\":\"gpu-a\"}", 0,
	  "must be strings" },
	{ "{\"PodName\":\"p\",\"PodNamespace\":true,\"PodUID\":\"u\",\"Node\":\"gpu-a\"}", 0,
	  "must be strings" },
	{ "{\"PodName\":\"p\",\"PodNamespace\":\"ml\",\"PodUID\":{},\"Node\":\"gpu-a\"}", 0,
	  "must be strings" },
	{ "{\"PodName\":\"p\",\"PodNamespace\":\"ml\",\"PodUID\":\"u\",\"Node\":[\"gpu-a\"]}", 0,
	  "must be strings" },
};

static void test_ext_bind_args_decode_rejects_with_a_reason(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bind_errors) / sizeof(bind_errors[0]); i++) {
		const struct decode_error_case *c = &bind_errors[i];
		size_t len = strlen(c->body);
		struct ext_bind_args b;
		char err[256] = "";
		int ret = ext_bind_args_decode(c->body, len, &b, err, sizeof(err));

		if (ret != -EINVAL || !strstr(err, c->message))
			fail_msg("%s: ret %d, error \"%s\"; want -EINVAL and \"%s\"", c->body, ret,
				 err, c->message);
		ext_bind_args_fini(&b);
	}
}

static void test_ext_preempt_decode_meta_full_and_none(void **state)
{
	static const char full[] =
		"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToMetaVictims\":null,"
		"\"NodeNameToVictims\":{\"gpu-a\":{\"Pods\":[{\"metadata\":{\"uid\":\"u1\"}}],"
		"\"NumPDBViolations\":0}}}";
	static const char none[] = "{\"Pod\":{},\"NodeNameToVictims\":null,"
				   "\"NodeNameToMetaVictims\":null}";
	const cJSON *pod, *meta, *fullv;
	cJSON *root = NULL;
	char err[256] = "";

	(void)state;
	assert_int_equal(ext_preempt_decode(doc_preempt_meta, strlen(doc_preempt_meta), &root,
					    &pod, &meta, &fullv, err, sizeof(err)), 0);
	assert_true(cJSON_IsObject(pod));
	assert_non_null(meta);
	assert_null(fullv);
	assert_int_equal(cJSON_GetArraySize(meta), 2);
	cJSON_Delete(root);

	assert_int_equal(ext_preempt_decode(full, strlen(full), &root, &pod, &meta, &fullv, err,
					    sizeof(err)), 0);
	assert_null(meta);
	assert_non_null(fullv);
	cJSON_Delete(root);

	assert_int_equal(ext_preempt_decode(none, strlen(none), &root, &pod, &meta, &fullv, err,
					    sizeof(err)), 0);
	assert_null(meta);
	assert_null(fullv);
	cJSON_Delete(root);
}

static void test_ext_preempt_decode_rejects_with_a_reason(void **state)
{
	static const struct decode_error_case cases[] = {
		{ "", 0, "empty request body" },
		{ "[1]", 0, "must be a JSON object" },
		{ "{\"NodeNameToMetaVictims\":{", 0, "malformed JSON" },
		{ "{\"NodeNameToMetaVictims\":[]}", 0, "victim maps must be objects" },
		{ "{\"NodeNameToVictims\":\"gpu-a\"}", 0, "victim maps must be objects" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const cJSON *pod, *meta, *fullv;
		cJSON *root = NULL;
		char err[256] = "";
		int ret = ext_preempt_decode(cases[i].body, strlen(cases[i].body), &root, &pod,
					     &meta, &fullv, err, sizeof(err));

		if (ret != -EINVAL || !strstr(err, cases[i].message))
			fail_msg("%s: ret %d, error \"%s\"", cases[i].body, ret, err);
		cJSON_Delete(root);
	}
}

static cJSON *encode_and_parse(const struct ext_filter_out *out, bool full)
{
	struct strbuf sb = STRBUF_INIT;
	cJSON *j;

	ext_filter_out_encode(out, full, &sb);
	assert_false(strbuf_failed(&sb));
	j = cJSON_ParseWithLengthOpts(sb.buf, sb.len + 1, NULL, 1);
	if (!j)
		fail_msg("encoded filter result is not JSON: %s", sb.buf);
	strbuf_fini(&sb);
	return j;
}

static void test_ext_filter_out_encode_names_mode_round_trips(void **state)
{
	static const char weird[] = "gpu-\"q\"\\-\xc3\xbc-\x01";
	struct ext_filter_out out;
	cJSON *j;
	const cJSON *names;

	(void)state;
	ext_filter_out_init(&out);
	ext_filter_out_pass_name(&out, "gpu-a", 5);
	ext_filter_out_pass_name(&out, weird, strlen(weird));
	ext_filter_out_fail(&out, false, "gpu-b", 5, "troupe: 2 of 8 nvidia.com/gpu free, "
			    "pod needs 4");
	ext_filter_out_fail(&out, false, "gpu-\"c\"", 7, "reason with \"quotes\"\nand a newline");
	ext_filter_out_fail(&out, true, "cpu-0", 5, "troupe: node has no nvidia.com/gpu");
	j = encode_and_parse(&out, false);
	ext_filter_out_fini(&out);

	assert_keys_exactly(j, filter_result_keys);
	assert_true(cJSON_IsNull(item(j, "Nodes")));
	names = item(j, "NodeNames");
	assert_true(cJSON_IsArray(names));
	assert_int_equal(cJSON_GetArraySize(names), 2);
	assert_string_equal(cJSON_GetArrayItem(names, 0)->valuestring, "gpu-a");
	assert_string_equal(cJSON_GetArrayItem(names, 1)->valuestring, weird);
	assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")), 2);
	assert_string_equal(item(item(j, "FailedNodes"), "gpu-b")->valuestring,
			    "troupe: 2 of 8 nvidia.com/gpu free, pod needs 4");
	assert_string_equal(item(item(j, "FailedNodes"), "gpu-\"c\"")->valuestring,
			    "reason with \"quotes\"\nand a newline");
	assert_int_equal(cJSON_GetArraySize(item(j, "FailedAndUnresolvableNodes")), 1);
	assert_string_equal(item(item(j, "FailedAndUnresolvableNodes"), "cpu-0")->valuestring,
			    "troupe: node has no nvidia.com/gpu");
	assert_string_equal(error_of(j), "");
	cJSON_Delete(j);
}

/* Nothing passes: NodeNames is [] (null would mean an error to some readers and
 * "zero nodes" to kube-scheduler; an array is unambiguous). */
static void test_ext_filter_out_encode_none_pass_is_empty_array(void **state)
{
	struct ext_filter_out out;
	cJSON *j;

	(void)state;
	ext_filter_out_init(&out);
	j = encode_and_parse(&out, false);
	assert_keys_exactly(j, filter_result_keys);
	assert_true(cJSON_IsArray(item(j, "NodeNames")));
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	assert_true(cJSON_IsObject(item(j, "FailedNodes")));
	assert_int_equal(cJSON_GetArraySize(item(j, "FailedNodes")), 0);
	assert_true(cJSON_IsObject(item(j, "FailedAndUnresolvableNodes")));
	assert_string_equal(error_of(j), "");
	cJSON_Delete(j);

	ext_filter_out_fail(&out, false, "gpu-a", 5, "troupe: node is not Ready");
	j = encode_and_parse(&out, false);
	assert_true(cJSON_IsArray(item(j, "NodeNames")));
	assert_int_equal(cJSON_GetArraySize(item(j, "NodeNames")), 0);
	cJSON_Delete(j);
	ext_filter_out_fini(&out);
}

static void test_ext_filter_out_encode_full_mode_echoes_objects(void **state)
{
	cJSON *a = node_obj("gpu-a", "8", "8", true, false);
	cJSON *b = node_obj("gpu-\\\"b\\\"", NULL, "2", false, true);
	struct ext_filter_out out;
	const cJSON *nodes, *items;
	cJSON *j;

	(void)state;
	ext_filter_out_init(&out);
	ext_filter_out_pass_object(&out, a, NULL);
	ext_filter_out_pass_object(&out, b, NULL);
	j = encode_and_parse(&out, true);
	ext_filter_out_fini(&out);

	assert_keys_exactly(j, filter_result_keys);
	assert_true(cJSON_IsNull(item(j, "NodeNames")));
	nodes = item(j, "Nodes");
	assert_true(cJSON_IsObject(nodes));
	items = item(nodes, "items");
	assert_int_equal(cJSON_GetArraySize(items), 2);
	assert_true(cJSON_Compare(cJSON_GetArrayItem(items, 0), a, true));
	assert_true(cJSON_Compare(cJSON_GetArrayItem(items, 1), b, true));
	cJSON_Delete(j);

	/* None pass: an empty item list, not a missing one. */
	ext_filter_out_init(&out);
	j = encode_and_parse(&out, true);
	ext_filter_out_fini(&out);
	assert_true(cJSON_IsArray(item(item(j, "Nodes"), "items")));
	assert_int_equal(cJSON_GetArraySize(item(item(j, "Nodes"), "items")), 0);
	cJSON_Delete(j);
	cJSON_Delete(a);
	cJSON_Delete(b);
}

static void test_ext_encode_error_round_trips(void **state)
{
	static const char msg[] = "troupe: bad \"filter\" request:\n\tnear \\ byte \x01 \xc3\xa9";
	struct strbuf sb = STRBUF_INIT;
	cJSON *j;

	(void)state;
	ext_encode_error(&sb, msg);
	j = cJSON_ParseWithLengthOpts(sb.buf, sb.len + 1, NULL, 1);
	assert_non_null(j);
	assert_keys_exactly(j, filter_result_keys);
	assert_string_equal(error_of(j), msg);
	assert_true(cJSON_IsNull(item(j, "NodeNames")));
	assert_true(cJSON_IsNull(item(j, "Nodes")));
	assert_true(cJSON_IsNull(item(j, "FailedNodes")));
	assert_true(cJSON_IsNull(item(j, "FailedAndUnresolvableNodes")));
	cJSON_Delete(j);
	strbuf_fini(&sb);
}

int main(void)
{
#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ext_args_decode_names_mode_request),
		cmocka_unit_test(test_ext_args_decode_names_fast_path_matches_cjson),
		cmocka_unit_test(test_ext_args_decode_names_before_a_large_pod),
		cmocka_unit_test(test_ext_args_decode_finds_each_full_node_text),
		cmocka_unit_test(test_ext_args_decode_full_mode_request),
		cmocka_unit_test(test_ext_args_decode_no_nodes),
		cmocka_unit_test(test_ext_args_decode_rejects_with_a_reason),
		cmocka_unit_test(test_ext_bind_args_decode_reads_every_field),
		cmocka_unit_test(test_ext_bind_args_decode_missing_fields_are_empty),
		cmocka_unit_test(test_ext_bind_args_decode_rejects_with_a_reason),
		cmocka_unit_test(test_ext_preempt_decode_meta_full_and_none),
		cmocka_unit_test(test_ext_preempt_decode_rejects_with_a_reason),
		cmocka_unit_test(test_ext_filter_out_encode_names_mode_round_trips),
		cmocka_unit_test(test_ext_filter_out_encode_none_pass_is_empty_array),
		cmocka_unit_test(test_ext_filter_out_encode_full_mode_echoes_objects),
		cmocka_unit_test(test_ext_encode_error_round_trips),
	};
#undef FX

	/* Refusals are logged as warnings; keep the test output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
