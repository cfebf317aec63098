// What the LivePipeline tests share: a payload type, the pipeline over it, and a worker thread's loop
// running an identity "executor" that hands every ended request (Done) to a recorder.
#pragma once

#include <cstdint>
#include <vector>

#include "pard/live_pipeline.hpp"

namespace pard_test {

// A payload: a value (0 = empty), as the pipeline requires of its payloads.
struct Val {
    std::uint64_t v = 0;
    explicit operator bool() const noexcept { return v != 0; }
};
using Pipe = pard::LivePipeline<Val, Val>;
using Done = Pipe::Done;

// One worker of `stage` until the pipeline closes: take a batch, return its payloads unchanged;
// `record(done)` sees the requests ended by each call (dropped at formation, or finished).
template <class Record>
void identity_worker(Pipe& pipe, int stage, Record&& record) {
    Pipe::Worker wk;
    wk.stage = stage;
    std::vector<Val> payloads;
    std::vector<Done> done;
    auto no_hook = [](int) {};
    while (pipe.next_batch_wait(wk)) {
        pipe.next_batch_take(wk, payloads, done, no_hook);
        record(done);
        if (payloads.empty()) continue;
        std::vector<Val> outs = payloads;
        const std::int64_t t0 = pipe.now_ns();
        pipe.complete(wk, outs, false, Val{}, t0, pipe.now_ns(), done);
        record(done);
    }
}

}  // namespace pard_test
