//! Following a trace while a program writes it (`tracekit view --follow`).
//!
//! A [`Tail`] reads a file as it grows: it gives the bytes there are, and at
//! their end, while a program still holds the file open for writing, fails
//! the read with [`io::ErrorKind::WouldBlock`], which the stream readers of
//! both formats take as "no more yet" (they keep a record or packet cut by
//! the writer's last flush and read on once its rest comes). Once no program
//! holds the file open for writing and every byte is read, the read gives the
//! end of the file: the trace is then whole, or ends where the writer was cut
//! off.
//!
//! Who writes the file is told from `/proc` (Linux): a process holding a
//! descriptor of the same file (device and inode) opened for writing or
//! reading and writing. Processes of other users are not seen, so a file
//! written by another user is followed until asked to stop. Without `/proc`,
//! a file is followed until asked to stop.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often [`Tail::wait`] looks at the file's size.
const POLL: Duration = Duration::from_millis(20);

/// How long the file may stay the same size before [`Tail::wait`] asks again
/// whether a program still writes it.
const WRITERS_EVERY: Duration = Duration::from_millis(250);

/// A file read as a program writes it (see the module docs).
#[derive(Debug)]
pub struct Tail {
    file: File,
    path: PathBuf,
    /// Bytes read so far.
    read: u64,
    /// No program writes the file any longer: its end is the trace's.
    ended: bool,
    /// When the writers were last looked for.
    writers_seen: Instant,
}

impl Tail {
    /// Opens `path` to follow it.
    pub fn open(path: &Path) -> crate::Result<Tail> {
        let file = File::open(path).map_err(|source| crate::Error::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let mut tail = Tail {
            file,
            path: path.to_path_buf(),
            read: 0,
            ended: false,
            writers_seen: Instant::now(),
        };
        tail.ended = is_written(path) == Some(false);
        Ok(tail)
    }

    /// The file followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes read so far.
    pub fn position(&self) -> u64 {
        self.read
    }

    /// Whether no program writes the file any longer, so that its end is the
    /// trace's.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// The file's first bytes written so far, at most `n`, which tell its kind
    /// (read apart from the follow, which they do not move).
    pub fn head(&self, n: u64) -> io::Result<Vec<u8>> {
        let mut head = Vec::new();
        File::open(&self.path)?.take(n).read_to_end(&mut head)?;
        Ok(head)
    }

    /// The file's size now.
    fn size(&self) -> u64 {
        self.file.metadata().map_or(0, |m| m.len())
    }

    /// Waits, up to `timeout`, until the file has bytes not read yet or no
    /// program writes it any longer; says whether either holds.
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            if self.ended || self.size() > self.read {
                return true;
            }
            let now = Instant::now();
            if now.duration_since(self.writers_seen) >= WRITERS_EVERY {
                self.writers_seen = now;
                // Read again after: the last bytes may come just before the close.
                if is_written(&self.path) == Some(false) {
                    self.ended = true;
                    return true;
                }
            }
            if now >= until {
                return false;
            }
            std::thread::sleep(POLL.min(until - now));
        }
    }
}

impl Read for Tail {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        if n > 0 || buf.is_empty() {
            self.read += n as u64;
            return Ok(n);
        }
        let size = self.size();
        if size < self.read {
            return Err(io::Error::other(format!(
                "{} shrank from {} to {size} bytes while it was followed",
                self.path.display(),
                self.read
            )));
        }
        match self.ended {
            true => Ok(0),
            false => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

/// Whether a process holds `path` open for writing (see the module docs):
/// `None` where that cannot be told.
pub fn is_written(path: &Path) -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let target = std::fs::metadata(path).ok()?;
        let id = (target.dev(), target.ino());
        let processes = std::fs::read_dir("/proc").ok()?;
        for process in processes.flatten() {
            let name = process.file_name();
            if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
                continue;
            }
            let Ok(fds) = std::fs::read_dir(process.path().join("fd")) else {
                continue;
            };
            for fd in fds.flatten() {
                let Ok(m) = std::fs::metadata(fd.path()) else {
                    continue;
                };
                if (m.dev(), m.ino()) != id {
                    continue;
                }
                let info = process.path().join("fdinfo").join(fd.file_name());
                if opened_for_writing(&std::fs::read_to_string(info).unwrap_or_default()) {
                    return Some(true);
                }
            }
        }
        Some(false)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        None
    }
}

/// Whether a descriptor's `/proc/PID/fdinfo/FD` text says it was opened for
/// writing (`O_WRONLY` or `O_RDWR` in its octal `flags`).
fn opened_for_writing(fdinfo: &str) -> bool {
    let flags = fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok());
    flags.is_some_and(|f| f & 0o3 != 0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_is_followed_while_written_and_ends_when_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let mut writer = File::create(&path).unwrap();
        assert_eq!(is_written(&path), Some(true));
        let mut tail = Tail::open(&path).unwrap();
        assert!(!tail.is_ended());
        let mut got = Vec::new();
        let mut buf = [0u8; 4];
        let err = tail.read(&mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(!tail.wait(Duration::from_millis(300)));
        writer.write_all(b"hello").unwrap();
        assert!(tail.wait(Duration::from_secs(5)));
        loop {
            match tail.read(&mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, b"hello");
        writer.write_all(b" world").unwrap();
        drop(writer);
        assert_eq!(is_written(&path), Some(false));
        // The rest, then the end once the writer is seen gone.
        let started = Instant::now();
        let ended = loop {
            assert!(tail.wait(Duration::from_secs(5)));
            match tail.read_to_end(&mut got) {
                Ok(_) => break started.elapsed(),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(got, b"hello world");
        assert!(tail.is_ended());
        assert!(ended < Duration::from_secs(2), "{ended:?}");
        // A file no one writes is whole from the start.
        assert!(Tail::open(&path).unwrap().is_ended());
    }

    #[test]
    fn reads_the_access_mode_from_fdinfo() {
        assert!(opened_for_writing("pos:\t0\nflags:\t0100001\nmnt_id:\t1\n"));
        assert!(opened_for_writing("flags:\t02\n"));
        assert!(!opened_for_writing("pos:\t0\nflags:\t0100000\n"));
        assert!(!opened_for_writing(""));
    }
}
