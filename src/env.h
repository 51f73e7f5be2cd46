/* env.h: reading the tuning knobs of the environment (internal). */
#ifndef CUFUNC_ENV_H
#define CUFUNC_ENV_H

/* The integer value of environment variable `name` when it is set to a whole decimal number in
 * [lo, hi]; else `def` (unset, empty, not a number, out of range: a bad knob never breaks a run). */
long cf_env_long(const char *name, long def, long lo, long hi);

#endif
