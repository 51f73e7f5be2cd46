/* hash.h: SHA-256, for cache keys, entry checksums and the template bundle hash; cf_hash64, the
 * fast non-cryptographic hash of the in-memory tables (htab.h). */
#ifndef CF_HASH_H
#define CF_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct cf_sha256 {
    uint32_t state[8];
    uint64_t length;      /* bytes hashed so far */
    unsigned char block[64];
    size_t fill;          /* bytes in block */
} cf_sha256;

void cf_sha256_init(cf_sha256 *h);
void cf_sha256_update(cf_sha256 *h, const void *data, size_t n);
/* Feed a length-prefixed field, so that ("ab","c") and ("a","bc") hash differently. */
void cf_sha256_field(cf_sha256 *h, const void *data, size_t n);
void cf_sha256_final(cf_sha256 *h, unsigned char digest[32]);
/* One-shot digest as 64 lowercase hex characters plus NUL. */
void cf_sha256_hex(const void *data, size_t n, char hex[65]);
void cf_hex_encode(const unsigned char *bytes, size_t n, char *hex_out);
/* A 64-bit hash of n bytes for hash tables (not for anything an attacker chooses to collide):
 * 8 bytes at a time (the kernel tables hash 100-byte keys on every launch), then the tail. */
uint64_t cf_hash64(const void *data, size_t n);

#endif
