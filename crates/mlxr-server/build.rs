//! Compiles the gRPC API's `proto/mlxr/v1/*.proto` (see [`compile_protos`])
//! and embeds the web GUI (`app/ui`) in the binary, building it when needed.
//!
//! - `app/ui/dist` newer than every input of the UI build: embedded as is
//!   (what `scripts/build-ui.sh` produces).
//! - Missing or stale (a fresh clone, edited sources) and `npm` on the PATH:
//!   `npm ci` (when `node_modules` is older than the lockfile) and
//!   `npm run build` into `$OUT_DIR/ui-dist`, which is embedded. `app/ui` is
//!   left as it was, so the next cargo command sees nothing new.
//! - No npm or a failed build: a `cargo:warning` says why; that and
//!   `MLXR_SKIP_UI_BUILD=1` embed no UI, and the daemon serves a page saying
//!   why and how to build it (`ui.rs`); `cargo build` never needs node.
//!
//! Writes `$OUT_DIR/ui_assets.rs`: a sorted `(path, bytes)` table of the
//! embedded files, each included with `include_bytes!`, and the reason
//! when there are none.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;
use std::{env, fs};

/// What the UI build reads (relative to `app/ui`): a change to any of them
/// makes `dist` stale and reruns this script. The UI imports the TypeScript
/// SDK's sources (`mlxr` in vite.config.ts and tsconfig.json).
const INPUTS: &[&str] = &[
    "src",
    "../../sdks/typescript/src",
    "lint",
    "public",
    "index.html",
    "package.json",
    "package-lock.json",
    "vite.config.ts",
    "tsconfig.json",
];

const SKIP_VAR: &str = "MLXR_SKIP_UI_BUILD";

/// Where the embedded files come from, or why there are none.
enum Assets {
    Dir(PathBuf),
    /// No npm, or the build failed: warn.
    NotBuilt(String),
    /// `MLXR_SKIP_UI_BUILD` asked for no build: only the page says why.
    Skipped(String),
}

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    if let Err(e) = compile_protos(&manifest.join("../../proto"), &out) {
        panic!("compiling proto/mlxr/v1: {e}");
    }
    let ui = manifest.join("../../app/ui");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed={SKIP_VAR}");

    let assets = if ui.is_dir() {
        let ui = ui.canonicalize().expect("app/ui");
        for input in INPUTS {
            let path = ui.join(input);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
        ui_assets(&ui, &out)
    } else {
        Assets::NotBuilt("the sources (app/ui) are not next to this crate".into())
    };

    let mut files = Vec::new();
    let reason = match &assets {
        Assets::Dir(dir) => {
            collect(dir, dir, &mut files);
            String::new()
        }
        Assets::NotBuilt(reason) => {
            let mut lines = reason.lines();
            let first = lines.next().unwrap_or_default();
            println!("cargo:warning=web UI not built: {first}");
            for line in lines {
                println!("cargo:warning={line}");
            }
            println!(
                "cargo:warning=mlxr will serve a \"web UI not built\" page. Install Node.js 20.19+ \
                 with npm, then run scripts/build-ui.sh and rebuild ({SKIP_VAR}=1: no UI, no warning)"
            );
            first.to_string()
        }
        Assets::Skipped(reason) => reason.clone(),
    };
    files.sort();
    let mut table = String::from("pub static ASSETS: &[(&str, &[u8])] = &[\n");
    for (rel, abs) in &files {
        table.push_str(&format!("    ({rel:?}, include_bytes!({abs:?})),\n"));
    }
    table.push_str("];\n");
    table.push_str(&format!(
        "pub static NOT_BUILT_REASON: &str = {reason:?};\n"
    ));
    fs::write(out.join("ui_assets.rs"), table).expect("write ui_assets.rs");
}

fn ui_assets(ui: &Path, out: &Path) -> Assets {
    let dist = ui.join("dist");
    let inputs_changed = INPUTS.iter().map(|i| newest(&ui.join(i))).max().flatten();
    let dist_built = modified(&dist.join("index.html"));
    if dist_built.is_some() && dist_built >= inputs_changed {
        // Rebuilding dist (scripts/build-ui.sh) changes what is embedded.
        println!("cargo:rerun-if-changed={}", dist.display());
        return Assets::Dir(dist);
    }
    let why = if dist_built.is_some() {
        "app/ui/dist is older than the UI's sources"
    } else {
        "app/ui/dist does not exist"
    };
    // Notice a dist built later (scripts/build-ui.sh) or npm's arrival.
    let watch_for_a_build = || {
        println!("cargo:rerun-if-changed={}", ui.display());
        println!("cargo:rerun-if-env-changed=PATH");
    };
    if env::var_os(SKIP_VAR).is_some_and(|v| !v.is_empty() && v != "0") {
        watch_for_a_build();
        return Assets::Skipped(format!("{why} and {SKIP_VAR} is set"));
    }
    let not_built = |reason: String| {
        watch_for_a_build();
        Assets::NotBuilt(reason)
    };
    if !runs(Command::new("npm").arg("--version")) {
        return not_built(format!("{why} and npm was not found"));
    }
    let target = out.join("ui-dist");
    match npm_build(ui, &target) {
        Ok(()) => Assets::Dir(target),
        Err(e) => not_built(format!("{why} and building it failed: {e}")),
    }
}

/// `npm ci` when `node_modules` is older than the lockfile, then the same
/// `npm run build` as scripts/build-ui.sh, into `target`.
fn npm_build(ui: &Path, target: &Path) -> Result<(), String> {
    let installed = modified(&ui.join("node_modules/.package-lock.json"));
    if installed.is_none() || installed < modified(&ui.join("package-lock.json")) {
        npm(ui, &["ci", "--no-audit", "--no-fund"])?;
    }
    let target = target.to_str().ok_or("OUT_DIR is not UTF-8")?;
    npm(
        ui,
        &["run", "build", "--", "--outDir", target, "--emptyOutDir"],
    )
}

fn npm(ui: &Path, args: &[&str]) -> Result<(), String> {
    let output = Command::new("npm")
        .args(args)
        .current_dir(ui)
        // Cargo sets DEBUG=true/false for build scripts; node's `debug`
        // package reads DEBUG as a list of namespaces to trace.
        .env_remove("DEBUG")
        .output()
        .map_err(|e| format!("npm {}: {e}", args[0]))?;
    if output.status.success() {
        return Ok(());
    }
    let log = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    let tail: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = tail[tail.len().saturating_sub(15)..].join("\n");
    Err(format!(
        "`npm {}` in app/ui: {}\n{tail}",
        args.join(" "),
        output.status
    ))
}

fn runs(command: &mut Command) -> bool {
    command.output().is_ok_and(|o| o.status.success())
}

fn modified(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The newest modification time of `path` and everything under it.
fn newest(path: &Path) -> Option<SystemTime> {
    let under = fs::read_dir(path).into_iter().flatten().flatten();
    under
        .map(|e| newest(&e.path()))
        .fold(modified(path), Option::max)
}

/// Every file under `dir` as (`/`-separated path relative to `root`, absolute path).
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect(root, &path, files);
            continue;
        }
        let rel = path.strip_prefix(root).expect("under root");
        let rel: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let abs = path
            .canonicalize()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        files.push((rel.join("/"), abs.to_string_lossy().into_owned()));
    }
}

/// protox (pure Rust: no `protoc` binary needed) parses the protos; tonic
/// generates the server code from them; the descriptor set is kept for
/// server reflection (`mlxr_descriptor.bin`).
fn compile_protos(root: &Path, out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={}", root.display());
    let fds = protox::compile(["mlxr/v1/inference.proto"], [root])?;
    fs::write(
        out.join("mlxr_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_transport(false)
        .compile_fds(fds)?;
    Ok(())
}
