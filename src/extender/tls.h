/* TLS for the verbs listener: the server's certificate and key, handed to each
 * handshake, and the client CA and allowed subjects that decide who may call
 * the verbs. Every file is re-read when it changes on disk (checked at most
 * once per check interval), so certificates rotate without a restart; a new
 * file that does not load keeps the old credentials and logs why.
 *
 * libmicrohttpd only asks for a client certificate and never checks it, so
 * ext_tls_check_peer does: the chain against the client CA (for client
 * authentication, at the current time), then the leaf's subject against
 * tls.allowed_subjects. server.c owns the sessions and the HTTP answers (and
 * passes libmicrohttpd's sessions in); certificates are handled here only.
 *
 * Thread: every function may be called from any thread, concurrently.
 */
#ifndef TROUPE_EXTENDER_TLS_H
#define TROUPE_EXTENDER_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#include "common/limits.h"

struct ext_tls;
struct ext_tls_config;

enum {
	/* Certificates in the server's chain file or a client's chain. */
	EXT_TLS_MAX_CHAIN = 8,
	/* A subject DN as printed for logs and matching; a longer one is cut
	 * (and then matches no DN entry). */
	EXT_TLS_DN_BUF = 512,
};

struct ext_tls_opts {
	const char *cert_file;
	const char *key_file;
	const char *client_ca_file;     /* NULL or "": no client certificate asked for */
	const char *const *allowed;     /* a CN, or an RFC 4514 DN when it holds '=' */
	unsigned n_allowed;
	uint64_t check_interval_ns;     /* how often the files are looked at; 0: 1 s */
};

enum ext_tls_verdict {
	EXT_TLS_ALLOWED = 0,
	EXT_TLS_NO_CERT,                /* none presented (or no client CA configured) */
	EXT_TLS_UNTRUSTED,              /* not signed by the client CA, expired, no clientAuth */
	EXT_TLS_NOT_ALLOWED,            /* a good certificate of a subject not listed */
};

struct ext_tls_peer {
	enum ext_tls_verdict verdict;
	unsigned trust_generation;      /* the client CA version that decided */
	char dn[EXT_TLS_DN_BUF];        /* the leaf's subject, RFC 4514; "" without one */
	char reason[TROUPE_MESSAGE_BUF];        /* why, when not allowed */
};

/* Load the certificate, key and client CA. Returns NULL with <err> set when a
 * file cannot be read or parsed, or the key does not belong to the certificate. */
struct ext_tls *ext_tls_new(const struct ext_tls_opts *o, char *err, size_t errlen);
/* ext_tls_new from the tls.* settings, logging what is served to whom. */
struct ext_tls *ext_tls_from_config(const struct ext_tls_config *tc, char *err, size_t errlen);
void ext_tls_free(struct ext_tls *t);

/* True when a client certificate is required (client_ca_file set). */
bool ext_tls_wants_client_cert(const struct ext_tls *t);

/* Describe the current server certificate ("CN=..., expires ...") into <out>. */
void ext_tls_describe(struct ext_tls *t, char *out, size_t len);

/* A new TLS session (libmicrohttpd's, before its handshake): ask for a client
 * certificate when one is required. */
void ext_tls_session_start(struct ext_tls *t, gnutls_session_t session);

/* gnutls_certificate_retrieve_function3's work: fresh copies of the current
 * chain and key, which GnuTLS frees after the handshake (*flags gets
 * GNUTLS_CERT_RETR_DEINIT_ALL), so a rotation never frees what a handshake in
 * flight still uses. Reloads changed files first. Returns 0 or a negative
 * GnuTLS error. */
int ext_tls_retrieve(struct ext_tls *t, gnutls_pcert_st **certs, unsigned *n_certs,
		     gnutls_privkey_t *key, unsigned *flags);

/* Decide on a session's peer, whose handshake has completed. */
void ext_tls_check_session(struct ext_tls *t, gnutls_session_t session,
			   struct ext_tls_peer *out);
/* The same on a DER chain, leaf first (what the session holds). */
void ext_tls_check_peer(struct ext_tls *t, const gnutls_datum_t *certs, unsigned n,
			struct ext_tls_peer *out);

/* The client CA's version: it grows at each successful reload, so a verdict
 * cached with an older one is decided again. Reloads changed files first. */
unsigned ext_tls_trust_generation(struct ext_tls *t);

/* Reload whichever files changed since they were last loaded, unless they were
 * looked at less than the check interval ago. */
void ext_tls_poll(struct ext_tls *t);
/* The same without the interval (tests). */
void ext_tls_reload_now(struct ext_tls *t);

/* The matching rule: an entry holding '=' equals <dn> exactly, any other entry
 * equals <cn> exactly. */
bool ext_tls_subject_allowed(const char *const *allowed, unsigned n, const char *cn,
			     const char *dn);

#endif
