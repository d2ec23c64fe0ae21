//! The kernel's function symbols, from `/proc/kallsyms`, for naming kernel
//! addresses (a profiler's kernel frames).
//!
//! Each line of `/proc/kallsyms` is `<address in hex> <type> <name>`,
//! followed by `\t[<module>]` for a module's symbols. The types are `nm`'s:
//! `t`/`T` are text (code) symbols, `w`/`W` weak ones (taken as code here,
//! as the kernel's weak symbols are functions), `a`/`A` absolute values that
//! are no addresses, and the others data. The file has no sizes, so a
//! function is taken to run from its address to the next symbol's, of any
//! type but absolute (which keeps a function from running on into the data
//! after it); the last one, with no symbol after it, to the end of its 4 KiB
//! page. Of several functions at one address, the first global (upper-case)
//! one in the file names it, else the first.
//!
//! Without the right privileges (`kernel.kptr_restrict`), every address
//! reads as zero: such lines are left out, and [`Kallsyms::read`] then gives
//! `None`.

/// Where the kernel lists its symbols.
const KALLSYMS: &str = "/proc/kallsyms";

/// The extent given to the last function, which no symbol follows.
const PAGE: u64 = 4096;

/// One function symbol.
#[derive(Clone, Copy, Debug)]
struct KSym {
    address: u64,
    /// The first address past it.
    end: u64,
    name_start: usize,
    name_len: usize,
}

/// The kernel's function symbols, sorted by address.
#[derive(Clone, Debug, Default)]
pub struct Kallsyms {
    entries: Vec<KSym>,
    names: String,
}

impl Kallsyms {
    /// The function symbols of `/proc/kallsyms`-format `text`. Lines that
    /// do not parse, and zero addresses, are left out.
    pub fn parse(text: &str) -> Kallsyms {
        // Where some symbol starts: the ends of the functions.
        let mut starts = Vec::new();
        // (address, rank: lower is preferred, line order, name)
        let mut functions = Vec::new();
        for (line_no, line) in text.lines().enumerate() {
            let mut fields = line.split_whitespace();
            let (Some(address), Some(kind), Some(name)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let Ok(address) = u64::from_str_radix(address, 16) else {
                continue;
            };
            let mut kind_chars = kind.chars();
            let (Some(kind), None) = (kind_chars.next(), kind_chars.next()) else {
                continue;
            };
            if address == 0 || kind.eq_ignore_ascii_case(&'a') {
                continue;
            }
            starts.push(address);
            if matches!(kind, 't' | 'T' | 'w' | 'W') {
                let rank = u8::from(kind.is_ascii_lowercase());
                functions.push((address, rank, line_no, name));
            }
        }
        starts.sort_unstable();
        starts.dedup();
        functions.sort_unstable_by_key(|&(address, rank, line_no, _)| (address, rank, line_no));
        functions.dedup_by_key(|&mut (address, ..)| address);

        let mut out = Kallsyms::default();
        out.entries.reserve(functions.len());
        for (address, _, _, name) in functions {
            let next = starts.partition_point(|&s| s <= address);
            let end = match starts.get(next) {
                Some(&end) => end,
                None => (address & !(PAGE - 1)).saturating_add(PAGE),
            };
            out.entries.push(KSym {
                address,
                end,
                name_start: out.names.len(),
                name_len: name.len(),
            });
            out.names.push_str(name);
        }
        out
    }

    /// The function symbols of `/proc/kallsyms`; `None` when it cannot be
    /// read or lists no address (all zeros: not privileged enough).
    pub fn read() -> Option<Kallsyms> {
        let text = std::fs::read_to_string(KALLSYMS).ok()?;
        let k = Kallsyms::parse(&text);
        (!k.is_empty()).then_some(k)
    }

    /// The function that contains `addr`, and the offset of `addr` in it.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self.entries.partition_point(|e| e.address <= addr);
        let e = self.entries.get(i.checked_sub(1)?)?;
        if addr >= e.end {
            return None;
        }
        let name = self
            .names
            .get(e.name_start..e.name_start + e.name_len)
            .unwrap_or("");
        Some((name, addr - e.address))
    }

    /// True when there is no function symbol at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The number of function symbols.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
ffffffff81000000 T _stext
ffffffff81000000 t startup_64
ffffffff81001000 T do_one_initcall
ffffffff81001000 W do_one_initcall_alias
ffffffff81001800 t local_helper
ffffffff81002000 D some_data
0000000000000000 A fixed_percpu_data
ffffffff81003000 w weak_fn
ffffffffc0a01000 t ext4_helper\t[ext4]
ffffffffc0a01100 T ext4_file_read_iter\t[ext4]
garbage line
ffffffffc0a02000 b ext4_bss\t[ext4]
";

    #[test]
    fn functions_run_to_the_next_symbol() {
        let k = Kallsyms::parse(TEXT);
        assert_eq!(k.len(), 6);
        assert_eq!(k.lookup(0xffffffff81000010), Some(("_stext", 0x10)));
        assert_eq!(k.lookup(0xffffffff81001004), Some(("do_one_initcall", 4)));
        assert_eq!(
            k.lookup(0xffffffff810017ff),
            Some(("do_one_initcall", 0x7ff))
        );
        assert_eq!(k.lookup(0xffffffff81001800), Some(("local_helper", 0)));
        // Data bounds the function before it, and names nothing itself.
        assert_eq!(k.lookup(0xffffffff81002000), None);
        assert_eq!(k.lookup(0xffffffff81003008), Some(("weak_fn", 8)));
        // A module's functions, without the module's name.
        assert_eq!(
            k.lookup(0xffffffffc0a01180),
            Some(("ext4_file_read_iter", 0x80))
        );
        assert_eq!(k.lookup(0xffffffffc0a02000), None);
        assert_eq!(k.lookup(0xffffffff80ffffff), None);
        assert_eq!(k.lookup(0), None);
    }

    #[test]
    fn the_last_function_ends_with_its_page() {
        let k = Kallsyms::parse("ffffffff81000100 T last\n");
        assert_eq!(k.lookup(0xffffffff81000fff), Some(("last", 0xeff)));
        assert_eq!(k.lookup(0xffffffff81001000), None);
        let k = Kallsyms::parse("fffffffffffff100 T at_the_top\n");
        assert_eq!(k.lookup(u64::MAX - 1), Some(("at_the_top", 0xefe)));
    }

    #[test]
    fn zero_addresses_are_no_addresses() {
        let restricted = "\
0000000000000000 T _stext
0000000000000000 T do_one_initcall
0000000000000000 t ext4_helper\t[ext4]
";
        let k = Kallsyms::parse(restricted);
        assert!(k.is_empty());
        assert_eq!(k.lookup(0), None);
        assert_eq!(k.lookup(0x1000), None);
        assert!(Kallsyms::parse("").is_empty());
    }

    #[test]
    fn reads_this_kernel_or_says_why_not() {
        // Whatever the privileges: never an empty table.
        if let Some(k) = Kallsyms::read() {
            assert!(!k.is_empty());
        }
    }
}
