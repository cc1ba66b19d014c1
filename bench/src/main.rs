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
//! - `cargo-lambda`: the real release `stream` binary under
//!   `cargo lambda watch`, through the real runtime client and the Runtime
//!   API socket, run with `RUNTIME_API_NODELAY=off` (Nagle on: before the
//!   fix) and with the default (after).
//! - `startup`: spawn → first `GET /next` of the release binary.
//! - `all` (default): all of the above, then one table.
//!
//! Needs `AWS_ENDPOINT_URL_DYNAMODB` (DynamoDB Local); `scripts/bench.sh`
//! starts it and builds everything first. Prints Markdown to stdout, progress
//! to stderr.

mod adapter;
mod driver;
mod lambda;
mod startup;
mod stats;

use clap::{Parser, ValueEnum};
use driver::{Driver, TurnTiming};
use stats::{Figure, Row, Summary, Target};
use std::path::PathBuf;
use std::time::Duration;
use tests::{Reply, ScriptedLlm};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    All,
    Adapter,
    CargoLambda,
    Startup,
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
    #[arg(long, default_value_t = 40)]
    turns: usize,
    /// Unmeasured turns first, so connections and caches are warm.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// The scripted model's time to first token.
    #[arg(long, default_value_t = 200)]
    ttft_ms: u64,
    /// Tokens (text chunks) per answer.
    #[arg(long, default_value_t = 50)]
    tokens: usize,
    /// Time between two tokens.
    #[arg(long, default_value_t = 10)]
    token_gap_ms: u64,
    /// cargo-lambda mode: which runs (`off` = before the Nagle fix).
    #[arg(long, value_enum, default_value = "both")]
    nodelay: Nodelay,
    /// cargo-lambda mode, default run: the session is filled up to this many
    /// turns (with an instant model) and the function's peak RSS is read then.
    #[arg(long, default_value_t = 100)]
    session_turns: usize,
    /// Spawns of the release binary for start → ready.
    #[arg(long, default_value_t = 20)]
    startup_runs: usize,
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

    fn target_dir(&self) -> PathBuf {
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| self.repo.join("target"))
    }
}

/// The measured turns of one run, and what else it found.
struct Run {
    mode: String,
    turns: Vec<TurnTiming>,
    /// (peak, current) RSS of the function process in KiB, and after how many turns.
    rss: Option<(u64, u64, usize)>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = Args::parse();
    args.repo = args.repo.canonicalize().unwrap_or(args.repo.clone());
    if std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_none() && args.mode != Mode::Startup {
        eprintln!("AWS_ENDPOINT_URL_DYNAMODB is not set: run scripts/bench.sh, which starts DynamoDB Local");
        std::process::exit(2);
    }
    let mut runs = Vec::new();
    let mut failed = false;
    if matches!(args.mode, Mode::All | Mode::Adapter) {
        match adapter_run(&args).await {
            Ok(r) => runs.push(r),
            Err(e) => {
                eprintln!("adapter run failed: {e}");
                failed = true;
            }
        }
    }
    if matches!(args.mode, Mode::All | Mode::CargoLambda) {
        let variants: &[bool] = match args.nodelay {
            Nodelay::Off => &[false],
            Nodelay::On => &[true],
            Nodelay::Both => &[false, true],
        };
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
    let mut start_times = None;
    if matches!(args.mode, Mode::All | Mode::Startup) {
        let bin = args.target_dir().join("release/stream");
        eprintln!("start → ready: {} spawns of {}", args.startup_runs, bin.display());
        match startup::start_to_ready(&bin, &function_env("bench-startup", "http://127.0.0.1:9/v1", true), args.startup_runs)
            .await
        {
            Ok(t) => start_times = Some(t),
            Err(e) => {
                eprintln!("start → ready failed: {e}");
                failed = true;
            }
        }
    }
    print_report(&args, &runs, start_times.as_deref());
    if failed {
        std::process::exit(1);
    }
}

/// The handler in this process, behind the local HTTP adapter.
async fn adapter_run(args: &Args) -> Result<Run, String> {
    eprintln!("adapter: the handler in-process behind a local hyper adapter");
    let dynamo = tests::dynamo_client().await;
    let table = tests::fresh_table(&dynamo).await;
    let llm = ScriptedLlm::start().await;
    llm.set_default(args.model());
    let config = tests::test_config(&table, &llm.base_url());
    let app = shared::http::StreamApp::with_dynamo(config, dynamo);
    let (addr, probes) = adapter::serve(app).await;
    let mut d = Driver::new(format!("http://{addr}/"), "bench-adapter", llm, driver::pieces(args.tokens), Some(probes));
    let turns = measure(&mut d, args, Duration::from_secs(30)).await?;
    Ok(Run { mode: "adapter".into(), turns, rss: None })
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
    let llm = ScriptedLlm::start().await;
    llm.set_default(args.model());
    let mut watch = lambda::Watch::start(&args.repo, label, &function_env(&table, &llm.base_url(), nodelay))
        .map_err(|e| format!("cargo lambda watch: {e}"))?;
    watch.ready(Duration::from_secs(300)).await?;
    let mut d = Driver::new(watch.url("stream"), "bench-lambda", llm.clone(), driver::pieces(args.tokens), None);
    // The first invocation may wait for cargo lambda to build and boot the function.
    eprintln!("{mode}: first invocation (may wait for a build; log {})", watch.log.display());
    d.turn(Duration::from_secs(1200)).await.map_err(|e| format!("first turn: {e}"))?;
    let pid = watch.function_pid("stream").ok_or("no `stream` process under cargo lambda watch")?;
    let turns = measure(&mut d, args, Duration::from_secs(30)).await?;
    let mut rss = None;
    if nodelay {
        // Fill the session with quick turns, then read the peak.
        llm.set_default(args.instant_model());
        while (d.turns_done as usize) < args.session_turns {
            d.turn(Duration::from_secs(30)).await?;
        }
        if watch.function_pid("stream") != Some(pid) {
            return Err("the stream process was restarted during the run".into());
        }
        let (peak, now) = lambda::rss_kib(pid).ok_or("cannot read the stream process's /proc status")?;
        rss = Some((peak, now, d.turns_done as usize));
    }
    Ok(Run { mode: mode.into(), turns, rss })
}

/// Warm-up turns, then the measured ones.
async fn measure(d: &mut Driver, args: &Args, timeout: Duration) -> Result<Vec<TurnTiming>, String> {
    for _ in 0..args.warmup {
        d.turn(timeout).await?;
    }
    let mut out = Vec::with_capacity(args.turns);
    for i in 0..args.turns {
        out.push(d.turn(timeout).await.map_err(|e| format!("measured turn {}: {e}", i + 1))?);
    }
    Ok(out)
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
    if !nodelay {
        env.push(("RUNTIME_API_NODELAY".into(), "off".into()));
    }
    env
}

fn print_report(args: &Args, runs: &[Run], start_times: Option<&[Duration]>) {
    println!("## Results\n");
    println!(
        "Scripted model: TTFT {} ms, {} tokens {} ms apart; {} warm-up + {} measured turns per run, one session per run.\n",
        args.ttft_ms, args.tokens, args.token_gap_ms, args.warmup, args.turns
    );
    println!("Machine: {}\n", machine());

    let mut rows = Vec::new();
    for r in runs {
        let col = |f: &dyn Fn(&TurnTiming) -> Option<Duration>| -> Option<Summary> {
            Summary::of(&r.turns.iter().filter_map(f).collect::<Vec<_>>())
        };
        let adapter = r.mode == "adapter";
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
            rows.push(Row {
                metric: "handler entry → first frame to hyper".into(),
                mode: r.mode.clone(),
                summary: col(&|t| t.entry_to_first_frame),
                targets: vec![],
            });
        }
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
        rows.push(Row {
            metric: "`done` after last `text_delta`".into(),
            mode: r.mode.clone(),
            summary: col(&|t| Some(t.done_after_last_delta)),
            targets: vec![Target::p99_ms(5, "≤ 5 ms (p99; issue 10)")],
        });
        let spacing: Vec<Duration> = r.turns.iter().flat_map(|t| t.spacing_errors.iter().copied()).collect();
        rows.push(Row {
            metric: "frame spacing error |client gap − model gap|".into(),
            mode: r.mode.clone(),
            summary: Summary::of(&spacing),
            targets: vec![Target::p99_ms(3, "≤ 3 ms (p99; issue 10)")],
        });
    }
    println!("### Per turn\n");
    println!("{}", stats::latency_table(&rows));

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
    if let Some(s) = start_times.and_then(Summary::of) {
        figures.push(Figure {
            metric: format!("process start → ready (spawn → first `GET /next`, {} spawns)", s.n),
            value: format!("p50 {} ms, p95 {} ms, max {} ms", stats::ms(s.p50), stats::ms(s.p95), stats::ms(s.max)),
            target: "≤ 15 ms (p50)".into(),
            met: Some(s.p50 <= Duration::from_millis(15)),
        });
    }
    let target = args.target_dir();
    for (what, path) in [
        ("release bootstrap size (`target/release/stream`)", target.join("release/stream")),
        ("`cargo lambda build --release --arm64` bootstrap size", target.join("lambda/stream/bootstrap")),
    ] {
        if let Some((bytes, arch)) = startup::binary(&path) {
            figures.push(Figure {
                metric: what.into(),
                value: format!("{:.2} MiB ({bytes} bytes, {arch})", bytes as f64 / (1024.0 * 1024.0)),
                target: String::new(),
                met: None,
            });
        }
    }
    println!("### Per function\n");
    println!("{}", stats::figure_table(&figures));

    // The worst turn of each run, frame by frame: where a stall shows.
    println!("### Frame arrivals of each run's worst turn (ms after the model's first token)\n");
    for r in runs {
        let worst = r
            .turns
            .iter()
            .max_by_key(|t| t.spacing_errors.iter().copied().max().unwrap_or_default())
            .map(|t| &t.arrivals);
        if let Some(arr) = worst {
            let model: Vec<String> = arr.iter().take(12).map(|(m, _)| format!("{:.0}", m.as_secs_f64() * 1e3)).collect();
            let client: Vec<String> =
                arr.iter().take(12).map(|(_, c)| format!("{:.0}", c.as_secs_f64() * 1e3)).collect();
            println!("- {}: model wrote `{}`; client received `{}`", r.mode, model.join(", "), client.join(", "));
        }
    }
    println!();
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
