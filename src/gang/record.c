/* The gang plan as troupe writes it to the API: the annotation
 * troupe.io/gang-plan on every member's Binding (the API server copies a
 * Binding's annotations onto the pod).
 *
 * A gang's held bindings are posted one by one once its quorum is in, so a
 * replica that dies between two of them leaves the gang partly bound. Any
 * member that is bound carries the whole plan (which pod goes to which node,
 * with which devices), written in the same request that bound it; so whoever
 * leads next finds the plan on a bound member and can post the rest exactly as
 * planned (extender/recover.c). There is no window in which a member is bound
 * and the plan is not in the API, and no write before the first Binding.
 *
 * The text is versioned ("v"): a release reads every version it knows and
 * leaves alone, with a log line, a plan from a newer one. Version 1:
 *
 *   {"v":1,"id":"<plan id>","quorum":Q,"n":N,
 *    "members":[{"uid":"…","pod":"<name>","node":"<node>","gpus":"0,3"},…]}
 *
 * Read strictly, as every API input: no bad escape, control byte or \u0000,
 * and names, node names, UIDs and the id in plain printable ASCII.
 *
 * N is the number of members the plan binds. "members" is left out when the
 * list would pass GANG_RECORD_MAX (the API's annotations are 256 KiB per
 * object, and every member carries the text): such a plan can still be found
 * partly bound, but not completed, only rolled back.
 */
#include "gang/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/strbuf.h"

static void member_put(struct strbuf *sb, const struct gang_record_member *mb)
{
	char ids[GANG_RECORD_IDS_BUF];

	cache_devices_format(mb->devices, ids, sizeof(ids));
	strbuf_puts(sb, "{\"uid\":");
	strbuf_put_json_str(sb, mb->uid, strlen(mb->uid));
	strbuf_puts(sb, ",\"pod\":");
	strbuf_put_json_str(sb, mb->name, strlen(mb->name));
	strbuf_puts(sb, ",\"node\":");
	strbuf_put_json_str(sb, mb->node, strlen(mb->node));
	strbuf_puts(sb, ",\"gpus\":");
	strbuf_put_json_str(sb, ids, strlen(ids));
	strbuf_putc(sb, '}');
}

char *gang_record_encode(const struct gang_record *r)
{
	struct strbuf sb = STRBUF_INIT;
	size_t head;

	strbuf_printf(&sb, "{\"v\":%u,\"id\":", GANG_RECORD_VERSION);
	strbuf_put_json_str(&sb, r->id, strlen(r->id));
	strbuf_printf(&sb, ",\"quorum\":%u,\"n\":%u", r->quorum, r->n);
	head = sb.len;
	if (r->members) {
		strbuf_puts(&sb, ",\"members\":[");
		for (unsigned i = 0; i < r->n; i++) {
			if (i)
				strbuf_putc(&sb, ',');
			member_put(&sb, &r->members[i]);
		}
		strbuf_putc(&sb, ']');
		if (sb.len + 1 > GANG_RECORD_MAX)
			sb.len = head;  /* too long to list: the count alone */
	}
	strbuf_putc(&sb, '}');
	if (strbuf_failed(&sb)) {
		strbuf_fini(&sb);
		return NULL;
	}
	return strbuf_take(&sb, NULL);
}

void gang_record_fini(struct gang_record *r)
{
	free(r->members);
	r->members = NULL;
	r->n = 0;
}

/* A string field into <out>: present, a string, fitting, and plain printable
 * ASCII (names, node names and UIDs are; anything else in a plan is not one
 * troupe wrote, and would not read back the same once written again). */
static bool field(const cJSON *obj, const char *key, char *out, size_t len)
{
	const char *v = json_str(obj, key);
	size_t n = v ? strlen(v) : 0;

	if (!n || n >= len)
		return false;
	for (size_t i = 0; i < n; i++)
		if (v[i] < 0x21 || v[i] > 0x7e || v[i] == '"' || v[i] == '\\')
			return false;
	memcpy(out, v, n + 1);
	return true;
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return code;
}

int gang_record_decode(const char *s, struct gang_record *out, char *err, size_t errlen)
{
	const cJSON *v, *list, *it;
	int64_t n64, q64, ver;
	cJSON *root;
	unsigned i = 0;
	int ret = -EINVAL;

	memset(out, 0, sizeof(*out));
	if (!s || strlen(s) > CACHE_GANG_PLAN_MAX)
		return fail(err, errlen, -EINVAL, "the plan is missing or longer than %d bytes",
			    CACHE_GANG_PLAN_MAX);
	if (json_find_invalid(s, strlen(s), NULL) >= 0)
		return fail(err, errlen, -EINVAL, "the plan is not strict JSON (a bad escape, a "
			    "control byte or \\u0000)");
	root = cJSON_Parse(s);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return fail(err, errlen, -EINVAL, "the plan is not a JSON object");
	}
	v = json_get(root, "v");
	if (json_int_in_range(v, 1, INT32_MAX, &ver) < 0) {
		ret = fail(err, errlen, -EINVAL, "the plan has no version (\"v\")");
		goto out;
	}
	if (ver > GANG_RECORD_VERSION) {
		ret = fail(err, errlen, -EPROTONOSUPPORT, "the plan is version %lld, newer than this "
			   "release reads (%d)", (long long)ver, GANG_RECORD_VERSION);
		goto out;
	}
	out->version = (unsigned)ver;
	if (!field(root, "id", out->id, sizeof(out->id))) {
		ret = fail(err, errlen, -EINVAL, "the plan has no usable \"id\"");
		goto out;
	}
	if (json_int_in_range(json_get(root, "quorum"), 1, GANG_RECORD_MEMBERS_MAX, &q64) < 0 ||
	    json_int_in_range(json_get(root, "n"), 1, GANG_RECORD_MEMBERS_MAX, &n64) < 0) {
		ret = fail(err, errlen, -EINVAL, "the plan's \"quorum\" or \"n\" is not a count from "
			   "1 to %d", GANG_RECORD_MEMBERS_MAX);
		goto out;
	}
	out->quorum = (unsigned)q64;
	out->n = (unsigned)n64;
	list = json_get(root, "members");
	if (!list) {
		ret = 0;        /* too long to list when written */
		goto out;
	}
	if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != (int)out->n) {
		ret = fail(err, errlen, -EINVAL, "the plan's \"members\" is not a list of \"n\" "
			   "members");
		goto out;
	}
	out->members = calloc(out->n, sizeof(*out->members));
	if (!out->members) {
		ret = fail(err, errlen, -ENOMEM, "out of memory reading a plan");
		goto out;
	}
	cJSON_ArrayForEach(it, list) {
		struct gang_record_member *mb = &out->members[i++];
		const char *gpus = json_str(it, "gpus");

		if (!cJSON_IsObject(it) || !field(it, "uid", mb->uid, sizeof(mb->uid)) ||
		    !field(it, "pod", mb->name, sizeof(mb->name)) ||
		    !field(it, "node", mb->node, sizeof(mb->node)) || !gpus ||
		    cache_devices_parse(gpus, &mb->devices) < 0) {
			fail(err, errlen, -EINVAL, "the plan's member %u is not {uid, pod, node, gpus}",
			     i);
			goto out;
		}
		for (unsigned j = 0; j + 1 < i; j++)
			if (strcmp(out->members[j].uid, mb->uid) == 0) {
				fail(err, errlen, -EINVAL, "the plan lists pod uid %s twice", mb->uid);
				goto out;
			}
	}
	ret = 0;
out:
	cJSON_Delete(root);
	if (ret < 0)
		gang_record_fini(out);
	return ret;
}
