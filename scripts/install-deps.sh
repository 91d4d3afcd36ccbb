#!/usr/bin/env bash
# Installs the system packages Steward needs to build and test, when they are missing:
#   cmake, clang, libclang-dev  (llama.cpp and usearch are built from source)
#   python3-pip                 (the model files are fetched from PyPI wheels)
# With the argument `test`, also what the test suite drives:
#   chromium, chromium-driver   (the dashboard's browser tests, headless)
#   wordpress, mariadb-server, php-cli, php-mysql  (a real WordPress on 127.0.0.1 for the
#                               WordPress connector's tests and bench: src/bench/wordpress.rs)
#   systemd                     (systemd-analyze verify checks the service unit)
#   postgresql                  (a real PostgreSQL server, started by the tests in a temporary
#                               directory as `nobody`: tests/it/pg_server.rs)
#   aiosmtpd (PyPI, into target/pydeps)  (a real SMTP server for the email tests)
#   mcp (PyPI, into target/pydeps)       (the official Python MCP client SDK, for the /mcp tests)
#   @modelcontextprotocol/sdk (npm, into target/nodedeps)  (the official TypeScript MCP SDK;
#                                        skipped with a message when npm is absent)
# Each step installs only what is missing, so a second run installs nothing.
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
  [ -f /usr/share/wordpress/wp-settings.php ] || need+=(wordpress)
  [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
  command -v php >/dev/null 2>&1 || need+=(php-cli)
  dpkg -s php-mysql >/dev/null 2>&1 || need+=(php-mysql)
  [ -x /usr/bin/systemd-analyze ] || need+=(systemd)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
fi

pydeps() {
  [ "${1:-}" = "test" ] || return 0
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/target/pydeps"
  if ! PYTHONPATH="$dir" python3 -c "import aiosmtpd" >/dev/null 2>&1; then
    echo "deps: installing aiosmtpd into $dir"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --target "$dir" "aiosmtpd==1.4.6"
  fi
  if ! PYTHONPATH="$dir" python3 -c "import mcp.client.streamable_http" >/dev/null 2>&1; then
    echo "deps: installing mcp (Python MCP SDK) into $dir"
    # --upgrade: pip --target otherwise refuses to replace packages aiosmtpd already put there.
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --upgrade --no-warn-conflicts --target "$dir" "mcp==2.3.0"
  fi
  nodedeps
}

# The TypeScript MCP SDK, into target/nodedeps (tests/clients/mcp_driver.mjs imports it from there).
nodedeps() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/target/nodedeps"
  [ -f "$dir/node_modules/@modelcontextprotocol/sdk/package.json" ] && return 0
  if ! command -v npm >/dev/null 2>&1; then
    echo "deps: npm not found, skipping @modelcontextprotocol/sdk (the TypeScript MCP tests will be skipped)"
    return 0
  fi
  echo "deps: installing @modelcontextprotocol/sdk into $dir"
  mkdir -p "$dir"
  npm install --silent --prefix "$dir" --no-audit --no-fund --save-exact "@modelcontextprotocol/sdk@1.32.2"
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
