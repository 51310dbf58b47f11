// reward.cpp — rule-based rewards, matching verl's verl/utils/reward_score/gsm8k.py.
//
// verl's strict extraction (the version with _SOLUTION_CLIP_CHARS = 300): keep the last 300
// characters of the response, re.findall(r"#### (\-?[0-9\.\,]+)"), take the LAST match, strip ','
// and '$'. (Older verl used re.search, i.e. the first match; current verl takes the last.)
// verl slices Python str (code points); we slice bytes, which is the same for the ASCII text the
// char tokenizer produces.
#include "hybridscope/trainer/rl/reward.h"

#include <regex>
#include <stdexcept>

namespace hs::trainer {
namespace {

constexpr std::size_t kSolutionClipChars = 300;

}  // namespace

std::optional<std::string> extract_gsm8k_answer(const std::string& solution_str) {
  // std::regex with ECMAScript grammar; the character class is verl's [0-9\.\,] with the
  // needless escapes dropped. Built once; matching on a const regex is thread-safe.
  static const std::regex kAnswer("#### (-?[0-9.,]+)");

  const std::size_t start =
      solution_str.size() > kSolutionClipChars ? solution_str.size() - kSolutionClipChars : 0;
  const auto first = solution_str.cbegin() + static_cast<std::ptrdiff_t>(start);

  std::optional<std::string> last;
  for (std::sregex_iterator it(first, solution_str.cend(), kAnswer), end; it != end; ++it) {
    last = (*it)[1].str();
  }
  if (!last) return std::nullopt;

  std::string answer;
  answer.reserve(last->size());
  for (char c : *last) {
    if (c != ',' && c != '$') answer += c;
  }
  return answer;
}

double gsm8k_compute_score(const std::string& solution_str, const std::string& ground_truth,
                           double format_score, double score) {
  const std::optional<std::string> answer = extract_gsm8k_answer(solution_str);
  if (!answer) return 0.0;
  return *answer == ground_truth ? score : format_score;
}

double compute_score(RewardRule rule, const std::string& /*data_source*/, const std::string& solution_str,
                     const std::string& ground_truth) {
  // verl's default_compute_score picks the rule from data_source ("openai/gsm8k" -> gsm8k); here
  // reward_model.rule names it, and gsm8k serves openai/gsm8k as well as hybridscope/* tasks,
  // whose targets follow GSM8K's "#### <answer>" convention.
  switch (rule) {
    case RewardRule::kGsm8k: return gsm8k_compute_score(solution_str, ground_truth);
  }
  throw std::logic_error("compute_score: a RewardRule outside the enum");
}

}  // namespace hs::trainer
