//! Unit tests of the configuration's layering, parsing and validation.

use std::collections::HashMap;
use std::io::Write;

use super::*;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |k| m.get(k).cloned()
}

#[test]
fn precedence_is_defaults_then_file_then_env_then_flags() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "listen = \"127.0.0.1:9000\"\nupload_max_bytes = 1000\nworkers = 3\nlog_level = \"debug\"").unwrap();
    let cli = CliOverrides { config_file: Some(f.path().to_path_buf()), ..Default::default() };

    let c = load_with_env(&cli, env_of(&[])).unwrap();
    assert_eq!(c.listen.port(), 9000); // file beats default
    assert_eq!(c.upload_max_bytes, 1000);
    assert_eq!(c.workers, 3);

    let c = load_with_env(&cli, env_of(&[("DOCUMENT_UPLOAD_MAX_BYTES", "2000")])).unwrap();
    assert_eq!(c.upload_max_bytes, 2000); // env beats file

    let cli2 = CliOverrides { listen: Some("127.0.0.1:9100".parse().unwrap()), workers: Some(5), ..cli.clone() };
    let c = load_with_env(&cli2, env_of(&[])).unwrap();
    assert_eq!(c.listen.port(), 9100); // flag beats file
    assert_eq!(c.workers, 5);
    assert_eq!(c.log_level, "debug");
}

#[test]
fn unknown_file_keys_and_bad_values_are_reported() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    writeln!(f, "listne = \"x\"").unwrap();
    let cli = CliOverrides { config_file: Some(f.path().to_path_buf()), ..Default::default() };
    let err = load_with_env(&cli, env_of(&[])).unwrap_err().to_string();
    assert!(err.contains("listne"), "{err}");

    let err = load_with_env(&CliOverrides::default(), env_of(&[("DOCUMENT_UPLOAD_MAX_BYTES", "lots")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("DOCUMENT_UPLOAD_MAX_BYTES"), "{err}");

    // a sign-in window of 0 would turn the limits off; beyond a week is refused too
    for window in [0u64, 604_801] {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "login_window_secs = {window}").unwrap();
        let cli = CliOverrides { config_file: Some(f.path().to_path_buf()), ..Default::default() };
        let err = load_with_env(&cli, env_of(&[])).unwrap_err().to_string();
        assert!(err.contains("login_window_secs"), "{err}");
    }
}

#[test]
fn bundle_orphan_age_is_read_in_milliseconds() {
    let cli = CliOverrides::default();
    assert_eq!(load_with_env(&cli, env_of(&[])).unwrap().bundle_import_orphan_age, Duration::from_secs(900));
    let c = load_with_env(&cli, env_of(&[("AGENT_BUNDLE_IMPORT_ORPHAN_AGE_MS", "1500")])).unwrap();
    assert_eq!(c.bundle_import_orphan_age, Duration::from_millis(1500));
    for bad in ["0", "soon"] {
        let err = load_with_env(&cli, env_of(&[("AGENT_BUNDLE_IMPORT_ORPHAN_AGE_MS", bad)])).unwrap_err();
        assert!(err.to_string().contains("AGENT_BUNDLE_IMPORT_ORPHAN_AGE_MS"), "{err}");
    }
}

#[test]
fn encryption_key_formats() {
    use base64::Engine as _;
    let hex_key = "00".repeat(32);
    assert_eq!(parse_encryption_key(&hex_key).unwrap(), [0u8; 32]);
    let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    assert_eq!(parse_encryption_key(&b64).unwrap(), [7u8; 32]);
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0xffu8; 32]);
    assert_eq!(parse_encryption_key(&url).unwrap(), [0xffu8; 32]);
    let short = parse_encryption_key("abcd").unwrap_err().to_string();
    assert!(short.contains("32"), "{short}");
    assert!(parse_encryption_key("not a key at all!").is_err());
    // the key never shows in Debug output
    let c = Config { encryption_key: Some(Secret::new([9u8; 32])), ..Config::with_data_dir("/tmp/x") };
    assert!(!format!("{c:?}").contains("9, 9"));
}
