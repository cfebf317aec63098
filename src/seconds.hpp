// Seconds (Python) <-> int64 nanoseconds (C++) at the binding boundary, with field-named errors.
#pragma once
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace pard::bind {

// Converts float seconds to int64 ns; ValueError (std::invalid_argument) naming `field` if the value
// is not finite or out of the int64 ns range (about ±292 years).
inline std::int64_t to_ns(double seconds, const char* field) {
    if (!std::isfinite(seconds) || std::fabs(seconds) > 9.0e9) {
        throw std::invalid_argument(std::string(field) + "=" + std::to_string(seconds) +
                                    " must be a finite number of seconds");
    }
    return static_cast<std::int64_t>(std::llround(seconds * 1e9));
}

inline double to_s(std::int64_t ns) noexcept { return static_cast<double>(ns) * 1e-9; }

}  // namespace pard::bind
