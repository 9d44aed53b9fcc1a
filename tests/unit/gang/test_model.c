/* Unit tests of the model of the gang manager over a real cache: random
 * interleavings of what kube-scheduler, the watch and other pods do keep the
 * invariants model.h lists. The plans expire on the real expiry thread.
 */
#include "model.h"

static void test_gang_model_random_interleavings_keep_the_invariants(void **state)
{
	static const unsigned seeds[] = { 1, 7, 42, 1234 };
	unsigned plans = 0, holds = 0, quorum = 0, expired = 0, refused = 0, singles = 0,
		 deletes_held = 0, stale = 0, failures = 0, moved = 0, extra = 0, confirms = 0,
		 external = 0;
	double t0 = m_now();

	(void)state;
	for (size_t s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
		struct model *m = m_new(seeds[s], 7);

		for (m->step = 0; m->step < 700; m->step++) {
			m_step(m, m_rand(m, 100));
			m_check(m, false);
		}
		/* At rest: every plan ends (quorum or expiry), usage equals holdings. */
		for (int gi = 0; gi < MGANGS; gi++)
			if (m->gangs[gi].planned)
				m_wait_plan_end(m, gi);
		m_check(m, true);
		for (unsigned q = 0; q < m->n_pods; q++)
			if (m->pods[q].held)
				MFAIL(m, "pod %s still held at rest", m->pods[q].name);
		plans += m->plans;
		holds += m->holds;
		quorum += m->quorum_rounds;
		expired += m->expired_rounds;
		refused += m->refused;
		singles += m->singles;
		deletes_held += m->deletes_held;
		stale += m->stale_events;
		failures += m->bind_failures;
		moved += m->moved_or_refused_binds;
		extra += m->extra_singles;
		confirms += m->confirms;
		external += m->external_binds;
		m_free(m);
	}
	print_message("model: %u plans, %u held binds, %u rounds released at quorum, %u expired "
		      "with held binds, %u refusals, %u single pods, %u held members deleted, %u "
		      "stale events, %u failed bindings, %u binds off the plan, %u extra members "
		      "as single pods, %u confirmations, %u bound by someone else; %.1f s\n", plans,
		      holds, quorum, expired, refused, singles, deletes_held, stale, failures, moved,
		      extra, confirms, external, m_now() - t0);
	/* The run must have exercised what it checks. */
	assert_true(plans > 20);
	assert_true(quorum > 5);
	assert_true(expired > 0);
	assert_true(refused > 10);
	assert_true(singles > 20);
	assert_true(stale > 5);
	assert_true(failures > 0);
}
int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_model_random_interleavings_keep_the_invariants),
	};

	log_set_level(LOG_ERROR);       /* the manager logs every plan and release */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
