/* alloc.h: every host allocation of cufunc goes through these, so tests can fail the n-th one
 * (src/testing.h). A failure sets CF_ERR_NOMEM with the size asked for. */
#ifndef CF_ALLOC_H
#define CF_ALLOC_H

#include <stddef.h>

void *cf_malloc(size_t n);
void *cf_calloc(size_t count, size_t size);
/* On failure the old block is left as it was. */
void *cf_realloc(void *p, size_t n);
/* No-op on NULL. */
void cf_free(void *p);
char *cf_strdup(const char *s);

#endif
