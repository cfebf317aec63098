// cpp/testing/ring_stress.hpp — (a test harness, not a public header) a checked many-producer many-consumer run of MpmcRing<uint64_t>.
//
// Used by the standalone C++ test (cpp/tests/test_ring.cpp, also under TSan/ASan) and by the
// binding pard._core.ring_stress, so that pytest reaches the same C++ threads. Producer p pushes
// items (p << kProducerShift) | s for s = 0 .. n-1 in order, retrying while the ring is full;
// consumers pop until every producer has finished and the ring is empty. Every consumer records
// what it received; after the threads join, the run checks that each item arrived exactly once and
// that each consumer saw each producer's sequence numbers in increasing order (FIFO per producer).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pard/mpmc_ring.hpp"

namespace pard {

struct RingStressResult {
    std::uint64_t expected = 0;         // producers * items_per_producer
    std::uint64_t received = 0;         // pops that succeeded, over all consumers
    std::uint64_t duplicates = 0;       // items received more than once (counted per extra copy)
    std::uint64_t missing = 0;          // items never received
    std::uint64_t out_of_range = 0;     // values no producer could have pushed
    std::uint64_t fifo_violations = 0;  // a consumer saw a producer's sequence number go backwards
    std::uint64_t seq_sum = 0;          // sum of the sequence numbers received
    std::uint64_t producer_sum = 0;     // sum of the producer indices received
    std::uint64_t full_retries = 0;     // try_push calls that found the ring full
    std::uint64_t empty_polls = 0;      // try_pop calls that found the ring empty
    double seconds = 0.0;               // wall time from start signal to last join
};

inline constexpr unsigned kProducerShift = 40;

inline RingStressResult ring_stress(unsigned producers, unsigned consumers,
                                    std::uint64_t items_per_producer, std::size_t capacity) {
    if (producers < 1 || producers > 256) {
        throw std::invalid_argument("ring_stress: 'producers' must be in [1, 256], got " +
                                    std::to_string(producers));
    }
    if (consumers < 1 || consumers > 256) {
        throw std::invalid_argument("ring_stress: 'consumers' must be in [1, 256], got " +
                                    std::to_string(consumers));
    }
    if (items_per_producer >= (std::uint64_t{1} << kProducerShift)) {
        throw std::invalid_argument("ring_stress: 'items_per_producer' must be below 2^40, got " +
                                    std::to_string(items_per_producer));
    }
    MpmcRing<std::uint64_t> ring(capacity);  // throws std::invalid_argument on a bad capacity

    std::atomic<bool> go{false};
    std::atomic<unsigned> producers_done{0};
    std::vector<std::vector<std::uint64_t>> got(consumers);
    std::vector<std::uint64_t> full_retries(producers, 0);
    std::vector<std::uint64_t> empty_polls(consumers, 0);
    const std::uint64_t total = std::uint64_t{producers} * items_per_producer;
    for (auto& g : got) g.reserve(static_cast<std::size_t>(total / consumers + 1024));

    std::vector<std::thread> threads;
    threads.reserve(producers + consumers);
    for (unsigned p = 0; p < producers; ++p) {
        threads.emplace_back([&, p] {
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            const std::uint64_t tag = std::uint64_t{p} << kProducerShift;
            std::uint64_t retries = 0;
            for (std::uint64_t s = 0; s < items_per_producer; ++s) {
                while (!ring.try_push(tag | s)) {
                    ++retries;
                    std::this_thread::yield();
                }
            }
            full_retries[p] = retries;
            producers_done.fetch_add(1, std::memory_order_release);
        });
    }
    for (unsigned c = 0; c < consumers; ++c) {
        threads.emplace_back([&, c] {
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            std::vector<std::uint64_t>& mine = got[c];
            std::uint64_t polls = 0;
            std::uint64_t item = 0;
            for (;;) {
                if (ring.try_pop(item)) {
                    mine.push_back(item);
                    continue;
                }
                ++polls;
                // Every push has completed once all producers are done; a failed pop after that
                // point means the ring is truly empty.
                if (producers_done.load(std::memory_order_acquire) == producers) {
                    if (ring.try_pop(item)) {
                        mine.push_back(item);
                        continue;
                    }
                    break;
                }
                std::this_thread::yield();
            }
            empty_polls[c] = polls;
        });
    }
    const auto t0 = std::chrono::steady_clock::now();
    go.store(true, std::memory_order_release);
    for (auto& t : threads) t.join();
    const auto t1 = std::chrono::steady_clock::now();

    RingStressResult r;
    r.expected = total;
    r.seconds = std::chrono::duration<double>(t1 - t0).count();
    std::vector<std::uint8_t> seen(static_cast<std::size_t>(total), 0);
    const std::uint64_t seq_mask = (std::uint64_t{1} << kProducerShift) - 1;
    for (const auto& mine : got) {
        std::vector<std::int64_t> last(producers, -1);
        for (std::uint64_t item : mine) {
            ++r.received;
            const std::uint64_t p = item >> kProducerShift;
            const std::uint64_t s = item & seq_mask;
            if (p >= producers || s >= items_per_producer) {
                ++r.out_of_range;
                continue;
            }
            r.seq_sum += s;
            r.producer_sum += p;
            if (static_cast<std::int64_t>(s) <= last[p]) ++r.fifo_violations;
            last[p] = static_cast<std::int64_t>(s);
            std::uint8_t& flag = seen[static_cast<std::size_t>(p * items_per_producer + s)];
            if (flag != 0) {
                ++r.duplicates;
            } else {
                flag = 1;
            }
        }
    }
    for (std::uint8_t flag : seen) r.missing += (flag == 0);
    for (std::uint64_t x : full_retries) r.full_retries += x;
    for (std::uint64_t x : empty_polls) r.empty_polls += x;
    return r;
}

}  // namespace pard
