/* cufunc/cufunc.h: the whole public C API of cufunc. */
#ifndef CUFUNC_CUFUNC_H
#define CUFUNC_CUFUNC_H

#define CUFUNC_VERSION_MAJOR 0
#define CUFUNC_VERSION_MINOR 1
#define CUFUNC_VERSION_PATCH 0
#define CUFUNC_VERSION_STRING "0.1.0"

#include "cufunc/status.h"
#include "cufunc/dtype.h"
#include "cufunc/array.h"
#include "cufunc/runtime.h"
#include "cufunc/compile.h"
#include "cufunc/plan.h"
#include "cufunc/ufunc.h"
#include "cufunc/signature.h"
#include "cufunc/reduce.h"
#include "cufunc/gufunc.h"

#endif
