/* The process metrics of GET /metrics (process_metrics.h says which and why
 * those names): read from /proc/self/stat, /proc/self/fd and the file-count
 * limit at each scrape; the boot time the start time counts from is read once
 * from /proc/stat. A scrape costs a few hundred bytes read and one
 * directory listed, about what a filter of a few nodes costs.
 */
#include "extender/process_metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

/* The fields of /proc/<pid>/stat troupe reads (proc(5)'s numbering, from 1:
 * pid, then the command in parentheses, then the state). */
enum {
	STAT_UTIME = 14,
	STAT_STIME = 15,
	STAT_THREADS = 20,
	STAT_STARTTIME = 22,
	STAT_VSIZE = 23,
	STAT_RSS = 24,
};

int ext__process_stat_parse(const char *text, long clk_tck, struct ext_process_stat *out)
{
	uint64_t v[STAT_RSS + 1] = { 0 };
	const char *p = strrchr(text, ')');

	if (!p || clk_tck <= 0)
		return -EINVAL;
	/* Field 3, the state: one letter. */
	p++;
	while (*p == ' ')
		p++;
	if (!*p || *p == ' ' || (p[1] != ' ' && p[1] != '\0'))
		return -EINVAL;
	p++;
	for (int f = 4; f <= STAT_RSS; f++) {
		char *end;
		bool neg;

		while (*p == ' ')
			p++;
		neg = *p == '-';
		if (neg)
			p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		errno = 0;
		v[f] = strtoull(p, &end, 10);
		if (errno || (*end != ' ' && *end != '\0' && *end != '\n'))
			return -EINVAL;
		/* Signed fields (priority, nice) may be negative; none of those
		 * troupe reads may. */
		if (neg && (f == STAT_UTIME || f == STAT_STIME || f == STAT_THREADS ||
			    f == STAT_STARTTIME || f == STAT_VSIZE || f == STAT_RSS))
			return -EINVAL;
		p = end;
	}
	out->cpu_seconds = (double)(v[STAT_UTIME] + v[STAT_STIME]) / (double)clk_tck;
	out->start_ticks = (double)v[STAT_STARTTIME];
	out->virtual_bytes = v[STAT_VSIZE];
	out->resident_pages = v[STAT_RSS];
	out->threads = v[STAT_THREADS];
	return 0;
}

int ext__proc_boot_time_parse(const char *text, double *out)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		char *end;
		unsigned long long s;

		if (strncmp(p, "btime ", 6) != 0)
			continue;
		errno = 0;
		s = strtoull(p + 6, &end, 10);
		if (errno || end == p + 6 || (*end != '\n' && *end != '\0'))
			return -EINVAL;
		*out = (double)s;
		return 0;
	}
	return -EINVAL;
}

/* ---- Reading /proc ---------------------------------------------------------------- */

/* Say once that /proc did not answer, with why: a scrape every few seconds
 * must not fill the log, and the metric's absence says the rest. */
static void warn_once(const char *what, int err)
{
	static bool said;

	if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		log_warn("metrics", "process metrics: cannot read %s (%s); the metrics it gives "
			 "are left out of /metrics", what, strerror(-err));
}

static int read_stat(struct ext_process_stat *st)
{
	char buf[EXT_PROC_STAT_BUF];
	ssize_t n;
	int fd, ret;

	fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, sizeof(buf) - 1);
	while (n < 0 && errno == EINTR);
	ret = n < 0 ? -errno : 0;
	close(fd);
	if (ret < 0)
		return ret;
	/* One read gives the whole line (procfs writes it at once); a line
	 * that fills the buffer is not one this parser knows. */
	if ((size_t)n >= sizeof(buf) - 1)
		return -EFBIG;
	buf[n] = '\0';
	return ext__process_stat_parse(buf, sysconf(_SC_CLK_TCK), st);
}

/* The boot time, read once: it does not move while troupe runs, and
 * /proc/stat is larger than the rest together. */
static double boot_time_s;
static int boot_time_err;
static pthread_once_t boot_time_once = PTHREAD_ONCE_INIT;

static void boot_time_read(void)
{
	char *text = NULL;
	size_t len;

	boot_time_err = util_read_file("/proc/stat", EXT_PROC_BOOT_STAT_MAX, &text, &len);
	if (!boot_time_err)
		boot_time_err = ext__proc_boot_time_parse(text, &boot_time_s);
	free(text);
}

/* The descriptors open now, the one listing them left out. */
static int count_fds(uint64_t *out)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	uint64_t n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	*out = n ? n - 1 : 0;
	return 0;
}

static void gauge(struct strbuf *sb, const char *name, const char *help, uint64_t v)
{
	strbuf_printf(sb, "# HELP %s %s\n# TYPE %s gauge\n%s %llu\n", name, help, name, name,
		      (unsigned long long)v);
}

void ext_process_metrics(struct strbuf *sb)
{
	struct ext_process_stat st;
	struct rlimit rl;
	uint64_t fds = 0;
	int ret;

	ret = read_stat(&st);
	if (ret == 0) {
		long page = sysconf(_SC_PAGESIZE);

		strbuf_printf(sb, "# HELP process_cpu_seconds_total Total user and system CPU time "
			      "spent in seconds.\n# TYPE process_cpu_seconds_total counter\n"
			      "process_cpu_seconds_total %.3f\n", st.cpu_seconds);
		gauge(sb, "process_resident_memory_bytes", "Resident memory size in bytes.",
		      st.resident_pages * (uint64_t)(page > 0 ? page : 4096));
		gauge(sb, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
		      st.virtual_bytes);
		pthread_once(&boot_time_once, boot_time_read);
		if (boot_time_err == 0)
			strbuf_printf(sb, "# HELP process_start_time_seconds Start time of the "
				      "process since unix epoch in seconds.\n"
				      "# TYPE process_start_time_seconds gauge\n"
				      "process_start_time_seconds %.3f\n",
				      boot_time_s + st.start_ticks / (double)sysconf(_SC_CLK_TCK));
		else
			warn_once("/proc/stat", boot_time_err);
		gauge(sb, "troupe_threads", "Threads the troupe process runs now.", st.threads);
	} else {
		warn_once("/proc/self/stat", ret);
	}
	ret = count_fds(&fds);
	if (ret == 0)
		gauge(sb, "process_open_fds", "Number of open file descriptors.", fds);
	else
		warn_once("/proc/self/fd", ret);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		gauge(sb, "process_max_fds", "Maximum number of open file descriptors.",
		      (uint64_t)rl.rlim_cur);
}
