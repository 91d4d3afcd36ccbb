//! `local`: a GGUF chat model run in-process by llama.cpp (llama-cpp-2). The model is loaded once
//! and shared; concurrent generations are sequences of one context, decoded together in batches
//! (`engine.rs`: at most `sequences` at once, the rest waiting in arrival order), on the callers'
//! threads (workers or blocking threads, never the async runtime), with as many threads as there
//! are idle cores (`threads.rs`). The context is kept from call to call (made anew when the
//! thread count changed and nothing runs), and a call starts from the longest prompt prefix read
//! before — what one of its sequences still holds, or a cached KV state (`cache.rs`) — so a turn
//! reads only what is new to it. A generation that starts repeating itself is stopped where the
//! repeat began (`guard.rs`). The chat template comes from the GGUF file.

mod cache;
mod engine;
mod guard;
mod threads;

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::session::{LlamaStateSeqFlags, SeqState};
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use parking_lot::Mutex;

use super::{Cancel, ChatModel, ChatOutput, ChatRequest, ErrorKind, LlmError, Usage};
use cache::PrefixCache;
use engine::{Engine, Job};
pub use threads::threads_now;

/// Prompt tokens a sequence reads per step. Its batches start at multiples of it, and a cached
/// prefix is used down to a multiple of it, so that a prompt read alone groups its tokens the same
/// whether a prefix came from the cache or not. (Read beside other sequences, a token's arithmetic
/// can also depend on what shares its batch and the cache; on llama.cpp's CPU kernels for this
/// model it does not — batched greedy answers equal the answers alone, tested — but other
/// kernels may round differently.)
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
    /// Generations that run together, batched in one context (1: one after another).
    pub sequences: usize,
}

impl LocalSettings {
    pub fn of(c: &crate::config::LlmConfig) -> LocalSettings {
        LocalSettings {
            threads: c.local_threads,
            context: c.local_context,
            cache_bytes: c.local_cache_bytes,
            sequences: c.local_sequences,
        }
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
    /// Declared before `model`, so that it is dropped first: its context points into the model.
    engine: Engine,
    name: String,
    path: PathBuf,
    model: LlamaModel,
    template: Option<LlamaChatTemplate>,
    settings: LocalSettings,
    context: u32,
    cache: Mutex<PrefixCache<SeqState>>,
    /// Recent prompt reading speed (tokens/s) by thread count, 0 where not yet measured.
    read_rates: Mutex<[f64; MAX_THREADS + 1]>,
    pub load_ms: u64,
}

/// The most threads one generation takes.
const MAX_THREADS: usize = 8;
/// The most generations that run together.
const MAX_SEQUENCES: usize = 16;
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
            engine: Engine::default(),
            name,
            path: path.to_path_buf(),
            model,
            template,
            settings,
            context: settings.context.max(512),
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
    /// for a sequence of the model's context.
    pub fn generate_queued(
        &self,
        req: &ChatRequest,
        on_token: &mut dyn FnMut(&str),
        on_wait: &mut dyn FnMut(usize),
        cancel: &Cancel,
    ) -> Result<(ChatOutput, GenStats), LlmError> {
        backend()?;
        let prompt = self.prompt(req)?;
        // the template already wrote the special tokens as text: parse them, add BOS if the model wants it
        let tokens = self.model.vocab().tokenize(prompt.as_bytes(), true, true);
        if tokens.is_empty() {
            return Err(LlmError::new(ErrorKind::BadRequest, "local model: the prompt is empty"));
        }
        let budget = self.context as usize;
        let max_new = (req.max_tokens as usize).min(budget / 2).max(1);
        let tokens = fit_to_context(tokens, budget, max_new);
        let sampler = match &req.grammar {
            Some(g) => {
                let grammar = LlamaSampler::grammar(&self.model, g, "root")
                    .map_err(|e| LlmError::new(ErrorKind::BadRequest, format!("local model: bad grammar: {e}")))?;
                LlamaSampler::chain_simple([grammar, sampler(req.temperature, req.seed)])
            }
            None => sampler(req.temperature, req.seed),
        };
        let job = Job::new(tokens, scope_mark(req.cache_scope.as_deref()), max_new, sampler, cancel);
        let done = self.engine.run(self, job, on_token, on_wait)?;
        let stats = done.stats;
        tracing::debug!(
            prompt_tokens = stats.prompt_tokens,
            reused_tokens = stats.reused_tokens,
            threads = stats.threads,
            first_token_ms = stats.first_token_ms as u64,
            generated = stats.generated_tokens,
            waited_ms = stats.waited_ms as u64,
            "local generation"
        );
        let usage = Usage {
            prompt_tokens: stats.prompt_tokens as u64,
            completion_tokens: stats.generated_tokens as u64,
            cached_prompt_tokens: stats.reused_tokens as u64,
        };
        Ok((ChatOutput { text: done.text, usage, finish: done.finish }, stats))
    }

    /// Sequences that run together (at least 1).
    fn sequences(&self) -> usize {
        self.settings.sequences.clamp(1, MAX_SEQUENCES)
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

    /// A context for `threads`, with room for the sequences that run together in its cells.
    fn new_context(&self, threads: usize) -> Result<LlamaContext<'static>, LlmError> {
        let batch = (PROMPT_BATCH * self.sequences()) as u32;
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(self.context))
            .with_n_batch(batch)
            .with_n_ubatch(batch)
            .with_n_seq_max(self.sequences() as u32)
            .with_kv_unified(true)
            .with_n_threads(threads as i32)
            .with_n_threads_batch(threads as i32);
        let ctx = self.model.new_context(backend()?, params).map_err(|e| local_err("creating a context", &e))?;
        // SAFETY: the context only borrows the model for as long as the model lives. It is kept in
        // `self.engine`, which is declared before `self.model` and so dropped before it, and a
        // generation uses it only while it borrows `self`; moving a `LocalModel` does not move
        // the llama.cpp model the context points at.
        Ok(unsafe { std::mem::transmute::<LlamaContext<'_>, LlamaContext<'static>>(ctx) })
    }

    /// Starts sequence `seq` of `ctx` (which holds `held`) at the longest prefix of `key` (the
    /// scope's mark, then the prompt's tokens) read before — from what it holds already, else from
    /// the cached state that shares most — and drops what follows; the number of prompt tokens that
    /// need no reading. At least the last prompt token is always read (its logits choose the first
    /// new token). Only a prompt of the same scope (the same agent) can share a state.
    fn restore(&self, ctx: &mut LlamaContext<'_>, held: &[i32], seq: usize, key: &[i32]) -> usize {
        let s = seq as u32;
        let clear = |ctx: &mut LlamaContext<'_>| {
            let _ = ctx.clear_kv_cache_seq(Some(s), None, None);
            0
        };
        if self.settings.cache_bytes == 0 {
            return clear(ctx);
        }
        let in_place = cache::shared_prefix(held, key);
        let best = self.cache.lock().best(key, MIN_REUSE + 1);
        let shared = match best {
            Some((shared, state)) if shared > in_place => {
                if ctx.state_seq_set(&state, s as i32).is_err() {
                    return clear(ctx);
                }
                shared
            }
            _ => in_place,
        };
        let reuse = shared.saturating_sub(1).min(key.len() - 2) / PROMPT_BATCH * PROMPT_BATCH;
        if reuse < MIN_REUSE {
            return clear(ctx);
        }
        match ctx.clear_kv_cache_seq(Some(s), Some(reuse as u32), None) {
            Ok(true) => reuse,
            _ => clear(ctx),
        }
    }

    /// Keeps the state of sequence `seq` as the state after `held` (the scope's mark, then the
    /// tokens).
    fn keep(&self, ctx: &LlamaContext<'_>, seq: usize, held: Vec<i32>) {
        if self.settings.cache_bytes == 0 {
            return;
        }
        match ctx.state_seq_get(seq as i32, LlamaStateSeqFlags::empty()) {
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
