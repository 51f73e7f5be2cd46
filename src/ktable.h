/* ktable.h: the kernel cache of every engine (ufunc.c, gufunc.c, reduce.c, at.c): a per-object
 * table of compiled kernels, keyed by the bytes of a specialisation key: every engine's is a
 * zero-filled binary struct of what its kernel's source depends on (ufunc.c uf_spec, gufunc.c
 * gu_spec, reduce.c red_key, at.c at_key), built on htab.h. cf_ktable_get is the one lookup: a
 * kernel not in the table is built (generated, compiled, loaded) by the first caller that asks,
 * with the owner's lock released, while other callers asking for the same key wait for it and
 * callers asking for other keys go on; so a compile never holds the engine's lock and two threads
 * never compile the same key. The other functions need the owner's lock held. */
#ifndef CF_KTABLE_H
#define CF_KTABLE_H

#include <pthread.h>
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
    int state;          /* CF_KENTRY_READY, _BUILDING (one caller builds it), _FAILED (the last
                           build failed: the next caller tries again) */
} cf_kentry;

enum { CF_KENTRY_READY = 0, CF_KENTRY_BUILDING = 1, CF_KENTRY_FAILED = 2 };

/* cf_ktable_init starts one (in the owner's create function); cf_ktable_clear frees it. */
typedef struct cf_ktable {
    cf_htab map;
    size_t ready;          /* entries with a kernel */
    pthread_cond_t built;  /* broadcast when a build ends */
} cf_ktable;

void cf_ktable_init(cf_ktable *t);

/* Builds the kernel of a key, called without the owner's lock (it may take it to read the
 * owner's state): the function and its launch fact, or an error (cf_error_set). */
typedef cf_status (*cf_kbuild_fn)(void *ctx, cf_function **fn, int64_t *aux);

/* The entry for `key`: from the table, else built once by `build(ctx, ...)` (see above); with
 * `only_ready`, never builds: out->fn is NULL when the kernel is not ready. `lock` is the owner's
 * mutex, NOT held by the caller. A failed build returns its status to the caller that built and
 * leaves nothing in the table; callers that waited for it try again themselves. */
cf_status cf_ktable_get(cf_ktable *t, pthread_mutex_t *lock, const void *key, size_t len,
                        int only_ready, cf_kbuild_fn build, void *ctx, cf_kentry *out);

/* The entry for the `len` bytes at `key`, or NULL. */
const cf_kentry *cf_ktable_find_bytes(const cf_ktable *t, const void *key, size_t len);
/* Add an entry (the key is copied; it must not be present). CF_ERR_NOMEM on failure. */
cf_status cf_ktable_insert_bytes(cf_ktable *t, const void *key, size_t len, cf_function *fn,
                                 int64_t aux);
/* Text keys (the string with its NUL), for tests and tools; the engines key by structs. */
static inline const cf_kentry *cf_ktable_find(const cf_ktable *t, const char *key)
{
    return cf_ktable_find_bytes(t, key, strlen(key) + 1);
}
static inline cf_status cf_ktable_insert(cf_ktable *t, const char *key, cf_function *fn,
                                         int64_t aux)
{
    return cf_ktable_insert_bytes(t, key, strlen(key) + 1, fn, aux);
}
/* Kernels ready in the table. */
static inline size_t cf_ktable_count(const cf_ktable *t) { return t->ready; }
void cf_ktable_clear(cf_ktable *t);

#endif
