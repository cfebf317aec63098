// Bindings for the live runtime's hot path (pard/live_pipeline.hpp): the lists of LiveFuture's,
// LoopSink's, LiveWorker's and LivePipeline's methods. The future, its waiting and the runtime it
// belongs to are in live_future.hpp and live_runtime.hpp, the hand-off of ended requests to event
// loops in live_loop_sink.hpp, the fast-call submit in live_fast_submit.hpp; the rules live in the
// core headers. The Python side is python/pard/runtime/ (workers.py runs the executor, live.py
// builds the user's exceptions lazily).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compute_split_dict.hpp"
#include "live_fast_submit.hpp"
#include "live_future.hpp"
#include "live_loop_sink.hpp"
#include "live_runtime.hpp"
#include "register.hpp"
#include "seconds.hpp"

namespace py = pybind11;

namespace pard::bind {

void register_live(py::module_& m) {
    // Visible to Python's cycle collector: a done-callback or an awaiting coroutine that catches the
    // future's exception makes a cycle (exception -> traceback -> frame -> future -> exception), and a
    // type without tp_traverse keeps every such cycle for ever: a leak per dropped request.
    py::class_<LiveFuture>(m, "LiveFuture", "A request's future (pard.RequestFuture): resolved in C++ by the live pipeline.",
                           py::custom_type_setup(collectable_future))
        .def_property_readonly("request_id", &LiveFuture::request_id)
        .def_property_readonly("outcome_state", [](const LiveFuture& f) {
            const int s = f.state.load();
            return s == LiveFuture::kPending ? 0 : s == LiveFuture::kCancelled ? static_cast<int>(Outcome::kDropped) : f.ostate;
        }, "The request's outcome (an index into pard.outcomes.STATES) once done; 0 (pending) before.")
        .def("done", [](const LiveFuture& f) { return f.state.load() != LiveFuture::kPending; })
        .def("cancelled", [](const LiveFuture& f) { return f.state.load() == LiveFuture::kCancelled; })
        .def("running", [](const LiveFuture&) { return false; })
        .def("result", [](py::object self, py::object timeout) -> py::object {
                 auto& f = self.cast<LiveFuture&>();
                 f.wait(timeout);
                 switch (f.state.load()) {
                     case LiveFuture::kResult: return f.value;
                     case LiveFuture::kError: raise_object(f.exception_object());
                     case LiveFuture::kCancelled: raise_object(futures_module().attr("CancelledError")());
                     default: raise_object(py::module_::import("builtins").attr("TimeoutError")());
                 }
             },
             py::arg("timeout") = py::none(),
             "The output; raises pard.Dropped / Rejected / ExecutorError, CancelledError, or TimeoutError "
             "after timeout seconds (None: wait). Waits with the GIL released.")
        .def("exception", [](py::object self, py::object timeout) -> py::object {
                 auto& f = self.cast<LiveFuture&>();
                 f.wait(timeout);
                 switch (f.state.load()) {
                     case LiveFuture::kResult: return py::none();
                     case LiveFuture::kError: return f.exception_object();
                     case LiveFuture::kCancelled: raise_object(futures_module().attr("CancelledError")());
                     default: raise_object(py::module_::import("builtins").attr("TimeoutError")());
                 }
             },
             py::arg("timeout") = py::none())
        .def("cancel", [](py::object self) {
                 auto& f = self.cast<LiveFuture&>();
                 const int s = f.state.load();
                 if (s != LiveFuture::kPending) return s == LiveFuture::kCancelled;
                 auto& rt = f.owner.cast<LiveRuntime&>();
                 std::vector<Done> done;
                 const bool ok = rt.pipe().cancel(f.key, done);
                 rt.resolve(done);
                 return ok;
             },
             "Cancel the request unless it has ended or its batch has started (then False).")
        .def("add_done_callback", [](py::object self, py::object fn) {
                 auto& f = self.cast<LiveFuture&>();
                 if (f.state.load() != LiveFuture::kPending) {
                     LiveFuture::call_logged(fn, self);
                     return;
                 }
                 f.callbacks.push_back(std::move(fn));
             },
             py::arg("fn"), "Call fn(future) when the request ends (at once if it has); a raising fn is logged.")
        .def_property("_sync", [](const LiveFuture& f) { return f.sync ? f.sync : py::none(); },
                      [](LiveFuture& f, py::object v) { f.sync = std::move(v); })
        .def("set_result", [](const LiveFuture&, const py::object&) { throw_resolved_by_runtime("set_result"); })
        .def("set_exception", [](const LiveFuture&, const py::object&) { throw_resolved_by_runtime("set_exception"); })
        .def("set_running_or_notify_cancel", [](const LiveFuture&) { throw_resolved_by_runtime("set_running_or_notify_cancel"); })
        .def("__repr__", [](const LiveFuture& f) {
            static const char* names[] = {"pending", "finished", "failed", "cancelled"};
            return "<RequestFuture request_id=" + std::to_string(f.request_id()) + " " + names[f.state.load()] + ">";
        });

    py::class_<LoopSink>(m, "LoopSink", "Where ended requests wait for one event loop's next drain (live_loop_sink.hpp).",
                         py::custom_type_setup(collectable<LoopSink>))
        .def_property_readonly("waiting", [](const LoopSink& s) { return s.ready.size(); },
                               "Ended requests waiting for the loop's next drain.");
    m.def("loop_sink", &loop_sink, py::arg("loop"), "The LoopSink of event loop `loop` (made on first use).");
    m.def("loop_sink_count", [] { return py::len(loop_sinks()); }, "How many event loops have a LoopSink now.");
    py::class_<SinkWake>(m, "SinkWake", "One wake-up of a LoopSink's loop: calling it drains the sink.",
                         py::custom_type_setup(collectable<SinkWake>))
        .def("__call__", [](SinkWake& w) { w(); });

    py::class_<Pipe::Worker>(m, "LiveWorker", "One worker thread's batches (the running one, the one collected next).")
        .def_property_readonly("stage", [](const Pipe::Worker& w) { return w.stage; })
        .def_property_readonly("size", [](const Pipe::Worker& w) { return w.running.size(); })
        .def_property_readonly("next_size", [](const Pipe::Worker& w) { return w.has_next ? w.next.size() : 0; })
        .def_property_readonly("max_deadline_s", [](const Pipe::Worker& w) { return to_s(w.max_deadline_ns); })
        .def_property_readonly("delays", [](const Pipe::Worker& w) { return w.delays; });

    py::class_<Pipe::LlmWorker>(m, "LiveLlmWorker", "One LLM stage worker's running sequences (pard/live/llm_steps.hpp).")
        .def_property_readonly("stage", [](const Pipe::LlmWorker& w) { return w.stage; })
        .def_property_readonly("running", [](const Pipe::LlmWorker& w) {
            std::vector<std::uint64_t> keys;
            for (const auto& q : w.running) keys.push_back(q.r.id);
            return keys;
        }, "The keys of the sequences running after the last boundary.")
        .def_property_readonly("kv_used", [](const Pipe::LlmWorker& w) { return w.kv_used; },
                               "KV tokens the running sequences reserve (prompt + max_new each).")
        .def_property_readonly("delays", [](const Pipe::LlmWorker& w) { return w.delays; },
                               "Queueing delays (s) of the last boundary's joiners.");

    py::class_<LiveRuntime> live_cls(m, "LivePipeline", "The live runtime's per-request hot path (pard/live_pipeline.hpp).");
    live_cls
        .def(py::init<std::vector<py::object>, std::vector<std::vector<int>>, std::vector<std::vector<int>>,
                      std::vector<std::int64_t>, std::vector<double>, std::vector<int>, std::vector<int>, std::size_t,
                      py::object, py::list, py::object>(),
             py::kw_only(), py::arg("schedulers"), py::arg("successors"), py::arg("preds"), py::arg("max_queue"),
             py::arg("capacity_req_s"), py::arg("entries"), py::arg("exits"), py::arg("history"), py::arg("join"),
             py::arg("exit_names"), py::arg("error_factory"))
        .def("set_origin", [](LiveRuntime& r, double perf_counter_s) {
            r.pipe().set_origin_ns(static_cast<std::int64_t>(std::llround(perf_counter_s * 1e9)));
        })
        .def("now", [](LiveRuntime& r) { return to_s(r.pipe().now_ns()); })
        .def("worker", [](LiveRuntime&, int k) {
            auto w = std::make_unique<Pipe::Worker>();
            w->stage = k;
            return w;
        })
        .def("next_batch", [](LiveRuntime& r, Pipe::Worker& w) -> py::object {
                 std::vector<py::object> payloads;
                 std::vector<Done> done;
                 auto hook = [&r](int k) {
                     const py::object& h = r.form_hooks_[static_cast<std::size_t>(k)];
                     if (!h.is_none()) h(k);
                 };
                 while (true) {
                     bool go = false;
                     {
                         py::gil_scoped_release release;
                         go = r.pipe().next_batch_wait(w);
                     }
                     if (!go) return py::none();
                     try {
                         r.pipe().next_batch_take(w, payloads, done, hook);
                     } catch (...) {
                         r.resolve(done);
                         throw;
                     }
                     r.resolve(done);
                     if (!payloads.empty()) break;
                 }
                 py::list out(payloads.size());
                 for (std::size_t i = 0; i < payloads.size(); ++i) out[i] = std::move(payloads[i]);
                 return std::move(out);
             },
             "Wait (GIL released) for the stage's next batch; its payloads (a list), or None to stop.")
        .def("complete", [](LiveRuntime& r, Pipe::Worker& w, py::object outs, py::object err, double start_s, double end_s) {
                 std::vector<py::object> o;
                 const bool failed = !err.is_none();
                 if (!failed) {
                     for (auto item : outs) o.push_back(py::reinterpret_borrow<py::object>(item));
                 }
                 std::vector<Done> done;
                 r.pipe().complete(w, o, failed, err, to_ns(start_s, "start_s"), to_ns(end_s, "end_s"), done);
                 r.resolve(done);
             },
             py::arg("worker"), py::arg("outputs"), py::arg("error"), py::arg("start_s"), py::arg("end_s"),
             "The executor returned `outputs` for the worker's running batch (or raised `error`): route every "
             "request on and resolve the futures of those that ended.")
        .def("llm_worker", [](LiveRuntime& r, int k, int workers) {
                 if (k < 0 || static_cast<std::size_t>(k) >= r.pipe().n_stages() || !r.pipe().is_llm(k)) {
                     throw py::value_error("llm_worker: stage=" + std::to_string(k) + " is not an llm stage");
                 }
                 auto w = std::make_unique<Pipe::LlmWorker>();
                 w->stage = k;
                 w->workers = workers < 1 ? 1 : workers;
                 return w;
             },
             py::arg("stage"), py::arg("workers"))
        .def("llm_step", [](LiveRuntime& r, Pipe::LlmWorker& w, py::iterable finished, py::object err, double start_s,
                            double end_s, py::iterable refused) -> py::object {
                 std::vector<Pipe::LlmFinished> fin;
                 for (auto item : finished) {
                     auto t = py::reinterpret_borrow<py::tuple>(item);
                     fin.push_back(Pipe::LlmFinished{t[0].cast<std::uint64_t>(), py::reinterpret_borrow<py::object>(t[1])});
                 }
                 std::vector<Pipe::LlmRefused> ref;
                 for (auto item : refused) {
                     auto t = py::reinterpret_borrow<py::tuple>(item);
                     ref.push_back(Pipe::LlmRefused{t[0].cast<std::uint64_t>(), py::reinterpret_borrow<py::object>(t[1])});
                 }
                 const bool failed = !err.is_none();
                 std::vector<std::uint64_t> stops;
                 std::vector<Pipe::LlmJoiner> joins;
                 std::vector<Done> done;
                 r.pipe().llm_boundary(w, fin, ref, failed, err, to_ns(start_s, "start_s"), to_ns(end_s, "end_s"), stops, joins,
                                       done);
                 while (w.running.empty() && stops.empty()) {  // nothing runs, nothing to free: wait for work
                     r.resolve(done);
                     bool go = false;
                     {
                         py::gil_scoped_release release;
                         go = r.pipe().llm_wait(w);
                     }
                     if (!go) return py::none();
                     ref.clear();
                     r.pipe().llm_boundary(w, fin, ref, false, err, 0, 0, stops, joins, done);
                 }
                 r.resolve(done);
                 py::list j(joins.size());
                 for (std::size_t i = 0; i < joins.size(); ++i) {
                     j[i] = py::make_tuple(joins[i].key, std::move(joins[i].payload), joins[i].in_tokens, joins[i].max_new);
                 }
                 return py::make_tuple(py::cast(stops), std::move(j));
             },
             py::arg("worker"), py::arg("finished"), py::arg("error"), py::arg("start_s"), py::arg("end_s"),
             py::arg("refused") = py::tuple(),
             "An LLM stage worker's step boundary (pard/live/llm_steps.hpp): the step over [start_s, end_s] ended with "
             "`finished` ((key, output) pairs) done and `refused` ((key, exception) pairs: joiners the engine never "
             "took, each ends failed with its exception), or raised `error`. Returns (stops, joins): the keys to stop and "
             "(key, payload, in_tokens, max_new) per joiner; waits (GIL released) while nothing runs and nothing is "
             "queued; None to stop.")
        .def("llm_terms", [](LiveRuntime& r, int k, const std::vector<int>& workers, double mu, double service_rate,
                             double path_rate) {
                 if (workers.size() != r.pipe().n_stages()) throw py::value_error("llm_terms: one worker count per stage");
                 r.pipe().llm_terms(k, workers, mu, service_rate, path_rate);
                 return py::make_tuple(mu, service_rate, path_rate);
             },
             py::arg("stage"), py::arg("workers"), py::arg("mu"), py::arg("service_rate"), py::arg("path_rate"),
             "Stage k's (mu, service_rate, path_rate) with its own and the LLM stages' below token-based load "
             "terms (pard/live/llm_load.hpp), as the simulator publishes them; unchanged without an LLM stage.")
        .def("purge", [](LiveRuntime& r, int k, double now_s, double t_e_s) {
                 std::vector<Done> done;
                 r.pipe().purge(k, to_ns(now_s, "now_s"), to_ns(t_e_s, "expected_start_s"), done);
                 const std::size_t n = done.size();
                 r.resolve(done);
                 return n;
             },
             py::arg("stage"), py::arg("now_s"), py::arg("expected_start_s"),
             "Stage k's StageScheduler::purge for a batch expected at expected_start_s (no batch formed): "
             "end what it dropped and resolve their futures; returns how many (Triton #7512).")
        .def("cancel_all", [](LiveRuntime& r) {
            std::vector<Done> done;
            r.pipe().cancel_all(done);
            r.resolve(done);
        })
        .def("stop", [](LiveRuntime& r) { r.pipe().stop(); })
        .def("open_admission", [](LiveRuntime& r) { r.pipe().open_admission(); })
        .def("close_admission", [](LiveRuntime& r) { r.pipe().close_admission(); })
        .def("wait_idle", [](LiveRuntime& r, py::object until_s) {
                 const std::int64_t until = until_s.is_none() ? -1 : to_ns(until_s.cast<double>(), "until_s");
                 py::gil_scoped_release release;
                 return r.pipe().wait_idle(until);
             },
             py::arg("until_s") = py::none(), "Wait (GIL released) until nothing is in flight or until_s (runtime clock).")
        .def("mark_dead", [](LiveRuntime& r, int k, py::object info) { r.pipe().mark_dead(k, info); })
        .def("held_at", [](LiveRuntime& r, int k, Pipe::Worker* w) { return r.pipe().held_at(k, w); },
             py::arg("stage"), py::arg("worker") = nullptr)
        .def("fail_dead", [](LiveRuntime& r, std::uint64_t key, int k, py::object info) {
            std::vector<Done> done;
            r.pipe().fail(key, k, EndKind::kDead, info, done);
            r.resolve(done);
        })
        .def("counts", [](LiveRuntime& r) { return r.pipe().counts(); },
             "(submitted, pending, on_time, late, dropped, rejected, failed) at one moment.")
        .def("drop_counts", [](LiveRuntime& r) { return r.pipe().drop_counts(); })
        .def("compute_split", [](LiveRuntime& r) { return split_dict(r.pipe().compute_split()); },
             "Where the compute went, every request ever (pard/compute_split.hpp): {useful_s, wasted_s, "
             "unresolved_s (per stage, s), shed, shed_before_compute}.")
        .def("in_flight", [](LiveRuntime& r) { return r.pipe().in_flight(); })
        .def("outcomes", [](LiveRuntime& r) {
            auto o = r.pipe().outcomes();
            py::dict d;
            d["send_s"] = py::array_t<double>(static_cast<py::ssize_t>(o.send_s.size()), o.send_s.data());
            d["slo_s"] = py::array_t<double>(static_cast<py::ssize_t>(o.slo_s.size()), o.slo_s.data());
            d["tier"] = py::array_t<std::int32_t>(static_cast<py::ssize_t>(o.tier.size()), o.tier.data());
            d["state"] = py::array_t<std::int8_t>(static_cast<py::ssize_t>(o.state.size()), o.state.data());
            d["finish_s"] = py::array_t<double>(static_cast<py::ssize_t>(o.finish_s.size()), o.finish_s.data());
            d["drop_stage"] = py::array_t<std::int32_t>(static_cast<py::ssize_t>(o.drop_stage.size()), o.drop_stage.data());
            d["reason"] = py::array_t<std::int32_t>(static_cast<py::ssize_t>(o.reason.size()), o.reason.data());
            d["compute_s"] = py::array_t<double>(static_cast<py::ssize_t>(o.compute_s.size()), o.compute_s.data());
            d["request_id"] = py::array_t<std::int64_t>(static_cast<py::ssize_t>(o.rid.size()), o.rid.data());
            return d;
        })
        .def("queued", [](LiveRuntime& r, int k) { return r.pipe().queued_live(k); })
        .def("retry_after_s", [](LiveRuntime& r, int k) { return r.pipe().retry_after_s(k); })
        .def("door_finish_s", [](LiveRuntime& r, std::int32_t tier, std::size_t in_front) {
                 return to_s(r.pipe().door_finish_ns(tier, in_front));
             },
             py::arg("tier") = 0, py::arg("in_front") = 0,
             "The door test (pard/door.hpp): the estimated time (s, the runtime clock) at which a request of "
             "service tier `tier` arriving now would leave the pipeline, the latest over the entry stages, with "
             "`in_front` requests admitted ahead of it that have not reached the entry queues yet.")
        .def("take_stats", [](LiveRuntime& r, int k) {
            auto s = r.pipe().take_stats(k);
            py::dict d;
            auto f64 = [](const std::vector<double>& v) { return py::array_t<double>(static_cast<py::ssize_t>(v.size()), v.data()); };
            d["arrival_s"] = f64(s.arrival_s);
            d["qdelay_t_s"] = f64(s.qdelay_t_s);
            d["qdelay_s"] = f64(s.qdelay_s);
            d["batch_start_s"] = f64(s.batch_start_s);
            d["batch_duration_s"] = f64(s.batch_duration_s);
            d["batch_size"] = py::array_t<std::int64_t>(static_cast<py::ssize_t>(s.batch_size.size()), s.batch_size.data());
            d["batch_wait_s"] = f64(s.batch_wait_s);
            return d;
        })
        .def("log_batch", [](LiveRuntime& r, int k, double start_s, double duration_s, std::int64_t size, double wait_s) {
            r.pipe().log_batch(k, start_s, duration_s, size, wait_s);
        })
        .def("recent_batches", [](LiveRuntime& r, int k) { return r.pipe().recent_batches(k); })
        .def("recent_delays", [](LiveRuntime& r, int k) {
            auto v = r.pipe().recent_delays(k);
            return py::array_t<double>(static_cast<py::ssize_t>(v.size()), v.data());
        })
        .def("scheduler_s", [](LiveRuntime& r) { return to_s(r.pipe().scheduler_ns()); })
        .def("outcome_rows", [](LiveRuntime& r) { return r.pipe().outcome_rows(); })
        .def("set_push_hook", [](LiveRuntime& r, int k, py::object fn) { r.push_hooks_.at(static_cast<std::size_t>(k)) = std::move(fn); },
             "Test hook: fn(stage) runs before every push into stage's queue at submit (it may raise).")
        .def("set_form_hook", [](LiveRuntime& r, int k, py::object fn) { r.form_hooks_.at(static_cast<std::size_t>(k)) = std::move(fn); },
             "Test hook: fn(stage) runs before every batch formation at stage (it may raise or block).");
    // submit: the fast-call method above, bound as a method descriptor of the class
    py::object descr = py::reinterpret_steal<py::object>(
        PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(live_cls.ptr()), &fast_submit_def));
    if (!descr || PyObject_SetAttrString(live_cls.ptr(), "submit", descr.ptr()) != 0) throw py::error_already_set();
    // watch: the fast-call function of live_loop_sink.hpp, a plain module function
    py::object watch = py::reinterpret_steal<py::object>(PyCFunction_NewEx(&fast_watch_def, nullptr, m.attr("__name__").ptr()));
    if (!watch || PyObject_SetAttrString(m.ptr(), "watch", watch.ptr()) != 0) throw py::error_already_set();
}

}  // namespace pard::bind
