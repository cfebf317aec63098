// pard/depq/minmax_algo.hpp — the min-max heap's algorithms on a raw array a[0, n) ordered by
// `lt` (pard/depq.hpp's MinMaxHeap runs them over its elements or its slab nodes).
//
// Algorithm: the min-max heap of Atkinson, Sack, Santoro and Strothotte ("Min-max heaps and
// generalized priority queues", CACM 29(10), 1986). One implicit binary tree in one array; the
// levels alternate: level 0 (the root) and every even level are *min levels*, odd levels are
// *max levels*. Invariant: an element on a min level is <= every element of its subtree, one on a
// max level is >= every element of its subtree. Hence the minimum is the root and the maximum is
// the larger of the root's (at most two) children.
//   push:    the new element enters a hole at the end and moves up along min levels or along
//            max levels (grandparent steps), after one comparison with the parent decides which;
//            it is written once, where it ends.
//   pop_min: take the root, then walk the hole down min levels to a leaf, filling it at each step
//            with the smallest of the four grandchildren (a node's children sit on max levels, so
//            while both have children the subtree's minimum is a grandchild), and finally put the
//            last element into the leaf hole and move it up as a push does. The hole-to-leaf walk
//            is Floyd's trick, as in std::pop_heap: the last element is usually large, belongs near
//            the bottom and is not compared on the way down. The grandchildren are a tournament of
//            two pairs: 3 comparisons per two levels.
//   pop_max: the same on the max side, from the larger child of the root.
// Costs: min()/max() O(1); push/pop_min/pop_max O(log n); erase_if and assign O(n) (bottom-up
// construction).
#pragma once

#include <cstddef>
#include <limits>
#include <type_traits>
#include <utility>

namespace pard {
namespace detail {

constexpr std::size_t parent(std::size_t i) noexcept { return (i - 1) / 2; }

// Level of node i is floor(log2(i + 1)); even levels are min levels.
inline bool is_min_level(std::size_t i) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    const auto v = static_cast<unsigned long long>(i) + 1ULL;
    return ((std::numeric_limits<unsigned long long>::digits - 1 - __builtin_clzll(v)) & 1) == 0;
#else
    unsigned level = 0;
    for (std::size_t v = i + 1; v > 1; v >>= 1) ++level;
    return (level & 1U) == 0;
#endif
}

// True if a should sit above b on a min level (kMin) or on a max level (!kMin).
template <bool kMin, class E, class Lt>
bool before(const E& a, const E& b, const Lt& lt) noexcept(noexcept(lt(a, b))) {
    return kMin ? lt(a, b) : lt(b, a);
}

// Index of the largest element (precondition n >= 1).
template <class E, class Lt>
std::size_t max_index(const E* a, std::size_t n, const Lt& lt) noexcept(noexcept(lt(a[0], a[0]))) {
    if (n <= 2) return n - 1;
    return lt(a[1], a[2]) ? 2 : 1;
}

// Puts x into the hole at i, moving it up through grandparents on i's kind of level, not above
// node `top`. x travels in registers: it is written once, where it ends.
template <bool kMin, class E, class Lt>
void place_grand(E* a, std::size_t i, std::size_t top, E&& x, const Lt& lt) noexcept(
    noexcept(lt(a[0], a[0])) && std::is_nothrow_move_assignable_v<E>) {
    while (i >= 3) {
        const std::size_t g = parent(parent(i));
        if (g < top || !before<kMin>(x, a[g], lt)) break;  // g < top: above the (sub)heap being fixed
        a[i] = std::move(a[g]);
        i = g;
    }
    a[i] = std::move(x);
}

// The insertion step: x goes into the hole at leaf i below an otherwise valid (sub)heap rooted at
// `top`. One comparison with the parent decides whether x belongs to the min or the max side.
template <class E, class Lt>
void place_up(E* a, std::size_t i, std::size_t top, E x, const Lt& lt) noexcept(
    noexcept(place_grand<true>(a, i, top, std::move(x), lt))) {
    if (i == top) {
        a[i] = std::move(x);
        return;
    }
    const std::size_t p = parent(i);
    if (is_min_level(i)) {
        if (lt(a[p], x)) {  // larger than its max-level parent: belongs to the max side
            a[i] = std::move(a[p]);
            place_grand<false>(a, p, top, std::move(x), lt);
        } else {
            place_grand<true>(a, i, top, std::move(x), lt);
        }
    } else if (lt(x, a[p])) {  // smaller than its min-level parent: belongs to the min side
        a[i] = std::move(a[p]);
        place_grand<true>(a, p, top, std::move(x), lt);
    } else {
        place_grand<false>(a, i, top, std::move(x), lt);
    }
}

// Walks the hole at i (a min level if kMin, else a max level) down to a leaf, each step filling it
// with the most extreme element below; returns the leaf where the hole ends.
template <bool kMin, class E, class Lt>
std::size_t descend(E* a, std::size_t n, std::size_t i, const Lt& lt) noexcept(
    noexcept(lt(a[0], a[0])) && std::is_nothrow_move_assignable_v<E>) {
    // While both children have children (the 4th grandchild exists at g + 3 < n), the extreme is a
    // grandchild: a tournament of two pairs. The pairs' winners are index arithmetic on a bool
    // (setcc, no branch); the final pick stays a branch: a branch-free one measured slower (it
    // makes the next level's loads wait for the comparison; a predicted branch lets them start).
    for (std::size_t g = 4 * i + 3; g + 3 < n; g = 4 * i + 3) {
        const std::size_t m01 = g + static_cast<std::size_t>(before<kMin>(a[g + 1], a[g], lt));
        const std::size_t m23 = g + 2 + static_cast<std::size_t>(before<kMin>(a[g + 3], a[g + 2], lt));
        const std::size_t m = before<kMin>(a[m23], a[m01], lt) ? m23 : m01;
        a[i] = std::move(a[m]);
        i = m;
    }
    // The ragged bottom: candidates are the existing grandchildren and the children that have no
    // children of their own (a child with children is beaten by them). The winner is a leaf.
    const std::size_t c = 2 * i + 1;
    if (c >= n) return i;
    const std::size_t g = 2 * c + 1;
    std::size_t m = g < n ? g : c;  // first child c has a child iff g < n
    for (std::size_t k = g + 1; k < n && k < g + 4; ++k) {
        if (before<kMin>(a[k], a[m], lt)) m = k;
    }
    if (c + 1 < n && g + 2 >= n && before<kMin>(a[c + 1], a[m], lt)) m = c + 1;  // childless 2nd child
    a[i] = std::move(a[m]);
    return m;
}

// Removes a[i] (the root, or the root's larger child) from a[0, n): the array keeps n - 1 elements.
template <class E, class Lt>
E remove_at(E* a, std::size_t n, std::size_t i, const Lt& lt) noexcept(
    noexcept(place_up(a, i, 0, std::move(a[0]), lt)) && std::is_nothrow_move_constructible_v<E>) {
    E result = std::move(a[i]);
    const std::size_t last = n - 1;
    if (i != last) {
        E x = std::move(a[last]);
        const std::size_t h = is_min_level(i) ? descend<true>(a, last, i, lt) : descend<false>(a, last, i, lt);
        place_up(a, h, 0, std::move(x), lt);
    }
    return result;
}

// Bottom-up construction: every internal node, last first, is sunk into its valid subheaps.
template <class E, class Lt>
void rebuild(E* a, std::size_t n, const Lt& lt) noexcept(
    noexcept(place_up(a, 0, 0, std::move(a[0]), lt)) && std::is_nothrow_move_constructible_v<E>) {
    for (std::size_t i = n / 2; i-- > 0;) {
        E x = std::move(a[i]);
        const std::size_t h = is_min_level(i) ? descend<true>(a, n, i, lt) : descend<false>(a, n, i, lt);
        place_up(a, h, i, std::move(x), lt);
    }
}

}  // namespace detail
}  // namespace pard
