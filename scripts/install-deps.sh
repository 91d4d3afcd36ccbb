#!/usr/bin/env bash
# Installs the system packages Steward needs to build and test, when they are missing:
#   cmake, clang, libclang-dev  (llama.cpp and usearch are built from source)
#   python3-pip                 (the model files are fetched from PyPI wheels)
# With the argument `test`, also what the test suite drives:
#   chromium, chromium-driver   (the dashboard's browser tests, headless)
#   aiosmtpd (PyPI, into target/pydeps)  (a real SMTP server for the email tests)
# Debian/Ubuntu only (apt-get); elsewhere it says what to install.
set -euo pipefail

need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v clang >/dev/null 2>&1 || need+=(clang)
command -v cc >/dev/null 2>&1 || need+=(build-essential)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
if [ "${1:-}" = "test" ]; then
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
fi

pydeps() {
  [ "${1:-}" = "test" ] || return 0
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/target/pydeps"
  if ! PYTHONPATH="$dir" python3 -c "import aiosmtpd" >/dev/null 2>&1; then
    echo "deps: installing aiosmtpd into $dir"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --target "$dir" "aiosmtpd==1.4.6"
  fi
}

if [ ${#need[@]} -eq 0 ]; then
  pydeps "${1:-}"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install these packages with your system's package manager, then run again: ${need[*]}" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
pydeps "${1:-}"
