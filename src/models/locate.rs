//! Finding the model files. The install puts them in a models directory outside any one data
//! directory; the binary looks, in order, in:
//!
//! 1. `--models-dir` / `STEWARD_MODELS_DIR` / `models_dir` in the config file (only there, when set);
//! 2. `models/` next to the executable (a bundled tarball);
//! 3. `<prefix>/share/steward/models` for `<prefix>/bin/steward` (an unpacked release, an
//!    `install.sh` install, the container image);
//! 4. `$XDG_DATA_HOME/steward/models` (default `~/.local/share/steward/models`, where
//!    `scripts/fetch-models.sh` puts them);
//! 5. `/usr/local/share/steward/models` and `/usr/share/steward/models`.
//!
//! The ONNX Runtime library may also be named directly with `ORT_DYLIB_PATH`.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::Config;

/// The files of the sentence-embedding model and its runtime.
#[derive(Debug, Clone)]
pub struct EmbeddingFiles {
    pub dir: PathBuf,
    pub onnx: PathBuf,
    pub tokenizer: PathBuf,
    pub ort_library: PathBuf,
}

/// One file the install is expected to provide, with the hash of the pinned release.
pub struct Expected {
    pub relative: &'static str,
    pub sha256: &'static str,
    pub required: bool,
    pub what: &'static str,
}

pub const EXPECTED: &[Expected] = &[
    Expected {
        relative: "minilm/model.onnx",
        sha256: "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
        required: true,
        what: "sentence-embedding model (all-MiniLM-L6-v2, int8 ONNX)",
    },
    Expected {
        relative: "minilm/tokenizer.json",
        sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        required: true,
        what: "embedding tokenizer",
    },
    Expected {
        relative: "onnxruntime/libonnxruntime.so.1.31.1",
        sha256: "fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3",
        required: true,
        what: "ONNX Runtime library",
    },
    Expected {
        relative: "e5-small/model.onnx",
        sha256: "9385e7b508079acbd775bcf1b89aa4d7f0eebbf332bed2779a928fdfb837e60e",
        required: false,
        what: "multilingual sentence-embedding model (multilingual-e5-small, 4-bit ONNX, optional)",
    },
    Expected {
        relative: "e5-small/tokenizer.json",
        sha256: "d1e32189ebbca5113a426ae664ea37bc8f76a960ca837a8d01dc08f6b9025d78",
        required: false,
        what: "multilingual embedding tokenizer (optional)",
    },
    Expected {
        relative: "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        required: false,
        what: "local chat model (SmolLM2-135M-Instruct GGUF, optional)",
    },
];

pub const FETCH_HINT: &str = "run scripts/fetch-models.sh (or install.sh) to fetch them, or point --models-dir / STEWARD_MODELS_DIR at a directory holding minilm/ (and e5-small/ for the multilingual model) and onnxruntime/";

/// The directories searched, in order.
pub fn candidate_dirs(config: &Config) -> Vec<PathBuf> {
    if let Some(d) = &config.models_dir {
        return vec![d.clone()];
    }
    let mut dirs = Vec::new();
    if let Ok(exe) = std::env::current_exe()
        && let Some(bin_dir) = exe.parent()
    {
        dirs.push(bin_dir.join("models"));
        // `<prefix>/bin/steward` finds `<prefix>/share/steward/models` (an unpacked release, an
        // install.sh install, the container image)
        if let Some(prefix) = bin_dir.parent() {
            dirs.push(prefix.join("share/steward/models"));
        }
    }
    if let Some(p) = directories::ProjectDirs::from("", "", "steward") {
        dirs.push(p.data_dir().join("models"));
    }
    dirs.push(PathBuf::from("/usr/local/share/steward/models"));
    dirs.push(PathBuf::from("/usr/share/steward/models"));
    dirs
}

/// The first candidate directory that holds the embedding model.
pub fn models_dir(config: &Config) -> Option<PathBuf> {
    candidate_dirs(config).into_iter().find(|d| d.join("minilm/model.onnx").is_file())
}

#[derive(Debug, Clone)]
pub struct Missing {
    pub searched: Vec<PathBuf>,
    pub missing: Vec<String>,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the embedding model files are missing: {}", self.missing.join(", "))?;
        let dirs: Vec<String> = self.searched.iter().map(|d| d.display().to_string()).collect();
        write!(f, " (looked in {}); {FETCH_HINT}", dirs.join(", "))
    }
}

fn ort_library(dir: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::env::var("ORT_DYLIB_PATH") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Some(p);
        }
    }
    let ort_dir = dir.join("onnxruntime");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&ort_dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libonnxruntime.so")))
        .collect();
    found.sort();
    found.pop()
}

/// Locates the default (English) embedding model, its tokenizer and ONNX Runtime.
pub fn embedding(config: &Config) -> Result<EmbeddingFiles, Missing> {
    embedding_for(config, &super::embed::MINILM)
}

/// Locates an embedding model's files and ONNX Runtime: the first candidate directory holding one
/// of its model files; in it the first of `spec.onnx` that exists (MiniLM: the compact build made at
/// install by scripts/build-embedding-model.py, then an older quantized build, then the published
/// file).
pub fn embedding_for(config: &Config, spec: &super::embed::ModelSpec) -> Result<EmbeddingFiles, Missing> {
    let searched = candidate_dirs(config);
    let model_file = |d: &Path| spec.onnx.iter().map(|f| d.join(spec.dir).join(f)).find(|p| p.is_file());
    let dir = searched.iter().find(|d| model_file(d).is_some()).cloned();
    let mut missing = Vec::new();
    let Some(dir) = dir else {
        return Err(Missing {
            searched,
            missing: vec![
                format!("{}/{}", spec.dir, spec.onnx.last().copied().unwrap_or("model.onnx")),
                format!("{}/tokenizer.json", spec.dir),
                "onnxruntime/libonnxruntime.so.*".into(),
            ],
        });
    };
    let Some(onnx) = model_file(&dir) else {
        return Err(Missing { searched, missing: vec![format!("{}/model.onnx", spec.dir)] });
    };
    let tokenizer = dir.join(spec.dir).join("tokenizer.json");
    if !tokenizer.is_file() {
        missing.push(tokenizer.display().to_string());
    }
    let ort = ort_library(&dir);
    if ort.is_none() {
        missing.push(dir.join("onnxruntime/libonnxruntime.so.*").display().to_string());
    }
    match (missing.is_empty(), ort) {
        (true, Some(ort_library)) => Ok(EmbeddingFiles { dir, onnx, tokenizer, ort_library }),
        _ => Err(Missing { searched, missing }),
    }
}

/// The GGUF chat model: the configured path, else the SmolLM2 file in the models directory.
pub fn gguf(config: &Config) -> Option<PathBuf> {
    if let Some(p) = &config.llm.local_model_path {
        return Some(p.clone());
    }
    models_dir(config).map(|d| d.join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")).filter(|p| p.is_file())
}

/// SHA-256 of a file, hex.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// One model file of the install, as `steward models list` reports it.
#[derive(Debug, Clone)]
pub struct Installed {
    pub relative: &'static str,
    pub what: &'static str,
    pub required: bool,
    /// Where it is (none: not installed).
    pub path: Option<PathBuf>,
    pub bytes: Option<u64>,
    /// Whether its SHA-256 is the pinned release's (none when missing).
    pub verified: Option<bool>,
}

/// Every expected model file: found in the first candidate directory that holds it, checked by
/// hash. Builds made at install (the compact MiniLM) are listed as found when present.
pub fn inventory(config: &Config) -> Vec<Installed> {
    let dirs = candidate_dirs(config);
    let mut out: Vec<Installed> = EXPECTED
        .iter()
        .map(|e| {
            let path = dirs.iter().map(|d| d.join(e.relative)).find(|p| p.is_file());
            let bytes = path.as_ref().and_then(|p| std::fs::metadata(p).ok()).map(|m| m.len());
            let verified = path.as_ref().map(|p| file_sha256(p).is_ok_and(|h| h == e.sha256));
            Installed { relative: e.relative, what: e.what, required: e.required, path, bytes, verified }
        })
        .collect();
    if let Some(p) = dirs.iter().map(|d| d.join("minilm/model.fused.q8.onnx")).find(|p| p.is_file()) {
        out.insert(
            1,
            Installed {
                relative: "minilm/model.fused.q8.onnx",
                what: "sentence-embedding model as Steward runs it (built at install from the one above)",
                required: false,
                bytes: std::fs::metadata(&p).ok().map(|m| m.len()),
                path: Some(p),
                verified: None,
            },
        );
    }
    out
}
