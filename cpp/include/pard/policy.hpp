// pard/policy.hpp — a scheduling policy as a value: order x drop rule x parameters (DESIGN §3.6).
//
// StageScheduler never branches on a policy *name*: it reads the Policy value and calls the small
// function the value selects (the key of its queue, the order of its pops, the drop rule applied to
// each popped request). The named policies of DESIGN §3.6 map onto values in pard.policies (Python):
//   naive     = {fcfs, none}          clipper++ = {fcfs, clipper}     nexus = {fcfs, nexus}
//   dagor     = {fcfs, dagor}         triton    = {fcfs, triton}      ray-serve = {fcfs, ray-serve}
//   pard-paper = {adaptive, pard}     pard      = {adaptive, pard, tiered, reactive}
//   pard-fcfs / pard-lbf / pard-hbf = {fcfs|lbf|hbf, pard}
//   vllm      = {fcfs, vllm}          scorpio   = {lbf, scorpio}     (rules only at an LLM stage)
// The other ablations (pard-back, pard-sf, pard-lower, pard-upper, pard-instant) differ only in what
// the planner publishes (the downstream term, eps = 0), so they need no code here; nor do pard's
// planner-side levers (the utilisation-aware downstream estimate, the online d(b) correction).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace pard {

// Service order of a stage's queue. Adaptive switches between LBF and HBF with hysteresis (§3.3).
enum class Order : std::uint8_t { kFcfs = 0, kLbf = 1, kHbf = 2, kAdaptive = 3 };

// Drop rule applied when a request is popped into a batch (and, for some rules, at drain time).
enum class DropRule : std::uint8_t {
    kNone = 0, kPard = 1, kClipper = 2, kNexus = 3, kDagor = 4, kTriton = 5, kRayServe = 6,
    kVllm = 7,     // an LLM stage rejects an arrival when its waiting queue is full (rules/vllm_cap.hpp)
    kScorpio = 8,  // an LLM stage rejects a request whose first token cannot meet its deadline (rules/scorpio_ttft.hpp)
};

// Drop reason codes; kReasonNames[code] is the name used in reports and in pard.Dropped.
enum class Reason : std::uint8_t {
    kInfeasible = 0,   // pard: end-to-end estimate exceeds the SLO (Eq. 3b), at pop or in the low-end purge
    kExpired = 1,      // clipper / dagor: the deadline has already passed
    kStageBudget = 2,  // clipper: spent more than its stage budget slo_k at this stage
    kWindow = 3,       // nexus: before the first feasible window, or itself infeasible
    kOverload = 4,     // dagor: shed by the (1 - alpha) admission throttle while overloaded
    kCancelled = 5,    // a sibling DAG branch of the request was dropped: this copy is discarded
    kRejected = 6,     // refused at admission (the planner's admit_fraction, a full queue) or a full ring
    kTimeout = 7,      // triton: waited longer than its queue timeout (the SLO) at this stage
    kShed = 8,         // pard: shed on the hot path, the stage cannot reach it within its slack (overload)
};
inline constexpr int kNumReasons = 9;
inline constexpr const char* kReasonNames[kNumReasons] = {
    "infeasible", "expired", "stage-budget", "window", "overload", "cancelled", "rejected", "timeout", "shed"};

// What a stage reads of the stages below it on the hot path (stage_scheduler.hpp, step 2b's pop rule):
// nothing, or whether any of them found itself overloaded at its last batch (its own step 2b test).
enum class BelowSignal : std::uint8_t { kNone = 0, kOverloaded = 1 };

inline const char* below_name(BelowSignal b) noexcept {
    switch (b) {
        case BelowSignal::kNone: return "none";
        case BelowSignal::kOverloaded: return "overloaded";
    }
    return "?";
}

inline BelowSignal parse_below(const std::string& s) {
    if (s == "none") return BelowSignal::kNone;
    if (s == "overloaded") return BelowSignal::kOverloaded;
    throw std::invalid_argument("Policy: overload_below='" + s + "' is not one of 'none', 'overloaded'");
}

inline const char* order_name(Order o) noexcept {
    switch (o) {
        case Order::kFcfs: return "fcfs";
        case Order::kLbf: return "lbf";
        case Order::kHbf: return "hbf";
        case Order::kAdaptive: return "adaptive";
    }
    return "?";
}

inline const char* drop_name(DropRule d) noexcept {
    switch (d) {
        case DropRule::kNone: return "none";
        case DropRule::kPard: return "pard";
        case DropRule::kClipper: return "clipper";
        case DropRule::kNexus: return "nexus";
        case DropRule::kDagor: return "dagor";
        case DropRule::kTriton: return "triton";
        case DropRule::kRayServe: return "ray-serve";
        case DropRule::kVllm: return "vllm";
        case DropRule::kScorpio: return "scorpio";
    }
    return "?";
}

inline Order parse_order(const std::string& s) {
    if (s == "fcfs") return Order::kFcfs;
    if (s == "lbf") return Order::kLbf;
    if (s == "hbf") return Order::kHbf;
    if (s == "adaptive") return Order::kAdaptive;
    throw std::invalid_argument("Policy: order='" + s + "' is not one of 'fcfs', 'lbf', 'hbf', 'adaptive'");
}

inline DropRule parse_drop(const std::string& s) {
    if (s == "none") return DropRule::kNone;
    if (s == "pard") return DropRule::kPard;
    if (s == "clipper") return DropRule::kClipper;
    if (s == "nexus") return DropRule::kNexus;
    if (s == "dagor") return DropRule::kDagor;
    if (s == "triton") return DropRule::kTriton;
    if (s == "ray-serve") return DropRule::kRayServe;
    if (s == "vllm") return DropRule::kVllm;
    if (s == "scorpio") return DropRule::kScorpio;
    throw std::invalid_argument("Policy: drop='" + s +
                                "' is not one of 'none', 'pard', 'clipper', 'nexus', 'dagor', 'triton', 'ray-serve', "
                                "'vllm', 'scorpio'");
}

struct Policy {
    Order order = Order::kAdaptive;
    DropRule drop = DropRule::kPard;
    std::int64_t dagor_threshold_ns = 20'000'000;  // DAGOR's overload threshold T on the average queueing delay
    double dagor_alpha = 0.4;                      // DAGOR sheds an alpha share of the input while overloaded
    // pard (DESIGN §3.7): one heap per service tier, served and shed by tier weight (tiered_queue.hpp);
    // and overload detected on the hot path at every batch (stage_scheduler.hpp, "reactive order").
    bool tiered = false;
    bool reactive = false;
    bool shed = true;  // reactive: also shed the unreachable bottom at once (else only switch to HBF)
    // reactive: while overloaded, forward no faster than the slowest stage below can finish (the
    // published path_rate): smaller batches here, so every request dropped for the path's lack of
    // capacity is dropped here, before any stage below spends on it (stage_scheduler.hpp, step 2c).
    bool pace = false;
    // reactive: the pop rule also takes the overload downstream term (published overload_downstream)
    // while a stage below signals this (BelowSignal): a downstream stage that is backed up now is
    // seen within a batch, not at the planner's next sync (stage_scheduler.hpp, step 2b).
    BelowSignal overload_below = BelowSignal::kNone;
    // The pop rule budgets each stage below at the larger of the planner's queueing delay q_i (a window
    // mean) and the wait its queue holds now, n_i / R_i less what it drains before the request reaches
    // it, summed along the worst path below, and takes the larger of that estimate and the published one
    // (stage_scheduler.hpp, step 4): a backlog piling up below is seen at once, not a sync later.
    bool live_queues = false;
    // At an entry stage: a virtual queue of the slowest stage below (rules/virtual_queue.hpp) sheds, before
    // any compute, a request that stage would drop behind what the entry has already forwarded.
    bool virtual_queue = false;
    // On a parallel DAG branch (StageScheduler::set_parallel), in overload (HBF published, or the stage's
    // own overload test fired since the last calm publish), serve and shed by a rank every branch computes
    // alike from the request's id, so that overloaded sibling branches keep the same requests
    // (stage_scheduler.hpp, sync_rank).
    bool coherent_rank = false;
    // Queue bound (0 = none): a request that finds this many queued is rejected (Triton's
    // max_queue_size at every stage; Ray Serve's max_queued_requests, at entry stages only).
    std::int64_t max_queue = 0;
    bool max_queue_entry_only = false;
    // LLM stages (DESIGN §3.8): llm_tokens, the rules read each request's own predicted output length (the
    // llm_quantile of the stage's learned distribution) and stop a sequence that can no longer finish in
    // time; without it they see the running means of finished requests (the paper's stated limit).
    bool llm_tokens = false;
    double llm_quantile = 0.5;
    // LLM stages, pard rule: stop a running sequence at a step boundary once it can no longer finish by its
    // deadline (pard/sim/llm_worker.hpp, step 2).
    bool llm_stop = false;
    // LLM stages, pard rule: the joins pop the lowest budget first whatever the published order
    // (pard/llm/stage_join.hpp says why).
    bool llm_lbf = false;

    // Validates the parameters; throws std::invalid_argument naming the field and value.
    void validate() const {
        if (dagor_threshold_ns < 0) {
            throw std::invalid_argument("Policy: dagor_threshold_s=" + std::to_string(static_cast<double>(dagor_threshold_ns) * 1e-9) +
                                        " must be >= 0");
        }
        if (!(dagor_alpha >= 0.0 && dagor_alpha <= 1.0)) {
            throw std::invalid_argument("Policy: dagor_alpha=" + std::to_string(dagor_alpha) +
                                        " must be in [0, 1]");
        }
        if (!(llm_quantile > 0.0 && llm_quantile < 1.0)) {
            throw std::invalid_argument("Policy: llm_quantile=" + std::to_string(llm_quantile) + " must be in (0, 1)");
        }
        if (max_queue < 0) {
            throw std::invalid_argument("Policy: max_queue=" + std::to_string(max_queue) + " must be >= 0 (0 = none)");
        }
    }

    // The queue key: FCFS orders by arrival at the stage, every other order by deadline.
    [[nodiscard]] bool keyed_by_arrival() const noexcept { return order == Order::kFcfs; }
};

}  // namespace pard
