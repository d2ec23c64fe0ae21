//! Naming the recording's distinct addresses on a second core while the
//! records are read, with names kept across runs.
//!
//! An object's DWARF is costly to load before its first lookup: glibc's debug
//! file has compressed sections, inflated whole. So a helper thread loads each
//! object as soon as a sample first holds an address in it, and names each
//! address as soon as a sample first holds it, while the reader goes on reading
//! records; once every record is read, the reader waits for the addresses the
//! helper has not named yet.
//!
//! With a cache directory, an object with a build id is first looked up in
//! its names file ([`tracekit_symbols::cache`]); its DWARF is loaded only for
//! addresses the file does not have, and the file is rewritten with them.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

use tracekit_symbols::cache::CachedNames;
use tracekit_symbols::{DebugDirs, ObjectIdentity, ObjectSymbols};

use super::process::regular_file;

/// Where names come from: debug files, and the cache directory if any.
#[derive(Clone, Debug)]
struct Config {
    debug: DebugDirs,
    cache: Option<PathBuf>,
}

/// What the reader tells the helper.
enum Message {
    /// Object `.0` at path `.1` holds addresses to name.
    Object(usize, Box<str>),
    /// Key `.0`, at file offset `.2` in object `.1`.
    Key(u32, usize, Option<u64>),
}

/// One object's symbols and names.
struct Slot {
    path: Box<str>,
    identity: Option<ObjectIdentity>,
    /// The names file's entries, when the object has a build id and a cache
    /// directory is given.
    cached: Option<CachedNames>,
    /// Loaded when an address is not in `cached`; `None` inside when that failed.
    symbols: Option<Option<ObjectSymbols>>,
    /// Names were added to `cached`.
    added: bool,
}

/// What naming found: each key of an object, with its names.
#[derive(Default)]
pub(super) struct Named {
    /// Key index, object, names (innermost first).
    pub(super) keys: Vec<(u32, usize, Vec<Box<str>>)>,
    /// Addresses named from the cache.
    pub(super) from_cache: u64,
}

/// The helper thread, or the messages kept for this thread when there is none.
pub(super) struct Symbolizer {
    config: Config,
    sender: Option<Sender<Message>>,
    helper: Option<JoinHandle<Named>>,
    started: bool,
    kept: Vec<Message>,
}

impl Symbolizer {
    /// A symbolizer reading debug files from `debug`, and keeping names under
    /// `cache` when given.
    pub(super) fn new(debug: DebugDirs, cache: Option<PathBuf>) -> Symbolizer {
        Symbolizer {
            config: Config { debug, cache },
            sender: None,
            helper: None,
            started: false,
            kept: Vec::new(),
        }
    }

    /// Starts the helper (on the first object: a recording without samples
    /// needs none).
    fn start(&mut self) {
        self.started = true;
        let (sender, messages) = channel::<Message>();
        let config = self.config.clone();
        let helper = std::thread::Builder::new()
            .name("symbolize".into())
            .spawn(move || run(&config, messages));
        if let Ok(h) = helper {
            self.sender = Some(sender);
            self.helper = Some(h);
        }
    }

    /// Object `object` (at `path`) holds addresses to name: the helper loads it.
    pub(super) fn object(&mut self, object: usize, path: &str) {
        self.send(Message::Object(object, path.into()));
    }

    /// Key `key` is the address at `offset` in object `object`'s file.
    pub(super) fn key(&mut self, key: u32, object: usize, offset: Option<u64>) {
        self.send(Message::Key(key, object, offset));
    }

    fn send(&mut self, m: Message) {
        if !self.started {
            self.start();
        }
        let m = match &self.sender {
            Some(s) => match s.send(m) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => m,
        };
        self.sender = None;
        self.kept.push(m);
    }

    /// Every key named: waits for the helper.
    pub(super) fn finish(mut self) -> Named {
        self.sender = None;
        let mut named = match self.helper.take().map(JoinHandle::join) {
            Some(Ok(named)) => named,
            _ => Named::default(),
        };
        if !self.kept.is_empty() {
            let rest = run(&self.config, std::mem::take(&mut self.kept));
            named.keys.extend(rest.keys);
            named.from_cache += rest.from_cache;
        }
        named
    }
}

/// Loads and names what `messages` say, then keeps the new names.
fn run(config: &Config, messages: impl IntoIterator<Item = Message>) -> Named {
    let mut slots: Vec<Option<Slot>> = Vec::new();
    let mut named = Named::default();
    for m in messages {
        match m {
            Message::Object(object, path) => {
                if slots.len() <= object {
                    slots.resize_with(object + 1, || None);
                }
                slots[object] = Some(Slot::new(path, config));
            }
            Message::Key(key, object, offset) => {
                let names = match slots.get_mut(object) {
                    Some(Some(slot)) => slot.name(offset, config, &mut named.from_cache),
                    _ => Vec::new(),
                };
                named.keys.push((key, object, names));
            }
        }
    }
    for slot in slots.iter().flatten() {
        slot.save(config);
    }
    named
}

impl Slot {
    /// Reads the object's names file, and loads its symbols unless the file has
    /// names (then only when an address is missing from it).
    fn new(path: Box<str>, config: &Config) -> Slot {
        let mut slot = Slot {
            path,
            identity: None,
            cached: None,
            symbols: None,
            added: false,
        };
        let path = Path::new(&*slot.path);
        if !(slot.path.starts_with('/') && regular_file(path)) {
            slot.symbols = Some(None);
            return slot;
        }
        if let Some(dir) = &config.cache {
            slot.identity = ObjectIdentity::of(path, &config.debug);
            if let Some(id) = &slot.identity {
                let cached = CachedNames::load(dir, id);
                let known = !cached.is_empty();
                slot.cached = Some(cached);
                if known {
                    return slot;
                }
            }
        }
        slot.symbols = Some(ObjectSymbols::load(path, &config.debug));
        slot
    }

    /// The names of the address at file offset `offset`, innermost first.
    fn name(
        &mut self,
        offset: Option<u64>,
        config: &Config,
        from_cache: &mut u64,
    ) -> Vec<Box<str>> {
        let Some(offset) = offset else {
            return Vec::new();
        };
        if let Some(names) = self.cached.as_ref().and_then(|c| c.get(offset)) {
            *from_cache += 1;
            return names.to_vec();
        }
        let path = Path::new(&*self.path);
        let symbols = self
            .symbols
            .get_or_insert_with(|| ObjectSymbols::load(path, &config.debug));
        let Some(symbols) = symbols else {
            return Vec::new();
        };
        let frames = match symbols.file_offset_to_svma(offset) {
            Some(svma) => symbols.frames(svma),
            None => Vec::new(),
        };
        let names: Vec<Box<str>> = frames
            .into_iter()
            .map(|f| f.function.into_boxed_str())
            .collect();
        if let Some(cached) = &mut self.cached {
            let refs: Vec<&str> = names.iter().map(|n| &**n).collect();
            cached.insert(offset, &refs);
            self.added = true;
        }
        names
    }

    /// Writes the names added to the object's names file.
    fn save(&self, config: &Config) {
        if let (true, Some(dir), Some(id), Some(cached)) =
            (self.added, &config.cache, &self.identity, &self.cached)
        {
            // A cache that cannot be written costs the next run time, not this
            // one its result.
            let _ = cached.save(dir, id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both threads work on symbols: they must move between threads.
    #[test]
    fn symbols_move_between_threads() {
        fn send<T: Send>() {}
        send::<ObjectSymbols>();
        send::<CachedNames>();
    }
}
