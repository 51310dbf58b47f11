// trainer_layering_test.cpp — the trainer's groups (trainer/src/<group>/ and
// trainer/include/hybridscope/trainer/<group>/: config, data, dist, ...) include one another in
// one direction only: no cycle between groups, and every include goes down the order written in
// docs/architecture.md ("Layers of the trainer"). Read from the source tree's #include lines, so a
// new include that breaks the order fails here with the lines that break it.
//
// Private headers directly in trainer/src/ (torch_compat.h) belong to no group: any group may
// include them and they include no group.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = HS_SOURCE_DIR;
const fs::path kSrc = kRoot / "trainer" / "src";
const fs::path kInclude = kRoot / "trainer" / "include";
const fs::path kPublic = kInclude / "hybridscope" / "trainer";

/// One #include line that crosses from one group to another.
struct Include {
  std::string from, to;  // groups
  std::string where;     // file:line, relative to the repository
  std::string text;      // the include's path as written
};

std::string repo_path(const fs::path& p) { return fs::relative(p, kRoot).generic_string(); }

/// The group a file of the trainer belongs to ("" for a private header directly in trainer/src).
std::optional<std::string> group_of(const fs::path& file) {
  const auto rel_src = fs::relative(file, kSrc);
  if (!rel_src.empty() && *rel_src.begin() != "..") {
    if (std::distance(rel_src.begin(), rel_src.end()) == 1) return std::string{};
    return rel_src.begin()->string();
  }
  const auto rel_pub = fs::relative(file, kPublic);
  if (!rel_pub.empty() && *rel_pub.begin() != ".." && std::distance(rel_pub.begin(), rel_pub.end()) > 1)
    return rel_pub.begin()->string();
  return std::nullopt;  // not the trainer's (probes, the standard library, a third party)
}

/// Where a quoted include resolves, as the compiler looks: beside the file, then the trainer's
/// private (src/) and public (include/) directories.
std::optional<fs::path> resolve(const fs::path& file, const std::string& text) {
  for (const auto& base : {file.parent_path(), kSrc, kInclude}) {
    const auto candidate = (base / text).lexically_normal();
    if (fs::exists(candidate)) return candidate;
  }
  return std::nullopt;
}

struct Scan {
  std::vector<std::string> groups;       // the folders of trainer/src and the public headers
  std::vector<Include> crossing;         // includes from one group into another
  std::vector<Include> from_base;        // includes of a group from a header in trainer/src itself
  int includes = 0;                      // quoted includes seen
};

Scan scan_trainer() {
  Scan scan;
  std::set<std::string> groups;
  for (const auto& dir : {kSrc, kPublic})
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_directory()) groups.insert(entry.path().filename().string());
  scan.groups.assign(groups.begin(), groups.end());
  const std::regex include_line(R"(^\s*#\s*include\s*\"([^\"]+)\")");
  for (const auto& dir : {kSrc, kPublic}) {
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      const auto ext = entry.path().extension();
      if (ext != ".h" && ext != ".hpp" && ext != ".cpp" && ext != ".cc") continue;
      const auto from = group_of(entry.path());
      if (!from) continue;
      std::ifstream in(entry.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        if (!std::regex_search(line, m, include_line)) continue;
        ++scan.includes;
        const auto target = resolve(entry.path(), m[1].str());
        if (!target) continue;
        const auto to = group_of(*target);
        if (!to || to->empty() || *to == *from) continue;
        Include inc{*from, *to, repo_path(entry.path()) + ":" + std::to_string(n), m[1].str()};
        (from->empty() ? scan.from_base : scan.crossing).push_back(std::move(inc));
      }
    }
  }
  return scan;
}

/// The order docs/architecture.md gives, low to high: the groups of its line
/// "layers (low to high): a < b < c".
std::vector<std::string> documented_order() {
  std::ifstream in(kRoot / "docs" / "architecture.md");
  const std::string marker = "layers (low to high):";
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find(marker);
    if (at == std::string::npos) continue;
    std::vector<std::string> order;
    std::stringstream rest(line.substr(at + marker.size()));
    std::string item;
    while (std::getline(rest, item, '<')) {
      item.erase(std::remove_if(item.begin(), item.end(), [](char c) { return c == ' ' || c == '`'; }), item.end());
      if (!item.empty()) order.push_back(item);
    }
    return order;
  }
  return {};
}

/// A cycle of the group graph `includes` draws, as the groups in order (the first repeated at the
/// end), or empty when there is none. Depth-first; groups and edges visited in sorted order so the
/// same tree gives the same cycle.
std::vector<std::string> find_cycle(const std::vector<Include>& includes) {
  std::map<std::string, std::set<std::string>> next;
  for (const auto& inc : includes) next[inc.from].insert(inc.to);
  std::map<std::string, int> state;  // 0 unseen, 1 on the path, 2 done
  std::vector<std::string> path;
  std::vector<std::string> cycle;
  std::function<bool(const std::string&)> visit = [&](const std::string& g) {
    state[g] = 1;
    path.push_back(g);
    for (const auto& h : next[g]) {
      if (state[h] == 1) {
        cycle.assign(std::find(path.begin(), path.end(), h), path.end());
        cycle.push_back(h);
        return true;
      }
      if (state[h] == 0 && visit(h)) return true;
    }
    path.pop_back();
    state[g] = 2;
    return false;
  };
  for (const auto& [g, targets] : next)
    if (state[g] == 0 && visit(g)) return cycle;
  return {};
}

/// The cycle with the include lines that draw each of its edges.
std::string describe_cycle(const std::vector<std::string>& cycle, const std::vector<Include>& includes) {
  std::string out;
  for (std::size_t i = 0; i + 1 < cycle.size(); ++i) {
    out += cycle[i] + " -> " + cycle[i + 1] + ":\n";
    for (const auto& inc : includes)
      if (inc.from == cycle[i] && inc.to == cycle[i + 1]) out += "    " + inc.where + ": #include \"" + inc.text + "\"\n";
  }
  return out;
}

TEST(TrainerLayering, FindsACycleAndNamesTheIncludeLinesThatDrawIt) {
  // model -> rollout -> model (the PagedKvCache cycle this test was written against) beside an
  // edge that is no part of it.
  const std::vector<Include> includes{
      {"model", "rollout", "trainer/src/model/model.cpp:26", "hybridscope/trainer/rollout/rollout.h"},
      {"rollout", "model", "trainer/include/hybridscope/trainer/rollout/rollout.h:19",
       "hybridscope/trainer/model/model.h"},
      {"loop", "model", "trainer/src/loop/trainer.cpp:3", "hybridscope/trainer/model/model.h"}};
  const auto cycle = find_cycle(includes);
  ASSERT_EQ(cycle, (std::vector<std::string>{"model", "rollout", "model"}));
  const auto text = describe_cycle(cycle, includes);
  EXPECT_NE(text.find("model -> rollout:\n    trainer/src/model/model.cpp:26: #include "
                      "\"hybridscope/trainer/rollout/rollout.h\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rollout -> model:\n    trainer/include/hybridscope/trainer/rollout/rollout.h:19"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("loop"), std::string::npos) << text;
  EXPECT_TRUE(find_cycle({includes[0], includes[2]}).empty());
}

TEST(TrainerLayering, TheScanSeesTheTrainersIncludes) {
  // Guards the two tests below against passing on nothing: the groups are found and the loop's
  // includes of the model are seen.
  const auto scan = scan_trainer();
  EXPECT_GE(scan.groups.size(), 9u);
  EXPECT_GT(scan.includes, 250);
  EXPECT_TRUE(std::any_of(scan.crossing.begin(), scan.crossing.end(),
                          [](const Include& i) { return i.from == "loop" && i.to == "model"; }));
}

TEST(TrainerLayering, NoCycleBetweenGroups) {
  const auto scan = scan_trainer();
  const auto cycle = find_cycle(scan.crossing);
  EXPECT_TRUE(cycle.empty()) << "the trainer's groups include one another in a cycle; move the code both sides "
                                "need to the lower group (docs/architecture.md, \"Layers of the trainer\"):\n"
                             << describe_cycle(cycle, scan.crossing);
}

TEST(TrainerLayering, TheDocumentedOrderNamesEveryGroupOnce) {
  const auto order = documented_order();
  ASSERT_FALSE(order.empty()) << "docs/architecture.md has no line 'layers (low to high): a < b < ...'";
  auto sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, scan_trainer().groups) << "docs/architecture.md's layers are not the folders of trainer/src";
}

TEST(TrainerLayering, EveryIncludeGoesDownTheDocumentedOrder) {
  const auto order = documented_order();
  ASSERT_FALSE(order.empty());
  std::map<std::string, std::size_t> level;
  for (std::size_t i = 0; i < order.size(); ++i) level[order[i]] = i;
  const auto scan = scan_trainer();
  std::string upward;
  for (const auto& inc : scan.crossing) {
    if (!level.count(inc.from) || !level.count(inc.to)) continue;  // TheDocumentedOrderNamesEveryGroupOnce fails
    if (level[inc.to] > level[inc.from])
      upward += "    " + inc.from + " -> " + inc.to + "  " + inc.where + ": #include \"" + inc.text + "\"\n";
  }
  EXPECT_TRUE(upward.empty()) << "includes up the order of docs/architecture.md (a group includes only the groups "
                                 "before it):\n"
                              << upward;
  std::string base;
  for (const auto& inc : scan.from_base) base += "    " + inc.where + ": #include \"" + inc.text + "\"\n";
  EXPECT_TRUE(base.empty()) << "a private header directly in trainer/src (shared by every group) includes a group:\n"
                            << base;
}

}  // namespace
