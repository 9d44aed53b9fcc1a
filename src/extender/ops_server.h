/* The ops listener: a second HTTP server, apart from the scheduler verbs, for
 * what people and monitoring read — GET /healthz, /readyz, /version (always
 * open: kubelet probes them), /debug/state, /debug/cache and /metrics (behind
 * Kubernetes authentication and authorisation when ops.auth is on).
 *
 * This header names no other troupe header, so that config.h can embed
 * struct ext_ops_config without a cycle.
 */
#ifndef TROUPE_EXTENDER_OPS_SERVER_H
#define TROUPE_EXTENDER_OPS_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cache_api;
struct ext_service;
struct ext_ops_server;

/* ops.* in troupe's settings. */
struct ext_ops_config {
	char host[256];                 /* ops.address's host; default 127.0.0.1 */
	uint16_t port;                  /* its port, default 8889; 0: a free one (logged) */
	/* ops.auth: /debug/... and /metrics need a bearer token that a TokenReview
	 * accepts and whose user a SubjectAccessReview allows to get the path. */
	bool auth;
	unsigned auth_cache_s;          /* ops.auth_cache_seconds: keep answers; 0: never */
	unsigned auth_cache_entries;    /* ops.auth_cache_entries: at most this many */
};

/* Fill in the defaults: 127.0.0.1:8889, auth off, answers kept 10 s, at most
 * 256 of them (the values of k8s.io/apiserver's delegating authn/authz). */
void ext_ops_config_defaults(struct ext_ops_config *c);
/* Parse "HOST:PORT" (IPv6 hosts in brackets) into <c>. Returns 0, or -EINVAL
 * with <err> set and <c> unchanged. */
int ext_ops_config_parse_address(struct ext_ops_config *c, const char *s, char *err,
				 size_t errlen);
/* Check the settings. Returns 0 or -EINVAL with <err> set. */
int ext_ops_config_validate(const struct ext_ops_config *c, char *err, size_t errlen);

/* Start serving on c->host:c->port and log the address ("ops listening on
 * http://HOST:PORT ..."). <api> is the API server the reviews go to: needed
 * when c->auth is on (NULL then is an error: a snapshot has no API server),
 * ignored otherwise. <cfg>, <svc> and <api> must outlive the server. Returns
 * NULL with a message in <err>. */
struct ext_ops_server *ext_ops_server_start(const struct ext_ops_config *cfg,
					    const struct ext_service *svc, struct cache_api *api,
					    char *err, size_t errlen);
/* The port actually bound (useful with port 0). */
uint16_t ext_ops_server_port(const struct ext_ops_server *s);
/* Stop accepting, finish in-flight requests, free. NULL does nothing. */
void ext_ops_server_stop(struct ext_ops_server *s);

#endif
