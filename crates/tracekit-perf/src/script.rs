//! The `perf script` child that turns a `perf.data` file into the text the
//! decoder reads.
//!
//! The field lists come from the parser (`tracekit_callstack::script`), whose
//! fast path depends on them; `--ns` gives nanosecond timestamps. A recording's
//! mode, when not given, is told by its events: a recording with an `intel_pt`
//! event is read as branches, anything else as sampled call stacks.

use std::io::Read;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use tracekit_callstack::script::{INTEL_PT_FIELDS, INTEL_PT_ITRACE, SAMPLING_FIELDS};

use crate::{Error, Mode, Result};

/// The recorded events of a perf.data file, one per line, as `perf evlist`
/// prints them.
pub fn evlist(perf: &Path, data: &Path) -> Result<String> {
    let out = Command::new(perf)
        .arg("evlist")
        .arg("-i")
        .arg(data)
        .stderr(Stdio::piped())
        .output()
        .map_err(|source| Error::Run {
            program: perf.to_path_buf(),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::Failed {
            command: format!("perf evlist -i {}", data.display()),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The mode of a recording whose events are `evlist` (see [`evlist`]).
pub fn mode_of_events(evlist: &str) -> Mode {
    if evlist.lines().any(|l| l.starts_with("intel_pt")) {
        Mode::IntelPt
    } else {
        Mode::Sampling
    }
}

/// The arguments of `perf script` for a recording in `mode` (not
/// [`Mode::Auto`]), after `script -i DATA`.
pub fn script_args(mode: Mode) -> Vec<&'static str> {
    match mode {
        Mode::IntelPt => vec!["--ns", INTEL_PT_ITRACE, "-F", INTEL_PT_FIELDS],
        Mode::Sampling | Mode::Auto => vec!["--ns", "-F", SAMPLING_FIELDS],
    }
}

/// A running `perf script`.
pub struct PerfScript {
    child: Child,
    mode: Mode,
}

impl PerfScript {
    /// Starts `perf script` on `data`; [`Mode::Auto`] asks `perf evlist` first.
    pub fn spawn(perf: &Path, data: &Path, mode: Mode) -> Result<PerfScript> {
        let mode = match mode {
            Mode::Auto => mode_of_events(&evlist(perf, data)?),
            m => m,
        };
        let child = Command::new(perf)
            .arg("script")
            .arg("-i")
            .arg(data)
            .args(script_args(mode))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| Error::Run {
                program: perf.to_path_buf(),
                source,
            })?;
        Ok(PerfScript { child, mode })
    }

    /// The mode it reads the recording in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Its standard output (the text), taken once.
    ///
    /// # Panics
    /// When taken twice.
    pub fn take_stdout(&mut self) -> ChildStdout {
        #[allow(clippy::expect_used)]
        self.child
            .stdout
            .take()
            .expect("perf script's output is taken once")
    }

    /// Waits for it to exit; fails with what it printed when it failed.
    pub fn finish(mut self) -> Result<()> {
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            // Its message is all there is to say; a read error loses only that.
            let _ = e.read_to_string(&mut err);
        }
        let status = self.child.wait().map_err(|source| Error::Read {
            name: "perf script".into(),
            source,
        })?;
        if !status.success() {
            return Err(Error::Failed {
                command: "perf script".into(),
                status,
                stderr: err.trim().to_string(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_come_from_the_recorded_events() {
        assert_eq!(mode_of_events("intel_pt//u\ndummy:u\n"), Mode::IntelPt);
        assert_eq!(mode_of_events("cpu-clock:u\n"), Mode::Sampling);
        assert_eq!(mode_of_events(""), Mode::Sampling);
    }

    #[test]
    fn each_mode_asks_for_the_fields_its_parser_reads() {
        assert_eq!(
            script_args(Mode::IntelPt),
            ["--ns", "--itrace=bep", "-F", INTEL_PT_FIELDS]
        );
        assert_eq!(script_args(Mode::Sampling), ["--ns", "-F", SAMPLING_FIELDS]);
    }
}
