//! Code-aware splitting: tree-sitter grammars for the languages the spec lists, through
//! text-splitter's `CodeSplitter` (splits at syntax boundaries: items, then statements, then
//! lines). Languages without a grammar fall back to plain text splitting.

use tree_sitter::Language;

/// The grammar for a language name (as written in a fence info string or derived from a file
/// extension).
pub fn grammar(lang: &str) -> Option<Language> {
    Some(match lang {
        "bash" | "sh" | "shell" | "console" => tree_sitter_bash::LANGUAGE.into(),
        "zsh" => tree_sitter_zsh::LANGUAGE.into(),
        "fish" => tree_sitter_fish::language(),
        "c" | "h" => tree_sitter_c::LANGUAGE.into(),
        "cpp" | "c++" | "cc" | "cxx" | "hpp" => tree_sitter_cpp::LANGUAGE.into(),
        "csharp" | "c#" | "cs" => tree_sitter_c_sharp::LANGUAGE.into(),
        "css" => tree_sitter_css::LANGUAGE.into(),
        "scss" => tree_sitter_scss::language(),
        "less" => tree_sitter_less::language(),
        "go" | "golang" => tree_sitter_go::LANGUAGE.into(),
        "java" => tree_sitter_java::LANGUAGE.into(),
        "javascript" | "js" | "jsx" | "mjs" => tree_sitter_javascript::LANGUAGE.into(),
        "json" => tree_sitter_json::LANGUAGE.into(),
        "typescript" | "ts" => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        "tsx" => tree_sitter_typescript::LANGUAGE_TSX.into(),
        "kotlin" | "kt" => tree_sitter_kotlin_ng::LANGUAGE.into(),
        "php" => tree_sitter_php::LANGUAGE_PHP.into(),
        "python" | "py" => tree_sitter_python::LANGUAGE.into(),
        "ruby" | "rb" => tree_sitter_ruby::LANGUAGE.into(),
        "rust" | "rs" => tree_sitter_rust::LANGUAGE.into(),
        "scala" => tree_sitter_scala::LANGUAGE.into(),
        "sql" => tree_sitter_sequel::LANGUAGE.into(),
        "swift" => tree_sitter_swift::LANGUAGE.into(),
        "toml" => tree_sitter_toml_ng::LANGUAGE.into(),
        "xml" | "html" | "svg" => tree_sitter_xml::LANGUAGE_XML.into(),
        "yaml" | "yml" => tree_sitter_yaml::LANGUAGE.into(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_language_has_a_working_grammar() {
        // The spec's list: Bash, shell, Fish, Zsh, C, C++, C headers, C#, CSS, SCSS, Less, Go, Java,
        // JavaScript, JSX, JSON, TypeScript, TSX, Kotlin, PHP, Python, Ruby, Rust, Scala, SQL, Swift,
        // TOML, XML, YAML, YML.
        for lang in [
            "bash",
            "shell",
            "fish",
            "zsh",
            "c",
            "cpp",
            "h",
            "csharp",
            "css",
            "scss",
            "less",
            "go",
            "java",
            "javascript",
            "jsx",
            "json",
            "typescript",
            "tsx",
            "kotlin",
            "php",
            "python",
            "ruby",
            "rust",
            "scala",
            "sql",
            "swift",
            "toml",
            "xml",
            "yaml",
            "yml",
        ] {
            let g = grammar(lang).unwrap_or_else(|| panic!("no grammar for {lang}"));
            let mut parser = tree_sitter::Parser::new();
            parser.set_language(&g).unwrap_or_else(|e| panic!("{lang}: {e}"));
        }
        assert!(grammar("cobol").is_none());
    }
}
