#!/usr/bin/env python3
"""Loads the checkpoints hybridscope saved (hf_parity.cpp, SavesWhatTransformersLoadsBack and the
tp=2 gathered saves) into HuggingFace transformers: AutoModelForCausalLM.from_pretrained must
report no missing, unexpected or mismatched keys and log no warning, and the logits must equal the
references transformers computed for the original checkpoints (make_references.py).

usage: check_saved.py REFERENCES_DIR SAVED_DIR. Exit 77 (skipped) without the peer.
"""
import logging
import os
import sys

try:
    import torch
    import transformers
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
except ImportError as e:
    print(f"skipped: the test peer is not installed ({e}); run scripts/install-deps.sh")
    sys.exit(77)


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(self.format(record))


def main():
    refs_dir, saved_dir = sys.argv[1], sys.argv[2]
    transformers.utils.logging.set_verbosity_warning()
    transformers.utils.logging.disable_progress_bar()
    collect = Collect()
    transformers.utils.logging.get_logger().addHandler(collect)
    failures = []
    checked = 0
    for case in ("llama3", "qwen2", "qwen3"):
        refs = load_file(os.path.join(refs_dir, case, "refs.safetensors"))
        for saved, logits_key, tol in ((case, "logits_f32", 1e-5), (case + "-tp2", "logits_f64", 1e-5)):
            path = os.path.join(saved_dir, saved)
            if not os.path.isdir(path):
                failures.append(f"{saved}: hybridscope did not save {path}")
                continue
            collect.records.clear()
            model, info = AutoModelForCausalLM.from_pretrained(path, output_loading_info=True)
            model.eval()
            for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
                if info.get(kind):
                    failures.append(f"{saved}: {kind} {info[kind]}")
            if collect.records:
                failures.append(f"{saved}: transformers warned: {collect.records}")
            with torch.no_grad():
                got = model(input_ids=refs["input_ids"]).logits.double()
            want = refs[logits_key].double()
            err = ((got - want).abs().max() / want.abs().max()).item()
            print(f"{saved}: {type(model).__name__}, dtype {model.dtype}, relative logit error {err:.2e}")
            if not err < tol:
                failures.append(f"{saved}: relative logit error {err:.3e} > {tol}")
            checked += 1
    for f in failures:
        print("FAIL", f)
    print(f"{checked} checkpoints saved by hybridscope loaded into transformers {transformers.__version__}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
