// pard/request.hpp — the request record that travels through the stages of a pipeline.
//
// A Request is a plain, trivially copyable aggregate so that it can live in a lock-free ring
// (pard/mpmc_ring.hpp) and in a stage's double-ended priority queue (pard/depq.hpp) by value,
// without allocation. All times are int64 nanoseconds on one monotonic clock (the live runtime's
// steady clock or the simulator's virtual clock); Python sees float seconds, converted in src/.
#pragma once

#include <cstdint>
#include <tuple>
#include <type_traits>

namespace pard {

struct Request {
    std::uint64_t id;          // unique per request within a run; the tie-breaker of every ordering
    std::int64_t send_ns;      // when the request entered the pipeline (its "send time")
    std::int64_t deadline_ns;  // send_ns + SLO: the end-to-end latency bound (DESIGN §2)
    std::int64_t arrival_ns;   // arrival at the stage whose queue currently holds the request
    std::int32_t tier;         // service tier (0 = default); higher tiers are worth more (DESIGN §3.7)
    std::int64_t compute_ns;   // compute time charged to the request so far (its share of each batch)
    // An LLM stage's inputs (DESIGN §3.8); defaulted so that a DNN-only initialiser leaves them unknown.
    std::int32_t in_tokens = 0;   // input (prompt) tokens; 0 = unknown
    std::int32_t max_tokens = 0;  // the client's output-length hint (max_tokens); 0 = none
};

static_assert(std::is_trivially_copyable_v<Request>,
              "Request is copied by value through lock-free rings: it must stay trivially copyable");
static_assert(std::is_aggregate_v<Request>, "Request is built with aggregate initialisation");

// Strict weak order by (deadline_ns, id): the key of a stage's DEPQ (DESIGN §3.4). The min is the
// lowest remaining budget (earliest deadline), the max the highest; equal deadlines resolve by id,
// so the order is total and deterministic.
struct ByDeadline {
    constexpr bool operator()(const Request& a, const Request& b) const noexcept {
        return a.deadline_ns < b.deadline_ns || (a.deadline_ns == b.deadline_ns && a.id < b.id);
    }
    // The same order as a split key (pard/depq.hpp keeps 16-byte (primary, slot) heap nodes).
    static constexpr std::int64_t primary(const Request& r) noexcept { return r.deadline_ns; }
    static constexpr std::uint64_t tiebreak(const Request& r) noexcept { return r.id; }
};

// Strict weak order by (arrival_ns, id): first come, first served at the current stage.
struct ByArrival {
    constexpr bool operator()(const Request& a, const Request& b) const noexcept {
        return a.arrival_ns < b.arrival_ns || (a.arrival_ns == b.arrival_ns && a.id < b.id);
    }
    static constexpr std::int64_t primary(const Request& r) noexcept { return r.arrival_ns; }
    static constexpr std::uint64_t tiebreak(const Request& r) noexcept { return r.id; }
};

}  // namespace pard
