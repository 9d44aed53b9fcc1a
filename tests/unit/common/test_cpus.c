/* Unit tests of the CPU limit (cpus.c) over a fake cgroup tree in a temporary
 * directory: cgroup v2 quotas at the leaf and on a parent (the smaller wins),
 * "max" meaning none, fractions rounding up, cgroup v1's cfs quota, the
 * affinity mask, and nothing readable falling back to the online count. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cpus.h"

struct tree {
	char root[PATH_MAX];
};

static void tree_init(struct tree *t)
{
	snprintf(t->root, sizeof(t->root), "%s/troupe-cpus-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(t->root));
}

/* Write <text> to <rel> under the tree, making its directories. */
static void put(struct tree *t, const char *rel, const char *text)
{
	char path[2 * PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", t->root, rel);
	for (char *p = path + strlen(t->root) + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		(void)mkdir(path, 0755);
		*p = '/';
	}
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void tree_fini(struct tree *t)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->root);
	assert_int_equal(system(cmd), 0);
}

static void test_cpus_v2_leaf_and_parent_smaller_wins(void **state)
{
	struct tree t;
	struct cpu_limit l;

	(void)state;
	tree_init(&t);
	put(&t, "kubepods/pod1/c1/cpu.max", "250000 100000\n");   /* 2.5 -> 3 */
	put(&t, "kubepods/pod1/cpu.max", "max 100000\n");
	put(&t, "kubepods/cpu.max", "800000 100000\n");
	cpu_limit_compute("0::/kubepods/pod1/c1\n", t.root, 64, 64, &l);
	assert_int_equal(l.cpus, 3);
	assert_int_equal(l.source, CPU_LIMIT_CGROUP);
	assert_non_null(strstr(l.where, "kubepods/pod1/c1/cpu.max"));
	/* A parent's smaller quota limits the child. */
	put(&t, "kubepods/pod1/cpu.max", "100000 100000\n");
	cpu_limit_compute("0::/kubepods/pod1/c1\n", t.root, 64, 64, &l);
	assert_int_equal(l.cpus, 1);
	assert_non_null(strstr(l.where, "kubepods/pod1/cpu.max"));
	tree_fini(&t);
}

static void test_cpus_v2_namespace_root_and_max(void **state)
{
	struct tree t;
	struct cpu_limit l;

	(void)state;
	tree_init(&t);
	/* Inside a cgroup namespace the path is "/": the mount's own cpu.max. */
	put(&t, "cpu.max", "150000 100000\n");
	cpu_limit_compute("0::/\n", t.root, 16, 16, &l);
	assert_int_equal(l.cpus, 2);
	assert_int_equal(l.source, CPU_LIMIT_CGROUP);
	put(&t, "cpu.max", "max 100000\n");
	cpu_limit_compute("0::/\n", t.root, 16, 16, &l);
	assert_int_equal(l.cpus, 16);
	assert_int_equal(l.source, CPU_LIMIT_ONLINE);
	/* A quota above the host's count changes nothing. */
	put(&t, "cpu.max", "3200000 100000\n");
	cpu_limit_compute("0::/\n", t.root, 16, 16, &l);
	assert_int_equal(l.cpus, 16);
	tree_fini(&t);
}

static void test_cpus_v1_cfs_quota(void **state)
{
	struct tree t;
	struct cpu_limit l;
	const char *cg = "11:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n";

	(void)state;
	tree_init(&t);
	put(&t, "cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "400000\n");
	put(&t, "cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
	cpu_limit_compute(cg, t.root, 32, 32, &l);
	assert_int_equal(l.cpus, 4);
	assert_int_equal(l.source, CPU_LIMIT_CGROUP);
	assert_non_null(strstr(l.where, "cpu.cfs_quota_us"));
	/* -1: no quota. */
	put(&t, "cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
	cpu_limit_compute(cg, t.root, 32, 32, &l);
	assert_int_equal(l.cpus, 32);
	/* "cpuacct" alone is not the cpu controller. */
	cpu_limit_compute("3:cpuacct:/docker/abc\n", t.root, 32, 32, &l);
	assert_int_equal(l.cpus, 32);
	tree_fini(&t);
}

static void test_cpus_affinity_and_nothing_readable(void **state)
{
	struct cpu_limit l;

	(void)state;
	cpu_limit_compute("0::/gone\n", "/nonexistent-troupe", 8, 3, &l);
	assert_int_equal(l.cpus, 3);
	assert_int_equal(l.source, CPU_LIMIT_AFFINITY);
	cpu_limit_compute("", "/nonexistent-troupe", 8, 0, &l);
	assert_int_equal(l.cpus, 8);
	assert_int_equal(l.source, CPU_LIMIT_ONLINE);
	cpu_limit_compute("garbage\n::\n", "/nonexistent-troupe", 0, 0, &l);
	assert_int_equal(l.cpus, 1);
	/* This machine: at least one, never more than the host has. */
	cpu_limit_get(&l);
	assert_true(l.cpus >= 1 && l.cpus <= (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpus_v2_leaf_and_parent_smaller_wins),
		cmocka_unit_test(test_cpus_v2_namespace_root_and_max),
		cmocka_unit_test(test_cpus_v1_cfs_quota),
		cmocka_unit_test(test_cpus_affinity_and_nothing_readable),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
