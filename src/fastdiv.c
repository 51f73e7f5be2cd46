/* fastdiv.c: the host side of the kernels' division by an invariant extent (see fastdiv.h). */
#include "fastdiv.h"

void cf_fastdiv_init(cf_ew_fastdiv *d, uint64_t divisor, int index32)
{
    unsigned shift = 0;
    if (divisor == 0)
        divisor = 1;
    while (shift < 63 && ((uint64_t)1 << shift) < divisor)
        shift++;
    d->divisor = divisor;
    d->shift = shift;
    if (index32)
        d->magic = (uint64_t)(((((uint64_t)1 << 32) * (((uint64_t)1 << shift) - divisor)) /
                               divisor) + 1);
    else
        d->magic = (uint64_t)((((unsigned __int128)1 << 64) *
                               (((unsigned __int128)1 << shift) - divisor)) / divisor + 1);
}
