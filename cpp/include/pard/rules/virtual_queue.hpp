// pard/rules/virtual_queue.hpp — the entry keeps a virtual queue of the bottleneck below (Policy::virtual_queue).
//
// Why: a bottleneck that drops its own excess keeps its queue short, so the latency terms the stages above
// read show no overload and every request it drops has been through them first. Counting what the entry
// forwards against what the bottleneck can finish shows the excess at the entry, where shedding costs nothing.
// Two guards keep the bottleneck's batches full while it is paced so: the entry never sheds while fewer than
// kFloorBatches batch-times of the bottleneck's work lie between it and the bottleneck's batches (the backlog
// counts the bottleneck's own drops until the rate drains them, so it runs above the real queue, and a
// bottleneck held to it alone runs partial batches and finishes fewer than the rate the entry counts), and
// the paced bottleneck pops its lowest budget first (what the entry forwards is feasible in deadline order;
// served newest first, the oldest forwarded starve and are dropped after the stages above spent on them).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pard/policy.hpp"
#include "pard/request.hpp"
#include "pard/snapshot.hpp"

namespace pard::rules {

// A fluid backlog of the bottleneck as the entry sees it: +1 per request the entry forwards, drained at
// the bottleneck's service rate A (requests/s at full batches, which is never below what it finishes, so
// the backlog errs low: toward forwarding). Anchored to what the stages down to the bottleneck hold now.
class VirtualQueue {
public:
    // Drains at rate (req/s) from the last call to now_ns; a clock that steps back drains nothing.
    void drain(std::int64_t now_ns, double rate) noexcept {
        if (now_ns > at_ns_ && rate > 0.0) {
            backlog_ -= rate * static_cast<double>(now_ns - at_ns_) * 1e-9;
            if (backlog_ < 0.0) backlog_ = 0.0;
        }
        if (now_ns > at_ns_) at_ns_ = now_ns;
    }

    // held: the requests between this entry and the end of the bottleneck's batches now (forwarded, not yet
    // finished there). The backlog is never below them (the rate may be above what the bottleneck really
    // finishes, or another entry feeds it); once they are none it is none, and it is them alone when the
    // backlog is counted against another stage than before (reset: what it counted drains at the old
    // stage's rate, not the new one's, and carried over it sheds for a stage that holds none of it).
    // Between, what a stage below dropped still counts until the rate drains it: anchored to the live
    // count, a bottleneck that serves its newest first (HBF) and drops its oldest would let the entry
    // forward its excess again.
    void anchor(std::size_t held, bool reset) noexcept {
        const auto h = static_cast<double>(held);
        if (backlog_ < h || reset) backlog_ = h;
    }

    void forwarded() noexcept { backlog_ += 1.0; }

    [[nodiscard]] double backlog() const noexcept { return backlog_; }

    // When the bottleneck has served what is ahead now, at rate (ns on the caller's clock).
    [[nodiscard]] std::int64_t served_ns(std::int64_t now_ns, double rate) const noexcept {
        return now_ns + static_cast<std::int64_t>(backlog_ / rate * 1e9);
    }

private:
    double backlog_ = 0.0;
    std::int64_t at_ns_ = 0;
};

// The tier weights of a stage that serves one tier (VirtualQueueGate::begin: no split by tier).
inline const std::vector<double> kOneTier{};

// The part of a virtual queue's backlog of each service tier (the stage's tier index), as the bottleneck
// serves them: a heavier tier goes ahead of a lighter one, so its rate drains the heaviest first, and what lies
// ahead of a request is its own tier's part and the heavier tiers'. The lightest tier has everything ahead of
// it (what the anchor counts is not split by tier), and so does every request of a stage with one tier.
class TierBacklog {
public:
    // The stage's tier weights (one per tier index; fewer than two: no split). Fixed for a stage.
    void weights(const std::vector<double>& w) {
        if (w.size() == w_.size()) return;
        w_ = w;
        part_.assign(w.size(), 0.0);
        order_.resize(w.size());
        for (std::size_t k = 0; k < order_.size(); ++k) order_[k] = k;
        std::stable_sort(order_.begin(), order_.end(), [this](std::size_t a, std::size_t b) { return w_[a] > w_[b]; });
    }

    // Drains rate (req/s) from the last call to now_ns, heaviest tier first; the parts never add up to more
    // than whole, the backlog they split.
    void drain(std::int64_t now_ns, double rate, double whole) noexcept {
        double budget = now_ns > at_ns_ && rate > 0.0 ? rate * static_cast<double>(now_ns - at_ns_) * 1e-9 : 0.0;
        if (now_ns > at_ns_) at_ns_ = now_ns;
        double sum = 0.0;
        for (std::size_t k : order_) {
            const double take = part_[k] < budget ? part_[k] : budget;
            part_[k] -= take;
            budget -= take;
            sum += part_[k];
        }
        if (sum > whole) {
            for (double& p : part_) p = sum > 0.0 ? p * whole / sum : 0.0;
        }
    }

    void forwarded(std::int32_t tier) noexcept {
        if (part_.size() > 1) part_[index(tier)] += 1.0;
    }

    // The backlog ahead of a request of this tier code (whole: the backlog the parts split).
    [[nodiscard]] double ahead(std::int32_t tier, double whole) const noexcept {
        if (part_.size() < 2) return whole;
        const std::size_t t = index(tier);
        if (w_[t] <= w_[order_.back()]) return whole;
        double sum = 0.0;
        for (std::size_t k = 0; k < part_.size(); ++k) sum += w_[k] >= w_[t] ? part_[k] : 0.0;
        return sum < whole ? sum : whole;
    }

private:
    // A tier code's index, as the stage's tiered queue files it (an unknown code: tier 0's).
    [[nodiscard]] std::size_t index(std::int32_t tier) const noexcept {
        return (tier < 0 || static_cast<std::size_t>(tier) >= part_.size()) ? 0 : static_cast<std::size_t>(tier);
    }

    std::vector<double> w_, part_;
    std::vector<std::size_t> order_;  // tier indices, heaviest first
    std::int64_t at_ns_ = 0;
};

// The earliest a request forwarded by a batch ending at leave_ns can finish: it starts at the bottleneck
// no sooner than it gets there and than the backlog ahead of it is served (served_ns), then runs the
// bottleneck's batch (bottleneck_d_ns) and whatever the bottleneck's own downstream term says lies below.
// A request whose deadline is under this would be dropped at the bottleneck: shed it at the entry.
[[nodiscard]] constexpr std::int64_t virtual_queue_threshold(std::int64_t leave_ns, std::int64_t served_ns,
                                                             std::int64_t bottleneck_d_ns,
                                                             std::int64_t below_bottleneck_ns) noexcept {
    return (served_ns > leave_ns ? served_ns : leave_ns) + bottleneck_d_ns + below_bottleneck_ns;
}

// Requests a stage has taken into batches and not yet seen end (observe_batch): what a virtual queue's
// anchor counts of the stages down to the bottleneck. Any thread; relaxed.
class InFlight {
public:
    void taken(std::size_t n) noexcept { taken_.fetch_add(n, std::memory_order_relaxed); }
    void finished(std::int64_t b) noexcept {
        done_.fetch_add(static_cast<std::uint64_t>(b), std::memory_order_relaxed);
        ended_.store(true, std::memory_order_relaxed);
    }
    [[nodiscard]] std::size_t count() const noexcept {
        const std::uint64_t t = taken_.load(std::memory_order_relaxed), d = done_.load(std::memory_order_relaxed);
        return t > d ? static_cast<std::size_t>(t - d) : 0;
    }

    // Whether a batch has ended here: the stage's speed is measured, not the profile's word alone.
    [[nodiscard]] bool ran() const noexcept { return ended_.load(std::memory_order_relaxed); }

private:
    std::atomic<std::uint64_t> taken_{0}, done_{0};
    std::atomic<bool> ended_{false};
};

// The floor, in batch-times of the bottleneck's work at its service rate (rate x d(B): one full batch per
// worker): one for each worker's next collection and one in transit through the stages above, which forward
// in batches. Below it the entry forwards whatever the pard rule keeps; the bottleneck's rule is the backstop.
inline constexpr double kFloorBatches = 2.0;

// How much slower than the entry a stage below must be to be its bottleneck: a stage as fast as the entry
// within the measured duration ratios' noise is paced by the entry's own queue and drops already, and a
// backlog counted against it sheds what the entry would have served (the grid's tied lv and da entries).
inline constexpr double kSlower = 0.95;

// One entry stage's virtual queue over the stages below it (Stage: StageScheduler, read through
// effective_terms, queued, expected_duration_ns, config, and as a friend its below_ and vq_.flight). Under
// the batch-forming lock.
class VirtualQueueGate {
public:
    // At an entry whose slowest stage below (the least published service rate) is slower than itself
    // (own_rate): drains and anchors the backlog and fixes the bottleneck's terms for this batch's pops.
    // on: the policy asks for it at this stage; off, every verdict forwards.
    // tier_weights: this stage's, one per tier its queue serves apart (kOneTier: one).
    template <class Stage>
    void begin(bool on, double own_rate, const std::vector<const Stage*>& below, std::int64_t now_ns,
               const std::vector<double>& tier_weights = kOneTier) {
        if (on) tiers_.weights(tier_weights);
        const Stage* bn = on ? pick(own_rate, below, now_ns) : nullptr;
        active_ = bn != nullptr;
        pace(bn != nullptr ? &bn->vq_ : nullptr);
    }

    // Whether an entry's virtual queue counts its forwards against this stage (its bottleneck, found at the
    // entry's last batch): then the stage pops lowest budget first. Any thread; relaxed.
    [[nodiscard]] bool paced() const noexcept { return pacers_.load(std::memory_order_relaxed) > 0; }

    // The pop's verdict on r once the pard rule has judged it (infeasible: it drops r): -1 to forward r from
    // a batch ending at leave_ns (counted in the backlog), else the Reason code (kInfeasible, kShed). On a
    // stage with several tiers, what lies ahead of r is its tier's part (TierBacklog: the lightest tier is
    // shed first).
    [[nodiscard]] int verdict(bool infeasible, const Request& r, std::int64_t leave_ns, std::int64_t now_ns) noexcept {
        if (infeasible) return static_cast<int>(Reason::kInfeasible);
        if (!active_) return -1;
        const double ahead = tiers_.ahead(r.tier, vq_.backlog());
        const auto served_ns = now_ns + static_cast<std::int64_t>(ahead / rate_ * 1e9);
        if (!(pending_ < floor_) && r.deadline_ns < virtual_queue_threshold(leave_ns, served_ns, d_ns_, below_ns_)) {
            return static_cast<int>(Reason::kShed);
        }
        pending_ += 1.0;
        vq_.forwarded();
        tiers_.forwarded(r.tier);
        return -1;
    }

    InFlight flight;  // this stage's own requests in batches not yet ended

private:
    // The bottleneck below this entry (nullptr: none slower than it), its terms fixed for this batch.
    // Among stages whose rates tie within the noise (kSlower), the one it counted against before stays the
    // bottleneck: tied stages' published rates cross on every sync, and each switch resets the backlog.
    template <class Stage>
    const Stage* pick(double own_rate, const std::vector<const Stage*>& below, std::int64_t now_ns) {
        const Stage* bn = nullptr;
        const Stage* prev = nullptr;  // the stage counted against before, while it still publishes a rate
        double rate = 0.0, prev_rate = 0.0;
        for (const Stage* s : below) {
            const double r = s->effective_terms().service_rate;
            if (r > 0.0 && (bn == nullptr || r < rate)) {
                bn = s;
                rate = r;
            }
            if (r > 0.0 && static_cast<const void*>(s) == last_) {
                prev = s;
                prev_rate = r;
            }
        }
        if (prev != nullptr && kSlower * prev_rate < rate) {
            bn = prev;
            rate = prev_rate;
        }
        // An llm stage's pace is tokens, not batches of a fixed duration: its entry sheds on its live queue
        // (Policy::llm_live_queue), and a backlog drained at a batch rate sheds what it would finish. A stage
        // that has run no batch yet has only its profile's rate, against this entry's measured one (a
        // profile that is 20x slow made an idle stage look like the bottleneck and shed a burst it served).
        if (bn == nullptr || bn->config().llm || !bn->vq_.flight.ran() || !(own_rate > 0.0) ||
            !(rate < kSlower * own_rate)) {
            last_ = nullptr;
            return nullptr;
        }
        vq_.drain(now_ns, rate);
        std::size_t held = flight.count();  // forwarded, not yet finished at the bottleneck
        for (const Stage* s : below) {
            const auto& under = s->below_;
            if (s == bn || std::find(under.begin(), under.end(), bn) != under.end()) held += s->queued() + s->vq_.flight.count();
        }
        const std::size_t bn_flight = bn->vq_.flight.count();
        vq_.anchor(held, (bn->queued() == 0 && bn_flight == 0) || static_cast<const void*>(bn) != last_);
        tiers_.drain(now_ns, rate, vq_.backlog());
        last_ = bn;
        rate_ = rate;
        d_ns_ = bn->expected_duration_ns(bn->config().max_batch);
        below_ns_ = bn->effective_terms().downstream_ns;
        pending_ = static_cast<double>(held - bn_flight);  // bn_flight <= held: held counts it
        floor_ = kFloorBatches * rate * static_cast<double>(d_ns_) * 1e-9;
        return bn;
    }

    // Moves this entry's mark from the bottleneck it paced to gate (nullptr: none). Several entries may
    // pace one stage: a count, not a flag.
    void pace(const VirtualQueueGate* gate) noexcept {
        if (gate == paced_) return;
        if (paced_ != nullptr) paced_->pacers_.fetch_sub(1, std::memory_order_relaxed);
        if (gate != nullptr) gate->pacers_.fetch_add(1, std::memory_order_relaxed);
        paced_ = gate;
    }

    VirtualQueue vq_;
    TierBacklog tiers_;           // vq_'s backlog by tier
    const void* last_ = nullptr;  // the stage the backlog counts against (nullptr: none); compared, never read
    double rate_ = 0.0;           // the bottleneck's service rate (req/s), this batch
    std::int64_t d_ns_ = 0;       // its d(B) (ns), this batch
    std::int64_t below_ns_ = 0;   // its downstream term (ns), this batch
    double pending_ = 0.0;        // requests between here and the bottleneck's batches, this batch's forwards too
    double floor_ = 0.0;          // kFloorBatches of the bottleneck's work (requests), this batch
    bool active_ = false;         // begin found a bottleneck slower than this stage
    const VirtualQueueGate* paced_ = nullptr;  // the bottleneck's gate this entry marks as paced
    mutable std::atomic<int> pacers_{0};       // entries whose virtual queue paces this stage now
};

}  // namespace pard::rules
