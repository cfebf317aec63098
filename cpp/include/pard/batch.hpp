// pard/batch.hpp — what a stage scheduler hands back when it forms a batch: the batch and its drops.
#pragma once

#include <cstdint>
#include <vector>

#include "pard/policy.hpp"
#include "pard/request.hpp"

namespace pard {

// One dropped request and why (Reason code).
struct Drop {
    Request request;
    Reason reason;
};

// What form_batch hands back; reuse one per worker so the hot path does not allocate.
struct BatchResult {
    std::vector<Request> batch;   // in service order
    std::vector<Drop> drops;      // in the order they were decided
    std::int64_t expected_duration_ns = 0;  // d_k(b) for the batch size b planned (0 if nothing queued)
    void clear() noexcept {
        batch.clear();
        drops.clear();
        expected_duration_ns = 0;
    }
};

}  // namespace pard
