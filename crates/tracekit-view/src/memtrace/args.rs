//! A memtrace endpoint's parameters: the options of the subcommand it
//! answers as, parsed by clap as the command line parses them, and the one
//! place where the two forms a request gives them in meet ([`arguments`]).

use clap::Parser;
use tracekit_analysis::query::{DiffQuery, FlameQuery, HotPathsQuery, TimelineQuery, TopQuery};

use super::{Endpoint, Error};
use crate::api::Params;

#[derive(Parser)]
#[command(name = "top", no_binary_name = true, disable_help_flag = true)]
pub(super) struct TopArgs {
    #[command(flatten)]
    pub(super) query: TopQuery,
}

#[derive(Parser)]
#[command(name = "timeline", no_binary_name = true, disable_help_flag = true)]
pub(super) struct TimelineArgs {
    #[command(flatten)]
    pub(super) query: TimelineQuery,
    /// The compared trace's timeline rather than the served one's (the page's
    /// own option, for drawing both).
    #[arg(long)]
    pub(super) base: bool,
}

#[derive(Parser)]
#[command(name = "flamegraph", no_binary_name = true, disable_help_flag = true)]
pub(super) struct FlameArgs {
    #[command(flatten)]
    pub(super) query: FlameQuery,
}

#[derive(Parser)]
#[command(name = "diff", no_binary_name = true, disable_help_flag = true)]
pub(super) struct DiffArgs {
    #[command(flatten)]
    pub(super) query: DiffQuery,
}

#[derive(Parser)]
#[command(name = "hot-paths", no_binary_name = true, disable_help_flag = true)]
pub(super) struct HotPathsArgs {
    #[command(flatten)]
    pub(super) query: HotPathsQuery,
}

#[derive(Parser)]
#[command(name = "flametree", no_binary_name = true, disable_help_flag = true)]
pub(super) struct FlameTreeArgs {
    #[command(flatten)]
    pub(super) query: FlameQuery,
    /// The frames from the root to the node to show, in order (repeatable).
    #[arg(long, value_name = "FRAME")]
    pub(super) focus: Vec<String>,
    /// Leave out callees under this share of the shown node's weight.
    #[arg(long, default_value_t = 0.0005)]
    pub(super) min_share: f64,
    /// Show at most this many levels below the shown node.
    #[arg(long, value_name = "N")]
    pub(super) depth: Option<usize>,
    /// The tree of the stacks reversed: allocating frame first, then callers.
    #[arg(long, conflicts_with = "fragment")]
    pub(super) invert: bool,
    /// A call sequence anywhere in the stacks, caller first (repeatable): show
    /// its callees and its callers.
    #[arg(long, value_name = "FRAME")]
    pub(super) fragment: Vec<String>,
    /// The differential tree against the compared trace: each node also with
    /// its weights there (`base_total`, `base_self`).
    #[arg(long, conflicts_with = "fragment")]
    pub(super) diff: bool,
    /// With `--diff`: the baseline is this trace's allocations made between
    /// two times (the rest of the filter the same), not the compared trace.
    #[arg(long, num_args = 2, value_names = ["T1", "T2"], value_parser = time, requires = "diff")]
    pub(super) base_between: Option<Vec<tracekit_memtrace::Timedelta>>,
}

#[derive(Parser)]
#[command(name = "functions", no_binary_name = true, disable_help_flag = true)]
pub(super) struct FunctionsArgs {
    #[command(flatten)]
    pub(super) query: FlameQuery,
    /// Rank by the weight of the stacks a function ends (`self`) instead of
    /// those it appears in (`total`).
    #[arg(long, value_parser = ["total", "self"], default_value = "total")]
    pub(super) sort: String,
    /// Answer this many functions (0: all).
    #[arg(long, default_value_t = 200)]
    pub(super) limit: usize,
    /// Each function's weights here and in the compared trace, the largest
    /// change first (`--sort` is then ignored).
    #[arg(long)]
    pub(super) diff: bool,
    /// With `--diff`: the baseline is this trace's allocations made between
    /// two times, as `flametree`'s.
    #[arg(long, num_args = 2, value_names = ["T1", "T2"], value_parser = time, requires = "diff")]
    pub(super) base_between: Option<Vec<tracekit_memtrace::Timedelta>>,
}

/// The command line `params` ask `endpoint`'s subcommand (see the module
/// docs): the `arg` parameters as they are, then each named option as its
/// arguments (`by=function`: `--by`, `function`). The one place the two
/// forms meet.
pub fn arguments(endpoint: Endpoint, params: Params) -> Result<Vec<String>, Error> {
    let (args, named): (Params, Params) = params.into_iter().partition(|(name, _)| name == "arg");
    let mut args: Vec<String> = args.into_iter().map(|(_, value)| value).collect();
    if named.is_empty() {
        return Ok(args);
    }
    let command = endpoint
        .options()
        .unwrap_or_else(|| clap::Command::new("info"));
    let known = || {
        let mut names: Vec<&str> = command
            .get_arguments()
            .filter_map(|a| a.get_long())
            .collect();
        names.sort_unstable();
        match names.is_empty() {
            true => "none".to_string(),
            false => names.join(", "),
        }
    };
    for (name, value) in &named {
        let long = name.replace('_', "-");
        let Some(arg) = command
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()))
        else {
            return Err(Error::BadArguments(format!(
                "unknown parameter {name:?}: this endpoint's options are {}",
                known()
            )));
        };
        let flag = matches!(arg.get_action(), clap::ArgAction::SetTrue);
        let values = arg.get_num_args().map_or(1, |r| r.max_values());
        if flag {
            match value.as_str() {
                "" | "true" | "1" => args.push(format!("--{long}")),
                "false" | "0" => {}
                _ => {
                    return Err(Error::BadArguments(format!(
                        "{name}={value}: a flag is on given alone or as =true, off as =false"
                    )));
                }
            }
        } else if values > 1 {
            args.push(format!("--{long}"));
            args.extend(value.split(',').map(str::to_string));
        } else {
            args.push(format!("--{long}"));
            args.push(value.clone());
        }
    }
    Ok(args)
}

/// A time as the subcommands' options take it (`12.5s`, `300ms`).
fn time(s: &str) -> Result<tracekit_memtrace::Timedelta, String> {
    tracekit_analysis::parse_time(s).map_err(|e| e.to_string())
}

pub(super) fn parse<P: Parser>(args: &[String]) -> Result<P, Error> {
    P::try_parse_from(args).map_err(|e| Error::BadArguments(e.render().to_string()))
}
