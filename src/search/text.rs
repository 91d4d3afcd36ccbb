//! The lexical index: Tantivy BM25 over one field per chunk (the document's title, the chunk's
//! heading path and its text, as one text), one Tantivy document per chunk keyed by the chunk's
//! rowid, filtered by workspace and, when a metadata filter applies, by document.
//!
//! Text is analyzed here, per the workspace's language ([`Lang`]: Tantivy's stemmers and stop
//! words for the languages it ships, lowercase words for the rest), and handed to Tantivy
//! pre-tokenized, so one index holds workspaces of different languages. Queries are analyzed the
//! same way. One field, not title and body scored apart and summed: a sum of per-field BM25 scores
//! counts a term twice where it is in both, with field weights that would have to be fitted to a
//! collection.

use std::collections::HashSet;
use std::path::Path;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery, TermSetQuery};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::{
    Language, LowerCaser, PreTokenizedString, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
    Token,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

/// Bump when the schema or analysis changes: a mismatch rebuilds the index.
/// 2: each chunk stores its body's term counts (`feedback_terms`).
/// 3: one pre-tokenized `text` field (title, heading, body) analyzed per workspace language.
pub const SCHEMA_VERSION: u32 = 3;

#[derive(Clone, Copy)]
pub struct Fields {
    pub key: Field,
    pub workspace: Field,
    pub document: Field,
    pub text: Field,
    /// The chunk's analyzed terms with their counts, stored (not searched): relevance feedback
    /// reads them instead of analysing the chunk again at query time. See [`TermCounts`].
    pub feedback_terms: Field,
}

/// A workspace's language for lexical analysis: Tantivy's Snowball stemmer and stop words where
/// it has them; [`Lang::Other`] is lowercase words with neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Lang {
    #[default]
    English,
    German,
    French,
    Spanish,
    Portuguese,
    Italian,
    Dutch,
    Swedish,
    Norwegian,
    Danish,
    Finnish,
    Hungarian,
    Russian,
    Romanian,
    Turkish,
    Greek,
    Arabic,
    Tamil,
    Other,
}

impl Lang {
    pub const ALL: [Lang; 19] = [
        Lang::English,
        Lang::German,
        Lang::French,
        Lang::Spanish,
        Lang::Portuguese,
        Lang::Italian,
        Lang::Dutch,
        Lang::Swedish,
        Lang::Norwegian,
        Lang::Danish,
        Lang::Finnish,
        Lang::Hungarian,
        Lang::Russian,
        Lang::Romanian,
        Lang::Turkish,
        Lang::Greek,
        Lang::Arabic,
        Lang::Tamil,
        Lang::Other,
    ];

    /// The ISO 639-1 code (`other` for [`Lang::Other`]).
    pub fn code(self) -> &'static str {
        match self {
            Lang::English => "en",
            Lang::German => "de",
            Lang::French => "fr",
            Lang::Spanish => "es",
            Lang::Portuguese => "pt",
            Lang::Italian => "it",
            Lang::Dutch => "nl",
            Lang::Swedish => "sv",
            Lang::Norwegian => "no",
            Lang::Danish => "da",
            Lang::Finnish => "fi",
            Lang::Hungarian => "hu",
            Lang::Russian => "ru",
            Lang::Romanian => "ro",
            Lang::Turkish => "tr",
            Lang::Greek => "el",
            Lang::Arabic => "ar",
            Lang::Tamil => "ta",
            Lang::Other => "other",
        }
    }

    /// The language of a locale (`en`, `pt-BR`, `nb_NO`); an unknown one is [`Lang::Other`].
    pub fn of_locale(locale: &str) -> Lang {
        let primary = locale.split(['-', '_']).next().unwrap_or("").to_ascii_lowercase();
        let primary = if primary == "nb" || primary == "nn" { "no".to_string() } else { primary };
        Lang::ALL.into_iter().find(|l| l.code() == primary).unwrap_or(Lang::Other)
    }

    fn tantivy(self) -> Option<Language> {
        Some(match self {
            Lang::English => Language::English,
            Lang::German => Language::German,
            Lang::French => Language::French,
            Lang::Spanish => Language::Spanish,
            Lang::Portuguese => Language::Portuguese,
            Lang::Italian => Language::Italian,
            Lang::Dutch => Language::Dutch,
            Lang::Swedish => Language::Swedish,
            Lang::Norwegian => Language::Norwegian,
            Lang::Danish => Language::Danish,
            Lang::Finnish => Language::Finnish,
            Lang::Hungarian => Language::Hungarian,
            Lang::Russian => Language::Russian,
            Lang::Romanian => Language::Romanian,
            Lang::Turkish => Language::Turkish,
            Lang::Greek => Language::Greek,
            Lang::Arabic => Language::Arabic,
            Lang::Tamil => Language::Tamil,
            Lang::Other => return None,
        })
    }
}

/// How a language's text is analyzed: words (Unicode letters and digits), at most 40 bytes,
/// lowercased, the language's stop words removed, stemmed.
fn analyzer(lang: Lang) -> TextAnalyzer {
    let b = TextAnalyzer::builder(SimpleTokenizer::default()).filter(RemoveLongFilter::limit(40)).filter(LowerCaser);
    let Some(language) = lang.tantivy() else { return b.build() };
    let stem = Stemmer::new(language);
    match StopWordFilter::new(language) {
        Some(stop) => b.filter(stop).filter(stem).build(),
        None => b.filter(stem).build(),
    }
}

/// Every term of `text` as the index analyzes a document of `lang` (with repetitions).
pub fn analyze(lang: Lang, text: &str) -> Vec<String> {
    let mut a = analyzer(lang);
    let mut stream = a.token_stream(text);
    let mut out = Vec::new();
    while let Some(t) = stream.next() {
        out.push(t.text.clone());
    }
    out
}

/// Every term of `text` as the index analyzes an English document (with repetitions): what a
/// plain BM25 over "the same tokenizer" sees (the retrieval benchmark's reference).
pub fn document_analysis(text: &str) -> Vec<String> {
    analyze(Lang::English, text)
}

/// `text` analyzed for the index: the tokens with their positions and offsets.
fn pre_tokenized(lang: Lang, text: &str) -> (PreTokenizedString, Vec<String>) {
    let mut a = analyzer(lang);
    let mut stream = a.token_stream(text);
    let mut tokens: Vec<Token> = Vec::new();
    while let Some(t) = stream.next() {
        tokens.push(t.clone());
    }
    let terms = tokens.iter().map(|t| t.text.clone()).collect();
    (PreTokenizedString { text: text.to_string(), tokens }, terms)
}

pub struct TextIndex {
    pub index: Index,
    pub reader: IndexReader,
    pub fields: Fields,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    // the tokenizer is never run: text arrives pre-tokenized
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default().set_tokenizer("raw").set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        key: b.add_u64_field("chunk_key", INDEXED | FAST | STORED),
        workspace: b.add_text_field("workspace", STRING),
        document: b.add_text_field("document", STRING),
        text: b.add_text_field("text", text),
        feedback_terms: b.add_text_field("feedback_terms", STORED),
    };
    (b.build(), fields)
}

/// English words that carry no topic in a question: dropped from queries (not from documents), on
/// top of the index's own stop words, when the tuning asks for it.
pub const QUESTION_WORDS: &[&str] = &[
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

/// Query terms of `text` in `lang`, analyzed as documents are, each weighted by how often it occurs
/// in the query (BM25's query term frequency: a long query that names a term five times is about
/// it more than one that names it once), in first-seen order. With `question_words`, English
/// question and filler words ([`QUESTION_WORDS`]) are dropped too (unless nothing else remains).
pub fn query_terms(lang: Lang, text: &str, question_words: bool) -> Vec<(String, f32)> {
    let mut out: Vec<(String, f32)> = Vec::new();
    for t in analyze(lang, text) {
        match out.iter_mut().find(|(x, _)| *x == t) {
            Some((_, n)) => *n += 1.0,
            None => out.push((t, 1.0)),
        }
    }
    if question_words && lang == Lang::English {
        let stems: HashSet<String> = QUESTION_WORDS.iter().flat_map(|w| analyze(Lang::English, w)).collect();
        let kept: Vec<(String, f32)> = out.iter().filter(|(t, _)| !stems.contains(t)).cloned().collect();
        if !kept.is_empty() {
            return kept;
        }
    }
    out
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

/// What an index on disk holds: its commit payload and its chunk keys.
pub type SavedKeys = (Option<String>, HashSet<u64>);

/// A chunk as the text index sees it.
pub struct TextDoc<'a> {
    pub key: u64,
    pub workspace: &'a str,
    pub document: &'a str,
    pub lang: Lang,
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
                super::rebuild::discard(dir)?;
                std::fs::create_dir_all(dir)?;
                Index::create_in_dir(dir, schema.clone())?
            }
            Err(_) => Index::create_in_dir(dir, schema.clone())?,
        };
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        Ok(TextIndex { index, reader, fields })
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

    /// Files of the live segments that fail their checksum; an error when one cannot be read
    /// (missing, truncated): either way the index is damaged.
    pub fn damaged(&self) -> tantivy::Result<Vec<std::path::PathBuf>> {
        Ok(self.index.validate_checksum()?.into_iter().collect())
    }

    /// The commit payload (our replay position), if any.
    pub fn payload(&self) -> Option<String> {
        self.index.load_metas().ok().and_then(|m| m.payload)
    }

    /// Adds a chunk: its title, heading path and text as one field, analyzed for its language.
    pub fn add(&self, w: &IndexWriter, d: &TextDoc) -> tantivy::Result<()> {
        let f = self.fields;
        let mut doc = TantivyDocument::default();
        doc.add_u64(f.key, d.key);
        doc.add_text(f.workspace, d.workspace);
        doc.add_text(f.document, d.document);
        let mut all = String::with_capacity(d.title.len() + d.heading.len() + d.body.len() + 2);
        for part in [d.title, d.heading, d.body] {
            if !part.trim().is_empty() {
                if !all.is_empty() {
                    all.push('\n');
                }
                all.push_str(part);
            }
        }
        let (tokens, terms) = pre_tokenized(d.lang, &all);
        doc.add_pre_tokenized_text(f.text, tokens);
        doc.add_text(f.feedback_terms, TermCounts::of(&terms).encode());
        w.add_document(doc)?;
        Ok(())
    }

    pub fn delete(&self, w: &IndexWriter, key: u64) {
        w.delete_term(Term::from_field_u64(self.fields.key, key));
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

    /// BM25 over analyzed `terms`, each with its own weight (expansion terms weigh less than 1).
    pub fn search_terms(
        &self,
        workspace: &str,
        weighted: &[(String, f32)],
        k: usize,
        documents: Option<&HashSet<String>>,
    ) -> tantivy::Result<Vec<(u64, f32)>> {
        if weighted.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let f = self.fields;
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (t, w) in weighted {
            if *w <= 0.0 {
                continue;
            }
            let q: Box<dyn Query> =
                Box::new(TermQuery::new(Term::from_field_text(f.text, t), IndexRecordOption::WithFreqs));
            should.push((
                Occur::Should,
                if (w - 1.0).abs() > f32::EPSILON { Box::new(BoostQuery::new(q, *w)) } else { q },
            ));
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
        // equal scores in chunk order, not in the order the index happened to receive the chunks
        // (a rebuilt or restored index answers as the one it replaces)
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(out)
    }

    /// The commit payload and the chunk keys of the index in `dir`, read without changing it
    /// (`steward verify`). `Ok(None)` when there is no index; an error says why it is unusable.
    pub fn read_keys(dir: &Path) -> Result<Option<SavedKeys>, String> {
        if !dir.join("meta.json").is_file() {
            return Ok(None);
        }
        let index = Index::open_in_dir(dir).map_err(|e| format!("cannot be opened: {e}"))?;
        if index.schema() != schema().0 {
            return Err("of another schema version".into());
        }
        match index.validate_checksum() {
            Ok(d) if d.is_empty() => {}
            Ok(d) => return Err(format!("corrupt ({} files fail their checksum)", d.len())),
            Err(e) => return Err(format!("corrupt ({e})")),
        }
        let payload = index.load_metas().map_err(|e| e.to_string())?.payload;
        let reader: IndexReader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e: tantivy::TantivyError| e.to_string())?;
        let mut keys = HashSet::new();
        for seg in reader.searcher().segment_readers() {
            let col = seg.fast_fields().u64("chunk_key").map_err(|e| e.to_string())?;
            for doc in seg.doc_ids_alive() {
                if let Some(k) = col.first(doc) {
                    keys.insert(k);
                }
            }
        }
        Ok(Some((payload, keys)))
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
        TextDoc { key, workspace: "ws", document: "doc", lang: Lang::English, title: "", heading: "", body }
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
        let want_a = TermCounts::of(&analyze(Lang::English, a));
        assert!(want_a.counts.contains(&("flow".to_string(), 2)), "{want_a:?}");
        assert_eq!(got, vec![(1, want_a), (2, TermCounts::of(&analyze(Lang::English, b)))]);

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

    #[test]
    fn title_heading_and_body_are_one_field_analyzed_per_language() {
        let dir = tempfile::tempdir().unwrap();
        let index = TextIndex::open(dir.path()).unwrap();
        let mut w = index.writer().unwrap();
        let d =
            |key, lang, title, body| TextDoc { key, workspace: "ws", document: "d", lang, title, heading: "", body };
        index.add(&w, &d(1, Lang::English, "Refund policy", "Items are returned within thirty days.")).unwrap();
        index.add(&w, &d(2, Lang::German, "Rückgabe", "Die Häuser wurden gestern verkauft.")).unwrap();
        w.commit().unwrap();
        index.reader.reload().unwrap();
        let hit = |lang, q: &str| {
            let terms = query_terms(lang, q, false);
            index.search_terms("ws", &terms, 10, None).unwrap().into_iter().map(|(k, _)| k).collect::<Vec<_>>()
        };
        assert_eq!(hit(Lang::English, "refunds"), vec![1], "the title is searched, stemmed");
        assert_eq!(hit(Lang::English, "return"), vec![1]);
        assert_eq!(hit(Lang::German, "Haus"), vec![2], "German stemming: Häuser → haus");
        assert_eq!(hit(Lang::German, "Häusern"), vec![2]);
        assert_eq!(hit(Lang::German, "die"), Vec::<u64>::new(), "a German stop word");
    }

    #[test]
    fn locales_pick_a_language_and_question_words_are_optional() {
        assert_eq!(Lang::of_locale("pt-BR"), Lang::Portuguese);
        assert_eq!(Lang::of_locale("nb_NO"), Lang::Norwegian);
        assert_eq!(Lang::of_locale("EN"), Lang::English);
        assert_eq!(Lang::of_locale("ja"), Lang::Other);
        let words = |v: Vec<(String, f32)>| v.into_iter().map(|(t, _)| t).collect::<Vec<_>>();
        assert_eq!(words(query_terms(Lang::English, "What is the drag of a wing?", true)), vec!["drag", "wing"]);
        assert_eq!(
            words(query_terms(Lang::English, "What is the drag of a wing?", false)),
            vec!["what", "drag", "wing"]
        );
        assert_eq!(words(query_terms(Lang::English, "what", true)), vec!["what"], "nothing else remains");
        assert_eq!(
            query_terms(Lang::English, "Wings: swept wings and wing flutter", false),
            vec![("wing".to_string(), 3.0), ("swept".to_string(), 1.0), ("flutter".to_string(), 1.0)],
            "a term's weight is its count in the query"
        );
        assert_eq!(analyze(Lang::Other, "Größe 東京 tower"), vec!["größe", "東京", "tower"]);
    }

    proptest::proptest! {
        #[test]
        fn analysis_of_hostile_text_never_panics_and_tokens_point_into_it(text in crate::testkit::hostile_text(12)) {
            for lang in Lang::ALL {
                let (pre, terms) = pre_tokenized(lang, &text);
                proptest::prop_assert_eq!(pre.tokens.len(), terms.len());
                for t in &pre.tokens {
                    proptest::prop_assert!(text.is_char_boundary(t.offset_from) && text.is_char_boundary(t.offset_to));
                    proptest::prop_assert!(t.text.len() <= 40 * 4);
                }
            }
        }
    }
}
