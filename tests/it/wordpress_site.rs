//! A real WordPress on 127.0.0.1 for the connector tests (`steward::bench::wordpress`, shared with
//! `steward bench connectors`), seeded through its own REST API with the Application Password.

use serde_json::{Value, json};
use steward::bench::wordpress::LocalWordPress;

pub use steward::bench::wordpress::USER;

pub struct WordPress {
    site: LocalWordPress,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub app_password: String,
    http: reqwest::Client,
}

impl WordPress {
    /// Installs and starts a fresh site (blocking: call it off the async runtime).
    pub fn start() -> WordPress {
        let site = LocalWordPress::start().unwrap_or_else(|e| panic!("{e:#}"));
        let (base, app_password) = (site.base.clone(), site.app_password.clone());
        WordPress { site, base, app_password, http: reqwest::Client::new() }
    }

    /// One REST call as the admin (Application Password); panics unless it succeeds.
    pub async fn rest(&self, method: reqwest::Method, route: &str, body: Option<Value>) -> Value {
        let mut req = self
            .http
            .request(method, format!("{}/", self.site.base))
            .query(&[("rest_route", route)])
            .basic_auth(USER, Some(&self.app_password));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{route}: {status} {v}");
        v
    }

    /// Creates an item of the collection `base` (`posts`, `pages`, `products`); its id.
    pub async fn create(&self, base: &str, title: &str, content: &str, status: &str) -> i64 {
        let v = self
            .rest(
                reqwest::Method::POST,
                &format!("/wp/v2/{base}"),
                Some(json!({"title": title, "content": content, "status": status})),
            )
            .await;
        v["id"].as_i64().unwrap()
    }

    pub async fn update(&self, base: &str, id: i64, body: Value) {
        self.rest(reqwest::Method::POST, &format!("/wp/v2/{base}/{id}"), Some(body)).await;
    }

    /// Moves an item to the trash.
    pub async fn trash(&self, base: &str, id: i64) {
        self.rest(reqwest::Method::DELETE, &format!("/wp/v2/{base}/{id}"), None).await;
    }
}
