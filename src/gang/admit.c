/* Admission at filter: the first member's filter plans the whole gang
 * (plan.c) over the nodes kube-scheduler offered and reserves every slot in the
 * cache, so the devices count as used for every other pod; every member's
 * filter then passes only the nodes with an open slot for it. A gang that does
 * not fit waits (WAITING) in the fair order (fair.c); one behind a waiting gang
 * that would fit in the offered capacity is refused, naming it.
 *
 * What a gang asks is read from the cache's members, one walk (gang__census),
 * and turned into the planner's needs by one rule (gang__needs), the same at
 * admission and when the expiry thread discovers a waiting gang (manager.c).
 */
#include "gang/internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"

/* Room the planner's refusal gets inside our reason line. */
#define PLAN_WHY_BUF 200

int gang_topology_parse(const char *s, const char **key, char *err, size_t errlen)
{
	*key = NULL;
	if (!s || !*s)
		return 0;
	if (strncmp(s, "required:", 9) == 0 && s[9] && !strchr(s + 9, ' ')) {
		*key = s + 9;
		return 0;
	}
	snprintf(err, errlen, "annotation troupe.io/gang-topology=\"%s\" is not "
		 "required:<node-label-key> (e.g. required:network.topology.nvidia.com/block)", s);
	return -EINVAL;
}

bool gang__terms(struct gang_manager *m, const struct gang_member *mb, unsigned exist,
		 unsigned *quorum, unsigned *timeout_s, uint32_t *min_gpus)
{
	struct cache_podgroup pg;
	char buf[K8S_KEY_BUF];

	*quorum = mb->pod_min_member;
	*timeout_s = m->cfg.default_timeout_s;
	if (min_gpus)
		*min_gpus = 0;
	if (cache_podgroup_get(m->cache, mb->ns, mb->group, &pg, buf, sizeof(buf)) == 0) {
		if (pg.min_member > 0)
			*quorum = (unsigned)pg.min_member;
		if (pg.timeout_s > 0)
			*timeout_s = (unsigned)pg.timeout_s;
		if (min_gpus)
			*min_gpus = pg.min_gpus;
	}
	if (*quorum > 0)
		return true;
	*quorum = exist;        /* no quorum named: the members that exist */
	return false;
}

unsigned gang_members_needed(struct gang_manager *m, const struct gang_member *mb,
			     unsigned *quorum)
{
	unsigned exist = 0, bound = 0, timeout_s;

	*quorum = 0;
	if (!mb->group)
		return 0;
	cache_group_count(m->cache, mb->ns, mb->group, &exist, &bound);
	(void)gang__terms(m, mb, exist, quorum, &timeout_s, NULL);
	return *quorum > bound ? *quorum - bound : 0;
}

const char *gang__group_queue(struct gang_manager *m, const char *ns, const char *group,
			      const char *fallback, char *buf, size_t len)
{
	struct cache_podgroup pg;

	if (group && cache_podgroup_get(m->cache, ns, group, &pg, buf, len) == 0 && pg.queue[0])
		return pg.queue;
	return fallback;
}

const char *gang__queue(struct gang_manager *m, const struct gang_member *mb, char *buf,
			size_t len)
{
	return gang__group_queue(m, mb->ns, mb->group, mb->queue ? mb->queue : mb->ns, buf, len);
}

/* ---- What a gang asks: its members' needs ------------------------------------ */

static void census_member(const struct cache_pod_info *p, const char *uid, void *arg)
{
	struct census *c = arg;
	struct member_ask *x;
	char err[PLAN_WHY_BUF];

	if (!cache_pod_is_member_now(p))
		return;
	if (!c->exist)
		snprintf(c->queue, sizeof(c->queue), "%s", p->queue);
	c->exist++;
	if (p->min_member > c->min_member)
		c->min_member = p->min_member;
	if (p->priority > c->priority)
		c->priority = p->priority;
	if (p->node[0]) {
		c->bound++;     /* as cache_group_count counts it */
		return;
	}
	if (c->mb && strcmp(uid, c->mb->uid) == 0)
		return;
	if (p->demand_valid && p->demand.gpus == 0) {
		c->cpu_only++;
		return;
	}
	if (c->n == c->cap) {
		unsigned cap = c->cap ? c->cap * 2 : 16;
		struct member_ask *l = realloc(c->list, cap * sizeof(*l));

		if (!l) {
			c->oom = true;
			return;
		}
		c->list = l;
		c->cap = cap;
	}
	x = &c->list[c->n++];
	snprintf(x->uid, sizeof(x->uid), "%s", uid);
	snprintf(x->pinned, sizeof(x->pinned), "%s", p->pinned);
	c->pinned += p->pinned[0] != '\0';
	/* A member whose request troupe cannot read is assumed to ask what the
	 * asking member asks (nothing, when none asks); so is its policy when its
	 * annotation is bad. */
	memset(&x->req, 0, sizeof(x->req));
	if (c->mb)
		x->req = c->mb->req;
	if (p->demand_valid) {
		x->req.demand = p->demand;
		if (placement_policy_parse(p->topology[0] ? p->topology : NULL, &x->req.policy, err,
					   sizeof(err)) < 0)
			x->req.policy = c->mb ? c->mb->req.policy : (struct placement_policy){ 0 };
	}
}

static int by_gpus_desc(const void *a, const void *b)
{
	const struct member_ask *x = a, *y = b;

	if (x->req.demand.gpus != y->req.demand.gpus)
		return x->req.demand.gpus > y->req.demand.gpus ? -1 : 1;
	return strcmp(x->uid, y->uid);
}

void gang__census(struct gang_manager *m, const char *ns, const char *group, struct census *c)
{
	cache_group_foreach(m->cache, ns, group, census_member, c);
	if (c->n)
		qsort(c->list, c->n, sizeof(*c->list), by_gpus_desc);
}

/* The rule for what a gang still asks: <members> places to fill; members asking
 * no GPU take none, as they bind without troupe (but one place always stays);
 * the asking member's own request first; then each other unbound member's own,
 * the largest first when more exist than places; any place left over is
 * assumed to ask what the asking member asks (nothing at discovery). */
unsigned gang__needs(const struct census *c, unsigned members, struct gang_need *needs,
		     struct gang_pin *pins, unsigned *n_pins)
{
	unsigned places = members - (c->cpu_only < members ? c->cpu_only : members - 1);
	const unsigned others = c->mb ? 1 : 0;
	bool pinned[GANG_MAX_NEEDS];
	unsigned n_needs = 0;

	if (n_pins)
		*n_pins = 0;
	for (unsigned i = 0; i < places; i++) {
		const struct placement_request *r;
		const char *pin = "";
		unsigned j = 0;

		if (i < others) {
			r = &c->mb->req;
			pin = c->mb->pinned ? c->mb->pinned : "";
		} else if (i - others < c->n) {
			r = &c->list[i - others].req;
			pin = c->list[i - others].pinned;
		} else if (c->mb) {
			r = &c->mb->req;
		} else {
			break;
		}
		/* Pinned members are a need of their own: their places are pins. */
		while (j < n_needs && !(gang__same_request(&needs[j].req, r) &&
					pinned[j] == (pin[0] != '\0')))
			j++;
		if (j == GANG_MAX_NEEDS)
			return 0;
		if (j == n_needs) {
			needs[n_needs] = (struct gang_need){ .req = *r };
			pinned[n_needs++] = pin[0] != '\0';
		}
		needs[j].count++;
		if (pin[0] && pins) {
			pins[*n_pins].need = j;
			snprintf(pins[*n_pins].node, sizeof(pins[0].node), "%s", pin);
			(*n_pins)++;
		}
	}
	return n_needs;
}

/* The needs of the <members> places gang <g> still wants, for member <mb>,
 * with the pinned places in <*pins> (the caller frees it), and whether another
 * unbound member asking GPUs is not pinned (<*others_free>).
 * Returns the number of needs, or 0 with <reason> set. Lock held (the cache
 * walk takes only cache locks). */
static unsigned gang_needs(struct gang_manager *m, const struct gang *g,
			   const struct gang_member *mb, unsigned members, struct gang_need *needs,
			   struct gang_pin **pins, unsigned *n_pins, bool *others_free,
			   char *reason, size_t reasonlen)
{
	struct census c = { .mb = mb };
	unsigned n_needs = 0, pinned;

	*pins = NULL;
	*n_pins = 0;
	gang__census(m, mb->ns, mb->group, &c);
	*others_free = c.n > c.pinned;
	/* Room for the pinned places only when some member is pinned. */
	pinned = c.pinned + (mb->pinned != NULL);
	if (!c.oom && pinned && !(*pins = calloc(pinned, sizeof(**pins))))
		c.oom = true;
	if (c.oom) {
		snprintf(reason, reasonlen, "troupe: out of memory planning gang %s", g->key);
		goto out;
	}
	n_needs = gang__needs(&c, members, needs, *pins, n_pins);
	if (!n_needs)
		snprintf(reason, reasonlen, "troupe: gang %s: its members ask for more than %u "
			 "different GPU requests; troupe cannot plan it", g->key, GANG_MAX_NEEDS);
out:
	free(c.list);
	return n_needs;
}

/* ---- Slots -------------------------------------------------------------------- */

/* Whether slot <s> is open and planned for a request like this member's (GPU
 * count, kind and topology policy); one planned for a member pinned to its node
 * is open only to a member pinned there, so a member free to go elsewhere never
 * takes the room of one that cannot. */
bool gang__slot_open_for(const struct reserved_slot *s, const struct gang_member *mb)
{
	return !s->member[0] && gang__same_request(&s->req, &mb->req) &&
	       (!s->pinned || (mb->pinned && strcmp(mb->pinned, s->node) == 0));
}

/* Whether slot <s> can be this member's: its own already, or open for it. */
static bool slot_for(const struct reserved_slot *s, const struct gang_member *mb)
{
	if (s->member[0])
		return strcmp(s->member, mb->uid) == 0;
	return gang__slot_open_for(s, mb);
}

struct reserved_slot *gang__replan_slot(struct gang_manager *m, struct gang *g,
					const struct gang_member *mb, const char *node)
{
	struct cache_node_view v;
	struct placement_choice c;
	struct reserved_slot *open = NULL;
	char key[TROUPE_RESERVATION_KEY_BUF];
	bool found;

	for (unsigned s = 0; s < g->n_slots && !open; s++)
		if (gang__slot_open_for(&g->slots[s], mb))
			open = &g->slots[s];
	if (!open)
		return NULL;
	cache_read_begin(m->cache);
	found = cache_node_lookup(m->cache, node, strlen(node), &v) &&
		placement_node_choose(&v, mb->req.demand.gpu_resource, cache_view_free_mask(&v),
				      mb->req.demand.gpus,
				      &mb->req.policy, &c) == 0;
	cache_read_end(m->cache);
	if (!found)
		return NULL;
	snprintf(key, sizeof(key), "gang-reservation/%s/%u/moved-%u", g->key, g->generation,
		 ++g->moves);
	if (cache_reserve_for(m->cache, key, node, c.set, g->queue) < 0)
		return NULL;
	cache_reservation_release(m->cache, open->res_key);
	snprintf(open->res_key, sizeof(open->res_key), "%s", key);
	snprintf(open->node, sizeof(open->node), "%s", node);
	open->devices = c.set;
	log_info("gang", "gang %s: a slot moved to node %s, where kube-scheduler bound a member",
		 g->key, node);
	return open;
}

/* ---- Planning and reserving ---------------------------------------------------- */

/* Record what <g> asks (<needs>) for the fair order and holds. */
static void note_needs(struct gang *g, const struct gang_need *needs, unsigned n_needs)
{
	g->need = 0;
	g->need_gpus = 0;
	g->req = needs[0].req;
	for (unsigned j = 0; j < n_needs; j++) {
		g->need += needs[j].count;
		g->need_gpus += needs[j].count * needs[j].req.demand.gpus;
		if (needs[j].req.demand.gpus > g->req.demand.gpus)
			g->req = needs[j].req;
	}
}

/* Whether a waiting gang goes before <g> and would fit in <offered_free>: then
 * <g> is refused naming it. <sh> are the shares loaded before the lock. */
static bool defer_to_head(struct gang_manager *m, struct gang *g, const struct shares *sh,
			  uint64_t offered_free, uint64_t now, char *reason, size_t reasonlen)
{
	struct gang *w;

	gang__discover_waiting(m, now);
	w = gang__head_waiting(m, sh, g);
	if (!w || gang__precedes(m, sh, w, g) <= 0 || w->need_gpus > offered_free)
		return false;
	snprintf(reason, reasonlen, "troupe: gang %s waits behind gang %s (priority %d, queue %s at "
		 "share %.2f, ours %.2f); it fits now and goes first", g->key, w->key, w->priority,
		 w->queue, gang__share_of(m, sh, w->queue), gang__share_of(m, sh, g->queue));
	m->stats.deferred++;
	gang__enter(g, GANG_WAITING, now);
	return true;
}

/* Reserve every place of <plan> for <g>. False when something took a device
 * between planning and reserving (<g> then has no plan). */
static bool plan_reserve(struct gang_manager *m, struct gang *g, const struct gang_plan *plan,
			 const struct cache_node_view *views, const struct gang_need *needs)
{
	unsigned i;

	g->generation++;
	g->n_slots = plan->n_slots;
	for (i = 0; i < plan->n_slots; i++) {
		struct reserved_slot *s = &g->slots[i];

		snprintf(s->node, sizeof(s->node), "%s", views[plan->slots[i].node].node->name);
		s->devices = plan->slots[i].devices;
		s->req = needs[plan->slots[i].need].req;
		s->pinned = needs[plan->slots[i].need].pins != NULL;
		snprintf(s->res_key, sizeof(s->res_key), "gang-reservation/%s/%u/%u", g->key,
			 g->generation, i);
		if (cache_reserve_for(m->cache, s->res_key, s->node, s->devices, g->queue) < 0)
			break;
	}
	if (i == plan->n_slots)
		return true;
	g->n_slots = i;
	gang__plan_drop(m, g);
	return false;
}

/* Tell of a plan just reserved: its domain and the nodes it takes (the first
 * few, cut to fit an Event's note). Lock held. */
static void notify_planned(struct gang_manager *m, const struct gang *g,
			   const struct gang_member *mb, const struct gang_plan *plan,
			   unsigned timeout_s)
{
	enum { NOTE_SLOTS = 32 };
	char nodes[GANG_WHY_BUF / 2] = "";
	size_t len = 0;

	if (!m->cfg.notify)
		return;
	for (unsigned i = 0; i < g->n_slots && i < NOTE_SLOTS && len < sizeof(nodes); i++) {
		bool seen = false;

		for (unsigned j = 0; j < i && !seen; j++)
			seen = strcmp(g->slots[j].node, g->slots[i].node) == 0;
		if (!seen)
			len += (size_t)snprintf(nodes + len, sizeof(nodes) - len, "%s%s",
						len ? ", " : "", g->slots[i].node);
	}
	gang__notify(m, GANG_NOTE_PLANNED, g, mb, "%u members (%llu GPUs) planned on %u nodes "
		     "(%s%s): %s%s; reserved for %us", g->need, (unsigned long long)g->need_gpus,
		     plan->nodes_used, plan->level >= 0 ? "one domain: " : "no common domain",
		     plan->level >= 0 ? plan->domain : "", nodes,
		     len >= sizeof(nodes) || g->n_slots > NOTE_SLOTS ? ", ..." : "", timeout_s);
}

/* The candidates a plan needs for its pinned places (<pins>, from gang__needs):
 * the offered nodes <*views> (n of them), then each pinned node not among them,
 * looked up in the cache (inside the caller's read section); and each pinned
 * need's places by candidate, in <*counts> (the caller frees it), its pins
 * pointing there. A pinned node troupe does not know takes no place, so the
 * plan cannot place that member and says so. <*own> is the array made (the
 * caller frees it). 0, or -ENOMEM. */
static int pin_candidates(struct gang_manager *m, struct gang_need *needs, unsigned n_needs,
			  const struct gang_pin *pins, unsigned n_pins,
			  const struct cache_node_view **views, unsigned *n,
			  struct cache_node_view **own, uint16_t **counts)
{
	unsigned cap = *n + n_pins, have = *n;
	struct cache_node_view *ext;

	*counts = NULL;
	if (!n_pins)
		return 0;
	ext = malloc(cap * sizeof(*ext));
	*counts = calloc((size_t)n_needs * cap, sizeof(**counts));
	if (!ext || !*counts) {
		free(ext);
		return -ENOMEM;
	}
	memcpy(ext, *views, *n * sizeof(*ext));
	for (unsigned p = 0; p < n_pins; p++) {
		unsigned i = 0;

		/* Pinned even where no node is known: it then takes nothing. */
		needs[pins[p].need].pins = &(*counts)[(size_t)pins[p].need * cap];
		while (i < have && strcmp(ext[i].node->name, pins[p].node) != 0)
			i++;
		if (i == have && !cache_node_lookup(m->cache, pins[p].node, strlen(pins[p].node),
						    &ext[have]))
			continue;       /* not a node troupe knows: no place for it */
		if (i == have)
			have++;
		(*counts)[(size_t)pins[p].need * cap + i]++;
	}
	free(*own);
	*own = ext;
	*views = ext;
	*n = have;
	return 0;
}

/* Plan gang <g> whole over the offered <views> (and the nodes its members are
 * pinned to) and reserve every place. True when it is planned; false with
 * <reason> set when it must wait, and <*retry> set when the member should be
 * retried as an error rather than refused. Lock held. */
static bool gang_admit(struct gang_manager *m, struct gang *g, const struct gang_member *mb,
		       const struct cache_node_view *views, unsigned n, unsigned members,
		       unsigned timeout_s, uint32_t min_gpus, const struct shares *sh,
		       bool *retry, char *reason, size_t reasonlen)
{
	struct gang_need needs[GANG_MAX_NEEDS];
	struct gang_levels one;
	const struct gang_levels *levels = m->cfg.levels.n ? &m->cfg.levels : &gang_default_levels;
	struct cache_node_view *own = NULL;
	struct gang_plan plan = { 0 };
	struct gang_pin *pins = NULL;
	uint16_t *pin_counts = NULL;
	uint64_t offered_free = 0, all_free = 0, now;
	unsigned n_needs, n_all, n_pins;
	bool ok = false, others_free;
	char why[PLAN_WHY_BUF];

	n_needs = gang_needs(m, g, mb, members, needs, &pins, &n_pins, &others_free, reason,
			     reasonlen);
	if (!n_needs)
		goto out;
	g->timeout_s = timeout_s;
	note_needs(g, needs, n_needs);
	/* The nodes members are pinned to join the candidates, for them alone. */
	n_all = n;
	if (pin_candidates(m, needs, n_needs, pins, n_pins, &views, &n_all, &own,
			   &pin_counts) < 0) {
		snprintf(reason, reasonlen, "troupe: out of memory planning gang %s", g->key);
		goto out;
	}
	for (unsigned j = 0; j < n_all; j++) {
		unsigned f = cache_view_free_gpus(&views[j]);

		all_free += f;
		if (j < n)
			offered_free += f;
	}
	/* The PodGroup's minResources, when it names GPUs, must fit too. */
	if (min_gpus && all_free < min_gpus && !g->n_holds) {
		snprintf(reason, reasonlen, "troupe: gang %s: its PodGroup's minResources needs %u "
			 "GPUs; the offered nodes%s have %llu free", g->key, min_gpus,
			 n_all > n ? " and those its members are pinned to" : "",
			 (unsigned long long)all_free);
		goto out;
	}
	/* Fair order: a waiting gang before this one that would fit in what is
	 * offered gets it first; this one is told behind whom. Every gang whose
	 * members wait takes part, also those kube-scheduler has not shown troupe. */
	now = gang__now(m);
	if (defer_to_head(m, g, sh, offered_free, now, reason, reasonlen))
		goto out;
	/* Capacity held for this gang while it starved is its own to plan on: the
	 * candidates' views count it free, and the holds are dropped just before
	 * the plan is reserved in their place. */
	if (g->n_holds && !own && (own = malloc(n_all * sizeof(*own)))) {
		memcpy(own, views, n_all * sizeof(*own));
		views = own;
	}
	if (g->n_holds && own)
		for (unsigned h = 0; h < g->n_holds; h++)
			for (unsigned j = 0; j < n_all; j++)
				if (strcmp(own[j].node->name, g->holds[h].node) == 0)
					own[j].used &= ~g->holds[h].devices;
	if (mb->required_key)
		gang_levels_required(levels, mb->required_key, &one);
	if (gang_plan_pinned(views, n_all, n, needs, n_needs, mb->required_key ? &one : levels,
			     &plan, why, sizeof(why)) < 0) {
		snprintf(g->reason, sizeof(g->reason), "troupe: gang %s: %s", g->key, why);
		snprintf(reason, reasonlen, "%s", g->reason);
		m->stats.refused++;
		gang__enter(g, GANG_WAITING, now);
		/* kube-scheduler offers a pinned member its own node alone, so the
		 * members free to go elsewhere were planned there only: one of
		 * them, offered more, may plan the gang. An error makes
		 * kube-scheduler retry this member after its backoff; refused, it
		 * would wait for a cluster event that the other's plan is not. */
		if (mb->pinned && others_free) {
			*retry = true;
			snprintf(reason, reasonlen, "%s; pod %s/%s is pinned to node %s and other "
				 "members are not: retried until one of them, offered more nodes, "
				 "plans the gang", g->reason, mb->ns, mb->name, mb->pinned);
		}
		goto out;
	}
	g->slots = calloc(plan.n_slots, sizeof(*g->slots));
	if (!g->slots) {
		snprintf(reason, reasonlen, "troupe: out of memory planning gang %s", g->key);
		goto out;
	}
	/* The plan stands: what was held for it is now the plan's to reserve. */
	gang__holds_release(m, g);
	if (!plan_reserve(m, g, &plan, views, needs)) {
		snprintf(reason, reasonlen, "troupe: gang %s: capacity changed while it was being "
			 "reserved; it will be planned again", g->key);
		goto out;
	}
	g->deadline_ns = now + (uint64_t)timeout_s * 1000000000ULL;
	g->deadline_is_http = false;
	g->reason[0] = '\0';
	gang__enter(g, GANG_PLANNED, now);
	m->stats.planned++;
	log_info("gang", "gang %s: %u members (%llu GPUs, %u kinds of request) planned on %u nodes "
		 "(%s%s); reserved for %us", g->key, g->need, (unsigned long long)g->need_gpus,
		 n_needs, plan.nodes_used, plan.level >= 0 ? "one domain: " : "no common domain",
		 plan.level >= 0 ? plan.domain : "", timeout_s);
	notify_planned(m, g, mb, &plan, timeout_s);
	ok = true;
out:
	gang_plan_fini(&plan);
	free(own);
	free(pins);
	free(pin_counts);
	return ok;
}

/* ---- Filter ------------------------------------------------------------------- */

static void newest_member(const struct cache_pod_info *p, const char *uid, void *arg)
{
	uint64_t *newest = arg;

	(void)uid;
	if (cache_pod_is_member_now(p) && p->known_ns > *newest)
		*newest = p->known_ns;
}

bool gang__still_settling(struct gang_manager *m, const struct gang_member *mb, unsigned exist,
			  char *reason, size_t reasonlen)
{
	uint64_t newest = 0, settle = (uint64_t)m->cfg.settle_s * 1000000000ULL, now;

	cache_group_foreach(m->cache, mb->ns, mb->group, newest_member, &newest);
	now = gang__now(m);
	if (util_elapsed_ns(now, newest) >= settle)
		return false;
	snprintf(reason, reasonlen, "troupe: gang %s/%s names no quorum (no PodGroup minMember, "
		 "min-available label or min-member annotation), so it is the members that exist, "
		 "%u so far; it is planned once none has arrived for %us (%.1fs to go)", mb->ns,
		 mb->group, exist, m->cfg.settle_s,
		 (double)(settle - util_elapsed_ns(now, newest)) / 1e9);
	return true;
}

/* Mark the candidates with a slot for <mb>. Returns how many slots it has
 * (<any>: how many candidates were marked). */
static unsigned mark_open(const struct gang *g, const struct gang_member *mb,
			  const struct cache_node_view *views, unsigned n, bool *allowed,
			  unsigned *any)
{
	struct strmap open_nodes;
	unsigned sized = 0;

	/* The nodes with a slot for this member, as a set: one lookup per
	 * candidate instead of a scan of every slot. */
	strmap_init(&open_nodes);
	for (unsigned s = 0; s < g->n_slots; s++)
		if (slot_for(&g->slots[s], mb) &&
		    strmap_put(&open_nodes, g->slots[s].node, strlen(g->slots[s].node),
			       (void *)&g->slots[s], NULL) == 0)
			sized++;
	*any = 0;
	for (unsigned i = 0; i < n; i++)
		if (strmap_get(&open_nodes, views[i].node->name, strlen(views[i].node->name))) {
			allowed[i] = true;
			(*any)++;
		}
	strmap_fini(&open_nodes);
	return sized;
}

enum gang_verdict gang_filter(struct gang_manager *m, const struct gang_member *mb,
			      const struct cache_node_view *views, unsigned n, bool *allowed,
			      char *reason, size_t reasonlen)
{
	unsigned exist, bound, quorum, timeout_s, any = 0, sized;
	char queue_buf[K8S_KEY_BUF + K8S_UID_BUF + K8S_NAME_BUF];
	const char *queue;
	uint32_t min_gpus;
	bool named, settling, have_shares = false;
	enum gang_verdict ret;
	struct shares sh;
	struct gang *g;

	for (unsigned i = 0; i < n; i++)
		allowed[i] = false;
	reason[0] = '\0';
	if (!mb->group)
		return GANG_NOT_A_GANG;
	cache_group_count(m->cache, mb->ns, mb->group, &exist, &bound);
	named = gang__terms(m, mb, exist, &quorum, &timeout_s, &min_gpus);
	settling = gang__may_settle(m, named, exist, bound);
	if (quorum <= 1 && !settling)
		return GANG_NOT_A_GANG;
again:
	ret = GANG_REFUSED;
	pthread_mutex_lock(&m->lock);
	if (m->stop) {
		snprintf(reason, reasonlen, "troupe is stopping");
		goto out;
	}
	g = gang__get(m, mb->ns, mb->group, true);
	if (!g && errno == ENOSPC) {
		snprintf(reason, reasonlen, "troupe: gang %s/%s cannot be admitted now: troupe "
			 "keeps state for gang.max_entries pod groups and every one is waiting, "
			 "planned or binding", mb->ns, mb->group);
		goto out;
	}
	if (!g) {
		snprintf(reason, reasonlen, "troupe: out of memory admitting gang %s/%s", mb->ns,
			 mb->group);
		goto out;
	}
	if (!gang__planned(g) && settling &&
	    gang__still_settling(m, mb, exist, reason, reasonlen)) {
		ret = GANG_RETRY;
		goto out;
	}
	if (quorum <= 1 || (!gang__planned(g) && bound >= quorum)) {
		/* A gang of one, or complete already (or rebuilt after a restart):
		 * extra members are single pods. */
		ret = GANG_NOT_A_GANG;
		goto out;
	}
	if (exist < quorum) {
		snprintf(reason, reasonlen, "troupe: gang %s waiting for its members: %u of %u "
			 "exist", g->key, exist, quorum);
		gang__notify(m, GANG_NOTE_WAITING, g, mb, "waiting for its members: %u of %u "
			     "exist", exist, quorum);
		goto out;
	}
	if (!gang__planned(g) && !have_shares) {
		/* Admission reads every queue's share, a walk of every pod: done
		 * with the lock dropped, then everything above is checked again. */
		gang__unlock(m);
		gang__shares_load(m, &sh);
		have_shares = true;
		goto again;
	}
	g->last_seen_ns = gang__now(m);
	queue = gang__queue(m, mb, queue_buf, sizeof(queue_buf));
	if (g->n_targets && (g->priority != mb->priority || strcmp(g->queue, queue) != 0))
		m->holds_dirty = true;  /* the held-node set names both */
	g->priority = mb->priority;
	snprintf(g->queue, sizeof(g->queue), "%s", queue);
	if (!gang__planned(g)) {
		g->quorum = quorum;
		bool retry = false;

		if (!gang_admit(m, g, mb, views, n, quorum - bound, timeout_s, min_gpus, &sh,
				&retry, reason, reasonlen)) {
			if (retry)
				ret = GANG_RETRY;
			goto out;
		}
	}
	sized = mark_open(g, mb, views, n, allowed, &any);
	if (!sized) {
		snprintf(reason, reasonlen, "troupe: gang %s has no open place for a member asking "
			 "%u GPUs with its topology policy; its plan was made for the members' "
			 "requests at the time", g->key, mb->req.demand.gpus);
		goto out;
	}
	if (!any) {
		snprintf(reason, reasonlen, "troupe: gang %s is planned on other nodes", g->key);
		goto out;
	}
	ret = GANG_ALLOWED;
out:
	gang__unlock(m);
	if (have_shares)
		gang__shares_fini(&sh);
	return ret;
}

enum gang_verdict gang_has_slot(struct gang_manager *m, const struct gang_member *mb,
				const char *node, bool *has)
{
	enum gang_verdict ret = GANG_NOT_A_GANG;
	struct gang *g;

	*has = false;
	if (!mb->group)
		return ret;
	pthread_mutex_lock(&m->lock);
	g = gang__get(m, mb->ns, mb->group, false);
	if (g && gang__planned(g)) {
		ret = GANG_ALLOWED;
		for (unsigned s = 0; s < g->n_slots && !*has; s++)
			*has = slot_for(&g->slots[s], mb) && strcmp(g->slots[s].node, node) == 0;
	}
	gang__unlock(m);
	return ret;
}
