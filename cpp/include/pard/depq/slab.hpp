// pard/depq/slab.hpp — the split-key storage of pard/depq.hpp's MinMaxHeap: the order test, the
// 16-byte heap node and the allocator that puts a node's four grandchildren on one cache line.
//
// Storage. For small elements the heap array holds T itself. For a larger trivially copyable T
// whose order is a *split key* (Less provides noexcept `std::int64_t primary(const T&)` and
// `std::uint64_t tiebreak(const T&)`, and less(a, b) is exactly (primary(a), tiebreak(a)) <
// (primary(b), tiebreak(b))) the heap array holds 16-byte nodes (primary, slot) and the elements
// stay put in a slab (a vector of T and a LIFO free list of slots): a sift moves 16 bytes instead
// of sizeof(T), and a node's four grandchildren fill one cache line. Equal primaries fall back to
// the tiebreaks in the slab (two extra loads: rare for deadlines, common for the arrival times of
// one batch). The order, hence every pop, is exactly the one Less gives. pard::Request (48 bytes)
// with ByDeadline, ByArrival or the stage scheduler's StageKeyLess uses the slab (uses_slab).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>

namespace pard {
namespace detail {

template <class T, class Less, class = void>
struct has_split_key : std::false_type {};
template <class T, class Less>
struct has_split_key<T, Less,
                     std::enable_if_t<std::is_same_v<decltype(std::declval<const Less&>().primary(std::declval<const T&>())),
                                                     std::int64_t> &&
                                      std::is_same_v<decltype(std::declval<const Less&>().tiebreak(std::declval<const T&>())),
                                                     std::uint64_t>>> : std::true_type {};

// One heap node of the slab layout: the element's primary key and where the element lives.
struct SlabEntry {
    std::int64_t primary;
    std::uint32_t slot;
    std::uint32_t unused;
};

// The cache line size on the x86-64 and AArch64 machines pard targets.
inline constexpr std::size_t kHeapLine = 64;
static_assert(sizeof(SlabEntry) == 16 && std::is_trivially_copyable_v<SlabEntry>,
              "a slab heap node is 16 trivially copyable bytes: a sift moves 16 bytes, and the four "
              "grandchildren of a node fill exactly one 64-byte cache line");
static_assert(kHeapLine % (4 * sizeof(SlabEntry)) == 0,
              "four consecutive nodes (one node's grandchildren) must fit in one cache line");

// Allocates the node array 16 bytes past a cache-line boundary (C++17 aligned new), so that node
// i's four grandchildren 4i+3 .. 4i+6 start a line: byte 16 + 16 (4i + 3) = 64 (i + 1).
template <class U>
struct LineAllocator {
    static_assert(sizeof(U) == sizeof(SlabEntry), "the offset below is computed for 16-byte nodes");
    static constexpr std::size_t kOffset = kHeapLine - 3 * sizeof(U);
    using value_type = U;
    LineAllocator() noexcept = default;
    template <class V>
    LineAllocator(const LineAllocator<V>& /*other*/) noexcept {}  // NOLINT: implicit, for rebinding
    [[nodiscard]] U* allocate(std::size_t k) {
        if (k > max_size()) throw std::bad_array_new_length();
        auto* raw = static_cast<unsigned char*>(::operator new(k * sizeof(U) + kOffset, std::align_val_t{kHeapLine}));
        return reinterpret_cast<U*>(raw + kOffset);
    }
    void deallocate(U* p, std::size_t /*k*/) noexcept {
        ::operator delete(reinterpret_cast<unsigned char*>(p) - kOffset, std::align_val_t{kHeapLine});
    }
    [[nodiscard]] static constexpr std::size_t max_size() noexcept {
        return (std::numeric_limits<std::size_t>::max() - kOffset) / sizeof(U);
    }
    friend bool operator==(const LineAllocator&, const LineAllocator&) noexcept { return true; }
    friend bool operator!=(const LineAllocator&, const LineAllocator&) noexcept { return false; }
};
}  // namespace detail
}  // namespace pard
