// OCULAR_ASAN: 1 in a build under AddressSanitizer (GCC defines __SANITIZE_ADDRESS__; clang 14
// answers only through __has_feature), else 0.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define OCULAR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OCULAR_ASAN 1
#endif
#endif
#ifndef OCULAR_ASAN
#define OCULAR_ASAN 0
#endif
