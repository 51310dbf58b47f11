// table_rows.h — private to hs_reports: which column of each described table fills which member of
// RunDatabase's row structs (run_database.h), by name. RunDatabase's readers generate their SELECTs
// from these lists and schema.h's description (table_reader.h); a row struct with a member that no
// field names keeps its default, so a column the schema gains is read only once a field names it.
// Rows whose reading needs more than a member (a switch's id, a matrix cell's JSON lists, a
// kernel's grid) add their fields where they are read.
#pragma once

#include <string>
#include <tuple>
#include <utility>

#include "hybridscope/reports/run_database.h"
#include "table_reader.h"

namespace hs::reports::detail {

/// runs: the columns a report needs (config_yaml is read on demand: RunDatabase::config_yaml).
inline auto run_fields() {
  using R = RunSummary;
  return std::make_tuple(field("id", &R::id), field("name", &R::name), field("status", &R::status),
                         field("status_message", &R::status_message), field("host", &R::host),
                         field("command_line", &R::command_line), field("hybridscope_version", &R::hybridscope_version),
                         field("world_size", &R::world_size), field("start_unix_ns", &R::start_unix_ns),
                         field("end_unix_ns", &R::end_unix_ns), field("clock_offset_ns", &R::clock_offset_ns),
                         field("source", &R::source));
}

/// config: (key, value).
inline auto config_fields() {
  using R = std::pair<std::string, std::string>;
  return std::make_tuple(field("key", &R::first), field("value", &R::second));
}

/// ranges, names resolved.
inline auto range_fields() {
  using R = RangeRow;
  return std::make_tuple(field("rank", &R::rank), field("tid", &R::tid), field("step", &R::step),
                         field("name_id.value", &R::name), field("category_id.name", &R::category),
                         field("depth", &R::depth), field("start_ns", &R::start_ns), field("end_ns", &R::end_ns),
                         field("batch_size", &R::batch_size), field("context_len", &R::context_len));
}

/// step_metrics, names resolved.
inline auto step_metric_fields() {
  using R = StepMetric;
  return std::make_tuple(field("step", &R::step), field("name_id.value", &R::name), field("value", &R::value));
}

/// comm_ops, names resolved.
inline auto comm_op_fields() {
  using R = CommOpRow;
  return std::make_tuple(field("rank", &R::rank), field("step", &R::step), field("op_id.value", &R::op),
                         field("group_id.value", &R::group), field("group_size", &R::group_size),
                         field("bytes", &R::bytes), field("dtype_id.value", &R::dtype), field("start_ns", &R::start_ns),
                         field("end_ns", &R::end_ns), field("algbw_gbps", &R::algbw_gbps),
                         field("busbw_gbps", &R::busbw_gbps), field("posted_ns", &R::posted_ns),
                         field("wait_start_ns", &R::wait_start_ns), field("wait_end_ns", &R::wait_end_ns));
}

/// switches without their id and components (RunDatabase::switches reads those).
inline auto switch_fields() {
  using R = SwitchRow;
  return std::make_tuple(field("rank", &R::rank), field("step", &R::step), field("direction_id.value", &R::direction),
                         field("start_ns", &R::start_ns), field("end_ns", &R::end_ns),
                         field("bytes_sent", &R::bytes_sent), field("bytes_received", &R::bytes_received),
                         field("bytes_local", &R::bytes_local));
}

/// switch_components: (name, duration ns).
inline auto switch_component_fields() {
  using R = std::pair<std::string, std::int64_t>;
  return std::make_tuple(field("name_id.value", &R::first), field("duration_ns", &R::second));
}

/// memory_samples, phase resolved; NULL counters stay absent.
inline auto memory_sample_fields() {
  using R = MemorySampleRow;
  return std::make_tuple(field("rank", &R::rank), field("step", &R::step), field("ts_ns", &R::ts_ns),
                         field("phase_id.value", &R::phase), field("device", &R::device),
                         field("allocated_bytes", &R::allocated_bytes), field("reserved_bytes", &R::reserved_bytes),
                         field("active_bytes", &R::active_bytes), field("inactive_split_bytes", &R::inactive_split_bytes),
                         field("largest_free_block_bytes", &R::largest_free_block_bytes),
                         field("peak_allocated_bytes", &R::peak_allocated_bytes),
                         field("num_alloc_retries", &R::num_alloc_retries), field("num_ooms", &R::num_ooms),
                         field("reserved_slack", &R::reserved_slack), field("split_fragmentation", &R::split_fragmentation),
                         field("external_fragmentation", &R::external_fragmentation));
}

/// kv_pool_samples, phase resolved.
inline auto kv_pool_sample_fields() {
  using R = KvPoolSampleRow;
  return std::make_tuple(field("rank", &R::rank), field("step", &R::step), field("ts_ns", &R::ts_ns),
                         field("phase_id.value", &R::phase), field("num_blocks", &R::num_blocks),
                         field("blocks_used", &R::blocks_used), field("shared_blocks", &R::shared_blocks),
                         field("block_size", &R::block_size), field("num_sequences", &R::num_sequences),
                         field("tokens_stored", &R::tokens_stored), field("cache_bytes", &R::cache_bytes));
}

/// What kernels, memcpy and memset share (GpuActivityRow); each table adds its own.
inline auto gpu_activity_fields() {
  using R = GpuActivityRow;
  return std::make_tuple(field("rank", &R::rank), field("device", &R::device), field("stream", &R::stream),
                         field("correlation_id", &R::correlation_id), field("start_ns", &R::start_ns),
                         field("end_ns", &R::end_ns));
}

/// runtime_api, name resolved.
inline auto runtime_api_fields() {
  using R = RuntimeApiRow;
  return std::make_tuple(field("rank", &R::rank), field("tid", &R::tid), field("correlation_id", &R::correlation_id),
                         field("name_id.value", &R::name), field("start_ns", &R::start_ns), field("end_ns", &R::end_ns));
}

/// stream_busy (v10).
inline auto stream_busy_fields() {
  using R = StreamBusyRow;
  return std::make_tuple(field("rank", &R::rank), field("step", &R::step), field("device", &R::device),
                         field("stream", &R::stream), field("activities", &R::activities), field("busy_ns", &R::busy_ns),
                         field("first_start_ns", &R::first_start_ns), field("last_end_ns", &R::last_end_ns));
}

/// matrices.
inline auto matrix_fields() {
  using R = MatrixRow;
  return std::make_tuple(field("id", &R::id), field("name", &R::name), field("spec_path", &R::spec_path),
                         field("base_config", &R::base_config), field("repetitions", &R::repetitions),
                         field("warmup_steps", &R::warmup_steps), field("measured_steps", &R::measured_steps),
                         field("command_line", &R::command_line), field("start_unix_ns", &R::start_unix_ns),
                         field("end_unix_ns", &R::end_unix_ns), field("status", &R::status));
}

/// matrix_axes (NULL scaling or baseline level reads as "": none).
inline auto matrix_axis_fields() {
  using R = MatrixAxisRow;
  return std::make_tuple(field("axis_index", &R::axis_index), field("name", &R::name), field("rank_axis", &R::rank_axis),
                         field("scaling", &R::scaling), field("baseline_level", &R::baseline_level));
}

/// matrix_runs (a NULL error reads as "").
inline auto matrix_run_fields() {
  using R = MatrixRunRow;
  return std::make_tuple(field("id", &R::id), field("cell_id", &R::cell_id), field("repetition", &R::repetition),
                         field("run_id", &R::run_id), field("status", &R::status), field("error", &R::error),
                         field("log_path", &R::log_path), field("host", &R::host), field("cpu_model", &R::cpu_model),
                         field("num_cpus", &R::num_cpus), field("load_avg_before", &R::load_avg_before),
                         field("load_avg_after", &R::load_avg_after), field("torch_version", &R::torch_version),
                         field("hybridscope_version", &R::hybridscope_version),
                         field("hybridscope_commit", &R::hybridscope_commit),
                         field("thread_settings", &R::thread_settings));
}

}  // namespace hs::reports::detail
