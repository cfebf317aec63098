// pard/rules/scorpio_ttft.hpp — SCORPIO's TTFT guard at an LLM stage (issue 38's baselines).
//
// SCORPIO serves the least deadline first and rejects, at the LLM only, a request whose first token
// cannot come before its deadline: it joins at t_e and its first token is out after its prefill. Nothing
// downstream is counted and no other stage drops.
#pragma once

#include <cstdint>

#include "pard/request.hpp"

namespace pard::rules {

// True when r's first token, after a prefill of prefill_ns starting at t_e_ns, would miss its deadline.
[[nodiscard]] constexpr bool scorpio_rejects(const Request& r, std::int64_t t_e_ns, std::int64_t prefill_ns) noexcept {
    return t_e_ns + prefill_ns > r.deadline_ns;
}

}  // namespace pard::rules
