//! The command line's one convention for outputs: which file a command writes when
//! `-o` is not given, and which format it writes, from `--json`/`--svg` or the
//! output's extension, so that a name and its contents never disagree silently
//! (`-o graph.svg` holding folded text).

use std::path::{Path, PathBuf};

/// What a command writes, known by the extension its files carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Lines of text: folded stacks, CSV, a table.
    Text,
    /// JSON.
    Json,
    /// An SVG image.
    Svg,
    /// A Fuchsia trace (`.fxt`).
    Fxt,
    /// A memtrace trace (`.ctf`).
    Memtrace,
    /// A gzipped pprof profile (`.pb.gz`).
    Pprof,
}

impl Format {
    /// The extension of its files (`txt` for text, which has no single one).
    pub fn extension(self) -> &'static str {
        match self {
            Format::Text => "txt",
            Format::Json => "json",
            Format::Svg => "svg",
            Format::Fxt => "fxt",
            Format::Memtrace => "ctf",
            Format::Pprof => "pb.gz",
        }
    }

    /// The format `path`'s extension names, looking past a final `.gz` (written
    /// compressed); `None` for extensions that name no format here (`.folded`,
    /// `.csv`, none), which any text output may carry.
    pub fn of_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        let ext = Path::new(name).extension()?.to_str()?;
        [
            Format::Json,
            Format::Svg,
            Format::Fxt,
            Format::Memtrace,
            Format::Pprof,
        ]
        .into_iter()
        .find(|f| f.extension().trim_end_matches(".gz") == ext)
    }

    fn describe(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "JSON",
            Format::Svg => "SVG",
            Format::Fxt => "an FXT trace",
            Format::Memtrace => "a memtrace trace",
            Format::Pprof => "a pprof profile",
        }
    }
}

/// An output name whose extension says another format than the one written.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{}: this command writes {} here, but the name says {}; name the file .{}{}",
    .path.display(),
    .writes.describe(),
    .named.describe(),
    .writes.extension(),
    .hint
)]
pub struct FormatMismatch {
    /// The output, as given.
    pub path: PathBuf,
    /// What would be written.
    pub writes: Format,
    /// What the name says.
    pub named: Format,
    /// What else the user could do (`, or leave out --json`), or nothing.
    pub hint: &'static str,
}

/// The format of an output that can take several: `flag` (`--json`, `--svg`) when
/// given, else what `output`'s extension names among `choices`, else `fallback`.
/// A name whose extension names another format than the one chosen is refused.
pub fn choose_format(
    output: Option<&Path>,
    flag: Option<Format>,
    choices: &[Format],
    fallback: Format,
) -> Result<Format, FormatMismatch> {
    let named = output.and_then(Format::of_path);
    let chosen = match (flag, named) {
        (Some(f), _) => f,
        (None, Some(n)) if choices.contains(&n) => n,
        _ => fallback,
    };
    match (output, named) {
        (Some(path), Some(named)) if named != chosen => Err(FormatMismatch {
            path: path.to_path_buf(),
            writes: chosen,
            named,
            hint: hint(flag, choices, named),
        }),
        _ => Ok(chosen),
    }
}

/// The other way out of a mismatch: when the name says a format the command can
/// write, leaving out the flag that chose another.
fn hint(flag: Option<Format>, choices: &[Format], named: Format) -> &'static str {
    match flag {
        _ if !choices.contains(&named) => "",
        Some(Format::Json) => ", or leave out --json",
        Some(Format::Svg) => ", or leave out --svg",
        _ => "",
    }
}

/// Checks the name of an output that has one format: an extension naming another
/// format is refused (a name without a known extension is accepted).
pub fn check_format(output: &Path, writes: Format) -> Result<(), FormatMismatch> {
    choose_format(Some(output), Some(writes), &[writes], writes).map(|_| ())
}

/// A file given to an option that writes SVG only (`--svg`, `--plot`) whose name
/// does not end in `.svg`.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{flag}: {advice}")]
pub struct NotSvg {
    /// The option.
    pub flag: &'static str,
    /// What to do.
    pub advice: &'static str,
}

/// Checks the file given to `flag`, which writes SVG only.
pub fn require_svg(path: &Path, flag: &'static str) -> Result<(), NotSvg> {
    let advice = match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => return Ok(()),
        Some(e) if e.eq_ignore_ascii_case("png") => {
            "only SVG output is supported; name the file .svg"
        }
        _ => "the output file must end in .svg",
    };
    Err(NotSvg { flag, advice })
}

/// The file a command writes in format `format` when `-o` is not given: the input
/// with the format's extension (`x.ctf` gives `x.fxt`), `INPUT.copy.EXT` when the
/// input already has that extension (a copy), and `trace.EXT` without an input
/// file (standard input, or nothing read).
pub fn default_output(input: Option<&Path>, format: Format) -> PathBuf {
    let ext = format.extension();
    let input = input.filter(|p| !crate::input::is_stdin(p) && p.file_stem().is_some());
    match input {
        Some(p) if p.extension().is_some_and(|e| e.eq_ignore_ascii_case(ext)) => {
            p.with_extension(format!("copy.{ext}"))
        }
        Some(p) => p.with_extension(ext),
        None => PathBuf::from(format!("trace.{ext}")),
    }
}

/// `-o FILE`, also taken as a last positional argument (the older spelling of the
/// commands that had one).
#[cfg(feature = "clap")]
#[derive(clap::Args, Clone, Debug, Default)]
pub struct OutputArg {
    /// The file to write (`-`: standard output, where the format allows).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The same as `-o FILE`.
    #[arg(value_name = "OUTPUT", conflicts_with = "output")]
    pub output_positional: Option<PathBuf>,
}

#[cfg(feature = "clap")]
impl OutputArg {
    /// The output given, either way.
    pub fn path(&self) -> Option<&Path> {
        self.output.as_deref().or(self.output_positional.as_deref())
    }

    /// The output given, else [`default_output`] for `input` and `format`.
    pub fn or_default(&self, input: Option<&Path>, format: Format) -> PathBuf {
        (self.path().map(PathBuf::from)).unwrap_or_else(|| default_output(input, format))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const FLAME: &[Format] = &[Format::Text, Format::Json, Format::Svg];

    #[test]
    fn a_pprof_profile_is_named_pb_gz() {
        let out = default_output(Some(Path::new("run/heap.ctf")), Format::Pprof);
        assert_eq!(out, Path::new("run/heap.pb.gz"));
        assert_eq!(Format::of_path(&out), Some(Format::Pprof));
        assert!(check_format(Path::new("p.json"), Format::Pprof).is_err());
    }

    #[test]
    fn format_follows_the_flag_then_the_extension() {
        let choose =
            |o: Option<&str>, flag| choose_format(o.map(Path::new), flag, FLAME, Format::Text);
        assert_eq!(choose(None, None), Ok(Format::Text));
        assert_eq!(choose(Some("f.svg"), None), Ok(Format::Svg));
        assert_eq!(choose(Some("F.SVG"), None), Ok(Format::Svg));
        assert_eq!(choose(Some("f.json"), None), Ok(Format::Json));
        assert_eq!(choose(Some("f.folded"), None), Ok(Format::Text));
        assert_eq!(choose(Some("f.json.gz"), None), Ok(Format::Json));
        assert_eq!(choose(Some("f"), Some(Format::Json)), Ok(Format::Json));
        assert_eq!(choose(None, Some(Format::Svg)), Ok(Format::Svg));
    }

    #[test]
    fn a_name_that_says_another_format_is_refused_naming_both() {
        let e = choose_format(
            Some(Path::new("x.svg")),
            Some(Format::Json),
            FLAME,
            Format::Text,
        )
        .unwrap_err();
        assert_eq!(e.writes, Format::Json);
        assert_eq!(e.named, Format::Svg);
        let msg = e.to_string();
        assert!(
            msg.starts_with("x.svg: this command writes JSON here, but the name says SVG"),
            "{msg}"
        );
        assert!(
            msg.ends_with("name the file .json, or leave out --json"),
            "{msg}"
        );
        // A format the command cannot write is refused, not written as its fallback.
        let text_only = [Format::Text];
        let e =
            choose_format(Some(Path::new("x.svg")), None, &text_only, Format::Text).unwrap_err();
        assert_eq!((e.writes, e.named, e.hint), (Format::Text, Format::Svg, ""));
        assert!(check_format(Path::new("t.json"), Format::Fxt).is_err());
        assert!(check_format(Path::new("t.fxt.gz"), Format::Fxt).is_ok());
        assert!(check_format(Path::new("t.bin"), Format::Fxt).is_ok());
    }

    #[test]
    fn svg_only_options_want_svg_names() {
        assert_eq!(require_svg(Path::new("a.SVG"), "--svg"), Ok(()));
        let png = require_svg(Path::new("a.png"), "--plot").unwrap_err();
        assert_eq!(
            png.to_string(),
            "--plot: only SVG output is supported; name the file .svg"
        );
        let none = require_svg(Path::new("a"), "--svg").unwrap_err();
        assert_eq!(none.to_string(), "--svg: the output file must end in .svg");
    }

    #[test]
    fn default_names_follow_the_input() {
        let d = |i: Option<&str>, f| default_output(i.map(Path::new), f);
        assert_eq!(
            d(Some("dir/a.ctf"), Format::Fxt),
            PathBuf::from("dir/a.fxt")
        );
        assert_eq!(d(Some("a.fxt"), Format::Json), PathBuf::from("a.json"));
        assert_eq!(d(Some("perf.data"), Format::Fxt), PathBuf::from("perf.fxt"));
        assert_eq!(
            d(Some("a.ctf"), Format::Memtrace),
            PathBuf::from("a.copy.ctf")
        );
        assert_eq!(d(Some("-"), Format::Fxt), PathBuf::from("trace.fxt"));
        assert_eq!(d(None, Format::Memtrace), PathBuf::from("trace.ctf"));
    }
}
