/* Unit tests for placement/topo_parse.c: link levels and their names, and
 * reading `nvidia-smi topo -m` text: the captures in tests/data/topo/, the
 * same rewritten with other line ends and blanks, malformed text, text cut
 * anywhere, and 1 to 64 GPUs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

/* The legend every current driver prints under the matrix. */
#define NVSMI_LEGEND                                                                               \
	"Legend:\n"                                                                                \
	"\n"                                                                                       \
	"  X    = Self\n"                                                                          \
	"  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "  \
	"(e.g., QPI/UPI)\n"                                                                        \
	"  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "       \
	"Bridges within a NUMA node\n"                                                             \
	"  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"  \
	"  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "  \
	"Bridge)\n"                                                                                \
	"  PIX  = Connection traversing at most a single PCIe bridge\n"                            \
	"  NV#  = Connection traversing a bonded set of # NVLinks\n"

static void test_placement_link_parse_spellings(void **state)
{
	static const struct {
		const char *s;
		size_t len;             /* 0: strlen(s) */
		int ret;
		uint8_t level;
	} cases[] = {
		{ "X", 0, 0, L_X },
		{ "SYS", 0, 0, L_SYS },
		{ "SOC", 0, 0, L_SYS },         /* the name before driver 384 */
		{ "NODE", 0, 0, L_NODE },
		{ "PHB", 0, 0, L_PHB },
		{ "PXB", 0, 0, L_PXB },
		{ "PIX", 0, 0, L_PIX },
		{ "NV1", 0, 0, L_NV(1) },
		{ "NV12", 0, 0, L_NV(12) },
		{ "NV18", 0, 0, L_NV(18) },
		{ "NV38", 0, 0, PLACEMENT_LINK_MAX_NV },
		{ "pix", 0, 0, L_PIX },         /* as a person types it in an annotation */
		{ "nv4", 0, 0, L_NV(4) },
		{ "PIXEL", 3, 0, L_PIX },       /* only <len> bytes are read */
		{ "NV12 ", 4, 0, L_NV(12) },
		{ "", 0, -EINVAL, 0 },
		{ "NV", 0, -EINVAL, 0 },
		{ "NV0", 0, -EINVAL, 0 },
		{ "NV012", 0, -EINVAL, 0 },
		{ "NV39", 0, -EINVAL, 0 },      /* beyond PLACEMENT_LINK_MAX_NV */
		{ "NV100", 0, -EINVAL, 0 },
		{ "NV1x", 0, -EINVAL, 0 },
		{ "NV#", 0, -EINVAL, 0 },
		{ "PIXEL", 0, -EINVAL, 0 },
		{ "SYSTEM", 0, -EINVAL, 0 },
		{ "N/A", 0, -EINVAL, 0 },
		{ "GNS", 0, -EINVAL, 0 },       /* a topo -p2p cell, not a link level */
		{ "NODENODE", 0, -EINVAL, 0 },  /* two cells fused by a bad paste */
		{ " X ", 0, -EINVAL, 0 },       /* cells arrive trimmed */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t level = 0xEE;
		size_t len = cases[i].len ? cases[i].len : strlen(cases[i].s);
		int ret = placement_link_parse(cases[i].s, len, &level);

		if (ret != cases[i].ret || (ret == 0 && level != cases[i].level) ||
		    (ret != 0 && level != 0xEE))
			fail_msg("\"%.*s\": ret %d level %u; want %d level %u", (int)len,
				 cases[i].s, ret, level, cases[i].ret, cases[i].level);
	}
}

/* Every level's name parses back to it; every value that is no level gets a
 * name that does not parse, so a corrupt level never passes for a good one. */
static void test_placement_link_name_round_trips(void **state)
{
	char buf[8];
	uint8_t back;

	(void)state;
	for (unsigned v = 0; v <= 255; v++) {
		bool valid = v <= L_PIX || (v > PLACEMENT_LINK_NV0 && v <= PLACEMENT_LINK_MAX_NV);
		const char *name = placement_link_name((uint8_t)v, buf, sizeof(buf));

		assert_ptr_equal(name, buf);
		assert_true(strlen(name) > 0 && strlen(name) < sizeof(buf));
		if (valid) {
			assert_int_equal(placement_link_parse(name, strlen(name), &back), 0);
			assert_int_equal(back, v);
		} else {
			assert_int_equal(placement_link_parse(name, strlen(name), &back), -EINVAL);
		}
	}
	assert_string_equal(placement_link_name(L_SYS, buf, sizeof(buf)), "SYS");
	assert_string_equal(placement_link_name(L_X, buf, sizeof(buf)), "X");
	assert_string_equal(placement_link_name(L_NV(18), buf, sizeof(buf)), "NV18");
	assert_string_equal(placement_link_name(PLACEMENT_LINK_MAX_NV, buf, sizeof(buf)), "NV38");
	/* A short buffer is cut, never overrun. */
	assert_string_equal(placement_link_name(L_NV(18), buf, 3), "NV");
}

static void test_placement_topo_parse_real_machines(void **state)
{
	(void)state;
	for (unsigned f = 0; f < FX_COUNT; f++) {
		const struct fixture *fx = &fixtures[f];
		char err[256] = "untouched";
		int ret;

		memset(&topo_got, 0xA5, sizeof(topo_got));
		ret = placement_topo_parse(fixture_text(f), strlen(fixture_text(f)), &topo_got, err, sizeof(err));
		if (ret != 0)
			fail_msg("fixture \"%s\": %d, %s", fx->name, ret, err);
		assert_string_equal(err, "");
		assert_int_equal(topo_got.n, fx->n);
		assert_true(topo_got.known);
		assert_string_equal(topo_got.source, "annotation");
		assert_int_equal(topo_got.hash, 0);
		assert_well_formed(&topo_got);
		for (unsigned i = 0; i < fx->n; i++)
			if (topo_got.numa[i] != fx->numa[i])
				fail_msg("fixture \"%s\": GPU%u on NUMA %d, want %d", fx->name, i,
					 topo_got.numa[i], fx->numa[i]);
		for (const struct link_check *l = fx->links; l->level; l++)
			if (topo_got.link[l->i][l->j] != l->level)
				fail_msg("fixture \"%s\": GPU%u-GPU%u is %u, want %u", fx->name,
					 l->i, l->j, topo_got.link[l->i][l->j], l->level);
	}
}

/* Rewrite <in> with CRLF line ends and blanks at the ends of lines, or with
 * every tab expanded to spaces as a terminal shows it. */
static char *rewrite(const char *in, bool crlf_and_trailing, bool expand_tabs)
{
	char *out = malloc(strlen(in) * 8 + 1), *o = out;
	size_t col = 0;

	assert_non_null(out);
	for (const char *p = in; *p; p++) {
		if (*p == '\n' && crlf_and_trailing) {
			memcpy(o, " \t \r", 4);
			o += 4;
		}
		if (*p == '\t' && expand_tabs) {
			do
				*o++ = ' ';
			while (++col % 8);
			continue;
		}
		*o++ = *p;
		col = *p == '\n' ? 0 : col + 1;
	}
	*o = '\0';
	return out;
}

static void test_placement_topo_parse_ignores_line_ends_blanks_and_tabs(void **state)
{
	char err[256];

	(void)state;
	for (unsigned f = 0; f < FX_COUNT; f++) {
		const struct placement_topo *want = fixture_topo(f);

		for (int v = 0; v < 2; v++) {
			char *text = rewrite(fixture_text(f), v == 0, v == 1);
			int ret = placement_topo_parse(text, strlen(text), &topo_got, err,
						       sizeof(err));

			if (ret != 0)
				fail_msg("fixture \"%s\" %s: %s", fixtures[f].name,
					 v ? "tabs expanded" : "CRLF", err);
			assert_int_equal(topo_got.n, want->n);
			assert_memory_equal(topo_got.numa, want->numa, sizeof(want->numa));
			assert_memory_equal(topo_got.link, want->link, sizeof(want->link));
			free(text);
		}
	}
}

struct bad_text {
	const char *what;
	const char *text;
	const char *message;            /* a part of the error message */
};

#define TWO_GPU_HEADER "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"

static const struct bad_text bad_texts[] = {
	{ "empty", "", "no header" },
	{ "blank lines only", "\n  \n\t\r\n", "no header" },
	{ "garbage", "\x01\x7f garbage \xff\xfe\n", "no header" },
	{ "JSON, not nvidia-smi", "{\"gpus\": 8, \"links\": \"NV12\"}", "no header" },
	{ "no GPU columns", "\tCPU Affinity\tNUMA Affinity\nLegend:\n", "no header" },
	{ "rows without a header", "GPU0\t X \tNV1\nGPU1\tNV1\t X \n", "GPU row where" },
	{ "header only", TWO_GPU_HEADER, "0 of 2 GPU rows" },
	{ "header, then the legend", TWO_GPU_HEADER "\n" NVSMI_LEGEND, "0 of 2 GPU rows" },
	{ "asymmetric", TWO_GPU_HEADER "GPU0\t X \tNV2\t0-7\t0\t\tN/A\n"
			"GPU1\tNV1\t X \t0-7\t0\t\tN/A\n", "GPU0-GPU1 is NV2 one way and NV1" },
	{ "asymmetric far apart", "\tGPU0\tGPU1\tGPU2\n"
				  "GPU0\t X \tPIX\tSYS\nGPU1\tPIX\t X \tSYS\n"
				  "GPU2\tNODE\tSYS\t X \n", "GPU0-GPU2 is SYS one way and NODE" },
	{ "no X on the diagonal", TWO_GPU_HEADER "GPU0\tNV1\tNV1\t0-7\t0\t\tN/A\n"
				  "GPU1\tNV1\t X \t0-7\t0\t\tN/A\n", "its own cell is \"NV1\"" },
	{ "X off the diagonal", "\tGPU0\tGPU1\nGPU0\t X \t X \nGPU1\t X \t X \n",
	  "X off the diagonal" },
	{ "unknown level", "\tGPU0\tGPU1\nGPU0\t X \tNV\nGPU1\tNV\t X \n",
	  "unknown link level \"NV\"" },
	{ "control characters quoted", "\tGPU0\tGPU1\nGPU0\t X \tNV\x1b[2J\n", "\"NV?[2J\"" },
	{ "level past NV38", "\tGPU0\tGPU1\nGPU0\t X \tNV40\nGPU1\tNV40\t X \n", "\"NV40\"" },
	{ "topo -p2p matrix", " \tGPU0\tGPU1\t\n GPU0\tX\tGNS\t\n GPU1\tGNS\tX\t\n", "\"GNS\"" },
	{ "fused NIC cells", "\tGPU0\tGPU1\tNIC0\tNIC1\n"
			     "GPU0\t X \tNV18\tPXB\tNODE\nGPU1\tNV18\t X \tNODENODE\n",
	  "\"NODENODE\"" },
	{ "row one cell short", "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tPIX\tSYS\nGPU1\tPIX\t X \n"
				"GPU2\tSYS\tSYS\t X \n", "row GPU1 has 2 cells" },
	{ "row one cell short before affinity", TWO_GPU_HEADER "GPU0\t X \tNV4\t0-7\t0\t\tN/A\n"
						 "GPU1\tNV4\t0-7\t0\t\tN/A\n",
	  "unknown link level \"0-7\"" },
	{ "row one cell long", "\tGPU0\tGPU1\nGPU0\t X \tPIX\tPIX\nGPU1\tPIX\t X \n",
	  "more cells than the header" },
	{ "rows out of order", "\tGPU0\tGPU1\nGPU1\tPIX\t X \nGPU0\t X \tPIX\n",
	  "expected row GPU0, found \"GPU1\"" },
	{ "a row missing", "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tPIX\tSYS\n"
			   "GPU2\tSYS\tSYS\t X \n", "expected row GPU1" },
	{ "more rows than columns", "\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n"
				    "GPU2\tPIX\tPIX\t X \n", "row GPU2, but the header has 2" },
	{ "legend before the last row", "\tGPU0\tGPU1\nGPU0\t X \tPIX\n\n" NVSMI_LEGEND,
	  "1 of 2 GPU rows" },
	{ "duplicate header column", "\tGPU0\tGPU0\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n",
	  "header column GPU0" },
	{ "header columns out of order", "\tGPU0\tGPU2\tGPU1\n",
	  "header column GPU2 where the next GPU" },
	{ "GPU column after a NIC column", "\tGPU0\tNIC0\tGPU1\n",
	  "header column GPU1 where no more GPU columns" },
	{ "affinity heading twice", "\tGPU0\tCPU Affinity\tCPU Affinity\nGPU0\t X \t0\t0\n",
	  "affinity column twice" },
	{ "unknown column after the affinity", "\tGPU0\tCPU Affinity\tFan\nGPU0\t X \t0\t0\n",
	  "unexpected header column \"Fan\"" },
	{ "GPU with a leading zero", "\tGPU0\tGPU01\n", "unexpected header column \"GPU01\"" },
};

static void test_placement_topo_parse_rejects_malformed_text(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad_texts) / sizeof(bad_texts[0]); i++) {
		const struct bad_text *b = &bad_texts[i];
		char err[256] = "";
		int ret;

		memset(&topo_got, 0x5A, sizeof(topo_got));
		memcpy(&topo_want, &topo_got, sizeof(topo_got));
		ret = placement_topo_parse(b->text, strlen(b->text), &topo_got, err, sizeof(err));
		if (ret != -EINVAL || !strstr(err, b->message))
			fail_msg("case \"%s\": ret %d, message \"%s\"; want -EINVAL and \"%s\"",
				 b->what, ret, err, b->message);
		if (memcmp(&topo_got, &topo_want, sizeof(topo_got)) != 0)
			fail_msg("case \"%s\": <out> written on failure", b->what);
	}
	/* A NULL text, and no room for a message, are refused just the same. */
	assert_int_equal(placement_topo_parse(NULL, 0, &topo_got, NULL, 0), -EINVAL);
	assert_int_equal(placement_topo_parse("x", 1, &topo_got, NULL, 0), -EINVAL);
	assert_memory_equal(&topo_got, &topo_want, sizeof(topo_got));
}

/* A text cut anywhere (an annotation truncated, a paste that stopped short) is
 * refused or, once every GPU row is whole, gives the full matrix: never a part
 * of one, and <out> is untouched whenever it is refused. */
static void test_placement_topo_parse_cut_text_never_gives_a_partial_matrix(void **state)
{
	static const enum fx cut[] = { FX_DGX1_V100, FX_DGX_H100, FX_BRIDGED, FX_CRLF_PROMPT_SOC };
	char err[256];

	(void)state;
	for (size_t c = 0; c < sizeof(cut) / sizeof(cut[0]); c++) {
		const struct placement_topo *full = fixture_topo(cut[c]);
		const char *text = fixture_text(cut[c]);
		size_t len = strlen(text), accepted = 0;

		for (size_t l = 0; l < len; l++) {
			/* A copy of the prefix only, so nothing can be read past it. */
			char *prefix = malloc(l ? l : 1);
			int ret;

			assert_non_null(prefix);
			memcpy(prefix, text, l);
			memset(&topo_got, 0x5A, sizeof(topo_got));
			ret = placement_topo_parse(prefix, l, &topo_got, err, sizeof(err));
			free(prefix);
			if (ret == 0) {
				accepted++;
				assert_int_equal(topo_got.n, full->n);
				assert_memory_equal(topo_got.link, full->link, sizeof(full->link));
				continue;
			}
			assert_int_equal(ret, -EINVAL);
			assert_int_equal(topo_got.n, 0x5A);
			assert_int_equal(topo_got.link[0][1], 0x5A);
		}
		/* Cut before its last GPU row ends, no fixture parses. */
		assert_true(accepted > 0 && accepted < len);
	}
}

/* The text of an n-GPU node whose every pair is NV1 (tabs, no affinity). */
static char *square_text(unsigned n)
{
	size_t cap = (size_t)(n + 2) * (n + 1) * 8, used = 0;
	char *s = malloc(cap);

	assert_non_null(s);
	for (unsigned i = 0; i < n; i++)
		used += (size_t)snprintf(s + used, cap - used, "\tGPU%u", i);
	used += (size_t)snprintf(s + used, cap - used, "\n");
	for (unsigned i = 0; i < n; i++) {
		used += (size_t)snprintf(s + used, cap - used, "GPU%u", i);
		for (unsigned j = 0; j < n; j++)
			used += (size_t)snprintf(s + used, cap - used, "\t%s",
						 i == j ? " X " : "NV1");
		used += (size_t)snprintf(s + used, cap - used, "\n");
	}
	return s;
}

static void test_placement_topo_parse_takes_1_to_64_gpus(void **state)
{
	static const unsigned sizes[] = { 1, 2, 17, 63, 64, 65, 80 };
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *text = square_text(sizes[i]);
		int ret;

		memset(&topo_got, 0x5A, sizeof(topo_got));
		ret = placement_topo_parse(text, strlen(text), &topo_got, err, sizeof(err));
		free(text);
		if (sizes[i] <= PLACEMENT_TOPO_MAX) {
			if (ret != 0)
				fail_msg("%u GPUs: %s", sizes[i], err);
			assert_int_equal(topo_got.n, sizes[i]);
			assert_well_formed(&topo_got);
			assert_int_equal(topo_got.link[sizes[i] - 1][0],
					 sizes[i] > 1 ? L_NV(1) : L_X);
		} else {
			assert_int_equal(ret, -EINVAL);
			assert_non_null(strstr(err, "more than 64 GPUs"));
			assert_int_equal(topo_got.n, 0x5A);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_link_parse_spellings),
		cmocka_unit_test(test_placement_link_name_round_trips),
		cmocka_unit_test(test_placement_topo_parse_real_machines),
		cmocka_unit_test(test_placement_topo_parse_ignores_line_ends_blanks_and_tabs),
		cmocka_unit_test(test_placement_topo_parse_rejects_malformed_text),
		cmocka_unit_test(test_placement_topo_parse_cut_text_never_gives_a_partial_matrix),
		cmocka_unit_test(test_placement_topo_parse_takes_1_to_64_gpus),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
