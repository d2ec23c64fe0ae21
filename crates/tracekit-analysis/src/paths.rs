//! Call sequences inside a [`FrameTree`]: the tree seen from one sequence (its
//! callers and its callees, memtrace_viewer's *focus*), and the heavy sequences
//! (memtrace_viewer's *hot paths*).
//!
//! A *fragment* is a run of consecutive frames, caller first, such as `main;
//! parse; lex`. A stack contains it when those frames appear in it one after the
//! other, anywhere. The weight of a fragment is the weight of the stacks that
//! contain it, each stack counted once: in a recursive stack the fragment can
//! appear several times, and only the outermost appearance counts, so that no
//! byte is counted twice. In the tree, an appearance is a node whose path ends
//! with the fragment; the stacks through it are its subtree, so its weight is
//! the node's total.
//!
//! [`focus`] answers, for a fragment, the tree of its callees (what the stacks
//! do after it, merged over its appearances) and the tree of its callers (what
//! leads to it, innermost caller first), both weighing what the fragment weighs.
//!
//! [`functions`] weighs each function by the stacks it appears in, each stack
//! once however deep the recursion (a fragment of one frame), and by the stacks
//! it ends (where it allocates).
//!
//! [`hot_paths`] finds the fragments of at least a share `frequency` of the
//! tree's weight and reports the ones not explained by a longer one: a heavy
//! fragment is left out when extending it by one frame, toward its callers or
//! its callees, keeps all but `tolerance` of the tree's weight (the longer
//! fragment is reported instead, or explained in turn). memtrace_viewer finds
//! them with a lossy substring heavy-hitters count over the backtraces (an error
//! of `tolerance`); here the counts are exact, found level by level: a fragment
//! can only be heavy if the two fragments one frame shorter inside it are, so
//! each level only weighs the extensions of the last level's heavy fragments.

use rustc_hash::FxHashMap;

use crate::frames::{FrameId, FrameTree, Grower};

const NONE: u32 = u32::MAX;

/// The tree seen from one fragment: [`focus`]'s answer.
#[derive(Debug)]
pub struct Focus {
    /// How much of the fragment was found: its frames up to the first that no
    /// stack continues with (all of them when some stack contains it).
    pub found: usize,
    /// What the stacks do after the fragment: the root stands for the fragment
    /// (its own weight is what the fragment's last frame allocates itself).
    pub callees: FrameTree,
    /// What leads to the fragment, innermost caller first: the root stands for
    /// the fragment, its children are its direct callers.
    pub callers: FrameTree,
}

/// The callers and callees of `fragment` (frame names, caller first) in `tree`.
/// An empty fragment is the whole tree: its callees are the tree and it has no
/// callers. When no stack contains the whole fragment, the answer is for its
/// longest leading part that some stack does contain ([`Focus::found`]).
pub fn focus(tree: &FrameTree, fragment: &[&str]) -> Focus {
    let mut found = fragment.len();
    let mut ends = appearances(tree, fragment);
    while ends.is_empty() && found > 0 {
        found -= 1;
        ends = appearances(tree, fragment.get(..found).unwrap_or(&[]));
    }
    let mut callees = Grower::new();
    let mut callers = Grower::new();
    for &end in &ends {
        // The callees: the subtree under the appearance, merged.
        let mut stack = vec![(end, Grower::ROOT)];
        while let Some((n, grown)) = stack.pop() {
            let ((own, _), (objects, _)) = (tree.weight(n), tree.objects(n));
            callees.add(grown, own, objects);
            for c in tree.children(n) {
                stack.push((c, callees.child(grown, tree.name(c))));
            }
        }
        // The callers: the path above the appearance, innermost first.
        let mut n = end;
        for _ in 0..found {
            n = tree.parent(n);
        }
        let mut grown = Grower::ROOT;
        while n != FrameId::ROOT {
            grown = callers.child(grown, tree.name(n));
            n = tree.parent(n);
        }
        let ((_, total), (_, objects)) = (tree.weight(end), tree.objects(end));
        callers.add(grown, total, objects);
    }
    Focus {
        found,
        callees: callees.finish(),
        callers: callers.finish(),
    }
}

/// The tree of `tree`'s stacks reversed: allocating frame first, then its callers
/// (memtrace_viewer's caller table). Weights and objects are the stacks' own.
pub fn inverted(tree: &FrameTree) -> FrameTree {
    let mut g = Grower::new();
    for i in 1..tree.len() {
        let n = FrameId::from_index(i);
        let ((own, _), (objects, _)) = (tree.weight(n), tree.objects(n));
        if own == 0 {
            continue;
        }
        let mut grown = Grower::ROOT;
        let mut m = n;
        while m != FrameId::ROOT {
            grown = g.child(grown, tree.name(m));
            m = tree.parent(m);
        }
        g.add(grown, own, objects);
    }
    g.finish()
}

/// The outermost appearances of `fragment`: the nodes whose path ends with it
/// and that have no appearance above them. The empty fragment appears at the
/// root.
fn appearances(tree: &FrameTree, fragment: &[&str]) -> Vec<FrameId> {
    if fragment.is_empty() {
        return vec![FrameId::ROOT];
    }
    let mut out = Vec::new();
    // (node, frames of the fragment matched by the path down to it); a node under
    // an appearance is not visited.
    let mut stack: Vec<(FrameId, usize)> = tree.children(FrameId::ROOT).map(|c| (c, 0)).collect();
    while let Some((n, before)) = stack.pop() {
        let name = tree.name(n);
        let matched = longest_match(fragment, before, name);
        if matched == fragment.len() {
            out.push(n);
            continue;
        }
        stack.extend(tree.children(n).map(|c| (c, matched)));
    }
    out.sort_unstable();
    out
}

/// With the path above matching `fragment[..before]` at its end (the longest
/// such), how much of the fragment the path with `name` appended matches at its
/// end. A fragment that repeats a frame (`a;b;a;c`) can restart partway; this
/// falls back as the classic string matcher does, through shorter matches.
fn longest_match(fragment: &[&str], before: usize, name: &str) -> usize {
    let mut k = before;
    loop {
        if fragment.get(k) == Some(&name) {
            return k + 1;
        }
        if k == 0 {
            return 0;
        }
        // The next shorter prefix of the fragment that is also a suffix of
        // `fragment[..k]`.
        k = (1..k)
            .rev()
            .find(|&j| fragment[..j] == fragment[k - j..k])
            .unwrap_or(0);
    }
}

/// A heavy fragment: [`hot_paths`]'s answer.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HotPath {
    /// Its frames, caller first.
    pub frames: Vec<String>,
    /// The weight of the stacks that contain it (in the tree's unit).
    pub weight: u64,
    /// The sampled objects of those stacks.
    pub objects: u64,
    /// Whether the path goes on toward its callees, as heavy, beyond
    /// [`MAX_HOT_PATH`] frames (it is shown cut there).
    pub cut: bool,
}

/// Longest cycle of frames [`folded`] looks for.
const MAX_CYCLE: usize = 8;

/// A path's frames as a line, caller first (`a > b > c`), with each run of a
/// repeated cycle written once with its count: `main > nest ×1000 > leaf`,
/// `main > (even > odd) ×20 > leaf`. The cycle that covers the most frames
/// from a frame is taken, the shortest among equals.
pub fn folded(frames: &[String]) -> String {
    folded_parts(frames).join(" > ")
}

/// [`folded`]'s parts: a frame, or a repeated cycle with its count.
pub fn folded_parts(frames: &[String]) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        let mut best = (1, 1); // cycle length, repeats
        for k in 1..=MAX_CYCLE.min((frames.len() - i) / 2) {
            let cycle = &frames[i..i + k];
            let mut n = 1;
            while frames.get(i + n * k..i + (n + 1) * k) == Some(cycle) {
                n += 1;
            }
            if n > 1 && n * k > best.0 * best.1 {
                best = (k, n);
            }
        }
        let (k, n) = best;
        parts.push(match (k, n) {
            (_, 1) => frames[i].clone(),
            (1, n) => format!("{} ×{n}", frames[i]),
            (k, n) => format!("({}) ×{n}", frames[i..i + k].join(" > ")),
        });
        i += k * n;
    }
    parts
}

/// Longest fragment [`hot_paths`] reports. A heavier run (a deep recursion) is
/// reported by its outermost window of this many frames, marked [`HotPath::cut`].
pub const MAX_HOT_PATH: usize = 64;

/// A fragment being weighed: the fragment one frame shorter at its end
/// (`prefix`) or at its start (`suffix`), and its last frame's name.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    prefix: u32,
    suffix: u32,
    name: u32,
    length: u32,
    weight: u64,
    objects: u64,
}

/// The fragments of `tree` of at least `frequency` of its weight that no
/// one-frame extension explains to within `tolerance` of its weight (both
/// shares of the tree's total), heaviest first, then by frames.
pub fn hot_paths(tree: &FrameTree, frequency: f64, tolerance: f64) -> Vec<HotPath> {
    let total = tree.total();
    if total == 0 {
        return Vec::new();
    }
    let threshold = ((total as f64 * frequency).ceil() as u64).max(1);
    let slack = (total as f64 * tolerance).floor() as u64;
    let nodes = tree.len();
    let order = Preorder::of(tree);
    // Frame names as small ids.
    let mut name_ids: FxHashMap<&str, u32> = FxHashMap::default();
    let mut name_of = vec![NONE; nodes];
    for (i, slot) in name_of.iter_mut().enumerate().skip(1) {
        let name = tree.name(FrameId::from_index(i));
        let next = name_ids.len() as u32;
        *slot = *name_ids.entry(name).or_insert(next);
    }
    let mut names: Vec<&str> = vec![""; name_ids.len()];
    for (&n, &id) in &name_ids {
        names[id as usize] = n;
    }
    // Every heavy fragment found; per node, the heavy fragment of the current
    // length that ends there; the nodes where one does (only they can end a
    // longer one).
    let mut heavy: Vec<Candidate> = Vec::new();
    let mut ending = vec![NONE; nodes];
    let mut marked: Vec<u32> = Vec::new();
    // (candidate, node): where each fragment being weighed ends.
    let mut at: Vec<(u32, u32)> = (1..nodes as u32)
        .map(|i| (name_of[i as usize], i))
        .collect();
    // In preorder, which each level keeps.
    at.sort_unstable_by_key(|&(_, n)| order.place[n as usize]);
    let mut candidates: Vec<Candidate> = (0..names.len() as u32)
        .map(|name| Candidate {
            prefix: NONE,
            suffix: NONE,
            name,
            length: 1,
            weight: 0,
            objects: 0,
        })
        .collect();
    // One length beyond the longest reported, to tell a cut path's outermost
    // window from the others.
    for length in 1..=MAX_HOT_PATH + 1 {
        order.weigh(tree, &at, &mut candidates);
        let mut id_of = vec![NONE; candidates.len()];
        for (i, c) in candidates.iter().enumerate() {
            if c.weight >= threshold {
                id_of[i] = heavy.len() as u32;
                heavy.push(*c);
            }
        }
        if length > MAX_HOT_PATH {
            break;
        }
        // Only the fragments of this length end anywhere now.
        for &n in &marked {
            ending[n as usize] = NONE;
        }
        at.retain(|&(c, n)| {
            ending[n as usize] = id_of[c as usize];
            ending[n as usize] != NONE
        });
        marked.clear();
        marked.extend(at.iter().map(|&(_, n)| n));
        // Longer by one: a node whose parent ends a heavy fragment (the new
        // fragment's prefix) and which ends one itself (its suffix).
        let mut index: FxHashMap<(u32, u32), u32> = FxHashMap::default();
        candidates.clear();
        let mut next_at = Vec::with_capacity(at.len());
        for &(_, n) in &at {
            let parent = tree.parent(FrameId::from_index(n as usize)).index();
            let (prefix, suffix) = (ending[parent], ending[n as usize]);
            if parent == 0 || prefix == NONE {
                continue;
            }
            let name = name_of[n as usize];
            let next = candidates.len() as u32;
            let c = *index.entry((prefix, name)).or_insert_with(|| {
                candidates.push(Candidate {
                    prefix,
                    suffix,
                    name,
                    length: length as u32 + 1,
                    weight: 0,
                    objects: 0,
                });
                next
            });
            next_at.push((c, n));
        }
        if candidates.is_empty() {
            break;
        }
        at = next_at;
    }
    // The heaviest one-frame extension of each fragment, toward callers and
    // toward callees.
    let mut toward_callers = vec![0u64; heavy.len()];
    let mut toward_callees = vec![0u64; heavy.len()];
    for c in &heavy {
        if let Some(l) = toward_callees.get_mut(c.prefix as usize) {
            *l = (*l).max(c.weight);
        }
        if let Some(l) = toward_callers.get_mut(c.suffix as usize) {
            *l = (*l).max(c.weight);
        }
    }
    let frames = |mut id: u32| {
        let mut out = Vec::new();
        while let Some(c) = heavy.get(id as usize) {
            out.push(names[c.name as usize].to_string());
            id = c.prefix;
        }
        out.reverse();
        out
    };
    let mut out = Vec::new();
    for (i, c) in heavy.iter().enumerate() {
        let keep = c.weight.saturating_sub(slack);
        let callees = toward_callees[i] >= keep && toward_callees[i] > 0;
        let cut = c.length as usize == MAX_HOT_PATH && callees;
        if c.length as usize > MAX_HOT_PATH || toward_callers[i] >= keep && toward_callers[i] > 0 {
            continue;
        }
        if callees && !cut {
            continue;
        }
        out.push(HotPath {
            frames: frames(i as u32),
            weight: c.weight,
            objects: c.objects,
            cut,
        });
    }
    out.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then_with(|| a.frames.cmp(&b.frames))
    });
    out
}

/// Each node's place in a depth-first walk of the tree, and where its subtree's
/// places end: a node is under another exactly when its place is within the
/// other's span.
struct Preorder {
    place: Vec<u32>,
    end: Vec<u32>,
}

impl Preorder {
    fn of(tree: &FrameTree) -> Preorder {
        let n = tree.len();
        let (mut place, mut end) = (vec![0u32; n], vec![0u32; n]);
        let mut next = 0u32;
        let mut stack = vec![(FrameId::ROOT, false)];
        while let Some((node, leaving)) = stack.pop() {
            if leaving {
                end[node.index()] = next;
                continue;
            }
            place[node.index()] = next;
            next += 1;
            stack.push((node, true));
            stack.extend(tree.children(node).map(|c| (c, false)));
        }
        Preorder { place, end }
    }

    /// Adds to each candidate the weight of its outermost appearances in `at`
    /// (candidate, node), which is in preorder: a node's total, unless the same
    /// candidate appears above it. In preorder, the last appearance counted before
    /// a node is the only one that can be above it.
    fn weigh(&self, tree: &FrameTree, at: &[(u32, u32)], candidates: &mut [Candidate]) {
        // Per candidate, where the span of its last counted appearance ends.
        let mut open = vec![0u32; candidates.len()];
        for &(c, n) in at {
            let n = n as usize;
            let (Some(end), Some(cand)) =
                (open.get_mut(c as usize), candidates.get_mut(c as usize))
            else {
                continue;
            };
            if self.place[n] < *end {
                continue;
            }
            *end = self.end[n];
            let id = FrameId::from_index(n);
            cand.weight = cand.weight.saturating_add(tree.weight(id).1);
            cand.objects = cand.objects.saturating_add(tree.objects(id).1);
        }
    }
}

/// A function's weight in a tree: [`functions`]' answer.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FunctionWeight {
    /// The frame's name.
    pub name: String,
    /// The weight of the stacks it appears in, each once.
    pub total: u64,
    /// The weight of the stacks it ends (its own allocations).
    #[serde(rename = "self")]
    pub own: u64,
}

/// Every frame name of `tree`, with the weight of the stacks it appears in and
/// of those it ends, heaviest total first (then by name).
///
/// A stack contains a name from its outermost appearance down, so a node adds
/// its total to its name only where the name is not already on the path above
/// it: one walk of the tree, counting the names on the path.
pub fn functions(tree: &FrameTree) -> Vec<FunctionWeight> {
    let mut ids: FxHashMap<&str, usize> = FxHashMap::default();
    let mut out: Vec<FunctionWeight> = Vec::new();
    // How many times each name is on the path from the root to the node.
    let mut on_path: Vec<u32> = Vec::new();
    // (node, entering): a node is entered, its children walked, then left.
    let mut stack: Vec<(FrameId, bool)> = tree.children(FrameId::ROOT).map(|c| (c, true)).collect();
    while let Some((node, entering)) = stack.pop() {
        let name = tree.name(node);
        let id = *ids.entry(name).or_insert_with(|| {
            out.push(FunctionWeight {
                name: name.to_string(),
                total: 0,
                own: 0,
            });
            on_path.push(0);
            out.len() - 1
        });
        if !entering {
            on_path[id] -= 1;
            continue;
        }
        let (own, total) = tree.weight(node);
        if on_path[id] == 0 {
            out[id].total += total;
        }
        out[id].own += own;
        on_path[id] += 1;
        stack.push((node, false));
        stack.extend(tree.children(node).map(|c| (c, true)));
    }
    out.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn tree(lines: &[(&str, u64)]) -> FrameTree {
        FrameTree::from_folded(lines)
    }

    /// A fragment's weight the slow way: every stack that contains it, once.
    fn naive_weight(lines: &[(&str, u64)], fragment: &[&str]) -> u64 {
        lines
            .iter()
            .filter(|(s, _)| {
                let f: Vec<&str> = s.split(';').collect();
                f.windows(fragment.len()).any(|w| w == fragment)
            })
            .map(|l| l.1)
            .sum()
    }

    const LINES: &[(&str, u64)] = &[
        ("main;parse;lex;alloc", 40),
        ("main;parse;lex", 5),
        ("main;check;lex;alloc", 20),
        ("main;check;rec;rec;rec;alloc", 30),
        ("main;emit", 5),
        ("other;rec;lex;alloc", 10),
    ];

    #[test]
    fn a_focus_weighs_each_stack_through_the_fragment_once() {
        let t = tree(LINES);
        for fragment in [
            &["lex"][..],
            &["lex", "alloc"],
            &["rec"],
            &["rec", "rec"],
            &["main", "check"],
            &["rec", "lex", "alloc"],
        ] {
            let f = focus(&t, fragment);
            assert_eq!(f.found, fragment.len());
            let w = naive_weight(LINES, fragment);
            assert_eq!(f.callees.total(), w, "{fragment:?}");
            assert_eq!(f.callers.total(), w, "{fragment:?}");
        }
        let f = focus(&t, &["lex"]);
        let mut callers = f.callers.lines();
        callers.sort();
        assert_eq!(
            callers,
            [
                ("check;main".to_string(), 20),
                ("parse;main".to_string(), 45),
                ("rec;other".to_string(), 10),
            ]
        );
        let mut callees = f.callees.lines();
        callees.sort();
        // The root stands for `lex` itself: its own weight is an empty stack.
        assert_eq!(callees, [(String::new(), 5), ("alloc".to_string(), 70)]);
        // In a recursion only the outermost `rec` counts.
        let f = focus(&t, &["rec"]);
        assert_eq!(f.callees.total(), 40);
        assert!(
            f.callees
                .lines()
                .contains(&("rec;rec;alloc".to_string(), 30))
        );
    }

    #[test]
    fn the_inverted_tree_holds_every_stack_reversed() {
        let t = tree(LINES);
        let mut got = inverted(&t).lines();
        got.sort();
        let mut expected: Vec<(String, u64)> = LINES
            .iter()
            .map(|(s, w)| (s.split(';').rev().collect::<Vec<_>>().join(";"), *w))
            .collect();
        expected.sort();
        assert_eq!(got, expected);
    }

    #[test]
    fn functions_weigh_each_stack_once_however_deep_the_recursion() {
        let lines = [
            ("main;f;g;f;g", 5),
            ("main;f", 3),
            ("main;h;g", 7),
            ("main;g;g;g", 2),
            ("h", 1),
        ];
        let got = functions(&tree(&lines));
        // The slow way: every stack once per distinct name, and its leaf.
        let mut want: Vec<FunctionWeight> = Vec::new();
        for name in ["main", "f", "g", "h"] {
            let total = lines
                .iter()
                .filter(|(s, _)| s.split(';').any(|f| f == name))
                .map(|(_, w)| w)
                .sum();
            let own = lines
                .iter()
                .filter(|(s, _)| s.split(';').next_back() == Some(name))
                .map(|(_, w)| w)
                .sum();
            want.push(FunctionWeight {
                name: name.to_string(),
                total,
                own,
            });
        }
        want.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
        assert_eq!(got, want);
        assert_eq!(got[0].name, "main");
        assert_eq!(
            (got[1].name.as_str(), got[1].total, got[1].own),
            ("g", 14, 14)
        );
    }

    #[test]
    fn a_fragment_no_stack_holds_focuses_on_its_longest_leading_part() {
        let t = tree(LINES);
        let f = focus(&t, &["main", "parse", "nowhere"]);
        assert_eq!(f.found, 2);
        assert_eq!(f.callees.total(), 45);
        let f = focus(&t, &[]);
        assert_eq!(
            (f.found, f.callees.total(), f.callers.total()),
            (0, 110, 110)
        );
        assert_eq!(f.callees.lines(), t.lines());
    }

    #[test]
    fn repeated_frames_in_a_fragment_match_where_they_restart() {
        let lines = [("a;a;b;x", 3), ("a;b;a;b;c", 4), ("a;b;a;a;b;c", 5)];
        let t = tree(&lines);
        for fragment in [
            &["a", "b"][..],
            &["a", "b", "c"],
            &["a", "a", "b"],
            &["b", "a", "b", "c"],
        ] {
            assert_eq!(
                focus(&t, fragment).callees.total(),
                naive_weight(&lines, fragment),
                "{fragment:?}"
            );
        }
    }

    #[test]
    fn recursive_runs_are_written_once_with_their_count() {
        let f = |names: &str| -> Vec<String> { names.split(' ').map(str::to_string).collect() };
        assert_eq!(
            folded(&f("main nest nest nest leaf")),
            "main > nest ×3 > leaf"
        );
        assert_eq!(
            folded(&f("main even odd even odd even odd leaf")),
            "main > (even > odd) ×3 > leaf"
        );
        assert_eq!(folded(&f("a b c")), "a > b > c");
        // The cycle that covers more frames wins over a shorter one at the start.
        assert_eq!(folded(&f("x x y x x y")), "(x > x > y) ×2");
        assert_eq!(folded(&f("r r r r")), "r ×4");
        assert_eq!(folded(&[]), "");
        let deep: Vec<String> = std::iter::once("main".to_string())
            .chain(std::iter::repeat_n("nest".to_string(), 1000))
            .collect();
        assert_eq!(folded(&deep), "main > nest ×1000");
    }

    #[test]
    fn hot_paths_are_the_heavy_fragments_no_longer_one_explains() {
        let t = tree(LINES);
        // 10% of 110: 11.
        let paths = hot_paths(&t, 0.1, 0.0);
        let shown: Vec<(String, u64)> = paths
            .iter()
            .map(|p| (p.frames.join(";"), p.weight))
            .collect();
        // Every heavy fragment's weight is exact.
        for (f, w) in &shown {
            let frames: Vec<&str> = f.split(';').collect();
            assert_eq!(*w, naive_weight(LINES, &frames), "{f}");
        }
        // `main;parse;lex;alloc` (40) explains `parse;lex;alloc` and
        // `main;parse`... only where nothing is lost: `main;parse` weighs 45
        // and its extension 45 (`main;parse;lex`), which is explained by
        // nothing longer (`main;parse;lex;alloc` is 40).
        assert!(
            shown.contains(&("main;parse;lex".to_string(), 45)),
            "{shown:?}"
        );
        assert!(shown.contains(&("main;parse;lex;alloc".to_string(), 40)));
        assert!(
            !shown
                .iter()
                .any(|(f, _)| f == "main;parse" || f == "parse;lex")
        );
        // `lex;alloc` is in three kinds of stacks (70): no extension keeps it all.
        assert!(shown.contains(&("lex;alloc".to_string(), 70)));
        // `main` weighs 100 and every extension less: reported.
        assert!(shown.contains(&("main".to_string(), 100)));
        // Heaviest first.
        assert!(paths.windows(2).all(|w| w[0].weight >= w[1].weight));
        // With a tolerance of 10% of 110 (11), `main;parse;lex` (45) is explained
        // by `main;parse;lex;alloc` (40).
        let tolerant = hot_paths(&t, 0.1, 0.1);
        let names: Vec<String> = tolerant.iter().map(|p| p.frames.join(";")).collect();
        assert!(!names.contains(&"main;parse;lex".to_string()), "{names:?}");
        assert!(
            names.contains(&"main;parse;lex;alloc".to_string()),
            "{names:?}"
        );
    }

    /// Hot paths the slow way: every fragment of every stack weighed, the rule
    /// applied as written.
    fn naive_hot_paths(
        lines: &[(String, u64)],
        frequency: f64,
        tolerance: f64,
    ) -> Vec<(String, u64)> {
        let lines: Vec<(&str, u64)> = lines.iter().map(|(s, w)| (s.as_str(), *w)).collect();
        let total: u64 = lines.iter().map(|l| l.1).sum();
        let threshold = ((total as f64 * frequency).ceil() as u64).max(1);
        let slack = (total as f64 * tolerance).floor() as u64;
        let mut weights: std::collections::BTreeMap<Vec<&str>, u64> = Default::default();
        for (s, _) in &lines {
            let f: Vec<&str> = s.split(';').collect();
            for i in 0..f.len() {
                for j in i + 1..=f.len() {
                    weights.entry(f[i..j].to_vec()).or_insert(0);
                }
            }
        }
        for (f, w) in weights.iter_mut() {
            *w = naive_weight(&lines, f);
        }
        let heavy = |f: &[&str]| weights.get(f).copied().filter(|&w| w >= threshold);
        let mut out = Vec::new();
        for (f, &w) in &weights {
            if w < threshold {
                continue;
            }
            let longest = weights
                .keys()
                .filter(|g| g.len() == f.len() + 1 && (g[1..] == f[..] || g[..f.len()] == f[..]))
                .filter_map(|g| heavy(g))
                .max()
                .unwrap_or(0);
            if longest < w.saturating_sub(slack) {
                out.push((f.join(";"), w));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn hot_paths_match_every_fragment_weighed_one_by_one() {
        let mut seed: u64 = 7;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for round in 0..40 {
            let mut lines: Vec<(String, u64)> = Vec::new();
            for _ in 0..1 + next(12) {
                let depth = 1 + next(7);
                let frames: Vec<String> = (0..depth).map(|_| format!("f{}", next(5))).collect();
                lines.push((frames.join(";"), 1 + next(50)));
            }
            let refs: Vec<(&str, u64)> = lines.iter().map(|(s, w)| (s.as_str(), *w)).collect();
            let t = tree(&refs);
            for (frequency, tolerance) in [(0.05, 0.0), (0.2, 0.01), (0.3, 0.1)] {
                let mut got: Vec<(String, u64)> = hot_paths(&t, frequency, tolerance)
                    .into_iter()
                    .map(|p| (p.frames.join(";"), p.weight))
                    .collect();
                got.sort();
                // The tree merges equal stacks: weigh the merged lines.
                assert_eq!(
                    got,
                    naive_hot_paths(&t.lines(), frequency, tolerance),
                    "round {round} {lines:?} {frequency} {tolerance}"
                );
            }
        }
    }

    #[test]
    fn no_weight_no_hot_path_and_a_long_chain_is_cut() {
        assert!(hot_paths(&tree(&[]), 0.005, 0.0001).is_empty());
        let chain: Vec<String> = (0..100).map(|i| format!("f{i}")).collect();
        let line = chain.join(";");
        let t = tree(&[(line.as_str(), 7)]);
        let paths = hot_paths(&t, 0.005, 0.0001);
        // The outermost window alone, marked cut.
        assert_eq!(paths.len(), 1, "{paths:?}");
        assert_eq!(paths[0].frames, chain[..MAX_HOT_PATH]);
        assert!(paths[0].cut);
        // A chain no longer than the limit is whole.
        let line = chain[..MAX_HOT_PATH].join(";");
        let paths = hot_paths(&tree(&[(line.as_str(), 7)]), 0.005, 0.0001);
        assert_eq!(paths.len(), 1);
        assert!(!paths[0].cut);
    }
}
