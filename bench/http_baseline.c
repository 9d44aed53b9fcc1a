/* http_baseline: the same-run baselines of the HTTP benchmark (bench/run_http.py).
 *
 *   http_baseline --level 0|1 --reply FILE [--listen HOST:PORT] [--threads N]
 *
 * troupe's own HTTP server (src/extender/server.c: the same libmicrohttpd mode,
 * thread pool, body gathering and reply path) with the verbs replaced:
 *   L0  reads the request body and answers FILE's bytes (troupe's real answer
 *       for that payload, so the reply has the real size);
 *   L1  L0, plus parsing the body with cJSON (and freeing it).
 * troupe's figures divided by these show how close it comes to the limit of its
 * own HTTP and JSON stack. Runs until SIGINT or SIGTERM.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "extender/config.h"
#include "extender/server.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* The whole of <path> (up to 1 GiB), NUL-terminated, or NULL. */
static char *slurp(const char *path, size_t *len)
{
	char *buf = NULL;

	return util_read_file(path, (size_t)1 << 30, &buf, len) == 0 ? buf : NULL;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "level", required_argument, NULL, 'l' },
		{ "reply", required_argument, NULL, 'r' },
		{ "listen", required_argument, NULL, 'L' },
		{ "threads", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ext_config cfg;
	struct ext_baseline base = { 0 };
	struct ext_service svc = { 0 };
	struct ext_server *srv;
	const char *reply = NULL, *listen = "127.0.0.1:18890";
	char err[256], *colon;
	int opt;

	ext_config_defaults(&cfg);
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'l':
			base.level = (unsigned)atoi(optarg);
			break;
		case 'r':
			reply = optarg;
			break;
		case 'L':
			listen = optarg;
			break;
		case 't':
			cfg.threads = (unsigned)atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: %s --level 0|1 --reply FILE [--listen HOST:PORT] "
				"[--threads N]\n", argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (!reply || base.level > 1) {
		fprintf(stderr, "%s: --level 0|1 and --reply FILE are required\n", argv[0]);
		return 2;
	}
	base.reply = slurp(reply, &base.reply_len);
	if (!base.reply) {
		fprintf(stderr, "%s: cannot read %s\n", argv[0], reply);
		return 1;
	}
	colon = strrchr(listen, ':');
	if (!colon) {
		fprintf(stderr, "%s: --listen wants HOST:PORT\n", argv[0]);
		return 2;
	}
	snprintf(cfg.listen_host, sizeof(cfg.listen_host), "%.*s", (int)(colon - listen), listen);
	cfg.listen_port = (uint16_t)atoi(colon + 1);
	log_set_level(LOG_WARN);
	svc.cfg = &cfg;
	svc.baseline = &base;
	srv = ext_server_start(&svc, err, sizeof(err));
	if (!srv) {
		fprintf(stderr, "%s: %s\n", argv[0], err);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("L%u listening on %s:%u, answering %zu bytes\n", base.level, cfg.listen_host,
	       ext_server_port(srv), base.reply_len);
	fflush(stdout);
	while (!stop)
		usleep(100 * 1000);
	ext_server_stop(srv);
	free((char *)base.reply);
	return 0;
}
