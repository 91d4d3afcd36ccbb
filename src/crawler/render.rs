//! Renders the chosen content element as structured text for the chunker:
//! Markdown headings, blank-line separated paragraphs, `- ` list items, pipe
//! tables and fenced `<pre>` blocks, while measuring link density on the way.

use scraper::ElementRef;

use super::dom::{self, Facts, Visitor};

/// The rendered text plus the measures the page classifier needs.
#[derive(Debug, Default)]
pub(crate) struct Rendered {
    pub text: String,
    /// Non-whitespace characters of all content text.
    pub total_chars: usize,
    /// Non-whitespace characters of content text inside `<a href>`.
    pub link_chars: usize,
    /// `<a href>` elements inside the content.
    pub links: usize,
    pub headings: usize,
    pub paragraphs: usize,
    pub lists: usize,
    pub tables: usize,
}

/// Renders `container` (never dropped itself) leaving boilerplate out.
/// `in_article` says an `<article>`/`<main>` encloses the container.
pub(crate) fn render(container: ElementRef<'_>, facts: &Facts, preserve_links: bool, in_article: bool) -> Rendered {
    let mut r = Renderer { preserve_links, article_depth: usize::from(in_article), ..Renderer::new(container, facts) };
    dom::walk(container, &mut r);
    r.flush();
    let trimmed = r.out.text.trim_end().len();
    r.out.text.truncate(trimmed);
    r.out
}

#[derive(Clone, Copy, PartialEq)]
enum BlockKind {
    Para,
    Item,
    Other,
}

/// What an opened element started, so its close undoes exactly that.
enum Action<'a> {
    Nothing,
    /// Block-level element in an inline-only context: just a word break.
    Sep,
    Br,
    Block,
    /// `<article>`/`<main>`: a block that also scopes article headers.
    Article(bool),
    Heading(usize),
    List,
    Item,
    Pre,
    Table,
    Row,
    Cell(bool),
    Quote,
    /// Link with its href, the buffer offset where its text starts and the
    /// buffer generation at that moment (when `preserve_links`).
    Link(Option<(&'a str, usize, usize)>),
}

#[derive(Default)]
struct Table {
    rows: Vec<Vec<(String, bool)>>,
    caption: String,
}

struct Renderer<'a, 'f> {
    container: ElementRef<'a>,
    facts: &'f Facts,
    preserve_links: bool,
    out: Rendered,
    last: BlockKind,
    /// Inline text of the block being built (paragraph, item, cell, ...).
    inline: String,
    pending_space: bool,
    /// Bumped whenever `inline` is taken, so link offsets can be validated.
    generation: usize,
    actions: Vec<Action<'a>>,
    article_depth: usize,
    quote_depth: usize,
    list_depth: usize,
    /// One entry per open `<li>`: true until its first line is emitted.
    items: Vec<bool>,
    heading: Option<usize>,
    pre_depth: usize,
    table: Option<Table>,
    cell_open: bool,
    link_depth: usize,
}

/// The rendered text stops growing past this many bytes (a page's main content is far smaller;
/// a hostile page of nested lists or wide tables would otherwise grow quadratically).
const MAX_TEXT_BYTES: usize = 2 * 1024 * 1024;
/// Nesting shown as indentation or `>` prefixes, and table columns kept.
const MAX_SHOWN_DEPTH: usize = 8;
const MAX_COLUMNS: usize = 50;

const BLOCK_TAGS: &[&str] = &[
    "p",
    "div",
    "section",
    "header",
    "footer",
    "nav",
    "aside",
    "address",
    "dl",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "details",
    "summary",
    "fieldset",
    "legend",
    "hgroup",
    "center",
    "body",
    "html",
    "hr",
    "dialog",
    "form",
    "search",
];

impl<'a, 'f> Renderer<'a, 'f> {
    fn new(container: ElementRef<'a>, facts: &'f Facts) -> Self {
        Renderer {
            container,
            facts,
            preserve_links: false,
            out: Rendered::default(),
            last: BlockKind::Other,
            inline: String::new(),
            pending_space: false,
            generation: 0,
            actions: Vec::new(),
            article_depth: 0,
            quote_depth: 0,
            list_depth: 0,
            items: Vec::new(),
            heading: None,
            pre_depth: 0,
            table: None,
            cell_open: false,
            link_depth: 0,
        }
    }

    /// Inside a data table or a heading, nested blocks can only add text.
    fn inline_only(&self) -> bool {
        self.table.is_some() || self.heading.is_some()
    }

    fn classify(&self, el: ElementRef<'a>, tag: &str) -> Action<'a> {
        if self.pre_depth > 0 {
            return if tag == "br" { Action::Br } else { Action::Nothing };
        }
        let inline_only = self.inline_only();
        let in_item = !self.items.is_empty();
        match tag {
            "br" => Action::Br,
            "a" => match el.value().attr("href") {
                Some(href) if self.preserve_links => Action::Link(Some((href, self.inline.len(), self.generation))),
                Some(_) => Action::Link(None),
                None => Action::Nothing,
            },
            "pre" if inline_only => Action::Sep,
            "pre" => Action::Pre,
            "table" if inline_only => Action::Sep,
            "table" if self.facts.is_layout_table(&el) => Action::Block,
            "table" => Action::Table,
            "tr" | "td" | "th" if self.table.is_none() => Action::Block,
            "tr" | "td" | "th" if self.cell_open => Action::Sep,
            "tr" => Action::Row,
            "td" | "th" => Action::Cell(tag == "th"),
            "caption" => Action::Sep,
            "ul" | "ol" | "menu" if inline_only => Action::Sep,
            "ul" | "ol" | "menu" => Action::List,
            "li" if inline_only => Action::Sep,
            "li" => Action::Item,
            "article" | "main" => Action::Article(!(inline_only || in_item)),
            _ if inline_only || in_item => {
                if dom::is_heading(tag) || tag == "blockquote" || BLOCK_TAGS.contains(&tag) {
                    Action::Sep
                } else {
                    Action::Nothing
                }
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => Action::Heading(tag[1..].parse().unwrap_or(1)),
            "blockquote" => Action::Quote,
            _ if BLOCK_TAGS.contains(&tag) => Action::Block,
            _ => Action::Nothing,
        }
    }

    fn begin(&mut self, action: &Action<'a>) {
        match action {
            Action::Nothing => {}
            Action::Sep => self.pending_space = true,
            Action::Br => {
                if self.pre_depth > 0 {
                    self.inline.push('\n');
                } else if self.inline_only() || !self.items.is_empty() {
                    self.pending_space = true;
                } else {
                    self.inline.push('\n');
                    self.pending_space = false;
                }
            }
            Action::Block => self.flush(),
            Action::Article(block) => {
                if *block {
                    self.flush();
                }
                self.article_depth += 1;
            }
            Action::Heading(level) => {
                self.flush();
                self.heading = Some(*level);
            }
            Action::List => {
                self.flush();
                self.list_depth += 1;
                self.out.lists += 1;
            }
            Action::Item => {
                self.flush();
                self.items.push(true);
            }
            Action::Pre => {
                self.flush();
                self.pre_depth += 1;
            }
            Action::Table => {
                self.flush();
                self.table = Some(Table::default());
            }
            Action::Row => {
                self.stray_table_text();
                if let Some(t) = self.table.as_mut() {
                    t.rows.push(Vec::new());
                }
            }
            Action::Cell(_) => {
                self.stray_table_text();
                self.cell_open = true;
                if let Some(t) = self.table.as_mut()
                    && t.rows.is_empty()
                {
                    t.rows.push(Vec::new());
                }
            }
            Action::Quote => {
                self.flush();
                self.quote_depth += 1;
            }
            Action::Link(_) => {
                self.link_depth += 1;
                self.out.links += 1;
            }
        }
    }

    fn end(&mut self, action: Action<'a>) {
        match action {
            Action::Nothing | Action::Br => {}
            Action::Sep => self.pending_space = true,
            Action::Block => self.flush(),
            Action::Article(block) => {
                if block {
                    self.flush();
                }
                self.article_depth = self.article_depth.saturating_sub(1);
            }
            Action::Heading(level) => {
                self.heading = None;
                let text = self.take_inline();
                let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
                if !text.is_empty() {
                    self.out.headings += 1;
                    self.emit(&format!("{} {text}", "#".repeat(level.clamp(1, 6))), BlockKind::Other);
                }
            }
            Action::List => {
                self.flush();
                self.list_depth = self.list_depth.saturating_sub(1);
            }
            Action::Item => {
                self.flush();
                self.items.pop();
            }
            Action::Pre => {
                self.pre_depth = self.pre_depth.saturating_sub(1);
                let code = self.take_inline();
                self.emit_code(&code);
            }
            Action::Table => self.end_table(),
            Action::Row => self.stray_table_text(),
            Action::Cell(header) => {
                self.cell_open = false;
                let text = self.take_inline();
                let cell = text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|");
                if let Some(row) = self.table.as_mut().and_then(|t| t.rows.last_mut()) {
                    row.push((cell, header));
                }
            }
            Action::Quote => {
                self.flush();
                self.quote_depth = self.quote_depth.saturating_sub(1);
            }
            Action::Link(frame) => {
                self.link_depth = self.link_depth.saturating_sub(1);
                if let Some((href, start, generation)) = frame {
                    self.annotate_link(href, start, generation);
                }
            }
        }
    }

    /// Appends ` (href)` after a link's text. If a block boundary split the
    /// link, the annotation goes after whatever part is still buffered.
    fn annotate_link(&mut self, href: &str, start: usize, generation: usize) {
        let segment =
            if generation == self.generation { self.inline.get(start..).unwrap_or("") } else { self.inline.as_str() };
        let segment = segment.trim();
        let href = href.split_whitespace().collect::<Vec<_>>().join("%20");
        let lower = href.to_ascii_lowercase();
        if segment.is_empty() || href.is_empty() || href.starts_with('#') || lower.starts_with("javascript:") {
            return;
        }
        if segment == href {
            return;
        }
        self.inline.push_str(" (");
        self.inline.push_str(&href);
        self.inline.push(')');
    }

    fn take_inline(&mut self) -> String {
        self.generation += 1;
        self.pending_space = false;
        std::mem::take(&mut self.inline)
    }

    /// Emits the buffered inline text as a paragraph, or as a list line
    /// when inside a list item.
    fn flush(&mut self) {
        let text = self.take_inline();
        let lines: Vec<&str> = text.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect();
        if lines.is_empty() {
            return;
        }
        let list_depth = self.list_depth;
        if let Some(first) = self.items.last_mut() {
            let indent = "  ".repeat(list_depth.saturating_sub(1).min(MAX_SHOWN_DEPTH));
            let marker = if *first { "- " } else { "  " };
            *first = false;
            self.emit(&format!("{indent}{marker}{}", lines.join(" ")), BlockKind::Item);
        } else {
            self.out.paragraphs += 1;
            self.emit(&lines.join("\n"), BlockKind::Para);
        }
    }

    fn emit(&mut self, block: &str, kind: BlockKind) {
        let out = &mut self.out.text;
        // past the cap the text ends (the last block cut at a character boundary)
        let room = MAX_TEXT_BYTES.saturating_sub(out.len() + 2);
        if room == 0 {
            return;
        }
        let block = if block.len() > room { dom::truncate_at_char(block, room) } else { block };
        if !out.is_empty() {
            out.push_str(if kind == BlockKind::Item && self.last == BlockKind::Item { "\n" } else { "\n\n" });
        }
        if self.quote_depth == 0 {
            out.push_str(block);
        } else {
            let prefix = "> ".repeat(self.quote_depth.min(MAX_SHOWN_DEPTH));
            for (i, line) in block.split('\n').enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                if line.is_empty() {
                    out.push_str(prefix.trim_end());
                } else {
                    out.push_str(&prefix);
                    out.push_str(line);
                }
            }
        }
        self.last = kind;
    }

    /// `<pre>` content verbatim in a fence longer than any backtick run in it.
    fn emit_code(&mut self, code: &str) {
        let code = code.trim_start_matches(['\n', '\r']).trim_end();
        if code.is_empty() {
            return;
        }
        let mut longest = 0;
        let mut run = 0;
        for c in code.chars() {
            run = if c == '`' { run + 1 } else { 0 };
            longest = longest.max(run);
        }
        let fence = "`".repeat((longest + 1).max(3));
        self.emit(&format!("{fence}\n{code}\n{fence}"), BlockKind::Other);
    }

    /// Text inside a table but outside any cell (captions, stray text) is
    /// kept and shown as a paragraph before the table.
    fn stray_table_text(&mut self) {
        if self.cell_open {
            return;
        }
        let text = self.take_inline();
        if let Some(t) = self.table.as_mut()
            && !text.trim().is_empty()
        {
            if !t.caption.is_empty() {
                t.caption.push(' ');
            }
            dom::push_collapsed(&mut t.caption, text.trim());
        }
    }

    fn end_table(&mut self) {
        self.stray_table_text();
        self.cell_open = false;
        let Some(table) = self.table.take() else { return };
        if !table.caption.is_empty() {
            self.out.paragraphs += 1;
            self.emit(&table.caption, BlockKind::Para);
        }
        let mut rows: Vec<Vec<(String, bool)>> =
            table.rows.into_iter().filter(|r| r.iter().any(|(c, _)| !c.is_empty())).collect();
        let cols = rows.iter().map(Vec::len).max().unwrap_or(0).min(MAX_COLUMNS);
        if cols == 0 {
            return;
        }
        if cols == 1 {
            // A one-column "table" is a layout device: its cells are paragraphs.
            for row in rows {
                for (cell, _) in row {
                    self.out.paragraphs += 1;
                    self.emit(&cell, BlockKind::Para);
                }
            }
            return;
        }
        let header_at = rows.iter().position(|r| r.iter().all(|(_, th)| *th)).unwrap_or(0);
        let header = rows.remove(header_at);
        let line = |cells: &[(String, bool)]| {
            let mut s = String::from("|");
            for i in 0..cols {
                let cell = cells.get(i).map_or("", |(c, _)| c.as_str());
                s.push(' ');
                s.push_str(cell);
                s.push_str(" |");
            }
            s
        };
        let mut md = line(&header);
        md.push('\n');
        md.push('|');
        md.push_str(&" --- |".repeat(cols));
        for row in &rows {
            md.push('\n');
            md.push_str(&line(row));
        }
        self.out.tables += 1;
        self.emit(&md, BlockKind::Other);
    }
}

impl<'a> Visitor<'a> for Renderer<'a, '_> {
    fn open(&mut self, el: ElementRef<'a>) -> bool {
        if el != self.container && dom::is_dropped(&el, self.article_depth > 0, self.facts) {
            return false;
        }
        let action = self.classify(el, dom::name(&el));
        self.begin(&action);
        self.actions.push(action);
        true
    }

    fn close(&mut self, _el: ElementRef<'a>) {
        if let Some(action) = self.actions.pop() {
            self.end(action);
        }
    }

    fn text(&mut self, text: &'a str) {
        let chars = dom::non_space_chars(text);
        self.out.total_chars += chars;
        if self.link_depth > 0 {
            self.out.link_chars += chars;
        }
        if self.pre_depth > 0 {
            self.inline.push_str(text);
            return;
        }
        for c in text.chars() {
            if c.is_whitespace() {
                self.pending_space = true;
            } else {
                if self.pending_space && !self.inline.is_empty() && !self.inline.ends_with('\n') {
                    self.inline.push(' ');
                }
                self.pending_space = false;
                self.inline.push(c);
            }
        }
    }
}
