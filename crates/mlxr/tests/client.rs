//! The daemon client commands (`list`, `create`, `show`, `run`, …) against
//! a real `mlxr serve` on the SmolLM2 model.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

fn smollm2() -> Option<PathBuf> {
    mlxr_testkit::model_path(mlxr_testkit::SMOLLM2)
}

/// A running `mlxr serve`, killed when dropped.
struct Server {
    child: Child,
    host: String,
    _home: tempfile::TempDir,
}

impl Server {
    fn start(model: &Path) -> Server {
        Self::start_with(model, &[])
    }

    fn start_with(model: &Path, extra: &[&str]) -> Server {
        let home = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let host = format!("127.0.0.1:{port}");
        let child = Command::new(env!("CARGO_BIN_EXE_mlxr"))
            .arg("serve")
            .arg("-m")
            .arg(model)
            .args(["--name", "smollm2", "--home"])
            .arg(home.path())
            .args(["--host", &host, "--kv-cache-mem", "256MiB"])
            .args(extra)
            .env("RAYON_NUM_THREADS", "2")
            .env("MLXR_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut server = Server {
            child,
            host,
            _home: home,
        };
        server.wait_listening();
        server
    }

    /// Reads the daemon's log until it says it listens on TCP, then leaves a
    /// thread passing the rest of its log on to the test's output.
    fn wait_listening(&mut self) {
        let mut log = BufReader::new(self.child.stderr.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            let n = log.read_line(&mut line).unwrap();
            assert!(n > 0, "mlxr serve exited before listening");
            eprint!("{line}");
            if line.contains("listening on http://") {
                break;
            }
        }
        std::thread::spawn(move || {
            for line in log.lines().map_while(Result::ok) {
                eprintln!("{line}");
            }
        });
    }

    /// The CLI, pointed at this server through MLXR_HOST.
    fn mlxr(&self, args: &[&str]) -> Output {
        self.mlxr_at(&self.host, args)
    }

    fn mlxr_at(&self, host: &str, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_mlxr"))
            .args(args)
            .env("MLXR_HOST", host)
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        ok(self.mlxr(args), args)
    }
}

fn ok(out: Output, args: &[&str]) -> String {
    assert!(
        out.status.success(),
        "mlxr {args:?} failed: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn unreachable_daemon_is_a_one_line_error() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let host = format!("127.0.0.1:{port}");
    for args in [&["list"][..], &["ps"], &["show", "x"], &["run", "x", "hi"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_mlxr"))
            .args(args)
            .env("MLXR_HOST", format!("http://{host}"))
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert_eq!(
            stderr(&out).trim_end(),
            format!(
                "error: could not connect to mlxr serve at {host} (start it with `mlxr serve`)"
            ),
            "{args:?}"
        );
    }
    // --host wins over MLXR_HOST.
    let out = Command::new(env!("CARGO_BIN_EXE_mlxr"))
        .args(["list", "--host", &host])
        .env("MLXR_HOST", "127.0.0.1:1")
        .output()
        .unwrap();
    assert!(stderr(&out).contains(&host), "{}", stderr(&out));
}

#[test]
fn help_of_client_commands_has_examples() {
    for sub in ["pull", "list", "ps", "show", "create", "cp", "rm", "stop"] {
        let out = Command::new(env!("CARGO_BIN_EXE_mlxr"))
            .args([sub, "--help"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Examples:"), "{sub} --help: {text}");
    }
}

#[test]
fn catalogue_commands() {
    let Some(model) = smollm2() else { return };
    let server = Server::start(&model);

    let list = server.ok(&["list"]);
    assert!(list.starts_with("NAME"), "{list}");
    assert!(list.contains("smollm2"), "{list}");

    // create from a Modelfile next to a copy of the file (FROM is relative).
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&model, dir.path().join("model.gguf")).unwrap();
    let modelfile = dir.path().join("Modelfile");
    std::fs::write(
        &modelfile,
        "# a terse assistant\nFROM ./model.gguf\nPARAMETER temperature 0\nparameter num_predict 8\n\
         SYSTEM \"\"\"You are terse.\nAnswer briefly.\"\"\"\nMESSAGE user Hi\nMESSAGE assistant Hello.\n",
    )
    .unwrap();
    let out = server.mlxr(&["create", "terse", "-f", modelfile.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("success"), "{}", stderr(&out));

    let shown = server.ok(&["show", "terse", "--modelfile"]);
    assert!(shown.contains("PARAMETER temperature"), "{shown}");
    assert!(shown.contains("You are terse."), "{shown}");
    let params = server.ok(&["show", "terse", "--parameters"]);
    assert!(params.contains("num_predict"), "{params}");
    assert_eq!(
        server.ok(&["show", "terse", "--system"]).trim(),
        "You are terse.\nAnswer briefly."
    );
    let summary = server.ok(&["show", "terse"]);
    assert!(summary.contains("architecture"), "{summary}");
    assert!(summary.contains("llama"), "{summary}");
    assert!(summary.contains("context length"), "{summary}");

    // The created model answers with its own parameters (num_predict 8).
    let reply = server.ok(&["run", "terse", "Name a colour."]);
    assert!(!reply.trim().is_empty(), "reply: {reply:?}");

    // A bad Modelfile names its line.
    std::fs::write(&modelfile, "FROM ./model.gguf\nFROBNICATE x\n").unwrap();
    let out = server.mlxr(&["create", "bad", "-f", modelfile.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("line 2"), "{}", stderr(&out));

    server.ok(&["cp", "terse", "terse2"]);
    assert!(server.ok(&["ls"]).contains("terse2"));
    server.ok(&["rm", "terse2"]);
    assert!(!server.ok(&["list"]).contains("terse2"));
    let out = server.mlxr(&["rm", "terse2"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: ") && err.contains("not found"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

    // pull of a file path on the daemon's machine.
    let copy = dir.path().join("pulled-copy.gguf");
    std::fs::rename(dir.path().join("model.gguf"), &copy).unwrap();
    let out = server.mlxr(&["pull", copy.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("success"), "{}", stderr(&out));
    assert!(server.ok(&["list"]).contains("pulled-copy"));
}

#[test]
fn run_ps_and_stop() {
    let Some(model) = smollm2() else { return };
    let server = Server::start(&model);

    assert!(!server.ok(&["ps"]).contains("smollm2"));
    let out = server.mlxr(&[
        "run",
        "smollm2",
        "--temperature",
        "0",
        "-n",
        "8",
        "--verbose",
        "What is the capital of France?",
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let reply = String::from_utf8(out.stdout).unwrap();
    assert!(reply.trim().len() > 3, "reply: {reply:?}");
    assert!(err.contains("eval rate:"), "{err}");
    assert!(err.contains("total duration:"), "{err}");

    let ps = server.ok(&["ps"]);
    assert!(ps.starts_with("NAME"), "{ps}");
    assert!(ps.contains("smollm2") && ps.contains("100% CPU"), "{ps}");
    assert!(ps.contains("from now"), "{ps}");

    server.ok(&["stop", "smollm2"]);
    assert!(!server.ok(&["ps"]).contains("smollm2"));

    // A model the daemon lacks and cannot pull: the server's message.
    let out = server.mlxr(&["run", "no-such-model-xyz", "hi"]);
    assert!(!out.status.success());
    assert!(stderr(&out).starts_with("error: "), "{}", stderr(&out));
}

/// `serve --model-draft NAME` finds the draft among the daemon's models
/// (here the model itself: every draft stands) and `run --verbose` shows the
/// acceptance; `run`'s speculative flags reach the daemon as options.
#[test]
fn a_served_model_drafts_for_itself_by_name() {
    let Some(model) = smollm2() else { return };
    // Drafting for itself never pays: goodput would hardly draft.
    let server = Server::start_with(
        &model,
        &["--model-draft", "smollm2", "--draft-length", "max"],
    );
    let run = |extra: &[&str]| {
        let args = [
            &[
                "run",
                "smollm2",
                "--temperature",
                "0",
                "-n",
                "16",
                "--verbose",
            ][..],
            extra,
            &["Count from one to ten."][..],
        ]
        .concat();
        let out = server.mlxr(&args);
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        (String::from_utf8(out.stdout).unwrap(), err)
    };
    let (drafted, err) = run(&[]);
    assert!(
        err.contains("draft acceptance:") && err.contains("(100%)"),
        "{err}"
    );
    let (plain, err) = run(&["--spec-type", "none"]);
    assert!(!err.contains("draft acceptance:"), "{err}");
    assert_eq!(drafted, plain);

    let out = server.mlxr(&["run", "smollm2", "--model-draft", "x.gguf", "hi"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("give it to `mlxr serve`"),
        "{}",
        stderr(&out)
    );

    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mlxr"))
        .args(["serve", "-m"])
        .arg(&model)
        .arg("--home")
        .arg(home.path())
        .args(["--host", "127.0.0.1:0", "--model-draft", "no-such-model"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--model-draft no-such-model"),
        "{}",
        stderr(&out)
    );
}

#[cfg(unix)]
#[test]
fn client_commands_over_the_unix_socket() {
    let Some(model) = smollm2() else { return };
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("mlxr.sock");
    let server = Server::start_with(&model, &["--socket", socket.to_str().unwrap()]);
    let host = format!("unix:{}", socket.display());

    let list = ok(server.mlxr_at(&host, &["list"]), &["list"]);
    assert!(list.contains("smollm2"), "{list}");
    // A streamed reply (NDJSON over the socket), then the model shows in ps.
    let args = ["run", "smollm2", "--temperature", "0", "-n", "8", "Say hi."];
    let reply = ok(server.mlxr_at(&host, &args), &args);
    assert!(!reply.trim().is_empty(), "reply: {reply:?}");
    let ps = ok(server.mlxr_at(&host, &["ps"]), &["ps"]);
    assert!(ps.contains("smollm2"), "{ps}");
    // The same reply as over TCP: one daemon, two transports.
    assert_eq!(reply, server.ok(&args));

    // No daemon at the path: the one-line connection error names the socket.
    let missing = format!("unix:{}", dir.path().join("absent.sock").display());
    let out = server.mlxr_at(&missing, &["list"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("could not connect to mlxr serve at {missing}")),
        "{}",
        stderr(&out)
    );
}

/// `create` from a Hugging Face folder (sharded: every shard and companion
/// file is uploaded), then a model made `FROM` it keeps its files.
#[test]
fn create_from_a_model_folder() {
    let Some(model) = smollm2() else { return };
    let server = Server::start(&model);
    let dir = tempfile::tempdir().unwrap();
    let folder = mlxr_testkit::fixture_path("tiny-models/qwen2");
    let modelfile = dir.path().join("Modelfile");
    std::fs::write(
        &modelfile,
        format!("FROM {}\nPARAMETER temperature 0\n", folder.display()),
    )
    .unwrap();
    let out = server.mlxr(&["create", "tiny-qwen2", "-f", modelfile.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = server.ok(&["show", "tiny-qwen2"]);
    assert!(shown.contains("qwen2"), "{shown}");
    let reply = server.ok(&["run", "tiny-qwen2", "-n", "3", "Hi"]);
    assert!(!reply.is_empty());

    std::fs::write(&modelfile, "FROM tiny-qwen2\nSYSTEM Be brief.\n").unwrap();
    let out = server.mlxr(&[
        "create",
        "tiny-qwen2-brief",
        "-f",
        modelfile.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    server.ok(&["run", "tiny-qwen2-brief", "-n", "3", "Hi"]);
}

/// `mlxr run` on an embedding model prints its vector as JSON: in-process
/// from the folder, and through the daemon, with the same numbers.
#[test]
fn run_on_an_embedding_model_prints_the_vector() {
    let (Some(model), Some(minilm)) = (smollm2(), mlxr_testkit::model_path(mlxr_testkit::MINILM))
    else {
        return;
    };
    let local = Command::new(env!("CARGO_BIN_EXE_mlxr"))
        .args([
            "run",
            "-m",
            minilm.to_str().unwrap(),
            "The cat sat on the mat.",
        ])
        .output()
        .unwrap();
    let local = ok(local, &["run", "-m", "MiniLM"]);
    let local: Vec<f64> = serde_json::from_str(&local).unwrap();
    assert_eq!(local.len(), 384);
    let norm: f64 = local.iter().map(|x| x * x).sum();
    assert!((norm - 1.0).abs() < 1e-5, "{norm}");

    let server = Server::start(&model);
    server.ok(&["pull", minilm.to_str().unwrap()]);
    let name = server
        .ok(&["list"])
        .lines()
        .find(|l| l.to_lowercase().contains("minilm"))
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap();
    let remote = server.ok(&["run", &name, "The cat sat on the mat."]);
    let remote: Vec<f64> = serde_json::from_str(&remote).unwrap();
    assert_eq!(local, remote);
    let out = server.mlxr(&["run", &name]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("give the TEXT to embed"),
        "{}",
        stderr(&out)
    );
}

/// `run NAME --tools FILE`: the daemon gets the tools with every turn and
/// the model's calls are printed (Qwen2.5-Coder calls the weather tool).
#[test]
fn run_shows_the_models_tool_calls() {
    let (Some(model), Some(qwen)) = (
        smollm2(),
        mlxr_testkit::model_path(mlxr_testkit::QWEN_CODER_05B),
    ) else {
        return;
    };
    let qwen = qwen.to_str().unwrap().to_owned();
    let server = Server::start_with(&model, &["-m", &qwen, "--name", "qwen-coder"]);
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.json");
    std::fs::write(
        &tools,
        r#"[{"type": "function", "function": {"name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}}]"#,
    )
    .unwrap();
    let tools = tools.to_str().unwrap();
    let args = [
        "run",
        "qwen-coder",
        "--tools",
        tools,
        "--temperature",
        "0",
        "What is the weather like in Paris today?",
    ];
    let out = server.ok(&args);
    assert!(
        out.contains("[tool call] get_weather {\"city\":\"Paris\"}"),
        "{out:?}"
    );

    // Not a JSON array; a file run in-process: clear errors.
    std::fs::write(dir.path().join("bad.json"), "{}").unwrap();
    let bad = dir.path().join("bad.json");
    let out = server.mlxr(&["run", "qwen-coder", "--tools", bad.to_str().unwrap(), "hi"]);
    assert!(
        stderr(&out).contains("expected a JSON array"),
        "{}",
        stderr(&out)
    );
    let out = server.mlxr(&["run", "-m", &qwen, "--tools", tools, "hi"]);
    assert!(
        stderr(&out).contains("--tools needs a model served"),
        "{}",
        stderr(&out)
    );
}
