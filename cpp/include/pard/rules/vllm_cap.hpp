// pard/rules/vllm_cap.hpp — the vLLM-style queue cap at an LLM stage (DESIGN §3.8; issue 38's baselines).
//
// vLLM and SGLang serve FCFS and answer "overloaded" once their waiting queue is full; they drop nothing
// else. The cap is what the stage can still start within an SLO: one full batch of max_seqs every mean
// request time, so max_seqs x ceil(slo / mean request time) requests may wait. The mean request time is
// the running means' (prefill(mean in) + mean out x step): vLLM knows no request's length in advance.
// The token side caps the prompt tokens waiting, derived the same way: a batch of max_seqs started every mean
// request time takes max_seqs x (mean prompt) tokens, so the request cap's requests at the running mean
// prompt length may wait, vllm_token_cap = cap x mean in. A queue of long prompts reaches it first; an
// arrival is rejected when either cap is full.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace pard::rules {

// The most requests that may wait (>= max_seqs): max_seqs x ceil(slo / mean request time).
[[nodiscard]] inline std::int64_t vllm_queue_cap(std::int64_t max_seqs, std::int64_t slo_ns,
                                                 std::int64_t mean_request_ns) noexcept {
    if (mean_request_ns <= 0) return max_seqs;
    const double batches = std::ceil(static_cast<double>(slo_ns) / static_cast<double>(mean_request_ns));
    return max_seqs * static_cast<std::int64_t>(batches < 1.0 ? 1.0 : batches);
}

// Whether an arrival that finds `waiting` requests queued is rejected: more than the cap would wait.
[[nodiscard]] constexpr bool vllm_rejects(std::size_t waiting, std::int64_t cap) noexcept {
    return static_cast<std::int64_t>(waiting) + 1 > cap;
}

// The most prompt tokens that may wait: the request cap at the running mean prompt length (>= 1 token per
// request); no token cap (INT64_MAX) before any request finished (no mean yet).
[[nodiscard]] inline std::int64_t vllm_token_cap(std::int64_t request_cap, double mean_in_tokens) noexcept {
    if (!(mean_in_tokens > 0.0)) return std::numeric_limits<std::int64_t>::max();
    const double cap = std::ceil(static_cast<double>(request_cap) * (mean_in_tokens < 1.0 ? 1.0 : mean_in_tokens));
    return cap >= 9.0e18 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(cap);
}

// Whether an arrival of in_tokens that finds waiting_tokens of prompts queued is rejected: past the token
// cap. An empty queue always takes it (as the request cap, >= max_seqs, always takes one).
[[nodiscard]] constexpr bool vllm_tokens_reject(std::int64_t waiting_tokens, std::int64_t in_tokens,
                                                std::int64_t token_cap) noexcept {
    return waiting_tokens > 0 && waiting_tokens > token_cap - in_tokens;
}

}  // namespace pard::rules
