// pard/depq.hpp — MinMaxHeap, the double-ended priority queue of a stage (DESIGN §3.4).
//
// Algorithm: the min-max heap of Atkinson, Sack, Santoro and Strothotte ("Min-max heaps and
// generalized priority queues", CACM 29(10), 1986), in pard/depq/minmax_algo.hpp (how push,
// pop_min and pop_max walk the levels). Costs: min()/max() O(1); push/pop_min/pop_max O(log n);
// erase_if and assign O(n) (bottom-up construction).
//
// Storage. For small elements the heap array holds T itself. For a larger trivially copyable T
// whose order is a *split key* the heap array holds 16-byte nodes and the elements stay put in a
// slab (pard/depq/slab.hpp). The order, hence every pop, is exactly the one Less gives.
// pard::Request (48 bytes) with ByDeadline, ByArrival or the stage scheduler's StageKeyLess uses
// the slab (uses_slab).
//
// Contract: `Less` must be a strict weak order. Elements that compare equal are popped in an
// unspecified order among themselves (pard::ByDeadline breaks ties by id, so for Requests the order
// is total). pop_min/pop_max/min/max require a non-empty heap: checked by assert() in debug builds,
// undefined behaviour otherwise. Not thread-safe: a stage guards its heap with its batch-forming
// lock. Every operation is noexcept when T's moves and Less are (kNothrow below), except those that
// may allocate: push, reserve and assign may throw std::bad_alloc when the storage grows (reserve()
// ahead of time to keep the hot path free of allocation), and the vector-returning drain_min_while.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "pard/request.hpp"
#include "pard/depq/minmax_algo.hpp"
#include "pard/depq/slab.hpp"

namespace pard {

template <class T, class Less = std::less<T>>
class MinMaxHeap {
    // Slab layout when it pays: a split-key order and an element larger than a 16-byte node.
    static constexpr bool kSlab = detail::has_split_key<T, Less>::value && std::is_trivially_copyable_v<T> &&
                                  sizeof(T) > sizeof(detail::SlabEntry);

public:
    // Whether the elements live in a slab behind 16-byte heap nodes (see the header comment).
    static constexpr bool uses_slab = kSlab;
    // True when no operation but the allocating ones (push, reserve, assign) can throw.
    static constexpr bool kNothrow = std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T> &&
                                     std::is_nothrow_invocable_r_v<bool, const Less&, const T&, const T&>;

    using value_type = T;
    using size_type = std::size_t;
    class const_iterator;

    MinMaxHeap() = default;
    explicit MinMaxHeap(Less less) noexcept(std::is_nothrow_move_constructible_v<Less>) : less_(std::move(less)) {}

    // ---- size ----------------------------------------------------------------------------
    [[nodiscard]] size_type size() const noexcept {
        if constexpr (kSlab) {
            return s_.e.size();
        } else {
            return s_.a.size();
        }
    }
    [[nodiscard]] bool empty() const noexcept { return size() == 0; }
    void clear() noexcept {
        if constexpr (kSlab) {
            s_.e.clear();
            s_.slab.clear();
            s_.free.clear();
        } else {
            s_.a.clear();
        }
    }
    void reserve(size_type n) {
        if constexpr (kSlab) {
            check_slots(n);
            s_.e.reserve(n);
            s_.slab.reserve(n);
            s_.free.reserve(n);
        } else {
            s_.a.reserve(n);
        }
    }
    [[nodiscard]] size_type capacity() const noexcept {
        if constexpr (kSlab) {
            return s_.e.capacity();
        } else {
            return s_.a.capacity();
        }
    }

    // ---- O(1) peeks (precondition: !empty()) ------------------------------------------------
    [[nodiscard]] const T& min() const noexcept {
        assert(!empty() && "MinMaxHeap::min on an empty heap");
        return at(0);
    }
    [[nodiscard]] const T& max() const noexcept(kNothrow) {
        assert(!empty() && "MinMaxHeap::max on an empty heap");
        return at(max_index());
    }

    // ---- O(log n) updates -------------------------------------------------------------------
    // May throw std::bad_alloc (or std::length_error past 2^32 - 1 slab elements) when the storage
    // grows; the heap is then unchanged.
    void push(const T& x) { push_impl(T(x)); }
    void push(T&& x) { push_impl(std::move(x)); }

    // Removes and returns the smallest element (precondition: !empty()).
    T pop_min() noexcept(kNothrow) {
        assert(!empty() && "MinMaxHeap::pop_min on an empty heap");
        return pop_at(0);
    }

    // Removes and returns the largest element (precondition: !empty()).
    T pop_max() noexcept(kNothrow) {
        assert(!empty() && "MinMaxHeap::pop_max on an empty heap");
        return pop_at(max_index());
    }

    // Removes elements from the low end while `pred(min())` holds and hands each to `out(T&&)`,
    // smallest first. Returns how many were removed. O(k log n) for k removed elements; stops at
    // the first element that fails `pred` (so `pred` should be monotone in the order, e.g.
    // "deadline below a threshold", for the result to be "every element with the property").
    template <class Pred, class Out>
    size_type drain_min_while(Pred pred, Out out) noexcept(kNothrow && std::is_nothrow_invocable_v<Pred&, const T&> &&
                                                           std::is_nothrow_invocable_v<Out&, T&&>) {
        size_type k = 0;
        while (!empty() && pred(at(0))) {
            out(pop_at(0));
            ++k;
        }
        return k;
    }

    // Convenience form: returns the removed elements in ascending order (allocates).
    template <class Pred>
    std::vector<T> drain_min_while(Pred pred) {
        std::vector<T> removed;
        drain_min_while(std::move(pred), [&removed](T&& x) { removed.push_back(std::move(x)); });
        return removed;
    }

    // Mirror image on the high end: removes while `pred(max())` holds, largest first.
    template <class Pred, class Out>
    size_type drain_max_while(Pred pred, Out out) noexcept(kNothrow && std::is_nothrow_invocable_v<Pred&, const T&> &&
                                                           std::is_nothrow_invocable_v<Out&, T&&>) {
        size_type k = 0;
        while (!empty() && pred(at(max_index()))) {
            out(pop_at(max_index()));
            ++k;
        }
        return k;
    }

    // Removes every element for which `pred` holds, in O(n) (one pass plus a rebuild), handing
    // each to `out(T&&)` in unspecified order. Returns how many were removed. Used to cancel
    // requests by id (e.g. sibling DAG branches) without popping the whole heap.
    template <class Pred, class Out>
    size_type erase_if(Pred pred, Out out) noexcept(kNothrow && std::is_nothrow_invocable_v<Pred&, const T&> &&
                                                    std::is_nothrow_invocable_v<Out&, T&&>) {
        const size_type n = size();
        Node* h = heap();
        size_type kept = 0;
        for (size_type i = 0; i < n; ++i) {
            if (pred(at(i))) {
                if constexpr (kSlab) {
                    out(std::move(s_.slab[h[i].slot]));
                    s_.free.push_back(h[i].slot);  // never reallocates (see append)
                } else {
                    out(std::move(h[i]));
                }
            } else {
                if (kept != i) h[kept] = std::move(h[i]);
                ++kept;
            }
        }
        if constexpr (kSlab) {
            s_.e.resize(kept);  // shrinking: never throws
        } else {
            s_.a.erase(s_.a.begin() + static_cast<std::ptrdiff_t>(kept), s_.a.end());
        }
        if (kept != n) rebuild();
        return n - kept;
    }

    // Replaces the contents with [first, last) in O(n).
    template <class It>
    void assign(It first, It last) {
        if constexpr (kSlab) {
            clear();
            for (; first != last; ++first) append(T(*first));
        } else {
            s_.a.assign(first, last);
        }
        rebuild();
    }

    // Re-orders the contents under a new order in O(n) (`scratch` holds a copy meanwhile, so a reused
    // one does not allocate): how a stage switches its queue key (stage_scheduler.hpp, coherent rank).
    void rekey(Less less, std::vector<T>& scratch) {
        scratch.assign(begin(), end());
        less_ = std::move(less);
        assign(scratch.begin(), scratch.end());
    }

    // ---- read-only view (heap order: unspecified, not sorted) -----------------------------
    [[nodiscard]] const_iterator begin() const noexcept { return const_iterator(this, 0); }
    [[nodiscard]] const_iterator end() const noexcept { return const_iterator(this, size()); }

    // The elements as one array in heap order; only where the heap array holds the elements.
    template <bool kS = kSlab, std::enable_if_t<!kS, int> = 0>
    [[nodiscard]] const T* data() const noexcept {
        return s_.a.data();
    }

    // O(n log n) check of the invariant, element against every ancestor under Less (and, for the
    // slab layout, that every entry's key is its element's and every slot is used exactly once).
    [[nodiscard]] bool check_invariants() const {
        const size_type n = size();
        if constexpr (kSlab) {
            std::vector<bool> used(s_.slab.size(), false);
            auto claim = [&used](std::uint32_t s) {
                if (s >= used.size() || used[s]) return false;
                used[s] = true;
                return true;
            };
            for (std::uint32_t s : s_.free) {
                if (!claim(s)) return false;
            }
            for (size_type i = 0; i < n; ++i) {
                const detail::SlabEntry& en = heap()[i];
                if (!claim(en.slot) || en.primary != less_.primary(s_.slab[en.slot])) return false;
            }
            if (s_.free.size() + n != s_.slab.size()) return false;
        }
        for (size_type i = 1; i < n; ++i) {
            for (size_type j = detail::parent(i);; j = detail::parent(j)) {
                if (detail::is_min_level(j) ? less_(at(i), at(j)) : less_(at(j), at(i))) return false;
                if (j == 0) break;
            }
        }
        return true;
    }

    // Forward iterator over the elements in heap order.
    class const_iterator {
    public:
        using iterator_category = std::forward_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = const T*;
        using reference = const T&;
        const_iterator() noexcept = default;
        reference operator*() const noexcept { return h_->at(i_); }
        pointer operator->() const noexcept { return &h_->at(i_); }
        const_iterator& operator++() noexcept {
            ++i_;
            return *this;
        }
        const_iterator operator++(int) noexcept {
            const_iterator old = *this;
            ++i_;
            return old;
        }
        friend bool operator==(const const_iterator& a, const const_iterator& b) noexcept { return a.i_ == b.i_; }
        friend bool operator!=(const const_iterator& a, const const_iterator& b) noexcept { return a.i_ != b.i_; }

    private:
        friend class MinMaxHeap;
        const_iterator(const MinMaxHeap* h, size_type i) noexcept : h_(h), i_(i) {}
        const MinMaxHeap* h_ = nullptr;
        size_type i_ = 0;
    };

private:
    // The slab layout's node order: primary key first, the elements' tiebreak only on equality.
    // Written as `<` || (`==` && ...): GCC compiles the form `if (!=) return <;` into slower code
    // per push + pop (bench/RESULTS.md).
    struct EntryLess {
        const T* slab;
        const Less* less;
        bool operator()(const detail::SlabEntry& a, const detail::SlabEntry& b) const noexcept {
            return a.primary < b.primary ||
                   (a.primary == b.primary && less->tiebreak(slab[a.slot]) < less->tiebreak(slab[b.slot]));
        }
    };
    using Node = std::conditional_t<kSlab, detail::SlabEntry, T>;

    // Plain layout: the heap array of elements.
    struct PlainStore {
        std::vector<T> a;
    };
    // Slab layout: the heap array of nodes, the elements by slot, and the free slots (LIFO, so a
    // pop's slot is the next push's, still in cache). Invariant: free.capacity() >= slab.size(), so
    // returning a slot never allocates (a copy re-establishes it; moves keep the capacities).
    struct SlabStore {
        std::vector<detail::SlabEntry, detail::LineAllocator<detail::SlabEntry>> e;
        std::vector<T> slab;
        std::vector<std::uint32_t> free;

        SlabStore() = default;
        SlabStore(const SlabStore& o) : e(o.e), slab(o.slab), free(o.free) { free.reserve(slab.size()); }
        SlabStore(SlabStore&&) noexcept = default;
        SlabStore& operator=(const SlabStore& o) {
            SlabStore copy(o);
            return *this = std::move(copy);
        }
        SlabStore& operator=(SlabStore&&) noexcept = default;
        ~SlabStore() = default;
    };

    Node* heap() noexcept {
        if constexpr (kSlab) {
            return s_.e.data();
        } else {
            return s_.a.data();
        }
    }
    const Node* heap() const noexcept {
        if constexpr (kSlab) {
            return s_.e.data();
        } else {
            return s_.a.data();
        }
    }
    // The order on heap nodes: Less itself, or EntryLess over the slab.
    decltype(auto) node_less() const noexcept {
        if constexpr (kSlab) {
            static_assert(noexcept(less_.primary(std::declval<const T&>())) &&
                              noexcept(less_.tiebreak(std::declval<const T&>())),
                          "the split key is read inside noexcept sifts: primary() and tiebreak() must be noexcept");
            return EntryLess{s_.slab.data(), &less_};
        } else {
            return (less_);
        }
    }
    // The element at heap node i.
    const T& at(size_type i) const noexcept {
        if constexpr (kSlab) {
            return s_.slab[heap()[i].slot];
        } else {
            return s_.a[i];
        }
    }

    size_type max_index() const noexcept(kNothrow) { return detail::max_index(heap(), size(), node_less()); }

    static void check_slots(size_type n) {
        if (n > std::numeric_limits<std::uint32_t>::max()) {
            throw std::length_error("MinMaxHeap: more than 2^32 - 1 elements in a slab");
        }
    }

    // Stores x as a new last node without restoring the order (for the slab layout, returns the new
    // node). Every step that can throw comes before the first change of contents, so a throw leaves
    // the heap as it was.
    auto append(T&& x) {
        if constexpr (kSlab) {
            auto& e = s_.e;
            if (e.size() == e.capacity()) e.reserve(std::max<size_type>(16, 2 * e.size()));  // as push_back would
            std::uint32_t slot;
            if (!s_.free.empty()) {
                slot = s_.free.back();
                s_.free.pop_back();
                s_.slab[slot] = x;
            } else {
                check_slots(s_.slab.size() + 1);
                if (s_.free.capacity() <= s_.slab.size()) s_.free.reserve(2 * s_.slab.size() + 16);
                s_.slab.push_back(x);
                slot = static_cast<std::uint32_t>(s_.slab.size() - 1);
            }
            const detail::SlabEntry en{less_.primary(x), slot, 0};
            e.push_back(en);  // capacity reserved above
            return en;
        } else {
            s_.a.push_back(std::move(x));
        }
    }

    void push_impl(T&& x) {
        if constexpr (kSlab) {
            const detail::SlabEntry en = append(std::move(x));
            detail::place_up(heap(), size() - 1, 0, en, node_less());
        } else if constexpr (std::is_trivially_copyable_v<T>) {
            append(T(x));  // the copy only grows the array; x itself is placed, from registers
            detail::place_up(heap(), size() - 1, 0, std::move(x), node_less());
        } else {
            append(std::move(x));
            detail::place_up(heap(), size() - 1, 0, std::move(s_.a.back()), node_less());
        }
    }

    // Removes and returns the element at heap node i (the root or one of its children).
    T pop_at(size_type i) noexcept(kNothrow) {
        if constexpr (kSlab) {
            const detail::SlabEntry en = detail::remove_at(heap(), size(), i, node_less());
            s_.e.pop_back();
            s_.free.push_back(en.slot);  // never reallocates (the SlabStore invariant)
            return s_.slab[en.slot];
        } else {
            T result = detail::remove_at(heap(), size(), i, node_less());
            s_.a.pop_back();
            return result;
        }
    }

    void rebuild() noexcept(kNothrow) { detail::rebuild(heap(), size(), node_less()); }

    std::conditional_t<kSlab, SlabStore, PlainStore> s_;
    Less less_{};
};

// A stage's queue: Requests ordered by (deadline_ns, id). min() is the lowest remaining budget.
using RequestDepq = MinMaxHeap<Request, ByDeadline>;

}  // namespace pard
