/* Shared only inside src/node/: the gRPC client call (grpc_unary.c) and
 * server (grpc_server.c), the two files that name grpc's headers, used by
 * the PodResources client (podresources.c) and the device plugin (plugin.c,
 * through dp_api.h). */
#ifndef TROUPE_NODE_INTERNAL_H
#define TROUPE_NODE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "node/node.h"

enum { NODE_PATH_BUF = 256 };

/* Once per process, around every call (grpc_init / grpc_shutdown). */
void node__grpc_init(void);
void node__grpc_shutdown(void);

/* One unary call of <method> ("/v1.PodResourcesLister/List") on the gRPC
 * server at Unix socket <socket>, sending <req> (an encoded message) and
 * waiting at most <timeout_ms>. 0 with the encoded answer in <*resp> (the
 * caller frees it); -ETIMEDOUT when the server is unreachable or late,
 * -ENOSYS when it has not got the method, -EAGAIN when it answers
 * RESOURCE_EXHAUSTED (the kubelet's rate limiter), -EIO otherwise; <err> says
 * which. */
int node__grpc_unary(const char *socket, const char *method, const uint8_t *req, size_t reqlen,
		     unsigned timeout_ms, uint8_t **resp, size_t *resplen, char *err,
		     size_t errlen);

/* ---- A gRPC server on a Unix socket (grpc_server.c) ---------------------- */

/* The gRPC status codes the handlers answer (gRPC's own numbers). */
enum {
	NODE_RPC_OK = 0,
	NODE_RPC_INVALID_ARGUMENT = 3,
	NODE_RPC_RESOURCE_EXHAUSTED = 8,
	NODE_RPC_UNIMPLEMENTED = 12,
};

/* A unary method: the request's bytes in, the answer's out (malloc()ed, the
 * server frees it). NODE_RPC_OK, or a gRPC status code with <err> as
 * its details. <method> is the full path ("/v1beta1.DevicePlugin/Allocate"). */
typedef int (*node__rpc_unary)(void *ctx, const char *method, const uint8_t *req, size_t len,
			       uint8_t **resp, size_t *resplen, char *err, size_t errlen);
/* The server stream: asked once the stream opens and at every poll while no
 * message is on its way. 1 with the next message in <*msg> (malloc()ed) when
 * <*gen> is behind what it has (and <*gen> moved on), else 0. */
typedef int (*node__rpc_stream)(void *ctx, uint64_t *gen, uint8_t **msg, size_t *len);

struct node__rpc_methods {
	const char *stream_method;      /* the one method that is a server stream */
	node__rpc_stream stream;
	node__rpc_unary unary;          /* every other method, known or not */
	void *ctx;
};

struct node__rpc;

/* Listen on the Unix socket <socket> (a file there is replaced). NULL with
 * <err> when it cannot. */
struct node__rpc *node__rpc_start(const char *socket, const struct node__rpc_methods *m,
				  char *err, size_t errlen);
/* Serve what comes for up to <timeout_ms>, then give the streams their due
 * messages. Everything runs on the calling thread. */
void node__rpc_poll(struct node__rpc *s, unsigned timeout_ms);
/* Start one unary call of <method> on the server at Unix socket <socket>,
 * answered while polling (the kubelet's Register calls back into this server
 * before it answers). -EBUSY while one is on its way, -EIO when it cannot
 * start (node__rpc_call_result then says why). */
int node__rpc_call_start(struct node__rpc *s, const char *socket, const char *method,
			 const uint8_t *req, size_t len, unsigned timeout_ms);
/* That call's end: 0 still on its way, 1 answered OK, -EIO failed (<err> says
 * how), -ENOENT none started. Reading an end clears it. */
int node__rpc_call_result(struct node__rpc *s, char *err, size_t errlen);
/* Cancel every call, wait for them, close the socket and free <s>. */
void node__rpc_stop(struct node__rpc *s);

#endif
