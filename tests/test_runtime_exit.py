"""A script that exits with a Runtime still open ends cleanly (exit 0), its threads joined at exit.

Before the exit hook (pard.runtime.facade._close_at_exit) the interpreter's finalization killed the
runtime's daemon threads inside the C++ core and the process aborted (exit 134) on every such exit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent("""
    import sys, time, numpy as np, pard
    spec = pard.PipelineSpec(name="w", slo=5.0, stages=[pard.StageSpec(name="a", profile={1: 0.001}, max_batch=4, workers=2)])
    if sys.argv[1] == "many":  # 3 000 idle workers exiting at once: stopped, they end one by one (seconds)
        stages = [pard.StageSpec(name=n, profile={1: 0.001, 8: 0.004}, max_batch=8, successors=s)
                  for n, s in (("a", ["b"]), ("b", ["c"]), ("c", []))]
        spec = pard.PipelineSpec(name="m", slo=0.2, stages=stages)
        ident = lambda b: list(b)
        many = pard.Runtime(spec, {"a": ident, "b": ident, "c": ident}, workers={"a": 1000, "b": 1000, "c": 1000})
    else:
        rt = pard.Runtime(spec, {"a": lambda xs: xs})
        assert [f.result() .sum() for f in [rt.submit(np.ones(3)) for _ in range(10)]] == [3.0] * 10
    if sys.argv[1] == "pending":  # a second runtime with batches still queued and running at exit
        slow = pard.Runtime(spec, {"a": lambda xs: (time.sleep(0.3), xs)[1]})
        futures = [slow.submit(np.ones(3)) for _ in range(20)]
    if sys.argv[1] == "unused":
        idle = pard.Runtime(spec, {"a": lambda xs: xs})
    print("exiting without close", flush=True)
""")


@pytest.mark.parametrize("case", ["used", "pending", "unused", "many"])
def test_exit_without_close_is_clean(tmp_path: Path, case: str) -> None:
    script = tmp_path / "exit.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, str(script), case], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "exiting without close" in done.stdout and "terminate called" not in done.stderr


def test_a_thread_the_os_refuses_is_a_clear_error_and_the_started_ones_are_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runtime.start when the OS refuses its 3rd thread: RuntimeStateError naming the workers, and the two
    threads already started are stopped and joined (none left alive), so the process can exit."""
    import threading

    import pard

    real_start = threading.Thread.start
    started: list[threading.Thread] = []

    def start(self: threading.Thread) -> None:
        if self.name.startswith("pard-") and len(started) == 2:
            raise RuntimeError("can't start new thread")
        real_start(self)
        if self.name.startswith("pard-"):
            started.append(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    spec = pard.PipelineSpec(name="w", slo=1.0, stages=[pard.StageSpec(name="a", profile={1: 0.001}, max_batch=4, workers=5)])
    with pytest.raises(pard.RuntimeStateError, match=r"5 workers in all.*can't start new thread"):
        pard.Runtime(spec, {"a": lambda xs: xs})
    assert len(started) == 2 and not any(t.is_alive() for t in started)
