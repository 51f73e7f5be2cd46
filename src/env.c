/* env.c: the tuning knobs of the environment (see env.h). */
#include "env.h"

#include "cufunc/runtime.h"
#include "error.h"
#include "staging.h"
#include "threadpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

typedef struct knob_row {
    const char *name;
    char kind;
    long def, lo, hi;
    const char *doc;
} knob_row;

static const knob_row knob_table[CF_KNOB_COUNT] = {
#define CF_KNOB_ROW(id, name, kind, def, lo, hi, doc) {name, kind, def, lo, hi, doc},
    CF_KNOBS(CF_KNOB_ROW)
#undef CF_KNOB_ROW
};

const char *cf_env_text(const char *name) { return getenv(name); }

long cf_knob(cf_knob_id id)
{
    const knob_row *r = &knob_table[id];
    long v = cf_env_long(r->name, r->def, r->lo, r->hi);
    if (v != r->def && ((r->kind == 'p' && (v <= 0 || (v & (v - 1)))) || (r->kind == 'w' && v % 32)))
        return r->def;
    return v;
}

const char *cf_knob_text(cf_knob_id id) { return getenv(knob_table[id].name); }

int cf_knob_count(void) { return CF_KNOB_COUNT; }

cf_status cf_knob_info(int index, cf_knob_desc *out)
{
    if (!out || index < 0 || index >= CF_KNOB_COUNT)
        return cf_error_set(CF_ERR_INVALID, "cf_knob_info: no knob %d (there are %d)", index,
                            CF_KNOB_COUNT);
    const knob_row *r = &knob_table[index];
    out->name = r->name;
    out->is_text = r->kind == 's';
    out->default_value = r->def;
    out->lowest = r->lo;
    out->highest = r->hi;
    out->rule = r->kind == 'p' ? 1 : r->kind == 'w' ? 2 : 0;
    out->doc = r->doc;
    out->text = getenv(r->name);
    out->value = out->is_text ? 0 : cf_knob((cf_knob_id)index);
    return CF_OK;
}

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
    k->block = (int)cf_knob(CF_KNOB_EW_BLOCK);
    k->unroll = (int)cf_knob(CF_KNOB_EW_UNROLL);
    k->blocks_per_sm = (int)cf_knob(CF_KNOB_EW_BLOCKS_PER_SM);
    k->row_blocks_per_sm = (int)cf_knob(CF_KNOB_EW_ROW_BLOCKS_PER_SM);
    k->tile_rows = (int)cf_knob(CF_KNOB_EW_TILE_ROWS); /* a power of two: divides CF_EW_TILE */
    k->tile_blocks_per_sm = (int)cf_knob(CF_KNOB_EW_TILE_BLOCKS_PER_SM);
    k->tile_preload = (int)cf_knob(CF_KNOB_EW_TILE_PRELOAD);
    k->tile_pipeline = (int)cf_knob(CF_KNOB_EW_TILE_PIPELINE);
    k->pdl = (int)cf_knob(CF_KNOB_EW_PDL);
    k->pdl_min = cf_knob(CF_KNOB_EW_PDL_MIN);
}

const cf_ew_knobs *cf_ew_knobs_get(void)
{
    pthread_once(&ew_once, ew_read);
    return &ew_knobs;
}

void cf_host_knobs_read(cf_host_knobs *k)
{
    k->threads = (int)cf_knob(CF_KNOB_HOST_THREADS);
    k->register_min = cf_knob(CF_KNOB_HOST_REGISTER_MIN);
    k->result_pinned_min = cf_knob(CF_KNOB_HOST_RESULT_PINNED_MIN);
}
