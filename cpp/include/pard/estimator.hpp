// pard/estimator.hpp — the per-request drop decisions (DESIGN §3.2, §3.6).
//
// Each rule is a tiny pure function over one Request and a few stage-level numbers that are fixed
// for the whole batch being formed (computed once per form_batch), so the per-request work is one
// or two integer compares. All times are int64 ns.
//
//   pard (paper Eq. 3b): L(r) = (t_e - send) + d_k(b) + downstream, drop <=> L(r) > slo(r).
//     With slo = deadline - send this is t_e + d_k(b) + downstream > deadline, i.e.
//     deadline < threshold where threshold = t_e + d_k(b) + downstream. Equal keeps.
//   clipper++: stage budget slo_k = (deadline - send) * budget_fraction; at pop time (now) drop a
//     request whose deadline has passed (expired) or that has spent more than slo_k at this stage
//     (stage-budget).
//   nexus: a request is feasible for a batch starting at t_e that runs d_k(b) iff it finishes this
//     stage within its stage budget counted from its arrival here: t_e + d_k(b) - arrival <= slo_k.
//   dagor / clipper expiry, ray-serve's end-to-end timeout: deadline < now.
//   triton: every stage applies the same queue timeout, the request's SLO counted from its arrival at
//     that stage: now - arrival > deadline - send.
#pragma once

#include <cstdint>

#include "pard/policy.hpp"
#include "pard/request.hpp"

namespace pard {

// Eq. 3b threshold for one batch: a request is dropped iff its deadline is below it.
[[nodiscard]] constexpr std::int64_t pard_threshold(std::int64_t t_e_ns, std::int64_t d_k_ns,
                                                    std::int64_t downstream_ns) noexcept {
    return t_e_ns + d_k_ns + downstream_ns;
}

// Eq. 3b: true iff the end-to-end estimate exceeds the SLO (strictly).
[[nodiscard]] constexpr bool pard_drops(const Request& r, std::int64_t threshold_ns) noexcept {
    return r.deadline_ns < threshold_ns;
}

// clipper++ / nexus stage budget slo_k = slo * budget_fraction (truncated to whole ns).
[[nodiscard]] inline std::int64_t stage_budget_ns(const Request& r, double budget_fraction) noexcept {
    return static_cast<std::int64_t>(static_cast<double>(r.deadline_ns - r.send_ns) * budget_fraction);
}

[[nodiscard]] constexpr bool expired(const Request& r, std::int64_t now_ns) noexcept {
    return r.deadline_ns < now_ns;
}

// triton: waited at this stage longer than its queue timeout (the SLO, from arrival here).
[[nodiscard]] constexpr bool queue_timed_out(const Request& r, std::int64_t now_ns) noexcept {
    return now_ns - r.arrival_ns > r.deadline_ns - r.send_ns;
}

// clipper++: the reason to drop at pop time, or -1 to keep.
[[nodiscard]] inline int clipper_verdict(const Request& r, std::int64_t now_ns, double budget_fraction) noexcept {
    if (expired(r, now_ns)) return static_cast<int>(Reason::kExpired);
    if (now_ns - r.arrival_ns > stage_budget_ns(r, budget_fraction)) return static_cast<int>(Reason::kStageBudget);
    return -1;
}

// nexus: can r finish this stage within its stage budget if the batch starts at t_e and runs d_k?
[[nodiscard]] inline bool nexus_feasible(const Request& r, std::int64_t t_e_ns, std::int64_t d_k_ns,
                                         double budget_fraction) noexcept {
    return t_e_ns + d_k_ns - r.arrival_ns <= stage_budget_ns(r, budget_fraction);
}

// A deterministic admission throttle: admits a share `fraction` of the calls, evenly spread
// (an error-diffusion accumulator, no randomness): with fraction 0.6 it admits 3 of every 5.
class AdmissionThrottle {
public:
    // Returns true to admit. fraction >= 1 always admits; <= 0 never does.
    bool admit(double fraction) noexcept {
        if (fraction >= 1.0) {
            credit_ = 0.0;
            return true;
        }
        credit_ += fraction > 0.0 ? fraction : 0.0;
        if (credit_ >= 1.0 - 1e-12) {
            credit_ -= 1.0;
            return true;
        }
        return false;
    }
    void reset() noexcept { credit_ = 0.0; }

private:
    double credit_ = 0.0;
};

}  // namespace pard
