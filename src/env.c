/* env.c: the tuning knobs of the environment (see env.h). */
#include "env.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

long cf_env_long(const char *name, long def, long lo, long hi)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || *end != '\0' || v < lo || v > hi)
        return def;
    return v;
}

static cf_ew_knobs ew_knobs;
static pthread_once_t ew_once = PTHREAD_ONCE_INIT;

static void ew_read(void)
{
    cf_ew_knobs *k = &ew_knobs;
    int b = (int)cf_env_long("CUFUNC_EW_BLOCK", CF_EW_DEFAULT_BLOCK, 32, 1024);
    k->block = b % 32 == 0 ? b : CF_EW_DEFAULT_BLOCK;
    k->unroll = (int)cf_env_long("CUFUNC_EW_UNROLL", CF_EW_DEFAULT_UNROLL, 1, 16);
    k->blocks_per_sm = (int)cf_env_long("CUFUNC_EW_BLOCKS_PER_SM", CF_EW_DEFAULT_BLOCKS_PER_SM,
                                        0, 64);
    k->row_blocks_per_sm = (int)cf_env_long("CUFUNC_EW_ROW_BLOCKS_PER_SM",
                                            CF_EW_DEFAULT_ROW_BLOCKS_PER_SM, 0, 64);
    int tr = (int)cf_env_long("CUFUNC_EW_TILE_ROWS", CF_EW_DEFAULT_TILE_ROWS, 1, CF_EW_TILE);
    k->tile_rows = (tr & (tr - 1)) == 0 ? tr : CF_EW_DEFAULT_TILE_ROWS; /* divides CF_EW_TILE */
    k->tile_blocks_per_sm = (int)cf_env_long("CUFUNC_EW_TILE_BLOCKS_PER_SM",
                                             CF_EW_DEFAULT_TILE_BLOCKS_PER_SM, 0, 64);
    k->tile_preload = (int)cf_env_long("CUFUNC_EW_TILE_PRELOAD", CF_EW_DEFAULT_TILE_PRELOAD, 0, 1);
    k->tile_pipeline = (int)cf_env_long("CUFUNC_EW_TILE_PIPELINE", CF_EW_DEFAULT_TILE_PIPELINE,
                                        0, 1);
    k->pdl = (int)cf_env_long("CUFUNC_EW_PDL", CF_EW_DEFAULT_PDL, 0, 1);
    k->pdl_min = cf_env_long("CUFUNC_EW_PDL_MIN", CF_EW_DEFAULT_PDL_MIN, 0, (long)1 << 40);
}

const cf_ew_knobs *cf_ew_knobs_get(void)
{
    pthread_once(&ew_once, ew_read);
    return &ew_knobs;
}

void cf_host_knobs_read(cf_host_knobs *k)
{
    k->threads = (int)cf_env_long("CUFUNC_HOST_THREADS", CF_HOST_DEFAULT_THREADS, 0, 65);
    k->register_min = cf_env_long("CUFUNC_HOST_REGISTER_MIN", CF_HOST_DEFAULT_REGISTER_MIN, 0,
                                  (long)1 << 50);
    k->result_pinned_min = cf_env_long("CUFUNC_HOST_RESULT_PINNED_MIN",
                                       CF_HOST_DEFAULT_RESULT_PINNED_MIN, 0, (long)1 << 50);
}
