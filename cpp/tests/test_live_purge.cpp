// LivePipeline::purge racing the workers (Triton #7512): 4 submitting threads push N requests
// (default 100 000; 20 000 in a TSan build; argv[1] overrides) into one pard-rule stage (LBF, max
// batch 4), two workers form batches and run an identity "executor", and a purger thread calls
// purge(0, now, now) throughout, as the runtime's purge timer does. Half of the requests have a
// 1 ms SLO: far below d(1) = 1 s, so infeasible whatever the batch, and dropped (reason
// `infeasible`) by the purge or at batch formation, whichever reaches it first; the other half
// have 1000 s and finish. The oracle: every request ends exactly once, in the state its SLO
// dictates (or rejected by back-pressure), and counts() satisfies the conservation identity at
// every moment and at the end.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
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

// handle = 2 * (i + 1) + short: the oracle reads the request's SLO class from its handle.
struct Oracle {
    explicit Oracle(std::uint64_t n) : seen(new std::atomic<int>[n]) {
        for (std::uint64_t i = 0; i < n; ++i) seen[i] = 0;
    }
    std::unique_ptr<std::atomic<int>[]> seen;
    std::atomic<std::int64_t> finished{0}, infeasible{0}, refused{0};

    void record(std::vector<Done>& done) {
        for (const Done& d : done) {
            CHECK(seen[d.handle.v / 2 - 1].fetch_add(1) == 0);  // exactly one terminal transition
            const bool tight = (d.handle.v & 1) != 0;
            if (d.state == Outcome::kOnTime || d.state == Outcome::kLate) {
                CHECK(!tight && d.value.v == d.handle.v);
                finished.fetch_add(1);
            } else if (d.state == Outcome::kDropped && d.reason == static_cast<int>(Reason::kInfeasible)) {
                CHECK(tight);
                infeasible.fetch_add(1);
            } else {
                CHECK(d.state == Outcome::kRejected);  // back-pressure at the entry
                refused.fetch_add(1);
            }
        }
        done.clear();
    }
};

void check_identity(const std::array<std::int64_t, 7>& c) {
    CHECK(c[0] == c[1] + c[2] + c[3] + c[4] + c[5] + c[6]);
    CHECK(c[1] >= 0);
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (kTsan ? 20'000 : 100'000);
    StageConfig c;
    // d(1) = 1 s (the identity executor takes no time: only the estimate uses it), so a 1 ms SLO is
    // infeasible even for a formation whose `now` was read up to 999 ms before the request's send
    // (a worker reads the clock, then drains the ring: under TSan that gap can pass a millisecond)
    c.profile = Profile(std::vector<std::int64_t>{1, 4}, std::vector<std::int64_t>{1'000'000'000, 2'000'000'000});
    c.max_batch = 4;
    c.policy.order = Order::kLbf;
    c.policy.drop = DropRule::kPard;
    c.ring_capacity = 1024;
    StageScheduler sched(c);
    std::vector<LiveStageSpec> specs(1);
    specs[0].sched = &sched;
    specs[0].max_queue = 512;
    specs[0].capacity_req_s = 1e6;
    Pipe pipe(std::move(specs), {0}, {0}, 1000, Pipe::Hooks{});
    Oracle oracle(n);
    pipe.open_admission();

    std::atomic<std::uint64_t> next{0};
    std::atomic<int> submitting{4};
    std::atomic<bool> quit{false};
    std::atomic<std::int64_t> purged{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            std::vector<Done> done;
            auto no_fault = [](int) {};
            while (true) {
                const std::uint64_t i = next.fetch_add(1);
                if (i >= n) break;
                while (pipe.in_flight() > 256) std::this_thread::yield();
                const bool tight = i % 2 == 0;
                const std::int64_t slo_ns = tight ? 1'000'000 : 1'000'000'000'000;
                const Val h{2 * (i + 1) + (tight ? 1 : 0)};
                pipe.submit(h, slo_ns, static_cast<double>(slo_ns) * 1e-9, 0, h, done, no_fault, Val{});
                oracle.record(done);
            }
            submitting.fetch_sub(1);
        });
    }
    for (int w = 0; w < 2; ++w) {
        threads.emplace_back([&] { identity_worker(pipe, 0, [&](std::vector<Done>& d) { oracle.record(d); }); });
    }
    std::thread purger([&] {
        std::vector<Done> done;
        while (!quit.load()) {
            const std::int64_t now = pipe.now_ns();
            pipe.purge(0, now, now, done);
            purged.fetch_add(static_cast<std::int64_t>(done.size()));
            oracle.record(done);
            check_identity(pipe.counts());
            std::this_thread::yield();
        }
    });
    while (submitting.load() > 0 || pipe.in_flight() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    quit.store(true);
    purger.join();
    pipe.stop();
    for (auto& t : threads) t.join();

    const auto cnt = pipe.counts();
    check_identity(cnt);
    CHECK(cnt[0] == static_cast<std::int64_t>(n) && cnt[1] == 0);
    CHECK(cnt[2] + cnt[3] == oracle.finished.load());
    CHECK(cnt[4] == oracle.infeasible.load() && cnt[5] == oracle.refused.load());
    for (std::uint64_t i = 0; i < n; ++i) CHECK(oracle.seen[i].load() == 1);
    CHECK(sched.queued() == 0);
    std::printf("test_live_purge: %llu requests: %lld finished, %lld infeasible (%lld by the purge), %lld refused\n",
                static_cast<unsigned long long>(n), static_cast<long long>(oracle.finished.load()),
                static_cast<long long>(oracle.infeasible.load()), static_cast<long long>(purged.load()),
                static_cast<long long>(oracle.refused.load()));
    return 0;
}
