//! The "still working" line: a spinner, what the agent is doing and the
//! seconds since the message was sent, redrawn in place on stderr while
//! nothing streams. Only on a terminal: when stderr is not a TTY it never
//! writes, so piped output carries no carriage returns or escape codes.

use std::io::Write;
use std::time::{Duration, Instant};

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/// How often the line is redrawn.
pub const TICK: Duration = Duration::from_millis(100);

pub struct Progress {
    enabled: bool,
    started: Instant,
    label: Option<String>,
    /// Whether a line is on screen now (and must be erased before other output).
    drawn: bool,
    frame: usize,
}

impl Progress {
    /// `enabled`: whether stderr is a terminal (the caller decides, so tests can).
    pub fn new(enabled: bool, started: Instant) -> Self {
        Progress { enabled, started, label: None, drawn: false, frame: 0 }
    }

    /// Shows `label` from the next tick on; `None` hides the line.
    pub fn set(&mut self, label: Option<String>) {
        self.label = label;
        if self.label.is_none() {
            self.clear();
        }
    }

    pub fn active(&self) -> bool {
        self.enabled && self.label.is_some()
    }

    /// The line as drawn: `⠋ thinking… 3.2s`.
    pub fn line(&self) -> Option<String> {
        let label = self.label.as_deref()?;
        let dots = if label.ends_with('…') { "" } else { "…" };
        let secs = self.started.elapsed().as_secs_f64();
        Some(format!("{} {label}{dots} {secs:.1}s", FRAMES[self.frame % FRAMES.len()]))
    }

    /// Redraws the line (call every [`TICK`] while [`Self::active`]).
    pub fn tick(&mut self) {
        if !self.active() {
            return;
        }
        self.frame += 1;
        if let Some(line) = self.line() {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r{line}\x1b[K");
            let _ = e.flush();
            self.drawn = true;
        }
    }

    /// Erases the line, so other output starts on a clean line.
    pub fn clear(&mut self) {
        if std::mem::take(&mut self.drawn) {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[K");
            let _ = e.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_what_and_how_long() {
        let mut p = Progress::new(true, Instant::now() - Duration::from_millis(3200));
        assert_eq!(p.line(), None);
        p.set(Some("thinking".into()));
        let line = p.line().unwrap();
        assert!(line.starts_with("⠋ thinking… 3.") && line.ends_with('s'), "{line}");
        p.set(Some("creating task “X”…".into()));
        assert!(p.line().unwrap().contains("creating task “X”… 3."));
    }

    #[test]
    fn off_a_terminal_it_is_never_active() {
        let mut p = Progress::new(false, Instant::now());
        p.set(Some("thinking".into()));
        assert!(!p.active());
        p.tick();
        assert!(!p.drawn);
    }
}
