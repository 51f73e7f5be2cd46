/* htab.h: the one hash table of the core: open addressing, linear probing, at most half full,
 * items by pointer. The owner keeps the items (they never move, so pointers to them stay valid
 * while the table grows), computes each item's 64-bit hash, and holds its own lock around every
 * call: the kernel tables (ktable.c: ufunc.c, gufunc.c, reduce.c), the image map (cache.c) and
 * the module map (module.c). Nothing is ever removed but everything at once (cf_htab_clear). */
#ifndef CF_HTAB_H
#define CF_HTAB_H

#include <stddef.h>
#include <stdint.h>

#include "cufunc/status.h"

typedef struct cf_htab_slot {
    uint64_t hash;
    void *item;         /* NULL: an empty slot */
} cf_htab_slot;

/* Zero-initialise ({0}) to start. To visit every item: slots[i].item for i < cap, when not NULL. */
typedef struct cf_htab {
    cf_htab_slot *slots;
    size_t cap, count;  /* cap is 0 or a power of two */
} cf_htab;

/* The first item with this hash for which same(item, key) holds, or NULL. Inline, so that the
 * caller's `same` (a static function) is inlined too: lookups are on the launch path. */
static inline void *cf_htab_find(const cf_htab *t, uint64_t hash,
                                 int (*same)(const void *item, const void *key), const void *key)
{
    if (!t->cap)
        return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        const cf_htab_slot *s = &t->slots[i];
        if (!s->item)
            return NULL;
        if (s->hash == hash && same(s->item, key))
            return s->item;
    }
}

/* Add `item` (not NULL; the caller has checked that its key is not there). Grows the table first:
 * CF_ERR_NOMEM leaves it as it was. */
cf_status cf_htab_insert(cf_htab *t, uint64_t hash, void *item);
/* Free the slots (not the items) and zero the table. */
void cf_htab_clear(cf_htab *t);

#endif
