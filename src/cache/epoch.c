/* Epochs: how the store frees what readers may still hold. Readers bracket
 * their lookups in a read section on a thread-local ck_epoch record; the
 * writer retires node records, record-less node entries and superseded
 * name-index tables, and ck_epoch frees each once every read section that
 * could have seen it has ended. Nothing else in the store touches ck_epoch
 * but cache_new/cache_free (store.c), which set the epoch up and drain it.
 */
#include "cache/internal.h"

#include <stdlib.h>

#include <ck_epoch.h>

/* A retired node record, freed after the grace period. */
struct retired {
	ck_epoch_entry_t entry;
	struct cache *c;
	struct cache_node *node;
};

struct reader_rec {
	ck_epoch_record_t rec;
	struct reader_rec *next;
};

static __thread struct {
	uint64_t gen;
	ck_epoch_record_t *rec;
} tl_reader;

void cache__node_free(struct cache *c, struct cache_node *n)
{
	if (!n)
		return;
	if (n->derived && c->opts.node_release)
		c->opts.node_release((void *)n->derived, c->opts.hook_ctx);
	cache_node_free(n);
}

static void retired_free(ck_epoch_entry_t *e)
{
	struct retired *r = (struct retired *)e;

	cache__node_free(r->c, r->node);
	free(r);
}

static void node_entry_free_cb(ck_epoch_entry_t *ee)
{
	struct node_entry *e = (struct node_entry *)((char *)ee -
						     offsetof(struct node_entry, epoch_entry));

	/* Only record-less entries are removed, so there is no record to free. */
	pthread_mutex_destroy(&e->pods_lock);
	free(e);
}

static void table_free_cb(ck_epoch_entry_t *e)
{
	free((struct nameidx_table *)e);        /* the entry is its first member */
}

void cache__retire_node(struct cache *c, struct cache_node *n)
{
	struct retired *r = malloc(sizeof(*r));

	if (!r) {
		/* Cannot defer without memory: wait for readers instead. */
		ck_epoch_synchronize(c->writer);
		cache__node_free(c, n);
		return;
	}
	r->c = c;
	r->node = n;
	ck_epoch_call(c->writer, &r->entry, retired_free);
	/* Reclaim as we go so a long run of updates does not pile up garbage. */
	if (++c->n_retired % 64 == 0)
		ck_epoch_poll(c->writer);
}

void cache__retire_node_entry(struct cache *c, struct node_entry *e)
{
	ck_epoch_call(c->writer, &e->epoch_entry, node_entry_free_cb);
}

void cache__retire_table(struct cache *c, struct nameidx_table *t)
{
	ck_epoch_call(c->writer, &t->entry, table_free_cb);
}

/* ---- Readers --------------------------------------------------------- */

static ck_epoch_record_t *reader_record(struct cache *c)
{
	struct reader_rec *r;

	if (tl_reader.gen == c->gen)
		return tl_reader.rec;
	r = calloc(1, sizeof(*r));
	if (!r) {
		/* No memory for a record: fall back to the writer's, serialised by
		 * the readers lock below. Practically unreachable. */
		abort();
	}
	ck_epoch_register(&c->epoch, &r->rec, NULL);
	pthread_mutex_lock(&c->readers_lock);
	r->next = c->readers;
	c->readers = r;
	pthread_mutex_unlock(&c->readers_lock);
	tl_reader.gen = c->gen;
	tl_reader.rec = &r->rec;
	return &r->rec;
}

void cache_read_begin(struct cache *c)
{
	ck_epoch_begin(reader_record(c), NULL);
}

void cache_read_end(struct cache *c)
{
	ck_epoch_end(reader_record(c), NULL);
}

void cache__readers_free(struct cache *c)
{
	struct reader_rec *r, *next;

	for (r = c->readers; r; r = next) {
		next = r->next;
		free(r);
	}
	c->readers = NULL;
}
