// report_export.h — File → Export report…: the reports library's report (report.h, the one
// `hybridscope report` writes) of the runs selected in the viewer, built off the GUI thread. No Qt,
// never throws: a failure comes back as ReportExport::error, saying what went wrong.
//
// One selected run gives that run's report; two or more give every run's sections plus the
// comparison of the second against the first (the baseline: report.h holds one comparison). When
// every run comes from one database that holds a matrix, its newest matrix's summary is added, as
// `hybridscope report` adds it for such a file.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "hybridscope/reports/report.h"
#include "hybridscope/viewer/loaded_database.h"

namespace hs::viewer {

/// What an export did.
struct ReportExport {
  std::string path;         // the file written (or that was to be written)
  std::string format;       // "html", "pdf", "md", "csv" or "json"
  std::size_t runs = 0;     // run sections
  std::size_t findings = 0; // over the runs
  bool compared = false;    // a comparison section (two runs or more)
  bool matrix = false;      // a matrix summary section
  std::string error;        // empty: written

  bool ok() const { return error.empty(); }
};

/// The report format of an output file by its suffix: .html/.htm, .pdf, .md/.markdown, .csv,
/// .json. Throws std::invalid_argument naming the suffixes it knows.
reports::ReportFormat report_format_for_path(const std::string& path);

/// Analyses `runs` (each with its warm-up; RunRef::label becomes the run's label in the report),
/// diagnoses them and writes the report to `output_path` in the format its suffix names. The
/// switch's wire bound uses `comm_bench` when given, else comm_bench_beside() of each run's
/// database (as diagnose_run does). PDF needs Chromium (reports::write_report_pdf). Never throws.
ReportExport export_report(const std::vector<RunRef>& runs, const std::string& output_path,
                           const std::string& comm_bench = {});

}  // namespace hs::viewer
