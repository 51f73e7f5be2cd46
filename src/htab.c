/* htab.c: see htab.h. */
#include "htab.h"

#include <string.h>

#include "alloc.h"

static void put(cf_htab_slot *slots, size_t cap, uint64_t hash, void *item)
{
    size_t mask = cap - 1, j = (size_t)hash & mask;
    while (slots[j].item)
        j = (j + 1) & mask;
    slots[j].hash = hash;
    slots[j].item = item;
}

cf_status cf_htab_insert(cf_htab *t, uint64_t hash, void *item)
{
    if (!item)
        return CF_ERR_INVALID;
    if ((t->count + 1) * 2 > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        cf_htab_slot *s = cf_calloc(cap, sizeof *s);
        if (!s)
            return CF_ERR_NOMEM;
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i].item)
                put(s, cap, t->slots[i].hash, t->slots[i].item);
        cf_free(t->slots);
        t->slots = s;
        t->cap = cap;
    }
    put(t->slots, t->cap, hash, item);
    t->count++;
    return CF_OK;
}

void cf_htab_clear(cf_htab *t)
{
    cf_free(t->slots);
    memset(t, 0, sizeof *t);
}
