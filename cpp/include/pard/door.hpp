// pard/door.hpp — the door test: when could a request arriving now at an entry stage leave the
// pipeline? (DESIGN §3.2 applied at arrival.)
//
// A server decides at its door, before it reads or decodes a request's body, whether the pipeline
// can finish the request by its deadline. Reading and decoding cost the front more than the refusal,
// and under overload most of what arrives would be dropped at the entry anyway, after the front has
// spent on it. The estimate is the entry stage's own drop rule (paper Eq. 3b) taken at arrival, with
// the queue ahead of the request as its wait:
//
//   finish = now + n / R + d_k(min(n + 1, B)) + downstream
//
//   n           the requests that pop before it in the stage's order now (queued_ahead: a lighter tier
//               waits behind the heavier ones the stage serves first);
//   R           the stage's published service rate (requests/s at full batches with its serving
//               workers), or its profiled capacity before the planner has published one;
//   d_k(b)      the stage's expected batch duration (profile times the measured duration ratio);
//   downstream  the downstream term of the stage's pop rule now (door_downstream_ns): the published
//               one (Σq + Σd + w along its worst path), raised while the stage is overloaded.
//
// The wait n / R is the fluid time to work off what is ahead; it neither credits the batch already
// running nor charges a partly filled batch, so it errs by about one batch either way, and the entry's
// own rule stays in force behind the door. Reads only relaxed sizes and the published snapshot: no
// lock, safe from any thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "pard/stage_scheduler.hpp"

namespace pard {

// A finish past this (ns: about 127 years) is reported as this: never feasible, never an overflow.
inline constexpr double kFinishCapNs = 4.0e18;

// The downstream term the stage's pop rule applies now: the published one, raised to overload_downstream
// (pard-upper's Σq + 2Σd) while the stage's overload test holds (StageScheduler step 2b). The door admits
// by the rule the stage will judge the request by: an estimate more hopeful than the stage's own admits
// requests the stage then drops, after the front has read, decoded and submitted them.
[[nodiscard]] inline std::int64_t door_downstream_ns(const StageScheduler& s, const PublishedTerms& t) noexcept {
    return s.overloaded_now() && t.overload_downstream_ns > t.downstream_ns ? t.overload_downstream_ns : t.downstream_ns;
}

// The estimated time (ns, the runtime clock) at which a request of tier weight `tier_weight` arriving
// at `now_ns` at this entry stage would leave the pipeline. `capacity_req_s` (> 0) is the stage's
// profiled drain rate, used until the planner publishes a service rate. `in_front` requests are ahead
// of it but not yet in the stage's queue: admitted by the door, their bodies still being read.
[[nodiscard]] inline std::int64_t door_finish_ns(const StageScheduler& s, double capacity_req_s, double tier_weight,
                                                 std::int64_t now_ns, std::size_t in_front = 0) noexcept {
    const PublishedTerms t = s.effective_terms();
    const std::size_t n = s.queued_ahead(tier_weight) + in_front;
    double rate = t.service_rate;
    if (!(rate > 0.0)) {
        const double scale = t.duration_scale > 0.0 ? t.duration_scale : 1.0;
        rate = capacity_req_s / scale;
    }
    const double wait_s = rate > 0.0 ? static_cast<double>(n) / rate : 0.0;
    const std::int64_t b = std::min<std::int64_t>(static_cast<std::int64_t>(n) + 1, s.config().max_batch);
    // in double, capped far below int64's range: a huge queue or term must not wrap around to "soon"
    const double finish = static_cast<double>(now_ns) + wait_s * 1e9 +
                          static_cast<double>(s.expected_duration_ns(b)) + static_cast<double>(door_downstream_ns(s, t));
    return static_cast<std::int64_t>(std::min(finish, kFinishCapNs));
}

// One stage as the door's path walk sees it (door_path_finish_ns).
struct DoorStage {
    const StageScheduler* sched = nullptr;
    double capacity_req_s = 1.0;           // profiled drain rate, until a service rate is published
    const std::vector<int>* successors = nullptr;
};

// The tandem estimate along every path from `entry`: a request arriving now leaves stage k no sooner
// than the A_k requests queued at k or above it on its path have drained through k at k's rate R_k,
// and no sooner than it left the stage above, plus d_k:
//   leave_k = max(leave_above, A_k / R_k) + d_k(min(n_k + 1, B_k)),   A_k = Σ n_j over the path to k.
// A bottleneck below the entry shows here at once, while the published downstream term (a window
// mean of the queueing below) shows it a sync or more later; the door takes the later of the two
// estimates. `in_front` requests admitted but not yet queued count as queued at the entry. Returns the
// latest exit time over the paths (ns, capped at kFinishCapNs).
//
// A stage that pops HBF serves a newly admitted request before the ones queued there: admitting it
// pushes each of them one place later, the one with the least budget (the earliest deadline queued)
// furthest. That request is behind everything queued on the path and behind the new one, at its stage
// and at every stage after it, so it leaves the pipeline no sooner than the walk's exit for the new
// request (which counts all of them ahead of it). When that exit is past its deadline, the admission
// costs a request already queued (dropped later, after the front and the stages above paid for it), and
// the walk returns kFinishCapNs: refuse. Admitting only what every queued request can still absorb keeps
// the entry from taking in requests faster than the path's slowest stage drains them. Tiered stages are
// left out: there a heavier tier is meant to overtake a lighter one's requests. Under LBF the new
// request queues behind them.
[[nodiscard]] inline std::int64_t door_path_finish_ns(const std::vector<DoorStage>& stages, int entry,
                                                      std::int64_t now_ns, std::size_t in_front = 0) noexcept {
    double latest = static_cast<double>(now_ns);
    std::int64_t urgent = StageScheduler::kNoDeadline;  // the earliest deadline queued at an HBF stage passed
    // depth-first over the paths (a spec bounds their number); small fixed stack, no allocation
    struct Frame { int k; double ahead; double leave; };
    Frame stack[64];
    int top = 0;
    stack[top++] = Frame{entry, static_cast<double>(in_front), static_cast<double>(now_ns)};
    while (top > 0) {
        const Frame f = stack[--top];
        const DoorStage& st = stages[static_cast<std::size_t>(f.k)];
        const PublishedTerms t = st.sched->effective_terms();
        const std::size_t n = st.sched->queued();
        double rate = t.service_rate;
        if (!(rate > 0.0)) rate = st.capacity_req_s / (t.duration_scale > 0.0 ? t.duration_scale : 1.0);
        const double ahead = f.ahead + static_cast<double>(n);
        const double through = rate > 0.0 ? static_cast<double>(now_ns) + ahead / rate * 1e9 : f.leave;
        const std::int64_t b = std::min<std::int64_t>(static_cast<std::int64_t>(n) + 1, st.sched->config().max_batch);
        const double d = static_cast<double>(st.sched->expected_duration_ns(b));
        const double leave = std::max(f.leave, through) + d;
        const StageConfig& cfg = st.sched->config();
        const std::int64_t queued_deadline = st.sched->earliest_queued_deadline_ns();
        if (queued_deadline != StageScheduler::kNoDeadline && st.sched->current_order() == Order::kHbf &&
            !(cfg.policy.tiered && cfg.tier_weights.size() > 1)) {
            urgent = std::min(urgent, queued_deadline);
            // ... and by the stage's own rule: popped after the A_k + 1 ahead of it, then d_k and the
            // downstream term the stage applies
            if (rate > 0.0) {
                const double popped = std::max(f.leave, static_cast<double>(now_ns) + (ahead + 1.0) / rate * 1e9);
                if (popped + d + static_cast<double>(door_downstream_ns(*st.sched, t)) > static_cast<double>(queued_deadline)) {
                    return static_cast<std::int64_t>(kFinishCapNs);
                }
            }
        }
        const std::vector<int>& next = *st.successors;
        if (next.empty() || top + static_cast<int>(next.size()) > 64) {
            latest = std::max(latest, leave);
            continue;
        }
        for (const int j : next) stack[top++] = Frame{j, ahead, leave};
    }
    if (urgent != StageScheduler::kNoDeadline && latest > static_cast<double>(urgent)) {
        return static_cast<std::int64_t>(kFinishCapNs);
    }
    return static_cast<std::int64_t>(std::min(latest, kFinishCapNs));
}

}  // namespace pard
