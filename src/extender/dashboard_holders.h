/* The dashboard's holders (dashboard_holders.c): who holds the GPUs of each
 * node, for dashboard.c to colour them by. Private to dashboard*.c.
 *
 * Thread: one reply's; the tables are the calling thread's alone.
 */
#ifndef TROUPE_EXTENDER_DASHBOARD_HOLDERS_H
#define TROUPE_EXTENDER_DASHBOARD_HOLDERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "common/limits.h"
#include "common/strmap.h"

/* Who holds GPUs: a pod, a gang's bound members, a gang's planned slots
 * (reservations), a starving gang's holds. */
enum owner_kind { OWN_POD, OWN_GANG, OWN_PLAN, OWN_HOLD };
/* Their names in the JSON, by enum owner_kind. */
extern const char *const ext__dash_owner_kinds[];

/* One allocation, its strings after it: a poll makes one per pod holding GPUs
 * outside a gang (thousands at 5,000 nodes). */
struct owner {
	enum owner_kind kind;
	unsigned gpus;                  /* held in all */
	int out;                        /* index in the reply's "owners"; -1: not sent */
	const char *ns_name;            /* into key: "<ns>/<name>" */
	const char *queue;
	/* Its entry in "owners", made once it is first sent (its GPUs are all
	 * counted by then), so the budget knows its exact size. */
	char *json;
	size_t json_len;
	char key[];                     /* "<kind>:<ns>/<name>", the map's key; then the queue */
};

/* "<kind>:" and "<ns>/<name>" */
enum { OWNER_KEY_BUF = 2 + K8S_KEY_BUF };

/* What one holder occupies on one node. */
struct holding {
	struct owner *owner;
	uint64_t devices;
	uint32_t unattributed;          /* GPUs of unknown devices */
	struct holding *next;
};

struct node_holdings {
	char *node;                     /* the map's key */
	struct holding *first;
};

struct holders {
	struct strmap owners;           /* key -> struct owner */
	struct strmap by_node;          /* node name -> struct node_holdings */
	bool failed;                    /* out of memory: the reply says so */
};

/* Fill <h> (zeroed) with every pod and reservation holding GPUs, by node
 * (cache_pod_foreach: O(pods), no call back into the cache, no read section
 * needed). Out of memory sets h->failed and keeps what was collected. */
void ext__dash_holders_collect(struct cache *c, struct holders *h);
void ext__dash_holders_fini(struct holders *h);

#endif
