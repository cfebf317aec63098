// Bindings for the simulator's per-sync work in C++ (sync_planner.hpp, sim_recorder.hpp):
// SyncPlanner, SimRecorder and Simulator.sync, which runs one sync interval (the event loop, the
// recorder, the planner, the publish) in one call with the GIL released. python/pard/planner_native.py
// builds them; pard.simulate uses them where they cover the policy.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pard/sim_recorder.hpp"
#include "pard/simulator.hpp"
#include "pard/sync_planner.hpp"
#include "register.hpp"
#include "seconds.hpp"

namespace py = pybind11;

namespace pard::bind {
namespace {

// NumPy's bitgen_t (numpy/random/bitgen.h), the object behind BitGenerator.capsule.
struct NumpyBitgen {
    void* state;
    std::uint64_t (*next_uint64)(void*);
    std::uint32_t (*next_uint32)(void*);
    double (*next_double)(void*);
    std::uint64_t (*next_raw)(void*);
};

// A SyncPlanner and the numpy Generator whose bit generator it draws from (kept alive here).
struct PySyncPlanner {
    py::object generator;
    std::unique_ptr<SyncPlanner> core;
};

DownstreamMode mode_of(const std::string& m) {
    if (m == "none") return DownstreamMode::kNone;
    if (m == "sf") return DownstreamMode::kSf;
    if (m == "lower") return DownstreamMode::kLower;
    if (m == "upper") return DownstreamMode::kUpper;
    if (m == "full") return DownstreamMode::kFull;
    if (m == "busy") return DownstreamMode::kBusy;
    throw std::invalid_argument("SyncPlanner: mode='" + m + "' is not one of none, sf, lower, upper, full, busy");
}

std::vector<std::int64_t> int_vector(const py::handle& h) {
    auto a = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(h);
    if (!a) throw std::invalid_argument("SyncPlanner.update_ns: statistics must be integer arrays (ns)");
    return std::vector<std::int64_t>(a.data(), a.data() + a.size());
}

// One stage's statistics from a dict of int64 ns arrays (the test interface: the keys of StageStats).
StageStats stats_from_dict(const py::dict& d) {
    StageStats s;
    auto get = [&](const char* key, std::vector<std::int64_t>& out) {
        if (d.contains(key)) out = int_vector(d[key]);
    };
    get("arrival", s.arrival);
    get("qdelay_t", s.qdelay_t);
    get("qdelay", s.qdelay);
    get("batch_start", s.batch_start);
    get("batch_size", s.batch_size);
    get("batch_wait", s.batch_wait);
    get("batch_duration", s.batch_duration);
    if (d.contains("dropped")) s.dropped = d["dropped"].cast<std::int64_t>();
    if (d.contains("late")) s.late = d["late"].cast<std::int64_t>();
    return s;
}

py::list terms_list(const std::vector<SyncTerms>& terms) {
    py::list out;
    for (const SyncTerms& t : terms) {
        out.append(py::make_tuple(t.downstream_s, t.mu, t.eps, t.queue_delay_s, t.admit_fraction, t.service_rate,
                                  t.duration_scale, t.in_rate, t.path_rate, t.demand_rate, t.overload_downstream_s,
                                  t.floor_downstream_s, t.outrank_downstream_s));
    }
    return out;
}

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
    py::class_<PySyncPlanner>(m, "SyncPlanner",
        "The planner's per-sync arithmetic in C++ (Planner.update for the simulator); built by "
        "pard.planner_native.native_planner from a Python Planner. Private.")
        .def(py::init([](std::vector<std::vector<std::vector<int>>> paths, std::vector<std::vector<int>> parallel,
                         std::vector<std::vector<int>> below, std::vector<bool> entry, std::vector<double> max_batch,
                         std::vector<double> full_d, std::vector<std::vector<double>> d_table,
                         std::vector<std::vector<double>> pts_b, std::vector<std::vector<double>> pts_d,
                         std::vector<int> drawn, const std::string& mode, bool instant, bool correct_durations,
                         bool mu_at_capacity, bool adapt_window, double lam, double window_s,
                         std::int64_t samples, double cv_history_s, std::int64_t min_cv_intervals,
                         std::vector<double> constants, py::object generator, bool idle_batch, double half_life_s,
                         double prior_batches, std::vector<std::vector<int>> pace_below,
                         bool overload_upper, bool mu_at_capacity_entry) {
                 SyncPlannerConfig c;
                 c.paths = std::move(paths);
                 c.parallel = std::move(parallel);
                 c.below = std::move(below);
                 c.pace_below = std::move(pace_below);
                 c.entry = std::move(entry);
                 c.max_batch = std::move(max_batch);
                 c.full_d = std::move(full_d);
                 c.d_table = std::move(d_table);
                 c.pts_b = std::move(pts_b);
                 c.pts_d = std::move(pts_d);
                 c.drawn = std::move(drawn);
                 c.mode = mode_of(mode);
                 c.instant = instant;
                 c.correct_durations = correct_durations;
                 c.mu_at_capacity = mu_at_capacity;
                 c.mu_at_capacity_entry = mu_at_capacity_entry;
                 c.adapt_window = adapt_window;
                 c.lam = lam;
                 c.window_s = window_s;
                 c.samples = samples;
                 c.cv_history_s = cv_history_s;
                 c.min_cv_intervals = min_cv_intervals;
                 if (constants.size() != 3) {
                     throw std::invalid_argument("SyncPlanner: constants must be (scale_min, scale_max, precollected_wait)");
                 }
                 c.scale_min = constants[0];
                 c.scale_max = constants[1];
                 c.precollected_wait = constants[2];
                 c.idle_batch = idle_batch;
                 c.half_life_s = half_life_s;
                 c.prior_batches = prior_batches;
                 c.overload_upper = overload_upper;
                 py::object capsule = generator.attr("bit_generator").attr("capsule");
                 auto* bg = static_cast<NumpyBitgen*>(PyCapsule_GetPointer(capsule.ptr(), "BitGenerator"));
                 if (bg == nullptr) throw py::error_already_set();
                 npo::BitSource bits;
                 bits.state = bg->state;
                 bits.next_uint32 = bg->next_uint32;
                 bits.next_double = bg->next_double;
                 auto out = std::make_unique<PySyncPlanner>();
                 out->generator = std::move(generator);
                 out->core = std::make_unique<SyncPlanner>(std::move(c), bits);
                 return out;
             }),
             py::arg("paths"), py::arg("parallel"), py::arg("below"), py::arg("entry"), py::arg("max_batch"),
             py::arg("full_d"), py::arg("d_table"), py::arg("pts_b"), py::arg("pts_d"), py::arg("drawn"),
             py::arg("mode"), py::arg("instant"), py::arg("correct_durations"),
             py::arg("mu_at_capacity"), py::arg("adapt_window"), py::arg("lam"), py::arg("window_s"),
             py::arg("samples"), py::arg("cv_history_s"), py::arg("min_cv_intervals"), py::arg("constants"),
             py::arg("generator"), py::arg("idle_batch") = false, py::arg("half_life_s") = 2.5,
             py::arg("prior_batches") = 8.0,
             py::arg("pace_below") = std::vector<std::vector<int>>{}, py::arg("overload_upper") = false,
             py::arg("mu_at_capacity_entry") = true)
        .def("update_ns", [](PySyncPlanner& p, double now_s, const py::list& stats, const std::vector<int>& workers) {
                 std::vector<StageStats> st;
                 for (const auto& d : stats) st.push_back(stats_from_dict(d.cast<py::dict>()));
                 return terms_list(p.core->update(now_s, st, workers));
             },
             py::arg("now_s"), py::arg("stats"), py::arg("workers"),
             "Planner.update on statistics given as int64 ns arrays (keys arrival, qdelay_t, qdelay, batch_start, "
             "batch_size, batch_wait, batch_duration; ints dropped, late). Returns per stage (downstream_s, mu, "
             "eps, queue_delay_s, admit_fraction, service_rate, duration_scale, in_rate, path_rate, demand_rate, overload_downstream_s, floor_downstream_s, outrank_downstream_s).")
        .def("terms", [](const PySyncPlanner& p) { return terms_list(p.core->terms()); },
             "The last update's terms, as update_ns returns them ([] before the first).")
        .def("start", [](PySyncPlanner& p, double now_s) { p.core->start(now_s); }, py::arg("now_s"))
        .def("batch_counts", [](const PySyncPlanner& p) { return p.core->batch_counts(); },
             "DurationScale's batches seen per stage (correct_durations; zeros otherwise).")
        .def_property_readonly("lam", [](const PySyncPlanner& p) { return p.core->lam(); })
        .def_property_readonly("window_s", [](const PySyncPlanner& p) { return p.core->window_s(); });

    py::class_<SimRecorder>(m, "SimRecorder",
        "RunRecorder.record in C++ for the simulator (per-stage counters and per-second bins). Private.")
        .def(py::init<double, std::vector<std::vector<double>>>(), py::arg("origin_s"), py::arg("d_table"))
        .def("record_ns", [](SimRecorder& r, const py::list& stats, const std::vector<int>& serving, double t_prev,
                             double t) {
                 std::vector<StageStats> st;
                 for (const auto& d : stats) st.push_back(stats_from_dict(d.cast<py::dict>()));
                 r.record(st, serving, t_prev, t);
             },
             py::arg("stats"), py::arg("serving"), py::arg("t_prev"), py::arg("t"),
             "record() on statistics given as int64 ns arrays (as SyncPlanner.update_ns).")
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
            return d;
        }, "Everything recorded: submitted, executed (ns,), compute_s, nominal_s (ns,), qsum, qcnt, wsum (ns, bins), wdt (bins,).");

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
