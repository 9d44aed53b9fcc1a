/* Unit tests of the bind barrier (barrier.c) over the model: a round at quorum
 * releases every parked bind in the completing call; at expiry (the real
 * expiry thread, 1 s plans) every parked bind is answered with an error and
 * its devices freed; a bind arriving after its plan expired is never a single
 * pod.
 */
#include "model.h"

/* kube-scheduler filters a member (the whole gang is planned and reserved);
 * its bind arrives only after the plan expired (a slow binding cycle). The
 * member must not be bound on its own while its gang is incomplete (design.md
 * section 6, invariant 2: "at expiry none"). */
static void test_gang_bind_after_the_plan_expired_is_not_a_single_pod(void **state)
{
	struct model *m = m_new(99, 1u << 1);   /* only g2's members exist */
	struct mpod *p = &m->pods[m->gangs[1].member[0]];      /* g2: 2 x 8 GPUs */
	struct gang_member mb = { .uid = p->uid, .ns = "ml", .name = p->name, .group = "g2",
				  .req = { .demand = { .gpu_resource = 0, .gpus = 8 } } };
	struct cache_node_view views[MN];
	bool allowed[MN];
	char reason[640];
	enum gang_verdict v;
	enum gang_bind_result gr;
	uint64_t dev = 0;
	unsigned n = 0, exist, bound;
	int node = -1;
	void *ctx;

	(void)state;
	n = m_read_views(m, views);
	v = gang_filter(m->gm, &mb, views, n, allowed, reason, sizeof(reason));
	cache_read_end(m->c);
	assert_int_equal(v, GANG_ALLOWED);
	for (unsigned i = 0; i < n && node < 0; i++)
		if (allowed[i])
			node = (int)i;
	assert_int_equal(m_reservations(m, 1, -1), 2);
	m->gangs[1].planned = true;
	m->gangs[1].plan_t = m_now();
	m_wait_plan_end(m, 1);                  /* expired: no reservation left */
	ctx = m_hold_ctx(m, m->gangs[1].member[0]);
	gr = gang_bind(m->gm, &mb, m_nodes[node], m_release, ctx, &dev, reason, sizeof(reason));
	if (gr != GANG_BIND_HELD)
		free(ctx);
	m_group_count(m, 1, &exist, &bound);
	if (gr == GANG_BIND_NOT_A_GANG) {
		m_free(m);
		fail_msg("gang_bind answered GANG_BIND_NOT_A_GANG for a member of gang ml/g2 whose "
			 "plan expired (%u of %u members bound): ext_bind then binds it as a single "
			 "pod, leaving the gang partly bound", bound, 2u);
	}
	if (gr == GANG_BIND_HELD) {
		/* Held under a new plan is fine: it must then end all-or-nothing. */
		m->pods[m->gangs[1].member[0]].held = true;
		m->gangs[1].planned = true;
		m->gangs[1].plan_t = m_now();
		m_wait_plan_end(m, 1);
	}
	m_check(m, true);
	m_free(m);
}

/* A round at quorum: every held bind released ok in the same call that
 * completed the quorum, open slots' reservations dropped. At expiry: every
 * held bind released not ok, devices and reservations freed. */
static void test_gang_quorum_and_expiry_are_all_or_nothing(void **state)
{
	struct model *m = m_new(5, 1u << 0);    /* g1's members; g3's come later */
	unsigned ok = 0, not_ok = 0;

	(void)state;
	/* g1: quorum 3 of 4 members. Hold two, then the third completes it. */
	for (int s = 0; s < 3; s++) {
		int pi = m->gangs[0].member[s];
		struct mpod *p = &m->pods[pi];
		struct gang_member mb = { .uid = p->uid, .ns = "ml", .name = p->name, .group = "g1",
					  .req = { .demand = { .gpu_resource = 0, .gpus = 4 } } };
		struct cache_node_view views[MN];
		bool allowed[MN];
		char reason[640];
		unsigned n = 0;
		int node = -1;
		uint64_t dev;

		n = m_read_views(m, views);
		assert_int_equal(gang_filter(m->gm, &mb, views, n, allowed, reason, sizeof(reason)),
				 GANG_ALLOWED);
		cache_read_end(m->c);
		if (s == 0) {
			m->gangs[0].planned = true;
			m->gangs[0].plan_t = m_now();
			m->gangs[0].round = 1;
			assert_int_equal(m_reservations(m, 0, -1), 3);
		}
		for (unsigned i = 0; i < n && node < 0; i++)
			if (allowed[i])
				node = (int)i;
		assert_int_equal(gang_bind(m->gm, &mb, m_nodes[node], m_release, m_hold_ctx(m, pi),
					   &dev, reason, sizeof(reason)), GANG_BIND_HELD);
		p->held = true;
		p->round = 1;
		pthread_mutex_lock(&m->lock);
		if (s < 2)
			assert_int_equal(m->n_rel, 0);
		else
			assert_int_equal(m->n_rel, 3);  /* all three, in the completing call */
		for (unsigned i = 0; i < m->n_rel; i++)
			ok += m->rel[i].ok, not_ok += !m->rel[i].ok;
		pthread_mutex_unlock(&m->lock);
		m_check(m, false);
	}
	assert_int_equal(ok, 3);
	assert_int_equal(not_ok, 0);
	assert_int_equal(m_reservations(m, 0, -1), 0);
	/* g3: quorum 4; hold one member, let the plan expire. (g1 is complete:
	 * nothing waits ahead of g3 in the fair order.) */
	for (unsigned s = 0; s < m->gangs[2].size; s++)
		m_new_pod(m, 2, (int)s, m->gangs[2].gpus);
	{
		int pi = m->gangs[2].member[0];
		struct mpod *p = &m->pods[pi];
		struct gang_member mb = { .uid = p->uid, .ns = "ml", .name = p->name, .group = "g3",
					  .req = { .demand = { .gpu_resource = 0, .gpus = 2 } } };
		struct cache_node_view views[MN];
		bool allowed[MN];
		char reason[640];
		unsigned n = 0;
		int node = -1;
		uint64_t dev;
		struct cache_pod_info info;

		n = m_read_views(m, views);
		assert_int_equal(gang_filter(m->gm, &mb, views, n, allowed, reason, sizeof(reason)),
				 GANG_ALLOWED);
		cache_read_end(m->c);
		m->gangs[2].planned = true;
		m->gangs[2].plan_t = m_now();
		m->gangs[2].round = 1;
		for (unsigned i = 0; i < n && node < 0; i++)
			if (allowed[i])
				node = (int)i;
		assert_int_equal(gang_bind(m->gm, &mb, m_nodes[node], m_release, m_hold_ctx(m, pi),
					   &dev, reason, sizeof(reason)), GANG_BIND_HELD);
		p->held = true;
		p->round = 1;
		assert_int_equal(cache_pod_get(m->c, p->uid, &info), 0);
		assert_int_equal(info.state, CACHE_POD_STATE_ASSUMED);
		m_wait_plan_end(m, 2);
		assert_false(p->held);
		assert_int_equal(m->expired_rounds, 1);
		assert_int_equal(cache_pod_get(m->c, p->uid, &info), 0);
		assert_int_equal(info.state, CACHE_POD_STATE_UNACCOUNTED);
		assert_int_equal(info.devices, 0);
	}
	m_check(m, false);
	m_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gang_quorum_and_expiry_are_all_or_nothing),
		cmocka_unit_test(test_gang_bind_after_the_plan_expired_is_not_a_single_pod),
	};

	log_set_level(LOG_ERROR);       /* the manager logs every plan and release */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
