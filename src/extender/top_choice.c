/* top_choice: see top_choice.h. */
#include "extender/top_choice.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "placement/placement.h"

const char *const ext_top_choice_outcome_names[EXT_TOP_CHOICE_OUTCOMES] = {
	"top", "other", "unscored",
};

struct ext_top_choice {
	pthread_mutex_t lock;
	struct ext_top_choice_entry e[EXT_TOP_CHOICE_PODS];     /* guarded by lock */
	uint64_t stamp[EXT_TOP_CHOICE_PODS];    /* when put; 0: free; oldest goes first */
	uint64_t clock;
	uint64_t count[EXT_TOP_CHOICE_OUTCOMES];        /* guarded by lock */
};

/* FNV-1a: node names are short and trusted (they came from the node list);
 * 64 bits make a collision among a pod's few dozen kept nodes negligible. */
static uint64_t name_hash(const char *s, size_t len)
{
	uint64_t h = 14695981039346656037ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

struct ext_top_choice *ext_top_choice_new(void)
{
	struct ext_top_choice *t = calloc(1, sizeof(*t));

	if (t)
		pthread_mutex_init(&t->lock, NULL);
	return t;
}

void ext_top_choice_free(struct ext_top_choice *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t);
}

void ext_top_choice_begin(struct ext_top_choice_entry *e, const char *uid)
{
	e->n = e->min_at = 0;
	e->tops = 0;
	e->dropped = -1;
	e->first[0] = '\0';
	if (snprintf(e->uid, sizeof(e->uid), "%s", uid) >= (int)sizeof(e->uid))
		e->uid[0] = '\0';       /* unusable; such a UID is refused elsewhere anyway */
}

static void find_min(struct ext_top_choice_entry *e)
{
	e->min_at = 0;
	for (size_t i = 1; i < e->n; i++)
		if (e->answer[i] < e->answer[e->min_at])
			e->min_at = i;
}

void ext_top_choice_add(struct ext_top_choice_entry *e, const char *name, size_t len,
			unsigned answer)
{
	size_t at;

	answer = answer > PLACEMENT_MAX_SCORE ? PLACEMENT_MAX_SCORE : answer;
	if (answer == PLACEMENT_MAX_SCORE) {
		if (!e->tops++ && len < sizeof(e->first)) {
			memcpy(e->first, name, len);
			e->first[len] = '\0';
		}
	}
	if (e->n < EXT_TOP_CHOICE_NODES) {
		at = e->n++;
	} else if (answer > e->answer[e->min_at]) {
		/* Full: the best nodes are what bind asks about; the lowest goes. */
		at = e->min_at;
		if ((int)e->answer[at] > e->dropped)
			e->dropped = e->answer[at];
	} else {
		if ((int)answer > e->dropped)
			e->dropped = (int)answer;
		return;
	}
	e->hash[at] = name_hash(name, len);
	e->answer[at] = (uint8_t)answer;
	if (e->n == EXT_TOP_CHOICE_NODES)
		find_min(e);
	else if (e->answer[at] < e->answer[e->min_at])
		e->min_at = at;
}

void ext_top_choice_put(struct ext_top_choice *t, const struct ext_top_choice_entry *e)
{
	int at = 0;

	if (!t || !e->uid[0])
		return;
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < EXT_TOP_CHOICE_PODS; i++) {
		if (t->stamp[i] && strcmp(t->e[i].uid, e->uid) == 0) {
			at = i;
			break;
		}
		if (t->stamp[i] < t->stamp[at])
			at = i;         /* a free slot (0) or an older one */
	}
	t->e[at] = *e;
	t->stamp[at] = ++t->clock;
	pthread_mutex_unlock(&t->lock);
}

/* The outcome of binding to <node> given the entry <e>. */
static void judge(const struct ext_top_choice_entry *e, const char *node,
		  struct ext_top_choice_result *res)
{
	uint64_t h = name_hash(node, strlen(node));
	unsigned floor = PLACEMENT_MAX_SCORE;

	snprintf(res->first, sizeof(res->first), "%s", e->first);
	res->tops = e->tops;
	res->answer = -1;
	for (size_t i = 0; i < e->n; i++) {
		if (e->answer[i] < floor)
			floor = e->answer[i];
		if (e->hash[i] == h)
			res->answer = e->answer[i];
	}
	res->kept_floor = e->n ? (int)floor : -1;
	if (res->answer == PLACEMENT_MAX_SCORE)
		res->outcome = EXT_TOP_CHOICE_TOP;
	else if (res->answer < 0 && e->dropped == PLACEMENT_MAX_SCORE)
		res->outcome = EXT_TOP_CHOICE_UNSCORED; /* a tie at 10 too big to keep */
	else
		res->outcome = EXT_TOP_CHOICE_OTHER;
}

enum ext_top_choice_outcome ext_top_choice_bound(struct ext_top_choice *t, const char *uid,
						 const char *node,
						 struct ext_top_choice_result *res)
{
	struct ext_top_choice_result local;
	bool found = false;

	res = res ? res : &local;
	*res = (struct ext_top_choice_result){ .outcome = EXT_TOP_CHOICE_UNSCORED, .answer = -1,
					       .kept_floor = -1 };
	if (!t)
		return res->outcome;
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < EXT_TOP_CHOICE_PODS && !found; i++) {
		if (t->stamp[i] && strcmp(t->e[i].uid, uid) == 0) {
			judge(&t->e[i], node, res);
			t->stamp[i] = 0;        /* one bind per prioritize */
			found = true;
		}
	}
	t->count[res->outcome]++;
	pthread_mutex_unlock(&t->lock);
	return res->outcome;
}

void ext_top_choice_judge(struct ext_top_choice *t, const char *ns, const char *name,
			  const char *uid, const char *node)
{
	struct ext_top_choice_result res;

	if (ext_top_choice_bound(t, uid, node, &res) != EXT_TOP_CHOICE_OTHER)
		return;
	/* kube-scheduler's in-tree scores outvoted troupe's rank here: what the
	 * extender weight in config/scheduler-config.yaml is tuned against. */
	if (res.answer >= 0)
		log_info("extender", "bind: pod %s/%s -> node %s, not troupe's first choice: troupe "
			 "ranked node %s first (%u node(s) at 10) and %s at rank %d (answer %d of 10); "
			 "kube-scheduler's own plugins outscored troupe's rank (a GPU pod off its "
			 "best node can strand GPUs; see the extender weight, docs/configuration.md)",
			 ns, name, node, res.first[0] ? res.first : "(none)", res.tops, node,
			 PLACEMENT_MAX_SCORE + 1 - res.answer, res.answer);
	else
		log_info("extender", "bind: pod %s/%s -> node %s, not troupe's first choice: troupe "
			 "ranked node %s first (%u node(s) at 10) and %s not among its best %d (answer "
			 "under %d, or not ranked); kube-scheduler's own plugins outscored troupe's rank "
			 "(see the extender weight, docs/configuration.md)", ns, name, node,
			 res.first[0] ? res.first : "(none)", res.tops, node, EXT_TOP_CHOICE_NODES,
			 res.kept_floor < 0 ? 1 : res.kept_floor);
}

void ext_top_choice_get_stats(struct ext_top_choice *t, uint64_t out[EXT_TOP_CHOICE_OUTCOMES])
{
	pthread_mutex_lock(&t->lock);
	memcpy(out, t->count, sizeof(t->count));
	pthread_mutex_unlock(&t->lock);
}
