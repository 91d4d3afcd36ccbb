//! The lexical index: Tantivy, BM25 over title, headings and body (English stemming and stop
//! words), one document per chunk keyed by the chunk's rowid, filtered by workspace and, when a
//! metadata filter applies, by document.

use std::collections::HashSet;
use std::path::Path;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery, TermSetQuery};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

/// Bump when the schema or analysis changes: a mismatch rebuilds the index.
/// 2: each chunk stores its body's term counts (`feedback_terms`).
pub const SCHEMA_VERSION: u32 = 2;
const ANALYZER: &str = "steward_en";

#[derive(Clone, Copy)]
pub struct Fields {
    pub key: Field,
    pub workspace: Field,
    pub document: Field,
    pub title: Field,
    pub heading: Field,
    pub body: Field,
    /// The body's analyzed terms with their counts, stored (not searched): relevance feedback
    /// reads them instead of analysing the chunk again at query time. See [`TermCounts`].
    pub feedback_terms: Field,
}

/// BM25 field weights, tuned on Cranfield (docs/performance.md).
#[derive(Debug, Clone, Copy)]
pub struct Boosts {
    pub title: f32,
    pub heading: f32,
    pub body: f32,
}

impl Default for Boosts {
    fn default() -> Self {
        Boosts { title: 1.0, heading: 1.0, body: 1.0 }
    }
}

pub struct TextIndex {
    pub index: Index,
    pub reader: IndexReader,
    pub fields: Fields,
    analyzer: TextAnalyzer,
    query_analyzer: TextAnalyzer,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default().set_tokenizer(ANALYZER).set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        key: b.add_u64_field("chunk_key", INDEXED | FAST | STORED),
        workspace: b.add_text_field("workspace", STRING),
        document: b.add_text_field("document", STRING),
        title: b.add_text_field("title", text.clone()),
        heading: b.add_text_field("heading", text.clone()),
        body: b.add_text_field("body", text),
        feedback_terms: b.add_text_field("feedback_terms", STORED),
    };
    (b.build(), fields)
}

/// Words that carry no topic in a question: dropped from queries (not from documents), on top of
/// the index's own stop words.
const QUERY_STOP_WORDS: &[&str] = &[
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "any",
    "anyone",
    "anything",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "can",
    "cannot",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "done",
    "down",
    "during",
    "each",
    "either",
    "else",
    "etc",
    "ever",
    "every",
    "few",
    "from",
    "further",
    "get",
    "give",
    "given",
    "gives",
    "go",
    "got",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "him",
    "his",
    "how",
    "however",
    "i",
    "im",
    "its",
    "itself",
    "just",
    "know",
    "let",
    "like",
    "made",
    "make",
    "many",
    "may",
    "me",
    "might",
    "more",
    "most",
    "much",
    "must",
    "my",
    "need",
    "nor",
    "now",
    "off",
    "once",
    "one",
    "only",
    "other",
    "others",
    "otherwise",
    "our",
    "ours",
    "out",
    "over",
    "own",
    "please",
    "same",
    "she",
    "should",
    "so",
    "some",
    "something",
    "still",
    "than",
    "them",
    "themselves",
    "therefore",
    "thing",
    "things",
    "those",
    "though",
    "through",
    "thus",
    "too",
    "under",
    "until",
    "up",
    "upon",
    "us",
    "use",
    "used",
    "using",
    "very",
    "want",
    "we",
    "were",
    "what",
    "whatever",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "would",
    "yet",
    "you",
    "your",
    "yours",
];

/// English terms as the answerer compares them: words, lowercased and stemmed (no stop words
/// removed, no length limit), so its overlap counts agree with how the index sees the text.
pub struct Terms(TextAnalyzer);

impl Default for Terms {
    fn default() -> Self {
        Terms(
            TextAnalyzer::builder(SimpleTokenizer::default())
                .filter(LowerCaser)
                .filter(Stemmer::new(Language::English))
                .build(),
        )
    }
}

impl Terms {
    /// The terms of `text`, in order.
    pub fn of(&mut self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut s = self.0.token_stream(text);
        while let Some(t) = s.next() {
            out.push(t.text.clone());
        }
        out
    }
}

fn analyzer() -> TextAnalyzer {
    #[allow(clippy::expect_used, reason = "English stop words are built into tantivy")]
    let stop = StopWordFilter::new(Language::English).expect("English stop words");
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(stop)
        .filter(Stemmer::new(Language::English))
        .build()
}

fn query_analyzer() -> TextAnalyzer {
    #[allow(clippy::expect_used, reason = "English stop words are built into tantivy")]
    let stop = StopWordFilter::new(Language::English).expect("English stop words");
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(stop)
        .filter(StopWordFilter::remove(QUERY_STOP_WORDS.iter().map(|s| s.to_string())))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// The analyzed terms of a text with their counts, as relevance feedback uses them: `total` counts
/// every term; `counts` keeps only terms that can expand a query (longer than two letters, not a
/// number), in first-seen order. Stored as `total term count term count ...` (analyzed terms hold
/// no spaces).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TermCounts {
    pub total: u32,
    pub counts: Vec<(String, u32)>,
}

impl TermCounts {
    pub fn of(terms: &[String]) -> TermCounts {
        let mut counts: Vec<(String, u32)> = Vec::new();
        let mut at: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for t in terms {
            if t.len() <= 2 || t.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            match at.get(t.as_str()) {
                Some(&i) => counts[i].1 += 1,
                None => {
                    at.insert(t, counts.len());
                    counts.push((t.clone(), 1));
                }
            }
        }
        TermCounts { total: terms.len() as u32, counts }
    }

    pub fn encode(&self) -> String {
        let mut s = self.total.to_string();
        for (t, c) in &self.counts {
            s.push(' ');
            s.push_str(t);
            s.push(' ');
            s.push_str(&c.to_string());
        }
        s
    }

    /// The inverse of [`TermCounts::encode`]; malformed pairs are skipped.
    pub fn decode(s: &str) -> TermCounts {
        let mut parts = s.split(' ');
        let total = parts.next().and_then(|t| t.parse().ok()).unwrap_or(0);
        let mut counts = Vec::new();
        while let (Some(t), Some(c)) = (parts.next(), parts.next()) {
            if let Ok(c) = c.parse() {
                counts.push((t.to_string(), c));
            }
        }
        TermCounts { total, counts }
    }
}

/// A chunk as the text index sees it.
pub struct TextDoc<'a> {
    pub key: u64,
    pub workspace: &'a str,
    pub document: &'a str,
    pub title: &'a str,
    pub heading: &'a str,
    pub body: &'a str,
}

impl TextIndex {
    /// Opens the index at `dir`, creating it when absent.
    pub fn open(dir: &Path) -> tantivy::Result<TextIndex> {
        std::fs::create_dir_all(dir)?;
        let (schema, fields) = schema();
        let index = match Index::open_in_dir(dir) {
            Ok(i) if i.schema() == schema => i,
            Ok(_) => {
                // another schema version (empty, or the caller rebuilds it): start over
                std::fs::remove_dir_all(dir)?;
                std::fs::create_dir_all(dir)?;
                Index::create_in_dir(dir, schema.clone())?
            }
            Err(_) => Index::create_in_dir(dir, schema.clone())?,
        };
        let analyzer = analyzer();
        index.tokenizers().register(ANALYZER, analyzer.clone());
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        Ok(TextIndex { index, reader, fields, analyzer, query_analyzer: query_analyzer() })
    }

    pub fn writer(&self) -> tantivy::Result<IndexWriter> {
        let w = self.index.writer_with_num_threads(1, 50_000_000)?;
        // Frequent small commits (every embedding batch) would leave many small segments, and
        // every query pays per segment: merge as soon as two are alike in size.
        let mut policy = tantivy::indexer::LogMergePolicy::default();
        policy.set_min_num_segments(2);
        w.set_merge_policy(Box::new(policy));
        Ok(w)
    }

    /// The commit payload (our replay position), if any.
    pub fn payload(&self) -> Option<String> {
        self.index.load_metas().ok().and_then(|m| m.payload)
    }

    pub fn add(&self, w: &IndexWriter, d: &TextDoc) -> tantivy::Result<()> {
        let f = self.fields;
        let mut doc = TantivyDocument::default();
        doc.add_u64(f.key, d.key);
        doc.add_text(f.workspace, d.workspace);
        doc.add_text(f.document, d.document);
        doc.add_text(f.title, d.title);
        if !d.heading.is_empty() {
            doc.add_text(f.heading, d.heading);
        }
        doc.add_text(f.body, d.body);
        doc.add_text(f.feedback_terms, TermCounts::of(&self.document_terms(d.body)).encode());
        w.add_document(doc)?;
        Ok(())
    }

    pub fn delete(&self, w: &IndexWriter, key: u64) {
        w.delete_term(Term::from_field_u64(self.fields.key, key));
    }

    /// Analyzed query terms of `text` (lowercased, stop words and question words removed, stemmed),
    /// deduplicated. Falls back to the document analysis when only question words remain.
    pub fn terms(&self, text: &str) -> Vec<String> {
        let q = Self::analyze(&self.query_analyzer, text);
        if q.is_empty() { Self::analyze(&self.analyzer, text) } else { q }
    }

    fn analyze(a: &TextAnalyzer, text: &str) -> Vec<String> {
        let mut a = a.clone();
        let mut stream = a.token_stream(text);
        let mut out: Vec<String> = Vec::new();
        while let Some(t) = stream.next() {
            if !out.contains(&t.text) {
                out.push(t.text.clone());
            }
        }
        out
    }

    /// BM25 top `k` chunk keys in `workspace`, limited to `documents` when given.
    pub fn search(
        &self,
        workspace: &str,
        query: &str,
        k: usize,
        documents: Option<&HashSet<String>>,
        boosts: Boosts,
    ) -> tantivy::Result<Vec<(u64, f32)>> {
        let terms: Vec<(String, f32)> = self.terms(query).into_iter().map(|t| (t, 1.0)).collect();
        self.search_terms(workspace, &terms, k, documents, boosts)
    }

    /// Every analyzed term of a document text, with repetitions (for relevance feedback).
    pub fn document_terms(&self, text: &str) -> Vec<String> {
        let mut a = self.analyzer.clone();
        let mut stream = a.token_stream(text);
        let mut out = Vec::new();
        while let Some(t) = stream.next() {
            out.push(t.text.clone());
        }
        out
    }

    /// The stored term counts of the chunks `keys`, in their order (a key not in the index is
    /// left out).
    pub fn stored_term_counts(&self, keys: &[u64]) -> tantivy::Result<Vec<(u64, TermCounts)>> {
        use tantivy::{DocAddress, DocSet, TERMINATED};
        let searcher = self.reader.searcher();
        let mut out = Vec::with_capacity(keys.len());
        for &key in keys {
            let term = Term::from_field_u64(self.fields.key, key);
            'segments: for (ord, segment) in searcher.segment_readers().iter().enumerate() {
                let Some(mut postings) =
                    segment.inverted_index(self.fields.key)?.read_postings(&term, IndexRecordOption::Basic)?
                else {
                    continue;
                };
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    if !segment.is_deleted(doc) {
                        let stored: TantivyDocument = searcher.doc(DocAddress::new(ord as u32, doc))?;
                        if let Some(text) = stored.get_first(self.fields.feedback_terms).and_then(|v| v.as_str()) {
                            out.push((key, TermCounts::decode(text)));
                        }
                        break 'segments;
                    }
                    doc = postings.advance();
                }
            }
        }
        Ok(out)
    }

    /// BM25 over analyzed `terms`, each with its own weight.
    pub fn search_terms(
        &self,
        workspace: &str,
        weighted: &[(String, f32)],
        k: usize,
        documents: Option<&HashSet<String>>,
        boosts: Boosts,
    ) -> tantivy::Result<Vec<(u64, f32)>> {
        let terms: Vec<String> = weighted.iter().map(|(t, _)| t.clone()).collect();
        if terms.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let f = self.fields;
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (t, w) in weighted {
            // expansion terms (weight below 1) only score the body: cheaper, and as good
            let fields: &[(Field, f32)] = if *w < 1.0 {
                &[(f.body, boosts.body)]
            } else {
                &[(f.title, boosts.title), (f.heading, boosts.heading), (f.body, boosts.body)]
            };
            for &(field, boost) in fields {
                let boost = boost * w;
                if boost <= 0.0 {
                    continue;
                }
                let q: Box<dyn Query> =
                    Box::new(TermQuery::new(Term::from_field_text(field, t), IndexRecordOption::WithFreqs));
                let q: Box<dyn Query> =
                    if (boost - 1.0).abs() > f32::EPSILON { Box::new(BoostQuery::new(q, boost)) } else { q };
                should.push((Occur::Should, q));
            }
        }
        let mut must: Vec<(Occur, Box<dyn Query>)> = vec![
            (
                Occur::Must,
                Box::new(TermQuery::new(Term::from_field_text(f.workspace, workspace), IndexRecordOption::Basic)),
            ),
            (Occur::Must, Box::new(BooleanQuery::new(should))),
        ];
        if let Some(docs) = documents {
            if docs.is_empty() {
                return Ok(Vec::new());
            }
            let set = TermSetQuery::new(docs.iter().map(|d| Term::from_field_text(f.document, d)));
            must.push((Occur::Must, Box::new(set)));
        }
        let query = BooleanQuery::new(must);
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(k).order_by_score())?;
        let mut out = Vec::with_capacity(top.len());
        // the key column, opened once per segment
        let mut columns: Vec<Option<tantivy::columnar::Column<u64>>> = vec![None; searcher.segment_readers().len()];
        for (score, addr) in top {
            let col = match &mut columns[addr.segment_ord as usize] {
                Some(c) => c,
                slot => slot.insert(searcher.segment_reader(addr.segment_ord).fast_fields().u64("chunk_key")?),
            };
            if let Some(key) = col.first(addr.doc_id) {
                out.push((key, score));
            }
        }
        Ok(out)
    }

    /// Chunk keys present (for consistency checks).
    pub fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Chunk keys present in one workspace.
    pub fn num_docs_of(&self, workspace: &str) -> u64 {
        let q = TermQuery::new(Term::from_field_text(self.fields.workspace, workspace), IndexRecordOption::Basic);
        self.reader.searcher().search(&q, &tantivy::collector::Count).map_or(0, |n| n as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc<'a>(key: u64, body: &'a str) -> TextDoc<'a> {
        TextDoc { key, workspace: "ws", document: "doc", title: "t", heading: "", body }
    }

    #[test]
    fn term_counts_keep_expansion_terms_and_round_trip() {
        let terms: Vec<String> =
            ["flow", "of", "wing", "flow", "12", "x2", "flow"].iter().map(|s| s.to_string()).collect();
        let c = TermCounts::of(&terms);
        assert_eq!(c.total, 7, "every term counts toward the total");
        assert_eq!(c.counts, vec![("flow".to_string(), 3), ("wing".to_string(), 1)]);
        assert_eq!(TermCounts::decode(&c.encode()), c);
        assert_eq!(TermCounts::decode("3 flow two wing 1"), TermCounts { total: 3, counts: vec![("wing".into(), 1)] });
    }

    #[test]
    fn stored_term_counts_follow_the_indexed_body() {
        let dir = tempfile::tempdir().unwrap();
        let index = TextIndex::open(dir.path()).unwrap();
        let mut w = index.writer().unwrap();
        let (a, b) =
            ("Supersonic flows over swept wings: the flows separate.", "Heat transfer in laminar boundary layers.");
        index.add(&w, &doc(1, a)).unwrap();
        index.add(&w, &doc(2, b)).unwrap();
        w.commit().unwrap();
        index.reader.reload().unwrap();
        let mut got = index.stored_term_counts(&[2, 1, 99]).unwrap();
        got.sort_by_key(|(k, _)| *k);
        let want_a = TermCounts::of(&index.document_terms(a));
        assert!(want_a.counts.contains(&("flow".to_string(), 2)), "{want_a:?}");
        assert_eq!(got, vec![(1, want_a), (2, TermCounts::of(&index.document_terms(b)))]);

        index.delete(&w, 1);
        w.commit().unwrap();
        index.reader.reload().unwrap();
        let got = index.stored_term_counts(&[1, 2]).unwrap();
        assert_eq!(got.iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec![2], "a deleted chunk has no counts");
    }

    #[test]
    fn an_index_of_another_schema_is_started_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Schema::builder();
        b.add_u64_field("chunk_key", INDEXED | FAST | STORED);
        Index::create_in_dir(dir.path(), b.build()).unwrap();
        let index = TextIndex::open(dir.path()).unwrap();
        assert_eq!(index.index.schema(), schema().0);
        let mut w = index.writer().unwrap();
        index.add(&w, &doc(7, "lift and drag")).unwrap();
        w.commit().unwrap();
        index.reader.reload().unwrap();
        assert_eq!(index.num_docs(), 1);
    }
}
