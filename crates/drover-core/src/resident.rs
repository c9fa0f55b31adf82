//! What a drover process keeps resident of its own code and heap, and how its heap is
//! used.
//!
//! A page of the binary's code, once run, stays mapped in the process for its life (and
//! the kernel maps the pages around it too): an owner that opened its ledger, ran its
//! migrations, read its config and the model catalog, and started its socket would hold
//! all of that code for days while it waits on pipes (docs/ARCHITECTURE.md §"Memory").
//! [`let_go`] gives up the mapping of the code and the heap's free pages: the owner calls
//! it once it is up and again every [`EVERY`] (what a burst of runs ran need not stay
//! mapped through the quiet hours after it); what runs afterwards maps back in as it
//! runs, from the page cache (nothing is read from disk again, and nothing else is
//! touched: the binary's data and the heap's live memory stay).
//!
//! The heap (glibc's allocator): [`limit_heap_arenas`] before any thread starts, in every
//! process; [`keep_freed_heap`] in the owner, whose busy turns allocate and free hundreds
//! of events' buffers at a time.
//!
//! What must stay true: only the executable's own read-and-execute mapping is given up
//! (never a writable one, whose pages hold the relocations and statics), and a failure
//! to read the maps changes nothing.

/// How often a long-lived process gives its code's mapping up again.
pub const EVERY: std::time::Duration = std::time::Duration::from_secs(600);

/// glibc gives every thread that allocates an arena of its own (up to eight per core),
/// each holding freed memory apart from the others: the tokio workers, the blocking
/// threads, the ledger writer, its sync thread and the log thread. [`HEAP_ARENAS`] serve
/// them. Called first, before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn limit_heap_arenas() {
    // SAFETY: mallopt only sets an allocator parameter; it is called before any other
    // thread exists, so no allocation runs concurrently.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, HEAP_ARENAS);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_heap_arenas() {}

/// How many heap arenas a drover process has. Two (what it had) held the owner with 48
/// active runs about 1 MiB lower than glibc's sixteen, but a busy owner's two tokio
/// workers and its ledger writer then took turns at the two arenas' locks: the writer
/// spent a third of its time waiting on them, and ingest ran at 60 % of raw SQLite. With
/// four, the writer, started after the workers and a blocking thread had theirs, still
/// shared one, and ingest was fast or slow by which. Six: every busy thread has its own
/// (ingest 80-88 % of raw in one-pair runs, sixteen 85-89 %), and the owner's peak with
/// 10 runs is 15.4-15.6 MiB (two: 15.4, sixteen: 16.1) (`cargo bench --bench ingest`,
/// `cargo bench --bench history`; docs/ARCHITECTURE.md §"Memory").
pub const HEAP_ARENAS: i32 = 6;

/// Freed memory the owner's heap keeps for reuse instead of returning it at once
/// (glibc's trim threshold), and the size from which a block is mapped on its own
/// instead (its mmap threshold). Left to glibc, both start at 128 KiB: a busy turn's
/// outbox of hundreds of events, grown past it, was mapped, faulted in page by page,
/// unmapped when the writer was done with it, and mapped again the next turn. What is
/// kept is given back by [`let_go`].
pub const KEPT_FREE_HEAP: usize = 32 << 20;

/// Sets the owner's heap to keep [`KEPT_FREE_HEAP`] of freed memory for reuse.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn keep_freed_heap() {
    let bytes = i32::try_from(KEPT_FREE_HEAP).unwrap_or(i32::MAX);
    // SAFETY: mallopt only sets allocator parameters; glibc takes them under its own
    // lock while other threads allocate.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, bytes);
        libc::mallopt(libc::M_TRIM_THRESHOLD, bytes);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn keep_freed_heap() {}

/// Gives up the mapping of the executable's code pages (the ones run later fault back
/// in) and the heap's free pages.
pub fn let_go() {
    let_go_of_code();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns whole free pages of the heap to the kernel, under
    // the allocator's own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Gives up the mapping of the executable's code pages; the ones run later fault back in.
#[cfg(target_os = "linux")]
fn let_go_of_code() {
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
fn let_go_of_code() {}

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
