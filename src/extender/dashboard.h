/* The dashboard on the ops listener: GET /debug/dashboard (a page, its
 * dashboard.js and dashboard.css, compiled into troupe from
 * src/extender/dashboard/ by its embed.py, a meson custom target) and GET
 * /debug/dashboard.json, the cluster as the page draws it: every node's GPUs,
 * free or held and by whom, in NVLink islands, grouped by network domain;
 * gangs waiting, planned and bound; queue shares; filter and bind latency.
 *
 * The JSON stays small at any cluster size, so that a browser polling it every
 * two seconds at 5,000 nodes costs troupe and the browser little:
 *  - up to DASH_FULL_NODES nodes every node is sent; above, only per-domain
 *    summaries, plus the nodes of one domain (?domain=) or a search (?q=,
 *    node or pod/gang name), DASH_PAGE_NODES a page (?page=);
 *  - a node costs its name and about 3 bytes per GPU (an array of small
 *    integers), so a page of 8-GPU nodes stays near 60 bytes a node;
 *  - the whole reply never exceeds DASH_JSON_MAX: past it nodes, domains and
 *    gangs are left out and "truncated" says so.
 *
 * Thread: any (an ops listener thread); the nodes are read inside one cache
 * read section, with work bounded by the cluster's nodes and pods.
 */
#ifndef TROUPE_EXTENDER_DASHBOARD_H
#define TROUPE_EXTENDER_DASHBOARD_H

#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "extender/verbs.h"

enum {
	/* At most this many nodes, every node is sent on every poll. */
	DASH_FULL_NODES = 512,
	/* Nodes one reply carries at most (a domain's or a search's page). */
	DASH_PAGE_NODES = 512,
	/* Domain summaries a reply carries at most. */
	DASH_MAX_DOMAINS = 2000,
	/* Gangs a reply lists at most: those waiting, planned or binding first. */
	DASH_MAX_GANGS = 200,
	/* Distinct GPU topologies described (their NVLink islands); nodes of
	 * further ones are drawn as one group. */
	DASH_MAX_TOPOS = 32,
	/* The whole reply, at most: 1 MiB. */
	DASH_JSON_MAX = 1 << 20,
	/* A search string or a domain path, as read from the query. */
	DASH_QUERY_BUF = 256,
	/* The reply's budget, so that it stays under DASH_JSON_MAX whatever the
	 * names in it (escaped, a byte can take six): each part stops, and
	 * "truncated" says so, where the parts after it would no longer fit in
	 * the room kept for them. Domains stop at DASH_DOMAINS_END bytes; nodes
	 * (with their holders) where topologies, gangs, queues and the end
	 * would not fit; gangs where queues and the end would not; queues
	 * where the end would not. */
	DASH_DOMAINS_END = 384 * 1024,
	DASH_TOPOS_ROOM = 20 * 1024,    /* DASH_MAX_TOPOS of about 530 bytes at most */
	DASH_GANGS_ROOM = 160 * 1024,
	DASH_QUEUES_ROOM = 64 * 1024,
	DASH_END_ROOM = 4096,           /* latency and the closing members */
};

/* What one poll asks for; any field may be NULL / 0. */
struct ext_dashboard_query {
	const char *q;          /* nodes whose name, or a holder's name, contains it */
	const char *domain;     /* nodes of this domain: its values joined with '/' */
	unsigned page;          /* of the matching nodes, 0 first */
};

/* GET /debug/dashboard.json into <r> (docs/reference.md lists its fields). */
void ext_dashboard_json(const struct ext_service *svc, const struct ext_dashboard_query *q,
			struct ext_reply *r);

/* Answer GET <path> (a route of ops_server.c's: /debug/dashboard, .js, .css
 * or .json) on <conn>, counting it from <t0> (util_now_ns at its headers).
 * Returns libmicrohttpd's answer. dashboard_serve.c. */
enum MHD_Result ext_dashboard_serve(const struct ext_service *svc, struct MHD_Connection *conn,
				    const char *path, uint64_t t0);

/* One of the page's files, compiled in (dashboard_assets.c, generated). */
struct ext_dashboard_asset {
	const char *name;               /* "index.html", "dashboard.js", "dashboard.css" */
	const char *content_type;
	const unsigned char *data;
	size_t len;
};

/* The asset called <name>, or NULL. */
const struct ext_dashboard_asset *ext_dashboard_asset(const char *name);
/* Every asset (the generated dashboard_assets.c defines them). */
extern const struct ext_dashboard_asset ext__dashboard_assets[];
extern const size_t ext__dashboard_n_assets;

/* dashboard_gangs.c: the reply's "gangs", "gangCounts", "queues" and
 * "latency" members, each after a ','; sets *<truncated> when gangs or queues
 * were left out for the budget. */
void ext_dashboard__gangs(const struct ext_service *svc, struct strbuf *sb, bool *truncated);

#endif
