/* loopfn.c: see loopfn.h. */
#include "loopfn.h"

#include <string.h>

#include "alloc.h"
#include "error.h"

void cf_loop_fn_clear(cf_loop_fn *f)
{
    cf_free(f->source);
    cf_free(f->fn_name);
    for (int i = 0; i < f->noptions; i++)
        cf_free(f->options[i]);
    cf_free(f->options);
    memset(f, 0, sizeof *f);
}

cf_status cf_loop_fn_init(cf_loop_fn *f, const char *source, const char *fn_name,
                          const char *const *options, int noptions)
{
    memset(f, 0, sizeof *f);
    if (!source || !fn_name || noptions < 0 || (noptions && !options))
        return cf_error_set(CF_ERR_INVALID, "a loop needs its source, its function name and "
                            "valid options");
    if (!(f->source = cf_strdup(source)) || !(f->fn_name = cf_strdup(fn_name)))
        goto nomem;
    if (noptions) {
        if (!(f->options = cf_calloc((size_t)noptions, sizeof(char *))))
            goto nomem;
        for (int i = 0; i < noptions; i++) {
            if (!options[i]) {
                cf_loop_fn_clear(f);
                return cf_error_set(CF_ERR_INVALID, "loop option %d is NULL", i);
            }
            if (!(f->options[i] = cf_strdup(options[i])))
                goto nomem;
            f->noptions = i + 1;
        }
    }
    return CF_OK;
nomem:
    cf_loop_fn_clear(f);
    return CF_ERR_NOMEM;
}
