//! The BPF an AF_XDP port needs, loaded through the `bpf()` system call with no C
//! toolchain: an XSKMAP (queue index -> AF_XDP socket), a five-instruction XDP program
//! that redirects every frame of a queue to that queue's socket (or passes it to the
//! kernel when the queue has none), a one-instruction program that passes everything
//! (for a veth's peer), and the attachment as a BPF link.
//!
//! A link is detached by the kernel when its last file descriptor closes, so a killed
//! sfclab leaves no XDP program behind on any interface: nothing to clean up.
//!
//! The program, as `bpftool prog dump xlated` shows it:
//! ```text
//! r2 = *(u32 *)(r1 + 16)        ; ctx->rx_queue_index
//! r1 = map[xskmap]
//! r3 = 2                        ; XDP_PASS when the map has no socket for the queue
//! call bpf_redirect_map
//! exit
//! ```

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// Where the kernel runs an XDP program on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// In the driver, before an skb exists (`xdpdrv`): the fast path.
    Native,
    /// After the kernel built an skb (`xdpgeneric`): works on every interface, slower.
    Generic,
}

impl XdpMode {
    fn flag(self) -> u32 {
        match self {
            XdpMode::Native => XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => XDP_FLAGS_SKB_MODE,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

impl std::str::FromStr for XdpMode {
    type Err = String;
    fn from_str(s: &str) -> Result<XdpMode, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "native" | "drv" => Ok(XdpMode::Native),
            "generic" | "skb" => Ok(XdpMode::Generic),
            _ => Err(format!("`{s}` is not an XDP mode: write native or generic")),
        }
    }
}

impl std::fmt::Display for XdpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `struct bpf_insn`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    /// dst_reg in the low nibble, src_reg in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

/// The prefix of `union bpf_attr` for BPF_MAP_CREATE (the kernel zero-fills the rest).
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapUpdateAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// Calls `bpf(cmd, attr)` for a command that returns a new file descriptor.
///
/// # Safety
/// As [`bpf`]; and `cmd` is one that, on success, returns a new file descriptor that
/// nothing else owns (`BPF_MAP_CREATE`, `BPF_PROG_LOAD`, `BPF_LINK_CREATE`).
unsafe fn bpf_fd<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: the caller's contract is `bpf`'s.
    let ret = unsafe { bpf(cmd, attr) }?;
    // SAFETY: the caller promises `cmd` returns a new file descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// Calls `bpf(cmd, attr)`.
///
/// # Safety
/// `T` is the `#[repr(C)]` prefix of `union bpf_attr` that `cmd` reads (and may write),
/// fully initialised, and every address inside it points to memory of the size the
/// command reads or writes there, live for the call.
unsafe fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised `size_of::<T>()` bytes, and what it points to
    // is valid (the caller's contract); the kernel reads (and for some commands writes)
    // only that many bytes.
    let ret = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>() as u32) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (o, b) in out.iter_mut().zip(name.bytes().take(15)) {
        *o = b;
    }
    out
}

/// An XSKMAP: the queue index of a received frame -> the AF_XDP socket that takes it.
pub struct XskMap {
    fd: OwnedFd,
    entries: u32,
}

impl XskMap {
    pub fn create(entries: u32) -> io::Result<XskMap> {
        let mut attr = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: entries,
            map_name: name16("sfclab_xsks"),
            ..Default::default()
        };
        // SAFETY: `MapCreateAttr` is BPF_MAP_CREATE's prefix of `bpf_attr`, initialised,
        // with no address in it; the command returns a new file descriptor.
        let fd = unsafe { bpf_fd(BPF_MAP_CREATE, &mut attr) }.map_err(|e| explain(e, "creating an XSKMAP"))?;
        Ok(XskMap { fd, entries })
    }

    /// Frames of `queue` go to the AF_XDP socket `socket` from now on.
    pub fn insert(&self, queue: u32, socket: RawFd) -> io::Result<()> {
        if queue >= self.entries {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("queue {queue} beyond the map's {}", self.entries),
            ));
        }
        let (key, value) = (queue, socket as u32);
        let mut attr = MapUpdateAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            ..Default::default()
        };
        // SAFETY: `MapUpdateAttr` is BPF_MAP_UPDATE_ELEM's prefix, initialised; its key and
        // value point to the two `u32`s above (the map's key and value size), live for the call.
        unsafe { bpf(BPF_MAP_UPDATE_ELEM, &mut attr) }
            .map(drop)
            .map_err(|e| explain(e, "adding the socket to the XSKMAP"))
    }
}

/// A loaded XDP program.
pub struct XdpProgram {
    fd: OwnedFd,
}

impl XdpProgram {
    /// Redirects each frame to the socket `map` holds for its receive queue; passes it to
    /// the kernel's stack when there is none.
    pub fn redirect_to(map: &XskMap) -> io::Result<XdpProgram> {
        let map_fd = map.fd.as_raw_fd();
        let code = [
            insn(0x61, 2, 1, 16, 0),                     // r2 = *(u32 *)(r1 + 16)
            insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd), // r1 = map (ld_imm64, two slots)
            insn(0, 0, 0, 0, 0),
            insn(0xb7, 3, 0, 0, XDP_PASS),              // r3 = XDP_PASS
            insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP), // call bpf_redirect_map
            insn(0x95, 0, 0, 0, 0),                     // exit
        ];
        XdpProgram::load(&code, "sfclab_redirect")
    }

    /// Passes every frame on: what a veth's peer needs so that frames redirected into
    /// the pair in native mode are not dropped.
    pub fn pass() -> io::Result<XdpProgram> {
        XdpProgram::load(&[insn(0xb7, 0, 0, 0, XDP_PASS), insn(0x95, 0, 0, 0, 0)], "sfclab_pass")
    }

    fn load(code: &[Insn], name: &str) -> io::Result<XdpProgram> {
        let license = CString::new("Dual MIT/GPL").expect("no NUL in a literal");
        let mut log = vec![0u8; 4096];
        let mut attr = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: code.len() as u32,
            insns: code.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: 1,
            log_size: log.len() as u32,
            log_buf: log.as_mut_ptr() as u64,
            prog_name: name16(name),
            expected_attach_type: BPF_XDP,
            ..Default::default()
        };
        // SAFETY: `ProgLoadAttr` is BPF_PROG_LOAD's prefix, initialised; `insns` points to
        // `insn_cnt` instructions of `code`, `license` to a NUL-terminated string and
        // `log_buf` to `log_size` writable bytes, all live for the call; it returns a new fd.
        match unsafe { bpf_fd(BPF_PROG_LOAD, &mut attr) } {
            Ok(fd) => Ok(XdpProgram { fd }),
            Err(e) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let verifier = String::from_utf8_lossy(&log[..end]).trim().to_string();
                let e = explain(e, &format!("loading the XDP program {name}"));
                Err(io::Error::new(e.kind(), format!("{e}; verifier: {verifier}")))
            }
        }
    }

    /// Attaches the program to interface `ifindex` of the calling thread's namespace.
    /// The program stays attached as long as the returned link lives.
    pub fn attach(&self, ifindex: u32, mode: XdpMode) -> io::Result<XdpLink> {
        let mut attr = LinkCreateAttr {
            prog_fd: self.fd.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags: mode.flag(),
        };
        // SAFETY: `LinkCreateAttr` is BPF_LINK_CREATE's prefix, initialised, with no
        // address in it; the command returns a new file descriptor.
        match unsafe { bpf_fd(BPF_LINK_CREATE, &mut attr) } {
            Ok(fd) => Ok(XdpLink { _fd: fd, mode }),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(io::Error::new(
                e.kind(),
                format!(
                    "interface {ifindex} already has an XDP program (`ip link set dev IF xdp off` removes one not held by a link)"
                ),
            )),
            Err(e) => Err(explain(e, &format!("attaching XDP in {} mode", mode.name()))),
        }
    }
}

/// An XDP program attached to an interface; detached when dropped (or when the process
/// dies: the kernel holds it by this file descriptor only).
pub struct XdpLink {
    _fd: OwnedFd,
    mode: XdpMode,
}

impl XdpLink {
    pub fn mode(&self) -> XdpMode {
        self.mode
    }
}

/// Says which capability is missing when the kernel refuses.
fn explain(e: io::Error, what: &str) -> io::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => "; needs root or CAP_BPF and CAP_NET_ADMIN",
        Some(libc::ENOSYS) => "; this kernel has no bpf() system call",
        _ => "",
    };
    io::Error::new(e.kind(), format!("{what}: {e}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_are_encoded_as_the_kernel_reads_them() {
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        let i = insn(0x61, 2, 1, 16, 0);
        assert_eq!((i.code, i.regs, i.off, i.imm), (0x61, 0x12, 16, 0));
        let ld = insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, 7);
        assert_eq!(ld.regs, 0x11);
        assert_eq!(name16("a_name_longer_than_sixteen")[15], 0);
    }
}
