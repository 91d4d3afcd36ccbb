#!/usr/bin/env bash
# Installs Steward. Three ways, one script:
#
#   From an unpacked release (the copy of this script inside a `scripts/release` tarball): checks
#   every file against SHA256SUMS, then copies the binary and the models. Needs no compiler and no
#   network: only bash and coreutils (and useradd with --systemd).
#     ./install.sh [--prefix DIR] [--systemd]
#   From a release tarball (unpacks it into a temporary directory, then as above):
#     ./install.sh steward-VERSION-ARCH-linux.tar.gz [--prefix DIR] [--systemd]
#   From this checkout (builds the release binary, fetches the models):
#     ./install.sh [--prefix DIR] [--systemd]
#
# It installs $PREFIX/bin/steward, the models into $PREFIX/share/steward/models (the binary finds
# them there, beside itself: ../share/steward/models) and the systemd unit into
# $PREFIX/share/steward/steward.service. PREFIX defaults to ~/.local (/usr/local with --systemd).
#
# --systemd (as root): also creates the `steward` system user, /var/lib/steward (its data
# directory, mode 0750) and /etc/steward, and installs the unit as
# /etc/systemd/system/steward.service with ExecStart pointing at the installed binary; start it
# with `systemctl enable --now steward`.
# --print-unit: prints the unit as --systemd would install it for this prefix, and exits.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
prefix="${PREFIX:-}"
systemd=0
print_unit=0
tarball=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    --systemd) systemd=1; shift ;;
    --print-unit) print_unit=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *.tar.gz|*.tgz) tarball="$1"; shift ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$prefix" ]; then
  if [ $systemd -eq 1 ]; then prefix=/usr/local; else prefix="$HOME/.local"; fi
fi
case "$prefix" in /*) ;; *) prefix="$(pwd)/$prefix" ;; esac

# The unit as installed for this prefix: the template with ExecStart naming the installed binary.
unit_template() {
  if [ -f "$here/share/steward/steward.service" ]; then
    cat "$here/share/steward/steward.service"
  else
    cat "$here/packaging/steward.service"
  fi
}
render_unit() {
  unit_template | sed "s|^ExecStart=/usr/local/bin/steward |ExecStart=$prefix/bin/steward |"
}
if [ $print_unit -eq 1 ]; then
  render_unit
  exit 0
fi

if [ -n "$tarball" ]; then
  # a tarball: unpack it and run the install.sh it carries (the one that matches its files)
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  tar -xzf "$tarball" -C "$work"
  inner=("$work"/steward-*/install.sh)
  [ -f "${inner[0]}" ] || { echo "install.sh: $tarball is not a Steward release" >&2; exit 1; }
  args=(--prefix "$prefix")
  [ $systemd -eq 1 ] && args+=(--systemd)
  bash "${inner[0]}" "${args[@]}"
  exit $?
fi

if [ $systemd -eq 1 ] && [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: --systemd needs root (it creates a system user and installs a unit)" >&2
  exit 1
fi

# Copies every file of $1 (a models directory) into $2, leaving files it does not have (a GGUF
# you added) in place. Each file is written beside its target and renamed over it.
copy_models() {
  local from="$1" to="$2" f
  (cd "$from" && find . -type f) | while IFS= read -r f; do
    f="${f#./}"
    install -d -m 0755 "$to/$(dirname "$f")"
    install -m 0644 "$from/$f" "$to/$f.new"
    mv -f "$to/$f.new" "$to/$f"
  done
}

# Installs the binary (renamed over the old one, so a running server keeps its file) and the unit.
install_binary_and_unit() {
  local bin="$1"
  install -d -m 0755 "$prefix/bin" "$prefix/share/steward"
  install -m 0755 "$bin" "$prefix/bin/steward.new"
  mv -f "$prefix/bin/steward.new" "$prefix/bin/steward"
  unit_template >"$prefix/share/steward/steward.service.new"
  mv -f "$prefix/share/steward/steward.service.new" "$prefix/share/steward/steward.service"
}

setup_systemd() {
  if ! getent passwd steward >/dev/null; then
    useradd --system --user-group --home-dir /var/lib/steward --no-create-home \
      --shell /usr/sbin/nologin --comment "Steward AI agent appliance" steward
    echo "created the system user steward"
  fi
  install -d -m 0750 -o steward -g steward /var/lib/steward
  install -d -m 0750 /etc/steward
  render_unit >/etc/systemd/system/steward.service.new
  mv -f /etc/systemd/system/steward.service.new /etc/systemd/system/steward.service
  echo "installed /etc/systemd/system/steward.service (secrets such as CONNECTOR_ENCRYPTION_KEY go in /etc/steward/environment)"
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    systemctl daemon-reload
    echo "start it with: systemctl enable --now steward"
  fi
}

finish() {
  echo "installed $prefix/bin/steward (models in $prefix/share/steward/models)"
  [ $systemd -eq 1 ] && setup_systemd
  case ":$PATH:" in *":$prefix/bin:"*) ;; *) echo "add $prefix/bin to your PATH" ;; esac
  echo "then: steward admin bootstrap --email you@example.com --password '...' && steward serve"
}

if [ -f "$here/bin/steward" ] && [ -f "$here/SHA256SUMS" ]; then
  # an unpacked release: verify, then copy
  (cd "$here" && sha256sum --quiet --strict -c SHA256SUMS) || {
    echo "install.sh: the release's files do not match SHA256SUMS; download it again" >&2
    exit 1
  }
  echo "verified $(wc -l <"$here/SHA256SUMS") files against SHA256SUMS"
  copy_models "$here/share/steward/models" "$prefix/share/steward/models"
  install_binary_and_unit "$here/bin/steward"
  finish
  exit 0
fi

# a checkout: build packages, models, the release binary
cd "$here"
scripts/install-deps.sh
scripts/fetch-models.sh "$prefix/share/steward/models"
cargo build --release --locked
install_binary_and_unit target/release/steward
finish
