// pard/rules/vllm_cap.hpp — the vLLM-style queue cap at an LLM stage (DESIGN §3.8; issue 38's baselines).
//
// vLLM and SGLang serve FCFS and answer "overloaded" once their waiting queue is full; they drop nothing
// else. The cap is what the stage can still start within an SLO: one full batch of max_seqs every mean
// request time, so max_seqs x ceil(slo / mean request time) requests may wait. The mean request time is
// the running means' (prefill(mean in) + mean out x step): vLLM knows no request's length in advance.
#pragma once

#include <cmath>
#include <cstdint>

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

}  // namespace pard::rules
