// pard/tiered_queue.hpp — a stage's queue as one min-max heap per service tier (DESIGN §3.4, §3.7).
//
// Why tiers get their own heaps. The seed's priority score ranks a queued request by (1) its tier's
// weight, (2) its slack: remaining budget minus its remaining compute cost (Σ d on its longest
// remaining path). Within one stage every request has the same remaining path, so (2) orders like the
// deadline; (1) is a small set of fixed values. One heap per tier, keyed by the stage's key (deadline,
// or arrival for FCFS), keeps every end O(1) to find and every push/pop O(log n):
//   * low end, global     pop_min(): the smallest key over all tiers (EDF across tiers; O(T) peeks; FCFS pops it).
//   * high end, by value  pop_top(): the largest key of the highest-weight non-empty tier (what HBF
//                         serves in overload: the most valuable request with the most slack).
//   * low end, by value   pop_bottom(): the smallest key of the lowest-weight non-empty tier (what an
//                         overloaded stage sheds first: the least valuable request with the least slack).
//   * top tier, low end   pop_top_low(): the smallest key of the highest-weight non-empty tier (what a
//                         calm tiered stage serves first, LBF within the most valuable tier: pop_min
//                         across tiers would serve a low tier's tighter SLOs ahead of a high tier).
// All requests at a stage cost the same compute, so serving a higher-weight request first always yields
// at least as much weighted goodput per unit of compute; slack breaks ties within a tier.
//
// With one tier (the default, and every tier-blind policy) this is exactly one MinMaxHeap: pop_top is
// pop_max, pop_bottom is pop_min. A request whose tier is outside [0, T) is queued in tier 0's heap.
// Not thread-safe: the StageScheduler's batch-forming lock guards it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pard/depq.hpp"
#include "pard/request.hpp"

namespace pard {

template <class Less>
class TieredQueue {
public:
    // weights[t] > 0 is tier t's value; empty means one tier (tier-blind).
    TieredQueue(Less less, const std::vector<double>& weights) : less_(less) {
        const std::size_t n = weights.empty() ? 1 : weights.size();
        for (std::size_t t = 0; t < weights.size(); ++t) {
            if (!(weights[t] > 0.0)) {
                throw std::invalid_argument("tier_weights[" + std::to_string(t) + "]=" + std::to_string(weights[t]) +
                                            " must be > 0");
            }
        }
        heaps_.reserve(n);
        for (std::size_t t = 0; t < n; ++t) heaps_.emplace_back(less);
        by_value_.resize(n);
        std::iota(by_value_.begin(), by_value_.end(), std::size_t{0});
        if (!weights.empty()) {  // highest weight first; equal weights keep their index order
            std::stable_sort(by_value_.begin(), by_value_.end(),
                             [&weights](std::size_t a, std::size_t b) { return weights[a] > weights[b]; });
        }
    }

    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
    [[nodiscard]] std::size_t tiers() const noexcept { return heaps_.size(); }
    // Requests queued in tier t (t < tiers()).
    [[nodiscard]] std::size_t tier_size(std::size_t t) const noexcept { return heaps_[t].size(); }
    void reserve(std::size_t n) { heaps_[0].reserve(n); }

    void push(const Request& r) {
        heaps_[index(r.tier)].push(r);
        ++size_;
    }

    // The request with the smallest key over all tiers (precondition: !empty()).
    [[nodiscard]] const Request& min() const noexcept { return heaps_[min_heap()].min(); }
    // The request with the largest key over all tiers (precondition: !empty()).
    [[nodiscard]] const Request& max() const noexcept {
        std::size_t best = heaps_.size();
        for (std::size_t t = 0; t < heaps_.size(); ++t) {
            if (heaps_[t].empty()) continue;
            if (best == heaps_.size() || less_(heaps_[best].max(), heaps_[t].max())) best = t;
        }
        return heaps_[best].max();
    }

    Request pop_min() { return take(min_heap(), false); }
    Request pop_top() { return take(first_nonempty(by_value_.begin(), by_value_.end()), true); }
    Request pop_top_low() { return take(first_nonempty(by_value_.begin(), by_value_.end()), false); }
    Request pop_bottom() { return take(first_nonempty(by_value_.rbegin(), by_value_.rend()), false); }

    // Removes, from every tier's low end, requests while pred(min of that tier) holds; out(Request&&).
    // Calls f(r) for every queued request, in no particular order (an LLM stage sums their work).
    template <class F>
    void for_each(F&& f) const {
        for (const auto& h : heaps_) {
            for (const Request& r : h) f(r);
        }
    }

    template <class Pred, class Out>
    void drain_min_while(Pred pred, Out out) {
        for (auto& h : heaps_) size_ -= h.drain_min_while(pred, out);
    }

    // Re-orders every tier's heap under a new order, O(n) (MinMaxHeap::rekey).
    void rekey(Less less, std::vector<Request>& scratch) {
        less_ = less;
        for (auto& h : heaps_) h.rekey(less, scratch);
    }

    // The heap a request of this tier code lives in (an unknown code: tier 0's).
    [[nodiscard]] std::size_t index(std::int32_t tier) const noexcept {
        return (tier < 0 || static_cast<std::size_t>(tier) >= heaps_.size()) ? 0 : static_cast<std::size_t>(tier);
    }

private:
    [[nodiscard]] std::size_t min_heap() const noexcept {
        std::size_t best = heaps_.size();
        for (std::size_t t = 0; t < heaps_.size(); ++t) {
            if (heaps_[t].empty()) continue;
            if (best == heaps_.size() || less_(heaps_[t].min(), heaps_[best].min())) best = t;
        }
        return best;
    }
    template <class It>
    [[nodiscard]] std::size_t first_nonempty(It first, It last) const noexcept {
        for (; first != last; ++first) {
            if (!heaps_[*first].empty()) return *first;
        }
        return heaps_.size();
    }
    Request take(std::size_t t, bool from_max) {
        --size_;
        return from_max ? heaps_[t].pop_max() : heaps_[t].pop_min();
    }

    Less less_;
    std::vector<MinMaxHeap<Request, Less>> heaps_;
    std::vector<std::size_t> by_value_;  // tier indices, highest weight first
    std::size_t size_ = 0;
};

}  // namespace pard
