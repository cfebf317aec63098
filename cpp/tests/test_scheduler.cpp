// Standalone test of pard::StageScheduler, Profile, SnapshotCell and the drop rules: hand-computed
// traces, the cancelled-sibling path (only reachable from C++), and a concurrency run (submitters +
// batch-forming workers + a publisher) whose every request must be accounted exactly once and whose
// published snapshots must never be read torn. Plain checks that abort; run under TSan and ASan.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "pard/profile.hpp"
#include "pard/snapshot.hpp"
#include "pard/stage_scheduler.hpp"

#include "check.hpp"

using namespace pard;

namespace {

constexpr std::int64_t kMs = 1'000'000;

StageConfig config(DropRule drop, Order order, std::int64_t max_batch, std::size_t ring = 1024) {
    StageConfig c;
    c.profile = Profile({1, 4}, {10 * kMs, 40 * kMs});  // d(b) = 10 ms * b
    c.max_batch = max_batch;
    c.policy.drop = drop;
    c.policy.order = order;
    c.budget_fraction = 0.5;
    c.ring_capacity = ring;
    return c;
}

Request req(std::uint64_t id, std::int64_t deadline, std::int64_t arrival = 0, std::int64_t send = 0) {
    return Request{id, send, deadline, arrival, 0, 0};
}

void test_profile() {
    Profile p({1, 4, 8}, {10, 40, 60});
    CHECK(p.duration_ns(1) == 10);
    CHECK(p.duration_ns(2) == 20);
    CHECK(p.duration_ns(6) == 50);
    CHECK(p.duration_ns(10) == 70);  // extrapolates the last segment (5 ns per request)
    Profile q({4}, {100});
    CHECK(q.duration_ns(1) == 100);  // clamped below the first point
    CHECK(q.duration_ns(9) == 100);  // one point: constant
    bool threw = false;
    try { Profile bad({1, 1}, {1, 2}); } catch (const std::invalid_argument&) { threw = true; }
    CHECK(threw);
    threw = false;
    try { Profile bad({1, 2}, {5, 4}); } catch (const std::invalid_argument&) { threw = true; }
    CHECK(threw);
}

// Eq. 3b at the boundary: equal keeps, one ns above drops; the purge uses d(1).
void test_pard_boundary() {
    StageScheduler s(config(DropRule::kPard, Order::kLbf, 2));
    PublishedTerms t;
    t.downstream_ns = 30 * kMs;
    s.publish(t);
    // b = 2 after the purge -> threshold = 0 + 20 ms + 30 ms = 50 ms; purge threshold 40 ms.
    s.submit(req(0, 35 * kMs));      // purged: 35 < 40
    s.submit(req(1, 50 * kMs - 1));  // 1 ns short of the threshold: dropped at pop
    s.submit(req(2, 50 * kMs));      // exactly equal: kept
    s.submit(req(3, 60 * kMs));
    BatchResult out;
    s.form_batch(0, 0, out);
    CHECK(out.batch.size() == 2 && out.batch[0].id == 2 && out.batch[1].id == 3);
    CHECK(out.drops.size() == 2);
    CHECK(out.drops[0].request.id == 0 && out.drops[0].reason == Reason::kInfeasible);
    CHECK(out.drops[1].request.id == 1 && out.drops[1].reason == Reason::kInfeasible);
    CHECK(out.expected_duration_ns == 20 * kMs);
    CHECK(s.queued() == 0);
}

// purge(now, t_e): drain + the pard low-end purge at t_e (threshold t_e + d(1) + downstream), no
// batch formed; a later t_e drops more; other rules leave the queue alone (Triton #7512).
void test_purge() {
    StageScheduler s(config(DropRule::kPard, Order::kLbf, 2));
    PublishedTerms t;
    t.downstream_ns = 30 * kMs;
    s.publish(t);
    s.submit(req(0, 39 * kMs));  // t_e = 0: threshold 0 + 10 + 30 = 40 ms -> dropped
    s.submit(req(1, 40 * kMs));  // equal keeps
    s.submit(req(2, 70 * kMs));
    std::vector<Drop> drops;
    s.purge(0, 0, drops);
    CHECK(drops.size() == 1 && drops[0].request.id == 0 && drops[0].reason == Reason::kInfeasible);
    CHECK(s.queued() == 2);
    drops.clear();
    s.purge(5 * kMs, 20 * kMs, drops);  // threshold 60 ms: request 1 goes, request 2 stays
    CHECK(drops.size() == 1 && drops[0].request.id == 1);
    CHECK(s.queued() == 1);
    drops.clear();
    s.purge(50 * kMs, 10 * kMs, drops);  // t_e before now is taken as now: threshold 90 ms
    CHECK(drops.size() == 1 && drops[0].request.id == 2 && s.queued() == 0);
    drops.clear();
    s.submit(req(3, 1 * kMs));
    s.purge(0, 0, drops, [](std::uint64_t id) { return id == 3; });  // a cancelled copy keeps its reason
    CHECK(drops.size() == 1 && drops[0].reason == Reason::kCancelled);

    StageScheduler f(config(DropRule::kNone, Order::kFcfs, 2));
    f.submit(req(0, 1 * kMs));
    drops.clear();
    f.purge(0, 1000 * kMs, drops);
    CHECK(drops.empty() && f.queued() == 1);
}

// A copy whose request was cancelled (a sibling branch dropped) is discarded, whatever the rule.
void test_cancelled() {
    StageScheduler s(config(DropRule::kNone, Order::kFcfs, 4));
    for (std::uint64_t i = 0; i < 4; ++i) s.submit(req(i, 1000 * kMs, static_cast<std::int64_t>(i)));
    BatchResult out;
    s.form_batch(0, 0, out, [](std::uint64_t id) { return id == 1 || id == 2; });
    CHECK(out.batch.size() == 2 && out.batch[0].id == 0 && out.batch[1].id == 3);
    CHECK(out.drops.size() == 2 && out.drops[0].reason == Reason::kCancelled && out.drops[1].reason == Reason::kCancelled);
}

void test_hysteresis() {
    StageScheduler s(config(DropRule::kPard, Order::kAdaptive, 2));
    CHECK(s.current_order() == Order::kLbf);
    const double mus[] = {1.1, 1.25, 0.9, 0.79};
    const Order want[] = {Order::kLbf, Order::kHbf, Order::kHbf, Order::kLbf};
    for (int i = 0; i < 4; ++i) {
        PublishedTerms t;
        t.mu = mus[i];
        t.eps = 0.2;
        s.publish(t);
        CHECK(s.current_order() == want[i]);
    }
}

// Readers never see a torn snapshot: every field of one store derives from the same k.
void test_snapshot_consistency() {
    SnapshotCell cell;
    std::atomic<bool> stop{false};
    std::thread writer([&] {
        for (std::int64_t k = 1; k <= 20000; ++k) {
            PublishedTerms t;
            t.downstream_ns = k;
            t.mu = static_cast<double>(k);
            t.eps = static_cast<double>(k) * 2;
            t.queue_delay_ns = 3 * k;
            t.admit_fraction = 1.0 / static_cast<double>(k);
            cell.store(t);
        }
        stop.store(true);
    });
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r) {
        readers.emplace_back([&] {
            std::int64_t last = 0;
            while (!stop.load()) {
                const PublishedTerms t = cell.load();
                if (t.downstream_ns == 0) continue;  // before the first store
                const std::int64_t k = t.downstream_ns;
                CHECK(t.mu == static_cast<double>(k));
                CHECK(t.eps == static_cast<double>(k) * 2);
                CHECK(t.queue_delay_ns == 3 * k);
                CHECK(t.admit_fraction == 1.0 / static_cast<double>(k));
                CHECK(k >= last);  // a reader never goes back in time
                last = k;
            }
        });
    }
    writer.join();
    for (auto& th : readers) th.join();
    CHECK(cell.version() == 20000);
}

// Producers submit (retrying on back-pressure), workers form batches, a publisher flips the order:
// every request ends in exactly one batch or one drop; drops are exactly the infeasible ones.
void test_concurrent_stage() {
    constexpr int kProducers = 3;
    constexpr int kWorkers = 2;
    constexpr std::uint64_t kPerProducer = 20000;
    constexpr std::uint64_t kTotal = kProducers * kPerProducer;
    StageScheduler s(config(DropRule::kPard, Order::kAdaptive, 8, 256));
    std::unique_ptr<std::atomic<int>[]> seen(new std::atomic<int>[kTotal]);
    for (std::uint64_t i = 0; i < kTotal; ++i) seen[i].store(0);
    std::atomic<std::uint64_t> accounted{0};
    std::atomic<std::uint64_t> dropped{0};
    std::atomic<bool> producers_done{false};

    std::vector<std::thread> threads;
    for (int p = 0; p < kProducers; ++p) {
        threads.emplace_back([&, p] {
            for (std::uint64_t i = 0; i < kPerProducer; ++i) {
                const std::uint64_t id = static_cast<std::uint64_t>(p) * kPerProducer + i;
                // Every 4th request is infeasible whatever the batch: deadline below t_e + d(1).
                const std::int64_t dl = (id % 4 == 0) ? 5 * kMs : 10'000 * kMs;
                while (!s.submit(req(id, dl, static_cast<std::int64_t>(id)))) std::this_thread::yield();
            }
        });
    }
    for (int w = 0; w < kWorkers; ++w) {
        threads.emplace_back([&] {
            BatchResult out;
            for (;;) {
                s.form_batch(0, 0, out);
                for (const Request& r : out.batch) {
                    CHECK(r.id % 4 != 0);
                    CHECK(seen[r.id].fetch_add(1) == 0);
                }
                for (const Drop& d : out.drops) {
                    CHECK(d.request.id % 4 == 0 && d.reason == Reason::kInfeasible);
                    CHECK(seen[d.request.id].fetch_add(1) == 0);
                }
                accounted.fetch_add(out.batch.size() + out.drops.size());
                dropped.fetch_add(out.drops.size());
                if (producers_done.load() && accounted.load() == kTotal) break;
                if (out.batch.empty() && out.drops.empty()) std::this_thread::yield();
            }
        });
    }
    std::thread purger([&] {  // a purge timer racing the workers (StageScheduler::purge)
        std::vector<Drop> drops;
        while (accounted.load() < kTotal) {
            drops.clear();
            s.purge(0, 0, drops);
            for (const Drop& d : drops) {
                CHECK(d.request.id % 4 == 0 && d.reason == Reason::kInfeasible);
                CHECK(seen[d.request.id].fetch_add(1) == 0);
            }
            accounted.fetch_add(drops.size());
            dropped.fetch_add(drops.size());
            std::this_thread::yield();
        }
    });
    std::thread publisher([&] {
        for (int k = 0; accounted.load() < kTotal; ++k) {
            PublishedTerms t;
            t.mu = (k % 2 == 0) ? 2.0 : 0.5;  // flips HBF / LBF every publish
            t.eps = 0.1;
            s.publish(t);
            std::this_thread::yield();
        }
    });
    for (int p = 0; p < kProducers; ++p) threads[static_cast<std::size_t>(p)].join();
    producers_done.store(true);
    for (std::size_t i = kProducers; i < threads.size(); ++i) threads[i].join();
    publisher.join();
    purger.join();
    CHECK(accounted.load() == kTotal);
    CHECK(dropped.load() == kTotal / 4);
    for (std::uint64_t i = 0; i < kTotal; ++i) CHECK(seen[i].load() == 1);
    CHECK(s.queued() == 0);
}

// form_batch's small-queue fast path (submit_local, heap and ring empty: the buffer sorted and popped
// from its ends) against the plain path (submit: ring -> heap -> pops), for every rule and order, with
// key ties, cancelled ids, queues below and above kRunMax and leftovers carried into the heap: the
// same batches, drops and reasons, in the same order.
void test_small_queue_fast_path() {
    std::uint64_t x = 88172645463325252ull;  // xorshift64: a fixed, portable sequence
    auto next = [&x]() { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x; };
    const DropRule rules[] = {DropRule::kNone, DropRule::kClipper, DropRule::kDagor, DropRule::kTriton,
                              DropRule::kRayServe, DropRule::kPard, DropRule::kNexus};
    const Order orders[] = {Order::kFcfs, Order::kLbf, Order::kHbf};
    for (DropRule rule : rules) {
        for (Order order : orders) {
            StageScheduler fast(config(rule, order, 4, 4096));
            StageScheduler plain(config(rule, order, 4, 4096));
            auto cancelled = [](std::uint64_t id) { return id % 11 == 3; };
            std::uint64_t id = 0;
            std::int64_t now = 0;
            BatchResult a, b;
            for (int round = 0; round < 400; ++round) {
                const int n = next() % 16 == 0 ? 70 : static_cast<int>(next() % 8);  // sometimes above kRunMax (64)
                for (int i = 0; i < n; ++i) {
                    const std::int64_t arrival = now - static_cast<std::int64_t>(next() % 3) * kMs;  // ties
                    const std::int64_t deadline = now + static_cast<std::int64_t>(next() % 8) * 10 * kMs;
                    const Request r = req(id++ * 7 % 1000003, deadline, arrival, arrival - kMs);
                    CHECK(fast.submit_local(r));
                    CHECK(plain.submit(r));
                }
                const int forms = 1 + static_cast<int>(next() % 4);
                for (int f = 0; f < forms; ++f) {
                    const std::int64_t t_e = now + static_cast<std::int64_t>(next() % 20) * kMs;
                    fast.form_batch(now, t_e, a, cancelled);
                    plain.form_batch(now, t_e, b, cancelled);
                    CHECK(a.expected_duration_ns == b.expected_duration_ns);
                    CHECK(a.batch.size() == b.batch.size() && a.drops.size() == b.drops.size());
                    for (std::size_t i = 0; i < a.batch.size(); ++i) CHECK(a.batch[i].id == b.batch[i].id);
                    for (std::size_t i = 0; i < a.drops.size(); ++i) {
                        CHECK(a.drops[i].request.id == b.drops[i].request.id && a.drops[i].reason == b.drops[i].reason);
                    }
                    CHECK(fast.queued() == plain.queued());
                }
                now += static_cast<std::int64_t>(next() % 15) * kMs;
            }
        }
    }
}

}  // namespace

int main() {
    test_profile();
    test_pard_boundary();
    test_cancelled();
    test_purge();
    test_hysteresis();
    test_snapshot_consistency();
    test_concurrent_stage();
    test_small_queue_fast_path();
    std::puts("test_scheduler: ok");
    return 0;
}
