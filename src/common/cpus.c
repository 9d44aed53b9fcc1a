/* The CPU limit (cpus.h). cgroup v2 names one path ("0::/kubepods/pod1/c1");
 * its cpu.max is "max 100000" or "<quota> <period>", and a parent's quota
 * limits every child, so every level from the process's cgroup up to the
 * mount is read and the smallest wins. Inside a container with a cgroup
 * namespace the path is "/" and the mount is the container's own cgroup.
 * cgroup v1 keeps cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us in the
 * "cpu" controller's hierarchy. Fractions round up: a limit of 1.5 CPUs
 * gets 2 threads, which the quota still bounds.
 */
#include "common/cpus.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Paths and /proc/self/cgroup are small; CGROUP_PATH_BUF would need <limits.h>, which
 * this module's own limits.h shadows. */
#define CGROUP_FILE_MAX 4096
#define CGROUP_PATH_BUF 4096

/* <a><b><c> into <out>; false when it does not fit (such a path is skipped). */
static bool path_join(char *out, size_t len, const char *a, const char *b, const char *c)
{
	int n = snprintf(out, len, "%s%s%s", a, b, c);

	return n >= 0 && (size_t)n < len;
}

static bool read_small(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	return n > 0;
}

/* CPUs allowed by a quota of <quota> per <period>, rounded up; 0 for none. */
static unsigned quota_cpus(long long quota, long long period)
{
	if (quota <= 0 || period <= 0)
		return 0;
	return (unsigned)((quota + period - 1) / period);
}

/* cgroup v2: "max 100000" or "150000 100000". */
static unsigned v2_cpus(const char *path)
{
	char buf[128], q[32];
	long long period = 0;

	if (!read_small(path, buf, sizeof(buf)) || sscanf(buf, "%31s %lld", q, &period) != 2 ||
	    strcmp(q, "max") == 0)
		return 0;
	return quota_cpus(strtoll(q, NULL, 10), period);
}

static unsigned v1_cpus(const char *dir)
{
	char path[CGROUP_PATH_BUF], buf[64];
	long long quota, period;

	if (!path_join(path, sizeof(path), dir, "/cpu.cfs_quota_us", "") ||
	    !read_small(path, buf, sizeof(buf)))
		return 0;
	quota = strtoll(buf, NULL, 10);
	if (!path_join(path, sizeof(path), dir, "/cpu.cfs_period_us", "") ||
	    !read_small(path, buf, sizeof(buf)))
		return 0;
	period = strtoll(buf, NULL, 10);
	return quota_cpus(quota, period);
}

/* Walk <rel> (a cgroup path starting with '/') from its leaf up to the root
 * under <base>, keeping the smallest limit found and the file that set it. */
static void walk_up(const char *base, const char *rel, bool v2, struct cpu_limit *best)
{
	char path[CGROUP_PATH_BUF], dir[CGROUP_PATH_BUF];

	snprintf(dir, sizeof(dir), "%s", rel);
	for (;;) {
		size_t dl = strlen(dir);
		char *slash;
		unsigned n;

		while (dl > 1 && dir[dl - 1] == '/')
			dir[--dl] = '\0';
		if (!path_join(path, sizeof(path), base, strcmp(dir, "/") == 0 ? "" : dir,
			       v2 ? "/cpu.max" : ""))
			return;
		n = v2 ? v2_cpus(path) : v1_cpus(path);
		if (n && n < best->cpus) {
			best->cpus = n;
			best->source = CPU_LIMIT_CGROUP;
			if (!path_join(best->where, sizeof(best->where), path,
				       v2 ? "" : "/cpu.cfs_quota_us", ""))
				best->where[0] = '\0';
		}
		if (strcmp(dir, "/") == 0 || !dir[0])
			return;
		slash = strrchr(dir, '/');
		if (slash == dir)
			dir[1] = '\0';
		else if (slash)
			*slash = '\0';
		else
			return;
	}
}

void cpu_limit_compute(const char *proc_cgroup, const char *cgroup_root, unsigned online,
		       unsigned affinity, struct cpu_limit *out)
{
	const char *line = proc_cgroup;

	out->cpus = online ? online : 1;
	out->source = CPU_LIMIT_ONLINE;
	out->where[0] = '\0';
	if (affinity && affinity < out->cpus) {
		out->cpus = affinity;
		out->source = CPU_LIMIT_AFFINITY;
	}
	/* Each line: hierarchy-id:controllers:path. */
	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char l[CGROUP_PATH_BUF], base[CGROUP_PATH_BUF];
		char *c1, *c2;

		if (len >= sizeof(l))
			len = sizeof(l) - 1;
		memcpy(l, line, len);
		l[len] = '\0';
		line = end ? end + 1 : NULL;
		c1 = strchr(l, ':');
		c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || c2[1] != '/')
			continue;
		*c1 = '\0';
		*c2 = '\0';
		if (strcmp(l, "0") == 0 && c1[1] == '\0') {
			walk_up(cgroup_root, c2 + 1, true, out);
		} else {
			/* v1: the controller list holds "cpu" as a whole word. */
			char *tok, *save = NULL;
			bool cpu = false;

			for (tok = strtok_r(c1 + 1, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				cpu |= strcmp(tok, "cpu") == 0;
			if (!cpu)
				continue;
			if (!path_join(base, sizeof(base), cgroup_root, "/cpu,cpuacct", "") ||
			    access(base, F_OK) != 0)
				(void)path_join(base, sizeof(base), cgroup_root, "/cpu", "");
			walk_up(base, c2 + 1, false, out);
		}
	}
}

void cpu_limit_get(struct cpu_limit *out)
{
	char cg[CGROUP_FILE_MAX];
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned affinity = 0;
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		affinity = (unsigned)CPU_COUNT(&set);
	if (!read_small("/proc/self/cgroup", cg, sizeof(cg)))
		cg[0] = '\0';
	cpu_limit_compute(cg, "/sys/fs/cgroup", online > 0 ? (unsigned)online : 1, affinity, out);
}
