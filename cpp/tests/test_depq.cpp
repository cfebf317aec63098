// Standalone test of pard::MinMaxHeap against a std::multiset oracle (plain checks that abort in
// every build type, so the sanitizer and release builds check the same things).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <random>
#include <set>
#include <type_traits>
#include <utility>
#include <vector>

#include "pard/depq.hpp"
#include "pard/request.hpp"
#include "pard/stage_scheduler.hpp"

#include "check.hpp"

namespace {

// The layout each element type gets, and the noexcept the header promises, checked at compile time.
static_assert(pard::RequestDepq::uses_slab, "48-byte Requests with a split key live in the slab");
static_assert(pard::MinMaxHeap<pard::Request, pard::ByArrival>::uses_slab, "ByArrival is a split key too");
static_assert(pard::MinMaxHeap<pard::Request, pard::StageKeyLess>::uses_slab, "the stage queue uses the slab");
static_assert(!pard::MinMaxHeap<int>::uses_slab, "small elements stay in the heap array");
static_assert(noexcept(std::declval<pard::RequestDepq&>().pop_min()) &&
                  noexcept(std::declval<pard::RequestDepq&>().pop_max()) &&
                  noexcept(std::declval<const pard::RequestDepq&>().max()),
              "pops and peeks of the stage queue are noexcept");

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

// The oracle's order for Requests: the heap's Less, as a multiset comparator.
template <class Less>
using RequestSet = std::multiset<pard::Request, Less>;

bool same(const pard::Request& a, const pard::Request& b) {
    return a.id == b.id && a.send_ns == b.send_ns && a.deadline_ns == b.deadline_ns && a.arrival_ns == b.arrival_ns &&
           a.tier == b.tier && a.compute_ns == b.compute_ns;
}

// The slab layout against a multiset: unique ids, few distinct keys (so most comparisons are
// ties resolved through the slab), every field of every popped Request intact, and the heap's
// view (begin/end) always holding exactly the oracle's elements.
template <class Less>
void slab_random_ops_vs_multiset(Less less, std::uint32_t seed, int ops, int key_range) {
    std::mt19937 rng(seed);
    pard::MinMaxHeap<pard::Request, Less> heap(less);
    RequestSet<Less> oracle(less);
    std::uniform_int_distribution<int> key(0, key_range);
    std::uniform_int_distribution<int> op(0, 11);
    std::uint64_t next_id = 0;
    auto fresh = [&] {
        const std::uint64_t id = next_id++;
        const auto k = static_cast<std::int64_t>(key(rng));
        // Both orders' keys are drawn; the other fields tag the request so a mix-up shows.
        return pard::Request{id, static_cast<std::int64_t>(id * 3), k, static_cast<std::int64_t>(key(rng)),
                             static_cast<std::int32_t>(id % 5), static_cast<std::int64_t>(id * 7)};
    };
    for (int step = 0; step < ops; ++step) {
        const int o = op(rng);
        if (o < 5 || oracle.empty()) {
            const pard::Request r = fresh();
            heap.push(r);
            oracle.insert(r);
        } else if (o < 7) {
            CHECK(same(heap.pop_min(), *oracle.begin()));
            oracle.erase(oracle.begin());
        } else if (o < 9) {
            CHECK(same(heap.pop_max(), *std::prev(oracle.end())));
            oracle.erase(std::prev(oracle.end()));
        } else if (o == 9) {
            const std::size_t k = oracle.size() / 4;
            std::size_t seen = 0;
            heap.drain_max_while([&](const pard::Request&) { return seen < k; },
                                 [&](pard::Request&& r) {
                                     CHECK(same(r, *std::prev(oracle.end())));
                                     oracle.erase(std::prev(oracle.end()));
                                     ++seen;
                                 });
            CHECK(seen == k);
        } else if (o == 10) {
            const std::uint64_t m = 2 + static_cast<std::uint64_t>(rng() % 5);
            std::size_t want = 0;
            for (auto it = oracle.begin(); it != oracle.end();) {
                if (it->id % m == 0) {
                    it = oracle.erase(it);
                    ++want;
                } else {
                    ++it;
                }
            }
            std::size_t got = 0;
            const std::size_t removed = heap.erase_if([m](const pard::Request& r) { return r.id % m == 0; },
                                                      [&](pard::Request&& r) {
                                                          CHECK(r.id % m == 0);
                                                          ++got;
                                                      });
            CHECK(removed == want && got == want);
        } else {
            // Push a burst with one shared key (a batch arriving at once), then interleave pops.
            const auto k = static_cast<std::int64_t>(key(rng));
            for (int j = 0; j < 16; ++j) {
                pard::Request r = fresh();
                r.deadline_ns = k;
                r.arrival_ns = k;
                heap.push(r);
                oracle.insert(r);
            }
        }
        CHECK(heap.size() == oracle.size());
        if (!oracle.empty()) {
            CHECK(same(heap.min(), *oracle.begin()));
            CHECK(same(heap.max(), *std::prev(oracle.end())));
        }
        if (step % 211 == 0) {
            CHECK(heap.check_invariants());
            RequestSet<Less> view(heap.begin(), heap.end(), less);
            CHECK(view.size() == oracle.size());
            CHECK(std::equal(view.begin(), view.end(), oracle.begin(), same));
        }
    }
    CHECK(heap.check_invariants());
    // assign() rebuilds from arbitrary order; then everything comes out in order.
    std::vector<pard::Request> all(oracle.rbegin(), oracle.rend());
    heap.assign(all.begin(), all.end());
    CHECK(heap.check_invariants());
    while (!oracle.empty()) {
        CHECK(same(heap.pop_min(), *oracle.begin()));
        oracle.erase(oracle.begin());
    }
    CHECK(heap.empty() && heap.check_invariants());
}

// Copies of a slab heap are independent and pop the same sequence; a moved-from heap is empty and
// usable; clear() keeps it usable.
void slab_copy_move_clear() {
    pard::RequestDepq a;
    for (std::uint64_t id = 0; id < 300; ++id) a.push(pard::Request{id, 0, static_cast<std::int64_t>((id * 37) % 11), 0, 0, 0});
    for (int i = 0; i < 50; ++i) (void)a.pop_min();  // leaves free slots behind
    pard::RequestDepq b = a;
    CHECK(b.check_invariants() && b.size() == 250);
    for (std::uint64_t id = 300; id < 400; ++id) b.push(pard::Request{id, 0, 5, 0, 0, 0});
    CHECK(a.size() == 250 && b.size() == 350);
    pard::RequestDepq c = std::move(a);
    CHECK(a.empty() && a.check_invariants());  // NOLINT(bugprone-use-after-move): the moved-from state is part of the contract
    a.push(pard::Request{999, 0, 1, 0, 0, 0});
    CHECK(a.size() == 1 && a.pop_max().id == 999);
    pard::RequestDepq d;
    d = c;
    while (!c.empty()) CHECK(same(c.pop_max(), d.pop_max()));
    CHECK(d.empty());
    b.clear();
    CHECK(b.empty() && b.check_invariants());
    b.push(pard::Request{1, 0, 2, 0, 0, 0});
    CHECK(b.min().id == 1 && b.max().id == 1);
}

// rekey: the same elements under a new order (the stage queue's switch to the coherent rank and back),
// checked against a std::multiset oracle for each order, with pops from both ends in between.
void rekey_keeps_every_element(unsigned seed) {
    std::mt19937_64 rng(seed);
    const pard::StageKeyLess by_deadline{false, false}, by_rank{false, true};
    pard::MinMaxHeap<pard::Request, pard::StageKeyLess> heap(by_deadline);
    std::vector<pard::Request> all, scratch;
    for (std::uint64_t id = 0; id < 3000; ++id) {
        all.push_back(pard::Request{id, 0, static_cast<std::int64_t>(rng() % 500), 0, 0, 0});
        heap.push(all.back());
    }
    bool ranked = false;
    for (int round = 0; round < 6; ++round) {
        ranked = !ranked;
        heap.rekey(ranked ? by_rank : by_deadline, scratch);
        CHECK(heap.check_invariants());
        const pard::StageKeyLess less = ranked ? by_rank : by_deadline;
        std::multiset<pard::Request, pard::StageKeyLess> oracle(heap.begin(), heap.end(), less);
        CHECK(oracle.size() == heap.size());
        for (int k = 0; k < 100; ++k) {  // pops in the new order match the oracle's ends
            const pard::Request lo = heap.pop_min(), hi = heap.pop_max();
            CHECK(lo.id == oracle.begin()->id && hi.id == std::prev(oracle.end())->id);
            oracle.erase(oracle.begin());
            oracle.erase(std::prev(oracle.end()));
        }
    }
    CHECK(heap.size() == all.size() - 6 * 200);
}

}  // namespace

int main() {
    random_ops_vs_multiset(1, 200000, 1000);
    random_ops_vs_multiset(2, 100000, 5);     // heavy duplicates
    random_ops_vs_multiset(3, 50000, 100000);  // nearly distinct keys
    requests_by_deadline_then_id();
    assign_builds_heap(4);
    no_leaks_with_tracked_type();
    slab_random_ops_vs_multiset(pard::ByDeadline{}, 5, 60000, 50);
    slab_random_ops_vs_multiset(pard::ByDeadline{}, 6, 30000, 2);        // almost every comparison a tie
    slab_random_ops_vs_multiset(pard::ByArrival{}, 7, 30000, 1000000);
    slab_random_ops_vs_multiset(pard::StageKeyLess{true}, 8, 30000, 20);
    slab_random_ops_vs_multiset(pard::StageKeyLess{false}, 9, 30000, 20);
    slab_copy_move_clear();
    slab_random_ops_vs_multiset(pard::StageKeyLess{false, true}, 10, 30000, 20);  // the coherent rank
    rekey_keeps_every_element(11);
    std::puts("test_depq: ok");
    return 0;
}
