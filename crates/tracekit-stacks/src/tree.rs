//! Call trees: stacks merged by their path of frames from the root, one node per
//! distinct path. The memtrace frame tree, a timeline range's flame graph and perf
//! samples' folded stacks are all grown here, frame by frame.
//!
//! A node is its caller's index and its frame's name as a number (the caller's
//! strings, or [`Names`] for trees that meet names as text), and whatever its owner
//! weighs it by. Nodes are kept in the order they were made, so a caller's index is
//! below its callees'. A node's children are found through one [`IdTable`] keyed by
//! (caller, name) rather than a map per node or a map of whole stacks. Nodes and
//! table are columns of the byte kit ([`Grow`]): in memory, or, for a tree that
//! grows with its input (a range of millions of distinct paths), in files of a
//! folder its owner names ([`CallTree::spilling`]).

use rustc_hash::FxHashMap;
use tracekit_columns::store::le_at;
use tracekit_columns::{Grow, Plain, Spill};

use crate::id_table::IdTable;

/// A node of a [`CallTree`]: its caller, its frame's name, and its owner's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Node<T> {
    /// The caller's index (the root is its own caller).
    pub parent: u32,
    /// The frame's name, as the tree's owner numbers names.
    pub name: u32,
    /// What the owner keeps per node (weights, counts).
    pub data: T,
}

// SAFETY: `repr(C)`: two `u32`s, then the data at offset 8, which is a
// multiple of any alignment up to 8; `WIDTH` fails to compile for a data
// type after which the node would be padded (its size then not 8 + its
// width). Every pattern of the bytes is two integers and a `Plain` value.
unsafe impl<T: Plain> Plain for Node<T> {
    const WIDTH: usize = {
        assert!(std::mem::size_of::<Node<T>>() == 8 + T::WIDTH);
        8 + T::WIDTH
    };

    fn from_le(b: &[u8]) -> Self {
        Node {
            parent: le_at(b, 0),
            name: le_at(b, 4),
            data: T::from_le(&b[8..]),
        }
    }
}

/// A call tree being grown (see the module docs).
#[derive(Clone, Debug)]
pub struct CallTree<T: Plain> {
    nodes: Grow<Node<T>>,
    /// Every node but the root, by its parent and name.
    children: IdTable,
}

impl<T: Plain + Default> CallTree<T> {
    /// The root's index: the empty stack, above every frame.
    pub const ROOT: u32 = 0;

    /// A tree of the root alone, named `root_name`.
    pub fn new(root_name: u32) -> CallTree<T> {
        CallTree::spilling(root_name, &Spill::memory())
    }

    /// [`CallTree::new`], its nodes and child table grown as `spill` says.
    pub fn spilling(root_name: u32, spill: &Spill) -> CallTree<T> {
        let mut nodes = Grow::new(spill);
        nodes.push(Node {
            parent: Self::ROOT,
            name: root_name,
            data: T::default(),
        });
        CallTree {
            nodes,
            children: IdTable::spilling(spill),
        }
    }

    /// `parent`'s callee named `name`, made if new.
    #[inline]
    pub fn child(&mut self, parent: u32, name: u32) -> u32 {
        let nodes = self.nodes.as_slice();
        let found = self.children.find(child_key(parent, name), |c| {
            let n = &nodes[c as usize];
            n.parent == parent && n.name == name
        });
        let slot = match found {
            Ok(c) => return c,
            Err(slot) => slot,
        };
        let next = self.push_child(parent, name);
        let nodes = self.nodes.as_slice();
        let key_of = |id: u32| {
            let n = &nodes[id as usize];
            child_key(n.parent, n.name)
        };
        self.children.insert(slot, next, nodes.len(), key_of);
        next
    }

    /// A new callee `name` of `parent`, which has none of that name: for a tree
    /// grown only this way, which never looks a child up ([`CallTree::child`]
    /// would not find this one).
    #[inline]
    pub fn push_child(&mut self, parent: u32, name: u32) -> u32 {
        self.nodes.push(Node {
            parent,
            name,
            data: T::default(),
        });
        (self.nodes.len() - 1) as u32
    }
}

impl<T: Plain> CallTree<T> {
    /// `node` or its innermost caller named `name`, if one is (the root never is).
    pub fn ancestor_named(&self, mut node: u32, name: u32) -> Option<u32> {
        while node != 0 {
            let n = self.nodes.get(node as usize)?;
            if n.name == name {
                return Some(node);
            }
            node = n.parent;
        }
        None
    }

    /// Number of nodes, the root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the tree is the root alone.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() < 2
    }

    /// The node of index `node`.
    #[inline]
    pub fn node(&self, node: u32) -> Option<&Node<T>> {
        self.nodes.get(node as usize)
    }

    /// The data of node `node`, to change.
    #[inline]
    pub fn data_mut(&mut self, node: u32) -> Option<&mut T> {
        self.nodes.get_mut(node as usize).map(|n| &mut n.data)
    }

    /// Every node, in the order made (the root first, a caller before its callees).
    pub fn nodes(&self) -> &[Node<T>] {
        &self.nodes
    }

    /// The nodes, the child table dropped: where they grew (in memory, or in
    /// a file).
    pub fn into_nodes(self) -> Grow<Node<T>> {
        self.nodes
    }
}

/// A node's key in the child table: its parent and its name.
#[inline]
fn child_key(parent: u32, name: u32) -> u64 {
    u64::from(parent) << 32 | u64::from(name)
}

/// Names as numbers, each text once, for a [`CallTree`] that meets its frames'
/// names as text.
#[derive(Clone, Debug, Default)]
pub struct Names {
    names: Vec<Box<str>>,
    ids: FxHashMap<Box<str>, u32>,
}

impl Names {
    /// No names yet.
    pub fn new() -> Names {
        Names::default()
    }

    /// The number of `name`, given the next number if new.
    #[inline]
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.into());
        self.ids.insert(name.into(), id);
        id
    }

    /// The name numbered `id`.
    pub fn get(&self, id: u32) -> Option<&str> {
        self.names.get(id as usize).map(|n| &**n)
    }

    /// How many names there are.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The names by number, the lookup table dropped.
    pub fn into_vec(self) -> Vec<Box<str>> {
        self.names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_of_names_is_one_node() {
        let mut names = Names::new();
        let mut t: CallTree<u64> = CallTree::new(names.id("all"));
        let stacks: [&[&str]; 4] = [&["main", "f"], &["main", "g"], &["main", "f"], &["f"]];
        let mut leaves = Vec::new();
        for stack in stacks {
            let mut node = CallTree::<u64>::ROOT;
            for f in stack {
                node = t.child(node, names.id(f));
            }
            *t.data_mut(node).unwrap() += 1;
            leaves.push(node);
        }
        assert_eq!(leaves[0], leaves[2]);
        assert_ne!(leaves[0], leaves[3]);
        // Root, main, main;f, main;g, f.
        assert_eq!(t.len(), 5);
        assert!(
            t.nodes()
                .iter()
                .enumerate()
                .skip(1)
                .all(|(i, n)| (n.parent as usize) < i)
        );
        let f = names.id("f");
        assert_eq!(t.ancestor_named(leaves[0], f), Some(leaves[0]));
        assert_eq!(t.ancestor_named(leaves[1], f), None);
        assert_eq!(t.node(leaves[0]).unwrap().data, 2);
        assert_eq!(names.get(f), Some("f"));
        assert_eq!(names.into_vec().len(), 4);
    }

    #[test]
    fn children_are_found_again_past_the_table_growing() {
        let mut t: CallTree<u32> = CallTree::new(0);
        let ids: Vec<u32> = (0..5000).map(|i| t.child(i % 7, i)).collect();
        for (i, &id) in (0..5000).zip(&ids) {
            assert_eq!(t.child(i % 7, i), id);
        }
        assert_eq!(t.len(), 5001);
    }
}
