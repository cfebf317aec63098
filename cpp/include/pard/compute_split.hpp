// pard/compute_split.hpp — ComputeSplit: where a pipeline's compute went (DESIGN §4). One definition
// for both C++ engines: the simulator (pard/sim/outcomes.hpp) and the live pipeline
// (pard/live/ledger.hpp, one ComputeSplit per stripe, summed when read); pard.ray's ledger applies
// the same rule in Python (python/pard/ray/ledger.py; tests/test_compute_split.py holds them equal).
//
// The rule. A batch's compute is its measured duration (ns, one worker), as the run recorder counts
// it. It is shared equally among the requests in the batch (BatchShares: whole nanoseconds, the
// remainder one each to the first requests, so that the shares add up to the duration exactly).
//   * A share charged to a request still pending is held as *unresolved* at that stage, and in the
//     request's own tally (one int64 per stage, kept by the engine beside the request).
//   * At the request's terminal transition (settle) its tally moves to *useful* if it finished on
//     time, else to *wasted* (late, dropped, rejected, failed), stage by stage.
//   * A share charged to a request that has already ended counts by its outcome at once. In the C++
//     engines that is a cancelled copy inside a batch that was already collected or running, of a
//     request that ended otherwise than on time (a request cannot finish while a copy of it still
//     runs at a stage above an exit): wasted. pard.ray's driver may hear of a batch after the
//     request's end, whatever the end.
// So at every moment, per stage, useful + wasted + unresolved = the compute charged, exactly (integer
// nanoseconds); once nothing is in flight, unresolved is 0.
//
// Drops before compute. A request shed (dropped or rejected) whose tally is empty when it ends was
// shed before any stage spent on it: `shed_before_compute` of `shed`.
//
// ComputeBook keeps the tallies itself, by request id, for an engine that has no per-request record
// of its own in C++ (pard.ray's driver, through the binding).
//
// Contract. Not thread-safe: one owner (the simulator; a live stripe under its lock; the Ray driver
// under its ledger's lock). add() sums two splits of the same stage count. A tally has n_stages()
// entries; settle() zeroes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pard/outcome.hpp"

namespace pard {

// The shares (ns) of a batch of `size` requests that ran `duration_ns`: share(i) for i = 0 .. size - 1
// add up to duration_ns exactly (whole nanoseconds, the remainder one each to the first requests).
// One division per batch, not per request.
struct BatchShares {
    BatchShares(std::int64_t duration_ns, std::size_t size) noexcept
        : base(size ? duration_ns / static_cast<std::int64_t>(size) : 0),
          rem(size ? duration_ns % static_cast<std::int64_t>(size) : 0) {}
    [[nodiscard]] std::int64_t operator()(std::size_t i) const noexcept {
        return base + (static_cast<std::int64_t>(i) < rem ? 1 : 0);
    }
    std::int64_t base, rem;
};

// Whether compute spent on a request that ended in state `o` was useful (it finished on time).
[[nodiscard]] constexpr bool compute_useful(Outcome o) noexcept { return o == Outcome::kOnTime; }

// Whether a request that ended in state `o` was shed (dropped or rejected).
[[nodiscard]] constexpr bool shed_outcome(Outcome o) noexcept {
    return o == Outcome::kDropped || o == Outcome::kRejected;
}

class ComputeSplit {
public:
    explicit ComputeSplit(std::size_t n_stages = 0)
        : useful_(n_stages, 0), wasted_(n_stages, 0), unresolved_(n_stages, 0) {}

    [[nodiscard]] std::size_t n_stages() const noexcept { return useful_.size(); }

    // `ns` of stage k's compute charged to a pending request whose tally is `tally`.
    void charge_pending(std::size_t k, std::int64_t ns, std::int64_t* tally) noexcept {
        tally[k] += ns;
        unresolved_[k] += ns;
    }

    // `ns` of stage k's compute charged to a request that has already ended in state `o`.
    void charge_ended(std::size_t k, std::int64_t ns, Outcome o) noexcept {
        (compute_useful(o) ? useful_ : wasted_)[k] += ns;
    }

    // A request ends in state `o` with `tally` (its compute per stage): the rule above.
    void settle(Outcome o, std::int64_t* tally) noexcept {
        auto& into = compute_useful(o) ? useful_ : wasted_;
        std::int64_t spent = 0;
        for (std::size_t k = 0; k < into.size(); ++k) {
            unresolved_[k] -= tally[k];
            into[k] += tally[k];
            spent += tally[k];
            tally[k] = 0;
        }
        if (shed_outcome(o)) {
            ++shed_;
            if (spent == 0) ++shed_before_compute_;
        }
    }

    // Adds `other` (same stage count) into this one.
    void add(const ComputeSplit& other) {
        if (other.n_stages() != n_stages()) {
            throw std::invalid_argument("ComputeSplit.add: " + std::to_string(other.n_stages()) + " stages, expected " +
                                        std::to_string(n_stages()));
        }
        for (std::size_t k = 0; k < n_stages(); ++k) {
            useful_[k] += other.useful_[k];
            wasted_[k] += other.wasted_[k];
            unresolved_[k] += other.unresolved_[k];
        }
        shed_ += other.shed_;
        shed_before_compute_ += other.shed_before_compute_;
    }

    [[nodiscard]] const std::vector<std::int64_t>& useful_ns() const noexcept { return useful_; }
    [[nodiscard]] const std::vector<std::int64_t>& wasted_ns() const noexcept { return wasted_; }
    [[nodiscard]] const std::vector<std::int64_t>& unresolved_ns() const noexcept { return unresolved_; }
    [[nodiscard]] std::int64_t shed() const noexcept { return shed_; }
    [[nodiscard]] std::int64_t shed_before_compute() const noexcept { return shed_before_compute_; }

private:
    std::vector<std::int64_t> useful_, wasted_, unresolved_;
    std::int64_t shed_ = 0, shed_before_compute_ = 0;
};

// A ComputeSplit with the tallies of the requests in flight, by request id.
class ComputeBook {
public:
    explicit ComputeBook(std::size_t n_stages) : split_(n_stages) {}

    // Request `id` is pending from now on, with nothing spent on it.
    void open(std::uint64_t id) { tallies_[id].assign(split_.n_stages(), 0); }

    // Request `id` leaves without an outcome (its submit was undone): forgotten, counted nowhere.
    void forget(std::uint64_t id) { tallies_.erase(id); }

    // Stage k ran the batch `ids` (in batch order) for `duration_ns`: each one's share (BatchShares),
    // pending or, where not open, already ended in state ended[i].
    void charge_batch(std::size_t k, const std::vector<std::uint64_t>& ids, std::int64_t duration_ns,
                      const std::vector<Outcome>& ended) {
        if (k >= split_.n_stages() || ended.size() != ids.size()) {
            throw std::invalid_argument("ComputeBook.charge_batch: stage " + std::to_string(k) + " of " +
                                        std::to_string(split_.n_stages()) + ", " + std::to_string(ids.size()) +
                                        " ids and " + std::to_string(ended.size()) + " states");
        }
        const BatchShares share_of(duration_ns, ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) {
            const std::int64_t share = share_of(i);
            auto it = tallies_.find(ids[i]);
            if (it != tallies_.end()) {
                split_.charge_pending(k, share, it->second.data());
            } else {
                split_.charge_ended(k, share, ended[i]);
            }
        }
    }

    // Request `id` ended in state `o` (ignored unless pending).
    void settle(std::uint64_t id, Outcome o) {
        auto it = tallies_.find(id);
        if (it == tallies_.end()) return;
        split_.settle(o, it->second.data());
        tallies_.erase(it);
    }

    [[nodiscard]] std::size_t pending() const noexcept { return tallies_.size(); }
    [[nodiscard]] const ComputeSplit& split() const noexcept { return split_; }

private:
    ComputeSplit split_;
    std::unordered_map<std::uint64_t, std::vector<std::int64_t>> tallies_;
};

}  // namespace pard
