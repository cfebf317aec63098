// pard/depq.hpp — MinMaxHeap, the double-ended priority queue of a stage (DESIGN §3.4).
//
// Algorithm: the min-max heap of Atkinson, Sack, Santoro and Strothotte ("Min-max heaps and
// generalized priority queues", CACM 29(10), 1986). One implicit binary tree in one array; the
// levels alternate: level 0 (the root) and every even level are *min levels*, odd levels are
// *max levels*. Invariant: an element on a min level is <= every element of its subtree, one on a
// max level is >= every element of its subtree. Hence the minimum is the root and the maximum is
// the larger of the root's (at most two) children.
//   push:    append, then bubble up along min levels or along max levels (grandparent steps),
//            after at most one swap with the parent decides which.
//   pop_min: move the last element into the root and trickle it down min levels, looking at
//            children and grandchildren (the smallest of up to six descendants) at each step.
//   pop_max: the same on the max side, from the larger child of the root.
// Costs: min()/max() O(1); push/pop_min/pop_max O(log n) with at most ~2 log2(n) comparisons per
// level pair; erase_if and assign O(n) (Floyd-style bottom-up heap construction).
//
// Contract: `Less` must be a strict weak order. Elements that compare equal are popped in an
// unspecified order among themselves (pard::ByDeadline breaks ties by id, so for Requests the order
// is total). pop_min/pop_max/min/max require a non-empty heap: checked by assert() in debug builds,
// undefined behaviour otherwise. Not thread-safe: a stage guards its heap with its batch-forming
// lock. Operations are noexcept whenever T's moves and Less are; push may throw std::bad_alloc
// when the storage grows (reserve() ahead of time to avoid allocation on the hot path).
#pragma once

#include <cassert>
#include <cstddef>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "pard/request.hpp"

namespace pard {

template <class T, class Less = std::less<T>>
class MinMaxHeap {
public:
    using value_type = T;
    using size_type = std::size_t;
    using const_iterator = typename std::vector<T>::const_iterator;

    MinMaxHeap() = default;
    explicit MinMaxHeap(Less less) : less_(std::move(less)) {}

    // ---- size ----------------------------------------------------------------------------
    [[nodiscard]] size_type size() const noexcept { return a_.size(); }
    [[nodiscard]] bool empty() const noexcept { return a_.empty(); }
    void clear() noexcept { a_.clear(); }
    void reserve(size_type n) { a_.reserve(n); }
    [[nodiscard]] size_type capacity() const noexcept { return a_.capacity(); }

    // ---- O(1) peeks (precondition: !empty()) ------------------------------------------------
    [[nodiscard]] const T& min() const noexcept {
        assert(!a_.empty() && "MinMaxHeap::min on an empty heap");
        return a_[0];
    }
    [[nodiscard]] const T& max() const noexcept {
        assert(!a_.empty() && "MinMaxHeap::max on an empty heap");
        return a_[max_index()];
    }

    // ---- O(log n) updates -------------------------------------------------------------------
    void push(const T& x) {
        a_.push_back(x);
        bubble_up(a_.size() - 1);
    }
    void push(T&& x) {
        a_.push_back(std::move(x));
        bubble_up(a_.size() - 1);
    }

    // Removes and returns the smallest element (precondition: !empty()).
    T pop_min() {
        assert(!a_.empty() && "MinMaxHeap::pop_min on an empty heap");
        return pop_at(0);
    }

    // Removes and returns the largest element (precondition: !empty()).
    T pop_max() {
        assert(!a_.empty() && "MinMaxHeap::pop_max on an empty heap");
        return pop_at(max_index());
    }

    // Removes elements from the low end while `pred(min())` holds and hands each to `out(T&&)`,
    // smallest first. Returns how many were removed. O(k log n) for k removed elements; stops at
    // the first element that fails `pred` (so `pred` should be monotone in the order, e.g.
    // "deadline below a threshold", for the result to be "every element with the property").
    template <class Pred, class Out>
    size_type drain_min_while(Pred pred, Out out) {
        size_type k = 0;
        while (!a_.empty() && pred(static_cast<const T&>(a_[0]))) {
            out(pop_at(0));
            ++k;
        }
        return k;
    }

    // Convenience form: returns the removed elements in ascending order.
    template <class Pred>
    std::vector<T> drain_min_while(Pred pred) {
        std::vector<T> removed;
        drain_min_while(std::move(pred), [&removed](T&& x) { removed.push_back(std::move(x)); });
        return removed;
    }

    // Mirror image on the high end: removes while `pred(max())` holds, largest first.
    template <class Pred, class Out>
    size_type drain_max_while(Pred pred, Out out) {
        size_type k = 0;
        while (!a_.empty() && pred(static_cast<const T&>(a_[max_index()]))) {
            out(pop_at(max_index()));
            ++k;
        }
        return k;
    }

    // Removes every element for which `pred` holds, in O(n) (one pass plus a rebuild), handing
    // each to `out(T&&)` in unspecified order. Returns how many were removed. Used to cancel
    // requests by id (e.g. sibling DAG branches) without popping the whole heap.
    template <class Pred, class Out>
    size_type erase_if(Pred pred, Out out) {
        size_type kept = 0;
        const size_type n = a_.size();
        for (size_type i = 0; i < n; ++i) {
            if (pred(static_cast<const T&>(a_[i]))) {
                out(std::move(a_[i]));
            } else {
                if (kept != i) a_[kept] = std::move(a_[i]);
                ++kept;
            }
        }
        const size_type removed = n - kept;
        a_.erase(a_.begin() + static_cast<std::ptrdiff_t>(kept), a_.end());
        if (removed != 0) rebuild();
        return removed;
    }

    // Replaces the contents with [first, last) in O(n).
    template <class It>
    void assign(It first, It last) {
        a_.assign(first, last);
        rebuild();
    }

    // ---- read-only view (heap order: unspecified, not sorted) -----------------------------
    [[nodiscard]] const T* data() const noexcept { return a_.data(); }
    [[nodiscard]] const_iterator begin() const noexcept { return a_.begin(); }
    [[nodiscard]] const_iterator end() const noexcept { return a_.end(); }

    // O(n) check of the min-max heap invariant; for tests.
    [[nodiscard]] bool check_invariants() const {
        const size_type n = a_.size();
        for (size_type i = 1; i < n; ++i) {
            // Compare each element with every ancestor: min-level ancestors must not be greater,
            // max-level ancestors must not be smaller. Walking up is O(log n) per element.
            for (size_type j = parent(i);; j = parent(j)) {
                if (is_min_level(j) ? less_(a_[i], a_[j]) : less_(a_[j], a_[i])) return false;
                if (j == 0) break;
            }
        }
        return true;
    }

private:
    static constexpr size_type parent(size_type i) noexcept { return (i - 1) / 2; }

    // Level of node i is floor(log2(i + 1)); even levels are min levels.
    static bool is_min_level(size_type i) noexcept {
#if defined(__GNUC__) || defined(__clang__)
        const auto v = static_cast<unsigned long long>(i) + 1ULL;
        const int level = std::numeric_limits<unsigned long long>::digits - 1 - __builtin_clzll(v);
        return (level & 1) == 0;
#else
        size_type v = i + 1;
        unsigned level = 0;
        while (v > 1) {
            v >>= 1;
            ++level;
        }
        return (level & 1U) == 0;
#endif
    }

    size_type max_index() const noexcept {
        const size_type n = a_.size();
        if (n <= 1) return 0;
        if (n == 2) return 1;
        return less_(a_[1], a_[2]) ? 2 : 1;
    }

    // Removes the element at index i (the root or one of its children) and restores the heap.
    T pop_at(size_type i) {
        T result = std::move(a_[i]);
        const size_type last = a_.size() - 1;
        if (i == last) {
            a_.pop_back();
            return result;
        }
        T x = std::move(a_[last]);
        a_.pop_back();
        if (i == 0) {
            trickle_down<true>(0, std::move(x));
        } else {
            trickle_down<false>(i, std::move(x));
        }
        return result;
    }

    // True if a should sit above b on a min level (kMin) or on a max level (!kMin).
    template <bool kMin>
    bool before(const T& a, const T& b) const {
        return kMin ? less_(a, b) : less_(b, a);
    }

    void bubble_up(size_type i) {
        if (i == 0) return;
        const size_type p = parent(i);
        if (is_min_level(i)) {
            if (less_(a_[p], a_[i])) {  // larger than its max-level parent: belongs to the max side
                std::swap(a_[i], a_[p]);
                bubble_up_grand<false>(p);
            } else {
                bubble_up_grand<true>(i);
            }
        } else {
            if (less_(a_[i], a_[p])) {  // smaller than its min-level parent: belongs to the min side
                std::swap(a_[i], a_[p]);
                bubble_up_grand<true>(p);
            } else {
                bubble_up_grand<false>(i);
            }
        }
    }

    // Moves a_[i] up through grandparents on its own kind of level (hole-moving, no swaps).
    template <bool kMin>
    void bubble_up_grand(size_type i) {
        if (i < 3) return;
        T x = std::move(a_[i]);
        while (i >= 3) {
            const size_type g = parent(parent(i));
            if (!before<kMin>(x, a_[g])) break;
            a_[i] = std::move(a_[g]);
            i = g;
        }
        a_[i] = std::move(x);
    }

    // Places x into the hole at i (a min level if kMin, a max level otherwise) and trickles it
    // down: at each step the extreme of the children and grandchildren takes the hole.
    template <bool kMin>
    void trickle_down(size_type i, T x) {
        const size_type n = a_.size();
        for (;;) {
            const size_type c = 2 * i + 1;
            if (c >= n) break;
            // m: the most extreme (smallest for kMin) among children and grandchildren of i.
            size_type m = c;
            if (c + 1 < n && before<kMin>(a_[c + 1], a_[m])) m = c + 1;
            const size_type g = 2 * c + 1;  // first grandchild
            const size_type g_end = g + 4 < n ? g + 4 : n;
            for (size_type k = g; k < g_end; ++k) {
                if (before<kMin>(a_[k], a_[m])) m = k;
            }
            if (!before<kMin>(a_[m], x)) break;
            a_[i] = std::move(a_[m]);
            i = m;
            if (m < g) break;  // m was a child (on the opposite kind of level): it has no grandchildren here
            // m is a grandchild: x may violate the order with m's parent (opposite kind of level).
            const size_type p = parent(m);
            if (before<kMin>(a_[p], x)) std::swap(x, a_[p]);
        }
        a_[i] = std::move(x);
    }

    // Bottom-up construction: trickle every internal node down, last first.
    void rebuild() {
        const size_type n = a_.size();
        if (n < 2) return;
        for (size_type i = n / 2; i-- > 0;) {
            T x = std::move(a_[i]);
            if (is_min_level(i)) {
                trickle_down<true>(i, std::move(x));
            } else {
                trickle_down<false>(i, std::move(x));
            }
        }
    }

    std::vector<T> a_;
    Less less_{};
};

// A stage's queue: Requests ordered by (deadline_ns, id). min() is the lowest remaining budget.
using RequestDepq = MinMaxHeap<Request, ByDeadline>;

}  // namespace pard
