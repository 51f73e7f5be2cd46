/* strbuf.h: a growable string for generated kernel source and long messages, and NumPy's spelling
 * of shapes in messages. Shared by the engines (ufunc.c, gufunc.c, reduce.c) and the planner. */
#ifndef CF_STRBUF_H
#define CF_STRBUF_H

#include <stddef.h>
#include <stdint.h>

/* Zero-initialise ({0}) to start. On an allocation failure `failed` is set and later appends do
 * nothing; the owner frees `s` with cf_free either way. */
typedef struct cf_strbuf {
    char *s;
    size_t len, cap;
    int failed;
} cf_strbuf;

/* Append printf-style. */
void cf_strbuf_printf(cf_strbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* NumPy's spelling of a shape in messages: (2,3), (4,), (). Truncated to cap. */
void cf_format_shape(char *buf, size_t cap, int ndim, const int64_t *shape);

#endif
