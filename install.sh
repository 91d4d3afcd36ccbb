#!/usr/bin/env bash
# Installs Steward for the current user (or system-wide with PREFIX=/usr/local as root):
#   - the build packages, if missing (Debian/Ubuntu)
#   - the models, into $PREFIX/share/steward/models (found automatically by the binary)
#   - the release binary, into $PREFIX/bin/steward
# Then: steward admin bootstrap --email you@example.com --password '...' && steward serve
set -euo pipefail
cd "$(dirname "$0")"
PREFIX="${PREFIX:-$HOME/.local}"
scripts/install-deps.sh
scripts/fetch-models.sh "$PREFIX/share/steward/models"
cargo build --release --locked
install -d "$PREFIX/bin"
install -m 0755 target/release/steward "$PREFIX/bin/steward"
echo "installed $PREFIX/bin/steward (models in $PREFIX/share/steward/models)"
case ":$PATH:" in *":$PREFIX/bin:"*) ;; *) echo "add $PREFIX/bin to your PATH";; esac
