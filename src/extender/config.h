/* troupe's own settings: defaults, the YAML file (--config) and command-line
 * overrides. Unknown keys and wrong types are errors that name the key.
 */
#ifndef TROUPE_EXTENDER_CONFIG_H
#define TROUPE_EXTENDER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/log.h"
#include "cache/api.h"
#include "cache/events.h"
#include "cache/cache.h"
#include "cache/lease.h"
#include "cache/podgroup_status.h"
#include "gang/gang.h"
#include "placement/placement.h"
#include "extender/ops_server.h"
#include "extender/recover.h"

enum { EXT_ERR_LEN = 512 };

/* ---- TLS and the body budget (tls.*, http.body_budget_bytes) ---- */
enum {
	/* A file path in the configuration (PATH_MAX). */
	EXT_PATH_BUF = 4096,
	/* tls.allowed_subjects: entries, and the bytes of one (a CN or an RFC 4514 DN). */
	EXT_TLS_MAX_SUBJECTS = 16,
	EXT_TLS_SUBJECT_BUF = 512,
};

/* Bodies up to this size (a names-only filter call for 50,000 nodes is about
 * 1 MiB) may use the whole http.body_budget_bytes; larger ones only its first
 * three quarters, so that big uploads can never starve kube-scheduler's normal
 * calls of budget. */
#define EXT_BODY_SMALL_BYTES ((size_t)1024 * 1024)

/* TLS on the verbs listener, as kube-scheduler's extender enableHTTPS and
 * tlsConfig (certFile, keyFile, caFile) expect it. Empty cert_file: plain HTTP. */
struct ext_tls_config {
	char cert_file[EXT_PATH_BUF];   /* PEM chain, leaf first */
	char key_file[EXT_PATH_BUF];    /* PEM key, unencrypted */
	char client_ca_file[EXT_PATH_BUF];      /* set: a client certificate is required */
	/* Who may call: a CN ("kube-scheduler"), or, when the entry holds '=', the
	 * full subject DN in RFC 4514 form ("O=system,CN=kube-scheduler"). */
	char allowed_subjects[EXT_TLS_MAX_SUBJECTS][EXT_TLS_SUBJECT_BUF];
	unsigned n_allowed_subjects;
};

struct ext_config {
	char listen_host[256];          /* "127.0.0.1", "0.0.0.0", "::1" */
	uint16_t listen_port;           /* 0: pick a free port (logged) */
	enum log_level log_level;
	char log_format[8];             /* "text" (default) or "json" */
	unsigned threads;               /* HTTP worker threads; 0: one per core */
	unsigned connection_limit;
	unsigned connection_timeout_s;  /* no request in progress: closed after this */
	unsigned connections_per_client; /* of connection_limit, from one address; 0: 1/4 */
	unsigned request_deadline_s;    /* a request's headers to the end of its body */
	size_t max_body_bytes;
	char path_prefix[128];          /* e.g. "/sched": verbs at /sched/filter */
	struct cache_opts cache;        /* managed GPU resource names */
	char gpu_names[CACHE_MAX_GPU_RESOURCES][128];   /* storage behind cache.gpu_resources */
	char dra_driver_names[CACHE_MAX_DRA_DRIVERS][64]; /* storage behind cache.dra_drivers */
	/* sharing.<resource>: as written; ext_config_load copies each into
	 * cache.sharing at its resource's index (every other resource: auto). */
	struct {
		char resource[128];
		struct cache_sharing_opts opts;
	} sharing[CACHE_MAX_GPU_RESOURCES];
	unsigned n_sharing;
	char score_policy[32];
	struct placement_weights weights;
	unsigned bind_timeout_s;        /* api.bind_timeout_seconds */
	/* Housekeeping (cache.*): an assumed pod whose Binding's outcome stayed
	 * unknown this long is released; a pod seen only in filter calls is
	 * forgotten after this long (cache_pod_expire). */
	unsigned unconfirmed_bind_s;    /* cache.unconfirmed_bind_seconds */
	unsigned filter_only_pod_s;     /* cache.filter_only_pod_seconds */
	struct cache_informer_opts informer;    /* api.* list/watch tuning */
	struct gang_config gang;        /* gang.* */
	struct ext_recover_opts recover;        /* gang.recover_*, gang.partial_rollback_seconds */
	struct cache_pgs_opts pgstatus;         /* gang.write_status, gang.status_interval_seconds */
	struct ext_ops_config ops;      /* ops.*: the ops listener (ops_server.h) */
	/* ---- TLS and the body budget ---- */
	struct ext_tls_config tls;      /* tls.* */
	size_t body_budget_bytes;       /* http.body_budget_bytes: all buffered bodies together */
	/* leader_election.*: replicas share a Lease and only its holder serves
	 * (cache/lease.h); "" namespace or identity: filled in at start (the
	 * service account's namespace or kube-system; host name and pid). */
	struct {
		bool enabled;
		char ns[K8S_NAMESPACE_BUF];
		char name[K8S_NAME_BUF];
		char identity[CACHE_LEASE_HOLDER_BUF];
		unsigned lease_duration_s, renew_deadline_s, retry_period_s;
	} leader_election;
	/* events.*: Kubernetes Events of troupe's decisions (cache/events.h);
	 * opts' controller and instance are filled in at start. */
	struct {
		bool enabled;
		struct cache_events_opts opts;
	} events;
};

/* Fill in the defaults. */
void ext_config_defaults(struct ext_config *cfg);
/* Apply the YAML file <path> over <cfg>. Returns 0, or -EINVAL with <err> set. */
int ext_config_load(struct ext_config *cfg, const char *path, char *err, size_t errlen);
/* Parse "HOST:PORT" (IPv6 hosts in brackets). Returns 0 or -EINVAL. */
int ext_config_parse_listen(struct ext_config *cfg, const char *s, char *err, size_t errlen);
/* The grammar of every address troupe listens on (--listen, ops.address):
 * "HOST:PORT", an IPv6 host in brackets ("[::1]:8888"), the port 0 to 65535,
 * the host shorter than <hostlen>. Puts the host (NUL-terminated) into <host>
 * and the port into <*port>. Returns 0, or -EINVAL with both unchanged and no
 * message: the caller words it, since only it knows which address it was. */
int ext_config_split_address(const char *s, char *host, size_t hostlen, uint16_t *port);
/* Set one tls.* key from a command-line flag: <key> is "cert_file", "key_file",
 * "client_ca_file" or "allowed_subjects" (which appends one entry). Returns 0 or
 * -EINVAL with <err> set. */
int ext_config_set_tls(struct ext_config *cfg, const char *key, const char *value, char *err,
		       size_t errlen);
/* Check the settings as a whole. Returns 0 or -EINVAL with <err> set. */
int ext_config_validate(const struct ext_config *cfg, char *err, size_t errlen);

#endif
