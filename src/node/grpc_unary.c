/* One unary gRPC call over a Unix socket, for troupe-node's talks with the
 * kubelet (the PodResources API).
 *
 * gRPC's C core (Debian's libgrpc-dev) does the HTTP/2, the framing and the
 * deadline; protobuf-c encodes the messages (the caller's). Only this file
 * touches grpc's headers. A call is: a fresh channel to unix:<socket>, one
 * batch of the six client operations (send metadata, the message and the
 * half-close; receive metadata, the message and the status), plucked from a
 * completion queue of the call's own, then everything torn down, so nothing
 * is kept between the publisher's rounds and no thread of ours is involved
 * (grpc's own threads run inside the library).
 */
#include "node/node_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

void node__grpc_init(void)
{
	grpc_init();
}

void node__grpc_shutdown(void)
{
	grpc_shutdown();
}

static void drain(grpc_completion_queue *cq)
{
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
}

int node__grpc_unary(const char *socket, const char *method, const uint8_t *req, size_t reqlen,
		     unsigned timeout_ms, uint8_t **resp, size_t *resplen, char *err,
		     size_t errlen)
{
	char target[NODE_PATH_BUF + 8];
	grpc_channel_credentials *creds = NULL;
	grpc_channel *ch = NULL;
	grpc_completion_queue *cq = NULL;
	grpc_call *call = NULL;
	grpc_metadata_array meta_in, trailers;
	grpc_byte_buffer *send = NULL, *recv = NULL;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice(), msg, method_slice;
	grpc_op ops[6];
	gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
					     gpr_time_from_millis((int64_t)timeout_ms, GPR_TIMESPAN));
	grpc_event ev;
	int ret = -EIO;

	*resp = NULL;
	*resplen = 0;
	grpc_metadata_array_init(&meta_in);
	grpc_metadata_array_init(&trailers);
	snprintf(target, sizeof(target), "unix:%s", socket);
	creds = grpc_insecure_credentials_create();
	ch = creds ? grpc_channel_create(target, creds, NULL) : NULL;
	cq = grpc_completion_queue_create_for_pluck(NULL);
	if (!ch || !cq) {
		snprintf(err, errlen, "gRPC to %s: cannot create the channel", socket);
		goto out;
	}
	method_slice = grpc_slice_from_static_string(method);
	call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method_slice, NULL,
					deadline, NULL);
	if (!call) {
		snprintf(err, errlen, "gRPC %s on %s: cannot create the call", method, socket);
		goto out;
	}
	msg = grpc_slice_from_copied_buffer((const char *)req, reqlen);
	send = grpc_raw_byte_buffer_create(&msg, 1);
	grpc_slice_unref(msg);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &meta_in;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &trailers;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	if (grpc_call_start_batch(call, ops, 6, (void *)1, NULL) != GRPC_CALL_OK) {
		snprintf(err, errlen, "gRPC %s on %s: cannot start the call", method, socket);
		goto out;
	}
	ev = grpc_completion_queue_pluck(cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	if (ev.type != GRPC_OP_COMPLETE || !ev.success) {
		snprintf(err, errlen, "gRPC %s on %s: the call did not complete", method, socket);
		goto out;
	}
	if (status != GRPC_STATUS_OK) {
		snprintf(err, errlen, "gRPC %s on %s: status %d: %.*s", method, socket, (int)status,
			 (int)GRPC_SLICE_LENGTH(details), (const char *)GRPC_SLICE_START_PTR(details));
		ret = status == GRPC_STATUS_UNAVAILABLE || status == GRPC_STATUS_DEADLINE_EXCEEDED
			      ? -ETIMEDOUT
		      : status == GRPC_STATUS_UNIMPLEMENTED ? -ENOSYS
		      : status == GRPC_STATUS_RESOURCE_EXHAUSTED ? -EAGAIN : -EIO;
		goto out;
	}
	if (!recv) {
		snprintf(err, errlen, "gRPC %s on %s: no answer message", method, socket);
		goto out;
	}
	{
		grpc_byte_buffer_reader reader;
		grpc_slice all;

		if (!grpc_byte_buffer_reader_init(&reader, recv)) {
			snprintf(err, errlen, "gRPC %s on %s: unreadable answer", method, socket);
			goto out;
		}
		all = grpc_byte_buffer_reader_readall(&reader);
		grpc_byte_buffer_reader_destroy(&reader);
		*resplen = GRPC_SLICE_LENGTH(all);
		*resp = malloc(*resplen ? *resplen : 1);
		if (!*resp) {
			grpc_slice_unref(all);
			snprintf(err, errlen, "out of memory reading gRPC %s", method);
			ret = -ENOMEM;
			goto out;
		}
		memcpy(*resp, GRPC_SLICE_START_PTR(all), *resplen);
		grpc_slice_unref(all);
	}
	ret = 0;
out:
	if (send)
		grpc_byte_buffer_destroy(send);
	if (recv)
		grpc_byte_buffer_destroy(recv);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&meta_in);
	grpc_metadata_array_destroy(&trailers);
	if (call)
		grpc_call_unref(call);
	if (cq)
		drain(cq);
	if (ch)
		grpc_channel_destroy(ch);
	if (creds)
		grpc_channel_credentials_release(creds);
	return ret;
}
