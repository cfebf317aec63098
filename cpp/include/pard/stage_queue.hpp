// pard/stage_queue.hpp — StageQueue: the mechanism under a stage scheduler. Requests arrive through a
// bounded lock-free MPMC ring (any thread) or the single-threaded owner's local buffer (the simulator),
// and are drained, under the scheduler's batch-forming lock, into a min-max heap per service tier
// (tiered_queue.hpp). A short queue that is all local buffer skips the heap: it is sorted by the heap's
// own order and popped from its ends (the sorted run). The sizes other threads read are stored after
// every change. Every method but submit, the size readers and earliest_queued_deadline_ns runs under
// the scheduler's lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "pard/batch.hpp"
#include "pard/mpmc_ring.hpp"
#include "pard/request.hpp"
#include "pard/stage_config.hpp"
#include "pard/tiered_queue.hpp"

namespace pard {

class StageQueue {
public:
    static constexpr std::int64_t kNoDeadline = std::numeric_limits<std::int64_t>::max();
    // The longest local buffer the sorted run takes; longer ones go through the heap.
    static constexpr std::size_t kRunMax = 64;

    // weights: the tiers' weights (empty: one tier); by_tier_low: LBF pops the most valuable tier's
    // lowest budget first (pop_top_low), not the global one.
    StageQueue(std::size_t ring_capacity, StageKeyLess key, const std::vector<double>& weights, bool by_tier_low)
        : ring_(ring_capacity), capacity_(ring_capacity), key_(key), heap_(key, weights), weights_(weights),
          tier_size_(heap_.tiers()), by_tier_low_(by_tier_low) {
        heap_.reserve(1024);
        for (auto& n : tier_size_) n.store(0, std::memory_order_relaxed);
    }
    StageQueue(const StageQueue&) = delete;
    StageQueue& operator=(const StageQueue&) = delete;

    bool submit(const Request& r) noexcept { return ring_.try_push(r); }
    bool submit_local(const Request& r) {
        if (local_.size() >= capacity_) return false;
        local_.push_back(r);
        local_size_.store(local_.size(), std::memory_order_relaxed);
        return true;
    }

    // Requests waiting (heap + ring + local buffer); best effort while other threads submit or form batches.
    [[nodiscard]] std::size_t queued() const noexcept {
        return heap_size_.load(std::memory_order_relaxed) + ring_.size_approx() +
               local_size_.load(std::memory_order_relaxed);
    }
    // queued(), less the heap's requests of tiers weighing under min_weight when the stage pops the
    // highest-weight tier first (top_first). Best effort.
    [[nodiscard]] std::size_t queued_ahead(double min_weight, bool top_first) const noexcept {
        const std::size_t all = queued();
        if (!(min_weight > 0.0) || tier_size_.size() < 2 || !top_first) return all;
        std::size_t below = 0;
        for (std::size_t k = 0; k < tier_size_.size(); ++k) {
            if (weights_[k] < min_weight) below += tier_size_[k].load(std::memory_order_relaxed);
        }
        return below < all ? all - below : 0;
    }
    [[nodiscard]] std::int64_t earliest_queued_deadline_ns() const noexcept {
        return earliest_queued_.load(std::memory_order_relaxed);
    }

    // Hands every request of the local buffer, then of the ring, to admit(r), which pushes or drops it.
    template <class Admit>
    void drain(Admit&& admit) {
        if (heap_.empty()) latest_pushed_ = std::numeric_limits<std::int64_t>::min();
        if (!local_.empty()) {
            for (const Request& r : local_) admit(r);
            local_.clear();
            local_size_.store(0, std::memory_order_relaxed);
        }
        Request r;
        while (ring_.try_pop(r)) admit(r);
    }
    void push(const Request& r) {
        heap_.push(r);
        if (r.deadline_ns > latest_pushed_) latest_pushed_ = r.deadline_ns;
    }

    // Whether everything queued is a short local buffer (the sorted run may take it).
    [[nodiscard]] bool run_ready() const noexcept {
        return !local_.empty() && local_.size() <= kRunMax && heap_.empty() && ring_.empty_approx();
    }
    void take_run() {
        run_.swap(local_);
        local_.clear();
        local_size_.store(0, std::memory_order_relaxed);
        const StageKeyLess less{key_.by_arrival};  // the deadline or arrival key: no rule that ranks takes a run
        for (std::size_t i = 1; i < run_.size(); ++i) {  // insertion sort: it arrives nearly in order
            const Request r = run_[i];
            std::size_t j = i;
            for (; j > 0 && less(r, run_[j - 1]); --j) run_[j] = run_[j - 1];
            run_[j] = r;
        }
        run_lo_ = 0;
        run_hi_ = run_.size();
    }
    // What a batch left of the sorted run goes into the heap.
    void end_run() {
        for (; run_lo_ < run_hi_; ++run_lo_) heap_.push(run_[run_lo_]);
    }

    [[nodiscard]] std::size_t size() const noexcept { return heap_.size() + (run_hi_ - run_lo_); }
    [[nodiscard]] bool empty() const noexcept { return run_lo_ == run_hi_ && heap_.empty(); }

    // A tiered stage serves by tier weight in LBF too (pop_top_low): EDF across tiers would serve a low
    // tier's tighter SLOs ahead of a high tier.
    Request pop(bool pop_max) {
        if (run_lo_ < run_hi_) return pop_max ? run_[--run_hi_] : run_[run_lo_++];  // the heap is empty meanwhile
        if (pop_max) return heap_.pop_top();
        return by_tier_low_ ? heap_.pop_top_low() : heap_.pop_min();
    }

    // Pops until the batch holds max_b or the queue is empty; verdict(r) returns a Reason code or -1 (keep).
    template <class IsCancelled, class Verdict>
    void pop_loop(BatchResult& out, bool pop_max, std::size_t max_b, IsCancelled& is_cancelled, Verdict verdict) {
        while (out.batch.size() < max_b && !empty()) {
            const Request r = pop(pop_max);
            if (is_cancelled(r.id)) {
                out.drops.push_back(Drop{r, Reason::kCancelled});
                continue;
            }
            const int v = verdict(r);
            if (v < 0) {
                out.batch.push_back(r);
            } else {
                out.drops.push_back(Drop{r, static_cast<Reason>(static_cast<std::uint8_t>(v))});
            }
        }
    }

    // The latest deadline queued (heap not empty): the heap's max under the deadline key; under the rank
    // key the latest pushed since the heap was last empty (an upper bound once that request has left).
    [[nodiscard]] std::int64_t latest_deadline(bool ranked) const noexcept {
        return ranked ? latest_pushed_ : heap_.max().deadline_ns;
    }
    void rekey(StageKeyLess key) {
        key_ = key;
        heap_.rekey(key, rekey_scratch_);
    }

    // After every heap change: the sizes other threads read and, per tier when asked, each tier's.
    void store_sizes(bool ranked, bool per_tier) noexcept {
        heap_size_.store(heap_.size(), std::memory_order_relaxed);
        earliest_queued_.store(heap_.empty() || ranked ? kNoDeadline : heap_.min().deadline_ns, std::memory_order_relaxed);
        if (tier_size_.size() < 2 || !per_tier) return;
        for (std::size_t k = 0; k < tier_size_.size(); ++k) tier_size_[k].store(heap_.tier_size(k), std::memory_order_relaxed);
    }

    [[nodiscard]] TieredQueue<StageKeyLess>& heap() noexcept { return heap_; }
    [[nodiscard]] const TieredQueue<StageKeyLess>& heap() const noexcept { return heap_; }
    [[nodiscard]] std::size_t local_size() const noexcept { return local_.size(); }

private:
    MpmcRing<Request> ring_;
    std::size_t capacity_;
    StageKeyLess key_;
    TieredQueue<StageKeyLess> heap_;
    std::vector<double> weights_;
    std::atomic<std::size_t> heap_size_{0};
    std::atomic<std::int64_t> earliest_queued_{kNoDeadline};
    std::vector<std::atomic<std::size_t>> tier_size_;  // per tier, stored with heap_size_ (store_sizes)
    bool by_tier_low_;
    std::int64_t latest_pushed_ = std::numeric_limits<std::int64_t>::min();
    std::vector<Request> rekey_scratch_;
    std::vector<Request> local_;              // submit_local's buffer (single-threaded owners)
    std::atomic<std::size_t> local_size_{0};  // its size, for queued() from other threads
    std::vector<Request> run_;                // the sorted run, [run_lo_, run_hi_) unpopped
    std::size_t run_lo_ = 0, run_hi_ = 0;
};

}  // namespace pard
