/* The standby decision (standby.h), apart from the server and the ops
 * handlers so that both ask the same question the same way.
 */
#include "extender/standby.h"

#include "cache/lease.h"

bool ext_service_is_standby(const struct ext_service *svc, char *leader, size_t len)
{
	if (!svc->lease || cache_lease_is_leader(svc->lease))
		return false;
	if (leader && len)
		cache_lease_holder(svc->lease, leader, len);
	return true;
}
