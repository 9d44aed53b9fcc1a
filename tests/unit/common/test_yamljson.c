/* Unit tests for common/yamljson.c: YAML documents to cJSON trees, scalar
 * types, refusals that name the line, and bounded depth.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/strbuf.h"
#include "common/util.h"
#include "common/yamljson.h"

#include "fixture.h"

enum jtype { J_NULL, J_TRUE, J_FALSE, J_NUMBER, J_STRING };

static void test_yamljson_scalar_types(void **state)
{
	static const struct {
		const char *yaml;       /* the value of key v */
		enum jtype type;
		const char *text;       /* string value, or a number's source text */
		double num;
	} cases[] = {
		{ "8", J_NUMBER, "8", 8 },
		{ "\"8\"", J_STRING, "8", 0 },
		{ "'8'", J_STRING, "8", 0 },
		{ "!!str 8", J_STRING, "8", 0 },
		{ "-3", J_NUMBER, "-3", -3 },
		{ "0.1", J_NUMBER, "0.1", 0.1 },
		{ "1e3", J_NUMBER, "1e3", 1000 },
		{ ".5", J_NUMBER, ".5", 0.5 },
		{ "0x1F", J_NUMBER, "0x1F", 31 },
		{ "4Gi", J_STRING, "4Gi", 0 },
		{ "500m", J_STRING, "500m", 0 },
		{ "1.2.3", J_STRING, "1.2.3", 0 },
		{ "abc", J_STRING, "abc", 0 },
		{ "null", J_NULL, NULL, 0 },
		{ "~", J_NULL, NULL, 0 },
		{ "", J_NULL, NULL, 0 },
		{ "\"null\"", J_STRING, "null", 0 },
		{ "\"\"", J_STRING, "", 0 },
		{ "true", J_TRUE, NULL, 0 },
		{ "True", J_TRUE, NULL, 0 },
		{ "false", J_FALSE, NULL, 0 },
		{ "\"true\"", J_STRING, "true", 0 },
		{ "|\n  two\n  lines\n", J_STRING, "two\nlines\n", 0 },
		{ ">-\n  folded\n  text\n", J_STRING, "folded text", 0 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char yaml[128], err[256];
		cJSON *docs, *v;
		bool ok;

		snprintf(yaml, sizeof(yaml), "v: %s\n", cases[i].yaml);
		docs = yamljson_parse(yaml, strlen(yaml), err, sizeof(err));
		if (!docs) {
			print_message("[%s]: parse failed: %s\n", cases[i].yaml, err);
			bad++;
			continue;
		}
		v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(docs, 0), "v");
		switch (cases[i].type) {
		case J_NULL: ok = cJSON_IsNull(v); break;
		case J_TRUE: ok = cJSON_IsTrue(v); break;
		case J_FALSE: ok = cJSON_IsFalse(v); break;
		case J_NUMBER:
			ok = cJSON_IsNumber(v) && v->valuedouble == cases[i].num &&
			     v->valuestring && strcmp(v->valuestring, cases[i].text) == 0;
			break;
		default:
			ok = cJSON_IsString(v) && strcmp(v->valuestring, cases[i].text) == 0;
			break;
		}
		if (!ok) {
			char *got = v ? cJSON_PrintUnformatted(v) : NULL;

			print_message("[%s]: got %s\n", cases[i].yaml, got ? got : "(absent)");
			free(got);
			bad++;
		}
		cJSON_Delete(docs);
	}
	assert_int_equal(bad, 0);
}

static void test_yamljson_nested_maps_and_lists(void **state)
{
	static const char yaml[] = "kind: List\n"
				   "items:\n"
				   "  - kind: Node\n"
				   "    metadata:\n"
				   "      name: n1\n"
				   "      labels: {zone: a, \"gpu.count\": \"8\"}\n"
				   "    list: [1, two, [3]]\n"
				   "  - {}\n"
				   "  - []\n"
				   "8: number key\n"
				   "true: bool key\n";
	cJSON *docs, *doc = yaml_one(yaml, &docs);
	const cJSON *items, *n, *labels, *list;

	(void)state;
	assert_true(cJSON_IsObject(doc));
	assert_string_equal(json_str(doc, "kind"), "List");
	items = json_list(cJSON_GetObjectItemCaseSensitive(doc, "items"));
	assert_non_null(items);
	assert_int_equal(cJSON_GetArraySize(items), 3);
	n = cJSON_GetArrayItem(items, 0);
	assert_string_equal(json_str(json_obj(n, "metadata"), "name"), "n1");
	labels = json_obj(json_obj(n, "metadata"), "labels");
	assert_string_equal(json_str(labels, "zone"), "a");
	assert_string_equal(json_str(labels, "gpu.count"), "8");
	list = json_list(cJSON_GetObjectItemCaseSensitive(n, "list"));
	assert_int_equal(cJSON_GetArraySize(list), 3);
	assert_true(cJSON_IsNumber(cJSON_GetArrayItem(list, 0)));
	assert_string_equal(cJSON_GetArrayItem(list, 1)->valuestring, "two");
	assert_true(cJSON_IsArray(cJSON_GetArrayItem(list, 2)));
	assert_true(cJSON_IsObject(cJSON_GetArrayItem(items, 1)));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(items, 1)), 0);
	assert_true(cJSON_IsArray(cJSON_GetArrayItem(items, 2)));
	/* Scalar keys become their text. */
	assert_string_equal(json_str(doc, "8"), "number key");
	assert_string_equal(json_str(doc, "true"), "bool key");
	cJSON_Delete(docs);
}

static void test_yamljson_multiple_documents(void **state)
{
	static const struct {
		const char *yaml;
		int docs;
	} cases[] = {
		{ "", 0 },
		{ "# only a comment\n", 0 },
		{ "a: 1\n", 1 },
		{ "---\na: 1\n", 1 },
		{ "a: 1\n---\nb: 2\n", 2 },
		{ "---\na: 1\n...\n---\nb: 2\n...\n---\n- 3\n", 3 },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[256];
		cJSON *docs = yamljson_parse(cases[i].yaml, strlen(cases[i].yaml), err, sizeof(err));

		if (!docs || !cJSON_IsArray(docs) || cJSON_GetArraySize(docs) != cases[i].docs) {
			print_message("case %zu: %s, %d documents, want %d\n", i,
				      docs ? "parsed" : err, docs ? cJSON_GetArraySize(docs) : -1,
				      cases[i].docs);
			bad++;
		}
		cJSON_Delete(docs);
	}
	assert_int_equal(bad, 0);

	{
		static const char two[] = "a: 1\n---\nb: [x]\n";
		char err[256];
		cJSON *docs = yamljson_parse(two, strlen(two), err, sizeof(err));

		assert_non_null(docs);
		assert_int_equal(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(docs, 0), "a")
					 ->valuedouble,
				 1);
		assert_non_null(json_list(
			cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(docs, 1), "b")));
		cJSON_Delete(docs);
	}
}

/* Refusals come back as NULL with a message naming the line and the reason. */
static void test_yamljson_refusals_name_line_and_reason(void **state)
{
	static const struct {
		const char *yaml;
		const char *line;       /* "line N," expected in the message */
		const char *reason;     /* substring expected in the message, or NULL */
	} cases[] = {
		{ "a: &x 1\nb: *x\n", "line 2,", "alias" },
		{ "base: &b {cpu: 1}\nother:\n  <<: *b\n", "line 3,", "alias" },
		{ "a: 1\nb: 2\na: 3\n", "line 3,", "duplicate" },
		{ "m:\n  k: 1\n  k: 2\n", "line 3,", "duplicate" },
		{ "a: 1\nb: 2\n  c: 3\n", "line 3,", NULL },
		{ "a: [1, 2\nb: 3\n", "line ", NULL },
		{ "a: \"unterminated\n", "line ", NULL },
		{ "? [1, 2]\n: v\n", "line 1,", "key" },
		{ "a: 1\n\tb: 2\n", "line 2,", NULL },
	};
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[256] = "untouched";
		cJSON *docs = yamljson_parse(cases[i].yaml, strlen(cases[i].yaml), err, sizeof(err));

		if (docs || !strstr(err, cases[i].line) ||
		    (cases[i].reason && !strstr(err, cases[i].reason))) {
			print_message("case %zu: %s, message [%s]\n", i,
				      docs ? "accepted" : "refused", err);
			bad++;
		}
		cJSON_Delete(docs);
	}
	assert_int_equal(bad, 0);
}

/* Build <depth> nested flow sequences: "[[[...]]]". */
static char *nested_flow(size_t depth)
{
	char *s = malloc(2 * depth + 2);

	assert_non_null(s);
	memset(s, '[', depth);
	memset(s + depth, ']', depth);
	s[2 * depth] = '\n';
	s[2 * depth + 1] = '\0';
	return s;
}

static void test_yamljson_depth_is_bounded(void **state)
{
	char err[256];
	char *ok = nested_flow(YAMLJSON_MAX_DEPTH);
	char *deep = nested_flow(YAMLJSON_MAX_DEPTH + 10);
	char *huge = nested_flow(200000);
	cJSON *docs;

	(void)state;
	/* YAMLJSON_MAX_DEPTH levels are accepted. */
	docs = yamljson_parse(ok, strlen(ok), err, sizeof(err));
	assert_non_null(docs);
	cJSON_Delete(docs);

	docs = yamljson_parse(deep, strlen(deep), err, sizeof(err));
	assert_null(docs);
	assert_non_null(strstr(err, "line 1,"));

	/* Far deeper than any stack could take by recursion: refused, no crash. */
	docs = yamljson_parse(huge, strlen(huge), err, sizeof(err));
	assert_null(docs);
	assert_true(err[0] != '\0');
	free(ok);
	free(deep);
	free(huge);
}

/* Block-style nesting is bounded the same way. */
static void test_yamljson_depth_is_bounded_block_style(void **state)
{
	enum { LEVELS = YAMLJSON_MAX_DEPTH + 5 };
	struct strbuf sb = STRBUF_INIT;
	char err[256];
	cJSON *docs;

	(void)state;
	for (int i = 0; i < LEVELS; i++) {
		for (int k = 0; k < i; k++)
			strbuf_putc(&sb, ' ');
		strbuf_puts(&sb, "k:\n");
	}
	docs = yamljson_parse(sb.buf, sb.len, err, sizeof(err));
	assert_null(docs);
	assert_non_null(strstr(err, "line "));
	strbuf_fini(&sb);
}

static void test_yamljson_is_json_first_byte(void **state)
{
	static const struct {
		const char *in;
		int want;
	} cases[] = {
		{ "{}", 1 }, { "[1]", 1 }, { " \n\t\r{", 1 }, { "a: 1", 0 }, { "", 0 },
		{ "   ", 0 }, { "# {", 0 }, { "- [1]", 0 },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		assert_int_equal(!!yamljson_is_json(cases[i].in, strlen(cases[i].in)),
				 cases[i].want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_yamljson_scalar_types),
		cmocka_unit_test(test_yamljson_nested_maps_and_lists),
		cmocka_unit_test(test_yamljson_multiple_documents),
		cmocka_unit_test(test_yamljson_refusals_name_line_and_reason),
		cmocka_unit_test(test_yamljson_depth_is_bounded),
		cmocka_unit_test(test_yamljson_depth_is_bounded_block_style),
		cmocka_unit_test(test_yamljson_is_json_first_byte),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
