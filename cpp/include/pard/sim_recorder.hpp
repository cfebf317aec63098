// pard/sim_recorder.hpp — SimRecorder: the run recorder of every engine (python/pard/recorder.py wraps it):
// per-stage counters and per-second bins, fed from the StageStats once per sync (by Simulator.sync, the
// live runtime's planner thread, Ray's driver), every float operation in NumPy's order (numpy_order.hpp)
// so that the NumPy reference in tests/recorder_oracle.py gives the same bits (tests/test_planner_native.py).
// With keep_s, only the most recent keep_s .. 2 keep_s seconds of bins are held: a server's runtime runs
// for days, and the counters cover the whole run anyway.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "pard/numpy_order.hpp"
#include "pard/simulator.hpp"

namespace pard {

class SimRecorder {
public:
    // d_table[k]: stage k's profiled d(b) at b = 0, 1, .., B_k (s). keep_s: 0 keeps every second's bins,
    // else the most recent keep_s seconds at least and 2 keep_s at most.
    SimRecorder(double origin_s, std::vector<std::vector<double>> d_table, std::int64_t keep_s = 0)
        : origin_(origin_s), table_(std::move(d_table)), ns_(table_.size()), keep_(keep_s),
          submitted_(ns_, 0), executed_(ns_, 0), compute_(ns_, 0.0), nominal_(ns_, 0.0),
          qsum_(ns_), qcnt_(ns_), wsum_(ns_) {
        if (ns_ == 0) throw std::invalid_argument("SimRecorder: d_table must hold one table per stage");
        if (keep_ < 0) throw std::invalid_argument("SimRecorder: keep_s must be >= 0");
    }

    // RunRecorder.record(stats, serving, t_prev, t).
    // The workers serving at t may be counts or (a series' average) fractions.
    template <class Workers = int>
    void record(const std::vector<StageStats>& stats, const std::vector<Workers>& serving, double t_prev, double t) {
        if (stats.size() != ns_ || serving.size() != ns_) {
            throw std::invalid_argument("SimRecorder.record: stats and serving must have one entry per stage");
        }
        std::int64_t lo = 0, hi = 0;
        bool any = false;
        for (std::size_t k = 0; k < ns_; ++k) {
            const StageStats& s = stats[k];
            submitted_[k] += static_cast<std::int64_t>(s.arrival.size());
            if (!s.batch_size.empty()) {
                std::int64_t sum = 0;
                for (std::int64_t b : s.batch_size) sum += b;
                executed_[k] += sum;
                scratch_.resize(s.batch_duration.size());
                for (std::size_t i = 0; i < scratch_.size(); ++i) scratch_[i] = static_cast<double>(s.batch_duration[i]) * 1e-9;
                compute_[k] += npo::numpy_sum(scratch_);
                nominal_[k] += nominal(k, s.batch_size);
            }
            for (std::int64_t tq : s.qdelay_t) {  // the bin range over every stage, as the concatenation's min/max
                const std::int64_t b = bin(tq) - base_;
                if (!any || b < lo) lo = b;
                if (!any || b > hi) hi = b;
                any = true;
            }
        }
        if (any && lo < 0) {  // before the origin, or before the seconds kept: not in any bin
            bool kept = false;
            std::int64_t lo2 = 0;
            for (const StageStats& s : stats) {
                for (std::int64_t tq : s.qdelay_t) {
                    const std::int64_t b = bin(tq) - base_;
                    if (b >= 0 && (!kept || b < lo2)) lo2 = b, kept = true;
                }
            }
            any = kept;
            lo = lo2;
        }
        if (any) {  // each bin: its samples summed in order from 0 (np.bincount), then added to the total
            grow(base_ + hi + 1);
            const auto width = static_cast<std::size_t>(hi - lo + 1);
            cell_sum_.assign(width, 0.0);
            cell_cnt_.assign(width, 0);
            for (std::size_t k = 0; k < ns_; ++k) {
                const StageStats& s = stats[k];
                std::fill(cell_sum_.begin(), cell_sum_.end(), 0.0);
                std::fill(cell_cnt_.begin(), cell_cnt_.end(), 0);
                for (std::size_t i = 0; i < s.qdelay_t.size(); ++i) {
                    const std::int64_t b = bin(s.qdelay_t[i]) - base_;
                    if (b < 0) continue;
                    const auto c = static_cast<std::size_t>(b - lo);
                    cell_sum_[c] += static_cast<double>(s.qdelay[i]) * 1e-9;
                    cell_cnt_[c] += 1;
                }
                for (std::size_t c = 0; c < width; ++c) {
                    qsum_[k][static_cast<std::size_t>(lo) + c] += cell_sum_[c];
                    qcnt_[k][static_cast<std::size_t>(lo) + c] += static_cast<double>(cell_cnt_[c]);
                }
            }
        }
        const auto b = static_cast<std::int64_t>(std::floor(0.5 * (t_prev + t) - origin_));
        if (b >= base_) {
            grow(b + 1);
            const auto c = static_cast<std::size_t>(b - base_);
            for (std::size_t k = 0; k < ns_; ++k) wsum_[k][c] += static_cast<double>(serving[k]) * (t - t_prev);
            wdt_[c] += t - t_prev;
        }
        trim();
    }

    [[nodiscard]] std::size_t num_stages() const noexcept { return ns_; }
    [[nodiscard]] std::size_t bins() const noexcept { return wdt_.size(); }
    // The absolute second (from origin_s) of bin 0, one past the last second written, and the workers in
    // force before bin 0 (those of the newest trimmed second that had any; empty before any trim).
    [[nodiscard]] std::int64_t base() const noexcept { return base_; }
    [[nodiscard]] std::int64_t used() const noexcept { return used_; }
    [[nodiscard]] const std::vector<double>& carry() const noexcept { return carry_; }
    [[nodiscard]] const std::vector<std::int64_t>& submitted() const noexcept { return submitted_; }
    [[nodiscard]] const std::vector<std::int64_t>& executed() const noexcept { return executed_; }
    [[nodiscard]] const std::vector<double>& compute_s() const noexcept { return compute_; }
    [[nodiscard]] const std::vector<double>& nominal_s() const noexcept { return nominal_; }
    [[nodiscard]] const std::vector<std::vector<double>>& qsum() const noexcept { return qsum_; }
    [[nodiscard]] const std::vector<std::vector<double>>& qcnt() const noexcept { return qcnt_; }
    [[nodiscard]] const std::vector<std::vector<double>>& wsum() const noexcept { return wsum_; }
    [[nodiscard]] const std::vector<double>& wdt() const noexcept { return wdt_; }

private:
    [[nodiscard]] std::int64_t bin(std::int64_t t_ns) const noexcept {
        return static_cast<std::int64_t>(std::floor(static_cast<double>(t_ns) * 1e-9 - origin_));
    }

    // Hold the absolute seconds up to `end` (exclusive).
    void grow(std::int64_t end) {
        if (end > used_) used_ = end;
        const auto n = static_cast<std::size_t>(end - base_);
        if (n <= wdt_.size()) return;
        for (std::size_t k = 0; k < ns_; ++k) {
            qsum_[k].resize(n, 0.0);
            qcnt_[k].resize(n, 0.0);
            wsum_[k].resize(n, 0.0);
        }
        wdt_.resize(n, 0.0);
    }

    // With keep_: once more than 2 keep_ seconds are held, all but the last keep_ go (amortised: one move
    // per keep_ seconds of run); the workers of the newest second dropped that had any carry over.
    void trim() {
        if (keep_ == 0 || used_ - base_ <= 2 * keep_) return;
        const auto cut = static_cast<std::size_t>(used_ - keep_ - base_);
        for (std::size_t j = cut; j-- > 0;) {
            if (wdt_[j] > 0) {
                carry_.resize(ns_);
                for (std::size_t k = 0; k < ns_; ++k) carry_[k] = wsum_[k][j] / wdt_[j];
                break;
            }
        }
        const auto drop = [cut](std::vector<double>& v) { v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(cut)); };
        for (std::size_t k = 0; k < ns_; ++k) {
            drop(qsum_[k]);
            drop(qcnt_[k]);
            drop(wsum_[k]);
        }
        drop(wdt_);
        base_ += static_cast<std::int64_t>(cut);
    }

    // count x d(b) over the distinct sizes, ascending, added in sequence (RunRecorder._nominal)
    double nominal(std::size_t k, const std::vector<std::int64_t>& sizes) {
        const std::vector<double>& table = table_[k];
        hist_.assign(table.size(), 0);
        for (std::int64_t b : sizes) {
            if (b < 0 || static_cast<std::size_t>(b) >= table.size()) {
                throw std::out_of_range("SimRecorder: batch size " + std::to_string(b) + " past stage " +
                                        std::to_string(k) + "'s duration table");
            }
            ++hist_[static_cast<std::size_t>(b)];
        }
        double acc = 0.0;
        bool first = true;
        for (std::size_t b = 0; b < hist_.size(); ++b) {
            if (hist_[b] == 0) continue;
            const double term = static_cast<double>(hist_[b]) * table[b];
            acc = first ? term : acc + term;
            first = false;
        }
        return acc;
    }

    double origin_;
    std::vector<std::vector<double>> table_;
    std::size_t ns_;
    std::int64_t keep_ = 0, base_ = 0, used_ = 0;
    std::vector<double> carry_;
    std::vector<std::int64_t> submitted_, executed_;
    std::vector<double> compute_, nominal_;
    std::vector<std::vector<double>> qsum_, qcnt_, wsum_;
    std::vector<double> wdt_;
    std::vector<double> scratch_, cell_sum_;
    std::vector<std::int64_t> cell_cnt_, hist_;
};

}  // namespace pard
