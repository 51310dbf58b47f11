#!/usr/bin/env python3
"""The numbers an import of Kineto traces must hold, computed from the traces with plain `json`
(independently of hybridscope's streaming reader): per rank, the world size (distributedInfo), the
counts and duration sums of each kind of event (gloo's `gloo:*` ranges among them), the NCCL
collectives with metadata and their bytes, and the phase ranges by name.

    kineto_expect.py TRACE... > expected.json

Printed as one JSON object {"<rank>": {...}}; ns are the file's µs × 1000, rounded to the ns as the
importer does. Only the standard library.
"""
import gzip
import json
import sys
from decimal import Decimal, ROUND_HALF_UP

VERL = {"step", "gen", "gen_max", "reward", "old_log_prob", "ref", "values", "adv", "update_critic", "update_actor",
        "update_weights", "sync_rollout_weights", "testing", "save_checkpoint"}
DTYPE_SIZE = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Char": 1, "Byte": 1}


def ns(value):
    # ts and dur as the file writes them, in exact decimal: µs -> ns, half up at the 4th decimal
    return int((Decimal(str(value)) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.loads(f.read(), parse_float=Decimal)


def main():
    out = {}
    for i, path in enumerate(sys.argv[1:]):
        trace = load(path)
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        rank = (trace.get("distributedInfo") or {}).get("rank", i) if isinstance(trace, dict) else i
        info = (trace.get("distributedInfo") or {}) if isinstance(trace, dict) else {}
        e = {"world_size": info.get("world_size"), "gloo_ranges": 0, "ranges": 0, "phase_ranges": {}, "kernels": 0, "kernel_ns": 0, "memcpys": 0, "memcpy_bytes": 0,
             "memsets": 0, "memset_bytes": 0, "runtime": 0, "memory": 0, "nccl": 0, "collectives": 0,
             "collective_bytes": 0, "collective_ns": 0}
        for ev in events:
            ph, cat = ev.get("ph"), ev.get("cat")
            args = ev.get("args") or {}
            if ph == "X" and cat in ("cpu_op", "user_annotation"):
                e["ranges"] += 1
                if ev["name"].startswith("gloo:"):  # a gloo collective as the CPU profiler sees it
                    e["gloo_ranges"] += 1
                if cat == "user_annotation" and ev["name"] in VERL:
                    e["phase_ranges"][ev["name"]] = e["phase_ranges"].get(ev["name"], 0) + 1
            elif ph == "X" and cat == "kernel":
                e["kernels"] += 1
                e["kernel_ns"] += ns(ev["dur"])
                if "nccl" in ev["name"]:
                    e["nccl"] += 1
                    if "Collective name" in args and args.get("dtype") in DTYPE_SIZE:
                        e["collectives"] += 1
                        e["collective_bytes"] += max(args["In msg nelems"], args["Out msg nelems"]) * DTYPE_SIZE[args["dtype"]]
                        e["collective_ns"] += ns(ev["dur"])
            elif ph == "X" and cat == "gpu_memcpy":
                e["memcpys"] += 1
                e["memcpy_bytes"] += int(args.get("bytes", 0))
            elif ph == "X" and cat == "gpu_memset":
                e["memsets"] += 1
                e["memset_bytes"] += int(args.get("bytes", 0))
            elif ph == "X" and cat in ("cuda_runtime", "cuda_driver") and "correlation" in args:
                e["runtime"] += 1
            elif ph == "i" and ev.get("name") == "[memory]":
                e["memory"] += 1
        e["kernel_ns"] = int(e["kernel_ns"])
        e["collective_ns"] = int(e["collective_ns"])
        out[str(rank)] = e
    json.dump(out, sys.stdout, default=int)


if __name__ == "__main__":
    main()
