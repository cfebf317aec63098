// Standalone test of pard::MpmcRing: contract (capacity, full, empty), element lifetimes, and a
// many-producer many-consumer run checked against closed forms. Plain checks that abort in every
// build type; run under TSan and ASan+UBSan by .ci/run.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#include "pard/mpmc_ring.hpp"
#include "pard/request.hpp"
#include "../testing/ring_stress.hpp"

#include "check.hpp"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

namespace {

// Counts constructions and destructions (atomically: items are built and destroyed on many threads).
struct Counted {
    static inline std::atomic<long> constructed{0};
    static inline std::atomic<long> destroyed{0};
    std::uint64_t v = 0;
    Counted() noexcept { constructed.fetch_add(1, std::memory_order_relaxed); }
    explicit Counted(std::uint64_t x) noexcept : v(x) { constructed.fetch_add(1, std::memory_order_relaxed); }
    Counted(const Counted& o) noexcept : v(o.v) { constructed.fetch_add(1, std::memory_order_relaxed); }
    Counted(Counted&& o) noexcept : v(o.v) { constructed.fetch_add(1, std::memory_order_relaxed); }
    Counted& operator=(const Counted&) noexcept = default;
    Counted& operator=(Counted&&) noexcept = default;
    ~Counted() { destroyed.fetch_add(1, std::memory_order_relaxed); }
    static long live() { return constructed.load() - destroyed.load(); }
};

void capacity_must_be_power_of_two() {
    for (std::size_t bad : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{6}, std::size_t{1000}}) {
        bool threw = false;
        try {
            pard::MpmcRing<int> r(bad);
        } catch (const std::invalid_argument&) {
            threw = true;
        }
        CHECK(threw);
    }
    pard::MpmcRing<int> ok(2);
    CHECK(ok.capacity() == 2);
}

// One thread: FIFO order, full and empty reported without side effects, many laps of wraparound.
void single_thread_contract() {
    pard::MpmcRing<std::uint64_t> r(8);
    std::uint64_t out = 12345;
    CHECK(!r.try_pop(out));
    CHECK(out == 12345);
    CHECK(r.size_approx() == 0);
    for (std::uint64_t i = 0; i < 8; ++i) CHECK(r.try_push(i));
    CHECK(!r.try_push(99));
    CHECK(r.size_approx() == 8);
    for (std::uint64_t i = 0; i < 8; ++i) {
        CHECK(r.try_pop(out));
        CHECK(out == i);
    }
    CHECK(!r.try_pop(out));
    // 1000 laps with the fill level varying between 1 and 8.
    std::uint64_t next_in = 0, next_out = 0;
    for (int lap = 0; lap < 1000; ++lap) {
        const std::uint64_t k = 1 + static_cast<std::uint64_t>(lap) % 8;
        for (std::uint64_t i = 0; i < k; ++i) CHECK(r.try_push(next_in++));
        CHECK(r.size_approx() == k);
        for (std::uint64_t i = 0; i < k; ++i) {
            CHECK(r.try_pop(out));
            CHECK(out == next_out++);
        }
    }
    // Requests travel by value.
    pard::MpmcRing<pard::Request> rq(4);
    CHECK(rq.try_push(pard::Request{7, 1, 2, 3, 4, 5}));
    pard::Request got{};
    CHECK(rq.try_pop(got));
    CHECK(got.id == 7 && got.send_ns == 1 && got.deadline_ns == 2 && got.arrival_ns == 3 && got.tier == 4 &&
          got.compute_ns == 5);
}

// Every item constructed in a slot is destroyed exactly once: by its pop or by the destructor.
void element_lifetimes() {
    Counted::constructed = 0;
    Counted::destroyed = 0;
    {
        pard::MpmcRing<Counted> r(16);
        const Counted proto(1);
        for (int i = 0; i < 10; ++i) CHECK(r.try_push(proto));
        CHECK(Counted::live() == 11);  // proto + 10 in slots
        Counted out;
        for (int i = 0; i < 4; ++i) CHECK(r.try_pop(out));
        CHECK(Counted::live() == 8);  // proto + out + 6 in slots
        for (int i = 0; i < 10; ++i) CHECK(r.try_push(proto));
        CHECK(!r.try_push(proto));  // full: no copy made
        CHECK(Counted::live() == 18);
    }
    CHECK(Counted::live() == 0);

    // Across threads: 4 producers x 4 consumers; everything balanced at the end.
    Counted::constructed = 0;
    Counted::destroyed = 0;
    {
        pard::MpmcRing<Counted> r(64);
        const int per = kSanitized ? 5000 : 50000;
        std::atomic<int> popped{0};
        std::vector<std::thread> ts;
        for (int p = 0; p < 4; ++p) {
            ts.emplace_back([&] {
                for (int i = 0; i < per; ++i) {
                    const Counted c(static_cast<std::uint64_t>(i));
                    while (!r.try_push(c)) std::this_thread::yield();
                }
            });
        }
        for (int c = 0; c < 4; ++c) {
            ts.emplace_back([&] {
                Counted out;
                while (popped.load() < 4 * per) {
                    if (r.try_pop(out)) {
                        popped.fetch_add(1);
                    } else {
                        std::this_thread::yield();
                    }
                }
            });
        }
        for (auto& t : ts) t.join();
        CHECK(popped.load() == 4 * per);
        CHECK(r.size_approx() == 0);
    }
    CHECK(Counted::live() == 0);
}

// P x C stress: exactly once, per-producer FIFO per consumer, sums equal the closed forms.
void stress(unsigned producers, unsigned consumers, std::uint64_t total, std::size_t capacity) {
    const std::uint64_t n = total / producers;
    const pard::RingStressResult r = pard::ring_stress(producers, consumers, n, capacity);
    const std::uint64_t P = producers;
    CHECK(r.expected == P * n);
    CHECK(r.received == P * n);
    CHECK(r.duplicates == 0);
    CHECK(r.missing == 0);
    CHECK(r.out_of_range == 0);
    CHECK(r.fifo_violations == 0);
    CHECK(r.seq_sum == P * (n * (n - 1) / 2));
    CHECK(r.producer_sum == n * (P * (P - 1) / 2));
    std::printf("  P=%u C=%u items=%llu cap=%zu: %.3f s, %.1f M items/s\n", producers, consumers,
                static_cast<unsigned long long>(r.received), capacity, r.seconds,
                static_cast<double>(r.received) / r.seconds / 1e6);
}

}  // namespace

int main() {
    capacity_must_be_power_of_two();
    single_thread_contract();
    element_lifetimes();
    const std::uint64_t total = kSanitized ? 200000 : 1000000;
    for (unsigned p : {1U, 2U, 4U}) {
        for (unsigned c : {1U, 2U, 4U}) stress(p, c, total, 1024);
    }
    stress(4, 4, total / 4, 2);  // tiny ring: constant full/empty transitions and wraparound
    std::puts("test_ring: ok");
    return 0;
}
