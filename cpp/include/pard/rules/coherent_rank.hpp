// pard/rules/coherent_rank.hpp — parallel DAG branches serve and shed by one shared rank in overload.
#pragma once

#include <cstdint>

namespace pard::rules {

// SplitMix64's finaliser of the id, halved into a non-negative int64: uniform, and the same for every
// copy of a request on every stage and every process, so overloaded sibling branches that serve the
// top ranks keep the same requests instead of each its own newest (each copy one keeps alone is waste).
[[nodiscard]] constexpr std::int64_t coherent_rank(std::uint64_t id) noexcept {
    std::uint64_t x = id + 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
    return static_cast<std::int64_t>((x ^ (x >> 31U)) >> 1U);
}

// Whether a branch stage keys its queue by rank: in overload, i.e. HBF is published, or its own overload
// test fired since the planner last published a calm order (a burst before the planner has seen it).
// Once ranked it stays so until HBF ends at a calm publish after the switch, so it re-keys at most twice a sync.
[[nodiscard]] constexpr bool want_ranked(bool ranked, bool hbf, bool overloaded, std::uint64_t calm_publishes,
                                         std::uint64_t ranked_at_calm) noexcept {
    return ranked ? (hbf || calm_publishes == ranked_at_calm) : (hbf || overloaded);
}

}  // namespace pard::rules
