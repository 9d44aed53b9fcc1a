/* The routed paths, replies and client names both HTTP servers share
 * (http_reply.h).
 *
 * A path is cleaned in place in a fixed buffer, without allocating: it is
 * built on every request, before the request is known to be one troupe
 * serves.
 *
 * A reply's content type follows its body: /metrics' Prometheus text starts
 * with '#' ("# HELP ..."), everything else troupe answers is JSON. A body whose
 * strbuf ran out of memory while it was built would be cut JSON, so it is
 * replaced by a short 500 that needs no allocation to describe.
 *
 * Client names use inet_ntop, not getnameinfo: they are built on every bind
 * (for its refusal lines) and never need the resolver.
 */
#include "extender/http_reply.h"
#include "extender/budget.h"
#include "extender/internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/util.h"

void ext__http_route_path(const char *url, const char *prefix, char *out, size_t len)
{
	size_t n = 0, plen = prefix ? strlen(prefix) : 0;

	for (const char *p = url; *p && *p != '?' && n + 1 < len; p++) {
		if (*p == '/' && n > 0 && out[n - 1] == '/')
			continue;
		out[n++] = *p;
	}
	if (n > 1 && out[n - 1] == '/')
		n--;
	out[n] = '\0';
	while (plen > 1 && prefix[plen - 1] == '/')
		plen--;
	if (plen > 1 && strncmp(out, prefix, plen) == 0 && (out[plen] == '/' || !out[plen]))
		memmove(out, out + plen, n - plen + 1);
}

/* The codes troupe answers with; the first slot counts any other. */
const unsigned ext_http_codes[EXT_HTTP_CODES] = { 0, 200, 400, 401, 403, 404, 405, 413, 429, 500,
						  503, 504 };
static unsigned long long responses[EXT_HTTP_CODES];   /* relaxed atomics */

unsigned long long ext__http_responses(unsigned i)
{
	return i < EXT_HTTP_CODES ? __atomic_load_n(&responses[i], __ATOMIC_RELAXED) : 0;
}

static void count_response(unsigned status)
{
	unsigned i = 0;

	for (unsigned k = 1; k < EXT_HTTP_CODES; k++)
		if (ext_http_codes[k] == status)
			i = k;
	__atomic_add_fetch(&responses[i], 1, __ATOMIC_RELAXED);
}

enum MHD_Result ext__http_send(struct MHD_Connection *conn, unsigned status, struct strbuf *body,
			       const char *hdr, const char *val)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	size_t len = 0;
	char *buf;

	if (strbuf_failed(body)) {
		strbuf_fini(body);
		status = 500;
		strbuf_puts(body, "{\"Error\":\"troupe: out of memory building the reply\"}");
	}
	buf = strbuf_take(body, &len);
	if (!buf)
		return MHD_NO;
	resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				len && buf[0] == '#' ? "text/plain; version=0.0.4"
						     : "application/json");
	if (hdr)
		MHD_add_response_header(resp, hdr, val);
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	if (ret == MHD_YES)
		count_response(status);
	return ret;
}

enum MHD_Result ext__http_send_static(struct MHD_Connection *conn, const void *data, size_t len,
				      const char *content_type, const char *hdr, const char *val)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	/* The dashboard's files: taken as what they say they are, and the page
	 * may load only its own files and JSON (its names are escaped before
	 * they are drawn; this is the second fence), in no one else's frame. */
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, "Content-Security-Policy",
				"default-src 'self'; style-src 'self' 'unsafe-inline'; "
				"img-src 'self' data:; frame-ancestors 'none'");
	if (hdr)
		MHD_add_response_header(resp, hdr, val);
	ret = MHD_queue_response(conn, 200, resp);
	MHD_destroy_response(resp);
	if (ret == MHD_YES)
		count_response(200);
	return ret;
}

enum MHD_Result ext__http_send_error(struct MHD_Connection *conn, unsigned status,
				     const char *hdr, const char *val, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	char msg[EXT_REPLY_ERROR_BUF];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	strbuf_puts(&sb, "{\"Error\":");
	strbuf_put_json_str(&sb, msg, strlen(msg));
	strbuf_putc(&sb, '}');
	return ext__http_send(conn, status, &sb, hdr, val);
}

void ext__http_peer_name(struct MHD_Connection *conn, char *out, size_t len)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(out, len, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(out, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(out, len, "an unknown address");
	}
}

void ext__http_log_mhd(const char *module, struct ext_log_limit *limit, const char *fmt,
		       va_list ap)
{
	char msg[EXT_MHD_LOG_BUF], left_out[EXT_LEFT_OUT_BUF] = "";
	size_t n;

	if (limit && !ext_log_limit_pass(limit, util_now_ns(), left_out, sizeof(left_out)))
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	log_warn(module, "libmicrohttpd: %s%s", msg, left_out);
}
