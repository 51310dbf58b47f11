// kineto_events.cpp — the streaming reader of Kineto traces (see kineto_events.h).
#include "kineto_events.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <istream>
#include <memory>
#include <streambuf>
#include <vector>

#include <nlohmann/json.hpp>

#include "hybridscope/importer/phase_map.h"

namespace hs::importer::detail {

namespace {

// A std::streambuf over gzread: reads .json.gz and plain .json alike (zlib passes a file that is
// not gzip through unchanged). 1 MiB at a time.
class GzStreamBuf : public std::streambuf {
 public:
  explicit GzStreamBuf(const std::string& path) : buffer_(1 << 20) {
    file_ = gzopen(path.c_str(), "rb");
    if (!file_) throw ImportError("cannot open the trace " + path);
    gzbuffer(file_, 1 << 20);
  }
  ~GzStreamBuf() override {
    if (file_) gzclose(file_);
  }
  GzStreamBuf(const GzStreamBuf&) = delete;
  GzStreamBuf& operator=(const GzStreamBuf&) = delete;
  std::int64_t bytes_read() const { return total_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    if (n <= 0) return traits_type::eof();
    total_ += n;
    setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  gzFile file_ = nullptr;
  std::vector<char> buffer_;
  std::int64_t total_ = 0;
};

// Depths: 1 the top-level object, 2 traceEvents' array (or an object under the top level), 3 an
// event, 4 its args, 5 an array inside args (grid, block).
class Handler : public nlohmann::json_sax<nlohmann::json> {
 public:
  Handler(const std::function<void(const TraceEvent&)>& on_event, TraceHeader& header)
      : on_event_(on_event), header_(header) {}

  bool null() override { return scalar_done(); }
  bool boolean(bool) override { return scalar_done(); }
  bool number_integer(number_integer_t v) override { return integer(static_cast<std::int64_t>(v), nullptr); }
  bool number_unsigned(number_unsigned_t v) override { return integer(static_cast<std::int64_t>(v), nullptr); }
  bool number_float(number_float_t v, const string_t& text) override {
    return integer(static_cast<std::int64_t>(v), &text);
  }
  bool string(string_t& v) override {
    if (in_event() && depth_ == 3) {
      if (key_ == "ph") ev_.ph = v.empty() ? 0 : v[0];
      else if (key_ == "cat") ev_.cat = v;
      else if (key_ == "name") ev_.name = v;
      else if (key_ == "pid") ev_.pid = digits_of(v);
      else if (key_ == "tid") ev_.tid = digits_of(v);
      else if (key_ == "ts") ev_.ts_ns = micros_text_to_ns(v), ev_.has_ts = true;
    } else if (in_event() && depth_ == 4) {
      if (key_ == "Collective name") ev_.collective = v;
      else if (key_ == "dtype") ev_.dtype = v;
      else if (key_ == "Process Group Name") ev_.pg_name = v;
      else if (key_ == "Process Group Description") ev_.pg_desc = v;
      else if (key_ == "name") ev_.arg_name = v;
    } else if (in_distributed() && depth_ == 2 && key_ == "backend") {
      header_.backend = v;
    }
    return scalar_done();
  }
  bool binary(binary_t&) override { return scalar_done(); }

  bool start_object(std::size_t) override {
    ++depth_;
    if (depth_ == 2 && section_ == Section::kNone) {
      section_ = key_ == "distributedInfo" ? Section::kDistributed : Section::kOther;
    }
    if (depth_ == 3 && section_ == Section::kEvents) ev_.clear();
    if (depth_ == 4 && in_event() && key_ != "args") skip_depth_ = 4;
    path_key_.push_back(key_);
    key_.clear();
    return true;
  }
  bool end_object() override {
    if (depth_ == 3 && section_ == Section::kEvents) {
      ++header_.events;
      on_event_(ev_);
    }
    --depth_;
    if (depth_ == 1 && section_ != Section::kEvents) section_ = Section::kNone;
    if (skip_depth_ > depth_) skip_depth_ = 0;
    key_ = path_key_.back();
    path_key_.pop_back();
    array_index_ = -1;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    if (depth_ == 1) section_ = Section::kEvents, depth_ = 2, top_array_ = true;  // a bare array of events
    else if (depth_ == 2 && key_ == "traceEvents") section_ = Section::kEvents;
    else if (depth_ == 2) section_ = Section::kOther;
    path_key_.push_back(key_);
    array_index_ = 0;
    return true;
  }
  bool end_array() override {
    if (top_array_ && depth_ == 2) {
      depth_ = 0;
      section_ = Section::kNone;
      return true;
    }
    --depth_;
    if (depth_ == 1) section_ = Section::kNone;
    key_ = path_key_.back();
    path_key_.pop_back();
    array_index_ = -1;
    return true;
  }
  bool key(string_t& k) override {
    key_ = k;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = "offset " + std::to_string(position) + ": " + e.what();
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  enum class Section { kNone, kEvents, kDistributed, kOther };
  bool in_event() const { return section_ == Section::kEvents && depth_ >= 3 && skip_depth_ == 0; }
  bool in_distributed() const { return section_ == Section::kDistributed; }

  bool scalar_done() {
    if (array_index_ >= 0) ++array_index_;
    return true;
  }

  static std::int64_t digits_of(const std::string& s) {
    std::int64_t v = 0;
    bool any = false;
    for (char c : s)
      if (c >= '0' && c <= '9') v = v * 10 + (c - '0'), any = true;
    return any ? v : -1;
  }

  bool integer(std::int64_t v, const std::string* text) {
    if (in_event() && depth_ == 3) {
      if (key_ == "ts") ev_.ts_ns = text ? micros_text_to_ns(*text) : v * 1000, ev_.has_ts = true;
      else if (key_ == "dur") ev_.dur_ns = text ? micros_text_to_ns(*text) : v * 1000, ev_.has_dur = true;
      else if (key_ == "pid") ev_.pid = v;
      else if (key_ == "tid") ev_.tid = v;
    } else if (in_event() && depth_ == 4) {
      const std::string& k = key_;
      if (k == "External id") ev_.external_id = v;
      else if (k == "correlation") ev_.correlation = v;
      else if (k == "device") ev_.device = v;
      else if (k == "stream") ev_.stream = v;
      else if (k == "context") ev_.context = v;
      else if (k == "bytes" || k == "Bytes") ev_.bytes = v;
      else if (k == "cbid") ev_.cbid = v;
      else if (k == "registers per thread") ev_.registers = v;
      else if (k == "shared memory") ev_.shared_memory = v;
      else if (k == "In msg nelems") ev_.in_nelems = v;
      else if (k == "Out msg nelems") ev_.out_nelems = v;
      else if (k == "Group size") ev_.group_size = v;
      else if (k == "Total Allocated") ev_.total_allocated = v;
      else if (k == "Total Reserved") ev_.total_reserved = v;
      else if (k == "Device Type") ev_.device_type = v;
      else if (k == "Device Id") ev_.device_id = v;
    } else if (in_event() && depth_ == 5 && array_index_ >= 0 && array_index_ < 3) {
      const std::string& k = path_key_.back();
      if (k == "grid") ev_.grid[array_index_] = v;
      else if (k == "block") ev_.block[array_index_] = v;
    } else if (depth_ == 1 && key_ == "baseTimeNanoseconds") {
      header_.base_time_ns = text ? std::strtoll(text->c_str(), nullptr, 10) : v;
    } else if (in_distributed() && depth_ == 2) {
      if (key_ == "rank") header_.rank = v;
      else if (key_ == "world_size") header_.world_size = v;
    }
    return scalar_done();
  }

  const std::function<void(const TraceEvent&)>& on_event_;
  TraceHeader& header_;
  TraceEvent ev_;
  std::string key_;
  std::vector<std::string> path_key_;  // the key each open container was opened under
  int depth_ = 0;
  int skip_depth_ = 0;  // an object inside an event other than args: skipped
  int array_index_ = -1;
  bool top_array_ = false;
  Section section_ = Section::kNone;
  std::string error_;
};

}  // namespace

void TraceEvent::clear() {
  ph = 0;
  cat.clear();
  name.clear();
  pid = tid = -1;
  ts_ns = dur_ns = 0;
  has_ts = has_dur = false;
  external_id = correlation = device = stream = context = bytes = cbid = -1;
  for (int i = 0; i < 3; ++i) grid[i] = block[i] = 0;
  registers = shared_memory = 0;
  collective.clear();
  dtype.clear();
  pg_name.clear();
  pg_desc.clear();
  in_nelems = out_nelems = group_size = -1;
  total_allocated = total_reserved = device_type = device_id = -1;
  arg_name.clear();
}

std::int64_t micros_text_to_ns(const std::string& text) {
  // [-]digits[.digits][e...]: the exponent form (a double's text) falls back to the double.
  if (text.find_first_of("eE") != std::string::npos) return static_cast<std::int64_t>(std::llround(std::strtod(text.c_str(), nullptr) * 1000.0));
  std::size_t i = 0;
  bool negative = false;
  if (i < text.size() && text[i] == '-') negative = true, ++i;
  std::int64_t whole = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) whole = whole * 10 + (text[i] - '0');
  std::int64_t frac = 0;
  int digits = 0;
  bool round_up = false;
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (digits < 3) frac = frac * 10 + (text[i] - '0'), ++digits;
      else if (digits == 3) round_up = text[i] >= '5', ++digits;
    }
  }
  for (int d = std::min(digits, 3); d < 3; ++d) frac *= 10;
  const std::int64_t ns = whole * 1000 + frac + (round_up ? 1 : 0);
  return negative ? -ns : ns;
}

TraceHeader read_kineto_trace(const std::string& path, const std::function<void(const TraceEvent&)>& on_event) {
  GzStreamBuf buf(path);
  std::istream in(&buf);
  TraceHeader header;
  Handler handler(on_event, header);
  const bool ok = nlohmann::json::sax_parse(in, &handler, nlohmann::json::input_format_t::json, /*strict=*/false);
  header.bytes_read = buf.bytes_read();
  if (!ok) throw ImportError("the trace " + path + " is not valid JSON (" + handler.error() + ")");
  return header;
}

}  // namespace hs::importer::detail
