/* The dashboard's two kinds of answer on the ops listener (ops_server.c routes
 * /debug/dashboard, /debug/dashboard.js, /debug/dashboard.css and
 * /debug/dashboard.json here, after ops.auth has let the JSON through): the
 * JSON built for the poll's query, never cached; or one of the page's
 * compiled-in files, queued straight from the binary's memory (no copy) with
 * its own content type, which a browser may keep for a minute.
 */
#include "extender/dashboard.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "extender/http_reply.h"

/* ?page= beyond this is refused: 100,000 pages of DASH_PAGE_NODES nodes is
 * far past any cluster. */
enum { DASH_MAX_PAGE = 100000 };

static enum MHD_Result serve_json(const struct ext_service *svc, struct MHD_Connection *conn,
				  const char *path, uint64_t t0)
{
	const char *page = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "page");
	struct ext_dashboard_query q = {
		MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "q"),
		MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "domain"),
		0,
	};
	unsigned long pg = page ? strtoul(page, NULL, 10) : 0;
	struct ext_reply reply;
	enum MHD_Result ret;

	if ((q.q && strlen(q.q) >= DASH_QUERY_BUF) ||
	    (q.domain && strlen(q.domain) >= DASH_QUERY_BUF) || pg > DASH_MAX_PAGE) {
		ext_count(svc->counters, EXT_C_OTHER, true, util_now_ns() - t0);
		return ext__http_send_error(conn, 400, NULL, NULL,
					    "troupe: q and domain take at most %d characters, page "
					    "at most %d", DASH_QUERY_BUF - 1, DASH_MAX_PAGE);
	}
	q.page = (unsigned)pg;
	ext_reply_init(&reply);
	ext_dashboard_json(svc, &q, &reply);
	ext_count(svc->counters, EXT_C_OTHER, false, util_now_ns() - t0);
	log_debug("ops", "GET %s -> %u (%zu bytes)", path, reply.status, reply.body.len);
	ret = ext__http_send(conn, reply.status, &reply.body, MHD_HTTP_HEADER_CACHE_CONTROL,
			     "no-store");
	ext_reply_fini(&reply);
	return ret;
}

enum MHD_Result ext_dashboard_serve(const struct ext_service *svc, struct MHD_Connection *conn,
				    const char *path, uint64_t t0)
{
	const struct ext_dashboard_asset *a;
	enum MHD_Result ret;

	if (strcmp(path, "/debug/dashboard.json") == 0)
		return serve_json(svc, conn, path, t0);
	/* "/debug/dashboard" is the page; "/debug/dashboard.js" its file "dashboard.js". */
	a = strcmp(path, "/debug/dashboard") == 0 ? ext_dashboard_asset("index.html")
		: strncmp(path, "/debug/", 7) == 0 ? ext_dashboard_asset(path + 7) : NULL;
	if (!a)
		return ext__http_send_error(conn, 404, NULL, NULL, "troupe: no such file %s", path);
	ret = ext__http_send_static(conn, a->data, a->len, a->content_type,
				    MHD_HTTP_HEADER_CACHE_CONTROL, "max-age=60");
	ext_count(svc->counters, EXT_C_OTHER, false, util_now_ns() - t0);
	return ret;
}
