//! The real `stream` binary under `cargo lambda watch`, and what /proc says
//! about processes.
//!
//! `cargo lambda watch` is started in a process group of its own and stopped
//! by that group's id when the [`Watch`] is dropped, so the bench ends exactly
//! what it started. It runs with `--ignore-changes`: other work in the same
//! tree must not rebuild and restart the function in the middle of a run.
//! The environment goes in an `--env-file`, because `--env-var` splits values
//! on commas.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Watch {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Watch {
    /// Starts `cargo lambda watch --release` from `repo` with `env` for the functions.
    pub fn start(repo: &Path, label: &str, env: &[(String, String)]) -> std::io::Result<Watch> {
        let dir = repo.join(".local");
        fs::create_dir_all(&dir)?;
        let pid = std::process::id();
        let env_file = dir.join(format!("bench-{pid}-{label}.env"));
        let text: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        fs::write(&env_file, text)?;
        let log = dir.join(format!("bench-lambda-{label}.log"));
        let out = fs::File::create(&log)?;
        let port = free_port()?;
        let mut cmd = Command::new("cargo");
        cmd.args(["lambda", "watch", "--release", "--ignore-changes", "--invoke-address", "127.0.0.1"])
            .arg("--invoke-port")
            .arg(port.to_string())
            .arg("--env-file")
            .arg(&env_file)
            .current_dir(repo)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn()?;
        Ok(Watch { child, port, log })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, function: &str) -> String {
        format!("http://127.0.0.1:{}/lambda-url/{function}/", self.port)
    }

    /// Waits until the invoke port accepts connections.
    pub async fn ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.is_ok() {
                return Ok(());
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                return Err(format!("cargo lambda watch exited with {st}; see {}", self.log.display()));
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("cargo lambda watch did not listen within {timeout:?}"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The function process `name` that this watch runs, if it is running.
    pub fn function_pid(&self, name: &str) -> Option<u32> {
        descendants(self.pid()).into_iter().find(|p| comm(*p).as_deref() == Some(name))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let pgid = self.child.id();
        let group = format!("-{pgid}");
        // Everything cargo lambda started is in its group, or below it; note
        // who is below it now, since they are reparented once it is gone.
        let below: Vec<(u32, Option<String>)> = descendants(pgid).into_iter().map(|p| (p, comm(p))).collect();
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = self.child.wait();
        for (p, name) in below {
            // A process that set up a group of its own escaped the group kill;
            // the same pid with the same name a moment later is still it.
            if name.is_some() && comm(p) == name {
                let _ = Command::new("kill").args(["-KILL", &p.to_string()]).stderr(Stdio::null()).status();
            }
        }
    }
}

/// A TCP port on 127.0.0.1 that is free right now.
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The command name of a process (`/proc/<pid>/comm`).
pub fn comm(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/comm")).ok().map(|s| s.trim_end().to_string())
}

fn ppid(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(1)?.parse().ok()
}

fn parent_chain_contains(mut pid: u32, ancestor: u32) -> bool {
    for _ in 0..64 {
        match ppid(pid) {
            Some(p) if p == ancestor => return true,
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}

/// Every live process below `root`.
pub fn descendants(root: u32) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else { return vec![] };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| parent_chain_contains(*p, root))
        .collect()
}

/// (VmHWM, VmRSS) of a process in KiB: its peak and current resident memory.
pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}
