/* ktable.h: a per-object table of compiled kernels, keyed by the specialisation key's text
 * (gufunc.c, reduce.c). Not thread-safe: the owner holds its lock around every call. */
#ifndef CF_KTABLE_H
#define CF_KTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "cufunc/compile.h"

typedef struct cf_kentry {
    char *key;          /* NULL: an empty slot */
    cf_function *fn;
    int64_t aux;        /* the owner's launch fact for this kernel (e.g. resident blocks) */
} cf_kentry;

/* Zero-initialise ({0}) to start; cf_ktable_clear frees it. */
typedef struct cf_ktable {
    cf_kentry *slots;
    size_t cap, count;
} cf_ktable;

/* The entry for `key`, or NULL. */
const cf_kentry *cf_ktable_find(const cf_ktable *t, const char *key);
/* Add an entry (the key is copied; it must not be present). CF_ERR_NOMEM on failure. */
cf_status cf_ktable_insert(cf_ktable *t, const char *key, cf_function *fn, int64_t aux);
void cf_ktable_clear(cf_ktable *t);

#endif
