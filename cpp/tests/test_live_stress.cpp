// Many-thread submit / cancel / route stress of pard::LivePipeline (issue 15): 8 submitting threads
// push N requests (default 200 000; 40 000 in a TSan build; argv[1] overrides) into a fan-out /
// join DAG  a -> {b, c} -> d  with small queue bounds, 2 workers per stage form batches, run an
// identity "executor" and route; a canceller thread cancels random in-flight requests and a
// monitor thread reads counts() throughout. The oracle is independent of the pipeline:
//   * every request id ends exactly once (each Done seen once, by whoever ended it);
//   * at every moment counts() satisfies submitted = pending + on_time + late + dropped + rejected
//     + failed, and at the end submitted = N, pending = 0;
//   * a finished request's result is the join of its two branches: 2 x its payload;
//   * an id the canceller never touched ends finished, or rejected/dropped with reason `rejected`
//     (back-pressure), never `cancelled`.
#include <algorithm>
#include <array>
#include <chrono>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pard/live_pipeline.hpp"
#include "pard/policy.hpp"
#include "pard/profile.hpp"
#include "pard/stage_scheduler.hpp"

#include "check.hpp"
#include "live_fixture.hpp"
#include "sanitizer.hpp"

using namespace pard;

namespace {

using pard_test::Done;
using pard_test::Pipe;
using pard_test::Val;
using pard_test::identity_worker;

struct Oracle {
    explicit Oracle(std::uint64_t n) : seen(new std::atomic<int>[n]), touched(new std::atomic<std::uint8_t>[n]), keys(new std::atomic<std::uint64_t>[n]) {
        for (std::uint64_t i = 0; i < n; ++i) {
            seen[i] = 0;
            touched[i] = 0;
            keys[i] = ~std::uint64_t{0};
        }
    }
    std::unique_ptr<std::atomic<int>[]> seen;
    std::unique_ptr<std::atomic<std::uint8_t>[]> touched;
    std::unique_ptr<std::atomic<std::uint64_t>[]> keys;
    std::atomic<std::int64_t> finished{0}, cancelled{0}, refused{0};

    void record(std::vector<Done>& done) {
        for (const Done& d : done) {
            CHECK(seen[d.rid].fetch_add(1) == 0);  // exactly one terminal transition
            CHECK(d.handle.v != 0);                // the handle travelled with its request
            switch (d.state) {
                case Outcome::kOnTime:
                case Outcome::kLate:
                    CHECK(d.kind == EndKind::kOutput);
                    CHECK(d.value.v == 2 * d.handle.v);  // the join of both branches of its payload
                    finished.fetch_add(1);
                    break;
                case Outcome::kDropped:
                    if (d.reason == static_cast<int>(Reason::kCancelled)) {
                        CHECK(touched[d.rid].load() != 0);  // only the canceller cancels (touched by id)
                        cancelled.fetch_add(1);
                    } else {
                        CHECK(d.reason == static_cast<int>(Reason::kRejected));  // back-pressure downstream
                        refused.fetch_add(1);
                    }
                    break;
                case Outcome::kRejected:
                    CHECK(d.stage == 0);
                    refused.fetch_add(1);
                    break;
                default:
                    CHECK(false);
            }
        }
        done.clear();
    }
};

std::unique_ptr<StageScheduler> make_sched(int k) {
    StageConfig c;
    c.stage = k;
    c.profile = Profile(std::vector<std::int64_t>{1, 8}, std::vector<std::int64_t>{1000, 4000});
    c.max_batch = 8;
    c.policy.order = Order::kFcfs;
    c.policy.drop = DropRule::kNone;
    c.ring_capacity = 1024;
    c.entry = k == 0;
    return std::make_unique<StageScheduler>(std::move(c));
}

void check_identity(const std::array<std::int64_t, 7>& c) {
    CHECK(c[0] == c[1] + c[2] + c[3] + c[4] + c[5] + c[6]);
    CHECK(c[1] >= 0);
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (kTsan ? 40'000 : 200'000);
    constexpr int kSubmitters = 8;
    constexpr int kWorkersPerStage = 2;
    std::vector<std::unique_ptr<StageScheduler>> scheds;
    for (int k = 0; k < 4; ++k) scheds.push_back(make_sched(k));
    std::vector<LiveStageSpec> specs(4);
    const std::vector<std::vector<int>> succ = {{1, 2}, {3}, {3}, {}};
    const std::vector<std::vector<int>> preds = {{}, {0}, {0}, {1, 2}};
    for (int k = 0; k < 4; ++k) {
        specs[static_cast<std::size_t>(k)].sched = scheds[static_cast<std::size_t>(k)].get();
        specs[static_cast<std::size_t>(k)].successors = succ[static_cast<std::size_t>(k)];
        specs[static_cast<std::size_t>(k)].preds = preds[static_cast<std::size_t>(k)];
        specs[static_cast<std::size_t>(k)].max_queue = 240;
        specs[static_cast<std::size_t>(k)].capacity_req_s = 1e6;
    }
    Pipe::Hooks hooks;
    hooks.join = [](int, std::vector<Val>& parts, Val& out, Val&) {
        CHECK(parts.size() == 2 && parts[0].v == parts[1].v && parts[0].v != 0);
        out.v = parts[0].v + parts[1].v;
        return true;
    };
    hooks.combine = [](const std::vector<int>&, std::vector<Val>& outs) { return outs.at(0); };
    Pipe pipe(std::move(specs), {0}, {3}, 1000, std::move(hooks));
    Oracle oracle(n);
    pipe.open_admission();

    std::atomic<std::uint64_t> next{0};
    std::atomic<int> submitting{kSubmitters};
    std::atomic<bool> quit{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kSubmitters; ++t) {
        threads.emplace_back([&] {
            std::vector<Done> done;
            auto no_fault = [](int) {};
            while (true) {
                const std::uint64_t i = next.fetch_add(1);
                if (i >= n) break;
                while (pipe.in_flight() > 256) std::this_thread::yield();  // mostly within the queue bounds
                const std::uint64_t key = pipe.submit(Val{i + 1}, 1'000'000'000'000, 1000.0, 0, Val{i + 1}, done, no_fault, Val{});
                oracle.keys[i].store(key);
                oracle.record(done);
            }
            submitting.fetch_sub(1);
        });
    }
    for (int k = 0; k < 4; ++k) {
        for (int w = 0; w < kWorkersPerStage; ++w) {
            threads.emplace_back([&, k] { identity_worker(pipe, k, [&](std::vector<Done>& d) { oracle.record(d); }); });
        }
    }
    std::thread canceller([&] {
        std::uint64_t s = 12345;
        std::vector<Done> done;
        while (!quit.load()) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            const std::uint64_t hi = next.load();
            if (hi == 0) continue;
            const std::uint64_t i = (s >> 33) % std::min(hi, n);
            const std::uint64_t key = oracle.keys[i].load();
            if (key == ~std::uint64_t{0}) continue;
            oracle.touched[key >> Pipe::kSlotBits].store(1);
            pipe.cancel(key, done);
            oracle.record(done);
        }
    });
    std::thread monitor([&] {
        while (!quit.load()) {
            check_identity(pipe.counts());
            std::this_thread::yield();
        }
    });
    while (submitting.load() > 0 || pipe.in_flight() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    quit.store(true);
    canceller.join();
    monitor.join();
    pipe.stop();
    for (auto& t : threads) t.join();

    const auto c = pipe.counts();
    check_identity(c);
    CHECK(c[0] == static_cast<std::int64_t>(n) && c[1] == 0);
    CHECK(c[2] + c[3] == oracle.finished.load());
    CHECK(c[4] + c[5] == oracle.cancelled.load() + oracle.refused.load());
    for (std::uint64_t rid = 0; rid < n; ++rid) CHECK(oracle.seen[rid].load() == 1);
    const auto out = pipe.outcomes();
    CHECK(out.rid.size() == 1000);  // the bounded window of the most recent requests
    // where the compute went (pard/compute_split.hpp): nothing unresolved once quiet, every shed request
    // counted once, and per stage useful + wasted = the batch time the statistics logged
    const pard::ComputeSplit split = pipe.compute_split();
    CHECK(split.shed() == c[4] + c[5]);
    for (int k = 0; k < 4; ++k) {
        const auto ku = static_cast<std::size_t>(k);
        CHECK(split.unresolved_ns()[ku] == 0);
        const auto st = pipe.take_stats(k);
        double logged = 0.0;
        for (double d : st.batch_duration_s) logged += d;
        const double used = static_cast<double>(split.useful_ns()[ku] + split.wasted_ns()[ku]) * 1e-9;
        CHECK(std::fabs(used - logged) <= 1e-12 * (1.0 + static_cast<double>(st.batch_duration_s.size())));
    }
    std::printf("test_live_stress: %llu requests: %lld finished, %lld cancelled, %lld refused\n",
                static_cast<unsigned long long>(n), static_cast<long long>(oracle.finished.load()),
                static_cast<long long>(oracle.cancelled.load()), static_cast<long long>(oracle.refused.load()));
    return 0;
}
