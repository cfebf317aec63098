// Standalone test of the door's path walk (pard/door.hpp) on hand-built stages: an admission that
// would push the request with the least budget queued at an HBF stage past its deadline is refused,
// by the stage's own rule and by the walk's exit; under LBF the same queue admits.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "pard/door.hpp"
#include "pard/profile.hpp"
#include "pard/snapshot.hpp"
#include "pard/stage_scheduler.hpp"
#include "check.hpp"

using namespace pard;

namespace {

constexpr std::int64_t kMs = 1'000'000;
constexpr auto kRefused = static_cast<std::int64_t>(kFinishCapNs);

StageConfig config(Order order) {
    StageConfig c;
    c.profile = Profile({1, 4}, {10 * kMs, 40 * kMs});  // d(b) = 10 ms * b
    c.max_batch = 4;
    c.policy.drop = DropRule::kPard;
    c.policy.order = order;
    return c;
}

// A stage draining `rate` req/s with `downstream` published below it, holding one request per deadline.
void fill(StageScheduler& s, double rate, std::int64_t downstream, const std::vector<std::int64_t>& deadlines) {
    PublishedTerms t;
    t.downstream_ns = downstream;
    t.service_rate = rate;
    s.publish(t);
    std::uint64_t id = 0;
    for (const std::int64_t d : deadlines) s.submit(Request{id++, 0, d, 0, 0, 0});
    std::vector<Drop> drops;
    s.purge(0, 0, drops);  // into the heap (the deadlines here all survive the purge)
    CHECK(drops.empty() && s.queued() == deadlines.size());
}

// One stage, four queued at 100 req/s with 30 ms published below. A new request pops them one place
// later: the least-budget one pops after (4 + 1) / 100 s = 50 ms, runs d(4) = 40 ms, then 30 ms below:
// 120 ms. Under HBF a deadline of 100 ms refuses, 130 ms admits (exit 4 / 100 s + d(4) = 80 ms); under
// LBF the new request queues behind them and 100 ms admits.
void test_single_stage() {
    const std::vector<int> none;
    for (const std::int64_t urgent : {100 * kMs, 130 * kMs}) {
        StageScheduler hbf(config(Order::kHbf));
        fill(hbf, 100.0, 30 * kMs, {urgent, 500 * kMs, 500 * kMs, 500 * kMs});
        const std::vector<DoorStage> stages{DoorStage{&hbf, 100.0, &none}};
        const std::int64_t got = door_path_finish_ns(stages, 0, 0);
        CHECK(urgent == 100 * kMs ? got == kRefused : got == 80 * kMs);
    }
    StageScheduler lbf(config(Order::kLbf));
    fill(lbf, 100.0, 30 * kMs, {100 * kMs, 500 * kMs, 500 * kMs, 500 * kMs});
    const std::vector<DoorStage> stages{DoorStage{&lbf, 100.0, &none}};
    CHECK(door_path_finish_ns(stages, 0, 0) == 80 * kMs);
}

// Two stages. The entry pops HBF and holds one request (deadline 100 ms) with nothing published below
// it (downstream 0: by its own rule it pops after 20 ms and leaves at 40 ms, in time). Below it, twenty
// wait at 100 req/s: the new request, and the one it overtakes, leave the pipeline no sooner than the
// walk's exit, max(30 ms, 21 / 100 s) + d(4) = 250 ms, past 100 ms: refused. With the entry LBF the
// walk's exit is the answer.
void test_backlog_below_an_hbf_entry() {
    const std::vector<int> to_second{1};
    const std::vector<int> none;
    for (const Order order : {Order::kHbf, Order::kLbf}) {
        StageScheduler entry(config(order));
        StageScheduler below(config(Order::kLbf));
        fill(entry, 100.0, 0, {100 * kMs});
        fill(below, 100.0, 0, std::vector<std::int64_t>(20, 1000 * kMs));
        const std::vector<DoorStage> stages{DoorStage{&entry, 100.0, &to_second}, DoorStage{&below, 100.0, &none}};
        const std::int64_t got = door_path_finish_ns(stages, 0, 0);
        CHECK(order == Order::kHbf ? got == kRefused : got == 250 * kMs);
    }
}

// Requests admitted but not yet queued (in_front) count ahead like queued ones: with three in front of
// the four queued, the walk's exit is 7 / 100 s + d(4) = 110 ms.
void test_in_front() {
    const std::vector<int> none;
    StageScheduler s(config(Order::kLbf));
    fill(s, 100.0, 0, {500 * kMs, 500 * kMs, 500 * kMs, 500 * kMs});
    const std::vector<DoorStage> stages{DoorStage{&s, 100.0, &none}};
    CHECK(door_path_finish_ns(stages, 0, 0, 3) == 110 * kMs);
}

}  // namespace

int main() {
    test_single_stage();
    test_backlog_below_an_hbf_entry();
    test_in_front();
    std::puts("test_door: ok");
    return 0;
}
