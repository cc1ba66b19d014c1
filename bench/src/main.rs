//! The benchmark harness (issue 8; the frame-spacing part of issue 10).
//!
//! Drives the real `stream` handler over HTTP against DynamoDB Local and a
//! scripted OpenAI-compatible model with a set time to first token and token
//! rate, over N warm turns of one session, and prints p50/p95/p99/max of:
//! the first SSE byte, the server-added time to first token, `done` after the
//! model's last token and after the last `text_delta`, and the error of the
//! client's frame spacing against the model's token spacing. Then, per
//! function: peak RSS over a whole session, process start → ready, and the
//! release bootstrap's size.
//!
//! Modes:
//! - `adapter`: the handler in this process behind a local hyper adapter
//!   (`adapter.rs`); no Lambda runtime, so it times the product code alone.
//!   Also with the frame log off (the hot path before issue 19), and the
//!   first frame of a resumed stream after a reconnect (`resume.rs`).
//! - `runtime`: the real release `stream` binary, spawned with
//!   `AWS_LAMBDA_RUNTIME_API` pointing at a Runtime API stand-in in this
//!   process (`tests::runtime_api`); frames are timed as they reach it, which
//!   is where Lambda's front end takes them. The real runtime client and its
//!   socket, without cargo lambda's proxy in the way.
//! - `cargo-lambda`: the real release `stream` binary under
//!   `cargo lambda watch`, through the real runtime client and the Runtime
//!   API socket, run with `RUNTIME_API_NODELAY=off` (Nagle on: before the
//!   fix) and with the default (after).
//! - `startup`: spawn → first `GET /next` of the release binary.
//! - `dynamo`: DynamoDB Local's own round trips with the raw SDK, the floor
//!   under every figure that includes persistence.
//! - `all` (default): all of the above, then one table.
//!
//! Needs `AWS_ENDPOINT_URL_DYNAMODB` (DynamoDB Local); `scripts/bench.sh`
//! starts it and builds everything first. Prints a Markdown report to stdout,
//! or to `--report FILE` (in adapter mode the handler's own stdout lines, its
//! EMF metrics, land on stdout too); progress goes to stderr. Exits non-zero
//! when a run failed, never because a target was missed: the report says so.

mod adapter;
mod aws_units;
mod capacity;
mod cost;
mod driver;
mod dynamo;
mod lambda;
mod premodel;
mod resume;
mod spans;
mod startup;
mod stats;

use clap::{Parser, ValueEnum};
use driver::{Driver, TurnTiming};
use stats::{Figure, Row, Summary, Target};
use std::fmt::Write as _;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;
use tests::runtime_api::FakeRuntimeApi;
use tests::{Reply, ScriptedLlm};
use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    All,
    Adapter,
    Runtime,
    CargoLambda,
    Startup,
    Dynamo,
    /// What a turn costs (issue 30): DynamoDB capacity per turn by phase at
    /// each frame log batch interval, a resumed stream's first frame at
    /// each, and the dollars per 1,000 turns (docs/cost.md).
    Cost,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Nodelay {
    /// `RUNTIME_API_NODELAY=off`: Nagle stays on the Runtime API socket.
    Off,
    /// The shipped default: `TCP_NODELAY` set by `shared::transport`.
    On,
    Both,
}

#[derive(Debug, Parser)]
#[command(about = "Benchmarks the stream function; see docs/performance.md")]
struct Args {
    #[arg(long, value_enum, default_value = "all")]
    mode: Mode,
    /// Measured turns per run (after the warm-up).
    #[arg(long, default_value_t = 20)]
    turns: usize,
    /// Unmeasured turns first, so connections, caches and DynamoDB Local's JIT are warm.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// The scripted model's time to first token.
    #[arg(long, default_value_t = 100)]
    ttft_ms: u64,
    /// Tokens (text chunks) per answer.
    #[arg(long, default_value_t = 50)]
    tokens: usize,
    /// Time between two tokens.
    #[arg(long, default_value_t = 10)]
    token_gap_ms: u64,
    /// runtime and cargo-lambda modes: which runs (`off` = before the Nagle fix).
    #[arg(long, value_enum, default_value = "both")]
    nodelay: Nodelay,
    /// runtime and cargo-lambda modes, default run: the session is filled up
    /// to this many turns (with an instant model), then the function's peak
    /// RSS is read.
    #[arg(long, default_value_t = 100)]
    session_turns: usize,
    /// Rounds of DynamoDB Local calls before anything is measured: a freshly
    /// started DynamoDB Local (a JVM) is several times slower until its JIT
    /// has compiled the hot paths.
    #[arg(long, default_value_t = 300)]
    dynamo_warmup: usize,
    /// Spawns of the release binary for start → ready.
    #[arg(long, default_value_t = 20)]
    startup_runs: usize,
    /// Write the report here instead of stdout (the handler's own output,
    /// e.g. its EMF metric lines in adapter mode, stays on stdout).
    #[arg(long)]
    report: Option<PathBuf>,
    /// The repository root (for `cargo lambda watch` and target/).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/.."))]
    repo: PathBuf,
}

impl Args {
    fn model(&self) -> Reply {
        let pieces = driver::pieces(self.tokens);
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        Reply::timed(Duration::from_millis(self.ttft_ms), &refs, Duration::from_millis(self.token_gap_ms))
    }

    fn instant_model(&self) -> Reply {
        let pieces = driver::pieces(self.tokens);
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        Reply::timed(Duration::ZERO, &refs, Duration::ZERO)
    }

    fn stream_bin(&self) -> PathBuf {
        self.release_bin("stream")
    }

    fn release_bin(&self, function: &str) -> PathBuf {
        self.target_dir().join("release").join(function)
    }

    fn target_dir(&self) -> PathBuf {
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| self.repo.join("target"))
    }
}

/// The functions besides `stream`, measured for start → ready and size
/// (`scripts/bench.sh` builds them).
const OTHER_FUNCTIONS: [&str; 3] = ["entities", "summarizer", "prewarm"];

/// The measured turns of one run, and what else it found.
struct Run {
    mode: String,
    turns: Vec<TurnTiming>,
    /// (peak, current) RSS of the function process in KiB, and after how many turns.
    rss: Option<(u64, u64, usize)>,
    /// The product's own DynamoDB spans over the measured turns (adapter only).
    spans: spans::Intervals,
    /// DynamoDB capacity of each measured turn, by phase (adapter only).
    capacity: Vec<capacity::Phases>,
    /// The harness's floor for the first byte after the handler's entry (adapter only).
    floor: Vec<Duration>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = Args::parse();
    args.repo = args.repo.canonicalize().unwrap_or(args.repo.clone());
    if std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_none() && args.mode != Mode::Startup {
        eprintln!("AWS_ENDPOINT_URL_DYNAMODB is not set: run scripts/bench.sh, which starts DynamoDB Local");
        std::process::exit(2);
    }
    if args.mode != Mode::Startup && args.dynamo_warmup > 0 {
        eprintln!("warming DynamoDB Local up: {} rounds", args.dynamo_warmup);
        let client = tests::dynamo_client().await;
        let table = tests::fresh_table(&client).await;
        if let Err(e) = dynamo::baseline(&client, &table, args.dynamo_warmup).await {
            eprintln!("DynamoDB Local warm-up failed: {e}");
            std::process::exit(1);
        }
    }
    let load_before = loadavg();
    let mut runs = Vec::new();
    let mut baseline = Vec::new();
    let mut resumes = Vec::new();
    let mut failed = false;
    if matches!(args.mode, Mode::All | Mode::Adapter) {
        let spans = spans::SpanTimes::install();
        for (new_sessions, frames) in [(false, false), (false, true), (true, true)] {
            match adapter_run(&args, &spans, new_sessions, frames).await {
                Ok(r) => runs.push(r),
                Err(e) => {
                    eprintln!("adapter run (new sessions: {new_sessions}, frame log: {frames}) failed: {e}");
                    failed = true;
                }
            }
        }
        match resume_run(&args).await {
            Ok(r) => resumes = r,
            Err(e) => {
                eprintln!("resume run failed: {e}");
                failed = true;
            }
        }
    }
    if matches!(args.mode, Mode::All | Mode::Dynamo) {
        eprintln!("DynamoDB Local baseline: {} calls of each", args.turns);
        let client = tests::dynamo_client().await;
        let table = tests::fresh_table(&client).await;
        match dynamo::baseline(&client, &table, args.turns).await {
            Ok(b) => baseline = b,
            Err(e) => {
                eprintln!("DynamoDB baseline failed: {e}");
                failed = true;
            }
        }
    }
    let variants: &[bool] = match args.nodelay {
        Nodelay::Off => &[false],
        Nodelay::On => &[true],
        Nodelay::Both => &[false, true],
    };
    if matches!(args.mode, Mode::All | Mode::Runtime) {
        for &nodelay in variants {
            match runtime_run(&args, nodelay).await {
                Ok(r) => runs.push(r),
                Err(e) => {
                    eprintln!("runtime run (nodelay {nodelay}) failed: {e}");
                    failed = true;
                }
            }
        }
    }
    if matches!(args.mode, Mode::All | Mode::CargoLambda) {
        for &nodelay in variants {
            match cargo_lambda_run(&args, nodelay).await {
                Ok(r) => runs.push(r),
                Err(e) => {
                    eprintln!("cargo-lambda run (nodelay {nodelay}) failed: {e}");
                    failed = true;
                }
            }
        }
    }
    // Start → ready of `stream` as shipped (the lexical estimate) and with the
    // opt-in BPE (`CONTEXT_TOKENIZER=cl100k_base`), to show what loading it
    // costs; then of every other function, as shipped.
    let mut starts = Vec::new();
    if matches!(args.mode, Mode::All | Mode::Startup) {
        let mut cases: Vec<(String, &str, Option<&str>, usize)> = vec![
            ("`stream`, as shipped".into(), "stream", None, args.startup_runs),
            ("`stream`, CONTEXT_TOKENIZER=cl100k_base".into(), "stream", Some("cl100k_base"), args.startup_runs / 2),
        ];
        for f in OTHER_FUNCTIONS {
            cases.push((format!("`{f}`, as shipped"), f, None, args.startup_runs / 2));
        }
        for (label, function, tokenizer, runs) in cases {
            let bin = args.release_bin(function);
            if function != "stream" && !bin.exists() {
                eprintln!("start → ready ({label}): {} not built, skipped", bin.display());
                continue;
            }
            eprintln!("start → ready ({label}): {runs} spawns of {}", bin.display());
            let mut env = function_env("bench-startup", "http://127.0.0.1:9/v1", true);
            if let Some(t) = tokenizer {
                env.push(("CONTEXT_TOKENIZER".into(), t.into()));
            }
            match startup::start_to_ready(&bin, &env, runs.max(1)).await {
                Ok(t) => starts.push((label, tokenizer.is_none(), t)),
                Err(e) => {
                    eprintln!("start → ready ({label}) failed: {e}");
                    failed = true;
                }
            }
        }
    }
    let mut cost_report = String::new();
    if matches!(args.mode, Mode::Cost) {
        match cost_sweep(&args).await {
            Ok(r) => cost_report = r,
            Err(e) => {
                eprintln!("cost run failed: {e}");
                failed = true;
            }
        }
    }
    let load = format!("load average {load_before} before, {} after", loadavg());
    let mut report = render_report(&args, &runs, &baseline, &starts, &load);
    report.push_str(&cost_report);
    if !resumes.is_empty() {
        report.push_str(&render_resumes(&resumes));
    }
    match &args.report {
        Some(path) => {
            if let Err(e) = std::fs::write(path, report) {
                eprintln!("cannot write {}: {e}", path.display());
                failed = true;
            }
        }
        None => print!("{report}"),
    }
    if failed {
        std::process::exit(1);
    }
}

/// The other parties of a benchmark, the scripted model and the client (with
/// the Runtime API stand-in), each on a runtime thread of its own: the
/// function under test (this process's main runtime, in adapter mode) then
/// shares no worker with them, as in production, where they are other
/// machines. They still share the machine's CPUs.
struct Sides {
    model: tokio::runtime::Handle,
    client: tokio::runtime::Handle,
}

fn sides() -> &'static Sides {
    static SIDES: std::sync::OnceLock<Sides> = std::sync::OnceLock::new();
    SIDES.get_or_init(|| Sides { model: side_runtime("bench-model"), client: side_runtime("bench-client") })
}

fn side_runtime(name: &str) -> tokio::runtime::Handle {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            tx.send(rt.handle().clone()).expect("handle sent");
            rt.block_on(std::future::pending::<()>());
        })
        .expect("a thread");
    rx.recv().expect("a runtime handle")
}

/// Runs `f` on a side runtime and waits for it.
async fn on<T: Send + 'static>(side: &tokio::runtime::Handle, f: impl Future<Output = T> + Send + 'static) -> T {
    side.spawn(f).await.expect("a side task does not panic")
}

async fn scripted_model(args: &Args) -> ScriptedLlm {
    let llm = on(&sides().model, ScriptedLlm::start()).await;
    llm.set_default(args.model());
    llm
}

/// The handler in this process, behind the local HTTP adapter: one session
/// for every turn, or (`new_sessions`) a new session per turn.
async fn adapter_run(args: &Args, spans: &spans::SpanTimes, new_sessions: bool, frames: bool) -> Result<Run, String> {
    adapter_run_with(args, spans, new_sessions, frames, FRAME_FLUSH_DEFAULT).await
}

/// The frame log's batch interval as shipped (`FRAME_FLUSH_MS`).
const FRAME_FLUSH_DEFAULT: Duration = shared::frames::FLUSH_EVERY;

async fn adapter_run_with(
    args: &Args,
    spans: &spans::SpanTimes,
    new_sessions: bool,
    frames: bool,
    flush: Duration,
) -> Result<Run, String> {
    let mode = match (new_sessions, frames) {
        (true, _) => "adapter, new session per turn",
        (false, true) => "adapter",
        (false, false) => "adapter, frame log off",
    };
    eprintln!("{mode}: the handler in-process behind a local hyper adapter");
    let meter = capacity::Meter::default();
    let dynamo = meter.client().await;
    let table = tests::fresh_table(&dynamo).await;
    let llm = scripted_model(args).await;
    let mut config = bench_config(&table, &llm.base_url());
    config.frame_flush = flush;
    let mut app = shared::edge::stream::StreamApp::with_dynamo(config, dynamo);
    if !frames {
        // The hot path as it was before the frame log (issue 19).
        app.deps.frames = None;
    }
    let (addr, probes) = adapter::serve(adapter::Handler::stream(app)).await;
    let mut d =
        Driver::http(format!("http://{addr}/"), "bench-adapter", llm, driver::pieces(args.tokens), Some(probes));
    d.new_sessions = new_sessions;
    let spans = spans.clone();
    let (warmup, n) = (args.warmup, args.turns);
    let (floor_addr, floor_probes) = adapter::serve(adapter::Handler::Floor).await;
    let metered = meter.clone();
    let (turns, spans, floor, consumed) = on(&sides().client, async move {
        warm_up(&mut d, warmup).await?;
        spans.take();
        metered.take();
        let turns = measured(&mut d, n).await?;
        // The last turn's writes after `done` (the budget's release, the
        // frame log's last batch) land while its body closes.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let spans = spans.take();
        let consumed = metered.take();
        let floor = driver::floor_first_byte(&format!("http://{floor_addr}/"), &floor_probes, n).await?;
        Ok::<_, String>((turns, spans, floor, consumed))
    })
    .await?;
    let capacity = turn_capacity(&turns, &spans, &consumed);
    Ok(Run { mode: mode.into(), turns, rss: None, spans, floor, capacity })
}

/// Each turn's capacity by phase: its records from its handler entry to the
/// next turn's (turns run one after another).
fn turn_capacity(
    turns: &[TurnTiming],
    spans: &spans::Intervals,
    consumed: &[capacity::Consumed],
) -> Vec<capacity::Phases> {
    let end = Instant::now() + Duration::from_secs(3600);
    turns
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let from = t.handler_entry?;
            let to = turns.get(i + 1).and_then(|n| n.handler_entry).unwrap_or(end);
            Some(capacity::by_phase(consumed, from, to, premodel::model_sent(t, spans)))
        })
        .collect()
}

/// The frame log batch intervals `--mode cost` sweeps.
const FLUSH_SWEEP: [u64; 5] = [25, 50, 100, 250, 500];

/// `--mode cost`: each kind of turn's capacity by phase (the frame log at
/// each interval of [`FLUSH_SWEEP`] for a talk-only turn), and a resumed
/// stream's first frame at each interval.
async fn cost_sweep(args: &Args) -> Result<String, String> {
    let (warmup, n) = (args.warmup, args.turns);
    let mut rows = Vec::new();
    for ms in FLUSH_SWEEP {
        let flush = Duration::from_millis(ms);
        let label = format!("talk-only, existing session, FRAME_FLUSH_MS={ms}");
        rows.push(cost::measure(&cost::Kind::new(&label, false, false, 0), args.model(), flush, (warmup, n)).await?);
    }
    let d = FRAME_FLUSH_DEFAULT;
    // A session at turn ~20: its history read is as long as it gets (the
    // context builder's `CONTEXT_MAX_MESSAGES`).
    let late = cost::Kind::new("talk-only, existing session, turns 19–22", false, false, 0);
    rows.push(cost::measure(&late, args.model(), d, (18, 4)).await?);
    rows.push(
        cost::measure(
            &cost::Kind::new("talk-only, new session per turn", false, true, 0),
            args.model(),
            d,
            (warmup, n),
        )
        .await?,
    );
    // A realistic tool result: `list_projects` over 8 projects (~2 KB).
    let tool = cost::Kind::new("tool turn (1 call, 8 projects listed), existing session", true, false, 8);
    rows.push(cost::measure(&tool, args.model(), d, (warmup, n)).await?);
    let tool_new = cost::Kind::new("tool turn (1 call, 8 projects listed), new session", true, true, 8);
    rows.push(cost::measure(&tool_new, args.model(), d, (warmup, n)).await?);
    let tool_empty = cost::Kind::new("tool turn (1 call, no projects), existing session", true, false, 0);
    rows.push(cost::measure(&tool_empty, args.model(), d, (warmup, n)).await?);
    let mut resumes = Vec::new();
    for ms in FLUSH_SWEEP {
        let flush = Duration::from_millis(ms);
        let r = resume_run_with(args, flush, false).await?;
        resumes.push((flush, r.into_iter().next().map(|(_, t)| t).unwrap_or_default()));
    }
    Ok(cost::render(&rows, &resumes))
}

/// The first frame of a resumed stream, reconnecting at once and after a
/// pause (frames then stored), against the in-process handler.
async fn resume_run(args: &Args) -> Result<Vec<(String, Vec<Duration>)>, String> {
    resume_run_with(args, FRAME_FLUSH_DEFAULT, true).await
}

async fn resume_run_with(args: &Args, flush: Duration, paused: bool) -> Result<Vec<(String, Vec<Duration>)>, String> {
    let n = args.turns.clamp(1, 20);
    eprintln!("resume: {n} reconnects at once and {n} after 300 ms (frame log batches every {flush:?})");
    let dynamo = tests::dynamo_client().await;
    let table = tests::fresh_table(&dynamo).await;
    let llm = scripted_model(args).await;
    let mut config = bench_config(&table, &llm.base_url());
    config.frame_flush = flush;
    let app = shared::edge::stream::StreamApp::with_dynamo(config, dynamo);
    let (addr, _) = adapter::serve(adapter::Handler::stream(app)).await;
    let url = format!("http://{addr}/");
    on(&sides().client, async move {
        let mut out = Vec::new();
        let pauses: &[(&str, Duration)] = match paused {
            true => &[("at once", Duration::ZERO), ("after 300 ms", Duration::from_millis(300))],
            false => &[("at once", Duration::ZERO)],
        };
        for &(label, pause) in pauses {
            let t = resume::first_frame_after_reconnect(&url, "bench-resume", n, pause).await?;
            out.push((format!("reconnect {label}"), t));
        }
        Ok(out)
    })
    .await
}

fn render_resumes(resumes: &[(String, Vec<Duration>)]) -> String {
    let mut out = String::from(
        "\n### Resumed stream: first frame after reconnect (adapter; request sent → first byte, ms)\n\n\
         | reconnect | n | p50 | p95 | max |\n|---|--:|--:|--:|--:|\n",
    );
    for (label, t) in resumes {
        if let Some(s) = Summary::of(t) {
            let _ = writeln!(
                out,
                "| {label} | {} | {} | {} | {} |",
                s.n,
                stats::ms(s.p50),
                stats::ms(s.p95),
                stats::ms(s.max)
            );
        }
    }
    out
}

/// The release `stream` binary with the real runtime client, against a
/// Runtime API stand-in in this process.
async fn runtime_run(args: &Args, nodelay: bool) -> Result<Run, String> {
    let mode = if nodelay { "runtime, default (TCP_NODELAY)" } else { "runtime, RUNTIME_API_NODELAY=off" };
    eprintln!("{mode}: spawning {}", args.stream_bin().display());
    let dynamo = tests::dynamo_client().await;
    let table = tests::fresh_table(&dynamo).await;
    let llm = scripted_model(args).await;
    let api = on(&sides().client, FakeRuntimeApi::start()).await;
    let label = if nodelay { "nodelay-on" } else { "nodelay-off" };
    let _ = std::fs::create_dir_all(args.repo.join(".local"));
    let log = args.repo.join(format!(".local/bench-runtime-{label}.log"));
    let function = startup::Function::spawn(
        &args.stream_bin(),
        &api.addr.to_string(),
        &function_env(&table, &llm.base_url(), nodelay),
        &log,
    )?;
    let d = Driver::runtime(api, "bench-runtime", llm.clone(), driver::pieces(args.tokens));
    let fill = nodelay.then(|| (args.session_turns, args.instant_model(), function.pid()));
    let (turns, rss) = session(d, args, Duration::from_secs(60), fill).await?;
    drop(function);
    Ok(Run { mode: mode.into(), turns, rss, spans: spans::Intervals::new(), floor: vec![], capacity: vec![] })
}

/// The release `stream` binary under `cargo lambda watch`.
async fn cargo_lambda_run(args: &Args, nodelay: bool) -> Result<Run, String> {
    let (label, mode) = if nodelay {
        ("nodelay-on", "cargo-lambda, default (TCP_NODELAY)")
    } else {
        ("nodelay-off", "cargo-lambda, RUNTIME_API_NODELAY=off")
    };
    eprintln!("{mode}: starting cargo lambda watch --release");
    let dynamo = tests::dynamo_client().await;
    let table = tests::fresh_table(&dynamo).await;
    let llm = scripted_model(args).await;
    let mut watch = lambda::Watch::start(&args.repo, label, &function_env(&table, &llm.base_url(), nodelay))
        .map_err(|e| format!("cargo lambda watch: {e}"))?;
    watch.ready(Duration::from_secs(300)).await?;
    let mut d = Driver::http(watch.url("stream"), "bench-lambda", llm.clone(), driver::pieces(args.tokens), None);
    // The first invocation waits for cargo lambda to (re)build and boot the
    // function; the process is then found by name under the watch.
    eprintln!("{mode}: first invocation (may wait for a build; log {})", watch.log.display());
    d = on(&sides().client, async move {
        d.turn(Duration::from_secs(1200)).await.map(|_| d).map_err(|e| format!("first turn: {e}"))
    })
    .await?;
    let pid = watch.function_pid("stream").ok_or("no `stream` process under cargo lambda watch")?;
    let fill = nodelay.then(|| (args.session_turns, args.instant_model(), pid));
    let (turns, rss) = session(d, args, Duration::from_secs(30), fill).await?;
    if watch.function_pid("stream") != Some(pid) {
        return Err("the stream process was restarted during the run".into());
    }
    Ok(Run { mode: mode.into(), turns, rss, spans: spans::Intervals::new(), floor: vec![], capacity: vec![] })
}

type Rss = (u64, u64, usize);

/// On the client's runtime: a first turn (bounded by `first`), the warm-up,
/// the measured turns, then, with `fill` = (session turns, quick reply, pid),
/// quick turns up to that many in the session and the function's (peak,
/// current) RSS in KiB.
async fn session(
    mut d: Driver,
    args: &Args,
    first: Duration,
    fill: Option<(usize, Reply, u32)>,
) -> Result<(Vec<TurnTiming>, Option<Rss>), String> {
    let (warmup, n) = (args.warmup, args.turns);
    on(&sides().client, async move {
        if d.turns_done == 0 {
            d.turn(first).await.map_err(|e| format!("first turn: {e}"))?;
        }
        warm_up(&mut d, warmup).await?;
        let turns = measured(&mut d, n).await?;
        let mut rss = None;
        if let Some((session_turns, quick, pid)) = fill {
            d.llm.set_default(quick);
            while (d.turns_done as usize) < session_turns {
                d.turn(Duration::from_secs(30)).await?;
            }
            let (peak, now) = lambda::rss_kib(pid).ok_or("cannot read the function process's /proc status")?;
            rss = Some((peak, now, d.turns_done as usize));
        }
        Ok((turns, rss))
    })
    .await
}

/// Unmeasured turns, so connections, caches and DynamoDB Local's JIT are warm.
async fn warm_up(d: &mut Driver, turns: usize) -> Result<(), String> {
    for _ in 0..turns {
        d.turn(Duration::from_secs(30)).await?;
    }
    Ok(())
}

async fn measured(d: &mut Driver, turns: usize) -> Result<Vec<TurnTiming>, String> {
    let mut out = Vec::with_capacity(turns);
    for i in 0..turns {
        out.push(d.turn(Duration::from_secs(30)).await.map_err(|e| format!("measured turn {}: {e}", i + 1))?);
    }
    Ok(out)
}

/// Budget limits no bench turn reaches: the budgets are checked (their
/// requests are part of what a turn costs) but never refuse.
const BENCH_BUDGETS: shared::config::BudgetConfig = shared::config::BudgetConfig {
    tokens_per_day: 1_000_000_000,
    turns_per_minute: 100_000,
    concurrent_turns: 1_000,
    web_calls_per_day: 100_000,
};

/// The budgets the bench runs with: [`BENCH_BUDGETS`], or none with
/// `BENCH_BUDGETS=off` (the hot path with and without them, side by side).
fn bench_budgets() -> shared::config::BudgetConfig {
    match std::env::var("BENCH_BUDGETS").as_deref() {
        Ok("off") => shared::config::BudgetConfig::OFF,
        _ => BENCH_BUDGETS,
    }
}

/// The tests' config with budgets on ([`bench_budgets`]).
pub(crate) fn bench_config(table: &str, llm_base_url: &str) -> shared::config::Config {
    let mut config = tests::test_config(table, llm_base_url);
    config.budgets = bench_budgets();
    config
}

/// What the function reads from its environment, pointed at the bench's parts.
fn function_env(table: &str, llm_base_url: &str, nodelay: bool) -> Vec<(String, String)> {
    let dynamo = std::env::var("AWS_ENDPOINT_URL_DYNAMODB").unwrap_or_else(|_| "http://127.0.0.1:9".into());
    let mut env: Vec<(String, String)> = [
        ("TABLE_NAME", table),
        ("LLM_BASE_URL", llm_base_url),
        ("LLM_API_KEY", "bench-key"),
        ("LLM_MODEL", "scripted"),
        ("AUTH_JWT_SECRET", tests::TEST_SECRET),
        ("AWS_ENDPOINT_URL_DYNAMODB", dynamo.as_str()),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "local"),
        ("AWS_SECRET_ACCESS_KEY", "local"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let b = bench_budgets();
    for (k, v) in [
        ("BUDGET_TOKENS_PER_DAY", b.tokens_per_day),
        ("BUDGET_TURNS_PER_MINUTE", b.turns_per_minute),
        ("BUDGET_CONCURRENT_TURNS", b.concurrent_turns),
        ("BUDGET_WEB_CALLS_PER_DAY", b.web_calls_per_day),
    ] {
        env.push((k.into(), v.to_string()));
    }
    if !nodelay {
        env.push(("RUNTIME_API_NODELAY".into(), "off".into()));
    }
    env
}

fn render_report(
    args: &Args,
    runs: &[Run],
    baseline: &[(&'static str, Vec<Duration>)],
    starts: &[(String, bool, Vec<startup::Start>)],
    load: &str,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Results\n");
    let _ = writeln!(
        out,
        "Scripted model: TTFT {} ms, {} tokens {} ms apart; {} warm-up + {} measured turns per run, one session per run.\n",
        args.ttft_ms, args.tokens, args.token_gap_ms, args.warmup, args.turns
    );
    let _ = writeln!(out, "Machine: {}; {load}.\n", machine());

    let mut rows = Vec::new();
    for r in runs {
        let col = |f: &dyn Fn(&TurnTiming) -> Option<Duration>| -> Option<Summary> {
            Summary::of(&r.turns.iter().filter_map(f).collect::<Vec<_>>())
        };
        let adapter = r.mode.starts_with("adapter");
        rows.push(Row {
            metric: "response head (HTTP headers / runtime prelude), from request sent".into(),
            mode: r.mode.clone(),
            summary: col(&|t| Some(t.send_to_head)),
            targets: vec![],
        });
        rows.push(Row {
            metric: "first SSE byte, from request sent".into(),
            mode: r.mode.clone(),
            summary: col(&|t| Some(t.send_to_first_byte)),
            targets: vec![],
        });
        if adapter {
            rows.push(Row {
                metric: "first SSE byte, from handler entry".into(),
                mode: r.mode.clone(),
                summary: col(&|t| t.entry_to_first_byte),
                targets: vec![Target::p99_ms(1, "≤ 1 ms (p99)")],
            });
            if !r.floor.is_empty() {
                rows.push(Row {
                    metric:
                        "harness floor: first byte from handler entry, a handler answering one static frame at once"
                            .into(),
                    mode: r.mode.clone(),
                    summary: Summary::of(&r.floor),
                    targets: vec![],
                });
            }
            rows.push(Row {
                metric: "handler entry → handler returned (auth, validation, turn spawned)".into(),
                mode: r.mode.clone(),
                summary: col(&|t| t.entry_to_return),
                targets: vec![],
            });
            rows.push(Row {
                metric: "handler entry → first frame to hyper".into(),
                mode: r.mode.clone(),
                summary: col(&|t| t.entry_to_first_frame),
                targets: vec![],
            });
        }
        if adapter {
            rows.push(Row {
                metric: "pre-model: request received (handler entry) → model request sent".into(),
                mode: r.mode.clone(),
                summary: col(&|t| premodel::to_model_sent(t, &r.spans)),
                targets: vec![],
            });
            rows.push(Row {
                metric: "pre-model, minus the DynamoDB calls in flight in it (ours)".into(),
                mode: r.mode.clone(),
                summary: col(&|t| premodel::ours_before_model(t, &r.spans)),
                targets: vec![Target::p50_ms(1, "≤ 1 ms (p50; issue 17)")],
            });
        }
        rows.push(Row {
            metric: if adapter {
                "pre-model: request received (handler entry) → model has the request".into()
            } else {
                "pre-model: request sent → model has the request".into()
            },
            mode: r.mode.clone(),
            summary: col(&|t| premodel::to_model_received(t)),
            targets: vec![],
        });
        rows.push(Row {
            metric: "TTFT as the user sees it minus the model's own TTFT".into(),
            mode: r.mode.clone(),
            summary: col(&|t| premodel::user_ttft_minus_model(t)),
            targets: vec![],
        });
        rows.push(Row {
            metric: "server-added TTFT".into(),
            mode: r.mode.clone(),
            summary: col(&|t| Some(t.server_ttft)),
            targets: vec![Target::p50_ms(5, "≤ 5 ms p50"), Target::p99_ms(15, "≤ 15 ms p99")],
        });
        rows.push(Row {
            metric: "`done` after model's last token".into(),
            mode: r.mode.clone(),
            summary: col(&|t| Some(t.done_after_last_token)),
            targets: vec![Target::p99_ms(10, "≤ 10 ms (p99)")],
        });
        if !r.spans.is_empty() {
            // What of that is ours: minus the time the turn's closing writes
            // (`finish_turn`: a transaction, or the message's put and then the
            // session's update; the agent-state put goes out beside) took, SDK and store, between the model's last
            // token and `done`. The Stop poll's read is off the path: left in.
            let all: Vec<(Instant, Instant)> = r
                .spans
                .iter()
                .filter(|(k, _)| k.contains("(finish_turn)") || k.starts_with("ddb.put_item (agent_state)"))
                .flat_map(|(_, v)| v.iter().copied())
                .collect();
            let ours: Vec<Duration> = r
                .turns
                .iter()
                .map(|t| t.done_after_last_token.saturating_sub(spans::covered(&all, t.last_token_at, t.done_at)))
                .collect();
            rows.push(Row {
                metric: "`done` after model's last token, minus the closing writes' round trip (ours)".into(),
                mode: r.mode.clone(),
                summary: Summary::of(&ours),
                targets: vec![Target::p99_ms(10, "≤ 10 ms (p99)")],
            });
        }
        rows.push(Row {
            metric: "`done` after last `text_delta`".into(),
            mode: r.mode.clone(),
            summary: col(&|t| Some(t.done_after_last_delta)),
            targets: vec![Target::p99_ms(5, "≤ 5 ms (p99; issue 10)")],
        });
        let spacing: Vec<Duration> = r.turns.iter().flat_map(|t| t.spacing_errors.iter().copied()).collect();
        rows.push(Row {
            metric: "frame spacing error: abs(client gap − model gap)".into(),
            mode: r.mode.clone(),
            summary: Summary::of(&spacing),
            targets: vec![Target::p99_ms(3, "≤ 3 ms (p99; issue 10)")],
        });
    }
    for r in runs {
        for (span, samples) in &spans::durations(&r.spans) {
            rows.push(Row {
                metric: format!("product span `{span}`"),
                mode: r.mode.clone(),
                summary: Summary::of(samples),
                targets: vec![],
            });
        }
    }
    for (op, samples) in baseline {
        rows.push(Row {
            metric: format!("DynamoDB Local round trip: {op}"),
            mode: "raw SDK".into(),
            summary: Summary::of(samples),
            targets: vec![],
        });
    }
    let _ = writeln!(out, "### Per turn\n");
    let _ = writeln!(out, "{}", stats::latency_table(&rows));
    let _ = writeln!(out, "{}", calls_table(runs));
    let _ = writeln!(out, "{}", capacity_table(runs));

    let mut figures = Vec::new();
    for r in runs {
        if let Some((peak, now, turns)) = r.rss {
            let mib = peak as f64 / 1024.0;
            figures.push(Figure {
                metric: format!("peak RSS of `stream` over a {turns}-turn session ({})", r.mode),
                value: format!("{mib:.1} MiB (VmHWM; {:.1} MiB at the end)", now as f64 / 1024.0),
                target: "≤ 32 MiB".into(),
                met: Some(mib <= 32.0),
            });
        }
        let frames: usize = r.turns.iter().map(|t| t.text_frames).sum();
        let tokens: usize = r.turns.iter().map(|t| t.tokens).sum();
        if frames != tokens {
            figures.push(Figure {
                metric: format!("text frames / model tokens ({})", r.mode),
                value: format!("{frames} / {tokens} (the sink coalesced some)"),
                target: String::new(),
                met: None,
            });
        }
    }
    for (label, shipped, spawns) in starts {
        let ready: Vec<Duration> = spawns.iter().map(|s| s.ready).collect();
        let Some(s) = Summary::of(&ready) else { continue };
        let shipped = *shipped;
        figures.push(Figure {
            metric: format!("process start → ready, {label} (spawn → first `GET /next`, {} spawns)", s.n),
            value: format!("p50 {} ms, p95 {} ms, max {} ms", stats::ms(s.p50), stats::ms(s.p95), stats::ms(s.max)),
            target: if shipped { "≤ 15 ms (p50)".into() } else { String::new() },
            met: shipped.then_some(s.p50 <= Duration::from_millis(15)),
        });
        let mut rss: Vec<u64> = spawns.iter().filter_map(|s| s.rss_kib).collect();
        rss.sort_unstable();
        if let Some(median) = rss.get(rss.len() / 2) {
            figures.push(Figure {
                metric: format!("peak RSS when ready for the first invocation, {label}"),
                value: format!("{:.1} MiB (median VmHWM)", *median as f64 / 1024.0),
                target: String::new(),
                met: None,
            });
        }
    }
    let target = args.target_dir();
    let mut sizes = vec![
        ("release bootstrap size (`target/release/stream`)".to_string(), target.join("release/stream")),
        (
            "`cargo lambda build --release --arm64` bootstrap size (`stream`)".to_string(),
            target.join("lambda/stream/bootstrap"),
        ),
    ];
    for f in OTHER_FUNCTIONS {
        sizes.push((format!("release bootstrap size (`target/release/{f}`)"), target.join("release").join(f)));
    }
    for (what, path) in sizes {
        if let Some((bytes, arch)) = startup::binary(&path) {
            figures.push(Figure {
                metric: what,
                value: format!("{:.2} MiB ({bytes} bytes, {arch})", bytes as f64 / (1024.0 * 1024.0)),
                target: String::new(),
                met: None,
            });
        }
    }
    let _ = writeln!(out, "### Per function\n");
    let _ = writeln!(out, "{}", stats::figure_table(&figures));

    // The worst turn of each run, frame by frame around its worst gap:
    // where a stall shows.
    let _ = writeln!(
        out,
        "### Worst turn of each run, frames around its largest spacing error (ms after the model's first token)\n"
    );
    for r in runs {
        let worst = r.turns.iter().max_by_key(|t| t.spacing_errors.iter().copied().max().unwrap_or_default());
        if let Some(t) = worst {
            let k = (0..t.spacing_errors.len()).max_by_key(|&i| t.spacing_errors[i]).unwrap_or(0);
            let from = k.saturating_sub(3);
            let window = &t.arrivals[from..(from + 12).min(t.arrivals.len())];
            let show = |f: &dyn Fn(&(Duration, Duration)) -> Duration| -> String {
                window.iter().map(|a| format!("{:.0}", f(a).as_secs_f64() * 1e3)).collect::<Vec<_>>().join(", ")
            };
            let _ = writeln!(
                out,
                "- {}, text frames {}–{}: model wrote `{}`; client received `{}`",
                r.mode,
                from + 1,
                from + window.len(),
                show(&|a| a.0),
                show(&|a| a.1)
            );
        }
    }
    let _ = writeln!(out);
    out
}

/// Lambda arm64, us-east-1: $ per GB-second and per request; the stream
/// function's memory (infra/template.yaml).
pub(crate) const LAMBDA_GB_SECOND: f64 = 0.000_013_333_4;
pub(crate) const LAMBDA_REQUEST: f64 = 0.000_000_2;
pub(crate) const STREAM_MEMORY_GB: f64 = 0.25;

/// Lambda's $ per 1,000 turns of this run: billed duration (request sent →
/// `done` at the client, a little over the invocation's own) × memory, and
/// the request.
fn lambda_per_1000(r: &Run) -> Option<f64> {
    let d: Vec<f64> = r.turns.iter().map(|t| t.done_at.saturating_duration_since(t.sent_at).as_secs_f64()).collect();
    let mean = d.iter().sum::<f64>() / d.len().max(1) as f64;
    (!d.is_empty()).then_some(1000.0 * (mean * STREAM_MEMORY_GB * LAMBDA_GB_SECOND + LAMBDA_REQUEST))
}

/// DynamoDB capacity per turn by phase (adapter runs; `capacity`), with the
/// dollars per 1,000 turns at on-demand prices.
fn capacity_table(runs: &[Run]) -> String {
    let mut out = String::from(
        "### What a turn costs: DynamoDB request units by phase (ReturnConsumedCapacity=TOTAL), Lambda\n\n\
         Mean per measured turn; requests / read units / write units. $ at us-east-1 on-demand prices: \
         $0.125 per million read and $0.625 per million write request units; Lambda arm64 \
         $0.0000133334 per GB-s at 256 MB plus $0.20 per million requests.\n\n\
         | mode | before the model | frame log | rest of the turn (start record, finish, budget release) | total | DynamoDB $ / 1,000 turns | Lambda $ / 1,000 turns |\n\
         |---|---|---|---|---|--:|--:|\n",
    );
    for r in runs.iter().filter(|r| !r.capacity.is_empty()) {
        let m = capacity::mean(&r.capacity);
        let cell = |p: capacity::Phase| format!("{:.1} / {:.1} / {:.1}", p.requests, p.read, p.write);
        let lambda = lambda_per_1000(r).map_or("–".into(), |d| format!("{d:.5}"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.5} | {} |",
            r.mode,
            cell(m.before_model),
            cell(m.frame_log),
            cell(m.rest),
            cell(m.total()),
            m.total().dollars_per_1000(),
            lambda
        );
    }
    out
}

/// DynamoDB calls per turn (adapter runs, from the product's spans; see
/// `premodel`): min / median / max over the measured turns.
fn calls_table(runs: &[Run]) -> String {
    let mut out = String::from(
        "### DynamoDB calls per turn (Stop polls aside), min / median / max\n\n\
         | mode | requests before the model | round trips in series before the model | requests per turn |\n\
         |---|---|---|---|\n",
    );
    for r in runs.iter().filter(|r| !r.spans.is_empty()) {
        let calls: Vec<premodel::Calls> = r.turns.iter().filter_map(|t| premodel::calls(t, &r.spans)).collect();
        let spread = |f: fn(&premodel::Calls) -> usize| {
            let mut v: Vec<usize> = calls.iter().map(f).collect();
            v.sort_unstable();
            match (v.first(), v.get(v.len() / 2), v.last()) {
                (Some(a), Some(m), Some(b)) => format!("{a} / {m} / {b}"),
                _ => "–".into(),
            }
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            r.mode,
            spread(|c| c.before_model),
            spread(|c| c.in_series_before_model),
            spread(|c| c.per_turn)
        );
    }
    out
}

/// The 1/5/15-minute load averages: the machine is shared, and the tails
/// move with what else runs on it.
fn loadavg() -> String {
    let l = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// `nproc`, the CPU model and the memory, from /proc.
fn machine() -> String {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    format!("{cpus} CPUs ({model}), {:.1} GiB memory", mem_kib as f64 / (1024.0 * 1024.0))
}
