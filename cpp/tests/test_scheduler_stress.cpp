// Concurrency at scale through one pard::StageScheduler (issue 13, "Concurrency at scale"): 8
// submitting threads push N requests (default 10^7; 10^6 in a TSan build, whose slowdown makes 10^7
// take minutes: CMakeLists.txt adds a second TSan run at 10^7; argv[1] overrides) into a small ring, 4 workers form batches with the
// cancelled predicate, a canceller thread cancels random in-flight requests and a publisher flips
// the order between LBF and HBF; the stage is a parallel DAG branch under Policy::coherent_rank, so each
// flip also re-keys its queue between deadline and rank while submitters fill it. The stage reads a stage below it (Policy::overload_below) that a
// further thread floods and drains, so that stage's overload flag and queue length change while the
// workers read them (the cross-stage reads run under TSan, Policy::live_queues' queue length and terms
// too; the overload term published here is 0 and the stage below publishes a queueing delay of 1000 s,
// longer than any queue it holds takes to drain, so its queue lag is 0: the rule's outcomes, and the
// oracle below, do not depend on them). Every request must end in exactly
// one terminal state:
//   rejected   submit() returned false (full ring: back-pressure; the submitter records it),
//   served     taken into a batch,
//   dropped    with reason infeasible (its deadline is below t_e + d(1)) or cancelled.
// The oracle is independent of the scheduler: each id's kind (feasible / infeasible, cancelled
// before submit or not) is chosen by the submitter from a seeded generator, and after the run
//   * no id is accounted twice, every id exactly once, and the counts add up to N;
//   * an id cancelled before its submit is never served and, if accepted, is dropped `cancelled`;
//   * an infeasible id is never served; an id dropped `infeasible` is an infeasible id; an id
//     dropped `cancelled` had its cancel flag set;
//   * an id never cancelled ends as the rule says: served if feasible, `infeasible` if not.
// Only ids the canceller hit while they were in flight may end either way (the race is real).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pard/policy.hpp"
#include "pard/profile.hpp"
#include "pard/request.hpp"
#include "pard/snapshot.hpp"
#include "pard/stage_scheduler.hpp"

#include "check.hpp"
#include "sanitizer.hpp"

using namespace pard;

namespace {

constexpr std::uint64_t kDefaultRequests = kTsan ? 1'000'000 : 10'000'000;
constexpr std::uint64_t kSubmitters = 8;
constexpr int kWorkers = 4;
constexpr std::int64_t kMs = 1'000'000;

// Terminal states recorded per id (0 = none yet).
enum State : std::uint8_t { kNone = 0, kRejected = 1, kServed = 2, kDropInfeasible = 3, kDropCancelled = 4 };

// Per-id kind bits, written by the id's submitter before submit.
constexpr std::uint8_t kInfeasibleBit = 1;
constexpr std::uint8_t kPreCancelBit = 2;

// splitmix64: a tiny seeded generator per thread (deterministic choices, no shared state).
struct SplitMix {
    std::uint64_t s;
    std::uint64_t next() noexcept {
        std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
};

struct Shared {
    explicit Shared(std::uint64_t count)
        : n(count), state(new std::atomic<std::uint8_t>[count]), kind(new std::atomic<std::uint8_t>[count]),
          cancelled(new std::atomic<std::uint8_t>[count]) {
        for (std::uint64_t i = 0; i < count; ++i) {
            state[i].store(kNone, std::memory_order_relaxed);
            kind[i].store(0, std::memory_order_relaxed);
            cancelled[i].store(0, std::memory_order_relaxed);
        }
    }
    const std::uint64_t n;
    std::unique_ptr<std::atomic<std::uint8_t>[]> state;
    std::unique_ptr<std::atomic<std::uint8_t>[]> kind;
    std::unique_ptr<std::atomic<std::uint8_t>[]> cancelled;
    std::atomic<std::uint64_t> accounted{0};
    std::atomic<std::uint64_t> submitted_so_far{0};  // an upper bound on ids the canceller may pick
    std::atomic<std::uint64_t> submitters_left{kSubmitters};
    std::atomic<std::uint64_t> below_overloaded{0};  // below_driver's formations that found it overloaded
    std::atomic<std::uint64_t> below_calm{0};        // ... and calm

    // Sets id's terminal state once; a second terminal state for one id is the bug this test hunts.
    void finish(std::uint64_t id, State s) {
        CHECK(id < n);
        std::uint8_t expected = kNone;
        CHECK(state[id].compare_exchange_strong(expected, s, std::memory_order_relaxed));
        accounted.fetch_add(1, std::memory_order_relaxed);
    }
};

StageConfig stage_config() {
    StageConfig c;
    c.profile = Profile({1, 8}, {10 * kMs, 80 * kMs});  // d(b) = 10 ms * b
    c.max_batch = 8;
    c.policy.drop = DropRule::kPard;
    c.policy.order = Order::kAdaptive;
    c.ring_capacity = 1024;  // small: some submits meet a full ring and are rejected
    c.policy.overload_below = BelowSignal::kOverloaded;  // reads the stage below (below_driver)
    c.policy.coherent_rank = true;  // on a parallel branch (set_parallel): every HBF/LBF flip re-keys the queue
    c.policy.live_queues = true;    // reads the stage below's queue length and terms at every batch
    return c;
}

// The stage below: reactive pard, published 100 req/s, so a burst of 512 requests due in 300 ms fails
// its overload test (and is shed to the 24 that can start in time, 16 of them still queued after the
// first batch: overloaded_now() reads true) while a trickle of 4 passes it.
StageConfig below_config() {
    StageConfig c = stage_config();
    c.stage = 1;
    c.policy.reactive = true;
    c.policy.overload_below = BelowSignal::kNone;
    return c;
}

void below_driver(StageScheduler& below, Shared& sh) {
    BatchResult out;
    std::uint64_t id = 0;
    for (int k = 0; sh.submitters_left.load(std::memory_order_acquire) > 0; ++k) {
        const int burst = (k % 2 == 0) ? 512 : 4;
        for (int i = 0; i < burst; ++i) below.submit(Request{id++, 0, 300 * kMs, 0, 0, 0});
        for (int i = 0; i < 4; ++i) {
            below.form_batch(0, 0, out);
            (below.overloaded_now() ? sh.below_overloaded : sh.below_calm).fetch_add(1, std::memory_order_relaxed);
        }
        std::this_thread::yield();
    }
}

void submitter(StageScheduler& s, Shared& sh, std::uint64_t p) {
    SplitMix rng{std::uint64_t{0x5eed0000} + p};
    // Submitter p owns a contiguous block of ids (the first n % 8 blocks one longer).
    const std::uint64_t q = sh.n / kSubmitters, rem = sh.n % kSubmitters;
    const std::uint64_t per = q + (p < rem ? 1 : 0);
    const std::uint64_t first = p * q + std::min(p, rem);
    for (std::uint64_t i = 0; i < per; ++i) {
        const std::uint64_t id = first + i;
        const std::uint64_t r = rng.next();
        std::uint8_t k = 0;
        if (r % 4 == 0) k |= kInfeasibleBit;        // a quarter can never make it: deadline < d(1)
        if ((r >> 8) % 16 == 0) k |= kPreCancelBit;  // 1/16 cancelled before they are even queued
        sh.kind[id].store(k, std::memory_order_relaxed);
        if (k & kPreCancelBit) sh.cancelled[id].store(1, std::memory_order_relaxed);
        const std::int64_t deadline = (k & kInfeasibleBit) ? 5 * kMs : 1'000'000 * kMs;
        const Request req{id, 0, deadline, static_cast<std::int64_t>(id), 0, 0};
        if (!s.submit(req)) {
            sh.finish(id, kRejected);
            std::this_thread::yield();  // let the workers drain before the next try
        }
        sh.submitted_so_far.fetch_add(1, std::memory_order_relaxed);
    }
    sh.submitters_left.fetch_sub(1, std::memory_order_release);
}

void worker(StageScheduler& s, Shared& sh) {
    BatchResult out;
    const auto is_cancelled = [&sh](std::uint64_t id) {
        return sh.cancelled[id].load(std::memory_order_relaxed) != 0;
    };
    for (;;) {
        const bool done = sh.submitters_left.load(std::memory_order_acquire) == 0;
        s.form_batch(0, 0, out, is_cancelled);
        // Report each batch at twice its profiled duration (the stage's own ratio, read by form_batch
        // while the publisher's terms say "none measured yet"): ratio 2 only raises d(b), so the
        // oracle below (infeasible ids never served, the others always) still holds.
        if (!out.batch.empty()) {
            const auto b = static_cast<std::int64_t>(out.batch.size());
            s.observe_batch(b, 2 * s.config().profile.duration_ns(b));
        }
        for (const Request& r : out.batch) sh.finish(r.id, kServed);
        for (const Drop& d : out.drops) {
            CHECK(d.reason == Reason::kInfeasible || d.reason == Reason::kCancelled);
            sh.finish(d.request.id, d.reason == Reason::kInfeasible ? kDropInfeasible : kDropCancelled);
        }
        // Exit once every submitter has finished and a pass after that found the queue empty.
        if (done && out.batch.empty() && out.drops.empty() && s.queued() == 0) return;
        if (out.batch.empty() && out.drops.empty()) std::this_thread::yield();
    }
}

void canceller(Shared& sh) {
    SplitMix rng{std::uint64_t{0xca9ce1}};
    while (sh.submitters_left.load(std::memory_order_acquire) > 0) {
        const std::uint64_t hi = sh.submitted_so_far.load(std::memory_order_relaxed);
        if (hi > 0) {
            // Requests near the submit front are the ones most likely still queued.
            const std::uint64_t base = hi > 4096 ? hi - 4096 : 0;
            const std::uint64_t id = base + rng.next() % (hi - base + 1);
            if (id < sh.n) sh.cancelled[id].store(1, std::memory_order_relaxed);
        }
        std::this_thread::yield();
    }
}

void publisher(StageScheduler& s, Shared& sh) {
    for (int k = 0; sh.submitters_left.load(std::memory_order_acquire) > 0; ++k) {
        PublishedTerms t;
        t.mu = (k % 2 == 0) ? 2.0 : 0.5;  // flips HBF / LBF every publish
        t.eps = 0.1;
        t.duration_scale = (k % 3 == 0) ? 0.0 : 1.0;  // 0: the stage's own ratio (effective_terms)
        s.publish(t);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : kDefaultRequests;
    CHECK(n >= kSubmitters);
    StageScheduler s(stage_config());
    StageScheduler below(below_config());
    PublishedTerms bt;
    bt.service_rate = 100.0;
    bt.queue_delay_ns = 1000 * 1000 * kMs;  // 1000 s: queue_lag_ns is 0 whatever the stage below holds
    below.publish(bt);
    s.set_below({&below});
    s.set_parallel(true);
    Shared sh(n);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (std::uint64_t p = 0; p < kSubmitters; ++p) threads.emplace_back(submitter, std::ref(s), std::ref(sh), p);
    for (int w = 0; w < kWorkers; ++w) threads.emplace_back(worker, std::ref(s), std::ref(sh));
    threads.emplace_back(canceller, std::ref(sh));
    threads.emplace_back(publisher, std::ref(s), std::ref(sh));
    threads.emplace_back(below_driver, std::ref(below), std::ref(sh));
    for (auto& t : threads) t.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Counts against the independent per-id oracle.
    std::uint64_t count[5] = {0, 0, 0, 0, 0};
    std::uint64_t raced = 0;  // cancelled in flight by the canceller (either outcome allowed)
    for (std::uint64_t id = 0; id < n; ++id) {
        const std::uint8_t st = sh.state[id].load();
        const std::uint8_t k = sh.kind[id].load();
        const bool cancelled = sh.cancelled[id].load() != 0;
        CHECK(st != kNone);  // every request reached a terminal state
        ++count[st];
        if (k & kPreCancelBit) CHECK(st == kRejected || st == kDropCancelled);
        if (k & kInfeasibleBit) CHECK(st != kServed);
        if (st == kDropInfeasible) CHECK(k & kInfeasibleBit);
        if (st == kDropCancelled) CHECK(cancelled);
        if (!cancelled && st != kRejected) CHECK(st == ((k & kInfeasibleBit) ? kDropInfeasible : kServed));
        if (cancelled && !(k & kPreCancelBit)) ++raced;
    }
    CHECK(sh.accounted.load() == n);
    CHECK(count[kRejected] + count[kServed] + count[kDropInfeasible] + count[kDropCancelled] == n);
    CHECK(s.queued() == 0);
    CHECK(sh.below_overloaded.load() > 0 && sh.below_calm.load() > 0);  // the flag the workers read did flip
    std::printf("requests %llu (%s) in %.2f s: served %llu, infeasible %llu, cancelled %llu (%llu cancelled "
                "in flight), rejected %llu\n",
                static_cast<unsigned long long>(n), kTsan ? "TSan build" : "non-TSan build", secs,
                static_cast<unsigned long long>(count[kServed]),
                static_cast<unsigned long long>(count[kDropInfeasible]),
                static_cast<unsigned long long>(count[kDropCancelled]), static_cast<unsigned long long>(raced),
                static_cast<unsigned long long>(count[kRejected]));
    std::puts("test_scheduler_stress: ok");
    return 0;
}
