/* The check three cache tests make of config/deploy/rbac.yaml (rbac_check.c):
 * that a ClusterRole grants exactly the permissions its user checks for, so a
 * rule nothing uses cannot creep in and one that is used cannot be forgotten.
 * Include after cmocka.h.
 */
#ifndef TROUPE_TEST_CACHE_RBAC_CHECK_H
#define TROUPE_TEST_CACHE_RBAC_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "cache/api.h"

/* Fail the test unless ClusterRole <role> appears once in the shipped
 * rbac.yaml and each (group, resource[/subresource], verb) of its rules is one
 * of the <n> permissions <perms>, each granted. With <only_here>, no other
 * ClusterRole may grant any of them either. <user> names what uses them in the
 * failure messages ("the recorder"). */
void rbac_check_role_grants_exactly(const char *role, const struct cache_permission *const *perms,
				    size_t n, bool only_here, const char *user);

#endif
