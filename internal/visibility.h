/* visibility.h: CF_INTERNAL, the mark of what the core offers only the binding (numpy_ext/), the
 * C tests and the C benchmarks: the functions the headers of internal/ declare. Those link the
 * core's objects (setup.py's static library, CMake's object library), where a hidden function is
 * as reachable as any other; libcufunc.so exports only CF_API (include/cufunc/status.h), so C
 * programs never see these, even from a build without -fvisibility=hidden. */
#ifndef CF_VISIBILITY_H
#define CF_VISIBILITY_H

#if defined(__GNUC__) && !defined(_WIN32)
#define CF_INTERNAL __attribute__((visibility("hidden")))
#else
#define CF_INTERNAL
#endif

#endif
