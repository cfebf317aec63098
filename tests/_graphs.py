"""Brute-force graph facts for the tests of ``_core.stages_below`` and ``_core.parallel_branches``: the
transitive closure of a pipeline's successor lists, and random DAGs to check them on."""

from __future__ import annotations

from hypothesis import strategies as st


def closure(successors: list[list[int]]) -> list[list[bool]]:
    """``reach[k][j]``: some path of successor edges leads from stage k to stage j (Floyd-Warshall)."""
    n = len(successors)
    reach = [[False] * n for _ in range(n)]
    for k in range(n):
        for j in successors[k]:
            reach[k][j] = True
    for m in range(n):
        for i in range(n):
            if reach[i][m]:
                for j in range(n):
                    reach[i][j] = reach[i][j] or reach[m][j]
    return reach


#: Random DAGs of 1..9 stages as successor lists (edges kept only from lower to higher index).
random_dags = st.integers(1, 9).flatmap(lambda n: st.lists(
    st.lists(st.integers(0, n - 1), max_size=4, unique=True), min_size=n, max_size=n)).map(
    lambda edges: [[j for j in out if j > k] for k, out in enumerate(edges)])
