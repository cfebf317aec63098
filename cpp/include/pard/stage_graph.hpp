// pard/stage_graph.hpp — reachability over a pipeline's successor lists: the stages below each stage,
// and which stages lie on parallel branches (what StageScheduler::set_below / set_parallel take).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace pard {

// For each stage k of a pipeline given by its successor lists, every stage reachable from k (k
// excluded), ascending: what StageScheduler::set_below takes. Throws std::invalid_argument on a
// successor index out of range; terminates on a cycle too (the pipelines refuse cycles elsewhere).
inline std::vector<std::vector<int>> stages_below(const std::vector<std::vector<int>>& successors) {
    const std::size_t n = successors.size();
    std::vector<std::vector<int>> below(n);
    for (std::size_t k = 0; k < n; ++k) {
        std::vector<char> seen(n, 0);
        std::vector<int> todo(successors[k].begin(), successors[k].end());
        while (!todo.empty()) {
            const int j = todo.back();
            todo.pop_back();
            if (j < 0 || static_cast<std::size_t>(j) >= n) {
                throw std::invalid_argument("stages_below: successor " + std::to_string(j) + " is out of range");
            }
            if (seen[static_cast<std::size_t>(j)] || static_cast<std::size_t>(j) == k) continue;
            seen[static_cast<std::size_t>(j)] = 1;
            for (int x : successors[static_cast<std::size_t>(j)]) todo.push_back(x);
        }
        for (std::size_t j = 0; j < n; ++j) if (seen[j]) below[k].push_back(static_cast<int>(j));
    }
    return below;
}

// For each stage of a pipeline given by its successor lists, whether it lies on one of several parallel
// branches: some other stage is neither above nor below it. Every request visits every stage and ends
// when all its exits have finished, so two such stages hold copies of the same requests, and each copy
// one serves that the other drops is wasted, whether the branches meet at a join or at the exits. What
// StageScheduler::set_parallel takes (Policy::coherent_rank).
inline std::vector<char> parallel_branches(const std::vector<std::vector<int>>& successors) {
    const auto below = stages_below(successors);
    const std::size_t n = successors.size();
    std::vector<std::vector<char>> related(n, std::vector<char>(n, 0));  // above, below or itself
    for (std::size_t k = 0; k < n; ++k) {
        related[k][k] = 1;
        for (int j : below[k]) {
            related[k][static_cast<std::size_t>(j)] = 1;
            related[static_cast<std::size_t>(j)][k] = 1;
        }
    }
    std::vector<char> out(n, 0);
    for (std::size_t k = 0; k < n; ++k) {
        for (std::size_t j = 0; j < n && !out[k]; ++j) out[k] = related[k][j] ? 0 : 1;
    }
    return out;
}

}  // namespace pard
