// nvtx_range_test.cpp — what a tool attached through NVTX sees of hybridscope's ranges: one domain
// "hybridscope", its categories named, range names as strings registered once each, and push/pop
// pairs nested exactly as the scopes, with the category and colour of each range. The tool is
// tests/probes/nvtx/nvtx_injection.cpp, loaded by NVTX from NVTX_INJECTION64_PATH (set in main).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../../test_db.h"
#include "hybridscope/probes/nvtx.h"
#include "hybridscope/probes/range.h"
#include "hybridscope/probes/recorder.h"
#include "nvtx_log.h"

namespace hs::probes {
namespace {

std::vector<std::string> with_prefix(const std::vector<std::string>& lines, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& l : lines)
    if (l.rfind(prefix, 0) == 0) out.push_back(l);
  return out;
}

std::string color_of(Category c) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08X", nvtx_color(c));
  return hex;
}

// Runs a step's worth of nested ranges: step > gen > 2 x gen/decode (trace-only), then adv.
void run_ranges(StepTimings& timings) {
  HS_PROBE_RANGE(timings, "step", kStep);
  {
    HS_PROBE_RANGE(timings, "gen", kPhase);
    for (int i = 0; i < 2; ++i) {
      HS_PROBE_TRACE_RANGE(timings, "gen/decode", kPhase);
    }
  }
  { HS_PROBE_RANGE(timings, "adv", kPhase); }
}

TEST(NvtxRanges, ToolSeesTheDomainCategoriesRegisteredNamesAndNesting) {
  ASSERT_TRUE(nvtx_compiled_in());
  StepTimings timings;  // no recorder: NVTX alone consumes the trace-only ranges
  ASSERT_TRUE(nvtx_attached()) << "NVTX did not load " << HS_NVTX_INJECTION_PATH;
  ASSERT_NE(test::nvtx_injection_handle(), nullptr);
  const std::size_t before = test::nvtx_log().size();
  run_ranges(timings);
  const auto all = test::nvtx_log();
  const auto lines = test::nvtx_log_since(before);

  // One domain, created once, with every category named.
  EXPECT_EQ(with_prefix(all, "domain_create "), std::vector<std::string>{"domain_create hybridscope"});
  std::vector<std::string> categories;
  for (const Category c : kCategories)
    categories.push_back("category hybridscope " + std::to_string(static_cast<int>(c)) + " " + to_string(c));
  EXPECT_EQ(with_prefix(all, "category "), categories);

  const std::string phase = "2 " + color_of(Category::kPhase) + " registered ";
  const std::vector<std::string> expected_events = {
      "push hybridscope 1 " + color_of(Category::kStep) + " registered step",
      "push hybridscope " + phase + "gen",
      "push hybridscope " + phase + "gen/decode",
      "pop hybridscope",
      "push hybridscope " + phase + "gen/decode",
      "pop hybridscope",
      "pop hybridscope",
      "push hybridscope " + phase + "adv",
      "pop hybridscope",
      "pop hybridscope",
  };
  std::vector<std::string> events;
  for (const auto& l : lines)
    if (l.rfind("push ", 0) == 0 || l.rfind("pop ", 0) == 0) events.push_back(l);
  EXPECT_EQ(events, expected_events);
  // Timing still comes from the same guard; the trace-only range is not in it.
  EXPECT_GT(timings.seconds("gen"), 0.0);
  EXPECT_EQ(timings.seconds("gen/decode"), 0.0);
}

TEST(NvtxRanges, EachNameIsRegisteredOnceAcrossRangesGuardsAndAddresses) {
  StepTimings a;
  StepTimings b;
  for (int i = 0; i < 3; ++i) {
    run_ranges(a);
    run_ranges(b);
  }
  // The same name at another address (a literal of another translation unit) reuses the handle.
  static const char kCopy[] = "adv";
  { ScopedRange r(a, kCopy, Category::kPhase); }
  const auto registered = with_prefix(test::nvtx_log(), "register ");
  for (const char* name : {"step", "gen", "gen/decode", "adv"}) {
    EXPECT_EQ(std::count(registered.begin(), registered.end(), std::string("register hybridscope ") + name), 1)
        << name;
  }
  for (const auto& push : with_prefix(test::nvtx_log(), "push "))
    EXPECT_EQ(push.find(" ascii "), std::string::npos) << push;  // every name went as a registered string
}

TEST(NvtxRanges, RecorderAndToolSeeTheSameRanges) {
  const auto path = test::temp_db("nvtx", "both.sqlite");
  const std::size_t before = test::nvtx_log().size();
  {
    Recorder rec(path);
    rec.begin_run({});
    StepTimings timings(&rec);
    timings.begin_step(7);
    run_ranges(timings);
    rec.end_run(RunStatus::kCompleted);
  }
  const auto pushes = with_prefix(test::nvtx_log_since(before), "push ");
  const auto rows = test::query_rows(
      path, "SELECT s.value, r.depth, r.category_id FROM ranges r JOIN strings s ON s.id = r.name_id "
            "ORDER BY r.start_ns, r.depth");
  ASSERT_EQ(rows.size(), pushes.size());
  const std::vector<std::string> expected = {"step|0|1", "gen|1|2", "gen/decode|2|2", "gen/decode|2|2", "adv|1|2"};
  EXPECT_EQ(rows, expected);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string name = rows[i].substr(0, rows[i].find('|'));
    EXPECT_EQ(pushes[i].substr(pushes[i].rfind(' ') + 1), name);
  }
}

}  // namespace
}  // namespace hs::probes
