/* Decoding uses cJSON, with exact-case lookups of the Go field names; encoding
 * writes JSON directly into a strbuf, which is several times cheaper than
 * building a cJSON tree and printing it. */
#include "extender/codec.h"

#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *parse_object(const char *body, size_t len, char *err, size_t errlen)
{
	const char *end = NULL;
	cJSON *root;
	long bad;

	if (len == 0) {
		snprintf(err, errlen, "empty request body");
		return NULL;
	}
	bad = json_find_unsafe(body, len);
	if (bad >= 0) {
		snprintf(err, errlen, "control character or \\u0000 at byte %ld; JSON allows "
			 "neither here", bad);
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
	return root;
}

int ext_args_decode(const char *body, size_t len, struct ext_args *out, char *err,
		    size_t errlen)
{
	const cJSON *nodes, *names, *it;

	memset(out, 0, sizeof(*out));
	out->root = parse_object(body, len, err, errlen);
	if (!out->root)
		return -EINVAL;
	out->pod = cJSON_GetObjectItemCaseSensitive(out->root, "Pod");
	if (!cJSON_IsObject(out->pod)) {
		snprintf(err, errlen, "\"Pod\" must be a pod object");
		return -EINVAL;
	}
	nodes = cJSON_GetObjectItemCaseSensitive(out->root, "Nodes");
	names = cJSON_GetObjectItemCaseSensitive(out->root, "NodeNames");
	if (names && !cJSON_IsNull(names)) {
		if (!cJSON_IsArray(names)) {
			snprintf(err, errlen, "\"NodeNames\" must be a list of node names or null");
			return -EINVAL;
		}
		cJSON_ArrayForEach(it, names) {
			if (!cJSON_IsString(it) || !it->valuestring[0]) {
				snprintf(err, errlen, "\"NodeNames\" entries must be non-empty strings");
				return -EINVAL;
			}
			out->n_nodes++;
		}
		out->node_names = names;
	} else if (nodes && !cJSON_IsNull(nodes)) {
		const cJSON *items = cJSON_GetObjectItemCaseSensitive(nodes, "items");

		if (!cJSON_IsObject(nodes) || (items && !cJSON_IsNull(items) && !cJSON_IsArray(items))) {
			snprintf(err, errlen, "\"Nodes\" must be a NodeList object with \"items\"");
			return -EINVAL;
		}
		cJSON_ArrayForEach(it, json_list(items)) {
			if (!cJSON_IsObject(it)) {
				snprintf(err, errlen, "\"Nodes.items\" entries must be node objects");
				return -EINVAL;
			}
			out->n_nodes++;
		}
		out->node_items = cJSON_IsArray(items) ? items : NULL;
		out->full_nodes = true;
	}
	/* Neither given: zero nodes, which is what kube-scheduler makes of it too. */
	return 0;
}

void ext_args_fini(struct ext_args *a)
{
	cJSON_Delete(a->root);
	memset(a, 0, sizeof(*a));
}

static const char *req_str(const cJSON *root, const char *key, bool *bad)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);

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
	out->root = parse_object(body, len, err, errlen);
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
	const cJSON *m, *f;

	*root = parse_object(body, len, err, errlen);
	if (!*root)
		return -EINVAL;
	*pod = cJSON_GetObjectItemCaseSensitive(*root, "Pod");
	m = cJSON_GetObjectItemCaseSensitive(*root, "NodeNameToMetaVictims");
	f = cJSON_GetObjectItemCaseSensitive(*root, "NodeNameToVictims");
	if ((m && !cJSON_IsNull(m) && !cJSON_IsObject(m)) ||
	    (f && !cJSON_IsNull(f) && !cJSON_IsObject(f))) {
		snprintf(err, errlen, "victim maps must be objects keyed by node name");
		return -EINVAL;
	}
	*meta_victims = cJSON_IsObject(m) ? m : NULL;
	*full_victims = cJSON_IsObject(f) ? f : NULL;
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

void ext_filter_out_pass_object(struct ext_filter_out *f, const cJSON *node)
{
	char *s = cJSON_PrintUnformatted(node);

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
