/* test_htab.c: the core's one hash table (htab.h) and the kernel table built on it (ktable.h):
 * every item found after the table grew, misses, colliding hashes told apart by the key, binary
 * and text keys, keys that differ only in their last bytes, clear; and an allocation failure
 * leaves a table as it was. */
#include "check.h"
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
    cf_ktable t = {0};
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
        CHECK_OK(cf_ktable_insert(&t, key, NULL, i));
    }
    CHECK(cf_ktable_count(&t) == 103);
    e = cf_ktable_find(&t, "k57");
    CHECK(e && e->aux == 57);
    CHECK(cf_ktable_find_bytes(&t, &k2, sizeof k2)->aux == 22);
    /* an allocation failure adds nothing */
    cf_test_fail_alloc_after(1, 1);
    CHECK_STATUS(cf_ktable_insert(&t, "new", NULL, 1), CF_ERR_NOMEM);
    cf_test_fail_alloc_after(0, 0);
    CHECK(cf_ktable_find(&t, "new") == NULL && cf_ktable_count(&t) == 103);
    cf_ktable_clear(&t);
    CHECK(cf_ktable_count(&t) == 0 && cf_ktable_find(&t, "k57") == NULL);
}

int main(void)
{
    RUN(test_htab_grows_and_finds);
    RUN(test_htab_nomem_keeps_table);
    RUN(test_hash64);
    RUN(test_ktable_keys);
    return SUMMARY();
}
