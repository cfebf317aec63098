// pard/rules/virtual_queue.hpp — the entry keeps a virtual queue of the bottleneck below (Policy::virtual_queue).
//
// Why: a bottleneck that drops its own excess keeps its queue short, so the latency terms the stages above
// read show no overload and every request it drops has been through them first. Counting what the entry
// forwards against what the bottleneck can finish shows the excess at the entry, where shedding costs nothing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pard::rules {

// A fluid backlog of the bottleneck as the entry sees it: +1 per request the entry forwards, drained at
// the bottleneck's service rate A (requests/s at full batches, which is never below what it finishes, so
// the backlog errs low: toward forwarding). Anchored to what the stages down to the bottleneck hold now.
class VirtualQueue {
public:
    // Drains at rate (req/s) from the last call to now_ns; a clock that steps back drains nothing.
    void drain(std::int64_t now_ns, double rate) noexcept {
        if (now_ns > at_ns_ && rate > 0.0) {
            backlog_ -= rate * static_cast<double>(now_ns - at_ns_) * 1e-9;
            if (backlog_ < 0.0) backlog_ = 0.0;
        }
        if (now_ns > at_ns_) at_ns_ = now_ns;
    }

    // held: the requests between this entry and the end of the bottleneck's batches now (forwarded, not yet
    // finished there). The backlog is never below them (the rate may be above what the bottleneck really
    // finishes, or another entry feeds it); once they are none it is none. Between, what a stage below
    // dropped still counts until the rate drains it: anchored to the live count, a bottleneck that serves
    // its newest first (HBF) and drops its oldest would let the entry forward its excess again.
    void anchor(std::size_t held, bool bottleneck_idle) noexcept {
        const auto h = static_cast<double>(held);
        if (backlog_ < h || bottleneck_idle) backlog_ = h;
    }

    void forwarded() noexcept { backlog_ += 1.0; }

    [[nodiscard]] double backlog() const noexcept { return backlog_; }

    // When the bottleneck has served what is ahead now, at rate (ns on the caller's clock).
    [[nodiscard]] std::int64_t served_ns(std::int64_t now_ns, double rate) const noexcept {
        return now_ns + static_cast<std::int64_t>(backlog_ / rate * 1e9);
    }

private:
    double backlog_ = 0.0;
    std::int64_t at_ns_ = 0;
};

// The earliest a request forwarded by a batch ending at leave_ns can finish: it starts at the bottleneck
// no sooner than it gets there and than the backlog ahead of it is served (served_ns), then runs the
// bottleneck's batch (bottleneck_d_ns) and whatever the bottleneck's own downstream term says lies below.
// A request whose deadline is under this would be dropped at the bottleneck: shed it at the entry.
[[nodiscard]] constexpr std::int64_t virtual_queue_threshold(std::int64_t leave_ns, std::int64_t served_ns,
                                                             std::int64_t bottleneck_d_ns,
                                                             std::int64_t below_bottleneck_ns) noexcept {
    return (served_ns > leave_ns ? served_ns : leave_ns) + bottleneck_d_ns + below_bottleneck_ns;
}

}  // namespace pard::rules
