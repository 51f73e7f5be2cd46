/* templates.h: the arrays tools/embed_templates.py writes into the generated cf_templates_data.c.
 * Each source is NUL-terminated (the length does not count the NUL), so it can go to NVRTC as is. */
#ifndef CF_TEMPLATES_H
#define CF_TEMPLATES_H

#include <stddef.h>

extern const int cf_templates_n;
extern const char *const cf_templates_names[];
extern const char *const cf_templates_sources[];
extern const size_t cf_templates_lengths[];
extern const char cf_templates_bundle_hash[];

#endif
