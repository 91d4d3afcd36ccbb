"""Builds Steward's fast variant of all-MiniLM-L6-v2 from the published ONNX export.

The published file is a torch export: attention is spelled out in dozens of small operators
(masks built with Where/IsNaN, transposes, an unfused GELU), which ONNX Runtime cannot fuse. This
script reads its weights and writes the same network as a compact BERT graph:

  embeddings (Gather + Add + LayerNormalization)
  6 x [ Attention (packed QKV) -> MatMul -> SkipLayerNorm -> MatMul -> BiasGelu -> MatMul -> SkipLayerNorm ]

then quantizes the matrix products dynamically (per-channel int8 weights, MatMulInteger/QAttention),
so the runtime uses its integer kernels. SkipLayerNorm and BiasGelu are finally moved to the
`steward` operator domain: Steward registers its own single-precision kernels for them (ONNX
Runtime's CPU versions accumulate in double precision and dominate the run time of this small model).
The output is therefore meant for the steward binary, not for a plain ONNX Runtime.

Numerically the float graph matches the published model (cosine 1.0 on the Cranfield abstracts);
quantization moves embeddings by cosine 0.995 on average.

Usage: build-embedding-model.py MODEL.onnx OUT.onnx   (with onnx and onnxruntime importable)
"""
import logging
import os
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: E402

HIDDEN, HEADS, LAYERS, EPS = 384, 12, 6, 1e-12
CUSTOM = {"SkipLayerNormalization": "SkipLayerNorm", "BiasGelu": "BiasGelu"}


def folded_weights(src, tmp):
    """Loads the model with constant folding only, so every weight is a plain float initializer."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = os.path.join(tmp, "folded.onnx")
    ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
    return onnx.load(opts.optimized_model_filepath).graph


def build_float(graph):
    values = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    producer = {out: n for n in graph.node for out in n.output}
    consumers = {}
    for n in graph.node:
        for name in n.input:
            consumers.setdefault(name, []).append(n)

    def matmul_weight(bias):
        """The weight of the MatMul whose product gets `bias` added."""
        for user in consumers.get(bias, []):
            for name in user.input:
                p = producer.get(name)
                if p is not None and p.op_type == "MatMul" and p.input[1] in values:
                    return values[p.input[1]]
        raise SystemExit(f"build-embedding-model: no matrix product found for {bias}")

    inits, nodes = [], []

    def const(name, array, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(np.asarray(array, dtype)), name))
        return name

    emb = "inner.embeddings."
    const("zero", [0], np.int64)
    const("one", [1], np.int64)
    const("two", [2], np.int64)
    nodes += [
        helper.make_node("Shape", ["input_ids"], ["ids_shape"]),
        helper.make_node("Slice", ["ids_shape", "one", "two"], ["seq_len"]),
        helper.make_node("Slice", [const("pos", values[emb + "position_embeddings.weight"]), "zero", "seq_len"], ["pos_rows"]),
        helper.make_node("Gather", [const("word", values[emb + "word_embeddings.weight"]), "input_ids"], ["words"]),
        helper.make_node("Add", ["words", "pos_rows"], ["emb_sum"]),
        helper.make_node("Add", ["emb_sum", const("type0", values[emb + "token_type_embeddings.weight"][0])], ["emb_all"]),
        helper.make_node(
            "LayerNormalization",
            ["emb_all", const("emb_g", values[emb + "LayerNorm.weight"]), const("emb_b", values[emb + "LayerNorm.bias"])],
            ["x0"], axis=-1, epsilon=EPS,
        ),
        # right-padded batches: the key length of each sequence is the sum of its mask
        helper.make_node("ReduceSum", ["attention_mask", "one"], ["lengths"], keepdims=0),
        helper.make_node("Cast", ["lengths"], ["key_lengths"], to=TensorProto.INT32),
    ]
    x = "x0"
    for layer in range(LAYERS):
        p, q = f"inner.encoder.layer.{layer}.", f"l{layer}_"
        parts = ("query", "key", "value")
        qkv_w = np.concatenate([matmul_weight(p + f"attention.self.{k}.bias") for k in parts], axis=1)
        qkv_b = np.concatenate([values[p + f"attention.self.{k}.bias"] for k in parts])
        out = "last_hidden_state" if layer == LAYERS - 1 else q + "out"
        nodes += [
            helper.make_node("Attention", [x, const(q + "qkv_w", qkv_w), const(q + "qkv_b", qkv_b), "key_lengths"],
                             [q + "att"], domain="com.microsoft", num_heads=HEADS),
            helper.make_node("MatMul", [q + "att", const(q + "ao_w", matmul_weight(p + "attention.output.dense.bias"))], [q + "ao"]),
            helper.make_node("SkipLayerNormalization",
                             [q + "ao", x, const(q + "ln1_g", values[p + "attention.output.LayerNorm.weight"]),
                              const(q + "ln1_b", values[p + "attention.output.LayerNorm.bias"]),
                              const(q + "ao_b", values[p + "attention.output.dense.bias"])],
                             [q + "h"], domain="com.microsoft", epsilon=EPS),
            helper.make_node("MatMul", [q + "h", const(q + "ff1_w", matmul_weight(p + "intermediate.dense.bias"))], [q + "ff1"]),
            helper.make_node("BiasGelu", [q + "ff1", const(q + "ff1_b", values[p + "intermediate.dense.bias"])], [q + "act"],
                             domain="com.microsoft"),
            helper.make_node("MatMul", [q + "act", const(q + "ff2_w", matmul_weight(p + "output.dense.bias"))], [q + "ff2"]),
            helper.make_node("SkipLayerNormalization",
                             [q + "ff2", q + "h", const(q + "ln2_g", values[p + "output.LayerNorm.weight"]),
                              const(q + "ln2_b", values[p + "output.LayerNorm.bias"]),
                              const(q + "ff2_b", values[p + "output.dense.bias"])],
                             [out], domain="com.microsoft", epsilon=EPS),
        ]
        x = out
    ids = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])  # noqa: E731
    g = helper.make_graph(nodes, "all-MiniLM-L6-v2", [ids("input_ids"), ids("attention_mask")],
                          [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", HIDDEN])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                          producer_name="steward")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main(src, dst):
    with tempfile.TemporaryDirectory() as tmp:
        float_path, quant_path = os.path.join(tmp, "float.onnx"), os.path.join(tmp, "quant.onnx")
        onnx.save(build_float(folded_weights(src, tmp)), float_path)
        quantize_dynamic(float_path, quant_path, weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": TensorProto.FLOAT})
        m = onnx.load(quant_path)
    for n in m.graph.node:
        if n.domain == "com.microsoft" and n.op_type in CUSTOM:
            n.op_type, n.domain = CUSTOM[n.op_type], "steward"
    m.opset_import.append(helper.make_opsetid("steward", 1))
    onnx.save(m, dst)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
