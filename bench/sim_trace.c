/* sim_trace: which pods arrive, when, and for how long. The trace is made once
 * from the seed and replayed unchanged for every scheduler, so the schedulers
 * differ only in what they decide: Poisson arrivals of pods asking 1/2/4/8
 * GPUs (40/25/20/15 %), exponential lifetimes (mean one hour), the arrival rate
 * set so that the offered load is the given share of the cluster's GPUs, and
 * the first tenth of the arrivals set aside as warm-up.
 */
#include <errno.h>
#include <stdlib.h>

#include "sim_placement.h"

static const double size_share[SIZES] = { 0.40, 0.25, 0.20, 0.15 };

int sim_trace_make(struct trace *tr, size_t n, unsigned gpus, double load, uint64_t seed)
{
	struct rng r = { seed ^ 0x7472616365ULL };
	double mean_k = 0.0, rate, t = 0.0;

	for (unsigned s = 0; s < SIZES; s++)
		mean_k += size_share[s] * pod_size[s];
	rate = load * gpus / (mean_k * mean_life);      /* pods per minute */
	tr->pods = calloc(n, sizeof(*tr->pods));
	if (!tr->pods)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		double u = rng_unit(&r), acc = 0.0;
		unsigned s = 0;

		t += rng_exp(&r, 1.0 / rate);
		while (s + 1 < SIZES && u >= acc + size_share[s])
			acc += size_share[s++];
		tr->pods[i].arrive = t;
		tr->pods[i].size = (uint8_t)s;
		tr->pods[i].life = rng_exp(&r, mean_life);
	}
	tr->n = n;
	tr->warm = n / 10;
	tr->t_warm = tr->pods[tr->warm].arrive;
	tr->t_end = t;
	tr->n_samples = (size_t)(t / (mean_life / SAMPLES_PER_LIFE)) + 1;
	return 0;
}
