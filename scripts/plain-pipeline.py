#!/usr/bin/env python3
"""Plain Python RAG pipeline: the reference a Steward benchmark is compared against.

It does what a typical self-hosted RAG stack written in Python does with a BEIR-shaped collection
and times each part:

  1. load documents, queries and graded judgments (two layouts, see `load_collection`);
  2. BM25 with bm25s over title + " " + text: Lucene-variant Okapi BM25 (bm25s method "lucene":
     idf = ln(1 + (N - df + 0.5) / (df + 0.5)), tf part tf / (tf + k1 (1 - b + b |d| / avgdl)),
     rank-equivalent to Lucene's and Tantivy's), k1=0.9 b=0.4, lowercase `\\w+` tokens, bm25s's
     English stop words (the 33-word Lucene list), without stemming, with Porter stemming
     (PyStemmer "porter") and, for reference, with Snowball English ("Porter2", PyStemmer "english");
  3. dense retrieval: all-MiniLM-L6-v2 (the published int8 ONNX export) through onnxruntime, texts
     tokenized with the `tokenizers` package (truncation at --max-tokens), batches of 32 sorted by
     token length (as sentence-transformers' encode() does; --no-sort keeps input order) padded to
     the longest text of each batch, mean pooling over the attention mask, L2 normalisation; exact
     cosine ranking by a dot product over all text vectors, a document scoring the max over its
     texts; queries embedded one at a time the same way;
  4. reciprocal rank fusion (k=60) of BM25 without stemming and dense, top 100 of each.

Quality: nDCG@10 (linear gains, trec_eval style: DCG = sum rel_i / log2(i + 1), i the 1-based
rank; the ideal ranking from all judgments with rel > 0), recall@100 and MRR@10 (relevant = rel > 0),
averaged over the queries that have at least one relevant judgment. `ndcg@10_exp` (gains
2^rel - 1, as src/bench/cranfield.rs computes it) is reported beside it for comparison.

Timings: load; BM25 index build (tokenizing + stemming + bm25s index); model load; embedding of
every text (tokenizing + inference + pooling), with texts, tokens and texts/s; total ingest = BM25
index (no stemming) + embedding. Per-query latency (p50, p95, mean over the evaluated queries, each
query alone): BM25 (tokenize + retrieve), dense (embed the query + cosine over all texts + top 100),
RRF (the two of them and the fusion, end to end).

Output: one JSON object on stdout (and in --out FILE if given); progress on stderr.

Install (pinned wheels for CPython 3.11 manylinux x86_64; run from the repository root). --no-deps
because what the packages declare but this script never imports (huggingface_hub and its HTTP
stack for tokenizers, protobuf/flatbuffers/packaging for onnxruntime, tqdm) would come in unpinned:

  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
    --no-deps --only-binary=:all: --target target/pydeps/plain \
    bm25s==0.3.16 PyStemmer==3.1.0 onnxruntime==1.31.1 tokenizers==0.23.3 numpy==2.4.6

Pinned requirements (all that the script imports besides the standard library):
  bm25s==0.3.16  PyStemmer==3.1.0  onnxruntime==1.31.1  tokenizers==0.23.3  numpy==2.4.6

Run:
  python3 scripts/plain-pipeline.py /work/shared/bench/nfcorpus --threads 2 --max-tokens 256
  python3 scripts/plain-pipeline.py ../shared/bench/cranfield --threads 2 --out target/plain-cranfield.json
  python3 scripts/plain-pipeline.py DIR --texts chunks.json   # embed exactly these [{id, text}]
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_PYDEPS = os.path.join(_HERE, "..", "target", "pydeps", "plain")
if os.path.isdir(_PYDEPS):
    sys.path.insert(0, os.path.abspath(_PYDEPS))

import numpy as np  # noqa: E402

DEFAULT_MODEL_DIR = os.path.join(
    os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share"),
    "steward",
    "models",
    "minilm",
)


def log(msg):
    print(f"[plain] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# 1. Loading


def load_collection(path):
    """Docs [{id, title, text}], queries [{id, text}], qrels {queryId: {docId: rel}}.

    Layouts: DIR/{docs,queries,qrels}.json (BEIR export: docs id/title/text, qrels
    queryId/docId/rel) or DIR/cranfield-{docs,queries,qrels}.json (docs id/title/author/body,
    qrels queryId/docId/relevance with 0 = not relevant, 1–4 higher = more relevant; the body
    already starts with the title). Ids are compared as strings.
    """
    if os.path.exists(os.path.join(path, "docs.json")):
        layout, prefix = "beir", ""
    elif os.path.exists(os.path.join(path, "cranfield-docs.json")):
        layout, prefix = "cranfield", "cranfield-"
    else:
        raise SystemExit(f"{path}: neither docs.json nor cranfield-docs.json found")

    def read(name):
        with open(os.path.join(path, prefix + name), encoding="utf-8") as f:
            return json.load(f)

    raw_docs, raw_queries, raw_qrels = read("docs.json"), read("queries.json"), read("qrels.json")
    docs, skipped = [], 0
    for d in raw_docs:
        title = (d.get("title") or "").strip()
        text = d.get("text")
        if text is None:
            text = d.get("body") or ""
        text = text.strip()
        if not title and not text:
            skipped += 1  # e.g. Cranfield 471 and 995 are empty; an empty vector would still rank
            continue
        docs.append({"id": str(d["id"]), "title": title, "text": text})
    queries = [{"id": str(q["id"]), "text": q["text"]} for q in raw_queries]
    qrels = {}
    for r in raw_qrels:
        rel = r.get("rel", r.get("relevance"))
        qrels.setdefault(str(r["queryId"]), {})[str(r["docId"])] = int(rel)
    return layout, docs, queries, qrels, skipped, len(raw_qrels)


# ---------------------------------------------------------------------------------------------
# Metrics


def evaluate(runs, qrels, qids):
    """runs: {qid: [docId, ...]} best first. Mean over qids."""
    nd, nde, rec, mrr = [], [], [], []
    for q in qids:
        judged = qrels[q]
        ranked = runs.get(q, [])
        rels = sorted((r for r in judged.values() if r > 0), reverse=True)
        dcg = sum(judged.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
        idcg = sum(r / math.log2(i + 2) for i, r in enumerate(rels[:10]))
        nd.append(dcg / idcg)
        dcge = sum((2 ** judged.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
        idcge = sum((2**r - 1) / math.log2(i + 2) for i, r in enumerate(rels[:10]))
        nde.append(dcge / idcge)
        rec.append(sum(1 for d in ranked[:100] if judged.get(d, 0) > 0) / len(rels))
        rr = 0.0
        for i, d in enumerate(ranked[:10]):
            if judged.get(d, 0) > 0:
                rr = 1.0 / (i + 1)
                break
        mrr.append(rr)
    n = len(qids)
    return {
        "ndcg@10": round(sum(nd) / n, 4),
        "recall@100": round(sum(rec) / n, 4),
        "mrr@10": round(sum(mrr) / n, 4),
        "ndcg@10_exp": round(sum(nde) / n, 4),
        "queries": n,
    }


def latency(samples_s):
    ms = sorted(s * 1000.0 for s in samples_s)
    p95 = ms[min(len(ms) - 1, max(0, math.ceil(0.95 * len(ms)) - 1))]
    return {"p50": round(statistics.median(ms), 3), "p95": round(p95, 3), "mean": round(statistics.fmean(ms), 3)}


# ---------------------------------------------------------------------------------------------
# 2. BM25


class Bm25:
    def __init__(self, bm25s, stemmer, args):
        self.bm25s, self.stemmer, self.args = bm25s, stemmer, args

    def tokenize(self, texts):
        return self.bm25s.tokenize(
            texts,
            lower=True,
            token_pattern=self.args.token_pattern,
            stopwords="en",
            stemmer=self.stemmer,
            show_progress=False,
        )

    def build(self, doc_texts, doc_ids):
        self.doc_ids = np.array(doc_ids, dtype=object)
        t0 = time.perf_counter()
        corpus = self.tokenize(doc_texts)
        self.retriever = self.bm25s.BM25(k1=self.args.k1, b=self.args.b, method=self.args.bm25_method)
        self.retriever.index(corpus, show_progress=False)
        return time.perf_counter() - t0

    def search(self, text, k):
        toks = self.bm25s.tokenize(
            [text],
            lower=True,
            token_pattern=self.args.token_pattern,
            stopwords="en",
            stemmer=self.stemmer,
            return_ids=False,
            show_progress=False,
        )
        k = min(k, len(self.doc_ids))
        idx, scores = self.retriever.retrieve(toks, k=k, show_progress=False)
        idx, scores = idx[0], scores[0]
        keep = scores > 0  # a query with no indexed term scores every document 0: nothing matched
        return list(self.doc_ids[idx[keep]])


# ---------------------------------------------------------------------------------------------
# 3. Dense


class Embedder:
    def __init__(self, args):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        t0 = time.perf_counter()
        self.tok = Tokenizer.from_file(args.tokenizer)
        # tokenizer.json ships fixed padding to 128 and truncation at 128: replace both.
        self.tok.no_padding()
        self.tok.enable_truncation(max_length=args.max_tokens)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = args.threads
        opts.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(args.model, sess_options=opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.sess.get_inputs()}
        self.load_s = time.perf_counter() - t0
        self.batch = args.batch_size
        self.sort = not args.no_sort

    def _run(self, encs):
        width = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        for i, e in enumerate(encs):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.sess.run(None, feed)[0]  # [batch, seq, 384]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled.astype(np.float32), int(mask.sum()), ids.size

    def embed_corpus(self, texts):
        c0 = time.process_time()
        t0 = time.perf_counter()
        encs = self.tok.encode_batch(texts)
        tokenize_s = time.perf_counter() - t0
        order = sorted(range(len(texts)), key=lambda i: -len(encs[i].ids)) if self.sort else list(range(len(texts)))
        out = np.zeros((len(texts), 384), dtype=np.float32)
        tokens = padded = 0
        last = time.perf_counter()
        for start in range(0, len(order), self.batch):
            sel = order[start : start + self.batch]
            vecs, n, p = self._run([encs[i] for i in sel])
            out[sel] = vecs
            tokens += n
            padded += p
            if time.perf_counter() - last > 15:
                last = time.perf_counter()
                log(f"  embedded {start + len(sel)}/{len(texts)} texts, {last - t0:.0f} s")
        truncated = sum(1 for e in encs if e.overflowing)
        return out, {
            "seconds": time.perf_counter() - t0,
            "cpu_seconds": time.process_time() - c0,
            "tokenize_seconds": tokenize_s,
            "tokens": tokens,
            "padded_tokens": padded,
            "truncated_texts": truncated,
        }

    def embed_query(self, text):
        return self._run([self.tok.encode(text)])[0][0]


class DenseIndex:
    """Exact cosine over all text vectors; a document scores the max over its texts."""

    def __init__(self, vecs, text_doc_ids):
        order = sorted(range(len(text_doc_ids)), key=lambda i: text_doc_ids[i])  # stable: group by doc
        self.vecs = np.ascontiguousarray(vecs[order])
        ids = [text_doc_ids[i] for i in order]
        starts = [0] + [i for i in range(1, len(ids)) if ids[i] != ids[i - 1]]
        self.starts = np.array(starts, dtype=np.int64)
        self.doc_ids = np.array([ids[s] for s in starts], dtype=object)
        self.one_to_one = len(starts) == len(ids)

    def search(self, qvec, k):
        s = self.vecs @ qvec
        if not self.one_to_one:
            s = np.maximum.reduceat(s, self.starts)
        k = min(k, len(s))
        top = np.argpartition(-s, k - 1)[:k]
        top = top[np.argsort(-s[top], kind="stable")]
        return list(self.doc_ids[top])


def rrf(lists, k, depth):
    score = {}
    for lst in lists:
        for rank, d in enumerate(lst, start=1):
            score[d] = score.get(d, 0.0) + 1.0 / (k + rank)
    return sorted(score, key=lambda d: -score[d])[:depth]


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("collection", help="directory with docs/queries/qrels JSON (BEIR or Cranfield layout)")
    ap.add_argument("--texts", help="JSON [{id, text}]: embed exactly these texts (id = document id)")
    ap.add_argument("--model", default=os.path.join(DEFAULT_MODEL_DIR, "model.onnx"))
    ap.add_argument("--tokenizer", help="tokenizer.json (default: beside --model)")
    ap.add_argument("--max-tokens", type=int, default=256, help="truncation length incl. [CLS]/[SEP]")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--no-sort", action="store_true", help="batch in input order, not by token length")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="onnxruntime intra-op threads")
    ap.add_argument("--k1", type=float, default=0.9)
    ap.add_argument("--b", type=float, default=0.4)
    ap.add_argument("--bm25-method", default="lucene", choices=["lucene", "robertson", "atire"])
    ap.add_argument("--token-pattern", default=r"(?u)\b\w+\b", help="bm25s token regex (bm25s default: \\w\\w+)")
    ap.add_argument("--depth", type=int, default=100, help="results per list and per fusion")
    ap.add_argument("--rrf-k", type=float, default=60.0)
    ap.add_argument("--no-dense", action="store_true", help="BM25 only")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()
    args.tokenizer = args.tokenizer or os.path.join(os.path.dirname(args.model), "tokenizer.json")

    import bm25s
    import Stemmer

    result = {
        "pipeline": "plain-python",
        "python": platform.python_version(),
        "versions": {"bm25s": bm25s.__version__, "PyStemmer": getattr(Stemmer, "__version__", "?"), "numpy": np.__version__},
        "cpus": os.cpu_count(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }

    # 1. load
    t0 = time.perf_counter()
    layout, docs, queries, qrels, skipped, n_qrels = load_collection(args.collection)
    doc_texts = [(d["title"] + " " + d["text"]).strip() for d in docs]
    doc_ids = [d["id"] for d in docs]
    qids_all = {q["id"] for q in queries}
    evalq = [q for q in queries if any(r > 0 for r in qrels.get(q["id"], {}).values())]
    load_s = time.perf_counter() - t0
    log(f"{layout} collection: {len(docs)} docs ({skipped} empty skipped), {len(queries)} queries "
        f"({len(evalq)} with a relevant judgment), {n_qrels} qrels; loaded in {load_s:.2f} s")
    result["collection"] = {
        "dir": os.path.abspath(args.collection),
        "layout": layout,
        "docs": len(docs),
        "docs_skipped_empty": skipped,
        "queries": len(queries),
        "queries_evaluated": len(evalq),
        "qrels": n_qrels,
        "qrels_queries_without_query_text": len(set(qrels) - qids_all),
    }
    result["settings"] = {
        "doc_text": 'title + " " + text',
        "bm25": {"library": "bm25s", "method": args.bm25_method, "k1": args.k1, "b": args.b,
                 "lowercase": True, "token_pattern": args.token_pattern, "stopwords": "bm25s 'en' (33 words)",
                 "stemmers": {"bm25": None, "bm25_porter": "PyStemmer porter", "bm25_snowball": "PyStemmer english (Porter2)"}},
        "depth": args.depth,
        "rrf_k": args.rrf_k,
        "rrf_inputs": ["bm25 (no stemming)", "dense"],
        "metrics": "nDCG@10 linear gains (trec_eval), recall@100 and MRR@10 with relevant = rel > 0; ndcg@10_exp uses 2^rel - 1",
    }
    timings = {"load_s": round(load_s, 3)}
    quality, lat = {}, {}
    qids = [q["id"] for q in evalq]

    # 2. BM25
    bm25_runs = {}
    for name, stem in (("bm25", None), ("bm25_porter", "porter"), ("bm25_snowball", "english")):
        engine = Bm25(bm25s, Stemmer.Stemmer(stem) if stem else None, args)
        build_s = engine.build(doc_texts, doc_ids)
        timings[f"{name}_index_s"] = round(build_s, 3)
        engine.search(evalq[0]["text"], args.depth)  # warm-up
        runs, samples = {}, []
        for q in evalq:
            t = time.perf_counter()
            runs[q["id"]] = engine.search(q["text"], args.depth)
            samples.append(time.perf_counter() - t)
        quality[name] = evaluate(runs, qrels, qids)
        lat[name] = latency(samples)
        log(f"{name}: index {build_s:.2f} s, {quality[name]}, p50 {lat[name]['p50']} ms")
        if name == "bm25":
            bm25_runs, bm25_engine = runs, engine

    if not args.no_dense:
        import onnxruntime
        import tokenizers

        result["versions"]["onnxruntime"] = onnxruntime.__version__
        result["versions"]["tokenizers"] = tokenizers.__version__
        # 3. dense
        if args.texts:
            with open(args.texts, encoding="utf-8") as f:
                items = json.load(f)
            texts = [t["text"] for t in items]
            text_doc_ids = [str(t["id"]) for t in items]
            known = set(doc_ids)
            result["collection"]["texts_file"] = os.path.abspath(args.texts)
            result["collection"]["texts_unknown_doc_ids"] = sum(1 for i in text_doc_ids if i not in known)
        else:
            texts, text_doc_ids = doc_texts, doc_ids
        emb = Embedder(args)
        timings["model_load_s"] = round(emb.load_s, 3)
        log(f"embedding {len(texts)} texts (max {args.max_tokens} tokens, batch {args.batch_size}, "
            f"{'sorted by length' if emb.sort else 'input order'}, {args.threads} threads)")
        vecs, st = emb.embed_corpus(texts)
        index = DenseIndex(vecs, text_doc_ids)
        timings["embed_s"] = round(st["seconds"], 3)
        timings["ingest_total_s"] = round(timings["bm25_index_s"] + st["seconds"], 3)
        result["embedding"] = {
            "model": os.path.abspath(args.model),
            "texts": len(texts),
            "docs_with_texts": len(index.doc_ids),
            "tokens": st["tokens"],
            "padded_tokens": st["padded_tokens"],
            "truncated_texts": st["truncated_texts"],
            "tokenize_s": round(st["tokenize_seconds"], 3),
            "cpu_s": round(st["cpu_seconds"], 3),
            "texts_per_s": round(len(texts) / st["seconds"], 2),
            "tokens_per_s": round(st["tokens"] / st["seconds"], 1),
            "max_tokens": args.max_tokens,
            "batch_size": args.batch_size,
            "sorted_by_length": emb.sort,
            "padding": "dynamic (longest in batch)",
            "pooling": "mean over attention mask, L2-normalised",
            "intra_op_threads": args.threads,
        }
        log(f"embedded in {st['seconds']:.1f} s: {len(texts) / st['seconds']:.1f} texts/s, "
            f"{st['tokens']} tokens ({st['truncated_texts']} truncated)")

        index.search(emb.embed_query(evalq[0]["text"]), args.depth)  # warm-up
        dense_runs, samples = {}, []
        for q in evalq:
            t = time.perf_counter()
            dense_runs[q["id"]] = index.search(emb.embed_query(q["text"]), args.depth)
            samples.append(time.perf_counter() - t)
        quality["dense"] = evaluate(dense_runs, qrels, qids)
        lat["dense"] = latency(samples)
        log(f"dense: {quality['dense']}, p50 {lat['dense']['p50']} ms")

        # 4. RRF, end to end per query
        rrf_runs, samples, mismatched = {}, [], 0
        for q in evalq:
            t = time.perf_counter()
            b = bm25_engine.search(q["text"], args.depth)
            d = index.search(emb.embed_query(q["text"]), args.depth)
            rrf_runs[q["id"]] = rrf([b, d], args.rrf_k, args.depth)
            samples.append(time.perf_counter() - t)
            if rrf_runs[q["id"]] != rrf([bm25_runs[q["id"]], dense_runs[q["id"]]], args.rrf_k, args.depth):
                mismatched += 1
        quality["rrf"] = evaluate(rrf_runs, qrels, qids)
        lat["rrf"] = latency(samples)
        if mismatched:
            result["rrf_rerun_mismatches"] = mismatched
        log(f"rrf: {quality['rrf']}, p50 {lat['rrf']['p50']} ms")

    result["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    result["timings"] = timings
    result["quality"] = quality
    result["latency_ms"] = lat
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
