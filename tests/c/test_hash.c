/* test_hash.c: SHA-256 against the FIPS 180-2 / NIST test vectors, incremental feeding, and the
 * length-prefixed field framing shared with tools/embed_templates.py. */
#include "check.h"
#include "hash.h"

static void hex_of(const void *data, size_t n, char out[65]) { cf_sha256_hex(data, n, out); }

static void test_standard_vectors(void)
{
    char hex[65];
    hex_of("", 0, hex);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
    hex_of("abc", 3, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(m448, strlen(m448), hex);
    CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0);
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnop"
                       "qklmnopqrlmnopqrsmnopqrstnopqrstu";
    hex_of(m896, strlen(m896), hex);
    CHECK(strcmp(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1") == 0);
}

static void test_million_a(void)
{
    /* Fed in uneven pieces, so the block-buffering paths of update() are all taken. */
    char chunk[997];
    memset(chunk, 'a', sizeof chunk);
    cf_sha256 h;
    cf_sha256_init(&h);
    size_t left = 1000000;
    size_t step = 1;
    while (left) {
        size_t n = step < left ? step : left;
        if (n > sizeof chunk)
            n = sizeof chunk;
        cf_sha256_update(&h, chunk, n);
        left -= n;
        step = step * 7 % 1000 + 1;
    }
    unsigned char d[32];
    char hex[65];
    cf_sha256_final(&h, d);
    cf_hex_encode(d, 32, hex);
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);
}

static void test_every_split_matches_one_shot(void)
{
    unsigned char data[1280];
    for (int i = 0; i < 1280; i++)
        data[i] = (unsigned char)(i & 255);
    char want[65];
    hex_of(data, sizeof data, want);
    CHECK(strcmp(want, "d414b085826eb06778483ba35564dc849e643359f69ed9747878ba6e54985bed") == 0);
    /* Lengths around the 55/56/64-byte padding boundaries, split at every point. */
    for (size_t len = 50; len <= 130; len++) {
        char one[65];
        hex_of(data, len, one);
        for (size_t cut = 0; cut <= len; cut++) {
            cf_sha256 h;
            unsigned char d[32];
            char two[65];
            cf_sha256_init(&h);
            cf_sha256_update(&h, data, cut);
            cf_sha256_update(&h, data + cut, len - cut);
            cf_sha256_final(&h, d);
            cf_hex_encode(d, 32, two);
            if (strcmp(one, two) != 0) {
                CHECK(strcmp(one, two) == 0);
                return;
            }
        }
    }
}

static void digest_fields(const char *a, const char *b, char hex[65])
{
    cf_sha256 h;
    unsigned char d[32];
    cf_sha256_init(&h);
    cf_sha256_field(&h, a, strlen(a));
    cf_sha256_field(&h, b, strlen(b));
    cf_sha256_final(&h, d);
    cf_hex_encode(d, 32, hex);
}

static void test_field_framing(void)
{
    /* sha256(b"\x03" + 7 * b"\x00" + b"abc"), as embed_templates.py frames each field. */
    cf_sha256 h;
    unsigned char d[32];
    char hex[65];
    cf_sha256_init(&h);
    cf_sha256_field(&h, "abc", 3);
    cf_sha256_final(&h, d);
    cf_hex_encode(d, 32, hex);
    CHECK(strcmp(hex, "ce91dc5eec0139adf091900d225971d6ad246a845bad791b5693a9d0d55dd391") == 0);

    char x[65], y[65], z[65];
    digest_fields("ab", "c", x);
    digest_fields("a", "bc", y);
    digest_fields("ab", "c", z);
    CHECK(strcmp(x, y) != 0);
    CHECK(strcmp(x, z) == 0);
}

static void test_hex_encode(void)
{
    unsigned char b[4] = {0x00, 0x0f, 0xa0, 0xff};
    char hex[9];
    cf_hex_encode(b, 4, hex);
    CHECK(strcmp(hex, "000fa0ff") == 0);
}

int main(void)
{
    RUN(test_standard_vectors);
    RUN(test_million_a);
    RUN(test_every_split_matches_one_shot);
    RUN(test_field_framing);
    RUN(test_hex_encode);
    return SUMMARY();
}
