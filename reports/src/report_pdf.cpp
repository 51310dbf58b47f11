// report_pdf.cpp — the PDF report: the HTML report printed by headless Chromium
// (`--headless=new --print-to-pdf --generate-pdf-document-outline`), so that the PDF shows exactly
// what the HTML shows, with the HTML's print rules (charts and findings never split across pages)
// and its headings as the PDF's outline. Chromium is started with
// posix_spawn — no shell, so paths with spaces or quotes are passed as they are — in its own
// process group with a private profile directory, and killed with its group when it overruns the
// timeout. Which binary: $HS_CHROMIUM, else chromium, chromium-browser, google-chrome or
// google-chrome-stable on PATH.
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "hybridscope/reports/report.h"

extern char** environ;

namespace hs::reports {
namespace {

namespace fs = std::filesystem;

constexpr std::chrono::seconds kPrintTimeout{120};  // a report of a few MB prints in seconds
constexpr std::size_t kStderrTail = 2000;

bool executable(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

// $HS_CHROMIUM, else the first known name on PATH; empty when there is none.
std::string find_chromium() {
  if (const char* env = std::getenv("HS_CHROMIUM"); env && *env) {
    if (!executable(env))
      throw std::runtime_error(fmt::format("HS_CHROMIUM={} is not an executable file: point it at a Chromium or "
                                           "Chrome binary, or unset it to search PATH",
                                           env));
    return env;
  }
  const char* path = std::getenv("PATH");
  if (!path) return "";
  for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');)
      if (!dir.empty() && executable(fs::path(dir) / name)) return (fs::path(dir) / name).string();
  }
  return "";
}

// file:// URL of an absolute path, every byte outside RFC 3986's unreserved set and '/' escaped.
std::string file_url(const fs::path& path) {
  std::string url = "file://";
  for (const unsigned char ch : path.string()) {
    if (std::isalnum(ch) || ch == '/' || ch == '-' || ch == '.' || ch == '_' || ch == '~') url += static_cast<char>(ch);
    else url += fmt::format("%{:02X}", ch);
  }
  return url;
}

std::string tail_of_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > kStderrTail) text = "..." + text.substr(text.size() - kStderrTail);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.empty() ? "(no output on stderr)" : text;
}

// A private directory for the HTML, Chromium's profile and its stderr; removed on every path out.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "hs-report-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      throw std::runtime_error(fmt::format("cannot create a temporary directory under {}: {}",
                                           fs::temp_directory_path().string(), std::strerror(errno)));
    path_ = pattern;
  }
  // Removed with nftw, deepest first, not std::filesystem::remove_all: in a process that also
  // loads the PyPI wheel's libtorch.so (the hybridscope command), the dynamic linker binds
  // remove_all to libtorch's own copy, which crashes (tests/remove_tree.h).
  ~TempDir() {
    ::nftw(path_.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p); }, 16,
           FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Runs argv[0] with stdin and stdout on /dev/null and stderr into `stderr_path`; returns its wait
// status. Throws on spawn failure and on the timeout (after killing the process group).
int run_with_timeout(const std::vector<std::string>& args, const fs::path& stderr_path) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: the timeout kills its helpers too
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error(fmt::format("cannot start {}: {}", args[0], std::strerror(rc)));

  const auto deadline = std::chrono::steady_clock::now() + kPrintTimeout;
  int status = 0;
  for (;;) {
    // WNOWAIT: an exited browser stays a zombie, so its process group id cannot be reused before
    // the group's leftover helpers are killed below.
    siginfo_t info{};
    const int rc = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (rc == 0 && info.si_pid == pid) break;
    if (rc < 0 && errno != EINTR) throw std::runtime_error(fmt::format("waiting for {}: {}", args[0], std::strerror(errno)));
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      throw std::runtime_error(fmt::format("{} did not finish printing the report within {} s; its stderr: {}", args[0],
                                           kPrintTimeout.count(), tail_of_file(stderr_path)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-pid, SIGKILL);  // helpers (zygote, GPU process) that outlived the browser, if any
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

void write_report_pdf(const Report& report, const std::string& pdf_path) {
  const std::string chromium = find_chromium();
  if (chromium.empty())
    throw std::runtime_error(
        "cannot write a PDF report: no Chromium found (looked for $HS_CHROMIUM, then chromium, chromium-browser, "
        "google-chrome, google-chrome-stable on PATH); install it with scripts/install-deps.sh (Debian package "
        "chromium), or write -f html and print that");
  const fs::path out = fs::absolute(pdf_path);
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  std::error_code ec;
  fs::remove(out, ec);  // so that a stale file cannot pass for Chromium's output

  TempDir dir;
  const fs::path html = dir.path() / "report.html";
  {
    std::ofstream file(html, std::ios::binary);
    file << report_html(report);
    if (!file) throw std::runtime_error(fmt::format("cannot write {}: {}", html.string(), std::strerror(errno)));
  }
  const fs::path stderr_path = dir.path() / "chromium-stderr.txt";
  const std::vector<std::string> args = {chromium,
                                         "--headless=new",
                                         "--no-sandbox",
                                         "--disable-gpu",
                                         "--no-pdf-header-footer",
                                         // The h1/h2/h3 headings become the PDF's outline (bookmarks);
                                         // Chromium ≥ 121 (older ones ignore an unknown switch).
                                         "--generate-pdf-document-outline",
                                         "--no-first-run",
                                         "--no-default-browser-check",
                                         "--disable-extensions",
                                         "--user-data-dir=" + (dir.path() / "profile").string(),
                                         "--print-to-pdf=" + out.string(),
                                         file_url(html)};
  const int status = run_with_timeout(args, stderr_path);
  const bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!exited_ok || !fs::exists(out) || fs::file_size(out) == 0) {
    const std::string how = WIFEXITED(status)   ? fmt::format("exit status {}", WEXITSTATUS(status))
                            : WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status))
                                                  : std::string("unknown status");
    throw std::runtime_error(fmt::format("{} failed to print {} ({}{}); its stderr: {}", chromium, out.string(), how,
                                         exited_ok ? ", but wrote no PDF" : "", tail_of_file(stderr_path)));
  }
}

}  // namespace hs::reports
