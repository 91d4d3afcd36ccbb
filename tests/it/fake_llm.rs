//! A fake model provider: a real HTTP server on 127.0.0.1:0 (its own thread and runtime, so the
//! blocking provider clients under test can call it from any thread) that records each request and
//! answers with a scripted response.

#![allow(dead_code)]

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use parking_lot::Mutex;
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: Method,
    pub uri: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
    }
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
}

impl Reply {
    pub fn sse(events: &[String]) -> Reply {
        let body = events.iter().map(|e| format!("{e}\n\n")).collect::<String>();
        Reply { status: 200, headers: vec![("content-type", "text/event-stream".into())], body }
    }
    pub fn status(status: u16, body: &str) -> Reply {
        Reply { status, headers: vec![("content-type", "application/json".into())], body: body.into() }
    }
}

type Script = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

pub struct FakeProvider {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeProvider {
    pub fn start(script: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> FakeProvider {
        let script: Script = Arc::new(script);
        let requests: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let (tx_addr, rx_addr) = std::sync::mpsc::channel();
        let (tx_stop, rx_stop) = tokio::sync::oneshot::channel::<()>();
        let reqs = requests.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx_addr.send(listener.local_addr().unwrap()).unwrap();
                let app =
                    axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                        let script = script.clone();
                        let reqs = reqs.clone();
                        async move {
                            let rec = Recorded {
                                method,
                                uri: uri.to_string(),
                                headers,
                                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                            };
                            // the script may block (tests hold a reply back): run it off the runtime
                            let rec2 = rec.clone();
                            reqs.lock().push(rec);
                            let reply = tokio::task::spawn_blocking(move || script(&rec2)).await.unwrap();
                            let mut b =
                                axum::http::Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
                            for (k, v) in reply.headers {
                                b = b.header(k, v);
                            }
                            b.body(Body::from(reply.body)).unwrap()
                        }
                    });
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = rx_stop.await;
                    })
                    .await
                    .unwrap();
            });
        });
        let addr = rx_addr.recv().unwrap();
        FakeProvider { url: format!("http://{addr}"), requests, shutdown: Some(tx_stop), thread: Some(thread) }
    }

    pub fn last(&self) -> Recorded {
        self.requests.lock().last().cloned().expect("a request")
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An OpenAI-style stream answering `text` in pieces of a few characters, with usage.
pub fn openai_stream(text: &str) -> Reply {
    let mut events: Vec<String> = text
        .as_bytes()
        .chunks(4)
        .map(|c| {
            let piece = String::from_utf8_lossy(c).to_string();
            format!("data: {}", serde_json::json!({"choices": [{"index": 0, "delta": {"content": piece}}]}))
        })
        .collect();
    events.push(format!(
        "data: {}",
        serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    ));
    events.push(format!(
        "data: {}",
        serde_json::json!({"choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": 7}})
    ));
    events.push("data: [DONE]".into());
    Reply::sse(&events)
}
