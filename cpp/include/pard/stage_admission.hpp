// pard/stage_admission.hpp — StageAdmission: what a stage admits as it drains its ring into its queue
// (step 1 of stage_scheduler.hpp): the queue bound, the planner's admitted share (lowest tiers first on
// a tiered stage) and Dagor's throttle while its queueing delay exceeds the threshold. Deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pard/estimator.hpp"
#include "pard/policy.hpp"
#include "pard/request.hpp"
#include "pard/rules/tier_admission.hpp"
#include "pard/snapshot.hpp"

namespace pard {

class StageAdmission {
public:
    // tiers: the stage queue's tier count; weights: the tiers' weights (read when tiers > 1).
    StageAdmission(const Policy& policy, bool entry, std::size_t tiers, std::vector<double> weights)
        : policy_(policy), entry_(entry), tiered_(tiers > 1), weights_(std::move(weights)), tiers_(tiers) {}

    [[nodiscard]] bool throttled(const PublishedTerms& t) const noexcept {
        return policy_.drop != DropRule::kNone && t.admit_fraction < 1.0;
    }
    [[nodiscard]] bool dagor_overloaded(const PublishedTerms& t) const noexcept {
        return policy_.drop == DropRule::kDagor && t.queue_delay_ns > policy_.dagor_threshold_ns;
    }
    [[nodiscard]] bool bounded() const noexcept {
        return policy_.max_queue > 0 && (entry_ || !policy_.max_queue_entry_only);
    }
    // Whether a drain under these terms pushes every request (the fast path's condition).
    [[nodiscard]] bool admits_all(const PublishedTerms& t) const noexcept {
        return !throttled(t) && !dagor_overloaded(t) && !bounded();
    }

    // Fixes one drain's decisions from the terms it runs under.
    void begin(const PublishedTerms& t) noexcept {
        throttle_ = throttled(t);
        overloaded_ = dagor_overloaded(t);
        bound_ = bounded();
        fraction_ = t.admit_fraction;
        by_tier_ = throttle_ && tiered_;
        if (by_tier_) tiers_.update(fraction_, weights_);
    }

    // -1 to admit the request into a queue holding `queued`, else the Reason code of its drop.
    [[nodiscard]] int verdict(const Request& r, std::size_t queued) noexcept {
        if (by_tier_) tiers_.note(r.tier, fraction_, weights_);
        if (bound_ && queued >= static_cast<std::size_t>(policy_.max_queue)) return static_cast<int>(Reason::kRejected);
        if (throttle_ && !(by_tier_ ? tiers_.admit(r.tier) : share_.admit(fraction_))) {
            return static_cast<int>(Reason::kRejected);
        }
        if (overloaded_ && !dagor_.admit(1.0 - policy_.dagor_alpha)) return static_cast<int>(Reason::kOverload);
        return -1;
    }

private:
    Policy policy_;
    bool entry_;
    bool tiered_;
    std::vector<double> weights_;
    rules::TierAdmission tiers_;
    AdmissionThrottle share_;
    AdmissionThrottle dagor_;
    bool throttle_ = false, overloaded_ = false, bound_ = false, by_tier_ = false;
    double fraction_ = 1.0;
};

}  // namespace pard
