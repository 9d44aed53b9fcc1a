/* Unit tests of troupe-node's GPU reading (nvml.c, smi.c) and rendering
 * (render.c). Every topology capture of real machines in tests/data/topo is
 * served by the fake NVML (tests/node/fake_nvml.c); what node_nvml_read makes
 * of it must have the capture's links and NUMA nodes, and the matrix
 * node_topo_render writes must read back, through the parser troupe's cache
 * uses on the annotation, to the very same. Then the failures: no library, a
 * failing call, NVML not initialising, the nvidia-smi fallback.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/strbuf.h"
#include "node/node.h"

#define TOPO_DIR TROUPE_SOURCE_ROOT "/tests/data/topo"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* The capture parsed as troupe's cache parses the annotation. */
static void parse_capture(const char *path, struct placement_topo *t)
{
	char err[256];
	size_t len;
	char *text = slurp(path, &len);

	if (placement_topo_parse(text, len, t, err, sizeof(err)) < 0)
		fail_msg("%s: %s", path, err);
	free(text);
}

static void assert_same_links(const char *what, const struct placement_topo *want,
			      unsigned n, const uint8_t link[][PLACEMENT_TOPO_MAX])
{
	char a[PLACEMENT_LINK_NAME_BUF], b[PLACEMENT_LINK_NAME_BUF];

	if (n != want->n)
		fail_msg("%s: %u GPUs, the capture has %u", what, n, want->n);
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < n; j++)
			if (link[i][j] != want->link[i][j])
				fail_msg("%s: GPU%u-GPU%u is %s, the capture says %s", what, i, j,
					 placement_link_name(link[i][j], a, sizeof(a)),
					 placement_link_name(want->link[i][j], b, sizeof(b)));
}

/* Every capture: through the fake NVML, then rendered and parsed back. */
static void test_every_capture_round_trips(void **state)
{
	DIR *d = opendir(TOPO_DIR);
	struct dirent *e;
	unsigned seen = 0, nvlinked = 0;

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d))) {
		char path[512], err[NODE_ERR_BUF], cpus[32];
		struct placement_topo *want = calloc(1, sizeof(*want));
		struct placement_topo *back = calloc(1, sizeof(*back));
		struct node_gpus *g = calloc(1, sizeof(*g));
		struct strbuf text, uuids;

		if (!strstr(e->d_name, ".txt")) {
			free(want);
			free(back);
			free(g);
			continue;
		}
		assert_non_null(want);
		assert_non_null(back);
		assert_non_null(g);
		snprintf(path, sizeof(path), "%s/%s", TOPO_DIR, e->d_name);
		parse_capture(path, want);
		setenv("FAKE_NVML_TOPO", path, 1);
		if (node_nvml_read(FAKE_NVML, g, err, sizeof(err)) < 0)
			fail_msg("%s: %s", e->d_name, err);
		assert_string_equal(g->source, "nvml");
		assert_same_links(e->d_name, want, g->n,
				  (const uint8_t (*)[PLACEMENT_TOPO_MAX])g->link);
		for (unsigned i = 0; i < g->n; i++) {
			char uuid[32];

			snprintf(uuid, sizeof(uuid), "GPU-fake-0000-%04u", i);
			assert_string_equal(g->gpu[i].uuid, uuid);
			assert_int_equal(g->gpu[i].numa, want->numa[i]);
			/* The fake puts NUMA node k's GPUs next to CPUs 16k-16k+15. */
			if (want->numa[i] >= 0)
				snprintf(cpus, sizeof(cpus), "%d-%d", 16 * want->numa[i],
					 16 * want->numa[i] + 15);
			else
				cpus[0] = '\0';
			assert_string_equal(g->gpu[i].cpus, cpus);
			for (unsigned j = 0; j < g->n; j++)
				nvlinked += placement_link_is_nvlink(g->link[i][j]);
		}
		strbuf_init(&text);
		strbuf_init(&uuids);
		node_topo_render(g, &text);
		node_uuids_render(g, &uuids);
		assert_false(strbuf_failed(&text));
		if (placement_topo_parse(text.buf, text.len, back, err, sizeof(err)) < 0)
			fail_msg("%s: the rendered matrix does not parse: %s\n%s", e->d_name, err,
				 text.buf);
		assert_same_links(e->d_name, want, back->n,
				  (const uint8_t (*)[PLACEMENT_TOPO_MAX])back->link);
		assert_memory_equal(back->numa, want->numa, want->n);
		assert_non_null(strstr(uuids.buf, "GPU-fake-0000-0000"));
		if (g->n > 1)
			assert_non_null(strstr(uuids.buf, ",GPU-fake-0000-0001"));
		strbuf_fini(&text);
		strbuf_fini(&uuids);
		free(want);
		free(back);
		free(g);
		seen++;
	}
	closedir(d);
	/* Every capture was tried, and NVLinks were among them (direct and
	 * through switches: dgx1-v100, dgx-a100, dgx-h100). */
	assert_true(seen >= 13);
	assert_true(nvlinked > 0);
}

/* NVSwitch boards: every pair at the GPU's switch-link count; DGX-1: the
 * hybrid cube mesh's own NV1/NV2 per pair. */
static void test_switch_and_direct_links(void **state)
{
	struct node_gpus *g = calloc(1, sizeof(*g));
	char err[NODE_ERR_BUF];

	(void)state;
	assert_non_null(g);
	setenv("FAKE_NVML_TOPO", TOPO_DIR "/dgx-a100.txt", 1);
	assert_int_equal(node_nvml_read(FAKE_NVML, g, err, sizeof(err)), 0);
	assert_int_equal(g->n, 8);
	assert_int_equal(g->link[0][7], PLACEMENT_LINK_NV0 + 12);
	assert_int_equal(g->link[3][4], PLACEMENT_LINK_NV0 + 12);
	assert_int_equal(g->gpu[0].numa, 3);
	assert_string_equal(g->gpu[0].bus_id, "00000000:10:00.0");
	setenv("FAKE_NVML_TOPO", TOPO_DIR "/dgx1-v100.txt", 1);
	assert_int_equal(node_nvml_read(FAKE_NVML, g, err, sizeof(err)), 0);
	assert_int_equal(g->n, 8);
	assert_true(placement_link_is_nvlink(g->link[0][1]));
	assert_false(placement_link_is_nvlink(g->link[0][5]));
	free(g);
}

static void test_failures_say_what_failed(void **state)
{
	struct node_gpus *g = calloc(1, sizeof(*g));
	char err[NODE_ERR_BUF];

	(void)state;
	assert_non_null(g);
	assert_int_equal(node_nvml_read("/nonexistent/libnvidia-ml.so.1", g, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "cannot load the NVML library /nonexistent/libnvidia-ml.so.1"));
	/* A library that is no NVML: a required call is missing, named. */
	assert_int_equal(node_nvml_read("libc.so.6", g, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "has no nvmlInit_v2"));
	unsetenv("FAKE_NVML_TOPO");
	assert_int_equal(node_nvml_read(FAKE_NVML, g, err, sizeof(err)), -EIO);
	assert_string_equal(err, "NVML nvmlInit_v2 failed: Driver Not Loaded (9)");
	setenv("FAKE_NVML_TOPO", TOPO_DIR "/pcie-2s.txt", 1);
	setenv("FAKE_NVML_FAIL", "nvmlDeviceGetUUID", 1);
	assert_int_equal(node_nvml_read(FAKE_NVML, g, err, sizeof(err)), -EIO);
	assert_string_equal(err, "NVML nvmlDeviceGetUUID(GPU 0) failed: Unknown Error (999)");
	assert_int_equal(g->n, 0);      /* nothing half-read is left */
	setenv("FAKE_NVML_FAIL", "nvmlDeviceGetTopologyCommonAncestor", 1);
	assert_int_equal(node_nvml_read(FAKE_NVML, g, err, sizeof(err)), -EIO);
	assert_non_null(strstr(err, "nvmlDeviceGetTopologyCommonAncestor(GPU 0)"));
	unsetenv("FAKE_NVML_FAIL");
	assert_int_equal(node_nvml_read(FAKE_NVML, g, err, sizeof(err)), 0);
	free(g);
}

/* The fallback: nvidia-smi's own output, parsed; a command that fails or
 * prints what troupe cannot read is an error saying so. */
static void test_nvidia_smi_fallback(void **state)
{
	struct node_gpus *g = calloc(1, sizeof(*g));
	struct placement_topo *want = calloc(1, sizeof(*want));
	char err[NODE_ERR_BUF], script[] = "/tmp/troupe-node-smi.XXXXXX";
	FILE *f;
	int fd;

	(void)state;
	assert_non_null(g);
	assert_non_null(want);
	fd = mkstemp(script);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\n[ \"$1 $2\" = \"topo -m\" ] || exit 3\nexec cat %s\n",
		TOPO_DIR "/dgx-h100.txt");
	fclose(f);
	assert_int_equal(chmod(script, 0700), 0);
	assert_int_equal(node_smi_read(script, g, err, sizeof(err)), 0);
	assert_string_equal(g->source, "nvidia-smi");
	parse_capture(TOPO_DIR "/dgx-h100.txt", want);
	assert_same_links("nvidia-smi", want, g->n, (const uint8_t (*)[PLACEMENT_TOPO_MAX])g->link);
	assert_string_equal(g->gpu[0].uuid, "");
	assert_int_equal(node_smi_read("/nonexistent/nvidia-smi", g, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "could not be run"));
	assert_int_equal(node_smi_read("false", g, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "failed, exit 1"));
	assert_int_equal(node_smi_parse("nonsense\n", 9, g, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "nvidia-smi topo -m printed what troupe cannot read"));
	unlink(script);
	free(want);
	free(g);
}

/* The kubelet's device ids to indices: NVML's UUIDs, or plain indices. */
static void test_device_ids_to_mask(void **state)
{
	struct node_gpus *g = calloc(1, sizeof(*g));
	char err[NODE_ERR_BUF];
	char *uuids[] = { "GPU-fake-0000-0002", "GPU-fake-0000-0007" };
	char *index[] = { "3", "GPU-fake-0000-0000" };
	char *mig[] = { "MIG-4a1b" }, *high[] = { "8" }, *twice[] = { "1", "GPU-fake-0000-0001" };
	char *junk[] = { "3x" };
	uint64_t mask;

	(void)state;
	assert_non_null(g);
	setenv("FAKE_NVML_TOPO", TOPO_DIR "/dgx-a100.txt", 1);
	assert_int_equal(node_nvml_read(FAKE_NVML, g, err, sizeof(err)), 0);
	assert_int_equal(node_ids_to_mask(g, uuids, 2, &mask, err, sizeof(err)), 0);
	assert_int_equal(mask, 0x84);
	assert_int_equal(node_ids_to_mask(g, index, 2, &mask, err, sizeof(err)), 0);
	assert_int_equal(mask, 0x09);
	assert_int_equal(node_ids_to_mask(g, mig, 1, &mask, err, sizeof(err)), -ENOENT);
	assert_string_equal(err, "device id \"MIG-4a1b\" is no GPU of this node (no UUID NVML "
			    "reported, no index below 8)");
	assert_int_equal(node_ids_to_mask(g, high, 1, &mask, err, sizeof(err)), -ENOENT);
	assert_int_equal(node_ids_to_mask(g, junk, 1, &mask, err, sizeof(err)), -ENOENT);
	assert_int_equal(node_ids_to_mask(g, twice, 2, &mask, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "device 1 listed twice");
	free(g);
}

/* XIDs injected into the fake NVML: a device fault is reported (once), an
 * application's XID is not, a GPU that cannot report is said so, and a stop
 * ends the wait. */
static void test_xid_watch(void **state)
{
	char dir[] = "/tmp/troupe-node-xid.XXXXXX", path[256], seen_path[300], err[NODE_ERR_BUF];
	struct node_xid seen[8];
	volatile sig_atomic_t stop = 0;
	unsigned n;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/xids", dir);
	snprintf(seen_path, sizeof(seen_path), "%s.seen", path);
	setenv("FAKE_NVML_TOPO", TOPO_DIR "/dgx-a100.txt", 1);
	setenv("FAKE_NVML_XIDS", path, 1);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "2 13\n3 79\n");
	fclose(f);
	n = 8;
	assert_int_equal(node_nvml_watch(FAKE_NVML, 5000, &stop, seen, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_int_equal(seen[0].gpu, 3);
	assert_int_equal(seen[0].xid, 79);
	/* Nothing new: the wait runs out. */
	n = 8;
	assert_int_equal(node_nvml_watch(FAKE_NVML, 300, &stop, seen, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	f = fopen(path, "a");
	assert_non_null(f);
	fprintf(f, "5 48\n");
	fclose(f);
	n = 8;
	assert_int_equal(node_nvml_watch(FAKE_NVML, 5000, &stop, seen, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_int_equal(seen[0].gpu, 5);
	/* A stop ends the wait at once. */
	stop = 1;
	n = 8;
	assert_int_equal(node_nvml_watch(FAKE_NVML, 60000, &stop, seen, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 0);
	stop = 0;
	setenv("FAKE_NVML_FAIL", "nvmlDeviceRegisterEvents", 1);
	n = 8;
	assert_int_equal(node_nvml_watch(FAKE_NVML, 100, &stop, seen, &n, err, sizeof(err)),
			 -ENOSYS);
	assert_string_equal(err, "no GPU of this node reports XID events");
	unsetenv("FAKE_NVML_FAIL");
	unsetenv("FAKE_NVML_XIDS");
	assert_int_equal(node_nvml_watch("/nonexistent.so", 100, &stop, seen, &n, err, sizeof(err)),
			 -ENOENT);
	unlink(path);
	unlink(seen_path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_capture_round_trips),
		cmocka_unit_test(test_switch_and_direct_links),
		cmocka_unit_test(test_failures_say_what_failed),
		cmocka_unit_test(test_nvidia_smi_fallback),
		cmocka_unit_test(test_device_ids_to_mask),
		cmocka_unit_test(test_xid_watch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
