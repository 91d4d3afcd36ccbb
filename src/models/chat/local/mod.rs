//! `local`: a GGUF chat model run in-process by llama.cpp (llama-cpp-2). The model is loaded once
//! and shared; generations run one at a time, first come first served (`queue.rs`), on the calling
//! thread (a worker or blocking thread, never the async runtime), with as many threads as there
//! are idle cores. Each call makes its own context and starts from the cached KV state of the
//! longest prompt prefix it has read before (`cache.rs`), so a turn reads only what is new to it.
//! The chat template comes from the GGUF file.

mod cache;
mod queue;

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::session::{LlamaStateSeqFlags, SeqState};
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use parking_lot::Mutex;

use super::{Cancel, ChatModel, ChatOutput, ChatRequest, ErrorKind, Finish, LlmError, Usage};
use cache::PrefixCache;
use queue::Queue;
pub use queue::threads_now;

/// Tokens decoded per batch while reading the prompt. Batches start at multiples of it, and a
/// cached prefix is used down to a multiple of it, so that every prompt token goes through the
/// same arithmetic whether the prefix came from the cache or not.
const PROMPT_BATCH: usize = 16;
/// A cached prefix shorter than this is not worth restoring (the restore copies the whole state).
const MIN_REUSE: usize = 16;

/// How the local model runs.
#[derive(Debug, Clone, Copy)]
pub struct LocalSettings {
    /// Threads per generation; 0 chooses from the idle cores at each generation.
    pub threads: usize,
    /// Context size in tokens.
    pub context: u32,
    /// Bytes of cached KV states (0 turns the cache off).
    pub cache_bytes: usize,
}

impl LocalSettings {
    pub fn of(c: &crate::config::LlmConfig) -> LocalSettings {
        LocalSettings { threads: c.local_threads, context: c.local_context, cache_bytes: c.local_cache_bytes }
    }
}

/// llama.cpp's backend. A process global by necessity (a documented exception to "state lives
/// in `App`"): llama.cpp initialises it once per process and refuses a second `init`, so every
/// `App` in the process shares it. Models and contexts are still owned per `App`.
fn backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp's own logging is verbose; route it to tracing (debug level).
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LlmError::new(ErrorKind::Misconfigured, format!("llama.cpp cannot start: {e}")))
}

pub struct LocalModel {
    name: String,
    path: PathBuf,
    model: LlamaModel,
    template: Option<LlamaChatTemplate>,
    settings: LocalSettings,
    context: u32,
    queue: Queue,
    cache: Mutex<PrefixCache<SeqState>>,
    /// Recent prompt reading speed (tokens/s) by thread count, 0 where not yet measured.
    read_rates: Mutex<[f64; MAX_THREADS + 1]>,
    pub load_ms: u64,
}

/// The most threads one generation takes.
const MAX_THREADS: usize = 8;
/// Prompt tokens/s per thread assumed before the model has read a prompt (a ~135M model on one
/// core of a small x86-64 CPU reads about 110).
const ASSUMED_READ_RATE: f64 = 100.0;
/// A reading shorter than this says little about the speed (fixed costs dominate).
const RATE_MIN_TOKENS: usize = 32;

/// Timings of the last generation, for the benchmark.
#[derive(Debug, Clone, Copy, Default)]
pub struct GenStats {
    pub prompt_tokens: usize,
    pub prompt_ms: f64,
    pub generated_tokens: usize,
    pub generate_ms: f64,
    pub first_token_ms: f64,
    /// Prompt tokens restored from the prompt cache instead of read.
    pub reused_tokens: usize,
    /// Threads the generation ran on.
    pub threads: usize,
    /// How long the call waited for the model (another generation ran).
    pub waited_ms: f64,
}

impl LocalModel {
    pub fn load(path: &Path, settings: LocalSettings) -> Result<LocalModel, LlmError> {
        if !path.is_file() {
            return Err(LlmError::new(
                ErrorKind::Misconfigured,
                format!(
                    "the local model file {} does not exist ({})",
                    path.display(),
                    crate::models::locate::FETCH_HINT
                ),
            ));
        }
        let backend = backend()?;
        let started = Instant::now();
        let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default()).map_err(|e| {
            LlmError::new(ErrorKind::Misconfigured, format!("cannot load the GGUF file {}: {e}", path.display()))
        })?;
        let template = model.chat_template(None).ok();
        let name = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "local".into());
        Ok(LocalModel {
            name,
            path: path.to_path_buf(),
            model,
            template,
            settings,
            context: settings.context.max(512),
            queue: Queue::default(),
            cache: Mutex::new(PrefixCache::new(settings.cache_bytes)),
            read_rates: Mutex::new([0.0; MAX_THREADS + 1]),
            load_ms: started.elapsed().as_millis() as u64,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The prompt the model sees: the GGUF's chat template applied to the messages, or a plain
    /// transcript when the file has none.
    pub fn prompt(&self, req: &ChatRequest) -> Result<String, LlmError> {
        if let Some(t) = &self.template {
            let msgs: Vec<LlamaChatMessage> = req
                .messages
                .iter()
                .map(|m| LlamaChatMessage::new(m.role.as_str().to_string(), m.content.replace('\0', "")))
                .collect::<Result<_, _>>()
                .map_err(|e| LlmError::new(ErrorKind::BadRequest, format!("bad message: {e}")))?;
            if let Ok(p) = self.model.apply_chat_template(t, &msgs, true) {
                return Ok(p);
            }
        }
        let mut p = String::new();
        for m in &req.messages {
            p.push_str(&format!("{}: {}\n", m.role.as_str(), m.content));
        }
        p.push_str("assistant: ");
        Ok(p)
    }

    /// Generates, reporting timings.
    pub fn generate(
        &self,
        req: &ChatRequest,
        on_token: &mut dyn FnMut(&str),
        cancel: &Cancel,
    ) -> Result<(ChatOutput, GenStats), LlmError> {
        self.generate_queued(req, on_token, &mut |_| {}, cancel)
    }

    /// [`LocalModel::generate`], telling `on_wait` how many generations are ahead while it waits
    /// for the model.
    pub fn generate_queued(
        &self,
        req: &ChatRequest,
        on_token: &mut dyn FnMut(&str),
        on_wait: &mut dyn FnMut(usize),
        cancel: &Cancel,
    ) -> Result<(ChatOutput, GenStats), LlmError> {
        let queued = Instant::now();
        let Some(_held) = self.queue.enter(on_wait, cancel) else { return Ok(cancelled()) };
        let waited_ms = queued.elapsed().as_secs_f64() * 1000.0;
        let backend = backend()?;
        let prompt = self.prompt(req)?;
        let started = Instant::now();
        let vocab = self.model.vocab();
        // the template already wrote the special tokens as text: parse them, add BOS if the model wants it
        let tokens = vocab.tokenize(prompt.as_bytes(), true, true);
        if tokens.is_empty() {
            return Err(LlmError::new(ErrorKind::BadRequest, "local model: the prompt is empty"));
        }
        let budget = self.context as usize;
        let max_new = (req.max_tokens as usize).min(budget / 2).max(1);
        let tokens = fit_to_context(tokens, budget, max_new);
        let threads = threads_now(self.max_threads(), self.settings.threads > 0);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(self.context))
            .with_n_batch(PROMPT_BATCH as u32)
            .with_n_ubatch(PROMPT_BATCH as u32)
            .with_n_threads(threads as i32)
            .with_n_threads_batch(threads as i32);
        let mut ctx = self.model.new_context(backend, params).map_err(|e| local_err("creating a context", &e))?;
        let mut batch = LlamaBatch::new(PROMPT_BATCH, 1);
        let n_prompt = tokens.len();
        let scope = scope_mark(req.cache_scope.as_deref());
        let reused = self.restore(&mut ctx, scope, &tokens);
        let reading = Instant::now();
        if !read_prompt(&mut ctx, &mut batch, &tokens, reused, cancel)? {
            return Ok(cancelled());
        }
        self.note_read_rate(threads, n_prompt - reused, reading.elapsed().as_secs_f64() * 1000.0);
        let prompt_ms = started.elapsed().as_secs_f64() * 1000.0;
        let gen_started = Instant::now();
        let mut sampler = match &req.grammar {
            Some(g) => {
                let grammar = LlamaSampler::grammar(&self.model, g, "root")
                    .map_err(|e| LlmError::new(ErrorKind::BadRequest, format!("local model: bad grammar: {e}")))?;
                LlamaSampler::chain_simple([grammar, sampler(req.temperature, req.seed)])
            }
            None => sampler(req.temperature, req.seed),
        };
        let g = Decoding { ctx: &mut ctx, batch: &mut batch, sampler: &mut sampler, started }.run(
            self,
            n_prompt as i32,
            max_new,
            on_token,
            cancel,
        )?;
        let stats = GenStats {
            prompt_tokens: n_prompt,
            prompt_ms,
            generated_tokens: g.generated,
            generate_ms: gen_started.elapsed().as_secs_f64() * 1000.0,
            first_token_ms: g.first_token_ms,
            reused_tokens: reused,
            threads,
            waited_ms,
        };
        if g.finish != Finish::Cancelled {
            // what the context holds now: the prompt and every generated token read back
            let mut held: Vec<i32> = vec![scope];
            held.extend(tokens.iter().map(|t| t.0));
            held.extend(g.decoded.iter().map(|t| t.0));
            self.keep(&ctx, held);
        }
        let usage = Usage {
            prompt_tokens: n_prompt as u64,
            completion_tokens: g.generated as u64,
            cached_prompt_tokens: reused as u64,
        };
        Ok((ChatOutput { text: g.text, usage, finish: g.finish }, stats))
    }

    /// The most threads a generation may take: the configured number, else the machine's cores
    /// (at most 8: more only add synchronisation on a model this size).
    fn max_threads(&self) -> usize {
        match self.settings.threads {
            0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(MAX_THREADS),
            n => n.min(MAX_THREADS),
        }
    }

    /// Folds a prompt reading of `tokens` in `ms` on `threads` into the recent speed.
    fn note_read_rate(&self, threads: usize, tokens: usize, ms: f64) {
        if tokens < RATE_MIN_TOKENS || ms <= 0.0 {
            return;
        }
        let rate = tokens as f64 * 1000.0 / ms;
        let mut rates = self.read_rates.lock();
        let r = &mut rates[threads.min(MAX_THREADS)];
        *r = if *r == 0.0 { rate } else { 0.7 * *r + 0.3 * rate };
    }

    /// Prompt tokens/s expected on the threads a generation would get now: measured on that many
    /// threads, else scaled from the nearest measured count, else assumed.
    pub fn read_rate_now(&self) -> f64 {
        let threads = threads_now(self.max_threads(), self.settings.threads > 0);
        let rates = *self.read_rates.lock();
        expected_rate(&rates, threads)
    }

    /// Puts the cached state of the longest prefix of `tokens` read before into the new context
    /// and drops what follows that prefix; the number of prompt tokens that need no reading. At
    /// least the last prompt token is always read (its logits choose the first new token).
    /// Entries are keyed by the scope's mark followed by the tokens, so only a prompt of the same
    /// scope (the same agent) can share a cached state.
    fn restore(&self, ctx: &mut LlamaContext<'_>, scope: i32, tokens: &[LlamaToken]) -> usize {
        let mut key: Vec<i32> = vec![scope];
        key.extend(tokens.iter().map(|t| t.0));
        let Some((shared, state)) = self.cache.lock().best(&key, MIN_REUSE + 1) else { return 0 };
        let reuse = (shared - 1).min(tokens.len() - 1) / PROMPT_BATCH * PROMPT_BATCH;
        if reuse < MIN_REUSE || ctx.state_seq_set(&state, 0).is_err() {
            ctx.clear_kv_cache();
            return 0;
        }
        match ctx.clear_kv_cache_seq(Some(0), Some(reuse as u32), None) {
            Ok(true) => reuse,
            _ => {
                ctx.clear_kv_cache();
                0
            }
        }
    }

    /// Keeps the context's state as the state after `held` (the scope's mark, then the tokens).
    fn keep(&self, ctx: &LlamaContext<'_>, held: Vec<i32>) {
        if self.settings.cache_bytes == 0 {
            return;
        }
        match ctx.state_seq_get(0, LlamaStateSeqFlags::empty()) {
            Ok(state) => {
                let bytes = state.byte_len();
                self.cache.lock().put(held, state, bytes);
            }
            Err(e) => tracing::debug!(error = %e, "local model: the KV state could not be kept"),
        }
    }

    /// Bytes of KV state the prompt cache holds now, and its entries.
    pub fn cached(&self) -> (usize, usize) {
        let c = self.cache.lock();
        (c.bytes(), c.len())
    }
}

/// The mark that leads a cache key: a hash of the request's cache scope (0 without one). States
/// are only reused for identical tokens, so a clash of two scopes' marks would let them share a
/// state correctly, just not keep them apart.
fn scope_mark(scope: Option<&str>) -> i32 {
    use std::hash::{Hash, Hasher};
    let Some(scope) = scope else { return 0 };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    scope.hash(&mut h);
    h.finish() as i32
}

/// The reading speed on `threads` from the speeds measured so far (see [`LocalModel::read_rate_now`]).
fn expected_rate(rates: &[f64], threads: usize) -> f64 {
    let threads = threads.clamp(1, rates.len() - 1);
    if rates[threads] > 0.0 {
        return rates[threads];
    }
    let nearest = (1..rates.len()).filter(|&t| rates[t] > 0.0).min_by_key(|&t| t.abs_diff(threads));
    match nearest {
        Some(t) => rates[t] * threads as f64 / t as f64,
        None => ASSUMED_READ_RATE * threads as f64,
    }
}

fn cancelled() -> (ChatOutput, GenStats) {
    (ChatOutput { text: String::new(), usage: Usage::default(), finish: Finish::Cancelled }, GenStats::default())
}

fn local_err(what: &str, e: &dyn std::fmt::Display) -> LlmError {
    LlmError::new(ErrorKind::Unavailable, format!("local model: {what}: {e}"))
}

/// The prompt cut to leave `max_new` tokens of the context `budget`: it keeps the start (system
/// prompt) and the end (the question) and drops the middle.
fn fit_to_context(tokens: Vec<LlamaToken>, budget: usize, max_new: usize) -> Vec<LlamaToken> {
    if tokens.len() + max_new <= budget {
        return tokens;
    }
    let keep = budget - max_new;
    let head = keep / 4;
    let tail = keep - head;
    let mut cut = tokens[..head].to_vec();
    cut.extend_from_slice(&tokens[tokens.len() - tail..]);
    cut
}

/// Decodes the prompt from position `from` on (what comes before is in the context already);
/// `false` when cancelled. Batches end at multiples of `PROMPT_BATCH` and the last token is read
/// alone (its logits choose the first new token), so a prompt read partly from the cache goes
/// through the same arithmetic as one read whole: greedy answers do not depend on the cache.
fn read_prompt(
    ctx: &mut LlamaContext<'_>,
    batch: &mut LlamaBatch<'_>,
    tokens: &[LlamaToken],
    from: usize,
    cancel: &Cancel,
) -> Result<bool, LlmError> {
    let last = tokens.len() - 1;
    let mut start = from;
    while start <= last {
        if cancel.is_cancelled() {
            return Ok(false);
        }
        let end = if start == last { last + 1 } else { ((start / PROMPT_BATCH + 1) * PROMPT_BATCH).min(last) };
        batch.clear();
        for (pos, t) in tokens.iter().enumerate().take(end).skip(start) {
            batch.add(*t, pos as i32, &[0], pos == last).map_err(|e| local_err("batching", &e))?;
        }
        ctx.decode(batch).map_err(|e| local_err("reading the prompt", &e))?;
        start = end;
    }
    Ok(true)
}

/// Greedy at temperature 0, else top-k, top-p and temperature with a fixed seed (the request's,
/// else ours).
fn sampler(temperature: f32, seed: Option<u64>) -> LlamaSampler {
    if temperature <= 0.0 {
        LlamaSampler::greedy()
    } else {
        LlamaSampler::chain_simple([
            LlamaSampler::top_k(40),
            LlamaSampler::top_p(0.9, 1),
            LlamaSampler::temp(temperature),
            LlamaSampler::dist(seed.map(|s| s as u32).unwrap_or(0x5eed)),
        ])
    }
}

/// The generation loop's state, after the prompt is read.
struct Decoding<'a, 'c, 'b> {
    ctx: &'a mut LlamaContext<'c>,
    batch: &'a mut LlamaBatch<'b>,
    sampler: &'a mut LlamaSampler,
    /// When the generation started (prompt included), for the first token's latency.
    started: Instant,
}

/// What the generation loop produced.
struct Generated {
    text: String,
    finish: Finish,
    generated: usize,
    first_token_ms: f64,
    /// The generated tokens read back into the context.
    decoded: Vec<LlamaToken>,
}

impl Decoding<'_, '_, '_> {
    /// Samples up to `max_new` tokens from position `pos`, streaming each piece to `on_token`.
    fn run(
        self,
        m: &LocalModel,
        mut pos: i32,
        max_new: usize,
        on_token: &mut dyn FnMut(&str),
        cancel: &Cancel,
    ) -> Result<Generated, LlmError> {
        let Decoding { ctx, batch, sampler, started } = self;
        let vocab = m.model.vocab();
        let mut decoder = encoding_rs::UTF_8.new_decoder();
        let mut g = Generated {
            text: String::new(),
            finish: Finish::Length,
            generated: 0,
            first_token_ms: 0.0,
            decoded: Vec::new(),
        };
        let mut piece_buf = Vec::new();
        while g.generated < max_new {
            if cancel.is_cancelled() {
                g.finish = Finish::Cancelled;
                break;
            }
            // `sample` also accepts the token (a grammar advances once per token)
            let token = sampler.sample(ctx, batch.n_tokens() - 1);
            if vocab.is_eog(token) {
                g.finish = Finish::Stop;
                break;
            }
            g.generated += 1;
            piece_buf.clear();
            vocab.token_to_piece_into(token, &mut piece_buf, false, None);
            let mut piece = String::with_capacity(piece_buf.len() + 4);
            let _ = decoder.decode_to_string(&piece_buf, &mut piece, false);
            if g.generated == 1 {
                g.first_token_ms = started.elapsed().as_secs_f64() * 1000.0;
            }
            if !piece.is_empty() {
                g.text.push_str(&piece);
                on_token(&piece);
            }
            batch.clear();
            batch.add(token, pos, &[0], true).map_err(|e| local_err("batching", &e))?;
            pos += 1;
            ctx.decode(batch).map_err(|e| local_err("generating", &e))?;
            g.decoded.push(token);
        }
        Ok(g)
    }
}

impl ChatModel for LocalModel {
    fn provider(&self) -> &str {
        "local"
    }
    fn model(&self) -> &str {
        &self.name
    }
    fn native_schema(&self) -> bool {
        false
    }
    fn chat(&self, req: &ChatRequest, on_token: &mut dyn FnMut(&str), cancel: &Cancel) -> Result<ChatOutput, LlmError> {
        self.generate(req, on_token, cancel).map(|(o, _)| o)
    }
    fn prompt_tokens_within(&self, seconds: f64) -> Option<usize> {
        Some((self.read_rate_now() * seconds.max(0.0)) as usize)
    }

    fn context_window(&self) -> Option<usize> {
        Some(self.context as usize)
    }
    fn chat_queued(
        &self,
        req: &ChatRequest,
        on_token: &mut dyn FnMut(&str),
        on_wait: &mut dyn FnMut(usize),
        cancel: &Cancel,
    ) -> Result<ChatOutput, LlmError> {
        self.generate_queued(req, on_token, on_wait, cancel).map(|(o, _)| o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expected_reading_speed_comes_from_what_was_measured_nearest() {
        let mut rates = [0.0; MAX_THREADS + 1];
        assert_eq!(expected_rate(&rates, 2), 2.0 * ASSUMED_READ_RATE, "nothing measured yet");
        rates[1] = 150.0;
        assert_eq!(expected_rate(&rates, 1), 150.0);
        assert_eq!(expected_rate(&rates, 2), 300.0, "scaled from one thread");
        rates[2] = 270.0;
        assert_eq!(expected_rate(&rates, 2), 270.0);
        assert_eq!(expected_rate(&rates, 4), 540.0, "scaled from the nearest, two threads");
        assert_eq!(expected_rate(&rates, 0), 150.0, "at least one thread");
        assert_eq!(expected_rate(&rates, 99), 270.0 * 4.0, "at most the most threads");
    }
}
