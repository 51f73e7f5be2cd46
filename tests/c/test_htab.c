/* test_htab.c: the core's one hash table (htab.h) and the kernel table built on it (ktable.h):
 * every item found after the table grew, misses, colliding hashes told apart by the key, binary
 * and text keys, keys that differ only in their last bytes, clear; and an allocation failure
 * leaves a table as it was; cf_ktable_get's one build per key, outside the owner's lock. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "error.h"
#include "hash.h"
#include "htab.h"
#include "ktable.h"
#include "testing.h"

static int same_int(const void *item, const void *key)
{
    return *(const int *)item == *(const int *)key;
}

static void test_htab_grows_and_finds(void)
{
    enum { N = 1000 };
    static int items[N];
    cf_htab t = {0};
    int k = 5;
    CHECK(cf_htab_find(&t, 1, same_int, &k) == NULL); /* empty */
    for (int i = 0; i < N; i++) {
        items[i] = i;
        /* every 4th hash collides with the previous one's: the key tells them apart */
        uint64_t h = cf_hash64(&items[i % 4 == 1 ? i - 1 : i], sizeof(int));
        CHECK_OK(cf_htab_insert(&t, h, &items[i]));
    }
    CHECK(t.count == N && t.cap >= 2 * N && (t.cap & (t.cap - 1)) == 0);
    int found = 0;
    for (int i = 0; i < N; i++) {
        uint64_t h = cf_hash64(&items[i % 4 == 1 ? i - 1 : i], sizeof(int));
        found += cf_htab_find(&t, h, same_int, &i) == &items[i];
    }
    CHECK(found == N);
    int missing = N + 7;
    CHECK(cf_htab_find(&t, cf_hash64(&missing, sizeof missing), same_int, &missing) == NULL);
    size_t visited = 0;
    for (size_t i = 0; i < t.cap; i++)
        visited += t.slots[i].item != NULL;
    CHECK(visited == N);
    CHECK_STATUS(cf_htab_insert(&t, 1, NULL), CF_ERR_INVALID);
    cf_htab_clear(&t);
    CHECK(t.cap == 0 && t.count == 0 && t.slots == NULL);
    CHECK(cf_htab_find(&t, 1, same_int, &k) == NULL);
}

static void test_htab_nomem_keeps_table(void)
{
    static int items[17];
    for (int i = 0; i < 17; i++)
        items[i] = i;
    cf_htab t = {0};
    for (int i = 0; i < 8; i++) /* 16 slots, half full: the next insert grows */
        CHECK_OK(cf_htab_insert(&t, (uint64_t)i * 77, &items[i]));
    cf_test_fail_alloc_after(1, 1);
    CHECK_STATUS(cf_htab_insert(&t, 999, &items[8]), CF_ERR_NOMEM);
    cf_test_fail_alloc_after(0, 0);
    CHECK(t.count == 8 && t.cap == 16);
    int found = 0;
    for (int i = 0; i < 8; i++)
        found += cf_htab_find(&t, (uint64_t)i * 77, same_int, &i) == &items[i];
    CHECK(found == 8);
    CHECK_OK(cf_htab_insert(&t, 999, &items[8]));
    CHECK(t.count == 9 && t.cap == 32);
    cf_htab_clear(&t);
}

static void test_hash64(void)
{
    unsigned char a[13] = {0}, b[13] = {0};
    b[12] = 1; /* differs in the tail after the last full word */
    CHECK(cf_hash64(a, 13) != cf_hash64(b, 13));
    CHECK(cf_hash64(a, 12) != cf_hash64(a, 13)); /* the length counts */
    CHECK(cf_hash64("abc", 3) == cf_hash64("abc", 3));
}

static void test_ktable_keys(void)
{
    cf_ktable t;
    cf_ktable_init(&t);
    struct key { int32_t a; uint8_t b[20]; } k1 = {0}, k2 = {0};
    k1.a = 3;
    k2.a = 3;
    k2.b[19] = 1; /* equal but for the last byte */
    CHECK(cf_ktable_find_bytes(&t, &k1, sizeof k1) == NULL);
    CHECK_OK(cf_ktable_insert_bytes(&t, &k1, sizeof k1, (cf_function *)0x10, 11));
    CHECK_OK(cf_ktable_insert_bytes(&t, &k2, sizeof k2, (cf_function *)0x20, 22));
    CHECK_OK(cf_ktable_insert(&t, "flat.4.f4", (cf_function *)0x30, 33));
    const cf_kentry *e = cf_ktable_find_bytes(&t, &k2, sizeof k2);
    CHECK(e && e->fn == (cf_function *)0x20 && e->aux == 22 && e->len == sizeof k2);
    e = cf_ktable_find_bytes(&t, &k1, sizeof k1);
    CHECK(e && e->fn == (cf_function *)0x10 && memcmp(e->key, &k1, sizeof k1) == 0);
    CHECK(cf_ktable_find_bytes(&t, &k1, sizeof k1 - 1) == NULL); /* a prefix is another key */
    e = cf_ktable_find(&t, "flat.4.f4");
    CHECK(e && e->aux == 33);
    CHECK(cf_ktable_find(&t, "flat.4") == NULL);
    for (int i = 0; i < 100; i++) { /* grow: the entries found before stay found */
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        CHECK_OK(cf_ktable_insert(&t, key, (cf_function *)(intptr_t)(i + 1), i));
    }
    CHECK(cf_ktable_count(&t) == 103);
    e = cf_ktable_find(&t, "k57");
    CHECK(e && e->aux == 57);
    CHECK(cf_ktable_find_bytes(&t, &k2, sizeof k2)->aux == 22);
    /* an allocation failure adds nothing */
    cf_test_fail_alloc_after(1, 1);
    CHECK_STATUS(cf_ktable_insert(&t, "new", (cf_function *)0x40, 1), CF_ERR_NOMEM);
    cf_test_fail_alloc_after(0, 0);
    CHECK(cf_ktable_find(&t, "new") == NULL && cf_ktable_count(&t) == 103);
    cf_ktable_clear(&t);
    CHECK(cf_ktable_count(&t) == 0 && cf_ktable_find(&t, "k57") == NULL);
}

/* cf_ktable_get: one build per key however many threads ask at once; builds run without the
 * owner's lock (a build of one key does not stop a lookup or a build of another); a failed build
 * leaves nothing behind and the next caller builds again; only_ready never builds. */
typedef struct build_ctx {
    atomic_int calls;
    atomic_int fail;           /* the next build fails */
    atomic_int hold;           /* a build waits while this is set */
    atomic_int inside;         /* builds in progress */
    intptr_t fn;
} build_ctx;

static cf_status slow_build(void *ctx, cf_function **fn, int64_t *aux)
{
    build_ctx *c = ctx;
    atomic_fetch_add(&c->calls, 1);
    atomic_fetch_add(&c->inside, 1);
    struct timespec ts = {0, 20 * 1000 * 1000}; /* 20 ms: a compile's order of magnitude */
    nanosleep(&ts, NULL);
    while (atomic_load(&c->hold))
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    atomic_fetch_sub(&c->inside, 1);
    if (atomic_exchange(&c->fail, 0))
        return cf_error_set(CF_ERR_COMPILE, "injected build failure");
    *fn = (cf_function *)c->fn;
    *aux = 7;
    return CF_OK;
}

typedef struct getter {
    cf_ktable *t;
    pthread_mutex_t *lock;
    const char *key;
    build_ctx *ctx;
    cf_kentry got;
    cf_status st;
} getter;

static void *get_thread(void *arg)
{
    getter *g = arg;
    g->st = cf_ktable_get(g->t, g->lock, g->key, strlen(g->key) + 1, 0, slow_build, g->ctx,
                          &g->got);
    return NULL;
}

static void test_ktable_get_builds_once(void)
{
    enum { T = 8 };
    cf_ktable t;
    cf_ktable_init(&t);
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    build_ctx c = {.fn = 0x100};
    cf_kentry e;
    CHECK_OK(cf_ktable_get(&t, &lock, "k", 2, 1, slow_build, &c, &e)); /* only_ready */
    CHECK(e.fn == NULL && atomic_load(&c.calls) == 0 && cf_ktable_count(&t) == 0);

    pthread_t th[T];
    getter g[T];
    for (int i = 0; i < T; i++) {
        g[i] = (getter){&t, &lock, "k", &c, {0}, -99};
        CHECK(pthread_create(&th[i], NULL, get_thread, &g[i]) == 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK_OK(g[i].st);
        CHECK(g[i].got.fn == (cf_function *)0x100 && g[i].got.aux == 7);
    }
    CHECK(atomic_load(&c.calls) == 1);
    CHECK(cf_ktable_count(&t) == 1);

    /* a build of "slow" in progress (held) does not stop another key's lookup or build */
    build_ctx held = {.fn = 0x200};
    atomic_store(&held.hold, 1);
    getter gs = {&t, &lock, "slow", &held, {0}, -99};
    CHECK(pthread_create(&th[0], NULL, get_thread, &gs) == 0);
    while (atomic_load(&held.inside) == 0)
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    build_ctx other = {.fn = 0x300};
    CHECK_OK(cf_ktable_get(&t, &lock, "other", 6, 0, slow_build, &other, &e));
    CHECK(e.fn == (cf_function *)0x300 && atomic_load(&held.inside) == 1);
    CHECK_OK(cf_ktable_get(&t, &lock, "k", 2, 0, slow_build, &c, &e)); /* ready: no build */
    CHECK(e.fn == (cf_function *)0x100 && atomic_load(&c.calls) == 1);
    atomic_store(&held.hold, 0);
    pthread_join(th[0], NULL);
    CHECK_OK(gs.st);
    CHECK(gs.got.fn == (cf_function *)0x200);

    /* a failed build: its status to the caller, nothing ready, the next caller builds again */
    build_ctx f = {.fn = 0x400};
    atomic_store(&f.fail, 1);
    CHECK_STATUS(cf_ktable_get(&t, &lock, "f", 2, 0, slow_build, &f, &e), CF_ERR_COMPILE);
    CHECK_OK(cf_ktable_get(&t, &lock, "f", 2, 1, slow_build, &f, &e));
    CHECK(e.fn == NULL);
    size_t before = cf_ktable_count(&t);
    CHECK_OK(cf_ktable_get(&t, &lock, "f", 2, 0, slow_build, &f, &e));
    CHECK(e.fn == (cf_function *)0x400 && atomic_load(&f.calls) == 2);
    CHECK(cf_ktable_count(&t) == before + 1);
    cf_ktable_clear(&t);
}

int main(void)
{
    RUN(test_htab_grows_and_finds);
    RUN(test_htab_nomem_keeps_table);
    RUN(test_hash64);
    RUN(test_ktable_keys);
    RUN(test_ktable_get_builds_once);
    return SUMMARY();
}
