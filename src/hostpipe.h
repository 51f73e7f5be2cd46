/* hostpipe.h: the chunk planner of cf_ufunc_launch_host (public side: include/cufunc/ufunc.h).
 *
 * A ufunc call on host arrays is cut into chunks along the outermost axes of its coalesced loop;
 * each chunk's part of every host operand (its "slab") is packed into a pinned buffer, copied to
 * the device, computed, and copied back, on one of S streams in turn. Everything here is pure (no
 * GPU) so the chunk arithmetic and the packing can be tested on a CPU (tests/c/test_hostpipe.c).
 *
 * Terms. The plan coalesces the loop (cf_plan_elementwise: outputs first, so their memory order
 * decides the axis order) into `ndim` axes. The chunks cut axis `split` into ranges of `rows`
 * indices, one index of each axis outside it at a time; the axes inside it are whole. So a chunk
 * is the loop shape (rows, shape[split + 1], ..., shape[ndim - 1]) at some position, and a 1-d or
 * C-order call (one axis after coalescing) is cut into flat ranges. Each array operand is one of:
 *   STREAMED  a host array with a non-zero stride on some axis up to `split`: its slab moves with
 *             every chunk (outputs are always streamed);
 *   RESIDENT  a host input broadcast over every axis up to `split` (stride 0): the same for all
 *             chunks, uploaded once before the pipeline;
 *   DEVICE    an array already on the device: the chunk reads or writes it in place.
 * A slab is packed in the operand's own memory order (axes by decreasing |stride|, signs kept,
 * broadcast axes left at stride 0), so a slab that is contiguous in host memory is one memcpy
 * whatever its strides' signs or the loop's axis order, and the kernel reads the packed copy with
 * strides of the same shape as the host's.
 */
#ifndef CF_HOSTPIPE_H
#define CF_HOSTPIPE_H

#include <stddef.h>
#include <stdint.h>

#include "cufunc/plan.h"
#include "cufunc/ufunc.h"

/* Blocks of one chunk inside a slot's buffers start at multiples of this (vector loads want 16;
 * 256 is what the device allocator gives and keeps blocks on separate cache lines). */
#define CF_HOSTPIPE_ALIGN 256
/* The operands of one launch: nin + nout <= 32 (ufunc.h), and the mask. */
#define CF_HOSTPIPE_MAX_OPS 33
/* Whether operand i of the plan is an output. */
#define cf_hostpipe_is_output(p, i) ((i) >= (p)->nin && (i) < (p)->nin + (p)->nout)
/* Bounds of a set chunk size (cf_hostpipe_configure). */
#define CF_HOSTPIPE_MIN_CHUNK ((size_t)1 << 10)
#define CF_HOSTPIPE_MAX_CHUNK ((size_t)1 << 30)

enum { CF_HP_SCALAR = 0, CF_HP_DEVICE = 1, CF_HP_STREAMED = 2, CF_HP_RESIDENT = 3 };

typedef struct cf_hostpipe_plan {
    int nin, nout, nops;          /* nops = nin + nout + (mask ? 1 : 0); the mask is the last */
    unsigned char role[CF_HOSTPIPE_MAX_OPS];  /* CF_HP_* */
    size_t item[CF_HOSTPIPE_MAX_OPS];         /* itemsize (0 for scalars) */
    int ndim;                     /* coalesced loop axes, at least 1 (a 1-element loop gets one) */
    int64_t size;                 /* loop elements; the axes' extents are coalesced.shape */
    int split;                    /* the axis cut into ranges */
    int64_t rows;                 /* indices of `split` per chunk (the last range may be shorter) */
    int64_t per_outer;            /* ranges per index of the axes outside `split` */
    int64_t nchunks;              /* 0 for an empty loop */
    size_t chunk_target;          /* the bytes of the largest streamed operand a chunk aims at */
    size_t slot_bytes;            /* the packed blocks of a full chunk, each aligned */
    int nstreamed, nresident;
    /* 1 for a streamed host operand in page-locked memory (pinned already, or registered for the
     * call): its blocks are DMA'd straight between its own pages and the device, not packed; its
     * blocks come after the packed ones (see cf_hostpipe_layout). Set by cf_hostpipe_set_direct;
     * cf_hostpipe_plan_make clears it. */
    unsigned char direct[CF_HOSTPIPE_MAX_OPS];
    /* Operand i's strides over the coalesced axes are coalesced.strides[pidx[i]] (pidx -1 for
     * scalars). */
    int pidx[CF_HOSTPIPE_MAX_OPS];
    cf_plan coalesced;
} cf_hostpipe_plan;

/* Chunk sizing: with chunk_bytes 0, CF_HOSTPIPE_AUTO_CHUNK of the largest streamed operand, less
 * for operands under 2 * streams such chunks (so that small calls still overlap), never under
 * CF_HOSTPIPE_MIN_AUTO_CHUNK. */
#define CF_HOSTPIPE_AUTO_CHUNK ((size_t)8 << 20)
#define CF_HOSTPIPE_MIN_AUTO_CHUNK ((size_t)1 << 20)

/* Plan a launch. arrays[i] is operand i's view (NULL for a scalar input; outputs must be arrays),
 * arrays[nin + nout] the mask when has_where; a view with device < 0 is host memory. The loop is
 * (ndim, shape). chunk_bytes is the bytes of the largest streamed operand per chunk (0: automatic,
 * see above), `streams` the number of streams (for the automatic size). Refuses (CF_ERR_INVALID)
 * an output that is not of the loop's shape, that overlaps itself (a zero stride), or that
 * overlaps an input, the mask or another output unless it is the same view (NumPy would copy;
 * chunks cannot, as an earlier chunk's results would be read as a later chunk's inputs). */
cf_status cf_hostpipe_plan_make(cf_hostpipe_plan *p, int nin, int nout,
                                const cf_array *const *arrays, int has_where, int ndim,
                                const int64_t *shape, size_t chunk_bytes, int streams);

/* Operand i's stride on coalesced axis k (0 for scalars). */
static inline int64_t cf_hostpipe_stride(const cf_hostpipe_plan *p, int i, int k)
{
    return p->pidx[i] < 0 ? 0 : p->coalesced.strides[p->pidx[i]][k];
}

/* Chunk c (0 <= c < nchunks): its rows along `split`, and for every array operand the byte
 * offset from its element (0, ..., 0) to the chunk's first element (offsets[i]; 0 for scalars). */
void cf_hostpipe_chunk(const cf_hostpipe_plan *p, int64_t c, int64_t *rows, int64_t *offsets);

/* The packed layout of operand i's slab in a chunk of `rows` rows: its strides over the chunk's
 * ndim - split axes (zero where the operand's are), the offset of its element (0, ..., 0) from the
 * start of the block (non-zero when a stride is negative); returns the block's bytes. */
size_t cf_hostpipe_slab(const cf_hostpipe_plan *p, int i, int64_t rows, int64_t *strides,
                        int64_t *first);

/* Where each streamed operand's slab of chunk c sits in a slot's buffer (the same layout in the
 * pinned buffer and in the device buffer, so each direction is one copy per chunk): inputs and
 * mask first, then outputs, each block aligned to CF_HOSTPIPE_ALIGN. */
typedef struct cf_hostpipe_layout {
    int64_t rows;
    int64_t offsets[CF_HOSTPIPE_MAX_OPS]; /* cf_hostpipe_chunk's offsets */
    size_t block[CF_HOSTPIPE_MAX_OPS];    /* start of each streamed operand's block */
    int64_t first[CF_HOSTPIPE_MAX_OPS];   /* its element (0, ..., 0) inside the block */
    size_t h2d;                           /* bytes from the slot's start copied in: the inputs'
                                           * blocks, and the outputs' too with a mask */
    size_t out_start, out_end;            /* the packed outputs' blocks, copied out */
    size_t bytes[CF_HOSTPIPE_MAX_OPS];    /* each streamed operand's block size */
    size_t direct_start, end;             /* direct operands' blocks (inputs and mask first),
                                           * each moved by a DMA of its own; the slot's end */
} cf_hostpipe_layout;

void cf_hostpipe_lay_out(const cf_hostpipe_plan *p, int64_t c, int has_where,
                         cf_hostpipe_layout *L);

/* Mark streamed operand i as direct (in page-locked host memory) or not. Slot sizes do not
 * change: the blocks are only laid out in another order. */
void cf_hostpipe_set_direct(cf_hostpipe_plan *p, int i, int direct);

/* Whether streamed operand i's slab of the chunk laid out in L is already packed in host memory
 * (its host strides over the chunk's axes are the packed ones), so that one DMA moves it; then
 * *start is the address of the slab's lowest byte in `host`'s memory. */
int cf_hostpipe_in_place(const cf_hostpipe_plan *p, const cf_hostpipe_layout *L, int i,
                         const cf_array *host, char **start);

/* ---- the host path's policy (pure; knobs in env.h) -------------------------------------------
 * Per host operand: page-locked memory is DMA'd in place (CF_HOST_PINNED); otherwise a dense one
 * (its elements fill its span: contiguous in some axis order, no gaps, nothing broadcast) spanning
 * at least register_min bytes (when that is not 0) is registered for the call (CF_HOST_REGISTER):
 * registering a strided view would pin memory it does not use, and its slabs would still be packed;
 * otherwise it is packed into the pinned slots (CF_HOST_STAGE). Asking the driver whether memory
 * is page-locked costs two cuPointerGetAttributes calls (about a microsecond), more than packing a
 * small operand, so only operands of CF_HOSTPIPE_PINNED_QUERY_MIN bytes or more are asked, once
 * per call. */
enum { CF_HOST_STAGE = 0, CF_HOST_PINNED = 1, CF_HOST_REGISTER = 2 };
#define CF_HOSTPIPE_PINNED_QUERY_MIN ((size_t)64 << 10)

/* Whether to ask the driver if an operand spanning `span` bytes is page-locked. */
int cf_hostpipe_ask_pinned(size_t span);
/* The strategy of an operand spanning `span` bytes, `dense` or not; pinned: the driver's answer (0
 * when not asked). */
int cf_hostpipe_operand_policy(size_t span, int dense, int pinned, size_t register_min);
/* The threads of one pack/unpack copy: the knob when set (1..65), else min(cpus, CF_HOST_AUTO_THREADS),
 * at least 1. */
int cf_hostpipe_copy_threads(int knob, int cpus);
/* Byte ranges [lo[k], hi[k]) rounded out to whole pages of `page` bytes (a power of two), sorted,
 * and those that overlap or touch merged: in place, returns how many are left (0 for n <= 0). A
 * page may be registered once only, so operands sharing pages are registered as one range. */
int cf_hostpipe_merge_spans(int n, uintptr_t *lo, uintptr_t *hi, size_t page);

/* Copy streamed operand i's slab of the chunk laid out in L between its host array `host` and
 * the slot buffer at `slot` (to_host 0: pack it in; 1: unpack it out). */
void cf_hostpipe_pack(const cf_hostpipe_plan *p, const cf_hostpipe_layout *L, int i,
                      const cf_array *host, void *slot, int to_host);

/* The kernel's operands for the chunk laid out in L, on `device`: streamed operands in the slot
 * buffer at address `slot`, resident operand i at address resident[i] (packed as
 * cf_hostpipe_slab says), device operands in place; ops[i] of scalars are left as they are, and
 * the mask's view goes to *where. shape receives the chunk's loop shape (ndim - split axes). */
void cf_hostpipe_views(const cf_hostpipe_plan *p, const cf_hostpipe_layout *L,
                       const cf_array *const *arrays, uint64_t slot, const uint64_t *resident,
                       int device, cf_operand *ops, cf_array *where, int64_t *shape);

/* Copy an n-d block: for every index x in `shape`, the item at src + sum x[k] src_strides[k]
 * goes to dst + sum x[k] dst_strides[k] (dst and src point at element (0, ..., 0); strides in
 * bytes, any signs; the two blocks must not overlap). Axes are walked in src's memory order and
 * merged where both sides allow, so contiguous runs are single memcpy calls; long runs (and a
 * contiguous block as a whole) are spread over the copy threads (threadpool.h). */
/* The threads each cf_hostpipe_copy uses (the calling thread among them; 0: all the pool's). */
void cf_hostpipe_set_copy_threads(int n);
void cf_hostpipe_copy(void *dst, const int64_t *dst_strides, const void *src,
                      const int64_t *src_strides, int ndim, const int64_t *shape, size_t item);

#endif
