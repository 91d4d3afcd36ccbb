//! WordPress's REST API as the connector reads it: the post types (`/wp/v2/types`), a page of
//! items of one type (full, or ids only), each through `delivery`'s guarded client. Requests use
//! `?rest_route=` so they work whether or not the site has pretty permalinks; an Application
//! Password is sent as HTTP Basic authentication.

use std::collections::BTreeMap;

use base64::Engine;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderName};
use serde::Deserialize;

use crate::app::App;

/// Items asked for at once (by id).
pub const PER_PAGE: usize = 50;
/// Ids asked for per page (ids only).
pub const IDS_PER_PAGE: usize = 100;
/// The most bytes one page of items may have.
const MAX_PAGE_BYTES: usize = 16 * 1024 * 1024;

/// Why a request failed: `retry` says whether trying again later may help.
#[derive(Debug, Clone)]
pub struct Failure {
    pub message: String,
    pub retry: bool,
}

impl Failure {
    fn stop(message: impl Into<String>) -> Failure {
        Failure { message: message.into(), retry: false }
    }
}

/// The site and how to authenticate to it.
pub struct Site<'a> {
    pub app: &'a App,
    /// The stored site URL (no trailing slash).
    pub url: &'a str,
    /// `Basic …` for `wp_username` and `wp_application_password`.
    pub auth: Option<String>,
}

/// `Basic base64(user:password)`.
pub fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
}

/// One post as the REST API gives it (the fields the connector reads).
#[derive(Debug, Clone, Deserialize)]
pub struct Item {
    pub id: i64,
    #[serde(default)]
    pub date_gmt: Option<String>,
    #[serde(default)]
    pub modified: Option<String>,
    #[serde(default)]
    pub link: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub title: Rendered,
    #[serde(default)]
    pub content: Rendered,
    #[serde(default, rename = "_embedded")]
    pub embedded: Option<Embedded>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Rendered {
    #[serde(default)]
    pub rendered: String,
    #[serde(default)]
    pub protected: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Embedded {
    #[serde(default)]
    pub author: Vec<Author>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Author {
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct TypeInfo {
    #[serde(default)]
    rest_base: Option<String>,
    #[serde(default)]
    rest_namespace: Option<String>,
}

#[derive(Debug, Deserialize)]
struct IdOnly {
    id: i64,
}

/// A page of results and how many pages there are.
pub struct Page<T> {
    pub items: Vec<T>,
    pub total_pages: usize,
}

impl Site<'_> {
    /// GETs `route` with `query` and parses the JSON answer.
    fn get<T: serde::de::DeserializeOwned>(
        &self,
        route: &str,
        query: &[(&str, String)],
    ) -> Result<(T, usize), Failure> {
        let mut url = url::Url::parse(&format!("{}/", self.url))
            .map_err(|e| Failure::stop(format!("site_url is not a valid URL: {e}")))?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("rest_route", route);
            for (k, v) in query {
                q.append_pair(k, v);
            }
        }
        let mut headers: Vec<(HeaderName, String)> = vec![(ACCEPT, "application/json".into())];
        if let Some(a) = &self.auth {
            headers.push((AUTHORIZATION, a.clone()));
        }
        let answer = self.app.outbound.get_page(&url, &headers, MAX_PAGE_BYTES).map_err(|f| match f {
            crate::delivery::Failure::Transport(m) => {
                Failure { message: format!("the site could not be reached: {m}"), retry: true }
            }
            crate::delivery::Failure::Refused(m) => {
                Failure::stop(format!("the site is not admitted by the outbound guard: {m}"))
            }
            crate::delivery::Failure::Invalid(m) => Failure::stop(m),
        })?;
        match answer.status {
            200 => {}
            401 | 403 => {
                return Err(Failure::stop(format!(
                    "WordPress refused the request ({}) for {route}: check wp_username and wp_application_password",
                    answer.status
                )));
            }
            404 => {
                return Err(Failure::stop(format!(
                    "WordPress's REST API did not answer {route} (404): is this a WordPress site, and is the post type shown in the REST API?"
                )));
            }
            s if s == 429 || s >= 500 => {
                return Err(Failure { message: format!("the site answered {s} for {route}"), retry: true });
            }
            s => return Err(Failure::stop(format!("the site answered {s} for {route}"))),
        }
        if answer.truncated {
            return Err(Failure::stop(format!("a page of {route} is larger than {} MB", MAX_PAGE_BYTES >> 20)));
        }
        let total_pages = answer
            .headers
            .get("x-wp-totalpages")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(1);
        let body = serde_json::from_slice(&answer.body).map_err(|e| {
            Failure::stop(format!(
                "the answer to {route} is not the JSON WordPress sends ({e}): is this a WordPress site?"
            ))
        })?;
        Ok((body, total_pages))
    }

    /// Checks the Application Password: WordPress answers public content to a request whose
    /// credentials it does not accept, so a wrong password would go unnoticed (and private
    /// content unread) without this.
    pub fn check_credentials(&self) -> Result<(), Failure> {
        if self.auth.is_none() {
            return Ok(());
        }
        self.get::<serde_json::Value>("/wp/v2/users/me", &[("_fields", "id".to_string())]).map(|_| ())
    }

    /// Post type slug → its REST route base (`post` → `/wp/v2/posts`).
    pub fn types(&self) -> Result<BTreeMap<String, String>, Failure> {
        let (types, _) = self.get::<BTreeMap<String, TypeInfo>>("/wp/v2/types", &[])?;
        Ok(types
            .into_iter()
            .filter_map(|(slug, t)| {
                let base = t.rest_base?;
                let ns = t.rest_namespace.unwrap_or_else(|| "wp/v2".into());
                Some((slug, format!("/{}/{}", ns.trim_matches('/'), base.trim_matches('/'))))
            })
            .collect())
    }

    /// The published items at `route` with these ids (at most [`PER_PAGE`]), with their author.
    pub fn items(&self, route: &str, ids: &[i64]) -> Result<Vec<Item>, Failure> {
        let include = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let q = [
            ("include", include),
            ("per_page", ids.len().clamp(1, PER_PAGE).to_string()),
            ("status", "publish".to_string()),
            ("orderby", "include".to_string()),
            ("_embed", "author".to_string()),
        ];
        Ok(self.get::<Vec<Item>>(route, &q)?.0)
    }

    /// Page `page` (from 1) of the ids of the published items at `route` (modified after `after`,
    /// site time, when given), in id order: a stable order, so pages neither repeat nor skip
    /// items the way a sort on a shared timestamp can.
    pub fn ids(&self, route: &str, page: usize, after: Option<&str>) -> Result<Page<i64>, Failure> {
        let mut q = vec![
            ("per_page", IDS_PER_PAGE.to_string()),
            ("page", page.to_string()),
            ("status", "publish".to_string()),
            ("orderby", "id".to_string()),
            ("order", "asc".to_string()),
            ("_fields", "id".to_string()),
        ];
        if let Some(a) = after {
            q.push(("modified_after", a.to_string()));
        }
        let (items, total_pages) = self.get::<Vec<IdOnly>>(route, &q)?;
        Ok(Page { items: items.into_iter().map(|i| i.id).collect(), total_pages })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_and_item_shapes() {
        assert_eq!(basic("admin", "abcd efgh"), "Basic YWRtaW46YWJjZCBlZmdo");
        let v: Vec<Item> = serde_json::from_str(
            r#"[{"id":4,"date_gmt":"2026-01-02T03:04:05","modified":"2026-01-02T03:04:05","link":"http://x/?p=4",
                 "status":"publish","type":"post","title":{"rendered":"Hi"},"content":{"rendered":"<p>x</p>","protected":false},
                 "_embedded":{"author":[{"id":1,"name":"Ada"}]}}]"#,
        )
        .unwrap();
        assert_eq!(v[0].embedded.as_ref().unwrap().author[0].name.as_deref(), Some("Ada"));
        let bare: Item = serde_json::from_str(r#"{"id":9}"#).unwrap();
        assert!(bare.content.rendered.is_empty());
    }
}
