//! Where results go: files written atomically, standard output, and what an
//! interrupted command leaves behind (nothing).
//!
//! A file output is written to a temporary file in the destination's folder
//! and renamed over the destination only once everything is written, flushed
//! and synced. Until then the previous file, if any, is untouched; on an error
//! the temporary file is deleted, and on Ctrl-C (or SIGTERM, SIGHUP) the
//! interrupt handler deletes every temporary file still pending before the
//! process exits. A command with several outputs (an export of several traces)
//! keeps those already in place, and the interrupt's message names them
//! ([`commit_noted`]). An output that is the same file as one of the command's
//! inputs is refused before anything is opened. Devices and pipes (`/dev/null`,
//! `/dev/full`, a FIFO) are written in place: there is nothing to rename.
//!
//! Every write error names its file, and keeps its `io::ErrorKind`, so that the
//! one broken-pipe rule in `main` can recognise a closed pipe (`| head`).

use std::cell::RefCell;
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tracekit_columns::rename::RenameFile;

use crate::{Error, Result};

/// Temporary paths not yet renamed into place: what an interrupt deletes.
static PENDING: Mutex<Vec<Pending>> = Mutex::new(Vec::new());

/// Set while a child (perf) owns the terminal's Ctrl-C: the interrupt is its to
/// act on, and tracekit carries on with what it wrote.
static CHILD_HANDLES_INTERRUPTS: AtomicBool = AtomicBool::new(false);

/// Set by an interrupt once [`stop_on_interrupt`] was called.
static STOP: Mutex<Option<std::sync::Arc<AtomicBool>>> = Mutex::new(None);

#[derive(PartialEq, Eq)]
enum Pending {
    File(PathBuf),
    Dir(PathBuf),
}

fn pending() -> std::sync::MutexGuard<'static, Vec<Pending>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Installs the handler that deletes pending temporary files when the user
/// interrupts a command (Ctrl-C, SIGTERM, SIGHUP) and exits with status 130.
pub fn install_interrupt_handler() {
    // Failure (a handler already installed) only costs the cleanup.
    let _ = ctrlc::set_handler(|| {
        if CHILD_HANDLES_INTERRUPTS.load(Ordering::SeqCst) {
            return;
        }
        if let Some(stop) = STOP.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            stop.store(true, Ordering::SeqCst);
            return;
        }
        // Holding the lock also waits for a rename in progress to finish.
        let mut list = pending();
        for p in list.drain(..) {
            let _ = match p {
                Pending::File(p) => fs::remove_file(p),
                Pending::Dir(p) => fs::remove_dir_all(p),
            };
        }
        let written = written();
        if written.is_empty() {
            tell("tracekit: interrupted; no output was written");
        } else {
            tell(format_args!(
                "tracekit: interrupted; written before that: {}; nothing else was written",
                written.join("; ")
            ));
        }
        std::process::exit(130);
    });
}

/// From now on, an interrupt (Ctrl-C, SIGTERM, SIGHUP) sets the returned flag
/// rather than ending the process: for a command that runs until interrupted
/// (a server) and then stops by itself, cleanly.
pub fn stop_on_interrupt() -> std::sync::Arc<AtomicBool> {
    let mut stop = STOP.lock().unwrap_or_else(|e| e.into_inner());
    std::sync::Arc::clone(stop.get_or_insert_with(Default::default))
}

/// Outputs already in place, for the message of an interrupt: a command with
/// several outputs (an export of several traces) is cut between two of them.
static WRITTEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn written() -> std::sync::MutexGuard<'static, Vec<String>> {
    WRITTEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `commit`, which moves a finished output into place, and once it succeeds
/// names the output (`what`) in the message of a later interrupt. An interrupt
/// waits for `commit` to finish, so that its message is true: `commit` must not
/// make or drop an [`OutputFile`] or a [`TempDir`] (they take the same lock).
pub fn commit_noted<T, E>(
    what: &str,
    commit: impl FnOnce() -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    let _interrupts_wait = pending();
    let result = commit();
    if result.is_ok() {
        written().push(what.to_string());
    }
    result
}

/// While alive, Ctrl-C is left to a child process (which receives it from the
/// terminal too): `perf record` finishes writing its data, and tracekit goes on.
pub struct ChildHandlesInterrupts(());

// No `Default`: making one has an effect (interrupts change hands).
#[allow(clippy::new_without_default)]
impl ChildHandlesInterrupts {
    /// Hands Ctrl-C to the child until dropped.
    pub fn new() -> Self {
        CHILD_HANDLES_INTERRUPTS.store(true, Ordering::SeqCst);
        ChildHandlesInterrupts(())
    }
}

impl Drop for ChildHandlesInterrupts {
    fn drop(&mut self) {
        CHILD_HANDLES_INTERRUPTS.store(false, Ordering::SeqCst);
    }
}

/// Whether `a` and `b` name the same file (device and inode, links followed).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Refuses an output that is one of the inputs (`-` inputs are standard input).
pub fn refuse_same_file(output: &Path, inputs: &[&Path]) -> Result<()> {
    for input in inputs {
        if input.as_os_str() != "-" && same_file(output, input) {
            return Err(Error::SameFile {
                output: output.to_path_buf(),
                input: input.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// The error of a write to `what`, naming it and keeping the error's kind.
fn named(what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("writing {what}: {e}"))
}

/// A file output, renamed into place by [`OutputFile::commit`].
pub struct OutputFile {
    /// The name the user gave, for messages.
    shown: String,
    /// Written aside, renamed over the destination (a symlink's target, so
    /// that the link stays a link).
    temp: Option<RenameFile>,
    /// A device or pipe, written in place.
    direct: Option<File>,
}

impl OutputFile {
    /// Starts writing `path`, which must not be any of `inputs`.
    pub fn create(path: &Path, inputs: &[&Path]) -> Result<OutputFile> {
        refuse_same_file(path, inputs)?;
        let shown = path.display().to_string();
        let existing = fs::metadata(path).ok();
        let create = |reason: String| Error::Create {
            path: path.to_path_buf(),
            reason,
        };
        if let Some(m) = &existing {
            if m.is_dir() {
                return Err(create("it is a directory".into()));
            }
            if !m.is_file() {
                let file = fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|e| create(e.to_string()))?;
                return Ok(OutputFile {
                    shown,
                    temp: None,
                    direct: Some(file),
                });
            }
        }
        // Replace a symlink's target, not the link: the file lands there.
        let target =
            if existing.is_some() && fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink()) {
                fs::canonicalize(path).map_err(|e| create(e.to_string()))?
            } else {
                path.to_path_buf()
            };
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut list = pending();
        let temp = RenameFile::create(
            &target,
            &format!(".{name}."),
            ".tmp",
            Some(new_file_permissions()),
        )
        .map_err(|e| create(io_reason(&e, &dir)))?;
        list.push(Pending::File(temp.temp_path().to_path_buf()));
        drop(list);
        if let Some(m) = &existing {
            // The umask applied to the mode at creation; the old file's mode wins.
            temp.file()
                .set_permissions(m.permissions())
                .map_err(|e| create(e.to_string()))?;
        }
        Ok(OutputFile {
            shown,
            temp: Some(temp),
            direct: None,
        })
    }

    fn file(&mut self) -> &mut File {
        match (&mut self.temp, &mut self.direct) {
            (Some(t), _) => t.file_mut(),
            (None, Some(f)) => f,
            // `commit` consumes `self`, so one of the two is always here.
            (None, None) => unreachable!("an output file without a file"),
        }
    }

    /// Finishes the file: syncs it and renames it over the destination.
    pub fn commit(mut self) -> Result<()> {
        let shown = self.shown.clone();
        if let Some(f) = self.direct.take() {
            // Devices report some errors only at sync (`/dev/full` at write).
            return match f.sync_all() {
                Err(e) if e.kind() != io::ErrorKind::InvalidInput => Err(named(&shown, e).into()),
                _ => Ok(()),
            };
        }
        let Some(temp) = self.temp.take() else {
            return Ok(());
        };
        // Disks report some errors only at sync (a full disk on NFS, say).
        temp.file().sync_all().map_err(|e| named(&shown, e))?;
        let mut list = pending();
        let temp_path = temp.temp_path().to_path_buf();
        // A failed rename removes the temporary file.
        let result = temp.commit();
        list.retain(|p| *p != Pending::File(temp_path.clone()));
        drop(list);
        result.map_err(|e| Error::Create {
            path: PathBuf::from(&shown),
            reason: e.to_string(),
        })?;
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = self.file().write(buf);
        r.map_err(|e| named(&self.shown, e))
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = self.file().flush();
        r.map_err(|e| named(&self.shown, e))
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Some(temp) = self.temp.take() {
            // Deleted under the lock, so an interrupt cannot miss it.
            let mut list = pending();
            let path = temp.temp_path().to_path_buf();
            drop(temp);
            list.retain(|p| *p != Pending::File(path.clone()));
        }
    }
}

/// Permissions of a new output: the usual 0666 less the umask, which `open(2)`
/// applies (a temporary file's default 0600 would hide the result from others).
fn new_file_permissions() -> fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    fs::Permissions::from_mode(0o666)
}

/// Why a file in `dir` cannot be created, in the user's words.
fn io_reason(e: &io::Error, dir: &Path) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!("the folder {} does not exist", dir.display()),
        _ => e.to_string(),
    }
}

/// A temporary folder beside `final_path`, for a child process (perf) that writes
/// a file by its name; [`TempDir::commit`] moves `name` from it to `final_path`.
pub struct TempDir {
    dir: Option<tempfile::TempDir>,
}

impl TempDir {
    /// A fresh folder in `parent`.
    pub fn new_in(parent: &Path) -> Result<TempDir> {
        let mut list = pending();
        let dir = tempfile::Builder::new()
            .prefix(".tracekit.")
            .tempdir_in(parent)
            .map_err(|e| Error::Create {
                path: parent.to_path_buf(),
                reason: format!("cannot create a folder there: {e}"),
            })?;
        list.push(Pending::Dir(dir.path().to_path_buf()));
        Ok(TempDir { dir: Some(dir) })
    }

    /// The folder's path.
    pub fn path(&self) -> &Path {
        match &self.dir {
            Some(d) => d.path(),
            None => Path::new(""),
        }
    }

    /// Renames `name` from this folder to `final_path`.
    pub fn commit(&self, name: &str, final_path: &Path) -> Result<()> {
        let from = self.path().join(name);
        fs::rename(&from, final_path).map_err(|e| Error::Create {
            path: final_path.to_path_buf(),
            reason: format!("cannot move {} there: {e}", from.display()),
        })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(d) = self.dir.take() {
            let mut list = pending();
            let path = d.path().to_path_buf();
            drop(d);
            list.retain(|p| *p != Pending::Dir(path.clone()));
        }
    }
}

/// Buffered standard output whose errors say so.
pub struct Stdout {
    inner: BufWriter<io::StdoutLock<'static>>,
}

impl Stdout {
    /// Standard output, buffered.
    pub fn new() -> Stdout {
        Stdout {
            inner: BufWriter::with_capacity(1 << 16, io::stdout().lock()),
        }
    }

    /// Flushes; the error, if any, is the command's.
    pub fn finish(mut self) -> Result<()> {
        self.flush()?;
        Ok(())
    }
}

impl Default for Stdout {
    fn default() -> Self {
        Stdout::new()
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner
            .write(buf)
            .map_err(|e| named("standard output", e))
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner
            .write_all(buf)
            .map_err(|e| named("standard output", e))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().map_err(|e| named("standard output", e))
    }
}

/// Standard output for a command that streams standard input: shared with the
/// input's reader ([`InteractiveStdout::reader`]), which flushes it before each
/// read, so everything printed is out before the command waits for more input.
#[derive(Clone)]
pub struct InteractiveStdout(Rc<RefCell<Stdout>>);

impl InteractiveStdout {
    /// Standard output, buffered until the next read of the input.
    pub fn new() -> InteractiveStdout {
        InteractiveStdout(Rc::new(RefCell::new(Stdout::new())))
    }

    /// `input`, flushing this output before each read.
    pub fn reader<R: Read>(&self, input: R) -> FlushingReader<R> {
        FlushingReader {
            input,
            out: self.clone(),
        }
    }

    /// Flushes; the error, if any, is the command's.
    pub fn finish(self) -> Result<()> {
        self.0.borrow_mut().flush()?;
        Ok(())
    }
}

impl Default for InteractiveStdout {
    fn default() -> Self {
        InteractiveStdout::new()
    }
}

impl Write for InteractiveStdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.borrow_mut().write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

/// An input that flushes an [`InteractiveStdout`] before each read.
pub struct FlushingReader<R> {
    input: R,
    out: InteractiveStdout,
}

impl<R: Read> Read for FlushingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // A failed flush is reported by the next write, as a write error; here
        // it would pass for an input error.
        let _ = self.out.0.borrow_mut().flush();
        self.input.read(buf)
    }
}

/// Writes `text` to standard output and flushes it.
pub fn print(text: &str) -> Result<()> {
    let mut out = Stdout::new();
    out.write_all(text.as_bytes())?;
    out.finish()
}

/// `-q`: no progress, summaries or notes on stderr (warnings and errors stay).
static QUIET: AtomicBool = AtomicBool::new(false);

/// Sets `-q` for the whole command.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether `-q` was given.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Prints a summary or a note on stderr, unless `-q`.
pub fn say(message: impl std::fmt::Display) {
    if !quiet() {
        tell(message);
    }
}

/// Prints `message` and a newline on stderr, even with `-q`. Unlike `eprintln!`
/// it never panics: a stderr that was closed (the reader of a pipe went away)
/// must not turn the end of a command, or the interrupt handler, into a panic
/// that leaves the process running or changes its exit status.
pub fn tell(message: impl std::fmt::Display) {
    let _ = writeln!(io::stderr(), "{message}");
}

/// Writes `text`, ending in a newline, to `path` (`-`: standard output; see
/// [`Output`]).
pub fn write_text(path: &Path, inputs: &[&Path], text: &str) -> Result<()> {
    let mut out = Output::create(path, inputs)?;
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    out.finish()
}

/// Writes `text` to the file `path` atomically.
pub fn write_file(path: &Path, inputs: &[&Path], text: &str) -> Result<()> {
    let mut out = OutputFile::create(path, inputs)?;
    out.write_all(text.as_bytes())?;
    out.commit()
}

/// An output named on the command line: a file written atomically (see
/// [`OutputFile`]), or standard output for `-`. A name ending in `.gz` is written
/// gzip-compressed.
pub struct Output(io::BufWriter<Compression>);

// The buffer is the outer layer, so that a writer's many small writes cost a
// copy each, not a dispatch through the layers below.
enum Compression {
    Plain(Target),
    // Boxed: the encoder's state is several hundred bytes with zlib-rs.
    Gzip(Box<flate2::write::GzEncoder<Target>>),
}

enum Target {
    File(OutputFile),
    Stdout(Stdout),
}

impl Output {
    /// Starts writing `path` (`-`: standard output), which must not be any of
    /// `inputs`.
    pub fn create(path: &Path, inputs: &[&Path]) -> Result<Output> {
        let target = if crate::input::is_stdin(path) {
            Target::Stdout(Stdout::new())
        } else {
            Target::File(OutputFile::create(path, inputs)?)
        };
        let inner = if path.extension().is_some_and(|e| e == "gz") {
            let gz = flate2::write::GzEncoder::new(target, flate2::Compression::default());
            Compression::Gzip(Box::new(gz))
        } else {
            Compression::Plain(target)
        };
        Ok(Output(io::BufWriter::with_capacity(1 << 16, inner)))
    }

    /// Finishes the output: the compressed stream's end, then the file's commit
    /// (or standard output's flush). An error names the output.
    pub fn finish(self) -> Result<()> {
        let target = match self.0.into_inner().map_err(|e| e.into_error())? {
            Compression::Plain(t) => t,
            Compression::Gzip(g) => g.finish()?,
        };
        match target {
            Target::File(f) => f.commit(),
            Target::Stdout(s) => s.finish(),
        }
    }
}

impl Write for Target {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Target::File(f) => f.write(buf),
            Target::Stdout(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Target::File(f) => f.flush(),
            Target::Stdout(s) => s.flush(),
        }
    }
}

impl Write for Compression {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Compression::Plain(t) => t.write(buf),
            Compression::Gzip(g) => g.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Compression::Plain(t) => t.flush(),
            Compression::Gzip(g) => g.flush(),
        }
    }
}

impl Write for Output {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn files_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn committed_output_replaces_the_old_file_and_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        fs::write(&out, "old").unwrap();
        fs::set_permissions(&out, fs::Permissions::from_mode(0o640)).unwrap();
        let mut f = OutputFile::create(&out, &[]).unwrap();
        f.write_all(b"new").unwrap();
        // Until the commit the old content stays, beside one temporary file.
        assert_eq!(fs::read_to_string(&out).unwrap(), "old");
        assert_eq!(files_in(dir.path()).len(), 2);
        f.commit().unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "new");
        assert_eq!(files_in(dir.path()), ["out.txt"]);
        let mode = fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }

    #[test]
    fn an_output_dropped_uncommitted_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        fs::write(&out, "old").unwrap();
        let mut f = OutputFile::create(&out, &[]).unwrap();
        f.write_all(b"partial").unwrap();
        drop(f);
        assert_eq!(fs::read_to_string(&out).unwrap(), "old");
        assert_eq!(files_in(dir.path()), ["out.txt"]);
        let ours = |p: &Pending| matches!(p, Pending::File(f) if f.starts_with(dir.path()));
        assert!(!pending().iter().any(ours));
    }

    #[test]
    fn an_output_that_is_an_input_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.ctf");
        fs::write(&input, "data").unwrap();
        // The same file under another name is still the input.
        let alias = dir.path().join("alias.ctf");
        std::os::unix::fs::symlink(&input, &alias).unwrap();
        for out in [&input, &alias] {
            let err = OutputFile::create(out, &[&input]).err().unwrap();
            assert!(matches!(err, Error::SameFile { .. }), "{err}");
        }
        assert_eq!(fs::read_to_string(&input).unwrap(), "data");
        assert_eq!(files_in(dir.path()), ["alias.ctf", "in.ctf"]);
    }

    #[test]
    fn outputs_that_cannot_be_created_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let err = OutputFile::create(dir.path(), &[]).err().unwrap();
        assert_eq!(
            err.to_string(),
            format!("cannot write {}: it is a directory", dir.path().display())
        );
        let missing = dir.path().join("no/such/out.txt");
        let err = OutputFile::create(&missing, &[]).err().unwrap();
        assert!(err.to_string().contains("does not exist"), "{err}");
    }

    #[test]
    fn a_symlinked_output_replaces_its_target_and_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.txt");
        let link = dir.path().join("link.txt");
        fs::write(&target, "old").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut f = OutputFile::create(&link, &[]).unwrap();
        f.write_all(b"new").unwrap();
        f.commit().unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
    }

    #[test]
    fn gz_outputs_are_compressed_and_others_are_not() {
        use std::io::Read;
        let dir = tempfile::tempdir().unwrap();
        for name in ["out.json", "out.json.gz"] {
            let path = dir.path().join(name);
            let mut o = Output::create(&path, &[]).unwrap();
            o.write_all(b"{}\n").unwrap();
            o.finish().unwrap();
            let bytes = fs::read(&path).unwrap();
            let text = if name.ends_with(".gz") {
                let mut s = String::new();
                flate2::read::GzDecoder::new(&bytes[..])
                    .read_to_string(&mut s)
                    .unwrap();
                s
            } else {
                String::from_utf8(bytes).unwrap()
            };
            assert_eq!(text, "{}\n", "{name}");
        }
        assert_eq!(files_in(dir.path()), ["out.json", "out.json.gz"]);
    }

    #[test]
    fn a_failed_write_to_a_device_is_an_error_naming_it() {
        let dev = Path::new("/dev/full");
        if !dev.exists() {
            return;
        }
        let mut f = OutputFile::create(dev, &[]).unwrap();
        let err = f
            .write_all(&[0; 1 << 16])
            .and_then(|_| f.flush())
            .unwrap_err();
        assert!(err.to_string().starts_with("writing /dev/full:"), "{err}");
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
    }
}
