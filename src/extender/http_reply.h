/* What the two libmicrohttpd servers (server.c for the verbs, ops_server.c for
 * the ops paths) both do with a connection: turn its URL into the path they
 * route on, queue a reply built in a strbuf, or an {"Error": ...} one, and
 * name the client for log lines; and pass on libmicrohttpd's own messages. In
 * one place so that the two listeners route, answer and log alike (the
 * out-of-memory 500, the content types) and a fix to one reaches both.
 *
 * Shared only inside src/extender/ (hence ext__). Thread: any; each call
 * touches only the connection it is given.
 */
#ifndef TROUPE_EXTENDER_HTTP_REPLY_H
#define TROUPE_EXTENDER_HTTP_REPLY_H

#include <stdarg.h>
#include <stddef.h>

#include <microhttpd.h>

#include "common/strbuf.h"

enum {
	/* "[2001:db8::1]:65535" and the like: a client's name in log lines. */
	EXT_PEER_NAME_BUF = 64,
	/* One libmicrohttpd message as logged; longer ones are cut. */
	EXT_MHD_LOG_BUF = 512,
	/* " (N more like it left out since the last line)" (ext_log_limit_pass). */
	EXT_LEFT_OUT_BUF = 96,
};

struct ext_log_limit;

/* The path <url> is routed on, into <out>: the query dropped, "//" collapsed
 * (a urlPrefix ending in "/" makes kube-scheduler send "//filter"), a trailing
 * "/" dropped, and then <prefix> stripped when it is set, not "/", and the
 * path starts with it as a whole segment. A path longer than <len> is cut
 * (and so matches no route). */
void ext__http_route_path(const char *url, const char *prefix, char *out, size_t len);
/* Queue <body> (taken: <body> is empty afterwards) with <status>, JSON, or
 * Prometheus text when it starts with '#', and the header <hdr>: <val> when
 * <hdr> is set. A body whose building ran out of memory is answered 500
 * instead. Returns libmicrohttpd's answer (MHD_NO: close the connection). */
enum MHD_Result ext__http_send(struct MHD_Connection *conn, unsigned status, struct strbuf *body,
			       const char *hdr, const char *val);
/* Queue <len> bytes of <data> (static storage: not copied) with 200, the
 * Content-Type <content_type> and the header <hdr>: <val> when <hdr> is set:
 * the dashboard's page and its files. Counted as ext__http_send counts. */
enum MHD_Result ext__http_send_static(struct MHD_Connection *conn, const void *data, size_t len,
				      const char *content_type, const char *hdr, const char *val);
/* Queue {"Error":"<fmt ...>"} (cut at EXT_REPLY_ERROR_BUF) with <status> and
 * the header <hdr>: <val> when <hdr> is set. */
enum MHD_Result ext__http_send_error(struct MHD_Connection *conn, unsigned status,
				     const char *hdr, const char *val, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Answers queued by both listeners, by status code (ext__http_send counts
 * each, for /metrics' troupe_http_responses_total). Codes outside the list
 * count under 0, shown as "other". */
enum { EXT_HTTP_CODES = 12 };
extern const unsigned ext_http_codes[EXT_HTTP_CODES];
/* The count of answers with ext_http_codes[i]. Thread: any. */
unsigned long long ext__http_responses(unsigned i);

/* The client's address as "10.0.0.7:51234" or "[2001:db8::1]:51234" into
 * <out> (EXT_PEER_NAME_BUF is enough), "an unknown address" when it is not
 * known. */
void ext__http_peer_name(struct MHD_Connection *conn, char *out, size_t len);
/* Log libmicrohttpd's message <fmt>, <ap> (its MHD_OPTION_EXTERNAL_LOGGER
 * arguments) as a warning of <module>: "libmicrohttpd: <message>", its line
 * ends trimmed. With <limit> set, only as many a second as it lets through
 * (the line after a gap says how many were left out): a client can make
 * libmicrohttpd log at will. */
void ext__http_log_mhd(const char *module, struct ext_log_limit *limit, const char *fmt,
		       va_list ap);

#endif
