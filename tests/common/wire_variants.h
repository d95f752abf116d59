// Inputs for comparing a hand-written protobuf wire reader with protobuf's own parser.
#ifndef FITLEDGER_TESTS_COMMON_WIRE_VARIANTS_H_
#define FITLEDGER_TESTS_COMMON_WIRE_VARIANTS_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace fitledger::testing {

// Every prefix of `bytes` (bytes.size() + 1 of them, shortest first), then `rounds` copies of it
// with 1-3 bytes replaced at random. Seeded: the same inputs on every run.
inline std::vector<std::string> PrefixesAndMutations(const std::string& bytes, int rounds,
                                                     uint32_t seed) {
  std::vector<std::string> out;
  out.reserve(bytes.size() + 1 + rounds);
  for (size_t n = 0; n <= bytes.size(); ++n) out.push_back(bytes.substr(0, n));
  std::mt19937 random(seed);
  for (int round = 0; round < rounds && !bytes.empty(); ++round) {
    std::string mutated = bytes;
    const int edits = 1 + static_cast<int>(random() % 3);
    for (int e = 0; e < edits; ++e) {
      mutated[random() % mutated.size()] = static_cast<char>(random() % 256);
    }
    out.push_back(std::move(mutated));
  }
  return out;
}

}  // namespace fitledger::testing

#endif  // FITLEDGER_TESTS_COMMON_WIRE_VARIANTS_H_
