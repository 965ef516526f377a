//! Multi-literal search for the dpi NF with vectorscan, the open fork of Intel's
//! Hyperscan (the engine Suricata and Snort 3 scan with), where the build found it
//! (Debian `libvectorscan-dev`): a set of literals compiled once into a [`Database`],
//! then scanned for in any number of buffers by a [`Scanner`] (its scratch space, one per
//! thread), every match reported as the literal's number and the offset just past its
//! end. Without the library, [`Database::block`] says how to get it and the dpi NF uses
//! aho-corasick.
//!
//! Block mode only: each buffer is scanned on its own (a packet, or a TCP flow's kept
//! bytes and its segment).

use std::sync::Arc;

/// The library's own version where built in (`5.4.9 2023-...`), or `None`.
pub fn version() -> Option<String> {
    imp::version()
}

/// Whether this build has vectorscan and this CPU runs it (it needs SSSE3).
pub fn available() -> bool {
    imp::available()
}

/// Which search the dpi NF uses by default, in words for `--version` and `sfclab nfs`.
pub fn in_use() -> String {
    match version() {
        Some(v) if available() => format!("vectorscan {}", v.trim()),
        Some(v) => format!("aho-corasick (vectorscan {v} is built in, but this CPU lacks its SSSE3)"),
        None => "aho-corasick (vectorscan was not found when this was built: apt-get install libvectorscan-dev and build again for DPI at Suricata's engine's speed)".into(),
    }
}

/// What a build without the library says when asked for it.
pub const NOT_BUILT: &str = "this build has no vectorscan (apt-get install libvectorscan-dev, then rebuild sfclab)";

/// One literal to search for: its bytes (any, NUL included) and whether case matters
/// (ASCII letters only, as Snort's `nocase`).
#[derive(Debug, Clone, Copy)]
pub struct Literal<'a> {
    pub bytes: &'a [u8],
    pub caseless: bool,
}

/// Literals compiled for block-mode scans; immutable, shared by every scanner of it.
pub struct Database {
    imp: imp::Database,
}

impl Database {
    /// The literals, numbered in order from 0 (the number each match reports).
    pub fn block(literals: &[Literal<'_>]) -> Result<Database, String> {
        if literals.is_empty() {
            return Err("no literals to compile".into());
        }
        if let Some(k) = literals.iter().position(|l| l.bytes.is_empty()) {
            return Err(format!("literal {k} is empty"));
        }
        Ok(Database {
            imp: imp::Database::block(literals)?,
        })
    }

    /// The compiled database's bytes.
    pub fn bytes(&self) -> usize {
        self.imp.bytes()
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").field("bytes", &self.bytes()).finish()
    }
}

/// A scan that did not complete: the library's error code (a match callback that asked
/// to stop is not one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanError(pub i32);

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "vectorscan's scan failed with error {}", self.0)
    }
}

impl std::error::Error for ScanError {}

/// Scans buffers for a database's literals with scratch space of its own: one per
/// thread (a scan takes it mutably).
pub struct Scanner {
    imp: imp::Scanner,
}

impl Scanner {
    pub fn new(db: Arc<Database>) -> Result<Scanner, String> {
        Ok(Scanner {
            imp: imp::Scanner::new(db)?,
        })
    }

    /// Calls `on_match(literal, end)` for every match of a literal in `data`, `end` the
    /// offset just past its last byte, in order of `end` (several literals ending at one
    /// offset in no set order), until it returns `false`. Overlapping matches are all
    /// reported. A callback that panics stops the scan, and the panic carries on after it.
    #[inline]
    pub fn scan<F: FnMut(u32, usize) -> bool>(&mut self, data: &[u8], on_match: F) -> Result<(), ScanError> {
        self.imp.scan(data, on_match)
    }

    /// The database it scans for.
    pub fn database(&self) -> &Database {
        self.imp.database()
    }
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner").finish_non_exhaustive()
    }
}

#[cfg(vectorscan)]
mod imp {
    //! The library's calls, declared by hand (the build checks the constants and the
    //! error's layout against the installed header: `shim/check.c`).
    use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_ulonglong, c_void};
    use std::ptr::{self, NonNull};
    use std::sync::Arc;

    use super::{Literal, ScanError};

    #[repr(C)]
    struct HsDatabase {
        _opaque: [u8; 0],
    }

    #[repr(C)]
    struct HsScratch {
        _opaque: [u8; 0],
    }

    #[repr(C)]
    struct HsCompileError {
        message: *mut c_char,
        expression: c_int,
    }

    type MatchHandler =
        unsafe extern "C" fn(id: c_uint, from: c_ulonglong, to: c_ulonglong, flags: c_uint, ctx: *mut c_void) -> c_int;

    const HS_SUCCESS: c_int = 0;
    const HS_SCAN_TERMINATED: c_int = -3;
    const HS_FLAG_CASELESS: c_uint = 1;
    const HS_MODE_BLOCK: c_uint = 1;

    unsafe extern "C" {
        fn hs_compile_multi(
            expressions: *const *const c_char,
            flags: *const c_uint,
            ids: *const c_uint,
            elements: c_uint,
            mode: c_uint,
            platform: *const c_void,
            db: *mut *mut HsDatabase,
            error: *mut *mut HsCompileError,
        ) -> c_int;
        fn hs_free_compile_error(error: *mut HsCompileError) -> c_int;
        fn hs_free_database(db: *mut HsDatabase) -> c_int;
        fn hs_database_size(db: *const HsDatabase, size: *mut usize) -> c_int;
        fn hs_alloc_scratch(db: *const HsDatabase, scratch: *mut *mut HsScratch) -> c_int;
        fn hs_free_scratch(scratch: *mut HsScratch) -> c_int;
        fn hs_scan(
            db: *const HsDatabase,
            data: *const c_char,
            length: c_uint,
            flags: c_uint,
            scratch: *mut HsScratch,
            on_event: Option<MatchHandler>,
            context: *mut c_void,
        ) -> c_int;
        fn hs_valid_platform() -> c_int;
        fn hs_version() -> *const c_char;
        fn sfclab_hs_abi_checked() -> c_int;
    }

    pub fn version() -> Option<String> {
        // SAFETY: hs_version returns a pointer to a static NUL-terminated string.
        let v = unsafe { CStr::from_ptr(hs_version()) };
        Some(v.to_string_lossy().into_owned())
    }

    pub fn available() -> bool {
        // SAFETY: both take nothing and touch no memory of ours.
        unsafe { sfclab_hs_abi_checked() == 1 && hs_valid_platform() == HS_SUCCESS }
    }

    pub struct Database {
        /// Owned: freed on drop, never written after compiling.
        db: NonNull<HsDatabase>,
    }

    // SAFETY: a compiled database is immutable; the library documents it as safe to
    // scan from many threads at once, each with its own scratch.
    unsafe impl Send for Database {}
    // SAFETY: as above: nothing changes it through a shared reference.
    unsafe impl Sync for Database {}

    impl Database {
        pub fn block(literals: &[Literal<'_>]) -> Result<Database, String> {
            if !available() {
                return Err("vectorscan needs SSSE3, which this CPU lacks".into());
            }
            let n = c_uint::try_from(literals.len()).map_err(|_| "too many literals".to_string())?;
            // Each byte escaped (`\xHH`): a literal as an expression. The pure-literal
            // API would take the bytes as they are, but 5.4.9's refuses a literal that
            // starts with a NUL byte as empty.
            let escaped: Vec<CString> = literals
                .iter()
                .map(|l| {
                    let hex: String = l.bytes.iter().map(|b| format!("\\x{b:02x}")).collect();
                    CString::new(hex).expect("hex escapes hold no NUL")
                })
                .collect();
            let expressions: Vec<*const c_char> = escaped.iter().map(|e| e.as_ptr()).collect();
            let flags: Vec<c_uint> = literals
                .iter()
                .map(|l| if l.caseless { HS_FLAG_CASELESS } else { 0 })
                .collect();
            let ids: Vec<c_uint> = (0..n).collect();
            let mut db: *mut HsDatabase = ptr::null_mut();
            let mut error: *mut HsCompileError = ptr::null_mut();
            // SAFETY: the three arrays hold `n` elements each and outlive the call (the
            // library copies what it keeps); each expression is a NUL-terminated string
            // kept alive by `escaped`; `db` and `error` are valid places for the results.
            let rc = unsafe {
                hs_compile_multi(
                    expressions.as_ptr(),
                    flags.as_ptr(),
                    ids.as_ptr(),
                    n,
                    HS_MODE_BLOCK,
                    ptr::null(),
                    &mut db,
                    &mut error,
                )
            };
            if rc != HS_SUCCESS {
                let why = if error.is_null() {
                    format!("vectorscan could not compile the literals (error {rc})")
                } else {
                    // SAFETY: on failure `error` is the library's, with a NUL-terminated
                    // message, until freed below.
                    let (message, k) = unsafe { (CStr::from_ptr((*error).message), (*error).expression) };
                    let why = match k {
                        k if k >= 0 => format!("literal {k}: {}", message.to_string_lossy()),
                        _ => message.to_string_lossy().into_owned(),
                    };
                    // SAFETY: freed once, not used after.
                    unsafe { hs_free_compile_error(error) };
                    why
                };
                return Err(why);
            }
            let db = NonNull::new(db).ok_or("vectorscan compiled no database")?;
            Ok(Database { db })
        }

        pub fn bytes(&self) -> usize {
            let mut size = 0;
            // SAFETY: `db` is a live database; `size` a valid place.
            match unsafe { hs_database_size(self.db.as_ptr(), &mut size) } {
                HS_SUCCESS => size,
                _ => 0,
            }
        }
    }

    impl Drop for Database {
        fn drop(&mut self) {
            // SAFETY: the database is ours, and no scanner uses it any more: each holds
            // an `Arc` to its `super::Database`.
            unsafe { hs_free_database(self.db.as_ptr()) };
        }
    }

    pub struct Scanner {
        /// Kept alive while the scratch is used with it.
        db: Arc<super::Database>,
        scratch: NonNull<HsScratch>,
    }

    // SAFETY: the scratch is used by one thread at a time (a scan takes `&mut self`);
    // nothing ties it to the thread that allocated it.
    unsafe impl Send for Scanner {}

    impl Scanner {
        pub fn new(db: Arc<super::Database>) -> Result<Scanner, String> {
            let mut scratch: *mut HsScratch = ptr::null_mut();
            // SAFETY: `db` is a live database; `scratch` a valid place for the result.
            let rc = unsafe { hs_alloc_scratch(db.imp.db.as_ptr(), &mut scratch) };
            match NonNull::new(scratch) {
                Some(scratch) if rc == HS_SUCCESS => Ok(Scanner { db, scratch }),
                _ => Err(format!("vectorscan could not allocate scratch space (error {rc})")),
            }
        }

        pub fn database(&self) -> &super::Database {
            &self.db
        }

        #[inline]
        pub fn scan<F: FnMut(u32, usize) -> bool>(&mut self, data: &[u8], on_match: F) -> Result<(), ScanError> {
            let length = c_uint::try_from(data.len()).map_err(|_| ScanError(-1))?;
            let mut call = Call {
                on_match,
                panicked: None,
            };
            // SAFETY: the database and the scratch (allocated for it) are live and the
            // scratch is ours alone (`&mut self`); `data` is `length` readable bytes for
            // the call; the context is `call`, whose type `on_event::<F>` casts it back
            // to, live for the call (the library keeps no pointer after it returns).
            let rc = unsafe {
                hs_scan(
                    self.db.imp.db.as_ptr(),
                    data.as_ptr().cast(),
                    length,
                    0,
                    self.scratch.as_ptr(),
                    Some(on_event::<F>),
                    (&raw mut call).cast(),
                )
            };
            if let Some(panic) = call.panicked {
                std::panic::resume_unwind(panic);
            }
            match rc {
                HS_SUCCESS | HS_SCAN_TERMINATED => Ok(()),
                rc => Err(ScanError(rc)),
            }
        }
    }

    impl Drop for Scanner {
        fn drop(&mut self) {
            // SAFETY: the scratch is ours and no scan is running (`&mut self`).
            unsafe { hs_free_scratch(self.scratch.as_ptr()) };
        }
    }

    /// A scan's callback, and the panic it stopped on (a panic must not unwind through C).
    struct Call<F> {
        on_match: F,
        panicked: Option<Box<dyn std::any::Any + Send>>,
    }

    unsafe extern "C" fn on_event<F: FnMut(u32, usize) -> bool>(
        id: c_uint,
        _from: c_ulonglong,
        to: c_ulonglong,
        _flags: c_uint,
        ctx: *mut c_void,
    ) -> c_int {
        // SAFETY: `ctx` is the `Call<F>` that `Scanner::scan` passed to this very scan,
        // borrowed by nothing else while the library calls back.
        let call = unsafe { &mut *ctx.cast::<Call<F>>() };
        let on_match = &mut call.on_match;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| on_match(id, to as usize))) {
            Ok(true) => 0,
            Ok(false) => 1,
            Err(panic) => {
                call.panicked = Some(panic);
                1
            }
        }
    }
}

#[cfg(not(vectorscan))]
mod imp {
    //! A build without the library: nothing can be made.
    use std::sync::Arc;

    use super::{Literal, NOT_BUILT, ScanError};

    pub enum Never {}

    pub fn version() -> Option<String> {
        None
    }

    pub fn available() -> bool {
        false
    }

    pub struct Database(Never);

    impl Database {
        pub fn block(_: &[Literal<'_>]) -> Result<Database, String> {
            Err(NOT_BUILT.into())
        }

        pub fn bytes(&self) -> usize {
            match self.0 {}
        }
    }

    pub struct Scanner(Never);

    impl Scanner {
        pub fn new(db: Arc<super::Database>) -> Result<Scanner, String> {
            match db.imp.0 {}
        }

        pub fn scan<F: FnMut(u32, usize) -> bool>(&mut self, _: &[u8], _: F) -> Result<(), ScanError> {
            match self.0 {}
        }

        pub fn database(&self) -> &super::Database {
            match self.0 {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanner(literals: &[(&[u8], bool)]) -> Option<Scanner> {
        let literals: Vec<Literal> = literals
            .iter()
            .map(|&(bytes, caseless)| Literal { bytes, caseless })
            .collect();
        match Database::block(&literals) {
            Ok(db) => Some(Scanner::new(Arc::new(db)).unwrap()),
            Err(e) => {
                assert!(!available(), "{e}");
                eprintln!("SKIPPED: {e}");
                None
            }
        }
    }

    fn matches(s: &mut Scanner, data: &[u8]) -> Vec<(u32, usize)> {
        let mut out = Vec::new();
        s.scan(data, |id, end| {
            out.push((id, end));
            true
        })
        .unwrap();
        out.sort_unstable();
        out
    }

    #[test]
    fn every_match_is_reported_by_literal_and_end_overlaps_and_nul_bytes_included() {
        let Some(mut s) = scanner(&[(b"abc", false), (b"bcd", false), (b"\0x\0", false)]) else {
            return;
        };
        assert_eq!(
            matches(&mut s, b"abcd abc \0x\0"),
            vec![(0, 3), (0, 8), (1, 4), (2, 12)]
        );
        assert_eq!(matches(&mut s, b""), vec![]);
        assert_eq!(matches(&mut s, b"ABCD"), vec![]);
    }

    #[test]
    fn a_caseless_literal_matches_any_case_and_a_cased_one_only_its_own() {
        let Some(mut s) = scanner(&[(b"Host:", true), (b"GET", false)]) else {
            return;
        };
        assert_eq!(matches(&mut s, b"get / HOST: x"), vec![(0, 11)]);
        assert_eq!(matches(&mut s, b"GET / host: x"), vec![(0, 11), (1, 3)]);
    }

    #[test]
    fn a_callback_that_says_stop_stops_the_scan() {
        let Some(mut s) = scanner(&[(b"a", false)]) else {
            return;
        };
        let mut seen = 0;
        s.scan(b"aaaa", |_, _| {
            seen += 1;
            false
        })
        .unwrap();
        assert_eq!(seen, 1);
    }

    #[test]
    fn a_panicking_callback_panics_after_the_scan_and_the_scanner_still_works() {
        let Some(mut s) = scanner(&[(b"a", false)]) else {
            return;
        };
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = s.scan(b"aa", |_, _| panic!("from the callback"));
        }));
        assert!(caught.is_err());
        assert_eq!(matches(&mut s, b"aa"), vec![(0, 1), (0, 2)]);
    }

    #[test]
    fn an_empty_set_or_an_empty_literal_is_refused_naming_it() {
        assert!(Database::block(&[]).is_err());
        let e = Database::block(&[
            Literal {
                bytes: b"x",
                caseless: false,
            },
            Literal {
                bytes: b"",
                caseless: false,
            },
        ])
        .unwrap_err();
        assert!(e.contains("literal 1"), "{e}");
    }

    #[test]
    fn scanners_of_one_database_scan_on_their_own_threads() {
        let Ok(db) = Database::block(&[Literal {
            bytes: b"needle",
            caseless: false,
        }]) else {
            return;
        };
        let db = Arc::new(db);
        let found: usize = std::thread::scope(|t| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let mut s = Scanner::new(db.clone()).unwrap();
                    t.spawn(move || {
                        let mut n = 0;
                        s.scan(b"a needle, a needle", |_, _| {
                            n += 1;
                            true
                        })
                        .unwrap();
                        n
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(found, 4);
    }
}
