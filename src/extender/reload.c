/* Reloading troupe.yaml while troupe runs: on SIGHUP, or when the file (a
 * mounted ConfigMap's, whose kubelet swaps a symlink) changes on disk.
 *
 * What a reload changes is deliberately small: the queues and their weights
 * (the fair order reads them from the next decision on) and log_level (unless
 * --log-level was given: the flag wins, as at start). Everything else in the
 * file is read at start only; the log line of every reload says so. A file
 * that does not load (unreadable, not YAML, an unknown key, a bad weight)
 * changes nothing, and the log says why; the settings in use stay.
 */
#include "extender/reload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/strbuf.h"

void ext_reload_init(struct ext_reload *r, const char *path, bool level_flag,
		     const struct ext_config *running)
{
	memset(r, 0, sizeof(*r));
	r->path = path;
	r->level_flag = level_flag;
	r->gang = running->gang;
	r->log_level = running->log_level;
	if (path && stat(path, &r->seen) == 0)
		r->have_seen = true;
}

bool ext_reload_changed(struct ext_reload *r)
{
	struct stat st;
	bool changed;

	if (!r->path)
		return false;
	if (stat(r->path, &st) != 0) {
		/* Gone for a moment (a ConfigMap's symlink swap) or for good: the
		 * next look that finds it decides. */
		return false;
	}
	changed = !r->have_seen || st.st_ino != r->seen.st_ino || st.st_dev != r->seen.st_dev ||
		  st.st_size != r->seen.st_size || st.st_mtim.tv_sec != r->seen.st_mtim.tv_sec ||
		  st.st_mtim.tv_nsec != r->seen.st_mtim.tv_nsec;
	r->seen = st;
	r->have_seen = true;
	return changed;
}

/* "a=2, b=1" for the queues of <g>, or "none". */
static void queues_text(const struct gang_config *g, struct strbuf *sb)
{
	if (!g->n_queues)
		strbuf_puts(sb, "none");
	for (unsigned i = 0; i < g->n_queues; i++)
		strbuf_printf(sb, "%s%s=%g", i ? ", " : "", g->queue_names[i], g->queue_weights[i]);
}

static bool same_queues(const struct gang_config *a, const struct gang_config *b)
{
	if (a->n_queues != b->n_queues)
		return false;
	for (unsigned i = 0; i < a->n_queues; i++)
		if (strcmp(a->queue_names[i], b->queue_names[i]) != 0 ||
		    a->queue_weights[i] != b->queue_weights[i])
			return false;
	return true;
}

int ext_reload_apply(struct ext_reload *r, struct gang_manager *gangs, const char *why)
{
	struct ext_config *next;
	char err[EXT_ERR_LEN];
	struct strbuf line;
	bool queues_changed, level_changed;

	if (!r->path) {
		log_info("main", "%s: troupe runs without --config; nothing to reload", why);
		return 0;
	}
	next = malloc(sizeof(*next));
	if (!next) {
		log_warn("main", "%s: out of memory reloading %s; keeping the settings in use",
			 why, r->path);
		return -1;
	}
	ext_config_defaults(next);
	if (ext_config_load(next, r->path, err, sizeof(err)) < 0) {
		log_warn("main", "%s: not reloaded, keeping the settings in use: %s", why, err);
		free(next);
		return -1;
	}
	queues_changed = !same_queues(&r->gang, &next->gang);
	level_changed = !r->level_flag && next->log_level != r->log_level;
	strbuf_init(&line);
	strbuf_puts(&line, "queues ");
	queues_text(&next->gang, &line);
	if (queues_changed) {
		strbuf_puts(&line, " (were ");
		queues_text(&r->gang, &line);
		strbuf_puts(&line, ")");
		if (gangs)
			gang_manager_set_queues(gangs, &next->gang);
		r->gang = next->gang;   /* only its queues are read */
	} else {
		strbuf_puts(&line, " (unchanged)");
	}
	if (level_changed) {
		log_set_level(next->log_level);
		r->log_level = next->log_level;
	}
	strbuf_printf(&line, "; log_level %s%s", log_level_name(r->log_level),
		      r->level_flag ? " (--log-level wins over the file)"
				    : level_changed ? " (changed)" : " (unchanged)");
	log_info("main", "%s: reloaded %s: %s; the other settings take effect at a restart", why,
		 r->path, strbuf_failed(&line) || !line.buf ? "(out of memory)" : line.buf);
	strbuf_fini(&line);
	free(next);
	return 0;
}
