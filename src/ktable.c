/* ktable.c: see ktable.h. */
#include "ktable.h"

#include <string.h>

#include "alloc.h"
#include "hash.h"

typedef struct key_ref {
    const void *bytes;
    size_t len;
} key_ref;

static int same_key(const void *item, const void *key)
{
    const cf_kentry *e = item;
    const key_ref *k = key;
    return e->len == k->len && memcmp(e->key, k->bytes, k->len) == 0;
}

const cf_kentry *cf_ktable_find_bytes(const cf_ktable *t, const void *key, size_t len)
{
    key_ref k = {key, len};
    return cf_htab_find(&t->map, cf_hash64(key, len), same_key, &k);
}

cf_status cf_ktable_insert_bytes(cf_ktable *t, const void *key, size_t len, cf_function *fn,
                                 int64_t aux)
{
    if (len > SIZE_MAX - sizeof(cf_kentry))
        return CF_ERR_NOMEM;
    /* one allocation: the entry, then the key's bytes */
    cf_kentry *e = cf_malloc(sizeof *e + len);
    if (!e)
        return CF_ERR_NOMEM;
    memcpy(e + 1, key, len);
    e->key = e + 1;
    e->len = len;
    e->fn = fn;
    e->aux = aux;
    cf_status st = cf_htab_insert(&t->map, cf_hash64(key, len), e);
    if (st)
        cf_free(e);
    return st;
}

void cf_ktable_clear(cf_ktable *t)
{
    for (size_t i = 0; i < t->map.cap; i++)
        cf_free(t->map.slots[i].item);
    cf_htab_clear(&t->map);
}
