/* templates.c: the public view of the template bundle that tools/embed_templates.py generates at
 * build time (cf_templates_data.c: the arrays declared below). */
#include <stddef.h>
#include <string.h>

#include "cufunc/compile.h"
#include "templates.h"

int cf_templates_count(void) { return cf_templates_n; }

const char *cf_templates_name(int i)
{
    return (i >= 0 && i < cf_templates_n) ? cf_templates_names[i] : NULL;
}

const char *cf_templates_source(int i, size_t *len)
{
    if (i < 0 || i >= cf_templates_n) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = cf_templates_lengths[i];
    return cf_templates_sources[i];
}

const char *cf_templates_find(const char *name, size_t *len)
{
    if (len)
        *len = 0;
    if (!name)
        return NULL;
    for (int i = 0; i < cf_templates_n; i++)
        if (strcmp(cf_templates_names[i], name) == 0)
            return cf_templates_source(i, len);
    return NULL;
}

const char *cf_templates_hash(void) { return cf_templates_bundle_hash; }
