/* Unit tests of troupe's configuration (extender/config.h): defaults, every key
 * of the YAML file, refusals that name the key, validation, the listen address,
 * and the shipped config/troupe.yaml and config/scheduler-config.yaml.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "extender/simulate.h"

static void assert_config_defaults(const struct ext_config *c)
{
	char err[EXT_ERR_LEN] = "";

	assert_string_equal(c->listen_host, "127.0.0.1");
	assert_int_equal(c->listen_port, 8888);
	assert_int_equal(c->log_level, LOG_INFO);
	assert_int_equal(c->threads, 0);
	assert_int_equal(c->connection_limit, 1024);
	assert_int_equal(c->connection_timeout_s, 30);
	assert_int_equal(c->max_body_bytes, 64u * 1024 * 1024);
	assert_string_equal(c->path_prefix, "");
	assert_int_equal(c->cache.n_gpu_resources, 2);
	assert_string_equal(c->cache.gpu_resources[0], "nvidia.com/gpu");
	assert_string_equal(c->cache.gpu_resources[1], "nvidia.com/gpu.shared");
	for (unsigned i = 0; i < CACHE_MAX_GPU_RESOURCES; i++) {
		assert_int_equal(c->cache.sharing[i].strategy, -1);
		assert_int_equal(c->cache.sharing[i].replicas, 0);
		assert_int_equal(c->cache.sharing[i].packing, CACHE_PACKING_DISTRIBUTED);
		assert_false(c->cache.sharing[i].fail_requests_greater_than_one);
	}
	assert_int_equal(c->cache.n_dra_drivers, 1);
	assert_string_equal(c->cache.dra_drivers[0], "gpu.nvidia.com");
	assert_string_equal(c->score_policy, "topology");
	assert_true(c->weights.packing == 0.0);
	assert_true(c->weights.topology == 3.0);
	assert_true(c->weights.fragmentation == 2.0);
	assert_true(c->weights.fit == 100.0);
	assert_int_equal(c->informer.access_check_s, 60);
	assert_int_equal(c->unconfirmed_bind_s, 300);
	assert_int_equal(c->filter_only_pod_s, 600);
	assert_int_equal(ext_config_validate(c, err, sizeof(err)), 0);
}

static void test_ext_config_defaults_values(void **state)
{
	struct ext_config cfg;

	(void)state;
	memset(&cfg, 0x5A, sizeof(cfg));
	ext_config_defaults(&cfg);
	assert_config_defaults(&cfg);
	/* The resource names live inside the config itself. */
	assert_ptr_equal(cfg.cache.gpu_resources[0], cfg.gpu_names[0]);
}

/* Write <text> to a new temporary file; its path goes to <path>. */
static void temp_file(char path[64], const char *text)
{
	size_t len = strlen(text), done = 0;
	int fd;

	snprintf(path, 64, "/tmp/troupe-test-config-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);

		assert_true(n > 0);
		done += (size_t)n;
	}
	assert_int_equal(close(fd), 0);
}

static int load_text(struct ext_config *cfg, const char *text, char *err, size_t errlen)
{
	char path[64];
	int ret;

	temp_file(path, text);
	ret = ext_config_load(cfg, path, err, errlen);
	unlink(path);
	return ret;
}

static void test_ext_config_load_sets_every_key(void **state)
{
	static const char yaml[] =
		"# every key troupe knows\n"
		"listen: \"[::1]:9000\"\n"
		"log_level: debug\n"
		"http:\n"
		"  threads: 4\n"
		"  connection_limit: 64\n"
		"  connection_timeout_seconds: 10\n"
		"  max_body_bytes: 1048576\n"
		"  path_prefix: /sched\n"
		"resources:\n"
		"  gpu: [nvidia.com/gpu, amd.com/gpu]\n"
		"dra:\n"
		"  drivers: [gpu.nvidia.com, gpu.example.com]\n"
		"sharing:\n"
		"  amd.com/gpu:\n"
		"    strategy: time-slicing\n"
		"    replicas: 4\n"
		"    packing: packed\n"
		"    fail_requests_greater_than_one: true\n"
		"scoring:\n"
		"  policy: binpack\n"
		"  weights:\n"
		"    packing: 2.5\n"
		"api:\n"
		"  access_check_seconds: 0\n"
		"  watch_silence_seconds: 90\n"
		"gang:\n"
		"  recover_partial: false\n"
		"  recover_interval_seconds: 7\n"
		"  recover_grace_seconds: 3\n"
		"  partial_rollback_seconds: 0\n"
		"cache:\n"
		"  unconfirmed_bind_seconds: 45\n"
		"  filter_only_pod_seconds: 1200\n";
	struct ext_config cfg;
	char err[EXT_ERR_LEN] = "";

	(void)state;
	ext_config_defaults(&cfg);
	if (load_text(&cfg, yaml, err, sizeof(err)) != 0)
		fail_msg("load failed: %s", err);
	assert_string_equal(cfg.listen_host, "::1");
	assert_int_equal(cfg.listen_port, 9000);
	assert_int_equal(cfg.log_level, LOG_DEBUG);
	assert_int_equal(cfg.threads, 4);
	assert_int_equal(cfg.connection_limit, 64);
	assert_int_equal(cfg.connection_timeout_s, 10);
	assert_int_equal(cfg.max_body_bytes, 1048576);
	assert_string_equal(cfg.path_prefix, "/sched");
	assert_int_equal(cfg.cache.n_gpu_resources, 2);
	assert_string_equal(cfg.cache.gpu_resources[0], "nvidia.com/gpu");
	assert_string_equal(cfg.cache.gpu_resources[1], "amd.com/gpu");
	assert_int_equal(cfg.cache.n_dra_drivers, 2);
	assert_string_equal(cfg.cache.dra_drivers[1], "gpu.example.com");
	/* sharing: by resource name, onto that resource's index; the rest auto. */
	assert_int_equal(cfg.cache.sharing[0].strategy, -1);
	assert_int_equal(cfg.cache.sharing[1].strategy, CACHE_SHARING_TIME_SLICING);
	assert_int_equal(cfg.cache.sharing[1].replicas, 4);
	assert_int_equal(cfg.cache.sharing[1].packing, CACHE_PACKING_PACKED);
	assert_true(cfg.cache.sharing[1].fail_requests_greater_than_one);
	assert_string_equal(cfg.score_policy, "binpack");
	assert_true(cfg.weights.packing == 2.5);
	/* 0 is kept: permissions are then checked at start only. */
	assert_int_equal(cfg.informer.access_check_s, 0);
	assert_int_equal(cfg.informer.watch_silence_s, 90);
	assert_false(cfg.recover.enabled);
	assert_int_equal(cfg.recover.interval_s, 7);
	assert_int_equal(cfg.recover.grace_s, 3);
	assert_int_equal(cfg.recover.rollback_after_s, 0);
	assert_int_equal(cfg.unconfirmed_bind_s, 45);
	assert_int_equal(cfg.filter_only_pod_s, 1200);
	assert_int_equal(ext_config_validate(&cfg, err, sizeof(err)), 0);
	/* An empty list turns DRA's watch off. */
	if (load_text(&cfg, "dra:\n  drivers: []\n", err, sizeof(err)) != 0)
		fail_msg("load failed: %s", err);
	assert_int_equal(cfg.cache.n_dra_drivers, 0);
}

static void test_ext_config_load_empty_file_keeps_defaults(void **state)
{
	static const char *const texts[] = {
		"", "\n", "# nothing but a comment\n", "---\n", "http:\n", "http:\n  threads:\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct ext_config cfg;
		char err[EXT_ERR_LEN] = "";

		ext_config_defaults(&cfg);
		if (load_text(&cfg, texts[i], err, sizeof(err)) != 0)
			fail_msg("\"%s\": %s", texts[i], err);
		assert_config_defaults(&cfg);
	}
}

struct config_error_case {
	const char *yaml;
	const char *message;            /* part of the error, naming the key */
};

static const struct config_error_case unknown_keys[] = {
	{ "http:\n  thraeds: 4\n", "unknown key \"http.thraeds\"" },
	{ "lisen: 127.0.0.1:8888\n", "unknown key \"lisen\"" },
	{ "scoring:\n  weights:\n    pakcing: 1\n", "unknown key \"scoring.weights.pakcing\"" },
	{ "resources:\n  gpus: [nvidia.com/gpu]\n", "unknown key \"resources.gpus\"" },
	{ "http:\n  threads: 2\nHTTP:\n  threads: 2\n", "unknown key \"HTTP\"" },
	{ "threads: 2\n", "unknown key \"threads\"" },
	{ "cache:\n  unconfirmed_bind: 5\n", "unknown key \"cache.unconfirmed_bind\"" },
};

static const struct config_error_case wrong_types[] = {
	{ "http: 5\n", "http has the wrong type" },
	{ "http:\n  threads: many\n", "http.threads" },
	{ "http:\n  threads: -1\n", "http.threads" },
	{ "http:\n  threads: 1.5\n", "http.threads" },
	{ "http:\n  connection_limit: [1]\n", "http.connection_limit" },
	{ "http:\n  connection_timeout_seconds: true\n", "http.connection_timeout_seconds" },
	{ "http:\n  max_body_bytes: 64Mi\n", "http.max_body_bytes" },
	{ "http:\n  path_prefix: 7\n", "http.path_prefix" },
	{ "listen: 8888\n", "listen" },
	{ "listen: nohost\n", "listen" },
	{ "log_level: loud\n", "log_level" },
	{ "resources: [nvidia.com/gpu]\n", "resources" },
	{ "resources:\n  gpu: nvidia.com/gpu\n", "resources.gpu" },
	{ "resources:\n  gpu: []\n", "resources.gpu" },
	{ "resources:\n  gpu: [gpu]\n", "resources.gpu" },
	{ "resources:\n  gpu: [1]\n", "resources.gpu" },
	{ "dra:\n  drivers: gpu.nvidia.com\n", "dra.drivers" },
	{ "dra:\n  drivers: [nvidia.com/gpu]\n", "dra.drivers" },
	{ "dra:\n  drivers: [GPU.nvidia.com]\n", "dra.drivers" },
	{ "dra:\n  drivers: [\"\"]\n", "dra.drivers" },
	{ "dra:\n  drivers: [a, b, c, d, e]\n", "at most 4" },
	{ "sharing: [nvidia.com/gpu]\n", "sharing must be a mapping" },
	{ "sharing:\n  gpu: {}\n", "extended resource name" },
	{ "sharing:\n  nvidia.com/gpu: 4\n", "sharing.nvidia.com/gpu has the wrong type" },
	{ "sharing:\n  nvidia.com/gpu:\n    strategy: mig\n", "sharing.nvidia.com/gpu.strategy" },
	{ "sharing:\n  nvidia.com/gpu:\n    replicas: 256\n", "sharing.nvidia.com/gpu.replicas" },
	{ "sharing:\n  nvidia.com/gpu:\n    replicas: 1.5\n", "sharing.nvidia.com/gpu.replicas" },
	{ "sharing:\n  nvidia.com/gpu:\n    packing: tight\n", "sharing.nvidia.com/gpu.packing" },
	{ "sharing:\n  nvidia.com/gpu:\n    fail_requests_greater_than_one: yes please\n",
	  "fail_requests_greater_than_one" },
	{ "sharing:\n  nvidia.com/gpu:\n    slices: 7\n", "unknown key sharing.nvidia.com/gpu.slices" },
	{ "sharing:\n  amd.com/gpu:\n    strategy: none\n", "not a managed resource" },
	{ "scoring:\n  policy: [binpack]\n", "scoring.policy" },
	{ "scoring:\n  weights: 1\n", "scoring.weights" },
	{ "scoring:\n  weights:\n    packing: -1\n", "scoring.weights.packing" },
	{ "scoring:\n  weights:\n    packing: heavy\n", "scoring.weights.packing" },
	{ "api:\n  access_check_seconds: -1\n", "api.access_check_seconds" },
	{ "api:\n  access_check_seconds: 1m\n", "api.access_check_seconds" },
	{ "cache: 300\n", "cache has the wrong type" },
	{ "cache:\n  unconfirmed_bind_seconds: 5m\n", "cache.unconfirmed_bind_seconds" },
	{ "cache:\n  unconfirmed_bind_seconds: -1\n", "cache.unconfirmed_bind_seconds" },
	{ "cache:\n  filter_only_pod_seconds: 0.5\n", "cache.filter_only_pod_seconds" },
};

static void expect_config_errors(const struct config_error_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct ext_config cfg;
		char err[EXT_ERR_LEN] = "";
		int ret;

		ext_config_defaults(&cfg);
		ret = load_text(&cfg, cases[i].yaml, err, sizeof(err));
		if (ret != -EINVAL || !strstr(err, cases[i].message))
			fail_msg("%s: ret %d, error \"%s\"; want -EINVAL naming \"%s\"",
				 cases[i].yaml, ret, err, cases[i].message);
	}
}

static void test_ext_config_load_unknown_key_names_dotted_path(void **state)
{
	(void)state;
	expect_config_errors(unknown_keys, sizeof(unknown_keys) / sizeof(unknown_keys[0]));
}

static void test_ext_config_load_wrong_type_names_key(void **state)
{
	(void)state;
	expect_config_errors(wrong_types, sizeof(wrong_types) / sizeof(wrong_types[0]));
}

static void test_ext_config_load_rejects_unusable_files(void **state)
{
	static const struct config_error_case cases[] = {
		{ "- listen\n- http\n", "top level must be a mapping" },
		{ "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n", "one YAML document" },
		{ "http: [\n", "config /tmp/troupe-test-config-" },
		{ "http:\n  threads: &a 1\n  connection_limit: *a\n", "config /tmp/" },
	};
	struct ext_config cfg;
	char err[EXT_ERR_LEN] = "";

	(void)state;
	expect_config_errors(cases, sizeof(cases) / sizeof(cases[0]));
	ext_config_defaults(&cfg);
	assert_int_equal(ext_config_load(&cfg, "/nonexistent/troupe.yaml", err, sizeof(err)),
			 -EINVAL);
	assert_contains(err, "/nonexistent/troupe.yaml");
	assert_config_defaults(&cfg);
}

struct listen_case {
	const char *in;
	int ret;
	const char *host;
	unsigned port;
};

static const struct listen_case listen_cases[] = {
	{ "127.0.0.1:8888", 0, "127.0.0.1", 8888 },
	{ "[::1]:9000", 0, "::1", 9000 },
	{ "0.0.0.0:0", 0, "0.0.0.0", 0 },
	{ "localhost:65535", 0, "localhost", 65535 },
	{ "[fe80::1%eth0]:80", 0, "fe80::1%eth0", 80 },
	{ "host", -EINVAL, NULL, 0 },
	{ ":80", -EINVAL, NULL, 0 },
	{ "1.2.3.4:70000", -EINVAL, NULL, 0 },
	{ "[::1]8888", -EINVAL, NULL, 0 },
	{ "::1:80", -EINVAL, NULL, 0 },
	{ "host:", -EINVAL, NULL, 0 },
	{ "host:-1", -EINVAL, NULL, 0 },
	{ "host:80x", -EINVAL, NULL, 0 },
	{ "host:65536", -EINVAL, NULL, 0 },
	{ "host:99999999999999999999", -EINVAL, NULL, 0 },
	{ "[::1]", -EINVAL, NULL, 0 },
	{ "[::1:80", -EINVAL, NULL, 0 },
	{ "[]:80", -EINVAL, NULL, 0 },
	{ "", -EINVAL, NULL, 0 },
};

static void test_ext_config_parse_listen_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(listen_cases) / sizeof(listen_cases[0]); i++) {
		const struct listen_case *c = &listen_cases[i];
		struct ext_config cfg;
		char err[EXT_ERR_LEN] = "";
		int ret;

		ext_config_defaults(&cfg);
		ret = ext_config_parse_listen(&cfg, c->in, err, sizeof(err));
		if (ret != c->ret)
			fail_msg("\"%s\": ret %d, want %d", c->in, ret, c->ret);
		if (ret == 0) {
			if (strcmp(cfg.listen_host, c->host) != 0 || cfg.listen_port != c->port)
				fail_msg("\"%s\": got %s port %u", c->in, cfg.listen_host,
					 cfg.listen_port);
			continue;
		}
		/* A refused address names itself and leaves the setting alone. */
		if (!strstr(err, c->in) || !strstr(err, "HOST:PORT"))
			fail_msg("\"%s\": error \"%s\"", c->in, err);
		assert_string_equal(cfg.listen_host, "127.0.0.1");
		assert_int_equal(cfg.listen_port, 8888);
	}
}

struct validate_case {
	const char *what;
	void (*change)(struct ext_config *cfg);
	const char *message;            /* NULL: valid */
};

static void cfg_unknown_policy(struct ext_config *c)
{
	snprintf(c->score_policy, sizeof(c->score_policy), "spread");
}

static void cfg_zero_weight(struct ext_config *c)
{
	c->weights.packing = 0;
	c->weights.topology = 0;
	c->weights.fragmentation = 0;
	c->weights.fit = 0;
}

static void cfg_negative_weight(struct ext_config *c)
{
	c->weights.topology = -1;
}

static void cfg_nan_weight(struct ext_config *c)
{
	c->weights.fragmentation = NAN;
}

static void cfg_tiny_body(struct ext_config *c)
{
	c->max_body_bytes = 100;
}

static void cfg_smallest_body(struct ext_config *c)
{
	c->max_body_bytes = 1024;
}

static void cfg_few_connections(struct ext_config *c)
{
	c->connection_limit = 3;
}

static void cfg_many_threads(struct ext_config *c)
{
	c->threads = 257;
}

static void cfg_rollback_before_grace(struct ext_config *c)
{
	c->recover.grace_s = 30;
	c->recover.rollback_after_s = 30;
}

static void cfg_no_recover_interval(struct ext_config *c)
{
	c->recover.interval_s = 0;
}

static void cfg_no_rollback(struct ext_config *c)
{
	c->recover.rollback_after_s = 0;
}

static void cfg_relative_prefix(struct ext_config *c)
{
	snprintf(c->path_prefix, sizeof(c->path_prefix), "sched");
}

static void cfg_prefix(struct ext_config *c)
{
	snprintf(c->path_prefix, sizeof(c->path_prefix), "/sched");
}

static void cfg_no_unconfirmed_bind_time(struct ext_config *c)
{
	c->unconfirmed_bind_s = 0;
}

static void cfg_no_filter_only_time(struct ext_config *c)
{
	c->filter_only_pod_s = 0;
}

static void cfg_short_housekeeping(struct ext_config *c)
{
	c->unconfirmed_bind_s = 1;
	c->filter_only_pod_s = 1;
}

static void cfg_nothing(struct ext_config *c)
{
	(void)c;
}

static const struct validate_case validate_cases[] = {
	{ "defaults", cfg_nothing, NULL },
	{ "rollback before the grace", cfg_rollback_before_grace,
	  "gang.partial_rollback_seconds must be 0 (never) or longer than" },
	{ "no recovery interval", cfg_no_recover_interval, "gang.recover_interval_seconds" },
	{ "never roll back", cfg_no_rollback, NULL },
	{ "no unconfirmed-bind time", cfg_no_unconfirmed_bind_time,
	  "cache.unconfirmed_bind_seconds must be at least 1" },
	{ "no filter-only time", cfg_no_filter_only_time,
	  "cache.filter_only_pod_seconds must be at least 1" },
	{ "1 s housekeeping", cfg_short_housekeeping, NULL },
	{ "unknown scoring policy", cfg_unknown_policy, "scoring.policy \"spread\" is unknown" },
	{ "zero weight", cfg_zero_weight, "scoring.weights" },
	{ "negative weight", cfg_negative_weight, "scoring.weights.topology must be a number >= 0" },
	{ "NaN weight", cfg_nan_weight, "scoring.weights.fragmentation must be a number >= 0" },
	{ "tiny body cap", cfg_tiny_body, "http.max_body_bytes" },
	{ "smallest body cap", cfg_smallest_body, NULL },
	{ "too few connections", cfg_few_connections, "http.connection_limit" },
	{ "too many threads", cfg_many_threads, "http.threads" },
	{ "relative path prefix", cfg_relative_prefix, "http.path_prefix" },
	{ "path prefix", cfg_prefix, NULL },
};

static void test_ext_config_validate_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(validate_cases) / sizeof(validate_cases[0]); i++) {
		const struct validate_case *c = &validate_cases[i];
		struct ext_config cfg;
		char err[EXT_ERR_LEN] = "";
		int ret;

		ext_config_defaults(&cfg);
		c->change(&cfg);
		ret = ext_config_validate(&cfg, err, sizeof(err));
		if (c->message ? ret != -EINVAL || !strstr(err, c->message) : ret != 0)
			fail_msg("%s: ret %d, error \"%s\"", c->what, ret, err);
	}
}

/* ---- Shipped configuration files ----------------------------------------- */

/* config/troupe.yaml documents every default: loading it must change nothing. */
static void test_ext_config_shipped_troupe_yaml_is_the_defaults(void **state)
{
	struct ext_config def, file;
	char err[EXT_ERR_LEN] = "";

	(void)state;
	ext_config_defaults(&def);
	ext_config_defaults(&file);
	file.listen_port = 1;   /* the file must set it back */
	file.weights.packing = 7;
	if (ext_config_load(&file, TROUPE_SOURCE_ROOT "/config/troupe.yaml", err, sizeof(err)) < 0)
		fail_msg("config/troupe.yaml: %s", err);
	assert_string_equal(file.listen_host, def.listen_host);
	assert_int_equal(file.listen_port, def.listen_port);
	assert_int_equal(file.log_level, def.log_level);
	assert_int_equal(file.threads, def.threads);
	assert_int_equal(file.connection_limit, def.connection_limit);
	assert_int_equal(file.connection_timeout_s, def.connection_timeout_s);
	assert_int_equal(file.max_body_bytes, def.max_body_bytes);
	assert_string_equal(file.path_prefix, def.path_prefix);
	assert_int_equal(file.cache.n_gpu_resources, def.cache.n_gpu_resources);
	assert_string_equal(file.cache.gpu_resources[0], def.cache.gpu_resources[0]);
	assert_string_equal(file.cache.gpu_resources[1], def.cache.gpu_resources[1]);
	assert_memory_equal(file.cache.sharing, def.cache.sharing, sizeof(def.cache.sharing));
	assert_int_equal(file.cache.n_dra_drivers, def.cache.n_dra_drivers);
	assert_string_equal(file.cache.dra_drivers[0], def.cache.dra_drivers[0]);
	assert_string_equal(file.score_policy, def.score_policy);
	assert_true(file.weights.packing == def.weights.packing);
	assert_int_equal(file.informer.access_check_s, def.informer.access_check_s);
	assert_int_equal(file.informer.watch_silence_s, def.informer.watch_silence_s);
	assert_true(file.recover.enabled == def.recover.enabled);
	assert_int_equal(file.recover.interval_s, def.recover.interval_s);
	assert_int_equal(file.recover.grace_s, def.recover.grace_s);
	assert_int_equal(file.recover.rollback_after_s, def.recover.rollback_after_s);
	assert_int_equal(file.unconfirmed_bind_s, def.unconfirmed_bind_s);
	assert_int_equal(file.filter_only_pod_s, def.filter_only_pod_s);
	assert_int_equal(ext_config_validate(&file, err, sizeof(err)), 0);
}

static const cJSON *child(const cJSON *o, const char *k)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);

	if (!it)
		fail_msg("scheduler-config.yaml: missing %s", k);
	return it;
}

/* config/scheduler-config.yaml must register troupe the way troupe serves:
 * the four verbs at troupe's paths, names-only requests, GPUs managed, a
 * positive weight, and a timeout long enough for held binds. */
static void test_ext_config_shipped_scheduler_config_matches_troupe(void **state)
{
	char *buf = NULL, err[256];
	size_t len;
	cJSON *docs;
	const cJSON *doc, *ext, *mr;
	struct ext_config def;
	const char *timeout;

	(void)state;
	ext_config_defaults(&def);
	assert_int_equal(util_read_file(TROUPE_SOURCE_ROOT "/config/scheduler-config.yaml",
					1 << 20, &buf, &len), 0);
	docs = yamljson_parse(buf, len, err, sizeof(err));
	if (!docs)
		fail_msg("scheduler-config.yaml: %s", err);
	doc = cJSON_GetArrayItem(docs, 0);
	assert_string_equal(child(doc, "apiVersion")->valuestring,
			    "kubescheduler.config.k8s.io/v1");
	assert_string_equal(child(doc, "kind")->valuestring, "KubeSchedulerConfiguration");
	assert_int_equal(cJSON_GetArraySize(child(doc, "extenders")), 1);
	ext = cJSON_GetArrayItem(child(doc, "extenders"), 0);
	assert_string_equal(child(ext, "filterVerb")->valuestring, "filter");
	assert_string_equal(child(ext, "prioritizeVerb")->valuestring, "prioritize");
	assert_string_equal(child(ext, "bindVerb")->valuestring, "bind");
	assert_string_equal(child(ext, "preemptVerb")->valuestring, "preempt");
	assert_true(cJSON_IsTrue(child(ext, "nodeCacheCapable")));
	assert_true(cJSON_IsFalse(child(ext, "ignorable")));
	assert_true(child(ext, "weight")->valuedouble > 0);
	/* troupe simulate's kube rankers model the shipped weight by default. */
	assert_int_equal((int)child(ext, "weight")->valuedouble, SIM_EXTENDER_WEIGHT);
	timeout = child(ext, "httpTimeout")->valuestring;
	assert_non_null(timeout);
	/* A Go duration in seconds, at least kube-scheduler's 5 s default. */
	assert_true(strtol(timeout, NULL, 10) >= 5 && strcmp(timeout + strlen(timeout) - 1, "s") == 0);
	/* The same names as troupe's resources.gpu, in the same order. */
	assert_int_equal(cJSON_GetArraySize(child(ext, "managedResources")),
			 (int)def.cache.n_gpu_resources);
	for (unsigned i = 0; i < def.cache.n_gpu_resources; i++) {
		mr = cJSON_GetArrayItem(child(ext, "managedResources"), (int)i);
		assert_string_equal(child(mr, "name")->valuestring, def.cache.gpu_resources[i]);
		assert_true(cJSON_IsBool(child(mr, "ignoredByScheduler")));
	}
	assert_true(strncmp(child(ext, "urlPrefix")->valuestring, "http", 4) == 0);
	cJSON_Delete(docs);
	free(buf);
}

/* gang.domain_levels: coarse to fine, alternatives split on "|". */
static void test_ext_config_domain_levels(void **state)
{
	struct ext_config cfg;
	char path[] = "/tmp/troupe-levels-XXXXXX", err[EXT_ERR_LEN] = "";
	int fd = mkstemp(path);
	const char *text = "gang:\n  domain_levels:\n  - topology.kubernetes.io/zone\n"
			   "  - rack|network.topology.nvidia.com/block\n";

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ext_config_defaults(&cfg);
	assert_int_equal(ext_config_load(&cfg, path, err, sizeof(err)), 0);
	assert_int_equal(cfg.gang.levels.n, 2);
	assert_string_equal(cfg.gang.levels.keys[0][0], "topology.kubernetes.io/zone");
	assert_null(cfg.gang.levels.keys[0][1]);
	assert_string_equal(cfg.gang.levels.keys[1][0], "rack");
	assert_string_equal(cfg.gang.levels.keys[1][1], "network.topology.nvidia.com/block");
	{
		FILE *f = fopen(path, "w");

		assert_non_null(f);
		fputs("gang:\n  domain_levels: []\n", f);
		fclose(f);
	}
	assert_int_equal(ext_config_load(&cfg, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "gang.domain_levels"));
	unlink(path);
}

int main(void)
{
#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ext_config_domain_levels),
		cmocka_unit_test(test_ext_config_defaults_values),
		cmocka_unit_test(test_ext_config_load_sets_every_key),
		cmocka_unit_test(test_ext_config_load_empty_file_keeps_defaults),
		cmocka_unit_test(test_ext_config_load_unknown_key_names_dotted_path),
		cmocka_unit_test(test_ext_config_load_wrong_type_names_key),
		cmocka_unit_test(test_ext_config_load_rejects_unusable_files),
		cmocka_unit_test(test_ext_config_parse_listen_table),
		cmocka_unit_test(test_ext_config_validate_table),
		cmocka_unit_test(test_ext_config_shipped_troupe_yaml_is_the_defaults),
		cmocka_unit_test(test_ext_config_shipped_scheduler_config_matches_troupe),
	};
#undef FX

	/* Refusals are logged as warnings; keep the test output to the results. */
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
