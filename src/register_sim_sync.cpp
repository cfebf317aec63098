// Bindings for the simulator's per-sync work (sim_recorder.hpp): SimRecorder and Simulator.sync, which
// runs one sync interval (the event loop, the recorder, the planner, the publish) in one call with the
// GIL released. pard.simulate drives them; the planner is register_planner.cpp's SyncPlanner.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pard/sim_recorder.hpp"
#include "pard/simulator.hpp"
#include "planner_handle.hpp"
#include "register.hpp"
#include "seconds.hpp"

namespace py = pybind11;

namespace pard::bind {
namespace {

template <class T>
py::array_t<T> vec_array(const std::vector<T>& v) {
    py::array_t<T> a(static_cast<py::ssize_t>(v.size()));
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
}

py::array_t<double> matrix(const std::vector<std::vector<double>>& rows, std::size_t width) {
    py::array_t<double> a({static_cast<py::ssize_t>(rows.size()), static_cast<py::ssize_t>(width)});
    double* p = a.mutable_data();
    for (const auto& r : rows) {
        std::copy(r.begin(), r.end(), p);
        p += width;
    }
    return a;
}

}  // namespace

void register_sim_sync(py::module_& m) {
    py::class_<SimRecorder>(m, "SimRecorder",
        "The run recorder's counters and per-second bins (sim_recorder.hpp); pard.recorder.RunRecorder wraps it. Private.")
        .def(py::init<double, std::vector<std::vector<double>>, std::int64_t>(), py::arg("origin_s"), py::arg("d_table"),
             py::arg("keep_s") = 0)
        .def("record_ns", [](SimRecorder& r, const py::list& stats, const std::vector<int>& serving, double t_prev,
                             double t) {
                 std::vector<StageStats> st;
                 for (const auto& d : stats) st.push_back(stats_from_ns(d.cast<py::dict>()));
                 r.record(st, serving, t_prev, t);
             },
             py::arg("stats"), py::arg("serving"), py::arg("t_prev"), py::arg("t"),
             "record() on statistics given as int64 ns arrays (as SyncPlanner.update_ns).")
        .def("record_s", [](SimRecorder& r, const py::list& stats, const std::vector<double>& serving, double t_prev,
                            double t) {
                 std::vector<StageStats> st;
                 for (const auto& d : stats) st.push_back(recorder_stats_from_seconds(d.cast<py::dict>()));
                 r.record(st, serving, t_prev, t);
             },
             py::arg("stats"), py::arg("serving"), py::arg("t_prev"), py::arg("t"),
             "record() on statistics given as float-second arrays, as the live runtime and Ray take them.")
        .def_property_readonly("bins", &SimRecorder::bins, "Per-second bins held now.")
        .def_property_readonly("base", &SimRecorder::base, "The absolute second (from origin_s) of bin 0.")
        .def("totals", [](const SimRecorder& r) {
            py::dict d;
            d["submitted"] = vec_array(r.submitted());
            d["executed"] = vec_array(r.executed());
            d["compute_s"] = vec_array(r.compute_s());
            d["nominal_s"] = vec_array(r.nominal_s());
            d["qsum"] = matrix(r.qsum(), r.bins());
            d["qcnt"] = matrix(r.qcnt(), r.bins());
            d["wsum"] = matrix(r.wsum(), r.bins());
            d["wdt"] = vec_array(r.wdt());
            d["base"] = r.base();
            d["used"] = r.used();
            d["carry"] = r.carry().empty() ? py::object(py::none()) : py::object(vec_array(r.carry()));
            return d;
        }, "Everything recorded: submitted, executed (ns,), compute_s, nominal_s (ns,), qsum, qcnt, wsum (ns, bins), "
           "wdt (bins,); base and used (the absolute seconds of bin 0 and one past the last written) and carry "
           "(the workers before bin 0, None before any trim).");

    py::class_<Simulator> sim = py::reinterpret_borrow<py::class_<Simulator>>(m.attr("Simulator"));
    sim.def("sync", [](Simulator& s, double t_prev, double t, SimRecorder& recorder, PySyncPlanner* planner) {
            if (recorder.num_stages() != s.num_stages() ||
                (planner != nullptr && planner->core->num_stages() != s.num_stages())) {
                throw std::invalid_argument("Simulator.sync: recorder and planner must have the simulator's " +
                                            std::to_string(s.num_stages()) + " stages");
            }
            const std::int64_t t_ns = to_ns(t, "t_s");
            bool more = false;
            {
                py::gil_scoped_release release;
                thread_local std::vector<StageStats> stats;
                thread_local std::vector<int> serving;
                more = s.run_until(t_ns);
                s.take_all_stats(stats);
                serving.resize(s.num_stages());
                for (std::size_t k = 0; k < serving.size(); ++k) serving[k] = s.workers(k);
                recorder.record(stats, serving, t_prev, t);
                if (planner != nullptr) {
                    const std::vector<SyncTerms>& terms = planner->core->update(t, stats, serving);
                    for (std::size_t k = 0; k < terms.size(); ++k) {
                        const SyncTerms& x = terms[k];
                        s.publish(k, PublishedTerms::from_seconds(x.downstream_s, x.mu, x.eps, x.queue_delay_s,
                                                                  x.admit_fraction, x.service_rate, x.duration_scale,
                                                                  x.path_rate, x.overload_downstream_s,
                                                                  x.floor_downstream_s, x.outrank_downstream_s));
                    }
                }
            }
            return more;
        },
        py::arg("t_prev_s"), py::arg("t_s"), py::arg("recorder"), py::arg("planner") = nullptr,
        "One sync interval in one call, GIL released: run_until(t_s), every stage's statistics into the "
        "recorder (interval (t_prev_s, t_s], the workers serving at t_s) and, given a planner, its update "
        "and publish() of every stage's terms. Returns run_until's value.")
        ;
}

}  // namespace pard::bind
