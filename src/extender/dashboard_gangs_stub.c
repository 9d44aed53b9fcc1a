#include "extender/dashboard.h"
void ext_dashboard__gangs(const struct ext_service *svc, struct strbuf *sb)
{
	(void)svc;
	strbuf_puts(sb, ",\"gangs\":[],\"gangCounts\":{},\"queues\":[],\"latency\":{}");
}
