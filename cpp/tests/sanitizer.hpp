// Whether this test binary is built with ThreadSanitizer: the stress tests shrink their default
// request counts under TSan (it runs them 5-15x slower) so the CI sanitizer run stays bounded.
#pragma once

namespace pard {

#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif
#else
constexpr bool kTsan = false;
#endif

}  // namespace pard
