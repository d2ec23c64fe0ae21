//! The `perf record` command for a program or a running process.
//!
//! Intel PT branches when the machine has the `intel_pt` PMU (and sampling was
//! not asked for), in snapshot mode unless the whole run is wanted: magic-trace's
//! recording. Otherwise `cpu-clock` samples with call stacks, unwound with frame
//! pointers or DWARF. The plan says why it chose what it chose, for the user.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Error, Result};
use tracekit_callstack::writer::TraceScope;

/// The sysfs folder of the Intel PT PMU, present where perf can record it.
pub const INTEL_PT_PMU: &str = "/sys/bus/event_source/devices/intel_pt";

/// Whether this machine can record Intel PT.
pub fn has_intel_pt() -> bool {
    Path::new(INTEL_PT_PMU).exists()
}

/// How sampled call stacks are unwound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum CallGraph {
    /// Frame pointers (cheap; needs code built with frame pointers).
    #[cfg_attr(feature = "clap", value(name = "fp"))]
    FramePointers,
    /// DWARF unwinding of copied stacks (works without frame pointers; large files).
    Dwarf,
}

/// What is recorded.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// A program started with these arguments.
    Command(Vec<String>),
    /// A running process, for this many seconds (until interrupted when `None`).
    Pid {
        /// The process.
        pid: u32,
        /// How long.
        seconds: Option<f64>,
    },
}

impl Target {
    /// The target a command line names: the running process `pid` (for `seconds`, or
    /// until interrupted), else `command` (a program and its arguments), which must be
    /// one that can be started.
    pub fn new(pid: Option<u32>, seconds: Option<f64>, command: &[String]) -> Result<Target> {
        match (pid, command.first()) {
            (Some(pid), _) => Ok(Target::Pid { pid, seconds }),
            (None, Some(program)) if !runnable(program) => Err(Error::NotRunnable(program.clone())),
            (None, Some(_)) => Ok(Target::Command(command.to_vec())),
            (None, None) => Err(Error::NothingToRecord),
        }
    }
}

/// What `perf record` is asked for.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// The perf executable.
    pub perf: PathBuf,
    /// Where perf writes the recording.
    pub data: PathBuf,
    /// What is recorded.
    pub target: Target,
    /// The address spaces recorded.
    pub scope: TraceScope,
    /// Sample even where Intel PT exists.
    pub sampling: bool,
    /// Whether the machine has Intel PT (see [`has_intel_pt`]).
    pub has_intel_pt: bool,
    /// How samples' stacks are unwound.
    pub call_graph: CallGraph,
    /// Samples per second.
    pub frequency: u32,
    /// Intel PT: the whole run rather than the last snapshot at exit.
    pub full_execution: bool,
}

/// The command to run, and what it records and why.
#[derive(Debug)]
pub struct RecordPlan {
    /// `perf record ...`, to be run with the terminal's standard streams.
    pub command: Command,
    /// Whether it records Intel PT branches (else sampled stacks).
    pub intel_pt: bool,
    /// Why, in a sentence for the user.
    pub why: String,
}

fn scope_suffix(scope: TraceScope) -> &'static str {
    match scope {
        TraceScope::User => "u",
        TraceScope::Kernel => "k",
        TraceScope::UserAndKernel => "uk",
    }
}

/// The `perf record` command for `options`.
pub fn plan(options: &RecordOptions) -> RecordPlan {
    let intel_pt = options.has_intel_pt && !options.sampling;
    let scope = scope_suffix(options.scope);
    let mut cmd = Command::new(&options.perf);
    cmd.arg("record")
        .arg("-o")
        .arg(&options.data)
        .arg("--timestamp");
    let why = if intel_pt {
        cmd.arg(format!(
            "--event=intel_pt/cyc=1,cyc_thresh=1,mtc_period=0/{scope}"
        ));
        if !options.full_execution {
            cmd.arg("--snapshot=e");
        }
        "the intel_pt PMU is present: recording Intel PT branches".to_string()
    } else {
        let (callgraph, unwound) = match options.call_graph {
            CallGraph::FramePointers => ("fp", "frame pointers"),
            CallGraph::Dwarf => ("dwarf", "DWARF"),
        };
        cmd.arg(format!("--event=cpu-clock:{scope}"))
            .arg("-F")
            .arg(options.frequency.to_string())
            .arg("--call-graph")
            .arg(callgraph);
        let reason = if options.has_intel_pt {
            "--sampling was given".to_string()
        } else {
            format!("this machine has no Intel PT (no {INTEL_PT_PMU})")
        };
        format!(
            "{reason}: sampling cpu-clock call stacks at {} Hz, unwound with {unwound}",
            options.frequency
        )
    };
    match &options.target {
        Target::Pid { pid, seconds } => {
            cmd.arg("-p").arg(pid.to_string());
            if let Some(secs) = seconds {
                cmd.arg("--").arg("sleep").arg(format!("{secs}"));
            }
        }
        Target::Command(args) => {
            cmd.arg("--").args(args);
        }
    }
    RecordPlan {
        command: cmd,
        intel_pt,
        why,
    }
}

/// Whether `program` can be started: a path to an executable file, or a name
/// found on `PATH`.
pub fn runnable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(Path::new(program));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| executable(&d.join(program))))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_a_process_or_a_command_that_can_run() {
        let pid = Target::new(Some(42), Some(1.5), &[]).unwrap();
        assert_eq!(
            pid,
            Target::Pid {
                pid: 42,
                seconds: Some(1.5)
            }
        );
        let sh = ["sh".to_string(), "-c".to_string(), "true".to_string()];
        assert_eq!(
            Target::new(None, None, &sh).unwrap(),
            Target::Command(sh.to_vec())
        );
        let missing = ["/nonexistent/prog".to_string()];
        assert!(
            matches!(Target::new(None, None, &missing), Err(Error::NotRunnable(p)) if p == missing[0])
        );
        assert!(matches!(
            Target::new(None, None, &[]),
            Err(Error::NothingToRecord)
        ));
    }

    fn options(has_intel_pt: bool) -> RecordOptions {
        RecordOptions {
            perf: "perf".into(),
            data: "out/perf.data".into(),
            target: Target::Command(vec!["./prog".into(), "arg".into()]),
            scope: TraceScope::User,
            sampling: false,
            has_intel_pt,
            call_graph: CallGraph::FramePointers,
            frequency: 999,
            full_execution: false,
        }
    }

    fn args(plan: &RecordPlan) -> Vec<String> {
        plan.command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn intel_pt_where_the_machine_has_it_as_a_snapshot() {
        let p = plan(&options(true));
        assert!(p.intel_pt);
        assert_eq!(
            args(&p),
            [
                "record",
                "-o",
                "out/perf.data",
                "--timestamp",
                "--event=intel_pt/cyc=1,cyc_thresh=1,mtc_period=0/u",
                "--snapshot=e",
                "--",
                "./prog",
                "arg"
            ]
        );
        assert!(p.why.contains("intel_pt PMU is present"), "{}", p.why);
    }

    #[test]
    fn sampling_elsewhere_says_why() {
        let mut o = options(false);
        o.scope = TraceScope::UserAndKernel;
        o.call_graph = CallGraph::Dwarf;
        o.target = Target::Pid {
            pid: 42,
            seconds: Some(1.5),
        };
        let p = plan(&o);
        assert!(!p.intel_pt);
        assert_eq!(
            args(&p),
            [
                "record",
                "-o",
                "out/perf.data",
                "--timestamp",
                "--event=cpu-clock:uk",
                "-F",
                "999",
                "--call-graph",
                "dwarf",
                "-p",
                "42",
                "--",
                "sleep",
                "1.5"
            ]
        );
        assert!(
            p.why.starts_with("this machine has no Intel PT"),
            "{}",
            p.why
        );
        assert!(
            p.why.ends_with("at 999 Hz, unwound with DWARF"),
            "{}",
            p.why
        );
        let mut o = options(true);
        o.sampling = true;
        assert!(plan(&o).why.starts_with("--sampling was given"));
    }

    #[test]
    fn programs_are_found_on_the_path() {
        assert!(runnable("sh"));
        assert!(runnable("/bin/sh"));
        assert!(!runnable("/bin/no-such-program-here"));
        assert!(!runnable("no-such-program-here"));
        assert!(!runnable("/etc/passwd"));
    }
}
