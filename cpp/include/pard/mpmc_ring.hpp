// pard/mpmc_ring.hpp — MpmcRing<T>, a bounded lock-free multi-producer multi-consumer ring.
//
// Requests reach a stage through one of these (DESIGN §3.4): any thread submits without a lock, and
// the stage's worker that is forming a batch drains it into the stage's DEPQ.
//
// Algorithm (D. Vyukov's bounded MPMC queue). `capacity` slots, a power of two, each with an
// atomic sequence number `seq`; two monotonically increasing 64-bit tickets, `tail_` (next push)
// and `head_` (next pop). Ticket t maps to slot t & (capacity - 1) and to "lap" t / capacity.
//   - Slot s starts with seq = s. For ticket t on slot s:
//       seq == t                  the slot is free for the producer holding ticket t;
//       seq == t + 1              the slot holds the item of ticket t, ready for its consumer;
//       seq == t + capacity       the consumer of ticket t has emptied it: free for ticket
//                                 t + capacity (the next lap).
//   - try_push reads tail_, and if the slot's seq equals the ticket it claims the ticket with a CAS
//     on tail_, constructs the item in the slot and publishes it with seq = t + 1 (release).
//     seq < t means the slot still holds last lap's item: the ring is full, return false.
//   - try_pop does the same on head_ with seq == t + 1, moves the item out, destroys the slot's
//     copy and frees the slot with seq = t + capacity (release).
// Invariants: 0 <= tail_ - head_ <= capacity (up to operations in flight); every slot's seq is
// one of the three values above for the ticket that maps to it; an item is constructed in a slot
// exactly once (by the producer that won its ticket) and destroyed exactly once (by the consumer
// that won the matching ticket, or by ~MpmcRing for items never popped).
//
// Guarantee: successful operations take their tickets in one total order, and item t is popped by
// the pop that took ticket t: items leave in the order their tickets were taken, so the ring is
// FIFO per producer — every consumer sees any one producer's items in the order they were pushed.
// Each successful try_push/try_pop is linearizable at its ticket CAS. A failed operation is only a
// snapshot: try_pop may return false while a producer that has claimed an earlier ticket is still
// writing its item (and try_push may return false while a consumer is still reading); retrying
// later succeeds. "Lock-free" here means no mutex, no system call and no allocation; a thread
// preempted between claiming a ticket and publishing its slot delays only the one thread that
// wants that slot next (the textbook non-blocking guarantee does not hold for that window).
//
// Contract: try_push/try_pop never block and never lose an item: a full ring's try_push returns
// false and leaves the caller's item untouched; an empty ring's try_pop returns false and leaves
// `out` untouched. Both are noexcept (T must be nothrow copy/move-constructible, move-assignable
// and destructible). size_approx() and empty_approx() are best-effort under concurrency (exact
// when the ring is quiescent). No allocation after construction; copy and move are deleted because
// threads share the ring by address. Slots are not padded to a cache line each (memory stays
// capacity * sizeof(slot)); only the two hot tickets are, to keep producers and consumers apart.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace pard {

// One cache line on the x86-64 and AArch64 machines pard targets. (Not
// std::hardware_destructive_interference_size: GCC warns that its value may change between
// compiler versions, which would change this ABI.)
inline constexpr std::size_t kCacheLine = 64;

template <class T>
class MpmcRing {
    static_assert(std::is_nothrow_copy_constructible_v<T>,
                  "try_push is noexcept: copying an item into a slot must not throw");
    static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>,
                  "try_pop is noexcept: moving an item out of a slot must not throw");
    static_assert(std::is_nothrow_destructible_v<T>, "slots destroy items in noexcept code");
    static_assert(std::atomic<std::size_t>::is_always_lock_free,
                  "the ring's tickets and sequence numbers must be lock-free atomics, or the ring "
                  "would hide a lock");

public:
    // Throws std::invalid_argument unless capacity is a power of two in [2, 2^62].
    explicit MpmcRing(std::size_t capacity) : capacity_(checked(capacity)), mask_(capacity - 1) {
        slots_ = std::make_unique<Slot[]>(capacity_);
        for (std::size_t i = 0; i < capacity_; ++i) {
            slots_[i].seq.store(i, std::memory_order_relaxed);
        }
    }

    MpmcRing(const MpmcRing&) = delete;
    MpmcRing& operator=(const MpmcRing&) = delete;
    MpmcRing(MpmcRing&&) = delete;
    MpmcRing& operator=(MpmcRing&&) = delete;

    ~MpmcRing() {
        // Quiescent by contract: destroy the items that were pushed and never popped.
        const std::size_t head = head_.v.load(std::memory_order_relaxed);
        const std::size_t tail = tail_.v.load(std::memory_order_relaxed);
        for (std::size_t t = head; t != tail; ++t) {
            slots_[t & mask_].item()->~T();
        }
    }

    // Copies `x` into the ring. Returns false, without side effects, if the ring is full.
    bool try_push(const T& x) noexcept {
        std::size_t t = tail_.v.load(std::memory_order_relaxed);
        for (;;) {
            Slot& s = slots_[t & mask_];
            const std::size_t seq = s.seq.load(std::memory_order_acquire);
            const auto diff = static_cast<std::ptrdiff_t>(seq - t);
            if (diff == 0) {
                if (tail_.v.compare_exchange_weak(t, t + 1, std::memory_order_relaxed)) {
                    ::new (static_cast<void*>(s.storage)) T(x);
                    s.seq.store(t + 1, std::memory_order_release);
                    return true;
                }
                // CAS failure reloaded t: another producer took the ticket; try the next one.
            } else if (diff < 0) {
                return false;  // the slot still holds last lap's item: full
            } else {
                t = tail_.v.load(std::memory_order_relaxed);  // we are behind: catch up
            }
        }
    }

    // Moves the oldest item into `out`. Returns false, leaving `out` untouched, if the ring is empty.
    bool try_pop(T& out) noexcept {
        std::size_t t = head_.v.load(std::memory_order_relaxed);
        for (;;) {
            Slot& s = slots_[t & mask_];
            const std::size_t seq = s.seq.load(std::memory_order_acquire);
            const auto diff = static_cast<std::ptrdiff_t>(seq - (t + 1));
            if (diff == 0) {
                if (head_.v.compare_exchange_weak(t, t + 1, std::memory_order_relaxed)) {
                    T* p = s.item();
                    out = std::move(*p);
                    p->~T();
                    s.seq.store(t + capacity_, std::memory_order_release);
                    return true;
                }
            } else if (diff < 0) {
                return false;  // the slot's item of this lap is not published yet: empty
            } else {
                t = head_.v.load(std::memory_order_relaxed);
            }
        }
    }

    // Number of items, clamped to [0, capacity]; exact only when no operation is in flight.
    [[nodiscard]] std::size_t size_approx() const noexcept {
        const std::size_t head = head_.v.load(std::memory_order_acquire);
        const std::size_t tail = tail_.v.load(std::memory_order_acquire);
        const auto diff = static_cast<std::ptrdiff_t>(tail - head);
        if (diff <= 0) return 0;
        const auto n = static_cast<std::size_t>(diff);
        return n < capacity_ ? n : capacity_;
    }
    [[nodiscard]] bool empty_approx() const noexcept { return size_approx() == 0; }
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }

private:
    struct Slot {
        std::atomic<std::size_t> seq{0};
        alignas(T) unsigned char storage[sizeof(T)];
        T* item() noexcept { return std::launder(reinterpret_cast<T*>(storage)); }
    };

    // A ticket alone on its cache line.
    struct alignas(kCacheLine) PaddedTicket {
        std::atomic<std::size_t> v{0};
    };
    static_assert(sizeof(PaddedTicket) == kCacheLine && alignof(PaddedTicket) == kCacheLine,
                  "each ticket must own a whole cache line, so that producers bumping tail_ and "
                  "consumers bumping head_ do not invalidate each other's line (false sharing)");

    static std::size_t checked(std::size_t capacity) {
        constexpr std::size_t kMax = std::size_t{1} << (std::numeric_limits<std::size_t>::digits - 2);
        if (capacity < 2 || capacity > kMax || (capacity & (capacity - 1)) != 0) {
            throw std::invalid_argument("MpmcRing: capacity must be a power of two in [2, 2^" +
                                        std::to_string(std::numeric_limits<std::size_t>::digits - 2) +
                                        "], got " + std::to_string(capacity));
        }
        return capacity;
    }

    // Read-mostly members first, then each ticket on its own line.
    const std::size_t capacity_;
    const std::size_t mask_;
    std::unique_ptr<Slot[]> slots_;
    PaddedTicket head_;  // next ticket to pop (consumers)
    PaddedTicket tail_;  // next ticket to push (producers)
};

}  // namespace pard
