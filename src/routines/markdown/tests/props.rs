//! Property tests, a bounded fuzz run and a timing. Documents come from two seeded generators:
//! [`normal_doc`] writes canonical documents in the form a projection writes (the round trip
//! `project(compile(parse(D))) == D` holds on them exactly); [`soup_doc`] writes frontmatter and
//! lines from the grammar's tokens, broken tokens and hostile text, so most parse and some do not.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::super::{canonicalize, compile, parse, project, serialize};
use super::examples::EXAMPLES;
use crate::routines::validate::{ValidationContext, validate};
use crate::testkit::hostile_text;

/// splitmix64: small, seedable, good enough to pick.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

const WORDS: [&str; 16] = [
    "ask", "the", "customer", "for", "their", "order", "please", "then", "check", "refund", "today", "number",
    "kindly", "confirm", "name", "address",
];
const DECLARED: [(&str, &str); 5] = [
    ("v1", "date"),
    ("v2", "number"),
    ("v3", "text:optional"),
    ("v4", "boolean:mutable"),
    ("v5", "email:optional:mutable"),
];
const PLAIN: [&str; 3] = ["u1", "u2", "u3"];
const NAMED_ENDS: [(&str, Option<&str>); 2] = [("bye", Some("See you \\\"soon\\\".")), ("lapsed", None)];

fn sentence(r: &mut Rng, vars: &[&str]) -> String {
    let n = 1 + r.below(6);
    let mut words: Vec<String> = (0..n).map(|_| r.pick(&WORDS).to_string()).collect();
    if !vars.is_empty() && r.chance(50) {
        let at = r.below(words.len() + 1);
        words.insert(at, format!("@{}", r.pick(vars)));
    }
    let mut s = words.join(" ");
    if r.chance(40) {
        s.push('.');
    }
    s
}

fn value(r: &mut Rng) -> String {
    match r.below(4) {
        0 => r.pick(&WORDS).to_string(),
        1 => (r.below(200) as i64 - 50).to_string(),
        2 => "true".into(),
        _ => format!("{}.5", r.below(9)),
    }
}

fn guard(r: &mut Rng, vars: &[&str]) -> String {
    let field = r.pick(vars).to_string();
    match r.below(9) {
        0 => format!("[if {field} = {}] ", value(r)),
        1 => format!("[if {field} != {}] ", value(r)),
        2 => format!("[if {field} in {}, {}] ", value(r), value(r)),
        3 => format!("[if {field} >= {}] ", r.below(100)),
        4 => format!("[if {field} older than {} {}] ", 1 + r.below(9), r.pick(&["days", "weeks", "months", "years"])),
        5 => format!("[if {field} is {}] ", r.pick(&["true", "false", "present", "absent"])),
        6 => "[outcome failed] ".into(),
        7 => format!("[filled @{}, @{}] ", field, r.pick(vars)),
        _ => {
            let s = sentence(r, vars);
            format!("{s} ")
        }
    }
}

fn target(r: &mut Rng, steps: &[String], handoff: &mut bool) -> String {
    match r.below(5) {
        0 => "-> end".into(),
        1 => {
            let (id, msg) = r.pick(&NAMED_ENDS);
            msg.map_or(format!("-> end:{id}"), |m| format!("-> end:{id} (\"{m}\")"))
        }
        2 => {
            *handoff = true;
            "-> handoff".into()
        }
        _ => format!("-> step:{}", r.pick(steps)),
    }
}

fn chip(r: &mut Rng, vars: &[&str]) -> String {
    match r.below(4) {
        0 => "#lookup".into(),
        1 => {
            let mut s = format!("#sms_send[in to=@{}, note={}, region=ctx.store_region", r.pick(vars), value(r));
            if r.chance(50) {
                s.push_str("; out result=@out1");
            }
            if r.chance(50) {
                s.push_str("; mode untyped");
            }
            s.push(']');
            s
        }
        2 => "[action notify.team]".into(),
        _ => "[action \"send it\"]".into(),
    }
}

fn options(r: &mut Rng, approval: bool, steps: &[String], handoff: &mut bool) -> (String, Vec<&'static str>) {
    let ids = &["yes", "no", "maybe"][..2 + r.below(2)];
    let mut out = Vec::new();
    for id in ids {
        let mut o = format!("{id}=\"{}\"", sentence(r, &[]));
        if r.chance(30) {
            o.push_str(" (\"why \\\"not\\\"\")");
        }
        if approval {
            let t = match r.below(3) {
                0 => "end".to_string(),
                1 => {
                    *handoff = true;
                    "handoff".into()
                }
                _ => format!("step:{}", r.pick(steps)),
            };
            o.push_str(&format!(" -> {t}"));
        }
        out.push(o);
    }
    (out.join(", "), ids.to_vec())
}

/// A canonical document in projection-normal form: untitled steps, then titled ones; chips at
/// the end of a line; every declared variable asked for; no blank lines.
pub fn normal_doc(r: &mut Rng) -> String {
    let declared: Vec<(&str, &str)> = DECLARED.iter().filter(|_| r.chance(40)).copied().collect();
    let mut vars: Vec<&str> = declared.iter().map(|(k, _)| *k).collect();
    vars.extend(PLAIN);
    let untitled = 1 + r.below(3);
    let titles: Vec<String> =
        (0..r.below(4)).map(|i| format!("{} {}", r.pick(&["Check", "Ask", "Send", "Wrap up"]), i + 2)).collect();
    let mut steps: Vec<String> = (1..=untitled).map(|i| format!("step_{i}")).collect();
    steps.extend(titles.iter().map(|t| super::super::compile::slug(t)));
    let mut handoff = false;
    let mut body: Vec<String> = Vec::new();
    let first: Vec<String> = declared.iter().map(|(k, _)| format!("@{k}")).collect();
    body.push(if first.is_empty() { "Start here.".into() } else { format!("Ask for {}.", first.join(" and ")) });
    let mut gate = 0;
    for i in 0..untitled + titles.len() {
        let titled = i >= untitled;
        let prose = |r: &mut Rng| if r.chance(60) { format!("{} ", sentence(r, &vars)) } else { String::new() };
        if titled {
            body.push(format!("# {}", titles[i - untitled]));
        }
        let kind = if i == 0 { 0 } else { r.below(5) };
        match kind {
            // The first line, already written, is the first step.
            0 if i == 0 => {}
            3 | 4 => {
                gate += 1;
                let key = format!("choice{gate}");
                let (opts, ids) = options(r, kind == 4, &steps, &mut handoff);
                let p = prose(r);
                body.push(format!("{p}[{} {key}: {opts}]", if kind == 4 { "approval" } else { "decision" }));
                if kind == 3 {
                    for id in &ids {
                        if r.chance(20) {
                            continue;
                        }
                        let t = target(r, &steps, &mut handoff);
                        body.push(format!("[if {key} = {id}] {t}"));
                    }
                }
                continue;
            }
            0 if i > 0 && !titled => body.push(sentence(r, &vars)),
            0 => {
                for _ in 0..r.below(3) {
                    body.push(sentence(r, &vars));
                }
            }
            _ => {
                let c = chip(r, &vars);
                if titled {
                    for _ in 0..r.below(2) {
                        body.push(sentence(r, &vars));
                    }
                    match body.last_mut().filter(|l| !l.starts_with("# ")) {
                        Some(l) => *l = format!("{l} {c}"),
                        None => body.push(c),
                    }
                } else {
                    let p = prose(r);
                    body.push(format!("{p}{c}"));
                }
            }
        }
        for _ in 0..r.below(3) {
            if r.chance(20) {
                let to = &steps[r.below(i + 1)];
                body.push(format!("-> step:{to} (max {})", 1 + r.below(5)));
            } else {
                let g = if r.chance(80) { guard(r, &vars) } else { String::new() };
                let t = target(r, &steps, &mut handoff);
                body.push(format!("{g}{t}"));
            }
        }
    }
    let mut front = vec!["---".to_string(), "grammar: 1".into(), format!("name: {}", sentence(r, &[]))];
    front.push(format!("trigger: {}", sentence(r, &[])));
    if r.chance(30) {
        front.push(format!("reentry: {}", r.pick(&["always", "semantic"])));
    }
    if r.chance(30) {
        front.push(format!("priority: {}", r.below(40) as i64 - 20).replace("priority: 0", "priority: 3"));
    }
    if r.chance(30) {
        front.push(format!("export: {} -> dest-{}", r.pick(&["complete", "handoff,complete"]), r.below(9)));
    }
    match r.below(4) {
        0 => front.push("end: fin".into()),
        1 => front.push("end: done (\"All set.\")".into()),
        _ => {}
    }
    if handoff && r.chance(50) {
        front.push(
            r.pick(&["handoff: desk", "handoff: desk (\"The desk calls.\")", "handoff: handoff (\"Hold on.\")"])
                .to_string(),
        );
    }
    if !declared.is_empty() {
        let decls: Vec<String> = declared.iter().map(|(k, t)| format!("{k}:{t}")).collect();
        front.push(format!("vars: {}", decls.join(", ")));
    }
    front.push("---".into());
    format!("{}\n{}\n", front.join("\n"), body.join("\n"))
}

const SOUP: [&str; 44] = [
    "ask",
    "the order",
    " ",
    "  ",
    ".",
    ",",
    "@v1",
    "@v2.",
    "@x[",
    "#lookup",
    "#s[in a=@v1; out b=@c]",
    "#s[mode untyped]",
    "#s[]",
    "#s[in a=",
    "[if v1 = 2]",
    "[if v2 in a, b]",
    "[if d older than 2 years]",
    "[if v1]",
    "[outcome failed]",
    "[filled @v1, v2]",
    "[action x.y]",
    "[action \"a \\\" b\"]",
    "[decision k: a=\"A\", b=\"B\" (\"d\")]",
    "[approval k: a=\"A\" -> end, b=\"B\" -> step:x]",
    "-> end",
    "-> end:named (\"m\")",
    "-> handoff",
    "-> step:x",
    "-> step:x (max 2)",
    "->end",
    "-> handoffs",
    "[FAQ]",
    "\"",
    "[",
    "]",
    "(",
    "):",
    "# ",
    "\t",
    "İ",
    "e\u{301}",
    "👩\u{200d}💻",
    "\u{a0}",
    "名前",
];
const FRONT: [&str; 14] = [
    "name: Soup",
    "trigger: whenever",
    "reentry: always",
    "reentry: nope",
    "priority: 2",
    "priority: x",
    "export: complete -> d",
    "export: x",
    "end: fin (\"bye\")",
    "end: (",
    "handoff: desk",
    "vars: v1:number, v2:text:optional",
    "vars: bad",
    "grammar: 1",
];

/// Frontmatter and lines of tokens, broken tokens and odd characters.
pub fn soup_doc(r: &mut Rng) -> String {
    let mut out = String::new();
    if r.chance(80) {
        out.push_str("---\n");
        for _ in 0..r.below(5) {
            let l = r.pick(&FRONT);
            if r.chance(3) {
                continue;
            }
            out.push_str(l);
            out.push('\n');
        }
        if r.chance(95) {
            out.push_str("---\n");
        }
    }
    for _ in 0..r.below(12) {
        if r.chance(20) {
            out.push_str("# ");
        }
        for _ in 0..r.below(7) {
            let token = SOUP[r.below(SOUP.len())];
            out.push_str(token);
            if r.chance(60) {
                out.push(' ');
            }
        }
        out.push_str(if r.chance(10) { "\r\n" } else { "\n" });
    }
    out
}

/// One of the examples with a few random edits (insert a token, delete a span, repeat or drop a
/// line), all on char boundaries.
pub fn mutated_example(r: &mut Rng) -> String {
    let (input, canonical) = *r.pick(&EXAMPLES);
    let mut text = (if r.chance(50) { input } else { canonical }).to_string();
    for _ in 0..1 + r.below(4) {
        let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
        let a = bounds[r.below(bounds.len())];
        let b = bounds[r.below(bounds.len())];
        let (a, b) = (a.min(b), a.max(b));
        match r.below(4) {
            0 => {
                let token = SOUP[r.below(SOUP.len())];
                text.insert_str(a, token);
            }
            1 => {
                let end = bounds.iter().copied().filter(|&x| x >= a && x <= b && x <= a + 12).max().unwrap_or(a);
                text.replace_range(a..end, "");
            }
            2 => {
                let lines: Vec<String> = text.lines().map(str::to_string).collect();
                if !lines.is_empty() {
                    let l = &lines[r.below(lines.len())];
                    text.insert_str(a, &format!("{l}\n"));
                }
            }
            _ => {
                let mut lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    lines.remove(r.below(lines.len()));
                }
                text = lines.join("\n");
            }
        }
    }
    text
}

/// What happened to one input.
#[derive(Default)]
pub struct Outcome {
    parsed: bool,
    projected: bool,
}

/// Everything on one input; `Err` names a broken property. Panics propagate (the caller catches them).
pub fn check_all(text: &str) -> Result<Outcome, String> {
    let structure = ValidationContext::default();
    let bare_agent = ValidationContext {
        skills: Some(Vec::new()),
        context_variables: Some(Vec::new()),
        destinations: Some(Vec::new()),
    };
    if let Ok(doc) = parse(text) {
        let canonical = serialize(&doc);
        match parse(&canonical) {
            Ok(again) if serialize(&again) == canonical => {
                if parse(&serialize(&again)).as_ref() != Ok(&again) {
                    return Err("parse -> serialize -> parse is not the identity on a canonical document".into());
                }
            }
            Ok(_) => return Err("canonicalize is not idempotent".into()),
            Err(d) => return Err(format!("canonical text does not parse: {d:?}")),
        }
        let def = compile(&doc);
        let _ = validate(&def, &structure);
        let _ = validate(&def, &bare_agent);
        if let Ok(projected) = project(&def) {
            let reread = parse(&projected).map_err(|d| format!("projection does not parse: {d:?}"))?;
            if project(&compile(&reread)).as_ref() != Ok(&projected) {
                return Err("projection is not a fixpoint".into());
            }
            return Ok(Outcome { parsed: true, projected: true });
        }
        return Ok(Outcome { parsed: true, projected: false });
    } else if canonicalize(text).is_ok() {
        return Err("canonicalize accepted what parse refused".into());
    }
    Ok(Outcome::default())
}

fn no_failure(text: &str) -> Result<(), TestCaseError> {
    check_all(text).map(drop).map_err(|e| TestCaseError::fail(format!("{e}\n--- input ---\n{text:?}")))
}

// 256 cases each by default; `PROPTEST_CASES` sets more.
proptest! {
    #[test]
    fn canonical_documents_round_trip_through_the_definition(seed in any::<u64>()) {
        let text = normal_doc(&mut Rng::new(seed));
        let canonical = canonicalize(&text);
        prop_assert_eq!(canonical.as_ref(), Ok(&text), "not canonical");
        let def = compile(&parse(&text).unwrap_or_default());
        prop_assert_eq!(project(&def).map_err(|e| e.to_string()), Ok(text));
    }

    #[test]
    fn grammar_soup_keeps_every_property(seed in any::<u64>()) {
        let mut r = Rng::new(seed);
        let text = if r.chance(50) { soup_doc(&mut r) } else { mutated_example(&mut r) };
        no_failure(&text)?;
    }

    #[test]
    fn hostile_text_never_panics_and_keeps_every_property(a in hostile_text(40), b in any::<String>(), seed in any::<u64>()) {
        no_failure(&a)?;
        no_failure(&b)?;
        // Hostile text inside an otherwise well-formed document.
        let mut r = Rng::new(seed);
        let mut text = normal_doc(&mut r);
        let at = text.char_indices().map(|(i, _)| i).nth(r.below(text.chars().count())).unwrap_or(0);
        text.insert_str(at, &a);
        no_failure(&text)?;
    }
}

/// Inputs built to make a naive scanner quadratic parse in linear time (a 1 MB body is allowed;
/// these are a quarter of that): each must finish far inside the bound even in a debug build.
#[test]
fn adversarial_lines_parse_in_linear_time() {
    let n = 1 << 16;
    for text in [
        "[".repeat(4 * n),
        format!("{}]", "a[".repeat(2 * n)),
        format!("{}]", "a[if ".repeat(n)),
        "#a[".repeat(n + n / 3),
        format!("{}]", "[\"".repeat(2 * n)),
        "-> step:".repeat(n / 2),
        "@a.".repeat(n + n / 3),
        "[x] ".repeat(n),
        format!("---\nvars: {}\n---\n", "a:text, ".repeat(n / 2)),
    ] {
        let started = Instant::now();
        let result = canonicalize(&text);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "{took:?} for {:?}…", text.chars().take(20).collect::<String>());
        if let Err(d) = result {
            assert!(d.len() <= super::super::MAX_DIAGNOSTICS);
        }
    }
}

/// A long routine (20 000 steps and slots, branches and tool steps) compiles, validates and
/// projects in bounded time: nothing is looked up by a scan per step.
#[test]
fn a_long_routine_compiles_validates_and_projects_in_bounded_time() {
    let mut body = String::from("---\nname: Long\ntrigger: t\n---\n");
    for i in 0..20_000 {
        body.push_str(&format!("Ask for @v{i}.\n"));
        if i % 10 == 9 {
            body.push_str(&format!(
                "#s[in to=@v{i}; out result=@r{i}]\n[if v{i} = x] -> end:e{i} (\"bye\")\n-> step:step_1 (max 2)\n"
            ));
        }
    }
    let started = Instant::now();
    let def = compile(&parse(&body).unwrap_or_default());
    assert!(def.steps.len() > 20_000);
    let ctx = ValidationContext {
        skills: Some(vec![crate::routines::validate::SkillInfo {
            name: "s".into(),
            inputs: vec![crate::routines::validate::SkillInput {
                name: "to".into(),
                input_type: crate::routines::validate::InputType::Text,
                required: true,
            }],
            outputs: None,
            open_inputs: false,
        }]),
        ..ValidationContext::default()
    };
    let _ = validate(&def, &ctx);
    let canonical = canonicalize(&body).unwrap_or_default();
    assert!(project(&def).ok() == Some(canonical), "the projection is the canonical text");
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
}

/// Runs random documents through parse, canonicalize, compile, validate and project for
/// `ROUTINE_FUZZ_SECS` seconds (5 by default), catching panics; zero panics and zero broken
/// properties pass.
#[test]
fn fuzz() {
    let secs = std::env::var("ROUTINE_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(5u64);
    let seed = std::env::var("ROUTINE_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5EED);
    let mut r = Rng::new(seed);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let (mut inputs, mut panics, mut broken, mut bytes) = (0u64, 0u64, Vec::new(), 0usize);
    let (mut parsed, mut projected) = (0u64, 0u64);
    while Instant::now() < deadline {
        for _ in 0..64 {
            let text = match r.below(3) {
                0 => soup_doc(&mut r),
                1 => mutated_example(&mut r),
                _ => normal_doc(&mut r),
            };
            inputs += 1;
            bytes += text.len();
            match catch_unwind(AssertUnwindSafe(|| check_all(&text))) {
                Ok(Ok(o)) => {
                    parsed += u64::from(o.parsed);
                    projected += u64::from(o.projected);
                }
                Ok(Err(e)) => broken.push(format!("{e}: {text:?}")),
                Err(_) => {
                    panics += 1;
                    broken.push(format!("panic: {text:?}"));
                }
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "routine fuzz: {inputs} inputs ({:.0}/s, {:.1} MB) in {elapsed:.1} s: {parsed} parsed, {projected} of those \
         projected back, {panics} panics, {} broken properties",
        inputs as f64 / elapsed,
        bytes as f64 / 1e6,
        broken.len()
    );
    assert!(broken.is_empty(), "{}", broken.iter().take(5).cloned().collect::<Vec<_>>().join("\n"));
}

/// Parse + canonicalize of a generated 200-line routine: the median over 200 runs.
#[test]
#[ignore = "timing; run with --release --ignored"]
fn routine_markdown_timing() {
    let mut r = Rng::new(7);
    let mut text = normal_doc(&mut r);
    while text.lines().count() < 200 {
        let more = normal_doc(&mut r);
        let body = more.split_once("\n---\n").map_or("", |(_, b)| b);
        text.push_str(body);
    }
    let text: String = text.lines().take(200).map(|l| format!("{l}\n")).collect();
    assert!(parse(&text).is_ok(), "the timing document parses");
    let median = |f: &dyn Fn()| {
        let mut us: Vec<f64> = (0..200)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        us.sort_by(f64::total_cmp);
        us[us.len() / 2]
    };
    let parse_us = median(&|| {
        let _ = std::hint::black_box(parse(std::hint::black_box(&text)));
    });
    let canonical_us = median(&|| {
        let _ = std::hint::black_box(canonicalize(std::hint::black_box(&text)));
    });
    println!(
        "routine markdown, 200 lines ({} bytes): parse {parse_us:.1} µs, canonicalize (parse + print) {canonical_us:.1} µs (median of 200)",
        text.len()
    );
}
