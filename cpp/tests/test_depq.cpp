// Standalone test of pard::MinMaxHeap against a std::multiset oracle (plain checks that abort in
// every build type, so the sanitizer and release builds check the same things).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <random>
#include <set>
#include <vector>

#include "pard/depq.hpp"
#include "pard/request.hpp"

#include "check.hpp"

namespace {

// Counts live objects, to show the heap neither leaks nor double-destroys its elements.
struct Tracked {
    static inline long live = 0;
    int key = 0;
    explicit Tracked(int k) : key(k) { ++live; }
    Tracked(const Tracked& o) : key(o.key) { ++live; }
    Tracked(Tracked&& o) noexcept : key(o.key) { ++live; }
    Tracked& operator=(const Tracked&) = default;
    Tracked& operator=(Tracked&&) noexcept = default;
    ~Tracked() { --live; }
    bool operator<(const Tracked& o) const { return key < o.key; }
};

// Random push / pop_min / pop_max / drain against a multiset, with few distinct keys so that
// duplicates are common; checks both peeks and the heap invariant as it goes.
void random_ops_vs_multiset(std::uint32_t seed, int ops, int key_range) {
    std::mt19937 rng(seed);
    pard::MinMaxHeap<int> heap;
    std::multiset<int> oracle;
    std::uniform_int_distribution<int> key(0, key_range);
    std::uniform_int_distribution<int> op(0, 9);
    for (int step = 0; step < ops; ++step) {
        const int o = op(rng);
        if (o < 5 || oracle.empty()) {
            const int k = key(rng);
            heap.push(k);
            oracle.insert(k);
        } else if (o < 7) {
            CHECK(heap.pop_min() == *oracle.begin());
            oracle.erase(oracle.begin());
        } else if (o < 9) {
            CHECK(heap.pop_max() == *std::prev(oracle.end()));
            oracle.erase(std::prev(oracle.end()));
        } else {
            const int threshold = key(rng) / 4;
            std::vector<int> got = heap.drain_min_while([&](int x) { return x < threshold; });
            std::vector<int> want(oracle.begin(), oracle.lower_bound(threshold));
            oracle.erase(oracle.begin(), oracle.lower_bound(threshold));
            CHECK(got == want);
        }
        CHECK(heap.size() == oracle.size());
        if (!oracle.empty()) {
            CHECK(heap.min() == *oracle.begin());
            CHECK(heap.max() == *std::prev(oracle.end()));
        }
        if (step % 97 == 0) CHECK(heap.check_invariants());
    }
    CHECK(heap.check_invariants());
    // Pops from alternating ends empty it in order.
    while (!oracle.empty()) {
        CHECK(heap.pop_max() == *std::prev(oracle.end()));
        oracle.erase(std::prev(oracle.end()));
        if (oracle.empty()) break;
        CHECK(heap.pop_min() == *oracle.begin());
        oracle.erase(oracle.begin());
    }
    CHECK(heap.empty());
}

// Requests order by (deadline, id): equal deadlines come out by id at both ends.
void requests_by_deadline_then_id() {
    pard::RequestDepq q;
    q.reserve(64);
    for (std::uint64_t id = 0; id < 40; ++id) {
        pard::Request r{id, 0, static_cast<std::int64_t>(id % 4) * 1000, 0, 0, 0};
        q.push(r);
    }
    CHECK(q.size() == 40);
    CHECK(q.min().deadline_ns == 0 && q.min().id == 0);
    CHECK(q.max().deadline_ns == 3000 && q.max().id == 39);
    std::uint64_t expect_id = 0;
    std::size_t n = q.drain_min_while(
        [](const pard::Request& r) { return r.deadline_ns < 1000; },
        [&](pard::Request&& r) {
            CHECK(r.deadline_ns == 0 && r.id == expect_id);
            expect_id += 4;
        });
    CHECK(n == 10);
    pard::Request top = q.pop_max();
    CHECK(top.id == 39);
    top = q.pop_max();
    CHECK(top.id == 35);
    // erase_if: cancel every odd id; the rest must still come out in order.
    std::size_t cancelled = q.erase_if([](const pard::Request& r) { return r.id % 2 == 1; },
                                       [](pard::Request&&) {});
    CHECK(cancelled == 18);  // odd ids: 10 with deadline 1000, 10 with 3000, minus the popped 39, 35
    CHECK(q.check_invariants());
    pard::Request prev = q.pop_min();
    while (!q.empty()) {
        pard::Request cur = q.pop_min();
        CHECK(pard::ByDeadline{}(prev, cur));
        CHECK(cur.id % 2 == 0);
        prev = cur;
    }
}

// assign() builds a valid heap in O(n) from arbitrary input.
void assign_builds_heap(std::uint32_t seed) {
    std::mt19937 rng(seed);
    for (int n = 0; n < 300; n += 7) {
        std::vector<int> v(static_cast<std::size_t>(n));
        for (int& x : v) x = static_cast<int>(rng() % 50);
        pard::MinMaxHeap<int> h;
        h.assign(v.begin(), v.end());
        CHECK(h.check_invariants());
        std::multiset<int> oracle(v.begin(), v.end());
        while (!oracle.empty()) {
            CHECK(h.pop_min() == *oracle.begin());
            oracle.erase(oracle.begin());
        }
    }
}

// Elements are constructed and destroyed in balance through every operation.
void no_leaks_with_tracked_type() {
    {
        pard::MinMaxHeap<Tracked> h;
        for (int i = 0; i < 500; ++i) h.push(Tracked((i * 37) % 101));
        CHECK(Tracked::live == 500);
        for (int i = 0; i < 100; ++i) {
            Tracked a = h.pop_min();
            Tracked b = h.pop_max();
            CHECK(a.key <= b.key);
        }
        CHECK(Tracked::live == 300);
        h.drain_min_while([](const Tracked& t) { return t.key < 50; }, [](Tracked&&) {});
        h.erase_if([](const Tracked& t) { return t.key % 2 == 0; }, [](Tracked&&) {});
        CHECK(static_cast<long>(h.size()) == Tracked::live);
        h.clear();
        CHECK(Tracked::live == 0);
        for (int i = 0; i < 10; ++i) h.push(Tracked(i));
    }
    CHECK(Tracked::live == 0);
}

}  // namespace

int main() {
    random_ops_vs_multiset(1, 200000, 1000);
    random_ops_vs_multiset(2, 100000, 5);     // heavy duplicates
    random_ops_vs_multiset(3, 50000, 100000);  // nearly distinct keys
    requests_by_deadline_then_id();
    assign_builds_heap(4);
    no_leaks_with_tracked_type();
    std::puts("test_depq: ok");
    return 0;
}
