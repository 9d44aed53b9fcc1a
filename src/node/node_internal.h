/* Shared only inside src/node/: the gRPC call (grpc_unary.c, the one file
 * that names grpc's headers) and the PodResources client on top of it
 * (podresources.c, the one that names protobuf-c's generated code). */
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
 * -ENOSYS when it has not got the method, -EIO otherwise; <err> says which. */
int node__grpc_unary(const char *socket, const char *method, const uint8_t *req, size_t reqlen,
		     unsigned timeout_ms, uint8_t **resp, size_t *resplen, char *err,
		     size_t errlen);

#endif
