//! Process start → ready for the first invocation, and the bootstrap's size.
//!
//! "Ready" is the moment the runtime asks for work: the first
//! `GET /2018-06-01/runtime/invocation/next` reaching a Runtime API stand-in on
//! loopback. By then `main` has read its config and built its clients (the
//! DynamoDB client from the SDK's config loader, the model's HTTP client), as
//! in a Lambda cold start after the bootstrap is exec'd. The stand-in never
//! answers: the process is killed once it has asked.
//!
//! [`Function`] spawns the same binary in the same Lambda-like environment for
//! the `runtime` mode, and kills it when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

/// What one spawn showed.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    /// Spawn → first `GET /next`.
    pub ready: Duration,
    /// The process's peak RSS (VmHWM) at that moment, KiB.
    pub rss_kib: Option<u64>,
}

/// Spawns `bin` `runs` times and returns what each start showed.
pub async fn start_to_ready(bin: &Path, env: &[(String, String)], runs: usize) -> Result<Vec<Start>, String> {
    let mut out = Vec::with_capacity(runs);
    for _ in 0..runs {
        out.push(once(bin, env).await?);
    }
    Ok(out)
}

/// The environment Lambda gives a function, pointed at `runtime_api`, plus `env`.
fn lambda_command(bin: &Path, runtime_api: &str, env: &[(String, String)]) -> Command {
    let mut cmd = Command::new(bin);
    // A Lambda-like environment: only what the service sets, plus ours.
    cmd.env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api)
        .env("AWS_LAMBDA_FUNCTION_NAME", "stream")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/stream")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null());
    cmd
}

/// A function process spawned by the bench; killed when dropped.
pub struct Function(Child);

impl Function {
    pub fn spawn(bin: &Path, runtime_api: &str, env: &[(String, String)], log: &Path) -> Result<Function, String> {
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = lambda_command(bin, runtime_api, env)
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        Ok(Function(child))
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn once(bin: &Path, env: &[(String, String)]) -> Result<Start, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let mut cmd = lambda_command(bin, &addr.to_string(), env);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let t0 = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("spawn {}: {e}", bin.display()))?;
    let asked = async {
        loop {
            let (mut tcp, _) = listener.accept().await.map_err(|e| e.to_string())?;
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = tcp.read(&mut buf).await.map_err(|e| e.to_string())?;
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            let at = Instant::now();
            if head.starts_with(b"GET ") && head.windows(16).any(|w| w == b"/invocation/next") {
                return Ok::<_, String>(at);
            }
        }
    };
    let r = tokio::time::timeout(Duration::from_secs(20), asked).await;
    let rss_kib = crate::lambda::rss_kib(child.id()).map(|(peak, _)| peak);
    let _ = child.kill();
    let _ = child.wait();
    match r {
        Ok(Ok(at)) => Ok(Start { ready: at - t0, rss_kib }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!("{} did not ask for an invocation within 20 s", bin.display())),
    }
}

/// Size in bytes and ELF machine of a binary.
pub fn binary(path: &Path) -> Option<(u64, &'static str)> {
    use std::io::Read;
    let meta = std::fs::metadata(path).ok()?;
    let mut head = [0u8; 20];
    std::fs::File::open(path).ok()?.read_exact(&mut head).ok()?;
    // e_machine, little-endian, at offset 18 of the ELF header.
    let arch = match [head[18], head[19]] {
        [0x3e, 0] => "x86_64",
        [0xb7, 0] => "aarch64",
        _ => "unknown",
    };
    Some((meta.len(), arch))
}
