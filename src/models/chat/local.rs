//! `local`: a GGUF chat model run in-process by llama.cpp (llama-cpp-2). The model is loaded once
//! and shared; each call makes its own context (KV cache) and generations run one at a time on the
//! calling thread (a worker or blocking thread, never the async runtime). The chat template comes
//! from the GGUF file.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use parking_lot::Mutex;

use super::{Cancel, ChatModel, ChatOutput, ChatRequest, ErrorKind, Finish, LlmError, Usage};

/// Tokens decoded per batch while reading the prompt.
const PROMPT_BATCH: usize = 512;

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
    threads: i32,
    context: u32,
    /// One generation at a time: two would only halve each other's speed on a small machine.
    busy: Mutex<()>,
    pub load_ms: u64,
}

/// Timings of the last generation, for the benchmark.
#[derive(Debug, Clone, Copy, Default)]
pub struct GenStats {
    pub prompt_tokens: usize,
    pub prompt_ms: f64,
    pub generated_tokens: usize,
    pub generate_ms: f64,
    pub first_token_ms: f64,
}

impl LocalModel {
    pub fn load(path: &Path, threads: usize, context: u32) -> Result<LocalModel, LlmError> {
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
            threads: threads.max(1) as i32,
            context: context.max(512),
            busy: Mutex::new(()),
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
        let _turn = self.busy.lock();
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
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(self.context))
            .with_n_batch(PROMPT_BATCH as u32)
            .with_n_threads(self.threads)
            .with_n_threads_batch(self.threads);
        let mut ctx = self.model.new_context(backend, params).map_err(|e| local_err("creating a context", &e))?;
        let mut batch = LlamaBatch::new(PROMPT_BATCH, 1);
        let n_prompt = tokens.len();
        if !read_prompt(&mut ctx, &mut batch, &tokens, cancel)? {
            return Ok((
                ChatOutput { text: String::new(), usage: Usage::default(), finish: Finish::Cancelled },
                GenStats::default(),
            ));
        }
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
        };
        let usage = Usage { prompt_tokens: n_prompt as u64, completion_tokens: g.generated as u64 };
        Ok((ChatOutput { text: g.text, usage, finish: g.finish }, stats))
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

/// Decodes the prompt in batches (logits for its last token only); `false` when cancelled.
fn read_prompt(
    ctx: &mut LlamaContext<'_>,
    batch: &mut LlamaBatch<'_>,
    tokens: &[LlamaToken],
    cancel: &Cancel,
) -> Result<bool, LlmError> {
    let n_prompt = tokens.len();
    for (c, piece) in tokens.chunks(PROMPT_BATCH).enumerate() {
        if cancel.is_cancelled() {
            return Ok(false);
        }
        batch.clear();
        for (i, t) in piece.iter().enumerate() {
            let pos = c * PROMPT_BATCH + i;
            batch.add(*t, pos as i32, &[0], pos == n_prompt - 1).map_err(|e| local_err("batching", &e))?;
        }
        ctx.decode(batch).map_err(|e| local_err("reading the prompt", &e))?;
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
        let mut g = Generated { text: String::new(), finish: Finish::Length, generated: 0, first_token_ms: 0.0 };
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
}
