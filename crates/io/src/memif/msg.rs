//! The control channel's messages: 128 bytes each, a 16-bit type then the type's
//! packed fields (little-endian), as DPDK's `net_memif` and libmemif send them. Which
//! message carries a file descriptor (`SCM_RIGHTS`) is the socket's business: a region's
//! memfd comes with `AddRegion`, a ring's eventfd with `AddRing`.
//!
//! Directions: the client ("slave") owns the shared memory and sends `Init`,
//! `AddRegion`, `AddRing` and `Connect`; the server ("master") sends `Hello`,
//! `Connected` and an `Ack` for each of the client's; either may `Disconnect`.

use std::fmt;

/// Bytes of every control message.
pub const MSG_SIZE: usize = 128;
/// Bytes of the name fields (NUL-padded; at most 31 bytes of text, as `strlcpy` leaves).
pub const NAME_SIZE: usize = 32;
/// Bytes of `Init`'s secret field.
pub const SECRET_SIZE: usize = 24;
/// Bytes of `Disconnect`'s reason.
pub const REASON_SIZE: usize = 96;

/// What an interface carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Ethernet,
    Ip,
    PuntInject,
}

impl Mode {
    fn code(self) -> u8 {
        match self {
            Mode::Ethernet => 0,
            Mode::Ip => 1,
            Mode::PuntInject => 2,
        }
    }
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    Ack,
    /// Server to client, first: what the server supports.
    Hello {
        name: String,
        min_version: u16,
        max_version: u16,
        max_region: u16,
        /// Rings server to client (the client's receive rings).
        max_s2c_rings: u16,
        /// Rings client to server.
        max_c2s_rings: u16,
        max_log2_ring_size: u8,
    },
    /// Client to server: which interface (`id`) of the socket, in which mode.
    Init {
        version: u16,
        id: u32,
        mode: Mode,
        secret: String,
        name: String,
    },
    /// Client to server, with the region's memfd.
    AddRegion {
        index: u16,
        size: u64,
    },
    /// Client to server, with the ring's eventfd.
    AddRing {
        /// The ring carries frames client to server (else server to client).
        c2s: bool,
        index: u16,
        region: u16,
        /// Where the ring starts in its region.
        offset: u32,
        log2_ring_size: u8,
        private_hdr_size: u16,
    },
    /// Client to server: the regions and rings are all sent.
    Connect {
        if_name: String,
    },
    /// Server to client: the server maps them and forwards.
    Connected {
        if_name: String,
    },
    Disconnect {
        code: u32,
        reason: String,
    },
}

/// Why received bytes are not a control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MsgError {
    /// Not 128 bytes.
    Size(usize),
    /// A type this protocol version does not have (0 is `NONE`, never sent).
    Type(u16),
    /// `Init` with an interface mode the protocol does not define.
    Mode(u8),
    /// A text field longer than the message has room for (on sending).
    TooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
}

impl fmt::Display for MsgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MsgError::Size(n) => write!(f, "a memif control message is {MSG_SIZE} bytes, this one {n}"),
            MsgError::Type(t) => write!(f, "memif control message of unknown type {t}"),
            MsgError::Mode(m) => write!(
                f,
                "memif interface mode {m} is not ethernet (0), ip (1) or punt/inject (2)"
            ),
            MsgError::TooLong { field, len, max } => {
                write!(f, "memif {field} is {len} bytes; the message has room for {max}")
            }
        }
    }
}

impl std::error::Error for MsgError {}

impl Msg {
    fn code(&self) -> u16 {
        match self {
            Msg::Ack => 1,
            Msg::Hello { .. } => 2,
            Msg::Init { .. } => 3,
            Msg::AddRegion { .. } => 4,
            Msg::AddRing { .. } => 5,
            Msg::Connect { .. } => 6,
            Msg::Connected { .. } => 7,
            Msg::Disconnect { .. } => 8,
        }
    }

    /// The message's 128 bytes; text fields must leave room for their NUL.
    pub fn encode(&self) -> Result<[u8; MSG_SIZE], MsgError> {
        let mut b = [0u8; MSG_SIZE];
        let mut w = Writer { b: &mut b, at: 0 };
        w.u16(self.code());
        match self {
            Msg::Ack => {}
            Msg::Hello {
                name,
                min_version,
                max_version,
                max_region,
                max_s2c_rings,
                max_c2s_rings,
                max_log2_ring_size,
            } => {
                w.text("name", name, NAME_SIZE)?;
                w.u16(*min_version);
                w.u16(*max_version);
                w.u16(*max_region);
                w.u16(*max_s2c_rings);
                w.u16(*max_c2s_rings);
                w.u8(*max_log2_ring_size);
            }
            Msg::Init {
                version,
                id,
                mode,
                secret,
                name,
            } => {
                w.u16(*version);
                w.u32(*id);
                w.u8(mode.code());
                w.text("secret", secret, SECRET_SIZE)?;
                w.text("name", name, NAME_SIZE)?;
            }
            Msg::AddRegion { index, size } => {
                w.u16(*index);
                w.u64(*size);
            }
            Msg::AddRing {
                c2s,
                index,
                region,
                offset,
                log2_ring_size,
                private_hdr_size,
            } => {
                w.u16(u16::from(*c2s));
                w.u16(*index);
                w.u16(*region);
                w.u32(*offset);
                w.u8(*log2_ring_size);
                w.u16(*private_hdr_size);
            }
            Msg::Connect { if_name } | Msg::Connected { if_name } => w.text("interface name", if_name, NAME_SIZE)?,
            Msg::Disconnect { code, reason } => {
                w.u32(*code);
                w.text("disconnect reason", reason, REASON_SIZE)?;
            }
        }
        Ok(b)
    }

    /// The message in `bytes` (exactly 128). Text fields end at their first NUL (or
    /// fill the field); bytes that are not UTF-8 are replaced, never refused.
    pub fn decode(bytes: &[u8]) -> Result<Msg, MsgError> {
        let b: &[u8; MSG_SIZE] = bytes.try_into().map_err(|_| MsgError::Size(bytes.len()))?;
        let mut r = Reader { b, at: 0 };
        Ok(match r.u16() {
            1 => Msg::Ack,
            2 => Msg::Hello {
                name: r.text(NAME_SIZE),
                min_version: r.u16(),
                max_version: r.u16(),
                max_region: r.u16(),
                max_s2c_rings: r.u16(),
                max_c2s_rings: r.u16(),
                max_log2_ring_size: r.u8(),
            },
            3 => Msg::Init {
                version: r.u16(),
                id: r.u32(),
                mode: match r.u8() {
                    0 => Mode::Ethernet,
                    1 => Mode::Ip,
                    2 => Mode::PuntInject,
                    m => return Err(MsgError::Mode(m)),
                },
                secret: r.text(SECRET_SIZE),
                name: r.text(NAME_SIZE),
            },
            4 => Msg::AddRegion {
                index: r.u16(),
                size: r.u64(),
            },
            5 => Msg::AddRing {
                c2s: r.u16() & 1 != 0,
                index: r.u16(),
                region: r.u16(),
                offset: r.u32(),
                log2_ring_size: r.u8(),
                private_hdr_size: r.u16(),
            },
            6 => Msg::Connect {
                if_name: r.text(NAME_SIZE),
            },
            7 => Msg::Connected {
                if_name: r.text(NAME_SIZE),
            },
            8 => Msg::Disconnect {
                code: r.u32(),
                reason: r.text(REASON_SIZE),
            },
            t => return Err(MsgError::Type(t)),
        })
    }
}

/// Packs fields in order; every message fits its 128 bytes by construction.
struct Writer<'a> {
    b: &'a mut [u8; MSG_SIZE],
    at: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, v: &[u8]) {
        self.b[self.at..self.at + v.len()].copy_from_slice(v);
        self.at += v.len();
    }

    fn u8(&mut self, v: u8) {
        self.bytes(&[v]);
    }

    fn u16(&mut self, v: u16) {
        self.bytes(&v.to_le_bytes());
    }

    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// A NUL-padded field of `size` bytes; the text must leave room for the NUL.
    fn text(&mut self, field: &'static str, v: &str, size: usize) -> Result<(), MsgError> {
        if v.len() >= size {
            return Err(MsgError::TooLong {
                field,
                len: v.len(),
                max: size - 1,
            });
        }
        self.b[self.at..self.at + v.len()].copy_from_slice(v.as_bytes());
        self.at += size;
        Ok(())
    }
}

/// Unpacks fields in order.
struct Reader<'a> {
    b: &'a [u8; MSG_SIZE],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let v: [u8; N] = self.b[self.at..self.at + N].try_into().expect("N bytes");
        self.at += N;
        v
    }

    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }

    fn text(&mut self, size: usize) -> String {
        let field = &self.b[self.at..self.at + size];
        self.at += size;
        let end = field.iter().position(|&c| c == 0).unwrap_or(size);
        String::from_utf8_lossy(&field[..end]).into_owned()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One message of every type, as a peer might send it.
    pub(crate) fn every_kind() -> Vec<Msg> {
        vec![
            Msg::Ack,
            Msg::Hello {
                name: "DPDK 22.11.4".into(),
                min_version: 0x0200,
                max_version: 0x0200,
                max_region: 255,
                max_s2c_rings: 255,
                max_c2s_rings: 255,
                max_log2_ring_size: 14,
            },
            Msg::Init {
                version: 0x0200,
                id: 7,
                mode: Mode::Ethernet,
                secret: "s3cret".into(),
                name: "sfclab".into(),
            },
            Msg::AddRegion {
                index: 1,
                size: 8 << 20,
            },
            Msg::AddRing {
                c2s: true,
                index: 3,
                region: 0,
                offset: 0x4080,
                log2_ring_size: 10,
                private_hdr_size: 0,
            },
            Msg::Connect { if_name: "hop1".into() },
            Msg::Connected {
                if_name: "memif0".into(),
            },
            Msg::Disconnect {
                code: 1,
                reason: "peer stopped".into(),
            },
        ]
    }

    #[test]
    fn every_message_survives_its_bytes() {
        for m in every_kind() {
            assert_eq!(Msg::decode(&m.encode().unwrap()).unwrap(), m);
        }
    }

    #[test]
    fn fields_sit_where_memif_h_packs_them() {
        // memif_msg_t: u16 type, then the packed union at offset 2.
        let hello = every_kind()[1].encode().unwrap();
        assert_eq!(&hello[..2], &[2, 0]);
        assert_eq!(&hello[2..14], b"DPDK 22.11.4");
        assert_eq!(hello[34..44], [0, 2, 0, 2, 255, 0, 255, 0, 255, 0]);
        assert_eq!(hello[44], 14);
        let init = every_kind()[2].encode().unwrap();
        // version u16 @2, id u32 @4, mode u8 @8, secret[24] @9, name[32] @33.
        assert_eq!(&init[2..9], &[0, 2, 7, 0, 0, 0, 0]);
        assert_eq!(&init[9..15], b"s3cret");
        assert_eq!(&init[33..39], b"sfclab");
        let region = every_kind()[3].encode().unwrap();
        assert_eq!(&region[2..12], &[1, 0, 0, 0, 0x80, 0, 0, 0, 0, 0]);
        let ring = every_kind()[4].encode().unwrap();
        // flags u16 @2, index u16 @4, region u16 @6, offset u32 @8, log2 u8 @12,
        // private_hdr_size u16 @13.
        assert_eq!(&ring[2..15], &[1, 0, 3, 0, 0, 0, 0x80, 0x40, 0, 0, 10, 0, 0]);
        let bye = every_kind()[7].encode().unwrap();
        assert_eq!(&bye[2..6], &[1, 0, 0, 0]);
        assert_eq!(&bye[6..18], b"peer stopped");
    }

    #[test]
    fn bad_bytes_are_named_not_taken() {
        assert_eq!(Msg::decode(&[0u8; 64]), Err(MsgError::Size(64)));
        assert_eq!(Msg::decode(&[0u8; MSG_SIZE]), Err(MsgError::Type(0)));
        let mut b = [0u8; MSG_SIZE];
        b[0] = 9;
        assert_eq!(Msg::decode(&b), Err(MsgError::Type(9)));
        let mut init = every_kind()[2].encode().unwrap();
        init[8] = 3;
        assert_eq!(Msg::decode(&init), Err(MsgError::Mode(3)));
        let long = Msg::Connect {
            if_name: "x".repeat(NAME_SIZE),
        };
        let e = long.encode().unwrap_err();
        assert_eq!(
            e.to_string(),
            "memif interface name is 32 bytes; the message has room for 31"
        );
    }

    #[test]
    fn a_full_name_field_without_its_nul_is_read_whole() {
        let mut b = Msg::Connected { if_name: String::new() }.encode().unwrap();
        b[2..34].fill(b'a');
        assert_eq!(
            Msg::decode(&b).unwrap(),
            Msg::Connected {
                if_name: "a".repeat(32)
            }
        );
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_are_refused_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(m) = Msg::decode(&bytes) {
                // What decodes re-encodes to a message that decodes the same.
                if let Ok(again) = m.encode() {
                    prop_assert_eq!(Msg::decode(&again).unwrap(), m);
                }
            }
        }
    }
}
