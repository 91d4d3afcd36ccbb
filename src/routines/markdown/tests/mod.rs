//! Tests of portable routine markdown and of routine validation: every diagnostic with its
//! line, the reference's examples byte for byte and compiled, projection round trips, property
//! tests, a bounded fuzz run and a timing.

mod diagnostics;
mod examples;
mod props;
mod validate;

use crate::routines::definition::Definition;

/// Parses and compiles `text`, failing the test on diagnostics.
pub(super) fn compiled(text: &str) -> Definition {
    match super::parse(text) {
        Ok(doc) => super::compile(&doc),
        Err(d) => panic!("diagnostics for\n{text}\n{d:#?}"),
    }
}

/// A document with the usual frontmatter around `body`.
pub(super) fn doc(body: &str) -> String {
    format!("---\nname: R\ntrigger: t\n---\n{body}")
}
