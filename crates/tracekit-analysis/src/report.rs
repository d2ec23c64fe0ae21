//! Reports derived from a [`Profile`]: allocation sites grouped by leaf location,
//! function, file or whole backtrace (`top`), two traces compared site by site (`diff`)
//! and folded stacks (`flamegraph`).
//!
//! Counts stay in samples until the very end; bytes are the estimate
//! `samples / sample_rate * word_size / 8`.

use std::collections::HashMap;

use crate::analyzer::Profile;
use crate::backtrace::BacktraceId;
pub use crate::frames::Unit;
use crate::frames::{FrameTree, Hide, Skeleton, TreeOptions};
use crate::sites::{SiteCounts, Weight};
use crate::symbols::{FrameLabel, FrameSkip, Naming, backtrace_labels, leaf_label, site_label};
use tracekit_memtrace::{LocationCode, LocationLookup};

/// How allocations are grouped into sites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    /// The allocation site: the last location of the backtrace.
    Leaf,
    /// The function (defname) of the allocation site.
    Function,
    /// The source file of the allocation site.
    File,
    /// The whole backtrace.
    Backtrace,
}

/// What sites are ranked by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rank {
    /// Bytes allocated.
    Allocated,
    /// Bytes live at the chosen time.
    LiveAt,
    /// Bytes live at the end of the trace.
    LiveEnd,
}

impl Rank {
    /// The ranked quantity of `c`, in samples.
    pub fn of(self, c: &SiteCounts) -> u64 {
        match self {
            Rank::Allocated => c.samples,
            Rank::LiveAt => c.live_at,
            Rank::LiveEnd => c.live_end(),
        }
    }
}

/// One group of allocations.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    /// The group's name: a location, a function, a file, or for backtraces the leaf
    /// location.
    pub name: String,
    /// For [`GroupBy::Backtrace`], the backtrace's locations, caller first,
    /// from `main` (as [`Naming`] says) to the site.
    pub backtrace: Option<Vec<String>>,
    /// The counts.
    pub counts: SiteCounts,
}

/// The sites of `profile`, grouped, unordered; each named by its innermost frame.
pub fn sites(profile: &Profile, symbols: &dyn LocationLookup, by: GroupBy) -> Vec<Site> {
    sites_skipping(profile, symbols, by, &FrameSkip::none())
}

/// The sites of `profile`, grouped, unordered; each named by its innermost frame that
/// `skip` does not skip. Skipping needs whole backtraces: analyse with
/// [`Options::leaf_only`](crate::analyzer::Options::leaf_only) off.
pub fn sites_skipping(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    by: GroupBy,
    skip: &FrameSkip,
) -> Vec<Site> {
    grouped_sites(profile, symbols, by, skip).0
}

/// [`sites_skipping`], with the group of each of the profile's sites, in their
/// order: its place in the groups returned.
fn grouped_sites(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    by: GroupBy,
    skip: &FrameSkip,
) -> (Vec<Site>, Vec<usize>) {
    let mut group_of: Vec<usize> = Vec::with_capacity(profile.sites.len());
    let mut out: Vec<Site> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut leaf_names: HashMap<LocationCode, String> = HashMap::new();
    let label = match by {
        GroupBy::Leaf | GroupBy::Backtrace => FrameLabel::Location,
        GroupBy::Function => FrameLabel::Function,
        GroupBy::File => FrameLabel::File,
    };
    let mut codes = Vec::new();
    for (bt, counts) in profile.sites.iter() {
        if by == GroupBy::Backtrace {
            group_of.push(out.len());
            out.push(backtrace_site(
                profile,
                symbols,
                bt,
                skip,
                &mut codes,
                &mut leaf_names,
                counts,
            ));
            continue;
        }
        let name = site_name(
            profile,
            symbols,
            bt,
            label,
            skip,
            &mut codes,
            &mut leaf_names,
        );
        match index.get(&name) {
            Some(&i) => {
                group_of.push(i);
                out[i].counts.add(&counts);
            }
            None => {
                group_of.push(out.len());
                index.insert(name.clone(), out.len());
                out.push(Site {
                    name,
                    backtrace: None,
                    counts,
                });
            }
        }
    }
    if by == GroupBy::Backtrace {
        // Distinct backtraces can print the same (codes with equal locations,
        // or the same frames down to the site).
        let mut merged: Vec<Site> = Vec::with_capacity(out.len());
        let mut into: Vec<usize> = Vec::with_capacity(out.len());
        let mut seen: HashMap<Vec<String>, usize> = HashMap::new();
        for site in out {
            let key = site.backtrace.clone().unwrap_or_default();
            match seen.get(&key) {
                Some(&i) => {
                    into.push(i);
                    merged[i].counts.add(&site.counts);
                }
                None => {
                    into.push(merged.len());
                    seen.insert(key, merged.len());
                    merged.push(site);
                }
            }
        }
        for g in &mut group_of {
            *g = into.get(*g).copied().unwrap_or(0);
        }
        return (merged, group_of);
    }
    (out, group_of)
}

/// A group of sites whose live heap grows ([`growing`]).
#[derive(Clone, Debug)]
pub struct GrowingSite {
    /// The group, as [`sites_skipping`] names it, with its counts.
    pub site: Site,
    /// Live samples at each of the curves' times.
    pub live: Vec<u64>,
    /// How fast it grows, in samples a second: the median of the slopes between
    /// every two of the times (Theil-Sen), which a spike or a jump moves little.
    pub slope: f64,
    /// How steadily, from -1 to 1: of every two times, the share where the later
    /// is higher less the share where it is lower (Kendall's tau): 1 for a heap
    /// that grows between every two.
    pub steadiness: f64,
}

/// The groups of sites (as [`sites_skipping`] makes them) whose live heap grows
/// over the profile's [`Profile::curves`], the steadiest growth first: ranked by
/// slope times steadiness, of those where both are above 0. Empty without curves.
pub fn growing(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    by: GroupBy,
    skip: &FrameSkip,
) -> Vec<GrowingSite> {
    let Some(curves) = &profile.curves else {
        return Vec::new();
    };
    let (groups, group_of) = grouped_sites(profile, symbols, by, skip);
    let k = curves.times().len();
    let mut live = vec![vec![0u64; k]; groups.len()];
    for (site, &g) in group_of.iter().enumerate() {
        if let Some(sum) = live.get_mut(g) {
            for (s, v) in sum.iter_mut().zip(curves.live(site)) {
                *s = s.saturating_add(v);
            }
        }
    }
    let seconds: Vec<f64> = curves
        .times()
        .iter()
        .map(|t| t.as_micros() as f64 / 1e6)
        .collect();
    let mut out: Vec<GrowingSite> = groups
        .into_iter()
        .zip(live)
        .filter_map(|(site, live)| {
            let (slope, steadiness) = trend(&seconds, &live);
            (slope > 0.0 && steadiness > 0.0).then_some(GrowingSite {
                site,
                live,
                slope,
                steadiness,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        (b.slope * b.steadiness)
            .total_cmp(&(a.slope * a.steadiness))
            .then_with(|| a.site.name.cmp(&b.site.name))
    });
    out
}

/// The Theil-Sen slope of `values` over `times` and their Kendall tau.
fn trend(times: &[f64], values: &[u64]) -> (f64, f64) {
    let mut slopes = Vec::new();
    let (mut up, mut down) = (0i64, 0i64);
    for i in 0..values.len() {
        for j in i + 1..values.len() {
            let (a, b) = (values[i] as f64, values[j] as f64);
            let dt = times.get(j).copied().unwrap_or(0.0) - times.get(i).copied().unwrap_or(0.0);
            if dt > 0.0 {
                slopes.push((b - a) / dt);
            }
            match values[j].cmp(&values[i]) {
                std::cmp::Ordering::Greater => up += 1,
                std::cmp::Ordering::Less => down += 1,
                std::cmp::Ordering::Equal => {}
            }
        }
    }
    if slopes.is_empty() {
        return (0.0, 0.0);
    }
    slopes.sort_by(f64::total_cmp);
    let n = slopes.len();
    let median = match n % 2 {
        1 => slopes[n / 2],
        _ => (slopes[n / 2 - 1] + slopes[n / 2]) / 2.0,
    };
    let pairs = (values.len() * (values.len() - 1) / 2) as f64;
    (median, (up - down) as f64 / pairs)
}

/// The name of `bt`'s site: its innermost frame that `skip` does not skip, printed
/// as `label` says. Leaf names are remembered in `leaf_names` (when nothing is
/// skipped, the leaf alone decides); `codes` is scratch space.
fn site_name(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    bt: BacktraceId,
    label: FrameLabel,
    skip: &FrameSkip,
    codes: &mut Vec<LocationCode>,
    leaf_names: &mut HashMap<LocationCode, String>,
) -> String {
    match profile.backtraces.leaf(bt) {
        None => EMPTY_BACKTRACE.to_string(),
        Some(_) if !skip.is_empty() => {
            profile.backtraces.codes_into(bt, codes);
            site_label(symbols, codes, label, skip).unwrap_or_else(|| EMPTY_BACKTRACE.to_string())
        }
        Some(code) => leaf_names
            .entry(code)
            .or_insert_with(|| leaf_label(symbols, code, label, skip.naming))
            .clone(),
    }
}

/// The [`GroupBy::Backtrace`] site of backtrace `bt`: named by its site, its
/// frames from `main` to that site.
fn backtrace_site(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    bt: BacktraceId,
    skip: &FrameSkip,
    codes: &mut Vec<LocationCode>,
    leaf_names: &mut HashMap<LocationCode, String>,
    counts: SiteCounts,
) -> Site {
    let label = FrameLabel::Location;
    let name = site_name(profile, symbols, bt, label, skip, codes, leaf_names);
    Site {
        backtrace: Some(backtrace_to_site(profile, symbols, bt, &name, skip, codes)),
        name,
        counts,
    }
}

/// `bt`'s locations, caller first, from `main` (as `skip.naming` says) to its
/// site `name`: the frames inside the site are the plumbing its name looks
/// past, and backtraces that differ only there are one backtrace of the
/// program. `codes` is scratch.
fn backtrace_to_site(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    bt: BacktraceId,
    name: &str,
    skip: &FrameSkip,
    codes: &mut Vec<LocationCode>,
) -> Vec<String> {
    let mut frames = backtrace_frames(profile, symbols, bt, skip.naming, codes);
    if !skip.is_empty()
        && let Some(at) = frames.iter().rposition(|f| f == name)
    {
        frames.truncate(at + 1);
    }
    frames
}

/// `bt`'s locations, caller first (a frame per inlined function), shown as
/// `naming` says; `codes` is scratch.
fn backtrace_frames(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    bt: BacktraceId,
    naming: Naming,
    codes: &mut Vec<LocationCode>,
) -> Vec<String> {
    profile.backtraces.codes_into(bt, codes);
    let mut frames = Vec::with_capacity(codes.len());
    backtrace_labels(symbols, codes, FrameLabel::Location, naming, &mut frames);
    frames
}

/// The share of allocated samples whose site ([`sites_skipping`]'s) has no source
/// line. Near 1 for a program built without line tables (a Rust release build
/// without `debug = "line-tables-only"`), near 0 for OCaml traces.
pub fn lineless_share(profile: &Profile, symbols: &dyn LocationLookup, skip: &FrameSkip) -> f64 {
    let mut codes = Vec::new();
    let (mut lineless, mut all) = (0u64, 0u64);
    for (bt, counts) in profile.sites.iter() {
        profile.backtraces.codes_into(bt, &mut codes);
        all += counts.samples;
        if crate::symbols::site_has_line(symbols, &codes, skip) == Some(false) {
            lineless += counts.samples;
        }
    }
    if all == 0 {
        0.0
    } else {
        lineless as f64 / all as f64
    }
}

pub use crate::symbols::EMPTY_BACKTRACE;

/// Sorts sites by `rank` (largest first), then by allocated samples, then by name.
pub fn rank_sites(sites: &mut [Site], rank: Rank) {
    sites.sort_by(|a, b| {
        rank.of(&b.counts)
            .cmp(&rank.of(&a.counts))
            .then(b.counts.samples.cmp(&a.counts.samples))
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.backtrace.cmp(&b.backtrace))
    });
}

/// The `top` report.
#[derive(Clone, Debug)]
pub struct Top {
    /// Grouping.
    pub by: GroupBy,
    /// Ranking.
    pub rank: Rank,
    /// Sum over all sites.
    pub totals: SiteCounts,
    /// The first `limit` sites.
    pub sites: Vec<Site>,
    /// Sum over the sites beyond the limit.
    pub others: SiteCounts,
    /// Number of sites beyond the limit.
    pub other_sites: usize,
}

/// Builds the `top` report: sites grouped by `by`, ranked by `rank`, the first `limit`
/// kept (sites whose ranked quantity is zero are dropped when ranking by a live
/// quantity, since "live at T" lists only what is live).
pub fn top(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    by: GroupBy,
    rank: Rank,
    limit: usize,
) -> Top {
    top_skipping(profile, symbols, by, rank, limit, &FrameSkip::none())
}

/// [`top`] with sites named past the frames `skip` skips.
pub fn top_skipping(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    by: GroupBy,
    rank: Rank,
    limit: usize,
    skip: &FrameSkip,
) -> Top {
    if by == GroupBy::Backtrace {
        return top_backtraces(profile, symbols, rank, limit, skip);
    }
    let mut all = sites_skipping(profile, symbols, by, skip);
    if rank != Rank::Allocated {
        all.retain(|s| rank.of(&s.counts) > 0);
    }
    rank_sites(&mut all, rank);
    let mut others = SiteCounts::default();
    let rest = if all.len() > limit {
        all.split_off(limit)
    } else {
        Vec::new()
    };
    for s in &rest {
        others.add(&s.counts);
    }
    Top {
        by,
        rank,
        totals: profile.totals,
        sites: all,
        others,
        other_sites: rest.len(),
    }
}

/// [`top_skipping`] by whole backtrace. Backtraces are grouped by what they print
/// through a frame tree (no string per backtrace), ranked by their counts, and named
/// only when they are shown, so memory stays with the trie, not with the number of
/// distinct backtraces times their depth.
fn top_backtraces(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    rank: Rank,
    limit: usize,
    skip: &FrameSkip,
) -> Top {
    let (ids, stacks) = FrameTree::site_stacks(profile, symbols, FrameLabel::Location, skip);
    // Per printed backtrace its first site, which names it; the counts of the rare
    // later sites that print the same are added to the first's aside.
    let mut leader = vec![u32::MAX; stacks];
    let mut groups: Vec<u32> = Vec::new();
    let mut merged: HashMap<u32, SiteCounts> = HashMap::new();
    for (i, id) in ids.iter().enumerate() {
        let i = i as u32;
        match leader.get(id.index()).copied() {
            Some(u32::MAX) => {
                leader[id.index()] = i;
                groups.push(i);
            }
            Some(first) => merged
                .entry(first)
                .or_insert_with(|| profile.sites.counts(first as usize))
                .add(&profile.sites.counts(i as usize)),
            None => {}
        }
    }
    drop((leader, ids));
    let counts = |i: u32| match merged.get(&i) {
        Some(c) => *c,
        None => profile.sites.counts(i as usize),
    };
    if rank != Rank::Allocated {
        groups.retain(|&i| rank.of(&counts(i)) > 0);
    }
    let key = |i: u32| {
        let c = counts(i);
        (std::cmp::Reverse(rank.of(&c)), std::cmp::Reverse(c.samples))
    };
    // The shown sites, and those that tie with the last shown (names decide
    // among them), first; the others, only summed, in no order. Selected
    // rather than sorted: of millions of backtraces, a few are shown.
    let mut head = groups.len().min(limit);
    if head < groups.len() && head > 0 {
        groups.select_nth_unstable_by_key(head - 1, |&i| key(i));
    }
    groups[..head].sort_by_key(|&i| key(i));
    if let Some(&last) = head.checked_sub(1).and_then(|i| groups.get(i)) {
        let k = key(last);
        let shown = head;
        for j in shown..groups.len() {
            if key(groups[j]) == k {
                groups.swap(head, j);
                head += 1;
            }
        }
    }
    let (mut codes, mut leaf_names) = (Vec::new(), HashMap::new());
    let mut sites: Vec<Site> = groups[..head]
        .iter()
        .map(|&i| {
            let bt = profile.sites.backtrace(i as usize);
            backtrace_site(
                profile,
                symbols,
                bt,
                skip,
                &mut codes,
                &mut leaf_names,
                counts(i),
            )
        })
        .collect();
    rank_sites(&mut sites, rank);
    let mut others = SiteCounts::default();
    let mut other_sites = 0;
    for s in sites.iter().skip(limit) {
        others.add(&s.counts);
        other_sites += 1;
    }
    sites.truncate(limit);
    for &i in &groups[head..] {
        others.add(&counts(i));
        other_sites += 1;
    }
    Top {
        by: GroupBy::Backtrace,
        rank,
        totals: profile.totals,
        sites,
        others,
        other_sites,
    }
}

/// One row of a `diff`.
#[derive(Clone, Debug, PartialEq)]
pub struct DiffRow {
    /// Site name.
    pub name: String,
    /// Counts in the first trace (zero if absent).
    pub a: SiteCounts,
    /// Counts in the second trace.
    pub b: SiteCounts,
    /// Estimated bytes allocated in A and in B.
    pub allocated_bytes: (u64, u64),
    /// Estimated bytes live at the end in A and in B.
    pub live_end_bytes: (u64, u64),
    /// Estimated bytes live at the profiles' time ([`Profile::live_at`]) in A
    /// and in B (0 when none was asked).
    pub live_at_bytes: (u64, u64),
}

impl DiffRow {
    /// Change in allocated bytes, B minus A.
    pub fn allocated_delta(&self) -> i128 {
        i128::from(self.allocated_bytes.1) - i128::from(self.allocated_bytes.0)
    }

    /// Change in bytes live at the end, B minus A.
    pub fn live_end_delta(&self) -> i128 {
        i128::from(self.live_end_bytes.1) - i128::from(self.live_end_bytes.0)
    }

    /// Change in bytes live at the profiles' time, B minus A.
    pub fn live_at_delta(&self) -> i128 {
        i128::from(self.live_at_bytes.1) - i128::from(self.live_at_bytes.0)
    }

    /// The change `rank` ranks by.
    pub fn delta(&self, rank: Rank) -> i128 {
        match rank {
            Rank::Allocated => self.allocated_delta(),
            Rank::LiveAt => self.live_at_delta(),
            Rank::LiveEnd => self.live_end_delta(),
        }
    }
}

/// Compares two profiles site by site (bytes, since the traces may have different
/// sample rates), ranked by the largest absolute change of what `rank` says:
/// allocated bytes, bytes live at the profiles' time ([`Profile::live_at`]), or
/// bytes live at the end.
pub fn diff(
    a: (&Profile, &dyn LocationLookup),
    b: (&Profile, &dyn LocationLookup),
    by: GroupBy,
    rank: Rank,
) -> Vec<DiffRow> {
    diff_skipping(a, b, by, rank, &FrameSkip::none())
}

/// [`diff`] with sites named past the frames `skip` skips.
pub fn diff_skipping(
    a: (&Profile, &dyn LocationLookup),
    b: (&Profile, &dyn LocationLookup),
    by: GroupBy,
    rank: Rank,
    skip: &FrameSkip,
) -> Vec<DiffRow> {
    let key = |s: &Site| match &s.backtrace {
        Some(frames) => frames.join(" "),
        None => s.name.clone(),
    };
    let mut rows: Vec<DiffRow> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (side, (profile, symbols)) in [a, b].into_iter().enumerate() {
        for site in sites_skipping(profile, symbols, by, skip) {
            let k = key(&site);
            let i = *index.entry(k).or_insert_with(|| {
                rows.push(DiffRow {
                    name: site.name.clone(),
                    a: SiteCounts::default(),
                    b: SiteCounts::default(),
                    allocated_bytes: (0, 0),
                    live_end_bytes: (0, 0),
                    live_at_bytes: (0, 0),
                });
                rows.len() - 1
            });
            let row = &mut rows[i];
            if side == 0 {
                row.a.add(&site.counts);
            } else {
                row.b.add(&site.counts);
            }
        }
    }
    let (sa, sb) = (a.0.sampling, b.0.sampling);
    for row in &mut rows {
        row.allocated_bytes = (sa.bytes(row.a.samples), sb.bytes(row.b.samples));
        row.live_end_bytes = (sa.bytes(row.a.live_end()), sb.bytes(row.b.live_end()));
        row.live_at_bytes = (sa.bytes(row.a.live_at), sb.bytes(row.b.live_at));
    }
    rows.sort_by(|x, y| {
        let (kx, ky) = (x.delta(rank).abs(), y.delta(rank).abs());
        ky.cmp(&kx).then_with(|| x.name.cmp(&y.name))
    });
    rows
}

/// How to fold stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoldOptions {
    /// The quantity.
    pub weight: Weight,
    /// What a frame shows.
    pub label: FrameLabel,
    /// Bytes or samples.
    pub unit: Unit,
    /// Merge runs of the same frame (direct recursion) into one.
    pub collapse_recursion: bool,
    /// Fold recursion, direct and indirect: a frame whose function is already
    /// on the stack joins that outer frame.
    pub fold_recursion: bool,
    /// How frames are named, and whether stacks start at `main`.
    pub naming: Naming,
}

impl FoldOptions {
    /// How the frame tree prints and weighs its stacks, the weight aside.
    fn tree(&self) -> TreeOptions {
        TreeOptions {
            label: self.label,
            unit: self.unit,
            collapse_recursion: self.collapse_recursion,
            fold_recursion: self.fold_recursion,
            naming: self.naming,
        }
    }
}

impl Default for FoldOptions {
    fn default() -> Self {
        FoldOptions {
            weight: Weight::Allocated,
            label: FrameLabel::Function,
            unit: Unit::Bytes,
            collapse_recursion: false,
            fold_recursion: false,
            naming: Naming::default(),
        }
    }
}

/// Folded stacks: one `(stack, weight)` per distinct stack, frames caller first and
/// joined with `;`, depth-first (a stack before its callees', callees by frame name).
/// Stacks of zero weight are left out.
///
/// With [`Unit::Bytes`] each line gets the rounded cumulative byte count minus the
/// previous one, so the lines sum exactly to the rounded total of the profile.
///
/// This holds a string per stack; [`FrameTree`] streams them instead.
pub fn folded(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    options: FoldOptions,
) -> Vec<(String, u64)> {
    fold_tree(profile, symbols, options).lines()
}

/// The frame tree of folded stacks ([`folded`] without a string per stack).
pub fn fold_tree(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    options: FoldOptions,
) -> FrameTree {
    fold_tree_hiding(profile, symbols, options, &Hide::default())
}

/// [`fold_tree`], leaving out the frames `hide` names.
pub fn fold_tree_hiding(
    profile: &Profile,
    symbols: &dyn LocationLookup,
    options: FoldOptions,
    hide: &Hide,
) -> FrameTree {
    let w = options.weight;
    FrameTree::build_hiding(profile, symbols, options.tree(), hide, |c| {
        (w.of(c), w.objects(c))
    })
}

/// [`fold_tree_hiding`] through `skeletons`, the frames earlier folds of profiles
/// over the same trie found (one per options and hidden frames asked, the
/// `keep` latest): the same tree, sooner.
pub(crate) fn fold_tree_on(
    skeletons: &mut Vec<Skeleton>,
    keep: usize,
    profile: &Profile,
    symbols: &dyn LocationLookup,
    options: FoldOptions,
    hide: &Hide,
) -> FrameTree {
    let tree = options.tree();
    let mut skeleton = match skeletons.iter().position(|s| s.is_of(tree, hide)) {
        Some(i) => skeletons.remove(i),
        None => Skeleton::new(tree, hide.clone()),
    };
    let w = options.weight;
    let folded = FrameTree::build_on(&mut skeleton, profile, symbols, |c| (w.of(c), w.objects(c)));
    skeletons.insert(0, skeleton);
    skeletons.truncate(keep);
    folded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Sampling;
    use crate::analyzer::{Options, analyze_events};
    use tracekit_memtrace::{Alloc, AllocationSource, DomainId, Event, Location, ObjId, Timedelta};

    type LocationTable = HashMap<LocationCode, Vec<Location>>;

    /// An allocation of `nsamples` at `backtrace` (codes, caller first).
    fn alloc(id: u64, nsamples: u64, backtrace: &[i64]) -> Event<'static> {
        Event::Alloc(Alloc {
            obj_id: ObjId::new(id),
            domain: DomainId::new(0),
            length: 1,
            nsamples,
            source: AllocationSource::Minor,
            backtrace: backtrace.iter().map(|&c| LocationCode::new(c)).collect(),
            common_prefix: 0,
        })
    }

    fn loc(def: &str, file: &str, line: u32) -> Location {
        Location {
            filename: file.into(),
            line,
            start_char: 1,
            end_char: 9,
            defname: def.into(),
        }
    }

    fn fixture() -> (Profile, LocationTable) {
        let mut table = LocationTable::new();
        table.insert(LocationCode::new(1), vec![loc("main", "main.ml", 1)]);
        table.insert(
            LocationCode::new(2),
            vec![loc("f", "a.ml", 10), loc("g;h", "a.ml", 20)],
        );
        table.insert(LocationCode::new(3), vec![loc("f", "a.ml", 30)]);
        table.insert(LocationCode::new(4), vec![loc("k", "b.ml", 5)]);
        let bts: [&[i64]; 5] = [&[1, 2], &[1, 3], &[1, 4], &[1, 2], &[]];
        let mut events = Vec::new();
        for (i, bt) in bts.iter().enumerate() {
            let time = Timedelta::from_micros(i as i64);
            events.push((time, alloc(i as u64, i as u64 + 1, bt)));
        }
        events.push((
            Timedelta::from_micros(9),
            Event::Collect(ObjId::new(2), DomainId::new(0)),
        ));
        let sampling = Sampling {
            sample_rate: 0.3,
            word_size_bits: 64,
        };
        (analyze_events(sampling, Options::default(), events), table)
    }

    #[test]
    fn grouping() {
        let (p, t) = fixture();
        let names = |by| {
            let mut s = sites(&p, &t, by);
            rank_sites(&mut s, Rank::Allocated);
            s.iter()
                .map(|s| (s.name.clone(), s.counts.samples))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(GroupBy::Leaf),
            vec![
                (EMPTY_BACKTRACE.to_string(), 5),
                ("g;h@a.ml:20:1-9".to_string(), 5),
                ("k@b.ml:5:1-9".to_string(), 3),
                ("f@a.ml:30:1-9".to_string(), 2),
            ]
        );
        assert_eq!(
            names(GroupBy::File),
            vec![
                ("a.ml".to_string(), 7),
                (EMPTY_BACKTRACE.to_string(), 5),
                ("b.ml".to_string(), 3),
            ]
        );
        let bt = sites(&p, &t, GroupBy::Backtrace);
        assert_eq!(bt.len(), 4);
        let top = top(&p, &t, GroupBy::Function, Rank::LiveEnd, 1);
        assert_eq!(top.sites[0].name, EMPTY_BACKTRACE);
        assert_eq!(top.other_sites, 2);
        assert_eq!(
            top.sites[0].counts.live_end() + top.others.live_end(),
            p.totals.live_end()
        );
    }

    #[test]
    fn folded_sums_to_total() {
        let (p, t) = fixture();
        let opts = |weight, unit| FoldOptions {
            weight,
            unit,
            ..FoldOptions::default()
        };
        let lines = folded(&p, &t, opts(Weight::Allocated, Unit::Samples));
        assert_eq!(
            lines,
            vec![
                ("[empty backtrace]".to_string(), 5),
                ("main;f;g:h".to_string(), 5),
                ("main;f".to_string(), 2),
                ("main;k".to_string(), 3),
            ]
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
        );
        let bytes = folded(&p, &t, opts(Weight::Allocated, Unit::Bytes));
        let sum: u64 = bytes.iter().map(|l| l.1).sum();
        assert_eq!(sum, p.sampling.bytes(p.totals.samples));
        let live = folded(&p, &t, opts(Weight::LiveEnd, Unit::Samples));
        let sum: u64 = live.iter().map(|l| l.1).sum();
        assert_eq!(sum, p.totals.live_end());
    }

    #[test]
    fn collapse_recursion() {
        let mut table = LocationTable::new();
        table.insert(LocationCode::new(1), vec![loc("main", "m.ml", 1)]);
        table.insert(LocationCode::new(2), vec![loc("f", "a.ml", 1)]);
        table.insert(LocationCode::new(3), vec![loc("f", "a.ml", 2)]);
        let ev = [(Timedelta::default(), alloc(0, 2, &[1, 2, 3, 2, 3, 1]))];
        let p = analyze_events(Sampling::default(), Options::default(), ev);
        let opts = FoldOptions {
            unit: Unit::Samples,
            collapse_recursion: true,
            ..FoldOptions::default()
        };
        assert_eq!(
            folded(&p, &table, opts),
            vec![("main;f;main".to_string(), 2)]
        );
        let opts = FoldOptions {
            collapse_recursion: false,
            ..opts
        };
        assert_eq!(
            folded(&p, &table, opts),
            vec![("main;f;f;f;f;main".to_string(), 2)]
        );
    }

    #[test]
    fn diff_ranks_by_change() {
        let (a, t) = fixture();
        let (b, _) = fixture();
        let rows = diff((&a, &t), (&b, &t), GroupBy::Leaf, Rank::Allocated);
        assert!(rows.iter().all(|r| r.allocated_delta() == 0));
        let empty = analyze_events(a.sampling, Options::default(), []);
        let rows = diff((&a, &t), (&empty, &t), GroupBy::Leaf, Rank::Allocated);
        assert_eq!(rows[0].allocated_bytes.1, 0);
        assert!(rows[0].allocated_delta() < 0);
        assert!(
            rows.windows(2)
                .all(|w| w[0].allocated_delta().abs() >= w[1].allocated_delta().abs())
        );
    }
}

/// Frame trees of whole synthetic traces, folded as the reports fold them,
/// against stacks made the slow way.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod fold_tests {
    use super::*;
    use crate::analyzer::{Analyzer, Options};
    use crate::frames::FrameId;
    use crate::sampling::Sampling;
    use crate::sites::Weight;
    use crate::symbols::entry_labels;
    use std::collections::HashMap;
    use tracekit_memtrace::Reader;
    use tracekit_memtrace::synth::{SynthConfig, write_synthetic};
    use tracekit_stacks::folded;

    /// A pass over every event of `reader`, which fills its location table.
    fn analyse(reader: &mut Reader<'_>) -> Profile {
        let mut analyzer = Analyzer::new(Sampling::from(reader.info()), Options::default());
        let mut events = reader.events(true);
        while let Some(Ok((time, event))) = events.next_event() {
            analyzer.push(time, &event);
        }
        analyzer.finish()
    }

    /// A synthetic trace of seed `seed`, and its profile.
    fn pass(seed: u64) -> (Vec<u8>, Profile) {
        let config = SynthConfig {
            allocs: 30_000,
            depth: 12,
            functions: 60,
            seed,
            ..SynthConfig::default()
        };
        let bytes = write_synthetic(Vec::new(), &config).unwrap();
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let p = analyse(&mut reader);
        (bytes, p)
    }

    /// The folded stacks the slow way: a string per site, merged in a map.
    fn naive(p: &Profile, symbols: &dyn LocationLookup, o: FoldOptions) -> Vec<(String, u64)> {
        naive_hiding(p, symbols, o, &[])
    }

    fn naive_hiding(
        p: &Profile,
        symbols: &dyn LocationLookup,
        o: FoldOptions,
        hide: &[&str],
    ) -> Vec<(String, u64)> {
        let mut stacks: HashMap<String, u64> = HashMap::new();
        for (bt, counts) in p.sites.iter() {
            let w = o.weight.of(&counts);
            if w == 0 {
                continue;
            }
            let codes = p.backtraces.codes(bt);
            let mut frames: Vec<String> = Vec::new();
            for code in &codes {
                let mut labels = Vec::new();
                entry_labels(
                    symbols,
                    *code,
                    o.label,
                    Naming {
                        all_frames: true,
                        ..o.naming
                    },
                    &mut labels,
                );
                for l in labels {
                    let l = folded::frame(&l).into_owned();
                    if hide.iter().any(|h| l.contains(h)) {
                        continue;
                    }
                    if o.fold_recursion
                        && let Some(k) = frames.iter().rposition(|f| *f == l)
                    {
                        frames.truncate(k + 1);
                        continue;
                    }
                    if o.collapse_recursion && frames.last() == Some(&l) {
                        continue;
                    }
                    frames.push(l);
                }
            }
            let key = match codes.is_empty() {
                true => EMPTY_BACKTRACE.to_string(),
                false => frames.join(";"),
            };
            *stacks.entry(key).or_insert(0) += w;
        }
        let mut v: Vec<_> = stacks.into_iter().collect();
        v.sort();
        v
    }

    #[test]
    fn the_tree_folds_the_same_stacks_as_strings_do() {
        let (bytes, _) = pass(11);
        // The pass over this reader fills its location table, so that frames print
        // as functions, locations and files rather than as codes.
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let p = analyse(&mut reader);
        let symbols = reader.locations();
        assert!(!symbols.is_empty());
        for label in [FrameLabel::Function, FrameLabel::Location, FrameLabel::File] {
            for (collapse_recursion, fold_recursion) in
                [(false, false), (true, false), (false, true)]
            {
                for weight in [Weight::Allocated, Weight::LiveEnd] {
                    let o = FoldOptions {
                        weight,
                        label,
                        unit: Unit::Samples,
                        collapse_recursion,
                        fold_recursion,
                        ..FoldOptions::default()
                    };
                    let mut lines = folded(&p, symbols, o);
                    assert!(lines.len() > 100);
                    lines.sort();
                    assert_eq!(lines, naive(&p, symbols, o), "{o:?}");
                }
            }
        }
    }

    #[test]
    fn hidden_frames_leave_the_stacks_as_if_never_called() {
        let (bytes, _) = pass(13);
        // The pass over this reader fills its location table.
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let p = analyse(&mut reader);
        let symbols = reader.locations();
        for hide in [&["fn_1"][..], &["Module_00", "fn_3"], &["_"]] {
            for collapse_recursion in [false, true] {
                let o = FoldOptions {
                    collapse_recursion,
                    ..FoldOptions::default()
                };
                let owned = Hide {
                    containing: hide.iter().map(|h| h.to_string()).collect(),
                    functions: Vec::new(),
                };
                let mut lines = fold_tree_hiding(&p, symbols, o, &owned).lines();
                lines.sort();
                let expected = naive_hiding(
                    &p,
                    symbols,
                    FoldOptions {
                        unit: Unit::Samples,
                        ..o
                    },
                    hide,
                );
                let total: u64 = lines.iter().map(|l| l.1).sum();
                assert_eq!(total, p.sampling.bytes(p.totals.samples), "{hide:?}");
                let names = |v: &[(String, u64)]| v.iter().map(|l| l.0.clone()).collect::<Vec<_>>();
                assert_eq!(
                    names(&lines),
                    names(&expected),
                    "{hide:?} {collapse_recursion}"
                );
                assert!(!lines.iter().any(|l| hide.iter().any(|h| l.0.contains(h))));
            }
        }
    }

    #[test]
    fn hiding_a_function_leaves_out_exactly_the_frames_of_that_name() {
        let (bytes, _) = pass(14);
        let mut reader = Reader::from_bytes(&bytes).unwrap();
        let p = analyse(&mut reader);
        let symbols = reader.locations();
        let o = FoldOptions::default();
        let all = fold_tree(&p, symbols, o).lines();
        // A function that is a frame, and a part of its name (which hides nothing).
        let victim = all[all.len() / 2].0.split(';').nth(2).unwrap().to_string();
        let part = &victim[..victim.len() - 1];
        let hide = Hide {
            containing: Vec::new(),
            functions: vec![victim.clone(), part.to_string()],
        };
        let mut hidden = fold_tree_hiding(&p, symbols, o, &hide).lines();
        hidden.sort();
        let mut expected: HashMap<String, u64> = HashMap::new();
        for (stack, w) in &all {
            let kept: Vec<&str> = stack.split(';').filter(|f| *f != victim).collect();
            *expected.entry(kept.join(";")).or_insert(0) += w;
        }
        let mut expected: Vec<(String, u64)> = expected.into_iter().collect();
        expected.sort();
        let names = |v: &[(String, u64)]| v.iter().map(|l| l.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&hidden), names(&expected));
        assert!(hidden.len() < all.len());
        // Objects add up over the tree as the weights do.
        let tree = fold_tree(&p, symbols, o);
        assert_eq!(tree.objects(FrameId::ROOT).1, p.totals.allocs);
    }

    #[test]
    fn stacks_come_depth_first_and_text_json_and_lines_agree() {
        let (bytes, p) = pass(12);
        let reader = Reader::from_bytes(&bytes).unwrap();
        let o = FoldOptions::default();
        let tree = fold_tree(&p, reader.locations(), o);
        let lines = tree.lines();
        assert_eq!(lines.len(), tree.stacks());
        // Bytes are rounded so that the stacks add up to the rounded total.
        let sum: u64 = lines.iter().map(|l| l.1).sum();
        assert_eq!(sum, p.sampling.bytes(p.totals.samples));
        assert_eq!(tree.total(), sum);
        // A stack's callees follow it, before any stack that is not its callee.
        for w in lines.windows(2) {
            let (a, b) = (&w[0].0, &w[1].0);
            let common = a
                .split(';')
                .zip(b.split(';'))
                .take_while(|(x, y)| x == y)
                .count();
            let (na, nb) = (a.split(';').nth(common), b.split(';').nth(common));
            if let (Some(x), Some(y)) = (na, nb) {
                assert!(x < y, "{a} before {b}");
            }
        }
        let mut text = Vec::new();
        tree.write_folded(&mut text).unwrap();
        let expected: String = lines.iter().map(|(s, w)| format!("{s} {w}\n")).collect();
        assert_eq!(String::from_utf8(text).unwrap(), expected);
    }

    #[test]
    fn top_by_backtrace_ranks_what_whole_backtrace_sites_rank() {
        let (bytes, p) = pass(13);
        let reader = Reader::from_bytes(&bytes).unwrap();
        let symbols = reader.locations();
        let skip = FrameSkip::none();
        // Every limit up to 40, so that some cut a run of sites whose counts
        // tie (their names decide which are shown).
        let limits = (1..=40).chain([usize::MAX]);
        let cases = limits.flat_map(|l| [(Rank::Allocated, l), (Rank::LiveEnd, l)]);
        let mut cut_ties = 0;
        for (rank, limit) in cases {
            let top = top_skipping(&p, symbols, GroupBy::Backtrace, rank, limit, &skip);
            let mut all = sites_skipping(&p, symbols, GroupBy::Backtrace, &skip);
            if rank != Rank::Allocated {
                all.retain(|s| rank.of(&s.counts) > 0);
            }
            rank_sites(&mut all, rank);
            let shown = all.len().min(limit);
            let key = |s: &Site| (rank.of(&s.counts), s.counts.samples);
            if shown < all.len() && key(&all[shown - 1]) == key(&all[shown]) {
                cut_ties += 1;
            }
            let names = |s: &[Site]| {
                s.iter()
                    .map(|s| (s.name.clone(), s.backtrace.clone(), s.counts))
                    .collect::<Vec<_>>()
            };
            assert_eq!(names(&top.sites), names(&all[..shown]), "{rank:?} {limit}");
            assert_eq!(top.other_sites, all.len() - shown);
            let mut others = SiteCounts::default();
            for s in &all[shown..] {
                others.add(&s.counts);
            }
            assert_eq!(top.others, others);
        }
        assert!(cut_ties > 5, "{cut_ties}");
    }
}
