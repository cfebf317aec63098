// pard/rules/queue_lag.hpp — live queue lag: the queues below read now, beyond the planner's mean (live_queues).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace pard::rules {

// How much longer than its window mean q a request reaching a stage transit_ns from now waits there:
// the fluid drain time of what is queued (queued / R), less q (what arrivals meanwhile stand for) and
// less what drains before the request arrives; never negative. A backlog below is seen at the next batch.
[[nodiscard]] inline std::int64_t queue_lag_ns(std::size_t queued, double service_rate, std::int64_t queue_delay_ns,
                                               std::int64_t transit_ns) noexcept {
    const double wait_ns = static_cast<double>(queued) / service_rate * 1e9;
    const double lag = wait_ns - static_cast<double>(queue_delay_ns) - static_cast<double>(transit_ns);
    return lag > 0.0 ? static_cast<std::int64_t>(lag) : 0;
}

// The most, over the paths through a set of stages below, of their summed lags. A stage below another
// has strictly fewer stages below it (reachability is a strict order on a DAG), so visiting by that
// count is leaves first, and with lags >= 0 a longest chain in the reachability order is a longest path.
class LongestLagPath {
public:
    [[nodiscard]] bool planned() const noexcept { return !order_.empty(); }
    void clear() noexcept { order_.clear(); }

    // m stages; under(i, j): stage j lies below stage i; depth(i): how many stages lie below stage i.
    template <class Under, class Depth>
    void plan(std::size_t m, Under&& under, Depth&& depth) {
        order_.resize(m);
        next_.assign(m, {});
        path_.assign(m, 0);
        for (std::size_t i = 0; i < m; ++i) {
            order_[i] = i;
            for (std::size_t j = 0; j < m; ++j) {
                if (under(i, j)) next_[i].push_back(j);
            }
        }
        std::stable_sort(order_.begin(), order_.end(), [&depth](std::size_t a, std::size_t b) { return depth(a) < depth(b); });
    }

    // lag(i): stage i's own lag (ns, >= 0). Returns the longest summed path (0 for no stages).
    template <class Lag>
    [[nodiscard]] std::int64_t longest(Lag&& lag) {
        std::int64_t best = 0;
        for (const std::size_t i : order_) {
            std::int64_t tail = 0;
            for (const std::size_t j : next_[i]) tail = path_[j] > tail ? path_[j] : tail;
            path_[i] = lag(i) + tail;
            best = path_[i] > best ? path_[i] : best;
        }
        return best;
    }

private:
    std::vector<std::size_t> order_;               // stages, leaves first
    std::vector<std::vector<std::size_t>> next_;   // each one's stages below
    std::vector<std::int64_t> path_;               // its longest summed lag path (scratch)
};

// The longest summed queue_lag_ns(transit_ns, min_weight) over the paths through `below` (the stages below
// one stage; each Stage exposes below() and queue_lag_ns): planned on the first call, once every stage's
// set_below has run.
template <class Stage>
[[nodiscard]] std::int64_t longest_below_lag(LongestLagPath& paths, const std::vector<const Stage*>& below,
                                             std::int64_t transit_ns, double min_weight) {
    if (below.empty()) return 0;
    if (!paths.planned()) {
        paths.plan(
            below.size(),
            [&below](std::size_t i, std::size_t j) {
                const auto& under = below[i]->below();
                return std::find(under.begin(), under.end(), below[j]) != under.end();
            },
            [&below](std::size_t i) { return below[i]->below().size(); });
    }
    return paths.longest([&](std::size_t i) { return below[i]->queue_lag_ns(transit_ns, min_weight); });
}

}  // namespace pard::rules
