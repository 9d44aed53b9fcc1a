/* Reading the GPU interconnect matrix that `nvidia-smi topo -m` prints, as a node
 * carries it in its troupe.io/gpu-topology annotation, and naming link levels.
 *
 * The text is what real machines print, pasted by people and by node agents, so
 * the parser takes every shape seen in the wild: cells separated by tabs (what
 * nvidia-smi writes) or by the spaces a terminal expands them to, with or
 * without NIC columns (NIC0.. or the older mlx5_0 names), with any of the
 * "CPU Affinity", "NUMA Affinity" and "GPU NUMA ID" columns, empty or N/A
 * affinity cells, NIC rows, the legend and the NIC legend, trailing spaces and
 * CRLF line ends. What it will not do is guess about links: the GPU matrix must
 * be square, X exactly on its diagonal, every other cell a known level, and the
 * same both ways. Anything else is an error that names the line and the cell,
 * and <out> is written only once the whole text has been accepted, so a node
 * never ends up with part of a matrix.
 *
 * Affinity cells only ever feed the NUMA node of a device, which is a hint; when
 * they cannot be read with certainty the device's NUMA node is unknown (-1)
 * rather than the text being refused.
 *
 * Thread: any; nothing here keeps state.
 */
#include "placement/topology.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum {
	TAB_STOP = 8,           /* how a terminal expands the tabs nvidia-smi prints */
	AFF_MAX = 3,            /* CPU Affinity, NUMA Affinity, GPU NUMA ID */
};

enum aff_kind { AFF_CPU, AFF_NUMA, AFF_GPU_NUMA };

/* ---- Link levels -------------------------------------------------------------- */

static const struct {
	const char *name;
	uint8_t level;
} level_names[] = {
	/* Indexed by level up to PIX, for placement_link_name(). */
	{ "X", PLACEMENT_LINK_NONE },
	{ "SYS", PLACEMENT_LINK_SYS },
	{ "NODE", PLACEMENT_LINK_NODE },
	{ "PHB", PLACEMENT_LINK_PHB },
	{ "PXB", PLACEMENT_LINK_PXB },
	{ "PIX", PLACEMENT_LINK_PIX },
	{ "SOC", PLACEMENT_LINK_SYS },  /* what drivers before 384 printed for SYS */
};

/* Levels are matched without regard to case, so that a person writing
 * "required:pix" in a pod annotation means what nvidia-smi's "PIX" means. */
int placement_link_parse(const char *s, size_t len, uint8_t *level)
{
	unsigned n = 0;
	int ret = 0;

	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strlen(level_names[i].name) == len &&
		    strncasecmp(s, level_names[i].name, len) == 0) {
			*level = level_names[i].level;
			goto out;
		}
	}
	/* NV<n>: n bonded links, 1..38, written without leading zeros. */
	ret = -EINVAL;
	if (len < 3 || len > 4 || strncasecmp(s, "NV", 2) != 0 || s[2] < '1' || s[2] > '9')
		goto out;
	for (size_t i = 2; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			goto out;
		n = n * 10 + (unsigned)(s[i] - '0');
	}
	if (n > PLACEMENT_LINK_MAX_NV - PLACEMENT_LINK_NV0)
		goto out;
	*level = (uint8_t)(PLACEMENT_LINK_NV0 + n);
	ret = 0;
out:
	return ret;
}

/* A value no level has (6..10, above NV38) is written "?<value>", which
 * placement_link_parse() refuses, so a bad level can never round-trip into a
 * good one. */
const char *placement_link_name(uint8_t level, char *buf, size_t len)
{
	if (level > PLACEMENT_LINK_NV0 && level <= PLACEMENT_LINK_MAX_NV)
		snprintf(buf, len, "NV%u", (unsigned)(level - PLACEMENT_LINK_NV0));
	else if (level <= PLACEMENT_LINK_PIX)
		snprintf(buf, len, "%s", level_names[level].name);
	else
		snprintf(buf, len, "?%u", level);
	return buf;
}

/* ---- Lines and cells ------------------------------------------------------------- */

/* A cell (a run of non-blank characters) and the screen column it starts at
 * once tabs are expanded, which is how empty affinity cells are placed. */
struct cell {
	const char *p;
	size_t len;
	size_t col;
};

/* The rest of one line being cut into cells. */
struct cursor {
	const char *p, *end;
	size_t col;
};

struct parser {
	const char *p, *end;    /* text not yet split into lines */
	unsigned lineno;        /* of the line last taken */
	char *err;
	size_t errlen;
};

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Take the next line (without its '\n'); false at the end of the text. */
static bool next_line(struct parser *ps, struct cursor *line)
{
	const char *nl;

	if (ps->p >= ps->end)
		return false;
	nl = memchr(ps->p, '\n', (size_t)(ps->end - ps->p));
	line->p = ps->p;
	line->end = nl ? nl : ps->end;
	line->col = 0;
	ps->p = nl ? nl + 1 : ps->end;
	ps->lineno++;
	return true;
}

/* Cut the next cell from <c>; false when only blanks remain. */
static bool next_cell(struct cursor *c, struct cell *out)
{
	while (c->p < c->end && is_blank(*c->p)) {
		c->col = *c->p == '\t' ? (c->col / TAB_STOP + 1) * TAB_STOP : c->col + 1;
		c->p++;
	}
	if (c->p >= c->end)
		return false;
	out->p = c->p;
	out->col = c->col;
	while (c->p < c->end && !is_blank(*c->p))
		c->p++;
	out->len = (size_t)(c->p - out->p);
	c->col += out->len;
	return true;
}

static bool cell_is(const struct cell *c, const char *s)
{
	return c->len == strlen(s) && memcmp(c->p, s, c->len) == 0;
}

/* "GPU<i>" with i written without leading zeros: its index, else -1. */
static int gpu_index(const struct cell *c)
{
	int i = 0;

	if (c->len < 4 || c->len > 6 || memcmp(c->p, "GPU", 3) != 0 ||
	    (c->p[3] == '0' && c->len > 4))
		return -1;
	for (size_t k = 3; k < c->len; k++) {
		if (c->p[k] < '0' || c->p[k] > '9')
			return -1;
		i = i * 10 + (c->p[k] - '0');
	}
	return i;
}

/* Does the line open the legend ("Legend:" or "NIC Legend:"), after which
 * nothing belongs to the matrix? */
static bool is_legend(const struct cursor *line)
{
	struct cursor c = *line;
	struct cell a, b;

	if (!next_cell(&c, &a))
		return false;
	if (cell_is(&a, "Legend:"))
		return true;
	return cell_is(&a, "NIC") && next_cell(&c, &b) && cell_is(&b, "Legend:");
}

/* A NUMA Affinity cell: one node number, else unknown (N/A, a list, junk). */
static int8_t numa_of(const struct cell *c)
{
	int v = 0;

	if (!c || c->len == 0 || c->len > 3)
		return -1;
	for (size_t k = 0; k < c->len; k++) {
		if (c->p[k] < '0' || c->p[k] > '9')
			return -1;
		v = v * 10 + (c->p[k] - '0');
	}
	return v > INT8_MAX ? -1 : (int8_t)v;
}

static void fail(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write the error message, prefixed with the line it concerns when there is one.
 * It quotes cells of the text, which goes to the log: control characters in
 * them are written as '?', so the message stays one readable line. */
static void fail(struct parser *ps, const char *fmt, ...)
{
	va_list ap;
	int used = 0;

	if (!ps->err || ps->errlen == 0)
		return;
	if (ps->lineno > 0)
		used = snprintf(ps->err, ps->errlen, "line %u: ", ps->lineno);
	if (used < 0 || (size_t)used >= ps->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(ps->err + used, ps->errlen - (size_t)used, fmt, ap);
	va_end(ap);
	for (char *p = ps->err; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/* ---- The matrix -------------------------------------------------------------------- */

/* What the header line says about the columns. */
struct header {
	unsigned gpus;                  /* GPU0..GPU<gpus-1> */
	unsigned nics;                  /* NIC or mlx5_<n> columns after them */
	unsigned naff;                  /* affinity columns after those */
	enum aff_kind aff[AFF_MAX];
	size_t aff_col[AFF_MAX];        /* where each affinity heading starts */
};

/* The parse result, kept apart from <out> until the text has been accepted. */
struct matrix {
	unsigned n;
	int8_t numa[PLACEMENT_TOPO_MAX];
	uint8_t link[PLACEMENT_TOPO_MAX][PLACEMENT_TOPO_MAX];
};

/* Read the header: GPU columns, then NIC columns, then affinity headings, which
 * are the only words that come in twos and threes. */
static int parse_header(struct parser *ps, struct cursor *line, struct header *h)
{
	struct cell c, c2, c3;
	int ret = -EINVAL, idx;

	memset(h, 0, sizeof(*h));
	while (next_cell(line, &c)) {
		struct cursor look = *line;
		enum aff_kind kind;

		idx = gpu_index(&c);
		if (idx >= 0) {
			if (h->nics > 0 || h->naff > 0 || (unsigned)idx != h->gpus) {
				fail(ps, "header column %.*s where %s", (int)c.len, c.p,
				     h->nics || h->naff ? "no more GPU columns may come" :
							  "the next GPU is expected");
				goto out;
			}
			if (h->gpus == PLACEMENT_TOPO_MAX) {
				fail(ps, "more than %d GPUs", PLACEMENT_TOPO_MAX);
				goto out;
			}
			h->gpus++;
			continue;
		}
		if (h->gpus == 1 && h->nics == 0 && cell_is(&c, "X")) {
			fail(ps, "a GPU row where the header (GPU0 GPU1 ...) should be");
			goto out;
		}
		if (cell_is(&c, "CPU") && next_cell(&look, &c2) && cell_is(&c2, "Affinity")) {
			kind = AFF_CPU;
		} else if (cell_is(&c, "NUMA") && next_cell(&look, &c2) &&
			   cell_is(&c2, "Affinity")) {
			kind = AFF_NUMA;
		} else if (cell_is(&c, "GPU") && next_cell(&look, &c2) && cell_is(&c2, "NUMA") &&
			   next_cell(&look, &c3) && cell_is(&c3, "ID")) {
			kind = AFF_GPU_NUMA;
		} else if (h->naff == 0 && (c.len < 3 || memcmp(c.p, "GPU", 3) != 0)) {
			/* NIC0.., or the device names (mlx5_0..) older drivers print. */
			h->nics++;
			continue;
		} else {
			fail(ps, "unexpected header column \"%.*s\"", (int)c.len, c.p);
			goto out;
		}
		for (unsigned i = 0; i < h->naff; i++) {
			if (h->aff[i] == kind) {
				fail(ps, "header names an affinity column twice");
				goto out;
			}
		}
		h->aff[h->naff] = kind;
		h->aff_col[h->naff++] = c.col;
		*line = look;
	}
	ret = 0;
out:
	return ret;
}

/* The NUMA node in a GPU row's affinity cells <a> (<na> of them). With one cell
 * per heading they are taken in order; with fewer, some were empty, and each
 * cell belongs to the heading it sits under once tabs are expanded. A row that
 * fits neither way says nothing certain: unknown. */
static int8_t row_numa(const struct header *h, const struct cell *a, unsigned na)
{
	int at[AFF_MAX];
	unsigned numa_col = AFF_MAX;

	for (unsigned i = 0; i < h->naff; i++)
		if (h->aff[i] == AFF_NUMA)
			numa_col = i;
	if (numa_col == AFF_MAX)
		return -1;
	if (na == h->naff)
		return numa_of(&a[numa_col]);
	for (unsigned i = 0; i < na; i++) {
		at[i] = -1;
		for (unsigned j = 0; j < h->naff; j++)
			if (a[i].col >= h->aff_col[j])
				at[i] = (int)j;
		if (at[i] < 0 || (i > 0 && at[i] <= at[i - 1]))
			return -1;
	}
	for (unsigned i = 0; i < na; i++)
		if (at[i] == (int)numa_col)
			return numa_of(&a[i]);
	return -1;
}

/* Name column <j> of the matrix for a message: "GPU3", or "NIC column 2". */
static const char *column_name(const struct header *h, unsigned j, char *buf, size_t len)
{
	if (j < h->gpus)
		snprintf(buf, len, "GPU%u", j);
	else
		snprintf(buf, len, "NIC column %u", j - h->gpus);
	return buf;
}

/* Read row GPU<i>: its label, one level per GPU column with X on the diagonal,
 * one level per NIC column, then at most one cell per affinity heading. */
static int parse_row(struct parser *ps, struct cursor *line, const struct header *h,
		     unsigned i, struct matrix *m)
{
	struct cell c = { "", 0, 0 }, aff[AFF_MAX];
	unsigned na = 0;
	uint8_t level;
	char col[32];
	int ret = -EINVAL;

	if (!next_cell(line, &c) || gpu_index(&c) != (int)i) {
		fail(ps, "expected row GPU%u, found \"%.*s\"", i, (int)c.len, c.p);
		goto out;
	}
	for (unsigned j = 0; j < h->gpus + h->nics; j++) {
		if (!next_cell(line, &c)) {
			fail(ps, "row GPU%u has %u cells, the header has %u GPU and %u NIC columns",
			     i, j, h->gpus, h->nics);
			goto out;
		}
		column_name(h, j, col, sizeof(col));
		if (placement_link_parse(c.p, c.len, &level) != 0) {
			fail(ps, "row GPU%u, %s: unknown link level \"%.*s\"", i, col, (int)c.len,
			     c.p);
			goto out;
		}
		if (j == i && level != PLACEMENT_LINK_NONE) {
			fail(ps, "row GPU%u: its own cell is \"%.*s\", not X", i, (int)c.len, c.p);
			goto out;
		}
		if (j != i && level == PLACEMENT_LINK_NONE) {
			fail(ps, "row GPU%u, %s: X off the diagonal", i, col);
			goto out;
		}
		if (j < h->gpus)
			m->link[i][j] = level;
	}
	while (next_cell(line, &c)) {
		if (na == h->naff) {
			fail(ps, "row GPU%u has more cells than the header has columns", i);
			goto out;
		}
		aff[na++] = c;
	}
	m->numa[i] = row_numa(h, aff, na);
	ret = 0;
out:
	return ret;
}

/* Skip blank lines; false at the end of the text. */
static bool next_nonblank(struct parser *ps, struct cursor *line)
{
	while (next_line(ps, line)) {
		struct cursor c = *line;
		struct cell cell;

		if (next_cell(&c, &cell))
			return true;
	}
	return false;
}

static int parse_matrix(struct parser *ps, struct matrix *m)
{
	struct cursor line;
	struct header h;
	struct cell c;
	int ret = -EINVAL;

	/* The header is the first line whose first cell is GPU0; whatever comes
	 * before it (a shell prompt, a title) is not ours. */
	for (;;) {
		struct cursor look;

		if (!next_line(ps, &line)) {
			ps->lineno = 0;
			fail(ps, "no header line starting with GPU0");
			goto out;
		}
		look = line;
		if (next_cell(&look, &c) && cell_is(&c, "GPU0"))
			break;
	}
	/* Every way out below but the last is a malformed text: ret stays -EINVAL. */
	if (parse_header(ps, &line, &h) < 0)
		goto out;
	m->n = h.gpus;
	for (unsigned i = 0; i < h.gpus; i++) {
		if (!next_nonblank(ps, &line) || is_legend(&line)) {
			fail(ps, "the text ends after %u of %u GPU rows", i, h.gpus);
			goto out;
		}
		if (parse_row(ps, &line, &h, i, m) < 0)
			goto out;
	}
	/* NIC rows follow, then the legends; a further GPU row means the header
	 * and the rows disagree about how many GPUs there are. */
	while (next_nonblank(ps, &line) && !is_legend(&line)) {
		struct cursor look = line;

		if (next_cell(&look, &c) && gpu_index(&c) >= 0) {
			fail(ps, "row %.*s, but the header has %u GPU columns", (int)c.len, c.p,
			     h.gpus);
			goto out;
		}
	}
	for (unsigned i = 0; i < m->n; i++) {
		for (unsigned j = i + 1; j < m->n; j++) {
			if (m->link[i][j] != m->link[j][i]) {
				char a[PLACEMENT_LINK_NAME_BUF], b[PLACEMENT_LINK_NAME_BUF];

				ps->lineno = 0;
				fail(ps, "GPU%u-GPU%u is %s one way and %s the other", i, j,
				     placement_link_name(m->link[i][j], a, sizeof(a)),
				     placement_link_name(m->link[j][i], b, sizeof(b)));
				goto out;
			}
		}
	}
	ret = 0;
out:
	return ret;
}

int placement_topo_parse(const char *text, size_t len, struct placement_topo *out, char *err,
			 size_t errlen)
{
	struct parser ps = { text, text ? text + len : text, 0, err, errlen };
	struct matrix m;
	int ret;

	memset(&m, 0, sizeof(m));
	/* Devices past n are unknown too, as in placement_topo_unknown(), so that
	 * equal matrices are equal structs whatever their source. */
	memset(m.numa, -1, sizeof(m.numa));
	ret = parse_matrix(&ps, &m);
	if (ret < 0)
		goto out;
	memset(out, 0, sizeof(*out));
	out->n = (uint8_t)m.n;
	out->known = true;
	snprintf(out->source, sizeof(out->source), "annotation");
	memcpy(out->numa, m.numa, sizeof(out->numa));
	memcpy(out->link, m.link, sizeof(out->link));
	if (err && errlen)
		err[0] = '\0';
out:
	return ret;
}
