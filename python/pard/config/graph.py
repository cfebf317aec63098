"""Walks over a pipeline's stage graph, all iterative (a 1 000-stage chain must not hit Python's
recursion limit; issue 13), over a plain ``{stage name: [successor names]}`` mapping.

:class:`pard.config.PipelineSpec` validates its graph with :func:`find_cycle` and
:func:`count_paths` and answers ``downstream_paths`` with :func:`downstream_paths`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["MAX_PATHS", "find_cycle", "downstream_paths", "count_paths"]

#: Most entry-to-exit paths a pipeline may have. The planner evaluates the downstream terms along
#: every path of every stage (DESIGN §3.2, "DAG"), so the path count is a per-sync cost; a ladder of
#: k diamonds has 2^k paths, and 40 of them would never finish a single sync.
MAX_PATHS = 10_000

Graph = Mapping[str, Sequence[str]]


def find_cycle(succ: Graph) -> list[str]:
    """A cycle as a list of names (its first name repeated at the end), or [] if there is none.

    Depth-first search with an explicit stack, visiting roots and successors in declaration order.
    """
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for root in succ:
        if root in state:
            continue
        path: list[str] = [root]
        state[root] = 1
        stack: list[tuple[str, int]] = [(root, 0)]  # (node, index of its next successor to visit)
        while stack:
            n, i = stack[-1]
            nexts = succ[n]
            if i == len(nexts):
                stack.pop()
                path.pop()
                state[n] = 2
                continue
            stack[-1] = (n, i + 1)
            s = nexts[i]
            if state.get(s) == 1:
                return path[path.index(s):] + [s]
            if s not in state:
                state[s] = 1
                path.append(s)
                stack.append((s, 0))
    return []


def downstream_paths(succ: Graph, name: str) -> list[list[str]]:
    """Every path from ``name``'s successors to an exit stage (``name`` excluded), depth-first in
    successor order; ``[[]]`` for an exit stage. The graph must be acyclic."""
    if not succ[name]:
        return [[]]
    paths: list[list[str]] = []
    # each entry: the path so far (from a successor of `name`) and the index of its next branch
    stack: list[tuple[list[str], int]] = [([], 0)]
    while stack:
        path, i = stack[-1]
        nexts = succ[path[-1]] if path else succ[name]
        if i == len(nexts):
            stack.pop()
            continue
        stack[-1] = (path, i + 1)
        longer = [*path, nexts[i]]
        if succ[nexts[i]]:
            stack.append((longer, 0))
        else:
            paths.append(longer)
    return paths


def count_paths(succ: Graph, order: Sequence[str]) -> int:
    """Number of entry-to-exit paths, by dynamic programming over a topological ``order`` (linear)."""
    ways: dict[str, int] = {}
    for n in reversed(order):  # the paths from n to an exit
        ways[n] = sum(ways[s] for s in succ[n]) if succ[n] else 1
    targets = {s for nexts in succ.values() for s in nexts}
    return sum(ways[n] for n in order if n not in targets)
