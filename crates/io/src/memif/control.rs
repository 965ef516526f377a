//! The control channel: a `SOCK_SEQPACKET` Unix socket (a socket file: abstract sockets
//! are per network namespace, and memif peers sit in different ones) carrying one
//! [`Msg`] per packet, with at most one file descriptor passed alongside (`SCM_RIGHTS`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use nix::sys::socket::{
    AddressFamily, Backlog, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, UnixAddr, accept4, bind,
    connect, listen, recvmsg, sendmsg, socket,
};

use super::msg::{MSG_SIZE, Msg};

/// The server's listening socket on a socket file.
pub struct Listener {
    fd: OwnedFd,
}

impl Listener {
    /// Listens on `path`, which must not exist yet (a stale socket file from a killed run
    /// is the caller's to remove: it cannot tell a stale one from a live peer's).
    pub fn bind(path: &Path) -> io::Result<Listener> {
        let fd = seqpacket()?;
        let addr = UnixAddr::new(path).map_err(io::Error::from)?;
        bind(fd.as_raw_fd(), &addr).map_err(|e| named(path, e))?;
        listen(&fd, Backlog::new(8).map_err(io::Error::from)?).map_err(io::Error::from)?;
        Ok(Listener { fd })
    }

    /// Waits for the next client.
    pub fn accept(&self) -> io::Result<Channel> {
        let raw = accept4(self.fd.as_raw_fd(), SockFlag::SOCK_CLOEXEC).map_err(io::Error::from)?;
        // SAFETY: accept4 just returned this descriptor, open and owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Channel { fd })
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// One connection's control channel, either end.
pub struct Channel {
    fd: OwnedFd,
}

impl Channel {
    /// Connects to a server listening on `path`.
    pub fn connect(path: &Path) -> io::Result<Channel> {
        let fd = seqpacket()?;
        let addr = UnixAddr::new(path).map_err(io::Error::from)?;
        connect(fd.as_raw_fd(), &addr).map_err(|e| named(path, e))?;
        Ok(Channel { fd })
    }

    /// Both ends of a connected pair (tests, and a process talking to itself).
    pub fn pair() -> io::Result<(Channel, Channel)> {
        let (a, b) =
            nix::sys::socket::socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC)
                .map_err(io::Error::from)?;
        Ok((Channel { fd: a }, Channel { fd: b }))
    }

    /// Gives up a `recv` after `limit` (`None`: waits for ever): a handshake must not
    /// hang on a peer that stopped answering.
    pub fn set_timeout(&self, limit: Option<std::time::Duration>) -> io::Result<()> {
        use nix::sys::time::TimeVal;
        // A zero timeval means "for ever": a limit is at least one microsecond.
        let tv = limit.map_or(TimeVal::new(0, 0), |d| {
            TimeVal::new(
                d.as_secs() as libc::time_t,
                libc::suseconds_t::from(d.subsec_micros().max(1)),
            )
        });
        nix::sys::socket::setsockopt(&self.fd, nix::sys::socket::sockopt::ReceiveTimeout, &tv).map_err(io::Error::from)
    }

    /// Sends `msg`, with `fd` passed alongside when given.
    pub fn send(&self, msg: &Msg, fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
        let bytes = msg
            .encode()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let iov = [io::IoSlice::new(&bytes)];
        let fds: Vec<RawFd> = fd.iter().map(|f| f.as_raw_fd()).collect();
        let cmsgs: Vec<ControlMessage> = if fds.is_empty() {
            Vec::new()
        } else {
            vec![ControlMessage::ScmRights(&fds)]
        };
        let sent =
            sendmsg::<()>(self.fd.as_raw_fd(), &iov, &cmsgs, MsgFlags::MSG_NOSIGNAL, None).map_err(io::Error::from)?;
        if sent != MSG_SIZE {
            return Err(io::Error::other(format!(
                "memif control: sent {sent} of {MSG_SIZE} bytes"
            )));
        }
        Ok(())
    }

    /// Receives the next message and the descriptor passed with it, if any. A closed
    /// peer is `UnexpectedEof`; bytes that are not a message are `InvalidData`, naming
    /// why.
    pub fn recv(&self) -> io::Result<(Msg, Option<OwnedFd>)> {
        let mut bytes = [0u8; MSG_SIZE + 1];
        let mut iov = [io::IoSliceMut::new(&mut bytes)];
        let mut space = nix::cmsg_space!([RawFd; 4]);
        let r = recvmsg::<()>(
            self.fd.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        let mut passed: Vec<OwnedFd> = Vec::new();
        for c in r.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::ScmRights(fds) = c {
                // SAFETY: the kernel installed these descriptors in this process for
                // this message; nothing else holds them.
                passed.extend(fds.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
            }
        }
        let len = r.bytes;
        let truncated = r.flags.contains(MsgFlags::MSG_TRUNC) || r.flags.contains(MsgFlags::MSG_CTRUNC);
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "memif control: the peer closed the channel",
            ));
        }
        if truncated || len != MSG_SIZE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("memif control: a message of {len} bytes (or more); they are {MSG_SIZE}"),
            ));
        }
        let msg = Msg::decode(&bytes[..MSG_SIZE]).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        // More than one descriptor: the protocol passes one; the rest are closed here.
        Ok((msg, passed.into_iter().next()))
    }
}

impl AsFd for Channel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn seqpacket() -> io::Result<OwnedFd> {
    socket(AddressFamily::Unix, SockType::SeqPacket, SockFlag::SOCK_CLOEXEC, None).map_err(io::Error::from)
}

fn named(path: &Path, e: nix::Error) -> io::Error {
    io::Error::new(io::Error::from(e).kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};

    #[test]
    fn messages_and_a_descriptor_cross_the_channel() {
        let (server, client) = Channel::pair().unwrap();
        let hello = crate::memif::msg::tests::every_kind()[1].clone();
        server.send(&hello, None).unwrap();
        let (got, fd) = client.recv().unwrap();
        assert_eq!(got, hello);
        assert!(fd.is_none());

        // A region's memory travels as a descriptor: what one side writes through its
        // copy, the other reads through the one it received.
        let mut region = tempfile::tempfile().unwrap();
        region.write_all(b"shared").unwrap();
        let add = Msg::AddRegion { index: 0, size: 6 };
        client.send(&add, Some(region.as_fd())).unwrap();
        let (got, fd) = server.recv().unwrap();
        assert_eq!(got, add);
        let mut received = std::fs::File::from(fd.expect("the region's descriptor"));
        received.rewind().unwrap();
        let mut text = String::new();
        received.read_to_string(&mut text).unwrap();
        assert_eq!(text, "shared");
    }

    #[test]
    fn a_closed_peer_and_bad_bytes_are_errors_that_say_so() {
        let (a, b) = Channel::pair().unwrap();
        nix::sys::socket::send(a.fd.as_raw_fd(), &[1u8; 40], MsgFlags::empty()).unwrap();
        let e = b.recv().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("40 bytes"), "{e}");
        let mut unknown = [0u8; MSG_SIZE];
        unknown[0] = 42;
        nix::sys::socket::send(a.fd.as_raw_fd(), &unknown, MsgFlags::empty()).unwrap();
        assert!(b.recv().unwrap_err().to_string().contains("unknown type 42"));
        drop(a);
        assert_eq!(b.recv().unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_server_on_a_socket_file_accepts_a_client() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memif.sock");
        let listener = Listener::bind(&path).unwrap();
        let client = Channel::connect(&path).unwrap();
        let server = listener.accept().unwrap();
        client.send(&Msg::Connect { if_name: "hop1".into() }, None).unwrap();
        assert_eq!(server.recv().unwrap().0, Msg::Connect { if_name: "hop1".into() });
        let e = Listener::bind(&path).err().unwrap();
        assert!(e.to_string().starts_with(&path.display().to_string()), "{e}");
    }
}
