/* fastdiv.h: the host side of the kernels' division by an invariant extent (internal). */
#ifndef CUFUNC_FASTDIV_H
#define CUFUNC_FASTDIV_H

#include <stdint.h>

#include "cufunc/kernel_args.h"

/* Fill d so that kernels divide by `divisor` with a multiply-high and a shift (cf_divi in
 * templates/cufunc/elementwise.cuh): 32-bit magic for index32 kernels, else 64-bit. A divisor of 0
 * (an empty extent, never divided by) is taken as 1 so the table stays well defined. */
void cf_fastdiv_init(cf_ew_fastdiv *d, uint64_t divisor, int index32);

#endif
