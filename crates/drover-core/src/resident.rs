//! What a long-lived drover process keeps resident of its own code.
//!
//! A page of the binary's code, once run, stays mapped in the process for its life (and
//! the kernel maps the pages around it too): an owner that opened its ledger, ran its
//! migrations, read its config and the model catalog, and started its socket would hold
//! all of that code for days while it waits on pipes (docs/ARCHITECTURE.md §"Memory").
//! [`let_go_of_code`] gives up the mapping of the code: the owner calls it once it is up
//! and again every [`EVERY`] (what a burst of runs ran need not stay mapped through the
//! quiet hours after it); what runs afterwards maps back in as it runs, from the page
//! cache (nothing is read from disk again, and nothing else is touched: the binary's
//! data and the heap stay).
//!
//! What must stay true: only the executable's own read-and-execute mapping is given up
//! (never a writable one, whose pages hold the relocations and statics), and a failure
//! to read the maps changes nothing.

/// How often a long-lived process gives its code's mapping up again.
pub const EVERY: std::time::Duration = std::time::Duration::from_secs(600);

/// Gives up the mapping of the executable's code pages; the ones run later fault back in.
#[cfg(target_os = "linux")]
pub fn let_go_of_code() {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return;
    };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return;
    };
    let exe = exe.to_string_lossy();
    for (start, end) in code_mappings(&maps, &exe) {
        // SAFETY: the range is one of this process's own mappings of its executable,
        // read-only and executable (`r-xp`), so it holds no private data: MADV_DONTNEED
        // only takes its pages out of the page tables, and any thread running there
        // faults the same bytes back in from the file.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub fn let_go_of_code() {}

/// The address ranges of `exe`'s read-and-execute private mappings in `maps` (the text
/// of `/proc/self/maps`): `start-end perms offset dev inode path`.
fn code_mappings(maps: &str, exe: &str) -> Vec<(usize, usize)> {
    maps.lines()
        // The path is the last field, after spaces: the whole of it, not a tail of
        // another file's path.
        .filter(|line| {
            line.strip_suffix(exe)
                .is_some_and(|rest| rest.ends_with(' '))
        })
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            let range = fields.next()?;
            if fields.next()? != "r-xp" {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (end > start).then_some((start, end))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::code_mappings;

    #[test]
    fn only_the_executables_own_code_mapping_is_given_up() {
        let maps = "\
55d0a0000000-55d0a0100000 r--p 00000000 fd:01 42 /usr/bin/drover
55d0a0100000-55d0a0900000 r-xp 00100000 fd:01 42 /usr/bin/drover
55d0a0900000-55d0a0a00000 r--p 00900000 fd:01 42 /usr/bin/drover
55d0a0a00000-55d0a0a10000 rw-p 00a00000 fd:01 42 /usr/bin/drover
7f0000000000-7f0000100000 r-xp 00000000 fd:01 77 /usr/lib/libc.so.6
7f0000200000-7f0000300000 r-xp 00000000 fd:01 78 /usr/bin/drover-old
7f0000300000-7f0000380000 r-xp 00000000 fd:01 79 /home/me/usr/bin/drover
7f0000400000-7f0000300000 r-xp 00000000 fd:01 42 /usr/bin/drover
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
garbage line /usr/bin/drover
";
        assert_eq!(
            code_mappings(maps, "/usr/bin/drover"),
            vec![(0x55d0a0100000, 0x55d0a0900000)]
        );
        assert!(code_mappings("", "/usr/bin/drover").is_empty());
    }
}
