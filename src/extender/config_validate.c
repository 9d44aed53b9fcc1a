/* Whether a configuration can run: each value in its range and the values
 * that go together set together (ext_config_validate), with the TLS keys' own
 * setter for the --tls-* flags. config.c reads the file into the struct; this
 * says whether what it read makes sense, with an error naming the key and
 * what it must be.
 */
#include "extender/config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cache/lease.h"
#include "common/log.h"
#include "extender/ops_server.h"
#include "placement/placement.h"


int ext_config_set_tls(struct ext_config *cfg, const char *key, const char *value, char *err,
		       size_t errlen)
{
	struct ext_tls_config *t = &cfg->tls;
	char *field = NULL;

	if (strcmp(key, "allowed_subjects") == 0) {
		if (!value[0] || strlen(value) >= EXT_TLS_SUBJECT_BUF) {
			snprintf(err, errlen, "tls.allowed_subjects: an entry must be 1 to %d bytes",
				 EXT_TLS_SUBJECT_BUF - 1);
			return -EINVAL;
		}
		if (t->n_allowed_subjects == EXT_TLS_MAX_SUBJECTS) {
			snprintf(err, errlen, "tls.allowed_subjects: at most %d entries",
				 EXT_TLS_MAX_SUBJECTS);
			return -EINVAL;
		}
		snprintf(t->allowed_subjects[t->n_allowed_subjects++], EXT_TLS_SUBJECT_BUF, "%s",
			 value);
		return 0;
	}
	if (strcmp(key, "cert_file") == 0)
		field = t->cert_file;
	else if (strcmp(key, "key_file") == 0)
		field = t->key_file;
	else if (strcmp(key, "client_ca_file") == 0)
		field = t->client_ca_file;
	if (!field) {
		snprintf(err, errlen, "unknown key \"tls.%s\"", key);
		return -EINVAL;
	}
	if (strlen(value) >= EXT_PATH_BUF) {
		snprintf(err, errlen, "tls.%s is too long", key);
		return -EINVAL;
	}
	snprintf(field, EXT_PATH_BUF, "%s", value);
	return 0;
}

/* The TLS keys make sense only together; the budget must hold the largest
 * body alone. */
static int validate_tls_budget(const struct ext_config *cfg, char *err, size_t errlen)
{
	const struct ext_tls_config *t = &cfg->tls;
	size_t largest_room = cfg->max_body_bytes <= EXT_BODY_SMALL_BYTES ? cfg->body_budget_bytes
		: cfg->body_budget_bytes - cfg->body_budget_bytes / 4;

	if (!t->cert_file[0] != !t->key_file[0]) {
		snprintf(err, errlen, "tls.cert_file and tls.key_file go together (both set: "
			 "HTTPS; both empty: plain HTTP)");
		return -EINVAL;
	}
	if (t->client_ca_file[0] && !t->cert_file[0]) {
		snprintf(err, errlen, "tls.client_ca_file needs tls.cert_file and tls.key_file "
			 "(client certificates exist only over HTTPS)");
		return -EINVAL;
	}
	if (t->client_ca_file[0] && t->n_allowed_subjects == 0) {
		snprintf(err, errlen, "tls.client_ca_file is set but tls.allowed_subjects is "
			 "empty: name who may call (e.g. [kube-scheduler]); a cluster CA signs "
			 "many identities");
		return -EINVAL;
	}
	if (!t->client_ca_file[0] && t->n_allowed_subjects > 0) {
		snprintf(err, errlen, "tls.allowed_subjects needs tls.client_ca_file (without it "
			 "no client certificate is asked for)");
		return -EINVAL;
	}
	if (largest_room < cfg->max_body_bytes) {
		snprintf(err, errlen, "http.body_budget_bytes (%zu) must hold one body of "
			 "http.max_body_bytes (%zu): bodies over 1 MiB may use three quarters of "
			 "the budget, so it must be at least %zu", cfg->body_budget_bytes,
			 cfg->max_body_bytes,
			 cfg->max_body_bytes <= EXT_BODY_SMALL_BYTES ? cfg->max_body_bytes
			 : cfg->max_body_bytes / 3 * 4 + 4);
		return -EINVAL;
	}
	return 0;
}

int ext_config_validate(const struct ext_config *cfg, char *err, size_t errlen)
{
	if (!placement_score_find(cfg->score_policy)) {
		snprintf(err, errlen, "scoring.policy \"%s\" is unknown (known: topology, binpack)",
			 cfg->score_policy);
		return -EINVAL;
	}
	{
		const double w[4] = { cfg->weights.packing, cfg->weights.topology,
				      cfg->weights.fragmentation, cfg->weights.fit };
		const char *names[4] = { "packing", "topology", "fragmentation", "fit" };

		for (int i = 0; i < 4; i++) {
			if (!isfinite(w[i]) || w[i] < 0) {
				snprintf(err, errlen, "scoring.weights.%s must be a number >= 0, not %g",
					 names[i], w[i]);
				return -EINVAL;
			}
		}
	}
	if (cfg->weights.packing + cfg->weights.topology + cfg->weights.fragmentation +
	    cfg->weights.fit <= 0) {
		snprintf(err, errlen, "scoring.weights: at least one weight must be positive");
		return -EINVAL;
	}
	if (cfg->max_body_bytes < 1024) {
		snprintf(err, errlen, "http.max_body_bytes must be at least 1024");
		return -EINVAL;
	}
	if (cfg->connection_limit < 4) {
		snprintf(err, errlen, "http.connection_limit must be at least 4");
		return -EINVAL;
	}
	if (cfg->connections_per_client > cfg->connection_limit) {
		snprintf(err, errlen, "http.connections_per_client must be at most "
			 "http.connection_limit (%u); 0 means a quarter of it", cfg->connection_limit);
		return -EINVAL;
	}
	if (cfg->connection_timeout_s < 1 || cfg->request_deadline_s < 1) {
		snprintf(err, errlen, "http.connection_timeout_seconds and "
			 "http.request_deadline_seconds must be at least 1");
		return -EINVAL;
	}
	if (cfg->threads > 256) {
		snprintf(err, errlen, "http.threads must be at most 256");
		return -EINVAL;
	}
	if (cfg->bind_timeout_s < 1 || cfg->bind_timeout_s > 300) {
		snprintf(err, errlen, "api.bind_timeout_seconds must be 1 to 300 (and below "
			 "kube-scheduler's httpTimeout)");
		return -EINVAL;
	}
	if (cfg->informer.page_size < 1 || cfg->informer.watch_timeout_min_s < 1 ||
	    cfg->informer.watch_timeout_max_s < cfg->informer.watch_timeout_min_s ||
	    cfg->informer.backoff_initial_ms < 1 ||
	    cfg->informer.backoff_max_ms < cfg->informer.backoff_initial_ms) {
		snprintf(err, errlen, "api: page_size and timeouts must be positive, "
			 "watch_timeout_max_seconds >= watch_timeout_min_seconds and "
			 "backoff_max_ms >= backoff_initial_ms");
		return -EINVAL;
	}
	if (cfg->gang.default_timeout_s < 1 || cfg->gang.http_timeout_s < 2 ||
	    cfg->gang.margin_s >= cfg->gang.http_timeout_s) {
		snprintf(err, errlen, "gang: timeouts must be positive and margin_seconds below "
			 "scheduler_http_timeout_seconds");
		return -EINVAL;
	}
	{
		enum log_format lf;

		if (log_format_parse(cfg->log_format, &lf) < 0) {
			snprintf(err, errlen, "log_format must be text or json");
			return -EINVAL;
		}
	}
	if (cfg->recover.interval_s < 1 || cfg->recover.interval_s > 3600) {
		snprintf(err, errlen, "gang.recover_interval_seconds must be from 1 to 3600 (how "
			 "often troupe looks for gangs left partly bound)");
		return -EINVAL;
	}
	if (cfg->recover.rollback_after_s && cfg->recover.rollback_after_s <= cfg->recover.grace_s) {
		snprintf(err, errlen, "gang.partial_rollback_seconds must be 0 (never) or longer than "
			 "gang.recover_grace_seconds: a gang is given the chance to be completed "
			 "before it is rolled back");
		return -EINVAL;
	}
	if (cfg->pgstatus.interval_s < 1 || cfg->pgstatus.interval_s > 3600) {
		snprintf(err, errlen, "gang.status_interval_seconds must be from 1 to 3600 (how "
			 "often troupe brings PodGroup status up to date)");
		return -EINVAL;
	}
	if (cfg->unconfirmed_bind_s < 1) {
		snprintf(err, errlen, "cache.unconfirmed_bind_seconds must be at least 1 (how long "
			 "a Binding the API server never confirmed keeps its GPUs)");
		return -EINVAL;
	}
	if (cfg->filter_only_pod_s < 1) {
		snprintf(err, errlen, "cache.filter_only_pod_seconds must be at least 1 (how long "
			 "a pod seen only in filter calls is remembered)");
		return -EINVAL;
	}
	if (cfg->leader_election.enabled) {
		/* The namespace and identity left empty are filled in at start. */
		const struct cache_lease_opts lo = {
			cfg->leader_election.ns[0] ? cfg->leader_election.ns : "kube-system",
			cfg->leader_election.name,
			cfg->leader_election.identity[0] ? cfg->leader_election.identity : "-",
			cfg->leader_election.lease_duration_s, cfg->leader_election.renew_deadline_s,
			cfg->leader_election.retry_period_s };
		char lerr[EXT_ERR_LEN - 32];

		if (cache_lease_opts_check(&lo, lerr, sizeof(lerr)) < 0) {
			snprintf(err, errlen, "leader_election: %s", lerr);
			return -EINVAL;
		}
	}
	if (cfg->path_prefix[0] && cfg->path_prefix[0] != '/') {
		snprintf(err, errlen, "http.path_prefix must start with / (e.g. /sched)");
		return -EINVAL;
	}
	if (cfg->events.opts.queue_size < 1 || cfg->events.opts.burst < 1 ||
	    cfg->events.opts.series_flush_s < 1) {
		snprintf(err, errlen, "events.queue_size, events.burst and "
			 "events.series_flush_seconds must be at least 1");
		return -EINVAL;
	}
	if (ext_ops_config_validate(&cfg->ops, err, errlen) < 0)
		return -EINVAL;
	return validate_tls_budget(cfg, err, errlen);
}
