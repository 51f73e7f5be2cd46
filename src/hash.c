/* hash.c: SHA-256 (FIPS 180-4), used for cache keys, disk-entry checksums and the template bundle
 * hash. Plain portable C: the inputs are small (sources of a few KB, images of tens of KB). */
#include "hash.h"

#include <string.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress(uint32_t state[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
}

void cf_sha256_init(cf_sha256 *h)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(h->state, iv, sizeof iv);
    h->length = 0;
    h->fill = 0;
}

void cf_sha256_update(cf_sha256 *h, const void *data, size_t n)
{
    const unsigned char *p = data;
    h->length += n;
    if (h->fill) {
        size_t take = 64 - h->fill < n ? 64 - h->fill : n;
        memcpy(h->block + h->fill, p, take);
        h->fill += take;
        p += take;
        n -= take;
        if (h->fill < 64)
            return;
        compress(h->state, h->block);
        h->fill = 0;
    }
    for (; n >= 64; p += 64, n -= 64)
        compress(h->state, p);
    if (n) {
        memcpy(h->block, p, n);
        h->fill = n;
    }
}

/* The prefix is the length as 8 little-endian bytes: the same framing tools/embed_templates.py uses
 * for the template bundle hash, so both sides can be checked against each other. */
void cf_sha256_field(cf_sha256 *h, const void *data, size_t n)
{
    unsigned char len[8];
    uint64_t v = n;
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(v >> (8 * i));
    cf_sha256_update(h, len, sizeof len);
    cf_sha256_update(h, data, n);
}

void cf_sha256_final(cf_sha256 *h, unsigned char digest[32])
{
    uint64_t bits = h->length * 8;
    unsigned char pad = 0x80;
    /* update() would count the padding into length; bits was taken before. */
    cf_sha256_update(h, &pad, 1);
    unsigned char zero[64] = {0};
    size_t zeros = (h->fill <= 56) ? 56 - h->fill : 64 + 56 - h->fill;
    cf_sha256_update(h, zero, zeros);
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(bits >> (56 - 8 * i));
    cf_sha256_update(h, len, 8);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (unsigned char)(h->state[i] >> 24);
        digest[4 * i + 1] = (unsigned char)(h->state[i] >> 16);
        digest[4 * i + 2] = (unsigned char)(h->state[i] >> 8);
        digest[4 * i + 3] = (unsigned char)h->state[i];
    }
}

void cf_hex_encode(const unsigned char *bytes, size_t n, char *hex_out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        hex_out[2 * i] = digits[bytes[i] >> 4];
        hex_out[2 * i + 1] = digits[bytes[i] & 15];
    }
    hex_out[2 * n] = '\0';
}

void cf_sha256_hex(const void *data, size_t n, char hex[65])
{
    cf_sha256 h;
    unsigned char d[32];
    cf_sha256_init(&h);
    cf_sha256_update(&h, data, n);
    cf_sha256_final(&h, d);
    cf_hex_encode(d, 32, hex);
}

uint64_t cf_hash64(const void *data, size_t n)
{
    const unsigned char *b = data;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, b + i, n - i);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    /* final mix: the table uses the low bits */
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    return h;
}
