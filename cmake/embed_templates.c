/* embed_templates.c: the CMake build's template embedder, so that building libcufunc needs no
 * Python. It writes exactly what tools/embed_templates.py (setup.py's embedder) writes, byte for
 * byte: the bytes of every template file, its include name and the bundle hash, a SHA-256 over
 * every (name, bytes) pair, each length-prefixed (cf_sha256_field), in sorted name order. The two
 * must agree because the hash is part of every kernel cache key: the Python extension and
 * libcufunc built from the same templates share cache entries. tests/c/check_embed.cmake compares
 * the two outputs when Python is available.
 *
 * Usage: embed_templates OUTPUT.c TEMPLATES_DIR NAME...
 * NAMEs are paths relative to TEMPLATES_DIR with '/' separators ("cufunc/runtime.cuh"); they are
 * sorted here (byte order, which is Python's code-point order for UTF-8). The output is rewritten
 * only when its content changes, so builds stay incremental. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

typedef struct {
    char *p;
    size_t len, cap;
} buf;

static void die(const char *what, const char *arg)
{
    fprintf(stderr, "embed_templates: %s %s\n", what, arg ? arg : "");
    exit(1);
}

static void put(buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + n + 1)
            cap *= 2;
        if (!(b->p = realloc(b->p, cap)))
            die("out of memory", NULL);
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

/* `fmt` holds one %lld */
static void putn(buf *b, const char *fmt, long long v)
{
    char tmp[256];
    int n = snprintf(tmp, sizeof tmp, fmt, v);
    put(b, tmp, (size_t)n);
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open", path);
    buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        put(&b, chunk, n);
    if (ferror(f))
        die("cannot read", path);
    fclose(f);
    if (!b.p)
        put(&b, "", 0);
    *len = b.len;
    return (unsigned char *)b.p;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        die("usage: embed_templates OUTPUT.c TEMPLATES_DIR NAME...", NULL);
    const char *out = argv[1], *dir = argv[2];
    int n = argc - 3;
    char **names = argv + 3;
    qsort(names, (size_t)n, sizeof *names, by_name);
    size_t *lens = calloc((size_t)n + 1, sizeof *lens);
    if (!lens)
        die("out of memory", NULL);
    cf_sha256 h;
    cf_sha256_init(&h);
    buf text = {0};
    puts_(&text, "/* Generated from templates/ by tools/embed_templates.py (setup.py) or "
                 "cmake/embed_templates.c (CMake). Do not edit. */\n#include <stddef.h>\n\n");
    for (int i = 0; i < n; i++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path)
            die("path too long:", names[i]);
        size_t len;
        unsigned char *data = read_file(path, &len);
        lens[i] = len;
        cf_sha256_field(&h, names[i], strlen(names[i]));
        cf_sha256_field(&h, data, len);
        putn(&text, "static const char tpl_%lld[] = {  /* ", i);
        puts_(&text, names[i]);
        puts_(&text, " */\n");
        /* the bytes and a terminating NUL, 20 to a line, in decimal */
        for (size_t k = 0; k <= len; k += 20) {
            puts_(&text, "    ");
            for (size_t j = k; j < k + 20 && j <= len; j++)
                putn(&text, "%lld,", j < len ? data[j] : 0);
            puts_(&text, "\n");
        }
        puts_(&text, "};\n");
        free(data);
    }
    putn(&text, "\nconst int cf_templates_n = %lld;\n", n);
    puts_(&text, "const char *const cf_templates_names[] = {");
    for (int i = 0; i < n; i++) {
        puts_(&text, i ? ", \"" : "\"");
        puts_(&text, names[i]);
        puts_(&text, "\"");
    }
    puts_(&text, n ? "};\n" : "0};\n");
    puts_(&text, "const char *const cf_templates_sources[] = {");
    for (int i = 0; i < n; i++)
        putn(&text, i ? ", tpl_%lld" : "tpl_%lld", i);
    puts_(&text, n ? "};\n" : "0};\n");
    puts_(&text, "const size_t cf_templates_lengths[] = {");
    for (int i = 0; i < n; i++)
        putn(&text, i ? ", %lld" : "%lld", (long long)lens[i]);
    puts_(&text, n ? "};\n" : "0};\n");
    unsigned char digest[32];
    char hex[65];
    cf_sha256_final(&h, digest);
    cf_hex_encode(digest, 32, hex);
    hex[64] = '\0';
    puts_(&text, "const char cf_templates_bundle_hash[] = \"");
    puts_(&text, hex);
    puts_(&text, "\";\n");

    /* rewrite only on change */
    FILE *f = fopen(out, "rb");
    if (f) {
        fclose(f);
        size_t old_len;
        unsigned char *old = read_file(out, &old_len);
        int same = old_len == text.len && memcmp(old, text.p, old_len) == 0;
        free(old);
        if (same)
            return 0;
    }
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", out) >= (int)sizeof tmp)
        die("path too long:", out);
    f = fopen(tmp, "wb");
    if (!f || fwrite(text.p, 1, text.len, f) != text.len || fclose(f) != 0)
        die("cannot write", tmp);
    if (rename(tmp, out) != 0)
        die("cannot rename to", out);
    return 0;
}
