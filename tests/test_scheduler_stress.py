"""The C++ scheduler stress test (cpp/tests/test_scheduler_stress.cpp), reached from pytest.

2 x 10^6 requests from 8 submitting threads, 4 batch-forming workers, random cancels and order flips
through one StageScheduler; every request must end in exactly one terminal state (DESIGN §4). The
binary's own default, 10^7, runs in CI's ctest under ASan/UBSan and TSan (there with 10^6 as well).
Here the count is lower because the test's 14 spinning threads slow down several-fold beside other
work on a 2-core machine.
"""

from __future__ import annotations

from pathlib import Path

from _cpp import run_standalone_cpp_test


def test_scheduler_stress_cpp(tmp_path: Path) -> None:
    """2 x 10^6 requests with random cancels through the C++ scheduler each end in exactly one terminal state."""
    run_standalone_cpp_test("test_scheduler_stress", tmp_path, args=("2000000",), timeout_s=900.0)
