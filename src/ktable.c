/* ktable.c: see ktable.h. Open addressing, linear probing, at most half full. */
#include "ktable.h"

#include <string.h>

#include "alloc.h"

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

const cf_kentry *cf_ktable_find(const cf_ktable *t, const char *key)
{
    if (!t->cap)
        return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = fnv1a(key) & mask;; i = (i + 1) & mask) {
        if (!t->slots[i].key)
            return NULL;
        if (strcmp(t->slots[i].key, key) == 0)
            return &t->slots[i];
    }
}

cf_status cf_ktable_insert(cf_ktable *t, const char *key, cf_function *fn, int64_t aux)
{
    if ((t->count + 1) * 2 > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        cf_kentry *s = cf_calloc(cap, sizeof *s);
        if (!s)
            return CF_ERR_NOMEM;
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i].key) {
                size_t j = fnv1a(t->slots[i].key) & (cap - 1);
                while (s[j].key)
                    j = (j + 1) & (cap - 1);
                s[j] = t->slots[i];
            }
        cf_free(t->slots);
        t->slots = s;
        t->cap = cap;
    }
    char *k = cf_strdup(key);
    if (!k)
        return CF_ERR_NOMEM;
    size_t j = fnv1a(key) & (t->cap - 1);
    while (t->slots[j].key)
        j = (j + 1) & (t->cap - 1);
    t->slots[j].key = k;
    t->slots[j].fn = fn;
    t->slots[j].aux = aux;
    t->count++;
    return CF_OK;
}

void cf_ktable_clear(cf_ktable *t)
{
    for (size_t i = 0; i < t->cap; i++)
        cf_free(t->slots[i].key);
    cf_free(t->slots);
    memset(t, 0, sizeof *t);
}
