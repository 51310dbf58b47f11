// run_records.cpp — the one loader of the record tables RunData and TraceRows share.
#include "hybridscope/reports/run_records.h"

namespace hs::reports {

RunRecords read_run_records(const RunDatabase& db, std::int64_t run_id) {
  RunRecords records;
  records.ranges = db.ranges(run_id);
  records.metrics = db.step_metrics(run_id);
  records.comm_ops = db.comm_ops(run_id);
  records.switches = db.switches(run_id);
  records.memory = db.memory_samples(run_id);
  records.kv_pool = db.kv_pool_samples(run_id);
  records.gpu = db.gpu_activity(run_id);
  return records;
}

}  // namespace hs::reports
