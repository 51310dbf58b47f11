// report_writer.cpp — `hybridscope report -f FORMAT -o FILE`: the format's name and the one
// function that writes a report in any format to a file.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "hybridscope/reports/report.h"

namespace hs::reports {

ReportFormat parse_report_format(const std::string& name) {
  if (name == "html") return ReportFormat::kHtml;
  if (name == "pdf") return ReportFormat::kPdf;
  if (name == "md") return ReportFormat::kMarkdown;
  if (name == "csv") return ReportFormat::kCsv;
  if (name == "json") return ReportFormat::kJson;
  throw std::invalid_argument(fmt::format("unknown report format '{}': choose html, pdf, md, csv or json", name));
}

void write_report(const Report& report, ReportFormat format, const std::string& path) {
  const std::filesystem::path out(path);
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  if (format == ReportFormat::kPdf) return write_report_pdf(report, path);
  std::string text;
  switch (format) {
    case ReportFormat::kHtml: text = report_html(report); break;
    case ReportFormat::kMarkdown: text = report_markdown(report); break;
    case ReportFormat::kCsv: text = report_csv(report); break;
    case ReportFormat::kJson: text = report_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"; break;
    case ReportFormat::kPdf: break;
  }
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) throw std::runtime_error(fmt::format("cannot write the report to {}: {}", path, std::strerror(errno)));
}

}  // namespace hs::reports
