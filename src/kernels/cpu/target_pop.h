// Closes the target region a kernel file opened before its SIMD functions (GCC: `#pragma GCC
// push_options` + `target(...)`; clang: `#pragma clang attribute push(...)`). No include guard:
// each such file includes it once, after the last of those functions.
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
