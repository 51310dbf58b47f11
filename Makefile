# hybridscope — the two commands a new user needs:
#   make demo   installs what is missing, builds, and runs the demo benchmark matrix on CPU ranks
#               (1/2/4 ranks x naive/hybrid resharding) into one SQLite database, with its summary
#   make test   installs what is missing, builds, and runs the test suites
# Everything else: `make help`.

BUILD_DIR ?= build/release
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
HYBRIDSCOPE := $(BUILD_DIR)/cli/hybridscope
DEMO_DB ?= out/bench.sqlite
DEMO_MATRIX ?= bench/matrices/demo-cpu.yaml
DEMO_REPORT ?= out/report
DEMO_PROJECTION ?= out/projection.json
DEMO_COMM ?= out/comm-bench.json
# The demo matrix's cell config (bench/matrices/demo-cpu.yaml's overrides), projected by
# `hybridscope simulate` onto a cluster of machines like this one with efficiencies fitted on the
# matrix just measured (docs/simulator.md).
DEMO_SIM_OVERRIDES := data.train_batch_size=16 actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
    hybridscope.model.hidden_size=512 hybridscope.model.intermediate_size=1536 hybridscope.model.num_hidden_layers=4 \
    hybridscope.model.num_attention_heads=8 hybridscope.model.num_key_value_heads=4 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=2 actor_rollout_ref.actor.strategy=fsdp
LEARN_DB ?= out/demo.sqlite
STANDALONE_DIR ?= build/standalone

.PHONY: help deps deps-demo configure build build-demo test test-standalone demo demo-learn demo-ppo demo-one-step-off demo-fully-async bench comm-bench clean

help:
	@echo "make demo      install deps, build, run the demo matrix (1/2/4 ranks x naive/hybrid: about 4 min on 2 cores once built, 15 min from nothing) -> $(DEMO_DB)"
	@echo "make demo-learn  the GRPO learning demo: 200 steps, held-out accuracy before/after (about 10 min) -> $(LEARN_DB)"
	@echo "make test      install deps, build, run every test (ctest)"
	@echo "make test-standalone  probes + reports alone, no LibTorch (-DHS_BUILD_TRAINER=OFF) -> $(STANDALONE_DIR)"
	@echo "make demo-ppo  the same task with PPO (GAE + critic) -> out/demo-ppo.sqlite"
	@echo "make demo-one-step-off  the GRPO demo one step off policy: rank 1 generates while rank 0 trains -> out/demo-one-step-off.sqlite"
	@echo "make demo-fully-async  the GRPO demo fully asynchronous: rank 1 streams prompt groups into a queue, rank 0 trains -> out/demo-fully-async.sqlite"
	@echo "make bench     micro-benchmarks (GEMM, rollout, training step) -> out/micro-bench.json"
	@echo "make comm-bench  Gloo collectives on 2 and 4 real ranks (algbw, busbw) -> out/comm-bench.json"
	@echo "make build     configure and build only ($(BUILD_DIR))"
	@echo "make clean     remove $(BUILD_DIR) and out/"

deps:
	@scripts/install-deps.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# What `make demo` runs and nothing more (the CLI and the viewer it points to): the test suites,
# benchmarks and fuzzers are `make build`/`make test`'s.
# What the demo runs needs no test peer (transformers, tokenizers...): `make test` installs them.
deps-demo:
	@HS_SKIP_TEST_PEERS=1 scripts/install-deps.sh

# One build of them all, so the viewer's sources fill the cores while the CLI links.
build-demo: deps-demo $(BUILD_DIR)/build.ninja
	@targets="hybridscope hs_comm_bench"; \
	if ninja -C $(BUILD_DIR) -t targets all | grep -q '^hybridscope-viewer:'; then targets="$$targets hybridscope-viewer"; \
	else echo "(no viewer: it needs Qt 6, docs/viewer.md)"; fi; \
	echo "cmake --build $(BUILD_DIR) -j $(JOBS) --target $$targets"; \
	cmake --build $(BUILD_DIR) -j $(JOBS) --target $$targets

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j 1

# The analysing side without the trainer: what a laptop with no CUDA and no LibTorch builds
# (docs/building.md). Needs only the Debian packages (SQLite, nlohmann-json, GoogleTest).
test-standalone:
	cmake -S . -B $(STANDALONE_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DHS_BUILD_TRAINER=OFF
	cmake --build $(STANDALONE_DIR) -j $(JOBS)
	cd $(STANDALONE_DIR) && ctest --output-on-failure -j 1

demo: build-demo
	@mkdir -p out
	@echo "measuring this machine's collectives for the projection (Gloo, 2 and 4 ranks, 5 passes, about 45 s) -> $(DEMO_COMM)"
	@$(BUILD_DIR)/bench/hs_comm_bench --ranks 2,4 --benchmark_out=$(DEMO_COMM) --benchmark_out_format=json > out/comm-bench.log 2>&1 \
	    || { tail -n 20 out/comm-bench.log; echo "hs_comm_bench failed: its whole output is in out/comm-bench.log"; exit 1; }
	@tail -n 2 out/comm-bench.log
	$(HYBRIDSCOPE) bench $(DEMO_MATRIX) --db $(DEMO_DB) --json out/bench-summary.json --csv out/bench-summary.csv
	$(HYBRIDSCOPE) report $(DEMO_DB) -o $(DEMO_REPORT).html
	$(HYBRIDSCOPE) report $(DEMO_DB) -o $(DEMO_REPORT).pdf
	$(HYBRIDSCOPE) simulate --hardware bench/hardware/cpu-local.yaml --config configs/demo_grpo.yaml \
	    --calibrate $(DEMO_DB) --comm-bench $(DEMO_COMM) --ranks 2,4,8,16 --json $(DEMO_PROJECTION) $(DEMO_SIM_OVERRIDES)
	@echo "the projection's own error on the cells just measured: $(HYBRIDSCOPE) simulate --hardware bench/hardware/cpu-local.yaml --config configs/demo_grpo.yaml --calibrate $(DEMO_DB) --comm-bench $(DEMO_COMM) --validate" 
	@echo "open $(DEMO_REPORT).html (or .pdf); the findings alone: $(HYBRIDSCOPE) diagnose $(DEMO_DB)"
	@if [ -x $(BUILD_DIR)/viewer/hybridscope-viewer ]; then echo "in the viewer: $(BUILD_DIR)/viewer/hybridscope-viewer $(DEMO_DB) --projection $(DEMO_PROJECTION)"; \
	 else echo "in the viewer (needs Qt 6, docs/viewer.md): $(BUILD_DIR)/viewer/hybridscope-viewer $(DEMO_DB) --projection $(DEMO_PROJECTION)"; fi

demo-learn: build-demo
	$(HYBRIDSCOPE) train --config configs/demo_grpo.yaml --db $(LEARN_DB) trainer.resume_mode=disable

demo-ppo: build-demo
	$(HYBRIDSCOPE) train --config configs/demo_ppo.yaml --db out/demo-ppo.sqlite trainer.resume_mode=disable

# verl's one-step-off-policy trainer on two CPU ranks: rank 1 generates batch k+1 while rank 0 trains
# on batch k; token-level IS (TIS) corrects the one-update gap (docs/architecture.md).
demo-one-step-off: build-demo
	$(HYBRIDSCOPE) launch -n 2 -- train --config configs/demo_grpo.yaml --db out/demo-one-step-off.sqlite \
	    trainer.resume_mode=disable trainer.experiment_name=demo_grpo_one_step_off trainer.n_gpus_per_node=2 \
	    hybridscope.num_threads=1 'hybridscope.placement.rollout=[1]' hybridscope.async_mode=one_step_off \
	    actor_rollout_ref.hybrid_engine=false algorithm.rollout_correction.rollout_is=token

# verl's fully-async rollouter and trainer on two CPU ranks: rank 1 streams prompt groups into a
# bounded queue, rank 0 trains on 64 of them (require_batches 8 x ppo_mini_batch_size 8) whenever
# they are in, syncing its weights every 2 updates; staleness_threshold 0.5 lets samples be up to 2
# updates old, partial rollouts go on with the new weights after a sync; TIS corrects the gap.
demo-fully-async: build-demo
	$(HYBRIDSCOPE) launch -n 2 -- train --config configs/demo_grpo.yaml --db out/demo-fully-async.sqlite \
	    trainer.resume_mode=disable trainer.experiment_name=demo_grpo_fully_async trainer.n_gpus_per_node=2 \
	    hybridscope.num_threads=1 'hybridscope.placement.rollout=[1]' hybridscope.async_mode=fully_async \
	    actor_rollout_ref.hybrid_engine=false algorithm.rollout_correction.rollout_is=token \
	    async_training.require_batches=8 async_training.trigger_parameter_sync_step=2 \
	    async_training.staleness_threshold=0.5 async_training.partial_rollout=true

bench: build
	@mkdir -p out
	$(BUILD_DIR)/bench/hs_micro_bench --benchmark_out=out/micro-bench.json --benchmark_out_format=json

comm-bench: build
	@mkdir -p out
	$(BUILD_DIR)/bench/hs_comm_bench --ranks 2,4 --benchmark_out=out/comm-bench.json --benchmark_out_format=json

clean:
	rm -rf $(BUILD_DIR) $(STANDALONE_DIR) out
