/* pinblocks.h: the cache of page-locked blocks for new host results (internal; see pinblocks.c).
 * The public face is cf_hostpipe_result_alloc/free/stats (include/cufunc/ufunc.h). */
#ifndef CF_PINBLOCKS_H
#define CF_PINBLOCKS_H

#include <stddef.h>

/* Page-locked buffers (result blocks, the pipeline's slot buffers) grow in steps of this, so calls
 * of slightly different sizes reuse them. */
#define CF_PINBLOCK_STEP ((size_t)1 << 20)

/* 1 when a block of nbytes is cached already or a request of its size (in steps) was among the
 * last 16 asked; records this request either way (the second request of a size gets a block). */
int cf_pinblocks_seen(size_t nbytes);

/* Free the cached blocks and forget the sizes seen (blocks handed out stay valid and come back
 * to the cache later): a new configuration starts clean. */
void cf_pinblocks_forget(void);

#endif
