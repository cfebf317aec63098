// LiveRuntime: the live pipeline (pard/live_pipeline.hpp) over Python payloads with LiveFuture
// handles: it builds the pipeline from the Python side's stages, holds the Python hooks, resolves
// the futures of ended requests (handing those awaited on an event loop to its LoopSink), and
// builds a request's exception on first use.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "live_future.hpp"
#include "live_loop_sink.hpp"
#include "pard/live_pipeline.hpp"
#include "pard/stage_scheduler.hpp"
#include "seconds.hpp"

namespace pard::bind {
// Private to register_live.cpp, its one includer: internal linkage, as in a single source file,
// lets the compiler inline the hot path's single-call functions (LivePipeline::submit into
// fast_submit).
namespace {

using Pipe = LivePipeline<py::object, py::object>;
using Done = Pipe::Done;

class LiveRuntime {
public:
    LiveRuntime(std::vector<py::object> scheds, std::vector<std::vector<int>> successors,
                std::vector<std::vector<int>> preds, std::vector<std::int64_t> max_queue,
                std::vector<double> capacity, std::vector<int> entries, std::vector<int> exits,
                std::size_t history, py::object join, py::list exit_names, py::object error_factory)
        : scheds_(std::move(scheds)), join_(std::move(join)), exit_names_(std::move(exit_names)),
          error_factory_(std::move(error_factory)) {
        std::vector<LiveStageSpec> specs;
        for (std::size_t k = 0; k < scheds_.size(); ++k) {
            LiveStageSpec s;
            s.sched = scheds_[k].cast<StageScheduler*>();
            s.successors = successors.at(k);
            s.preds = preds.at(k);
            s.max_queue = max_queue.at(k);
            s.capacity_req_s = capacity.at(k);
            specs.push_back(std::move(s));
        }
        push_hooks_.assign(scheds_.size(), py::none());
        form_hooks_.assign(scheds_.size(), py::none());
        Pipe::Hooks hooks;
        hooks.join = [this](int, std::vector<py::object>& parts, py::object& out, py::object& err) {
            py::list l;
            for (auto& p : parts) l.append(p);
            try {
                out = join_(l);
                return true;
            } catch (py::error_already_set& e) {
                err = e.value();
                return false;
            }
        };
        hooks.combine = [this](const std::vector<int>&, std::vector<py::object>& outs) -> py::object {
            py::dict d;
            for (std::size_t i = 0; i < outs.size(); ++i) d[exit_names_[i]] = outs[i];
            return std::move(d);
        };
        pipe_ = std::make_unique<Pipe>(std::move(specs), std::move(entries), std::move(exits), history, std::move(hooks));
    }

    Pipe& pipe() { return *pipe_; }

    // Resolves the futures of ended requests (GIL held, no core lock held). Those awaited on an event
    // loop go into its LoopSink without Python; each loop is woken once, after the whole batch.
    void resolve(std::vector<Done>& done) {
        std::vector<py::object> wake;  // the sinks a hand-off armed
        for (Done& d : done) {
            if (!d.handle) continue;
            py::object fo = std::move(d.handle);
            auto& f = fo.cast<LiveFuture&>();
            if (d.kind == EndKind::kCancel) {
                f.state.store(LiveFuture::kCancelled);
            } else if (d.kind == EndKind::kOutput) {
                f.ostate = static_cast<int>(d.state);  // on time or late: outcome_state
                f.value = std::move(d.value);
                f.state.store(LiveFuture::kResult);
            } else {
                f.ostate = static_cast<int>(d.state);
                f.stage = d.stage;
                f.reason = d.reason;
                f.kind = static_cast<int>(d.kind);
                f.queued = d.queued;
                f.retry_after_s = d.retry_after_s;
                f.raw = std::move(d.value);
                f.state.store(LiveFuture::kError);
            }
            if (f.waiters.load() > 0) {
                WaitShard& w = wait_shards()[f.key % 64];
                std::lock_guard<std::mutex> lock(w.mu);
                w.cv.notify_all();
            }
            if (f.sink) {
                py::object sink = std::move(f.sink);
                if (LoopSink::hand_off(sink, fo)) wake.push_back(std::move(sink));
            }
            if (!f.callbacks.empty()) f.run_callbacks(fo);
        }
        done.clear();
        for (const py::object& sink : wake) LoopSink::wake(sink);
    }

    py::object submit(py::object self, const py::object& payload, double slo_s, std::int32_t tier,
                      std::int64_t deadline_ns = Pipe::kNoDeadline, const LiveTokens& tokens = {}) {
        auto* fp = new LiveFuture();  // owned by `fo` from the next line on (no second type lookup to reach it)
        py::object fo = py::cast(fp, py::return_value_policy::take_ownership);
        LiveFuture& f = *fp;
        f.owner = std::move(self);
        std::vector<Done> done;
        auto fault = [this](int k) {
            const py::object& h = push_hooks_[static_cast<std::size_t>(k)];
            if (!h.is_none()) h(k);
        };
        py::object failure = py::none();
        std::uint64_t key = 0;
        try {
            key = pipe_->submit(payload, to_ns(slo_s, "slo"), slo_s, tier, fo, done, fault, failure, deadline_ns, tokens);
        } catch (py::error_already_set& e) {
            // a later entry push raised: the request ended failed (its exception names the error)
            for (Done& d : done) {
                if (d.kind == EndKind::kFailure) d.value = e.value();
            }
            resolve(done);
            throw;
        }
        f.key = key;
        resolve(done);
        return fo;
    }

    py::object make_error(LiveFuture& f) {
        py::object raw = f.raw ? f.raw : py::none();
        return error_factory_(f.request_id(), f.ostate, f.stage, f.reason, f.kind, raw, f.queued, f.retry_after_s);
    }

    std::vector<py::object> scheds_;
    py::object join_;
    py::list exit_names_;
    py::object error_factory_;
    std::vector<py::object> push_hooks_, form_hooks_;
    std::unique_ptr<Pipe> pipe_;
};

py::object LiveFuture::exception_object() {
    if (state.load() != kError) return py::none();
    if (!value) value = owner.cast<LiveRuntime&>().make_error(*this);
    return value;
}

}  // namespace
}  // namespace pard::bind
