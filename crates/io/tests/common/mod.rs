//! What the memif port tests share: frames that say which they are, a send of them, and
//! a port's counter by name.

use sfclab_core::{Batch, PacketPool, RxPort, TxPort};
use sfclab_io::memif::MemifPort;

/// Frame `i`: its length varies (60 to 1514 B) and every byte says which frame it is.
pub fn frame(i: usize) -> Vec<u8> {
    let len = 60 + (i * 97) % 1455;
    (0..len).map(|k| (i * 31 + k) as u8).collect()
}

/// Sends `frames` in one batch of `pool`'s buffers; how many the port sent.
pub fn send(port: &mut MemifPort, pool: &mut PacketPool, frames: &[Vec<u8>]) -> u64 {
    let before = TxPort::stats(port).packets;
    let mut batch = Batch::new(frames.len());
    assert_eq!(pool.alloc_into(&mut batch, frames.len()), frames.len());
    for (k, f) in frames.iter().enumerate() {
        batch.get_mut(k).reset(f.len()).copy_from_slice(f);
    }
    port.tx(0, &mut batch, pool);
    TxPort::stats(port).packets - before
}

/// The port's receiving (`rx`) or sending counter `name`.
pub fn counter(port: &MemifPort, rx: bool, name: &str) -> u64 {
    let all = if rx {
        RxPort::counters(port)
    } else {
        TxPort::counters(port)
    };
    all.iter()
        .find(|c| c.name == name)
        .map_or_else(|| panic!("no counter {name}"), |c| c.value)
}
