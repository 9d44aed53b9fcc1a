/* Reloading troupe.yaml while troupe runs (reload.c): the queues and their
 * weights, and log_level; on SIGHUP or when the file changes on disk. Main
 * thread only.
 */
#ifndef TROUPE_EXTENDER_RELOAD_H
#define TROUPE_EXTENDER_RELOAD_H

#include <stdbool.h>
#include <sys/stat.h>

#include "extender/config.h"
#include "gang/gang.h"

struct ext_reload {
	const char *path;               /* --config, or NULL: nothing to reload */
	bool level_flag;                /* --log-level given: it wins over the file */
	struct stat seen;               /* the file when last looked at */
	bool have_seen;
	struct gang_config gang;        /* the queues in use */
	enum log_level log_level;       /* the file's level in use */
};

/* Start from the settings <running> troupe started with. */
void ext_reload_init(struct ext_reload *r, const char *path, bool level_flag,
		     const struct ext_config *running);
/* Whether the file changed since the last look (inode, size or mtime: a
 * ConfigMap's kubelet replaces a symlink's target, an editor the file). */
bool ext_reload_changed(struct ext_reload *r);
/* Read the file again and apply what can change while running, saying so
 * in the log with <why> ("SIGHUP", "the file changed"). 0, or -1 when the
 * file did not load: nothing changed, and the log says why. */
int ext_reload_apply(struct ext_reload *r, struct gang_manager *gangs, const char *why);

#endif
