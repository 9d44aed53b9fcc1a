/* The process metrics of GET /metrics, named as Prometheus' client libraries
 * name them (client_golang's process collector, prometheus_client's in
 * Python), so that the dashboards and alerts written for any exporter work on
 * troupe unchanged: process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_start_time_seconds, process_open_fds
 * and process_max_fds; and troupe_threads, the threads troupe runs now (the
 * Go collector's go_threads has no neutral name). All from /proc/self.
 *
 * The parsers are apart from the reading so that tests can give them any
 * text. Shared only inside src/extender (hence ext__ for the parsers).
 */
#ifndef TROUPE_EXTENDER_PROCESS_METRICS_H
#define TROUPE_EXTENDER_PROCESS_METRICS_H

#include <stdint.h>

#include "common/strbuf.h"

enum {
	/* /proc/self/stat: 52 numbers and a command name of at most 15 bytes
	 * (TASK_COMM_LEN) come to about 350 bytes; a longer one is refused. */
	EXT_PROC_STAT_BUF = 1024,
	/* /proc/stat: a line per CPU and the interrupt counts, some kilobytes
	 * on a big host; read once, for the boot time. */
	EXT_PROC_BOOT_STAT_MAX = 1 << 20,
};

/* What /proc/self/stat says, in the units the metrics use. */
struct ext_process_stat {
	double cpu_seconds;             /* utime + stime */
	double start_ticks;             /* starttime: clock ticks after boot */
	uint64_t virtual_bytes;         /* vsize */
	uint64_t resident_pages;        /* rss */
	uint64_t threads;               /* num_threads */
};

/* Parse the text of /proc/<pid>/stat (NUL-terminated) with <clk_tck> ticks a
 * second into <out>. The command name may hold spaces and parentheses: the
 * fields are counted from its last ')'. Returns 0, or -EINVAL when the text
 * is not such a line (<out> is then unchanged). Thread: any. */
int ext__process_stat_parse(const char *text, long clk_tck, struct ext_process_stat *out);
/* The boot time ("btime N", seconds since the epoch) from the text of
 * /proc/stat into <out>. Returns 0, or -EINVAL when there is none. */
int ext__proc_boot_time_parse(const char *text, double *out);

/* Append the process metrics to <sb>, each with its # HELP and # TYPE. A value
 * /proc cannot give (no /proc mounted, a read refused) leaves out its family,
 * never a wrong number; that is logged once, at warn. Thread: any. */
void ext_process_metrics(struct strbuf *sb);

#endif
