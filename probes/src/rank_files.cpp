// rank_files.cpp — naming, listing and removing the per-rank run files (see rank_files.h).
#include "hybridscope/probes/rank_files.h"

#include <algorithm>
#include <filesystem>
#include <utility>

namespace hs::probes {

namespace {
namespace fs = std::filesystem;
constexpr const char* kRankSuffix = ".rank";
}  // namespace

std::string rank_file_path(const std::string& db_path, int rank) {
  return rank == 0 ? db_path : db_path + kRankSuffix + std::to_string(rank);
}

std::vector<std::string> rank_files(const std::string& db_path) {
  const fs::path db(db_path);
  const fs::path dir = db.parent_path().empty() ? fs::path(".") : db.parent_path();
  const std::string prefix = db.filename().string() + kRankSuffix;
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;  // RUN.sqlite.rank3-wal and the like
    found.emplace_back(std::stoi(digits), (db.parent_path() / name).string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [rank, path] : found) out.push_back(std::move(path));
  return out;
}

void remove_run_file(const std::string& path) noexcept {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-reserve"}) fs::remove(path + suffix, ec);
}

}  // namespace hs::probes
