/* Whether this replica is a standby: leader election is on and another
 * replica holds the Lease (or nobody does yet). One decision for everything
 * that acts on it in src/extender: the verbs' server refuses POSTs from a
 * standby (server.c), and /readyz and /metrics' troupe_ready answer not ready
 * (observe.c), so that the Service sends it nothing. The binder's gate, in
 * src/cache, asks the Lease itself (cache_lease_is_leader), which is what
 * this decision rests on.
 */
#ifndef TROUPE_EXTENDER_STANDBY_H
#define TROUPE_EXTENDER_STANDBY_H

#include <stdbool.h>
#include <stddef.h>

#include "extender/verbs.h"

/* True when svc->lease is set and this replica does not lead now; then
 * <leader> (when not NULL; <len> bytes, CACHE_LEASE_HOLDER_BUF holds any)
 * gets the holder as last seen, "" when nobody holds it or it was not read
 * yet. False without leader election. Thread: any. */
bool ext_service_is_standby(const struct ext_service *svc, char *leader, size_t len);

#endif
