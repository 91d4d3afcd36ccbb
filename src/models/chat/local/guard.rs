//! A guard against the loops small models fall into at low temperature: the same sentence written
//! again and again, or a run of citation markers counting upwards. Either is cut where it starts
//! and the generation stops there, instead of filling the answer's token budget with it (which
//! also kept every visitor queued behind it waiting). A sentence that may turn out to be a repeat
//! (it begins like an earlier one) is held back from the stream until it has shown it is not, so
//! the streamed text is always the final answer's beginning.

use crate::models::extractive::plain_words as plain;

/// More consecutive citation markers than this is a counting loop, not citing.
const MARKER_RUN: usize = 8;
/// A repeated sentence shorter than this many words ("Yes.") may be deliberate.
const MIN_WORDS: usize = 3;

/// Where to cut `text` when its newest part repeats: the start of the last complete sentence when
/// it says what an earlier sentence said (case, punctuation and markers aside), or the start of a
/// trailing run of citation markers longer than [`MARKER_RUN`]. `None` while the text is fine.
/// Text with a code block is never cut for a repeated line (code repeats lines on purpose).
pub fn loop_cut(text: &str) -> Option<usize> {
    marker_run(text).or_else(|| if text.contains("```") { None } else { repeated_sentence(text) })
}

/// How much of `text` may be streamed now: all of it, but for a last, unfinished sentence that
/// begins like an earlier sentence (it may be a repeat, to be cut).
pub fn streamable(text: &str) -> usize {
    if text.contains("```") {
        return text.len();
    }
    let sentences = complete_sentences(text);
    let start = sentences.last().map_or(0, |&(_, e)| e);
    let rest = &text[start..];
    let lead = rest.len() - rest.trim_start().len();
    let open = plain(rest);
    if open.is_empty() {
        return text.len();
    }
    let open: Vec<&str> = open.split(' ').collect();
    let (last, whole) = open.split_last().unwrap_or((&"", &[]));
    let may_repeat = sentences.iter().any(|&(s, e)| {
        let earlier = plain(&text[s..e]);
        let words: Vec<&str> = earlier.split(' ').collect();
        words.len() >= MIN_WORDS
            && words.len() > whole.len()
            && words[..whole.len()] == *whole
            && words[whole.len()].starts_with(last)
    });
    if may_repeat { start + lead } else { text.len() }
}

/// The start of a trailing run of more than [`MARKER_RUN`] markers like `[12]`.
fn marker_run(text: &str) -> Option<usize> {
    let mut rest = text.trim_end();
    let mut count = 0;
    while let Some(before) = rest.strip_suffix(']') {
        let digits = before.len() - before.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let Some(open) = before[..before.len() - digits].strip_suffix('[') else { break };
        if digits == 0 {
            break;
        }
        count += 1;
        rest = open.trim_end();
    }
    (count > MARKER_RUN).then_some(rest.len())
}

/// The start of the last complete sentence when an earlier one says the same.
fn repeated_sentence(text: &str) -> Option<usize> {
    let sentences = complete_sentences(text);
    let (last, earlier) = sentences.split_last()?;
    let said = plain(&text[last.0..last.1]);
    if said.split(' ').count() < MIN_WORDS {
        return None;
    }
    earlier.iter().any(|&(s, e)| plain(&text[s..e]) == said).then_some(last.0)
}

/// Byte ranges of the complete sentences (ended by `.`, `!` or `?` before white space or at the end
/// of the text, or by a line break; a list item's number is not a sentence), leading white space
/// excluded.
fn complete_sentences(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let ends = c == '\n'
            || (matches!(c, '.' | '!' | '?') && next.is_none_or(char::is_whitespace) && !list_number(&text[start..i]));
        if ends {
            let end = i + c.len_utf8();
            let lead = text[start..end].len() - text[start..end].trim_start().len();
            if start + lead < end {
                out.push((start + lead, end));
            }
            start = end;
        }
    }
    out
}

/// Whether `before` (a sentence so far, up to a full stop) is only a list item's number (`2`, `b`).
fn list_number(before: &str) -> bool {
    let w = before.trim();
    !w.is_empty() && !w.contains(char::is_whitespace) && (w.chars().all(|c| c.is_ascii_digit()) || w.len() == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_sentence_said_again_is_cut_where_it_starts() {
        let t = "The answer is yes. It is correct [1]. The answer is also correct. The answer is also correct. ";
        let cut = loop_cut(t).unwrap();
        assert_eq!(&t[..cut], "The answer is yes. It is correct [1]. The answer is also correct. ");
        // markers and case do not hide a repeat
        let t = "Lift is a force [1]. lift is a FORCE [2].\n";
        assert_eq!(&t[..loop_cut(t).unwrap()], "Lift is a force [1]. ");
    }

    #[test]
    fn text_that_does_not_repeat_is_left_alone() {
        assert_eq!(loop_cut("Lift is a force [1]. Drag opposes motion [2]. Lift is a"), None, "incomplete");
        assert_eq!(loop_cut("Yes. Yes. "), None, "too short to be a loop");
        assert_eq!(loop_cut("The value is 3.5 units. It is 3.5 units wide"), None);
        assert_eq!(loop_cut(""), None);
        assert_eq!(loop_cut("See [1] [2] [3]."), None, "a few markers are citing");
    }

    #[test]
    fn a_numbered_step_said_again_is_not_a_loop_nor_is_code() {
        let t = "1. Open the settings page.\n2. Click the Save button.\n3. Reopen it.\n4. Click the Save button.\n";
        assert_eq!(loop_cut(t), None);
        let t = "Run this:\n```\nfor x in range(10):\n    print(x)\nfor x in range(10):\n";
        assert_eq!(loop_cut(t), None);
    }

    #[test]
    fn a_sentence_that_begins_like_an_earlier_one_is_held_back_until_it_differs() {
        let first = "The answer is also correct. ";
        assert_eq!(streamable(first), first.len(), "nothing earlier to repeat");
        let t = format!("{first}The answer is al");
        assert_eq!(streamable(&t), first.len(), "it may be a repeat: held back");
        let t = format!("{first}The answer is also wrong");
        assert_eq!(streamable(&t), t.len(), "it differs: all of it goes out");
        let t = format!("{first}The answer is also correct.");
        assert_eq!(loop_cut(&t), Some(first.len()), "a repeat is cut as soon as its full stop comes");
        assert_eq!(streamable("Lift is a force."), "Lift is a force.".len());
    }

    #[test]
    fn a_counting_run_of_markers_is_cut() {
        let t = "The answer to this question is: [4] [1] [2] [3] [4] [5] [6] [7] [8] [9] [10";
        assert_eq!(loop_cut(t), None, "the last marker is not complete yet");
        let t = "The answer to this question is: [4] [1] [2] [3] [4] [5] [6] [7] [8] [9] [10]";
        assert_eq!(&t[..loop_cut(t).unwrap()], "The answer to this question is:");
    }

    proptest! {
        #[test]
        fn the_cut_is_a_char_boundary_inside_the_text(text in "([a-zé .\\[\\]0-9\n!?]{0,12}){0,20}") {
            if let Some(cut) = loop_cut(&text) {
                prop_assert!(cut < text.len());
                prop_assert!(text.is_char_boundary(cut));
            }
        }

        #[test]
        fn what_may_be_streamed_is_a_char_boundary_and_never_holds_a_cut_repeat(text in "([a-zé .\\[\\]0-9\n!?]{0,12}){0,20}") {
            let n = streamable(&text);
            prop_assert!(n <= text.len() && text.is_char_boundary(n));
            if let Some(cut) = loop_cut(&text) {
                prop_assert!(cut <= text.len());
            }
        }

        #[test]
        fn any_sentence_repeated_is_found(words in proptest::collection::vec("[a-z]{1,8}", 3..8), lead in "[A-Z][a-z]{0,6}[0-9]") {
            let s = format!("{}.", words.join(" "));
            let text = format!("{lead} starts here. {s} {s} ");
            let cut = loop_cut(&text).unwrap();
            prop_assert_eq!(&text[..cut], format!("{lead} starts here. {s} "));
        }
    }
}
