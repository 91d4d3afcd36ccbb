#!/usr/bin/env bash
# Fetches the third-party browser modules the dashboard and widget use (and axe-core for the
# browser tests) from their npm registry packages (pinned versions, tarballs checked by SHA-256), and writes them under assets/vendor/
# with their licences and a manifest (assets/vendor/VENDOR.md). The files are committed: a build
# needs neither this script nor the network. Run it only to change a version.
#
# One edit is made: the hooks module imports the bare specifier "preact", which a browser without
# a bundler or an import map cannot resolve, so it is rewritten to "./preact.mjs". The manifest
# records the SHA-256 of the files as shipped.
set -euo pipefail
cd "$(dirname "$0")/.."
out=assets/vendor
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name version tarball-sha256
packages=(
  "preact 11.2.0 3c4456766bd32b6b534d52bf4e9c2a29b33e7eedf6e96ed479300ba1a7888ebf"
  "htm 3.1.1 2425b9bee11409177bcabc7f32e319926fc6690c1701c0b257c88bdff2d5ba90"
  "axe-core 4.14.1 e6b0ce02b84d892e2e33e403485e7f3d6c29e2be6df65daf44d89ba564139745"
)
for p in "${packages[@]}"; do
  read -r name version sha <<<"$p"
  url="https://registry.npmjs.org/$name/-/$name-$version.tgz"
  curl -fsSL "$url" -o "$tmp/$name.tgz"
  echo "$sha  $tmp/$name.tgz" | sha256sum -c --quiet
  mkdir -p "$tmp/$name"
  tar xzf "$tmp/$name.tgz" -C "$tmp/$name"
done

cp "$tmp/preact/package/dist/preact.mjs" "$out/preact.mjs"
sed 's/from"preact"/from".\/preact.mjs"/g' "$tmp/preact/package/hooks/dist/hooks.mjs" >"$out/hooks.mjs"
cp "$tmp/htm/package/dist/htm.mjs" "$out/htm.mjs"
cp "$tmp/preact/package/LICENSE" "$out/LICENSE-preact"
cp "$tmp/htm/package/LICENSE" "$out/LICENSE-htm"
grep -q 'from"preact"' "$out/hooks.mjs" && { echo "hooks.mjs still imports a bare specifier" >&2; exit 1; }

{
  echo "# Vendored browser modules"
  echo
  echo "Fetched by \`scripts/vendor-assets.sh\` from the npm registry (tarballs checked by SHA-256)."
  echo "Served by the binary under the dashboard's asset path; nothing is loaded from elsewhere."
  echo
  echo "| File | Package | Version | Licence | SHA-256 (as shipped) |"
  echo "|---|---|---|---|---|"
  echo "| preact.mjs | preact (dist/preact.mjs) | 11.2.0 | MIT (LICENSE-preact) | $(sha256sum "$out/preact.mjs" | cut -d' ' -f1) |"
  echo "| hooks.mjs | preact (hooks/dist/hooks.mjs; import of \"preact\" rewritten to \"./preact.mjs\") | 11.2.0 | MIT (LICENSE-preact) | $(sha256sum "$out/hooks.mjs" | cut -d' ' -f1) |"
  echo "| htm.mjs | htm (dist/htm.mjs) | 3.1.1 | Apache-2.0 (LICENSE-htm) | $(sha256sum "$out/htm.mjs" | cut -d' ' -f1) |"
} >"$out/VENDOR.md"
# axe-core is for the browser tests only (injected into each page to check accessibility); it
# lives under tests/ and is not embedded in the binary.
cp "$tmp/axe-core/package/axe.min.js" tests/vendor/axe.min.js
cp "$tmp/axe-core/package/LICENSE" tests/vendor/LICENSE-axe-core
{
  echo "# Vendored test files"
  echo
  echo "Fetched by \`scripts/vendor-assets.sh\` from the npm registry (tarball checked by SHA-256). Used"
  echo "by the browser tests only; not part of the binary."
  echo
  echo "| File | Package | Version | Licence | SHA-256 |"
  echo "|---|---|---|---|---|"
  echo "| axe.min.js | axe-core (axe.min.js) | 4.14.1 | MPL-2.0 (LICENSE-axe-core) | $(sha256sum tests/vendor/axe.min.js | cut -d' ' -f1) |"
} >tests/vendor/VENDOR.md
echo "vendored into $out and tests/vendor"
