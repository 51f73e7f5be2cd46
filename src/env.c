/* env.c: reading the tuning knobs of the environment (see env.h). */
#include "env.h"

#include <errno.h>
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
