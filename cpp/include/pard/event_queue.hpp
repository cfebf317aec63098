// pard/event_queue.hpp — the simulator's future-event list: a binary min-heap of small POD events.
//
// Events are ordered by (time, priority, sequence number). The sequence number is assigned at push,
// so events with equal time and priority run in the order they were scheduled: the order never
// depends on heap internals, and a seed reproduces a run exactly (the SimPy rule). Priorities let
// same-time events run in a fixed causal order (a batch end delivers its requests before an idle
// worker looks at the queue).
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace pard {

struct Event {
    std::int64_t t_ns;   // when it happens (virtual clock)
    std::uint64_t seq;   // insertion order, the last tie-breaker
    std::uint32_t stage;
    std::uint32_t worker;
    std::uint8_t prio;   // lower runs first at equal time
    std::uint8_t kind;
};

struct EventAfter {
    bool operator()(const Event& a, const Event& b) const noexcept {
        if (a.t_ns != b.t_ns) return a.t_ns > b.t_ns;
        if (a.prio != b.prio) return a.prio > b.prio;
        return a.seq > b.seq;
    }
};

class EventQueue {
public:
    EventQueue() {
        std::vector<Event> storage;
        storage.reserve(1024);
        heap_ = std::priority_queue<Event, std::vector<Event>, EventAfter>(EventAfter{}, std::move(storage));
    }
    void push(std::int64_t t_ns, std::uint8_t prio, std::uint8_t kind, std::uint32_t stage, std::uint32_t worker) {
        heap_.push(Event{t_ns, next_seq_++, stage, worker, prio, kind});
    }
    [[nodiscard]] bool empty() const noexcept { return heap_.empty(); }
    [[nodiscard]] const Event& top() const noexcept { return heap_.top(); }
    void pop() { heap_.pop(); }
    [[nodiscard]] std::size_t size() const noexcept { return heap_.size(); }

private:
    std::priority_queue<Event, std::vector<Event>, EventAfter> heap_;
    std::uint64_t next_seq_ = 0;
};

}  // namespace pard
