//! A memtrace trace as the tables `traces`, `allocations`, `backtraces` and
//! `locations` ([`crate::schema`]).
//!
//! One pass over the events. A backtrace gets an id the first time an allocation
//! uses it ([`BacktraceIds`], hashing only the entries past the allocation's common
//! prefix) and its rows are written then; a location code's locations are written
//! the first time a backtrace holds it. An allocation's row is written when its
//! object is collected, or at the end for the objects that lived to it. So the export
//! keeps the sampled objects still live and 20 bytes per distinct backtrace, and
//! nothing else of the events. Packets the reader skips (a forked child's, a
//! truncated last one) are reported as warnings, as `tracekit memtrace dump` reports
//! them.

use arrow_array::builder::{BooleanBuilder, StringBuilder};
use std::collections::hash_map::Entry;
use tracekit_analysis::live::LiveTable;
use tracekit_analysis::symbols::{
    EMPTY_BACKTRACE, FrameLabel, FrameSkip, Naming, entry_site_label, site_label,
};

use rustc_hash::FxHashMap;
use tracekit_memtrace::{AllocationSource, DomainId, Event, LocationCode, LocationLookup, Reader};

use crate::schema::{ALLOCATIONS, BACKTRACES, LOCATIONS, TRACES};
use crate::table::{F64, I32, I64, OptI32, OptI64, TableWriter, columns};
use crate::traces::{self, TraceRow};
use crate::{ExportOptions, Result, Summary, TraceFiles};

columns!(
    /// `allocations` after `trace_id`.
    AllocCols {
        obj_id: I64,
        domain: I32,
        time_us: I64,
        source: StringBuilder,
        nsamples: I64,
        length_words: I64,
        estimated_bytes: F64,
        promoted: BooleanBuilder,
        promote_time_us: OptI64,
        collect_time_us: OptI64,
        backtrace_id: I64,
        site: StringBuilder,
    }
);

columns!(
    /// `backtraces` after `trace_id`.
    BacktraceCols {
        backtrace_id: I64,
        position: I32,
        location_id: I64,
    }
);

columns!(
    /// `locations` after `trace_id`.
    LocationCols {
        location_id: I64,
        code: I64,
        function: StringBuilder,
        name: StringBuilder,
        file: StringBuilder,
        line: OptI32,
        start_column: OptI32,
        end_column: OptI32,
        label: StringBuilder,
    }
);

/// A sampled object not collected yet: its row but for the collect time, as
/// a row of plain fields that a [`LiveTable`] may hold in a file.
#[derive(Clone, Copy)]
#[repr(C)]
struct Live {
    time_us: i64,
    nsamples: u64,
    length: u64,
    /// When it was promoted, if `promoted` is 1.
    promote_time_us: i64,
    backtrace_id: u32,
    /// Index of its site's name in [`Sites`].
    site: u32,
    domain: u16,
    /// Its source's index in [`AllocationSource::ALL`].
    source: u8,
    promoted: u8,
    _unused: u32,
}

tracekit_columns::plain_struct!(Live {
    time_us: i64,
    nsamples: u64,
    length: u64,
    promote_time_us: i64,
    backtrace_id: u32,
    site: u32,
    domain: u16,
    source: u8,
    promoted: u8,
    _unused: u32,
});

impl Live {
    fn source(&self) -> AllocationSource {
        let all = AllocationSource::ALL;
        all[usize::from(self.source).min(all.len() - 1)]
    }

    fn promote_time_us(&self) -> Option<i64> {
        (self.promoted != 0).then_some(self.promote_time_us)
    }
}

/// The distinct site names, each once: an allocation holds its site's index.
#[derive(Default)]
struct Sites {
    names: Vec<String>,
    index: FxHashMap<String, u32>,
    /// Per backtrace id, its site's index.
    of_backtrace: Vec<u32>,
    /// Per entry met, the site it names, or `None` when naming looks past
    /// it ([`entry_site_label`]): a new backtrace is named by looking its
    /// entries up, not by making its label again.
    of_entry: FxHashMap<LocationCode, Option<u32>>,
    /// Per leaf, the site of a backtrace none of whose entries names one.
    of_leaf: FxHashMap<LocationCode, u32>,
}

impl Sites {
    fn intern(&mut self, name: String) -> u32 {
        if let Some(&i) = self.index.get(&name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.clone());
        self.index.insert(name, i);
        i
    }

    /// The site of `backtrace` (caller first), named as [`site_label`] names it.
    fn of(
        &mut self,
        table: &dyn LocationLookup,
        backtrace: &[LocationCode],
        skip: &FrameSkip,
    ) -> u32 {
        let Some(&leaf) = backtrace.last() else {
            return self.intern(EMPTY_BACKTRACE.to_owned());
        };
        for &code in backtrace.iter().rev() {
            let named = match self.of_entry.get(&code) {
                Some(&named) => named,
                None => {
                    let label = entry_site_label(table, code, FrameLabel::Location, skip);
                    let named = label.map(|l| self.intern(l));
                    self.of_entry.insert(code, named);
                    named
                }
            };
            if let Some(site) = named {
                return site;
            }
        }
        if let Some(&site) = self.of_leaf.get(&leaf) {
            return site;
        }
        let label = site_label(table, &[leaf], FrameLabel::Location, skip);
        let site = self.intern(label.unwrap_or_else(|| EMPTY_BACKTRACE.to_owned()));
        self.of_leaf.insert(leaf, site);
        site
    }
}

/// Backtrace ids: a distinct backtrace gets the next id the first time it is seen.
///
/// A backtrace is known by a 128-bit hash of its codes in order, kept per prefix
/// for each domain's previous backtrace so that an allocation hashes only the entries
/// past its common prefix. A prefix tree (one node per distinct prefix, as the
/// analyses keep) made a dependent cache miss per new entry and, on a trace of deep
/// recursion where most backtraces are distinct, took twice the time and the memory
/// (`docs/performance.md`); here each distinct backtrace costs one table entry. Two
/// backtraces share an id only if their 128-bit hashes collide.
struct BacktraceIds {
    /// Per domain, the prefix hashes of its previous backtrace: `[i]` covers its
    /// first `i` entries.
    prefixes: Vec<(DomainId, Vec<u128>)>,
    ids: FxHashMap<u128, u32>,
}

impl BacktraceIds {
    const SEED: u128 = 0x243f_6a88_85a3_08d3_1319_8a2e_0370_7344;

    fn new() -> Self {
        BacktraceIds {
            prefixes: Vec::new(),
            ids: FxHashMap::default(),
        }
    }

    /// Folds one entry into a prefix's hash; each half is a folded multiply (the
    /// mixing of wyhash and foldhash) with constants of its own.
    #[inline(always)]
    fn step(h: u128, code: LocationCode) -> u128 {
        #[inline(always)]
        fn fold(a: u64, b: u64) -> u64 {
            let p = u128::from(a) * u128::from(b);
            (p as u64) ^ ((p >> 64) as u64)
        }
        let c = code.get() as u64;
        let lo = fold((h as u64) ^ c, 0x9e37_79b9_7f4a_7c15);
        let hi = fold(
            ((h >> 64) as u64) ^ c.rotate_left(32),
            0xff51_afd7_ed55_8ccd,
        );
        (u128::from(hi) << 64) | u128::from(lo)
    }

    /// The id of `backtrace`, whose first `common_prefix` entries are those of the
    /// domain's previous backtrace, and whether it is new.
    #[inline]
    fn intern(
        &mut self,
        domain: DomainId,
        common_prefix: usize,
        backtrace: &[LocationCode],
    ) -> (u32, bool) {
        let slot = match self.prefixes.iter().position(|(d, _)| *d == domain) {
            Some(i) => i,
            None => {
                self.prefixes.push((domain, vec![Self::SEED]));
                self.prefixes.len() - 1
            }
        };
        let hashes = &mut self.prefixes[slot].1;
        let keep = common_prefix.min(backtrace.len()).min(hashes.len() - 1);
        hashes.truncate(keep + 1);
        let mut h = hashes[keep];
        for &code in &backtrace[keep..] {
            h = Self::step(h, code);
            hashes.push(h);
        }
        let next = self.ids.len() as u32;
        match self.ids.entry(h) {
            Entry::Occupied(e) => (*e.get(), false),
            Entry::Vacant(e) => (*e.insert(next), true),
        }
    }
}

/// Exports the memtrace trace `bytes` into `files`.
pub fn export(bytes: &[u8], files: &mut TraceFiles, options: &ExportOptions) -> Result<Summary> {
    let mut reader = Reader::from_bytes(bytes)?;
    let info = reader.info().clone();
    let format_version = reader.format_version();
    let bytes_per_sample = if info.sample_rate.is_finite() && info.sample_rate > 0.0 {
        f64::from(info.word_size) / 8.0 / info.sample_rate
    } else {
        0.0
    };
    let batch = options.row_group_rows;
    let mut allocs: TableWriter<AllocCols> =
        TableWriter::new(files, ALLOCATIONS.name, ALLOCATIONS.schema(), batch)?;
    let mut bts: TableWriter<BacktraceCols> =
        TableWriter::new(files, BACKTRACES.name, BACKTRACES.schema(), batch)?;
    let mut locs: TableWriter<LocationCols> =
        TableWriter::new(files, LOCATIONS.name, LOCATIONS.schema(), batch)?;

    let mut backtraces = BacktraceIds::new();
    // Sites are named as `memtrace top` names them: one rule for both.
    let skip = FrameSkip::rust_std();
    let mut sites = Sites::default();
    // A code's locations have the ids `first .. first + count`.
    let mut codes: FxHashMap<LocationCode, (u32, u32)> = FxHashMap::default();
    let mut next_location = 0u32;
    let mut live = LiveTable::<Live>::new();
    let mut frames: Vec<u32> = Vec::new();
    let (mut events, mut last_us) = (0i64, 0i64);

    let mut ev = reader.events(true);
    while let Some(item) = ev.next_event_with_locations() {
        let (dt, event, table) = item?;
        events += 1;
        let time_us = dt.as_micros();
        last_us = last_us.max(time_us);
        match event {
            Event::Alloc(a) => {
                let (bt, new) = backtraces.intern(a.domain, a.common_prefix, &a.backtrace);
                if new {
                    // Frames caller first, each code's locations in the trace's
                    // order (its last is innermost), new codes' locations written.
                    frames.clear();
                    for &code in a.backtrace.iter() {
                        let (first, count) = match codes.get(&code) {
                            Some(&ids) => ids,
                            None => {
                                let ids = write_locations(&mut locs, table, code, next_location)?;
                                next_location += ids.1;
                                codes.insert(code, ids);
                                ids
                            }
                        };
                        frames.extend(first..first + count);
                    }
                    for (position, &location) in frames.iter().rev().enumerate() {
                        let c = &mut bts.cols;
                        c.backtrace_id.append_value(i64::from(bt));
                        c.position.append_value(position as i32);
                        c.location_id.append_value(i64::from(location));
                        bts.row_done()?;
                    }
                    let site = sites.of(table, &a.backtrace, &skip);
                    let slot = bt as usize;
                    if sites.of_backtrace.len() <= slot {
                        sites.of_backtrace.resize(slot + 1, 0);
                    }
                    sites.of_backtrace[slot] = site;
                }
                let row = Live {
                    domain: a.domain.get(),
                    time_us,
                    source: a.source as u8,
                    nsamples: a.nsamples,
                    length: a.length,
                    promote_time_us: 0,
                    promoted: 0,
                    backtrace_id: bt,
                    site: sites.of_backtrace.get(bt as usize).copied().unwrap_or(0),
                    _unused: 0,
                };
                // An id seen twice (a damaged trace): the first object's row is
                // written as it stands rather than lost.
                if let Some(old) = live.insert(a.obj_id.get(), row) {
                    write_alloc(
                        &mut allocs,
                        a.obj_id.get(),
                        &old,
                        None,
                        bytes_per_sample,
                        &sites,
                    )?;
                }
            }
            Event::Promote(id, _) => {
                if let Some(l) = live.get_mut(id.get())
                    && l.promoted == 0
                {
                    (l.promote_time_us, l.promoted) = (time_us, 1);
                }
            }
            Event::Collect(id, _) => {
                if let Some(l) = live.remove(id.get()) {
                    write_alloc(
                        &mut allocs,
                        id.get(),
                        &l,
                        Some(time_us),
                        bytes_per_sample,
                        &sites,
                    )?;
                }
            }
        }
    }
    let warnings = ev.warnings().iter().map(|w| w.to_string()).collect();
    drop(ev);
    for (id, l) in &live.into_sorted() {
        write_alloc(&mut allocs, *id, l, None, bytes_per_sample, &sites)?;
    }

    let traces = traces::write(
        files,
        TraceRow {
            kind: "memtrace",
            file: options.file.clone(),
            format_version: Some(i32::from(format_version.number())),
            executable: Some(info.executable_name.to_string()),
            host: Some(info.host_name.to_string()),
            pid: Some(info.pid),
            start_time_us: Some(info.start_time.as_micros()),
            duration_us: last_us,
            sample_rate: Some(info.sample_rate),
            word_size: Some(i32::from(info.word_size)),
            bytes_per_sample: Some(bytes_per_sample),
            context: info.context.as_ref().map(|c| c.to_string()),
            events,
        },
    )?;

    let rows = vec![
        (TRACES.name, traces),
        (ALLOCATIONS.name, allocs.finish()?),
        (BACKTRACES.name, bts.finish()?),
        (LOCATIONS.name, locs.finish()?),
    ];
    Ok(Summary {
        trace_id: Some(files.trace_id()),
        rows,
        warnings,
    })
}

/// Writes the locations of `code` with ids from `first`; `(first, count)`. A code the
/// trace never described gets one row with nulls.
fn write_locations(
    locs: &mut TableWriter<LocationCols>,
    table: &dyn LocationLookup,
    code: LocationCode,
    first: u32,
) -> Result<(u32, u32)> {
    let described = table.locations(code).unwrap_or_default();
    let count = described.len().max(1) as u32;
    for i in 0..count {
        let c = &mut locs.cols;
        c.location_id.append_value(i64::from(first + i));
        c.code.append_value(code.get());
        match described.get(i as usize) {
            Some(l) => {
                c.function.append_value(l.defname.to_string());
                c.name
                    .append_value(Naming::default().function(&l.defname.to_string()));
                c.file.append_value(l.filename.to_string());
                c.line.append_value(l.line as i32);
                c.start_column.append_value(l.start_char as i32);
                c.end_column.append_value(l.end_char as i32);
                c.label.append_value(l.to_string());
            }
            None => {
                c.function.append_null();
                c.name.append_null();
                c.file.append_null();
                c.line.append_null();
                c.start_column.append_null();
                c.end_column.append_null();
                c.label.append_value(format!("${code}"));
            }
        }
        locs.row_done()?;
    }
    Ok((first, count))
}

fn write_alloc(
    allocs: &mut TableWriter<AllocCols>,
    obj_id: u64,
    l: &Live,
    collect_time_us: Option<i64>,
    bytes_per_sample: f64,
    sites: &Sites,
) -> Result<()> {
    let c = &mut allocs.cols;
    c.obj_id.append_value(obj_id as i64);
    c.domain.append_value(i32::from(l.domain));
    c.time_us.append_value(l.time_us);
    c.source.append_value(l.source().name());
    c.nsamples.append_value(l.nsamples as i64);
    c.length_words.append_value(l.length as i64);
    c.estimated_bytes
        .append_value(l.nsamples as f64 * bytes_per_sample);
    c.promoted.append_value(l.promoted != 0);
    c.promote_time_us.append_option(l.promote_time_us());
    c.collect_time_us.append_option(collect_time_us);
    c.backtrace_id.append_value(i64::from(l.backtrace_id));
    c.site
        .append_value(sites.names.get(l.site as usize).map_or("", String::as_str));
    allocs.row_done()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sites named from each entry's memo name every backtrace as
    /// `site_label` does from the whole: entries without locations, entries
    /// whose every location is skipped (std frames, one inlined in another),
    /// entries with a program frame inlined into a std one, and backtraces
    /// of skipped entries alone, in any order of first appearance.
    #[test]
    fn sites_named_by_entry_are_those_of_the_whole_backtrace() {
        let loc = |defname: &str, filename: &str| tracekit_memtrace::Location {
            filename: filename.into(),
            line: 3,
            start_char: 1,
            end_char: 2,
            defname: defname.into(),
        };
        let mut t: std::collections::HashMap<LocationCode, Vec<tracekit_memtrace::Location>> =
            Default::default();
        let std = "/rustc/abc/library/alloc/src/vec/mod.rs";
        t.insert(LocationCode::new(1), vec![loc("app::work", "src/main.rs")]);
        t.insert(
            LocationCode::new(2),
            vec![loc("alloc::vec::Vec<T>::push", std)],
        );
        t.insert(
            LocationCode::new(3),
            vec![
                loc("std::rt::lang_start", std),
                loc("core::ptr::write", std),
            ],
        );
        t.insert(
            LocationCode::new(4),
            vec![
                loc("app::inner", "src/inner.rs"),
                loc("alloc::alloc::alloc", std),
            ],
        );
        t.insert(
            LocationCode::new(5),
            vec![loc("app::other", "src/other.rs")],
        );
        // Codes 6 and 7 have no locations.
        let skip = FrameSkip::rust_std();
        let mut sites = Sites::default();
        let mut seed = 7u64;
        for _ in 0..2_000 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let len = (seed >> 60) as usize % 5;
            let backtrace: Vec<LocationCode> = (0..len)
                .map(|k| LocationCode::new(1 + ((seed >> (8 * k + 3)) % 7) as i64))
                .collect();
            let site = sites.of(&t, &backtrace, &skip);
            let whole = site_label(&t, &backtrace, FrameLabel::Location, &skip)
                .unwrap_or_else(|| EMPTY_BACKTRACE.to_owned());
            assert_eq!(sites.names[site as usize], whole, "{backtrace:?}");
        }
        // Every kind of entry was met, the skipped alone too.
        let all_skipped = [LocationCode::new(2), LocationCode::new(3)];
        let site = sites.of(&t, &all_skipped, &skip);
        let whole = site_label(&t, &all_skipped, FrameLabel::Location, &skip);
        assert_eq!(Some(&sites.names[site as usize]), whole.as_ref());
        assert!(sites.of_leaf.len() >= 2 && sites.of_entry.len() == 7);
    }

    /// Backtrace ids against a map from whole backtraces: equal backtraces get one
    /// id whatever prefix the previous one shared, in each domain, and different
    /// ones (prefixes of each other too) get different ids.
    #[test]
    fn backtrace_ids_agree_with_a_map_of_backtraces() {
        let mut ids = BacktraceIds::new();
        let mut model: std::collections::HashMap<(Vec<i64>,), u32> = Default::default();
        let mut previous: [Vec<i64>; 2] = Default::default();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..50_000 {
            let d = rand(2) as usize;
            let prev = &previous[d];
            let keep = rand(prev.len() as u64 + 1) as usize;
            let mut bt: Vec<i64> = prev[..keep].to_vec();
            for _ in 0..rand(4) {
                bt.push(rand(6) as i64);
            }
            // The common prefix as the trace states it: the longest shared one.
            let common = prev.iter().zip(&bt).take_while(|(a, b)| a == b).count();
            let codes: Vec<LocationCode> = bt.iter().map(|&c| LocationCode::new(c)).collect();
            let (id, new) = ids.intern(DomainId::new(d as u16), common, &codes);
            let n = model.len() as u32;
            let want = *model.entry((bt.clone(),)).or_insert(n);
            assert_eq!((id, new), (want, want == n), "{bt:?}");
            previous[d] = bt;
        }
        assert!(model.len() > 1000, "{}", model.len());
    }
}
