#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace ocular {
namespace {

TEST(Sampler, GreedyTakesFirstMaximum) {
  std::vector<float> l = {0.1f, 3.0f, -1.0f, 3.0f};
  Sampler s({});
  EXPECT_EQ(s.Next(l.data(), 4), 1);
}

// How often one Sampler of `p` draws each id in `n` draws over `logits`.
std::map<int, int> Draws(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::map<int, int> seen;
  for (int i = 0; i < n; ++i) ++seen[s.Next(logits.data(), static_cast<int>(logits.size()))];
  return seen;
}

TEST(Sampler, SuppressedIdsAreNeverChosen) {
  std::vector<float> l = {0.1f, 0.2f, 9.0f};
  SamplingParams p;
  p.suppress_from = 2;
  EXPECT_EQ(Sampler(p).Next(l.data(), 3), 1);
  p.temperature = 1.0f;
  EXPECT_EQ(Draws(p, l, 100).count(2), 0u);
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  EXPECT_EQ(Draws(p, {0.5f, 0.4f, 0.6f}, 50), (std::map<int, int>{{2, 50}}));
}

TEST(Sampler, TopPKeepsSmallestNucleus) {
  // probs ~ {0.665, 0.245, 0.09}: top_p 0.6 keeps only id 0; 0.8 keeps ids 0 and 1.
  std::vector<float> l = {2.0f, 1.0f, 0.0f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.6f;
  EXPECT_EQ(Draws(p, l, 50), (std::map<int, int>{{0, 50}}));
  p.top_p = 0.8f;
  std::map<int, int> seen = Draws(p, l, 400);
  EXPECT_EQ(seen.count(2), 0u);
  EXPECT_GT(seen[1], 50);
}

TEST(Sampler, SameSeedSameSequenceAndFrequenciesFollowSoftmax) {
  std::vector<float> l = {0.0f, std::log(3.0f)};  // p = 1/4, 3/4
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  Sampler a(p), b(p);
  int ones = 0;
  for (int i = 0; i < 4000; ++i) {
    int x = a.Next(l.data(), 2);
    EXPECT_EQ(x, b.Next(l.data(), 2));
    ones += x;
  }
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

// A constraint mask removes ids before selection: greedy takes the best allowed id, top-k
// counts allowed ids only, and nothing allowed returns -1.
TEST(Sampler, MaskRemovesIdsBeforeSelection) {
  std::vector<float> l = {5.0f, 1.0f, 4.0f, 3.0f, 2.0f};
  const uint32_t odd = 0b01010, none = 0, three = 0b01000;
  SamplingParams greedy;
  EXPECT_EQ(Sampler(greedy).Next(l.data(), 5, &odd), 3);
  EXPECT_EQ(Sampler(greedy).Next(l.data(), 5, &none), -1);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 1;
  Sampler top1(p);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(top1.Next(l.data(), 5, &odd), 3);
  p.top_k = 0;
  Sampler any(p);
  std::map<int, int> seen;
  for (int i = 0; i < 400; ++i) ++seen[any.Next(l.data(), 5, &odd)];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[1], 0);
  EXPECT_EQ(Sampler(p).Next(l.data(), 5, &three), 3);
}

}  // namespace
}  // namespace ocular
