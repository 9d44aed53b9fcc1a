/* TLS credentials and client verification for the verbs listener (tls.h).
 *
 * Two immutable, reference-counted snapshots are current at any time: the
 * server's chain and key (struct creds) and the client CA as a GnuTLS trust
 * list (struct trust). A handshake or a verification takes a reference under
 * <lock>, works outside it, and drops it; a reload builds a new snapshot
 * outside the lock and swaps the pointer under it, so the old one is freed by
 * whoever drops its last reference. Nothing a handshake in flight uses is ever
 * freed under it: the chain and key handed to GnuTLS are per-handshake copies
 * that GnuTLS frees itself.
 *
 * A file counts as changed when its device, inode, size, mtime or ctime
 * differ from the version last tried (stat follows symlinks, so the
 * ..data-symlink swap of a Kubernetes secret volume is seen). A version that
 * fails to load is remembered too, so its error is logged once, and the next
 * change is tried again: a certificate and key written one after the other
 * fail (they do not match) until both are in place.
 */
#include "extender/tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <gnutls/x509.h>

#include "common/log.h"
#include "common/util.h"
#include "extender/config.h"

enum {
	/* A certificate, key or CA file larger than this is refused. */
	TLS_FILE_MAX_BYTES = 1024 * 1024,
	/* A key id (SHA-256). */
	TLS_KEY_ID_BUF = 64,
	/* A CN as read from a certificate; a longer one is cut (and then
	 * matches no entry). */
	TLS_CN_BUF = 256,
};

#define TLS_DEFAULT_INTERVAL_NS 1000000000ULL

struct file_id {
	bool seen;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
};

struct creds {
	unsigned refs;                          /* guarded by ext_tls.lock */
	gnutls_datum_t der[EXT_TLS_MAX_CHAIN];  /* the chain, leaf first */
	unsigned n;
	gnutls_datum_t key;                     /* the key file as read (PEM) */
	char dn[EXT_TLS_DN_BUF];
	time_t not_after;
};

struct trust {
	unsigned refs;                          /* guarded by ext_tls.lock */
	gnutls_x509_trust_list_t list;
	unsigned generation;
	int n_cas;
};

struct ext_tls {
	char *cert_file, *key_file, *ca_file;
	char **allowed;
	unsigned n_allowed;
	uint64_t interval_ns;
	uint64_t next_check_ns;                 /* relaxed atomic */
	bool reloading;                         /* atomic flag: one reloader at a time */
	/* Owned by the thread holding <reloading> (and ext_tls_new). */
	struct file_id cert_id, key_id, ca_id;
	unsigned generations;
	pthread_mutex_t lock;
	struct creds *creds;                    /* guarded by lock */
	struct trust *trust;                    /* guarded by lock; NULL without a CA */
};

/* ---- Snapshots ----------------------------------------------------------- */

static void creds_free(struct creds *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < c->n; i++)
		gnutls_free(c->der[i].data);
	free(c->key.data);
	free(c);
}

static void trust_free(struct trust *tr)
{
	if (!tr)
		return;
	gnutls_x509_trust_list_deinit(tr->list, 1);
	free(tr);
}

static struct creds *creds_get(struct ext_tls *t)
{
	struct creds *c;

	pthread_mutex_lock(&t->lock);
	c = t->creds;
	c->refs++;
	pthread_mutex_unlock(&t->lock);
	return c;
}

static void creds_put(struct ext_tls *t, struct creds *c)
{
	bool last;

	pthread_mutex_lock(&t->lock);
	last = --c->refs == 0;
	pthread_mutex_unlock(&t->lock);
	if (last)
		creds_free(c);
}

static struct trust *trust_get(struct ext_tls *t)
{
	struct trust *tr;

	pthread_mutex_lock(&t->lock);
	tr = t->trust;
	if (tr)
		tr->refs++;
	pthread_mutex_unlock(&t->lock);
	return tr;
}

static void trust_put(struct ext_tls *t, struct trust *tr)
{
	bool last;

	if (!tr)
		return;
	pthread_mutex_lock(&t->lock);
	last = --tr->refs == 0;
	pthread_mutex_unlock(&t->lock);
	if (last)
		trust_free(tr);
}

/* ---- Loading ------------------------------------------------------------- */

static int read_datum(const char *path, gnutls_datum_t *out, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	int ret = util_read_file(path, TLS_FILE_MAX_BYTES, &buf, &len);

	if (ret < 0) {
		snprintf(err, errlen, "%s: %s", path,
			 ret == -EFBIG ? "larger than 1 MiB" : strerror(-ret));
		return ret;
	}
	out->data = (unsigned char *)buf;
	out->size = (unsigned)len;
	return 0;
}

static void crt_dn(gnutls_x509_crt_t crt, char *out, size_t len)
{
	gnutls_datum_t dn = { NULL, 0 };

	out[0] = '\0';
	if (gnutls_x509_crt_get_dn3(crt, &dn, 0) == 0)
		snprintf(out, len, "%.*s", (int)dn.size, (const char *)dn.data);
	gnutls_free(dn.data);
}

/* The chain and key in <cert_file> and <key_file>, checked to belong together
 * and to import as a handshake will import them. */
static struct creds *creds_load(const char *cert_file, const char *key_file, char *err,
				size_t errlen)
{
	gnutls_datum_t pem = { NULL, 0 };
	gnutls_x509_crt_t *crts = NULL;
	gnutls_x509_privkey_t xkey = NULL;
	unsigned char id_cert[TLS_KEY_ID_BUF], id_key[TLS_KEY_ID_BUF];
	size_t id_cert_len = sizeof(id_cert), id_key_len = sizeof(id_key);
	unsigned n = 0;
	struct creds *c = calloc(1, sizeof(*c)), *ret = NULL;
	int rc;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (read_datum(cert_file, &pem, err, errlen) < 0)
		goto out;
	rc = gnutls_x509_crt_list_import2(&crts, &n, &pem, GNUTLS_X509_FMT_PEM,
					  GNUTLS_X509_CRT_LIST_FAIL_IF_UNSORTED);
	if (rc < 0 || n == 0) {
		snprintf(err, errlen, "%s: no PEM certificate chain (leaf first): %s", cert_file,
			 rc < 0 ? gnutls_strerror(rc) : "empty");
		goto out;
	}
	if (n > EXT_TLS_MAX_CHAIN) {
		snprintf(err, errlen, "%s: %u certificates, at most %d", cert_file, n,
			 EXT_TLS_MAX_CHAIN);
		goto out;
	}
	for (unsigned i = 0; i < n; i++) {
		rc = gnutls_x509_crt_export2(crts[i], GNUTLS_X509_FMT_DER, &c->der[i]);
		if (rc < 0) {
			snprintf(err, errlen, "%s: %s", cert_file, gnutls_strerror(rc));
			goto out;
		}
		c->n++;
	}
	crt_dn(crts[0], c->dn, sizeof(c->dn));
	c->not_after = gnutls_x509_crt_get_expiration_time(crts[0]);

	if (read_datum(key_file, &c->key, err, errlen) < 0)
		goto out;
	if ((rc = gnutls_x509_privkey_init(&xkey)) < 0 ||
	    (rc = gnutls_x509_privkey_import2(xkey, &c->key, GNUTLS_X509_FMT_PEM, NULL,
					      0)) < 0) {
		snprintf(err, errlen, "%s: no unencrypted PEM private key: %s", key_file,
			 gnutls_strerror(rc));
		goto out;
	}
	if (gnutls_x509_crt_get_key_id(crts[0], GNUTLS_KEYID_USE_SHA256, id_cert,
				       &id_cert_len) < 0 ||
	    gnutls_x509_privkey_get_key_id(xkey, GNUTLS_KEYID_USE_SHA256, id_key,
					   &id_key_len) < 0 ||
	    id_cert_len != id_key_len || memcmp(id_cert, id_key, id_key_len) != 0) {
		snprintf(err, errlen, "the key in %s does not belong to the certificate in %s",
			 key_file, cert_file);
		goto out;
	}
	ret = c;
	c = NULL;
out:
	for (unsigned i = 0; i < n; i++)
		gnutls_x509_crt_deinit(crts[i]);
	gnutls_free(crts);
	if (xkey)
		gnutls_x509_privkey_deinit(xkey);
	free(pem.data);
	creds_free(c);
	return ret;
}

static struct trust *trust_load(const char *ca_file, char *err, size_t errlen)
{
	gnutls_datum_t pem = { NULL, 0 };
	struct trust *tr = calloc(1, sizeof(*tr)), *ret = NULL;
	int rc;

	if (!tr) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (read_datum(ca_file, &pem, err, errlen) < 0)
		goto out;
	if ((rc = gnutls_x509_trust_list_init(&tr->list, 0)) < 0) {
		snprintf(err, errlen, "%s: %s", ca_file, gnutls_strerror(rc));
		tr->list = NULL;
		goto out;
	}
	rc = gnutls_x509_trust_list_add_trust_mem(tr->list, &pem, NULL, GNUTLS_X509_FMT_PEM, 0,
						  0);
	if (rc <= 0) {
		snprintf(err, errlen, "%s: no PEM CA certificate: %s", ca_file,
			 rc < 0 ? gnutls_strerror(rc) : "none found");
		goto out;
	}
	tr->n_cas = rc;
	ret = tr;
	tr = NULL;
out:
	free(pem.data);
	if (tr && tr->list)
		gnutls_x509_trust_list_deinit(tr->list, 1);
	free(tr);
	return ret;
}

/* stat <path> into <id>; true when it differs from what <id> held. An
 * unreadable path counts as unchanged (the old version keeps serving). */
static bool file_changed(const char *path, struct file_id *id)
{
	struct stat st;
	struct file_id now = { 0 };

	if (stat(path, &st) < 0)
		return false;
	now.seen = true;
	now.dev = st.st_dev;
	now.ino = st.st_ino;
	now.size = st.st_size;
	now.mtime = st.st_mtim;
	now.ctime = st.st_ctim;
	if (id->seen && id->dev == now.dev && id->ino == now.ino && id->size == now.size &&
	    id->mtime.tv_sec == now.mtime.tv_sec && id->mtime.tv_nsec == now.mtime.tv_nsec &&
	    id->ctime.tv_sec == now.ctime.tv_sec && id->ctime.tv_nsec == now.ctime.tv_nsec)
		return false;
	*id = now;
	return true;
}

static void describe_creds(const struct creds *c, char *out, size_t len)
{
	struct tm tm;
	char when[32] = "?";

	if (gmtime_r(&c->not_after, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(out, len, "%s, expires %s", c->dn, when);
}

/* Reload what changed. Caller holds <reloading>. */
static void reload(struct ext_tls *t)
{
	char err[TROUPE_MESSAGE_BUF * 2];
	bool cert_changed = file_changed(t->cert_file, &t->cert_id);
	bool key_changed = file_changed(t->key_file, &t->key_id);

	if (cert_changed || key_changed) {
		struct creds *c = creds_load(t->cert_file, t->key_file, err, sizeof(err)), *old;
		char what[EXT_TLS_DN_BUF + 64];

		if (!c) {
			log_error("tls", "new server certificate not loaded, the old one keeps "
				  "serving: %s", err);
		} else {
			c->refs = 1;
			pthread_mutex_lock(&t->lock);
			old = t->creds;
			t->creds = c;
			pthread_mutex_unlock(&t->lock);
			describe_creds(c, what, sizeof(what));
			log_info("tls", "server certificate reloaded from %s: %s", t->cert_file,
				 what);
			creds_put(t, old);
		}
	}
	if (t->ca_file && file_changed(t->ca_file, &t->ca_id)) {
		struct trust *tr = trust_load(t->ca_file, err, sizeof(err)), *old;

		if (!tr) {
			log_error("tls", "new client CA not loaded, the old one keeps deciding: %s",
				  err);
		} else {
			tr->refs = 1;
			tr->generation = ++t->generations;
			pthread_mutex_lock(&t->lock);
			old = t->trust;
			t->trust = tr;
			pthread_mutex_unlock(&t->lock);
			log_info("tls", "client CA reloaded from %s (%d certificates)", t->ca_file,
				 tr->n_cas);
			trust_put(t, old);
		}
	}
}

void ext_tls_reload_now(struct ext_tls *t)
{
	/* Pairs with the clear below: the file ids and generations are the
	 * reloader's alone. */
	if (__atomic_test_and_set(&t->reloading, __ATOMIC_ACQUIRE))
		return;
	reload(t);
	__atomic_clear(&t->reloading, __ATOMIC_RELEASE);
}

void ext_tls_poll(struct ext_tls *t)
{
	uint64_t now = util_now_ns();
	uint64_t next = __atomic_load_n(&t->next_check_ns, __ATOMIC_RELAXED);

	/* One caller per interval wins the check; the others go on with the
	 * current snapshots. */
	if (now < next || !__atomic_compare_exchange_n(&t->next_check_ns, &next,
						       now + t->interval_ns, false,
						       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	ext_tls_reload_now(t);
}

static char *dup_or_null(const char *s)
{
	return s && s[0] ? strdup(s) : NULL;
}

struct ext_tls *ext_tls_new(const struct ext_tls_opts *o, char *err, size_t errlen)
{
	struct ext_tls *t = calloc(1, sizeof(*t));

	if (!t)
		goto nomem;
	pthread_mutex_init(&t->lock, NULL);
	t->interval_ns = o->check_interval_ns ? o->check_interval_ns : TLS_DEFAULT_INTERVAL_NS;
	t->cert_file = dup_or_null(o->cert_file);
	t->key_file = dup_or_null(o->key_file);
	t->ca_file = dup_or_null(o->client_ca_file);
	if (!t->cert_file || !t->key_file || (o->client_ca_file && o->client_ca_file[0] &&
					      !t->ca_file))
		goto nomem;
	if (o->n_allowed) {
		t->allowed = calloc(o->n_allowed, sizeof(*t->allowed));
		if (!t->allowed)
			goto nomem;
		for (; t->n_allowed < o->n_allowed; t->n_allowed++)
			if (!(t->allowed[t->n_allowed] = strdup(o->allowed[t->n_allowed])))
				goto nomem;
	}
	file_changed(t->cert_file, &t->cert_id);
	file_changed(t->key_file, &t->key_id);
	t->creds = creds_load(t->cert_file, t->key_file, err, errlen);
	if (!t->creds)
		goto fail;
	t->creds->refs = 1;
	if (t->ca_file) {
		file_changed(t->ca_file, &t->ca_id);
		t->trust = trust_load(t->ca_file, err, errlen);
		if (!t->trust)
			goto fail;
		t->trust->refs = 1;
		t->trust->generation = ++t->generations;
	}
	t->next_check_ns = util_now_ns() + t->interval_ns;
	return t;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	ext_tls_free(t);
	return NULL;
}

struct ext_tls *ext_tls_from_config(const struct ext_tls_config *tc, char *err, size_t errlen)
{
	const char *allowed[EXT_TLS_MAX_SUBJECTS];
	struct ext_tls_opts o = {
		.cert_file = tc->cert_file,
		.key_file = tc->key_file,
		.client_ca_file = tc->client_ca_file,
		.allowed = allowed,
		.n_allowed = tc->n_allowed_subjects,
	};
	char what[EXT_TLS_DN_BUF + 64], list[EXT_TLS_MAX_SUBJECTS * 40] = "";
	struct ext_tls *t;
	size_t n = 0;

	for (unsigned i = 0; i < tc->n_allowed_subjects; i++)
		allowed[i] = tc->allowed_subjects[i];
	t = ext_tls_new(&o, err, errlen);
	if (!t)
		return NULL;
	ext_tls_describe(t, what, sizeof(what));
	log_info("tls", "serving HTTPS with %s (re-read when %s or %s change)", what,
		 tc->cert_file, tc->key_file);
	if (tc->client_ca_file[0]) {
		for (unsigned i = 0; i < tc->n_allowed_subjects && n < sizeof(list); i++)
			n += (size_t)snprintf(list + n, sizeof(list) - n, "%s\"%s\"", i ? ", " : "",
					      tc->allowed_subjects[i]);
		log_info("tls", "client certificates required, signed by %s; allowed: %s",
			 tc->client_ca_file, list);
	}
	return t;
}

void ext_tls_free(struct ext_tls *t)
{
	if (!t)
		return;
	creds_free(t->creds);
	trust_free(t->trust);
	for (unsigned i = 0; i < t->n_allowed; i++)
		free(t->allowed[i]);
	free(t->allowed);
	free(t->cert_file);
	free(t->key_file);
	free(t->ca_file);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

bool ext_tls_wants_client_cert(const struct ext_tls *t)
{
	return t->ca_file != NULL;
}

void ext_tls_describe(struct ext_tls *t, char *out, size_t len)
{
	struct creds *c = creds_get(t);

	describe_creds(c, out, len);
	creds_put(t, c);
}

/* ---- Handshakes ---------------------------------------------------------- */

void ext_tls_session_start(struct ext_tls *t, gnutls_session_t session)
{
	/* REQUEST, not REQUIRE: a client without a certificate completes the
	 * handshake and is refused with a 403 that says why, and a log line that
	 * names it. The CertificateRequest names no CA (there is none in the
	 * session's credentials), so a client that picks its certificate by the
	 * CA names (Go's crypto/tls) still sends one after a CA rotation. */
	if (t->ca_file)
		gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUEST);
}

int ext_tls_retrieve(struct ext_tls *t, gnutls_pcert_st **certs, unsigned *n_certs,
		     gnutls_privkey_t *key, unsigned *flags)
{
	gnutls_pcert_st *pcerts = NULL;
	gnutls_privkey_t pk = NULL;
	struct creds *c;
	unsigned n = 0;
	int rc;

	ext_tls_poll(t);
	c = creds_get(t);
	pcerts = gnutls_calloc(c->n, sizeof(*pcerts));
	if (!pcerts) {
		rc = GNUTLS_E_MEMORY_ERROR;
		goto fail;
	}
	for (; n < c->n; n++) {
		rc = gnutls_pcert_import_x509_raw(&pcerts[n], &c->der[n], GNUTLS_X509_FMT_DER, 0);
		if (rc < 0)
			goto fail;
	}
	if ((rc = gnutls_privkey_init(&pk)) < 0)
		goto fail;
	rc = gnutls_privkey_import_x509_raw(pk, &c->key, GNUTLS_X509_FMT_PEM, NULL, 0);
	if (rc < 0)
		goto fail;
	creds_put(t, c);
	*certs = pcerts;
	*n_certs = n;
	*key = pk;
	*flags = GNUTLS_CERT_RETR_DEINIT_ALL;
	return 0;
fail:
	log_error("tls", "cannot hand the server certificate to a handshake: %s",
		  gnutls_strerror(rc));
	for (unsigned i = 0; i < n; i++)
		gnutls_pcert_deinit(&pcerts[i]);
	gnutls_free(pcerts);
	if (pk)
		gnutls_privkey_deinit(pk);
	creds_put(t, c);
	return rc;
}

/* ---- Client verification ------------------------------------------------- */

bool ext_tls_subject_allowed(const char *const *allowed, unsigned n, const char *cn,
			     const char *dn)
{
	for (unsigned i = 0; i < n; i++) {
		const char *want = allowed[i];

		if (strchr(want, '=') ? strcmp(want, dn) == 0 : cn[0] && strcmp(want, cn) == 0)
			return true;
	}
	return false;
}

unsigned ext_tls_trust_generation(struct ext_tls *t)
{
	struct trust *tr;
	unsigned gen;

	ext_tls_poll(t);
	tr = trust_get(t);
	gen = tr ? tr->generation : 0;
	trust_put(t, tr);
	return gen;
}

void ext_tls_check_peer(struct ext_tls *t, const gnutls_datum_t *certs, unsigned n,
			struct ext_tls_peer *out)
{
	gnutls_x509_crt_t crts[EXT_TLS_MAX_CHAIN];
	char purpose[] = GNUTLS_KP_TLS_WWW_CLIENT;
	gnutls_typed_vdata_st vdata = { GNUTLS_DT_KEY_PURPOSE_OID, (unsigned char *)purpose, 0 };
	gnutls_datum_t why = { NULL, 0 };
	struct trust *tr = NULL;
	char cn[TLS_CN_BUF] = "";
	size_t cn_len = sizeof(cn);
	unsigned imported = 0, status = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	tr = trust_get(t);
	out->trust_generation = tr ? tr->generation : 0;
	if (!tr || n == 0) {
		out->verdict = EXT_TLS_NO_CERT;
		snprintf(out->reason, sizeof(out->reason), "no client certificate");
		goto out;
	}
	out->verdict = EXT_TLS_UNTRUSTED;
	if (n > EXT_TLS_MAX_CHAIN) {
		snprintf(out->reason, sizeof(out->reason), "a chain of %u certificates (at most %d)",
			 n, EXT_TLS_MAX_CHAIN);
		goto out;
	}
	for (; imported < n; imported++) {
		if (gnutls_x509_crt_init(&crts[imported]) < 0)
			goto broken;
		if (gnutls_x509_crt_import(crts[imported], &certs[imported],
					   GNUTLS_X509_FMT_DER) < 0) {
			gnutls_x509_crt_deinit(crts[imported]);
			goto broken;
		}
	}
	crt_dn(crts[0], out->dn, sizeof(out->dn));
	if (gnutls_x509_crt_get_dn_by_oid(crts[0], GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn,
					  &cn_len) < 0)
		cn[0] = '\0';
	rc = gnutls_x509_trust_list_verify_crt2(tr->list, crts, n, &vdata, 1, 0, &status, NULL);
	if (rc < 0 || status != 0) {
		if (rc < 0)
			snprintf(out->reason, sizeof(out->reason), "verification failed: %s",
				 gnutls_strerror(rc));
		else if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509,
								      &why, 0) == 0)
			snprintf(out->reason, sizeof(out->reason), "not trusted by tls.client_ca_file: "
				 "%.*s", (int)why.size, (const char *)why.data);
		else
			snprintf(out->reason, sizeof(out->reason), "not trusted by "
				 "tls.client_ca_file (status 0x%x)", status);
		goto out;
	}
	if (!ext_tls_subject_allowed((const char *const *)t->allowed, t->n_allowed, cn, out->dn)) {
		out->verdict = EXT_TLS_NOT_ALLOWED;
		snprintf(out->reason, sizeof(out->reason), "subject \"%.300s\" is not in "
			 "tls.allowed_subjects", out->dn);
		goto out;
	}
	out->verdict = EXT_TLS_ALLOWED;
	goto out;
broken:
	snprintf(out->reason, sizeof(out->reason), "a certificate that does not parse");
out:
	for (unsigned i = 0; i < imported; i++)
		gnutls_x509_crt_deinit(crts[i]);
	gnutls_free(why.data);
	trust_put(t, tr);
}

void ext_tls_check_session(struct ext_tls *t, gnutls_session_t session,
			   struct ext_tls_peer *out)
{
	unsigned n = 0;
	const gnutls_datum_t *certs = gnutls_certificate_get_peers(session, &n);

	ext_tls_poll(t);
	ext_tls_check_peer(t, certs, certs ? n : 0, out);
}
