/* Decoding uses cJSON, with exact-case lookups of the Go field names; encoding
 * writes JSON directly into a strbuf, which is several times cheaper than
 * building a cJSON tree and printing it.
 *
 * Decoding is strict where cJSON is lenient and reads as kube-scheduler (Go)
 * wrote where they differ: text cJSON would decode to something else than was
 * sent (control bytes, invalid escapes, \u0000) is refused before parsing
 * (json_find_invalid); a key given twice means its last value, as Go's
 * encoding/json takes it (json_dedupe after parsing; filter's echo of the
 * request's node texts is skipped then); a request naming more than
 * TROUPE_MAX_NODE_NAMES nodes is refused. */
#include "extender/codec.h"

#include "common/limits.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse a request body that must be one JSON object, a key given twice
 * meaning its last value. <checked>: the caller already knows the text is
 * valid (json_find_invalid), so it is not scanned again. <n_names>, when not
 * NULL: how many top-level members were named NodeNames before the earlier
 * ones were dropped (the fast path's check that its list is the one Go reads).
 * <dup_keys>, when not NULL: whether any key anywhere was given twice. */
static cJSON *parse_object(const char *body, size_t len, bool checked, size_t *n_names,
			   bool *dup_keys, char *err, size_t errlen)
{
	const char *end = NULL, *why = "";
	cJSON *root;
	long bad, dropped;

	if (len == 0) {
		snprintf(err, errlen, "empty request body");
		return NULL;
	}
	bad = checked ? -1 : json_find_invalid(body, len, &why);
	if (bad >= 0) {
		snprintf(err, errlen, "invalid JSON text at byte %ld: %s", bad, why);
		return NULL;
	}
	root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
	if (!root) {
		size_t at = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;

		snprintf(err, errlen, "malformed JSON near byte %zu of %zu", at, len);
		return NULL;
	}
	if (!json_at_end(end, body + len)) {
		snprintf(err, errlen, "unexpected bytes after the JSON document (byte %zu of %zu)",
			 (size_t)(end - body), len);
		cJSON_Delete(root);
		return NULL;
	}
	if (!cJSON_IsObject(root)) {
		snprintf(err, errlen, "request body must be a JSON object");
		cJSON_Delete(root);
		return NULL;
	}
	if (n_names) {
		*n_names = 0;
		for (const cJSON *it = root->child; it; it = it->next)
			*n_names += it->string && strcmp(it->string, "NodeNames") == 0;
	}
	dropped = json_dedupe(root);
	if (dropped < 0) {
		snprintf(err, errlen, "out of memory reading the request");
		cJSON_Delete(root);
		return NULL;
	}
	if (dup_keys)
		*dup_keys = dropped > 0;
	return root;
}

/* Skip JSON whitespace. */
static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* The closing quote of the JSON string whose opening quote is at <p>, escapes
 * skipped, or NULL when the string runs to <end>. */
static const char *string_end(const char *p, const char *end)
{
	for (p++;;) {
		if (p >= end)
			return NULL;
		p += json_plain_run(p, (size_t)(end - p));
		if (p >= end)
			return NULL;
		if (*p == '"')
			return p;
		p += *p == '\\' ? 2 : 1;
	}
}

/* Whether <at> lies at the top level of the object <body> opens, outside any
 * string, right after '{' or ',' (so it starts a member's key). */
static bool top_level_key(const char *body, const char *at)
{
	const char *p = body, *last = NULL;
	int depth = 0;

	while (p < at) {
		char c = *p;

		if (c == '"') {
			last = string_end(p, at);
			if (!last)
				return false;   /* <at> is inside it */
			p = last + 1;
			continue;
		}
		if (c == '{' || c == '[')
			depth++;
		else if (c == '}' || c == ']')
			depth--;
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			last = p;
		p++;
	}
	return depth == 1 && last && (*last == '{' || *last == ',');
}

/* The end of the JSON value at <p>, or NULL when it runs past <end>. The text
 * was already accepted by cJSON; this only measures it. */
static const char *skip_value(const char *p, const char *end)
{
	int depth = 0;

	do {
		if (p >= end)
			return NULL;
		if (*p == '"') {
			p = string_end(p, end);
			if (!p)
				return NULL;
			p++;
		} else if (*p == '{' || *p == '[') {
			depth++;
			p++;
		} else if (*p == '}' || *p == ']') {
			if (--depth < 0)
				return NULL;
			p++;
		} else if (depth == 0) {
			/* A number or literal: to the next delimiter. */
			while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' &&
			       *p != '\t' && *p != '\n' && *p != '\r')
				p++;
			return p;
		} else {
			p++;
		}
	} while (depth > 0);
	return p;
}

/* In the object at <obj>, where the value of the first member named <key> (a
 * plain key) starts; NULL when absent or unreadable. Only the members before it
 * are measured. (With a key given twice the first is not what cJSON keeps
 * after json_dedupe: ext_args_find_item_texts does not look then.) */
static const char *member(const char *obj, const char *end, const char *key)
{
	size_t klen = strlen(key);
	const char *p = skip_ws(obj, end);

	if (p >= end || *p != '{')
		return NULL;
	for (p = skip_ws(p + 1, end); p < end && *p == '"';) {
		size_t run = json_plain_run(p + 1, (size_t)(end - p - 1));
		const char *v, *e;
		bool match;

		if (p + 1 + run >= end || p[1 + run] != '"')
			return NULL;            /* an escaped key: let cJSON say */
		match = run == klen && memcmp(p + 1, key, klen) == 0;
		p = skip_ws(p + run + 2, end);
		if (p >= end || *p != ':')
			return NULL;
		v = skip_ws(p + 1, end);
		if (match)
			return v;
		e = skip_value(v, end);
		if (!e)
			return NULL;
		p = skip_ws(e, end);
		if (p < end && *p == ',')
			p = skip_ws(p + 1, end);
		else
			return NULL;
	}
	return NULL;
}

/* Full mode: find each of the <n> items of Nodes.items in the body. */
static struct cache_name *item_texts(const char *body, size_t len, size_t n)
{
	const char *end = body + len, *vend = end, *nodes, *items, *p;
	struct cache_name *t;
	size_t i = 0;

	nodes = member(body, end, "Nodes");
	items = nodes ? member(nodes, end, "items") : NULL;
	if (!items || items >= end || *items != '[')
		return NULL;
	t = malloc((n ? n : 1) * sizeof(*t));
	if (!t)
		return NULL;
	for (p = skip_ws(items + 1, vend); p < vend && *p != ']';) {
		const char *e = skip_value(p, vend);

		if (!e || i == n)
			break;
		t[i++] = (struct cache_name){ p, (size_t)(e - p) };
		p = skip_ws(e, vend);
		if (p < vend && *p == ',')
			p = skip_ws(p + 1, vend);
	}
	if (i != n || p >= vend || *p != ']') {
		free(t);
		return NULL;            /* not what cJSON read: print instead */
	}
	return t;
}

/* The fast path for NodeNames, the bulk of a nodeCacheCapable request: read
 * the array of plain names straight from the body (no cJSON node and no malloc
 * per name), and give cJSON the rest with the array replaced by null. Returns 1
 * when done (<out> holds the names, <*rest> the text to parse), 0 when the
 * body is anything else (escaped or non-ASCII names, an array that is not all
 * strings, no such key at the top level): the general path then reads it;
 * -E2BIG when the list has more than TROUPE_MAX_NODE_NAMES names.
 * The array is read in the body, then copied once and its names cut in the
 * copy (each closing quote becomes the name's NUL). The bytes of the array are all
 * checked here (plain names, JSON whitespace, commas), so the caller need
 * check only the rest for unsafe bytes. */
static int cut_names(const char *body, size_t len, struct ext_args *out, char **rest,
		     size_t *rest_len)
{
	static const char key[] = "\"NodeNames\":";
	const char *end = body + len, *k = memmem(body, len, key, sizeof(key) - 1), *arr;
	size_t n = 0, cap = 0, after, close;
	const char *p;
	char *copy = NULL;
	int ret = 0;

	if (!k)
		return 0;
	arr = skip_ws(k + sizeof(key) - 1, end);
	if (arr >= end || *arr != '[' || !top_level_key(body, k))
		return 0;       /* (null in full mode: no scan of the nodes) */
	/* Scan the body itself and copy the list only once it is read whole: a
	 * refusal (over the limit, not plain names) copies nothing. */
	for (p = skip_ws(arr + 1, end); p < end && *p != ']';) {
		size_t run;

		if (*p != '"')
			goto refuse;
		run = json_plain_run(p + 1, (size_t)(end - p - 1));
		if (p + 1 + run >= end || p[1 + run] != '"' || run == 0)
			goto refuse;
		if (n == TROUPE_MAX_NODE_NAMES) {
			ret = -E2BIG;
			goto refuse;
		}
		if (n == cap) {
			struct cache_name *g = realloc(out->names,
						       (cap = cap ? cap * 2 : 256) * sizeof(*g));

			if (!g)
				goto refuse;
			out->names = g;
		}
		out->names[n++] = (struct cache_name){ p + 1, run };
		p = skip_ws(p + run + 2, end);
		if (p < end && *p == ',') {
			p = skip_ws(p + 1, end);
			if (p >= end || *p != '"')
				goto refuse;    /* [..., ] is not JSON */
		} else if (p < end && *p != ']') {
			goto refuse;
		}
	}
	if (p >= end)
		goto refuse;
	close = (size_t)(p - arr);              /* the list's ']' */
	after = (size_t)(end - p - 1);
	/* The list alone (filter may hand it to a cycle entry), each name's
	 * closing quote its NUL. */
	copy = malloc(close + 1);
	if (!copy)
		goto refuse;
	memcpy(copy, arr, close + 1);
	for (size_t i = 0; i < n; i++) {
		char *s = copy + (out->names[i].s - arr);

		s[out->names[i].len] = '\0';
		out->names[i].s = s;
	}
	/* The rest: everything but the array, which becomes null. */
	*rest = malloc((size_t)(arr - body) + 4 + after + 1);
	if (!*rest || (!out->names && !(out->names = malloc(sizeof(*out->names)))))
		goto refuse;
	memcpy(*rest, body, (size_t)(arr - body));
	memcpy(*rest + (arr - body), "null", 4);
	memcpy(*rest + (arr - body) + 4, arr + close + 1, after);
	*rest_len = (size_t)(arr - body) + 4 + after;
	(*rest)[*rest_len] = '\0';
	out->name_bytes = copy;
	out->n_nodes = n;
	return 1;
refuse:
	free(copy);
	free(out->names);
	free(*rest);
	out->names = NULL;
	*rest = NULL;
	return ret;
}

/* The refusal of a request naming more nodes than troupe takes. */
static int too_many_nodes(const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s names more than %d nodes; troupe takes at most %d per request",
		 what, TROUPE_MAX_NODE_NAMES, TROUPE_MAX_NODE_NAMES);
	return -EINVAL;
}

int ext_args_decode(const char *body, size_t len, struct ext_args *out, char *err,
		    size_t errlen)
{
	const cJSON *nodes, *names, *it;
	char *rest = NULL;
	size_t rest_len = 0, n_names = 0;
	bool fast = false, safe;
	int cut;

	memset(out, 0, sizeof(*out));
	/* Invalid text anywhere (the names included) refuses the whole body; each
	 * byte is checked once: cut_names checks the names, the scan the rest. */
	cut = len ? cut_names(body, len, out, &rest, &rest_len) : 0;
	if (cut < 0)
		return too_many_nodes("NodeNames", err, errlen);
	if (cut && json_find_invalid(rest, rest_len, NULL) >= 0) {
		/* Invalid outside the names: the general path says where. */
		ext_args_fini(out);
		free(rest);
		rest = NULL;
	}
	if (rest) {
		fast = true;
		out->root = parse_object(rest, rest_len, true, &n_names, NULL, err, errlen);
		free(rest);
		if (!out->root) {
			/* Malformed elsewhere: say where in the body as sent. */
			ext_args_fini(out);
			snprintf(err, errlen, "malformed JSON");
			cJSON_Delete(parse_object(body, len, true, NULL, NULL, err, errlen));
			return -EINVAL;
		}
		if (n_names > 1) {
			/* NodeNames again after the list cut out: the last one is what
			 * Go reads, so read the body the general way. */
			ext_args_fini(out);
			fast = false;
		}
	}
	if (!fast) {
		safe = len && json_find_invalid(body, len, NULL) < 0;
		out->root = parse_object(body, len, safe, NULL, &out->dup_keys, err, errlen);
	}
	if (!out->root)
		return -EINVAL;
	out->pod = json_get(out->root, "Pod");
	if (!cJSON_IsObject(out->pod)) {
		snprintf(err, errlen, "\"Pod\" must be a pod object");
		return -EINVAL;
	}
	if (fast)
		return 0;       /* names mode: NodeNames was a list of names */
	nodes = json_get(out->root, "Nodes");
	names = json_get(out->root, "NodeNames");
	if (names && !cJSON_IsNull(names)) {
		size_t i = 0;

		if (!cJSON_IsArray(names)) {
			snprintf(err, errlen, "\"NodeNames\" must be a list of node names or null");
			return -EINVAL;
		}
		cJSON_ArrayForEach(it, names) {
			if (!cJSON_IsString(it) || !it->valuestring[0]) {
				snprintf(err, errlen, "\"NodeNames\" entries must be non-empty strings");
				return -EINVAL;
			}
			if (++out->n_nodes > TROUPE_MAX_NODE_NAMES)
				return too_many_nodes("NodeNames", err, errlen);
		}
		out->names = malloc((out->n_nodes ? out->n_nodes : 1) * sizeof(*out->names));
		if (!out->names) {
			snprintf(err, errlen, "out of memory reading NodeNames");
			return -EINVAL;
		}
		cJSON_ArrayForEach(it, names)
			out->names[i++] = (struct cache_name){ it->valuestring,
								 strlen(it->valuestring) };
	} else if (nodes && !cJSON_IsNull(nodes)) {
		const cJSON *items = json_get(nodes, "items");

		if (!cJSON_IsObject(nodes) || (items && !cJSON_IsNull(items) && !cJSON_IsArray(items))) {
			snprintf(err, errlen, "\"Nodes\" must be a NodeList object with \"items\"");
			return -EINVAL;
		}
		cJSON_ArrayForEach(it, json_list(items)) {
			if (!cJSON_IsObject(it)) {
				snprintf(err, errlen, "\"Nodes.items\" entries must be node objects");
				return -EINVAL;
			}
			if (++out->n_nodes > TROUPE_MAX_NODE_NAMES)
				return too_many_nodes("Nodes.items", err, errlen);
		}
		out->node_items = cJSON_IsArray(items) ? items : NULL;
		out->full_nodes = true;
	}
	/* Neither given: zero nodes, which is what kube-scheduler makes of it too. */
	return 0;
}

void ext_args_find_item_texts(struct ext_args *a, const char *body, size_t len)
{
	/* A key given twice: the text's first may not be what was decoded, so
	 * the objects are printed instead (rare; only filter's echo pays). */
	if (a->full_nodes && a->node_items && !a->item_text && !a->dup_keys)
		a->item_text = item_texts(body, len, a->n_nodes);
}

void ext_args_fini(struct ext_args *a)
{
	cJSON_Delete(a->root);
	free(a->names);
	free(a->name_bytes);
	free(a->item_text);
	memset(a, 0, sizeof(*a));
}

static const char *req_str(const cJSON *root, const char *key, bool *bad)
{
	const cJSON *it = json_get(root, key);

	if (!it || cJSON_IsNull(it))
		return "";
	if (!cJSON_IsString(it)) {
		*bad = true;
		return "";
	}
	return it->valuestring;
}

int ext_bind_args_decode(const char *body, size_t len, struct ext_bind_args *out, char *err,
			 size_t errlen)
{
	bool bad = false;

	memset(out, 0, sizeof(*out));
	out->root = parse_object(body, len, false, NULL, NULL, err, errlen);
	if (!out->root)
		return -EINVAL;
	out->pod_name = req_str(out->root, "PodName", &bad);
	out->pod_namespace = req_str(out->root, "PodNamespace", &bad);
	out->pod_uid = req_str(out->root, "PodUID", &bad);
	out->node = req_str(out->root, "Node", &bad);
	if (bad) {
		snprintf(err, errlen, "PodName, PodNamespace, PodUID and Node must be strings");
		return -EINVAL;
	}
	return 0;
}

void ext_bind_args_fini(struct ext_bind_args *a)
{
	cJSON_Delete(a->root);
	memset(a, 0, sizeof(*a));
}

int ext_preempt_decode(const char *body, size_t len, cJSON **root, const cJSON **pod,
		       const cJSON **meta_victims, const cJSON **full_victims, char *err,
		       size_t errlen)
{
	const cJSON *m, *f, *it, *map;
	size_t n = 0;

	*root = parse_object(body, len, false, NULL, NULL, err, errlen);
	if (!*root)
		return -EINVAL;
	*pod = json_get(*root, "Pod");
	m = json_get(*root, "NodeNameToMetaVictims");
	f = json_get(*root, "NodeNameToVictims");
	if ((m && !cJSON_IsNull(m) && !cJSON_IsObject(m)) ||
	    (f && !cJSON_IsNull(f) && !cJSON_IsObject(f))) {
		snprintf(err, errlen, "victim maps must be objects keyed by node name");
		return -EINVAL;
	}
	*meta_victims = cJSON_IsObject(m) ? m : NULL;
	*full_victims = cJSON_IsObject(f) ? f : NULL;
	map = *meta_victims ? *meta_victims : *full_victims;
	cJSON_ArrayForEach(it, map)
		if (++n > TROUPE_MAX_NODE_NAMES)
			return too_many_nodes(*meta_victims ? "NodeNameToMetaVictims"
							    : "NodeNameToVictims", err, errlen);
	return 0;
}

/* ---- Filter result ------------------------------------------------------- */

void ext_filter_out_init(struct ext_filter_out *f)
{
	memset(f, 0, sizeof(*f));
}

void ext_filter_out_fini(struct ext_filter_out *f)
{
	strbuf_fini(&f->pass);
	strbuf_fini(&f->failed);
	strbuf_fini(&f->unresolvable);
}

void ext_filter_out_pass_name(struct ext_filter_out *f, const char *name, size_t len)
{
	if (f->n_pass++)
		strbuf_putc(&f->pass, ',');
	strbuf_put_json_str(&f->pass, name, len);
}

void ext_filter_out_pass_object(struct ext_filter_out *f, const cJSON *node,
				const struct cache_name *raw)
{
	char *s;

	if (raw) {
		if (f->n_pass++)
			strbuf_putc(&f->pass, ',');
		strbuf_append(&f->pass, raw->s, raw->len);
		return;
	}
	s = cJSON_PrintUnformatted(node);

	if (!s) {
		f->pass.failed = true;
		return;
	}
	if (f->n_pass++)
		strbuf_putc(&f->pass, ',');
	strbuf_puts(&f->pass, s);
	cJSON_free(s);
}

void ext_filter_out_fail(struct ext_filter_out *f, bool unresolvable, const char *name,
			 size_t len, const char *reason)
{
	struct strbuf *sb = unresolvable ? &f->unresolvable : &f->failed;
	size_t *n = unresolvable ? &f->n_unresolvable : &f->n_failed;

	if ((*n)++)
		strbuf_putc(sb, ',');
	strbuf_put_json_str(sb, name, len);
	strbuf_putc(sb, ':');
	strbuf_put_json_str(sb, reason, strlen(reason));
}

void ext_filter_out_encode(const struct ext_filter_out *f, bool full_nodes, struct strbuf *out)
{
	strbuf_reserve(out, f->pass.len + f->failed.len + f->unresolvable.len + 160);
	if (full_nodes) {
		strbuf_puts(out, "{\"Nodes\":{\"metadata\":{},\"items\":[");
		strbuf_append(out, f->pass.buf ? f->pass.buf : "", f->pass.len);
		strbuf_puts(out, "]},\"NodeNames\":null");
	} else {
		strbuf_puts(out, "{\"Nodes\":null,\"NodeNames\":[");
		strbuf_append(out, f->pass.buf ? f->pass.buf : "", f->pass.len);
		strbuf_putc(out, ']');
	}
	strbuf_puts(out, ",\"FailedNodes\":{");
	strbuf_append(out, f->failed.buf ? f->failed.buf : "", f->failed.len);
	strbuf_puts(out, "},\"FailedAndUnresolvableNodes\":{");
	strbuf_append(out, f->unresolvable.buf ? f->unresolvable.buf : "", f->unresolvable.len);
	strbuf_puts(out, "},\"Error\":\"\"}");
	if (f->pass.failed || f->failed.failed || f->unresolvable.failed)
		out->failed = true;
}

void ext_encode_error(struct strbuf *out, const char *msg)
{
	strbuf_puts(out, "{\"Nodes\":null,\"NodeNames\":null,\"FailedNodes\":null,"
			 "\"FailedAndUnresolvableNodes\":null,\"Error\":");
	strbuf_put_json_str(out, msg, strlen(msg));
	strbuf_putc(out, '}');
}
