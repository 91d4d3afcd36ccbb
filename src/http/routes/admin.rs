//! `POST /api/v1/admin/backup`: the backup archive of the whole data directory (as `steward
//! backup` writes it), streamed as it is made, for the owner of the server's organization.

use std::io::Write;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use crate::app::App;
use crate::error::Result;
use crate::http::extract::Ctx;
use crate::http::openapi::{Op, Routes};

pub fn routes() -> Routes {
    Routes::new("Operations").post(
        "/api/v1/admin/backup",
        backup,
        Op::new("Download a backup of the whole server")
            .about(
                "The archive `steward backup` writes (tar + zstd, a manifest with every member's SHA-256), \
                 streamed as it is made. Only a person who owns the server's organization (signed in or \
                 with a personal token) may download it; service credentials are refused.",
            )
            .media(200, "application/zstd", "The backup archive")
            .errors(&[403]),
    )
}

/// Pieces of the archive handed to the response body (a few in flight at most: a slow client
/// slows the backup down instead of filling memory).
const PIECE: usize = 256 * 1024;
const IN_FLIGHT: usize = 4;

/// The archive's bytes, sent to the response body as they are written; a client that went away
/// fails the next write, which stops the backup.
struct ToBody {
    tx: mpsc::Sender<std::io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl ToBody {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let piece = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(PIECE)));
        self.tx
            .blocking_send(Ok(piece))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl Write for ToBody {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= PIECE {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

async fn backup(State(app): State<Arc<App>>, ctx: Ctx) -> Result<Response> {
    let actor = ctx.actor();
    app.blocking(move |app| crate::ops::begin_download(app, &ctx.p, &actor)).await?;
    let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(IN_FLIGHT);
    let failed = tx.clone();
    let data_dir = app.config.data_dir.clone();
    let span = tracing::Span::current();
    let _writer = tokio::task::spawn_blocking(move || {
        let _in = span.enter();
        let started = std::time::Instant::now();
        let out = ToBody { tx, buf: Vec::with_capacity(PIECE) };
        match crate::ops::backup::write(&data_dir, out) {
            Ok((m, _)) => {
                tracing::info!(members = m.members.len(), ms = started.elapsed().as_millis() as u64, "backup streamed")
            }
            Err(e) => {
                tracing::warn!(error = %e, "backup stopped");
                // the body ends with an error: the transfer is cut short, never a complete-looking file
                let _ = failed.blocking_send(Err(std::io::Error::other("the backup stopped")));
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|piece| (piece, rx)) });
    let name = format!("steward-backup-{}.tar.zst", chrono::Utc::now().format("%Y%m%dT%H%M%SZ"));
    Ok((
        [
            (header::CONTENT_TYPE, "application/zstd".to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}\"")),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}
