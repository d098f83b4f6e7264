#pragma once
// REMAT_UNDER_ASAN: 1 when this file is compiled under AddressSanitizer. GCC says so with
// __SANITIZE_ADDRESS__; clang (the sanitize preset's compiler) only through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define REMAT_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REMAT_UNDER_ASAN 1
#endif
#endif
#ifndef REMAT_UNDER_ASAN
#define REMAT_UNDER_ASAN 0
#endif
