// Opens the target region of a kernel file's avx2 functions (closed by target_pop.h): every
// function defined until then is compiled for avx2,fma,f16c (GCC: target pragma; clang,
// which ignores it, e.g. in the fuzz build: an attribute applied to each function). No include
// guard: include it once per file, after the other includes.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
