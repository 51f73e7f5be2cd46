/* ktable.c: see ktable.h. */
#include "ktable.h"

#include <string.h>

#include "alloc.h"
#include "error.h"
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
    e->state = fn ? CF_KENTRY_READY : CF_KENTRY_BUILDING;
    cf_status st = cf_htab_insert(&t->map, cf_hash64(key, len), e);
    if (st)
        cf_free(e);
    else if (fn)
        t->ready++;
    return st;
}

void cf_ktable_init(cf_ktable *t)
{
    memset(t, 0, sizeof *t);
    pthread_cond_init(&t->built, NULL);
}

cf_status cf_ktable_get(cf_ktable *t, pthread_mutex_t *lock, const void *key, size_t len,
                        int only_ready, cf_kbuild_fn build, void *ctx, cf_kentry *out)
{
    pthread_mutex_lock(lock);
    cf_kentry *e;
    for (;;) {
        e = (cf_kentry *)cf_ktable_find_bytes(t, key, len);
        if (e && e->state == CF_KENTRY_READY) {
            *out = *e;
            pthread_mutex_unlock(lock);
            return CF_OK;
        }
        if (only_ready) {
            memset(out, 0, sizeof *out);
            pthread_mutex_unlock(lock);
            return CF_OK;
        }
        if (!e || e->state == CF_KENTRY_FAILED)
            break;
        pthread_cond_wait(&t->built, lock); /* another thread builds this key */
    }
    if (!e) {
        /* a placeholder, so that others asking for this key wait instead of compiling it too;
         * entries are never removed, so `e` stays valid without the lock */
        cf_status st = cf_ktable_insert_bytes(t, key, len, NULL, 0);
        if (st) {
            pthread_mutex_unlock(lock);
            return st;
        }
        e = (cf_kentry *)cf_ktable_find_bytes(t, key, len);
    }
    e->state = CF_KENTRY_BUILDING;
    pthread_mutex_unlock(lock);

    cf_function *fn = NULL;
    int64_t aux = 0;
    cf_status st = build(ctx, &fn, &aux);

    pthread_mutex_lock(lock);
    if (!st && fn) {
        e->fn = fn;
        e->aux = aux;
        e->state = CF_KENTRY_READY;
        t->ready++;
        *out = *e;
    } else {
        e->state = CF_KENTRY_FAILED;
        if (!st)
            st = cf_error_set(CF_ERR_INVALID, "a kernel build returned no function");
    }
    pthread_cond_broadcast(&t->built);
    pthread_mutex_unlock(lock);
    return st;
}

void cf_ktable_clear(cf_ktable *t)
{
    for (size_t i = 0; i < t->map.cap; i++)
        cf_free(t->map.slots[i].item);
    cf_htab_clear(&t->map);
    t->ready = 0;
    pthread_cond_destroy(&t->built);
}
