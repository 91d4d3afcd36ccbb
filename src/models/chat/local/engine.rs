//! Generations sharing the model: each request is a sequence in one llama.cpp context, and every
//! step decodes one batch holding the next piece of each running sequence — up to 16 prompt
//! tokens of one still reading, the last sampled token of one writing — so several visitors are
//! answered together (continuous batching) instead of one after another. At most
//! `LocalSettings::sequences` run at a time, and only while the context has room for all of them
//! (each needs its prompt and its answer budget); later requests wait in arrival order and are
//! told how many are ahead. A request leaving (cancelled, superseded) frees its sequence at once.
//!
//! There is no engine thread: the callers take turns running steps under the engine's lock, each
//! step advancing every running sequence, and each caller streams its own pieces between steps.

use std::collections::BTreeMap;
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use parking_lot::{Mutex, MutexGuard};

use super::super::{Cancel, ErrorKind, Finish, LlmError};
use super::{GenStats, LocalModel, PROMPT_BATCH, guard, local_err};

/// The shared context and the requests using it.
#[derive(Default)]
pub(super) struct Engine {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    warm: Option<Warm>,
    /// Requests by ticket: arrival order.
    jobs: BTreeMap<u64, Job>,
    next: u64,
}

/// The context, kept from step to step and from request to request.
struct Warm {
    /// Threads it was made for (a context's thread count is fixed when it is made).
    threads: usize,
    ctx: LlamaContext<'static>,
    /// What each sequence holds: the scope's mark, then the tokens (empty when nothing or unknown).
    /// A sequence no request runs on keeps its tokens for a request that starts like them.
    held: Vec<Vec<i32>>,
}

/// One request's generation.
pub(super) struct Job {
    tokens: Vec<LlamaToken>,
    /// The scope's mark followed by the tokens: the prompt cache's key.
    key: Vec<i32>,
    max_new: usize,
    sampler: LlamaSampler,
    cancel: Cancel,
    /// The sequence it runs on, once admitted.
    seq: Option<usize>,
    /// Prompt tokens in the context so far.
    read: usize,
    reused: usize,
    /// The token sampled last, to be read back in the next step.
    last: Option<LlamaToken>,
    decoded: Vec<LlamaToken>,
    generated: usize,
    text: String,
    /// Bytes of `text` its caller has been given.
    sent: usize,
    decoder: encoding_rs::Decoder,
    /// What its caller has yet to hear.
    out: Vec<Out>,
    /// The number ahead it was last told while waiting.
    told: Option<usize>,
    finish: Option<Finish>,
    /// Why it ended without finishing (the context failed under it).
    failed: Option<String>,
    queued: Instant,
    started: Option<Instant>,
    threads: usize,
    /// Time spent in steps that read its prompt.
    read_ms: f64,
    prompt_ms: f64,
    first_token_ms: f64,
}

/// What a caller hears between steps.
pub(super) enum Out {
    /// Waiting for a sequence, with this many ahead (0: its turn has come).
    Wait(usize),
    Piece(String),
}

/// What a finished request gives back.
pub(super) struct Done {
    pub text: String,
    pub finish: Finish,
    pub stats: GenStats,
}

impl Job {
    pub fn new(tokens: Vec<LlamaToken>, scope: i32, max_new: usize, sampler: LlamaSampler, cancel: &Cancel) -> Job {
        let mut key = vec![scope];
        key.extend(tokens.iter().map(|t| t.0));
        Job {
            tokens,
            key,
            max_new,
            sampler,
            cancel: cancel.clone(),
            seq: None,
            read: 0,
            reused: 0,
            last: None,
            decoded: Vec::new(),
            generated: 0,
            text: String::new(),
            sent: 0,
            decoder: encoding_rs::UTF_8.new_decoder(),
            out: Vec::new(),
            told: None,
            finish: None,
            failed: None,
            queued: Instant::now(),
            started: None,
            threads: 0,
            read_ms: 0.0,
            prompt_ms: 0.0,
            first_token_ms: 0.0,
        }
    }

    /// Cells of the context it may fill: its prompt and its answer budget.
    fn need(&self) -> usize {
        self.tokens.len() + self.max_new
    }

    fn running(&self) -> bool {
        self.seq.is_some() && self.finish.is_none()
    }

    /// What the context holds for it now: the key and every generated token read back.
    fn held(&self) -> Vec<i32> {
        let mut held = self.key.clone();
        held.extend(self.decoded.iter().map(|t| t.0));
        held
    }

    fn done(&mut self) -> Done {
        let started = self.started.unwrap_or(self.queued);
        let stats = GenStats {
            prompt_tokens: self.tokens.len(),
            prompt_ms: self.prompt_ms,
            generated_tokens: self.generated,
            generate_ms: started.elapsed().as_secs_f64() * 1000.0 - self.prompt_ms,
            first_token_ms: self.first_token_ms,
            reused_tokens: self.reused,
            threads: self.threads,
            waited_ms: (started - self.queued).as_secs_f64() * 1000.0,
        };
        Done { text: std::mem::take(&mut self.text), finish: self.finish.unwrap_or(Finish::Cancelled), stats }
    }
}

impl Engine {
    /// Runs `job` to its end, telling `on_wait` while it waits for a sequence and `on_token` each
    /// piece it writes.
    pub fn run(
        &self,
        m: &LocalModel,
        job: Job,
        on_token: &mut dyn FnMut(&str),
        on_wait: &mut dyn FnMut(usize),
    ) -> Result<Done, LlmError> {
        let mut st = self.state.lock();
        let ticket = st.next;
        st.next += 1;
        st.jobs.insert(ticket, job);
        let _leave = Leave { engine: self, ticket };
        loop {
            let Some(job) = st.jobs.get_mut(&ticket) else {
                return Err(local_err("generating", &"the request was lost"));
            };
            if !job.out.is_empty() {
                let out = std::mem::take(&mut job.out);
                // tell without holding the engine: the callbacks may stream to a client
                MutexGuard::unlocked(&mut st, || {
                    for o in out {
                        match o {
                            Out::Wait(n) => on_wait(n),
                            Out::Piece(p) => on_token(&p),
                        }
                    }
                });
                continue;
            }
            if job.finish.is_some() || job.cancel.is_cancelled() {
                let Some(mut job) = st.jobs.remove(&ticket) else { continue };
                if let Some(e) = job.failed.take() {
                    return Err(LlmError::new(ErrorKind::Unavailable, e));
                }
                if job.finish.is_none() {
                    if let (Some(seq), Some(w)) = (job.seq, st.warm.as_mut()) {
                        // the sequence is free at once; what it read is unknown now
                        let _ = w.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
                        w.held[seq].clear();
                    }
                    job.finish = Some(Finish::Cancelled);
                }
                return Ok(job.done());
            }
            if let Err(e) = step(m, &mut st) {
                // the context is in an unknown state: every running request fails with it; when
                // none ran (no context could be made) the caller fails, the others try again
                st.warm = None;
                let mut failed = 0;
                for j in st.jobs.values_mut().filter(|j| j.running()) {
                    j.finish = Some(Finish::Cancelled);
                    j.failed = Some(e.message.clone());
                    failed += 1;
                }
                if failed == 0 {
                    st.jobs.remove(&ticket);
                    return Err(e);
                }
            }
            // hand the engine to a caller waiting for it (to hear its pieces, or step)
            MutexGuard::unlock_fair(st);
            st = self.state.lock();
        }
    }
}

/// Takes a request out of the engine if its caller unwinds (a callback panicked), freeing its
/// sequence; on every other way out the caller has taken it out already.
struct Leave<'e> {
    engine: &'e Engine,
    ticket: u64,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let mut st = self.engine.state.lock();
        let State { warm, jobs, .. } = &mut *st;
        if let Some(j) = jobs.remove(&self.ticket)
            && let (true, Some(seq), Some(w)) = (j.running(), j.seq, warm.as_mut())
        {
            let _ = w.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
            w.held[seq].clear();
        }
    }
}

/// One step: a context for the cores idle now when nothing runs, admit what fits, decode one
/// batch with the next piece of every running sequence, sample for those that wrote.
fn step(m: &LocalModel, st: &mut State) -> Result<(), LlmError> {
    let running = st.jobs.values().any(Job::running);
    let threads = super::threads_now(m.max_threads(), m.settings.threads > 0);
    if st.warm.as_ref().is_none_or(|w| !running && w.threads != threads) {
        st.warm = None;
        let ctx = m.new_context(threads)?;
        st.warm = Some(Warm { threads, ctx, held: vec![Vec::new(); m.sequences()] });
    }
    let State { warm, jobs, .. } = st;
    let Some(w) = warm.as_mut() else { return Ok(()) };
    admit(m, w, jobs);
    let mut batch = LlamaBatch::new(PROMPT_BATCH * m.sequences(), 1);
    // (ticket, index in the batch) of the sequences whose next token is chosen after this step
    let mut choose: Vec<(u64, i32)> = Vec::new();
    let mut reading: Vec<u64> = Vec::new();
    for (&t, j) in jobs.iter_mut().filter(|(_, j)| j.finish.is_none()) {
        let Some(seq) = j.seq.map(|s| s as i32) else { continue };
        if j.read < j.tokens.len() {
            let (start, last) = (j.read, j.tokens.len() - 1);
            // batches end at multiples of PROMPT_BATCH and the last token is read alone, as in a
            // reading of the whole prompt: the same arithmetic whether a prefix came from a cache
            let end = if start == last { last + 1 } else { ((start / PROMPT_BATCH + 1) * PROMPT_BATCH).min(last) };
            for pos in start..end {
                batch.add(j.tokens[pos], pos as i32, &[seq], pos == last).map_err(|e| local_err("batching", &e))?;
            }
            if end == last + 1 {
                choose.push((t, batch.n_tokens() - 1));
            }
            j.read = end;
            reading.push(t);
        } else if let Some(token) = j.last.take() {
            let pos = (j.tokens.len() + j.decoded.len()) as i32;
            batch.add(token, pos, &[seq], true).map_err(|e| local_err("batching", &e))?;
            j.decoded.push(token);
            choose.push((t, batch.n_tokens() - 1));
        }
    }
    if batch.n_tokens() == 0 {
        return Ok(());
    }
    let began = Instant::now();
    w.ctx.decode(&mut batch).map_err(|e| local_err("decoding", &e))?;
    let ms = began.elapsed().as_secs_f64() * 1000.0;
    for t in reading {
        if let Some(j) = jobs.get_mut(&t) {
            j.read_ms += ms;
        }
    }
    for (t, idx) in choose {
        if let Some(j) = jobs.get_mut(&t) {
            write(m, w, j, idx);
        }
    }
    Ok(())
}

/// Admits waiting requests in arrival order while a sequence is free and the context has room,
/// each on the free sequence that holds the longest start of its prompt (or restored from the
/// prompt cache); tells the others how many are ahead.
fn admit(m: &LocalModel, w: &mut Warm, jobs: &mut BTreeMap<u64, Job>) {
    let cells = m.context as usize;
    let mut used: usize = jobs.values().filter(|j| j.running()).map(Job::need).sum();
    let mut busy: Vec<bool> = vec![false; w.held.len()];
    for s in jobs.values().filter(|j| j.finish.is_none()).filter_map(|j| j.seq) {
        busy[s] = true;
    }
    let mut ahead = 0;
    // (a cancelled request waiting is left to its caller, who takes it out of the line)
    for j in jobs.values_mut().filter(|j| j.seq.is_none() && j.finish.is_none() && !j.cancel.is_cancelled()) {
        let free: Vec<usize> = (0..busy.len()).filter(|&s| !busy[s]).collect();
        let fits = used + j.need() <= cells;
        if ahead > 0 || free.is_empty() || !fits {
            ahead += 1;
            if j.told != Some(ahead) {
                j.told = Some(ahead);
                j.out.push(Out::Wait(ahead));
            }
            continue;
        }
        let Some(seq) = free
            .iter()
            .copied()
            .max_by_key(|&s| (super::cache::shared_prefix(&w.held[s], &j.key), std::cmp::Reverse(s)))
        else {
            continue;
        };
        // the other free sequences' kept tokens give way to what the running ones may need
        for &s in &free {
            if s != seq && used + j.need() + kept(w, &busy, seq) > cells {
                let _ = w.ctx.clear_kv_cache_seq(Some(s as u32), None, None);
                w.held[s].clear();
            }
        }
        j.reused = m.restore(&mut w.ctx, &w.held[seq], seq, &j.key);
        w.held[seq].clear();
        j.read = j.reused;
        j.seq = Some(seq);
        j.threads = w.threads;
        j.started = Some(Instant::now());
        busy[seq] = true;
        used += j.need();
        if j.told.is_some() {
            j.out.push(Out::Wait(0));
        }
    }
}

/// Cells the free sequences other than `but` keep.
fn kept(w: &Warm, busy: &[bool], but: usize) -> usize {
    (0..w.held.len()).filter(|&s| s != but && !busy[s]).map(|s| w.held[s].len()).sum()
}

/// Chooses a running request's next token from the logits at `idx` and streams its piece; ends the
/// request at an end-of-generation token, its token budget, a repeat (`guard.rs`) or cancellation,
/// keeping what its sequence holds for later prompts.
fn write(m: &LocalModel, w: &mut Warm, j: &mut Job, idx: i32) {
    let started = j.started.unwrap_or(j.queued);
    if j.generated == 0 {
        j.prompt_ms = started.elapsed().as_secs_f64() * 1000.0;
        m.note_read_rate(j.threads, j.tokens.len() - j.reused, j.read_ms);
    }
    // `sample` also accepts the token (a grammar advances once per token)
    let token = j.sampler.sample(&w.ctx, idx);
    let vocab = m.model.vocab();
    let mut finish = None;
    if vocab.is_eog(token) {
        finish = Some(Finish::Stop);
    } else {
        j.generated += 1;
        if j.generated == 1 {
            j.first_token_ms = started.elapsed().as_secs_f64() * 1000.0;
        }
        let mut bytes = Vec::new();
        vocab.token_to_piece_into(token, &mut bytes, false, None);
        let mut piece = String::with_capacity(bytes.len() + 4);
        let _ = j.decoder.decode_to_string(&bytes, &mut piece, false);
        if !piece.is_empty() {
            j.text.push_str(&piece);
            if piece.contains(['.', '!', '?', '\n', ']'])
                && let Some(cut) = guard::loop_cut(&j.text)
            {
                // the model is repeating itself: the answer ends before the repeat (which was held
                // back from the stream, see `stream`)
                j.text.truncate(cut.max(j.sent));
                finish = Some(Finish::Stop);
            }
        }
        if finish.is_none() {
            if j.cancel.is_cancelled() {
                finish = Some(Finish::Cancelled);
            } else if j.generated >= j.max_new {
                finish = Some(Finish::Length);
            } else {
                j.last = Some(token);
            }
        }
    }
    stream(j, finish.is_some());
    let Some(finish) = finish else { return };
    j.finish = Some(finish);
    let Some(seq) = j.seq else { return };
    if finish == Finish::Cancelled {
        let _ = w.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
        return;
    }
    let held = j.held();
    m.keep(&w.ctx, seq, held.clone());
    w.held[seq] = held;
}

/// Hands the caller what is new of the answer: all of it when the generation has ended, else all
/// but a last sentence that may be a repeat (held back until it differs, or is cut).
fn stream(j: &mut Job, ended: bool) {
    let upto = if ended { j.text.len() } else { guard::streamable(&j.text) };
    if upto > j.sent && j.text.is_char_boundary(j.sent) {
        j.out.push(Out::Piece(j.text[j.sent..upto].to_string()));
        j.sent = upto;
    }
}
