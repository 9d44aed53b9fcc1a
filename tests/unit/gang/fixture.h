/* What the gang unit tests share: the cache options, a few clusters and pod
 * groups built in a real cache, and a fake clock for the manager
 * (gang_config.now_ns), so tests of time move it instead of sleeping.
 */
#ifndef TROUPE_TEST_GANG_FIXTURE_H
#define TROUPE_TEST_GANG_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "common/limits.h"
#include "common/log.h"
#include "gang/gang.h"

/* One GPU resource, nvidia.com/gpu (index 0). */
extern const struct cache_opts gpu_opts;

/* A clock the test moves; read by the manager's threads too. */
struct fake_clock {
	uint64_t now_ns;                /* atomic */
};
uint64_t fake_clock_now(void *ctx);
void fake_clock_set(struct fake_clock *clk, uint64_t ns);
void fake_clock_advance(struct fake_clock *clk, uint64_t ns);
/* gang_config_defaults with <clk> as the manager's clock, starting at the
 * real monotonic time (so the cache's pod ages and the manager's agree). */
void fake_config(struct gang_config *cfg, struct fake_clock *clk);

/* <n> Ready 8-GPU nodes n0, n1, ... in the cache. */
void cache_nodes(struct cache *c, int n);
/* Apply PodGroup <name> (quorum <min>) and <n> members of it asking 8 GPUs. */
void idle_group(struct cache *c, const char *name, int min, unsigned n);
/* Begin a read section and look up nodes n0 and n1 into <views>. */
void read_two_nodes(struct cache *c, struct cache_node_view *views);

#endif
