// CHECK(cond): the standalone tests' one assertion. Unlike assert() it stays on in Release builds
// (NDEBUG), prints file, line and the condition, and aborts so ctest and the sanitizers see a failure.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            std::abort();                                                                \
        }                                                                                \
    } while (0)
