/* rbac_check.h: reading config/deploy/rbac.yaml's ClusterRoles and comparing
 * what one grants with a table of permissions (access.c's, or a part of the
 * optional ones). Shared by test_access.c (ClusterRole troupe), test_events.c
 * (troupe-events) and test_podgroup_status.c (troupe-podgroup-status).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/util.h"
#include "common/yamljson.h"
#include "rbac_check.h"

enum { RBAC_MAX_PERMS = 64 };

static const char *yaml_text(const cJSON *j)
{
	return cJSON_IsString(j) ? j->valuestring : "(not a string)";
}

/* The index in <perms> of the one granting <verb> on <resource> ("pods/binding")
 * in <group>, or -1. */
static int perm_of(const struct cache_permission *const *perms, size_t n, const cJSON *group,
		   const cJSON *resource, const cJSON *verb)
{
	if (!cJSON_IsString(group) || !cJSON_IsString(resource) || !cJSON_IsString(verb))
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct cache_permission *p = perms[i];
		char res[128];

		snprintf(res, sizeof(res), "%s%s%s", p->resource, p->subresource[0] ? "/" : "",
			 p->subresource);
		if (strcmp(group->valuestring, p->group) == 0 &&
		    strcmp(resource->valuestring, res) == 0 && strcmp(verb->valuestring, p->verb) == 0)
			return (int)i;
	}
	return -1;
}

void rbac_check_role_grants_exactly(const char *role, const struct cache_permission *const *perms,
				    size_t n, bool only_here, const char *user)
{
	bool granted[RBAC_MAX_PERMS] = { false };
	const cJSON *doc, *rule, *g, *r, *v;
	char *buf = NULL, err[192] = "";
	cJSON *docs;
	size_t len;
	int roles = 0;

	assert_true(n <= RBAC_MAX_PERMS);
	for (size_t i = 0; i < n; i++)
		assert_non_null(perms[i]);
	assert_int_equal(util_read_file(TROUPE_SOURCE_ROOT "/config/deploy/rbac.yaml", 1 << 20,
					&buf, &len), 0);
	docs = yamljson_parse(buf, len, err, sizeof(err));
	if (!docs)
		fail_msg("rbac.yaml: %s", err);
	cJSON_ArrayForEach(doc, docs) {
		const char *kind = json_str(doc, "kind");
		const char *name = json_str(json_obj(doc, "metadata"), "name");
		bool ours;

		if (!kind || strcmp(kind, "ClusterRole") != 0 || !name)
			continue;
		ours = strcmp(name, role) == 0;
		/* The file's other roles are granted apart, and checked by the
		 * tests of what uses them. */
		if (!ours && !only_here)
			continue;
		roles += ours;
		cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(doc, "rules"))
		cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(rule, "apiGroups"))
		cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(rule, "resources"))
		cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(rule, "verbs")) {
			int found = perm_of(perms, n, g, r, v);

			if (ours && found < 0)
				fail_msg("%s grants %s on %s (group \"%s\"), which %s does not use",
					 role, yaml_text(v), yaml_text(r), yaml_text(g), user);
			if (!ours && found >= 0)
				fail_msg("ClusterRole %s grants %s: keep it in %s", name,
					 perms[found]->name, role);
			if (found >= 0)
				granted[found] = true;
		}
	}
	assert_int_equal(roles, 1);
	for (size_t i = 0; i < n; i++)
		if (!granted[i])
			fail_msg("%s does not grant %s", role, perms[i]->name);
	cJSON_Delete(docs);
	free(buf);
}
