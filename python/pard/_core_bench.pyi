# Hand-written stubs for the compiled module pard._core_bench: the C++-side timings bench/ and tests/
# use (src/bench/register_bench.cpp).  A test-only module built and installed beside pard._core; no
# pard module imports it.  Each function times its own loop in C++ with the GIL released.
from pard._core import Policy

def bench_depq(n: int, ops: int, end: str) -> float: ...     # ns per push+pop pair, in C++; end "min" | "max"
def bench_depq_vs_std(n: int, ops: int, end: str, rounds: int) -> dict[str, list[float]]: ...  # interleaved rounds
def bench_ring(ops: int, capacity: int) -> float: ...        # ns per push+pop pair, in C++, one thread
def bench_drop_decision(n: int) -> float: ...    # ns per Eq. 3b decision, timed in C++
def bench_form_batch(queue: int, max_batch: int, policy: Policy, rounds: int = 1) -> float: ...  # ns per request
