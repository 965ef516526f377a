//! What the port tests on veth share: one at a time, a numbered frame, and a loop that
//! sends a counted stream through one port and receives it on another.

#![allow(dead_code)] // each test file uses its part

use sfclab_core::{Batch, PacketMeta, PacketPool, RxPort, TxPort};
use sfclab_topology::Interface;
use std::time::{Duration, Instant};

/// Each test busy-polls the cores: run them one at a time, or they starve each other
/// and frames wait past the tests' patience.
pub static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A UDP-in-IPv4 frame of `len` bytes whose payload carries `seq` at byte 42.
pub fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[42..46].copy_from_slice(&seq.to_be_bytes());
    f
}

/// Opens a port on `end` from a thread inside its namespace.
pub fn open<P: Send>(end: &Interface, open: impl FnOnce(&str) -> Result<P, String> + Send) -> P {
    let name = end.name().to_string();
    end.namespace()
        .run(move || open(&name))
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Sends `count` frames of `len` bytes from `tx` in batches of 32, never more than 512
/// ahead of what arrived (no ring overflows), and receives them on `rx`; the sequence
/// numbers received, in order. Every frame's headers must arrive unchanged.
pub fn send_and_receive<T: TxPort, R: RxPort>(tx: &mut T, rx: &mut R, count: u32, len: usize) -> Vec<u32> {
    let mut pool = PacketPool::new(1024);
    let (mut out, mut inb) = (Batch::new(32), Batch::new(256));
    let mut received = Vec::new();
    let mut next = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while (received.len() as u32) < count && Instant::now() < deadline {
        if next < count && next - (received.len() as u32) < 512 {
            let n = 32.min(count - next);
            pool.alloc_into(&mut out, n as usize);
            for (k, p) in out.iter_mut().enumerate() {
                p.meta = PacketMeta::fresh(0, 0, 0);
                p.reset(len).copy_from_slice(&frame(next + k as u32, len));
            }
            next += n;
            tx.tx(0, &mut out, &mut pool);
        }
        rx.rx(0, &mut pool, &mut inb);
        for p in inb.iter() {
            assert_eq!(p.len(), len);
            assert_eq!(&p.data()[..42], &frame(0, len)[..42], "headers arrive unchanged");
            received.push(u32::from_be_bytes(p.data()[42..46].try_into().unwrap()));
        }
        pool.free_batch(&mut inb);
        std::thread::yield_now();
    }
    received
}
