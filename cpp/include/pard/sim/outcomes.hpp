// pard/sim/outcomes.hpp — SimOutcomes: the simulator's per-request accounting. Each request's
// terminal state is set once (a drop, a rejection, or its last sink finishing it), with its stage,
// reason and time; its compute is the sum of its shares of the batches it ran in; a join stage
// receives it once all its predecessors have delivered it. Where that compute went (useful, wasted,
// unresolved per stage) is kept by a ComputeSplit (pard/compute_split.hpp), from each request's
// per-stage tally. Tallies live in a pool of the requests that have been charged and not yet ended
// (a few at a time), not one per request of the run: 4 bytes per request instead of 8 per stage.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "pard/compute_split.hpp"
#include "pard/outcome.hpp"
#include "pard/policy.hpp"
#include "pard/request.hpp"

namespace pard::sim {

class SimOutcomes {
public:
    // n requests, each finished by `n_sinks` sink stages, through `n_joins` join stages, of `n_stages`.
    void reset(std::size_t n, std::size_t n_sinks, std::size_t n_joins, std::size_t n_stages) {
        n_joins_ = n_joins;
        n_stages_ = n_stages;
        split_ = ComputeSplit(n_stages);
        slot_.assign(n, kNoSlot);
        pool_.clear();
        free_.clear();
        zero_.assign(n_stages, 0);
        state_.assign(n, Outcome::kPending);
        finish_.assign(n, -1);
        drop_stage_.assign(n, -1);
        reason_.assign(n, -1);
        compute_.assign(n, 0.0);
        sinks_left_.assign(n, static_cast<std::uint16_t>(n_sinks));
        join_count_.assign(n * n_joins_, 0);
    }

    [[nodiscard]] bool pending(std::uint64_t id) const noexcept { return state_[id] == Outcome::kPending; }

    // Terminal states are set once.
    void terminate(const Request& r, Outcome o, int stage, Reason why, std::int64_t now) {
        if (state_[r.id] != Outcome::kPending) return;
        state_[r.id] = o;
        drop_stage_[r.id] = stage;
        reason_[r.id] = static_cast<std::int32_t>(why);
        finish_[r.id] = now;
        settle(r.id, o);
    }

    // A sink stage finished request r at `now`: its state once the last sink has (on time or late),
    // else kPending.
    Outcome finish_at_sink(const Request& r, std::int64_t now) {
        if (--sinks_left_[r.id] != 0) return Outcome::kPending;
        state_[r.id] = now <= r.deadline_ns ? Outcome::kOnTime : Outcome::kLate;
        finish_[r.id] = now;
        settle(r.id, state_[r.id]);
        return state_[r.id];
    }

    // A predecessor of the join stage in column `join` (n_pred predecessors) delivered request id:
    // true once every predecessor has.
    bool join_arrive(std::uint64_t id, std::size_t join, int n_pred) {
        std::uint8_t& c = join_count_[id * n_joins_ + join];
        return ++c >= n_pred;
    }

    // Stage k started `batch`, which runs `duration_ns`: each request's equal share, as a double
    // (compute_ns) and in whole ns by pard/compute_split.hpp's rule (to a request already ended, a
    // cancelled copy, by its outcome).
    void charge_batch(const std::vector<Request>& batch, std::size_t k, std::int64_t duration_ns) {
        const double share = static_cast<double>(duration_ns) / static_cast<double>(batch.size());
        const BatchShares split(duration_ns, batch.size());
        for (std::size_t i = 0; i < batch.size(); ++i) {
            const std::uint64_t id = batch[i].id;
            compute_[id] += share;
            if (pending(id)) {
                split_.charge_pending(k, split(i), tally(id));
            } else {
                split_.charge_ended(k, split(i), state_[id]);
            }
        }
    }

    // Stage k charged `ns` of its compute to request id alone (an LLM step's prefill or decode share).
    void charge(std::uint64_t id, std::size_t k, std::int64_t ns) {
        compute_[id] += static_cast<double>(ns);
        if (pending(id)) {
            split_.charge_pending(k, ns, tally(id));
        } else {
            split_.charge_ended(k, ns, state_[id]);
        }
    }

    [[nodiscard]] const std::vector<Outcome>& states() const noexcept { return state_; }
    [[nodiscard]] const std::vector<std::int64_t>& finish_ns() const noexcept { return finish_; }
    [[nodiscard]] const std::vector<std::int32_t>& drop_stage() const noexcept { return drop_stage_; }
    [[nodiscard]] const std::vector<std::int32_t>& drop_reason() const noexcept { return reason_; }
    [[nodiscard]] const std::vector<double>& compute_ns() const noexcept { return compute_; }
    [[nodiscard]] const ComputeSplit& compute_split() const noexcept { return split_; }

private:
    static constexpr std::uint32_t kNoSlot = std::numeric_limits<std::uint32_t>::max();

    // Request id's tally, from the pool (taken at its first charge).
    std::int64_t* tally(std::uint64_t id) {
        std::uint32_t& s = slot_[id];
        if (s == kNoSlot) {
            if (free_.empty()) {
                s = static_cast<std::uint32_t>(pool_.size() / n_stages_);
                pool_.resize(pool_.size() + n_stages_, 0);
            } else {
                s = free_.back();
                free_.pop_back();
            }
        }
        return pool_.data() + static_cast<std::size_t>(s) * n_stages_;
    }

    // Request id ended in state o: its tally (zero if never charged) settles and goes back to the pool.
    void settle(std::uint64_t id, Outcome o) {
        std::uint32_t& s = slot_[id];
        if (s == kNoSlot) {
            split_.settle(o, zero_.data());
            return;
        }
        split_.settle(o, pool_.data() + static_cast<std::size_t>(s) * n_stages_);  // zeroes it
        free_.push_back(s);
        s = kNoSlot;
    }

    std::size_t n_joins_ = 0;
    std::size_t n_stages_ = 0;
    ComputeSplit split_;
    std::vector<std::uint32_t> slot_;   // per request, its tally's slot in pool_ (kNoSlot: none)
    std::vector<std::int64_t> pool_;    // n_stages_ entries per slot (ns), zero while free
    std::vector<std::uint32_t> free_;   // free slots
    std::vector<std::int64_t> zero_;    // the tally of a request never charged
    std::vector<Outcome> state_;
    std::vector<std::int64_t> finish_;
    std::vector<std::int32_t> drop_stage_;
    std::vector<std::int32_t> reason_;
    std::vector<double> compute_;
    std::vector<std::uint16_t> sinks_left_;
    std::vector<std::uint8_t> join_count_;
};

}  // namespace pard::sim
