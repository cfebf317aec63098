// pard/sync_planner.hpp — SyncPlanner: PARD's planner (DESIGN §3.5, paper §4), once per sync interval.
//
// The one planner of the simulator, the live runtime and Ray (python/pard/planner.py wraps it). Given each
// stage's statistics since the last sync (PlannerStats, seconds) it recomputes the terms the stage
// schedulers read on their hot path: the downstream term of paper Eq. 3b along the worst DAG path, the
// load factor mu and burstiness eps, the queueing delay, the service and path rates, the measured /
// profiled duration ratio, and pard's overload, floor and outrank terms (DESIGN §3.7).
//
// Every float operation keeps NumPy's order (numpy_order.hpp: pairwise sums, np.interp, the Generator's
// bounded integers) and the Monte Carlo draws come from a numpy Generator's bit generator, so that the
// NumPy reference planner in tests/planner_oracle.py gives the same bits (tests/test_planner_native.py).
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "pard/numpy_order.hpp"
#include "pard/simulator.hpp"

namespace pard {

enum class DownstreamMode : std::uint8_t { kNone, kSf, kLower, kUpper, kFull, kBusy };

// PolicySpec.downstream's name of each mode.
inline DownstreamMode downstream_mode_of(const std::string& m) {
    if (m == "none") return DownstreamMode::kNone;
    if (m == "sf") return DownstreamMode::kSf;
    if (m == "lower") return DownstreamMode::kLower;
    if (m == "upper") return DownstreamMode::kUpper;
    if (m == "full") return DownstreamMode::kFull;
    if (m == "busy") return DownstreamMode::kBusy;
    throw std::invalid_argument("downstream mode '" + m + "' is not one of none, sf, lower, upper, full, busy");
}

// The estimation window (s) for the entry stages' input burstiness cv (the coefficient of variation of
// their per-interval arrival rates; DESIGN §3.5): a continuous, decreasing map, 7 s for a steady input
// down to 1 s from cv = 2 on.
inline double window_for_cv(double cv) {
    if (!std::isfinite(cv) || cv < 0) throw std::invalid_argument("window_for_cv: cv must be finite and >= 0");
    if (cv < 0.5) return 7.0 - 4.0 * cv;
    if (cv < 1.0) return 5.0 - 4.0 * (cv - 0.5);
    const double w = 3.0 - 2.0 * (cv - 1.0);
    return 1.0 > w ? 1.0 : w;
}

struct SyncPlannerConfig {
    // per stage
    std::vector<std::vector<std::vector<int>>> paths;  // downstream paths, stage indices
    std::vector<std::vector<int>> parallel;            // coherent_branches' siblings ([] when off)
    std::vector<std::vector<int>> below;               // coherent_paths' downstream stages ([] when off)
    std::vector<std::vector<int>> pace_below;          // pace: the stages whose least rate is path_rate ([] each: none)
    // The stages sized, as demand, for what this one would forward were it neither paced nor dropping on their
    // behalf (pace; PolicySpec.shed_demand, llm stages); [] each: none, and empty as a whole: pace_below.
    std::vector<std::vector<int>> demand_below;
    std::vector<bool> entry;
    // PolicySpec.llm_live_queue: stages (an LLM stage's) whose queueing delay is published as 0, so that the
    // pop rules above read their queue live only (queue_lag.hpp), not as the window's mean of past waits.
    // Empty: none.
    std::vector<bool> live_queue;
    std::vector<double> max_batch;                     // B_k as float
    std::vector<double> full_d;                        // d_k(B_k)
    std::vector<std::vector<double>> d_table;          // d_k(0 .. B_k)
    std::vector<std::vector<double>> pts_b, pts_d;     // the profile's points
    std::vector<int> drawn;                            // stages the Monte Carlo draws from, ascending
    DownstreamMode mode = DownstreamMode::kFull;
    bool instant = false;
    bool correct_durations = false;
    bool mu_at_capacity = false;
    bool mu_at_capacity_entry = true;  // PolicySpec.mu_at_capacity_entry: false keeps the paper's mu at entries
    bool adapt_window = true;
    double lam = 0.1;
    double window_s = 5.0;
    std::int64_t samples = 10000;
    double cv_history_s = 60.0;
    std::int64_t min_cv_intervals = 10;
    double scale_min = 0.001, scale_max = 1000.0;
    double precollected_wait = 0.1;  // pard.utilisation.PRECOLLECTED_WAIT
    // the duration ratio (correct_durations; pard.duration_scale's constants) and PolicySpec.idle_batch
    double half_life_s = 2.5, prior_batches = 8.0;
    bool idle_batch = false;
    // PolicySpec.overload_upper: also publish pard-upper's max over paths of (sum q + 2 sum d)
    bool overload_upper = false;
};

// The first seven published terms of one stage, in Simulator::publish order, then in_rate (req/s),
// then the eighth published term, path_rate (req/s), then demand_rate (req/s, what an autoscaler sizes on),
// then the ninth published term, overload_downstream_s (s), then the tenth, floor_downstream_s (s), then
// the eleventh, outrank_downstream_s (s); then, for reports, the batch size b_k the estimate used and
// the downstream term's batch-wait part (s).
struct SyncTerms {
    double downstream_s = 0, mu = 0, eps = 0, queue_delay_s = 0, admit_fraction = 1, service_rate = 0,
           duration_scale = 1, in_rate = 0, path_rate = 0, demand_rate = 0, overload_downstream_s = 0,
           floor_downstream_s = 0, outrank_downstream_s = 0, batch_size = 1, wait_quantile_s = 0;
};

// demand_rate: a stage below a paced one, or below one that drops on its behalf, is sized for what that one
// would forward unpaced and without those drops, min(its input, its service rate), not for the flow it
// receives (an autoscaler sized on that never grows the stage the drops are for). `below[k]`: the stages
// sized on stage k's forwardable rate.
inline void raise_demand(const std::vector<std::vector<int>>& below, const std::vector<double>& rate,
                         const std::vector<double>& service, std::vector<SyncTerms>& out) {
    for (std::size_t k = 0; k < below.size(); ++k) {
        if (below[k].empty()) continue;
        const double fwd = rate[k] < service[k] ? rate[k] : service[k];
        for (int j : below[k]) {
            double& d = out[static_cast<std::size_t>(j)].demand_rate;
            if (fwd > d) d = fwd;
        }
    }
}

// path_rate: the least of `rates` over the stages `among` lists (0 when none: the policy
// does not pace that stage).
inline double least_rate(const std::vector<int>& among, const std::vector<double>& rates) {
    double r = 0.0;
    bool any = false;
    for (int j : among) {
        const double v = rates[static_cast<std::size_t>(j)];
        if (!any || v < r) r = v;
        any = true;
    }
    return r;
}

inline void sync_seconds(const std::vector<std::int64_t>& ns, std::vector<double>& out) {
    out.resize(ns.size());
    for (std::size_t i = 0; i < ns.size(); ++i) out[i] = static_cast<double>(ns[i]) * 1e-9;
}

// What the planner reads of one stage's statistics for one interval, in seconds: the arrivals' count,
// each collected request's queueing delay, and per batch its size, wait and measured duration.
struct PlannerStats {
    std::size_t arrivals = 0;
    std::vector<double> qdelay_s, batch_wait_s, batch_duration_s;
    std::vector<std::int64_t> batch_size;
};

// The simulator's StageStats (int64 ns) as the planner reads them (ns * 1e-9, as the bindings convert).
inline void planner_stats(const StageStats& s, PlannerStats& out) {
    out.arrivals = s.arrival.size();
    sync_seconds(s.qdelay, out.qdelay_s);
    sync_seconds(s.batch_wait, out.batch_wait_s);
    sync_seconds(s.batch_duration, out.batch_duration_s);
    out.batch_size = s.batch_size;
}

// The measured / profiled duration ratio (pard.duration_scale's doc): per stage, decayed sums of the measured and
// profiled batch seconds and batch counts, the pooled ratio with prior_batches of weight, clipped; the
// same operations in NumPy's order. count: batches ever seen per stage (its warning reads them).
struct SyncDurationScale {
    std::vector<double> m, p, w, scale;
    std::vector<std::int64_t> count;

    void reset(std::size_t n) {
        m.assign(n, 0.0);
        p.assign(n, 0.0);
        w.assign(n, 0.0);
        count.assign(n, 0);
        scale.assign(n, 1.0);
    }

    // last: the newest interval's row block (cols per stage: batch count at 4, measured s at 5, profiled s at 6).
    void update(double dt, const std::vector<double>& last, std::size_t cols, const SyncPlannerConfig& c) {
        const std::size_t n = m.size();
        const double g = std::pow(0.5, (dt > 0.0 ? dt : 0.0) / c.half_life_s);
        for (std::size_t k = 0; k < n; ++k) {
            m[k] = m[k] * g + last[k * cols + 5];
            p[k] = p[k] * g + last[k * cols + 6];
            w[k] = w[k] * g + last[k * cols + 4];
            count[k] += static_cast<std::int64_t>(last[k * cols + 4]);
        }
        const double ptot = npo::numpy_sum(p);
        const double pooled = ptot > 0 ? npo::numpy_sum(m) / ptot : 1.0;
        const double kappa = c.prior_batches;
        for (std::size_t k = 0; k < n; ++k) {
            const double own = p[k] > 0 ? m[k] / p[k] : pooled;
            const double den = w[k] + kappa;
            double s = den > 0 ? (w[k] * own + kappa * pooled) / den : pooled;
            s = std::min(std::max(s, c.scale_min), c.scale_max);
            scale[k] = s;
        }
    }
};

class SyncPlanner {
public:
    SyncPlanner(SyncPlannerConfig cfg, npo::BitSource bits) : c_(std::move(cfg)), bits_(bits) {
        n_ = c_.paths.size();
        if (c_.pace_below.empty()) c_.pace_below.resize(c_.paths.size());
        if (c_.demand_below.empty()) c_.demand_below = c_.pace_below;
        if (n_ == 0 || c_.parallel.size() != n_ || c_.below.size() != n_ || c_.pace_below.size() != n_ ||
            c_.demand_below.size() != n_ ||
            c_.entry.size() != n_ ||
            c_.max_batch.size() != n_ || c_.full_d.size() != n_ || c_.d_table.size() != n_ ||
            c_.pts_b.size() != n_ || c_.pts_d.size() != n_) {
            throw std::invalid_argument("SyncPlanner: per-stage fields must all have one entry per stage");
        }
        if (c_.samples < 1) throw std::invalid_argument("SyncPlanner: samples must be >= 1");
        lam_ = c_.lam;
        window_ = c_.window_s;
        last_batch_.assign(n_, 1.0);
        drawn_slot_.assign(n_, -1);
        for (std::size_t j = 0; j < c_.drawn.size(); ++j) drawn_slot_.at(static_cast<std::size_t>(c_.drawn[j])) = static_cast<int>(j);
        memo_b_.assign(n_, -1.0);
        memo_d_.assign(n_, 0.0);
        ds_.reset(n_);
    }

    // Draw from `bits` from now on (a copy of a planner draws from a copy of its generator).
    void rebind(npo::BitSource bits) noexcept { bits_ = bits; }

    [[nodiscard]] double lam() const noexcept { return lam_; }
    [[nodiscard]] double window_s() const noexcept { return window_; }
    [[nodiscard]] std::size_t num_stages() const noexcept { return n_; }
    [[nodiscard]] const std::vector<SyncTerms>& terms() const noexcept { return out_; }
    // Batches ever seen per stage by the duration ratio (pard.duration_scale.DriftWatch's warning reads them).
    [[nodiscard]] const std::vector<std::int64_t>& batch_counts() const noexcept { return ds_.count; }

    // The clock reading at which the first interval begins (else 0).
    void start(double now_s) {
        if (has_prev_) throw std::invalid_argument("SyncPlanner.start: called after the first update");
        has_prev_ = true;
        prev_ = now_s;
    }

    // One sync on the simulator's statistics (int64 ns), converted to seconds as the planner reads them.
    const std::vector<SyncTerms>& update(double now_s, const std::vector<StageStats>& stats, const std::vector<int>& workers) {
        in_.resize(stats.size());
        for (std::size_t k = 0; k < stats.size(); ++k) planner_stats(stats[k], in_[k]);
        return update(now_s, in_, workers);
    }

    const std::vector<SyncTerms>& update(double now_s, const std::vector<PlannerStats>& stats, const std::vector<int>& workers) {
        if (stats.size() != n_ || workers.size() != n_) {
            throw std::invalid_argument("SyncPlanner.update: stats and workers must have one entry per stage (" +
                                        std::to_string(n_) + ")");
        }
        if (has_prev_ && !(now_s > prev_)) {
            throw std::invalid_argument("SyncPlanner.update: now_s must increase between updates");
        }
        const double dt = has_prev_ ? (now_s - prev_) : (1e-9 > now_s ? 1e-9 : now_s);
        has_prev_ = true;
        prev_ = now_s;
        ingest(now_s, dt, stats);
        if (c_.correct_durations) ds_.update(dt, rows_.back(), kCols, c_);
        resize_window(now_s);
        const double win = window_;
        const double start = now_s - win;
        while (ends_.front() <= start) {  // the interval just added always stays
            ends_.pop_front();
            dts_.pop_front();
            rows_.pop_front();
            waits_.pop_front();
        }
        windowed(start, win, workers);
        draw();
        publish_terms();
        return out_;
    }

private:
    // arrivals, sum/count of queueing delays, sum/count of sizes, dm, dp, requests that waited for another batch
    static constexpr std::size_t kCols = 8;

    void ingest(double now_s, double dt, const std::vector<PlannerStats>& stats) {
        std::vector<double> row(n_ * kCols, 0.0);
        std::vector<std::vector<double>> waits(c_.drawn.size());
        double entry_rate = 0.0;
        for (std::size_t k = 0; k < n_; ++k) {
            const PlannerStats& s = stats[k];
            const double n_arr = static_cast<double>(s.arrivals);
            const double qsum = npo::numpy_sum(s.qdelay_s);
            double bsum = 0.0;  // integers as float64: exact in any order
            for (std::int64_t b : s.batch_size) bsum += static_cast<double>(b);
            double dm = 0.0, dp = 0.0, waited = 0.0;
            // measured batch seconds: the d(b) correction's numerator and, for "busy", the utilisation
            if ((c_.correct_durations || c_.mode == DownstreamMode::kBusy) && !s.batch_size.empty()) {
                dm = npo::numpy_sum(s.batch_duration_s);
                const std::vector<double>& table = c_.d_table[k];
                scratch_.resize(s.batch_size.size());
                for (std::size_t i = 0; i < s.batch_size.size(); ++i) {
                    scratch_[i] = table.at(static_cast<std::size_t>(s.batch_size[i]));
                }
                dp = npo::numpy_sum(scratch_);
                if (c_.mode == DownstreamMode::kBusy && s.batch_wait_s.size() == s.batch_size.size()) {
                    // pard.utilisation.busy_wait's backlog: batches that waited for another to end
                    for (std::size_t i = 0; i < s.batch_size.size(); ++i) {
                        if (s.batch_wait_s[i] > c_.precollected_wait * s.batch_duration_s[i]) {
                            waited += static_cast<double>(s.batch_size[i]);
                        }
                    }
                }
            }
            double* r = &row[k * kCols];
            r[0] = n_arr;
            r[1] = qsum;
            r[2] = static_cast<double>(s.qdelay_s.size());
            r[3] = bsum;
            r[4] = static_cast<double>(s.batch_size.size());
            r[5] = dm;
            r[6] = dp;
            r[7] = waited;
            const int slot = drawn_slot_[k];
            if (slot >= 0) {
                std::vector<double>& bw = waits[static_cast<std::size_t>(slot)];
                bw.insert(bw.end(), s.batch_wait_s.begin(), s.batch_wait_s.end());
            }
            if (c_.entry[k]) entry_rate += n_arr / dt;
        }
        ends_.push_back(now_s);
        dts_.push_back(dt);
        rows_.push_back(std::move(row));
        waits_.push_back(std::move(waits));
        entry_t_.push_back(now_s);
        entry_rates_.push_back(entry_rate);
    }

    void resize_window(double now_s) {
        while (!entry_t_.empty() && entry_t_.front() <= now_s - c_.cv_history_s) {
            entry_t_.pop_front();
            entry_rates_.pop_front();
        }
        if (!c_.adapt_window || static_cast<std::int64_t>(entry_rates_.size()) < c_.min_cv_intervals) return;
        scratch_.assign(entry_rates_.begin(), entry_rates_.end());
        const double size = static_cast<double>(scratch_.size());
        const double mean = npo::pairwise(scratch_.data(), scratch_.size()) / size;  // np.add.reduce
        if (!(mean > 0)) return;
        for (double& x : scratch_) x = (x - mean) * (x - mean);
        window_ = window_for_cv(std::sqrt(npo::pairwise(scratch_.data(), scratch_.size()) / size) / mean);
    }

    // sum over the window's intervals of wt * column (NumPy: (wt * m).sum(axis=-1))
    double wsum(std::size_t k, std::size_t col) {
        const std::size_t t_n = rows_.size();
        scratch_.resize(t_n);
        for (std::size_t c = 0; c < t_n; ++c) scratch_[c] = wt_[c] * rows_[c][k * kCols + col];
        return npo::numpy_sum(scratch_);
    }

    double duration(std::size_t k, double b) {  // d_k(b), recomputed only when b changes
        if (b != memo_b_[k]) {
            const std::vector<double>& bs = c_.pts_b[k];
            const std::vector<double>& ds = c_.pts_d[k];
            double d = npo::numpy_interp(b, bs, ds);
            if (bs.size() > 1 && b > bs.back()) {  // profile.duration: linear past the last point
                const std::size_t m = bs.size();
                const double slope = (ds[m - 1] - ds[m - 2]) / (bs[m - 1] - bs[m - 2]);
                d = ds[m - 1] + slope * (b - bs[m - 1]);
            }
            memo_b_[k] = b;
            memo_d_[k] = d;
        }
        return memo_d_[k];
    }

    void windowed(double start, double win, const std::vector<int>& workers) {
        const std::size_t t_n = ends_.size();
        const double inf = std::numeric_limits<double>::infinity();
        wt_.resize(t_n);
        for (std::size_t c = 0; c < t_n; ++c) wt_[c] = (ends_[c] - start) / win;
        scratch_.resize(t_n);
        for (std::size_t c = 0; c < t_n; ++c) scratch_[c] = wt_[c] * dts_[c];
        const double wdts = npo::numpy_sum(scratch_);
        q_.assign(n_, 0.0);
        d_.assign(n_, 0.0);
        b_.assign(n_, 0.0);
        rate_.assign(n_, 0.0);
        eps_.assign(n_, 0.0);
        scale_.assign(n_, 1.0);
        mu_.assign(n_, 0.0);
        service_.assign(n_, 0.0);
        rho_.assign(n_, 0.0);
        backlog_.assign(n_, false);
        std::vector<double> rates(t_n), dev(t_n);
        for (std::size_t k = 0; k < n_; ++k) {
            const double wqn = wsum(k, 2);
            const double wqs = wsum(k, 1);
            q_[k] = wqn > 0 ? wqs / wqn : 0.0;
            if (k < c_.live_queue.size() && c_.live_queue[k]) q_[k] = 0.0;
            const double wbn = wsum(k, 4);
            const double wbs = wsum(k, 3);
            if (wbn > 0) {
                last_batch_[k] = wbs / wbn;
            } else if (c_.idle_batch) {
                last_batch_[k] = 1.0;  // PolicySpec.idle_batch: an idle stage starts a request at once
            }
            b_[k] = std::min(std::max(last_batch_[k], 1.0), c_.max_batch[k]);  // no NaN here: as np.minimum/maximum
            double d = duration(k, b_[k]);
            rate_[k] = wsum(k, 0) / wdts;
            for (std::size_t c = 0; c < t_n; ++c) rates[c] = rows_[c][k * kCols] / dts_[c];
            const double rsum = npo::numpy_sum(rates);
            if (!c_.instant) {
                double acc = 0.0;  // np.add.accumulate, then / arange(1, T + 1)
                for (std::size_t c = 0; c < t_n; ++c) {
                    acc = c == 0 ? rates[0] : acc + rates[c];
                    dev[c] = std::fabs(rates[c] - acc / static_cast<double>(c + 1));
                }
                eps_[k] = rsum > 0 ? npo::numpy_sum(dev) / rsum : 0.0;
            }
            if (c_.correct_durations) {
                scale_[k] = ds_.scale[k];
                d = d * ds_.scale[k];
            }
            d_[k] = d;
            const double w = static_cast<double>(workers[k]);
            const double throughput = d > 0 ? w * b_[k] / d : inf;
            mu_[k] = throughput > 0 ? rate_[k] / throughput : (rate_[k] > 0 ? inf : 0.0);
            const double d_full = c_.full_d[k] * scale_[k];
            service_[k] = w * c_.max_batch[k] / d_full;
            if (c_.mu_at_capacity && (c_.mu_at_capacity_entry || !c_.entry[k])) mu_[k] = service_[k] > 0 ? rate_[k] / service_[k] : (rate_[k] > 0 ? inf : 0.0);
            if (c_.mode == DownstreamMode::kBusy) rho_[k] = utilisation(k, w, wdts);
            backlog_[k] = false;  // a request in the window waited for another batch (the counts are >= 0)
            for (const auto& row : rows_) backlog_[k] = backlog_[k] || row[k * kCols + 7] > 0;
        }
    }

    // pard.utilisation.utilisation for stage k: the larger of the window's and the last interval's
    // measured batch seconds per worker-second; 1 with no serving worker; NaN as 1; clipped to [0, 1].
    double utilisation(std::size_t k, double w, double wdts) {
        if (!(w > 0)) return 1.0;
        const double win = wsum(k, 5) / (w * wdts);
        const double last = rows_.back()[k * kCols + 5] / (w * dts_.back());
        double rho = (std::isnan(win) || std::isnan(last)) ? std::numeric_limits<double>::quiet_NaN()
                                                              : (win > last ? win : last);  // np.maximum
        if (std::isnan(rho)) rho = 1.0;
        return std::min(std::max(rho, 0.0), 1.0);
    }

    void draw() {
        const std::size_t m = static_cast<std::size_t>(c_.samples);
        draws_.resize(c_.drawn.size());
        for (std::size_t j = 0; j < c_.drawn.size(); ++j) {
            const std::size_t i = static_cast<std::size_t>(c_.drawn[j]);
            std::vector<double>& out = draws_[j];
            out.resize(m);
            pool_.clear();
            for (const auto& w : waits_) pool_.insert(pool_.end(), w[j].begin(), w[j].end());
            if (pool_.empty()) {  // rng.uniform(0, d_i, M): low + range * next_double
                const double range = d_[i] - 0.0;
                for (std::size_t s = 0; s < m; ++s) out[s] = 0.0 + range * bits_.next_double(bits_.state);
            } else {
                if (pool_.size() > 0x7FFFFFFFu) throw std::length_error("SyncPlanner: too many batch waits in the window");
                const auto rng = static_cast<std::uint32_t>(pool_.size() - 1);
                for (std::size_t s = 0; s < m; ++s) out[s] = pool_[npo::lemire_bounded(bits_, rng)];
            }
        }
    }

    // The lambda-quantile: the round(lam * (M - 1))-th smallest (Python's round: half to even).
    double quantile(const std::vector<double>& x) {
        const double pos = lam_ * static_cast<double>(x.size() - 1);
        auto k = static_cast<std::size_t>(std::nearbyint(pos));
        if (k >= x.size()) k = x.size() - 1;
        sel_.assign(x.begin(), x.end());
        std::nth_element(sel_.begin(), sel_.begin() + static_cast<std::ptrdiff_t>(k), sel_.end());
        return sel_[k];
    }

    const std::vector<double>& path_total(const std::vector<int>& path) {  // each path's summed draws, a right fold sharing suffixes
        std::size_t start = 0;
        std::vector<int> key;
        while (start < path.size()) {
            key.assign(path.begin() + static_cast<std::ptrdiff_t>(start), path.end());
            if (totals_.count(key)) break;
            ++start;
        }
        const std::vector<double>* acc = start < path.size() ? &totals_.at(key) : nullptr;
        for (std::size_t j = start; j-- > 0;) {
            const std::vector<double>& dj = draws_[static_cast<std::size_t>(drawn_slot_[static_cast<std::size_t>(path[j])])];
            std::vector<double> sum(dj.size());
            if (acc == nullptr) {
                sum = dj;
            } else {
                for (std::size_t s = 0; s < dj.size(); ++s) sum[s] = dj[s] + (*acc)[s];
            }
            key.assign(path.begin() + static_cast<std::ptrdiff_t>(j), path.end());
            acc = &(totals_[key] = std::move(sum));
        }
        return *acc;
    }

    void publish_terms() {
        totals_.clear();
        out_.assign(n_, SyncTerms{});
        std::vector<double> gq, gd, gw, gm;
        // DurationScale.measured: no stage has run a batch yet, so every ratio is the prior's 1
        bool unmeasured = c_.correct_durations;
        for (std::int64_t c : ds_.count) unmeasured = unmeasured && c == 0;
        for (std::size_t k = 0; k < n_; ++k) {
            double best = 0.0;
            double best_w = 0.0;  // the batch-wait part of the worst path's term
            double hi = 0.0;  // overload_upper's term
            double lo = 0.0;  // downstream="busy": the floor, max over paths of (sum q + sum d)
            double lm = 0.0;  // and a tier served first's term, max over paths of (sum min(q, d/2) + sum d)
            if (c_.mode != DownstreamMode::kNone) {
                for (const auto& path : c_.paths[k]) {
                    gq.clear();
                    gd.clear();
                    gw.clear();
                    gm.clear();
                    for (int i : path) {
                        const auto u = static_cast<std::size_t>(i);
                        gq.push_back(q_[u]);
                        gd.push_back(d_[u]);
                        gm.push_back(q_[u] < 0.5 * d_[u] ? q_[u] : 0.5 * d_[u]);  // np.minimum(q, 0.5 * d)
                        const double rd = rho_[u] * d_[u];  // "busy": pard.utilisation.busy_wait
                        gw.push_back(backlog_[u] ? q_[u] + rd : (q_[u] > rd ? q_[u] : rd));
                    }
                    const double sq = npo::numpy_sum(gq);
                    const double sd = npo::numpy_sum(gd);
                    double val = 0.0;
                    double wq = 0.0;
                    switch (c_.mode) {
                        case DownstreamMode::kSf: val = sd; break;
                        case DownstreamMode::kLower: val = sq + sd; break;
                        case DownstreamMode::kUpper: val = sq + 2.0 * sd; wq = sd; break;
                        case DownstreamMode::kBusy: val = sd + npo::numpy_sum(gw); wq = val - sd - sq; break;
                        default: wq = quantile(path_total(path)); val = sq + sd + wq; break;
                    }
                    if (val > best) {
                        best = val;
                        best_w = wq;
                    }
                    if (c_.overload_upper && sq + 2.0 * sd > hi) hi = sq + 2.0 * sd;
                    if (c_.mode == DownstreamMode::kBusy) {  // the floor and a tier served first's term
                        if (sq + sd > lo) lo = sq + sd;
                        const double m = npo::numpy_sum(gm) + sd;
                        if (m > lm) lm = m;
                    }
                }
            }
            double mu = mu_[k];  // Python's max([...]): the first of the largest
            for (int j : c_.parallel[k]) mu = mu_[static_cast<std::size_t>(j)] > mu ? mu_[static_cast<std::size_t>(j)] : mu;
            for (int j : c_.below[k]) mu = mu_[static_cast<std::size_t>(j)] > mu ? mu_[static_cast<std::size_t>(j)] : mu;
            SyncTerms& t = out_[k];
            t.downstream_s = best;
            t.mu = mu;
            t.eps = eps_[k];
            t.queue_delay_s = q_[k];
            t.admit_fraction = 1.0;
            t.service_rate = service_[k];
            t.duration_scale = unmeasured ? 0.0 : scale_[k];  // no batch anywhere yet: 0, "none measured yet"
            t.in_rate = rate_[k];
            t.path_rate = least_rate(c_.pace_below[k], service_);
            t.demand_rate = rate_[k];
            t.overload_downstream_s = hi;
            t.floor_downstream_s = lo;
            t.outrank_downstream_s = lm;
            t.batch_size = b_[k];
            t.wait_quantile_s = best_w;
        }
        raise_demand(c_.demand_below, rate_, service_, out_);
    }

    SyncPlannerConfig c_;
    npo::BitSource bits_;
    std::size_t n_ = 0;
    double lam_ = 0.1;
    double window_ = 5.0;
    bool has_prev_ = false;
    double prev_ = 0.0;
    std::deque<double> ends_, dts_, entry_t_, entry_rates_;
    std::deque<std::vector<double>> rows_;                // (n * 7) per interval
    std::deque<std::vector<std::vector<double>>> waits_;  // per interval, per drawn stage
    std::vector<double> last_batch_, memo_b_, memo_d_;
    std::vector<int> drawn_slot_;
    std::vector<double> wt_, q_, d_, b_, rate_, eps_, scale_, mu_, service_, rho_;
    std::vector<bool> backlog_;  // downstream="busy": a request in the window waited for another batch
    SyncDurationScale ds_;
    std::vector<std::vector<double>> draws_;
    std::map<std::vector<int>, std::vector<double>> totals_;
    std::vector<double> scratch_, pool_, sel_;
    std::vector<SyncTerms> out_;
    std::vector<PlannerStats> in_;  // the simulator's statistics in seconds, reused across syncs
};

}  // namespace pard

