// pard/live/tokens.hpp — TokenBook: each in-flight request's tokens (LiveTokens) for a live pipeline with an
// LLM stage (DESIGN §3.8), beside the ledger's slots and indexed like them (pard/live/ledger.hpp: slot s
// lives in stripe s % kStripes, at local index s / kStripes). A pipeline without an LLM stage keeps the
// book off and never touches it, so its requests cost nothing more.
//
// Concurrency. Every access to slot s's entry holds the lock of s's stripe (the ledger's), the same lock
// under which the ledger opens, routes and ends the slot; chunks of one stripe grow under it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "pard/live/types.hpp"

namespace pard::live {

template <int Stripes>
class TokenBook {
public:
    static constexpr std::size_t kChunk = 256;  // entries per allocation, per stripe

    TokenBook() : chunks_(Stripes) {}
    TokenBook(const TokenBook&) = delete;
    TokenBook& operator=(const TokenBook&) = delete;

    // Turns the book on: set once, before the first submit.
    void enable() noexcept { on_ = true; }
    [[nodiscard]] bool on() const noexcept { return on_; }

    // Slot s's entry (its stripe locked), allocated on first use; zero until set.
    LiveTokens& at_locked(std::uint32_t s) {
        auto& chunks = chunks_[s % static_cast<std::uint32_t>(Stripes)];
        const std::size_t local = s / static_cast<std::uint32_t>(Stripes);
        while (chunks.size() <= local / kChunk) chunks.push_back(std::make_unique<LiveTokens[]>(kChunk));
        return chunks[local / kChunk][local % kChunk];
    }

private:
    bool on_ = false;
    std::vector<std::vector<std::unique_ptr<LiveTokens[]>>> chunks_;  // per stripe, its chunks
};

}  // namespace pard::live
