// WakeList<T>: finished items handed from any number of producer threads to one consumer that is
// woken once per drain, not once per item (the live runtime's hand-off of finished requests to an
// asyncio event loop, live_loop_sink.hpp). Plain C++ (no Python), so that cpp/tests exercises it
// under the sanitizers.
//
// Algorithm. A mutex-guarded vector and one flag, `armed`: a wake-up of the consumer is on its way.
//   - push appends and, if the list was not armed, arms it and tells its caller to wake the
//     consumer (returns true). Every other push rides on that wake-up.
//   - take (the consumer, when woken) swaps the whole vector out and disarms, so the next push
//     wakes again.
//   - lost (the wake-up could not be delivered, or was discarded unrun: the consumer is gone)
//     swaps the vector out and disarms too; the caller drops what it got.
// Invariant: while items wait, the list is armed, and exactly one wake-up armed it that has not
// yet been followed by a take or lost. So no item is stranded: each waits for the take (or lost)
// of a wake-up that was asked for after it was pushed or before, never for one already consumed.
//
// Guarantee: every pushed item leaves by exactly one take or lost, in push order within a drain
// (FIFO per producer). Wake-ups are at most one per take: with n items pushed and k drains, at
// most k + 1 wake-ups are asked for.
//
// Contract: push/take/lost are thread-safe; take and lost may be called spuriously (an empty
// result). The caller performs the wake-up after push returns, outside the lock, so waking may
// run arbitrary code (Python) without holding it. A push may allocate (std::bad_alloc then, with
// the item not added and the flag unchanged). Copy and move are deleted: threads share it by
// address.
#pragma once

#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

namespace pard::bind {

template <class T>
class WakeList {
public:
    WakeList() = default;
    WakeList(const WakeList&) = delete;
    WakeList& operator=(const WakeList&) = delete;
    WakeList(WakeList&&) = delete;
    WakeList& operator=(WakeList&&) = delete;

    // Appends `item`; true when the caller must wake the consumer (nobody else is doing so).
    [[nodiscard]] bool push(T&& item) {
        std::lock_guard<std::mutex> lock(mu_);
        items_.push_back(std::move(item));
        if (armed_) return false;
        armed_ = true;
        return true;
    }

    // The consumer's drain: every waiting item into `out` (emptied first), and disarmed.
    void take(std::vector<T>& out) noexcept {
        out.clear();
        std::lock_guard<std::mutex> lock(mu_);
        out.swap(items_);
        armed_ = false;
    }

    // The wake-up will not run: the same as take, for the caller to discard.
    void lost(std::vector<T>& out) noexcept { take(out); }

    // f(item) for every waiting item, under the lock (f must not call back into the list).
    template <class F>
    void for_each(F&& f) const {
        std::lock_guard<std::mutex> lock(mu_);
        for (const T& item : items_) f(item);
    }

    // Best-effort under concurrency: items waiting now.
    [[nodiscard]] std::size_t size() const noexcept {
        std::lock_guard<std::mutex> lock(mu_);
        return items_.size();
    }

private:
    mutable std::mutex mu_;
    std::vector<T> items_;
    bool armed_ = false;  // a wake-up is on its way for what items_ holds
};

}  // namespace pard::bind
