/* The fallback where NVML cannot be loaded: run `nvidia-smi topo -m` and read
 * its matrix with troupe's own parser (placement_topo_parse), the one the
 * cache reads the annotation with. It gives links and NUMA nodes; not UUIDs,
 * bus ids or CPU affinity.
 *
 * nvidia-smi is run without a shell (fork and exec), its output capped at
 * SMI_MAX_BYTES.
 */
#include "node/node.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/strbuf.h"

enum { SMI_MAX_BYTES = 1 << 20 };

int node_smi_parse(const char *text, size_t len, struct node_gpus *out, char *err,
		   size_t errlen)
{
	struct placement_topo *t = calloc(1, sizeof(*t));
	char perr[NODE_ERR_BUF];
	int ret;

	memset(out, 0, sizeof(*out));
	if (!t) {
		snprintf(err, errlen, "out of memory parsing nvidia-smi topo -m");
		return -ENOMEM;
	}
	ret = placement_topo_parse(text, len, t, perr, sizeof(perr));
	if (ret < 0) {
		snprintf(err, errlen, "nvidia-smi topo -m printed what troupe cannot read: %s", perr);
		goto out;
	}
	out->n = t->n;
	for (unsigned i = 0; i < t->n; i++) {
		out->gpu[i].numa = t->numa[i];
		for (unsigned j = 0; j < t->n; j++)
			out->link[i][j] = t->link[i][j];
	}
	snprintf(out->source, sizeof(out->source), "nvidia-smi");
	ret = 0;
out:
	free(t);
	return ret;
}

int node_smi_read(const char *nvidia_smi, struct node_gpus *out, char *err, size_t errlen)
{
	struct strbuf text;
	char buf[4096];
	int fds[2], status = 0, ret = -ENOENT;
	pid_t pid;
	ssize_t got;

	strbuf_init(&text);
	memset(out, 0, sizeof(*out));
	if (pipe2(fds, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "cannot run %s: pipe: %s", nvidia_smi, strerror(errno));
		return -ENOENT;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "cannot run %s: fork: %s", nvidia_smi, strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -ENOENT;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(fds[1], STDOUT_FILENO);
		if (null >= 0)
			dup2(null, STDERR_FILENO);
		execlp(nvidia_smi, nvidia_smi, "topo", "-m", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	while ((got = read(fds[0], buf, sizeof(buf))) > 0 || (got < 0 && errno == EINTR))
		if (got > 0 && text.len < SMI_MAX_BYTES)
			strbuf_append(&text, buf, (size_t)got);
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, errlen, "%s topo -m %s %d", nvidia_smi,
			 WIFEXITED(status) ? (WEXITSTATUS(status) == 127 ? "could not be run, exit"
					      : "failed, exit") : "was killed by signal",
			 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		goto out;
	}
	if (strbuf_failed(&text)) {
		snprintf(err, errlen, "out of memory reading %s topo -m", nvidia_smi);
		ret = -ENOMEM;
		goto out;
	}
	ret = node_smi_parse(text.buf ? text.buf : "", text.len, out, err, errlen);
out:
	strbuf_fini(&text);
	return ret;
}
