"""The C++ scheduler stress test (cpp/tests/test_scheduler_stress.cpp), reached from pytest.

10^7 requests from 8 submitting threads, 4 batch-forming workers, random cancels and order flips
through one StageScheduler; every request must end in exactly one terminal state (DESIGN §4). CI
also runs it under TSan (10^6 and 10^7) and ASan/UBSan (10^6) through ctest.
"""

from __future__ import annotations

from pathlib import Path

from _cpp import run_standalone_cpp_test


def test_scheduler_stress_cpp(tmp_path: Path) -> None:
    """10^7 requests with random cancels through the C++ scheduler each end in exactly one terminal state."""
    run_standalone_cpp_test("test_scheduler_stress", tmp_path)
