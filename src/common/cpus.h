/* How many CPUs troupe may use: the fewest of the CPUs it may run on (its
 * affinity mask) and its cgroup's CPU quota, rounded up. In a container the
 * host's core count says nothing: a pod limited to 2 CPUs on a 64-core node
 * that starts 64 workers only queues them behind the CFS throttle. */
#ifndef TROUPE_COMMON_CPUS_H
#define TROUPE_COMMON_CPUS_H

/* Where the limit came from, for the log line that explains the thread count. */
enum cpu_limit_source {
	CPU_LIMIT_ONLINE,       /* no quota and no affinity mask narrower than the host */
	CPU_LIMIT_AFFINITY,     /* sched_getaffinity (taskset, cpuset) */
	CPU_LIMIT_CGROUP,       /* cgroup v2 cpu.max or v1 cpu.cfs_quota_us */
};

struct cpu_limit {
	unsigned cpus;                  /* >= 1 */
	enum cpu_limit_source source;
	char where[256];                /* the cgroup file that set it, when CGROUP */
};

/* The limit for this process. */
void cpu_limit_get(struct cpu_limit *out);

/* The same with the file system and counts given, for tests: <proc_cgroup> is
 * the text of /proc/self/cgroup, <cgroup_root> the cgroup mount (cgroup v2
 * unified, or the v1 hierarchy root holding "cpu,cpuacct" or "cpu"), <online>
 * the host's CPUs and <affinity> those of the affinity mask (0: unknown). */
void cpu_limit_compute(const char *proc_cgroup, const char *cgroup_root, unsigned online,
		       unsigned affinity, struct cpu_limit *out);

#endif
