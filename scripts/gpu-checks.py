#!/usr/bin/env python3
"""gpu-checks.py RUN.sqlite — what issue 5 asks a GPU run database to show, as plain text.

- the CUPTI collector's status and record counts (kernels by class, memcpy, memset, runtime API);
- phase correlation (from kernel_stats since schema v10, else the raw tables): every kernel tagged with a hybridscope range must have been launched (its
  runtime API call) inside that range; kernels with no range are counted;
- GPU kernel time per phase;
- the caching allocator's fragmentation ratios per phase (memory_samples with device >= 0);
- the train<->rollout switches broken into their components;
- perf/mfu/actor, perf/throughput and perf/max_memory_* of the run.

Queries follow docs/schema.md. Exit status 1 when a kernel was launched outside its range.
"""
import sqlite3
import sys


def main(path: str) -> int:
    db = sqlite3.connect(path)
    q = lambda sql, *a: db.execute(sql, a).fetchall()
    run = q("SELECT MAX(id) FROM runs")[0][0]
    print(f"run database {path}, run {run}")
    status = q("SELECT s.value FROM collector_stats c JOIN strings s ON s.id = c.status_id "
               "WHERE c.run_id = ? ORDER BY c.ts_ns LIMIT 1", run)
    print(f"CUPTI collector: {status[0][0] if status else 'no collector_stats rows'}")
    counts = {t: q(f"SELECT COUNT(*) FROM {t} WHERE run_id = ?", run)[0][0]
              for t in ("kernels", "memcpy", "memset", "runtime_api", "cupti_overhead")}
    print("records: " + ", ".join(f"{t} {n}" for t, n in counts.items()))
    by_class = q("SELECT c.name, COUNT(*), SUM(k.end_ns - k.start_ns) FROM kernels k "
                 "JOIN kernel_classes c ON c.id = k.class_id WHERE k.run_id = ? GROUP BY c.name", run)
    for name, n, ns in by_class:
        print(f"  kernels {name}: {n} ({ns / 1e6:.1f} ms on the GPU)")

    bad = 0
    has_stats = q("SELECT COUNT(*) FROM sqlite_master WHERE name = 'kernel_stats'")[0][0] and \
        q("SELECT COUNT(*) FROM kernel_stats WHERE run_id = ?", run)[0][0]
    if has_stats:
        # v10: every kernel, aggregated per (step, range, name); indexed joins only (hybridscope check).
        rows = q("""
            SELECT a.count, a.external_id, a.launched, a.launch_first_ns, a.launch_last_ns, cr.start_ns,
                   COALESCE((SELECT r.end_ns FROM ranges r WHERE r.run_id = cr.run_id AND r.rank = cr.rank
                             AND r.tid = cr.tid AND r.start_ns = cr.start_ns AND r.depth = cr.depth LIMIT 1),
                            (SELECT c.end_ns FROM comm_ops c WHERE cr.depth = -1 AND c.run_id = cr.run_id
                             AND c.rank = cr.rank AND c.start_ns = cr.start_ns LIMIT 1))
            FROM kernel_stats a LEFT JOIN correlation_ranges cr ON cr.run_id = a.run_id AND cr.rank = a.rank
                 AND cr.external_id = a.external_id
            WHERE a.run_id = ? AND a.class_id != 3""", run)
        tagged = inside = untagged = unverified = 0
        for n, ext, launched, first, last, start, end in rows:
            if ext == 0:
                untagged += n
                continue
            tagged += n
            unverified += n - launched
            if launched and start is not None and end is not None and first is not None:
                if first >= start and last <= end:
                    inside += launched
                else:
                    bad += launched
            else:
                unverified += launched
        print(f"phase correlation (kernel_stats): {tagged} kernels tagged with a range, {inside} launched inside it, "
              f"{bad} outside ({'OK' if bad == 0 else 'WRONG'}), {unverified} not verifiable; "
              f"{untagged} kernels outside every range")
        for name, n, ns in q("""
            SELECT s.value, SUM(a.count), SUM(a.total_ns) FROM kernel_stats a
            JOIN correlation_ranges cr ON cr.run_id = a.run_id AND cr.rank = a.rank AND cr.external_id = a.external_id
            JOIN strings s ON s.id = cr.name_id
            WHERE a.run_id = ? GROUP BY s.value ORDER BY 3 DESC LIMIT 12""", run):
            print(f"  GPU time in {name}: {ns / 1e6:.1f} ms over {n} kernels")
    elif counts["kernels"]:
        rows = q("""
            SELECT COUNT(*), SUM(a.start_ns >= r.start_ns AND a.end_ns <= r.end_ns)
            FROM kernels k
            JOIN runtime_api a ON a.run_id = k.run_id AND a.rank = k.rank AND a.correlation_id = k.correlation_id
            JOIN external_correlations e ON e.run_id = k.run_id AND e.rank = k.rank AND e.correlation_id = k.correlation_id
            JOIN correlation_ranges cr ON cr.run_id = e.run_id AND cr.rank = e.rank AND cr.external_id = e.external_id
            JOIN ranges r ON r.run_id = cr.run_id AND r.rank = cr.rank AND r.tid = cr.tid AND r.depth = cr.depth
                         AND r.start_ns = cr.start_ns
            WHERE k.run_id = ?""", run)
        tagged, inside = rows[0][0], rows[0][1] or 0
        bad = tagged - inside
        untagged = counts["kernels"] - tagged
        print(f"phase correlation: {tagged} kernels tagged with a range, {inside} launched inside it, "
              f"{bad} outside ({'OK' if bad == 0 else 'WRONG'}); {untagged} kernels outside every range")
        for name, n, ns in q("""
            SELECT s.value, COUNT(*), SUM(k.end_ns - k.start_ns) FROM kernels k
            JOIN external_correlations e ON e.run_id = k.run_id AND e.rank = k.rank AND e.correlation_id = k.correlation_id
            JOIN correlation_ranges cr ON cr.run_id = e.run_id AND cr.rank = e.rank AND cr.external_id = e.external_id
            JOIN strings s ON s.id = cr.name_id
            WHERE k.run_id = ? GROUP BY s.value ORDER BY 3 DESC LIMIT 12""", run):
            print(f"  GPU time in {name}: {ns / 1e6:.1f} ms over {n} kernels")

    frag = q("""
        SELECT s.value, COUNT(*), MAX(m.reserved_bytes), MAX(m.reserved_slack), MAX(m.split_fragmentation),
               MAX(m.external_fragmentation)
        FROM memory_samples m JOIN strings s ON s.id = m.phase_id
        WHERE m.run_id = ? AND m.device >= 0 GROUP BY s.value ORDER BY s.value""", run)
    if frag:
        print("caching allocator, worst per phase: reserved MiB, reserved_slack, split_fragmentation, external_fragmentation")
        for phase, n, reserved, slack, split, ext in frag:
            fmt = lambda v: "NULL" if v is None else f"{v:.3f}"
            print(f"  {phase:28s} {n:5d} samples {reserved / 2**20 if reserved else 0:9.1f} {fmt(slack)} {fmt(split)} {fmt(ext)}")
    else:
        print("caching allocator: no device memory samples (a CPU run)")

    comps = q("""
        SELECT d.value, s.value, COUNT(*), AVG(c.duration_ns), MAX(c.duration_ns)
        FROM switch_components c JOIN switches w ON w.id = c.switch_id
        JOIN strings d ON d.id = w.direction_id JOIN strings s ON s.id = c.name_id
        WHERE w.run_id = ? GROUP BY d.value, s.value ORDER BY d.value, MIN(c.rowid)""", run)
    print("switch components (mean / max ms):")
    for direction, name, n, mean, worst in comps:
        print(f"  {direction:17s} {name:16s} {n:4d}x {mean / 1e6:9.3f} {worst / 1e6:9.3f}")
    for direction, n, mean, before, after in q("""
        SELECT d.value, COUNT(*), AVG(w.end_ns - w.start_ns), AVG(w.memory_before_bytes), AVG(w.memory_after_bytes)
        FROM switches w JOIN strings d ON d.id = w.direction_id WHERE w.run_id = ? GROUP BY d.value""", run):
        print(f"  {direction:17s} whole switch {mean / 1e6:.3f} ms; memory {before / 2**20:.1f} -> {after / 2**20:.1f} MiB")

    for name, mean, last in q("""
        SELECT s.value, AVG(m.value), (SELECT m2.value FROM step_metrics m2 WHERE m2.run_id = m.run_id
               AND m2.name_id = m.name_id ORDER BY m2.step DESC LIMIT 1)
        FROM step_metrics m JOIN strings s ON s.id = m.name_id
        WHERE m.run_id = ? AND s.value IN ('perf/mfu/actor', 'perf/throughput', 'perf/time_per_step',
              'perf/max_memory_allocated_gb', 'perf/max_memory_reserved_gb', 'val/mean@1')
        GROUP BY s.value""", run):
        print(f"  {name:30s} mean {mean:.4g}, last {last:.4g}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gpu-checks.py RUN.sqlite")
    sys.exit(main(sys.argv[1]))
