/* A small gRPC server on a Unix socket, for troupe-node's device plugin: its
 * unary methods and one server stream (ListAndWatch), and one asynchronous
 * client call beside them (the registration with the kubelet, which calls
 * back into this server before it answers, so the two must share one loop).
 *
 * gRPC's C core (Debian's libgrpc-dev) does the HTTP/2 and the framing; the
 * messages are the caller's bytes. Everything happens on the thread that
 * calls node__rpc_poll: one completion queue, every operation's tag a struct
 * tag naming the call and what finished. A call is freed once none of its
 * batches is outstanding. Only this file and grpc_unary.c name grpc's
 * headers.
 */
#include "node/node_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

enum tag_kind { T_NEW, T_RECV, T_REPLY, T_START, T_SEND, T_CLOSE, T_CLIENT, T_SHUTDOWN };

struct call;

struct tag {
	enum tag_kind kind;
	struct call *c;
};

struct call {
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array md;
	grpc_byte_buffer *recv, *send;
	int cancelled;
	bool stream, started, sending, closed, replied;
	unsigned pending;               /* batches started, not yet completed */
	uint64_t gen;                   /* the stream's last message's generation */
	struct tag t_new, t_recv, t_reply, t_start, t_send, t_close;
	struct call *next;
};

struct node__rpc {
	grpc_server *server;
	grpc_completion_queue *cq;
	struct node__rpc_methods m;
	struct call *waiting;           /* given to grpc_server_request_call */
	struct call *calls;             /* accepted, not yet freed */
	struct tag t_shutdown;
	bool shut, shut_done;
	/* The client call. */
	grpc_channel *ch;
	grpc_channel_credentials *ch_creds;
	grpc_call *ccall;
	grpc_metadata_array c_meta, c_trailers;
	grpc_byte_buffer *c_send, *c_recv;
	grpc_status_code c_status;
	grpc_slice c_details;
	struct tag t_client;
	int c_state;                    /* 0 none, 1 pending, 2 ok, -1 failed */
	char c_err[NODE_ERR_BUF];
	char c_method[96], c_socket[NODE_PATH_BUF];
};

static void tag_init(struct tag *t, enum tag_kind k, struct call *c)
{
	t->kind = k;
	t->c = c;
}

static void call_free(struct call *c)
{
	if (c->call)
		grpc_call_unref(c->call);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->md);
	if (c->recv)
		grpc_byte_buffer_destroy(c->recv);
	if (c->send)
		grpc_byte_buffer_destroy(c->send);
	free(c);
}

/* Offer grpc a place for the next incoming call. */
static void request_new(struct node__rpc *s)
{
	struct call *c = calloc(1, sizeof(*c));

	s->waiting = NULL;
	if (!c || s->shut) {
		free(c);
		return;
	}
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->md);
	tag_init(&c->t_new, T_NEW, c);
	tag_init(&c->t_recv, T_RECV, c);
	tag_init(&c->t_reply, T_REPLY, c);
	tag_init(&c->t_start, T_START, c);
	tag_init(&c->t_send, T_SEND, c);
	tag_init(&c->t_close, T_CLOSE, c);
	if (grpc_server_request_call(s->server, &c->call, &c->details, &c->md, s->cq, s->cq,
				     &c->t_new) != GRPC_CALL_OK) {
		call_free(c);
		return;
	}
	s->waiting = c;
}

static bool batch(struct call *c, const grpc_op *ops, size_t n, struct tag *t)
{
	if (grpc_call_start_batch(c->call, ops, n, t, NULL) != GRPC_CALL_OK)
		return false;
	c->pending++;
	return true;
}

/* The bytes of a received message ("" for none). */
static int read_buffer(grpc_byte_buffer *b, uint8_t **out, size_t *len)
{
	grpc_byte_buffer_reader r;
	grpc_slice all;

	*out = NULL;
	*len = 0;
	if (!b)
		return 0;
	if (!grpc_byte_buffer_reader_init(&r, b))
		return -EPROTO;
	all = grpc_byte_buffer_reader_readall(&r);
	grpc_byte_buffer_reader_destroy(&r);
	*len = GRPC_SLICE_LENGTH(all);
	*out = malloc(*len ? *len : 1);
	if (*out)
		memcpy(*out, GRPC_SLICE_START_PTR(all), *len);
	grpc_slice_unref(all);
	return *out ? 0 : -ENOMEM;
}

static grpc_byte_buffer *make_buffer(const uint8_t *b, size_t len)
{
	grpc_slice s = grpc_slice_from_copied_buffer((const char *)b, len);
	grpc_byte_buffer *out = grpc_raw_byte_buffer_create(&s, 1);

	grpc_slice_unref(s);
	return out;
}

static bool method_is(const struct call *c, const char *name)
{
	size_t n = strlen(name);

	return GRPC_SLICE_LENGTH(c->details.method) == n &&
	       memcmp(GRPC_SLICE_START_PTR(c->details.method), name, n) == 0;
}

/* A unary call's request came: answer it in one batch. */
static void reply(struct node__rpc *s, struct call *c)
{
	char method[128], err[NODE_ERR_BUF] = "";
	uint8_t *req = NULL, *resp = NULL;
	size_t reqlen = 0, resplen = 0;
	int status;
	grpc_slice details;
	grpc_op ops[4];
	size_t n = 0;

	snprintf(method, sizeof(method), "%.*s", (int)GRPC_SLICE_LENGTH(c->details.method),
		 (const char *)GRPC_SLICE_START_PTR(c->details.method));
	if (read_buffer(c->recv, &req, &reqlen) < 0) {
		status = GRPC_STATUS_INTERNAL;
		snprintf(err, sizeof(err), "cannot read the request");
	} else {
		status = s->m.unary(s->m.ctx, method, req, reqlen, &resp, &resplen, err,
				    sizeof(err));
	}
	free(req);
	details = grpc_slice_from_copied_string(err);
	memset(ops, 0, sizeof(ops));
	ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (status == GRPC_STATUS_OK) {
		c->send = make_buffer(resp ? resp : (const uint8_t *)"", resplen);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = c->send;
	}
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = (grpc_status_code)status;
	ops[n++].data.send_status_from_server.status_details = &details;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
	if (!batch(c, ops, n, &c->t_reply))
		c->closed = true;
	c->replied = true;
	grpc_slice_unref(details);
	free(resp);
}

/* Send a stream's next message when one is due and none is on its way. */
static void pump(struct node__rpc *s, struct call *c)
{
	uint8_t *msg = NULL;
	size_t len = 0;
	grpc_op op;

	if (!c->stream || !c->started || c->sending || c->closed || s->shut)
		return;
	if (s->m.stream(s->m.ctx, &c->gen, &msg, &len) <= 0)
		return;
	if (c->send)
		grpc_byte_buffer_destroy(c->send);
	c->send = make_buffer(msg, len);
	free(msg);
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_SEND_MESSAGE;
	op.data.send_message.send_message = c->send;
	if (batch(c, &op, 1, &c->t_send))
		c->sending = true;
	else
		c->closed = true;
}

static void accepted(struct node__rpc *s, struct call *c)
{
	grpc_op op;

	c->next = s->calls;
	s->calls = c;
	c->stream = s->m.stream_method && method_is(c, s->m.stream_method);
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &c->recv;
	if (!batch(c, &op, 1, &c->t_recv))
		c->closed = true;
}

static void stream_open(struct call *c)
{
	grpc_op op;

	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_SEND_INITIAL_METADATA;
	if (!batch(c, &op, 1, &c->t_start)) {
		c->closed = true;
		return;
	}
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	op.data.recv_close_on_server.cancelled = &c->cancelled;
	if (!batch(c, &op, 1, &c->t_close))
		c->closed = true;
}

/* Let go of the client call's channel, call and buffers. */
static void client_release(struct node__rpc *s)
{
	if (s->ccall)
		grpc_call_unref(s->ccall);
	s->ccall = NULL;
	if (s->c_send)
		grpc_byte_buffer_destroy(s->c_send);
	if (s->c_recv)
		grpc_byte_buffer_destroy(s->c_recv);
	s->c_send = s->c_recv = NULL;
	grpc_slice_unref(s->c_details);
	s->c_details = grpc_empty_slice();
	grpc_metadata_array_destroy(&s->c_meta);
	grpc_metadata_array_destroy(&s->c_trailers);
	if (s->ch)
		grpc_channel_destroy(s->ch);
	s->ch = NULL;
	if (s->ch_creds)
		grpc_channel_credentials_release(s->ch_creds);
	s->ch_creds = NULL;
}

static void client_done(struct node__rpc *s, bool ok)
{
	if (!ok) {
		snprintf(s->c_err, sizeof(s->c_err), "gRPC %s on %s: the call did not complete",
			 s->c_method, s->c_socket);
		s->c_state = -1;
	} else if (s->c_status != GRPC_STATUS_OK) {
		snprintf(s->c_err, sizeof(s->c_err), "gRPC %s on %s: status %d: %.*s", s->c_method,
			 s->c_socket, (int)s->c_status, (int)GRPC_SLICE_LENGTH(s->c_details),
			 (const char *)GRPC_SLICE_START_PTR(s->c_details));
		s->c_state = -1;
	} else {
		s->c_state = 2;
	}
	client_release(s);
}

/* Free every call with nothing outstanding that is finished. */
static void collect(struct node__rpc *s)
{
	for (struct call **p = &s->calls; *p;) {
		struct call *c = *p;

		if (c->pending == 0 && (c->closed || c->replied || s->shut)) {
			*p = c->next;
			call_free(c);
		} else {
			p = &c->next;
		}
	}
}

static void handle(struct node__rpc *s, grpc_event ev)
{
	struct tag *t = ev.tag;
	struct call *c = t->c;

	switch (t->kind) {
	case T_SHUTDOWN:
		s->shut_done = true;
		return;
	case T_CLIENT:
		client_done(s, ev.success);
		return;
	case T_NEW:
		if (!ev.success) {
			s->waiting = NULL;
			call_free(c);
			return;
		}
		request_new(s);
		accepted(s, c);
		return;
	default:
		break;
	}
	c->pending--;
	switch (t->kind) {
	case T_RECV:
		if (!ev.success || s->shut) {
			c->closed = true;
		} else if (c->stream) {
			stream_open(c);
		} else {
			reply(s, c);
		}
		break;
	case T_START:
		if (ev.success)
			c->started = true;
		else
			c->closed = true;
		pump(s, c);
		break;
	case T_SEND:
		c->sending = false;
		if (!ev.success)
			c->closed = true;
		pump(s, c);
		break;
	case T_CLOSE:
	case T_REPLY:
		c->closed = true;
		break;
	default:
		break;
	}
}

struct node__rpc *node__rpc_start(const char *socket, const struct node__rpc_methods *m,
				  char *err, size_t errlen)
{
	struct node__rpc *s = calloc(1, sizeof(*s));
	grpc_server_credentials *creds;
	char addr[NODE_PATH_BUF + 8];

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	node__grpc_init();
	s->m = *m;
	s->c_details = grpc_empty_slice();
	tag_init(&s->t_shutdown, T_SHUTDOWN, NULL);
	tag_init(&s->t_client, T_CLIENT, NULL);
	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->server = grpc_server_create(NULL, NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);
	snprintf(addr, sizeof(addr), "unix:%s", socket);
	creds = grpc_insecure_server_credentials_create();
	if (!grpc_server_add_http2_port(s->server, addr, creds)) {
		grpc_server_credentials_release(creds);
		snprintf(err, errlen, "cannot listen on %s", socket);
		grpc_server_destroy(s->server);
		grpc_completion_queue_shutdown(s->cq);
		while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
			       .type != GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(s->cq);
		node__grpc_shutdown();
		free(s);
		return NULL;
	}
	grpc_server_credentials_release(creds);
	grpc_server_start(s->server);
	request_new(s);
	return s;
}

void node__rpc_poll(struct node__rpc *s, unsigned timeout_ms)
{
	gpr_timespec end = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
					gpr_time_from_millis((int64_t)timeout_ms, GPR_TIMESPAN));

	for (;;) {
		grpc_event ev = grpc_completion_queue_next(s->cq, end, NULL);

		if (ev.type != GRPC_OP_COMPLETE)
			break;
		handle(s, ev);
		/* Whatever else is ready is taken at once, then the streams. */
		end = gpr_now(GPR_CLOCK_MONOTONIC);
	}
	for (struct call *c = s->calls; c; c = c->next)
		pump(s, c);
	collect(s);
}

int node__rpc_call_start(struct node__rpc *s, const char *socket, const char *method,
			 const uint8_t *req, size_t len, unsigned timeout_ms)
{
	char target[NODE_PATH_BUF + 8];
	gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
					     gpr_time_from_millis((int64_t)timeout_ms, GPR_TIMESPAN));
	grpc_op ops[6];

	if (s->c_state == 1)
		return -EBUSY;
	snprintf(s->c_method, sizeof(s->c_method), "%s", method);
	snprintf(s->c_socket, sizeof(s->c_socket), "%s", socket);
	snprintf(target, sizeof(target), "unix:%s", socket);
	s->ch_creds = grpc_insecure_credentials_create();
	s->ch = grpc_channel_create(target, s->ch_creds, NULL);
	s->ccall = grpc_channel_create_call(s->ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
					    grpc_slice_from_static_string(method), NULL, deadline,
					    NULL);
	grpc_metadata_array_init(&s->c_meta);
	grpc_metadata_array_init(&s->c_trailers);
	s->c_send = make_buffer(req, len);
	s->c_status = GRPC_STATUS_UNKNOWN;
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = s->c_send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->c_meta;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &s->c_recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &s->c_trailers;
	ops[5].data.recv_status_on_client.status = &s->c_status;
	ops[5].data.recv_status_on_client.status_details = &s->c_details;
	s->c_state = 1;
	if (!s->ccall || grpc_call_start_batch(s->ccall, ops, 6, &s->t_client, NULL) !=
				 GRPC_CALL_OK) {
		client_release(s);
		snprintf(s->c_err, sizeof(s->c_err), "gRPC %s on %s: cannot start the call",
			 method, socket);
		s->c_state = -1;
		return -EIO;
	}
	return 0;
}

int node__rpc_call_result(struct node__rpc *s, char *err, size_t errlen)
{
	int st = s->c_state;

	if (st == 1)
		return 0;
	if (st == 0)
		return -ENOENT;
	s->c_state = 0;
	if (st < 0) {
		snprintf(err, errlen, "%s", s->c_err);
		return -EIO;
	}
	return 1;
}

void node__rpc_stop(struct node__rpc *s)
{
	if (!s)
		return;
	s->shut = true;
	grpc_server_shutdown_and_notify(s->server, s->cq, &s->t_shutdown);
	grpc_server_cancel_all_calls(s->server);
	if (s->ccall)
		grpc_call_cancel(s->ccall, NULL);
	for (;;) {
		bool busy = s->ccall || s->waiting || !s->shut_done;
		grpc_event ev;

		for (struct call *c = s->calls; c && !busy; c = c->next)
			busy = c->pending > 0;
		ev = grpc_completion_queue_next(
			s->cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
					    gpr_time_from_millis(busy ? 1000 : 50, GPR_TIMESPAN)),
			NULL);
		if (ev.type == GRPC_OP_COMPLETE) {
			handle(s, ev);
			collect(s);
			continue;
		}
		if (!busy)
			break;
	}
	collect(s);
	grpc_server_destroy(s->server);
	grpc_completion_queue_shutdown(s->cq);
	while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(s->cq);
	grpc_slice_unref(s->c_details);
	free(s);
	node__grpc_shutdown();
}
