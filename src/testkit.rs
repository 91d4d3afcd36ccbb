//! Helpers for the crate's own unit tests: text strategies for property tests.

use proptest::prelude::*;

/// Fragments that break code assuming one byte per character or stable case mapping: `İ`
/// (lowercases to 3 bytes), combining marks, emoji with joiners, right-to-left scripts, CJK,
/// wide and non-breaking spaces, line and paragraph separators, markup the chunkers look for, and
/// long runs without whitespace.
const FRAGMENTS: &[&str] = &[
    "İ",
    "ı",
    "ß",
    "ẞ",
    "e\u{301}",
    "\u{301}",
    "👩\u{200d}💻",
    "🇳🇱",
    "\u{fe0f}",
    "שלום",
    "مرحبا",
    "\u{202e}",
    "名前",
    "漢字",
    "\u{3000}",
    "\u{a0}",
    "\u{2028}",
    "\u{2029}",
    "\n",
    "\n\n",
    "\r\n",
    " ",
    "\t",
    "# ",
    "## ",
    "```",
    "| a | b |",
    "|---|---|",
    "- ",
    "1. ",
    "<table><tr><td>",
    "</td></tr></table>",
    ".",
    "?",
    "!",
    ";",
    " and ",
    " as well as ",
    "[1]",
    "[2, 3]",
    "#skill",
    "ctx.",
    "{{",
    "}}",
    "fn x() {",
    "}",
    "def f():",
    "Straße",
    "ÆØÅ",
    "x",
    "word",
    "longwordwithoutanyspaceatall",
    "ĲĳǄǅǆ",
    "\u{0}",
    "\u{feff}",
];

/// Text built from [`FRAGMENTS`] and arbitrary characters, up to `max_parts` pieces.
pub fn hostile_text(max_parts: usize) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => proptest::sample::select(FRAGMENTS).prop_map(str::to_string),
        1 => any::<char>().prop_map(|c| c.to_string()),
        1 => "[a-zA-Z]{1,12}",
    ];
    proptest::collection::vec(piece, 0..max_parts).prop_map(|v| v.concat())
}

/// Long text (kilobytes): runs of one fragment repeated, so windows and halves of it land inside
/// multi-byte characters.
pub fn long_hostile_text() -> impl Strategy<Value = String> {
    let run = (proptest::sample::select(FRAGMENTS), 1usize..600).prop_map(|(f, n)| f.repeat(n));
    proptest::collection::vec(run, 1..12).prop_map(|v| v.concat())
}
