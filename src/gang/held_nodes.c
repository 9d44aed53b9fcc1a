/* The nodes whose GPUs are held for a starving gang, as filter reads them:
 * gang_hold_note runs once per candidate node of every filter while holds
 * exist, so it must not take the manager's lock. The manager publishes an
 * immutable snapshot instead: every target node (sorted by name) with the
 * gang it is held for, rebuilt from the table whenever a target, or a holding
 * gang's priority or queue, changes. Changes are rare (the fairness pass, once
 * a second, and a plan replacing a gang's holds), so the writer may wait.
 *
 * Reclamation: readers announce themselves in one of two counters, chosen by
 * the parity of a phase number, before loading the snapshot pointer, and leave
 * after their last read of it. A writer swaps the pointer, then flips the phase
 * twice, each time waiting for the counter of the parity just left to drain;
 * then no reader can still hold the old snapshot and it is freed. (Two flips,
 * because a reader may have read the phase long before it counted itself: the
 * two waits cover both counters after the swap, and a reader that counts
 * itself after the swap loads the new pointer.) New readers go to the new
 * parity, so each wait ends once the readers already inside leave: a reader is
 * a binary search and one snprintf. The writer waits with the manager's lock
 * held, which no reader takes.
 */
#include "gang/internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

/* The gang a node is held for, as the note names it. */
struct held_gang {
	char key[K8S_KEY_BUF];
	char queue[K8S_NAME_BUF];
	int32_t priority;
	uint64_t waiting_since_ns;
};

struct held_node {
	const char *node;               /* into the snapshot's names */
	unsigned gang;                  /* into gangs, in table order */
};

struct held_nodes {
	unsigned n_nodes, n_gangs;
	struct held_gang *gangs;
	struct held_node *nodes;        /* by name, then gang */
	char (*names)[K8S_NAME_BUF];
};

static int by_node_then_gang(const void *a, const void *b)
{
	const struct held_node *x = a, *y = b;
	int c = strcmp(x->node, y->node);

	if (c)
		return c;
	return x->gang < y->gang ? -1 : x->gang > y->gang;
}

/* The set as the table has it now, or NULL when no gang holds. Lock held. */
static struct held_nodes *held_nodes_build(struct gang_manager *m, bool *oom)
{
	unsigned n_nodes = 0, n_gangs = 0, ni = 0, gi = 0;
	struct held_nodes *s;
	size_t pos = 0;
	void *v;

	*oom = false;
	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		const struct gang *g = v;

		if (g->n_targets) {
			n_gangs++;
			n_nodes += g->n_targets;
		}
	}
	if (!n_nodes)
		return NULL;
	s = calloc(1, sizeof(*s) + n_gangs * sizeof(*s->gangs) + n_nodes * sizeof(*s->nodes) +
			      n_nodes * sizeof(*s->names));
	if (!s) {
		*oom = true;
		return NULL;
	}
	s->gangs = (struct held_gang *)(s + 1);
	s->nodes = (struct held_node *)(s->gangs + n_gangs);
	s->names = (char (*)[K8S_NAME_BUF])(s->nodes + n_nodes);
	pos = 0;
	while (strmap_next(&m->gangs, &pos, NULL, &v)) {
		const struct gang *g = v;
		struct held_gang *hg = &s->gangs[gi];

		if (!g->n_targets)
			continue;
		snprintf(hg->key, sizeof(hg->key), "%s", g->key);
		snprintf(hg->queue, sizeof(hg->queue), "%s", g->queue);
		hg->priority = g->priority;
		hg->waiting_since_ns = g->waiting_since_ns;
		for (unsigned t = 0; t < g->n_targets; t++, ni++) {
			snprintf(s->names[ni], sizeof(s->names[ni]), "%s", g->targets[t]);
			s->nodes[ni] = (struct held_node){ s->names[ni], gi };
		}
		gi++;
	}
	s->n_nodes = n_nodes;
	s->n_gangs = n_gangs;
	qsort(s->nodes, n_nodes, sizeof(*s->nodes), by_node_then_gang);
	return s;
}

static bool held_nodes_equal(const struct held_nodes *a, const struct held_nodes *b)
{
	if (!a || !b)
		return a == b;
	if (a->n_nodes != b->n_nodes || a->n_gangs != b->n_gangs ||
	    memcmp(a->gangs, b->gangs, a->n_gangs * sizeof(*a->gangs)) != 0)
		return false;
	for (unsigned i = 0; i < a->n_nodes; i++)
		if (a->nodes[i].gang != b->nodes[i].gang ||
		    strcmp(a->nodes[i].node, b->nodes[i].node) != 0)
			return false;
	return true;
}

/* Wait until no reader can hold a snapshot replaced before this call. */
static void held_nodes_synchronize(struct held_nodes_cell *c)
{
	for (int flip = 0; flip < 2; flip++) {
		/* Pairs with the reader's load of the phase: readers from here on
		 * count themselves in the other counter. */
		unsigned long p = __atomic_fetch_add(&c->phase, 1, __ATOMIC_SEQ_CST);

		/* Pairs with the reader's decrement (its reads of the snapshot come
		 * before it): zero means every reader of parity p has left. */
		while (__atomic_load_n(&c->readers[p & 1], __ATOMIC_SEQ_CST))
			sched_yield();
	}
}

void gang__held_nodes_publish(struct gang_manager *m)
{
	struct held_nodes_cell *c = &m->held_nodes;
	struct held_nodes *s, *old;
	bool oom;

	s = held_nodes_build(m, &oom);
	if (oom)
		return;         /* stays dirty: the next unlock tries again */
	m->holds_dirty = false;
	old = __atomic_load_n(&c->cur, __ATOMIC_RELAXED);     /* only writers store it */
	if (held_nodes_equal(old, s)) {
		free(s);
		return;
	}
	/* Pairs with the reader's load of cur after it counted itself: a reader
	 * counted before this swap is waited for below. */
	(void)__atomic_exchange_n(&c->cur, s, __ATOMIC_SEQ_CST);
	held_nodes_synchronize(c);
	free(old);
}

void gang__held_nodes_fini(struct gang_manager *m)
{
	free(m->held_nodes.cur);
	m->held_nodes.cur = NULL;
}

/* The first gang (in table order) holding <node> that goes before <priority>. */
static const struct held_gang *held_for(const struct held_nodes *s, const char *node,
					int32_t priority)
{
	unsigned lo = 0, hi = s->n_nodes;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (strcmp(s->nodes[mid].node, node) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < s->n_nodes && strcmp(s->nodes[lo].node, node) == 0; lo++)
		if (s->gangs[s->nodes[lo].gang].priority >= priority)
			return &s->gangs[s->nodes[lo].gang];
	return NULL;
}

bool gang_hold_note(struct gang_manager *m, const char *node, int32_t priority, char *buf,
		    size_t len)
{
	struct held_nodes_cell *c = &m->held_nodes;
	const struct held_gang *hg;
	const struct held_nodes *s;
	unsigned long p;
	bool found = false;

	/* The common case, nothing held: one load, no counting. A set published
	 * just now is seen by the next call, as a lock taken a moment earlier
	 * would have missed it too. */
	if (!__atomic_load_n(&c->cur, __ATOMIC_RELAXED))
		return false;
	/* Pairs with the writer's phase flip. */
	p = __atomic_load_n(&c->phase, __ATOMIC_SEQ_CST);
	/* Pairs with the writer's wait on this counter: counted before loading
	 * cur, so a writer that swaps after this waits for us. */
	__atomic_fetch_add(&c->readers[p & 1], 1, __ATOMIC_SEQ_CST);
	/* Pairs with the writer's exchange. */
	s = __atomic_load_n(&c->cur, __ATOMIC_SEQ_CST);
	if (s && (hg = held_for(s, node, priority))) {
		snprintf(buf, len, "troupe: GPUs on this node are held for gang %s (priority %d, "
			 "queue %s, waiting %llus); it goes first", hg->key, hg->priority, hg->queue,
			 (unsigned long long)(util_elapsed_ns(gang__now(m), hg->waiting_since_ns) / 1000000000ULL));
		found = true;
	}
	/* Pairs with the writer's wait: our reads of <s> come before it. */
	__atomic_fetch_sub(&c->readers[p & 1], 1, __ATOMIC_SEQ_CST);
	return found;
}
