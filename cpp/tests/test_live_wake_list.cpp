// WakeList (src/live_wake_list.hpp), the hand-off of finished requests to an event loop, without
// Python: the single-thread contract (who is told to wake, what take and lost return), item
// lifetimes, and a many-producer run against a consumer that takes only when woken, as the loop
// does. Oracles: every item leaves exactly once, in order per producer; the consumer, woken only
// when a push asks for it, ends with nothing stranded (a stranded item would hang the run, so it
// is bounded by a timeout); and wake-ups never outnumber takes by more than one.
// N per producer defaults to 200 000 (20 000 under TSan); argv[1] overrides.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

// The header lives with the bindings (it has no Python in it); the tests reach it by path.
#include "../../src/live_wake_list.hpp"

#include "check.hpp"
#include "sanitizer.hpp"

using pard::bind::WakeList;

namespace {

// Counts constructions and destructions (items are built and destroyed on several threads).
struct Counted {
    static inline std::atomic<long> constructed{0};
    static inline std::atomic<long> destroyed{0};
    std::uint64_t v = 0;
    explicit Counted(std::uint64_t x) noexcept : v(x) { constructed.fetch_add(1, std::memory_order_relaxed); }
    Counted(const Counted& o) noexcept : v(o.v) { constructed.fetch_add(1, std::memory_order_relaxed); }
    Counted(Counted&& o) noexcept : v(o.v) { constructed.fetch_add(1, std::memory_order_relaxed); }
    Counted& operator=(const Counted&) noexcept = default;
    Counted& operator=(Counted&&) noexcept = default;
    ~Counted() { destroyed.fetch_add(1, std::memory_order_relaxed); }
    static long live() { return constructed.load() - destroyed.load(); }
};

// One thread: only the push that arms the list is told to wake; take and lost empty it and disarm.
void single_thread_contract() {
    WakeList<int> w;
    std::vector<int> out{42};
    w.take(out);  // spurious: empty, and `out` is cleared
    CHECK(out.empty());
    CHECK(w.push(1));
    CHECK(!w.push(2));
    CHECK(!w.push(3));
    CHECK(w.size() == 3);
    w.take(out);
    CHECK((out == std::vector<int>{1, 2, 3}));
    CHECK(w.size() == 0);
    CHECK(w.push(4));  // disarmed by the take: the next push wakes again
    CHECK(!w.push(5));
    w.lost(out);  // the wake-up went nowhere: what waited comes back, and the list disarms
    CHECK((out == std::vector<int>{4, 5}));
    CHECK(w.push(6));
    int seen = 0;
    w.for_each([&](const int& x) { seen += x; });
    CHECK(seen == 6);
}

// Every item pushed is destroyed exactly once: by whoever took it, or with the list.
void element_lifetimes() {
    Counted::constructed = 0;
    Counted::destroyed = 0;
    {
        WakeList<Counted> w;
        for (std::uint64_t i = 0; i < 100; ++i) (void)w.push(Counted(i));
        std::vector<Counted> out;
        w.take(out);
        CHECK(out.size() == 100 && Counted::live() == 100);
        out.clear();
        CHECK(Counted::live() == 0);
        for (std::uint64_t i = 0; i < 10; ++i) (void)w.push(Counted(i));
        CHECK(Counted::live() == 10);
    }
    CHECK(Counted::live() == 0);
}

// P producers, one consumer that drains only when a push asked it to, as an event loop does.
void producers_and_a_woken_consumer(std::uint64_t per) {
    constexpr int kProducers = 4;
    WakeList<std::uint64_t> w;
    std::mutex mu;
    std::condition_variable cv;
    long wakes = 0;  // asked for and not yet consumed (under mu)
    std::atomic<long> asked{0};
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
        producers.emplace_back([&, p] {
            for (std::uint64_t i = 0; i < per; ++i) {
                if (w.push((static_cast<std::uint64_t>(p) << 40) | i)) {
                    asked.fetch_add(1, std::memory_order_relaxed);
                    std::lock_guard<std::mutex> lock(mu);
                    ++wakes;
                    cv.notify_one();
                }
            }
        });
    }
    std::vector<std::uint64_t> next(kProducers, 0);
    const std::uint64_t total = per * kProducers;
    std::uint64_t got = 0;
    long takes = 0;
    std::vector<std::uint64_t> batch;
    while (got < total) {
        {
            std::unique_lock<std::mutex> lock(mu);
            // 60 s without a wake-up while items are missing: one was stranded
            const bool woken = cv.wait_for(lock, std::chrono::seconds(60), [&] { return wakes > 0; });
            if (!woken) {
                std::fprintf(stderr, "stranded: %llu of %llu items arrived, %zu waiting unannounced\n",
                             static_cast<unsigned long long>(got), static_cast<unsigned long long>(total), w.size());
                std::abort();
            }
            --wakes;
        }
        w.take(batch);
        ++takes;
        for (std::uint64_t x : batch) {
            const auto p = static_cast<std::size_t>(x >> 40);
            CHECK(p < next.size());
            CHECK((x & ((std::uint64_t{1} << 40) - 1)) == next[p]);  // exactly once, in order per producer
            ++next[p];
            ++got;
        }
    }
    for (auto& t : producers) t.join();
    CHECK(got == total);
    CHECK(w.size() == 0);
    CHECK(asked.load() <= takes + 1);  // at most one wake-up outstanding at any time
    std::printf("  %llu items, %ld wake-ups (%.1f items per wake-up)\n", static_cast<unsigned long long>(total),
                asked.load(), static_cast<double>(total) / static_cast<double>(asked.load()));
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t per = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (pard::kTsan ? 20000 : 200000);
    single_thread_contract();
    element_lifetimes();
    producers_and_a_woken_consumer(per);
    std::printf("test_live_wake_list: ok\n");
    return 0;
}
