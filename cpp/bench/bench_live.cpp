// cpp/bench/bench_live.cpp — standalone: LivePipeline's hot path per request, dense and sparse.
//
// The mild-overload case of bench/test_bench_runtime.py without Python: one pard-rule stage
// (LBF, d(b) = 4 ms for b <= 16), SLO 50 ms, one submitter, one worker whose "executor" sleeps
// 4 ms per batch. Two regimes:
//   dense:  the submitter submits back to back (warm caches), the worker runs identity batches;
//   sparse: the submitter waits `gap` us between submits (1.1x the stage's capacity by default) and,
//           while it waits, walks a buffer of `pollute` KiB, as the interpreter and other processes
//           do between two calls on the real runtime (so each call starts on a cold cache).
// Prints, per request, the wall time of submit, of next_batch_take and of complete (each timed
// around the call, so the clock reads are in), and the pipeline's own scheduler_ns.
//   g++ -std=c++17 -O2 -DNDEBUG -pthread -Icpp/include cpp/bench/bench_live.cpp -o build/bench_live
//   build/bench_live sparse 3 227 4096     # regime, seconds, gap us, pollute KiB
//   SPIN=1 build/bench_live sparse ...    # busy-wait instead of sleeping between calls
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "pard/live_pipeline.hpp"
#include "pard/policy.hpp"
#include "pard/profile.hpp"
#include "pard/stage_scheduler.hpp"

using namespace pard;

namespace {

struct Val {
    std::uint64_t v = 0;
    explicit operator bool() const noexcept { return v != 0; }
};
using Pipe = LivePipeline<Val, Val>;
using Done = Pipe::Done;

std::int64_t now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Walks `buf` one cache line at a time (writes, so the lines are evicted dirty like real work's).
void pollute(std::vector<unsigned char>& buf) {
    for (std::size_t i = 0; i < buf.size(); i += 64) buf[i] = static_cast<unsigned char>(buf[i] + 1);
}

void wait_until(std::int64_t t, std::vector<unsigned char>& buf) {
    if (!buf.empty()) pollute(buf);
    if (std::getenv("SPIN")) {
        while (now() < t) {
        }
        return;
    }
    const std::int64_t left = t - now();
    if (left > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(left));
}

}  // namespace

int main(int argc, char** argv) {
    const bool sparse = argc > 1 && std::strcmp(argv[1], "sparse") == 0;
    const double secs = argc > 2 ? std::atof(argv[2]) : 3.0;
    const std::int64_t gap_ns = static_cast<std::int64_t>((argc > 3 ? std::atof(argv[3]) : 227.0) * 1e3);
    const std::size_t kib = argc > 4 ? static_cast<std::size_t>(std::atol(argv[4])) : 4096;
    StageConfig c;
    c.profile = Profile(std::vector<std::int64_t>{1, 16}, std::vector<std::int64_t>{4'000'000, 4'000'000});
    c.max_batch = 16;
    c.policy.order = Order::kLbf;
    c.policy.drop = DropRule::kPard;
    StageScheduler sched(c);
    std::vector<LiveStageSpec> specs(1);
    specs[0].sched = &sched;
    specs[0].max_queue = 1 << 20;
    specs[0].capacity_req_s = 4000;
    Pipe pipe(std::move(specs), {0}, {0}, 100000, Pipe::Hooks{});
    pipe.set_origin_ns(now());
    pipe.open_admission();

    std::atomic<bool> stop{false};
    std::int64_t t_take = 0, t_complete = 0, n_done = 0;
    std::thread worker([&] {
        Pipe::Worker wk;
        wk.stage = 0;
        std::vector<Val> payloads, outs;
        std::vector<Done> done;
        std::vector<unsigned char> buf(sparse ? kib * 1024 : 0);
        auto no_hook = [](int) {};
        while (pipe.next_batch_wait(wk)) {
            const std::int64_t a = now();
            pipe.next_batch_take(wk, payloads, done, no_hook);
            t_take += now() - a;
            n_done += static_cast<std::int64_t>(done.size());
            done.clear();
            if (payloads.empty()) continue;
            outs = payloads;
            const std::int64_t start = pipe.now_ns();
            if (sparse) wait_until(now() + 4'000'000, buf);
            const std::int64_t b = now();
            pipe.complete(wk, outs, false, Val{}, start, pipe.now_ns(), done);
            t_complete += now() - b;
            n_done += static_cast<std::int64_t>(done.size());
            done.clear();
        }
    });
    std::vector<Done> done;
    std::vector<unsigned char> buf(sparse ? kib * 1024 : 0);
    auto no_fault = [](int) {};
    std::int64_t t_submit = 0, n = 0;
    std::vector<std::int64_t> lat;
    lat.reserve(1 << 20);
    const std::int64_t t_end = now() + static_cast<std::int64_t>(secs * 1e9);
    std::int64_t next = now();
    while (now() < t_end) {
        if (sparse) {
            next += gap_ns;
            wait_until(next, buf);
        } else {
            while (pipe.in_flight() > 4096) std::this_thread::yield();
        }
        const std::int64_t a = now();
        pipe.submit(Val{static_cast<std::uint64_t>(n + 1)}, 50'000'000, 0.05, 0, Val{static_cast<std::uint64_t>(n + 1)}, done,
                    no_fault, Val{});
        const std::int64_t dt = now() - a;
        t_submit += dt;
        lat.push_back(dt);
        ++n;
        done.clear();
    }
    while (pipe.in_flight() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stop.store(true);
    pipe.stop();
    worker.join();
    const auto cnt = pipe.counts();
    const double per = 1.0 / static_cast<double>(n);
    std::printf("%s: %lld requests (on time %lld, late %lld, dropped %lld); ns per request: submit %.0f, take %.0f, "
                "complete %.0f, sum %.0f; scheduler_ns %.0f\n",
                sparse ? "sparse" : "dense", static_cast<long long>(n), static_cast<long long>(cnt[2]),
                static_cast<long long>(cnt[3]), static_cast<long long>(cnt[4]), static_cast<double>(t_submit) * per,
                static_cast<double>(t_take) * per, static_cast<double>(t_complete) * per,
                static_cast<double>(t_submit + t_take + t_complete) * per, static_cast<double>(pipe.scheduler_ns()) * per);
    std::sort(lat.begin(), lat.end());
    auto q = [&](double f) { return static_cast<long long>(lat[static_cast<std::size_t>(f * static_cast<double>(lat.size() - 1))]); };
    std::int64_t top = 0;
    for (std::size_t i = lat.size() - lat.size() / 100; i < lat.size(); ++i) top += lat[i];
    std::printf("  submit ns: p10 %lld p50 %lld p90 %lld p99 %lld max %lld; top 1%% of calls = %.0f%% of submit time\n", q(0.1), q(0.5),
                q(0.9), q(0.99), q(1.0), 100.0 * static_cast<double>(top) / static_cast<double>(t_submit));
    return 0;
}
