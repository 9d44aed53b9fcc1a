/* tls.c without a network: who tls.allowed_subjects lets in, how a client's
 * chain is judged, what a handshake is handed, and how changed files are
 * reloaded (or, when broken, not). The certificates are made here with GnuTLS
 * (EC P-256, so each takes well under a millisecond) in a temporary folder.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/x509.h>

#include "extender/tls.h"

enum { PATH_BUF = 256 };

struct pem {
	char cert[8192];
	char key[4096];
	gnutls_x509_crt_t crt;          /* for signing others */
	gnutls_x509_privkey_t priv;
};

struct fx {
	char dir[PATH_BUF / 2];
	struct pem ca, other_ca, server, server2, client, intruder, stranger, expired;
	char cert_file[PATH_BUF], key_file[PATH_BUF], ca_file[PATH_BUF];
};

/* ---- Certificates --------------------------------------------------------- */

enum kind { CA, SERVER, CLIENT };

/* A certificate for <cn> (and O=troupe-schedulers for clients), signed by
 * <issuer> (NULL: self-signed), valid from <from> for <days>. */
static void make(struct pem *out, enum kind kind, const char *cn, const struct pem *issuer,
		 time_t from, int days)
{
	static unsigned serial = 1;
	unsigned char sn[4] = { 0, 0, 0, (unsigned char)serial++ };
	const char *org = "troupe-schedulers";
	size_t len;

	assert_int_equal(gnutls_x509_privkey_init(&out->priv), 0);
	assert_int_equal(gnutls_x509_privkey_generate(out->priv, GNUTLS_PK_ECDSA,
		GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0), 0);
	assert_int_equal(gnutls_x509_crt_init(&out->crt), 0);
	assert_int_equal(gnutls_x509_crt_set_version(out->crt, 3), 0);
	assert_int_equal(gnutls_x509_crt_set_serial(out->crt, sn, sizeof(sn)), 0);
	assert_int_equal(gnutls_x509_crt_set_activation_time(out->crt, from), 0);
	assert_int_equal(gnutls_x509_crt_set_expiration_time(out->crt, from + days * 86400), 0);
	assert_int_equal(gnutls_x509_crt_set_dn_by_oid(out->crt, GNUTLS_OID_X520_COMMON_NAME, 0,
						       cn, (unsigned)strlen(cn)), 0);
	if (kind == CLIENT)
		assert_int_equal(gnutls_x509_crt_set_dn_by_oid(out->crt,
			GNUTLS_OID_X520_ORGANIZATION_NAME, 0, org, (unsigned)strlen(org)), 0);
	assert_int_equal(gnutls_x509_crt_set_key(out->crt, out->priv), 0);
	assert_int_equal(gnutls_x509_crt_set_basic_constraints(out->crt, kind == CA, -1), 0);
	assert_int_equal(gnutls_x509_crt_set_key_usage(out->crt, kind == CA ?
		GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_DIGITAL_SIGNATURE :
		GNUTLS_KEY_DIGITAL_SIGNATURE), 0);
	if (kind != CA)
		assert_int_equal(gnutls_x509_crt_set_key_purpose_oid(out->crt, kind == SERVER ?
			GNUTLS_KP_TLS_WWW_SERVER : GNUTLS_KP_TLS_WWW_CLIENT, 1), 0);
	assert_int_equal(gnutls_x509_crt_sign2(out->crt, issuer ? issuer->crt : out->crt,
					       issuer ? issuer->priv : out->priv,
					       GNUTLS_DIG_SHA256, 0), 0);
	len = sizeof(out->cert);
	assert_int_equal(gnutls_x509_crt_export(out->crt, GNUTLS_X509_FMT_PEM, out->cert, &len), 0);
	out->cert[len] = '\0';
	len = sizeof(out->key);
	assert_int_equal(gnutls_x509_privkey_export_pkcs8(out->priv, GNUTLS_X509_FMT_PEM, NULL,
							  GNUTLS_PKCS_PLAIN, out->key, &len), 0);
	out->key[len] = '\0';
}

static void pem_fini(struct pem *p)
{
	gnutls_x509_crt_deinit(p->crt);
	gnutls_x509_privkey_deinit(p->priv);
}

static void write_file(const char *path, const char *text)
{
	/* Aside, then renamed: a new inode, as a secret volume update makes. */
	char tmp[PATH_BUF + 8];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rename(tmp, path), 0);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	time_t now = time(NULL);

	snprintf(f->dir, sizeof(f->dir), "/tmp/troupe-test-tls-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	make(&f->ca, CA, "test-ca", NULL, now - 3600, 2);
	make(&f->other_ca, CA, "other-ca", NULL, now - 3600, 2);
	make(&f->server, SERVER, "127.0.0.1", &f->ca, now - 3600, 2);
	make(&f->server2, SERVER, "troupe.kube-system.svc", &f->ca, now - 3600, 2);
	make(&f->client, CLIENT, "kube-scheduler", &f->ca, now - 3600, 2);
	make(&f->intruder, CLIENT, "intruder", &f->ca, now - 3600, 2);
	make(&f->stranger, CLIENT, "kube-scheduler", &f->other_ca, now - 3600, 2);
	make(&f->expired, CLIENT, "kube-scheduler", &f->ca, now - 3 * 86400, 1);
	snprintf(f->cert_file, sizeof(f->cert_file), "%s/tls.crt", f->dir);
	snprintf(f->key_file, sizeof(f->key_file), "%s/tls.key", f->dir);
	snprintf(f->ca_file, sizeof(f->ca_file), "%s/ca.crt", f->dir);
	write_file(f->cert_file, f->server.cert);
	write_file(f->key_file, f->server.key);
	write_file(f->ca_file, f->ca.cert);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char path[PATH_BUF + 16];

	unlink(f->cert_file);
	unlink(f->key_file);
	unlink(f->ca_file);
	snprintf(path, sizeof(path), "%s", f->dir);
	rmdir(path);
	pem_fini(&f->ca);
	pem_fini(&f->other_ca);
	pem_fini(&f->server);
	pem_fini(&f->server2);
	pem_fini(&f->client);
	pem_fini(&f->intruder);
	pem_fini(&f->stranger);
	pem_fini(&f->expired);
	free(f);
	return 0;
}

static const char *const allowed[] = { "kube-scheduler", "O=ops,CN=admin" };

static struct ext_tls *open_tls(struct fx *f, bool client_ca)
{
	struct ext_tls_opts o = {
		.cert_file = f->cert_file,
		.key_file = f->key_file,
		.client_ca_file = client_ca ? f->ca_file : NULL,
		.allowed = allowed,
		.n_allowed = 2,
	};
	char err[512] = "";
	struct ext_tls *t = ext_tls_new(&o, err, sizeof(err));

	if (!t)
		fail_msg("ext_tls_new: %s", err);
	return t;
}

/* The DER of <p>'s certificate, for ext_tls_check_peer (gnutls_free it). */
static gnutls_datum_t der(const struct pem *p)
{
	gnutls_datum_t d = { NULL, 0 };

	assert_int_equal(gnutls_x509_crt_export2(p->crt, GNUTLS_X509_FMT_DER, &d), 0);
	return d;
}

static enum ext_tls_verdict judge(struct ext_tls *t, const struct pem *p,
				  struct ext_tls_peer *out)
{
	gnutls_datum_t d = der(p);

	ext_tls_check_peer(t, &d, 1, out);
	gnutls_free(d.data);
	return out->verdict;
}

/* ---- Tests ---------------------------------------------------------------- */

static void test_ext_tls_subject_allowed_matches_cn_or_whole_dn(void **state)
{
	static const struct {
		const char *cn, *dn;
		bool want;
	} cases[] = {
		{ "kube-scheduler", "O=system,CN=kube-scheduler", true },   /* the CN entry */
		{ "admin", "O=ops,CN=admin", true },                        /* the DN entry */
		{ "admin", "O=dev,CN=admin", false },                       /* CN is no DN entry */
		{ "Kube-Scheduler", "CN=Kube-Scheduler", false },           /* exact case */
		{ "", "O=ops", false },
		{ "kube-scheduler-2", "CN=kube-scheduler-2", false },       /* no prefixes */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (ext_tls_subject_allowed(allowed, 2, cases[i].cn, cases[i].dn) != cases[i].want)
			fail_msg("case %zu (%s / %s): want %d", i, cases[i].cn, cases[i].dn,
				 cases[i].want);
	assert_false(ext_tls_subject_allowed(allowed, 0, "kube-scheduler", "CN=kube-scheduler"));
}

static void test_ext_tls_check_peer_judges_chain_purpose_and_subject(void **state)
{
	struct fx *f = *state;
	struct ext_tls *t = open_tls(f, true);
	struct ext_tls_peer p;

	assert_true(ext_tls_wants_client_cert(t));
	assert_int_equal(judge(t, &f->client, &p), EXT_TLS_ALLOWED);
	assert_string_equal(p.dn, "O=troupe-schedulers,CN=kube-scheduler");
	assert_int_equal(judge(t, &f->intruder, &p), EXT_TLS_NOT_ALLOWED);
	assert_non_null(strstr(p.reason, "O=troupe-schedulers,CN=intruder"));
	assert_int_equal(judge(t, &f->stranger, &p), EXT_TLS_UNTRUSTED);
	assert_non_null(strstr(p.reason, "issuer is unknown"));
	assert_int_equal(judge(t, &f->expired, &p), EXT_TLS_UNTRUSTED);
	assert_non_null(strstr(p.reason, "expired"));
	/* The server's own certificate is for serverAuth only. */
	assert_int_equal(judge(t, &f->server, &p), EXT_TLS_UNTRUSTED);
	ext_tls_check_peer(t, NULL, 0, &p);
	assert_int_equal(p.verdict, EXT_TLS_NO_CERT);
	ext_tls_free(t);
}

static void test_ext_tls_new_refuses_bad_files(void **state)
{
	struct fx *f = *state;
	char missing[PATH_BUF + 16], err[512];
	struct ext_tls_opts o = { f->cert_file, f->key_file, NULL, NULL, 0, 0 };

	snprintf(missing, sizeof(missing), "%s/missing", f->dir);
	o.cert_file = missing;
	assert_null(ext_tls_new(&o, err, sizeof(err)));
	assert_non_null(strstr(err, "No such file"));
	/* A key of another certificate. */
	o.cert_file = f->cert_file;
	write_file(f->key_file, f->client.key);
	assert_null(ext_tls_new(&o, err, sizeof(err)));
	assert_non_null(strstr(err, "does not belong"));
	write_file(f->key_file, f->server.key);
	/* A client CA file without a certificate. */
	o.client_ca_file = f->key_file;
	assert_null(ext_tls_new(&o, err, sizeof(err)));
	assert_non_null(strstr(err, "no PEM CA certificate"));
}

/* What a handshake gets: copies it owns, so it frees them itself. */
static gnutls_datum_t retrieved(struct ext_tls *t)
{
	gnutls_pcert_st *certs = NULL;
	gnutls_privkey_t key = NULL;
	unsigned n = 0, flags = 0;
	gnutls_datum_t d = { NULL, 0 };

	assert_int_equal(ext_tls_retrieve(t, &certs, &n, &key, &flags), 0);
	assert_int_equal(n, 1);
	assert_non_null(key);
	assert_int_equal(flags, GNUTLS_CERT_RETR_DEINIT_ALL);
	d.data = gnutls_malloc(certs[0].cert.size);
	memcpy(d.data, certs[0].cert.data, certs[0].cert.size);
	d.size = certs[0].cert.size;
	gnutls_pcert_deinit(&certs[0]);
	gnutls_free(certs);
	gnutls_privkey_deinit(key);
	return d;
}

static bool same(gnutls_datum_t a, gnutls_datum_t b)
{
	bool eq = a.size == b.size && memcmp(a.data, b.data, a.size) == 0;

	gnutls_free(a.data);
	gnutls_free(b.data);
	return eq;
}

static void test_ext_tls_reload_serves_a_new_pair_and_keeps_the_old_on_errors(void **state)
{
	struct fx *f = *state;
	struct ext_tls *t = open_tls(f, false);

	assert_true(same(retrieved(t), der(&f->server)));
	/* Key written first: the pair does not match yet, the old one serves. */
	write_file(f->key_file, f->server2.key);
	ext_tls_reload_now(t);
	assert_true(same(retrieved(t), der(&f->server)));
	write_file(f->cert_file, f->server2.cert);
	ext_tls_reload_now(t);
	assert_true(same(retrieved(t), der(&f->server2)));
	/* A broken certificate changes nothing. */
	write_file(f->cert_file, "-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n");
	ext_tls_reload_now(t);
	assert_true(same(retrieved(t), der(&f->server2)));
	ext_tls_free(t);
	write_file(f->cert_file, f->server.cert);
	write_file(f->key_file, f->server.key);
}

static void test_ext_tls_reload_of_the_client_ca_bumps_its_generation(void **state)
{
	struct fx *f = *state;
	struct ext_tls *t = open_tls(f, true);
	struct ext_tls_peer p;
	unsigned gen = ext_tls_trust_generation(t);

	assert_int_equal(judge(t, &f->stranger, &p), EXT_TLS_UNTRUSTED);
	ext_tls_reload_now(t);          /* nothing changed */
	assert_int_equal(ext_tls_trust_generation(t), gen);
	write_file(f->ca_file, f->other_ca.cert);
	ext_tls_reload_now(t);
	assert_int_equal(ext_tls_trust_generation(t), gen + 1);
	assert_int_equal(judge(t, &f->stranger, &p), EXT_TLS_ALLOWED);
	assert_int_equal(p.trust_generation, gen + 1);
	assert_int_equal(judge(t, &f->client, &p), EXT_TLS_UNTRUSTED);
	write_file(f->ca_file, "not a certificate\n");
	ext_tls_reload_now(t);
	assert_int_equal(ext_tls_trust_generation(t), gen + 1);
	assert_int_equal(judge(t, &f->stranger, &p), EXT_TLS_ALLOWED);
	ext_tls_free(t);
	write_file(f->ca_file, f->ca.cert);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ext_tls_subject_allowed_matches_cn_or_whole_dn),
		cmocka_unit_test(test_ext_tls_check_peer_judges_chain_purpose_and_subject),
		cmocka_unit_test(test_ext_tls_new_refuses_bad_files),
		cmocka_unit_test(test_ext_tls_reload_serves_a_new_pair_and_keeps_the_old_on_errors),
		cmocka_unit_test(test_ext_tls_reload_of_the_client_ca_bumps_its_generation),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
