// pard/rules/pacing.hpp — an overloaded stage forwards no faster than its path finishes (Policy::pace, step 2c).
#pragma once

#include <cstddef>
#include <cstdint>

#include "pard/profile.hpp"
#include "pard/snapshot.hpp"

namespace pard::rules {

// Pacing applies where a stage below finishes fewer requests/s (path_rate) than this one (service_rate):
// then the excess is dropped here, once, before a stage below spends on it; in a DAG, before one branch
// serves what its sibling drops.
[[nodiscard]] constexpr bool paced(bool pace, const PublishedTerms& t) noexcept {
    return pace && t.path_rate > 0.0 && t.path_rate < t.service_rate;
}

// The smallest batch (at most b) whose throughput c / d(c) reaches path_rate / service_rate of the full
// batch's: the stage forwards about what the slowest stage below finishes. Scanned from c = 1, because
// a profile need not make c / d(c) monotone.
[[nodiscard]] inline std::size_t paced_batch(const Profile& prof, std::int64_t max_batch, const PublishedTerms& t,
                                             std::size_t b) noexcept {
    const double want = t.path_rate / t.service_rate * static_cast<double>(max_batch) /
                        static_cast<double>(prof.duration_ns(max_batch));
    for (std::size_t c = 1; c < b; ++c) {
        if (static_cast<double>(c) / static_cast<double>(prof.duration_ns(static_cast<std::int64_t>(c))) >= want) {
            return c;
        }
    }
    return b;
}

// The rate a paced stage sheds against: what it forwards (path_rate), else what it serves.
[[nodiscard]] constexpr double shed_rate(bool is_paced, const PublishedTerms& t) noexcept {
    return is_paced ? t.path_rate : t.service_rate;
}

}  // namespace pard::rules
