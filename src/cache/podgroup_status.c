/* PodGroup status (podgroup_status.h), the pure part: the controller's rules,
 * reading a PodGroup's status and writing the merge patch. The thread that
 * sends it is podgroup_status_writer.c.
 *
 * The rules are scheduler-plugins' PodGroup controller's, as its Reconcile
 * (pkg/controllers/podgroup_controller.go) has them since the PreScheduling
 * phase and the status.scheduled count left its API, line by line:
 *   1. phase Finished or Failed: nothing changes, ever;
 *   2. phase Scheduling or Pending, status.running 0, and scheduleStartTime
 *      more than 48 hours after creationTimestamp: nothing changes ("pod may
 *      have been GCed");
 *   3. phase "": Pending;
 *   4. Pending: Scheduling once the group has minMember pods;
 *   5. any other phase: running, succeeded and failed recounted from the pods'
 *      status.phase; then fewer than minMember pods: Pending; else
 *      succeeded + running < minMember: Scheduling; >= minMember: Running;
 *      failed > 0 and failed + running + succeeded >= minMember: Failed;
 *      succeeded >= minMember: Finished (each later rule overriding).
 * The controller lists "the group's pods" by the label
 * scheduling.x-k8s.io/pod-group in every namespace; troupe counts the members
 * its cache knows (same namespace, any of the labels cache_pod_group_name
 * reads), which is the same set for every pod that names its group the
 * scheduler-plugins way.
 *
 * Two things the controller leaves to the coscheduling plugin, which troupe
 * replaces when it schedules the gang, troupe writes with rules 3 to 5, in any
 * phase, as that plugin's PostBind did at every bind: status.scheduled, the
 * members bound to a node (a field of the older API; our CRD keeps it, its
 * status preserving unknown fields), and scheduleStartTime, set once, when the
 * first member is seen bound. The
 * controller's status.occupiedBy (the owners of the first pod listed) is not
 * written: the cache keeps no owner references.
 */
#include "cache/podgroup_status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/strbuf.h"
#include "common/util.h"

/* ---- The rules ------------------------------------------------------------------ */

bool cache_pgs_phase_final(const char *phase)
{
	return strcmp(phase, CACHE_PG_FINISHED) == 0 || strcmp(phase, CACHE_PG_FAILED) == 0;
}

static int32_t clamp32(uint32_t n)
{
	return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

static void set_phase(struct cache_podgroup_status *st, const char *phase)
{
	snprintf(st->phase, sizeof(st->phase), "%s", phase);
}

bool cache_pgs_step(struct cache_podgroup_status *st, int32_t min_member, int64_t created_us,
		    const struct cache_pgs_members *m, int64_t now_us)
{
	struct cache_podgroup_status old = *st;
	int64_t total = m->total, min = min_member;
	int32_t r, s, f;

	/* Rule 1. */
	if (cache_pgs_phase_final(st->phase))
		return false;
	/* Rule 2. Go's zero time minus any creation is negative, so an unset
	 * start never trips it; nor does an unknown creation here. */
	if ((strcmp(st->phase, CACHE_PG_SCHEDULING) == 0 ||
	     strcmp(st->phase, CACHE_PG_PENDING) == 0) && st->running == 0 && st->start_us &&
	    created_us && st->start_us - created_us > CACHE_PGS_GC_GUARD_US)
		return false;
	/* The plugin's part (see above). */
	st->scheduled = clamp32(m->bound);
	if (!st->start_us && m->bound)
		st->start_us = now_us - now_us % 1000000;      /* metav1.Time: whole seconds */
	if (!st->phase[0]) {
		set_phase(st, CACHE_PG_PENDING);                        /* rule 3 */
	} else if (strcmp(st->phase, CACHE_PG_PENDING) == 0) {
		if (total >= min)                                       /* rule 4 */
			set_phase(st, CACHE_PG_SCHEDULING);
	} else {
		/* Rule 5. */
		st->running = r = clamp32(m->running);
		st->succeeded = s = clamp32(m->succeeded);
		st->failed = f = clamp32(m->failed);
		if (total < min) {
			set_phase(st, CACHE_PG_PENDING);
		} else {
			if ((int64_t)s + r < min)
				set_phase(st, CACHE_PG_SCHEDULING);
			if ((int64_t)s + r >= min)
				set_phase(st, CACHE_PG_RUNNING);
			if (f != 0 && (int64_t)f + r + s >= min)
				set_phase(st, CACHE_PG_FAILED);
			if (s >= min)
				set_phase(st, CACHE_PG_FINISHED);
		}
	}
	return !cache_pgs_status_equal(&old, st);
}

/* More than enough: "" -> Pending -> Scheduling -> the rule-5 answer, which
 * rule 5 then gives again (or Pending, which rule 4 keeps). */
enum { PGS_MAX_STEPS = 8 };

void cache_pgs_desired(const struct cache_podgroup_status *cur, int32_t min_member,
		       int64_t created_us, const struct cache_pgs_members *m, int64_t now_us,
		       struct cache_podgroup_status *out)
{
	*out = *cur;
	for (int i = 0; i < PGS_MAX_STEPS; i++)
		if (!cache_pgs_step(out, min_member, created_us, m, now_us))
			break;
}

bool cache_pgs_status_equal(const struct cache_podgroup_status *a,
			    const struct cache_podgroup_status *b)
{
	return strcmp(a->phase, b->phase) == 0 && a->scheduled == b->scheduled &&
	       a->running == b->running && a->succeeded == b->succeeded &&
	       a->failed == b->failed && a->start_us == b->start_us;
}

/* ---- Reading and writing the status ----------------------------------------------- */

static int32_t count_field(const cJSON *status, const char *key)
{
	int64_t v = 0;

	if (json_int_in_range(json_get(status, key), 0, INT32_MAX, &v) < 0)
		return 0;
	return (int32_t)v;
}

static int64_t time_field(const cJSON *obj, const char *key)
{
	const char *s = json_str(obj, key);
	int64_t us = 0;

	if (!s || cache_lease_parse_time(s, &us) < 0)
		return 0;
	return us;
}

void cache_podgroup_status_read(const cJSON *obj, struct cache_podgroup *pg)
{
	const cJSON *meta = json_obj(obj, "metadata");
	const cJSON *status = json_obj(obj, "status");
	const char *rv = json_str(meta, "resourceVersion");
	const char *phase = json_str(status, "phase");

	pg->version[0] = '\0';
	if (rv && strlen(rv) < sizeof(pg->version))
		snprintf(pg->version, sizeof(pg->version), "%s", rv);
	pg->created_us = time_field(meta, "creationTimestamp");
	memset(&pg->status, 0, sizeof(pg->status));
	if (phase && strlen(phase) < sizeof(pg->status.phase))
		set_phase(&pg->status, phase);
	pg->status.scheduled = count_field(status, "scheduled");
	pg->status.running = count_field(status, "running");
	pg->status.succeeded = count_field(status, "succeeded");
	pg->status.failed = count_field(status, "failed");
	pg->status.start_us = time_field(status, "scheduleStartTime");
}

/* metav1.Time: whole seconds, "2026-12-01T16:42:36Z". */
static void format_time(int64_t us, char *out, size_t len)
{
	time_t t = (time_t)(us / 1000000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

char *cache_pgs_patch_json(const struct cache_podgroup_status *st, const char *version)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_puts(&sb, "{\"metadata\":{\"resourceVersion\":");
	strbuf_put_json_str(&sb, version, strlen(version));
	strbuf_puts(&sb, "},\"status\":{\"phase\":");
	strbuf_put_json_str(&sb, st->phase, strlen(st->phase));
	strbuf_printf(&sb, ",\"scheduled\":%d,\"running\":%d,\"succeeded\":%d,\"failed\":%d",
		      st->scheduled, st->running, st->succeeded, st->failed);
	if (st->start_us) {
		char ts[CACHE_LEASE_TIME_BUF];

		format_time(st->start_us, ts, sizeof(ts));
		strbuf_printf(&sb, ",\"scheduleStartTime\":\"%s\"", ts);
	}
	strbuf_puts(&sb, "}}");
	if (strbuf_failed(&sb)) {
		strbuf_fini(&sb);
		return NULL;
	}
	return strbuf_take(&sb, NULL);
}
