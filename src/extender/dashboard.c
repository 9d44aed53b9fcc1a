/* GET /debug/dashboard.json: the cluster as the dashboard draws it
 * (dashboard.h says what it holds and its caps; docs/reference.md lists the
 * fields). The gangs, queues and latency parts are in dashboard_gangs.c.
 *
 * How a reply is built, in bounded work (nodes N, pods P):
 *  1. Outside any read section, every pod holding GPUs is copied into a table
 *     by node with its holder (dashboard_holders.c: O(P)).
 *  2. Inside one read section, every node is read (O(N)), sorted by its
 *     network domain (the gang levels' label values, coarse to fine) and name
 *     (O(N log N)); runs of one domain make the domain summaries.
 *  3. The nodes the poll asks for (all, up to DASH_FULL_NODES; else a
 *     domain's or a search's, DASH_PAGE_NODES a page) are written, each device
 *     as the index of its holder in "owners" or a negative code; holders are
 *     numbered as they are met, so only those shown are sent.
 */
#include "extender/dashboard.h"
#include "extender/dashboard_holders.h"
#include "extender/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/strmap.h"

/* A device's code in a node's array besides a holder's index. */
enum {
	DEV_FREE = -1,
	DEV_UNHEALTHY = -2,     /* troupe.io/gpu-unhealthy names it */
	DEV_UNKNOWN = -3,       /* occupied by a pod troupe does not know */
};

/* A node's flags. */
enum { NODE_NOT_READY = 1, NODE_CORDONED = 2, NODE_NO_GPUS = 4 };

/* Where nodes and their holders stop: room for what follows them (dashboard.h). */
#define NODES_END (DASH_JSON_MAX - DASH_TOPOS_ROOM - DASH_GANGS_ROOM - DASH_QUEUES_ROOM - \
		   DASH_END_ROOM)

/* ---- Nodes and their domains -------------------------------------------- */

struct dnode {
	struct cache_node_view v;
	const char *dom[GANG_MAX_LEVELS];       /* label values per level, "" if none */
	unsigned domain;                        /* index among the reply's domains */
};

struct collect {
	struct dnode *nodes;
	size_t n, cap;
	const struct gang_levels *levels;
	bool failed;
};

/* The node's domain at <level> as the gang planner sees it, "" for none. */
static const char *level_value(const struct cache_node *n, const struct gang_levels *lv,
			       unsigned level)
{
	const char *v = gang_domain_of(n, lv, level);

	return v ? v : "";
}

static bool collect_node(const struct cache_node_view *v, void *arg)
{
	struct collect *c = arg;
	struct dnode *d;

	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 256;
		struct dnode *nn = realloc(c->nodes, cap * sizeof(*nn));

		if (!nn) {
			c->failed = true;
			return false;
		}
		c->nodes = nn;
		c->cap = cap;
	}
	d = &c->nodes[c->n++];
	d->v = *v;
	for (unsigned l = 0; l < c->levels->n; l++)
		d->dom[l] = level_value(v->node, c->levels, l);
	return true;
}

/* qsort has no argument: the levels in use while one reply sorts. */
static __thread unsigned sort_levels;

static int dom_cmp(const struct dnode *a, const struct dnode *b)
{
	for (unsigned l = 0; l < sort_levels; l++) {
		int r = strcmp(a->dom[l], b->dom[l]);

		if (r)
			return r;
	}
	return 0;
}

static int dnode_cmp(const void *pa, const void *pb)
{
	const struct dnode *a = pa, *b = pb;
	int r = dom_cmp(a, b);

	return r ? r : strcmp(a->v.node->name, b->v.node->name);
}

/* Whether <hay> contains <needle>, ignoring case. */
static bool contains(const char *hay, const char *needle)
{
	size_t n = strlen(needle);

	for (; *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return true;
	return n == 0;
}

/* The domain path "a/b/c" of <d> (only the levels kept) into <out>. */
static void dom_path(const struct dnode *d, const bool *keep, unsigned levels, char *out,
		     size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (unsigned l = 0; l < levels; l++) {
		if (!keep[l])
			continue;
		int w = snprintf(out + n, len - n, "%s%s", n ? "/" : "", d->dom[l]);

		if (w < 0 || (size_t)w >= len - n)
			return;
		n += (size_t)w;
	}
}

static bool node_matches(const struct dnode *d, const struct ext_dashboard_query *q,
			 const struct holders *h, const bool *keep, unsigned levels)
{
	if (q->domain && q->domain[0]) {
		char path[DASH_QUERY_BUF];

		dom_path(d, keep, levels, path, sizeof(path));
		if (strcmp(path, q->domain) != 0)
			return false;
	}
	if (q->q && q->q[0] && !contains(d->v.node->name, q->q)) {
		const char *name = d->v.node->name;
		const struct node_holdings *nh = strmap_get(&h->by_node, name, strlen(name));

		for (const struct holding *hd = nh ? nh->first : NULL; hd; hd = hd->next)
			if (contains(hd->owner->ns_name, q->q))
				return true;
		return false;
	}
	return true;
}

/* The node's GPUs that a view counts as used (devices and unattributed). */
static unsigned used_gpus(const struct cache_node_view *v)
{
	return (unsigned)__builtin_popcountll(v->used & cache_node_capacity_mask(v->node)) +
	       v->unattributed;
}

/* ---- Topologies: NVLink islands ------------------------------------------ */

struct topos {
	const struct placement_topo *t[DASH_MAX_TOPOS];
	unsigned n;
};

/* The index of <t> among the reply's topologies (added when new); -1 for an
 * unknown topology or past DASH_MAX_TOPOS. */
static int topo_index(struct topos *ts, const struct placement_topo *t)
{
	if (!t || !t->known)
		return -1;
	for (unsigned i = 0; i < ts->n; i++)
		if (ts->t[i] == t)
			return (int)i;
	if (ts->n == DASH_MAX_TOPOS)
		return -1;
	ts->t[ts->n] = t;
	return (int)ts->n++;
}

/* Islands for drawing: a greedy cover by cliques of the NVLink graph, device
 * by device (each joins the first island all of whose devices it is
 * NVLinked to). Exact for the boards troupe meets (NVSwitch: one island;
 * hybrid cube-mesh: two quads; PCIe: every device alone); the placement code
 * needs the largest island's size only, not a drawing. */
static void put_islands(struct strbuf *sb, const struct placement_topo *t)
{
	uint64_t isl[PLACEMENT_TOPO_MAX];
	unsigned n_isl = 0;
	char lvl[PLACEMENT_LINK_NAME_BUF];
	uint8_t best = PLACEMENT_LINK_NONE;

	strbuf_puts(sb, "{\"src\":");
	strbuf_put_json_str(sb, t->source, strlen(t->source));
	strbuf_puts(sb, ",\"isl\":[");
	for (unsigned i = 0; i < t->n; i++) {
		unsigned k = 0;

		for (; k < n_isl; k++) {
			bool all = true;

			for (uint64_t m = isl[k]; m && all; m &= m - 1)
				all = placement_link_is_nvlink(t->link[i][__builtin_ctzll(m)]);
			if (all)
				break;
		}
		if (k == n_isl)
			isl[n_isl++] = 0;
		isl[k] |= 1ULL << i;
		strbuf_printf(sb, "%s%u", i ? "," : "", k);
		for (unsigned j = 0; j < t->n; j++)
			if (t->link[i][j] > best)
				best = t->link[i][j];
	}
	strbuf_puts(sb, "],\"best\":\"");
	strbuf_puts(sb, placement_link_name(best, lvl, sizeof(lvl)));
	strbuf_puts(sb, "\"}");
}

/* ---- Writing a node -------------------------------------------------------- */

struct shown {
	struct owner **owners;          /* in "owners" order */
	size_t n, cap;
	size_t owner_bytes;             /* their entries' json_len (and a comma), summed */
	struct topos topos;
};

/* <o>'s index in "owners", numbered as first met. */
static int owner_out(struct owner *o, struct shown *sh)
{
	if (o->out >= 0)
		return o->out;
	if (!o->json) {
		struct strbuf e = STRBUF_INIT;

		strbuf_printf(&e, "{\"k\":\"%s\",\"n\":", ext__dash_owner_kinds[o->kind]);
		strbuf_put_json_str(&e, o->ns_name, strlen(o->ns_name));
		strbuf_puts(&e, ",\"q\":");
		strbuf_put_json_str(&e, o->queue, strlen(o->queue));
		strbuf_printf(&e, ",\"g\":%u}", o->gpus);
		if (strbuf_failed(&e)) {
			strbuf_fini(&e);
			return DEV_UNKNOWN;
		}
		o->json = strbuf_take(&e, &o->json_len);
		if (!o->json)
			return DEV_UNKNOWN;
	}
	if (sh->n == sh->cap) {
		size_t nc = sh->cap ? sh->cap * 2 : 64;
		struct owner **ns = realloc(sh->owners, nc * sizeof(*ns));

		if (!ns)
			return DEV_UNKNOWN;
		sh->owners = ns;
		sh->cap = nc;
	}
	sh->owners[sh->n] = o;
	sh->owner_bytes += o->json_len + 1;
	o->out = (int)sh->n++;
	return o->out;
}

/* ["name",domain,flags,topo,[device codes]] */
static void put_node(struct strbuf *sb, const struct dnode *d, const struct holders *h,
		     struct shown *sh)
{
	const struct cache_node *n = d->v.node;
	const struct node_holdings *nh = strmap_get(&h->by_node, n->name, strlen(n->name));
	unsigned cap = n->gpu_capacity > 64 ? 64 : n->gpu_capacity;
	int code[64];
	uint64_t free_mask = cache_view_free_mask(&d->v);
	uint32_t unknown = d->v.unattributed;
	unsigned flags = (n->ready ? 0 : NODE_NOT_READY) | (n->unschedulable ? NODE_CORDONED : 0) |
			 (cap ? 0 : NODE_NO_GPUS);

	for (unsigned i = 0; i < cap; i++)
		code[i] = (n->unhealthy >> i & 1) && !(d->v.used >> i & 1) ? DEV_UNHEALTHY
									    : DEV_FREE;
	for (const struct holding *hd = nh ? nh->first : NULL; hd; hd = hd->next) {
		int o = owner_out(hd->owner, sh);

		for (uint64_t m = hd->devices & cache_node_capacity_mask(n); m; m &= m - 1)
			code[__builtin_ctzll(m)] = o;
		/* A pod whose devices troupe does not know: drawn on free ones. */
		for (uint32_t k = 0; k < hd->unattributed && free_mask && unknown; k++) {
			code[__builtin_ctzll(free_mask)] = o;
			free_mask &= free_mask - 1;
			unknown--;
		}
	}
	for (; unknown && free_mask; unknown--, free_mask &= free_mask - 1)
		code[__builtin_ctzll(free_mask)] = DEV_UNKNOWN;
	strbuf_putc(sb, '[');
	strbuf_put_json_str(sb, n->name, strlen(n->name));
	strbuf_printf(sb, ",%u,%u,%d,[", d->domain, flags,
		      topo_index(&sh->topos, placement_node_topo(n)));
	for (unsigned i = 0; i < cap; i++) {
		if (i)
			strbuf_putc(sb, ',');
		strbuf_put_i64(sb, code[i]);
	}
	strbuf_puts(sb, "]]");
}

/* ---- The reply ------------------------------------------------------------ */

static void put_owners(struct strbuf *sb, const struct shown *sh)
{
	strbuf_puts(sb, ",\"owners\":[");
	for (size_t i = 0; i < sh->n; i++) {
		if (i)
			strbuf_putc(sb, ',');
		strbuf_append(sb, sh->owners[i]->json, sh->owners[i]->json_len);
	}
	strbuf_putc(sb, ']');
}

/* Levels no node carries are left out of the reply and of domain paths. */
static unsigned kept_levels(const struct collect *c, bool *keep)
{
	unsigned kept = 0;

	for (unsigned l = 0; l < c->levels->n; l++) {
		keep[l] = false;
		for (size_t i = 0; i < c->n && !keep[l]; i++)
			keep[l] = c->nodes[i].dom[l][0] != '\0';
		kept += keep[l];
	}
	return kept;
}

/* Take back what was written after <at> (a part that did not fit). */
static void rewind_to(struct strbuf *sb, size_t at)
{
	if (sb->buf && at <= sb->len) {
		sb->len = at;
		sb->buf[at] = '\0';
	}
}

/* Domain summaries, the nodes' domain indexes set on the way. */
static void put_domains(struct strbuf *sb, struct collect *c, const bool *keep, bool *truncated)
{
	size_t i = 0;
	unsigned nd = 0;

	strbuf_puts(sb, ",\"domains\":[");
	while (i < c->n) {
		size_t j = i;
		unsigned gpus = 0, used = 0, free_gpus = 0, off = 0;

		for (; j < c->n && dom_cmp(&c->nodes[i], &c->nodes[j]) == 0; j++) {
			const struct cache_node_view *v = &c->nodes[j].v;

			c->nodes[j].domain = nd;
			gpus += v->node->gpu_capacity;
			used += used_gpus(v);
			free_gpus += cache_view_free_gpus(v);
			off += !v->node->ready || v->node->unschedulable;
		}
		if (nd < DASH_MAX_DOMAINS && sb->len < DASH_DOMAINS_END) {
			size_t at = sb->len;

			strbuf_puts(sb, nd ? ",{\"p\":[" : "{\"p\":[");
			for (unsigned l = 0, k = 0; l < c->levels->n; l++) {
				if (!keep[l])
					continue;
				if (k++)
					strbuf_putc(sb, ',');
				strbuf_put_json_str(sb, c->nodes[i].dom[l], strlen(c->nodes[i].dom[l]));
			}
			strbuf_printf(sb, "],\"n\":%zu,\"g\":%u,\"u\":%u,\"f\":%u,\"x\":%u}", j - i,
				      gpus, used, free_gpus, off);
			if (sb->len > DASH_DOMAINS_END) {
				rewind_to(sb, at);
				*truncated = true;
			}
		} else {
			*truncated = true;
		}
		nd++;
		i = j;
	}
	strbuf_putc(sb, ']');
}

static void put_nodes(struct strbuf *sb, struct collect *c, const struct ext_dashboard_query *q,
		      const struct holders *h, const bool *keep, struct shown *sh,
		      bool *truncated)
{
	bool filtered = (q->q && q->q[0]) || (q->domain && q->domain[0]);
	bool summary = c->n > DASH_FULL_NODES;
	size_t matched = 0, first = (size_t)q->page * DASH_PAGE_NODES, sent = 0;
	size_t at, n_owners, owner_bytes;
	unsigned n_topos;
	bool full = false;              /* the budget is spent: count the rest only */

	strbuf_puts(sb, ",\"nodes\":[");
	for (size_t i = 0; i < c->n; i++) {
		if (summary && !filtered)
			break;
		if (!node_matches(&c->nodes[i], q, h, keep, c->levels->n))
			continue;
		if (matched++ < first || sent == DASH_PAGE_NODES || full)
			continue;
		at = sb->len;
		n_owners = sh->n;
		owner_bytes = sh->owner_bytes;
		n_topos = sh->topos.n;
		if (sent)
			strbuf_putc(sb, ',');
		put_node(sb, &c->nodes[i], h, sh);
		if (sb->len + sh->owner_bytes > NODES_END) {
			/* It and its new holders would not fit: take it back. */
			rewind_to(sb, at);
			for (size_t o = n_owners; o < sh->n; o++)
				sh->owners[o]->out = -1;
			sh->n = n_owners;
			sh->owner_bytes = owner_bytes;
			sh->topos.n = n_topos;
			*truncated = full = true;
			continue;
		}
		sent++;
	}
	strbuf_printf(sb, "],\"mode\":\"%s\",\"matched\":%zu,\"page\":%u,\"pages\":%zu",
		      summary ? "summary" : "full", matched, q->page,
		      (matched + DASH_PAGE_NODES - 1) / DASH_PAGE_NODES);
	strbuf_puts(sb, ",\"topos\":[");
	for (unsigned t = 0; t < sh->topos.n; t++) {
		if (t)
			strbuf_putc(sb, ',');
		put_islands(sb, sh->topos.t[t]);
	}
	strbuf_putc(sb, ']');
}

static void put_totals(struct strbuf *sb, const struct collect *c, size_t pods)
{
	unsigned long long gpus = 0, used = 0, free_gpus = 0, unhealthy = 0;
	size_t off = 0;

	for (size_t i = 0; i < c->n; i++) {
		const struct cache_node_view *v = &c->nodes[i].v;

		gpus += v->node->gpu_capacity;
		used += used_gpus(v);
		free_gpus += cache_view_free_gpus(v);
		unhealthy += (unsigned)__builtin_popcountll(v->node->unhealthy &
							    cache_node_capacity_mask(v->node));
		off += !v->node->ready || v->node->unschedulable;
	}
	strbuf_printf(sb, ",\"totals\":{\"nodes\":%zu,\"gpus\":%llu,\"used\":%llu,\"free\":%llu,"
		      "\"unhealthy\":%llu,\"unavailable\":%zu,\"holders\":%zu}", c->n, gpus, used,
		      free_gpus, unhealthy, off, pods);
}

void ext_dashboard_json(const struct ext_service *svc, const struct ext_dashboard_query *q,
			struct ext_reply *r)
{
	const struct gang_levels *levels = svc->cfg && svc->cfg->gang.levels.n
						   ? &svc->cfg->gang.levels
						   : &gang_default_levels;
	struct holders h = { 0 };
	struct collect c = { .levels = levels };
	struct shown sh = { 0 };
	struct strbuf *sb = &r->body;
	bool keep[GANG_MAX_LEVELS], truncated = false;

	ext__dash_holders_collect(svc->cache, &h);
	strbuf_printf(sb, "{\"v\":1,\"synced\":%s,\"source\":",
		      cache_is_synced(svc->cache) ? "true" : "false");
	strbuf_put_json_str(sb, svc->source, strlen(svc->source));
	strbuf_printf(sb, ",\"caps\":{\"fullNodes\":%d,\"pageNodes\":%d,\"maxBytes\":%d}",
		      DASH_FULL_NODES, DASH_PAGE_NODES, DASH_JSON_MAX);

	cache_read_begin(svc->cache);
	cache_node_foreach(svc->cache, collect_node, &c);
	sort_levels = levels->n;
	qsort(c.nodes, c.n, sizeof(*c.nodes), dnode_cmp);
	put_totals(sb, &c, strmap_count(&h.owners));
	kept_levels(&c, keep);
	strbuf_puts(sb, ",\"levels\":[");
	for (unsigned l = 0, k = 0; l < levels->n; l++)
		if (keep[l]) {
			if (k++)
				strbuf_putc(sb, ',');
			strbuf_put_json_str(sb, levels->keys[l][0], strlen(levels->keys[l][0]));
		}
	strbuf_putc(sb, ']');
	put_domains(sb, &c, keep, &truncated);
	put_nodes(sb, &c, q, &h, keep, &sh, &truncated);
	cache_read_end(svc->cache);

	put_owners(sb, &sh);
	ext_dashboard__gangs(svc, sb, &truncated);
	strbuf_printf(sb, ",\"truncated\":%s,\"incomplete\":%s}", truncated ? "true" : "false",
		      h.failed || c.failed ? "true" : "false");
	free(sh.owners);
	free(c.nodes);
	ext__dash_holders_fini(&h);
}

const struct ext_dashboard_asset *ext_dashboard_asset(const char *name)
{
	for (size_t i = 0; i < ext__dashboard_n_assets; i++)
		if (strcmp(ext__dashboard_assets[i].name, name) == 0)
			return &ext__dashboard_assets[i];
	return NULL;
}
