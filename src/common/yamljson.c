/* The only file that talks to libyaml. It pulls events from the parser and
 * builds the cJSON tree by recursive descent, bounded by YAMLJSON_MAX_DEPTH. */
#include "common/yamljson.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

struct yj {
	yaml_parser_t parser;
	char *err;
	size_t errlen;
};

static void yj_fail(struct yj *y, const yaml_mark_t *mark, const char *what)
{
	if (y->err[0])
		return;
	snprintf(y->err, y->errlen, "line %zu, column %zu: %s", mark->line + 1, mark->column + 1,
		 what);
}

static bool next_event(struct yj *y, yaml_event_t *ev)
{
	if (yaml_parser_parse(&y->parser, ev))
		return true;
	if (!y->err[0])
		snprintf(y->err, y->errlen, "line %zu, column %zu: %s",
			 y->parser.problem_mark.line + 1, y->parser.problem_mark.column + 1,
			 y->parser.problem ? y->parser.problem : "malformed YAML");
	return false;
}

static bool match_all(const char *s, size_t n, bool (*ok)(char c))
{
	for (size_t i = 0; i < n; i++)
		if (!ok(s[i]))
			return false;
	return n > 0;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* YAML 1.2 core schema numbers: [-+]?[0-9]+, 0x.., 0o.., and decimal floats. */
static bool is_number(const char *s, size_t n)
{
	size_t i = 0, d = 0;

	if (n > 2 && s[0] == '0' && s[1] == 'x')
		return match_all(s + 2, n - 2, is_hex);
	if (n > 2 && s[0] == '0' && s[1] == 'o')
		return match_all(s + 2, n - 2, is_digit);
	if (i < n && (s[i] == '-' || s[i] == '+'))
		i++;
	for (; i < n && is_digit(s[i]); i++)
		d++;
	if (i < n && s[i] == '.')
		for (i++; i < n && is_digit(s[i]); i++)
			d++;
	if (d == 0)
		return false;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '-' || s[i] == '+'))
			i++;
		if (i == n || !match_all(s + i, n - i, is_digit))
			return false;
		return true;
	}
	return i == n;
}

static cJSON *scalar_to_json(const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;
	const char *tag = (const char *)ev->data.scalar.tag;
	cJSON *item;

	if (memchr(s, '\0', n))
		return NULL;
	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
	    (tag && strcmp(tag, YAML_STR_TAG) == 0))
		return cJSON_CreateString(s);
	if (n == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
	    strcmp(s, "NULL") == 0)
		return cJSON_CreateNull();
	if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0)
		return cJSON_CreateTrue();
	if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0)
		return cJSON_CreateFalse();
	if (!is_number(s, n))
		return cJSON_CreateString(s);
	item = cJSON_CreateNumber(strtod(s, NULL));
	if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o'))
		cJSON_SetNumberValue(item, (double)strtoll(s + 2, NULL, s[1] == 'x' ? 16 : 8));
	if (item) {
		/* Keep the source text: cJSON_Delete frees valuestring for any type. */
		item->valuestring = strdup(s);
		if (!item->valuestring) {
			cJSON_Delete(item);
			item = NULL;
		}
	}
	return item;
}

static cJSON *parse_node(struct yj *y, yaml_event_t *ev, int depth);

/* Parse the children of a mapping or sequence whose start event was just read. */
static cJSON *parse_collection(struct yj *y, const yaml_event_t *start, int depth)
{
	bool is_map = start->type == YAML_MAPPING_START_EVENT;
	yaml_event_type_t end = is_map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
	cJSON *coll = is_map ? cJSON_CreateObject() : cJSON_CreateArray();
	yaml_event_t ev;

	if (!coll) {
		yj_fail(y, &start->start_mark, "out of memory");
		return NULL;
	}
	if (depth > YAMLJSON_MAX_DEPTH) {
		yj_fail(y, &start->start_mark, "nesting too deep");
		goto fail;
	}
	for (;;) {
		cJSON *key = NULL, *val;

		if (!next_event(y, &ev))
			goto fail;
		if (ev.type == end) {
			yaml_event_delete(&ev);
			return coll;
		}
		if (is_map) {
			if (ev.type != YAML_SCALAR_EVENT) {
				yj_fail(y, &ev.start_mark, "mapping keys must be scalars");
				yaml_event_delete(&ev);
				goto fail;
			}
			key = scalar_to_json(&ev);
			if (!key || !(cJSON_IsString(key) || cJSON_IsNumber(key) ||
				      cJSON_IsBool(key))) {
				yj_fail(y, &ev.start_mark, "unsupported mapping key");
				cJSON_Delete(key);
				yaml_event_delete(&ev);
				goto fail;
			}
			if (!key->valuestring) {
				/* true/false keys: use their text. */
				cJSON_Delete(key);
				key = cJSON_CreateString((const char *)ev.data.scalar.value);
			}
			if (cJSON_GetObjectItemCaseSensitive(coll, key->valuestring)) {
				yj_fail(y, &ev.start_mark, "duplicate mapping key");
				cJSON_Delete(key);
				yaml_event_delete(&ev);
				goto fail;
			}
			yaml_event_delete(&ev);
			if (!next_event(y, &ev)) {
				cJSON_Delete(key);
				goto fail;
			}
		}
		val = parse_node(y, &ev, depth + 1);
		yaml_event_delete(&ev);
		if (!val) {
			cJSON_Delete(key);
			goto fail;
		}
		if (is_map) {
			cJSON_AddItemToObject(coll, key->valuestring, val);
			cJSON_Delete(key);
		} else {
			cJSON_AddItemToArray(coll, val);
		}
	}
fail:
	cJSON_Delete(coll);
	return NULL;
}

/* Build the value that starts with <ev> (which the caller deletes). */
static cJSON *parse_node(struct yj *y, yaml_event_t *ev, int depth)
{
	cJSON *item;

	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		item = scalar_to_json(ev);
		if (!item)
			yj_fail(y, &ev->start_mark, "bad scalar (NUL byte or out of memory)");
		return item;
	case YAML_MAPPING_START_EVENT:
	case YAML_SEQUENCE_START_EVENT:
		return parse_collection(y, ev, depth);
	case YAML_ALIAS_EVENT:
		yj_fail(y, &ev->start_mark, "YAML aliases are not supported");
		return NULL;
	default:
		yj_fail(y, &ev->start_mark, "unexpected YAML event");
		return NULL;
	}
}

cJSON *yamljson_parse(const char *buf, size_t len, char *err, size_t errlen)
{
	struct yj y = { .err = err, .errlen = errlen };
	cJSON *docs = NULL;
	yaml_event_t ev;
	bool done = false;

	err[0] = '\0';
	if (!yaml_parser_initialize(&y.parser)) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	yaml_parser_set_input_string(&y.parser, (const unsigned char *)buf, len);
	docs = cJSON_CreateArray();
	if (!docs)
		goto fail;
	while (!done) {
		if (!next_event(&y, &ev))
			goto fail;
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		case YAML_DOCUMENT_START_EVENT: {
			yaml_event_t body;
			cJSON *doc;

			if (!next_event(&y, &body))
				break;
			if (body.type == YAML_DOCUMENT_END_EVENT) {
				yaml_event_delete(&body);
				break;
			}
			doc = parse_node(&y, &body, 0);
			yaml_event_delete(&body);
			if (!doc)
				break;
			cJSON_AddItemToArray(docs, doc);
			if (!next_event(&y, &body))
				break;
			yaml_event_delete(&body);
			break;
		}
		default:
			break;
		}
		yaml_event_delete(&ev);
		if (err[0])
			goto fail;
	}
	yaml_parser_delete(&y.parser);
	return docs;
fail:
	if (!err[0])
		snprintf(err, errlen, "out of memory");
	cJSON_Delete(docs);
	yaml_parser_delete(&y.parser);
	return NULL;
}

int yamljson_is_json(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r')
			continue;
		return buf[i] == '{' || buf[i] == '[';
	}
	return 0;
}
