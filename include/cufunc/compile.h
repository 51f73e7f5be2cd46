/* cufunc/compile.h: CUDA C source -> loaded kernels, through NVRTC and a two-level cache.
 *
 * libnvrtc is loaded with dlopen at first use, searched in this order: $CUFUNC_NVRTC_PATH (a file or
 * a folder), $CUDA_HOME and $CUDA_PATH (lib64, lib), the system loader (libnvrtc.so.13, .12, .11),
 * the lib folder of the nvidia-cuda-nvrtc Python wheel (set with cf_nvrtc_add_search_dir by the
 * Python front, which knows site-packages). Not found is CF_ERR_NO_NVRTC with a message listing
 * every place looked in; found but failed to load is CF_ERR_NO_NVRTC with dlerror's text.
 *
 * Every program is compiled with the embedded template bundle available as headers (so generated
 * sources `#include "cufunc/xxx.cuh"` without touching the file system), and the bundle's hash is
 * part of every cache key.
 *
 * GPU: NVRTC, the template bundle and the kernel cache need no GPU (compiling needs NVRTC);
 * modules, functions and launches (the last section) need one.
 */
#ifndef CUFUNC_COMPILE_H
#define CUFUNC_COMPILE_H

#include <stddef.h>
#include <stdint.h>
#include "cufunc/array.h"
#include "cufunc/status.h"
#include "cufunc/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- NVRTC --------------------------------------------------------------------------------- */

/* Load NVRTC now (it is loaded on first use otherwise). Sticky like cf_init. */
CF_API cf_status cf_nvrtc_init(void);
CF_API cf_status cf_nvrtc_version(int *major, int *minor);
/* Where libnvrtc was loaded from ("" if not loaded). */
CF_API const char *cf_nvrtc_path(void);
/* Add a folder to search last. Takes effect only before NVRTC is first loaded or the first cache
 * key is computed (the search is then frozen: see the stamp below); later calls have no effect. */
CF_API cf_status cf_nvrtc_add_search_dir(const char *dir);
/* Whether NVRTC can emit SASS (CUBIN) for this arch; else PTX is made for the driver to JIT. May
 * answer from the cache's NVRTC stamp without loading NVRTC. */
CF_API cf_status cf_nvrtc_supports_arch(int cc_major, int cc_minor, int *supported);

/* ---- the template bundle -------------------------------------------------------------------- */

/* Number of embedded template files, and each one's include name ("cufunc/runtime.cuh") and bytes. */
CF_API int cf_templates_count(void);
CF_API const char *cf_templates_name(int i);
CF_API const char *cf_templates_source(int i, size_t *len);
/* The source of a template by include name, or NULL. */
CF_API const char *cf_templates_find(const char *name, size_t *len);
/* Hex SHA-256 of all template names and bytes, computed at build time. */
CF_API const char *cf_templates_hash(void);

/* ---- compiling without a GPU ---------------------------------------------------------------- */

/* Compile `source` for compute capability cc_major.cc_minor. Produces CUBIN when NVRTC knows the
 * arch, else PTX (*is_ptx = 1) for the driver to JIT. `options` are extra NVRTC options (the arch,
 * -std=c++17 and the template include path are added, and -DCF_NO_HALF when the source names no
 * 2-byte float type or helper of runtime.cuh: "float16", "f16", "bf16", "CF_HALF", "cf_h16" appear
 * nowhere in it; that leaves cf_float16/cf_bfloat16 out of the parse, ~10 ms of NVRTC). On success *image is a buffer of *size
 * bytes owned by the caller (free with cf_free_buffer). On CF_ERR_COMPILE the message holds the
 * NVRTC log, the source with line numbers and the options. Needs no GPU. */
CF_API cf_status cf_compile_source(const char *source, const char *const *options, int noptions,
                                   int cc_major, int cc_minor, void **image, size_t *size,
                                   int *is_ptx);
/* Release a buffer returned by cufunc. No-op on NULL. */
CF_API void cf_free_buffer(void *buf);

/* ---- the kernel cache ----------------------------------------------------------------------- */

/* The kernel cache. So that a new process whose kernels are all on disk never loads NVRTC (6 to
 * 20 ms), the NVRTC version and supported archs that go into keys are recorded in a stamp file in
 * the cache folder, with a fingerprint of the library search (environment, folders, the library
 * file's identity); when the fingerprint still matches, keys are computed from the stamp. Anything
 * unexpected loads NVRTC and rewrites the stamp, and a compile always files its result under the
 * key of the NVRTC actually used.
 *
 * The cache folder in use: $CUFUNC_CACHE_DIR, else $XDG_CACHE_HOME/cufunc, else ~/.cache/cufunc
 * (created 0700). "" when the disk cache is off ($CUFUNC_CACHE=0), the folder cannot be created or
 * opened, or it is not trusted (owned by neither you nor root, or writable by group or others). A
 * folder that is trusted but not writable (a site-wide cache) is read, and nothing is written. */
CF_API const char *cf_cache_dir(void);
/* Re-read the environment (CUFUNC_CACHE_DIR, CUFUNC_CACHE, CUFUNC_DEBUG); for tests and for users
 * who change it at run time. Clears the in-memory cache of images (loaded modules stay). */
CF_API cf_status cf_cache_reconfigure(void);
/* The cache key of a compilation: hex SHA-256 of (source, options, arch, NVRTC version, template
 * hash). `key` must hold 65 bytes. May use the stamp instead of loading NVRTC. */
CF_API cf_status cf_cache_key(const char *source, const char *const *options, int noptions,
                              int cc_major, int cc_minor, char key[65]);
/* Look up, else compile and store. `*image` is owned by the caller (cf_free_buffer). `*from`
 * tells where it came from: 0 compiled now, 1 memory, 2 disk. A bad disk entry (corrupt, truncated,
 * too large, not a regular file, not trusted) is deleted and rebuilt; a folder that is unusable or
 * not trusted leaves the memory level only, with one warning on stderr. */
CF_API cf_status cf_cache_get_image(const char *source, const char *const *options, int noptions,
                                    int cc_major, int cc_minor, void **image, size_t *size,
                                    int *is_ptx, int *from);

/* ---- modules and launches ------------------------------------------------------------------- */

/* A module loaded on one device; owned by the per-device module cache, which lives until exit, so
 * the pointer stays valid. The same (source, options) on the same device gives the same module. */
typedef struct cf_module cf_module;
/* A kernel entry point in a loaded module; owned by its module. */
typedef struct cf_function cf_function;

/* Compile (through the cache) and load `source` on `device`. */
CF_API cf_status cf_module_load(int device, const char *source, const char *const *options,
                                int noptions, cf_module **out);

/* A value written into a `__device__` or `__constant__` variable of a module when the module is
 * loaded: how a kernel reads data that must not be baked into its source (a captured device
 * array's pointer), so that the source, and with it the compiled image on disk, stays the same
 * whatever the value. The variable must be declared in an `extern "C" { ... }` block, so that its
 * symbol is its name. */
typedef struct cf_module_global {
    const char *name;   /* the variable's name */
    const void *bytes;  /* its value: exactly the variable's size */
    size_t size;
    int device;         /* the device the value is valid on (a device pointer's), -1 for any */
    const char *label;  /* what messages call it ("the captured device array 'table'"); NULL: the
                         * name */
} cf_module_global;

/* cf_module_load, then the globals written into the loaded module before any kernel of it can
 * run. Loaded modules are shared per (device, source, options, globals): sources that differ only
 * in their globals' values share the compiled image (memory and disk cache) but each set of
 * values gets a module of its own, so two users of one source never see each other's values.
 * Errors, all before anything is loaded where they can be: a global whose `device` is not
 * `device` (CF_ERR_INVALID naming its label and both devices), a NULL or empty name, NULL bytes or
 * a size of 0; after loading, a name the module does not define or a size that differs from the
 * variable's (CF_ERR_INVALID). `globals` may be NULL when nglobals is 0. */
CF_API cf_status cf_module_load_globals(int device, const char *source,
                                        const char *const *options, int noptions,
                                        const cf_module_global *globals, int nglobals,
                                        cf_module **out);

/* Bytes of the largest cf_array_ref (below). */
#define CF_ARRAY_REF_MAX_BYTES (8 + 16 * CF_MAX_DIMS)
/* The value of a `cf_array_ref<T, ND>` (templates/cufunc/runtime.cuh: the data pointer, then ND
 * extents, then ND byte strides, 64 bits each, no padding) describing the view `a`, ND being
 * a->ndim (0 to CF_MAX_DIMS), written to `bytes` (room for `cap` bytes; CF_ARRAY_REF_MAX_BYTES always
 * suffices); its size goes to *size. CF_ERR_INVALID for a bad view or too small a buffer. */
CF_API cf_status cf_array_ref_pack(const cf_array *a, void *bytes, size_t cap, size_t *size);
/* Find an `extern "C" __global__` function by name. */
CF_API cf_status cf_module_function(cf_module *m, const char *name, cf_function **out);
/* Occupancy-derived facts about a function, for sizing grids. */
typedef struct cf_function_attrs {
    int max_threads_per_block, num_regs, shared_bytes, local_bytes;
} cf_function_attrs;
CF_API cf_status cf_function_attrs_get(cf_function *f, cf_function_attrs *out);
/* Blocks of `block_threads` that fit on one multiprocessor at once. */
CF_API cf_status cf_function_max_active_blocks(cf_function *f, int block_threads,
                                               size_t dynamic_shared, int *blocks);
/* cuLaunchKernel with `args` as the driver expects (an array of pointers to each argument). */
CF_API cf_status cf_launch(cf_function *f, const unsigned grid[3], const unsigned block[3],
                           unsigned shared_bytes, cf_stream *s, void **args);
/* cf_launch, and with `overlap_previous` a programmatic dependent launch (cuLaunchKernelEx with
 * programmatic stream serialisation): on devices of compute capability 9.0 and up the kernel may
 * be scheduled while the previous kernel in the stream finishes, so its launch and ramp-up hide
 * behind that kernel's tail. Such a kernel must wait for its predecessor before it touches global
 * memory (griddepcontrol.wait: cf_grid_dependency_wait() in the templates). Elsewhere it is a plain
 * launch. */
CF_API cf_status cf_launch_ex(cf_function *f, const unsigned grid[3], const unsigned block[3],
                              unsigned shared_bytes, cf_stream *s, void **args,
                              int overlap_previous);

#ifdef __cplusplus
}
#endif
#endif
