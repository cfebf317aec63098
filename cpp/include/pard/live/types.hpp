// pard/live/types.hpp — the values the parts of the live pipeline (pard/live_pipeline.hpp) share:
// a stage's wiring, why a request ended, an ended request for the caller, the scheduler key of a
// request, the runtime clock and the set of stages a call pushed into.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "pard/outcome.hpp"
#include "pard/stage_scheduler.hpp"

namespace pard {

// One stage of a live pipeline: its scheduler (not owned; outlives the pipeline) and wiring.
struct LiveStageSpec {
    StageScheduler* sched = nullptr;
    std::vector<int> successors;
    std::vector<int> preds;       // in topological order; two or more make a join stage
    std::int64_t max_queue = 1;   // back-pressure bound on live queued requests
    double capacity_req_s = 1.0;  // workers x best b / d(b): the queue's drain rate (retry hints)
};

// A request's tokens for the LLM stages (DESIGN §3.8): its prompt length, the client's max_tokens
// hint and the output length the engine produces (a replay's true length; 0: the stage's cap).
struct LiveTokens {
    std::int32_t in = 0;
    std::int32_t max_tokens = 0;
    std::int32_t max_new = 0;
};

// Why a request ended, beyond its state and reason (the binding builds the user's exception from it).
enum class EndKind : std::uint8_t {
    kOutput = 0,      // on time or late: `value` is the result
    kPolicy = 1,      // a stage's drop rule (reason set)
    kCancel = 2,      // future.cancel(): the future cancels itself
    kClosed = 3,      // close() or an abandoned runtime cancelled it (reason cancelled)
    kQueueFull = 4,   // back-pressure: the stage's queue held max_queue live requests
    kRingFull = 5,    // back-pressure: the stage's ingress ring was full
    kExecutor = 6,    // the stage's executor raised: `value` is the exception
    kFailure = 7,     // a submit error: `value` is the ready exception
    kJoin = 8,        // the join function raised: `value` is its exception
    kDead = 9,        // a worker of the stage died: `value` is what the binding gave mark_dead
};

// One ended request for the caller to resolve (its handle moved out of the slot).
template <class Payload, class Handle>
struct LiveDone {
    Handle handle;
    std::uint64_t rid = 0;
    Outcome state = Outcome::kPending;
    int stage = 0;
    int reason = -1;
    EndKind kind = EndKind::kOutput;
    Payload value;               // the result (kOutput), the executor's exception, the ready exception
    std::int64_t queued = 0;     // kQueueFull: live requests queued then
    double retry_after_s = 0.0;  // drops at a full queue and rejections: the queue's drain time
};

namespace live {

// A request's scheduler key is rid << kSlotBits | slot: the id tells a reused slot's new request
// from the one a queued copy belongs to. In-flight slots per pipeline: 2^22; ids below 2^42.
constexpr int kSlotBits = 22;
constexpr std::uint64_t kSlotMask = (std::uint64_t{1} << kSlotBits) - 1;

inline std::uint64_t make_key(std::uint64_t rid, std::uint32_t s) noexcept { return rid << kSlotBits | s; }

inline int lowest_bit(std::uint64_t q) noexcept {
    int i = 0;
    while ((q & 1) == 0) {
        q >>= 1;
        ++i;
    }
    return i;
}

inline double to_s(std::int64_t ns) noexcept { return static_cast<double>(ns) * 1e-9; }

// Moves a set payload into `trash`, so that its destructor runs after the caller drops its locks.
template <class V, class Payload>
void to_trash(V& p, std::vector<Payload>& trash) {
    if (static_cast<bool>(p)) {
        trash.push_back(std::move(p));
        p = V{};
    }
}

// The runtime clock: ns since `origin` (steady clock, the clock of Python's perf_counter).
class Clock {
public:
    void set_origin_ns(std::int64_t origin) noexcept { origin_ns_.store(origin, std::memory_order_relaxed); }
    [[nodiscard]] std::int64_t now_ns() const noexcept {
        const auto t = std::chrono::steady_clock::now().time_since_epoch();
        return std::chrono::duration_cast<std::chrono::nanoseconds>(t).count() - origin_ns_.load(std::memory_order_relaxed);
    }

private:
    std::atomic<std::int64_t> origin_ns_{0};
};

// The stages a call pushed into and how many into each (no allocation per call).
struct Pushed {
    std::uint64_t mask = 0;
    std::array<std::int64_t, 64> n{};
    void add(int k) {
        const std::uint64_t bit = std::uint64_t{1} << k;
        if ((mask & bit) == 0) {
            mask |= bit;
            n[static_cast<std::size_t>(k)] = 0;
        }
        n[static_cast<std::size_t>(k)] += 1;
    }
};

}  // namespace live
}  // namespace pard
