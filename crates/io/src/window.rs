//! What every receiving port does the same way about the measured window: from
//! `start_window` on, its packets carry `FLAG_WINDOW`, and with a count it stops after
//! that many more.

#![forbid(unsafe_code)]

use sfclab_core::packet::FLAG_WINDOW;

#[derive(Debug, Default)]
pub(crate) struct Window {
    /// The flags a packet taken in now carries.
    flags: u16,
    /// The port's packet count at which it stops.
    limit: Option<u64>,
}

impl Window {
    /// The window starts with the port at `packets`; `count` more at most, if given.
    pub fn start(&mut self, packets: u64, count: Option<u64>) {
        self.limit = count.map(|m| packets + m);
        self.flags = FLAG_WINDOW;
    }

    /// `room`, cut to what the window's count still allows with the port at `packets`.
    pub fn room(&self, room: usize, packets: u64) -> usize {
        self.limit
            .map_or(room, |l| room.min(l.saturating_sub(packets) as usize))
    }

    /// The window's count is reached with the port at `packets`.
    pub fn reached(&self, packets: u64) -> bool {
        self.limit.is_some_and(|l| packets >= l)
    }

    pub fn flags(&self) -> u16 {
        self.flags
    }
}
