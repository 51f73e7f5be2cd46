/* ktable.h: a per-object table of compiled kernels, keyed by the bytes of a specialisation key:
 * a zero-filled binary struct (ufunc.c) or a key's text with its NUL (gufunc.c, reduce.c). Built
 * on htab.h. Not thread-safe: the owner holds its lock around every call. */
#ifndef CF_KTABLE_H
#define CF_KTABLE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cufunc/compile.h"
#include "htab.h"

/* An entry (the owner may copy one out by value; key then still points into the table). */
typedef struct cf_kentry {
    const void *key;    /* the key's bytes, owned by the table */
    size_t len;
    cf_function *fn;
    int64_t aux;        /* the owner's launch fact for this kernel (e.g. resident blocks) */
} cf_kentry;

/* Zero-initialise ({0}) to start; cf_ktable_clear frees it. */
typedef struct cf_ktable {
    cf_htab map;
} cf_ktable;

/* The entry for the `len` bytes at `key`, or NULL. */
const cf_kentry *cf_ktable_find_bytes(const cf_ktable *t, const void *key, size_t len);
/* Add an entry (the key is copied; it must not be present). CF_ERR_NOMEM on failure. */
cf_status cf_ktable_insert_bytes(cf_ktable *t, const void *key, size_t len, cf_function *fn,
                                 int64_t aux);
/* Text keys: the string with its NUL. */
static inline const cf_kentry *cf_ktable_find(const cf_ktable *t, const char *key)
{
    return cf_ktable_find_bytes(t, key, strlen(key) + 1);
}
static inline cf_status cf_ktable_insert(cf_ktable *t, const char *key, cf_function *fn,
                                         int64_t aux)
{
    return cf_ktable_insert_bytes(t, key, strlen(key) + 1, fn, aux);
}
static inline size_t cf_ktable_count(const cf_ktable *t) { return t->map.count; }
void cf_ktable_clear(cf_ktable *t);

#endif
