//! The `steward bench …` commands: their arguments and what each runs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use crate::config::Config;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Raw embedding throughput of the local model on the Cranfield abstracts.
    Embed {
        /// The Cranfield collection directory.
        #[arg(long, default_value = "../shared/bench/cranfield")]
        cranfield: PathBuf,
        /// Repetitions; the median is reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// Cranfield through the HTTP API (ingestion, search latency and quality, memory), plus a
    /// synthetic corpus of 50,000+ chunks.
    Knowledge {
        #[arg(long, default_value = "../shared/bench/cranfield")]
        cranfield: PathBuf,
        /// Ingestion repetitions (fresh server each); medians are reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Concurrent document uploads.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// Chunks in the synthetic corpus (0 skips it).
        #[arg(long, default_value_t = 50_000)]
        synthetic_chunks: usize,
        /// Also write the results as JSON here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Retrieval on any BEIR-shaped collection through the HTTP API with the default settings:
    /// ingestion, quality (nDCG@10, recall@100, MRR@10, odd/even halves) and latency per mode,
    /// each beside a plain BM25 + embeddings + RRF reference computed in the same run.
    Retrieval {
        /// The collection directory (`docs.json`, `queries.json`, `qrels.json`, or Cranfield's files).
        #[arg(long, default_value = "../shared/bench/nfcorpus")]
        collection: PathBuf,
        /// Ingestion repetitions (fresh server each); medians are reported.
        #[arg(long, default_value_t = 1)]
        runs: usize,
        /// Concurrent document uploads.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// Also time the plain Python pipeline (`scripts/plain-pipeline.py`) on the same texts.
        #[arg(long)]
        python: bool,
        /// Score hybrid with reranking by this model on an OpenAI-compatible server.
        #[arg(long)]
        rerank_model: Option<String>,
        /// The OpenAI-compatible server's base URL for `--rerank-model`.
        #[arg(long)]
        rerank_base_url: Option<String>,
        /// Also write the results as JSON here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// The local GGUF chat model (load, prompt and generation speed, time to first token,
    /// memory) and the built-in extractive answerer's latency.
    Models {
        #[arg(long, default_value = "../shared/bench/cranfield")]
        cranfield: PathBuf,
        /// Repetitions; medians are reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// Backups on Cranfield plus `--conversations` conversations (backup and restore time, archive
    /// size, in process), and the rebuild of both search indexes over a synthetic corpus of
    /// `--synthetic-chunks` chunks.
    Backup {
        #[arg(long, default_value = "../shared/bench/cranfield")]
        cranfield: PathBuf,
        /// Conversations of four messages added to the data directory.
        #[arg(long, default_value_t = 10_000)]
        conversations: usize,
        /// Chunks in the corpus whose indexes are rebuilt (0 skips it).
        #[arg(long, default_value_t = 50_000)]
        synthetic_chunks: usize,
        /// Repetitions; medians are reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Also time `steward migrate-store` of the same data directory into a new database on
        /// this PostgreSQL server, per run (the URL's user needs CREATEDB; the databases are
        /// dropped afterwards).
        #[arg(long, value_name = "URL")]
        postgres: Option<String>,
    },
    /// What usage limits cost an answer: server time (p50/p95) and answers/s at `--concurrency`
    /// with the account unlimited and capped far away, alternating rounds, medians.
    Usage {
        /// Alternating rounds per side; medians are reported.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Sequential answers per round (the latency sample).
        #[arg(long, default_value_t = 200)]
        sequential: usize,
        /// Requests in flight for the throughput sample.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Answers per round in the throughput sample.
        #[arg(long, default_value_t = 1000)]
        total: usize,
    },
    /// The answer turn on Cranfield through the REST chat route: turn latency (server and end to
    /// end), how often answers cite a judged-relevant document, and the same with the local GGUF.
    Chat {
        /// The collection: Cranfield, or a BEIR export such as `../shared/bench/nfcorpus`.
        #[arg(long, default_value = "../shared/bench/cranfield")]
        cranfield: PathBuf,
        /// Concurrent document uploads while ingesting.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// Queries also asked with the local GGUF model (0 skips it; ~5 s each on 2 cores).
        #[arg(long, default_value_t = 20)]
        gguf_queries: usize,
        /// Cores kept busy by spinning threads while the local model answers ("one core busy
        /// elsewhere": 1).
        #[arg(long, default_value_t = 0)]
        busy_cores: usize,
        /// Also write the results as JSON here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Eval suites on Cranfield: cases saved from chat answers, the suite in retrieval_only and in
    /// full_assistant with the built-in answerer (wall time, cases/s), and llm_judge on the local
    /// GGUF (seconds per judged case).
    Evals {
        #[arg(long, default_value = "../shared/bench/cranfield")]
        cranfield: PathBuf,
        /// Concurrent document uploads while ingesting.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// Cases in the suite.
        #[arg(long, default_value_t = 100)]
        cases: usize,
        /// Suite runs per mode; medians are reported.
        #[arg(long, default_value_t = 3)]
        repeats: usize,
        /// Cases judged by llm_judge on the local GGUF (0 skips it).
        #[arg(long, default_value_t = 5)]
        judged: usize,
        /// Also write the results as JSON here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Anonymous visitors on the public link: concurrent sessions sending streamed messages with
    /// the built-in answerer (messages/s, first-chunk latency, errors, memory), then idle event
    /// streams held open (memory per stream).
    PublicChat {
        #[arg(long, default_value = "../shared/bench/cranfield")]
        cranfield: PathBuf,
        /// Visitors at once.
        #[arg(long, default_value_t = 200)]
        sessions: usize,
        /// Streamed messages each visitor sends, one after another.
        #[arg(long, default_value_t = 5)]
        messages: usize,
        /// Idle event streams held open at the end.
        #[arg(long, default_value_t = 1000)]
        idle_streams: usize,
    },
    /// The converse surface with the built-in answerer: the same questions through REST agent
    /// chat and `ask_agent` over `/mcp` (latency p50/p95, MCP/REST ratio), then concurrent long
    /// polls held for 25 s (server memory and CPU while they wait).
    Converse {
        #[arg(long, default_value = "../shared/bench/cranfield")]
        cranfield: PathBuf,
        /// Questions asked on each path (REST and MCP, alternating).
        #[arg(long, default_value_t = 50)]
        questions: usize,
        /// Long polls held at once, each in its own converse session.
        #[arg(long, default_value_t = 100)]
        polls: usize,
    },
    /// The website crawler on a generated local site: pages/s fetched and extracted, time until
    /// searchable, peak memory; a recrawl of the unchanged site (time, vectors embedded, monthly
    /// bytes); extraction quality on the generated pages and a fixture set.
    Crawl {
        #[arg(long, default_value = "../shared/bench/cranfield")]
        cranfield: PathBuf,
        /// Pages in the generated site.
        #[arg(long, default_value_t = 2000)]
        pages: usize,
        /// Requests in flight to the site (`WEBSITE_CRAWLER_CONCURRENCY`).
        #[arg(long, default_value_t = 2)]
        concurrency: usize,
        /// A fixture site with a `manifest.json` (content and boilerplate lines per page).
        #[arg(long, default_value = "tests/it/fixtures/site")]
        fixtures: PathBuf,
        /// Also write the results as JSON here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// The connectors through the real binary: a WordPress backfill from a real local WordPress
    /// (time until searchable, peak memory, sync now of the unchanged site), then WhatsApp
    /// deliveries from concurrent senders (acknowledgement latency p50/p99, replies/s with the
    /// built-in answerer).
    Connectors {
        #[arg(long, default_value = "../shared/bench/cranfield")]
        cranfield: PathBuf,
        /// Posts in the WordPress site (0 skips WordPress).
        #[arg(long, default_value_t = 1000)]
        posts: usize,
        /// WhatsApp customers writing at once (0 skips WhatsApp).
        #[arg(long, default_value_t = 50)]
        senders: usize,
        /// Messages each customer sends, one after another.
        #[arg(long, default_value_t = 20)]
        messages: usize,
        /// The server's burst window (`STEWARD_WHATSAPP_BURST_MS`); 0 answers every message alone.
        #[arg(long, default_value_t = 0)]
        burst_ms: u64,
        /// Also write the results as JSON here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// What routines add to a turn with the built-in answerer: plain turns without routines,
    /// plain turns with a routine published, and routine turns (server time p50/p95).
    Routines {
        /// Turns of each kind.
        #[arg(long, default_value_t = 60)]
        turns: usize,
    },
    /// Agent bundles: an agent with 20 routines, 30 skills and 50 directives built through the
    /// API; export time, bundle size and import time (medians).
    Bundle {
        /// Exports and imports timed; medians are reported.
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// Steward on PostgreSQL (docs/scale-out.md): server and database time of sign-in, an
    /// upload, a search and an answer on SQLite and PostgreSQL; job throughput with `--nodes`
    /// nodes of `--workers` workers; a new node's index build rate on Cranfield.
    Nodes {
        /// A PostgreSQL URL whose user may create databases (each part uses a new one).
        #[arg(long)]
        postgres: String,
        #[arg(long, default_value = "../shared/bench/cranfield")]
        cranfield: PathBuf,
        /// Rounds of the four requests per backend.
        #[arg(long, default_value_t = 30)]
        rounds: usize,
        #[arg(long, default_value_t = 2)]
        nodes: usize,
        #[arg(long, default_value_t = 4)]
        workers: usize,
        #[arg(long, default_value_t = 10_000)]
        jobs: usize,
        /// Index builds of a new node timed; the median is reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// Sign-in and registration under a flood: 64 concurrent bogus registrations and 100
    /// concurrent wrong passwords from one address, with the server's memory.
    Auth,
    /// Score retrieval settings on a collection in-process (used to choose the defaults).
    #[command(hide = true)]
    Tune {
        #[arg(long, default_value = "../shared/bench/cranfield")]
        collection: PathBuf,
        /// Ingestion settings as JSON, e.g. '{"chunkingStrategy":"fixed_window","fixedWindowChunkSize":4000}'.
        #[arg(long, default_value = "{}")]
        ingestion: String,
        /// Keep the ingested data here and reuse it on the next run.
        #[arg(long)]
        data: Option<PathBuf>,
        /// Variants to score: a JSON file `[{"name", "tuning": {…}}]`.
        #[arg(long)]
        variants: Option<PathBuf>,
        /// Modes to score, comma-separated.
        #[arg(long, default_value = "bm25,vector,hybrid")]
        modes: String,
    },
}

/// Runs a benchmark command.
pub fn run(config: Config, cmd: BenchCommand) -> anyhow::Result<ExitCode> {
    use crate::bench;
    match cmd {
        BenchCommand::Embed { cranfield, runs } => {
            let c = bench::cranfield::Collection::load(&cranfield)?;
            let texts: Vec<String> = c.docs.iter().map(|d| format!("{}\n{}", d.title, d.body)).collect();
            let queries: Vec<String> = c.queries.iter().map(|q| q.text.clone()).collect();
            let r = bench::embed::run(&config, &texts, &queries, runs.max(1))?;
            let med = bench::median(&r.runs_secs);
            println!(
                "embedding: {} texts, {} tokens (max {} per text, {} threads): median {:.2} s over {} runs = {:.1} texts/s, {:.0} tokens/s",
                r.texts,
                r.tokens,
                config.embed_max_tokens,
                config.embed_threads,
                med,
                r.runs_secs.len(),
                r.texts as f64 / med,
                r.tokens as f64 / med
            );
            println!(
                "query embedding: {} queries one at a time: p50 {:.2} ms, p95 {:.2} ms",
                r.query_ms.len(),
                bench::median(&r.query_ms),
                bench::percentile(&r.query_ms, 95.0)
            );
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Knowledge { cranfield, runs, concurrency, synthetic_chunks, out } => {
            let c = bench::cranfield::Collection::load(&cranfield)?;
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let report = rt.block_on(knowledge_report(
                &config,
                &c,
                &cranfield,
                runs.max(1),
                concurrency.max(1),
                synthetic_chunks,
            ))?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            if let Some(path) = out {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Retrieval { collection, runs, concurrency, python, rerank_model, rerank_base_url, out } => {
            let o = bench::retrieval::Options {
                collection,
                runs,
                concurrency: concurrency.max(1),
                python,
                rerank_model,
                rerank_base_url,
                env: Vec::new(),
            };
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let report = rt.block_on(bench::retrieval::run(&o))?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            if let Some(path) = out {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Models { cranfield, runs } => {
            let c = bench::cranfield::Collection::load(&cranfield)?;
            let report = bench::models::run(&config, &c, runs.max(1))?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Chat { cranfield, concurrency, gguf_queries, busy_cores, out } => {
            let c = bench::cranfield::Collection::load(&cranfield)?;
            let gguf = crate::models::resolve::local_model_path(&config).filter(|p| p.is_file());
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let report = rt.block_on(bench::chat::run(&c, concurrency.max(1), gguf, gguf_queries, busy_cores))?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            if let Some(path) = out {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Evals { cranfield, concurrency, cases, repeats, judged, out } => {
            let c = bench::cranfield::Collection::load(&cranfield)?;
            let gguf = crate::models::resolve::local_model_path(&config).filter(|p| p.is_file());
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let report = rt.block_on(bench::evals::run(&c, concurrency.max(1), cases, repeats, gguf, judged))?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            if let Some(path) = out {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::PublicChat { cranfield, sessions, messages, idle_streams } => {
            let c = bench::cranfield::Collection::load(&cranfield)?;
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let report = rt.block_on(bench::public_chat::run(&c, sessions.max(1), messages.max(1), idle_streams))?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Converse { cranfield, questions, polls } => {
            let c = bench::cranfield::Collection::load(&cranfield)?;
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let report = rt.block_on(bench::converse::run(&c, questions.max(1), polls.max(1)))?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            eprintln!("{}", bench::converse::summary(&report));
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Crawl { cranfield, pages, concurrency, fixtures, out } => {
            let c = bench::cranfield::Collection::load(&cranfield)?;
            let fixtures = fixtures.join("manifest.json").is_file().then_some(fixtures);
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let report =
                rt.block_on(bench::crawl::run(&c, pages.max(10), fixtures.as_deref(), concurrency.clamp(1, 8)))?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            if let Some(path) = out {
                std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Connectors { cranfield, posts, senders, messages, burst_ms, out } => {
            let c = bench::cranfield::Collection::load(&cranfield)?;
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let report = rt.block_on(bench::connectors::run(&c, posts, senders, messages, burst_ms))?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            if let Some(path) = out {
                std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Routines { turns } => {
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let report = rt.block_on(bench::routines::run(turns.max(3)))?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Bundle { runs } => {
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let report = rt.block_on(bench::bundle::run(runs.max(1)))?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Usage { rounds, sequential, concurrency, total } => {
            let direct = bench::usage::in_process(10 * sequential.max(10))?;
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let mut report =
                rt.block_on(bench::usage::run(rounds.max(1), sequential.max(10), concurrency.max(1), total.max(1)))?;
            report["inProcess"] = direct;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Backup { cranfield, conversations, synthetic_chunks, runs, postgres } => {
            let sizes = bench::backup::Sizes { conversations, chunks: synthetic_chunks, runs: runs.max(1) };
            let report = bench::backup::run(&config, &cranfield, sizes, postgres.as_deref())?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Nodes { postgres, cranfield, rounds, nodes, workers, jobs, runs } => {
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let requests = rt.block_on(bench::nodes::requests(&postgres, &cranfield, rounds.max(1)))?;
            let mut job_runs = Vec::new();
            for (db, n) in [(None, 1), (Some(postgres.as_str()), 1), (Some(postgres.as_str()), nodes.max(1))] {
                job_runs.push(bench::nodes::jobs(&config, db, n, workers.max(1), jobs.max(1))?);
                eprintln!("jobs: {}", job_runs.last().map(|v| v.to_string()).unwrap_or_default());
            }
            let catch_up = bench::nodes::catch_up(&config, &postgres, &cranfield, runs.max(1))?;
            let report = serde_json::json!({"requests": requests, "jobs": job_runs, "newNodeIndexBuild": catch_up});
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Auth => {
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let report = rt.block_on(bench::auth::run())?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Tune { collection, ingestion, data, variants, modes } => {
            let modes = modes
                .split(',')
                .map(|m| match m.trim() {
                    "bm25" => Ok(crate::search::Mode::Bm25),
                    "vector" => Ok(crate::search::Mode::Vector),
                    "hybrid" => Ok(crate::search::Mode::Hybrid),
                    other => Err(anyhow::anyhow!("unknown mode {other}")),
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let o = bench::tune::TuneOptions {
                collection,
                ingestion: serde_json::from_str(&ingestion)?,
                data,
                variants,
                modes,
            };
            bench::tune::run(&o, config)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn knowledge_report(
    config: &Config,
    c: &crate::bench::cranfield::Collection,
    cranfield: &std::path::Path,
    runs: usize,
    concurrency: usize,
    synthetic_chunks: usize,
) -> anyhow::Result<serde_json::Value> {
    use crate::bench::{self, knowledge, retrieval};
    // Cranfield through `bench retrieval` (ingestion, quality and latency per mode, each beside the
    // plain reference)
    let o = retrieval::Options {
        collection: cranfield.to_path_buf(),
        runs,
        concurrency,
        python: false,
        rerank_model: None,
        rerank_base_url: None,
        env: Vec::new(),
    };
    let report = retrieval::run(&o).await?;
    let texts: Vec<String> = c.docs.iter().filter(|d| !d.body.trim().is_empty()).map(|d| d.body.clone()).collect();
    let queries: Vec<String> = c.queries.iter().map(|q| q.text.clone()).collect();
    let raw = bench::embed::run(config, &texts, &queries, 3)?;
    let raw_med = bench::median(&raw.runs_secs);
    let ingest_med = report["ingestion"]["medianSeconds"].as_f64().unwrap_or(f64::NAN);
    let synthetic = if synthetic_chunks > 0 {
        let s = knowledge::synthetic(c, synthetic_chunks, concurrency).await?;
        Some(serde_json::json!({
            "documents": s.docs, "chunks": s.chunks, "ingestSeconds": s.ingest_seconds, "chunksPerSecond": s.chunks as f64 / s.ingest_seconds,
            "rateOverTime": s.rate.iter().map(|(t, n)| serde_json::json!({"seconds": t, "chunks": n})).collect::<Vec<_>>(),
            "modes": s.modes.iter().map(|(m, p50, p95, sp50, sp95)| serde_json::json!({
                "mode": m, "p50Ms": p50, "p95Ms": p95, "serverP50Ms": sp50, "serverP95Ms": sp95})).collect::<Vec<_>>(),
            "peakRssMiB": s.peak_rss_mib, "rssAfterQueriesMiB": s.rss_after_mib,
            "indexBytes": s.index_bytes, "databaseBytes": s.database_bytes,
        }))
    } else {
        None
    };
    Ok(serde_json::json!({
        "machine": {"cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)},
        "cranfield": report,
        "rawEmbedding": {
            "texts": raw.texts, "tokens": raw.tokens, "medianSeconds": raw_med, "textsPerSecond": raw.texts as f64 / raw_med,
            "pipelineOverheadRatio": ingest_med / raw_med,
            "queryP50Ms": bench::median(&raw.query_ms), "queryP95Ms": bench::percentile(&raw.query_ms, 95.0),
        },
        "synthetic": synthetic,
    }))
}
